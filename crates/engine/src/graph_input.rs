//! A graph as the engine consumes it: features in the engine's scalar type, edge lists and the
//! two edge groupings (by destination and by source) that aggregation and the split Linear's
//! backward use.

use std::sync::Arc;

use crate::halo::HaloExchange;
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
    /// For one partition of a graph split across ranks: how its halo nodes' states and
    /// gradients travel ([`crate::halo`]); `None` for a whole graph.
    pub halo: Option<Arc<dyn HaloExchange<T>>>,
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
            halo: None,
        }
    }

    /// Number of edges.
    pub fn num_edges(&self) -> usize {
        self.src.len()
    }

    /// The graph as one partition of a split graph, its halo exchanged through `halo`.
    pub fn with_halo(mut self, halo: Arc<dyn HaloExchange<T>>) -> Self {
        self.halo = Some(halo);
        self
    }

    /// Replaces the halo rows of node states (nodes × `width`) with their owners' (a no-op on a
    /// whole graph).
    pub(crate) fn exchange_states(&self, states: &mut [T], width: usize) {
        if let Some(h) = &self.halo {
            h.exchange_states(states, width);
        }
    }

    /// Sends the halo rows of node gradients to their owners and zeroes them (a no-op on a
    /// whole graph).
    pub(crate) fn return_gradients(&self, grads: &mut [T], width: usize) {
        if let Some(h) = &self.halo {
            h.return_gradients(grads, width);
        }
    }
}
