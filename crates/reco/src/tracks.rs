//! Track building: from a graph with one score per edge to a track id per node.
//!
//! Edges with `score ≥ score_cut` are kept; then one of two methods groups the nodes:
//!
//! - [`TrackMethod::Cc`] ([`connected_components`]): every connected component of the kept edges
//!   (direction ignored) is one track. Fast and the field's baseline (Exa.TrkX), but two
//!   tracks joined by a single surviving fake edge become one candidate.
//! - [`TrackMethod::Walkthrough`] ([`walkthrough()`]): paths followed along the best-scoring
//!   outgoing edge from each start node (acorn's "CC & walk"), which separates tracks that a
//!   fake edge joins at a branching. Edges are walked outward ([`ScoredEdges::outward`]),
//!   whatever their stored direction.
//! - [`TrackMethod::Follow`] ([`follow()`]): paths along edges down to a low score cut, choosing at
//!   every step the hit that best continues the helix (curvature and polar angle), weighed
//!   against its score. Needs the nodes' positions. For dense (high pile-up) events. With
//!   the nodes' layers ([`ScoredEdges::with_layers`]) it then extends the paths by a hit
//!   search beyond the edges ([`search`]).
//!
//! With [`TrackBuilderConfig::min_candidate_score`], the (short) candidates then built on
//! weakly scored edges are dropped ([`select_candidates`]).
//!
//! # Output convention
//! The result has one `u32` per node. Tracks of at least `min_hits` nodes are numbered
//! `1, 2, …` in the order of their smallest node index (so the numbering does not depend on
//! the method's internal order or on the order of the edges); every other node (isolated, or
//! in a group smaller than `min_hits`) gets [`NO_TRACK`] = 0. Before writing a TrackML
//! submission, [`singleton_track_ids`](crate::submission::singleton_track_ids) gives each of
//! those hits a track id of its own.
//!
//! All methods are deterministic: the result depends only on the set of (edge, score)
//! pairs, the node positions and `config`, not on the order in which edges are listed.

mod components;
mod follow;
mod follow_config;
pub mod search;
pub(crate) mod selection;
mod walkthrough;
mod windows;

use serde::{Deserialize, Serialize};
use trackgnn_graph::Graph;

use crate::error::{Error, Result};

pub use components::connected_components;
pub use follow::{follow, follow_around};
pub use follow_config::FollowConfig;
pub use selection::{CandidateScore, candidate_scores, select_candidates};
pub use walkthrough::walkthrough;

/// The track id of nodes that are in no track of at least `min_hits` nodes.
pub const NO_TRACK: u32 = 0;

/// Without the nodes' layers, an edge is walked against its stored direction only when its
/// destination lies more than this \[mm\] inside its source in r: less is within the
/// spread of the r of two strip hits on one end-cap disk, which a particle may cross in
/// either order of their measured r.
pub const REVERSE_MIN_DR: f32 = 2.0;

/// The track-building method: how nodes are grouped into tracks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum TrackMethod {
    /// Connected components of the kept edges (the reference method).
    #[default]
    #[cfg_attr(feature = "clap", value(help = "Connected components of the edges above the cut"))]
    Cc,
    /// Walk-through along the best-scoring outgoing edges.
    #[cfg_attr(feature = "clap", value(help = "Walk along the best-scoring edges, resolving branchings"))]
    Walkthrough,
    /// Track following along the kept edges, guided by helix continuity and the scores.
    #[cfg_attr(
        feature = "clap",
        value(help = "Follow the helix along the edges down to a low score cut (for dense events)")
    )]
    Follow,
}

impl TrackMethod {
    /// The method's usual edge score cut: 0.5 (the field's edge threshold) for `Cc` and
    /// `Walkthrough`; 0.02 for `Follow`, whose helix windows do the rest of the selection.
    pub fn default_score_cut(self) -> f64 {
        match self {
            TrackMethod::Cc | TrackMethod::Walkthrough => 0.5,
            TrackMethod::Follow => 0.02,
        }
    }
}

/// Settings of track building. `Default` gives the reference values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrackBuilderConfig {
    /// The grouping method. Default: [`TrackMethod::Cc`].
    pub method: TrackMethod,
    /// Edges with score ≥ this cut are kept, in [0, 1]. Default 0.5 (the field's edge
    /// threshold). NaN scores are never kept.
    pub score_cut: f64,
    /// Smallest number of nodes a track may have, ≥ 1; smaller groups get [`NO_TRACK`].
    /// Default 5, as `trackgnn reconstruct --min-hits` and the field's evaluation.
    pub min_hits: usize,
    /// Walk-through only: at a node with several unvisited outgoing kept edges, every edge
    /// with score ≥ `branch_cut` is explored as a branch and the longest resulting path wins;
    /// below it only the best edge is followed. `None` never branches. Must be ≥
    /// `score_cut`. Default `Some(0.8)`.
    pub branch_cut: Option<f64>,
    /// Walk-through only: at most this many paths are explored from one start node, ≥ 1
    /// (bounds the work on dense graphs; once reached, only the best edge is followed).
    /// Default 64.
    pub max_paths: usize,
    /// Track following only: its windows and weights.
    pub follow: FollowConfig,
    /// Candidates of at most [`candidate_score_max_hits`](Self::candidate_score_max_hits)
    /// hits whose score ([`candidate_scores`] by [`candidate_score`](Self::candidate_score))
    /// is below this are dropped after building ([`select_candidates`]), in [0, 1]. Default
    /// 0: every candidate is kept.
    pub min_candidate_score: f64,
    /// How a candidate is scored for `min_candidate_score`. Default: its weakest link.
    pub candidate_score: CandidateScore,
    /// The longest candidate, in hits, that `min_candidate_score` applies to. Default: `None`
    /// (all).
    pub candidate_score_max_hits: Option<usize>,
}

/// The smallest candidate, in hits, that the track builders keep and that the track metrics
/// count (candidates and reconstructable particles) unless told otherwise: 5, everywhere (the
/// library, `trackgnn reconstruct`, Python's `Run`, `build_tracks` and `track_metrics`).
pub const DEFAULT_MIN_HITS: usize = 5;

impl Default for TrackBuilderConfig {
    fn default() -> Self {
        TrackBuilderConfig {
            method: TrackMethod::Cc,
            score_cut: TrackMethod::Cc.default_score_cut(),
            min_hits: DEFAULT_MIN_HITS,
            branch_cut: Some(0.8),
            max_paths: 64,
            follow: FollowConfig::default(),
            min_candidate_score: 0.0,
            candidate_score: CandidateScore::WeakestLink,
            candidate_score_max_hits: None,
        }
    }
}

impl TrackBuilderConfig {
    /// The reference settings for `method`, cutting edges at `score_cut` (default: the
    /// method's own, [`TrackMethod::default_score_cut`]); the walk-through's branch cut is the
    /// default one raised to the score cut when that is higher.
    pub fn for_method(method: TrackMethod, score_cut: Option<f64>) -> TrackBuilderConfig {
        let defaults = TrackBuilderConfig::default();
        let score_cut = score_cut.unwrap_or(method.default_score_cut());
        let branch_cut = Some(defaults.branch_cut.map_or(score_cut, |b| b.max(score_cut)));
        TrackBuilderConfig { method, score_cut, branch_cut, ..defaults }
    }

    /// Track following's settings, if it is the method.
    pub fn follow_settings(&self) -> Option<&FollowConfig> {
        (self.method == TrackMethod::Follow).then_some(&self.follow)
    }

    /// Whether building runs the hit search of track following.
    pub fn hit_search(&self) -> bool {
        self.method == TrackMethod::Follow && self.follow.search
    }

    /// Whether building uses the nodes' layers ([`ScoredEdges::with_layers`]): the
    /// walk-through and track following order two hits of one end-cap disk by them
    /// ([`ScoredEdges::outward`]), and the hit search needs them.
    pub fn uses_layers(&self) -> bool {
        self.method != TrackMethod::Cc
    }

    /// Checks every field's range.
    pub fn validate(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.score_cut) {
            return Err(Error::config("score_cut", format!("must be in [0, 1], got {}", self.score_cut)));
        }
        if self.min_hits == 0 {
            return Err(Error::config("min_hits", "must be at least 1, got 0"));
        }
        if let Some(b) = self.branch_cut
            && !(b >= self.score_cut && b <= 1.0)
        {
            return Err(Error::config(
                "branch_cut",
                format!("must be in [score_cut = {}, 1], got {b}", self.score_cut),
            ));
        }
        if self.max_paths == 0 {
            return Err(Error::config("max_paths", "must be at least 1, got 0"));
        }
        if !(0.0..=1.0).contains(&self.min_candidate_score) {
            return Err(Error::config(
                "min_candidate_score",
                format!("must be in [0, 1], got {}", self.min_candidate_score),
            ));
        }
        self.follow.validate()
    }
}

/// The input of track building: a directed graph with one score per edge.
///
/// Edge `e` joins node `src[e]` to node `dst[e]` and has score `scores[e]`, a probability in
/// [0, 1]. The walk-through and track following walk each edge in the direction a particle
/// of the targets' pT crosses its hits, outward ([`ScoredEdges::outward`]), whatever
/// direction it is stored in: graph builders may store a hit pair either way.
#[derive(Clone, Copy, Debug)]
pub struct ScoredEdges<'a> {
    /// The number of nodes.
    pub num_nodes: usize,
    /// Source node of each edge.
    pub src: &'a [u32],
    /// Destination node of each edge.
    pub dst: &'a [u32],
    /// Score of each edge.
    pub scores: &'a [f32],
    /// Optional radius r \[mm\] of each node: the walk-through starts from inner nodes first.
    /// Without it, node index order is used.
    pub r: Option<&'a [f32]>,
    /// Optional azimuth phi \[rad\] of each node (track following needs it).
    pub phi: Option<&'a [f32]>,
    /// Optional z \[mm\] of each node (track following needs it).
    pub z: Option<&'a [f32]>,
    /// Optional layer of each node: track following then extends its paths by a hit search
    /// beyond the edges ([`search`]).
    pub layers: Option<search::NodeLayers<'a>>,
}

impl<'a> ScoredEdges<'a> {
    /// Edges without node radii.
    ///
    /// # Panics
    /// If `src`, `dst` and `scores` differ in length.
    #[track_caller]
    pub fn new(num_nodes: usize, src: &'a [u32], dst: &'a [u32], scores: &'a [f32]) -> Self {
        let e = ScoredEdges { num_nodes, src, dst, scores, r: None, phi: None, z: None, layers: None };
        e.assert_shapes();
        e
    }

    /// The same edges with node radii.
    ///
    /// # Panics
    /// If `r.len() != num_nodes`.
    #[track_caller]
    pub fn with_r(self, r: &'a [f32]) -> Self {
        let e = ScoredEdges { r: Some(r), ..self };
        e.assert_shapes();
        e
    }

    /// The same edges with node positions in cylindrical coordinates (r \[mm\], phi \[rad\],
    /// z \[mm\]).
    ///
    /// # Panics
    /// If a slice's length differs from `num_nodes`.
    #[track_caller]
    pub fn with_positions(self, r: &'a [f32], phi: &'a [f32], z: &'a [f32]) -> Self {
        let e = ScoredEdges { r: Some(r), phi: Some(phi), z: Some(z), ..self };
        e.assert_shapes();
        e
    }

    /// The same edges with each node's layer and module, for track following and its hit
    /// search.
    ///
    /// # Panics
    /// If `layers.layer` or `layers.module` does not hold one entry per node.
    #[track_caller]
    pub fn with_layers(self, layers: search::NodeLayers<'a>) -> Self {
        let e = ScoredEdges { layers: Some(layers), ..self };
        e.assert_shapes();
        e
    }

    /// The edges of `graph` with `scores` (one per edge, e.g. the GNN's sigmoid outputs) and
    /// the graph's node positions.
    ///
    /// # Panics
    /// If `scores.len() != graph.num_edges()` or the graph's arrays are inconsistent.
    #[track_caller]
    pub fn from_graph(graph: &'a Graph, scores: &'a [f32]) -> Self {
        let e = ScoredEdges::new(graph.num_nodes(), &graph.src, &graph.dst, scores);
        let n = graph.num_nodes();
        if graph.r.len() == n && graph.phi.len() == n && graph.z.len() == n {
            e.with_positions(&graph.r, &graph.phi, &graph.z)
        } else if graph.r.len() == n {
            e.with_r(&graph.r)
        } else {
            e
        }
    }

    /// The number of edges.
    pub fn num_edges(&self) -> usize {
        self.src.len()
    }

    #[track_caller]
    pub(crate) fn assert_shapes(&self) {
        assert_eq!(self.src.len(), self.dst.len(), "src and dst differ in length");
        assert_eq!(self.src.len(), self.scores.len(), "one score per edge");
        for (name, v) in [("r", self.r), ("phi", self.phi), ("z", self.z)] {
            if let Some(v) = v {
                assert_eq!(v.len(), self.num_nodes, "one {name} per node");
            }
        }
        if let Some(l) = self.layers {
            assert_eq!(l.layer.len(), self.num_nodes, "one layer per node");
            assert_eq!(l.module.len(), self.num_nodes, "one module per node");
        }
    }

    /// Edge `(src, dst)` in the direction a particle crosses its two hits, as `(first, second)`.
    /// A particle of pT ≥ 1 GeV moves outward in r until it leaves the detector, so:
    /// - with the nodes' layers, two hits on one end-cap disk are ordered by |z| (their
    ///   measured r is no guide there: a strip hit's r is known only to a strip's length) and
    ///   every other pair by r (ties: lower node index first);
    /// - without layers but with radii, the edge is reversed only when `dst` lies more than
    ///   [`REVERSE_MIN_DR`] inside `src` in r, else it keeps its stored direction;
    /// - without radii, it keeps its stored direction.
    pub fn outward(&self, src: u32, dst: u32) -> (u32, u32) {
        let Some(r) = self.r else { return (src, dst) };
        let (rs, rd) = (r[src as usize], r[dst as usize]);
        let reverse = match self.layers {
            Some(l) => {
                let (ls, ld) = (l.layer[src as usize], l.layer[dst as usize]);
                let same_disk =
                    ls == ld && matches!(l.surfaces.get(usize::from(ls)), Some(search::Surface::Disk { .. }));
                match (same_disk, self.z) {
                    (true, Some(z)) => z[dst as usize].abs() < z[src as usize].abs(),
                    _ => (rd, dst) < (rs, src),
                }
            }
            None => rd < rs - REVERSE_MIN_DR,
        };
        if reverse { (dst, src) } else { (src, dst) }
    }

    /// Checks that every edge's nodes exist.
    pub(crate) fn check_nodes(&self) -> Result<()> {
        let n = self.num_nodes;
        for (edge, (&s, &d)) in self.src.iter().zip(self.dst).enumerate() {
            for node in [s, d] {
                if node as usize >= n {
                    return Err(Error::NodeOutOfRange { edge, node, num_nodes: n });
                }
            }
        }
        Ok(())
    }

    /// The kept edges (score ≥ `cut`, self-loops dropped) as `(src, dst, score)`.
    pub(crate) fn kept(&self, cut: f64) -> impl Iterator<Item = (u32, u32, f32)> + '_ {
        self.src
            .iter()
            .zip(self.dst)
            .zip(self.scores)
            .filter(move |((s, d), sc)| s != d && f64::from(**sc) >= cut)
            .map(|((&s, &d), &sc)| (s, d, sc))
    }
}

/// Builds tracks with a validated [`TrackBuilderConfig`].
#[derive(Clone, Debug)]
pub struct TrackBuilder {
    config: TrackBuilderConfig,
}

impl TrackBuilder {
    /// A builder; a config value out of range is an [`Error::Config`].
    pub fn new(config: TrackBuilderConfig) -> Result<TrackBuilder> {
        config.validate()?;
        Ok(TrackBuilder { config })
    }

    /// The config.
    pub fn config(&self) -> &TrackBuilderConfig {
        &self.config
    }

    /// One track id per node (see the [module docs](self) for the convention). An edge with
    /// a node index ≥ `num_nodes` is an [`Error::NodeOutOfRange`].
    ///
    /// # Panics
    /// If the slices of `edges` differ in length.
    #[track_caller]
    pub fn build(&self, edges: &ScoredEdges<'_>) -> Result<Vec<u32>> {
        let ids = match self.config.method {
            TrackMethod::Cc => connected_components(edges, &self.config),
            TrackMethod::Walkthrough => walkthrough(edges, &self.config),
            TrackMethod::Follow => follow(edges, &self.config),
        }?;
        Ok(self.score_selection(edges, ids))
    }

    /// Track following again around the candidates `kept` (a selection of [`build`](Self::build)'s),
    /// so that the hits of those dropped go back to the tracks they belong to
    /// ([`follow_around`]); then the same candidate score selection. For the other methods,
    /// `kept` as it is.
    ///
    /// # Panics
    /// If the slices of `edges` differ in length, or `kept` is not one id per node.
    #[track_caller]
    pub fn rebuild_around(&self, edges: &ScoredEdges<'_>, kept: &[u32]) -> Result<Vec<u32>> {
        if self.config.method != TrackMethod::Follow {
            return Ok(kept.to_vec());
        }
        let ids = follow_around(edges, &self.config, Some(kept))?;
        Ok(self.score_selection(edges, ids))
    }

    /// `ids` after the candidate score selection of the config, if any.
    fn score_selection(&self, edges: &ScoredEdges<'_>, ids: Vec<u32>) -> Vec<u32> {
        let c = &self.config;
        if c.min_candidate_score <= 0.0 {
            return ids;
        }
        let max_hits = c.candidate_score_max_hits.unwrap_or(usize::MAX);
        select_candidates(edges, &ids, c.candidate_score, c.min_candidate_score, max_hits)
    }
}

/// The number of tracks in a result of track building (its largest id).
pub fn num_tracks(track_ids: &[u32]) -> u32 {
    track_ids.iter().copied().max().unwrap_or(NO_TRACK)
}

/// Turns per-node group labels into track ids: groups for which `keep(label)` holds are
/// numbered 1, 2, … in the order of their smallest node; other nodes get [`NO_TRACK`].
/// `label[i] == u32::MAX` marks a node in no group.
pub(crate) fn number_tracks(labels: &[u32], keep: impl Fn(u32) -> bool) -> Vec<u32> {
    let mut id_of = vec![NO_TRACK; labels.len()];
    let mut next = 0u32;
    labels
        .iter()
        .map(|&l| {
            if l == u32::MAX || !keep(l) {
                return NO_TRACK;
            }
            let id = &mut id_of[l as usize];
            if *id == NO_TRACK {
                next += 1;
                *id = next;
            }
            *id
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracks::search::{NodeLayers, Surface};

    #[test]
    fn default_config_is_valid_and_bad_values_are_typed_errors() {
        TrackBuilderConfig::default().validate().unwrap();
        let bad = [
            TrackBuilderConfig { score_cut: 1.5, ..Default::default() },
            TrackBuilderConfig { score_cut: f64::NAN, ..Default::default() },
            TrackBuilderConfig { min_hits: 0, ..Default::default() },
            TrackBuilderConfig { branch_cut: Some(0.3), ..Default::default() },
            TrackBuilderConfig { max_paths: 0, ..Default::default() },
            TrackBuilderConfig { min_candidate_score: -0.1, ..Default::default() },
        ];
        let fields: Vec<&str> = bad
            .into_iter()
            .map(|c| match TrackBuilder::new(c) {
                Err(Error::Config { field, .. }) => field,
                other => panic!("expected a config error, got {other:?}"),
            })
            .collect();
        assert_eq!(fields, ["score_cut", "score_cut", "min_hits", "branch_cut", "max_paths", "min_candidate_score"]);
    }

    #[test]
    fn config_reads_from_json_with_defaults() {
        let c: TrackBuilderConfig = serde_json::from_str(r#"{"method": "walkthrough", "score_cut": 0.7}"#).unwrap();
        assert_eq!(c.method, TrackMethod::Walkthrough);
        assert_eq!(c.score_cut, 0.7);
        assert_eq!(c.min_hits, 5);
        assert!(serde_json::from_str::<TrackBuilderConfig>(r#"{"cut": 0.7}"#).is_err());
    }

    #[test]
    fn numbering_follows_the_smallest_node() {
        // Groups 7 (nodes 1, 3), 2 (nodes 0, 4), 5 (node 2, dropped), node 5 in none.
        let ids = number_tracks(&[2, 7, 5, 7, 2, u32::MAX, 0, 0, 0, 0], |l| l != 5);
        assert_eq!(ids, [1, 2, 0, 2, 1, 0, 3, 3, 3, 3]);
        assert_eq!(num_tracks(&ids), 3);
        assert_eq!(num_tracks(&[]), NO_TRACK);
    }

    #[test]
    fn bad_node_index_is_an_error() {
        let e = ScoredEdges::new(3, &[0, 1], &[1, 3], &[0.9, 0.9]);
        for method in [TrackMethod::Cc, TrackMethod::Walkthrough] {
            let b = TrackBuilder::new(TrackBuilderConfig { method, ..Default::default() }).unwrap();
            match b.build(&e) {
                Err(Error::NodeOutOfRange { edge: 1, node: 3, num_nodes: 3 }) => {}
                other => panic!("{other:?}"),
            }
        }
    }

    /// Seven hits of a 1.5 GeV prompt helix into the negative end-cap (radius of curvature
    /// 2500 mm, dz/dr = −4), as (r, phi, z).
    fn endcap_helix() -> Vec<[f32; 3]> {
        [32.0f32, 72.0, 116.0, 172.0, 260.0, 360.0, 500.0]
            .iter()
            .map(|&r| [r, 0.1 + (r / 5000.0).asin(), -4.0 * r])
            .collect()
    }

    /// Tracks of `nodes` with `edges` (all scoring 1) by `method`, cut 0.5, candidates of
    /// ≥ 5 hits (as `reconstruct` builds them), with the nodes' layers if given.
    fn build_nodes(
        method: TrackMethod,
        nodes: &[[f32; 3]],
        edges: &[(u32, u32)],
        layers: Option<NodeLayers>,
    ) -> Vec<u32> {
        let col = |k: usize| nodes.iter().map(|n| n[k]).collect::<Vec<f32>>();
        let (r, phi, z) = (col(0), col(1), col(2));
        let (s, d): (Vec<u32>, Vec<u32>) = edges.iter().copied().unzip();
        let sc = vec![1.0f32; edges.len()];
        let mut e = ScoredEdges::new(nodes.len(), &s, &d, &sc).with_positions(&r, &phi, &z);
        if let Some(l) = layers {
            e = e.with_layers(l);
        }
        let cfg = TrackBuilderConfig { min_hits: 5, ..TrackBuilderConfig::for_method(method, Some(0.5)) };
        TrackBuilder::new(cfg).unwrap().build(&e).unwrap()
    }

    /// The same edges, each stored inward (larger node index first) or outward.
    fn stored(edges: &[(u32, u32)], inward: bool) -> Vec<(u32, u32)> {
        edges.iter().map(|&(a, b)| if inward { (a.max(b), a.min(b)) } else { (a.min(b), a.max(b)) }).collect()
    }

    #[test]
    fn every_builder_finds_a_track_whose_edges_point_both_ways() {
        // The geometric graph with |z0| ≤ 1000 mm admits the pairs of pixel disks nearer than
        // 1000 mm in both orders (rays from z0 = ±1000 mm cross them outer disk first) and
        // keeps one edge per hit pair: in the negative end-cap the inward one. A particle's
        // edges then point 0 → 1 ← 2 ← 3 ← 4 → 5 → 6; walking them as stored, the walk-through
        // and track following found pieces of at most 4 hits and no 5-hit track.
        let mixed = [(0, 1), (2, 1), (3, 2), (4, 3), (4, 5), (5, 6)];
        let (inward, outward) = (stored(&mixed, true), stored(&mixed, false));
        // Both orders of one pair at once (a graph without deduplication) count as one edge.
        let both: Vec<(u32, u32)> = outward.iter().chain(&inward).copied().collect();
        let nodes = endcap_helix();
        for method in [TrackMethod::Cc, TrackMethod::Walkthrough, TrackMethod::Follow] {
            for edges in [&mixed[..], &inward, &outward, &both] {
                assert_eq!(build_nodes(method, &nodes, edges, None), [1; 7], "{method:?}, edges {edges:?}");
            }
        }
    }

    /// The helix with its sixth and seventh hits on overlapping strip modules of one end-cap
    /// disk, 2 mm apart in z: the particle crosses the module nearer the origin first (0.5 mm
    /// further out in r), but the second hit's measured r is 0.3 mm smaller (a strip hit's r
    /// is known to a strip's length). Layers: nodes 0–2 on barrel layers, the others on disks,
    /// nodes 5 and 6 on one (layer 5).
    fn disk_overlap() -> (Vec<[f32; 3]>, Vec<u16>, Vec<Surface>) {
        let mut nodes = endcap_helix();
        nodes.insert(6, [nodes[5][0] - 0.3, 0.1 + (360.5f32 / 5000.0).asin(), nodes[5][2] - 2.0]);
        let layer: Vec<u16> = vec![0, 1, 2, 3, 4, 5, 5, 6];
        let surfaces = [32.0, 72.0, 116.0]
            .map(|r| Surface::Cylinder { r, z_min: -1000.0, z_max: 1000.0 })
            .into_iter()
            .chain([-688.0, -1040.0, -1440.0, -2000.0].map(|z| Surface::Disk { z, r_min: 30.0, r_max: 1000.0 }))
            .collect();
        (nodes, layer, surfaces)
    }

    #[test]
    fn hits_of_one_disk_are_walked_by_z() {
        let (nodes, layer, surfaces) = disk_overlap();
        let chain: Vec<(u32, u32)> = (0..7).map(|k| (k, k + 1)).collect();
        let module: Vec<u32> = (0..layer.len() as u32).collect();
        let layers = NodeLayers { layer: &layer, module: &module, surfaces: &surfaces };
        for method in [TrackMethod::Walkthrough, TrackMethod::Follow] {
            // Stored along the particle, the small drop in r does not reverse the edge.
            assert_eq!(build_nodes(method, &nodes, &chain, None), [1; 8], "{method:?}");
            assert_eq!(build_nodes(method, &nodes, &chain, Some(layers)), [1; 8], "{method:?}");
            // With the layers, the edges' stored directions do not matter.
            assert_eq!(build_nodes(method, &nodes, &stored(&chain, true), Some(layers)), [1; 8], "{method:?}");
        }
    }

    #[test]
    fn outward_orders_by_r_or_on_a_disk_by_z() {
        let (nodes, layer, surfaces) = disk_overlap();
        let col = |k: usize| nodes.iter().map(|n| n[k]).collect::<Vec<f32>>();
        let (r, phi, z) = (col(0), col(1), col(2));
        let e = ScoredEdges::new(nodes.len(), &[], &[], &[]);
        let with_r = e.with_positions(&r, &phi, &z);
        let module: Vec<u32> = (0..layer.len() as u32).collect();
        let with_layers = with_r.with_layers(NodeLayers { layer: &layer, module: &module, surfaces: &surfaces });
        // Without radii: as stored.
        assert_eq!((e.outward(5, 2), e.outward(2, 5)), ((5, 2), (2, 5)));
        // With radii: a clear drop in r reverses an edge; one within REVERSE_MIN_DR does not.
        assert_eq!((with_r.outward(4, 2), with_r.outward(2, 4)), ((2, 4), (2, 4)));
        assert!(r[5] > r[6] && r[5] - r[6] < REVERSE_MIN_DR);
        assert_eq!((with_r.outward(5, 6), with_r.outward(6, 5)), ((5, 6), (6, 5)));
        // With layers: on one disk by |z|, else by r, whatever the stored direction.
        assert_eq!((with_layers.outward(5, 6), with_layers.outward(6, 5)), ((5, 6), (5, 6)));
        assert_eq!((with_layers.outward(4, 2), with_layers.outward(2, 4)), ((2, 4), (2, 4)));
        // Two hits of one barrel layer 0.3 mm apart in r: by r.
        let (r2, layer2) = ([100.3f32, 100.0], [0u16, 0]);
        let barrel = ScoredEdges::new(2, &[], &[], &[])
            .with_positions(&r2, &[0.0, 0.0], &[10.0, 5.0])
            .with_layers(NodeLayers { layer: &layer2, module: &[0, 1], surfaces: &surfaces });
        assert_eq!((barrel.outward(0, 1), barrel.outward(1, 0)), ((1, 0), (1, 0)));
    }

    #[test]
    #[should_panic(expected = "one score per edge")]
    fn score_count_mismatch_panics() {
        ScoredEdges::new(3, &[0, 1], &[1, 2], &[0.9]);
    }
}
