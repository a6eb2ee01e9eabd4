//! Early stopping (`early_stopping_patience`): a run whose validation metric stops improving
//! ends after `patience` epochs without improvement, says so, and keeps its checkpoint.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use trackgnn_graph::features::NodeCuts;
use trackgnn_graph::{GraphMethod, GraphRecipe, build_graph, graph_file_name, write_graph};
use trackgnn_simulate::{Generator, SimConfig};
use trackgnn_trackml::Detector;
use trackgnn_train::dist::SingleProcess;
use trackgnn_train::logs::read_records;
use trackgnn_train::{Silent, TrainConfig, Trainer};

/// Writes `n` small geometric graphs of pile-up-5 events into `dir`.
fn make_graphs(dir: &Path, n: u64) {
    let g = Generator::new(Detector::trackml(), SimConfig { pileup: 5.0, ..SimConfig::default() });
    let mut recipe = GraphRecipe::new(GraphMethod::Geometric);
    recipe.node_cuts = NodeCuts { pt_min: Some(1.0), remove_noise: true, eta_range: None };
    for id in 1..=n {
        let (ev, _) = g.event(91, id);
        let (graph, _) = build_graph(&ev, g.detector(), &recipe, None).unwrap();
        write_graph(&dir.join(graph_file_name(id)), &graph).unwrap();
    }
}

/// A config whose learning rate is too small to move any f32 weight: the validation metric
/// repeats exactly, so no epoch after the first improves on it.
fn frozen_config(epochs: usize, patience: usize) -> TrainConfig {
    let mut c = TrainConfig { epochs, seed: 5, early_stopping_patience: patience, ..TrainConfig::default() };
    c.model.hidden = 8;
    c.model.iterations = 1;
    c.optimizer.lr = 1e-30;
    c
}

#[test]
fn a_run_without_improvement_stops_after_patience_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let graphs = dir.path().join("g");
    std::fs::create_dir_all(&graphs).unwrap();
    make_graphs(&graphs, 6);
    for (patience, epochs, expect_epochs, expect_early) in [(2usize, 10usize, 3u64, true), (0, 4, 4, false)] {
        let run = dir.path().join(format!("run-{patience}"));
        let mut comm = SingleProcess;
        let mut t = Trainer::new(frozen_config(epochs, patience), &graphs, &run, false, &mut comm).unwrap();
        let out = t.run(&Silent, &AtomicBool::new(false)).unwrap();
        assert_eq!(
            (out.epochs_completed, out.stopped_early, out.interrupted),
            (expect_epochs, expect_early, false),
            "patience {patience}"
        );
        assert_eq!(out.best_epoch, Some(0), "patience {patience}: the first epoch (0-based) stays the best");
        let recs = read_records(&run.join("metrics.jsonl")).unwrap();
        assert_eq!(recs.len() as u64, expect_epochs, "patience {patience}: one record per epoch run");
        assert!(run.join("best.safetensors").exists(), "patience {patience}");
    }
}
