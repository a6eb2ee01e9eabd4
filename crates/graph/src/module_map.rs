//! The module map: which module pairs real tracks connect, with the ranges of the pair
//! quantities seen, learned from training events; graph building then joins hits of mapped
//! module pairs whose quantities fall in those ranges (grown by a margin).
//!
//! This is the module-map method of the ATLAS ITk GNN pipeline (Biscarat et al., "Towards a
//! realistic track reconstruction algorithm based on graph neural networks for the HL-LHC",
//! EPJ Web Conf. 251 (2021) 03047): most pairs of modules are never joined by a real track,
//! so the map keeps graphs small and pure.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use trackgnn_trackml::ids::ModuleId;

use crate::error::{Error, Result};
use crate::features::HitTable;
use crate::geometric::dphi;
use crate::truth::{TargetConfig, TruthEdges};

const MAGIC: &[u8; 8] = b"TGNNMMAP";
/// Index of Δφ among the pair quantities.
const DPHI: usize = 0;
/// Index of Δφ/Δr among the pair quantities.
const PHI_SLOPE: usize = 3;
const VERSION: u32 = 1;

/// The quantities of a directed hit pair (a → b) the map records.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PairQuantities {
    /// φ_b − φ_a wrapped [rad].
    pub dphi: f32,
    /// z_b − z_a [mm].
    pub dz: f32,
    /// z where the line through both hits meets the beam line [mm] (non-finite if Δr = 0).
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
    fn as_array(&self) -> [f32; 4] {
        [self.dphi, self.dz, self.z0, self.phi_slope]
    }
}

/// Ranges seen for one module pair: [min, max] of dphi, dz, z0, phi_slope.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PairRanges {
    /// True edges seen.
    pub count: u32,
    /// Minimum of each quantity (dphi, dz, z0, phi_slope).
    pub min: [f32; 4],
    /// Maximum of each quantity.
    pub max: [f32; 4],
}

impl PairRanges {
    fn new() -> Self {
        PairRanges { count: 0, min: [f32::INFINITY; 4], max: [f32::NEG_INFINITY; 4] }
    }
    fn add(&mut self, q: PairQuantities) {
        self.count += 1;
        for (k, v) in q.as_array().into_iter().enumerate() {
            if v.is_finite() {
                self.min[k] = self.min[k].min(v);
                self.max[k] = self.max[k].max(v);
            }
        }
    }
    fn merge(&mut self, o: &PairRanges) {
        self.count += o.count;
        for k in 0..4 {
            self.min[k] = self.min[k].min(o.min[k]);
            self.max[k] = self.max[k].max(o.max[k]);
        }
    }
}

/// How far beyond the seen ranges graph building accepts a pair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MapMargin {
    /// Each range grows by this fraction of its width on both sides.
    pub relative: f64,
    /// And by these absolute amounts: dphi [rad], dz [mm], z0 [mm], phi_slope [rad/mm].
    pub absolute: [f64; 4],
}

impl Default for MapMargin {
    fn default() -> Self {
        MapMargin { relative: 0.1, absolute: [1e-3, 2.0, 10.0, 5e-5] }
    }
}

/// Which true edges of the training events a module map records.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MapConfig {
    /// Particles' pT and hit count (the target definition).
    pub target: TargetConfig,
    /// Only particles produced within this distance of the beam line [mm] (prompt particles).
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

/// A module map learned from training events.
#[derive(Clone, Debug, PartialEq)]
pub struct ModuleMap {
    /// Which true edges were recorded.
    pub config: MapConfig,
    /// Training events seen.
    pub events: u64,
    entries: HashMap<(ModuleId, ModuleId), PairRanges>,
}

/// What the map file records besides the entries.
#[derive(Serialize, Deserialize)]
struct MapHeader {
    config: MapConfig,
    events: u64,
    entries: u64,
}

impl ModuleMap {
    /// An empty map recording edges of particles selected by `config`.
    pub fn new(config: MapConfig) -> Self {
        ModuleMap { config, events: 0, entries: HashMap::new() }
    }

    /// Number of module pairs.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if the map has no pairs.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The ranges recorded for a module pair.
    pub fn get(&self, a: ModuleId, b: ModuleId) -> Option<&PairRanges> {
        self.entries.get(&(a, b))
    }

    /// Records the true edges of one training event whose particles pass the map's selection
    /// (`truth` must come from [`crate::truth::truth_edges`] with `self.config.target`).
    pub fn add_event(&mut self, t: &HitTable, truth: &TruthEdges) {
        self.events += 1;
        let vertex_r = t.truth.as_ref().map(|nt| &nt.vertex_r);
        for i in 0..truth.len() {
            if !truth.target[i] {
                continue;
            }
            let (a, b) = (truth.src[i] as usize, truth.dst[i] as usize);
            if let (Some(max), Some(vr)) = (self.config.max_vertex_r, vertex_r)
                && vr[a] as f64 > max
            {
                continue;
            }
            let mut q = PairQuantities::of(t, a, b);
            if t.layer[a] == t.layer[b] {
                // Two hits on overlapping modules of one layer differ in r by a fraction of a
                // millimetre: z0 and Δφ/Δr are numerically meaningless there.
                q.z0 = f32::NAN;
                q.phi_slope = f32::NAN;
            }
            self.entries.entry((t.module[a], t.module[b])).or_insert_with(PairRanges::new).add(q);
        }
    }

    /// Adds another map's entries (maps built in parallel over event shards).
    pub fn merge(&mut self, other: &ModuleMap) {
        self.events += other.events;
        for (k, r) in &other.entries {
            self.entries.entry(*k).or_insert_with(PairRanges::new).merge(r);
        }
    }

    /// The edges (src, dst) of a graph: node pairs on mapped module pairs whose quantities
    /// lie within the recorded ranges grown by `margin`.
    pub fn build_edges(&self, t: &HitTable, margin: &MapMargin) -> (Vec<u32>, Vec<u32>) {
        let mut by_module: HashMap<ModuleId, Vec<u32>> = HashMap::new();
        for (i, m) in t.module.iter().enumerate() {
            by_module.entry(*m).or_default().push(i as u32);
        }
        // Per source module: (destination module, lower bounds, upper bounds).
        type Window = (ModuleId, [f32; 4], [f32; 4]);
        let mut targets: HashMap<ModuleId, Vec<Window>> = HashMap::new();
        for (&(a, b), r) in &self.entries {
            if by_module.contains_key(&a) && by_module.contains_key(&b) {
                let (mut lo, mut hi) = (r.min, r.max);
                for k in 0..4 {
                    let (mut min, mut max) = (r.min[k] as f64, r.max[k] as f64);
                    if k == DPHI || k == PHI_SLOPE {
                        // The opposite charge bends the other way: Δφ and Δφ/Δr ranges seen
                        // from a few tracks are mirrored.
                        let m = min.abs().max(max.abs());
                        (min, max) = (-m, m);
                    }
                    let grow = margin.relative * (max - min).max(0.0) + margin.absolute[k];
                    lo[k] = (min - grow) as f32;
                    hi[k] = (max + grow) as f32;
                }
                targets.entry(a).or_default().push((b, lo, hi));
            }
        }
        let mut modules: Vec<&ModuleId> = targets.keys().collect();
        modules.sort_unstable();
        let (mut src, mut dst) = (Vec::new(), Vec::new());
        for a_mod in modules {
            let mut outs = targets[a_mod].clone();
            outs.sort_unstable_by_key(|o| o.0);
            for &a in &by_module[a_mod] {
                for (b_mod, lo, hi) in &outs {
                    for &b in &by_module[b_mod] {
                        let q = PairQuantities::of(t, a as usize, b as usize).as_array();
                        let inside = (0..4).all(|k| {
                            // A range never seen finite (Δr = 0 in training) does not constrain.
                            !lo[k].is_finite() || (q[k] >= lo[k] && q[k] <= hi[k])
                        });
                        if inside && a != b {
                            src.push(a);
                            dst.push(b);
                        }
                    }
                }
            }
        }
        (src, dst)
    }

    /// Writes the map atomically; returns its size in bytes.
    pub fn save(&self, path: &Path) -> Result<u64> {
        let mut keys: Vec<&(ModuleId, ModuleId)> = self.entries.keys().collect();
        keys.sort_unstable();
        let header = serde_json::to_vec(&MapHeader {
            config: self.config.clone(),
            events: self.events,
            entries: keys.len() as u64,
        })
        .expect("the header serialises");
        let mut body = Vec::with_capacity(keys.len() * 52);
        for k in keys {
            let r = &self.entries[k];
            body.extend_from_slice(&k.0.raw().to_le_bytes());
            body.extend_from_slice(&k.1.raw().to_le_bytes());
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
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
        let io = |e| Error::Io { path: path.to_path_buf(), source: e };
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        f.write_all(&out).map_err(io)?;
        drop(f);
        std::fs::rename(&tmp, path).map_err(io)?;
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
        if version != VERSION {
            return Err(corrupt(format!("module map format version {version}, this build reads {VERSION}")));
        }
        let hlen = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
        let hend = 16 + hlen;
        if bytes.len() < hend + 4 {
            return Err(corrupt(format!("truncated: {} bytes, header needs {}", bytes.len(), hend + 4)));
        }
        let header: MapHeader =
            serde_json::from_slice(&bytes[16..hend]).map_err(|e| corrupt(format!("bad header: {e}")))?;
        let body_len = header.entries as usize * 52;
        if bytes.len() != hend + body_len + 4 {
            return Err(corrupt(format!(
                "truncated or padded: {} bytes, {} entries need {}",
                bytes.len(),
                header.entries,
                hend + body_len + 4
            )));
        }
        let body = &bytes[hend..hend + body_len];
        let crc = u32::from_le_bytes(bytes[hend + body_len..].try_into().unwrap());
        if crc32fast::hash(body) != crc {
            return Err(corrupt("checksum mismatch (corrupt file)".into()));
        }
        let f32_at = |c: &[u8], i: usize| f32::from_le_bytes(c[i..i + 4].try_into().unwrap());
        let mut entries = HashMap::with_capacity(header.entries as usize);
        for c in body.chunks_exact(52) {
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
        Ok(ModuleMap { config: header.config, events: header.events, entries })
    }
}

/// A short content hash of a file (CRC32 and size), recorded in graph recipes so a graph
/// directory names the exact map it was built with.
pub fn file_hash(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|e| Error::Io { path: path.to_path_buf(), source: e })?;
    Ok(format!("crc32:{:08x}:{}", crc32fast::hash(&bytes), bytes.len()))
}
