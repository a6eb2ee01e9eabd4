//! The walk-through: tracks as paths along the best-scoring edges.
//!
//! After acorn's "CC & walk" track builder (and the Exa.TrkX `walkthrough`): where connected
//! components would merge two tracks that one fake edge joins, a walk that at every node
//! takes the outgoing edge of highest score keeps them apart.
//!
//! # The algorithm
//! 1. Keep the edges with score ≥ `score_cut` (self-loops dropped). Every kept edge points
//!    the way a particle crosses its hits, outward ([`ScoredEdges::outward`]: by r, or by |z|
//!    on one end-cap disk), whatever its stored direction (a pair then present both ways is
//!    one edge, the better score): graph builders may store a pair either way. The outgoing
//!    kept edges of each node are ordered by score, highest first (ties: lower destination
//!    index first).
//! 2. Start nodes, in this order: every *source* (no incoming kept edge, isolated nodes
//!    included), innermost first (by r, then node index); then every other node in a
//!    topological order of the kept edges (Kahn's algorithm taking the innermost available
//!    node first), then nodes on cycles by (r, index). Sources first means whole tracks are
//!    walked before the fragments a branching leaves behind.
//! 3. From each start node not yet used, walk: at the last node of the path, the candidates
//!    are its outgoing kept edges to nodes not used by an earlier track and not on the path.
//!    With no candidate the path ends. Otherwise the best candidate is followed; when
//!    `branch_cut` is set, every other candidate with score ≥ `branch_cut` is explored too
//!    (depth first, best first, at most `max_paths` paths per start), and the longest path
//!    wins (ties: the one found first, i.e. the one with the better scores at the first
//!    branching).
//! 4. If that path has at least `min_hits` nodes it becomes a track and all its nodes are
//!    used; otherwise only its start node is marked used, so its other nodes stay
//!    available to later starts (as in acorn).
//!
//! Tracks are then numbered as the [module docs](super) say. Everything is iterative (no
//! recursion), so long paths cannot overflow the stack.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{ScoredEdges, TrackBuilderConfig, number_tracks};
use crate::error::Result;

/// The kept edges in compressed rows by source, each row sorted best score first.
pub(crate) struct Adjacency {
    start: Vec<usize>,
    dst: Vec<u32>,
    score: Vec<f32>,
    pub(crate) indegree: Vec<u32>,
}

impl Adjacency {
    /// The edges of `edges` with score ≥ `cut` (self-loops dropped), each pointing the way a
    /// particle crosses its hits ([`ScoredEdges::outward`]) whatever its stored direction; a
    /// node pair then present in both directions is one edge, with the better score.
    pub(crate) fn new(edges: &ScoredEdges<'_>, cut: f64) -> Adjacency {
        let n = edges.num_nodes;
        // Graph builders store a hit pair in either direction (the geometric builder's layer
        // pairs admitted both ways and deduplicated, kNN graphs): walking the stored
        // directions broke tracks wherever they changed.
        let mut kept: Vec<(u32, u32, f32)> = edges
            .kept(cut)
            .map(|(s, d, sc)| {
                let (s, d) = edges.outward(s, d);
                (s, d, sc)
            })
            .collect();
        kept.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)).then(b.2.total_cmp(&a.2)));
        kept.dedup_by_key(|e| (e.0, e.1));
        // By source, then best score first, then destination: independent of input order.
        kept.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.2.total_cmp(&a.2)).then(a.1.cmp(&b.1)));
        let mut start = vec![0usize; n + 1];
        let mut indegree = vec![0u32; n];
        for &(s, d, _) in &kept {
            start[s as usize + 1] += 1;
            indegree[d as usize] += 1;
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let dst = kept.iter().map(|e| e.1).collect();
        let score = kept.iter().map(|e| e.2).collect();
        Adjacency { start, dst, score, indegree }
    }

    /// The kept edges out of `node` as (destination, score), best score first (ties: lower
    /// destination first).
    pub(crate) fn out(&self, node: u32) -> impl Iterator<Item = (u32, f32)> + '_ {
        let r = self.start[node as usize]..self.start[node as usize + 1];
        self.dst[r.clone()].iter().copied().zip(self.score[r].iter().copied())
    }
}

/// A sort key: innermost first (by r in a total order), then node index.
pub(crate) fn order_key(r: Option<&[f32]>, node: u32) -> u64 {
    let bits = r.map_or(0, |r| {
        // Map the f32 bit pattern to an unsigned key with the same order (total_cmp order).
        let b = r[node as usize].to_bits();
        if b >> 31 == 1 { !b } else { b | 0x8000_0000 }
    });
    (u64::from(bits) << 32) | u64::from(node)
}

/// The order in which nodes are tried as start nodes (step 2 of the module docs).
fn start_order(adj: &Adjacency, r: Option<&[f32]>) -> Vec<u32> {
    let n = adj.indegree.len();
    let mut sources: Vec<u64> =
        (0..n as u32).filter(|&i| adj.indegree[i as usize] == 0).map(|i| order_key(r, i)).collect();
    sources.sort_unstable();
    let mut order: Vec<u32> = sources.iter().map(|&k| k as u32).collect();
    // Kahn's algorithm; the heap hands out the innermost available node first.
    let mut indeg = adj.indegree.clone();
    let mut heap: BinaryHeap<Reverse<u64>> = sources.into_iter().map(Reverse).collect();
    let mut done = vec![false; n];
    while let Some(Reverse(k)) = heap.pop() {
        let u = k as u32;
        done[u as usize] = true;
        order.push(u);
        for (v, _) in adj.out(u) {
            indeg[v as usize] -= 1;
            if indeg[v as usize] == 0 {
                heap.push(Reverse(order_key(r, v)));
            }
        }
    }
    let mut cyclic: Vec<u64> = (0..n as u32).filter(|&i| !done[i as usize]).map(|i| order_key(r, i)).collect();
    cyclic.sort_unstable();
    order.extend(cyclic.into_iter().map(|k| k as u32));
    order
}

/// The walk of step 3 from `start`: the longest path found.
struct Walker<'a> {
    adj: &'a Adjacency,
    branch_cut: Option<f64>,
    max_paths: usize,
    used: Vec<bool>,
    on_path: Vec<bool>,
}

impl Walker<'_> {
    fn longest_path(&mut self, start: u32) -> Vec<u32> {
        let mut best: Vec<u32> = Vec::new();
        let mut path = vec![start];
        self.on_path[start as usize] = true;
        // Branches still to explore: (length of the shared prefix, next node).
        let mut pending: Vec<(usize, u32)> = Vec::new();
        let mut finished = 0usize;
        let mut cands: Vec<(u32, f32)> = Vec::new();
        loop {
            // Extend the path until no candidate is left.
            loop {
                let last = *path.last().expect("a path is never empty");
                cands.clear();
                let (used, on_path) = (&self.used, &self.on_path);
                cands.extend(self.adj.out(last).filter(|&(v, _)| !used[v as usize] && !on_path[v as usize]));
                let Some(&(next, _)) = cands.first() else { break };
                if let Some(bc) = self.branch_cut {
                    let room = self.max_paths.saturating_sub(finished + pending.len() + 1);
                    let alts = cands[1..].iter().take_while(|c| f64::from(c.1) >= bc).take(room);
                    // Pushed worst first, so the better alternative is explored first.
                    let mark = pending.len();
                    pending.extend(alts.map(|&(v, _)| (path.len(), v)));
                    pending[mark..].reverse();
                }
                path.push(next);
                self.on_path[next as usize] = true;
            }
            finished += 1;
            if path.len() > best.len() {
                best.clone_from(&path);
            }
            let Some((prefix, node)) = pending.pop() else { break };
            for v in path.drain(prefix..) {
                self.on_path[v as usize] = false;
            }
            path.push(node);
            self.on_path[node as usize] = true;
        }
        for &v in &path {
            self.on_path[v as usize] = false;
        }
        best
    }
}

/// Walk-through track building (see the module docs for the exact algorithm);
/// `config.method` is not read. Tracks are numbered as the [module docs](super) say.
///
/// # Panics
/// If the slices of `edges` differ in length.
#[track_caller]
pub fn walkthrough(edges: &ScoredEdges<'_>, config: &TrackBuilderConfig) -> Result<Vec<u32>> {
    edges.assert_shapes();
    config.validate()?;
    edges.check_nodes()?;
    let n = edges.num_nodes;
    let adj = Adjacency::new(edges, config.score_cut);
    let order = start_order(&adj, edges.r);
    let mut walker = Walker {
        adj: &adj,
        branch_cut: config.branch_cut,
        max_paths: config.max_paths,
        used: vec![false; n],
        on_path: vec![false; n],
    };
    // Label of each node: the start node of its track (u32::MAX: none yet).
    let mut labels = vec![u32::MAX; n];
    for &start in &order {
        if walker.used[start as usize] {
            continue;
        }
        let path = walker.longest_path(start);
        if path.len() >= config.min_hits {
            for &v in &path {
                walker.used[v as usize] = true;
                labels[v as usize] = start;
            }
        } else {
            walker.used[start as usize] = true;
        }
    }
    Ok(number_tracks(&labels, |_| true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracks::{TrackBuilder, TrackMethod, connected_components};

    type E = (u32, u32, f32);

    /// The default settings with tracks of 3 nodes or more, as the small graphs here hold.
    fn small() -> TrackBuilderConfig {
        TrackBuilderConfig { min_hits: 3, ..TrackBuilderConfig::default() }
    }

    fn split(edges: &[E]) -> (Vec<u32>, Vec<u32>, Vec<f32>) {
        (edges.iter().map(|e| e.0).collect(), edges.iter().map(|e| e.1).collect(), edges.iter().map(|e| e.2).collect())
    }

    fn walk(n: usize, edges: &[E], cfg: &TrackBuilderConfig) -> Vec<u32> {
        let (s, d, sc) = split(edges);
        walkthrough(&ScoredEdges::new(n, &s, &d, &sc), cfg).unwrap()
    }

    fn both(n: usize, edges: &[E]) -> (Vec<u32>, Vec<u32>) {
        let (s, d, sc) = split(edges);
        let e = ScoredEdges::new(n, &s, &d, &sc);
        let cfg = small();
        (connected_components(&e, &cfg).unwrap(), walkthrough(&e, &cfg).unwrap())
    }

    /// Two 5-hit tracks a = 0..5 and b = 5..10 whose middles cross: fake edges a2→b3 and
    /// b2→a3 survive the cut (0.6, 0.55), but each is the second-best edge of its node.
    fn crossing() -> Vec<E> {
        vec![
            (0, 1, 0.95),
            (1, 2, 0.9),
            (2, 3, 0.9),
            (3, 4, 0.92),
            (5, 6, 0.93),
            (6, 7, 0.88),
            (7, 8, 0.9),
            (8, 9, 0.97),
            (2, 8, 0.6),
            (7, 3, 0.55),
        ]
    }

    #[test]
    fn crossing_tracks_merged_by_cc_are_separated_by_the_walk() {
        let (cc, walk) = both(10, &crossing());
        assert_eq!(cc, [1; 10], "one fake edge is enough to merge the components");
        assert_eq!(walk, [1, 1, 1, 1, 1, 2, 2, 2, 2, 2]);
    }

    #[test]
    fn crossing_with_a_shared_hit_keeps_the_better_track_whole() {
        // Node 2 is on both tracks' way: a = 0,1,2,3,4 and b = 5,6,2,7,8 (b's edge into the
        // shared hit scores lower). The first walk (from the innermost source) takes node 2;
        // b keeps its outer part 7,8 only if it reaches min_hits, which it doesn't here.
        let edges =
            [(0, 1, 0.9), (1, 2, 0.9), (2, 3, 0.9), (3, 4, 0.9), (5, 6, 0.9), (6, 2, 0.7), (2, 7, 0.8), (7, 8, 0.9)];
        let r: Vec<f32> = vec![30.0, 70.0, 115.0, 170.0, 260.0, 31.0, 71.0, 171.0, 261.0];
        let (s, d, sc) = split(&edges);
        let e = ScoredEdges::new(9, &s, &d, &sc).with_r(&r);
        let cfg = TrackBuilderConfig { branch_cut: None, ..small() };
        assert_eq!(connected_components(&e, &cfg).unwrap(), [1; 9]);
        assert_eq!(walkthrough(&e, &cfg).unwrap(), [1, 1, 1, 1, 1, 0, 0, 0, 0]);
        // With min_hits 2 the remainder 5,6 and 7,8 become tracks of their own.
        let cfg2 = TrackBuilderConfig { min_hits: 2, ..cfg };
        assert_eq!(walkthrough(&e, &cfg2).unwrap(), [1, 1, 1, 1, 1, 2, 2, 3, 3]);
    }

    #[test]
    fn missing_edge_splits_a_track_in_two() {
        // 0..6 with the 2→3 edge absent, and 3→4 present.
        let edges = [(0, 1, 0.9), (1, 2, 0.9), (3, 4, 0.9), (4, 5, 0.9)];
        let (cc, walk) = both(6, &edges);
        assert_eq!(cc, [1, 1, 1, 2, 2, 2]);
        assert_eq!(walk, cc);
        // The same edge present with a score below the cut.
        let mut low = edges.to_vec();
        low.push((2, 3, 0.3));
        assert_eq!(both(6, &low), (cc.clone(), cc));
    }

    #[test]
    fn low_score_fake_edge_is_cut() {
        // Track 0..4; node 5 hangs off node 2 with a 0.2 edge and off nothing else.
        let edges = [(0, 1, 0.9), (1, 2, 0.9), (2, 3, 0.9), (2, 5, 0.2), (3, 4, 0.9)];
        let (cc, walk) = both(6, &edges);
        assert_eq!(cc, [1, 1, 1, 1, 1, 0]);
        assert_eq!(walk, cc);
    }

    #[test]
    fn short_groups_and_isolated_nodes_get_no_track() {
        // 0-1 (2 nodes), 2 isolated, 3-4-5 (a track), 6-7 (2 nodes).
        let edges = [(0, 1, 0.9), (3, 4, 0.9), (4, 5, 0.9), (6, 7, 0.9)];
        let (cc, walked) = both(8, &edges);
        assert_eq!(cc, [0, 0, 0, 1, 1, 1, 0, 0]);
        assert_eq!(walked, cc);
        let one = TrackBuilderConfig { min_hits: 1, ..small() };
        assert_eq!(walk(8, &edges, &one), [1, 1, 2, 3, 3, 3, 4, 4]);
    }

    #[test]
    fn branch_above_branch_cut_takes_the_longer_path() {
        // 0→1→{2 (0.9, dead end), 3 (0.85)}→4→5.
        let edges = [(0, 1, 0.95), (1, 2, 0.9), (1, 3, 0.85), (3, 4, 0.9), (4, 5, 0.9)];
        let greedy = TrackBuilderConfig { branch_cut: None, ..small() };
        assert_eq!(walk(6, &edges, &greedy), [1, 1, 1, 2, 2, 2], "best edge first: 0,1,2 then 3,4,5");
        let branching = TrackBuilderConfig { branch_cut: Some(0.8), ..small() };
        assert_eq!(walk(6, &edges, &branching), [1, 1, 0, 1, 1, 1], "the branch leads further");
        // A branch below branch_cut is not explored.
        let strict = TrackBuilderConfig { branch_cut: Some(0.88), ..small() };
        assert_eq!(walk(6, &edges, &strict), [1, 1, 1, 2, 2, 2]);
        // A budget of one path means no branching.
        let budget = TrackBuilderConfig { max_paths: 1, ..branching };
        assert_eq!(walk(6, &edges, &budget), [1, 1, 1, 2, 2, 2]);
    }

    #[test]
    fn equal_length_branches_keep_the_better_scored_one() {
        // 0→1→{2→3 (0.95), 4→5 (0.9)}: both 4 long; the better first edge wins.
        let edges = [(0, 1, 0.9), (1, 4, 0.9), (1, 2, 0.95), (2, 3, 0.9), (4, 5, 0.9)];
        let cfg = TrackBuilderConfig { branch_cut: Some(0.8), ..small() };
        assert_eq!(walk(6, &edges, &cfg), [1, 1, 1, 1, 0, 0]);
    }

    #[test]
    fn sources_start_innermost_first() {
        // Two sources 0 (r = 50) and 1 (r = 20) both want node 2; the inner one gets it.
        let edges = [(0, 2, 0.9), (1, 2, 0.8), (2, 3, 0.9)];
        let (s, d, sc) = split(&edges);
        let cfg = small();
        let e = ScoredEdges::new(4, &s, &d, &sc);
        assert_eq!(walkthrough(&e, &cfg).unwrap(), [1, 0, 1, 1], "by index without r");
        let r = [50.0, 20.0, 100.0, 150.0];
        assert_eq!(walkthrough(&e.with_r(&r), &cfg).unwrap(), [0, 1, 1, 1], "by r with r");
    }

    #[test]
    fn cycles_terminate() {
        let edges = [(0, 1, 0.9), (1, 2, 0.9), (2, 0, 0.9), (3, 4, 0.9), (4, 3, 0.9)];
        let cfg = TrackBuilderConfig { branch_cut: Some(0.5), ..small() };
        let ids = walk(5, &edges, &cfg);
        assert_eq!(ids, [1, 1, 1, 0, 0]);
    }

    /// A seeded shuffle (xorshift), enough to permute edge lists.
    fn shuffle<T>(v: &mut [T], mut seed: u64) {
        for i in (1..v.len()).rev() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            v.swap(i, (seed % (i as u64 + 1)) as usize);
        }
    }

    #[test]
    fn results_do_not_depend_on_edge_order_and_repeat_exactly() {
        // Ten crossing pairs, side by side, plus dense noise edges between neighbours.
        let mut edges = Vec::new();
        for k in 0..10u32 {
            edges.extend(crossing().into_iter().map(|(s, d, sc)| (s + 10 * k, d + 10 * k, sc)));
            edges.push((10 * k + 1, (10 * k + 13) % 100, 0.81));
            edges.push((10 * k + 4, (10 * k + 15) % 100, 0.4));
        }
        for method in [TrackMethod::Cc, TrackMethod::Walkthrough] {
            let b = TrackBuilder::new(TrackBuilderConfig { method, ..small() }).unwrap();
            let run = |edges: &[E]| {
                let (s, d, sc) = split(edges);
                b.build(&ScoredEdges::new(100, &s, &d, &sc)).unwrap()
            };
            let reference = run(&edges);
            assert_eq!(run(&edges), reference);
            for seed in 1..6u64 {
                let mut e = edges.clone();
                shuffle(&mut e, seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                assert_eq!(run(&e), reference, "{method:?}, seed {seed}");
            }
        }
    }

    #[test]
    fn start_order_is_sources_by_r_then_topological() {
        // 2→0→1, 3 isolated, 4→5 (every edge outward in r); r makes node 4 the innermost
        // source.
        let (s, d, sc) = split(&[(2, 0, 0.9), (0, 1, 0.9), (4, 5, 0.9)]);
        let r = [20.0, 30.0, 10.0, 5.0, 1.0, 2.0];
        let e = ScoredEdges::new(6, &s, &d, &sc).with_r(&r);
        let adj = Adjacency::new(&e, 0.5);
        let order = start_order(&adj, e.r);
        assert_eq!(&order[..3], [4, 3, 2], "sources by r");
        assert_eq!(&order[3..], [4, 5, 3, 2, 0, 1], "then Kahn, innermost available first");
        assert!(order_key(Some(&[-1.0, 1.0]), 0) < order_key(Some(&[-1.0, 1.0]), 1));
    }

    #[test]
    fn long_chain_walks_without_recursion() {
        let n = 100_000u32;
        let edges: Vec<E> = (0..n - 1).map(|i| (i, i + 1, 0.9)).collect();
        let ids = walk(n as usize, &edges, &small());
        assert!(ids.iter().all(|&t| t == 1));
    }
}
