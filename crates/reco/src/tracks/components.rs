//! Connected components of the kept edges with union-find.
//!
//! Union by size keeps trees shallow, path compression flattens them as they are walked, so
//! a pass over E edges costs O(E · α(N)) (Tarjan 1975). Edge direction is ignored. This is
//! the track building of the Exa.TrkX pipeline (`scipy.sparse.csgraph.connected_components`
//! on the edges above the cut).

use super::{NO_TRACK, ScoredEdges, TrackBuilderConfig, number_tracks};
use crate::error::Result;

/// Disjoint sets over `0..n` with union by size and path compression.
pub(crate) struct UnionFind {
    parent: Vec<u32>,
    size: Vec<u32>,
}

impl UnionFind {
    /// `n` singleton sets.
    pub(crate) fn new(n: usize) -> UnionFind {
        UnionFind { parent: (0..n as u32).collect(), size: vec![1; n] }
    }

    /// The root of `x`'s set; every node on the way is pointed straight at the root.
    pub(crate) fn find(&mut self, x: u32) -> u32 {
        let mut root = x;
        while self.parent[root as usize] != root {
            root = self.parent[root as usize];
        }
        let mut cur = x;
        while self.parent[cur as usize] != root {
            let next = self.parent[cur as usize];
            self.parent[cur as usize] = root;
            cur = next;
        }
        root
    }

    /// Merges the sets of `a` and `b`, hanging the smaller tree under the larger one's root
    /// (the lower root index on equal sizes, so the result is order-independent in shape).
    pub(crate) fn union(&mut self, a: u32, b: u32) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra == rb {
            return;
        }
        let (sa, sb) = (self.size[ra as usize], self.size[rb as usize]);
        let (big, small) = if sa > sb || (sa == sb && ra < rb) { (ra, rb) } else { (rb, ra) };
        self.parent[small as usize] = big;
        self.size[big as usize] = sa + sb;
    }
}

/// Connected components of the edges with score ≥ `config.score_cut` (direction ignored);
/// components of at least `config.min_hits` nodes are tracks, numbered as the
/// [module docs](super) say; other nodes get [`NO_TRACK`]. `config.method` is not read.
///
/// # Panics
/// If the slices of `edges` differ in length.
#[track_caller]
pub fn connected_components(edges: &ScoredEdges<'_>, config: &TrackBuilderConfig) -> Result<Vec<u32>> {
    edges.assert_shapes();
    config.validate()?;
    edges.check_nodes()?;
    let n = edges.num_nodes;
    let mut uf = UnionFind::new(n);
    for (s, d, _) in edges.kept(config.score_cut) {
        uf.union(s, d);
    }
    let roots: Vec<u32> = (0..n as u32).map(|i| uf.find(i)).collect();
    let min = config.min_hits as u32;
    let ids = number_tracks(&roots, |root| uf.size[root as usize] >= min);
    debug_assert!(ids.iter().zip(&roots).all(|(&t, &r)| (t == NO_TRACK) == (uf.size[r as usize] < min)));
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cc(n: usize, edges: &[(u32, u32, f32)], min_hits: usize) -> Vec<u32> {
        let src: Vec<u32> = edges.iter().map(|e| e.0).collect();
        let dst: Vec<u32> = edges.iter().map(|e| e.1).collect();
        let sc: Vec<f32> = edges.iter().map(|e| e.2).collect();
        let cfg = TrackBuilderConfig { min_hits, ..Default::default() };
        connected_components(&ScoredEdges::new(n, &src, &dst, &sc), &cfg).unwrap()
    }

    #[test]
    fn union_find_merges_and_counts() {
        let mut uf = UnionFind::new(6);
        uf.union(0, 1);
        uf.union(2, 3);
        uf.union(1, 3);
        uf.union(3, 0); // already joined
        assert_eq!(uf.find(0), uf.find(2));
        assert_ne!(uf.find(0), uf.find(4));
        let size = |uf: &mut UnionFind, x| {
            let r = uf.find(x);
            uf.size[r as usize]
        };
        assert_eq!(size(&mut uf, 2), 4);
        assert_eq!(size(&mut uf, 5), 1);
        // Path compression: after a find every node on the path points at the root.
        let r = uf.find(3);
        assert!((0..4).all(|i| uf.parent[i] == r));
    }

    #[test]
    fn long_chain_is_one_component_without_deep_recursion() {
        let n = 200_000u32;
        let edges: Vec<(u32, u32, f32)> = (0..n - 1).rev().map(|i| (i + 1, i, 0.9)).collect();
        let ids = cc(n as usize, &edges, 3);
        assert!(ids.iter().all(|&t| t == 1));
    }

    #[test]
    fn the_cut_and_min_hits_decide_the_tracks() {
        // 0-1-2 (kept), 3-4 (kept, too small), 5-6-7 joined by a 0.5 edge (kept: ≥ cut) and a
        // 0.49 edge (dropped), NaN edge dropped, self-loop on 8 ignored.
        let edges = [(0, 1, 0.9), (1, 2, 0.6), (3, 4, 0.99), (5, 6, 0.5), (6, 7, 0.49), (7, 9, f32::NAN), (8, 8, 1.0)];
        assert_eq!(cc(10, &edges, 3), [1, 1, 1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(cc(10, &edges, 2), [1, 1, 1, 2, 2, 3, 3, 0, 0, 0]);
        assert_eq!(cc(10, &edges, 1), [1, 1, 1, 2, 2, 3, 3, 4, 5, 6]);
    }

    #[test]
    fn direction_is_ignored() {
        let ids = cc(4, &[(1, 0, 0.9), (1, 2, 0.9), (3, 2, 0.9)], 3);
        assert_eq!(ids, [1, 1, 1, 1]);
    }
}
