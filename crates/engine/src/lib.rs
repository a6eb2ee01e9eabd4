//! The fused CPU InteractionGNN engine (work in progress).
#![deny(missing_docs)]

pub mod optim;
pub mod params;

pub use params::{ParamSpec, ParamStore};
