//! What the device checks share, here and on a GPU (`examples/gpu_parity.rs`): the model's
//! option sets and random graphs with the awkward cases in them.

use trackgnn_engine::ops::{Activation, Aggr};
use trackgnn_engine::{GraphInput, ModelConfig, Norm, UpdateOrder};
use trackgnn_trackml::rng::Rng;

/// The option sets, each with its edge feature width: trackgnn's default model, acorn's,
/// BENCH_SPEC's, and one with the rest of the options (edge features, depth 3, per-iteration
/// networks, no norm, Tanh and identity, std and max aggregation, nodes first, the auxiliary
/// head).
pub fn option_sets() -> Vec<(&'static str, ModelConfig, usize)> {
    let other = ModelConfig {
        hidden: 48,
        iterations: 3,
        mlp_depth: 3,
        classifier_depth: 2,
        activation: Activation::Tanh,
        output_activation: Activation::Identity,
        norm: Norm::None,
        output_norm: false,
        aggregation: vec![Aggr::Std, Aggr::Max],
        recurrent: false,
        residual: true,
        update_order: UpdateOrder::NodeFirst,
        aux_pt: true,
    };
    vec![
        ("default", ModelConfig::default(), 0),
        ("acorn", ModelConfig::acorn(), 0),
        ("bench_spec", ModelConfig::bench_spec(), 0),
        ("other", other, 2),
    ]
}

/// A random graph of `n` nodes (3 features) and `e` edges with `edge_dim` edge features, and
/// random labels: repeated pairs, self-loops, and three nodes without edges (empty
/// aggregations).
pub fn random_graph(n: usize, e: usize, edge_dim: usize, seed: u64) -> (GraphInput<f32>, Vec<u8>) {
    let mut rng = Rng::new(seed);
    let node = |rng: &mut Rng| rng.below(n.saturating_sub(3).max(1) as u64) as u32;
    let src: Vec<u32> = (0..e).map(|_| node(&mut rng)).collect();
    let dst: Vec<u32> = (0..e).map(|_| node(&mut rng)).collect();
    let x: Vec<f32> = (0..n * 3).map(|_| rng.range(-1.0, 1.0) as f32).collect();
    let ea: Vec<f32> = (0..e * edge_dim).map(|_| rng.range(-1.0, 1.0) as f32).collect();
    let y: Vec<u8> = (0..e).map(|_| u8::from(rng.bernoulli(0.3))).collect();
    (GraphInput::new(n, &x, 3, &ea, edge_dim, &src, &dst), y)
}

/// The largest |a − b| over the largest |b| (at least 1e-3): a tensor's error relative to its
/// scale.
pub fn max_rel_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "tensor lengths");
    let scale = b.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-3);
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max) / scale
}
