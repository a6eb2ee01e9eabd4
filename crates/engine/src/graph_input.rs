//! A graph as the engine consumes it: features in the engine's scalar type, edge lists and the
//! two edge groupings (by destination and by source) that aggregation and the split Linear's
//! backward use.

use crate::ops::Csr;
use crate::real::Real;

/// One graph, ready for the engine.
#[derive(Clone, Debug)]
pub struct GraphInput<T> {
    /// Nodes.
    pub num_nodes: usize,
    /// Node features, row-major (num_nodes × node_dim).
    pub x: Vec<T>,
    /// Node feature width.
    pub node_dim: usize,
    /// Edge features, row-major (num_edges × edge_dim); empty when `edge_dim` is 0.
    pub edge_attr: Vec<T>,
    /// Edge feature width (0: none).
    pub edge_dim: usize,
    /// Source node of each edge.
    pub src: Vec<u32>,
    /// Destination node of each edge.
    pub dst: Vec<u32>,
    /// Incoming edges of each node.
    pub in_edges: Csr,
    /// Outgoing edges of each node.
    pub out_edges: Csr,
}

impl<T: Real> GraphInput<T> {
    /// Builds the input from f32 arrays (converting to `T`).
    ///
    /// # Panics
    /// If shapes disagree or an edge index is out of range (graph files are validated on read).
    #[track_caller]
    pub fn new(
        num_nodes: usize,
        x: &[f32],
        node_dim: usize,
        edge_attr: &[f32],
        edge_dim: usize,
        src: &[u32],
        dst: &[u32],
    ) -> Self {
        assert_eq!(x.len(), num_nodes * node_dim, "node features shape");
        assert_eq!(src.len(), dst.len(), "src/dst lengths");
        assert_eq!(edge_attr.len(), src.len() * edge_dim, "edge features shape");
        assert!(src.iter().chain(dst).all(|&i| (i as usize) < num_nodes), "edge index out of range");
        GraphInput {
            num_nodes,
            x: x.iter().map(|&v| T::from_f64(v as f64)).collect(),
            node_dim,
            edge_attr: edge_attr.iter().map(|&v| T::from_f64(v as f64)).collect(),
            edge_dim,
            src: src.to_vec(),
            dst: dst.to_vec(),
            in_edges: Csr::build(dst, num_nodes),
            out_edges: Csr::build(src, num_nodes),
        }
    }

    /// Number of edges.
    pub fn num_edges(&self) -> usize {
        self.src.len()
    }
}
