//! The detector: modules grouped into layers, each layer with a fast lookup.

use std::collections::HashMap;
use std::f64::consts::PI;

use super::lookup::{Footprint, LayerGrid};
use super::module::{Module, Technology};
use crate::error::{Error, Result};
use crate::ids::{LayerId, ModuleId};

/// Whether a layer is a cylinder around the beam or a disk across it (`barrel`, `endcap` in JSON).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LayerKind {
    /// Modules parallel to the beam (normal roughly radial).
    Barrel,
    /// Modules across the beam (normal along z).
    Endcap,
}

/// One layer: its modules, its envelope and its lookup grid.
#[derive(Clone, Debug)]
pub struct Layer {
    /// (volume_id, layer_id).
    pub id: LayerId,
    /// Barrel or end-cap, from the module normals.
    pub kind: LayerKind,
    /// Sensor technology.
    pub technology: Technology,
    /// Indices of the layer's modules in [`Detector::modules`].
    pub modules: Vec<u32>,
    /// Smallest radius any module reaches \[mm\] (thickness included).
    pub r_min: f64,
    /// Largest radius \[mm\].
    pub r_max: f64,
    /// Smallest z \[mm\].
    pub z_min: f64,
    /// Largest z \[mm\].
    pub z_max: f64,
    /// Mean radius of module centres (barrel) \[mm\].
    pub r_mean: f64,
    /// Mean z of module centres (disks) \[mm\].
    pub z_mean: f64,
    grid: LayerGrid,
}

impl Layer {
    /// Candidate modules at a global point on or near the layer (see [`LayerGrid::query`]).
    #[inline]
    pub fn candidates(&self, x: f64, y: f64, z: f64) -> &[u32] {
        let phi = y.atan2(x);
        match self.kind {
            LayerKind::Barrel => self.grid.query(phi, z),
            LayerKind::Endcap => self.grid.query(phi, x.hypot(y)),
        }
    }
}

/// A detector geometry: every module, grouped by layer.
#[derive(Clone, Debug)]
pub struct Detector {
    /// All modules, sorted by [`ModuleId`].
    pub modules: Vec<Module>,
    /// All layers, sorted by [`LayerId`].
    pub layers: Vec<Layer>,
    module_index: HashMap<ModuleId, u32>,
    layer_index: HashMap<LayerId, u16>,
    layer_of_module: Vec<u16>,
}

/// Margin added around every module footprint in the lookup grid \[mm\].
const LOOKUP_MARGIN_MM: f64 = 6.0;

impl Detector {
    /// Builds a detector from modules (any order); modules are sorted by id and grouped.
    pub fn from_modules(mut modules: Vec<Module>) -> Result<Self> {
        if modules.is_empty() {
            return Err(Error::Geometry("no modules".into()));
        }
        modules.sort_by_key(|m| m.id);
        for w in modules.windows(2) {
            if w[0].id == w[1].id {
                return Err(Error::Geometry(format!("duplicate module {}", w[0].id)));
            }
        }
        let mut module_index = HashMap::with_capacity(modules.len());
        let mut layer_index = HashMap::new();
        let mut layer_of_module = Vec::with_capacity(modules.len());
        let mut groups: Vec<(LayerId, Vec<u32>)> = Vec::new();
        for (i, m) in modules.iter().enumerate() {
            if !m.frame_is_orthonormal(1e-4) {
                return Err(Error::Geometry(format!("module {}: rotation is not orthonormal", m.id)));
            }
            if !(m.hv > 0.0 && m.max_hu > 0.0 && m.min_hu > 0.0 && m.pitch_u > 0.0 && m.pitch_v > 0.0) {
                return Err(Error::Geometry(format!("module {}: non-positive size or pitch", m.id)));
            }
            module_index.insert(m.id, i as u32);
            let lid = m.id.layer_id();
            if groups.last().map(|g| g.0) != Some(lid) {
                layer_index.insert(lid, groups.len() as u16);
                groups.push((lid, Vec::new()));
            }
            groups.last_mut().unwrap().1.push(i as u32);
            layer_of_module.push((groups.len() - 1) as u16);
        }
        let layers = groups.into_iter().map(|(id, idx)| build_layer(id, idx, &modules)).collect();
        Ok(Detector { modules, layers, module_index, layer_index, layer_of_module })
    }

    /// The module with this id.
    pub fn module(&self, id: ModuleId) -> Option<&Module> {
        self.module_index.get(&id).map(|&i| &self.modules[i as usize])
    }

    /// Index of the module with this id in [`Detector::modules`].
    pub fn module_index(&self, id: ModuleId) -> Option<usize> {
        self.module_index.get(&id).map(|&i| i as usize)
    }

    /// Index of the layer with this id in [`Detector::layers`].
    pub fn layer_index(&self, id: LayerId) -> Option<usize> {
        self.layer_index.get(&id).map(|&i| i as usize)
    }

    /// Index of the layer of the module with index `module_index`.
    pub fn layer_of(&self, module_index: usize) -> usize {
        self.layer_of_module[module_index] as usize
    }

    /// The number of modules in each layer, in layer order.
    pub fn modules_per_layer(&self) -> Vec<(LayerId, usize)> {
        self.layers.iter().map(|l| (l.id, l.modules.len())).collect()
    }
}

fn build_layer(id: LayerId, idx: Vec<u32>, modules: &[Module]) -> Layer {
    let n_endcap = idx.iter().filter(|&&i| modules[i as usize].normal()[2].abs() > 0.7).count();
    let kind = if 2 * n_endcap > idx.len() { LayerKind::Endcap } else { LayerKind::Barrel };
    let technology = modules[idx[0] as usize].technology();
    let (mut r_min, mut r_max, mut z_min, mut z_max) = (f64::MAX, 0.0f64, f64::MAX, f64::MIN);
    let (mut r_sum, mut z_sum) = (0.0, 0.0);
    let mut footprints = Vec::with_capacity(idx.len());
    let mut phi_widths = Vec::with_capacity(idx.len());
    let mut x_widths = Vec::with_capacity(idx.len());
    for &i in &idx {
        let m = &modules[i as usize];
        let c = m.center;
        r_sum += c[0].hypot(c[1]);
        z_sum += c[2];
        let phi_c = c[1].atan2(c[0]);
        let (mut dphi_max, mut x_lo, mut x_hi) = (0.0f64, f64::MAX, f64::MIN);
        let mut r_in = f64::MAX;
        let n = m.normal();
        for corner in m.corners() {
            for s in [-0.5, 0.5] {
                let p = [
                    corner[0] + s * m.thickness * n[0],
                    corner[1] + s * m.thickness * n[1],
                    corner[2] + s * m.thickness * n[2],
                ];
                let r = p[0].hypot(p[1]);
                r_min = r_min.min(r);
                r_max = r_max.max(r);
                z_min = z_min.min(p[2]);
                z_max = z_max.max(p[2]);
                r_in = r_in.min(r);
                dphi_max = dphi_max.max(crate::physics::wrap_phi(p[1].atan2(p[0]) - phi_c).abs());
                let x = match kind {
                    LayerKind::Barrel => p[2],
                    LayerKind::Endcap => r,
                };
                x_lo = x_lo.min(x);
                x_hi = x_hi.max(x);
            }
        }
        // The closest approach to the axis can be inside the corners' radius for disk modules
        // that straddle it; clamp the angular margin so it stays meaningful.
        let phi_margin = LOOKUP_MARGIN_MM / r_in.max(10.0);
        phi_widths.push(2.0 * dphi_max);
        x_widths.push(x_hi - x_lo);
        footprints.push(Footprint {
            module: i,
            phi_center: phi_c,
            phi_half: (dphi_max + phi_margin).min(PI),
            x_lo: x_lo - LOOKUP_MARGIN_MM,
            x_hi: x_hi + LOOKUP_MARGIN_MM,
        });
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let phi_w = median(&mut phi_widths).max(1e-3);
    let x_w = median(&mut x_widths).max(1e-3);
    let (x_min, x_max) = match kind {
        LayerKind::Barrel => (z_min, z_max),
        LayerKind::Endcap => (r_min, r_max),
    };
    // Bins of about half a module: a query then sees at most a handful of modules.
    let n_phi = ((2.0 * PI / phi_w) * 2.0).ceil().clamp(1.0, 4096.0) as usize;
    let n_x = (((x_max - x_min) / x_w) * 2.0).ceil().clamp(1.0, 4096.0) as usize;
    let grid = LayerGrid::build(n_phi, n_x, x_min, x_max, &footprints);
    let n = idx.len() as f64;
    Layer { id, kind, technology, modules: idx, r_min, r_max, z_min, z_max, r_mean: r_sum / n, z_mean: z_sum / n, grid }
}
