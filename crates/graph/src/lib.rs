//! From events to graphs (work in progress).
#![deny(missing_docs)]

pub mod graph;

pub use graph::{Graph, GraphTruth};
