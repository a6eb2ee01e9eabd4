//! The module map: which module pairs real tracks connect, with the ranges of the pair
//! quantities seen, learned from training events; graph building then joins hits of mapped
//! module pairs whose quantities fall in those ranges (grown by a margin).
//!
//! This is the module-map method of the ATLAS ITk GNN pipeline (Biscarat et al., "Towards a
//! realistic track reconstruction algorithm based on graph neural networks for the HL-LHC",
//! EPJ Web Conf. 251 (2021) 03047): most pairs of modules are never joined by a real track,
//! so the map keeps graphs small and pure.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use trackgnn_trackml::ids::ModuleId;
use trackgnn_trackml::{Detector, Event};

use crate::error::{Error, Result};
use crate::features::{HitTable, NodeCuts};
use crate::geometric::dphi;
use crate::truth::{TargetConfig, TruthEdges, truth_edges};

const MAGIC: &[u8; 8] = b"TGNNMMAP";
/// Index of Δφ among the pair quantities.
const DPHI: usize = 0;
/// Index of Δφ/Δr among the pair quantities.
const PHI_SLOPE: usize = 3;
/// Format 2 adds the triplets; format 1 files (pairs only) still load.
const VERSION: u32 = 2;
/// Bytes of one pair entry and of one triplet entry in the file.
const PAIR_BYTES: usize = 52;
const TRIPLET_BYTES: usize = 44;

/// The quantities of a directed hit pair (a → b) the map records.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PairQuantities {
    /// φ_b − φ_a wrapped \[rad\].
    pub dphi: f32,
    /// z_b − z_a \[mm\].
    pub dz: f32,
    /// z where the line through both hits meets the beam line \[mm\] (non-finite if Δr = 0).
    pub z0: f32,
    /// Δφ/Δr [rad/mm] (non-finite if Δr = 0).
    pub phi_slope: f32,
}

impl PairQuantities {
    /// The quantities of nodes `a` → `b`.
    #[inline]
    pub fn of(t: &HitTable, a: usize, b: usize) -> Self {
        let dp = dphi(t.phi[a], t.phi[b]);
        let dz = t.z[b] - t.z[a];
        let dr = t.r[b] - t.r[a];
        PairQuantities { dphi: dp, dz, z0: t.z[a] - t.r[a] * dz / dr, phi_slope: dp / dr }
    }
    /// (dphi, dz, z0, phi_slope) as an array.
    pub fn as_array(&self) -> [f32; 4] {
        [self.dphi, self.dz, self.z0, self.phi_slope]
    }
}

/// `in_window(&PairQuantities::of(t, a, b).as_array(), lo, hi)`, each quantity computed only
/// if the ones before are in their windows (most candidate pairs fail on Δφ, and the divisions
/// of the last two are the expensive part). The same arithmetic, so the same answer.
#[inline]
fn pair_in_window(t: &HitTable, a: usize, b: usize, lo: &[f32; 4], hi: &[f32; 4]) -> bool {
    let ok = |k: usize, q: f32| in_bound(q, lo[k], hi[k]);
    let dp = dphi(t.phi[a], t.phi[b]);
    if !ok(0, dp) {
        return false;
    }
    let dz = t.z[b] - t.z[a];
    if !ok(1, dz) {
        return false;
    }
    let dr = t.r[b] - t.r[a];
    ok(2, t.z[a] - t.r[a] * dz / dr) && ok(3, dp / dr)
}

/// Ranges of N quantities seen for one module pair or triplet: how many true edges (or
/// triplets) were seen, and the min and max of each quantity over them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ranges<const N: usize> {
    /// True edges (or triplets) seen.
    pub count: u32,
    /// Minimum of each quantity.
    pub min: [f32; N],
    /// Maximum of each quantity.
    pub max: [f32; N],
}

/// Ranges of a module pair: dphi, dz, z0, phi_slope.
pub type PairRanges = Ranges<4>;
/// Ranges of a module triplet: the polar and azimuthal direction changes.
pub type TripletRanges = Ranges<2>;

impl<const N: usize> Ranges<N> {
    fn new() -> Self {
        Ranges { count: 0, min: [f32::INFINITY; N], max: [f32::NEG_INFINITY; N] }
    }

    fn add(&mut self, q: [f32; N]) {
        self.count += 1;
        for (k, v) in q.into_iter().enumerate() {
            if v.is_finite() {
                self.min[k] = self.min[k].min(v);
                self.max[k] = self.max[k].max(v);
            }
        }
    }

    fn merge(&mut self, o: &Ranges<N>) {
        self.count += o.count;
        for k in 0..N {
            self.min[k] = self.min[k].min(o.min[k]);
            self.max[k] = self.max[k].max(o.max[k]);
        }
    }

    /// The seen ranges, those of the `mirrored` quantities made symmetric about zero (the
    /// opposite charge bends the other way, so ranges seen from a few tracks are mirrored), each
    /// grown by `relative` of its width plus `absolute`.
    fn grown(&self, relative: f64, absolute: &[f64; N], mirrored: &[usize]) -> ([f32; N], [f32; N]) {
        let (mut lo, mut hi) = (self.min, self.max);
        for k in 0..N {
            let (mut min, mut max) = (self.min[k] as f64, self.max[k] as f64);
            if mirrored.contains(&k) {
                let m = min.abs().max(max.abs());
                (min, max) = (-m, m);
            }
            let grow = relative * (max - min).max(0.0) + absolute[k];
            lo[k] = (min - grow) as f32;
            hi[k] = (max + grow) as f32;
        }
        (lo, hi)
    }
}

impl Ranges<4> {
    /// The accepted window of a pair's (dphi, dz, z0, phi_slope): the seen ranges, Δφ and Δφ/Δr
    /// mirrored about zero, grown by `margin`. A bound that is not finite does not constrain.
    pub fn window(&self, margin: &MapMargin) -> ([f32; 4], [f32; 4]) {
        self.grown(margin.relative, &margin.absolute, &[DPHI, PHI_SLOPE])
    }
}

impl Ranges<2> {
    /// The accepted window of a triplet's direction changes: the seen ranges, the azimuthal
    /// change mirrored about zero, grown by `margin`.
    pub fn window(&self, margin: &MapMargin) -> ([f32; 2], [f32; 2]) {
        self.grown(margin.relative, &margin.triplet_absolute, &[TRIPLET_DPHI])
    }
}

/// A hash map with a fast, fixed hash (module ids are not chosen by an adversary); nothing
/// depends on its iteration order.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

/// Nodes (or edges) per rayon task in the loops over them. Each task's output is kept in task
/// order, so the edges are the same, in the same order, whatever the number of threads.
const PAR_CHUNK: usize = 512;

/// Edge indices grouped by node (`key[e]` is edge e's node), each node's run sorted by `order`
/// (the runs in parallel): the edges of node i are `idx[start[i]..start[i + 1]]`.
fn edges_by_node<K: Ord>(n: usize, key: &[u32], order: impl Fn(u32) -> K + Sync) -> (Vec<u32>, Vec<u32>) {
    let trackgnn_trackml::index::Csr { offsets: start, edges: mut idx } = trackgnn_trackml::index::Csr::build(key, n);
    let mut runs: Vec<&mut [u32]> = Vec::with_capacity(n);
    let mut rest = idx.as_mut_slice();
    for i in 0..n {
        let (run, tail) = rest.split_at_mut((start[i + 1] - start[i]) as usize);
        runs.push(run);
        rest = tail;
    }
    runs.par_iter_mut().with_min_len(PAR_CHUNK).for_each(|run| run.sort_unstable_by_key(|&e| order(e)));
    (start, idx)
}

/// A run of a node's edges whose other ends lie on one module: (module, first, end) as
/// positions in the node's edge list.
type ModuleRun = (ModuleId, usize, usize);

/// The runs of `edges` (sorted by the module of their `end` node) by that module, into `out`.
fn module_runs(t: &HitTable, edges: &[u32], end: &[u32], out: &mut Vec<ModuleRun>) {
    out.clear();
    for (k, &e) in edges.iter().enumerate() {
        let m = t.module[end[e as usize] as usize];
        match out.last_mut() {
            Some(last) if last.0 == m => last.2 = k + 1,
            _ => out.push((m, k, k + 1)),
        }
    }
}

/// One node's share of the triplet check, reused from node to node by a rayon task: its in-
/// and out-edges' directions, whether each is kept, and their module runs.
#[derive(Default)]
struct NodeScratch {
    din: Vec<[f32; 2]>,
    dout: Vec<[f32; 2]>,
    kin: Vec<bool>,
    kout: Vec<bool>,
    in_runs: Vec<ModuleRun>,
    out_runs: Vec<ModuleRun>,
}

/// True if every quantity lies in its window; a bound that is not finite (a quantity never seen
/// finite in training) does not constrain.
#[inline]
fn in_window<const N: usize>(q: &[f32; N], lo: &[f32; N], hi: &[f32; N]) -> bool {
    (0..N).all(|k| in_bound(q[k], lo[k], hi[k]))
}

/// One quantity of [`in_window`]: within [lo, hi], or unconstrained when lo is not finite.
#[inline]
fn in_bound(q: f32, lo: f32, hi: f32) -> bool {
    !lo.is_finite() || (q >= lo && q <= hi)
}

/// How far \[mm\] a hit b on the layer of a or c may lie from the line a → c in the transverse
/// plane and still explain a → c away as a shortcut.
///
/// Why: the direction of a same-layer segment (two overlapping modules, millimetres apart) is
/// too poorly measured for the triplet window to tell the track's own second hit on the layer
/// (on its line, within the hits' r-φ resolution of 10–40 µm and the helix's deviation from the
/// chord near its end, well under 0.1 mm) from another particle's hit nearby.
const SAME_LAYER_OFFSET_MM: f32 = 1.0;

/// The distance of hit `b` from the line through hits `a` and `c` in the transverse plane \[mm\].
fn transverse_offset(t: &HitTable, a: usize, c: usize, b: usize) -> f32 {
    let (ux, uy) = (t.x[c] - t.x[a], t.y[c] - t.y[a]);
    let (vx, vy) = (t.x[b] - t.x[a], t.y[b] - t.y[a]);
    let len = ux.hypot(uy);
    if len > 0.0 { (ux * vy - uy * vx).abs() / len } else { vx.hypot(vy) }
}

/// The quantities of a hit triplet a → b → c the map records: how the direction of the
/// segment b → c differs from that of a → b.
///
/// Why these: a helix keeps its polar angle, so the change of the segments' polar angle is
/// multiple scattering (and hit resolution) only, and the change of their azimuthal direction is
/// the bending over the segment length plus scattering. Both hold for any particle, wherever it
/// was produced, unlike z0 and Δφ/Δr, which assume a track from the beam line.
#[inline]
pub fn triplet_quantities(t: &HitTable, a: usize, b: usize, c: usize) -> [f32; 2] {
    direction_change(segment_direction(t, a, b), segment_direction(t, b, c))
}

/// The (polar, azimuthal) angle of the direction of the segment a → b.
#[inline]
fn segment_direction(t: &HitTable, a: usize, b: usize) -> [f32; 2] {
    let d = [t.x[b] - t.x[a], t.y[b] - t.y[a], t.z[b] - t.z[a]];
    [d[0].hypot(d[1]).atan2(d[2]), d[1].atan2(d[0])]
}

/// The triplet quantities from the directions of its two segments.
#[inline]
fn direction_change(d1: [f32; 2], d2: [f32; 2]) -> [f32; 2] {
    [d2[0] - d1[0], dphi(d1[1], d2[1])]
}

/// Index of the azimuthal direction change among the triplet quantities.
const TRIPLET_DPHI: usize = 1;

/// How far beyond the seen ranges graph building accepts a pair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MapMargin {
    /// Each range grows by this fraction of its width on both sides.
    pub relative: f64,
    /// And by these absolute amounts: dphi \[rad\], dz \[mm\], z0 \[mm\], phi_slope [rad/mm].
    pub absolute: [f64; 4],
    /// Keep only edges that form, with a neighbouring edge, a module triplet of the map whose
    /// direction changes lie in its ranges (when the map has triplets).
    pub triplets: bool,
    /// Absolute growth of the triplet ranges: polar and azimuthal direction change \[rad\].
    pub triplet_absolute: [f64; 2],
    /// Drop an edge a → c when edges a → b → c form a mapped triplet in its window (when the
    /// map has triplets): a → c skips the hit b of the same track, and module-wise truth joins
    /// only consecutive hits.
    pub drop_shortcuts: bool,
}

impl Default for MapMargin {
    fn default() -> Self {
        MapMargin {
            relative: 0.1,
            absolute: [1e-3, 2.0, 10.0, 5e-5],
            triplets: true,
            triplet_absolute: [2e-3, 2e-3],
            drop_shortcuts: true,
        }
    }
}

/// Which true edges of the training events a module map records.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MapConfig {
    /// Particles' pT and hit count (the target definition).
    pub target: TargetConfig,
    /// Only particles produced within this distance of the beam line \[mm\] (prompt particles).
    ///
    /// Why: secondaries from decays and nuclear interactions start anywhere in the tracker, so
    /// their z0 and Δφ/Δr stray far from what prompt tracks give; recorded as min/max they widen
    /// every range they touch until, over many training events, the map admits far more fakes.
    /// Their edges are still found where they fall inside the prompt ranges and margins.
    pub max_vertex_r: Option<f64>,
}

impl Default for MapConfig {
    fn default() -> Self {
        MapConfig { target: TargetConfig::default(), max_vertex_r: Some(1.0) }
    }
}

impl MapConfig {
    /// The hits a map learns from: those of particles with pT ≥ the target's, noise dropped.
    pub fn node_cuts(&self) -> NodeCuts {
        NodeCuts { pt_min: Some(self.target.pt_min), remove_noise: true, eta_range: None }
    }

    /// Whether a generated primary particle of transverse momentum `pt` \[GeV\] can give the map
    /// an edge, so that training events drawn for a map need simulate only those.
    ///
    /// A prompt-only map (`max_vertex_r` set) records charged primaries above the target pT.
    /// A map that records secondaries too keeps every primary above half the cut, neutral ones
    /// included: a decay or conversion product gains at most the decay momentum (≤ 0.21 GeV for
    /// K0_S) in pT over its parent, and a nuclear-interaction product rarely more.
    pub fn keeps_primary(&self, pt: f64, charged: bool) -> bool {
        match self.max_vertex_r {
            Some(_) => charged && pt >= self.target.pt_min,
            None => pt >= 0.5 * self.target.pt_min,
        }
    }
}

/// A module map learned from training events.
#[derive(Clone, Debug, PartialEq)]
pub struct ModuleMap {
    /// Which true edges were recorded.
    pub config: MapConfig,
    /// Training events seen.
    pub events: u64,
    entries: FastMap<(ModuleId, ModuleId), PairRanges>,
    triplets: FastMap<(ModuleId, ModuleId, ModuleId), TripletRanges>,
}

/// What the map file records besides the entries.
#[derive(Serialize, Deserialize)]
struct MapHeader {
    config: MapConfig,
    events: u64,
    entries: u64,
    #[serde(default)]
    triplets: u64,
}

impl ModuleMap {
    /// An empty map recording edges of particles selected by `config`.
    pub fn new(config: MapConfig) -> Self {
        ModuleMap { config, events: 0, entries: FastMap::default(), triplets: FastMap::default() }
    }

    /// Number of module pairs.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if the map has no pairs.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Number of module triplets.
    pub fn triplet_count(&self) -> usize {
        self.triplets.len()
    }

    /// The ranges recorded for a module pair.
    pub fn get(&self, a: ModuleId, b: ModuleId) -> Option<&PairRanges> {
        self.entries.get(&(a, b))
    }

    /// Records one training event (with truth and particles): its hits that pass
    /// [`MapConfig::node_cuts`], then the true edges the map's selection keeps.
    pub fn add_training_event(&mut self, event: &Event, det: &Detector) -> Result<()> {
        let table = HitTable::build(event, det, &self.config.node_cuts())?;
        let truth = truth_edges(&table, &self.config.target);
        self.add_event(&table, &truth);
        Ok(())
    }

    /// Records the true edges of one training event whose particles pass the map's selection
    /// (`truth` must come from [`crate::truth::truth_edges`] with `self.config.target`).
    pub fn add_event(&mut self, t: &HitTable, truth: &TruthEdges) {
        self.events += 1;
        let vertex_r = t.truth.as_ref().map(|nt| &nt.vertex_r);
        let selected = |i: usize| {
            truth.target[i]
                && match (self.config.max_vertex_r, vertex_r) {
                    (Some(max), Some(vr)) => vr[truth.src[i] as usize] as f64 <= max,
                    _ => true,
                }
        };
        // Selected edges by source node, for the triplets a → b → c.
        let mut out_of: HashMap<u32, Vec<u32>> = HashMap::new();
        for i in (0..truth.len()).filter(|&i| selected(i)) {
            out_of.entry(truth.src[i]).or_default().push(truth.dst[i]);
        }
        for i in (0..truth.len()).filter(|&i| selected(i)) {
            let (a, b) = (truth.src[i] as usize, truth.dst[i] as usize);
            for &c in out_of.get(&(b as u32)).map_or(&[][..], |v| v.as_slice()) {
                let c = c as usize;
                self.triplets
                    .entry((t.module[a], t.module[b], t.module[c]))
                    .or_insert_with(TripletRanges::new)
                    .add(triplet_quantities(t, a, b, c));
            }
        }
        for i in 0..truth.len() {
            if !selected(i) {
                continue;
            }
            let (a, b) = (truth.src[i] as usize, truth.dst[i] as usize);
            let mut q = PairQuantities::of(t, a, b);
            if t.layer[a] == t.layer[b] {
                // Two hits on overlapping modules of one layer differ in r by a fraction of a
                // millimetre: z0 and Δφ/Δr are numerically meaningless there.
                q.z0 = f32::NAN;
                q.phi_slope = f32::NAN;
            }
            self.entries.entry((t.module[a], t.module[b])).or_insert_with(PairRanges::new).add(q.as_array());
        }
    }

    /// Adds another map's entries (maps built in parallel over event shards).
    pub fn merge(&mut self, other: &ModuleMap) {
        self.events += other.events;
        for (k, r) in &other.entries {
            self.entries.entry(*k).or_insert_with(PairRanges::new).merge(r);
        }
        for (k, r) in &other.triplets {
            self.triplets.entry(*k).or_insert_with(TripletRanges::new).merge(r);
        }
    }

    /// The edges (src, dst) of a graph: node pairs on mapped module pairs whose quantities
    /// lie within the recorded ranges grown by `margin`.
    pub fn build_edges(&self, t: &HitTable, margin: &MapMargin) -> (Vec<u32>, Vec<u32>) {
        let mut by_module: FastMap<ModuleId, Vec<u32>> = FastMap::default();
        for (i, m) in t.module.iter().enumerate() {
            by_module.entry(*m).or_default().push(i as u32);
        }
        // Per source module: (destination module, lower bounds, upper bounds).
        type Window = (ModuleId, [f32; 4], [f32; 4]);
        let mut targets: FastMap<ModuleId, Vec<Window>> = FastMap::default();
        for (&(a, b), r) in &self.entries {
            if by_module.contains_key(&a) && by_module.contains_key(&b) {
                let (lo, hi) = r.window(margin);
                targets.entry(a).or_default().push((b, lo, hi));
            }
        }
        let mut modules: Vec<&ModuleId> = targets.keys().collect();
        modules.sort_unstable();
        // Source modules in parallel, their edges concatenated in module order.
        let parts: Vec<(Vec<u32>, Vec<u32>)> = modules
            .par_iter()
            .with_min_len(PAR_CHUNK / 64)
            .map(|a_mod| {
                let mut outs = targets[*a_mod].clone();
                outs.sort_unstable_by_key(|o| o.0);
                // Each destination module's nodes looked up once, not once per source node.
                let outs: Vec<(&[u32], [f32; 4], [f32; 4])> =
                    outs.iter().map(|(b_mod, lo, hi)| (by_module[b_mod].as_slice(), *lo, *hi)).collect();
                let (mut src, mut dst) = (Vec::new(), Vec::new());
                for &a in &by_module[*a_mod] {
                    for (b_nodes, lo, hi) in &outs {
                        for &b in *b_nodes {
                            if a != b && pair_in_window(t, a as usize, b as usize, lo, hi) {
                                src.push(a);
                                dst.push(b);
                            }
                        }
                    }
                }
                (src, dst)
            })
            .collect();
        let (src, dst): (Vec<u32>, Vec<u32>) = (
            parts.iter().flat_map(|p| p.0.iter().copied()).collect(),
            parts.iter().flat_map(|p| p.1.iter().copied()).collect(),
        );
        if self.triplets.is_empty() {
            return (src, dst);
        }
        let (src, dst) = if margin.triplets { self.keep_triplet_edges(t, margin, src, dst) } else { (src, dst) };
        if margin.drop_shortcuts { self.drop_shortcuts(t, margin, src, dst) } else { (src, dst) }
    }

    /// Keeps the directed edges a → b that, with an edge b → c or an edge before a → b, form a
    /// mapped module triplet whose direction changes lie in its window.
    fn keep_triplet_edges(
        &self,
        t: &HitTable,
        margin: &MapMargin,
        src: Vec<u32>,
        dst: Vec<u32>,
    ) -> (Vec<u32>, Vec<u32>) {
        let n = t.len();
        // Edge indices by destination (in) and by source (out), each sorted by the other end's
        // module so edges to one module form a run.
        let (in_start, in_idx) = edges_by_node(n, &dst, |e| t.module[src[e as usize] as usize]);
        let (out_start, out_idx) = edges_by_node(n, &src, |e| t.module[dst[e as usize] as usize]);
        // Each edge's direction once: a node's in × out combinations then cost a subtraction.
        let dir: Vec<[f32; 2]> =
            src.par_iter().zip(&dst).map(|(&a, &b)| segment_direction(t, a as usize, b as usize)).collect();
        // Nodes in parallel. An edge is kept as the in-edge of its destination node or as the
        // out-edge of its source node: each flag is set by one node only.
        let keep_in: Vec<AtomicBool> = src.iter().map(|_| AtomicBool::new(false)).collect();
        let keep_out: Vec<AtomicBool> = src.iter().map(|_| AtomicBool::new(false)).collect();
        (0..n).into_par_iter().with_min_len(PAR_CHUNK).for_each_init(NodeScratch::default, |s, b| {
            let ins = &in_idx[in_start[b] as usize..in_start[b + 1] as usize];
            let outs = &out_idx[out_start[b] as usize..out_start[b + 1] as usize];
            if ins.is_empty() || outs.is_empty() {
                return;
            }
            let NodeScratch { din, dout, kin, kout, in_runs, out_runs } = s;
            module_runs(t, ins, &src, in_runs);
            module_runs(t, outs, &dst, out_runs);
            // The node's edges' directions and flags side by side (the edges' own are scattered).
            din.clear();
            din.extend(ins.iter().map(|&e| dir[e as usize]));
            dout.clear();
            dout.extend(outs.iter().map(|&e| dir[e as usize]));
            kin.clear();
            kin.resize(ins.len(), false);
            kout.clear();
            kout.resize(outs.len(), false);
            let mb = t.module[b];
            for &(ma, i0, i1) in in_runs.iter() {
                for &(mc, o0, o1) in out_runs.iter() {
                    let Some(r) = self.triplets.get(&(ma, mb, mc)) else { continue };
                    let (lo, hi) = r.window(margin);
                    for i in i0..i1 {
                        for o in o0..o1 {
                            if !(kin[i] && kout[o]) && in_window(&direction_change(din[i], dout[o]), &lo, &hi) {
                                kin[i] = true;
                                kout[o] = true;
                            }
                        }
                    }
                }
            }
            for (&e, _) in ins.iter().zip(kin.iter()).filter(|&(_, &k)| k) {
                keep_in[e as usize].store(true, Ordering::Relaxed);
            }
            for (&e, _) in outs.iter().zip(kout.iter()).filter(|&(_, &k)| k) {
                keep_out[e as usize].store(true, Ordering::Relaxed);
            }
        });
        let kept = |e: usize| keep_in[e].load(Ordering::Relaxed) || keep_out[e].load(Ordering::Relaxed);
        (0..src.len()).filter(|&e| kept(e)).map(|e| (src[e], dst[e])).unzip()
    }

    /// Drops each edge a → c for which edges a → b and b → c exist and (a, b, c) lies in the
    /// window of its mapped module triplet.
    fn drop_shortcuts(&self, t: &HitTable, margin: &MapMargin, src: Vec<u32>, dst: Vec<u32>) -> (Vec<u32>, Vec<u32>) {
        // Each node's out-edges, sorted by destination.
        let (start, idx) = edges_by_node(t.len(), &src, |e| dst[e as usize]);
        let out = |a: u32| &idx[start[a as usize] as usize..start[a as usize + 1] as usize];
        let has_edge = |b: u32, c: u32| out(b).binary_search_by_key(&c, |&e| dst[e as usize]).is_ok();
        let dist2 = |i: usize, j: usize| {
            let (dx, dy, dz) = (t.x[j] - t.x[i], t.y[j] - t.y[i], t.z[j] - t.z[i]);
            dx * dx + dy * dy + dz * dz
        };
        let explained = |a: u32, c: u32| {
            out(a).iter().map(|&e| dst[e as usize]).any(|b| {
                b != c && has_edge(b, c) && {
                    let (a, b, c) = (a as usize, b as usize, c as usize);
                    // b must lie between a and c: a later hit of c's own track on an overlapping
                    // module (c → b, which a map may hold reversed) must not explain a → c away.
                    let ac = dist2(a, c);
                    dist2(a, b) < ac
                        && dist2(b, c) < ac
                        && (t.layer[b] != t.layer[a] && t.layer[b] != t.layer[c]
                            || transverse_offset(t, a, c, b) <= SAME_LAYER_OFFSET_MM)
                        && self.triplets.get(&(t.module[a], t.module[b], t.module[c])).is_some_and(|r| {
                            let (lo, hi) = r.window(margin);
                            in_window(&triplet_quantities(t, a, b, c), &lo, &hi)
                        })
                }
            })
        };
        (0..src.len())
            .into_par_iter()
            .with_min_len(PAR_CHUNK)
            .filter(|&e| !explained(src[e], dst[e]))
            .map(|e| (src[e], dst[e]))
            .unzip()
    }

    /// Writes the map atomically; returns its size in bytes.
    pub fn save(&self, path: &Path) -> Result<u64> {
        let mut keys: Vec<&(ModuleId, ModuleId)> = self.entries.keys().collect();
        keys.sort_unstable();
        let mut tkeys: Vec<&(ModuleId, ModuleId, ModuleId)> = self.triplets.keys().collect();
        tkeys.sort_unstable();
        let header = serde_json::to_vec(&MapHeader {
            config: self.config.clone(),
            events: self.events,
            entries: keys.len() as u64,
            triplets: tkeys.len() as u64,
        })
        .expect("the header serialises");
        let mut body = Vec::with_capacity(keys.len() * PAIR_BYTES + tkeys.len() * TRIPLET_BYTES);
        for k in keys {
            let r = &self.entries[k];
            body.extend_from_slice(&k.0.raw().to_le_bytes());
            body.extend_from_slice(&k.1.raw().to_le_bytes());
            body.extend_from_slice(&r.count.to_le_bytes());
            for v in r.min.iter().chain(r.max.iter()) {
                body.extend_from_slice(&v.to_le_bytes());
            }
        }
        for k in tkeys {
            let r = &self.triplets[k];
            for m in [k.0, k.1, k.2] {
                body.extend_from_slice(&m.raw().to_le_bytes());
            }
            body.extend_from_slice(&r.count.to_le_bytes());
            for v in r.min.iter().chain(r.max.iter()) {
                body.extend_from_slice(&v.to_le_bytes());
            }
        }
        let mut out = Vec::with_capacity(body.len() + header.len() + 32);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(&body);
        out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        trackgnn_trackml::atomic::write(path, &out).map_err(|e| Error::io(path, e))?;
        Ok(out.len() as u64)
    }

    /// Reads a map written by [`ModuleMap::save`].
    pub fn load(path: &Path) -> Result<ModuleMap> {
        let bytes = std::fs::read(path).map_err(|e| Error::Io { path: path.to_path_buf(), source: e })?;
        let corrupt = |m: String| Error::Corrupt { path: path.to_path_buf(), message: m };
        if bytes.len() < 16 || &bytes[..8] != MAGIC {
            return Err(corrupt("not a trackgnn module map (bad magic)".into()));
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
        if !(1..=VERSION).contains(&version) {
            return Err(corrupt(format!("module map format version {version}, this build reads 1 to {VERSION}")));
        }
        let hlen = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
        let hend = 16 + hlen;
        if bytes.len() < hend + 4 {
            return Err(corrupt(format!("truncated: {} bytes, header needs {}", bytes.len(), hend + 4)));
        }
        let header: MapHeader =
            serde_json::from_slice(&bytes[16..hend]).map_err(|e| corrupt(format!("bad header: {e}")))?;
        // Counts are checked against the file's length before anything is allocated; huge
        // declared counts must not overflow the size arithmetic.
        let len_of = |n: u64, each: usize| usize::try_from(n).ok().and_then(|n| n.checked_mul(each));
        let sizes = len_of(header.entries, PAIR_BYTES)
            .zip(len_of(header.triplets, TRIPLET_BYTES))
            .and_then(|(p, t)| Some((p, p.checked_add(t)?)))
            .filter(|&(_, body)| body.checked_add(hend + 4) == Some(bytes.len()));
        let Some((pairs_len, body_len)) = sizes else {
            return Err(corrupt(format!(
                "truncated or padded: {} bytes, {} pairs and {} triplets need {}",
                bytes.len(),
                header.entries,
                header.triplets,
                (header.entries as u128 * PAIR_BYTES as u128 + header.triplets as u128 * TRIPLET_BYTES as u128)
                    + hend as u128
                    + 4
            )));
        };
        let body = &bytes[hend..hend + body_len];
        let crc = u32::from_le_bytes(bytes[hend + body_len..].try_into().unwrap());
        if crc32fast::hash(body) != crc {
            return Err(corrupt("checksum mismatch (corrupt file)".into()));
        }
        let f32_at = |c: &[u8], i: usize| f32::from_le_bytes(c[i..i + 4].try_into().unwrap());
        let mut entries = FastMap::with_capacity_and_hasher(header.entries as usize, Default::default());
        for c in body[..pairs_len].chunks_exact(PAIR_BYTES) {
            let a = ModuleId::from_raw(u64::from_le_bytes(c[0..8].try_into().unwrap()));
            let b = ModuleId::from_raw(u64::from_le_bytes(c[8..16].try_into().unwrap()));
            let count = u32::from_le_bytes(c[16..20].try_into().unwrap());
            let mut r = PairRanges { count, min: [0.0; 4], max: [0.0; 4] };
            for k in 0..4 {
                r.min[k] = f32_at(c, 20 + 4 * k);
                r.max[k] = f32_at(c, 36 + 4 * k);
            }
            entries.insert((a, b), r);
        }
        let mut triplets = FastMap::with_capacity_and_hasher(header.triplets as usize, Default::default());
        for c in body[pairs_len..].chunks_exact(TRIPLET_BYTES) {
            let m = |i: usize| ModuleId::from_raw(u64::from_le_bytes(c[i..i + 8].try_into().unwrap()));
            let count = u32::from_le_bytes(c[24..28].try_into().unwrap());
            let r = TripletRanges { count, min: [f32_at(c, 28), f32_at(c, 32)], max: [f32_at(c, 36), f32_at(c, 40)] };
            triplets.insert((m(0), m(8), m(16)), r);
        }
        Ok(ModuleMap { config: header.config, events: header.events, entries, triplets })
    }
}

/// A short content hash of a file (CRC32 and size), recorded in graph recipes so a graph
/// directory names the exact map it was built with.
pub fn file_hash(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|e| Error::Io { path: path.to_path_buf(), source: e })?;
    Ok(format!("crc32:{:08x}:{}", crc32fast::hash(&bytes), bytes.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use trackgnn_simulate::{Generator, SimConfig};

    #[test]
    fn the_lazy_pair_check_answers_as_the_full_quantities_do() {
        let generator = Generator::new(Detector::trackml(), SimConfig { pileup: 1.0, ..SimConfig::default() });
        let (event, _) = generator.event(3, 1);
        let t = HitTable::build(&event, generator.detector(), &NodeCuts::default()).unwrap();
        let windows = [
            ([-0.05, -200.0, -300.0, -1e-3], [0.05, 200.0, 300.0, 1e-3]),
            ([-0.2, -500.0, f32::NEG_INFINITY, f32::NAN], [0.2, 500.0, f32::INFINITY, f32::NAN]),
            ([f32::NAN, -50.0, -100.0, -2e-4], [f32::NAN, 50.0, 100.0, 2e-4]),
        ];
        let (mut accepted, mut rejected) = (0, 0);
        for a in (0..t.len()).step_by(7) {
            // Every node after a few, and a itself (Δr = 0: z0 and Δφ/Δr are not finite).
            for b in (0..t.len()).step_by(3).chain([a]) {
                for (lo, hi) in &windows {
                    let full = in_window(&PairQuantities::of(&t, a, b).as_array(), lo, hi);
                    assert_eq!(pair_in_window(&t, a, b, lo, hi), full, "nodes {a} → {b}, window {lo:?} {hi:?}");
                    if full { accepted += 1 } else { rejected += 1 }
                }
            }
        }
        assert!(accepted > 1000 && rejected > 1000, "{accepted} accepted, {rejected} rejected");
    }
}
