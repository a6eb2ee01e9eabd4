//! TrackML data for trackgnn: typed events, the CSV formats, the detector geometry, the
//! solenoid field and the physics formulas everything downstream uses.
//!
//! - [`event`]: struct-of-arrays [`Event`]s (hits, truth, particles, cells).
//! - [`csv`]: reading and writing the TrackML CSV files (plain or `.gz`), with errors that name
//!   the file, line and column.
//! - [`geometry`]: [`Detector`] = modules grouped in layers with a fast lookup; the TrackML
//!   layout built procedurally ([`Detector::trackml`]) or read from `detectors.csv`.
//! - [`field`], [`physics`], [`units`]: the field B_z(z), Highland, helix radius, the
//!   detector's material ([`physics::material`]), units.
//! - [`rng`]: the seeded, value-stable random generator of the whole project.
//! - [`index`]: the counting-sort grouping (edges by node) of the engine and the graph builders.
//! - [`atomic`]: files written whole or not at all (temporary name, then rename), for every crate.
//!
//! ```
//! use trackgnn_trackml::{Detector, physics, units};
//! let det = Detector::trackml();
//! assert_eq!(det.modules.len(), 18_728);
//! let r = physics::helix_radius(1.0, 1.0, units::tesla_to_native(2.0)); // mm
//! assert!((r - 1667.8).abs() < 0.1);
//! ```
//!
//! Not for: simulation (see `trackgnn-simulate`) or graphs (`trackgnn-graph`).
#![deny(missing_docs)]

pub mod atomic;
pub mod csv;
pub mod error;
pub mod event;
pub mod field;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod geometry;
pub mod ids;
pub mod index;
pub mod physics;
pub mod rng;
pub mod summary;
pub mod units;

pub use error::{Error, Result};
pub use event::{Cells, Event, Hits, Particles, Truth};
pub use field::SolenoidField;
pub use geometry::{Detector, Layer, LayerKind, Module, Technology};
pub use ids::{LayerId, ModuleId, ParticleId};
