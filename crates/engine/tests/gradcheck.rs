//! Gradient checks of the whole InteractionGNN in f64, over the configuration space: the fused
//! forward equals the naive one, and every parameter tensor's gradient equals central
//! differences (relative error < 1e-4). The bf16 paths' tolerance and their bit identity at any
//! thread count: `bf16_paths.rs`.

mod common;

use common::{loss_and_grad, random_graph, step, to_f32};
use trackgnn_engine::loss::bce_with_logits;
use trackgnn_engine::ops::{Activation, Aggr};
use trackgnn_engine::{ForwardCache, GraphInput, InteractionGnn, ModelConfig, Norm, Precision, UpdateOrder};
use trackgnn_trackml::rng::Rng;

fn loss_only(model: &InteractionGnn<f64>, g: &GraphInput<f64>, y: &[u8], w: &[f64]) -> f64 {
    let mut cache = ForwardCache::default();
    model.forward(g, &mut cache);
    let mut dl = vec![0.0; g.num_edges()];
    bce_with_logits(&cache.logits, y, Some(w), 2.0, &mut dl)
}

/// Checks one configuration; `sample` limits the entries checked per tensor (None: all).
fn check(cfg: ModelConfig, n: usize, e: usize, edge_dim: usize, sample: Option<usize>) {
    let label = format!("{cfg:?} edge_dim={edge_dim}");
    let (g, y, w) = random_graph(n, e, 3, edge_dim, 17);
    let mut model = InteractionGnn::<f64>::new(cfg, 3, edge_dim, &mut Rng::new(5));
    // Non-trivial LayerNorm parameters.
    let mut rng = Rng::new(9);
    for s in model.params.specs.clone() {
        if s.name.contains(".norm.") {
            for v in &mut model.params.data[s.range()] {
                *v += 0.3 * rng.normal();
            }
        }
    }
    // Fused forward == naive forward.
    let mut cache = ForwardCache::default();
    model.forward(&g, &mut cache);
    let naive = model.forward_naive(&g);
    let diff = cache.logits.iter().zip(&naive).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    assert!(diff < 1e-10, "{label}: fused vs naive forward max |Δ| {diff}");
    loss_and_grad(&mut model, &g, &y, &w);
    let analytic = model.params.grad.clone();
    let h = 1e-6;
    for s in model.params.specs.clone() {
        let idx: Vec<usize> = match sample {
            None => s.range().collect(),
            Some(k) => {
                let mut r = Rng::for_stream(&[s.offset as u64]);
                (0..k.min(s.len())).map(|_| s.offset + r.below(s.len() as u64) as usize).collect()
            }
        };
        let (mut num2, mut ana2, mut diff2) = (0.0f64, 0.0f64, 0.0f64);
        for i in idx {
            let orig = model.params.data[i];
            model.params.data[i] = orig + h;
            let lp = loss_only(&model, &g, &y, &w);
            model.params.data[i] = orig - h;
            let lm = loss_only(&model, &g, &y, &w);
            model.params.data[i] = orig;
            let fd = (lp - lm) / (2.0 * h);
            num2 += fd * fd;
            ana2 += analytic[i] * analytic[i];
            diff2 += (fd - analytic[i]).powi(2);
        }
        let scale = num2.sqrt().max(ana2.sqrt());
        let rel = if scale < 1e-9 { diff2.sqrt() } else { diff2.sqrt() / scale };
        assert!(rel < 1e-4, "{label}: tensor {} relative gradient error {rel:e} (|g| {:e})", s.name, ana2.sqrt());
    }
}

fn small() -> ModelConfig {
    ModelConfig { hidden: 4, iterations: 2, ..ModelConfig::default() }
}

#[test]
fn gradients_of_the_default_and_reference_models() {
    check(small(), 9, 24, 0, None);
    check(ModelConfig { hidden: 5, ..ModelConfig::bench_spec() }, 9, 24, 0, None);
    check(ModelConfig { hidden: 4, iterations: 2, ..ModelConfig::acorn() }, 9, 24, 2, None);
}

#[test]
fn gradients_for_every_activation_norm_and_depth() {
    for act in [Activation::Relu, Activation::Silu, Activation::Tanh] {
        for norm in [Norm::None, Norm::Affine, Norm::NoAffine] {
            check(ModelConfig { activation: act, output_activation: act, norm, ..small() }, 8, 20, 0, None);
        }
    }
    for (depth, cls) in [(1, 1), (3, 2), (2, 4)] {
        check(ModelConfig { mlp_depth: depth, classifier_depth: cls, ..small() }, 8, 20, 0, None);
    }
    check(ModelConfig { output_norm: false, output_activation: Activation::Identity, ..small() }, 8, 20, 0, None);
}

#[test]
fn gradients_for_every_aggregation_and_structure() {
    for aggs in [vec![Aggr::Sum], vec![Aggr::Mean], vec![Aggr::Max], vec![Aggr::Std], vec![Aggr::Std, Aggr::Max]] {
        check(ModelConfig { aggregation: aggs, ..small() }, 8, 20, 0, None);
    }
    for recurrent in [true, false] {
        for residual in [true, false] {
            check(ModelConfig { recurrent, residual, ..small() }, 8, 20, 3, None);
        }
    }
}

fn node_first() -> ModelConfig {
    ModelConfig { update_order: UpdateOrder::NodeFirst, ..small() }
}

#[test]
fn gradients_with_nodes_updated_first() {
    // acorn's order: every structural variant, each aggregation, each norm, edge features.
    check(ModelConfig { hidden: 4, iterations: 3, ..ModelConfig::acorn() }, 9, 24, 0, None);
    for recurrent in [true, false] {
        for residual in [true, false] {
            check(ModelConfig { recurrent, residual, ..node_first() }, 8, 20, 3, None);
        }
    }
    for aggs in [vec![Aggr::Sum], vec![Aggr::Mean], vec![Aggr::Max], vec![Aggr::Std], vec![Aggr::Max, Aggr::Sum]] {
        check(ModelConfig { aggregation: aggs, ..node_first() }, 8, 20, 0, None);
    }
    for norm in [Norm::None, Norm::Affine] {
        let act = Activation::Relu;
        check(ModelConfig { norm, activation: act, output_activation: act, ..node_first() }, 8, 20, 0, None);
    }
    check(ModelConfig { mlp_depth: 1, classifier_depth: 1, iterations: 1, ..node_first() }, 8, 20, 2, None);
    // Several tiles and gradient chunks.
    check(ModelConfig { hidden: 6, iterations: 2, ..node_first() }, 1500, 9000, 2, Some(6));
}

#[test]
fn the_two_update_orders_are_different_functions_of_the_same_parameters() {
    let (g, _, _) = random_graph(30, 90, 3, 0, 3);
    let edge_first = InteractionGnn::<f64>::new(small(), 3, 0, &mut Rng::new(7));
    let mut nodes = edge_first.clone();
    nodes.cfg.update_order = UpdateOrder::NodeFirst;
    let (a, b) = (edge_first.forward_naive(&g), nodes.forward_naive(&g));
    let diff = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
    assert!(diff > 1e-3, "the order changes nothing: max |Δ| {diff}");
    // The fused forward follows the order too (the f64 checks compare it with the naive one).
    let mut cache = ForwardCache::default();
    nodes.forward(&g, &mut cache);
    let fused = cache.logits.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
    assert!(fused < 1e-10, "node-first fused vs naive: {fused}");
}

#[test]
fn the_unfused_forward_follows_the_update_order() {
    // `bench engine unfused` times forward_unfused: it must compute the same function.
    let (g, _, _) = random_graph(40, 200, 3, 2, 8);
    for update_order in [UpdateOrder::EdgeFirst, UpdateOrder::NodeFirst] {
        let m = InteractionGnn::<f64>::new(ModelConfig { update_order, ..small() }, 3, 2, &mut Rng::new(3));
        let mut cache = ForwardCache::default();
        m.forward(&g, &mut cache);
        let d = m.forward_unfused(&g).iter().zip(&cache.logits).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert!(d < 1e-10, "{update_order}: unfused vs fused max |Δ| {d}");
    }
}

#[test]
fn gradients_across_tiles_and_chunks() {
    // More rows than a tile (512) and than a gradient chunk (4096): sampled entries.
    check(ModelConfig { hidden: 6, iterations: 1, ..ModelConfig::default() }, 1500, 9000, 2, Some(6));
    // A one-layer classifier (its first layer is 1 wide) across several gradient chunks:
    // regression for a dz buffer split as if it were H wide (found by tools/parity.sh).
    let cfg = ModelConfig { hidden: 6, iterations: 1, classifier_depth: 1, ..ModelConfig::default() };
    check(cfg, 1500, 9000, 0, Some(6));
}

#[test]
fn checkpointing_gives_the_same_gradients() {
    use trackgnn_engine::Checkpointing;
    // Several tiles and gradient chunks, every structural variant that changes the backward.
    for cfg in [
        ModelConfig { hidden: 8, iterations: 5, ..ModelConfig::default() },
        ModelConfig { hidden: 8, iterations: 4, recurrent: false, residual: false, ..ModelConfig::default() },
        ModelConfig { hidden: 8, ..ModelConfig::bench_spec() },
        ModelConfig { hidden: 8, iterations: 5, ..ModelConfig::acorn() },
        ModelConfig { hidden: 8, iterations: 4, update_order: UpdateOrder::NodeFirst, ..ModelConfig::bench_spec() },
    ] {
        let (g, y, w) = random_graph(900, 6000, 3, 2, 12);
        let (g32, w32) = to_f32(&g, &w);
        let base = InteractionGnn::<f32>::new(cfg.clone(), 3, 2, &mut Rng::new(2));
        let run_in = |precision: Precision, mode: Checkpointing| {
            let mut m = base.clone();
            m.set_precision(precision);
            m.checkpointing = mode;
            let mut cache = ForwardCache::default();
            // Twice, so buffers reused from a previous step do not change anything.
            for _ in 0..2 {
                step(&mut m, &g32, &y, &w32, &mut cache);
            }
            (cache.logits.clone(), m.params.grad.clone())
        };
        let run = |mode: Checkpointing| run_in(Precision::F32, mode);
        // In bf16 too, where the recomputed activations are rounded as the saved ones are.
        for precision in [Precision::F32, Precision::Bf16] {
            let reference = run_in(precision, Checkpointing::NONE);
            for mode in [Checkpointing::PER_ITERATION, Checkpointing::every(2), Checkpointing::every(3)] {
                let got = run_in(precision, mode);
                let same_logits = got.0.iter().zip(&reference.0).all(|(a, b)| a.to_bits() == b.to_bits());
                let same_grads = got.1.iter().zip(&reference.1).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same_logits && same_grads, "{precision} {mode} differs from no checkpointing for {cfg:?}");
            }
        }
        let reference = run(Checkpointing::NONE);
        // bf16 saved states: the gradient of a slightly different function (the states rounded),
        // so close to, not equal to, the f32 one; and deterministic under buffer reuse (`run`
        // steps twice with one cache, so a stale buffer would show as a difference here).
        let rel = |a: &[f32], b: &[f32]| {
            let d: f64 = a.iter().zip(b).map(|(x, y)| ((x - y) as f64).powi(2)).sum();
            let n: f64 = b.iter().map(|y| (*y as f64).powi(2)).sum();
            (d / n).sqrt()
        };
        for mode in [Checkpointing::PER_ITERATION, Checkpointing::every(2), Checkpointing::every(3)] {
            let mode = mode.with_bf16_states();
            let got = run(mode);
            let (dl, dg) = (rel(&got.0, &reference.0), rel(&got.1, &reference.1));
            // A ReLU network is not smooth: rounding moves some units across the kink.
            let tol = if cfg.activation == trackgnn_engine::ops::Activation::Relu { 1e-1 } else { 1e-2 };
            assert!(dl < 3e-2 && dg < tol, "{mode}: logits off by {dl}, gradient by {dg} for {cfg:?}");
            assert!(dg > 0.0, "{mode}: no rounding happened");
            let again = run(mode);
            assert!(again.1.iter().zip(&got.1).all(|(a, b)| a.to_bits() == b.to_bits()), "{mode} not repeatable");
        }
    }
}

#[test]
fn inference_gives_the_forwards_logits_from_two_rolling_states() {
    for update_order in [UpdateOrder::EdgeFirst, UpdateOrder::NodeFirst] {
        inference_matches_forward(ModelConfig { hidden: 8, iterations: 6, update_order, ..ModelConfig::default() });
    }
}

fn inference_matches_forward(cfg: ModelConfig) {
    use trackgnn_engine::Checkpointing;
    let (g, y, w) = random_graph(900, 6000, 3, 2, 21);
    let (g32, w32) = to_f32(&g, &w);
    let mut m = InteractionGnn::<f32>::new(cfg, 3, 2, &mut Rng::new(4));
    m.checkpointing = Checkpointing::PER_ITERATION;
    let mut cache = ForwardCache::default();
    m.forward(&g32, &mut cache);
    let reference = cache.logits.clone();
    let trained_bytes = m.engine_bytes(&cache);
    // The cache of a training step, reused: stale states must not change the logits.
    let mut dl = vec![0.0f32; g32.num_edges()];
    bce_with_logits(&cache.logits, &y, Some(&w32), 1.0, &mut dl);
    m.backward(&g32, &mut cache, &dl);
    let logits = m.infer(&g32, &mut cache);
    assert!(logits.iter().zip(&reference).all(|(a, b)| a.to_bits() == b.to_bits()), "inference differs from forward");
    let fresh = {
        let mut c = ForwardCache::default();
        m.infer(&g32, &mut c);
        m.engine_bytes(&c)
    };
    // Per-iteration checkpointing keeps 7 states of each kind; inference rolls through 2.
    assert!(fresh * 2 < trained_bytes, "fresh inference {fresh} B vs forward {trained_bytes} B");
}

#[test]
fn memory_estimate_matches_the_counted_buffers() {
    use trackgnn_engine::Checkpointing;
    for cfg in [
        ModelConfig { hidden: 16, iterations: 4, ..ModelConfig::default() },
        ModelConfig { hidden: 8, ..ModelConfig::bench_spec() },
        ModelConfig { hidden: 16, iterations: 4, ..ModelConfig::acorn() },
    ] {
        for ((n, e), precision) in [(600, 9000), (3000, 6000)].into_iter().zip([Precision::F32, Precision::Bf16]) {
            let (g, y, w) = random_graph(n, e, 3, 2, 5);
            let (g32, w32) = to_f32(&g, &w);
            for mode in [
                Checkpointing::NONE,
                Checkpointing::PER_ITERATION,
                Checkpointing::every(3),
                Checkpointing::PER_ITERATION.with_bf16_states(),
                Checkpointing::every(3).with_bf16_states(),
            ] {
                let mut m = InteractionGnn::<f32>::new(cfg.clone(), 3, 2, &mut Rng::new(1));
                m.checkpointing = mode;
                m.set_precision(precision);
                let mut cache = ForwardCache::default();
                m.forward(&g32, &mut cache);
                let mut dl = vec![0.0f32; e];
                bce_with_logits(&cache.logits, &y, Some(&w32), 1.0, &mut dl);
                m.backward(&g32, &mut cache, &dl);
                let (counted, predicted) = (m.engine_bytes(&cache) as f64, m.estimate_step_bytes(n, e) as f64);
                assert!(
                    (predicted / counted - 1.0).abs() < 0.25,
                    "{mode} {precision} n={n} e={e}: predicted {predicted} counted {counted}"
                );
            }
        }
    }
}

/// The metric-learning embedding: a [`DenseNet`] under the hinge loss on pairs (true pairs
/// pulled together, false ones inside the margin pushed out), in both forms of the false
/// pairs' term and with a weight on the true pairs. Every parameter's gradient equals central
/// differences, and the loss has both kinds of pairs active.
#[test]
fn embedding_net_with_the_hinge_loss_matches_central_differences() {
    use trackgnn_engine::loss::{HingeForm, HingeOptions, hinge_pairs, hinge_pairs_with};
    use trackgnn_engine::mlp::MlpCache;
    use trackgnn_engine::{DenseNet, DenseNetConfig};
    let (rows, din) = (40, 5);
    let mut rng = Rng::new(3);
    let x: Vec<f64> = (0..rows * din).map(|_| rng.normal()).collect();
    let cfg = DenseNetConfig { hidden: 7, hidden_layers: 2, out: 3 };
    let mut net = DenseNet::<f64>::new(&cfg, din, &mut Rng::new(4));
    let mut a = Vec::new();
    let mut b = Vec::new();
    let mut truth = Vec::new();
    for p in 0..60 {
        a.push(rng.below(rows as u64) as u32);
        b.push(rng.below(rows as u64) as u32);
        truth.push(p % 3 == 0);
    }
    let margin = 1.0;
    let all = [
        HingeOptions { margin, form: HingeForm::SquaredDistance, pos_weight: 1.0 },
        HingeOptions { margin, form: HingeForm::Distance, pos_weight: 3.0 },
    ];
    for opts in all {
        let loss = |net: &DenseNet<f64>| {
            let e = net.infer(&x);
            let mut d = vec![0.0; e.len()];
            hinge_pairs_with(&e, 3, &a, &b, &truth, &opts, &mut d)
        };
        let mut cache = MlpCache::default();
        let e = net.forward(&x, &mut cache);
        // Both branches of the hinge are exercised: some false pairs inside the margin, some out.
        let d2 = |p: usize| (0..3).map(|k| (e[a[p] as usize * 3 + k] - e[b[p] as usize * 3 + k]).powi(2)).sum::<f64>();
        let inside = (0..60).filter(|&p| !truth[p] && d2(p) < margin * margin).count();
        assert!(inside > 0 && inside < 40, "{inside} false pairs inside the margin");
        let mut de = vec![0.0; e.len()];
        hinge_pairs_with(&e, 3, &a, &b, &truth, &opts, &mut de);
        if opts.form == HingeForm::SquaredDistance {
            let mut old = vec![0.0; e.len()];
            hinge_pairs(&e, 3, &a, &b, &truth, margin, &mut old);
            assert!(
                old.iter().zip(&de).all(|(o, n)| (o - n).abs() < 1e-12),
                "hinge_pairs is the squared-distance form"
            );
        }
        net.params.zero_grad();
        net.backward(&x, &cache, &de);
        let analytic = net.params.grad.clone();
        let h = 1e-6;
        for s in net.params.specs.clone() {
            let (mut diff2, mut num2) = (0.0f64, 0.0f64);
            for i in s.range() {
                let orig = net.params.data[i];
                net.params.data[i] = orig + h;
                let lp = loss(&net);
                net.params.data[i] = orig - h;
                let lm = loss(&net);
                net.params.data[i] = orig;
                let fd = (lp - lm) / (2.0 * h);
                diff2 += (fd - analytic[i]).powi(2);
                num2 += fd * fd;
            }
            // The last bias cancels in every difference e_a − e_b: its gradient is 0 and its
            // central differences are rounding, so it is held to an absolute bound.
            let rel = diff2.sqrt() / num2.sqrt().max(1e-9);
            assert!(
                rel < 1e-4 || (num2.sqrt() < 1e-8 && diff2.sqrt() < 1e-8),
                "{opts:?} tensor {}: relative gradient error {rel:e} (|fd| {:e})",
                s.name,
                num2.sqrt()
            );
        }
    }
}
