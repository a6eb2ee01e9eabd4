//! The memory budget of a training step (`--max-memory`): which graphs fit, and into how many
//! φ sectors a graph that does not fit is cut (or whether it is skipped).
//!
//! The decision uses only the graph headers (node and edge counts), the model and the
//! configuration, so every rank of a data-parallel run reaches the same one without talking:
//! all ranks take the same number of steps and none waits forever at the all-reduce.

use trackgnn_engine::GnnExecutor;

pub use trackgnn_model::config::Oversize;

/// Most sectors a graph is cut into before it counts as not fitting at all.
pub const MAX_PARTS: usize = 64;

/// Bytes of one training step on a graph of `n` nodes and `e` edges: the engine's buffers
/// ([`GnnExecutor::estimate_step_bytes`], parameters and gradients included), the
/// optimiser's two moments, and the graph input (features, indices, both adjacency lists,
/// labels, loss weights and gradient of the logits).
pub fn step_bytes(model: &dyn GnnExecutor, n: usize, e: usize, node_dim: usize, edge_dim: usize) -> u64 {
    let input = n * (node_dim * 4 + 2 * 4 + 2 * 4) + e * (edge_dim * 4 + 2 * 4 + 2 * 4 + 2 + 4 + 4);
    (model.estimate_step_bytes(n, e) + 2 * model.params().len() * 4 + input) as u64
}

/// Fraction of a graph's nodes (and roughly of its edges) in each of `k` φ sectors grown by
/// `overlap_phi` radians on each side.
pub fn sector_fraction(k: usize, overlap_phi: f64) -> f64 {
    if k <= 1 { 1.0 } else { (1.0 / k as f64 + overlap_phi / std::f64::consts::PI).min(1.0) }
}

/// The number of φ sectors that bring a step under `budget` bytes (1: the whole graph fits), or
/// `None` if even [`MAX_PARTS`] sectors do not. A 10% margin covers the spread of sector sizes.
pub fn parts_needed(
    model: &dyn GnnExecutor,
    (n, e): (usize, usize),
    (node_dim, edge_dim): (usize, usize),
    budget: u64,
    overlap_phi: f64,
) -> Option<usize> {
    (1..=MAX_PARTS).find(|&k| {
        let f = sector_fraction(k, overlap_phi);
        let margin = if k == 1 { 1.0 } else { 1.1 };
        let (nk, ek) = ((n as f64 * f * margin).ceil() as usize, (e as f64 * f * margin).ceil() as usize);
        step_bytes(model, nk.min(n), ek.min(e), node_dim, edge_dim) <= budget
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use trackgnn_engine::optim::AdamWConfig;
    use trackgnn_engine::{CpuExecutor, InteractionGnn, ModelConfig};
    use trackgnn_trackml::rng::Rng;

    fn model() -> CpuExecutor {
        let cfg = ModelConfig { hidden: 16, iterations: 2, ..ModelConfig::default() };
        CpuExecutor::new(InteractionGnn::new(cfg, 3, 4, &mut Rng::new(1)), AdamWConfig::default())
    }

    #[test]
    fn bigger_graphs_need_more_parts_and_a_tiny_budget_none() {
        let m = model();
        let whole = step_bytes(&m, 10_000, 100_000, 3, 4);
        assert!(whole > step_bytes(&m, 1_000, 10_000, 3, 4));
        assert_eq!(parts_needed(&m, (10_000, 100_000), (3, 4), whole, 0.1), Some(1));
        let k = parts_needed(&m, (10_000, 100_000), (3, 4), whole / 3, 0.1).unwrap();
        assert!((3..=6).contains(&k), "{k}");
        let k8 = parts_needed(&m, (20_000, 200_000), (3, 4), whole / 3, 0.1).unwrap();
        assert!(k8 > k, "{k8} vs {k}");
        assert_eq!(parts_needed(&m, (10_000, 100_000), (3, 4), 1000, 0.1), None);
    }

    #[test]
    fn sector_fraction_counts_the_overlap() {
        assert_eq!(sector_fraction(1, 0.3), 1.0);
        assert!((sector_fraction(4, 0.0) - 0.25).abs() < 1e-12);
        assert!(sector_fraction(4, 0.3) > 0.25 && sector_fraction(100, 4.0) == 1.0);
    }
}
