//! The geometric graph builder (heptrkx style): edges between hits on adjacent layers that pass
//! cuts on the phi slope |Δφ/Δr| and the longitudinal impact parameter |z0|, plus edges between
//! hits on overlapping modules of one layer within |Δφ| and |Δz| (barrel) or |Δr| (disk)
//! windows. Hits are sorted by φ per layer and each hit looks only at a φ window of the other
//! layer: never all pairs. [`build_all_pairs`] is the slow twin the tests compare against.

use std::collections::HashSet;
use std::f32::consts::PI;

use serde::{Deserialize, Serialize};
use trackgnn_trackml::geometry::{Detector, LayerKind};

use crate::features::HitTable;
use crate::layer_pairs::layer_pairs;

/// Cuts of the geometric builder.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GeometricConfig {
    /// Largest |Δφ/Δr| [rad/mm]. A particle of pT from the beam line has Δφ/Δr ≈ 0.3·B/(2 pT),
    /// 3.0e-4 rad/mm at 1 GeV in 2 T; the default leaves room for scattering.
    pub phi_slope_max: f64,
    /// Largest |z0| \[mm\], the z where the line through both hits meets the beam line.
    pub z0_max: f64,
    /// Extra layers a pair may skip (0: adjacent layers only).
    pub skip_layers: usize,
    /// η range of the ray scan that finds the layer pairs.
    pub eta_max: f64,
    /// Also join hits on overlapping modules of one layer.
    pub same_layer: bool,
    /// Same-layer window in |Δφ| \[rad\].
    pub same_layer_dphi: f64,
    /// Same-layer window in |Δz| for barrel layers \[mm\].
    pub same_layer_dz: f64,
    /// Same-layer window in |Δr| for disks \[mm\].
    pub same_layer_dr: f64,
}

impl Default for GeometricConfig {
    fn default() -> Self {
        GeometricConfig {
            phi_slope_max: 6e-4,
            z0_max: 200.0,
            skip_layers: 0,
            eta_max: 4.0,
            same_layer: true,
            same_layer_dphi: 0.01,
            same_layer_dz: 15.0,
            same_layer_dr: 15.0,
        }
    }
}

/// The angle from `a` to `b`, `b − a` wrapped into (−π, π]
/// ([`trackgnn_trackml::physics::wrap_phi`]).
#[inline]
pub fn dphi(a: f32, b: f32) -> f32 {
    trackgnn_trackml::physics::wrap_phi(b - a)
}

/// The cuts for a pair of hits on different layers.
#[inline]
fn accept_inter(t: &HitTable, cfg: &GeometricConfig, a: usize, b: usize) -> bool {
    let dr = (t.r[b] - t.r[a]) as f64;
    if dr == 0.0 {
        return false;
    }
    let slope = dphi(t.phi[a], t.phi[b]) as f64 / dr;
    if slope.abs() > cfg.phi_slope_max {
        return false;
    }
    let z0 = t.z[a] as f64 - t.r[a] as f64 * (t.z[b] - t.z[a]) as f64 / dr;
    z0.abs() <= cfg.z0_max
}

/// The windows for a pair of hits on one layer.
#[inline]
fn accept_same(t: &HitTable, cfg: &GeometricConfig, kind: LayerKind, a: usize, b: usize) -> bool {
    if t.module[a] == t.module[b] || dphi(t.phi[a], t.phi[b]).abs() as f64 > cfg.same_layer_dphi {
        return false;
    }
    match kind {
        LayerKind::Barrel => ((t.z[b] - t.z[a]) as f64).abs() <= cfg.same_layer_dz,
        LayerKind::Endcap => ((t.r[b] - t.r[a]) as f64).abs() <= cfg.same_layer_dr,
    }
}

/// Orders a same-layer pair: the hit nearer the origin first. On a barrel overlap this is
/// backwards when the particle came from far along the beam line (|z0| ≫ 0: the outer hit is
/// nearer the origin); recipes with `edge_direction = "outward"` turn every edge the
/// particle's way afterwards ([`crate::direction`]), and this order is kept for the graphs of
/// older (`as-built`) recipes.
#[inline]
fn ordered(t: &HitTable, a: usize, b: usize) -> (u32, u32) {
    let d = |i: usize| t.r[i] * t.r[i] + t.z[i] * t.z[i];
    if (d(a), a) <= (d(b), b) { (a as u32, b as u32) } else { (b as u32, a as u32) }
}

/// A layer's nodes sorted by φ.
struct PhiSorted {
    phi: Vec<f32>,
    node: Vec<u32>,
}

impl PhiSorted {
    /// Calls `f` for every node with φ within `w` of `phi` (w < π).
    #[inline]
    fn for_each_in_window(&self, phi: f32, w: f32, mut f: impl FnMut(u32)) {
        let n = self.phi.len();
        if n == 0 {
            return;
        }
        if w >= PI {
            self.node.iter().for_each(|&i| f(i));
            return;
        }
        let (lo, hi) = (phi - w, phi + w);
        let mut visit = |lo: f32, hi: f32| {
            let start = self.phi.partition_point(|&p| p < lo);
            for k in start..n {
                if self.phi[k] > hi {
                    break;
                }
                f(self.node[k]);
            }
        };
        visit(lo.max(-PI), hi.min(PI));
        if lo < -PI {
            visit(lo + 2.0 * PI, PI);
        }
        if hi > PI {
            visit(-PI, hi - 2.0 * PI);
        }
    }
}

/// Builds the edges (src, dst) of the geometric graph.
pub fn build(t: &HitTable, det: &Detector, cfg: &GeometricConfig) -> (Vec<u32>, Vec<u32>) {
    let pairs = layer_pairs(det, cfg.eta_max, cfg.z0_max, cfg.skip_layers);
    let mut by_layer: Vec<Vec<u32>> = vec![Vec::new(); det.layers.len()];
    for (i, &l) in t.layer.iter().enumerate() {
        by_layer[l as usize].push(i as u32);
    }
    let sorted: Vec<PhiSorted> = by_layer
        .into_iter()
        .map(|mut nodes| {
            nodes.sort_by(|&a, &b| t.phi[a as usize].total_cmp(&t.phi[b as usize]).then(a.cmp(&b)));
            PhiSorted { phi: nodes.iter().map(|&i| t.phi[i as usize]).collect(), node: nodes }
        })
        .collect();
    let (mut src, mut dst) = (Vec::new(), Vec::new());
    for &(la, lb) in &pairs {
        let (a_layer, b_layer) = (&det.layers[la as usize], &det.layers[lb as usize]);
        let dr_max = (b_layer.r_max - a_layer.r_min).abs().max((b_layer.r_min - a_layer.r_max).abs());
        let w = (cfg.phi_slope_max * dr_max) as f32 + 1e-6;
        let (sa, sb) = (&sorted[la as usize], &sorted[lb as usize]);
        for &a in &sa.node {
            sb.for_each_in_window(t.phi[a as usize], w, |b| {
                if accept_inter(t, cfg, a as usize, b as usize) {
                    src.push(a);
                    dst.push(b);
                }
            });
        }
    }
    if cfg.same_layer {
        let w = cfg.same_layer_dphi as f32;
        for (li, s) in sorted.iter().enumerate() {
            let kind = det.layers[li].kind;
            for &a in &s.node {
                s.for_each_in_window(t.phi[a as usize], w, |b| {
                    // Each unordered pair once: from the lower node index.
                    if a < b && accept_same(t, cfg, kind, a as usize, b as usize) {
                        let (x, y) = ordered(t, a as usize, b as usize);
                        src.push(x);
                        dst.push(y);
                    }
                });
            }
        }
    }
    (src, dst)
}

/// The slow twin of [`build`]: every pair of nodes is tested. For tests on small events.
pub fn build_all_pairs(t: &HitTable, det: &Detector, cfg: &GeometricConfig) -> (Vec<u32>, Vec<u32>) {
    let pairs: HashSet<(u16, u16)> = layer_pairs(det, cfg.eta_max, cfg.z0_max, cfg.skip_layers).into_iter().collect();
    let (mut src, mut dst) = (Vec::new(), Vec::new());
    for a in 0..t.len() {
        for b in 0..t.len() {
            let (la, lb) = (t.layer[a], t.layer[b]);
            if la != lb {
                if pairs.contains(&(la, lb)) && accept_inter(t, cfg, a, b) {
                    src.push(a as u32);
                    dst.push(b as u32);
                }
            } else if cfg.same_layer && a < b && accept_same(t, cfg, det.layers[la as usize].kind, a, b) {
                let (x, y) = ordered(t, a, b);
                src.push(x);
                dst.push(y);
            }
        }
    }
    (src, dst)
}
