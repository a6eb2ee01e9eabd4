//! `train-embedding`, `train-filter` and `build-graphs --method metric-learning / hybrid`, end
//! to end on a few small generated events.

use crate::util::{fails, json, ok, trackgnn};

#[test]
fn embedding_filter_and_metric_learning_graphs_end_to_end() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    ok(trackgnn(d, &["simulate", "--events", "4", "--pileup", "5", "--seed", "7", "--out", "ev"]));
    std::fs::write(
        d.join("emb.toml"),
        "margin = 0.2\nk_max = 8\npairs_per_step = 2000\n[net]\nhidden = 16\nhidden_layers = 2\nout = 6\n[training]\nepochs = 2\nsteps_per_event = 2\n",
    )
    .unwrap();
    let emb = json(&ok(trackgnn(
        d,
        &["train-embedding", "--input", "ev", "--out", "emb", "--config", "emb.toml", "--val-events", "1", "--json"],
    )));
    assert_eq!((emb["train_events"].as_u64(), emb["val_events"].as_u64()), (Some(3), Some(1)));
    assert_eq!(emb["epochs"].as_array().unwrap().len(), 2);
    let eff = emb["best"]["efficiency"].as_f64().unwrap();
    assert!(eff > 0.2 && eff <= 1.0, "{emb}");
    for f in [
        "config.toml",
        "metrics.jsonl",
        "metrics.csv",
        "best.safetensors",
        "checkpoint/model.safetensors",
        "plots/loss.png",
        "plots/graph.png",
    ] {
        assert!(d.join("emb").join(f).is_file(), "emb/{f}");
    }
    // A second run into the same directory is refused; resume continues to more epochs.
    let err = fails(trackgnn(d, &["train-embedding", "--input", "ev", "--out", "emb", "--config", "emb.toml"]));
    assert!(err.contains("--resume"), "{err}");
    let resume = [
        "train-embedding",
        "--input",
        "ev",
        "--out",
        "emb",
        "--config",
        "emb.toml",
        "--val-events",
        "1",
        "--epochs",
        "3",
        "--resume",
        "--json",
    ];
    let resumed = json(&ok(trackgnn(d, &resume)));
    let epochs: Vec<u64> = resumed["epochs"].as_array().unwrap().iter().map(|r| r["epoch"].as_u64().unwrap()).collect();
    assert_eq!(epochs, [0, 1, 2]);
    // The best epoch is the one of the highest efficiency at the k_max-neighbour budget.
    let records = resumed["epochs"].as_array().unwrap();
    let at_budget = |r: &serde_json::Value| r["efficiency_at_budget"].as_f64().unwrap();
    let top = records.iter().map(at_budget).fold(f64::MIN, f64::max);
    assert!(top > 0.2 && top <= 1.0, "{resumed}");
    assert_eq!(at_budget(&resumed["best"]), top, "{resumed}");
    assert!(resumed["best"]["edges_per_event_at_budget"].as_f64().unwrap() > 0.0);
    // Beside it, the wide budget (48 neighbours by default): a superset of the k_max graph.
    for r in records {
        assert_eq!(r["wide_k_max"].as_u64(), Some(48), "{r}");
        let wide = r["efficiency_wide"].as_f64().unwrap();
        assert!(wide >= at_budget(r) && wide <= 1.0, "{r}");
        assert!(r["edges_per_event_wide"].as_f64().unwrap() > r["edges_per_event_at_budget"].as_f64().unwrap());
        assert!(r["purity_wide"].as_f64().unwrap() > 0.0 && r["efficiency_prompt_wide"].as_f64().is_some(), "{r}");
    }
    let csv = std::fs::read_to_string(d.join("emb/metrics.csv")).unwrap();
    assert!(csv.lines().next().unwrap().contains(",wide_k_max,efficiency_wide,"), "{csv}");
    // Resumed once more when all its epochs are done, the run reports them without reading an
    // event: the truth files are hidden, and the report is the same.
    let truth: Vec<_> = std::fs::read_dir(d.join("ev"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with("-truth.csv"))
        .collect();
    assert_eq!(truth.len(), 4);
    for h in &truth {
        std::fs::rename(h, h.with_extension("hidden")).unwrap();
    }
    let again = json(&ok(trackgnn(d, &resume)));
    for h in &truth {
        std::fs::rename(h.with_extension("hidden"), h).unwrap();
    }
    assert_eq!(again["epochs"], resumed["epochs"]);
    assert_eq!(again["best"], resumed["best"]);
    assert_eq!((again["train_events"].as_u64(), again["val_events"].as_u64()), (Some(3), Some(1)));

    std::fs::write(
        d.join("filt.toml"),
        "edges_per_step = 5000\ncut = 0.05\ndifference_scale = 10.0\n[net]\nhidden = 16\nhidden_layers = 1\nout = 1\n[training]\nepochs = 1\n",
    )
    .unwrap();
    ok(trackgnn(
        d,
        &[
            "train-filter",
            "--input",
            "ev",
            "--embedding",
            "emb",
            "--out",
            "filt",
            "--config",
            "filt.toml",
            "--val-events",
            "1",
        ],
    ));

    let build = |args: &[&str]| {
        let mut all = vec!["build-graphs", "--input", "ev", "--json"];
        all.extend_from_slice(args);
        json(&ok(trackgnn(d, &all)))
    };
    let ml = build(&["--out", "g-ml", "--method", "metric-learning", "--embedding", "emb", "--k-max", "6"]);
    let mlf = build(&[
        "--out",
        "g-mlf",
        "--method",
        "metric-learning",
        "--embedding",
        "emb",
        "--filter",
        "filt",
        "--k-max",
        "6",
    ]);
    let recipe = std::fs::read_to_string(d.join("g-mlf/recipe.toml")).unwrap();
    assert!(
        recipe.contains("[metric_learning]") && recipe.contains("k_max = 6") && recipe.contains("filter_cut = 0.05"),
        "{recipe}"
    );
    let edges = |v: &serde_json::Value| v["summary"]["edges_per_event"].as_f64().unwrap();
    assert!(edges(&mlf) <= edges(&ml) && edges(&ml) > 0.0);
    ok(trackgnn(d, &["module-map", "build", "--input", "ev", "--out", "map.bin"]));
    let mm = build(&["--out", "g-mm", "--method", "module-map", "--map", "map.bin"]);
    let hy = build(&[
        "--out",
        "g-hy",
        "--method",
        "hybrid",
        "--map",
        "map.bin",
        "--embedding",
        "emb",
        "--k-max",
        "6",
        "--compare",
        "g-mm",
        "--compare",
        "g-ml",
    ]);
    let eff = |v: &serde_json::Value| v["summary"]["efficiency_total"].as_f64().unwrap();
    assert!(edges(&hy) >= edges(&mm) && edges(&hy) >= edges(&ml), "the hybrid is the union");
    assert!(eff(&hy) >= eff(&mm) && eff(&hy) >= eff(&ml));
    let methods: Vec<&str> = hy["compare"].as_array().unwrap().iter().map(|m| m["method"].as_str().unwrap()).collect();
    assert_eq!(methods, ["module-map", "metric-learning", "hybrid"]);
    let text = ok(trackgnn(d, &["build-graphs", "--input", "ev", "--out", "g-geo", "--compare", "g-hy"]));
    assert!(text.contains("eff second") && text.contains("hybrid") && text.contains("geometric"), "{text}");
    let err = fails(trackgnn(d, &["build-graphs", "--input", "ev", "--out", "x", "--method", "metric-learning"]));
    assert!(err.contains("--embedding RUN"), "{err}");
}

/// An embedding on the unit sphere with the distance hinge (the whole-event recipe's
/// settings): `build-graphs` embeds the hits as training validated them, so the graph of the
/// validation event is the one its record measured.
#[test]
fn a_unit_sphere_embedding_builds_the_graph_its_validation_measured() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    ok(trackgnn(d, &["simulate", "--events", "3", "--pileup", "5", "--seed", "7", "--out", "ev"]));
    std::fs::write(
        d.join("emb.toml"),
        "margin = 0.1\nhinge = \"distance\"\nnormalize = true\npos_weight = 2.0\nk_max = 8\npairs_per_step = 2000\n\
         [net]\nhidden = 16\nhidden_layers = 2\nout = 12\n[training]\nepochs = 2\nsteps_per_event = 2\nlr_decay = 0.5\n",
    )
    .unwrap();
    let emb = json(&ok(trackgnn(
        d,
        &["train-embedding", "--input", "ev", "--out", "emb", "--config", "emb.toml", "--val-events", "1", "--json"],
    )));
    let config = std::fs::read_to_string(d.join("emb/config.toml")).unwrap();
    assert!(config.contains("hinge = \"distance\"") && config.contains("lr_decay = 0.5"), "{config}");
    let best = &emb["best"];
    let g = json(&ok(trackgnn(
        d,
        &["build-graphs", "--input", "ev", "--out", "g", "--method", "metric-learning", "--embedding", "emb", "--json"],
    )));
    let last = g["per_event"].as_array().unwrap().iter().find(|e| e["event_id"].as_u64() == Some(3)).unwrap();
    assert_eq!(last["edges"].as_f64(), best["edges_per_event"].as_f64(), "{last} {best}");
    let (built, validated) = (last["efficiency"].as_f64().unwrap(), best["efficiency"].as_f64().unwrap());
    assert!((built - validated).abs() < 1e-12 && validated > 0.0, "{built} {validated}");
}
