//! Summaries of events for people and scripts: the realism statistics of the reference table and
//! consistency checks of truth against hits, particles and the geometry (`trackgnn inspect`).

mod checks;
mod data_set;
mod realism;
mod reference;

pub use checks::{CheckKind, CheckResult, ConsistencyChecks};
pub use data_set::{DataSet, GENERATOR_MARKER, Inspection, events_at};
pub use realism::{CentroidLimit, RealismAccumulator, RealismStats, ResidualStats};
pub use reference::{
    AgainstRow, FRACTION_TOLERANCE, Figure, RELATIVE_TOLERANCE, Reference, ReferenceRow, TRACKML_REFERENCE, Tolerance,
    compare_with, compare_with_trackml,
};
