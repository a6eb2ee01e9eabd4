//! The auxiliary pT target (`aux_pt_weight`): with λ > 0 the head trains (its loss falls), its
//! losses reach the logs, its weights are stored under `aux_pt.*` and the run loads for
//! inference; with λ = 0 the run has no head and nothing of it in its files.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use trackgnn_engine::{InteractionGnn, ModelConfig};
use trackgnn_graph::features::NodeCuts;
use trackgnn_graph::{GraphMethod, GraphRecipe, build_graph, graph_file_name, read_graph, write_graph};
use trackgnn_model::run_dir::{StepRecord, Weights};
use trackgnn_model::{TrainedModel, graph_input};
use trackgnn_simulate::{Generator, SimConfig};
use trackgnn_trackml::Detector;
use trackgnn_trackml::rng::Rng;
use trackgnn_train::checkpoint::load_weights;
use trackgnn_train::dist::SingleProcess;
use trackgnn_train::{RunDir, Silent, TrainConfig, Trainer};

/// `n` geometric pT > 1 GeV graphs of pile-up-20 events in a temporary directory's `g/`.
fn tiny_set(n: u64) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let graphs = dir.path().join("g");
    std::fs::create_dir_all(&graphs).unwrap();
    let g = Generator::new(Detector::trackml(), SimConfig { pileup: 20.0, ..SimConfig::default() });
    let mut recipe = GraphRecipe::new(GraphMethod::Geometric);
    recipe.node_cuts = NodeCuts { pt_min: Some(1.0), remove_noise: true, eta_range: None };
    for id in 1..=n {
        let (ev, _) = g.event(77, id);
        let (graph, _) = build_graph(&ev, g.detector(), &recipe, None).unwrap();
        write_graph(&graphs.join(graph_file_name(id)), &graph).unwrap();
    }
    (dir, graphs)
}

fn config(aux_pt_weight: f64) -> TrainConfig {
    let mut c = TrainConfig { epochs: 4, seed: 3, aux_pt_weight, ..TrainConfig::default() };
    c.model.hidden = 16;
    c.model.iterations = 3;
    c.optimizer.lr = 3e-3;
    c
}

fn steps(run: &Path) -> Vec<StepRecord> {
    let text = std::fs::read_to_string(RunDir::new(run).root().join("steps.jsonl")).unwrap();
    text.lines().map(|l| StepRecord::parse_line(l).unwrap()).collect()
}

fn names(model: &InteractionGnn<f32>) -> Vec<String> {
    model.params.specs.iter().map(|s| s.name.clone()).collect()
}

#[test]
fn an_aux_target_trains_is_logged_and_stored_and_the_run_loads_for_inference() {
    let (dir, graphs) = tiny_set(12);
    let run = dir.path().join("aux");
    let mut comm = SingleProcess;
    let mut t = Trainer::new(config(1.0), &graphs, &run, false, &mut comm).unwrap();
    t.run(&Silent, &AtomicBool::new(false)).unwrap();
    let trained = t.executor().host_model();
    assert!(trained.has_aux_head());
    // Logs: the auxiliary loss per step and per epoch, falling.
    let recs = RunDir::new(&run).read_metrics().unwrap();
    let aux: Vec<f64> = recs.iter().map(|r| r.train_aux_loss.expect("train_aux_loss")).collect();
    let val: Vec<f64> = recs.iter().map(|r| r.val_aux_loss.expect("val_aux_loss")).collect();
    eprintln!("aux loss per epoch: train {aux:?}, validation {val:?}");
    // Measured: train 0.049 → 0.026, validation 0.0204 → 0.0200 (log10 pT of pT > 1 GeV
    // particles spreads little: the head learns its mean, then the spread slowly).
    assert!(aux.last().unwrap() < &(0.7 * aux[0]), "training aux loss {aux:?}");
    assert!(val.iter().all(|v| v.is_finite() && *v < 0.1), "validation aux loss {val:?}");
    assert!(val.last().unwrap() <= &(1.05 * val[0]), "validation aux loss {val:?}");
    let st = steps(&run);
    assert!(st.iter().all(|s| s.aux_loss.is_some_and(f64::is_finite)), "aux_loss in every step");
    let csv = std::fs::read_to_string(run.join("metrics.csv")).unwrap();
    assert!(csv.lines().next().unwrap().ends_with("train_aux_loss,val_aux_loss"), "{csv}");
    // The run's config records the head; the weights hold it; inference loads strictly.
    let cfg = RunDir::open(&run).unwrap().read_config().unwrap();
    assert!(cfg.model.aux_pt && cfg.aux_pt_weight == 1.0);
    let rd = RunDir::open(&run).unwrap();
    let mut with = trained.params.clone();
    load_weights(&rd.best_path(), &mut with).unwrap();
    assert!(names(&trained).iter().any(|n| n == "aux_pt.0.weight"));
    let plain = InteractionGnn::<f32>::new(
        ModelConfig { aux_pt: false, ..cfg.model.clone() },
        trained.node_dim,
        trained.edge_dim,
        &mut Rng::new(0),
    );
    let err = load_weights(&rd.best_path(), &mut plain.params.clone()).unwrap_err().to_string();
    assert!(err.contains("aux_pt."), "a model without the head refuses the file, naming the tensor: {err}");
    let model = TrainedModel::open(&rd, &Weights::Best, trained.node_dim, trained.edge_dim).unwrap();
    assert!(model.model().has_aux_head());
    let g = read_graph(&t.graph_set().files[t.split().val[0]].1).unwrap();
    let logits = model.logits(&g).unwrap();
    assert_eq!(logits.len(), g.num_edges());
    // The head changes no logit: the same weights without it score the same.
    let mut headless = plain.clone();
    let k = headless.params.len();
    headless.params.data.copy_from_slice(&model.model().params.data[..k]);
    let mut cache = trackgnn_engine::ForwardCache::default();
    assert!(headless.infer(&graph_input(&g), &mut cache) == logits, "the head changed the logits");
}

#[test]
fn a_zero_aux_weight_leaves_no_head_and_no_trace() {
    let (dir, graphs) = tiny_set(7);
    let run = dir.path().join("plain");
    let mut comm = SingleProcess;
    let cfg = TrainConfig { epochs: 1, ..config(0.0) };
    let mut t = Trainer::new(cfg.clone(), &graphs, &run, false, &mut comm).unwrap();
    t.run(&Silent, &AtomicBool::new(false)).unwrap();
    let trained = t.executor().host_model();
    assert!(!trained.has_aux_head());
    assert!(names(&trained).iter().all(|n| !n.starts_with("aux_pt")));
    let plain = InteractionGnn::<f32>::new(cfg.model.clone(), trained.node_dim, trained.edge_dim, &mut Rng::new(0));
    assert_eq!(trained.params.specs, plain.params.specs);
    let recs = RunDir::new(&run).read_metrics().unwrap();
    assert!(recs.iter().all(|r| r.train_aux_loss.is_none() && r.val_aux_loss.is_none()));
    assert!(steps(&run).iter().all(|s| s.aux_loss.is_none()));
    let text = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap()
        + &std::fs::read_to_string(run.join("steps.jsonl")).unwrap()
        + &std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(!text.contains("aux_loss") && !text.contains("aux_pt ="), "no aux key in the run's files");
    // The trainer sets the head from the weight: model.aux_pt alone adds none.
    let mut head_only = config(0.0);
    head_only.model.aux_pt = true;
    let t = Trainer::new(head_only, &graphs, &dir.path().join("head_only"), false, &mut comm).unwrap();
    assert!(!t.executor().host_model().has_aux_head());
    drop(t);
    let msg = Trainer::new(config(-1.0), &graphs, &dir.path().join("bad"), false, &mut comm).err().unwrap().to_string();
    assert!(msg.contains("aux_pt_weight"), "{msg}");
}

/// Sectors that each hold the whole graph (overlap ~π) and domain partitions give the whole
/// graph's auxiliary loss: each true edge counted once, the mean over the whole graph's.
#[test]
fn sectors_and_partitions_count_each_true_edge_once_in_the_aux_loss() {
    use trackgnn_engine::loss::mse_over;
    use trackgnn_train::data::{LossWeights, load_partition, load_parts};
    let (dir, graphs) = tiny_set(1);
    let path = graphs.join(graph_file_name(1));
    let w = LossWeights { non_target: 0.0, secondary: 1.0 };
    // A prediction from each edge's own target (the parts may hold the edges in another order).
    let loss = |s: &trackgnn_train::data::Sample| {
        let p: Vec<f32> = s.log_pt.iter().map(|t| t * 0.5 - 0.1).collect();
        mse_over(&p, &s.log_pt, &s.aux_weight, s.aux_edges, &mut vec![0.0; p.len()])
    };
    let whole = load_parts(&path, w, 1, 0.0).unwrap().remove(0);
    assert!(whole.aux_edges > 100 && whole.aux_edges == whole.y.iter().filter(|&&y| y == 1).count());
    let l1 = loss(&whole);
    let l4: f64 = load_parts(&path, w, 4, 3.1).unwrap().iter().map(loss).sum();
    assert!((l1 - l4).abs() <= 1e-9 * l1, "sectors: {l1} vs {l4}");
    let l1 = loss(&whole);
    let l2: f64 = (0..2).map(|r| loss(&load_partition(&path, w, r, 2).unwrap())).sum();
    assert!((l1 - l2).abs() <= 1e-9 * l1, "partitions: {l1} vs {l2}");
    drop(dir);
}
