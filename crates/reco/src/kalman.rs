//! A Kalman-filter track fit on the detector's own geometry, as ACTS fits tracks.
//!
//! Track parameters live on the modules' planes (local u, v, direction φ, θ and q/p) with a
//! 5 × 5 covariance ([`params`]); they are carried between modules through the solenoid's
//! field with their transport Jacobian ([`transport`], on the propagation of
//! [`crate::propagation`]), take each module's multiple scattering into their covariance
//! ([`scattering`], from the material model the generator uses), and are updated with each
//! hit's 2D measurement and its error per kind of module ([`measurement`], calibrated on
//! generated events) by the gain-matrix update; an RTS smoother then gives every hit, and the
//! perigee, the estimate from all hits ([`fitter`]). The fitted perigee comes out as q/pT, φ,
//! cot θ (η), d0 and z0 with errors ([`perigee`]). [`candidate`]: the fit of a track candidate's
//! hits from a seed estimated from three of them (the CKF's and the GNN chain's tracks),
//! [`outliers`]: the hits such a fit drops. [`validation`]: truth-seeded fits of
//! simulated particles and their pulls.
//!
//! Units: mm, GeV, e, rad; the field in GeV/(e·mm) (`trackgnn_trackml::units`).

pub mod candidate;
pub mod fitter;
pub mod measurement;
pub mod outliers;
pub mod params;
pub mod perigee;
pub mod scattering;
pub mod transport;
pub mod validation;

pub use candidate::{CandidateHit, EventFits, FittedTrack, fit_candidate, fit_event_tracks};
pub use fitter::{BoundState, FitResult, KalmanFitter, Measurement, TrackState, gain_update};
pub use measurement::{Calibration, MeasurementModel};
pub use outliers::{CleanFit, OutlierRemoval, drop_outliers, fit_without_outliers};
pub use params::{BoundMatrix, BoundVector, ReferenceSurface};
pub use perigee::Perigee;
pub use transport::FitContext;
pub use validation::{PullSummary, SeedSmearing, TruthFit, true_perigee, truth_seeded_fits};
