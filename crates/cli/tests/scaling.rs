//! `trackgnn scaling` and `bench allreduce`: argument errors name what is wrong and how to fix
//! it; a tiny measure-mode study end to end (its times are not checked, only that they are
//! measured and reported).

use trackgnn_plot::testing::{check_files, no_temporaries};

use crate::util::{fails, json, ok, trackgnn};

#[test]
fn scaling_argument_errors_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let e = fails(trackgnn(d, &["scaling", "--simulate"]));
    assert!(e.contains("--simulate needs --from"), "{e}");
    let e = fails(trackgnn(d, &["scaling", "--graphs", "g", "--out", "o", "--ranks", "2,4"]));
    assert!(e.contains("must include 1"), "{e}");
    let e = fails(trackgnn(d, &["scaling", "--out", "o"]));
    assert!(e.contains("--graphs DIR is needed to measure"), "{e}");
    let e = fails(trackgnn(d, &["scaling", "--simulate", "--from", "missing-run"]));
    assert!(e.contains("missing-run"), "{e}");
}

#[cfg(not(feature = "mpi"))]
#[test]
fn without_mpi_more_ranks_and_the_allreduce_bench_say_how_to_build() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let e = fails(trackgnn(d, &["scaling", "--graphs", "g", "--out", "o", "--ranks", "1,2"]));
    assert!(e.contains("--features mpi") && e.contains("--ranks 1"), "{e}");
    let e = fails(trackgnn(d, &["bench", "allreduce"]));
    assert!(e.contains("--features mpi") && e.contains("mpirun -np 2"), "{e}");
}

#[test]
fn a_tiny_measured_study_writes_its_table_json_and_plot_and_reuses_finished_runs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(trackgnn(d, &["simulate", "--events", "6", "--pileup", "5", "--seed", "4", "--out", "ev"]));
    ok(trackgnn(d, &["build-graphs", "--input", "ev", "--out", "g", "--pt-min", "1"]));
    let args = [
        "scaling",
        "--graphs",
        "g",
        "--out",
        "s",
        "--ranks",
        "1",
        "--epochs",
        "2",
        "--repeats",
        "1",
        "--json",
        "--",
        "--hidden",
        "8",
        "--iterations",
        "1",
    ];
    let out = json(&ok(trackgnn(d, &args)));
    // stdout and scaling.json are the same object.
    let file = json(&std::fs::read_to_string(d.join("s/scaling.json")).unwrap());
    assert_eq!(out, file);
    assert_eq!(
        (out["ranks"].clone(), out["epochs"].clone(), out["mpi"].clone()),
        (serde_json::json!([1]), 2.into(), false.into())
    );
    assert_eq!(out["graphs_per_rank"], 6, "{out}");
    for regime in ["strong", "weak"] {
        let rows = out[regime].as_array().unwrap();
        assert_eq!(rows.len(), 1, "{regime}: {out}");
        let r = &rows[0];
        assert_eq!(
            (r["ranks"].as_u64(), r["speedup"].as_f64(), r["scaling_efficiency"].as_f64()),
            (Some(1), Some(1.0), Some(1.0)),
            "{regime}"
        );
        assert!(r["train_epoch_seconds"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["peak_rss_bytes"].as_u64().unwrap() > 0, "{r}");
        assert_eq!(r["timed_epochs"], 1, "the first of two epochs is not timed: {r}");
        assert!((0.0..=1.0).contains(&r["auc"].as_f64().unwrap()), "{r}");
    }
    // The run trained with the arguments after `--`.
    let run = std::path::PathBuf::from(out["baseline_run"].as_str().unwrap());
    let config = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(config.contains("hidden = 8") && config.contains("iterations = 1"), "{config}");
    assert_eq!(std::fs::read_to_string(run.join("metrics.jsonl")).unwrap().lines().count(), 2);
    check_files(&d.join("s/speedup"));
    no_temporaries(&d.join("s"));

    // The same study again reuses the finished run instead of training it again.
    let before = std::fs::read(run.join("metrics.jsonl")).unwrap();
    let again = trackgnn(d, &args);
    let stderr = String::from_utf8_lossy(&again.stderr).into_owned();
    let again = json(&ok(again));
    assert_eq!(again["strong"][0]["run"], out["strong"][0]["run"]);
    assert_eq!(std::fs::read(run.join("metrics.jsonl")).unwrap(), before);
    assert!(stderr.contains("reused"), "{stderr}");
}
