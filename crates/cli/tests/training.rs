use crate::util::{check_parameters, fails, json, ok, trackgnn};

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
    // The validation events alone, at a stricter threshold: fewer edges pass, so efficiency
    // cannot rise; the loss does not depend on the threshold.
    let split: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("run/events.json")).unwrap()).unwrap();
    let val = |t: &str| {
        json(&ok(trackgnn(d, &["eval", "--run", "run", "--graphs", "g", "--split", "val", "--threshold", t, "--json"])))
    };
    let (loose, strict) = (val("0.3"), val("0.9"));
    assert_eq!(loose["events"], split["val"].as_array().unwrap().len());
    assert_eq!(strict["threshold"], 0.9);
    assert!(strict["efficiency"].as_f64() <= loose["efficiency"].as_f64(), "{loose} {strict}");
    assert_eq!(strict["loss"], loose["loss"]);
    let err = fails(trackgnn(d, &["eval", "--run", "run", "--graphs", "g", "--threshold", "1.5"]));
    assert!(err.contains("--threshold 1.5"), "{err}");
    // Fine-tuning from the run's best weights with another loss weighting, secondaries weighed
    // 3 times (the graphs carry their production vertices).
    let tuned = json(&ok(trackgnn(
        d,
        &["train", "--graphs", "g", "--out", "tuned", "--epochs", "1", "--hidden", "16", "--iterations", "2"]
            .into_iter()
            .chain(["--init-weights", "run", "--pos-weight", "2", "--secondary-weight", "3", "--json"])
            .collect::<Vec<_>>(),
    )));
    assert_eq!(tuned["outcome"]["epochs_completed"], 1);
    let cfg = std::fs::read_to_string(d.join("tuned/config.toml")).unwrap();
    assert!(cfg.contains("init_weights") && cfg.contains("best.safetensors"), "{cfg}");
    assert!(cfg.contains("secondary_weight = 3.0"), "{cfg}");
    let err = fails(trackgnn(d, &["train", "--graphs", "g", "--out", "t0", "--secondary-weight", "0"]));
    assert!(err.contains("invalid config: `secondary_weight` = 0 must be positive"), "{err}");
    assert!(!d.join("t0").exists(), "nothing written");
    let err = fails(trackgnn(d, &["train", "--graphs", "g", "--out", "t2", "--init-weights", "nowhere"]));
    assert!(err.contains("nowhere"), "{err}");
    // Reconstruction: a stricter candidate length keeps fewer tracks; a score cut above the
    // default branch cut (0.8) is accepted; a zero length is refused by name.
    let reco = |extra: &[&str]| {
        let mut args = vec!["reconstruct", "--run", "run", "--input", "ev", "--events", "2", "--json"];
        args.extend_from_slice(extra);
        let out = json(&ok(trackgnn(d, &args)));
        let tracks: u64 = out["events"].as_array().unwrap().iter().map(|e| e["tracks"].as_u64().unwrap()).sum();
        (out, tracks)
    };
    let (r3, t3) = reco(&["--out", "t3", "--method", "walkthrough", "--min-hits", "3"]);
    // --fit: every method's tracks fitted, their parameters beside the submission.
    for method in ["cc", "follow"] {
        let out = format!("tf-{method}");
        let (rf, tracks) = reco(&["--out", &out, "--method", method, "--fit"]);
        assert_eq!((rf["fit"].as_bool(), r3["fit"].as_bool()), (Some(true), Some(false)));
        let rows = check_parameters(d, &out, &rf);
        assert!(!rows.is_empty() && rows.len() as u64 <= tracks, "{method}: {} rows, {tracks} tracks", rows.len());
        assert_eq!(rf["outlier_chi2"], 20.0);
        // Every hit kept: no outlier dropped, and at least as many hits on tracks.
        let (kept, _) = reco(&["--out", &format!("{out}-all"), "--method", method, "--fit", "--outlier-chi2", "inf"]);
        let outliers = |r: &serde_json::Value| -> u64 {
            r["events"].as_array().unwrap().iter().map(|e| e["outlier_hits"].as_u64().unwrap()).sum()
        };
        assert_eq!((kept["outlier_chi2"].clone(), outliers(&kept)), (serde_json::Value::Null, 0));
    }
    let err =
        fails(trackgnn(d, &["reconstruct", "--run", "run", "--input", "ev", "--out", "tx", "--outlier-chi2", "0"]));
    assert!(err.contains("outlier_chi2") && !d.join("tx").exists(), "{err}");
    // --display: the GNN's edges by score beside the tracks, and the Phoenix file.
    let (rd, _) = reco(&["--out", "td", "--method", "follow", "--display", "1", "--display-region", "r=0:400"]);
    assert_eq!(rd["display"].as_array().unwrap().len(), 5, "{}", rd["display"]);
    for f in ["event000000001-edges.png", "event000000001-tracks.svg", "event000000001-phoenix.json"] {
        assert!(d.join("td/display").join(f).is_file(), "{f}");
    }
    let (r6, t6) = reco(&["--out", "t6", "--method", "walkthrough", "--min-hits", "6"]);
    assert_eq!((r3["min_hits"].as_u64(), r6["min_hits"].as_u64()), (Some(3), Some(6)));
    // The metrics count particles of at least --min-hits hits unless told otherwise.
    let hits = |r: &serde_json::Value| (r["min_particle_hits"].as_u64(), r["min_track_hits"].as_u64());
    assert_eq!((hits(&r3), hits(&r6)), ((Some(3), Some(3)), (Some(6), Some(6))));
    let (r63, _) = reco(&["--out", "t63", "--method", "walkthrough", "--min-hits", "6", "--min-particle-hits", "3"]);
    assert_eq!(hits(&r63), (Some(3), Some(6)));
    let particles = |r: &serde_json::Value| r["metrics"]["n_reconstructable_particles"].as_u64().unwrap();
    assert_eq!(particles(&r63), particles(&r3));
    assert!(particles(&r6) < particles(&r3), "{} particles of >= 6 hits, {} of >= 3", particles(&r6), particles(&r3));
    assert!(t6 <= t3, "{t6} tracks of >= 6 hits, {t3} of >= 3");
    let m3 = r3["metrics"]["n_candidates"].as_u64().unwrap();
    assert!(r6["metrics"]["n_candidates"].as_u64().unwrap() <= m3);
    let (strict, _) = reco(&["--out", "t9", "--method", "walkthrough", "--score-cut", "0.9"]);
    assert_eq!(strict["branch_cut"], 0.9);
    assert_eq!(strict["hit_search"], false);
    // Track following runs its hit search unless told not to.
    let (searched, _) = reco(&["--out", "tf", "--method", "follow"]);
    let (plain, _) = reco(&["--out", "tp", "--method", "follow", "--no-hit-search"]);
    assert_eq!((searched["hit_search"].as_bool(), plain["hit_search"].as_bool()), (Some(true), Some(false)));
    assert_eq!(searched["score_cut"], 0.02);
    // Selecting candidates by their edges' scores keeps some of them, and says by what cut.
    let (selected, _) = reco(&["--out", "ts", "--method", "follow", "--min-candidate-score", "0.5"]);
    let cut = |r: &serde_json::Value| r["min_candidate_score"].as_f64();
    assert_eq!((cut(&selected), cut(&searched)), (Some(0.5), Some(0.0)));
    let candidates = |r: &serde_json::Value| r["metrics"]["n_candidates"].as_u64().unwrap();
    assert!(candidates(&selected) <= candidates(&searched), "{} > {}", candidates(&selected), candidates(&searched));
    // ... and, limited to the short candidates, keeps at least as many.
    let short = ["--min-candidate-score", "0.5", "--candidate-score-max-hits", "6"];
    let (short_only, _) = reco(&[&["--out", "t56", "--method", "follow"][..], &short].concat());
    assert_eq!(short_only["candidate_score_max_hits"], 6);
    assert!(
        candidates(&short_only) >= candidates(&selected),
        "{} < {}",
        candidates(&short_only),
        candidates(&selected)
    );
    // Scored by their weakest link unless told otherwise.
    let by_mean = ["--min-candidate-score", "0.5", "--candidate-score", "mean-best-edge"];
    let (mean, _) = reco(&[&["--out", "tm", "--method", "follow"][..], &by_mean].concat());
    assert_eq!(
        (selected["candidate_score"].as_str(), mean["candidate_score"].as_str()),
        (Some("weakest_link"), Some("mean_best_edge"))
    );
    assert!(candidates(&mean) <= candidates(&searched));
    // The candidate-quality model: fitted to the candidates of events with truth, then used by
    // reconstruct to drop the likely fakes, which it says in the JSON and the text.
    let fit = ["train-quality", "--run", "run", "--input", "ev", "--events", "6", "--out", "q.json", "--json"];
    let q = json(&ok(trackgnn(d, &fit)));
    let count = |k: &str| q[k].as_u64().unwrap_or_else(|| panic!("no {k} in {q}"));
    assert_eq!(count("events"), 6);
    assert!(count("fakes") > 0 && count("candidates") > count("fakes"), "{q}");
    assert!(q["kept_fake_rate"].as_f64() <= q["fake_rate"].as_f64(), "{q}");
    assert_eq!(q["weights"].as_object().unwrap().len(), trackgnn_reco::quality::NUM_BASE_FEATURES);
    // With the fit's features: the model reads all of them, and reconstruct fits every candidate
    // to judge it.
    let qf = json(&ok(trackgnn(d, &[&fit[..8], &["qf.json", "--json", "--fit-features"]].concat())));
    assert_eq!(qf["weights"].as_object().unwrap().len(), trackgnn_reco::quality::FEATURES.len(), "{qf}");
    assert!(qf["weights"]["log10_chi2_ndf"].as_f64().is_some(), "{qf}");
    let (judged_fit, _) = reco(&["--out", "tqf", "--method", "follow", "--quality", "qf.json"]);
    assert!(judged_fit["metrics"]["n_candidates"].as_u64().unwrap() > 0, "{judged_fit}");
    let (judged, _) = reco(&["--out", "tq", "--method", "follow", "--quality", "q.json"]);
    assert_eq!((judged["max_fake_probability"].as_f64(), searched["max_fake_probability"].as_f64()), (Some(0.5), None));
    assert!(candidates(&judged) <= candidates(&searched), "{} > {}", candidates(&judged), candidates(&searched));
    let (lenient, _) =
        reco(&["--out", "tq1", "--method", "follow", "--quality", "q.json", "--max-fake-probability", "1"]);
    assert_eq!(candidates(&lenient), candidates(&searched));
    // Followed again around the candidates kept (said in the JSON); only with a model.
    let (rebuilt, _) = reco(&["--out", "tqr", "--method", "follow", "--quality", "q.json", "--rebuild"]);
    assert_eq!((rebuilt["rebuild"].as_bool(), judged["rebuild"].as_bool()), (Some(true), Some(false)));
    let err = fails(trackgnn(d, &["reconstruct", "--run", "run", "--input", "ev", "--out", "tqx", "--rebuild"]));
    assert!(err.contains("--quality"), "{err}");
    let text = ok(trackgnn(
        d,
        &[
            "reconstruct",
            "--run",
            "run",
            "--input",
            "ev",
            "--events",
            "1",
            "--out",
            "tqt",
            "--method",
            "follow",
            "--quality",
            "q.json",
        ],
    ));
    assert!(text.contains("fake probability <= 0.5 by the quality model"), "{text}");
    std::fs::write(d.join("bad.json"), "{\"format\": 1}").unwrap();
    let err =
        fails(trackgnn(d, &["reconstruct", "--run", "run", "--input", "ev", "--out", "tq2", "--quality", "bad.json"]));
    assert!(err.contains("bad.json"), "{err}");
    let err = fails(trackgnn(
        d,
        &[
            "reconstruct",
            "--run",
            "run",
            "--input",
            "ev",
            "--out",
            "tq3",
            "--quality",
            "q.json",
            "--max-fake-probability",
            "1.5",
        ],
    ));
    assert!(err.contains("max_fake_probability") && err.contains("1.5"), "{err}");
    // A model judges only candidates built as those it was fitted to.
    let walk = ["--out", "tq4", "--method", "walkthrough", "--quality", "q.json"];
    let err = fails(trackgnn(d, &[&["reconstruct", "--run", "run", "--input", "ev"][..], &walk].concat()));
    let fitted = "fitted to follow candidates (score cut 0.02, >= 5 hits)";
    assert!(err.contains(fitted) && err.contains("walkthrough candidates (score cut 0.5"), "{err}");
    // So are track following's settings: those that differ from the defaults are named.
    let tries = ["--out", "tq5", "--method", "follow", "--seed-tries", "1", "--quality", "q.json"];
    let err = fails(trackgnn(d, &[&["reconstruct", "--run", "run", "--input", "ev"][..], &tries].concat()));
    assert!(
        err.contains(fitted) && err.contains("follow candidates (score cut 0.02, >= 5 hits, seed_tries 1)"),
        "{err}"
    );
    let bad_cut = ["reconstruct", "--run", "run", "--input", "ev", "--out", "tb", "--min-candidate-score", "1.5"];
    let err = fails(trackgnn(d, &bad_cut));
    assert!(err.contains("min_candidate_score") && err.contains("1.5"), "{err}");
    // Truth in place of the GNN: the same graphs, and the builder's ceiling above the model.
    let (ceiling, _) = reco(&["--out", "tt", "--method", "follow", "--truth-scores"]);
    assert_eq!((ceiling["truth_scores"].as_bool(), searched["truth_scores"].as_bool()), (Some(true), Some(false)));
    for (c, s) in ceiling["events"].as_array().unwrap().iter().zip(searched["events"].as_array().unwrap()) {
        assert_eq!((&c["nodes"], &c["edges"]), (&s["nodes"], &s["edges"]));
    }
    let eff = |r: &serde_json::Value| r["metrics"]["efficiency"].as_f64().unwrap();
    assert!(eff(&ceiling) >= eff(&searched) && eff(&ceiling) > 0.8, "{} vs {}", eff(&ceiling), eff(&searched));
    assert!(ceiling["metrics"]["fake_rate"].as_f64().unwrap() < 0.05, "{}", ceiling["metrics"]);
    // The headline is the efficiency over primary targets, the all-target one beside it, in
    // the JSON (with its histograms) and first in the text.
    let m = &ceiling["metrics"];
    let primary = m["efficiency_primary"].as_f64().unwrap();
    let (found, all) =
        (m["n_prompt_target_matched"].as_f64().unwrap(), m["n_prompt_target_particles"].as_f64().unwrap());
    // (serde_json's float parsing may miss the last bit)
    assert!(all > 0.0 && (primary - found / all).abs() < 1e-12, "{m}");
    assert_eq!(m["efficiency_prompt"], m["efficiency_primary"]);
    let binned: u64 = m["efficiency_primary_vs_eta"].as_array().unwrap().iter().map(|b| b[2].as_u64().unwrap()).sum();
    assert!(binned as f64 <= all && binned > 0, "{m}");
    let text = ok(trackgnn(d, &["reconstruct", "--run", "run", "--input", "ev", "--events", "2", "--out", "tx"]));
    let at = |what: &str| text.find(what).unwrap_or_else(|| panic!("no {what:?} in {text}"));
    assert!(at("track efficiency") < at("over primary targets") && at("over primary targets") < at("over all targets"));
    // Without truth files there is nothing to score from, and the missing file is named.
    std::fs::create_dir(d.join("hits_only")).unwrap();
    for f in std::fs::read_dir(d.join("ev")).unwrap().map(|e| e.unwrap().path()) {
        if f.to_string_lossy().ends_with("-hits.csv") {
            std::fs::copy(&f, d.join("hits_only").join(f.file_name().unwrap())).unwrap();
        }
    }
    let no_truth = ["reconstruct", "--run", "run", "--input", "hits_only", "--out", "th", "--truth-scores"];
    let err = fails(trackgnn(d, &no_truth));
    assert!(err.contains("-truth.csv"), "{err}");
    let err = fails(trackgnn(d, &["reconstruct", "--run", "run", "--input", "ev", "--out", "t0", "--min-hits", "0"]));
    assert!(err.contains("--min-hits"), "{err}");
    // ONNX export for ACTS: the file, its ACTS configuration, and reference inputs and logits.
    let export = ["export", "--run", "run", "--out", "m.onnx", "--reference", "ev", "--reference-out", "ref"];
    let x = json(&ok(trackgnn(d, &export.into_iter().chain(["--events", "2", "--json"]).collect::<Vec<_>>())));
    assert_eq!(
        (x["opset"].as_i64(), x["bytes"].as_u64()),
        (Some(18), Some(std::fs::metadata(d.join("m.onnx")).unwrap().len()))
    );
    let names: Vec<&str> = x["inputs"].as_array().unwrap().iter().map(|i| i["name"].as_str().unwrap()).collect();
    assert_eq!((names, x["output"]["name"].as_str()), (vec!["x", "edge_index", "edge_attr"], Some("output")));
    let acts: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("m.acts.json")).unwrap()).unwrap();
    assert_eq!(acts["selected_features"], serde_json::json!([0, 1, 2]));
    assert_eq!(acts["model"], "m.onnx");
    let events = x["reference"]["events"].as_array().unwrap();
    assert_eq!(events.len(), 2);
    let logits = d.join("ref").join(format!("{}.logits.npy", events[0]["prefix"].as_str().unwrap()));
    let edges = events[0]["edges"].as_u64().unwrap();
    assert_eq!(std::fs::metadata(logits).unwrap().len(), 128 + 4 * edges, "a 128-byte .npy header, then E floats");
    let err = fails(trackgnn(d, &["export", "--run", "run", "--out", "m2.onnx", "--reference", "ev"]));
    assert!(err.contains("--reference-out"), "{err}");
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

#[test]
fn demo_quick_runs_the_whole_pipeline_in_a_reduced_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let t0 = std::time::Instant::now();
    ok(trackgnn(d, &["demo", "--quick", "--out", "demo"]));
    eprintln!("demo --quick took {:.1} s", t0.elapsed().as_secs_f64());
    let demo = d.join("demo");
    for f in ["run/best.safetensors", "run/config.toml", "run/metrics.csv", "graphs/recipe.toml", "run/plots/loss.png"]
    {
        assert!(demo.join(f).is_file(), "{f}");
    }
    let cfg = std::fs::read_to_string(demo.join("run/config.toml")).unwrap();
    assert!(cfg.contains("epochs = 1") && cfg.contains("hidden = 16"), "{cfg}");
    let events = |sub: &str| {
        std::fs::read_dir(demo.join(sub))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().to_string_lossy().ends_with("-hits.csv"))
            .count()
    };
    assert_eq!((events("events"), events("heldout")), (12, 2));
    let tracks = std::fs::read_dir(demo.join("tracks")).unwrap().count();
    assert!(tracks >= 2, "{tracks} files in tracks/");
    // A second demo into the same directory is refused.
    let err = fails(trackgnn(d, &["demo", "--quick", "--out", "demo"]));
    assert!(err.contains("already holds a demo"), "{err}");
}
