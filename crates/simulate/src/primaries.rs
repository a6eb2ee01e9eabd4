//! Primary particles: a hard scatter plus Poisson(μ) minimum-bias interactions in the beam spot.

use std::f64::consts::PI;

use trackgnn_trackml::rng::Rng;

use crate::config::SimConfig;
use crate::kinematics::{V3, direction_from_eta_phi, scale};
use crate::species::Species;
use crate::spectra::{EtaShape, TsallisPt, negative_binomial};

/// A particle as produced: species, charge, vertex and momentum.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Produced {
    /// Species.
    pub species: Species,
    /// Charge \[e\] (for neutral baryons: +1 particle, −1 antiparticle).
    pub q: i8,
    /// Production vertex \[mm\].
    pub vertex: V3,
    /// Momentum \[GeV\].
    pub momentum: V3,
}

/// The species produced at a vertex, in the order of `SimConfig::charged_fractions`, then the
/// neutral ones.
const CHARGED: [Species; 5] = [Species::Pion, Species::Kaon, Species::Proton, Species::Electron, Species::Muon];
const NEUTRAL: [Species; 3] = [Species::Pion0, Species::KShort, Species::Lambda];

/// Samplers for the kinematics of one kind of interaction.
#[derive(Clone, Debug)]
struct InteractionKind {
    pt: Vec<TsallisPt>, // CHARGED then NEUTRAL
    multiplicity: f64,
}

/// Produces the primary particles of events.
#[derive(Clone, Debug)]
pub struct PrimaryGenerator {
    cfg: SimConfig,
    eta: EtaShape,
    minbias: InteractionKind,
    hard: InteractionKind,
}

impl PrimaryGenerator {
    /// Builds the samplers for `cfg`.
    pub fn new(cfg: &SimConfig) -> Self {
        let eta = EtaShape { plateau: cfg.eta_plateau, falloff: cfg.eta_falloff, eta_max: cfg.eta_max };
        let kind = |t: f64, n: f64, mult: f64| InteractionKind {
            pt: CHARGED.iter().chain(NEUTRAL.iter()).map(|s| TsallisPt::new(t, n, s.mass(), cfg.pt_min)).collect(),
            multiplicity: mult,
        };
        let mean_charged = cfg.dndeta0 * eta.integral();
        PrimaryGenerator {
            cfg: cfg.clone(),
            eta,
            minbias: kind(cfg.tsallis_t, cfg.tsallis_n, mean_charged),
            hard: kind(cfg.hard_tsallis_t, cfg.hard_tsallis_n, mean_charged * cfg.hard_multiplicity_factor),
        }
    }

    /// Mean number of charged primaries of one minimum-bias interaction with |η| < eta_max.
    pub fn mean_charged_per_interaction(&self) -> f64 {
        self.minbias.multiplicity
    }

    /// All primaries of one event; returns them and the number of interactions (0 in the
    /// single-particle mode, whose particles come from no interaction).
    pub fn event(&self, rng: &mut Rng) -> (Vec<Produced>, usize) {
        if let Some(single) = &self.cfg.single {
            return (single.produce(rng, self.cfg.beam_sigma_xy, self.cfg.beam_sigma_z), 0);
        }
        let mut out = Vec::new();
        let n_pu = rng.poisson(self.cfg.pileup) as usize;
        let mut n = 0;
        if self.cfg.hard_scatter {
            self.interaction(rng, &self.hard, &mut out);
            n += 1;
        }
        for _ in 0..n_pu {
            self.interaction(rng, &self.minbias, &mut out);
            n += 1;
        }
        (out, n)
    }

    fn interaction(&self, rng: &mut Rng, kind: &InteractionKind, out: &mut Vec<Produced>) {
        let c = &self.cfg;
        let vertex = [rng.gauss(0.0, c.beam_sigma_xy), rng.gauss(0.0, c.beam_sigma_xy), rng.gauss(0.0, c.beam_sigma_z)];
        let n_charged = negative_binomial(rng, kind.multiplicity, c.nbd_k);
        let mut counts = [0u64; 5];
        for _ in 0..n_charged {
            counts[rng.weighted_index(&c.charged_fractions)] += 1;
        }
        let neutral_counts = [
            rng.poisson(c.pi0_per_pion * counts[0] as f64),
            rng.poisson(c.kshort_per_kaon * counts[1] as f64),
            rng.poisson(c.lambda_per_proton * counts[2] as f64),
        ];
        let all = CHARGED.iter().zip(counts).chain(NEUTRAL.iter().zip(neutral_counts));
        for (k, (&species, count)) in all.enumerate() {
            for _ in 0..count {
                let pt = kind.pt[k].sample(rng);
                let eta = self.eta.sample(rng);
                let phi = rng.range(-PI, PI);
                let dir = direction_from_eta_phi(eta, phi);
                let p = pt / (1.0 - dir[2] * dir[2]).sqrt();
                let q = if rng.bernoulli(0.5) { 1 } else { -1 };
                out.push(Produced { species, q, vertex, momentum: scale(dir, p) });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pileup_200_gives_the_expected_primary_count() {
        let cfg = SimConfig { pileup: 200.0, ..SimConfig::default() };
        let g = PrimaryGenerator::new(&cfg);
        let mut rng = Rng::new(1);
        let (ps, n) = g.event(&mut rng);
        assert!((170..=230).contains(&n), "{n} interactions");
        let charged = ps.iter().filter(|p| p.species.is_charged()).count() as f64;
        let expect = g.mean_charged_per_interaction() * (n as f64 - 1.0 + cfg.hard_multiplicity_factor);
        assert!((charged / expect - 1.0).abs() < 0.15, "{charged} vs {expect}");
        let sz = (ps.iter().map(|p| p.vertex[2].powi(2)).sum::<f64>() / ps.len() as f64).sqrt();
        assert!(sz > 35.0 && sz < 80.0, "vertex z spread {sz}");
    }
}
