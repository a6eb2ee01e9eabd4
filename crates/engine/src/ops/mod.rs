//! The engine's operations, each with forward, backward and tests.

pub mod act;
pub mod aggregate;
pub mod layer_norm;

pub use act::Activation;
pub use aggregate::{AggCache, Aggr, Csr};
