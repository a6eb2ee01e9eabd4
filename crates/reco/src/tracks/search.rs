//! Hit search beyond the graph's edges: track-following paths extended layer by layer.
//!
//! Graph construction loses some true edges: a module map learned from prompt tracks has no
//! entry for many module pairs that a particle produced in the material connects, and the
//! GNN scores a few true edges below the cut. A path that stops for want of an edge is
//! therefore often not at the end of its particle. The hit search continues it the way a
//! combinatorial Kalman filter does: the helix through the path's last hits is intersected
//! with the detector's layers in the order the particle would cross them, and on each layer
//! the free hit that best continues the helix (the χ² of track following) is added. A layer
//! crossed without a compatible hit is a hole; the search stops after more than
//! `max_holes` holes in a row, or once the helix has turned by a quarter circle. A path that
//! arrives at the first hit of another track can take that track whole (two pieces of one
//! particle that the graph split).

use std::f64::consts::{PI, TAU};

use trackgnn_trackml::geometry::{Detector, LayerKind};
use trackgnn_trackml::ids::ModuleId;

use super::windows::Geometry;
use crate::error::{Error, Result};
use crate::propagation::helix::Helix;

/// The layer index of a node that is on no known layer (never searched for).
pub const NO_LAYER: u16 = u16::MAX;

/// A detector layer as the hit search sees it: an ideal cylinder or disk with its extent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Surface {
    /// A barrel layer: the cylinder of radius `r` \[mm\] between `z_min` and `z_max`.
    Cylinder {
        /// Radius \[mm\].
        r: f64,
        /// Lower end \[mm\].
        z_min: f64,
        /// Upper end \[mm\].
        z_max: f64,
    },
    /// An end-cap layer: the disk at `z` \[mm\] between radii `r_min` and `r_max`.
    Disk {
        /// Position along the beam \[mm\].
        z: f64,
        /// Inner radius \[mm\].
        r_min: f64,
        /// Outer radius \[mm\].
        r_max: f64,
    },
}

impl Surface {
    /// One surface per layer of `det`, in the order of [`Detector::layers`].
    pub fn of_detector(det: &Detector) -> Vec<Surface> {
        det.layers
            .iter()
            .map(|l| match l.kind {
                LayerKind::Barrel => Surface::Cylinder { r: l.r_mean, z_min: l.z_min, z_max: l.z_max },
                LayerKind::Endcap => Surface::Disk { z: l.z_mean, r_min: l.r_min, r_max: l.r_max },
            })
            .collect()
    }
}

/// Each node's layer and module, for the hit search and track following: `layer[node]`
/// indexes `surfaces` ([`NO_LAYER`]: none).
#[derive(Clone, Copy, Debug)]
pub struct NodeLayers<'a> {
    /// The layer of each node.
    pub layer: &'a [u16],
    /// The module of each node (any id that differs between modules, e.g. [`node_modules`]): a
    /// particle crosses a module once, so a path takes at most one hit of each.
    pub module: &'a [u32],
    /// The layers' surfaces.
    pub surfaces: &'a [Surface],
}

impl NodeLayers<'_> {
    /// Whether a particle's hits `path` (in the order crossed) can continue with node `c`. A
    /// particle of the targets' pT crosses each module once and each layer once, in at most
    /// two overlapping modules one after the other: `c` is on no module of the path, and on
    /// no layer of it but that of the last node, where the path then holds one hit. (A node
    /// without a layer has only its module checked.)
    pub(super) fn can_continue(&self, path: &[usize], c: usize) -> bool {
        if path.iter().any(|&q| self.module[q] == self.module[c]) {
            return false;
        }
        let layer = self.layer[c];
        if layer == NO_LAYER {
            return true;
        }
        let on_layer = path.iter().filter(|&&q| self.layer[q] == layer).count();
        on_layer == 0 || (on_layer == 1 && path.last().is_some_and(|&b| self.layer[b] == layer))
    }
}

/// The layer index in `det` of each node, found from the module of the hit with the node's
/// hit id (`hit_id` and `module` are the event's hits, `node_hit_id` the graph's nodes).
/// A node whose hit or module is unknown is an [`Error::Config`] naming the hit.
pub fn node_layers(det: &Detector, hit_id: &[u64], module: &[ModuleId], node_hit_id: &[u64]) -> Result<Vec<u16>> {
    Ok(module_layers(det, &node_modules(det, hit_id, module, node_hit_id)?))
}

/// The layer index in `det` of each module index in `modules` (as [`node_modules`] gives them).
pub fn module_layers(det: &Detector, modules: &[u32]) -> Vec<u16> {
    modules.iter().map(|&m| det.layer_of(m as usize) as u16).collect()
}

/// The module index in `det` of each node, as [`node_layers`] finds it.
pub fn node_modules(det: &Detector, hit_id: &[u64], module: &[ModuleId], node_hit_id: &[u64]) -> Result<Vec<u32>> {
    let index: std::collections::HashMap<u64, usize> = hit_id.iter().enumerate().map(|(i, &h)| (h, i)).collect();
    node_hit_id
        .iter()
        .map(|h| {
            let i =
                index.get(h).ok_or_else(|| Error::config("layers", format!("node hit_id {h} is not in the event")))?;
            let m = det.module_index(module[*i]).ok_or_else(|| {
                Error::config("layers", format!("hit {h}: module {} is not in the detector", module[*i]))
            })?;
            Ok(m as u32)
        })
        .collect()
}

/// The free hits of each layer, sorted by azimuth.
pub(super) struct LayerIndex {
    by_layer: Vec<Vec<(f64, usize)>>,
}

impl LayerIndex {
    pub(super) fn new(layers: &NodeLayers<'_>, phi: &[f32]) -> Self {
        let mut by_layer = vec![Vec::new(); layers.surfaces.len()];
        for (node, &l) in layers.layer.iter().enumerate() {
            if let Some(v) = by_layer.get_mut(l as usize) {
                v.push((f64::from(phi[node]), node));
            }
        }
        for v in &mut by_layer {
            v.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        }
        LayerIndex { by_layer }
    }

    /// The nodes of `layer` with azimuth within `half` of `phi`.
    fn around(&self, layer: usize, phi: f64, half: f64) -> impl Iterator<Item = usize> + '_ {
        let v = &self.by_layer[layer];
        let range = |lo: f64, hi: f64| {
            let a = v.partition_point(|p| p.0 < lo);
            let b = v.partition_point(|p| p.0 <= hi);
            &v[a..b.max(a)]
        };
        let half = half.min(PI);
        let (lo, hi) = (phi - half, phi + half);
        // The window may wrap around ±π: at most two ranges.
        let (first, second) = if lo < -PI {
            (range(lo + TAU, PI), range(-PI, hi))
        } else if hi > PI {
            (range(lo, PI), range(-PI, hi - TAU))
        } else {
            (range(lo, hi), &v[0..0])
        };
        first.iter().chain(second).map(|p| p.1)
    }
}

/// The helix through a path's last hits, with the same anchors as the χ² of track
/// following; `None` without a transverse lever arm or polar-angle anchor.
fn helix_of_path(geo: &Geometry<'_>, path: &[usize]) -> Option<Helix> {
    let b = *path.last()?;
    let last = path.len() - 1;
    let (ia, a) = geo.anchor(path, last, b, |p, q| geo.dxy(p, q))?;
    // Without a third point the beam line stands in for it (prompt paths), or the helix is
    // straight (displaced ones).
    let p = geo.anchor(path, ia, a, |p, q| geo.dxy(p, q)).map(|(_, p)| geo.xy[p]);
    let p = p.or(geo.beam_line.then_some([0.0, 0.0]));
    let (_, a3) = geo.anchor(path, last, b, |p, q| geo.d3(p, q))?;
    let mut helix = Helix::through(p, geo.xy[a], geo.xy[b], geo.z[b]);
    let s3 = helix.arc_length(geo.dxy(a3, b));
    helix.tan_lambda = if s3 > 0.0 { (geo.z[b] - geo.z[a3]) / s3 } else { 0.0 };
    Some(helix)
}

/// The first crossing of `surf` ahead of `helix`, within its extent (widened by [`EDGE`]):
/// path length, transverse point and z.
fn cross(helix: &Helix, surf: &Surface) -> Option<(f64, [f64; 2], f64)> {
    let s = match *surf {
        Surface::Cylinder { r, .. } => helix.to_cylinder(r)?,
        Surface::Disk { z, .. } => helix.to_plane(z)?,
    };
    let (xy, z) = (helix.at(s), helix.z_at(s));
    let inside = match *surf {
        Surface::Cylinder { z_min, z_max, .. } => z >= z_min - EDGE && z <= z_max + EDGE,
        Surface::Disk { r_min, r_max, .. } => {
            let r = xy[0].hypot(xy[1]);
            r >= r_min - EDGE && r <= r_max + EDGE
        }
    };
    inside.then_some((s, xy, z))
}

/// A predicted crossing of a layer.
struct Crossing {
    s: f64,
    layer: usize,
    xy: [f64; 2],
    z: f64,
}

/// The owner of a node that no track holds.
pub(super) const FREE: u32 = u32::MAX;

/// Extends track `i` of `tracks` outward (beyond its last node, in the direction of its last
/// nodes) through the free hits (`owner[node] == FREE`) with the hit search of the module
/// docs and the windows of `geo`'s config; added nodes get owner `i`. With its `merge`, the
/// best hit may also be the first node of
/// another track whose second node continues the helix too: that whole track is appended
/// (and left empty). Returns whether a track was merged.
pub(super) fn extend_path(
    geo: &Geometry<'_>,
    layers: &NodeLayers<'_>,
    index: &LayerIndex,
    owner: &mut [u32],
    tracks: &mut [Vec<usize>],
    i: usize,
) -> bool {
    let (max_holes, merge) = (geo.cfg.max_holes, geo.cfg.merge);
    let mut crossings: Vec<Crossing> = Vec::new();
    let mut merged = false;
    loop {
        let path = &tracks[i];
        let Some(helix) = helix_of_path(geo, path) else { return merged };
        let on_path = |l: usize| path.iter().any(|&n| layers.layer[n] as usize == l);
        crossings.clear();
        for (l, surf) in layers.surfaces.iter().enumerate() {
            if let Some((s, xy, z)) = cross(&helix, surf)
                && !on_path(l)
            {
                crossings.push(Crossing { s, layer: l, xy, z });
            }
        }
        crossings.sort_by(|a, b| a.s.total_cmp(&b.s).then(a.layer.cmp(&b.layer)));
        let takes = |c: usize| {
            let o = owner[c];
            if o == FREE {
                return true;
            }
            let t = &tracks[o as usize];
            merge && o as usize != i && t.len() >= 2 && t[0] == c && {
                let mut joined = path.clone();
                joined.push(c);
                geo.chi2(&joined, t[1]).is_some()
            }
        };
        let found = crossings
            .iter()
            .take(max_holes + 1)
            .find_map(|x| best_on_layer(geo, layers, index, &takes, path, &helix, x));
        let Some(c) = found else { return merged };
        if owner[c] == FREE {
            owner[c] = i as u32;
            tracks[i].push(c);
        } else {
            let other = std::mem::take(&mut tracks[owner[c] as usize]);
            for &v in &other {
                owner[v] = i as u32;
            }
            tracks[i].extend(other);
            merged = true;
        }
    }
}

/// The hit on the layer of crossing `x` that `takes` allows with the lowest χ² of track
/// following.
fn best_on_layer(
    geo: &Geometry<'_>,
    layers: &NodeLayers<'_>,
    index: &LayerIndex,
    takes: &impl Fn(usize) -> bool,
    path: &[usize],
    helix: &Helix,
    x: &Crossing,
) -> Option<usize> {
    let cfg = geo.cfg;
    let b = *path.last().expect("not empty");
    // A generous pre-selection around the prediction (three times the curvature window, the
    // polar-angle window seen along the surface); the χ² decides.
    let k = 1.0 / helix.circle.map_or(f64::INFINITY, |c| c.1);
    let r_pred = x.xy[0].hypot(x.xy[1]).max(1.0);
    let margin = 3.0 * cfg.sigma(r_pred) + 2.0;
    let transverse = 3.0 * (cfg.curvature_abs + cfg.curvature_rel * k) * x.s * (x.s + 100.0) / 2.0 + margin;
    let sin_t = 1.0 / (1.0 + helix.tan_lambda * helix.tan_lambda).sqrt();
    let cos_t = (helix.tan_lambda * sin_t).abs();
    let slope =
        cfg.theta_window * (0.002 + 2.0 * cfg.sigma(r_pred) / x.s + 2.0 * cfg.sigma(geo.r_of(b)) / cfg.min_lever_arm);
    let cylinder = matches!(layers.surfaces[x.layer], Surface::Cylinder { .. });
    let along = if cylinder {
        slope * x.s / sin_t.max(0.05).powi(2) + margin
    } else {
        slope * x.s / cos_t.max(0.05).powi(2) + transverse
    };
    let mut best: Option<(f64, usize)> = None;
    for c in index.around(x.layer, x.xy[1].atan2(x.xy[0]), transverse / r_pred) {
        let dxy = (geo.xy[c][0] - x.xy[0]).hypot(geo.xy[c][1] - x.xy[1]);
        let near = if cylinder { dxy <= transverse && (geo.z[c] - x.z).abs() <= along } else { dxy <= along };
        // `takes` last: for another track's first hit it tries the join.
        if !near || geo.d3(b, c) < cfg.min_lever_arm || !takes(c) {
            continue;
        }
        if let Some(chi2) = geo.chi2(path, c)
            && best.is_none_or(|(bc, bn)| chi2 < bc || (chi2 == bc && c < bn))
        {
            best = Some((chi2, c));
        }
    }
    best.map(|b| b.1)
}

/// Layer edges are this much \[mm\] wider than the modules' extent (staggered modules).
const EDGE: f64 = 10.0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn azimuth_window_wraps_around() {
        let phi = [3.1f32, -3.1, 0.0, 1.0];
        let layer = [0u16, 0, 0, NO_LAYER];
        let surfaces = [Surface::Cylinder { r: 100.0, z_min: -500.0, z_max: 500.0 }];
        let index = LayerIndex::new(&NodeLayers { layer: &layer, module: &[0, 1, 2, 3], surfaces: &surfaces }, &phi);
        let mut got: Vec<usize> = index.around(0, PI, 0.1).collect();
        got.sort_unstable();
        assert_eq!(got, [0, 1]);
        assert_eq!(index.around(0, 0.05, 0.1).collect::<Vec<_>>(), [2]);
    }

    #[test]
    fn nodes_get_their_hits_layer_and_unknown_hits_are_errors() {
        let det = Detector::trackml();
        // Two modules of different layers: the first and the last of the detector.
        let (m0, m1) = (det.modules[0].id, det.modules[det.modules.len() - 1].id);
        let layer = node_layers(&det, &[7, 9], &[m0, m1], &[9, 7, 9]).unwrap();
        let want = |m: ModuleId| det.layer_of(det.module_index(m).unwrap()) as u16;
        assert_eq!(layer, [want(m1), want(m0), want(m1)]);
        assert_ne!(want(m0), want(m1));
        let surfaces = Surface::of_detector(&det);
        assert_eq!(surfaces.len(), det.layers.len());
        // The first layer (volume 7, a pixel end-cap) is a disk at negative z.
        assert!(matches!(surfaces[0], Surface::Disk { z, .. } if z < 0.0), "{:?}", surfaces[0]);
        let err = node_layers(&det, &[7, 9], &[m0, m1], &[8]).unwrap_err().to_string();
        assert!(err.contains("hit_id 8"), "{err}");
    }
}
