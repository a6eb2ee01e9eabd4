//! Classical track finding with no GNN, as ACTS does it: triplet seeding on the pixel
//! layers, a combinatorial Kalman filter (CKF) that follows each seed layer by layer through
//! the detector and branches on every compatible hit, and greedy ambiguity resolution. It
//! builds the tracks that the GNN chain's are set against (issue 40),
//! beside the edge-based track builders of [`crate::tracks`].
//!
//! - [`seeding`]: [`find_seeds`] — triplets of pixel hits (bottom, middle, top) with ACTS's
//!   cuts on Δr, cot θ, the collision region, the circle's minimum pT and the transverse
//!   impact parameter; each [`Seed`] carries its perigee parameters from the circle and the
//!   r–z line ([`seed_parameters`]).
//! - [`navigation`]: the next layer ahead of a state and the modules of it the track may
//!   cross, from the detector's layers and their lookup grids ([`Navigator`]).
//! - [`finder`]: the CKF itself ([`TrackFinder`]) on the Kalman filter of [`crate::kalman`]:
//!   transport with Jacobians, each module's multiple scattering (holes included), the
//!   calibrated hit errors, the χ² gate and the branching.
//! - [`ambiguity`]: greedy resolution of tracks that share hits ([`resolve`]).
//! - [`Ckf`]: all of it for one event ([`Ckf::event`]) or a directory of events, with
//!   submissions, metrics and seconds per stage ([`Ckf::reconstruct_events`], [`CkfReport`]).
//!
//! ```
//! use trackgnn_reco::ckf::{Ckf, CkfConfig};
//! use trackgnn_trackml::{Detector, Event};
//!
//! let ckf = Ckf::new(Detector::trackml(), CkfConfig::default())?;
//! let event = Event::default(); // read one with trackgnn_trackml::csv::read_event
//! let found = ckf.event(&event)?;
//! println!("{} tracks from {} seeds in {:.3} s", found.tracks.len(), found.seeds, found.seconds.total());
//! # Ok::<(), trackgnn_reco::Error>(())
//! ```
//!
//! Units: mm, GeV, e, rad; the field in GeV/(e·mm). Not for: tracks from a scored graph
//! ([`crate::tracks`]), the fit of given hits ([`crate::kalman`]).

pub mod ambiguity;
pub mod config;
pub mod finder;
pub mod hits;
pub mod navigation;
mod reconstruct;
mod report;
pub mod seeding;

pub use ambiguity::{Candidate, resolve};
pub use config::{CkfConfig, SeedConfig};
pub use finder::{Track, TrackFinder};
pub use hits::HitStore;
pub use navigation::{NavigationConfig, Navigator};
pub use reconstruct::{Ckf, CkfDirReco, CkfEvent, CkfEventSummary, CkfSeconds};
pub use report::{CkfReport, LOW_PT, RangeEfficiency, pt_edges_all};
pub use seeding::{Seed, find_seeds, seed_parameters};
