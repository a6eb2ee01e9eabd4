//! Triplet seeding on the pixel layers, as ACTS's seed finder does it
//! (`Core/include/Acts/Seeding/SeedFinder.ipp`): for every middle hit, the compatible hits
//! inside it (bottom) and outside it (top) on other pixel layers, by the distance in r, the
//! slope cot θ and where the r–z line meets the beam line; then the triplets whose two halves
//! agree in cot θ within the multiple scattering at their momentum, whose circle is wide enough
//! for the minimum pT and passes close enough to the beam line. The best few seeds of each
//! middle hit are kept (ACTS's seed filter: the seed confirmed by more top hits of the same
//! curvature, then the smaller impact parameter).
//!
//! Where this differs from ACTS: the hits are searched per layer in windows of φ (sorted,
//! no (φ, z) grid); the triplets of one middle hit are ranked by one weight (confirming top
//! hits minus |d0|/mm); and the seed's parameters come from the circle and the r–z line
//! through its three hits at the perigee, not on the bottom hit's surface.

use std::f64::consts::{PI, TAU};

use trackgnn_trackml::SolenoidField;
use trackgnn_trackml::geometry::{Detector, Technology};
use trackgnn_trackml::physics::{beta, highland_theta0};

use super::config::SeedConfig;
use super::hits::HitStore;
pub use crate::kalman::candidate::seed_parameters;
use crate::kalman::params::{BoundVector, LOC0, LOC1};
use crate::propagation::circle::{circle_center, curvature};

/// Radiation lengths of one pixel layer at normal incidence (0.15 mm of silicon and its
/// support), for the seed's scattering tolerance.
const PIXEL_X_OVER_X0: f64 = 0.0021;
/// The hits' position error that the cot θ tolerance allows for \[mm\].
const POSITION_SIGMA: f64 = 0.03;

/// Three hits of a track candidate, bottom to top, with their parameters at the perigee.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Seed {
    /// The hits (indices in the event), inside out.
    pub hits: [u32; 3],
    /// Perigee parameters (d0, z0, φ, θ, q/p) from the circle and the r–z line.
    pub params: BoundVector,
    /// The seed filter's weight (higher: better).
    pub weight: f64,
}

/// A pixel hit with its cylindrical coordinates.
#[derive(Clone, Copy, Debug)]
struct SpacePoint {
    hit: u32,
    x: f64,
    y: f64,
    z: f64,
    r: f64,
    phi: f64,
}

/// A doublet of the middle hit with a bottom or top hit.
#[derive(Clone, Copy, Debug)]
struct Doublet {
    sp: u32,
    cot: f64,
    /// |Δr| \[mm\].
    dr: f64,
}

/// Tops closer than this in r \[mm\] are searched with the wider tolerance of close hits.
const NEAR_DR: f64 = 20.0;

/// The pixel hits of one event by layer, sorted by φ.
struct Layers {
    /// Per pixel layer: (the layer's index in the detector, its space points by φ).
    layers: Vec<(usize, Vec<SpacePoint>)>,
}

impl Layers {
    fn new(det: &Detector, hits: &HitStore) -> Layers {
        let mut by_layer: Vec<Vec<SpacePoint>> = vec![Vec::new(); det.layers.len()];
        for i in 0..hits.len() {
            let l = det.layer_of(hits.module[i] as usize);
            if det.layers[l].technology != Technology::Pixel {
                continue;
            }
            let [x, y, z] = hits.global[i];
            by_layer[l].push(SpacePoint { hit: i as u32, x, y, z, r: x.hypot(y), phi: y.atan2(x) });
        }
        let layers = by_layer
            .into_iter()
            .enumerate()
            .filter(|(_, v)| !v.is_empty())
            .map(|(l, mut v)| {
                v.sort_by(|a, b| a.phi.total_cmp(&b.phi));
                (l, v)
            })
            .collect();
        Layers { layers }
    }

    /// Calls `f` with every space point of layer slot `k` within `half` of azimuth `phi`.
    fn in_window(&self, k: usize, phi: f64, half: f64, mut f: impl FnMut(usize, &SpacePoint)) {
        let v = &self.layers[k].1;
        if half >= PI {
            v.iter().enumerate().for_each(|(i, sp)| f(i, sp));
            return;
        }
        let (lo, hi) = (phi - half, phi + half);
        // The window, in up to two pieces where it wraps around ±π.
        let mut range = |a: f64, b: f64| {
            let start = v.partition_point(|sp| sp.phi < a);
            for (i, sp) in v.iter().enumerate().skip(start) {
                if sp.phi > b {
                    break;
                }
                f(i, sp);
            }
        };
        if lo < -PI {
            range(lo + TAU, PI);
            range(-PI, hi);
        } else if hi > PI {
            range(lo, PI);
            range(-PI, hi - TAU);
        } else {
            range(lo, hi);
        }
    }
}

/// Finds the seeds of an event's hits, best first within each middle hit.
pub fn find_seeds(det: &Detector, field: &SolenoidField, hits: &HitStore, config: &SeedConfig) -> Vec<Seed> {
    let layers = Layers::new(det, hits);
    let mut seeds = Vec::new();
    let (mut bottoms, mut tops) = (Vec::new(), Vec::new());
    let mut triplets: Vec<(f64, Seed)> = Vec::new();
    let sp_of = |k: usize, i: u32| layers.layers[k].1[i as usize];
    for km in 0..layers.layers.len() {
        for m in &layers.layers[km].1 {
            let bz = field.bz(m.z);
            let r_min_circle = config.pt_min / bz.abs();
            bottoms.clear();
            tops.clear();
            for (k, (l, _)) in layers.layers.iter().enumerate() {
                if k == km {
                    continue;
                }
                let layer = &det.layers[*l];
                // Whether the layer can hold a bottom (inside) or top (outside) hit.
                let inner = layer.r_min < m.r - config.delta_r_min && layer.r_max > m.r - config.delta_r_max;
                let outer = layer.r_max > m.r + config.delta_r_min && layer.r_min < m.r + config.delta_r_max;
                if !(inner || outer) {
                    continue;
                }
                // φ window: the bend of the minimum pT between the two radii plus the impact
                // parameter's shift of φ at the inner one.
                let (r_in, r_out) = if inner { (layer.r_min.max(1.0), m.r) } else { (m.r, layer.r_max) };
                let bend = |r: f64| (r / (2.0 * r_min_circle)).min(1.0).asin();
                let half = bend(r_out) - bend(r_in) + config.impact_max / r_in.max(1.0) + 1e-3;
                layers.in_window(k, m.phi, half, |i, sp| {
                    let dr = sp.r - m.r;
                    let (is_bottom, adr) = (dr < 0.0, dr.abs());
                    if adr < config.delta_r_min || adr > config.delta_r_max {
                        return;
                    }
                    let cot = (sp.z - m.z) / dr;
                    if cot.abs() > config.cot_theta_max {
                        return;
                    }
                    let z0 = m.z - m.r * cot;
                    if z0.abs() > config.z_max {
                        return;
                    }
                    let d = Doublet { sp: ((k as u32) << 24) | i as u32, cot, dr: adr };
                    if is_bottom { bottoms.push(d) } else { tops.push(d) }
                });
            }
            if bottoms.is_empty() || tops.is_empty() {
                continue;
            }
            // The tops near the middle hit (Δr < NEAR_DR: the disks at large |η|) and the far
            // ones, each by cot θ: the position errors' share of the cot θ tolerance scales
            // as 1/Δr, so the far ones' windows are narrower.
            tops.sort_by(|a, b| (a.dr < NEAR_DR).cmp(&(b.dr < NEAR_DR)).then(a.cot.total_cmp(&b.cot)));
            let split = tops.partition_point(|t| t.dr >= NEAR_DR);
            triplets.clear();
            let unpack = |d: &Doublet| sp_of((d.sp >> 24) as usize, d.sp & 0xff_ffff);
            for b in &bottoms {
                let bsp = unpack(b);
                let icot2 = 1.0 + b.cot * b.cot;
                // The loosest tolerance: the scattering of the minimum pT.
                let p_min = config.pt_min * icot2.sqrt();
                let theta0_max = highland_theta0(p_min, beta(p_min, 0.139_57), 1.0, PIXEL_X_OVER_X0 * icot2.sqrt());
                let meas = |dr_t: f64| POSITION_SIGMA * (1.0 + b.cot.abs()) * (1.0 / b.dr + 1.0 / dr_t);
                let tol = |dr_t: f64| config.sigma_scattering * (theta0_max * icot2).hypot(meas(dr_t));
                for (group, dr_min) in [(&tops[..split], NEAR_DR), (&tops[split..], config.delta_r_min.max(1.0))] {
                    let tol_max = tol(dr_min);
                    let start = group.partition_point(|t| t.cot < b.cot - tol_max);
                    for t in group[start..].iter().take_while(|t| t.cot <= b.cot + tol_max) {
                        if (t.cot - b.cot).abs() > tol(t.dr) {
                            continue;
                        }
                        self::triplet(b, bsp, t, unpack(t), m, bz, r_min_circle, icot2, config, &mut triplets);
                    }
                }
            }
            keep_best(&triplets, hits, det, config.max_seeds_per_middle, &mut seeds);
        }
    }
    seeds
}

/// The triplet of bottom `b`, middle `m` and top `t` if it passes the curvature, impact
/// parameter and scattering cuts, into `out` with its curvature.
#[allow(clippy::too_many_arguments)]
fn triplet(
    b: &Doublet,
    bsp: SpacePoint,
    t: &Doublet,
    tsp: SpacePoint,
    m: &SpacePoint,
    bz: f64,
    r_min_circle: f64,
    icot2: f64,
    config: &SeedConfig,
    out: &mut Vec<(f64, Seed)>,
) {
    let p = [[bsp.x, bsp.y, bsp.z], [m.x, m.y, m.z], [tsp.x, tsp.y, tsp.z]];
    let xy = |i: usize| [p[i][0], p[i][1]];
    let kappa = curvature(xy(0), xy(1), xy(2));
    if kappa == 0.0 || kappa.abs() * r_min_circle > 1.0 {
        return;
    }
    // |d0| from the circle's centre before the full parameters (cheap cuts first).
    let Some(c) = circle_center(xy(0), xy(1), xy(2)) else { return };
    if (c[0].hypot(c[1]) - 1.0 / kappa.abs()).abs() > config.impact_max {
        return;
    }
    // The tolerance at the seed's own momentum.
    let pm = bz.abs() / kappa.abs() * icot2.sqrt();
    let theta0 = highland_theta0(pm, beta(pm, 0.139_57), 1.0, PIXEL_X_OVER_X0 * icot2.sqrt());
    let meas = POSITION_SIGMA * (1.0 + b.cot.abs()) * (1.0 / b.dr + 1.0 / t.dr);
    if (t.cot - b.cot).abs() > config.sigma_scattering * (theta0 * icot2).hypot(meas) {
        return;
    }
    let Some(params) = seed_parameters(p, bz) else { return };
    if params[LOC0].abs() > config.impact_max || params[LOC1].abs() > config.z_max {
        return;
    }
    let seed = Seed { hits: [bsp.hit, m.hit, tsp.hit], params, weight: -params[LOC0].abs() };
    out.push((kappa, seed));
}

/// The seed filter of one middle hit: each triplet gains a point per other triplet whose top
/// hit lies on another layer with the same curvature (within 5%, or 2·10⁻⁵ /mm), a fourth
/// hit that confirms it; the best `keep` are appended to `seeds`.
fn keep_best(triplets: &[(f64, Seed)], hits: &HitStore, det: &Detector, keep: usize, seeds: &mut Vec<Seed>) {
    let n = triplets.len();
    if n == 0 {
        return;
    }
    let layer_of = |h: u32| det.layer_of(hits.module[h as usize] as usize);
    let mut scored: Vec<Seed> = Vec::with_capacity(n);
    for i in 0..n {
        let (ki, si) = triplets[i];
        let li = layer_of(si.hits[2]);
        let mut confirm = 0;
        for &(kj, sj) in triplets.iter() {
            if sj.hits[0] == si.hits[0] && layer_of(sj.hits[2]) != li && (kj - ki).abs() < (0.05 * ki.abs()).max(2e-5) {
                confirm += 1;
            }
        }
        scored.push(Seed { weight: si.weight + confirm.min(3) as f64, ..si });
    }
    scored.sort_by(|a, b| b.weight.total_cmp(&a.weight));
    seeds.extend(scored.into_iter().take(keep));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kalman::params::BoundMatrix;
    use crate::kalman::perigee::Perigee;
    use trackgnn_trackml::physics::wrap_phi;

    /// Three points of a helix of charge `q`, transverse radius `radius` \[mm\], starting at
    /// the origin with azimuth `phi0` and slope `cot`, at the transverse radii `radii`.
    fn helix_points(q: f64, radius: f64, phi0: f64, cot: f64, radii: [f64; 3]) -> [[f64; 3]; 3] {
        radii.map(|r| {
            // The turning angle at chord r from the origin: α = 2 asin(r/2R).
            let alpha = 2.0 * (r / (2.0 * radius)).asin();
            let s = radius * alpha;
            // Clockwise for q > 0.
            let c = [q * radius * phi0.sin(), -q * radius * phi0.cos()];
            let start = (0.0 - c[1]).atan2(0.0 - c[0]);
            let a = start - q * alpha;
            [c[0] + radius * a.cos(), c[1] + radius * a.sin(), s * cot + 12.0]
        })
    }

    #[test]
    fn a_seed_of_three_helix_points_recovers_pt_charge_direction_and_z0() {
        let bz = trackgnn_trackml::units::tesla_to_native(2.0);
        for q in [1.0, -1.0] {
            for (pt, phi0, cot) in [(1.5, 0.4, 0.3), (0.6, -2.8, -1.2), (10.0, 3.0, 4.0)] {
                let radius = pt / bz;
                let p = helix_points(q, radius, phi0, cot, [32.0, 72.0, 116.0]);
                let v = seed_parameters(p, bz).unwrap();
                let per = Perigee::from_bound(&v, &BoundMatrix::zeros());
                assert!((per.pt() - pt).abs() / pt < 1e-6, "pT {} vs {pt}", per.pt());
                assert_eq!(per.q_over_pt.signum(), q, "charge");
                assert!(wrap_phi(per.phi - phi0).abs() < 1e-6, "phi {} vs {phi0}", per.phi);
                assert!((per.cot_theta - cot).abs() < 1e-6 && (per.z0 - 12.0).abs() < 1e-6);
                assert!(per.d0.abs() < 1e-6);
            }
        }
    }
}
