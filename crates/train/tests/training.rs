//! Training end to end on a tiny generated data set: the loss falls and the model learns; an
//! interrupted run resumed from its checkpoint ends with the same weights as an uninterrupted
//! one.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use trackgnn_graph::features::NodeCuts;
use trackgnn_graph::{GraphRecipe, Method, build_graph, graph_file_name, write_graph};
use trackgnn_simulate::{Generator, SimConfig};
use trackgnn_trackml::Detector;
use trackgnn_train::checkpoint::load_weights;
use trackgnn_train::dist::SingleProcess;
use trackgnn_train::logs::read_records;
use trackgnn_train::{Progress, Silent, TrainConfig, Trainer};

/// Writes `n` geometric pT > 1 GeV graphs of pile-up-20 events into `dir`.
fn make_graphs(dir: &Path, n: u64) {
    let g = Generator::new(Detector::trackml(), SimConfig { pileup: 20.0, ..SimConfig::default() });
    let mut recipe = GraphRecipe::new(Method::Geometric);
    recipe.node_cuts = NodeCuts { pt_min: Some(1.0), remove_noise: true, eta_range: None };
    for id in 1..=n {
        let (ev, _) = g.event(77, id);
        let (graph, _) = build_graph(&ev, g.detector(), &recipe, None).unwrap();
        write_graph(&dir.join(graph_file_name(id)), &graph).unwrap();
    }
}

fn small_config() -> TrainConfig {
    let mut c = TrainConfig { epochs: 5, seed: 3, ..TrainConfig::default() };
    c.model.hidden = 32;
    c.model.iterations = 4;
    c.optimizer.lr = 3e-3;
    c
}

#[test]
fn a_small_model_learns_the_tiny_set() {
    let dir = tempfile::tempdir().unwrap();
    let graphs = dir.path().join("g");
    std::fs::create_dir_all(&graphs).unwrap();
    make_graphs(&graphs, 24);
    let run = dir.path().join("run");
    let mut comm = SingleProcess;
    let mut t = Trainer::new(small_config(), &graphs, &run, false, &mut comm).unwrap();
    let out = t.run(&Silent, &AtomicBool::new(false)).unwrap();
    assert_eq!(out.epochs_completed, 5);
    let recs = read_records(&run.join("metrics.jsonl")).unwrap();
    assert_eq!(recs.len(), 5);
    let (first, last) = (&recs[0], recs.last().unwrap());
    assert!(last.train_loss <= 0.5 * first.train_loss, "train loss {} -> {}", first.train_loss, last.train_loss);
    assert!(last.efficiency > 0.9, "validation efficiency {}", last.efficiency);
    for f in ["metrics.csv", "config.toml", "events.json", "best.safetensors", "plots/loss.png", "plots/roc.svg"] {
        assert!(run.join(f).exists(), "{f} missing");
    }
}

/// Raises the stop flag after a number of steps, like a SIGTERM in the middle of an epoch.
struct StopAfter<'a> {
    steps: AtomicU64,
    at: u64,
    flag: &'a AtomicBool,
}

impl Progress for StopAfter<'_> {
    fn step(&self, _loss: f64) {
        if self.steps.fetch_add(1, Ordering::Relaxed) + 1 == self.at {
            self.flag.store(true, Ordering::Relaxed);
        }
    }
}

#[test]
fn an_interrupted_run_resumes_to_the_same_weights() {
    let dir = tempfile::tempdir().unwrap();
    let graphs = dir.path().join("g");
    std::fs::create_dir_all(&graphs).unwrap();
    make_graphs(&graphs, 14);
    let cfg = TrainConfig { epochs: 3, checkpoint_every_steps: 4, ..small_config() };
    // Uninterrupted.
    let mut comm = SingleProcess;
    let mut a = Trainer::new(cfg.clone(), &graphs, &dir.path().join("a"), false, &mut comm).unwrap();
    a.run(&Silent, &AtomicBool::new(false)).unwrap();
    let weights_a = a.model.params.data.clone();
    // Interrupted in the middle of epoch 1 (11 training graphs per epoch), then resumed.
    let stop = AtomicBool::new(false);
    let run_b = dir.path().join("b");
    {
        let mut comm = SingleProcess;
        let mut b = Trainer::new(cfg.clone(), &graphs, &run_b, false, &mut comm).unwrap();
        let out = b.run(&StopAfter { steps: AtomicU64::new(0), at: 16, flag: &stop }, &stop).unwrap();
        assert!(out.interrupted && out.global_step == 16, "{out:?}");
    }
    // Starting again without --resume is refused: the directory holds a run.
    let mut comm = SingleProcess;
    assert!(Trainer::new(cfg.clone(), &graphs, &run_b, false, &mut comm).is_err());
    let mut b = Trainer::new(cfg.clone(), &graphs, &run_b, true, &mut comm).unwrap();
    let out = b.run(&Silent, &AtomicBool::new(false)).unwrap();
    assert_eq!(out.epochs_completed, 3);
    assert!(
        b.model.params.data.iter().zip(&weights_a).all(|(x, y)| x.to_bits() == y.to_bits()),
        "resumed weights differ from the uninterrupted run"
    );
    // The logs hold each epoch once, and the best weights on disk match.
    let recs_a = read_records(&dir.path().join("a/metrics.jsonl")).unwrap();
    let recs_b = read_records(&run_b.join("metrics.jsonl")).unwrap();
    assert_eq!(recs_b.len(), 3);
    for (x, y) in recs_a.iter().zip(&recs_b) {
        assert_eq!(x.val_loss.to_bits(), y.val_loss.to_bits());
        assert_eq!(x.train_loss.to_bits(), y.train_loss.to_bits());
    }
    let mut pa = a.model.params.clone();
    let mut pb = b.model.params.clone();
    load_weights(&dir.path().join("a/best.safetensors"), &mut pa).unwrap();
    load_weights(&run_b.join("best.safetensors"), &mut pb).unwrap();
    assert_eq!(pa.data, pb.data);
}
