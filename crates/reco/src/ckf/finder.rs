//! The combinatorial Kalman filter: from a seed, a track followed layer by layer, branching
//! on every compatible hit, as ACTS's `CombinatorialKalmanFilter` does it.
//!
//! The seed's three hits are first fitted from its perigee estimate (a loose prior), and the
//! result carried back to the beam line: the search starts there, as ACTS's starts on the
//! seed's first surface, and finds the seed's hits again with those of the layers between and
//! around them. Then, in turn for every trajectory alive: the next layer ahead and the modules of it the trajectory
//! may cross ([`Navigator`]); on each of these modules, the state predicted there
//! ([`FitContext::transport`]) and the χ² of each of the module's hits against it; every hit of
//! χ² ≤ [`CkfConfig::chi2_max`] (the best [`CkfConfig::max_branches_per_surface`]) starts a
//! branch updated with it (the gain-matrix update, [`gain_update`]); each crossed module adds
//! its multiple scattering. A layer crossed inside a module without a compatible hit is a hole
//! (its module's scattering is added too); a trajectory stops after more than
//! [`CkfConfig::max_consecutive_holes`] holes in a row or [`CkfConfig::max_holes`] in all, or
//! when it leaves the detector. At most [`CkfConfig::max_branches`] trajectories of one seed
//! are followed at once (most hits, then least χ²), and the seed's track is the best of them.
//!
//! Where this differs from ACTS: the search starts at the beam line, not on the seed's first
//! surface; only the best trajectory of a seed is kept (ACTS keeps every branch and lets
//! ambiguity resolution choose).

use nalgebra::Matrix2;
use trackgnn_trackml::geometry::Detector;

use super::config::CkfConfig;
use super::hits::HitStore;
use super::navigation::{LocalHelix, ModuleCrossing, Navigator};
use super::seeding::Seed;
use crate::kalman::candidate::seed_state;
use crate::kalman::fitter::{BoundState, FitResult, gain_update};
use crate::kalman::params::{BoundVector, PHI, ReferenceSurface, THETA, direction};
use crate::kalman::perigee::Perigee;
use crate::kalman::scattering::module_noise;
use crate::kalman::{FitContext, MeasurementModel};
use crate::propagation::stepper::FreeVector;

/// The most layers one trajectory crosses (loopers stop there).
const MAX_LAYERS: usize = 40;

/// The seed's covariance, carried back to the beam line, is multiplied by this (the material
/// between is not taken out again).
const BACK_INFLATION: f64 = 2.0;

/// A track found by the filter.
#[derive(Clone, Debug, PartialEq)]
pub struct Track {
    /// Its hits (indices in the event), in the order found (inside out).
    pub hits: Vec<u32>,
    /// The sum of its updates' χ².
    pub chi2: f64,
    /// Degrees of freedom: 2 per hit − 5.
    pub ndf: usize,
    /// Layers crossed inside a module without a hit.
    pub holes: usize,
    /// The filtered state at its last hit.
    pub last: BoundState,
    /// The seed's perigee estimate.
    pub seed_params: BoundVector,
    /// The fit of all its hits, when [`CkfConfig::fit`] asks for it.
    pub fit: Option<FitResult>,
}

impl Track {
    /// χ²/ndf.
    pub fn chi2_per_ndf(&self) -> f64 {
        self.chi2 / self.ndf.max(1) as f64
    }

    /// The fitted perigee parameters with errors (`None` without [`CkfConfig::fit`]).
    pub fn perigee(&self) -> Option<Perigee> {
        self.fit.as_ref().map(FitResult::perigee_parameters)
    }
}

/// One trajectory being followed.
#[derive(Clone, Debug)]
struct Branch {
    /// The state after the last module crossed (its scattering included).
    state: BoundState,
    /// Where navigation goes on from (the last module, or the last layer's crossing point).
    nav: FreeVector,
    /// The layer of `nav` (not searched again next).
    layer: usize,
    hits: Vec<u32>,
    chi2: f64,
    holes: usize,
    consecutive: usize,
    layers: usize,
}

impl Branch {
    fn better(&self, other: &Branch) -> std::cmp::Ordering {
        other.hits.len().cmp(&self.hits.len()).then(self.chi2.total_cmp(&other.chi2))
    }
}

/// The combinatorial Kalman filter of one event's hits.
#[derive(Clone, Debug)]
pub struct TrackFinder<'a> {
    /// Propagation, field and material.
    pub context: FitContext<'a>,
    /// The hits' errors.
    pub measurement: MeasurementModel,
    /// The layers and modules ahead.
    pub navigator: Navigator<'a>,
    /// The cuts.
    pub config: CkfConfig,
}

impl<'a> TrackFinder<'a> {
    fn det(&self) -> &'a Detector {
        self.context.det
    }

    /// The state after updating `predicted` on `module` with hit `h`: filtered, then the
    /// module's scattering added; and the update's χ².
    fn update(&self, hits: &HitStore, predicted: &BoundState, module: usize, h: u32) -> Option<(BoundState, f64)> {
        let det = self.det();
        let dir = direction(predicted.params[PHI], predicted.params[THETA]);
        let v = self.measurement.covariance(det, module, [dir[0], dir[1], dir[2]]);
        let m = self.measurement.corrected(det, module, hits.local[h as usize]);
        let (filtered, chi2) = gain_update(predicted, m, &v)?;
        Some((self.scatter(filtered, module), chi2))
    }

    /// `state` on `module` with the module's multiple scattering added.
    fn scatter(&self, state: BoundState, module: usize) -> BoundState {
        let c = &self.context;
        let noise = module_noise(&c.material, &self.det().modules[module], &state.params, c.mass);
        BoundState { cov: state.cov + noise, ..state }
    }

    /// `state` transported to `module`, its covariance with the beam pipe's noise if crossed.
    fn predict(&self, state: &BoundState, module: usize) -> Option<BoundState> {
        let surface = ReferenceSurface::Module(module);
        let t = self.context.transport(state.surface, &state.params, surface).ok()?;
        let cov = t.jacobian * state.cov * t.jacobian.transpose() + t.noise;
        let params = t.params;
        params.iter().all(|v| v.is_finite()).then_some(BoundState {
            surface,
            params,
            cov: (cov + cov.transpose()) * 0.5,
        })
    }

    /// The seed's hits fitted from its perigee estimate: the trajectory to follow, or `None`
    /// if the fit fails or its χ² exceeds [`CkfConfig::chi2_max`].
    fn fit_seed(&self, hits: &HitStore, seed: &Seed) -> Option<Branch> {
        let mut state = seed_state(&seed.params);
        let mut chi2 = 0.0;
        for &h in &seed.hits {
            let module = hits.module[h as usize] as usize;
            let predicted = self.predict(&state, module)?;
            let (s, c) = self.update(hits, &predicted, module, h)?;
            state = s;
            chi2 += c;
        }
        if chi2 > self.config.chi2_max {
            return None;
        }
        // Back to the beam line with the three hits' precision: the search starts there, and
        // finds the seed's hits again with the layers between and around them.
        let t = self.context.transport(state.surface, &state.params, ReferenceSurface::BeamLine).ok()?;
        let cov = t.jacobian * state.cov * t.jacobian.transpose() + t.noise;
        let cov = (cov + cov.transpose()) * 0.5 * BACK_INFLATION;
        let state = BoundState { surface: ReferenceSurface::BeamLine, params: t.params, cov };
        Some(Branch {
            nav: state.surface.to_free(self.det(), &state.params).0,
            state,
            layer: usize::MAX,
            hits: Vec::new(),
            chi2: 0.0,
            holes: 0,
            consecutive: 0,
            layers: 0,
        })
    }

    /// Follows `seed` through the detector: the best trajectory, if it holds at least
    /// [`CkfConfig::min_hits`] hits.
    pub fn find(&self, hits: &HitStore, seed: &Seed) -> Option<Track> {
        let start = self.fit_seed(hits, seed)?;
        let mut active = vec![start];
        let mut done: Vec<Branch> = Vec::new();
        let mut modules = Vec::new();
        while !active.is_empty() {
            let mut next = Vec::new();
            for b in active.drain(..) {
                self.extend(hits, b, &mut modules, &mut next, &mut done);
            }
            if next.len() > self.config.max_branches {
                next.sort_by(Branch::better);
                next.truncate(self.config.max_branches);
            }
            active = next;
        }
        let best = done.into_iter().min_by(Branch::better)?;
        (best.hits.len() >= self.config.min_hits).then(|| Track {
            ndf: (2 * best.hits.len()).saturating_sub(5),
            hits: best.hits,
            chi2: best.chi2,
            holes: best.holes,
            last: best.state,
            seed_params: seed.params,
            fit: None,
        })
    }

    /// One layer further for trajectory `b`: its continuations into `next`, or `b` into `done`
    /// where it ends.
    fn extend(
        &self,
        hits: &HitStore,
        b: Branch,
        modules: &mut Vec<ModuleCrossing>,
        next: &mut Vec<Branch>,
        done: &mut Vec<Branch>,
    ) {
        if b.layers >= MAX_LAYERS {
            done.push(b);
            return;
        }
        let field = self.context.field;
        let helix = LocalHelix::from_free(field, &b.nav);
        let skip = (b.layer != usize::MAX).then_some(b.layer);
        let Some(crossing) = self.navigator.next_layer(&helix, skip) else {
            done.push(b);
            return;
        };
        self.navigator.modules(&helix, &crossing, modules);
        // (trajectory, crossed a module, took a hit) through the layer's modules in turn.
        let mut set = vec![(b, false, false)];
        for mc in modules.iter() {
            let mut out = Vec::with_capacity(set.len());
            for (br, crossed, got) in set {
                let Some(predicted) = self.predict(&br.state, mc.module) else {
                    out.push((br, crossed, got));
                    continue;
                };
                let compatible = self.compatible(hits, &predicted, mc.module);
                if compatible.is_empty() {
                    let module = &self.det().modules[mc.module];
                    if module.contains(predicted.params[0], predicted.params[1], 0.0) {
                        let mut br = br;
                        br.state = self.scatter(predicted, mc.module);
                        out.push((br, true, got));
                    } else {
                        out.push((br, crossed, got));
                    }
                    continue;
                }
                for &(_, h) in compatible.iter().take(self.config.max_branches_per_surface) {
                    let Some((state, chi2)) = self.update(hits, &predicted, mc.module, h) else { continue };
                    let mut child = br.clone();
                    child.state = state;
                    child.hits.push(h);
                    child.chi2 += chi2;
                    out.push((child, true, true));
                }
            }
            if out.len() > self.config.max_branches {
                out.sort_by(|a, b| a.0.better(&b.0));
                out.truncate(self.config.max_branches);
            }
            set = out;
        }
        for (mut br, crossed, got) in set {
            br.layer = crossing.layer;
            br.layers += 1;
            if crossed {
                br.nav = br.state.surface.to_free(self.det(), &br.state.params).0;
            } else {
                let (p, d) = (crossing.point, helix.direction_at(crossing.path));
                br.nav = FreeVector::from_column_slice(&[p[0], p[1], p[2], d[0], d[1], d[2], br.nav[6]]);
            }
            if got {
                br.consecutive = 0;
            } else if crossed {
                br.holes += 1;
                br.consecutive += 1;
            }
            if br.consecutive > self.config.max_consecutive_holes || br.holes > self.config.max_holes {
                done.push(br);
            } else {
                next.push(br);
            }
        }
    }

    /// The hits of `module` compatible with `predicted`: (χ², hit), best first.
    fn compatible(&self, hits: &HitStore, predicted: &BoundState, module: usize) -> Vec<(f64, u32)> {
        let on = hits.on_module(module);
        if on.is_empty() {
            return Vec::new();
        }
        let det = self.det();
        let dir = direction(predicted.params[PHI], predicted.params[THETA]);
        let v = self.measurement.covariance(det, module, [dir[0], dir[1], dir[2]]);
        let c = &predicted.cov;
        let s = Matrix2::new(c[(0, 0)] + v[(0, 0)], c[(0, 1)], c[(1, 0)], c[(1, 1)] + v[(1, 1)]);
        let Some(s_inv) = s.try_inverse() else { return Vec::new() };
        let (u0, v0) = (predicted.params[0], predicted.params[1]);
        let max = self.config.chi2_max;
        let (wu, wv) = ((max * s[(0, 0)]).sqrt(), (max * s[(1, 1)]).sqrt());
        let mut out: Vec<(f64, u32)> = Vec::new();
        for &h in on {
            let m = self.measurement.corrected(det, module, hits.local[h as usize]);
            let (ru, rv) = (m[0] - u0, m[1] - v0);
            if ru.abs() > wu || rv.abs() > wv {
                continue;
            }
            let chi2 = ru * ru * s_inv[(0, 0)] + 2.0 * ru * rv * s_inv[(0, 1)] + rv * rv * s_inv[(1, 1)];
            if chi2 <= max {
                out.push((chi2, h));
            }
        }
        out.sort_by(|a, b| a.0.total_cmp(&b.0));
        out
    }
}
