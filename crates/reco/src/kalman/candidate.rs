//! The fit of one track candidate, shared by the CKF ([`crate::ckf`]) and the GNN chain
//! ([`crate::inference`]): the candidate's hits, in the order the particle crossed them
//! ([`order_along_path`]), fitted by the filter and smoother of [`super::fitter`] from a seed
//! estimated from three of its hits (the circle and the r–z line through the first, the last
//! and the one between farthest from both, [`candidate_seed`], with the loose prior
//! [`SEED_SIGMA`]), and once more from the first fit's perigee.
//!
//! ```
//! use trackgnn_reco::kalman::candidate::{CandidateHit, fit_candidate};
//! use trackgnn_reco::kalman::{FitContext, KalmanFitter, MeasurementModel};
//! use trackgnn_trackml::physics::material::MaterialModel;
//! use trackgnn_trackml::{Detector, SolenoidField};
//!
//! let (det, field) = (Detector::trackml(), SolenoidField::default());
//! let ctx = FitContext::new(&det, &field, MaterialModel::default(), 0.139_57);
//! let fitter = KalmanFitter::new(ctx, MeasurementModel::default());
//! let two: Vec<CandidateHit> = Vec::new();
//! assert!(fit_candidate(&fitter, &two).is_err()); // a fit needs 3 hits
//! ```

use std::f64::consts::PI;

use rayon::prelude::*;

use super::fitter::{BoundState, FitResult, KalmanFitter, Measurement};
use super::outliers::{CleanFit, OutlierRemoval, fit_without_outliers};
use super::params::{BoundMatrix, BoundVector, LOC0, LOC1, PHI, QOVERP, ReferenceSurface, THETA};
use super::perigee::Perigee;
use crate::error::{Error, Result};
use crate::propagation::circle::{circle_center, curvature};
use crate::tracks::NO_TRACK;

/// The seed's prior σ at the perigee: d0, z0 \[mm\], φ, θ \[rad\], and q/p relative to itself.
pub const SEED_SIGMA: [f64; 5] = [1.0, 5.0, 0.02, 0.02, 0.25];

/// The mass hypothesis of fitted candidates \[GeV\]: the pion's.
pub const PION_MASS: f64 = 0.139_57;

/// One hit of a candidate: its module (index in `Detector::modules`), its global position
/// \[mm\] and its local (u, v) on the module \[mm\], as measured (no offset subtracted).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CandidateHit {
    /// The module's index in the detector.
    pub module: usize,
    /// The global position \[mm\].
    pub global: [f64; 3],
    /// The local position on the module \[mm\].
    pub local: [f64; 2],
}

/// The circle and r–z line through three transverse points and their z: the perigee
/// parameters (d0, z0, φ, θ, q/p) of a particle of unit charge in a field `bz`
/// \[GeV/(e·mm)\] (positive: a positive charge turns clockwise seen from +z). `None` for
/// collinear points or ones that do not go outwards.
pub fn seed_parameters(p: [[f64; 3]; 3], bz: f64) -> Option<BoundVector> {
    let xy = |i: usize| [p[i][0], p[i][1]];
    let kappa = curvature(xy(0), xy(1), xy(2));
    let c = circle_center(xy(0), xy(1), xy(2))?;
    if kappa == 0.0 {
        return None;
    }
    let radius = 1.0 / kappa.abs();
    let dc = c[0].hypot(c[1]);
    if dc == 0.0 {
        return None;
    }
    // The perigee: the circle's point nearest the beam line.
    let per = [c[0] * (1.0 - radius / dc), c[1] * (1.0 - radius / dc)];
    // Counter-clockwise motion (κ > 0): the tangent is (P − c) turned by +90°.
    let (rx, ry) = (per[0] - c[0], per[1] - c[1]);
    let (tx, ty) = if kappa > 0.0 { (-ry, rx) } else { (ry, -rx) };
    let phi = ty.atan2(tx);
    let d0 = -per[0] * phi.sin() + per[1] * phi.cos();
    // Transverse arc lengths from the perigee, then the r–z line by least squares.
    let s: [f64; 3] = std::array::from_fn(|i| {
        let chord = (p[i][0] - per[0]).hypot(p[i][1] - per[1]);
        2.0 * radius * (chord / (2.0 * radius)).min(1.0).asin()
    });
    if !(s[0] < s[1] && s[1] < s[2]) {
        return None;
    }
    let ms = (s[0] + s[1] + s[2]) / 3.0;
    let mz = (p[0][2] + p[1][2] + p[2][2]) / 3.0;
    let (mut sxz, mut sxx) = (0.0, 0.0);
    for i in 0..3 {
        sxz += (s[i] - ms) * (p[i][2] - mz);
        sxx += (s[i] - ms) * (s[i] - ms);
    }
    let cot = sxz / sxx;
    let z0 = mz - ms * cot;
    let theta = PI / 2.0 - cot.atan();
    // A positive charge turns clockwise when bz > 0: q = −sign(κ)·sign(B).
    let q = -kappa.signum() * bz.signum();
    let pt = bz.abs() * radius;
    let mut v = BoundVector::zeros();
    v[LOC0] = d0;
    v[LOC1] = z0;
    v[PHI] = phi;
    v[THETA] = theta;
    v[QOVERP] = q * theta.sin() / pt;
    Some(v)
}

/// A seed at the beam line: `params` (d0, z0, φ, θ, q/p) with the diagonal prior of
/// [`SEED_SIGMA`].
pub fn seed_state(params: &BoundVector) -> BoundState {
    let mut var = BoundVector::zeros();
    for (i, s) in SEED_SIGMA.iter().enumerate() {
        var[i] = if i == QOVERP { (s * params[i]).powi(2) } else { s * s };
    }
    BoundState { surface: ReferenceSurface::BeamLine, params: *params, cov: BoundMatrix::from_diagonal(&var) }
}

/// Orders a candidate's hits along the particle's path: by distance from the origin (tracks
/// from the collision region that do not curl back; ties by module).
pub fn order_along_path(hits: &mut [CandidateHit]) {
    let d2 = |h: &CandidateHit| h.global.iter().map(|v| v * v).sum::<f64>();
    hits.sort_by(|a, b| d2(a).total_cmp(&d2(b)).then(a.module.cmp(&b.module)));
}

/// The seed parameters of a candidate's hits (in path order) in `fitter`'s field: the circle
/// and r–z line ([`seed_parameters`]) through its first and last hits and the hit between
/// farthest from both (the widest lever arm: neighbours are often a pair on overlapping modules
/// a few µm apart), or through its first three when those give none (a track curling back).
/// `None` for fewer than 3 hits or when neither gives a seed.
pub fn candidate_seed(fitter: &KalmanFitter<'_>, hits: &[CandidateHit]) -> Option<BoundVector> {
    let n = hits.len();
    if n < 3 {
        return None;
    }
    let dist = |a: usize, b: usize| {
        let (p, q) = (hits[a].global, hits[b].global);
        (0..3).map(|k| (p[k] - q[k]).powi(2)).sum::<f64>()
    };
    let middle =
        (1..n - 1).max_by(|&a, &b| dist(a, 0).min(dist(a, n - 1)).total_cmp(&dist(b, 0).min(dist(b, n - 1))))?;
    [[0, middle, n - 1], [0, 1, 2]].into_iter().find_map(|idx| {
        let points = idx.map(|i| hits[i].global);
        seed_parameters(points, fitter.context.field.bz(points[1][2]))
    })
}

/// Fits a candidate's `hits`, given in the order the particle crossed them, with `fitter`
/// from a seed estimated from its hits ([`candidate_seed`], with the prior [`SEED_SIGMA`]),
/// then once more from the first fit's perigee with the same prior (the transport is linearised
/// around the seed: a second pass from a better one fits hits that a rough seed misses).
///
/// # Errors
/// [`Error::Fit`] for fewer than 3 hits, hits that give no seed (collinear, or not going
/// outwards) and the failures of [`KalmanFitter::fit`].
pub fn fit_candidate(fitter: &KalmanFitter<'_>, hits: &[CandidateHit]) -> Result<FitResult> {
    if hits.len() < 3 {
        return Err(Error::Fit(format!("a fit needs at least 3 hits, got {}", hits.len())));
    }
    let params = candidate_seed(fitter, hits)
        .ok_or_else(|| Error::Fit(format!("no seed from the {} hits of the candidate", hits.len())))?;
    let measurements: Vec<Measurement> =
        hits.iter().map(|h| Measurement { module: h.module, local: h.local }).collect();
    let first = fitter.fit(&seed_state(&params), &measurements)?;
    match fitter.fit(&seed_state(&first.perigee.params), &measurements) {
        Ok(second) if second.chi2 <= first.chi2 => Ok(second),
        _ => Ok(first),
    }
}

/// One fitted track: its id in the submission, perigee parameters with errors, and χ².
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FittedTrack {
    /// The track's id in the event's submission.
    pub track_id: u32,
    /// The fitted perigee (q/pT, φ, cot θ, η, d0, z0) with its covariance.
    pub perigee: Perigee,
    /// The fit's χ².
    pub chi2: f64,
    /// Its degrees of freedom.
    pub ndf: usize,
    /// Hits dropped from the track as outliers before this fit ([`super::outliers`]).
    pub outliers: usize,
}

impl FittedTrack {
    /// The track's values in the order of [`crate::submission::PARAMETERS_COLUMNS`]: its id,
    /// q/pT, φ, η, d0, z0, their errors σ, χ² and ndf (the id and ndf as whole numbers).
    pub fn row(&self) -> [f64; 13] {
        use super::perigee::{D0, PERIGEE_PHI, Q_OVER_PT, Z0};
        let (p, s) = (&self.perigee, self.perigee.sigmas());
        [
            self.track_id as f64,
            p.q_over_pt,
            p.phi,
            p.eta,
            p.d0,
            p.z0,
            s[Q_OVER_PT],
            s[PERIGEE_PHI],
            p.sigma_eta,
            s[D0],
            s[Z0],
            self.chi2,
            self.ndf as f64,
        ]
    }

    /// Track `track_id`'s fit; `None` if a value or an error of its perigee is not finite.
    pub fn of(track_id: u32, fit: &FitResult) -> Option<FittedTrack> {
        let perigee = fit.perigee_parameters();
        let finite = perigee.values().iter().chain(perigee.sigmas().iter()).all(|v| v.is_finite())
            && perigee.eta.is_finite()
            && perigee.sigma_eta.is_finite()
            && fit.chi2.is_finite();
        finite.then_some(FittedTrack { track_id, perigee, chi2: fit.chi2, ndf: fit.ndf, outliers: 0 })
    }

    /// χ²/ndf.
    pub fn chi2_per_ndf(&self) -> f64 {
        self.chi2 / self.ndf.max(1) as f64
    }
}

/// The fits of an event's tracks ([`fit_event_tracks`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EventFits {
    /// The tracks whose fit succeeded, by track id.
    pub tracks: Vec<FittedTrack>,
    /// The hits dropped from their tracks as outliers (indices into the event's hits), in
    /// increasing order.
    pub outlier_hits: Vec<usize>,
}

/// Fits every track of an event: `hits` are the event's hits, `hit_tracks` each one's track id
/// ([`NO_TRACK`]: none). Each track's hits are ordered along the path ([`order_along_path`])
/// and fitted ([`fit_candidate`]), dropping outliers by `removal` when given
/// ([`fit_without_outliers`]); the tracks whose fit fails are left out.
///
/// # Panics
/// If `hits` and `hit_tracks` differ in length.
#[track_caller]
pub fn fit_event_tracks(
    fitter: &KalmanFitter<'_>,
    hits: &[CandidateHit],
    hit_tracks: &[u32],
    removal: Option<&OutlierRemoval>,
) -> EventFits {
    assert_eq!(hits.len(), hit_tracks.len(), "one track id per hit");
    let mut by_track: Vec<(u32, usize)> =
        hit_tracks.iter().enumerate().filter(|(_, t)| **t != NO_TRACK).map(|(i, &t)| (t, i)).collect();
    by_track.sort_by_key(|&(t, _)| t);
    let groups: Vec<&[(u32, usize)]> = by_track.chunk_by(|a, b| a.0 == b.0).collect();
    // Tracks are fitted independently, in parallel; collected in track order, so the result
    // does not depend on the thread count.
    let fitted: Vec<(FittedTrack, Vec<usize>)> = groups
        .par_iter()
        .filter_map(|group| {
            let mut track: Vec<usize> = group.iter().map(|&(_, i)| i).collect();
            // In path order, as `order_along_path` puts them (ties by module, then by hit).
            let d2 = |i: usize| hits[i].global.iter().map(|v| v * v).sum::<f64>();
            track.sort_by(|&a, &b| d2(a).total_cmp(&d2(b)).then(hits[a].module.cmp(&hits[b].module)).then(a.cmp(&b)));
            let track_hits: Vec<CandidateHit> = track.iter().map(|&i| hits[i]).collect();
            let clean = match removal {
                Some(r) => fit_without_outliers(fitter, &track_hits, r).ok(),
                None => fit_candidate(fitter, &track_hits).ok().map(|fit| CleanFit { fit, removed: Vec::new() }),
            }?;
            let mut f = FittedTrack::of(group[0].0, &clean.fit)?;
            f.outliers = clean.removed.len();
            Some((f, clean.removed.iter().map(|&k| track[k]).collect()))
        })
        .collect();
    let mut out = EventFits::default();
    for (f, outliers) in fitted {
        out.tracks.push(f);
        out.outlier_hits.extend(outliers);
    }
    out.outlier_hits.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use trackgnn_simulate::{ChargedSpecies, Generator, SimConfig, SingleParticles};
    use trackgnn_trackml::Detector;
    use trackgnn_trackml::ids::ParticleId;

    use super::*;
    use crate::ckf::HitStore;
    use crate::kalman::{FitContext, MeasurementModel};

    /// The median of `v`.
    fn median(mut v: Vec<f64>) -> f64 {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }

    #[test]
    fn true_candidates_fit_their_pt_and_mixed_ones_have_a_large_chi2() {
        let single = SingleParticles::new(ChargedSpecies::Muon, 10, [1.0, 10.0], [-2.0, 2.0]);
        let g = Generator::new(
            Detector::trackml(),
            SimConfig { single: Some(single), noise_fraction: 0.0, ..SimConfig::default() },
        );
        let ctx = FitContext::new(g.detector(), g.field(), g.config().material(), PION_MASS);
        let fitter = KalmanFitter::new(ctx, MeasurementModel::default());
        let (mut true_chi2, mut mixed_chi2, mut pt_residuals) = (Vec::new(), Vec::new(), Vec::new());
        let mut mixed_failed = 0;
        for id in 1..=3 {
            let (event, _) = g.event(40, id);
            let store = HitStore::new(g.detector(), &event).unwrap();
            let truth = event.truth.as_ref().unwrap();
            let particles = event.particles.as_ref().unwrap();
            let mut by: HashMap<ParticleId, Vec<CandidateHit>> = HashMap::new();
            for (i, p) in truth.particle_id.iter().enumerate() {
                by.entry(*p).or_default().push(store.candidate_hit(i as u32));
            }
            let mut tracks: Vec<(usize, Vec<CandidateHit>)> = Vec::new();
            for k in 0..particles.particle_id.len() {
                let Some(hits) = by.get(&particles.particle_id[k]).filter(|h| h.len() >= 8) else { continue };
                let mut hits = hits.clone();
                order_along_path(&mut hits);
                let fit = fit_candidate(&fitter, &hits).unwrap();
                let pt = f64::from(particles.px[k]).hypot(f64::from(particles.py[k]));
                let per = fit.perigee_parameters();
                assert_eq!(per.q_over_pt.signum(), f64::from(particles.q[k]).signum(), "charge");
                pt_residuals.push(per.pt() / pt - 1.0);
                true_chi2.push(fit.chi2_per_ndf());
                tracks.push((k, hits));
            }
            // The inner half of one particle's hits with the outer half of the next one's.
            for pair in tracks.windows(2) {
                let (a, b) = (&pair[0].1, &pair[1].1);
                let mut mixed: Vec<CandidateHit> = a[..a.len() / 2].to_vec();
                mixed.extend_from_slice(&b[b.len() / 2..]);
                order_along_path(&mut mixed);
                match fit_candidate(&fitter, &mixed) {
                    Ok(fit) => mixed_chi2.push(fit.chi2_per_ndf()),
                    Err(_) => mixed_failed += 1,
                }
            }
        }
        assert!(pt_residuals.len() >= 20, "{} true candidates", pt_residuals.len());
        let worst = pt_residuals.iter().fold(0.0f64, |m, r| m.max(r.abs()));
        let mean_abs = pt_residuals.iter().map(|r| r.abs()).sum::<f64>() / pt_residuals.len() as f64;
        assert!(worst < 0.1, "the worst fitted pT is {:.1}% off", 100.0 * worst);
        assert!(mean_abs < 0.03, "fitted pT {:.2}% off on average", 100.0 * mean_abs);
        let (t, m) = (median(true_chi2.clone()), median(mixed_chi2.clone()));
        eprintln!(
            "{} true candidates: |pT fit/truth − 1| mean {:.4}, max {worst:.4}; χ²/ndf median {t:.2}; \
             {} mixed: χ²/ndf median {m:.1}, {mixed_failed} fits failed",
            pt_residuals.len(),
            mean_abs,
            mixed_chi2.len()
        );
        assert!(t < 2.0, "true candidates' median χ²/ndf {t}");
        assert!(m > 20.0 * t, "mixed candidates' median χ²/ndf {m} vs true {t}");
        // Every mixed candidate is worse than the typical true one.
        assert!(mixed_chi2.iter().all(|&c| c > 3.0 * t), "mixed χ²/ndf {mixed_chi2:?}");
    }

    #[test]
    fn an_events_fits_are_the_same_at_any_thread_count() {
        let single = SingleParticles::new(ChargedSpecies::Muon, 40, [1.0, 10.0], [-2.0, 2.0]);
        let g = Generator::new(
            Detector::trackml(),
            SimConfig { single: Some(single), noise_fraction: 0.0, ..SimConfig::default() },
        );
        let ctx = FitContext::new(g.detector(), g.field(), g.config().material(), PION_MASS);
        let fitter = KalmanFitter::new(ctx, MeasurementModel::default());
        let (event, _) = g.event(30, 7);
        let store = HitStore::new(g.detector(), &event).unwrap();
        // One track per particle (its id in particle order), in hit order.
        let truth = event.truth.as_ref().unwrap();
        let mut ids: HashMap<ParticleId, u32> = HashMap::new();
        let hit_tracks: Vec<u32> = truth
            .particle_id
            .iter()
            .map(|p| {
                let next = ids.len() as u32 + 1;
                *ids.entry(*p).or_insert(next)
            })
            .collect();
        let hits = store.candidate_hits();
        let fits = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| fit_event_tracks(&fitter, &hits, &hit_tracks, Some(&OutlierRemoval::default())))
        };
        let one = fits(1);
        assert!(one.tracks.len() >= 30, "{} of {} tracks fitted", one.tracks.len(), ids.len());
        assert!(one.tracks.windows(2).all(|w| w[0].track_id < w[1].track_id), "tracks in id order");
        assert_eq!(fits(3), one);
    }
}
