//! The single-particle mode: events of N particles of one species in chosen pT and η ranges
//! and nothing else (no hard scatter, no pile-up), for the checks of a track fit.

use std::f64::consts::PI;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use trackgnn_trackml::rng::Rng;

use crate::config::ConfigError;
use crate::kinematics::{direction_from_eta_phi, scale};
use crate::primaries::Produced;
use crate::species::Species;

/// A charged species the single-particle mode can shoot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChargedSpecies {
    /// π±.
    Pion,
    /// K±.
    Kaon,
    /// p, p̄.
    Proton,
    /// e±.
    Electron,
    /// μ±.
    Muon,
}

impl ChargedSpecies {
    /// Every species, in the order of their names.
    pub const ALL: [ChargedSpecies; 5] = [
        ChargedSpecies::Pion,
        ChargedSpecies::Kaon,
        ChargedSpecies::Proton,
        ChargedSpecies::Electron,
        ChargedSpecies::Muon,
    ];

    /// The species.
    pub fn species(self) -> Species {
        match self {
            ChargedSpecies::Pion => Species::Pion,
            ChargedSpecies::Kaon => Species::Kaon,
            ChargedSpecies::Proton => Species::Proton,
            ChargedSpecies::Electron => Species::Electron,
            ChargedSpecies::Muon => Species::Muon,
        }
    }

    /// Its name in configurations and on command lines (`pion`, `muon`, …).
    pub fn name(self) -> &'static str {
        match self {
            ChargedSpecies::Pion => "pion",
            ChargedSpecies::Kaon => "kaon",
            ChargedSpecies::Proton => "proton",
            ChargedSpecies::Electron => "electron",
            ChargedSpecies::Muon => "muon",
        }
    }
}

impl FromStr for ChargedSpecies {
    type Err = String;

    /// A species from its [`name`](ChargedSpecies::name).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ChargedSpecies::ALL.into_iter().find(|c| c.name() == s).ok_or_else(|| {
            let names: Vec<&str> = ChargedSpecies::ALL.iter().map(|c| c.name()).collect();
            format!("unknown species `{s}` (one of {})", names.join(", "))
        })
    }
}

/// The single-particle mode's settings ([`SimConfig::single`](crate::SimConfig::single)):
/// `count` particles of `species` per event, each from its own vertex drawn in the beam spot,
/// with pT uniform in `pt` \[GeV\], η uniform in `eta`, φ uniform and charge `charge` (0: + or −
/// at random).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SingleParticles {
    /// The species.
    pub species: ChargedSpecies,
    /// Particles per event, 1 to 100,000.
    pub count: usize,
    /// pT range \[GeV\]: [low, high], 0 < low ≤ high (equal: one pT).
    pub pt: [f64; 2],
    /// η range: [low, high], −6 ≤ low ≤ high ≤ 6.
    pub eta: [f64; 2],
    /// Charge: +1, −1, or 0 for either at random.
    #[serde(default)]
    pub charge: i8,
}

impl SingleParticles {
    /// `count` particles of `species` with pT in `pt` and η in `eta`, either charge.
    pub fn new(species: ChargedSpecies, count: usize, pt: [f64; 2], eta: [f64; 2]) -> Self {
        SingleParticles { species, count, pt, eta, charge: 0 }
    }

    /// Checks the ranges.
    ///
    /// # Errors
    /// [`ConfigError::OutOfRange`] naming the setting.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad =
            |key: &'static str, value: f64, allowed: &'static str| Err(ConfigError::OutOfRange { key, value, allowed });
        if !(1..=100_000).contains(&self.count) {
            return bad("single.count", self.count as f64, "1 to 100000");
        }
        let [lo, hi] = self.pt;
        if !(lo > 0.0 && lo.is_finite() && hi.is_finite()) {
            return bad("single.pt", lo, "finite, > 0");
        }
        if hi < lo {
            return bad("single.pt", hi, "high at least low");
        }
        for v in self.eta {
            if !(v.is_finite() && v.abs() <= 6.0) {
                return bad("single.eta", v, "-6 to 6");
            }
        }
        if self.eta[1] < self.eta[0] {
            return bad("single.eta", self.eta[1], "high at least low");
        }
        if !(-1..=1).contains(&self.charge) {
            return bad("single.charge", f64::from(self.charge), "-1, 0 or 1");
        }
        Ok(())
    }

    /// The particles of one event, drawn from `rng`; each gets its own vertex in the beam spot
    /// (`sigma_xy`, `sigma_z` \[mm\]).
    pub fn produce(&self, rng: &mut Rng, sigma_xy: f64, sigma_z: f64) -> Vec<Produced> {
        (0..self.count)
            .map(|_| {
                let vertex = [rng.gauss(0.0, sigma_xy), rng.gauss(0.0, sigma_xy), rng.gauss(0.0, sigma_z)];
                let pt = if self.pt[0] == self.pt[1] { self.pt[0] } else { rng.range(self.pt[0], self.pt[1]) };
                let eta = if self.eta[0] == self.eta[1] { self.eta[0] } else { rng.range(self.eta[0], self.eta[1]) };
                let phi = rng.range(-PI, PI);
                let dir = direction_from_eta_phi(eta, phi);
                let p = pt / (1.0 - dir[2] * dir[2]).sqrt();
                let q = match self.charge {
                    0 => {
                        if rng.bernoulli(0.5) {
                            1
                        } else {
                            -1
                        }
                    }
                    c => c,
                };
                Produced { species: self.species.species(), q, vertex, momentum: scale(dir, p) }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn particles_come_in_their_ranges() {
        let s = SingleParticles::new(ChargedSpecies::Muon, 500, [2.0, 5.0], [-1.0, 0.5]);
        assert_eq!(s.validate(), Ok(()));
        let ps = s.produce(&mut Rng::new(3), 0.015, 55.0);
        assert_eq!(ps.len(), 500);
        for p in &ps {
            let pt = p.momentum[0].hypot(p.momentum[1]);
            let eta = trackgnn_trackml::physics::eta_of(p.momentum[0], p.momentum[1], p.momentum[2]);
            assert!((2.0..=5.0).contains(&pt) && (-1.0 - 1e-9..=0.5 + 1e-9).contains(&eta), "{pt} {eta}");
            assert_eq!(p.species, Species::Muon);
        }
        let positive = ps.iter().filter(|p| p.q > 0).count();
        assert!((200..300).contains(&positive), "{positive}");
        let fixed = SingleParticles { charge: -1, pt: [10.0, 10.0], ..s };
        assert!(fixed.produce(&mut Rng::new(4), 0.015, 55.0).iter().all(|p| p.q == -1));
    }

    #[test]
    fn bad_settings_are_named_and_species_parse() {
        let s = SingleParticles::new(ChargedSpecies::Pion, 10, [1.0, 2.0], [0.0, 1.0]);
        for (bad, key) in [
            (SingleParticles { count: 0, ..s }, "single.count"),
            (SingleParticles { pt: [0.0, 1.0], ..s }, "single.pt"),
            (SingleParticles { pt: [3.0, 1.0], ..s }, "single.pt"),
            (SingleParticles { eta: [-7.0, 1.0], ..s }, "single.eta"),
            (SingleParticles { eta: [1.0, f64::NAN], ..s }, "single.eta"),
            (SingleParticles { charge: 2, ..s }, "single.charge"),
        ] {
            let err = bad.validate().unwrap_err().to_string();
            assert!(err.contains(key), "{err}");
        }
        assert_eq!("electron".parse::<ChargedSpecies>(), Ok(ChargedSpecies::Electron));
        assert!("gluon".parse::<ChargedSpecies>().unwrap_err().contains("pion, kaon"));
    }

    #[test]
    fn ranges_parse_from_two_values_or_one() {
        assert_eq!("1,10".parse(), Ok(Range([1.0, 10.0])));
        assert_eq!(" -2.5, 2.5".parse(), Ok(Range([-2.5, 2.5])));
        assert_eq!("3".parse(), Ok(Range([3.0, 3.0])));
        for bad in ["a,b", "1,2,3", "", "1,"] {
            assert_eq!(bad.parse::<Range>(), Err("expected LOW,HIGH or one number".to_string()), "{bad}");
        }
    }

    #[test]
    fn a_single_particle_event_holds_those_particles_alone() {
        use crate::{Generator, SimConfig};
        let single = SingleParticles::new(ChargedSpecies::Muon, 5, [10.0, 10.0], [0.0, 0.0]);
        let cfg = SimConfig { single: Some(single), noise_fraction: 0.0, ..SimConfig::default() };
        let g = Generator::new(trackgnn_trackml::Detector::trackml(), cfg);
        let (event, stats) = g.event(1, 1);
        assert_eq!((stats.interactions, stats.primaries, stats.noise_hits), (0, 5, 0));
        // Central 10 GeV muons make no secondaries and cross the ten barrel layers.
        let p = event.particles.unwrap();
        assert_eq!(p.particle_id.len(), 5);
        assert!(p.particle_type.unwrap().iter().all(|&t| t.abs() == 13));
        assert!(p.nhits.iter().all(|&n| n >= 9), "{:?}", p.nhits);
    }
}

/// A `LOW,HIGH` range of a command line, or one value for both.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range(pub [f64; 2]);

impl FromStr for Range {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || "expected LOW,HIGH or one number".to_string();
        let values: Vec<f64> =
            text.split(',').map(|v| v.trim().parse::<f64>()).collect::<Result<_, _>>().map_err(|_| bad())?;
        match values[..] {
            [v] => Ok(Range([v, v])),
            [lo, hi] => Ok(Range([lo, hi])),
            _ => Err(bad()),
        }
    }
}

/// The single-particle mode's command-line flags (`trackgnn simulate --single …`).
#[cfg(feature = "clap")]
#[derive(Debug, clap::Args)]
pub struct SingleArgs {
    /// Single-particle mode: every event is `--single-count` particles of this species alone
    /// (pion, kaon, proton, electron, muon), no hard scatter, no pile-up.
    #[arg(long, value_name = "SPECIES")]
    pub single: Option<ChargedSpecies>,
    /// Particles per event in the single-particle mode.
    #[arg(long, default_value_t = 1, requires = "single")]
    pub single_count: usize,
    /// pT range of the single particles in GeV, LOW,HIGH (uniform), or one value.
    #[arg(long, value_name = "LOW,HIGH", default_value = "1,10", allow_hyphen_values = true, requires = "single")]
    pub single_pt: Range,
    /// η range of the single particles, LOW,HIGH (uniform), or one value.
    #[arg(long, value_name = "LOW,HIGH", default_value = "-2.5,2.5", allow_hyphen_values = true, requires = "single")]
    pub single_eta: Range,
    /// Charge of the single particles: 1, -1, or 0 for either at random.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true, requires = "single")]
    pub single_charge: i8,
}

#[cfg(feature = "clap")]
impl SingleArgs {
    /// The mode's settings, if `--single` is given (checked when the configuration resolves).
    pub fn settings(&self) -> Option<SingleParticles> {
        self.single.map(|species| SingleParticles {
            species,
            count: self.single_count,
            pt: self.single_pt.0,
            eta: self.single_eta.0,
            charge: self.single_charge,
        })
    }
}
