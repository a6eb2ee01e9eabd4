//! Track following: walks guided by the edge scores and by helix continuity.
//!
//! In dense events the GNN's scores alone are a poor guide at a branching: the walk-through
//! follows the best-scoring edge, and a track whose true edge scores 0.3 next to a fake at
//! 0.6 is lost or merged. A charged particle in a solenoid keeps its curvature in the
//! transverse plane and its polar angle (up to multiple scattering and the hits' position
//! errors), so the hits already on a path predict where the next one can be. Track following
//! keeps edges down to a low score cut and chooses, at every step, among the hits that
//! continue the helix, weighting the geometric agreement against the score: the way
//! combinatorial track finders (ACTS's CKF, the Kalman filter of ATLAS and CMS) extend
//! seeds, with the GNN's edges as the search space.
//!
//! # The algorithm
//! 1. Keep the edges with score ≥ `score_cut` (self-loops dropped), each pointing outward
//!    ([`ScoredEdges::outward`]) whatever its stored direction, as in the
//!    [walk-through](super::walkthrough()); order each node's outgoing kept edges best score
//!    first (ties: lower destination first).
//! 2. Start nodes: those without an incoming kept edge first, then all others; within each
//!    group innermost first (by r, then node index).
//! 3. From each start node not yet used: the first step takes the best outgoing edge with
//!    score ≥ [`FollowConfig::seed_cut`] to an unused node (none: no track). Every later step
//!    from the last node `b` looks at its outgoing kept edges to nodes `c` that are unused and
//!    not on the path (and, with the nodes' layers, allowed by the rule below), and computes
//!    - Δκ: the transverse curvature of the circle through (`a`, `b`, `c`) minus that through
//!      (`p`, `a`, `b`), where `a` is the latest path node at least
//!      [`min_lever_arm`](FollowConfig::min_lever_arm) from `b` in the transverse plane and
//!      `p` the latest at least as far from `a` (without `p`, the beam line at the origin
//!      stands in for it and the window is three times wider); allowed:
//!      `curvature_abs + curvature_rel · |κ(a, b, c)|`, plus twice the error of Δκ that
//!      the hits' [`transverse_sigma`](FollowConfig::transverse_sigma) gives it;
//!    - Δθ: the polar angle of `b → c` minus that of `a' → b`, `a'` the latest path node at
//!      least `min_lever_arm` from `b` in 3D; allowed: `theta_window` × (2 mrad + 2σ_c/|bc| +
//!      2σ_a'/|a'b|), σ the position error at the hit's radius
//!      ([`position_sigma`](FollowConfig::position_sigma)).
//!
//!    A term whose points are too close together is left out. `c` is compatible if
//!    χ² = (Δκ/allowed)² + (Δθ/allowed)² < 1; the compatible `c` with the lowest
//!    χ² − `score_weight` · ln(score) is followed (ties: the better score). None: the path
//!    ends.
//!
//!    With the nodes' layers ([`ScoredEdges::with_layers`]), every step, the first too, goes
//!    only to a node on none of the path's modules and on none of its layers but the last
//!    node's, where the path then holds one hit: a particle of the targets' pT crosses each
//!    layer once, in two overlapping modules at most. In dense forward regions a path
//!    otherwise took a second hit of its module, another particle's, and split that
//!    particle's track in two halves that neither hold the majority of its hits.
//! 4. A path of at least `min_hits` nodes becomes a track and its nodes are used. Otherwise
//!    the start node's next seed edge is tried (up to [`FollowConfig::seed_tries`] of them,
//!    best first); if none gives a track, the longest path is kept for step 7 and only its
//!    start node is marked used.
//! 5. Hit search ([`search`](super::search), when [`FollowConfig::search`] is set and the
//!    edges carry node layers): each track, in the order found, is extended outward layer by
//!    layer through the hits no track holds, with the χ² of step 3, beyond the edges of the
//!    graph. With [`FollowConfig::merge`], a path that reaches the first hit of another track
//!    whose second hit continues the helix too takes that whole track (the pieces of a
//!    particle the graph split).
//! 6. With [`FollowConfig::displaced`], steps 2–5 run again from the hits no track holds, for
//!    particles produced away from the beam line, with one change: where step 3 has no `p`,
//!    the curvature term is left out instead of taking the beam line (whose circle through
//!    `a` and `b` bends away from a displaced particle's third hit), and the hit search's
//!    helix through such a path is straight.
//! 7. Then each path of 3 to `min_hits − 1` nodes left by either pass whose nodes are all
//!    still free is extended by the hit search (with its pass's windows) and becomes a track
//!    if it reaches [`rescue_min_hits`](FollowConfig::rescue_min_hits).
//!
//! No recursion, no branching: the cost is linear in the kept edges times the path length,
//! plus a few layer look-ups per added hit.

use super::follow_config::FollowConfig;
use super::search::{FREE, LayerIndex, NO_LAYER, extend_path};
use super::walkthrough::{Adjacency, order_key};
use super::windows::Geometry;
use super::{NO_TRACK, ScoredEdges, TrackBuilderConfig, number_tracks};
use crate::error::{Error, Result};

/// Track following (see the module docs for the exact algorithm); `config.method` and
/// `config.branch_cut` are not read. The edges need node positions
/// ([`ScoredEdges::with_positions`]), else [`Error::Config`]. Tracks are numbered as the
/// [module docs](super) say.
///
/// # Panics
/// If the slices of `edges` differ in length.
#[track_caller]
pub fn follow(edges: &ScoredEdges<'_>, config: &TrackBuilderConfig) -> Result<Vec<u32>> {
    follow_around(edges, config, None)
}

/// Track following around the tracks of `kept` (a track id per node, [`NO_TRACK`] for none,
/// as [`follow`] returns them), which hold their hits: their hit search runs again, then new
/// paths start from the other hits, and a new path's hit search may take a kept track whole
/// (step 5's join). With a candidate selection between two rounds, the hits of the dropped
/// candidates (most often fakes, which took them from real tracks) go back to the tracks
/// they belong to. `None` is [`follow`].
///
/// # Panics
/// If the slices of `edges` differ in length, or `kept` is not one id per node.
#[track_caller]
pub fn follow_around(edges: &ScoredEdges<'_>, config: &TrackBuilderConfig, kept: Option<&[u32]>) -> Result<Vec<u32>> {
    edges.assert_shapes();
    config.validate()?;
    edges.check_nodes()?;
    let (Some(r), Some(phi), Some(z)) = (edges.r, edges.phi, edges.z) else {
        return Err(Error::config("method", "`follow` needs the nodes' r, phi and z"));
    };
    if let Some(l) = edges.layers
        && let Some(bad) = l.layer.iter().find(|&&x| x != NO_LAYER && x as usize >= l.surfaces.len())
    {
        let msg = format!("node layer {bad} is not one of the {} surfaces", l.surfaces.len());
        return Err(Error::config("layers", msg));
    }
    let cfg: &FollowConfig = &config.follow;
    let n = edges.num_nodes;
    let xy: Vec<[f64; 2]> = (0..n)
        .map(|i| [f64::from(r[i]) * f64::from(phi[i]).cos(), f64::from(r[i]) * f64::from(phi[i]).sin()])
        .collect();
    let zs: Vec<f64> = z.iter().map(|&v| f64::from(v)).collect();
    let geo = Geometry { xy: &xy, z: &zs, r, cfg, beam_line: true };
    let displaced_geo = Geometry { beam_line: false, ..geo };
    let adj = Adjacency::new(edges, config.score_cut);
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_unstable_by_key(|&i| (adj.indegree[i] > 0, order_key(Some(r), i as u32)));

    let search = cfg.search.then_some(edges.layers).flatten();
    let index = search.map(|layers| LayerIndex::new(&layers, phi));
    let mut paths = Paths {
        tracks: Vec::new(),
        short: Vec::new(),
        owner: vec![FREE; n],
        min_hits: config.min_hits,
        keep_short: search.is_some(),
    };
    if let Some(kept) = kept {
        assert_eq!(kept.len(), n, "one kept track id per node");
        let num = kept.iter().copied().max().unwrap_or(NO_TRACK) as usize;
        paths.tracks = vec![Vec::new(); num];
        for (v, &id) in kept.iter().enumerate() {
            if id != NO_TRACK {
                paths.tracks[id as usize - 1].push(v);
                paths.owner[v] = id - 1;
            }
        }
        // A path runs outward: innermost hit first.
        for t in &mut paths.tracks {
            t.sort_unstable_by_key(|&v| order_key(Some(r), v as u32));
        }
        if let (Some(layers), Some(index)) = (&search, &index) {
            for i in 0..paths.tracks.len() {
                extend_path(&geo, layers, index, &mut paths.owner, &mut paths.tracks, i);
            }
        }
    }
    let passes: &[&Geometry<'_>] = if cfg.displaced { &[&geo, &displaced_geo] } else { &[&geo] };
    for &pass in passes {
        // Every pass starts from every hit no track holds. The second is free of the beam line:
        // the prompt pass's windows reject the third hit of a particle produced away from it
        // (the circle through the origin bends the wrong way).
        let mut used: Vec<bool> = paths.owner.iter().map(|&o| o != FREE).collect();
        let first = paths.tracks.len();
        paths.walk(edges, &adj, pass, &order, &mut used);
        if let (Some(layers), Some(index)) = (&search, &index) {
            for i in first..paths.tracks.len() {
                extend_path(pass, layers, index, &mut paths.owner, &mut paths.tracks, i);
            }
        }
    }
    let Paths { mut tracks, short, mut owner, .. } = paths;
    if let (Some(layers), Some(index)) = (&search, &index) {
        // Paths too short to be tracks get a second chance: extended through the hits left,
        // they must then be clearly longer than a chance alignment (or have joined a track).
        for (p, prompt) in short {
            if !p.iter().all(|&v| owner[v] == FREE) {
                continue;
            }
            let i = tracks.len();
            for &v in &p {
                owner[v] = i as u32;
            }
            tracks.push(p);
            let pass = if prompt { &geo } else { &displaced_geo };
            let merged = extend_path(pass, layers, index, &mut owner, &mut tracks, i);
            if !merged && tracks[i].len() < cfg.rescue_min_hits.max(config.min_hits) {
                for v in tracks.pop().expect("just pushed") {
                    owner[v] = FREE;
                }
            }
        }
    }
    let mut labels = vec![u32::MAX; n];
    for t in tracks.iter().filter(|t| !t.is_empty()) {
        for &v in t {
            labels[v] = t[0] as u32;
        }
    }
    Ok(number_tracks(&labels, |_| true))
}

/// The paths of track following's passes: the tracks (at least `min_hits` nodes), each
/// node's track ([`FREE`] for none) and, when `keep_short` (for the hit search), the shorter
/// paths of at least 3 nodes with whether their pass was the prompt one.
struct Paths {
    tracks: Vec<Vec<usize>>,
    short: Vec<(Vec<usize>, bool)>,
    owner: Vec<u32>,
    min_hits: usize,
    keep_short: bool,
}

impl Paths {
    /// One pass of steps 2–4 of the module docs over the start nodes `order` with the windows
    /// of `geo`; `used` marks the nodes of tracks and the start nodes already tried.
    fn walk(
        &mut self,
        edges: &ScoredEdges<'_>,
        adj: &Adjacency,
        geo: &Geometry<'_>,
        order: &[usize],
        used: &mut [bool],
    ) {
        let (cfg, min_hits) = (geo.cfg, self.min_hits);
        let mut on_path = vec![false; used.len()];
        let (mut path, mut longest): (Vec<usize>, Vec<usize>) = (Vec::new(), Vec::new());
        for &s in order {
            if used[s] {
                continue;
            }
            longest.clear();
            for attempt in 0..cfg.seed_tries {
                path.clear();
                path.push(s);
                on_path[s] = true;
                loop {
                    let b = *path.last().expect("not empty");
                    let free = adj.out(b as u32).filter(|&(c, _)| !used[c as usize] && !on_path[c as usize]);
                    let next = if path.len() == 1 {
                        free.take_while(|&(_, sc)| f64::from(sc) >= cfg.seed_cut)
                            .map(|(c, _)| c as usize)
                            .filter(|&c| edges.layers.is_none_or(|l| l.can_continue(&path, c)))
                            .nth(attempt)
                    } else {
                        let mut best: Option<(f64, usize)> = None;
                        for (c, sc) in free {
                            let c = c as usize;
                            if edges.layers.is_some_and(|l| !l.can_continue(&path, c)) {
                                continue;
                            }
                            let Some(chi2) = geo.chi2(&path, c) else { continue };
                            let cost = chi2 - cfg.score_weight * f64::from(sc).ln();
                            // Strictly lower: on a tie the earlier (better-scored) edge stays.
                            if best.is_none_or(|(bc, _)| cost < bc) {
                                best = Some((cost, c));
                            }
                        }
                        best.map(|b| b.1)
                    };
                    let Some(c) = next else { break };
                    path.push(c);
                    on_path[c] = true;
                }
                for &v in &path {
                    on_path[v] = false;
                }
                if path.len() > longest.len() {
                    std::mem::swap(&mut path, &mut longest);
                }
                // A path of one node: no seed edge left to try.
                if longest.len() >= min_hits || path.len() == 1 {
                    break;
                }
            }
            if longest.len() >= min_hits {
                let i = self.tracks.len() as u32;
                for &v in &longest {
                    used[v] = true;
                    self.owner[v] = i;
                }
                self.tracks.push(longest.clone());
            } else {
                used[s] = true;
                if self.keep_short && longest.len() >= 3 {
                    self.short.push((longest.clone(), geo.beam_line));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracks::search::{NO_LAYER, NodeLayers, Surface};
    use crate::tracks::{TrackBuilder, TrackMethod, walkthrough};

    type E = (u32, u32, f32);

    const RADII: [f32; 6] = [32.0, 72.0, 116.0, 172.0, 260.0, 360.0];

    /// Nodes of a prompt helix with transverse radius of curvature `big_r` \[mm\] (sign: sense
    /// of bending), starting azimuth `phi0` and dz/dr = `cot`, at the six radii.
    fn helix(big_r: f32, phi0: f32, cot: f32) -> Vec<[f32; 3]> {
        RADII.iter().map(|&r| [r, phi0 + (r / (2.0 * big_r)).asin(), cot * r]).collect()
    }

    fn build(nodes: &[[f32; 3]], edges: &[E], cfg: &TrackBuilderConfig) -> Result<Vec<u32>> {
        build_on_layers(nodes, edges, None, cfg)
    }

    fn chain(first: u32, scores: [f32; 5]) -> Vec<E> {
        (0..5).map(|k| (first + k, first + k + 1, scores[k as usize])).collect()
    }

    /// Track a (nodes 0-5, bending one way, 1.5 GeV in 2 T) and track b (6-11, bending the
    /// other way, from nearly the same azimuth). a's third edge scores 0.4; a fake edge from
    /// a's third hit to b's fourth scores 0.9.
    fn kinked() -> (Vec<[f32; 3]>, Vec<E>) {
        let mut nodes = helix(2500.0, 0.1, 0.5);
        nodes.extend(helix(-2500.0, 0.1 + 0.02, 0.5));
        let mut edges = chain(0, [0.9, 0.9, 0.4, 0.9, 0.9]);
        edges.extend(chain(6, [0.9; 5]));
        edges.push((2, 9, 0.9));
        (nodes, edges)
    }

    fn follow_cfg() -> TrackBuilderConfig {
        TrackBuilderConfig { method: TrackMethod::Follow, score_cut: 0.02, min_hits: 3, ..Default::default() }
    }

    #[test]
    fn the_helix_wins_over_a_better_scored_kink() {
        let (nodes, edges) = kinked();
        assert_eq!(build(&nodes, &edges, &follow_cfg()).unwrap(), [1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2]);
        // The walk-through follows the 0.9 fake: a's inner half continues on b's outer half.
        let walk =
            TrackBuilderConfig { method: TrackMethod::Walkthrough, score_cut: 0.3, min_hits: 3, ..Default::default() };
        assert_eq!(build(&nodes, &edges, &walk).unwrap(), [1, 1, 1, 2, 2, 2, 3, 3, 3, 1, 1, 1]);
    }

    #[test]
    fn a_kink_in_z_is_refused_too() {
        // b has a's transverse path but a polar angle 0.1 rad steeper beyond its third hit.
        let a = helix(2500.0, 0.1, 0.5);
        let mut b = a.clone();
        for n in &mut b[3..] {
            n[2] = a[2][2] + (n[0] - a[2][0]) * 0.62;
        }
        let nodes: Vec<[f32; 3]> = a.iter().chain(&b[3..]).copied().collect();
        // a: 0-5; the steep branch 6, 7, 8 hangs off node 2 with better scores. a stays whole;
        // the branch, left over, is a track of its own.
        let mut edges = chain(0, [0.9, 0.9, 0.5, 0.9, 0.9]);
        edges.extend([(2, 6, 0.95), (6, 7, 0.95), (7, 8, 0.95)]);
        assert_eq!(build(&nodes, &edges, &follow_cfg()).unwrap(), [1, 1, 1, 1, 1, 1, 2, 2, 2]);
        let walk =
            TrackBuilderConfig { method: TrackMethod::Walkthrough, score_cut: 0.3, min_hits: 3, ..Default::default() };
        assert_eq!(build(&nodes, &edges, &walk).unwrap(), [1, 1, 1, 2, 2, 2, 1, 1, 1]);
    }

    #[test]
    fn a_path_starts_only_on_a_seed_edge() {
        let nodes = helix(2500.0, 0.1, 0.5);
        let edges = chain(0, [0.05, 0.9, 0.9, 0.9, 0.9]);
        // Node 0's only edge is below seed_cut (0.1): the track starts at node 1.
        assert_eq!(build(&nodes, &edges, &follow_cfg()).unwrap(), [0, 1, 1, 1, 1, 1]);
        let lax = TrackBuilderConfig { follow: FollowConfig { seed_cut: 0.05, ..Default::default() }, ..follow_cfg() };
        assert_eq!(build(&nodes, &edges, &lax).unwrap(), [1; 6]);
        // Edges below score_cut do not exist for the walk.
        let strict = TrackBuilderConfig { score_cut: 0.5, ..lax };
        assert_eq!(build(&nodes, &edges, &strict).unwrap(), [0, 1, 1, 1, 1, 1]);
    }

    #[test]
    fn a_second_seed_edge_is_tried_when_the_best_leads_nowhere() {
        // Node 6, another particle's hit beside node 1, takes node 0's best-scored edge and
        // leads nowhere: with one try node 0 is lost; with two, its second edge starts the track.
        let mut nodes = helix(2500.0, 0.1, 0.5);
        nodes.push([72.0, 0.6, 40.0]);
        let mut edges = chain(0, [0.9; 5]);
        edges.push((0, 6, 0.95));
        let tries = |seed_tries| TrackBuilderConfig {
            follow: FollowConfig { seed_tries, ..Default::default() },
            ..follow_cfg()
        };
        assert_eq!(build(&nodes, &edges, &tries(1)).unwrap(), [0, 1, 1, 1, 1, 1, 0]);
        assert_eq!(build(&nodes, &edges, &tries(2)).unwrap(), [1, 1, 1, 1, 1, 1, 0]);
    }

    #[test]
    fn a_displaced_track_is_found_by_the_second_pass() {
        // A straight track 20 mm from the beam line (a particle produced in the material): the
        // circle through the origin and its first two hits bends at 0.017/mm, far outside the
        // prompt pass's window for its third hit.
        let nodes: Vec<[f32; 3]> = RADII
            .iter()
            .map(|&r| {
                let s = (r * r - 400.0).sqrt(); // the path length from the closest approach
                [r, 20.0f32.atan2(s), 0.5 * s]
            })
            .collect();
        // At least 5 hits: the prompt pass's windows do take its last three hits, where the
        // circle through the origin is nearly straight, as a short path.
        let edges = chain(0, [0.9; 5]);
        let cfg = TrackBuilderConfig { min_hits: 5, ..follow_cfg() };
        assert_eq!(build(&nodes, &edges, &cfg).unwrap(), [1; 6]);
        let prompt_only = TrackBuilderConfig { follow: FollowConfig { displaced: false, ..Default::default() }, ..cfg };
        assert_eq!(build(&nodes, &edges, &prompt_only).unwrap(), [0; 6]);
        // A prompt track is found by the first pass whatever the setting.
        let nodes = helix(2500.0, 0.1, 0.5);
        assert_eq!(build(&nodes, &edges, &prompt_only).unwrap(), [1; 6]);
    }

    #[test]
    fn results_do_not_depend_on_edge_order() {
        let (nodes, edges) = kinked();
        let reference = build(&nodes, &edges, &follow_cfg()).unwrap();
        let mut rev = edges.clone();
        rev.reverse();
        assert_eq!(build(&nodes, &rev, &follow_cfg()).unwrap(), reference);
        rev.rotate_left(4);
        assert_eq!(build(&nodes, &rev, &follow_cfg()).unwrap(), reference);
    }

    #[test]
    fn follow_needs_positions_and_valid_windows() {
        let (s, d, sc) = (vec![0u32, 1], vec![1u32, 2], vec![0.9f32, 0.9]);
        let e = ScoredEdges::new(3, &s, &d, &sc);
        let err = follow(&e, &follow_cfg()).unwrap_err().to_string();
        assert!(err.contains("phi"), "{err}");
        // The other methods do not need them.
        assert_eq!(walkthrough(&e, &TrackBuilderConfig { min_hits: 3, ..Default::default() }).unwrap(), [1, 1, 1]);
        let bad =
            |f: FollowConfig| TrackBuilderConfig { follow: f, ..follow_cfg() }.validate().unwrap_err().to_string();
        let unsorted = FollowConfig { position_sigma: vec![[700.0, 0.6], [200.0, 0.025]], ..Default::default() };
        assert!(bad(unsorted).contains("follow.position_sigma"));
        assert!(bad(FollowConfig { theta_window: 0.0, ..Default::default() }).contains("follow.theta_window"));
        assert!(bad(FollowConfig { seed_cut: 1.5, ..Default::default() }).contains("follow.seed_cut"));
        assert!(bad(FollowConfig { seed_tries: 0, ..Default::default() }).contains("follow.seed_tries"));
        assert_eq!(FollowConfig::default().sigma(100.0), 0.025);
        assert_eq!(FollowConfig::default().sigma(1000.0), 5.0);
    }

    const SEARCH_RADII: [f32; 8] = [32.0, 72.0, 116.0, 172.0, 260.0, 360.0, 500.0, 660.0];

    /// A helix's hits on eight barrel layers (layer k at `SEARCH_RADII[k]`) and the surfaces.
    fn barrel_helix() -> (Vec<[f32; 3]>, Vec<Surface>) {
        let (big_r, phi0, cot) = (2500.0f32, 0.1f32, 0.5f32);
        let nodes = SEARCH_RADII.iter().map(|&r| [r, phi0 + (r / (2.0 * big_r)).asin(), cot * r]).collect();
        let surfaces = SEARCH_RADII
            .iter()
            .map(|&r| Surface::Cylinder { r: f64::from(r), z_min: -1000.0, z_max: 1000.0 })
            .collect();
        (nodes, surfaces)
    }

    /// Tracks of `nodes` (on `layer`, each on a module of its own) with `edges`, with or
    /// without the layers.
    fn build_on_layers(
        nodes: &[[f32; 3]],
        edges: &[E],
        layer: Option<(&[u16], &[Surface])>,
        cfg: &TrackBuilderConfig,
    ) -> Result<Vec<u32>> {
        let module: Vec<u32> = (0..nodes.len() as u32).collect();
        build_on_modules(nodes, edges, layer.map(|(l, s)| (l, &module[..], s)), cfg)
    }

    /// Tracks of `nodes` (on `layer` and `module`) with `edges`, with or without the layers.
    fn build_on_modules(
        nodes: &[[f32; 3]],
        edges: &[E],
        layer: Option<(&[u16], &[u32], &[Surface])>,
        cfg: &TrackBuilderConfig,
    ) -> Result<Vec<u32>> {
        on_edges(nodes, edges, layer, |e| TrackBuilder::new(cfg.clone())?.build(e))
    }

    /// `f` of the scored `edges` of `nodes` (on `layer` and `module`, if given).
    fn on_edges<T>(
        nodes: &[[f32; 3]],
        edges: &[E],
        layer: Option<(&[u16], &[u32], &[Surface])>,
        f: impl FnOnce(&ScoredEdges<'_>) -> T,
    ) -> T {
        let (r, phi, z): (Vec<f32>, Vec<f32>, Vec<f32>) = (
            nodes.iter().map(|n| n[0]).collect(),
            nodes.iter().map(|n| n[1]).collect(),
            nodes.iter().map(|n| n[2]).collect(),
        );
        let (s, d, sc): (Vec<u32>, Vec<u32>, Vec<f32>) = (
            edges.iter().map(|e| e.0).collect(),
            edges.iter().map(|e| e.1).collect(),
            edges.iter().map(|e| e.2).collect(),
        );
        let mut e = ScoredEdges::new(nodes.len(), &s, &d, &sc).with_positions(&r, &phi, &z);
        if let Some((layer, module, surfaces)) = layer {
            e = e.with_layers(NodeLayers { layer, module, surfaces });
        }
        f(&e)
    }

    #[test]
    fn the_hit_search_continues_a_path_beyond_its_edges() {
        let (mut nodes, surfaces) = barrel_helix();
        // A decoy on layer 5, 20 mm off the helix in r·phi.
        nodes.push([360.0, nodes[5][1] + 20.0 / 360.0, nodes[5][2]]);
        let layer: Vec<u16> = vec![0, 1, 2, 3, 4, 5, 6, 7, 5];
        // Edges only along the first four hits: a path too short for a track (min_hits 5).
        let edges = [(0, 1, 0.9), (1, 2, 0.9), (2, 3, 0.9)];
        let cfg = follow_cfg();
        let cfg = TrackBuilderConfig { min_hits: 5, ..cfg };
        assert_eq!(build_on_layers(&nodes, &edges, None, &cfg).unwrap(), [0; 9]);
        // With the layers, the search finds the other four hits and leaves the decoy.
        let layers = Some((&layer[..], &surfaces[..]));
        assert_eq!(build_on_layers(&nodes, &edges, layers, &cfg).unwrap(), [1, 1, 1, 1, 1, 1, 1, 1, 0]);
        // A rescued path must reach rescue_min_hits: 8 hits are not 9.
        let strict =
            TrackBuilderConfig { follow: FollowConfig { rescue_min_hits: 9, ..Default::default() }, ..cfg.clone() };
        assert_eq!(build_on_layers(&nodes, &edges, layers, &strict).unwrap(), [0; 9]);
        let off = TrackBuilderConfig { follow: FollowConfig { search: false, ..Default::default() }, ..cfg };
        assert_eq!(build_on_layers(&nodes, &edges, layers, &off).unwrap(), [0; 9]);
    }

    #[test]
    fn the_hit_search_crosses_at_most_max_holes_empty_layers() {
        let (all, surfaces) = barrel_helix();
        // No hit on layer 5; the graph has edges along the first five hits: a track.
        let nodes: Vec<[f32; 3]> = all.iter().enumerate().filter(|&(k, _)| k != 5).map(|(_, n)| *n).collect();
        let layer: Vec<u16> = vec![0, 1, 2, 3, 4, 6, 7];
        let edges = chain(0, [0.9, 0.9, 0.9, 0.9, 0.0]);
        let layers = Some((&layer[..], &surfaces[..]));
        let with_holes = |max_holes| TrackBuilderConfig {
            min_hits: 5,
            follow: FollowConfig { max_holes, ..Default::default() },
            ..follow_cfg()
        };
        assert_eq!(build_on_layers(&nodes, &edges, layers, &with_holes(0)).unwrap(), [1, 1, 1, 1, 1, 0, 0]);
        assert_eq!(build_on_layers(&nodes, &edges, layers, &with_holes(1)).unwrap(), [1; 7]);
        // A node layer outside the surfaces is an error.
        let bad = [0u16, 1, 2, 3, 4, 6, 8];
        let err = build_on_layers(&nodes, &edges, Some((&bad, &surfaces)), &with_holes(1)).unwrap_err();
        assert!(err.to_string().contains("layer 8"), "{err}");
    }

    #[test]
    fn the_hit_search_joins_two_pieces_of_one_helix() {
        let (nodes, surfaces) = barrel_helix();
        let layer: Vec<u16> = (0..8).collect();
        // The graph lost the edge between the fourth and the fifth hit: two tracks of four.
        let edges = [(0, 1, 0.9), (1, 2, 0.9), (2, 3, 0.9), (4, 5, 0.9), (5, 6, 0.9), (6, 7, 0.9)];
        let layers = Some((&layer[..], &surfaces[..]));
        let cfg = |merge| TrackBuilderConfig {
            min_hits: 4,
            follow: FollowConfig { merge, ..Default::default() },
            ..follow_cfg()
        };
        assert_eq!(build_on_layers(&nodes, &edges, layers, &cfg(false)).unwrap(), [1, 1, 1, 1, 2, 2, 2, 2]);
        assert_eq!(build_on_layers(&nodes, &edges, layers, &cfg(true)).unwrap(), [1; 8]);
    }

    #[test]
    fn following_around_kept_tracks_leaves_their_hits_and_joins_onto_them() {
        let (nodes, surfaces) = barrel_helix();
        let layer: Vec<u16> = (0..8).collect();
        let module: Vec<u32> = (0..8).collect();
        let edges: Vec<E> = (0..7).map(|k| (k, k + 1, 0.9)).collect();
        let cfg = |merge| TrackBuilderConfig {
            min_hits: 4,
            follow: FollowConfig { merge, ..Default::default() },
            ..follow_cfg()
        };
        on_edges(&nodes, &edges, Some((&layer, &module, &surfaces)), |e| {
            // The outer half kept: the new path stops at its first hit, or takes it whole.
            let kept = [0, 0, 0, 0, 1, 1, 1, 1];
            assert_eq!(follow_around(e, &cfg(false), Some(&kept)).unwrap(), [1, 1, 1, 1, 2, 2, 2, 2]);
            assert_eq!(follow_around(e, &cfg(true), Some(&kept)).unwrap(), [1; 8]);
            // Nothing kept is plain track following.
            assert_eq!(follow_around(e, &cfg(true), Some(&[0; 8])).unwrap(), follow(e, &cfg(true)).unwrap());
        });
    }

    #[test]
    fn a_path_takes_one_hit_of_a_module() {
        let (mut nodes, surfaces) = barrel_helix();
        // Node 8: another particle's hit 0.3 mm from the helix's last hit, on its layer.
        nodes.push([nodes[7][0], nodes[7][1] + 0.3 / nodes[7][0], nodes[7][2]]);
        let layer: Vec<u16> = vec![0, 1, 2, 3, 4, 5, 6, 7, 7];
        let mut edges: Vec<E> = (0..7).map(|k| (k, k + 1, 0.9)).collect();
        edges.push((7, 8, 0.99));
        let cfg = TrackBuilderConfig { min_hits: 5, ..follow_cfg() };
        let build = |module: &[u32]| build_on_modules(&nodes, &edges, Some((&layer, module, &surfaces)), &cfg);
        // On a module of its own, node 8 is an overlapping module's hit: the path takes it.
        assert_eq!(build(&[0, 1, 2, 3, 4, 5, 6, 7, 8]).unwrap(), [1; 9]);
        // On the last hit's module, it cannot be the same particle's.
        assert_eq!(build(&[0, 1, 2, 3, 4, 5, 6, 7, 7]).unwrap(), [1, 1, 1, 1, 1, 1, 1, 1, 0]);
    }

    #[test]
    fn a_path_crosses_a_layer_once_in_at_most_two_modules() {
        let surfaces = [Surface::Cylinder { r: 100.0, z_min: -500.0, z_max: 500.0 }];
        let (layer, module) = ([0u16, 1, 0, 0, NO_LAYER], [10u32, 11, 12, 13, 14]);
        let l = NodeLayers { layer: &layer, module: &module, surfaces: &surfaces };
        // Node 0 on layer 0, node 1 on layer 1, nodes 2 and 3 on layer 0 in other modules.
        assert!(l.can_continue(&[0], 2), "the overlapping module right after");
        assert!(!l.can_continue(&[0, 2], 3), "a third hit on one layer");
        assert!(!l.can_continue(&[0, 1], 2), "back to a layer left before");
        assert!(l.can_continue(&[0, 1], 4), "a node without a layer: only its module counts");
        let same_module = NodeLayers { module: &[10, 11, 12, 13, 10], ..l };
        assert!(!same_module.can_continue(&[0, 1], 4));
    }

    #[test]
    fn short_lever_arms_widen_the_curvature_window() {
        // A forward 1 GeV track crossing hits 16 mm apart in r, each 0.02 mm off the helix
        // in r·phi, alternately: every three-point curvature is off by ~3e-4, more than the
        // fixed window allows for a change between two of them.
        let (big_r, cot) = (1667.0f32, 10.0f32);
        let nodes: Vec<[f32; 3]> = (0..8)
            .map(|k| {
                let r = 40.0 + 16.0 * k as f32;
                let jitter = if k % 2 == 0 { 0.02 } else { -0.02 };
                [r, (r / (2.0 * big_r)).asin() + jitter / r, cot * r]
            })
            .collect();
        let edges: Vec<E> = (0..7).map(|k| (k, k + 1, 0.95)).collect();
        assert_eq!(build(&nodes, &edges, &follow_cfg()).unwrap(), [1; 8]);
        let fixed =
            TrackBuilderConfig { follow: FollowConfig { transverse_sigma: 0.0, ..Default::default() }, ..follow_cfg() };
        assert_ne!(build(&nodes, &edges, &fixed).unwrap(), [1; 8]);
    }
}
