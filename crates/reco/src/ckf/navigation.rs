//! Navigation through the detector's layers: from a track's state, the next layer it
//! crosses and the modules of that layer it may cross.
//!
//! ACTS navigates by the tracking geometry's layers and their sensitive surfaces; here the
//! layers are those of `trackgnn_trackml::geometry` (each an ideal cylinder or disk with its
//! extent) and their modules come from each layer's lookup grid
//! ([`Layer::candidates`](trackgnn_trackml::geometry::Layer::candidates)). The trajectory
//! between layers is the helix in the field at the track's current z ([`LocalHelix`]): exact
//! where the field is uniform, and a few tenths of a mm off over one layer's gap where it
//! is not, which the grid's margin and [`NavigationConfig::module_tolerance`] absorb; the
//! Kalman filter then carries the state to each module exactly
//! ([`crate::kalman::FitContext::transport`]).

use std::f64::consts::TAU;

use trackgnn_trackml::SolenoidField;
use trackgnn_trackml::geometry::{Detector, LayerKind};

use crate::propagation::stepper::{FreeVector, QOP};

/// Paths shorter than this \[mm\] do not count as a crossing ahead (the surface the state
/// is on).
const MIN_PATH: f64 = 1e-3;
/// Curvatures below this \[1/mm\] are straight lines.
const STRAIGHT: f64 = 1e-12;

/// How far the navigation looks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NavigationConfig {
    /// A layer's crossing counts if it lies within its extent grown by this \[mm\].
    pub layer_tolerance: f64,
    /// A module counts as crossed if the tangent at the layer's crossing meets its plane
    /// within its active area grown by this \[mm\].
    pub module_tolerance: f64,
    /// The longest path to the next layer \[mm\].
    pub max_path: f64,
}

impl Default for NavigationConfig {
    /// 10 mm around layers, 3 mm around modules, 1.5 m to the next layer.
    fn default() -> Self {
        NavigationConfig { layer_tolerance: 10.0, module_tolerance: 3.0, max_path: 1500.0 }
    }
}

/// The helix of a free state in a uniform field B_z: position, unit direction and the
/// transverse curvature k = (q/p)·B_z \[1/mm\] (the direction's azimuth turns by −k per mm of
/// path: a positive charge turns clockwise seen from +z, as in the generator).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LocalHelix {
    /// Start position \[mm\].
    pub pos: [f64; 3],
    /// Unit direction at the start.
    pub dir: [f64; 3],
    /// (q/p)·B_z \[1/mm\].
    pub k: f64,
}

impl LocalHelix {
    /// The helix of free state `y` in `field`'s B_z at its position.
    pub fn from_free(field: &SolenoidField, y: &FreeVector) -> LocalHelix {
        LocalHelix { pos: [y[0], y[1], y[2]], dir: [y[3], y[4], y[5]], k: y[QOP] * field.bz(y[2]) }
    }

    fn sin_theta(&self) -> f64 {
        self.dir[0].hypot(self.dir[1])
    }

    /// The position after a path `s` \[mm\].
    pub fn at(&self, s: f64) -> [f64; 3] {
        let [x, y, z] = self.pos;
        if self.k.abs() < STRAIGHT {
            return [x + s * self.dir[0], y + s * self.dir[1], z + s * self.dir[2]];
        }
        let st = self.sin_theta();
        let phi0 = self.dir[1].atan2(self.dir[0]);
        let rho = st / self.k;
        let phi = phi0 - self.k * s;
        [x + rho * (phi0.sin() - phi.sin()), y + rho * (phi.cos() - phi0.cos()), z + s * self.dir[2]]
    }

    /// The unit direction after a path `s` \[mm\].
    pub fn direction_at(&self, s: f64) -> [f64; 3] {
        let st = self.sin_theta();
        let phi = self.dir[1].atan2(self.dir[0]) - self.k * s;
        [st * phi.cos(), st * phi.sin(), self.dir[2]]
    }

    /// The shortest path ahead \[mm\] to the cylinder of radius `r` about the beam line.
    pub fn to_cylinder(&self, r: f64) -> Option<f64> {
        let st = self.sin_theta();
        if st == 0.0 {
            return None;
        }
        let [x, y, _] = self.pos;
        if self.k.abs() < STRAIGHT {
            // |p + s t| = r in the transverse plane.
            let (a, b, c) = (st * st, x * self.dir[0] + y * self.dir[1], x * x + y * y - r * r);
            let disc = b * b - a * c;
            if disc < 0.0 {
                return None;
            }
            return [(-b - disc.sqrt()) / a, (-b + disc.sqrt()) / a]
                .into_iter()
                .filter(|&s| s > MIN_PATH)
                .reduce(f64::min);
        }
        let phi0 = self.dir[1].atan2(self.dir[0]);
        let rho = st / self.k;
        let c = [x + rho * phi0.sin(), y - rho * phi0.cos()];
        let (a, d) = (rho.abs(), c[0].hypot(c[1]));
        if d == 0.0 || d > r + a || d < (r - a).abs() {
            return None;
        }
        let l = (r * r - a * a + d * d) / (2.0 * d);
        let h = (r * r - l * l).max(0.0).sqrt();
        let base = [c[0] * l / d, c[1] * l / d];
        let perp = [-c[1] * h / d, c[0] * h / d];
        [1.0, -1.0]
            .into_iter()
            .map(|sign| {
                let p = [base[0] + sign * perp[0], base[1] + sign * perp[1]];
                // The direction's azimuth ψ at p: p − c = ρ (−sin ψ, cos ψ).
                let psi = (-(p[0] - c[0]) / rho).atan2((p[1] - c[1]) / rho);
                ((phi0 - psi) * self.k.signum()).rem_euclid(TAU) / self.k.abs()
            })
            .filter(|&s| s > MIN_PATH)
            .reduce(f64::min)
    }

    /// The path ahead \[mm\] to the plane z = `z`.
    pub fn to_disk(&self, z: f64) -> Option<f64> {
        (self.dir[2] != 0.0).then(|| (z - self.pos[2]) / self.dir[2]).filter(|&s| s > MIN_PATH)
    }
}

/// A layer crossed ahead: its index in `Detector::layers`, the path to it \[mm\] and the point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerCrossing {
    /// The layer.
    pub layer: usize,
    /// The path from the helix's start \[mm\].
    pub path: f64,
    /// The crossing point \[mm\].
    pub point: [f64; 3],
}

/// A module that a trajectory may cross: its index and the path to its plane \[mm\] (from the
/// helix's start, estimated along the tangent at the layer's crossing).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModuleCrossing {
    /// The module's index in `Detector::modules`.
    pub module: usize,
    /// The path to it \[mm\].
    pub path: f64,
}

/// Finds the layers and modules ahead of a trajectory.
#[derive(Clone, Debug)]
pub struct Navigator<'a> {
    det: &'a Detector,
    config: NavigationConfig,
}

impl<'a> Navigator<'a> {
    /// A navigator in `det`.
    pub fn new(det: &'a Detector, config: NavigationConfig) -> Navigator<'a> {
        Navigator { det, config }
    }

    /// The first layer that `helix` crosses within its extent, other than `skip` (the layer the
    /// state is on), or `None` when it leaves the detector (or turns back towards the beam).
    pub fn next_layer(&self, helix: &LocalHelix, skip: Option<usize>) -> Option<LayerCrossing> {
        let tol = self.config.layer_tolerance;
        let mut best: Option<LayerCrossing> = None;
        for (i, layer) in self.det.layers.iter().enumerate() {
            if Some(i) == skip {
                continue;
            }
            let s = match layer.kind {
                LayerKind::Barrel => helix.to_cylinder(layer.r_mean),
                LayerKind::Endcap => helix.to_disk(layer.z_mean),
            };
            let Some(s) = s.filter(|&s| s <= self.config.max_path) else { continue };
            if best.is_some_and(|b| b.path <= s) {
                continue;
            }
            let p = helix.at(s);
            let inside = match layer.kind {
                LayerKind::Barrel => p[2] >= layer.z_min - tol && p[2] <= layer.z_max + tol,
                LayerKind::Endcap => {
                    let r = p[0].hypot(p[1]);
                    r >= layer.r_min - tol && r <= layer.r_max + tol
                }
            };
            if inside {
                best = Some(LayerCrossing { layer: i, path: s, point: p });
            }
        }
        // A trajectory that has turned back towards the beam line has left the detector for
        // the purpose of finding an outgoing track.
        best.filter(|b| {
            let d = helix.direction_at(b.path);
            b.point[0] * d[0] + b.point[1] * d[1] >= 0.0 || self.det.layers[b.layer].kind == LayerKind::Endcap
        })
    }

    /// The modules of `crossing`'s layer that `helix` may cross, in the order of their path.
    pub fn modules(&self, helix: &LocalHelix, crossing: &LayerCrossing, out: &mut Vec<ModuleCrossing>) {
        out.clear();
        let layer = &self.det.layers[crossing.layer];
        let p = crossing.point;
        let t = helix.direction_at(crossing.path);
        for &m in layer.candidates(p[0], p[1], p[2]) {
            let module = &self.det.modules[m as usize];
            let n = module.normal();
            let dn = n[0] * t[0] + n[1] * t[1] + n[2] * t[2];
            if dn.abs() < 1e-9 {
                continue;
            }
            let d = -module.plane_distance(p) / dn;
            let q = [p[0] + d * t[0], p[1] + d * t[1], p[2] + d * t[2]];
            let l = module.to_local(q);
            if module.contains(l[0], l[1], self.config.module_tolerance) {
                out.push(ModuleCrossing { module: m as usize, path: crossing.path + d });
            }
        }
        out.sort_by(|a, b| a.path.total_cmp(&b.path));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::propagation::stepper::step;

    fn state(pos: [f64; 3], dir: [f64; 3], qop: f64) -> FreeVector {
        let n = (dir[0] * dir[0] + dir[1] * dir[1] + dir[2] * dir[2]).sqrt();
        FreeVector::from_column_slice(&[pos[0], pos[1], pos[2], dir[0] / n, dir[1] / n, dir[2] / n, qop])
    }

    #[test]
    fn helix_positions_and_crossings_match_the_stepper() {
        let field = SolenoidField::uniform(2.0);
        for qop in [1.0, -1.0, 1.0 / 0.6, 1e-14] {
            let y = state([1.0, -2.0, 5.0], [0.6, 0.7, 0.3], qop);
            let h = LocalHelix::from_free(&field, &y);
            let (end, _) = step(&field, &y, 80.0);
            let p = h.at(80.0);
            for k in 0..3 {
                assert!((p[k] - end[k]).abs() < 1e-6, "q/p {qop}: {p:?} vs {end}");
            }
            let s = h.to_cylinder(72.0).unwrap();
            let q = h.at(s);
            assert!((q[0].hypot(q[1]) - 72.0).abs() < 1e-6, "q/p {qop}: r {}", q[0].hypot(q[1]));
            // The first crossing: no point before it is outside the radius.
            assert!((1..20).all(|i| {
                let q = h.at(s * i as f64 / 20.0);
                q[0].hypot(q[1]) < 72.0
            }));
            let s = h.to_disk(100.0).unwrap();
            assert!((h.at(s)[2] - 100.0).abs() < 1e-9);
            assert!(h.to_disk(0.0).is_none());
        }
    }

    #[test]
    fn navigation_walks_a_central_track_through_the_barrel_layers_in_order() {
        let det = Detector::trackml();
        let field = SolenoidField::default();
        let nav = Navigator::new(&det, NavigationConfig::default());
        // A 2 GeV track from the origin at η ≈ 0.2.
        let mut y = state([0.0, 0.0, 0.0], [0.3, 0.95, 0.2], 0.5);
        let mut skip = None;
        let mut radii = Vec::new();
        let mut found = Vec::new();
        while let Some(c) = nav.next_layer(&LocalHelix::from_free(&field, &y), skip) {
            let h = LocalHelix::from_free(&field, &y);
            nav.modules(&h, &c, &mut found);
            assert!(!found.is_empty(), "layer {:?}: no module", det.layers[c.layer].id);
            radii.push(det.layers[c.layer].r_mean.round());
            let p = c.point;
            let d = h.direction_at(c.path);
            y = state(p, d, y[QOP]);
            skip = Some(c.layer);
        }
        assert_eq!(radii.len(), 10, "{radii:?}");
        assert!(radii.windows(2).all(|w| w[0] < w[1]), "{radii:?}");
    }
}
