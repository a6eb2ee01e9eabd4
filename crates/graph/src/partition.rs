//! Node owners for one graph split across ranks (domain parallelism, `trackgnn_engine::halo`):
//! contiguous φ sectors that balance the work, and the cut they make.

use crate::graph::Graph;

/// The owner (0 … `parts` − 1) of each node: `parts` contiguous φ sectors from −π, cut where
/// the running count of edge ends (each node weighing its degree plus one) passes k/`parts`
/// of the total, so that each rank's edges, which are its nodes' edges, come out nearly equal.
/// Every sector gets at least one node when the graph has `parts` nodes or more.
pub fn phi_owners(g: &Graph, parts: usize) -> Vec<u32> {
    let n = g.num_nodes();
    let parts = parts.max(1);
    let mut weight = vec![1u64; n];
    for (&s, &d) in g.src.iter().zip(&g.dst) {
        weight[s as usize] += 1;
        weight[d as usize] += 1;
    }
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_by(|&a, &b| g.phi[a as usize].total_cmp(&g.phi[b as usize]).then(a.cmp(&b)));
    let total: u64 = weight.iter().sum();
    let mut owner = vec![0u32; n];
    let (mut acc, mut part) = (0u64, 0usize);
    for (k, &v) in order.iter().enumerate() {
        // Move on when this sector has its share, or when the nodes left are just enough to give
        // every later sector one.
        let share_done = acc * parts as u64 >= total * (part as u64 + 1);
        let must_move = n - k <= parts - 1 - part;
        if part + 1 < parts && k > 0 && (share_done || must_move) {
            part += 1;
        }
        owner[v as usize] = part as u32;
        acc += weight[v as usize];
    }
    owner
}

/// The fraction of edges whose two ends have different owners.
pub fn cut_fraction(src: &[u32], dst: &[u32], owner: &[u32]) -> f64 {
    let cut = src.iter().zip(dst).filter(|&(&s, &d)| owner[s as usize] != owner[d as usize]).count();
    cut as f64 / src.len().max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(n: usize) -> Graph {
        Graph {
            phi: (0..n).map(|i| -3.1 + 6.2 * i as f32 / n as f32).collect(),
            r: vec![100.0; n],
            z: vec![0.0; n],
            src: (0..n as u32 - 1).collect(),
            dst: (1..n as u32).collect(),
            hit_id: (0..n as u64).collect(),
            ..Graph::default()
        }
    }

    #[test]
    fn sectors_are_contiguous_in_phi_balanced_and_cut_little() {
        let g = ring(1000);
        let owner = phi_owners(&g, 4);
        assert!(owner.windows(2).all(|w| w[1] == w[0] || w[1] == w[0] + 1), "contiguous in φ");
        for p in 0..4 {
            let count = owner.iter().filter(|&&o| o == p).count();
            assert!((240..=260).contains(&count), "sector {p}: {count} nodes");
        }
        assert!((cut_fraction(&g.src, &g.dst, &owner) - 3.0 / 999.0).abs() < 1e-12);
    }

    #[test]
    fn every_sector_gets_a_node_even_on_a_tiny_graph() {
        for n in 2..8 {
            let owner = phi_owners(&ring(n), 2);
            assert!(owner.contains(&0) && owner.contains(&1), "{n} nodes: {owner:?}");
        }
        let owner = phi_owners(&ring(3), 3);
        assert_eq!(owner, vec![0, 1, 2]);
    }
}
