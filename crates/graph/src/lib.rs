//! From events to graphs: the hits that become nodes and their features ([`features`]),
//! module-wise truth and targets ([`truth`]), the geometric builder ([`geometric`], with the
//! layer pairs derived from the geometry in [`layer_pairs`]), the module-map builder
//! ([`module_map`], learned from events by [`map_learning`]), metric-learning graphs
//! ([`metric`]), the recipe that records how a graph directory was built and [`build_graph`]
//! that applies it ([`recipe`]), the direction edges are stored in ([`direction`]), a whole
//! directory of events built into graphs ([`dataset`]), and the graph file format
//! ([`mod@file`]).
//!
//! ```
//! use trackgnn_graph::{GraphRecipe, GraphMethod, build_graph};
//! use trackgnn_simulate::{Generator, SimConfig};
//! use trackgnn_trackml::Detector;
//!
//! let generator = Generator::new(Detector::trackml(), SimConfig { pileup: 1.0, ..SimConfig::default() });
//! let (event, _) = generator.event(42, 1);
//! let recipe = GraphRecipe::new(GraphMethod::Geometric); // every hit a node: no truth cuts
//! let (graph, stats) = build_graph(&event, generator.detector(), &recipe, None)?;
//! assert_eq!(graph.num_nodes(), event.hits.len());
//! assert!(stats.efficiency > 0.8, "{} of the target edges", stats.efficiency);
//! # Ok::<(), trackgnn_graph::Error>(())
//! ```
//!
//! Not for: simulating events (`trackgnn-simulate`), the GNN (`trackgnn-engine`) or track
//! building (`trackgnn-reco`).
#![deny(missing_docs)]

pub mod dataset;
pub mod direction;
pub mod error;
pub mod features;
pub mod file;
pub mod geometric;
pub mod graph;
pub mod layer_pairs;
pub mod map_learning;
pub mod method;
pub mod metric;
pub mod module_map;
pub mod partition;
pub mod recipe;
pub mod sectors;
pub mod truth;

pub use error::{Error, Result};
pub use features::Feature;
pub use file::{GraphHeader, discover_graphs, graph_file_name, read_graph, read_graph_header, write_graph};
pub use graph::{Graph, GraphTruth};
pub use module_map::ModuleMap;
pub use recipe::{BuildStats, GraphMethod, GraphRecipe, Stages, build_graph, build_graph_with};
