//! What the engine's integration tests share: random graphs, one training step, and the f32 or
//! bf16 engine's gradients against the f64 one's.
#![allow(dead_code)] // each test file uses its own part

use trackgnn_engine::loss::bce_with_logits;
use trackgnn_engine::{ForwardCache, GraphInput, InteractionGnn, ModelConfig, Precision, Real};
use trackgnn_trackml::rng::Rng;

/// A random graph of n nodes and e edges (no self-loops), its labels (30% true) and loss weights
/// (10% zero).
pub fn random_graph(
    n: usize,
    e: usize,
    node_dim: usize,
    edge_dim: usize,
    seed: u64,
) -> (GraphInput<f64>, Vec<u8>, Vec<f64>) {
    let mut rng = Rng::new(seed);
    let x: Vec<f32> = (0..n * node_dim).map(|_| rng.normal() as f32).collect();
    let ea: Vec<f32> = (0..e * edge_dim).map(|_| rng.normal() as f32).collect();
    let mut src = Vec::new();
    let mut dst = Vec::new();
    while src.len() < e {
        let (s, d) = (rng.below(n as u64) as u32, rng.below(n as u64) as u32);
        if s != d {
            src.push(s);
            dst.push(d);
        }
    }
    let y: Vec<u8> = (0..e).map(|_| rng.bernoulli(0.3) as u8).collect();
    let w: Vec<f64> = (0..e).map(|_| if rng.bernoulli(0.1) { 0.0 } else { 1.0 }).collect();
    (GraphInput::new(n, &x, node_dim, &ea, edge_dim, &src, &dst), y, w)
}

/// The f32 copy of a random graph and its loss weights, for tests of the f32 engine.
pub fn to_f32(g: &GraphInput<f64>, w: &[f64]) -> (GraphInput<f32>, Vec<f32>) {
    let x: Vec<f32> = g.x.iter().map(|&v| v as f32).collect();
    let ea: Vec<f32> = g.edge_attr.iter().map(|&v| v as f32).collect();
    let g32 = GraphInput::new(g.num_nodes, &x, g.node_dim, &ea, g.edge_dim, &g.src, &g.dst);
    (g32, w.iter().map(|&v| v as f32).collect())
}

/// Forward, the loss (pos_weight 2) and the backward into `model.params.grad`, with `cache`'s
/// buffers (the logits stay in `cache.logits`); returns the loss.
pub fn step<T: Real>(
    model: &mut InteractionGnn<T>,
    g: &GraphInput<T>,
    y: &[u8],
    w: &[T],
    cache: &mut ForwardCache<T>,
) -> f64 {
    model.forward(g, cache);
    let mut dl = vec![T::from_f64(0.0); g.num_edges()];
    let l = bce_with_logits(&cache.logits, y, Some(w), 2.0, &mut dl);
    model.params.zero_grad();
    model.backward(g, cache, &dl);
    l
}

/// [`step`] with a fresh cache.
pub fn loss_and_grad(model: &mut InteractionGnn<f64>, g: &GraphInput<f64>, y: &[u8], w: &[f64]) -> f64 {
    step(model, g, y, w, &mut ForwardCache::default())
}

/// Per-tensor relative error ‖g − g_ref‖ / ‖g_ref‖ of the f32 engine's gradients in `precision`
/// with activations saved in `saved`, against the f64 engine's (whose gradients the checks above
/// hold to central differences).
pub fn gradient_errors(cfg: ModelConfig, precision: Precision, saved: Precision, seed: u64) -> Vec<(String, f64)> {
    let (g, y, w) = random_graph(400, 3000, 3, 2, seed);
    let (g32, w32) = to_f32(&g, &w);
    let mut reference = InteractionGnn::<f64>::new(cfg, 3, 2, &mut Rng::new(seed));
    // The f32 model holds exactly the f64 model's weights (rounded once, then copied back).
    let mut model: InteractionGnn<f32> = reference.cast();
    reference.params.data = model.params.data.iter().map(|&v| v as f64).collect();
    model.set_precision(precision);
    model.set_saved_activations(saved);
    loss_and_grad(&mut reference, &g, &y, &w);
    step(&mut model, &g32, &y, &w32, &mut ForwardCache::default());
    reference
        .params
        .specs
        .iter()
        .map(|s| {
            let r = &reference.params.grad[s.range()];
            let m = &model.params.grad[s.range()];
            let d: f64 = r.iter().zip(m).map(|(a, b)| (a - *b as f64).powi(2)).sum();
            let n: f64 = r.iter().map(|a| a * a).sum();
            (s.name.clone(), if n > 0.0 { (d / n).sqrt() } else { d.sqrt() })
        })
        .collect()
}
