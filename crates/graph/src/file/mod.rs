//! The graph file format: one compact binary file per event graph, `event{id:09}.graph`.
//!
//! | bytes            | content                                                         |
//! |------------------|-----------------------------------------------------------------|
//! | 8                | magic `TGNNGRPH`                                                |
//! | 4                | format version, u32 LE (currently 1)                            |
//! | 4                | header length `H`, u32 LE                                       |
//! | `H`              | JSON header (UTF-8), see below                                  |
//! | to 64            | zero padding: the data section starts 64-byte aligned           |
//! | `data_len`       | data section: each array's little-endian bytes, 64-byte aligned |
//! | 4                | CRC32 (IEEE, `crc32fast`) of the data section, u32 LE           |
//!
//! The header holds `event_id`, `num_nodes`, `num_edges`, `node_feature_names`,
//! `edge_feature_names`, `has_truth`, `n_true_edges_event`, `n_target_edges_event` (0 without
//! truth), `data_len` (bytes, so the exact file size is known from the header) and `arrays`, a
//! list of `{name, dtype, len, offset}`: `dtype` is `f32`, `u32`, `u64` or `u8`, `len` counts
//! elements and `offset` is in bytes from the start of the data section.
//!
//! Arrays: `node_features` (f32, `num_nodes × node features`, row-major), `edge_features` (f32,
//! `num_edges × edge features`, empty if none), `src`, `dst` (u32), `hit_id` (u64), `r`, `phi`,
//! `z` (f32); with truth also `particle_id` (u64), `particle_pt`, `particle_eta`,
//! `particle_vertex_r` (f32; absent in files written before 2026-11-27), `y`, `target` (u8).
//!
//! Compatibility: readers find arrays by name and ignore unknown arrays and header fields, so
//! a writer may add either without a version bump; a file of a newer version is rejected.
//!
//! Reading checks everything that could make a file unusable (magic, version, header, size,
//! checksum, array bounds, dtypes and lengths, node indices) and returns an error naming the
//! file. Writing checks the graph the same way first, so a file that was written always reads.
//!
//! ```
//! use trackgnn_graph::{Graph, file};
//! # fn main() -> trackgnn_graph::Result<()> {
//! let dir = std::env::temp_dir().join(format!("graphfile-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let g = Graph { event_id: 7, hit_id: vec![11, 12], r: vec![30.0, 70.0], phi: vec![0.1; 2],
//!                 z: vec![5.0, 9.0], src: vec![0], dst: vec![1], ..Graph::default() };
//! let path = dir.join(file::graph_file_name(g.event_id));
//! file::write_graph(&path, &g)?;
//! assert_eq!(file::read_graph_header(&path)?.num_edges, 1);
//! assert_eq!(file::read_graph(&path)?, g);
//! assert_eq!(file::discover_graphs(&dir)?, [(7, path)]);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok(())
//! # }
//! ```

mod discover;
mod format;
mod read;
#[cfg(test)]
mod testutil;
mod write;

pub use discover::{
    discover_graphs, graph_file_name, parse_graph_file_key, parse_graph_file_name, sector_graph_file_name,
};
pub use format::GraphHeader;
pub use read::{read_graph, read_graph_header};
pub use write::write_graph;
