//! The auxiliary pT head (`ModelConfig::aux_pt`): its parameters come after the model's own,
//! the gradient of BCE + λ·MSE equals central differences in f64 (with and without
//! checkpointing, every structure), checkpointing gives the bits of no checkpointing, and a
//! graph split across partitions gives the whole graph's loss and gradients.

mod common;

use std::sync::Arc;

use common::{random_graph, to_f32};
use trackgnn_engine::halo::{Partition, ThreadHalo};
use trackgnn_engine::loss::{bce_with_logits_over, mse_over};
use trackgnn_engine::{
    Checkpointing, ForwardCache, GraphInput, InteractionGnn, ModelConfig, Precision, Real, UpdateOrder,
};
use trackgnn_trackml::rng::Rng;

/// The auxiliary loss weight λ of these tests.
const LAMBDA: f64 = 0.7;

/// Regression targets (log10 pT-like) and the weights of the aux term: the counted true edges.
fn aux_targets<T: Real>(y: &[u8], w: &[T], seed: u64) -> (Vec<T>, Vec<T>, usize) {
    let mut rng = Rng::new(seed);
    let t: Vec<T> = y.iter().map(|_| T::from_f64(0.5 * rng.normal() + 0.3)).collect();
    let wa: Vec<T> = y.iter().zip(w).map(|(&y, &w)| if y == 1 && w != T::ZERO { T::ONE } else { T::ZERO }).collect();
    let count = wa.iter().filter(|&&v| v != T::ZERO).count();
    (t, wa, count)
}

/// The loss BCE + λ·MSE over `edges` and `count` (a part's share), and its two gradients.
#[allow(clippy::too_many_arguments)]
fn losses<T: Real>(
    cache: &ForwardCache<T>,
    y: &[u8],
    w: &[T],
    t: &[T],
    wa: &[T],
    edges: usize,
    count: usize,
) -> (f64, Vec<T>, Vec<T>) {
    let e = y.len();
    let (mut dl, mut da) = (vec![T::ZERO; e], vec![T::ZERO; e]);
    let bce = bce_with_logits_over(&cache.logits, y, Some(w), 2.0, edges, &mut dl);
    let mse = mse_over(&cache.aux, t, wa, count, &mut da);
    da.iter_mut().for_each(|v| *v *= T::from_f64(LAMBDA));
    (bce + LAMBDA * mse, dl, da)
}

/// A graph's labels and weights with its aux targets.
struct Case<T> {
    g: GraphInput<T>,
    y: Vec<u8>,
    w: Vec<T>,
    t: Vec<T>,
    wa: Vec<T>,
    count: usize,
}

impl<T: Real> Case<T> {
    fn loss(&self, m: &InteractionGnn<T>) -> f64 {
        let mut cache = ForwardCache::default();
        m.forward(&self.g, &mut cache);
        losses(&cache, &self.y, &self.w, &self.t, &self.wa, self.y.len(), self.count).0
    }

    /// Forward and backward into `m.params.grad` (zeroed first); the cache keeps the logits
    /// and predictions.
    fn step(&self, m: &mut InteractionGnn<T>, cache: &mut ForwardCache<T>) -> f64 {
        m.forward(&self.g, cache);
        let (l, dl, da) = losses(cache, &self.y, &self.w, &self.t, &self.wa, self.y.len(), self.count);
        m.params.zero_grad();
        m.backward_aux(&self.g, cache, &dl, Some(&da));
        l
    }
}

fn case64(n: usize, e: usize, seed: u64) -> Case<f64> {
    let (g, y, w) = random_graph(n, e, 3, 2, seed);
    let (t, wa, count) = aux_targets(&y, &w, seed + 1);
    Case { g, y, w, t, wa, count }
}

fn case32(c: &Case<f64>) -> Case<f32> {
    let (g, w) = to_f32(&c.g, &c.w);
    let t = c.t.iter().map(|&v| v as f32).collect();
    let wa = c.wa.iter().map(|&v| v as f32).collect();
    Case { g, y: c.y.clone(), w, t, wa, count: c.count }
}

fn with_aux(cfg: ModelConfig) -> ModelConfig {
    ModelConfig { aux_pt: true, ..cfg }
}

fn configs() -> Vec<ModelConfig> {
    vec![
        with_aux(ModelConfig { hidden: 4, iterations: 2, ..ModelConfig::default() }),
        with_aux(ModelConfig { hidden: 5, iterations: 2, ..ModelConfig::bench_spec() }),
        with_aux(ModelConfig { hidden: 4, iterations: 3, ..ModelConfig::acorn() }),
        with_aux(ModelConfig { hidden: 4, iterations: 3, recurrent: false, residual: false, ..ModelConfig::default() }),
        with_aux(ModelConfig { hidden: 4, iterations: 2, classifier_depth: 1, ..ModelConfig::default() }),
    ]
}

#[test]
fn the_head_comes_after_the_models_parameters_and_only_when_asked() {
    let cfg = ModelConfig { hidden: 8, iterations: 2, ..ModelConfig::default() };
    let plain = InteractionGnn::<f32>::new(cfg.clone(), 3, 2, &mut Rng::new(1));
    let aux = InteractionGnn::<f32>::new(with_aux(cfg), 3, 2, &mut Rng::new(1));
    assert!(!plain.has_aux_head() && aux.has_aux_head());
    assert!(plain.params.specs.iter().all(|s| !s.name.starts_with(InteractionGnn::<f32>::AUX_PREFIX)));
    // Same names, shapes, places and initial values; then the head.
    let k = plain.params.specs.len();
    assert_eq!(aux.params.specs[..k], plain.params.specs[..]);
    assert_eq!(aux.params.data[..plain.params.len()], plain.params.data[..]);
    let names: Vec<&str> = aux.params.specs[k..].iter().map(|s| s.name.as_str()).collect();
    assert!(names.iter().all(|n| n.starts_with("aux_pt.")), "{names:?}");
    assert!(names.contains(&"aux_pt.0.weight") && names.contains(&"aux_pt.2.bias"), "{names:?}");
    assert_eq!(aux.params.specs[k].shape, vec![8, 8]);
    assert_eq!(aux.params.specs.last().unwrap().shape, vec![1]);
}

/// Every parameter's gradient of BCE + λ·MSE equals central differences (relative error per
/// tensor < 1e-4), without checkpointing and with two modes.
#[test]
fn gradients_with_the_aux_head_equal_central_differences() {
    let c = case64(9, 24, 17);
    assert!(c.count > 2, "true edges to regress: {}", c.count);
    let mut worst = 0.0f64;
    for cfg in configs() {
        for mode in [Checkpointing::NONE, Checkpointing::PER_ITERATION, Checkpointing::every(2)] {
            let mut m = InteractionGnn::<f64>::new(cfg.clone(), 3, 2, &mut Rng::new(5));
            m.checkpointing = mode;
            c.step(&mut m, &mut ForwardCache::default());
            let analytic = m.params.grad.clone();
            let h = 1e-6;
            for s in m.params.specs.clone() {
                let (mut num2, mut ana2, mut diff2) = (0.0f64, 0.0f64, 0.0f64);
                for i in s.range() {
                    let orig = m.params.data[i];
                    m.params.data[i] = orig + h;
                    let lp = c.loss(&m);
                    m.params.data[i] = orig - h;
                    let lm = c.loss(&m);
                    m.params.data[i] = orig;
                    let fd = (lp - lm) / (2.0 * h);
                    num2 += fd * fd;
                    ana2 += analytic[i] * analytic[i];
                    diff2 += (fd - analytic[i]).powi(2);
                }
                let scale = num2.sqrt().max(ana2.sqrt());
                let rel = if scale < 1e-9 { diff2.sqrt() } else { diff2.sqrt() / scale };
                worst = worst.max(rel);
                assert!(rel < 1e-4, "{cfg:?} {mode}: tensor {} relative gradient error {rel:e}", s.name);
                if s.name.starts_with("aux_pt.") {
                    assert!(ana2 > 0.0, "{mode}: no gradient reached {}", s.name);
                }
            }
        }
    }
    eprintln!("aux head: worst relative gradient error {worst:e}");
}

/// The head's gradient reaches the whole network: with λ·MSE alone (the BCE's gradient left
/// out), the encoders get a gradient.
#[test]
fn the_aux_gradient_flows_into_the_network() {
    let c = case64(9, 24, 3);
    let mut m = InteractionGnn::<f64>::new(configs()[0].clone(), 3, 2, &mut Rng::new(5));
    let mut cache = ForwardCache::default();
    m.forward(&c.g, &mut cache);
    let (_, _, da) = losses(&cache, &c.y, &c.w, &c.t, &c.wa, c.y.len(), c.count);
    m.params.zero_grad();
    m.backward_aux(&c.g, &mut cache, &vec![0.0; c.y.len()], Some(&da));
    let norm = |prefix: &str| -> f64 {
        m.params
            .specs
            .iter()
            .filter(|s| s.name.starts_with(prefix))
            .flat_map(|s| &m.params.grad[s.range()])
            .map(|g| g * g)
            .sum()
    };
    assert!(norm("node_encoder") > 0.0 && norm("edge_network") > 0.0 && norm("aux_pt") > 0.0);
    assert_eq!(norm("edge_classifier"), 0.0);
}

/// Checkpointing (f32 and bf16 products) gives the logits, predictions and gradients of no
/// checkpointing bit for bit; inference's predictions are the forward's.
#[test]
fn checkpointing_gives_the_same_aux_step() {
    let c = case32(&case64(900, 6000, 12));
    for cfg in [
        with_aux(ModelConfig { hidden: 8, iterations: 5, ..ModelConfig::default() }),
        with_aux(ModelConfig {
            hidden: 8,
            iterations: 4,
            update_order: UpdateOrder::NodeFirst,
            ..ModelConfig::bench_spec()
        }),
    ] {
        let base = InteractionGnn::<f32>::new(cfg.clone(), 3, 2, &mut Rng::new(2));
        for precision in [Precision::F32, Precision::Bf16] {
            let run = |mode: Checkpointing| {
                let mut m = base.clone();
                m.set_precision(precision);
                m.checkpointing = mode;
                let mut cache = ForwardCache::default();
                for _ in 0..2 {
                    c.step(&mut m, &mut cache);
                }
                // Inference rounds no states: the forward's results unless they were rounded.
                if !mode.bf16_states() {
                    let (logits, aux) = m.infer_aux(&c.g, &mut ForwardCache::default());
                    assert!(logits == cache.logits, "{mode}: inference's logits differ");
                    assert!(aux == cache.aux, "{mode}: inference's predictions differ");
                }
                (cache.aux.clone(), m.params.grad.clone())
            };
            let reference = run(Checkpointing::NONE);
            assert_eq!(reference.0.len(), c.y.len());
            for mode in [Checkpointing::PER_ITERATION, Checkpointing::every(2), Checkpointing::every(3)] {
                let got = run(mode);
                let same = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same(&got.0, &reference.0) && same(&got.1, &reference.1), "{precision} {mode} differs");
            }
            // bf16 saved states: close, and the head is trained from the same rounded e_L.
            let got = run(Checkpointing::every(2).with_bf16_states());
            let d: f64 = got.1.iter().zip(&reference.1).map(|(a, b)| ((a - b) as f64).powi(2)).sum();
            let n: f64 = reference.1.iter().map(|b| (*b as f64).powi(2)).sum();
            // As in gradcheck.rs: a ReLU network is not smooth, rounding moves units across the kink.
            let tol = if cfg.activation == trackgnn_engine::ops::Activation::Relu { 1e-1 } else { 1e-2 };
            assert!((d / n).sqrt() < tol, "{precision} bf16 states: gradient off by {}", (d / n).sqrt());
        }
    }
}

/// A graph split into 2 and 3 partitions (halo exchange on threads; each true edge's aux term
/// counted by one partition) gives the whole graph's loss and gradients in f64.
#[test]
fn a_split_graph_gives_the_whole_graphs_aux_step() {
    let c = case64(300, 2000, 5);
    let e_all = c.y.len();
    for cfg in [configs()[0].clone(), configs()[2].clone()] {
        for mode in [Checkpointing::NONE, Checkpointing::every(2)] {
            let mut model = InteractionGnn::<f64>::new(cfg.clone(), 3, 2, &mut Rng::new(3));
            model.checkpointing = mode;
            let mut whole = model.clone();
            let whole_loss = c.step(&mut whole, &mut ForwardCache::default());
            for parts in [2usize, 3] {
                let mut rng = Rng::new(9);
                let owner: Vec<u32> = (0..300).map(|_| rng.below(parts as u64) as u32).collect();
                let partitions = Partition::split(300, &c.g.src, &c.g.dst, &owner, parts).unwrap();
                let halos = ThreadHalo::<f64>::group(&partitions);
                let ranks: Vec<(f64, Vec<f64>)> = std::thread::scope(|s| {
                    let handles: Vec<_> = partitions
                        .iter()
                        .zip(halos)
                        .map(|(p, halo)| {
                            let (mut m, c) = (model.clone(), &c);
                            s.spawn(move || {
                                let local = p.local_input(&c.g).with_halo(Arc::new(halo));
                                let counted = |v: Vec<f64>| -> Vec<f64> {
                                    v.iter().zip(&p.edge_counted).map(|(&v, &k)| if k { v } else { 0.0 }).collect()
                                };
                                let (y, t) = (p.edge_values(&c.y), p.edge_values(&c.t));
                                let (w, wa) = (counted(p.edge_values(&c.w)), counted(p.edge_values(&c.wa)));
                                let mut cache = ForwardCache::default();
                                m.forward(&local, &mut cache);
                                let (l, dl, da) = losses(&cache, &y, &w, &t, &wa, e_all, c.count);
                                m.params.zero_grad();
                                m.backward_aux(&local, &mut cache, &dl, Some(&da));
                                (l, m.params.grad)
                            })
                        })
                        .collect();
                    handles.into_iter().map(|h| h.join().expect("rank thread")).collect()
                });
                let loss: f64 = ranks.iter().map(|r| r.0).sum();
                let mut grad = vec![0.0; whole.params.grad.len()];
                for (_, g) in &ranks {
                    grad.iter_mut().zip(g).for_each(|(a, b)| *a += b);
                }
                let d: f64 = grad.iter().zip(&whole.params.grad).map(|(a, b)| (a - b).powi(2)).sum();
                let n: f64 = whole.params.grad.iter().map(|b| b * b).sum();
                let rel = (d / n).sqrt();
                assert!((loss - whole_loss).abs() < 1e-12 * whole_loss.abs().max(1.0), "{mode} P={parts}: loss");
                assert!(rel < 1e-12, "{mode} P={parts}: gradients off by {rel:e}");
            }
        }
    }
}
