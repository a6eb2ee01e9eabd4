//! The Kalman filter and its RTS smoother: a track's hits, in the order the particle crossed
//! them, fitted from a seed at the perigee.
//!
//! From the seed (parameters and covariance on the beam line), each hit's module in turn:
//! 1. **Prediction**: the parameters transported to the module ([`FitContext::transport`]),
//!    the covariance F C Fᵀ + Q (Q: the beam pipe when crossed);
//! 2. **Update** (the gain-matrix update): residual r = m − H x of the hit's local (u, v),
//!    S = V + H C Hᵀ, gain K = C Hᵀ S⁻¹, x ← x + K r, C ← (I − KH) C (I − KH)ᵀ + K V Kᵀ
//!    (Joseph's form, symmetric and positive), χ² = rᵀ S⁻¹ r;
//! 3. **Material**: the module's multiple scattering added to the covariance (the particle
//!    scatters after the point it was measured at, as the generator does it).
//!
//! Then the Rauch–Tung–Striebel smoother runs back from the last hit: with A = C_k Fᵀ C⁻¹_{k+1|k}
//! (C_k the filtered covariance before the module's scattering), x_k|n = x_k + A (x_{k+1|n} −
//! x_{k+1|k}) and C_k|n = C_k + A (C_{k+1|n} − C_{k+1|k}) Aᵀ, down to the seed itself: the
//! fitted perigee is the smoothed state at the beam line, with the beam pipe's scattering in
//! between (where the particle was produced, not where it left the pipe).
//!
//! Each prediction linearises the transport about the state it starts from. Where the hits so
//! far leave the direction loose (the seed's, or two hits of overlapping modules 0.1 mm apart in
//! r), that state is far from the track and the linearisation misses it by the second order
//! (issue 40: 100 GeV tracks 50 σ off in cot θ). So where a filtered state ends further than
//! [`RELINEARISE`] from its smoothed one, the fit makes a second pass linearised about the
//! first pass's smoothed trajectory, and a smoother step whose prediction is that far from the
//! smoothed state is taken about the latter carried back.

use nalgebra::{Matrix2, SMatrix, Vector2};
use trackgnn_trackml::geometry::Detector;

use super::measurement::MeasurementModel;
use super::params::{BoundMatrix, BoundVector, PHI, QOVERP, ReferenceSurface, THETA, direction};
use super::perigee::Perigee;
use super::scattering::module_noise;
use super::transport::FitContext;
use crate::error::{Error, Result};

/// One hit to fit: its module (index in `Detector::modules`) and measured local (u, v) \[mm\]
/// (as the hit file gives it: the model's offset is subtracted in the fit).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measurement {
    /// The module's index in the detector.
    pub module: usize,
    /// The local position measured on it \[mm\].
    pub local: [f64; 2],
}

/// Parameters and their covariance on a reference surface.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BoundState {
    /// The surface.
    pub surface: ReferenceSurface,
    /// The parameters.
    pub params: BoundVector,
    /// Their covariance.
    pub cov: BoundMatrix,
}

/// The fit at one hit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrackState {
    /// The hit.
    pub measurement: Measurement,
    /// Predicted from the previous state.
    pub predicted: BoundState,
    /// Updated with the hit (before the module's scattering).
    pub filtered: BoundState,
    /// Smoothed: from all hits.
    pub smoothed: BoundState,
    /// ∂(predicted)/∂(previous state): the transport Jacobian from the previous surface.
    pub jacobian: BoundMatrix,
    /// The update's χ² (2 degrees of freedom).
    pub chi2: f64,
}

/// A fitted track.
#[derive(Clone, Debug, PartialEq)]
pub struct FitResult {
    /// The states at the hits, in the order given.
    pub states: Vec<TrackState>,
    /// The smoothed parameters at the perigee, with their covariance.
    pub perigee: BoundState,
    /// The sum of the updates' χ².
    pub chi2: f64,
    /// Degrees of freedom: 2 per hit − 5.
    pub ndf: usize,
}

impl FitResult {
    /// χ²/ndf.
    pub fn chi2_per_ndf(&self) -> f64 {
        self.chi2 / self.ndf as f64
    }

    /// The perigee in the physicist's parameters (q/pT, φ, cot θ, η, d0, z0), with errors.
    pub fn perigee_parameters(&self) -> Perigee {
        Perigee::from_bound(&self.perigee.params, &self.perigee.cov)
    }
}

/// A Kalman filter with its smoother, for one detector, field, material and mass hypothesis.
#[derive(Clone, Copy, Debug)]
pub struct KalmanFitter<'a> {
    /// Where the track propagates.
    pub context: FitContext<'a>,
    /// The hits' errors.
    pub measurement: MeasurementModel,
}

/// How far the smoothed state may be from the filter's prediction, in direction (φ, θ \[rad\])
/// and relative q/p, before the smoother's step is taken about it rather than about the filtered
/// state ([`KalmanFitter::fit`]'s smoother): a second order below the hits' precision.
pub const RELINEARISE: [f64; 2] = [1e-4, 1e-2];

/// Whether bound parameters `a` are further than [`RELINEARISE`] from `b`.
fn far(a: &BoundVector, b: &BoundVector) -> bool {
    let d = difference(a, b);
    d[PHI].abs().max(d[THETA].abs()) > RELINEARISE[0] || (d[QOVERP] / b[QOVERP]).abs() > RELINEARISE[1]
}

/// H: the measured coordinates (u, v) of bound parameters.
pub(super) fn projector() -> SMatrix<f64, 2, 5> {
    SMatrix::<f64, 2, 5>::new(1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)
}

/// `a − b` for bound parameters, with the azimuths' difference wrapped into (−π, π].
fn difference(a: &BoundVector, b: &BoundVector) -> BoundVector {
    let mut d = a - b;
    d[PHI] = trackgnn_trackml::physics::wrap_phi(d[PHI]);
    d
}

fn symmetric(c: BoundMatrix) -> BoundMatrix {
    (c + c.transpose()) * 0.5
}

fn invert(m: &BoundMatrix, what: &str) -> Result<BoundMatrix> {
    m.try_inverse().filter(|i| i.iter().all(|v| v.is_finite())).ok_or_else(|| Error::Fit(format!("singular {what}")))
}

/// The gain-matrix update of `predicted` with a hit at local (u, v) `m` \[mm\] (its offset
/// already subtracted) of covariance `v`: residual r = m − H x, S = V + H C Hᵀ, gain
/// K = C Hᵀ S⁻¹, x ← x + K r, C ← (I − KH) C (I − KH)ᵀ + K V Kᵀ (Joseph's form). Returns the
/// filtered state and the update's χ² = rᵀ S⁻¹ r (2 degrees of freedom); `None` if S is
/// singular.
pub fn gain_update(predicted: &BoundState, m: [f64; 2], v: &Matrix2<f64>) -> Option<(BoundState, f64)> {
    let h = projector();
    let residual = Vector2::new(m[0], m[1]) - h * predicted.params;
    let s: Matrix2<f64> = v + h * predicted.cov * h.transpose();
    let s_inv = s.try_inverse()?;
    let gain = predicted.cov * h.transpose() * s_inv;
    let ikh = BoundMatrix::identity() - gain * h;
    let filtered = BoundState {
        surface: predicted.surface,
        params: predicted.params + gain * residual,
        cov: symmetric(ikh * predicted.cov * ikh.transpose() + gain * v * gain.transpose()),
    };
    Some((filtered, (residual.transpose() * s_inv * residual)[0]))
}

impl<'a> KalmanFitter<'a> {
    /// A fitter in `context` with hit errors `measurement`.
    pub fn new(context: FitContext<'a>, measurement: MeasurementModel) -> Self {
        KalmanFitter { context, measurement }
    }

    fn detector(&self) -> &Detector {
        self.context.det
    }

    /// Fits `hits` (in the order the particle crossed them) from `seed`, given at the beam
    /// line.
    ///
    /// # Errors
    /// [`Error::Fit`] for fewer than 3 hits, a seed not at the beam line or not finite, a hit's
    /// module not in the detector, a trajectory that misses a hit's module plane or a singular
    /// covariance.
    pub fn fit(&self, seed: &BoundState, hits: &[Measurement]) -> Result<FitResult> {
        let det = self.detector();
        if hits.len() < 3 {
            return Err(Error::Fit(format!("a fit needs at least 3 hits, got {}", hits.len())));
        }
        if seed.surface != ReferenceSurface::BeamLine {
            return Err(Error::Fit(format!("the seed must be given at the beam line, not {:?}", seed.surface)));
        }
        if !seed.params.iter().chain(seed.cov.iter()).all(|v| v.is_finite()) || seed.params[4] == 0.0 {
            return Err(Error::Fit(format!("the seed is not finite or has q/p = 0: {:?}", seed.params)));
        }
        if let Some(h) = hits.iter().find(|h| h.module >= det.modules.len() || !h.local.iter().all(|v| v.is_finite())) {
            return Err(Error::Fit(format!(
                "hit {h:?}: module index or position out of range (the detector has {} modules)",
                det.modules.len()
            )));
        }
        let first = self.pass(seed, hits, None)?;
        // The filter linearises each transport about the filtered state it starts from; where
        // those are far from the smoothed trajectory, a second pass about the latter.
        let far = far(&first.perigee.params, &seed.params)
            || first.states.iter().any(|s| far(&s.smoothed.params, &s.filtered.params));
        if !far {
            return Ok(first);
        }
        let reference: Vec<BoundVector> =
            std::iter::once(first.perigee.params).chain(first.states.iter().map(|s| s.smoothed.params)).collect();
        Ok(self.pass(seed, hits, Some(&reference)).unwrap_or(first))
    }

    /// One pass of the filter and the smoother over `hits` from `seed`. Each prediction
    /// linearises the transport about the state it starts from, or, given a `reference`
    /// trajectory (the perigee's parameters, then those on each hit's module), about the
    /// reference there: f(x) ≈ f(x_ref) + F (x − x_ref), F the Jacobian at x_ref.
    fn pass(&self, seed: &BoundState, hits: &[Measurement], reference: Option<&[BoundVector]>) -> Result<FitResult> {
        let det = self.detector();
        let mut states: Vec<TrackState> = Vec::with_capacity(hits.len());
        // The state after the previous surface's material.
        let mut current = *seed;
        let mut chi2_sum = 0.0;
        for hit in hits {
            let surface = ReferenceSurface::Module(hit.module);
            let (t, params) = match reference {
                Some(r) => {
                    let at = &r[states.len()];
                    let t = self.context.transport(current.surface, at, surface)?;
                    let params = t.params + t.jacobian * difference(&current.params, at);
                    (t, params)
                }
                None => {
                    let t = self.context.transport(current.surface, &current.params, surface)?;
                    (t, t.params)
                }
            };
            let predicted = BoundState {
                surface,
                params,
                cov: symmetric(t.jacobian * current.cov * t.jacobian.transpose() + t.noise),
            };
            let dir = direction(predicted.params[PHI], predicted.params[THETA]);
            let m = self.measurement.corrected(det, hit.module, hit.local);
            let v = self.measurement.hit_covariance(det, hit.module, [dir[0], dir[1], dir[2]], m);
            let (filtered, chi2) = gain_update(&predicted, m, &v)
                .ok_or_else(|| Error::Fit(format!("singular residual covariance at {hit:?}")))?;
            chi2_sum += chi2;
            let noise =
                module_noise(&self.context.material, &det.modules[hit.module], &filtered.params, self.context.mass);
            current = BoundState { cov: filtered.cov + noise, ..filtered };
            states.push(TrackState {
                measurement: *hit,
                predicted,
                filtered,
                smoothed: filtered,
                jacobian: t.jacobian,
                chi2,
            });
        }
        // The smoother, from the last hit back to the seed.
        for k in (0..states.len() - 1).rev() {
            let next = states[k + 1];
            let f = &states[k];
            let noise = module_noise(
                &self.context.material,
                &det.modules[f.measurement.module],
                &f.filtered.params,
                self.context.mass,
            );
            let linear = BoundState { cov: f.filtered.cov + noise, ..f.filtered };
            states[k].smoothed =
                self.smoothing_step(&f.filtered, &linear, &next.predicted, &next.jacobian, &next.smoothed)?;
        }
        let first = states[0];
        let perigee = self.smoothing_step(seed, seed, &first.predicted, &first.jacobian, &first.smoothed)?;
        Ok(FitResult { ndf: 2 * states.len() - 5, states, perigee, chi2: chi2_sum })
    }

    /// One step of the smoother: the state `filtered` on its surface from the smoothed state
    /// `smoothed` on the next, which the filter predicted (`predicted`, ∂/∂(start) `jacobian`)
    /// from `transported` (`filtered` with its surface's scattering in the covariance).
    ///
    /// The RTS step is linear in the state, and the filter's prediction linearises the transport
    /// about `filtered`, which can be far from the smoothed trajectory where the hits so far do
    /// not fix the direction (the seed's, or two hits of overlapping modules 0.1 mm apart in
    /// r). The transport is curved in θ (z = r cot θ: by 2 cos θ/sin³θ, 300 at |η| = 2.4), so
    /// about `filtered` a step misses by the second order of that distance: for a 100 GeV track
    /// 10 mrad off, 0.4 mm over 80 mm of r, 20–50 σ of its z0 and cot θ (issue 40). So where
    /// the prediction's direction or q/p is off ([`RELINEARISE`]), the step is taken about the
    /// smoothed state carried back to this surface, x*: with F* and Q* the transport's Jacobian
    /// and noise from x* to the next surface and P* = F* C Fᵀ* + Q* (C the covariance
    /// transported), the gain is A = C_k F*ᵀ P*⁻¹, the state x_k + A (x_{k+1|n} − f(x*) −
    /// F* (x_k − x*)) and its covariance C_k + A (C_{k+1|n} − P*) Aᵀ. Where the smoothed state
    /// does not carry back, about `filtered` as the filter predicted it.
    fn smoothing_step(
        &self,
        filtered: &BoundState,
        transported: &BoundState,
        predicted: &BoundState,
        jacobian: &BoundMatrix,
        smoothed: &BoundState,
    ) -> Result<BoundState> {
        let step = |prediction: &BoundVector, p: &BoundMatrix, f: &BoundMatrix| -> Result<BoundState> {
            let gain = filtered.cov * f.transpose() * invert(p, "predicted covariance")?;
            Ok(BoundState {
                surface: filtered.surface,
                params: filtered.params + gain * difference(&smoothed.params, prediction),
                cov: symmetric(filtered.cov + gain * (smoothed.cov - p) * gain.transpose()),
            })
        };
        if far(&smoothed.params, &predicted.params) {
            let about = |x_star: &BoundVector| -> Result<BoundState> {
                let t = self.context.transport(filtered.surface, x_star, smoothed.surface)?;
                let p = symmetric(t.jacobian * transported.cov * t.jacobian.transpose() + t.noise);
                step(&(t.params + t.jacobian * difference(&filtered.params, x_star)), &p, &t.jacobian)
            };
            let back = self.context.transport(smoothed.surface, &smoothed.params, filtered.surface);
            if let Ok(s) = back.and_then(|b| about(&b.params))
                && s.params.iter().chain(s.cov.iter()).all(|v| v.is_finite())
            {
                return Ok(s);
            }
        }
        step(&predicted.params, &predicted.cov, jacobian)
    }
}
