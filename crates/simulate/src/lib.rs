//! Monte Carlo generator of TrackML-format events, trackgnn's default data source.
//!
//! A [`Generator`] holds a [`Detector`](trackgnn_trackml::Detector), the solenoid field and a
//! [`SimConfig`]; [`Generator::event`] makes one [`Event`](trackgnn_trackml::Event):
//!
//! 1. [`primaries`]: a hard scatter plus Poisson(μ) minimum-bias interactions in the beam spot,
//!    with NBD multiplicities, a dN/dη plateau and Tsallis pT spectra ([`spectra`]); π, K, p, e, μ
//!    of both charges, and π0, K0_S, Λ whose decays feed the secondaries ([`species`]).
//! 2. [`propagate`]: helix steps ([`helix`]) through B_z(z); the exact crossing of every module
//!    plane; per crossing a hit (1% inefficiency), digitisation ([`digitize`]) into cells, Highland
//!    scattering and nuclear interactions ([`material`]); decays and photon conversions.
//! 3. noise hits, TrackML hit [`weights`], hits sorted by module.
//!
//! With [`SimConfig::single`] ([`single`]) an event is instead N particles of one species in
//! chosen pT and η ranges, for the checks of a track fit.
//!
//! ```
//! use trackgnn_simulate::{Generator, SimConfig};
//! use trackgnn_trackml::Detector;
//! let generator = Generator::new(Detector::trackml(), SimConfig { pileup: 1.0, ..SimConfig::default() });
//! let (event, stats) = generator.event(42, 1);
//! assert_eq!(event.hits.len(), stats.signal_hits + stats.noise_hits);
//! ```
//!
//! Not for: reading real data (that is `trackgnn-trackml`) or full detector simulation: the
//! physics here is what tracking studies need (geometry, field, scattering, secondaries,
//! clusters), not calorimetry or detailed energy loss.
#![deny(missing_docs)]

pub mod config;
pub mod dataset;
pub mod digitize;
pub mod generator;
pub mod helix;
pub mod io_bench;
pub mod kinematics;
pub mod material;
pub mod overrides;
pub mod primaries;
pub mod propagate;
pub mod single;
pub mod species;
pub mod spectra;
pub mod weights;

pub use config::{ConfigError, DigiConfig, SimConfig};
pub use generator::{GenStats, Generator};
pub use overrides::{ResolveError, SimOverrides};
pub use single::{ChargedSpecies, SingleParticles};
