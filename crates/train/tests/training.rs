//! Training end to end on a tiny generated data set: the loss falls and the model learns; an
//! interrupted run resumed from its checkpoint ends with the same weights as an uninterrupted
//! one.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use trackgnn_engine::loss::bce_with_logits;
use trackgnn_engine::{CpuExecutor, Device, ForwardCache, InteractionGnn};
use trackgnn_graph::features::NodeCuts;
use trackgnn_graph::{GraphMethod, GraphRecipe, build_graph, graph_file_name, write_graph};
use trackgnn_simulate::{Generator, SimConfig};
use trackgnn_trackml::Detector;
use trackgnn_trackml::rng::Rng;
use trackgnn_train::budget::step_bytes;
use trackgnn_train::checkpoint::load_weights;
use trackgnn_train::config::{Oversize, SpikeAction};
use trackgnn_train::data::{GraphSet, LossWeights, load_parts};
use trackgnn_train::dist::SingleProcess;
use trackgnn_train::{Progress, RunDir, Silent, TrainConfig, Trainer};

/// The default loss weights: non-target edges left out, secondaries as prompt particles.
const W: LossWeights = LossWeights { non_target: 0.0, secondary: 1.0 };

/// Writes `n` geometric pT > 1 GeV graphs of pile-up-20 events into `dir`.
fn make_graphs(dir: &Path, n: u64) {
    let g = Generator::new(Detector::trackml(), SimConfig { pileup: 20.0, ..SimConfig::default() });
    let mut recipe = GraphRecipe::new(GraphMethod::Geometric);
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

/// A temporary directory with `n` tiny graphs in its `g/`.
fn tiny_set(n: u64) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let graphs = dir.path().join("g");
    std::fs::create_dir_all(&graphs).unwrap();
    make_graphs(&graphs, n);
    (dir, graphs)
}

#[test]
fn a_split_without_validation_events_is_refused_up_front() {
    // Four events at 80/10/10 give validation round(0.4) = 0 events.
    let (dir, graphs) = tiny_set(4);
    let run = dir.path().join("run");
    let e = Trainer::new(small_config(), &graphs, &run, false, &mut SingleProcess).err().expect("refused");
    let msg = e.to_string();
    assert!(msg.starts_with("invalid config: `split`"), "the setting is named: {msg}");
    assert!(msg.contains("4 event(s) of") && msg.contains("leaves no validation event"), "{msg}");
    assert!(msg.contains("at least 5 events"), "{msg}");
    assert!(!run.exists(), "nothing written");
    let cfg = TrainConfig { split: [0.9, 0.0, 0.1], ..small_config() };
    let msg = Trainer::new(cfg, &graphs, &run, false, &mut SingleProcess).err().expect("refused").to_string();
    assert!(msg.contains("positive fraction"), "{msg}");
    // Five events hold one.
    make_graphs(&graphs, 5);
    let cfg = TrainConfig { epochs: 1, ..small_config() };
    let mut comm = SingleProcess;
    let mut t = Trainer::new(cfg, &graphs, &run, false, &mut comm).unwrap();
    assert_eq!(t.split().val.len(), 1);
    let out = t.run(&Silent, &AtomicBool::new(false)).unwrap();
    assert!(out.best_value.is_finite() && RunDir::open(&run).unwrap().best_path().exists(), "{out:?}");
}

#[test]
fn a_device_this_build_cannot_run_is_refused_before_anything_is_written() {
    let (dir, graphs) = tiny_set(6);
    let run = dir.path().join("run");
    let cfg = TrainConfig { device: Device::Cuda(0), ..small_config() };
    let msg = Trainer::new(cfg, &graphs, &run, false, &mut SingleProcess).err().expect("refused").to_string();
    assert!(msg.contains("invalid config: `device` cuda:0: this build of trackgnn has no backend for it"), "{msg}");
    assert!(!run.exists(), "nothing written");
}

#[test]
fn a_small_model_learns_the_tiny_set() {
    let (dir, graphs) = tiny_set(24);
    let run = dir.path().join("run");
    let mut comm = SingleProcess;
    let mut t = Trainer::new(small_config(), &graphs, &run, false, &mut comm).unwrap();
    let out = t.run(&Silent, &AtomicBool::new(false)).unwrap();
    assert_eq!(out.epochs_completed, 5);
    let recs = RunDir::new(&run).read_metrics().unwrap();
    assert_eq!(recs.len(), 5);
    let (first, last) = (&recs[0], recs.last().unwrap());
    assert!(last.train_loss <= 0.5 * first.train_loss, "train loss {} -> {}", first.train_loss, last.train_loss);
    assert!(last.efficiency > 0.9, "validation efficiency {}", last.efficiency);
    for f in ["metrics.csv", "config.toml", "events.json", "best.safetensors", "plots/loss.png", "plots/roc.svg"] {
        assert!(run.join(f).exists(), "{f} missing");
    }
}

#[test]
fn bf16_saved_states_keep_the_metrics_of_f32_checkpointing() {
    let (dir, graphs) = tiny_set(24);
    let last = |mode: &str| {
        let cfg = TrainConfig { checkpointing: mode.parse().unwrap(), ..small_config() };
        let run = dir.path().join(mode);
        let mut comm = SingleProcess;
        Trainer::new(cfg, &graphs, &run, false, &mut comm).unwrap().run(&Silent, &AtomicBool::new(false)).unwrap();
        RunDir::new(&run).read_metrics().unwrap().pop().unwrap()
    };
    let (f32s, bf16s) = (last("per-iteration"), last("per-iteration+bf16"));
    // The edge ranking is what the stored precision must not change: the AUCs agree to a few
    // 1e-4. Where the fixed 0.5 cut falls in the scores moves with the trajectory after five
    // epochs on 24 tiny graphs (with the end-caps digitised as ACTS 2018 did, it traded 0.016
    // of efficiency for 0.016 of purity at an AUC difference of 0.0003), so those two get 0.03.
    assert!(
        (f32s.auc - bf16s.auc).abs() < 0.002
            && (f32s.efficiency - bf16s.efficiency).abs() < 0.03
            && (f32s.total_purity - bf16s.total_purity).abs() < 0.03,
        "f32 states: auc {} efficiency {} purity {}; bf16 states: {} {} {}",
        f32s.auc,
        f32s.efficiency,
        f32s.total_purity,
        bf16s.auc,
        bf16s.efficiency,
        bf16s.total_purity
    );
    // The trajectories part (training amplifies any difference), so the loss is only a sanity
    // check: a wrong gradient would leave it far higher.
    assert!((f32s.val_loss / bf16s.val_loss - 1.0).abs() < 0.25, "val loss {} vs {}", f32s.val_loss, bf16s.val_loss);
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
    let (dir, graphs) = tiny_set(14);
    let cfg = TrainConfig { epochs: 3, checkpoint_every_steps: 4, ..small_config() };
    // Uninterrupted.
    let mut comm = SingleProcess;
    let mut a = Trainer::new(cfg.clone(), &graphs, &dir.path().join("a"), false, &mut comm).unwrap();
    a.run(&Silent, &AtomicBool::new(false)).unwrap();
    let weights_a = a.executor().params().data.clone();
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
        b.executor().params().data.iter().zip(&weights_a).all(|(x, y)| x.to_bits() == y.to_bits()),
        "resumed weights differ from the uninterrupted run"
    );
    // The logs hold each epoch once, and the best weights on disk match.
    let recs_a = RunDir::new(dir.path().join("a")).read_metrics().unwrap();
    let recs_b = RunDir::new(&run_b).read_metrics().unwrap();
    assert_eq!(recs_b.len(), 3);
    for (x, y) in recs_a.iter().zip(&recs_b) {
        assert_eq!(x.val_loss.to_bits(), y.val_loss.to_bits());
        assert_eq!(x.train_loss.to_bits(), y.train_loss.to_bits());
    }
    let mut pa = a.executor().params().clone();
    let mut pb = b.executor().params().clone();
    load_weights(&RunDir::new(dir.path().join("a")).best_path(), &mut pa).unwrap();
    load_weights(&RunDir::new(&run_b).best_path(), &mut pb).unwrap();
    assert_eq!(pa.data, pb.data);
}

#[test]
fn a_resume_may_add_a_decay_that_keeps_the_past_learning_rates() {
    let (dir, graphs) = tiny_set(14);
    let decayed = |step_size: usize| {
        let mut c = TrainConfig { epochs: 4, ..small_config() };
        c.schedule.step_size = step_size;
        c.schedule.gamma = 0.5;
        c
    };
    let run = dir.path().join("run");
    let mut comm = SingleProcess;
    let constant = TrainConfig { epochs: 2, ..small_config() };
    Trainer::new(constant, &graphs, &run, false, &mut comm).unwrap().run(&Silent, &AtomicBool::new(false)).unwrap();
    // Halving from epoch 1 on would change learning rates already used: refused.
    match Trainer::new(decayed(1), &graphs, &run, true, &mut comm) {
        Ok(_) => panic!("a schedule that rewrites the past was accepted"),
        Err(e) => assert!(e.to_string().contains("schedule"), "{e}"),
    }
    // Halving from epoch 2 on: accepted, and the run is the one a fresh start with it gives.
    let mut resumed = Trainer::new(decayed(2), &graphs, &run, true, &mut comm).unwrap();
    resumed.run(&Silent, &AtomicBool::new(false)).unwrap();
    let mut comm_fresh = SingleProcess;
    let mut fresh = Trainer::new(decayed(2), &graphs, &dir.path().join("fresh"), false, &mut comm_fresh).unwrap();
    fresh.run(&Silent, &AtomicBool::new(false)).unwrap();
    assert!(
        resumed
            .executor()
            .params()
            .data
            .iter()
            .zip(&fresh.executor().params().data)
            .all(|(x, y)| x.to_bits() == y.to_bits()),
        "the resumed run with a later decay differs from a fresh run with it"
    );
    let lrs: Vec<f64> = RunDir::new(&run).read_metrics().unwrap().iter().map(|r| r.lr).collect();
    assert_eq!(lrs, [3e-3, 3e-3, 1.5e-3, 1.5e-3]);
}

#[test]
fn a_run_may_start_from_the_weights_of_another() {
    let (dir, graphs) = tiny_set(14);
    let first = dir.path().join("first");
    let mut comm = SingleProcess;
    let cfg = TrainConfig { epochs: 2, ..small_config() };
    Trainer::new(cfg.clone(), &graphs, &first, false, &mut comm)
        .unwrap()
        .run(&Silent, &AtomicBool::new(false))
        .unwrap();
    let best = RunDir::new(&first).best_path();
    let tuned = TrainConfig { init_weights: Some(best.clone()), pos_weight: 2.0, ..cfg.clone() };
    let mut comm_tuned = SingleProcess;
    let mut t = Trainer::new(tuned.clone(), &graphs, &dir.path().join("tuned"), false, &mut comm_tuned).unwrap();
    let mut expected = t.executor().params().clone();
    load_weights(&best, &mut expected).unwrap();
    let mut comm_fresh = SingleProcess;
    let fresh = Trainer::new(cfg.clone(), &graphs, &dir.path().join("fresh"), false, &mut comm_fresh).unwrap();
    assert_ne!(fresh.executor().params().data, expected.data, "the first run's best weights are its initial ones");
    assert_eq!(t.executor().params().data, expected.data, "the run did not start from the given weights");
    let events: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("tuned/events.json")).unwrap()).unwrap();
    assert!(events["init_weights"]["hash"].as_str().unwrap().starts_with("crc32:"), "{events}");
    // A resume continues from the checkpoint, whether or not the starting weights are named again.
    t.run(&Silent, &AtomicBool::new(false)).unwrap();
    let done = t.executor().params().data.clone();
    drop(t);
    for init in [None, Some(best.clone())] {
        let again = TrainConfig { init_weights: init, ..tuned.clone() };
        let mut comm_again = SingleProcess;
        let r = Trainer::new(again, &graphs, &dir.path().join("tuned"), true, &mut comm_again).unwrap();
        assert_eq!(r.executor().params().data, done, "a resume did not start from the checkpoint");
    }
    // Weights of another model shape: refused, naming the file.
    let mut wider = tuned.clone();
    wider.model.hidden = 48;
    match Trainer::new(wider, &graphs, &dir.path().join("wider"), false, &mut comm) {
        Ok(_) => panic!("weights of a 32-wide model initialised a 48-wide one"),
        Err(e) => assert!(e.to_string().contains("best.safetensors"), "{e}"),
    }
}

/// The summed gradient of one step over a graph's parts, as the trainer computes it.
fn parts_gradient(model: &mut InteractionGnn<f32>, parts: &[trackgnn_train::data::Sample]) -> (f64, Vec<f32>) {
    let mut cache = ForwardCache::default();
    model.params.zero_grad();
    let mut loss = 0.0;
    for s in parts {
        model.forward(&s.input, &mut cache);
        let mut dl = vec![0.0f32; s.input.num_edges()];
        loss += bce_with_logits(&cache.logits, &s.target, Some(&s.weight), 1.0, &mut dl) * s.loss_scale;
        dl.iter_mut().for_each(|g| *g *= s.loss_scale as f32);
        model.backward(&s.input, &mut cache, &dl);
    }
    (loss, model.params.grad.clone())
}

#[test]
fn secondary_weight_weighs_the_target_edges_of_secondaries_only() {
    let dir = tempfile::tempdir().unwrap();
    make_graphs(dir.path(), 2);
    let path = dir.path().join(graph_file_name(2));
    let g = trackgnn_graph::read_graph(&path).unwrap();
    let t = g.truth.as_ref().unwrap();
    assert_eq!(t.particle_vertex_r.len(), g.num_nodes(), "build_graph stores the vertex radii");
    let secondary: Vec<bool> = (0..g.num_edges())
        .map(|e| t.target[e] == 1 && t.particle_vertex_r[g.src[e] as usize] > trackgnn_graph::recipe::PROMPT_R)
        .collect();
    let n_secondary = secondary.iter().filter(|&&s| s).count();
    let n_target = t.target.iter().filter(|&&b| b == 1).count();
    assert!(n_secondary > 0 && n_secondary < n_target / 4, "{n_secondary} secondary of {n_target} target edges");
    let plain = load_parts(&path, W, 1, 0.0).unwrap().remove(0);
    let weighted = load_parts(&path, LossWeights { secondary: 4.0, ..W }, 1, 0.0).unwrap().remove(0);
    for (e, &is_secondary) in secondary.iter().enumerate() {
        let want = if is_secondary { 4.0 } else { plain.weight[e] };
        assert_eq!(weighted.weight[e], want, "edge {e}");
    }
    // A graph written before the radii were stored trains only with the weight 1.
    let mut old = g.clone();
    old.truth.as_mut().unwrap().particle_vertex_r.clear();
    let old_path = dir.path().join("old.graph");
    write_graph(&old_path, &old).unwrap();
    assert_eq!(load_parts(&old_path, W, 1, 0.0).unwrap()[0].weight, plain.weight);
    let err = load_parts(&old_path, LossWeights { secondary: 4.0, ..W }, 1, 0.0).unwrap_err().to_string();
    assert!(err.contains("old.graph") && err.contains("particle_vertex_r") && err.contains("rebuild"), "{err}");
}

#[test]
fn sectors_that_each_hold_the_whole_graph_give_its_loss_and_gradient() {
    let dir = tempfile::tempdir().unwrap();
    make_graphs(dir.path(), 1);
    let path = dir.path().join(graph_file_name(1));
    let whole = load_parts(&path, W, 1, 0.0).unwrap();
    // An overlap of ~π: every sector holds every node and edge, and owns a quarter of them.
    let parts = load_parts(&path, W, 4, 3.1).unwrap();
    assert_eq!(parts.len(), 4);
    assert!(parts.iter().all(|p| p.input.num_edges() == whole[0].input.num_edges()));
    let owned: f32 = parts.iter().map(|p| p.weight.iter().sum::<f32>()).sum();
    assert_eq!(owned, whole[0].weight.iter().sum::<f32>(), "each edge is owned by exactly one sector");
    let cfg = small_config();
    let mut model =
        InteractionGnn::new(cfg.model.clone(), whole[0].input.node_dim, whole[0].input.edge_dim, &mut Rng::new(5));
    let (l1, g1) = parts_gradient(&mut model, &whole);
    let (l4, g4) = parts_gradient(&mut model, &parts);
    assert!((l1 - l4).abs() <= 1e-6 * l1, "{l1} vs {l4}");
    let norm: f32 = g1.iter().map(|x| x * x).sum::<f32>().sqrt();
    let diff: f32 = g1.iter().zip(&g4).map(|(a, b)| (a - b) * (a - b)).sum::<f32>().sqrt();
    assert!(diff <= 1e-5 * norm, "gradient difference {diff} of norm {norm}");
    // Real overlaps: the sectors are smaller and together hold nearly every edge.
    let small = load_parts(&path, W, 4, 0.3).unwrap();
    let held: usize = small.iter().map(|p| p.weight.iter().filter(|&&w| w > 0.0).count()).sum();
    let all = whole[0].weight.iter().filter(|&&w| w > 0.0).count();
    assert!(small.iter().all(|p| p.input.num_edges() < all) && held as f64 >= 0.97 * all as f64, "{held} of {all}");
}

#[test]
fn a_memory_budget_splits_or_skips_the_big_graphs_alike_on_every_run() {
    let (dir, graphs) = tiny_set(12);
    let set = GraphSet::open(&graphs, 0).unwrap();
    let base = small_config();
    let probe = load_parts(&set.files[0].1, W, 1, 0.0).unwrap().remove(0);
    let model = CpuExecutor::new(
        InteractionGnn::new(base.model.clone(), probe.input.node_dim, probe.input.edge_dim, &mut Rng::new(1)),
        Default::default(),
    );
    let mut need: Vec<u64> = (0..set.len())
        .map(|i| {
            step_bytes(&model, set.nodes[i] as usize, set.edges[i] as usize, probe.input.node_dim, probe.input.edge_dim)
        })
        .collect();
    need.sort_unstable();
    let budget = need[need.len() / 2];
    let cfg = TrainConfig { epochs: 1, max_memory_bytes: budget, ..base.clone() };
    let mut comm = SingleProcess;
    let split = Trainer::new(cfg.clone(), &graphs, &dir.path().join("split"), false, &mut comm).unwrap();
    let all_train = split.train_graphs().to_vec();
    let over: Vec<usize> = all_train
        .iter()
        .copied()
        .filter(|&i| {
            step_bytes(&model, set.nodes[i] as usize, set.edges[i] as usize, probe.input.node_dim, probe.input.edge_dim)
                > budget
        })
        .collect();
    assert!(!over.is_empty(), "some training graph is over the median budget");
    for &i in &all_train {
        assert_eq!(split.parts()[i] > 1, over.contains(&i), "graph {i}");
    }
    let skip_cfg = TrainConfig { oversize: Oversize::Skip, ..cfg };
    let mut skip = Trainer::new(skip_cfg, &graphs, &dir.path().join("skip"), false, &mut comm).unwrap();
    let kept: Vec<usize> = all_train.iter().copied().filter(|i| !over.contains(i)).collect();
    assert_eq!(skip.train_graphs(), kept.as_slice());
    assert!(skip.parts().iter().all(|&k| k == 1));
    let out = skip.run(&Silent, &AtomicBool::new(false)).unwrap();
    assert_eq!(out.global_step, kept.len() as u64);
    // A budget no graph fits even when cut into the most sectors is an error naming a graph.
    let tiny = TrainConfig { max_memory_bytes: 1000, ..base.clone() };
    let e = Trainer::new(tiny, &graphs, &dir.path().join("tiny"), false, &mut comm).err().unwrap();
    assert!(e.to_string().contains(".graph") && e.to_string().contains("max_memory_bytes"), "{e}");
    // Balanced bins too small to fill one step would make epochs of no steps: refused.
    let starved =
        TrainConfig { sampler: trackgnn_train::config::Sampler::Balanced, sampler_bins: 8, graphs_per_step: 3, ..base };
    let e = Trainer::new(starved, &graphs, &dir.path().join("starved"), false, &mut comm).err().unwrap();
    assert!(e.to_string().contains("no full step"), "{e}");
}

#[test]
fn a_loss_spike_is_logged_and_handled_as_configured() {
    let (dir, graphs) = tiny_set(12);
    // Before step 12 every weight is scaled ×20: that step's loss jumps far beyond the median.
    let run_with = |action: SpikeAction, factor: f64| {
        let cfg = TrainConfig {
            epochs: 2,
            checkpoint_every_steps: 1,
            loss_spike_factor: factor,
            loss_spike_window: 4,
            loss_spike: action,
            ..small_config()
        };
        let run = dir.path().join(format!("{action:?}-{factor}"));
        let mut comm = SingleProcess;
        let mut t = Trainer::new(cfg, &graphs, &run, false, &mut comm).unwrap();
        t.inject_weight_scale = Some((12, 20.0));
        let out = t.run(&Silent, &AtomicBool::new(false)).unwrap();
        (out, RunDir::new(&run).read_steps().unwrap())
    };
    let (out, steps) = run_with(SpikeAction::Rollback, 3.0);
    let spiked: Vec<u64> = steps.iter().filter(|s| s.loss_spike).map(|s| s.global_step).collect();
    assert_eq!(spiked, vec![12], "the scaled step alone is a spike once the weights are back: {steps:?}");
    assert_eq!(out.loss_spikes, 1);
    // Back on the checkpoint's weights, the next step's loss is the run's usual.
    let (before, after) = (steps[10].loss, steps[12].loss);
    assert!(after < 2.0 * before, "loss {before} before the spike, {after} after the rollback");
    // Warn: logged, and the scaled weights train on (their losses stay spikes or near).
    let (out, steps) = run_with(SpikeAction::Warn, 3.0);
    assert!(steps[11].loss_spike && out.loss_spikes >= 1, "{steps:?}");
    // Off: nothing is flagged.
    let (out, steps) = run_with(SpikeAction::Rollback, 0.0);
    assert!(out.loss_spikes == 0 && steps.iter().all(|s| !s.loss_spike));
}
