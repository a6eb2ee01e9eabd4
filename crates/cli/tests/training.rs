use crate::util::{fails, json, ok, trackgnn};

#[test]
fn train_and_eval_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(trackgnn(d, &["simulate", "--events", "10", "--pileup", "8", "--seed", "6", "--out", "ev"]));
    ok(trackgnn(d, &["build-graphs", "--input", "ev", "--out", "g", "--pt-min", "1"]));
    let args =
        ["train", "--graphs", "g", "--out", "run", "--epochs", "2", "--hidden", "16", "--iterations", "2", "--json"];
    let out = json(&ok(trackgnn(d, &args)));
    assert_eq!(out["outcome"]["epochs_completed"], 2);
    // The run directory records the recipe, the config and the split.
    for f in ["recipe.toml", "config.toml", "events.json", "metrics.csv", "metrics.jsonl", "steps.jsonl"] {
        assert!(d.join("run").join(f).exists(), "{f}");
    }
    let e = json(&ok(trackgnn(d, &["eval", "--run", "run", "--graphs", "g", "--all", "--json"])));
    assert_eq!(e["events"], 10);
    for k in ["efficiency", "target_purity", "total_purity", "purity", "auc", "loss"] {
        let v = e[k].as_f64().unwrap();
        assert!(v.is_finite() && v >= 0.0, "{k} = {v}");
    }
    // Training again into the same directory without --resume is refused.
    let err = fails(trackgnn(d, &args[..args.len() - 1]));
    assert!(err.contains("--resume"), "{err}");
}

#[cfg(not(feature = "mpi"))]
#[test]
fn a_build_without_mpi_refuses_to_run_as_one_of_several_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_trackgnn"))
        .args(["train", "--graphs", "g", "--out", "run"])
        .current_dir(dir.path())
        .env("OMPI_COMM_WORLD_SIZE", "4")
        .output()
        .unwrap();
    let err = fails(out);
    assert!(err.contains("built without MPI") && err.contains("OMPI_COMM_WORLD_SIZE=4"), "{err}");
}
