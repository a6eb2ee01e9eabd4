//! The example programs of trackgnn (`examples/`), in the order of the pipeline:
//!
//! 1. `generate_graphs`: simulate events and build their graphs (`trackgnn-simulate`,
//!    `trackgnn-graph`);
//! 2. `train`: train the GNN on those graphs (`trackgnn-train`);
//! 3. `reconstruct_event`: score a new event with the trained run and print its tracks
//!    (`trackgnn-reco`).
//!
//! ```text
//! cargo run -p trackgnn-examples --example generate_graphs -- trackgnn-example
//! cargo run -p trackgnn-examples --example train -- trackgnn-example
//! cargo run -p trackgnn-examples --example reconstruct_event -- trackgnn-example
//! ```
//!
//! Each is a single file that uses the libraries directly, with small defaults: together they
//! run in seconds. `tests/examples.rs` runs all three. This library holds only what they
//! share.
//!
//! ```
//! use std::path::Path;
//! use trackgnn_examples::{graphs_dir, run_dir};
//! let dir = Path::new("trackgnn-example");
//! assert_eq!((graphs_dir(dir), run_dir(dir)), (dir.join("graphs"), dir.join("run")));
//! ```
//!
//! Not for: the command line (that is the `trackgnn` binary, which does the same at scale,
//! with progress bars, JSON output and plots).
#![deny(missing_docs)]

use std::path::{Path, PathBuf};

/// The directory the examples share (first argument; default `trackgnn-example`).
pub fn dir_arg() -> PathBuf {
    std::env::args().nth(1).map_or_else(|| PathBuf::from("trackgnn-example"), PathBuf::from)
}

/// Where `generate_graphs` writes the graphs in `dir`.
pub fn graphs_dir(dir: &Path) -> PathBuf {
    dir.join("graphs")
}

/// Where `train` writes the run in `dir`.
pub fn run_dir(dir: &Path) -> PathBuf {
    dir.join("run")
}

/// The mean number of pile-up interactions of the examples' events: low, so they run in
/// seconds.
pub const PILEUP: f64 = 5.0;
