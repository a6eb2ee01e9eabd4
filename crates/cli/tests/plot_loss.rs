//! `plot-loss` on two tiny runs' metrics: one figure, a summary per run, and a missing run
//! named with nothing written.

use std::path::Path;

use trackgnn_plot::testing::{check_files, no_temporaries};

use crate::util::{fails, json, ok, trackgnn};

/// A run directory `name` (a config.toml and a metrics.jsonl) with `(train loss, validation
/// loss, efficiency, total purity)` per epoch, 10 s each of which 2 s validation.
fn tiny_run(dir: &Path, name: &str, epochs: &[(f64, f64, f64, f64)]) {
    let root = dir.join(name);
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("config.toml"), "").unwrap();
    let lines: Vec<String> = epochs
        .iter()
        .enumerate()
        .map(|(epoch, &(train_loss, val_loss, efficiency, total_purity))| {
            let r = serde_json::json!({ "epoch": epoch, "train_loss": train_loss, "val_loss": val_loss,
                "efficiency": efficiency, "total_purity": total_purity, "epoch_seconds": 10.0,
                "val_seconds": 2.0, "peak_rss_bytes": 0 });
            r.to_string()
        })
        .collect();
    std::fs::write(root.join("metrics.jsonl"), lines.join("\n") + "\n").unwrap();
}

#[test]
fn plot_loss_overlays_two_runs_and_names_a_missing_one() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    tiny_run(d, "run_f32", &[(0.4, 0.5, 0.95, 0.90), (0.2, 0.3, 0.99, 0.97)]);
    tiny_run(d, "run_bf16", &[(0.4, 0.5, 0.96, 0.91), (0.25, 0.35, 0.98, 0.96), (0.2, 0.3, 0.97, 0.99)]);
    std::fs::create_dir(d.join("figs")).unwrap();
    let out = json(&ok(trackgnn(d, &["plot-loss", "run_f32", "run_bf16", "--out", "figs/loss.png", "--json"])));
    let svg = check_files(&d.join("figs/loss"));
    no_temporaries(&d.join("figs"));
    if trackgnn_train::plots::font_available() {
        assert!(svg.contains("run_f32 validation") && svg.contains("run_bf16 train"), "labelled by run");
    }
    let runs = out["runs"].as_array().unwrap();
    assert_eq!((runs[0]["run"].as_str(), runs[0]["epochs"].as_u64()), (Some("run_f32"), Some(2)));
    assert_eq!((runs[1]["best_epoch"].as_u64(), runs[1]["best_efficiency"].as_f64()), (Some(1), Some(0.98)));
    assert_eq!(runs[1]["total_purity_at_best"].as_f64(), Some(0.96), "the best epoch's purity");
    assert_eq!(runs[1]["wall_seconds"].as_f64(), Some(30.0));
    let text = ok(trackgnn(d, &["plot-loss", "run_f32", "--out", "figs/one"]));
    assert!(text.contains("best validation efficiency 99.00% (epoch 1), total purity 97.00%"), "{text}");
    assert!(text.contains("wall 20 s (training 16 s, validation 4 s)"), "{text}");
    let err = fails(trackgnn(d, &["plot-loss", "run_f32", "no_such_run", "--out", "figs/missing"]));
    assert!(err.contains("no_such_run: no such run directory"), "{err}");
    assert!(!d.join("figs/missing.png").exists() && !d.join("figs/missing.svg").exists(), "nothing written");
}
