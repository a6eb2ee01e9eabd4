//! Outlier hits of a candidate's fit: a hit of another particle (or noise) that track building
//! put on the candidate. After the fit ([`fit_candidate`]), each hit's residual from the
//! smoothed state is weighed by its covariance R = V − H C Hᵀ (the smoothed state already leans
//! towards the hit: this χ² is the hit's against the fit of the other hits); the worst hit is
//! dropped and the rest refitted while its χ² exceeds a gate, as ACTS's outlier finders do.
//!
//! The GNN chain's candidates need it: a candidate that fits badly is, nine times in ten, a
//! true track holding one foreign hit (`tools/recipes/results/kalman.md`), and dropping that
//! hit both purifies the track and leaves χ²/ndf to flag the fakes.

use nalgebra::{Matrix2, Vector2};

use super::candidate::{CandidateHit, fit_candidate};
use super::fitter::{FitResult, KalmanFitter, TrackState, projector};
use super::params::{PHI, THETA, direction};
use crate::error::{Error, Result};

/// When the worst hit of a fit is dropped.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OutlierRemoval {
    /// The smoothed-residual χ² (2 degrees of freedom) above which the worst hit is dropped
    /// (20: a true hit with Gaussian errors exceeds it once in 22,000).
    pub chi2_gate: f64,
    /// The most hits dropped from one candidate.
    pub max_removed: usize,
    /// No hit is dropped from a candidate of this many hits or fewer.
    pub min_hits: usize,
}

impl Default for OutlierRemoval {
    fn default() -> Self {
        OutlierRemoval { chi2_gate: 20.0, max_removed: 3, min_hits: 5 }
    }
}

impl OutlierRemoval {
    /// The default removal with the χ² gate `chi2_gate`; `None` for an infinite gate (every
    /// hit kept).
    ///
    /// # Errors
    /// [`Error::Config`] for a gate that is not a positive number.
    pub fn with_gate(chi2_gate: f64) -> Result<Option<OutlierRemoval>> {
        if chi2_gate.is_nan() || chi2_gate <= 0.0 {
            return Err(Error::config("outlier_chi2", format!("must be a positive number or inf, got {chi2_gate}")));
        }
        Ok(chi2_gate.is_finite().then(|| OutlierRemoval { chi2_gate, ..OutlierRemoval::default() }))
    }
}

/// A fit with its outliers dropped.
#[derive(Clone, Debug, PartialEq)]
pub struct CleanFit {
    /// The fit of the hits kept.
    pub fit: FitResult,
    /// The dropped hits, as indices into the hits given, in the order they were dropped.
    pub removed: Vec<usize>,
}

/// The χ² of a fitted hit's residual from the smoothed state, r = m − H x, with covariance
/// R = V − H C Hᵀ (V the hit's error at the smoothed direction). Where R is not positive (a
/// state pinned by the hit alone) it falls back to V.
pub fn smoothed_chi2(fitter: &KalmanFitter<'_>, state: &TrackState) -> f64 {
    let det = fitter.context.det;
    let (module, s) = (state.measurement.module, &state.smoothed);
    let dir = direction(s.params[PHI], s.params[THETA]);
    let m = fitter.measurement.corrected(det, module, state.measurement.local);
    let v = fitter.measurement.hit_covariance(det, module, [dir[0], dir[1], dir[2]], m);
    let h = projector();
    let r = Vector2::new(m[0], m[1]) - h * s.params;
    let unbiased: Matrix2<f64> = v - h * s.cov * h.transpose();
    let positive = unbiased[(0, 0)] > 0.0 && unbiased.determinant() > 0.0;
    let cov = if positive { unbiased } else { v };
    cov.try_inverse().map_or(f64::INFINITY, |inv| (r.transpose() * inv * r)[0])
}

/// Fits `hits` (in path order, as [`fit_candidate`]) and drops outliers ([`drop_outliers`]),
/// each refit from a new seed.
///
/// # Errors
/// The first fit's ([`fit_candidate`]).
pub fn fit_without_outliers(
    fitter: &KalmanFitter<'_>,
    hits: &[CandidateHit],
    removal: &OutlierRemoval,
) -> Result<CleanFit> {
    drop_outliers(fitter, hits.len(), removal, |kept| {
        let subset: Vec<CandidateHit> = kept.iter().map(|&i| hits[i]).collect();
        fit_candidate(fitter, &subset)
    })
}

/// The outlier search over a track of `num_hits` hits that `fit` fits (given the indices of
/// the hits to fit, in their order): the fit of all of them first; then, while the hit of the
/// largest [`smoothed_chi2`] exceeds `removal.chi2_gate`, at most `removal.max_removed` times
/// and never from `removal.min_hits` hits or fewer, that hit is dropped and the rest refitted.
/// A refit that fails keeps the fit before it.
///
/// # Errors
/// The first fit's.
pub fn drop_outliers(
    fitter: &KalmanFitter<'_>,
    num_hits: usize,
    removal: &OutlierRemoval,
    mut fit: impl FnMut(&[usize]) -> Result<FitResult>,
) -> Result<CleanFit> {
    let mut kept: Vec<usize> = (0..num_hits).collect();
    let mut current = fit(&kept)?;
    let mut removed = Vec::new();
    while removed.len() < removal.max_removed && kept.len() > removal.min_hits.max(3) {
        let worst = current
            .states
            .iter()
            .map(|s| smoothed_chi2(fitter, s))
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .filter(|(_, chi2)| *chi2 > removal.chi2_gate);
        let Some((k, _)) = worst else { break };
        let rest: Vec<usize> = kept.iter().enumerate().filter(|(j, _)| *j != k).map(|(_, &i)| i).collect();
        let Ok(refit) = fit(&rest) else { break };
        removed.push(kept[k]);
        (kept, current) = (rest, refit);
    }
    Ok(CleanFit { fit: current, removed })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use trackgnn_simulate::{ChargedSpecies, Generator, SimConfig, SingleParticles};
    use trackgnn_trackml::Detector;
    use trackgnn_trackml::ids::ParticleId;

    use super::*;
    use crate::ckf::HitStore;
    use crate::kalman::candidate::{PION_MASS, order_along_path};
    use crate::kalman::{FitContext, MeasurementModel};

    #[test]
    fn a_foreign_hit_is_dropped_and_true_hits_are_kept() {
        let single = SingleParticles::new(ChargedSpecies::Muon, 12, [1.0, 10.0], [-2.0, 2.0]);
        let g = Generator::new(
            Detector::trackml(),
            SimConfig { single: Some(single), noise_fraction: 0.0, ..SimConfig::default() },
        );
        let ctx = FitContext::new(g.detector(), g.field(), g.config().material(), PION_MASS);
        let fitter = KalmanFitter::new(ctx, MeasurementModel::default());
        let removal = OutlierRemoval::default();
        let mut tracks: Vec<Vec<CandidateHit>> = Vec::new();
        for id in 1..=2 {
            let (event, _) = g.event(41, id);
            let store = HitStore::new(g.detector(), &event).unwrap();
            let truth = event.truth.as_ref().unwrap();
            let mut by: HashMap<ParticleId, Vec<CandidateHit>> = HashMap::new();
            for (i, p) in truth.particle_id.iter().enumerate() {
                by.entry(*p).or_default().push(store.candidate_hit(i as u32));
            }
            tracks.extend(by.into_values().filter(|h| h.len() >= 8));
        }
        assert!(tracks.len() >= 15, "{} particles of 8 hits", tracks.len());
        let (mut clean_dropped, mut foreign_first, mut chi2_before, mut chi2_after) = (0, 0, Vec::new(), Vec::new());
        for own in &mut tracks {
            order_along_path(own);
            // The particle alone: nothing to drop (or, rarely, one hit of a true tail).
            let clean = fit_without_outliers(&fitter, own, &removal).unwrap();
            clean_dropped += clean.removed.len();
            // Its middle hit replaced by a hit 0.5 mm away on the same module (another
            // particle's, as track building picks up by mistake).
            let mut mixed = own.clone();
            let k = mixed.len() / 2;
            mixed[k].local[0] += 0.5;
            let before = fit_candidate(&fitter, &mixed).unwrap();
            let after = fit_without_outliers(&fitter, &mixed, &removal).unwrap();
            if after.removed.first() == Some(&k) {
                foreign_first += 1;
            }
            assert_eq!(after.fit.states.len() + after.removed.len(), mixed.len());
            chi2_before.push(before.chi2_per_ndf());
            chi2_after.push(after.fit.chi2_per_ndf());
        }
        let n = tracks.len();
        assert!(clean_dropped * 10 <= n, "{clean_dropped} hits dropped from {n} clean particles");
        assert_eq!(foreign_first, n, "the foreign hit was dropped first in {foreign_first} of {n} candidates");
        let median = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (b, a) = (median(chi2_before), median(chi2_after));
        assert!(a < 2.0 && b > 5.0 * a, "median χ²/ndf {b:.2} with the foreign hit, {a:.2} after");
    }

    #[test]
    fn the_limits_hold() {
        let single = SingleParticles::new(ChargedSpecies::Muon, 1, [2.0, 2.0], [0.2, 0.2]);
        let g = Generator::new(
            Detector::trackml(),
            SimConfig { single: Some(single), noise_fraction: 0.0, ..SimConfig::default() },
        );
        let ctx = FitContext::new(g.detector(), g.field(), g.config().material(), PION_MASS);
        let fitter = KalmanFitter::new(ctx, MeasurementModel::default());
        let (event, _) = g.event(42, 1);
        let store = HitStore::new(g.detector(), &event).unwrap();
        let mut hits: Vec<CandidateHit> = (0..event.hits.len() as u32).map(|i| store.candidate_hit(i)).collect();
        order_along_path(&mut hits);
        assert!(hits.len() >= 8, "{} hits", hits.len());
        // Every hit moved 1 mm along u: the fit is poor everywhere, so every limit binds.
        let mut bad = hits.clone();
        for (k, h) in bad.iter_mut().enumerate() {
            h.local[0] += if k % 2 == 0 { 1.0 } else { -1.0 };
        }
        let strict = OutlierRemoval { chi2_gate: 1e-6, max_removed: 2, min_hits: 5 };
        assert_eq!(fit_without_outliers(&fitter, &bad, &strict).unwrap().removed.len(), 2);
        let few = OutlierRemoval { chi2_gate: 1e-6, max_removed: 100, min_hits: hits.len() - 1 };
        assert_eq!(fit_without_outliers(&fitter, &bad, &few).unwrap().removed.len(), 1);
        let none = OutlierRemoval { chi2_gate: f64::INFINITY, ..strict };
        assert!(fit_without_outliers(&fitter, &bad, &none).unwrap().removed.is_empty());
        // The command line's gate: inf keeps every hit, and a gate that is no χ² is refused.
        assert_eq!(OutlierRemoval::with_gate(f64::INFINITY).unwrap(), None);
        assert_eq!(OutlierRemoval::with_gate(9.0).unwrap().unwrap().chi2_gate, 9.0);
        for bad in [0.0, -1.0, f64::NAN] {
            let err = OutlierRemoval::with_gate(bad).unwrap_err().to_string();
            assert!(err.contains("outlier_chi2"), "{err}");
        }
    }
}
