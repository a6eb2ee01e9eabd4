//! Trained artefacts, between the engine and its users: the run directory and its files
//! ([`run_dir`], [`config`]), weights in and out ([`weights`]), the trained GNN ready for
//! inference ([`gnn`]), the learned graph stages ready for inference ([`stages`]: embedding and
//! filter), the GNN's edge metrics ([`metrics`]), and the one conversion of a graph into the
//! engine's input ([`graph_input()`]).
//!
//! The train crate writes runs through it; the reco, onnx and Python crates read them through
//! it, without depending on training.
//!
//! ```no_run
//! use trackgnn_model::run_dir::{RunDir, Weights};
//! use trackgnn_model::{TrainedModel, graph_input};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let run = RunDir::open("trackgnn-demo/run")?;
//! let recipe = run.read_recipe()?.for_inference();
//! let trained = TrainedModel::for_recipe(&run, &Weights::Best, &recipe)?;
//! let graph = trackgnn_graph::read_graph("graphs/event000001000.graph".as_ref())?;
//! let input = graph_input(&graph);
//! let scores = trained.scores(&graph)?;
//! println!("{} edges, {} scores", input.num_edges(), scores.len());
//! # Ok(()) }
//! ```
//!
//! Not for: training (`trackgnn-train`), graph building (`trackgnn-graph`), track building
//! (`trackgnn-reco`).
#![deny(missing_docs)]

pub mod config;
pub mod error;
pub mod gnn;
pub mod graph_input;
pub mod metrics;
pub mod run_dir;
pub mod stages;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod weights;

pub use config::TrainConfig;
pub use error::{Error, Result};
pub use gnn::{LogitsHook, Scoring, TrainedModel};
pub use graph_input::graph_input;
pub use metrics::EdgeMetrics;
pub use run_dir::{RunDir, Weights};
pub use stages::LearnedStages;
