//! Summaries of events for people and scripts: the realism statistics of MISSION.md's table and
//! consistency checks of truth against hits, particles and the geometry (`trackgnn inspect`).

mod checks;
mod realism;
mod reference;

pub use checks::{CheckResult, ConsistencyChecks};
pub use realism::{CentroidLimit, RealismAccumulator, RealismStats, ResidualStats};
pub use reference::{ReferenceRow, Tolerance, compare_with_trackml};
