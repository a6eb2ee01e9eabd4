//! Truth-seeded fits of simulated particles and their pulls: the filter's correctness check.
//!
//! Each particle produced near the beam line with enough hits is fitted from a seed drawn
//! around its true perigee with the seed's own covariance (so the seed is an honest prior),
//! and every fitted perigee parameter is compared with the truth: the pull (fit − truth)/σ
//! has mean 0 and width 1 when the filter's propagation, material and hit errors are those
//! of the generator.

use trackgnn_trackml::Event;
use trackgnn_trackml::ids::ParticleId;
use trackgnn_trackml::physics::wrap_phi;
use trackgnn_trackml::rng::Rng;

use super::fitter::{BoundState, FitResult, KalmanFitter, Measurement};
use super::outliers::{CleanFit, OutlierRemoval, drop_outliers};
use super::params::{BoundMatrix, BoundVector, PHI, QOVERP, ReferenceSurface};
use super::perigee::{PERIGEE_PHI, Perigee};
use crate::error::{Error, Result};
use crate::propagation::stepper::FreeVector;
use crate::propagation::target::{Target, propagate};

/// How far from the truth seeds are drawn: σ of (d0 \[mm\], z0 \[mm\], φ, θ \[rad\]) and of q/p
/// relative to it; the seed's covariance is these σ times `inflate`, squared.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SeedSmearing {
    /// σ of d0, z0, φ, θ and (relative) q/p.
    pub sigma: [f64; 5],
    /// The seed covariance's σ over the smearing's (≥ 1: a looser prior than the draw).
    pub inflate: f64,
}

impl Default for SeedSmearing {
    /// 50 µm, 0.5 mm, 2 mrad, 2 mrad and 5% drawn, with a covariance 10 times as wide (a weak
    /// prior: the hits decide).
    fn default() -> Self {
        SeedSmearing { sigma: [0.05, 0.5, 0.002, 0.002, 0.05], inflate: 10.0 }
    }
}

/// One particle's truth-seeded fit.
#[derive(Clone, Debug, PartialEq)]
pub struct TruthFit {
    /// The particle.
    pub particle: ParticleId,
    /// Its true perigee (errors 0).
    pub truth: Perigee,
    /// The fit.
    pub fit: FitResult,
    /// Hits dropped as outliers before the fit.
    pub outliers: usize,
}

impl TruthFit {
    /// The pulls (fit − truth)/σ of q/pT, φ, cot θ, d0 and z0.
    pub fn pulls(&self) -> [f64; 5] {
        let fit = self.fit.perigee_parameters();
        let (f, t, s) = (fit.values(), self.truth.values(), fit.sigmas());
        std::array::from_fn(|i| {
            let d = if i == PERIGEE_PHI { wrap_phi(f[i] - t[i]) } else { f[i] - t[i] };
            d / s[i]
        })
    }

    /// (pT fit − pT true)/pT true.
    pub fn pt_residual(&self) -> f64 {
        self.fit.perigee_parameters().pt() / self.truth.pt() - 1.0
    }
}

/// The true perigee (d0, z0, φ, θ, q/p) of a particle of charge `q` produced at `vertex`
/// \[mm\] with momentum `momentum` \[GeV\]: its trajectory propagated, without material, to the
/// beam line.
///
/// # Errors
/// [`Error::Fit`] for a neutral or momentum-less particle, or one whose trajectory does not
/// reach the beam line.
pub fn true_perigee(fitter: &KalmanFitter<'_>, q: f64, vertex: [f64; 3], momentum: [f64; 3]) -> Result<BoundVector> {
    let p = momentum[0].hypot(momentum[1]).hypot(momentum[2]);
    if q == 0.0 || p == 0.0 || !p.is_finite() {
        return Err(Error::Fit(format!("no track: charge {q}, momentum {momentum:?}")));
    }
    let y = FreeVector::from_column_slice(&[
        vertex[0],
        vertex[1],
        vertex[2],
        momentum[0] / p,
        momentum[1] / p,
        momentum[2] / p,
        q / p,
    ]);
    let end = propagate(fitter.context.field, &y, &Target::BeamLine, 1000.0)?;
    Ok(ReferenceSurface::BeamLine.to_bound(fitter.context.det, &end.state).0)
}

/// Fits every particle of `event` produced within 1 mm of the beam line with at least
/// `min_hits` hits, each from a seed drawn around its true perigee by `smearing` with `rng`.
/// The hits are taken in the order of their distance from the vertex; with `removal`, the
/// outlier hits are dropped ([`drop_outliers`], each refit from the same seed).
///
/// # Errors
/// [`Error::MissingPart`] for an event without truth or particles; [`Error::Fit`] for a hit on
/// no module of the detector or a fit that fails.
pub fn truth_seeded_fits(
    fitter: &KalmanFitter<'_>,
    event: &Event,
    min_hits: usize,
    smearing: &SeedSmearing,
    rng: &mut Rng,
    removal: Option<&OutlierRemoval>,
) -> Result<Vec<TruthFit>> {
    let det = fitter.context.det;
    let missing = |part| Error::MissingPart { event_id: event.event_id, part };
    let truth = event.truth.as_ref().ok_or_else(|| missing("truth"))?;
    let particles = event.particles.as_ref().ok_or_else(|| missing("particles"))?;
    let mut by_particle: std::collections::HashMap<ParticleId, Vec<usize>> = std::collections::HashMap::new();
    for (i, pid) in truth.particle_id.iter().enumerate() {
        by_particle.entry(*pid).or_default().push(i);
    }
    let mut out = Vec::new();
    for k in 0..particles.particle_id.len() {
        let pid = particles.particle_id[k];
        let Some(hits) = by_particle.get(&pid) else { continue };
        if hits.len() < min_hits.max(3) || particles.vertex_r(k) > 1.0 || particles.q[k] == 0 {
            continue;
        }
        let vertex = [f64::from(particles.vx[k]), f64::from(particles.vy[k]), f64::from(particles.vz[k])];
        let momentum = [f64::from(particles.px[k]), f64::from(particles.py[k]), f64::from(particles.pz[k])];
        let h = &event.hits;
        let pos = |i: usize| [f64::from(h.x[i]), f64::from(h.y[i]), f64::from(h.z[i])];
        let dist = |i: usize| {
            let p = pos(i);
            (p[0] - vertex[0]).hypot(p[1] - vertex[1]).hypot(p[2] - vertex[2])
        };
        let mut order = hits.clone();
        order.sort_by(|&a, &b| dist(a).total_cmp(&dist(b)));
        let measurements = order
            .iter()
            .map(|&i| {
                let m = det.module_index(h.module[i]).ok_or_else(|| {
                    Error::Fit(format!(
                        "event {}: hit {}: module {} is not in the detector",
                        event.event_id, h.hit_id[i], h.module[i]
                    ))
                })?;
                let local = det.modules[m].to_local(pos(i));
                Ok(Measurement { module: m, local: [local[0], local[1]] })
            })
            .collect::<Result<Vec<_>>>()?;
        let true_params = true_perigee(fitter, f64::from(particles.q[k]), vertex, momentum)?;
        let mut seed = true_params;
        let mut var = BoundVector::zeros();
        for i in 0..5 {
            let sigma = if i == QOVERP { smearing.sigma[i] * true_params[i].abs() } else { smearing.sigma[i] };
            seed[i] += rng.gauss(0.0, sigma);
            var[i] = (sigma * smearing.inflate).powi(2);
        }
        seed[PHI] = wrap_phi(seed[PHI]);
        let seed =
            BoundState { surface: ReferenceSurface::BeamLine, params: seed, cov: BoundMatrix::from_diagonal(&var) };
        let clean = match removal {
            Some(r) => drop_outliers(fitter, measurements.len(), r, |kept| {
                let subset: Vec<Measurement> = kept.iter().map(|&i| measurements[i]).collect();
                fitter.fit(&seed, &subset)
            })?,
            None => CleanFit { fit: fitter.fit(&seed, &measurements)?, removed: Vec::new() },
        };
        let truth = Perigee::from_bound(&true_params, &BoundMatrix::zeros());
        out.push(TruthFit { particle: pid, truth, fit: clean.fit, outliers: clean.removed.len() });
    }
    Ok(out)
}

/// The mean and standard deviation of each pull over fits (q/pT, φ, cot θ, d0, z0).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PullSummary {
    /// The fits summarised.
    pub fits: usize,
    /// Mean of each pull.
    pub mean: [f64; 5],
    /// Standard deviation of each pull.
    pub std: [f64; 5],
}

impl PullSummary {
    /// The summary of `fits`' pulls (NaN for none).
    pub fn of(fits: &[TruthFit]) -> PullSummary {
        let n = fits.len() as f64;
        let pulls: Vec<[f64; 5]> = fits.iter().map(TruthFit::pulls).collect();
        let mean: [f64; 5] = std::array::from_fn(|i| pulls.iter().map(|p| p[i]).sum::<f64>() / n);
        let std =
            std::array::from_fn(|i| (pulls.iter().map(|p| (p[i] - mean[i]).powi(2)).sum::<f64>() / (n - 1.0)).sqrt());
        PullSummary { fits: fits.len(), mean, std }
    }
}
