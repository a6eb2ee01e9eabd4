//! From events to graphs: the hits that become nodes and their features ([`features`]),
//! module-wise truth and targets ([`truth`]), the geometric builder ([`geometric`], with the
//! layer pairs derived from the geometry in [`layer_pairs`]), the module-map builder
//! ([`module_map`]), the recipe that records how a graph directory was built and
//! [`build_graph`] that applies it ([`recipe`]), and the graph file format ([`mod@file`]).
//!
//! ```no_run
//! use trackgnn_graph::{GraphRecipe, Method, build_graph};
//! use trackgnn_trackml::{Detector, csv};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let det = Detector::trackml();
//! let files = &csv::discover_events("data/mu200".as_ref())?[0];
//! let event = csv::read_event(files, csv::ReadOptions::default())?;
//! let (graph, stats) = build_graph(&event, &det, &GraphRecipe::new(Method::Geometric), None)?;
//! println!("{} nodes, {} edges, efficiency {:.3}", graph.num_nodes(), graph.num_edges(), stats.efficiency);
//! # Ok(()) }
//! ```
//!
//! Not for: the GNN (see `trackgnn-engine`) or track building (`trackgnn-reco`).
#![deny(missing_docs)]

pub mod error;
pub mod features;
pub mod file;
pub mod geometric;
pub mod graph;
pub mod layer_pairs;
pub mod module_map;
pub mod recipe;
pub mod sectors;
pub mod truth;

pub use error::{Error, Result};
pub use features::Feature;
pub use file::{GraphHeader, discover_graphs, graph_file_name, read_graph, read_graph_header, write_graph};
pub use graph::{Graph, GraphTruth};
pub use module_map::ModuleMap;
pub use recipe::{BuildStats, GraphRecipe, Method, build_graph};
