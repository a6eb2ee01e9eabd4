//! From events to graphs (work in progress).
#![deny(missing_docs)]

pub mod error;
pub mod file;
pub mod graph;

pub use error::{Error, Result};
pub use file::{
    GraphHeader, discover_graphs, graph_file_name, read_graph, read_graph_header, write_graph,
};
pub use graph::{Graph, GraphTruth};
