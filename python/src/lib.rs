//! `trackgnn._native`: the Rust half of the `trackgnn` Python package (the pure-Python half,
//! `python/trackgnn/`, adds the pandas DataFrames of `load_event` and re-exports all of this).
//!
//! Every function calls the trackgnn libraries; nothing is implemented a second time here.
//! This crate only converts: numpy arrays in and out, library errors into Python exceptions
//! ([`errors`]), and the interpreter lock released around every call that reads, writes or
//! computes (`Python::detach`).
//!
//! - [`event`]: [`event::PyEvent`], reading, writing and generating TrackML events.
//! - [`graph`]: [`graph::PyRecipe`], [`graph::PyGraph`], building and reading graphs.
//! - [`run`]: [`run::PyRun`], a trained run: scores, tracks, whole-event reconstruction.
//! - [`metrics`]: the edge metrics of a scored graph, the track metrics of an event's tracks.
//!
//! Not for: training (the `trackgnn train` command) or plots.
#![deny(missing_docs)]

use pyo3::prelude::*;

pub mod errors;
pub mod event;
pub mod graph;
pub mod metrics;
pub mod run;

/// The module `trackgnn._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    #[cfg(feature = "cuda")]
    trackgnn_cuda::register();
    errors::register(m)?;
    event::register(m)?;
    graph::register(m)?;
    run::register(m)?;
    metrics::register(m)?;
    Ok(())
}
