//! A graph in device memory: features, edge lists and the two CSR groupings the aggregations
//! and the split Linear's backward reduce over in a fixed order.

use std::sync::Arc;

use trackgnn_engine::GraphInput;
use trackgnn_engine::ops::Csr;

use crate::backend::{Backend, BackendError, DevBuf};

/// One edge grouping on the device: offsets (n + 1) and edge ids grouped by node.
pub struct DeviceCsr {
    /// `offsets[v]..offsets[v+1]` indexes `edges` for node v.
    pub offsets: DevBuf<u32>,
    /// Edge ids, grouped by node, increasing within a node.
    pub edges: DevBuf<u32>,
}

impl DeviceCsr {
    fn upload(dev: &Arc<dyn Backend>, csr: &Csr) -> Result<Self, BackendError> {
        Ok(DeviceCsr { offsets: DevBuf::from_host(dev, &csr.offsets)?, edges: DevBuf::from_host(dev, &csr.edges)? })
    }
}

/// A [`GraphInput`] uploaded.
pub struct DeviceGraph {
    /// Nodes.
    pub num_nodes: usize,
    /// Edges.
    pub num_edges: usize,
    /// Node features (N × node_dim).
    pub x: DevBuf<f32>,
    /// Node feature width.
    pub node_dim: usize,
    /// Edge features (E × edge_dim; empty without).
    pub edge_attr: DevBuf<f32>,
    /// Edge feature width.
    pub edge_dim: usize,
    /// Source node per edge.
    pub src: DevBuf<u32>,
    /// Destination node per edge.
    pub dst: DevBuf<u32>,
    /// Incoming edges per node (grouped by `dst`).
    pub in_edges: DeviceCsr,
    /// Outgoing edges per node (grouped by `src`).
    pub out_edges: DeviceCsr,
}

/// Why a graph cannot go to the device.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    /// A graph partition with a halo (domain parallelism runs on the CPU engine).
    #[error("a graph partition with a halo cannot run on a GPU yet: domain-parallel inference runs on the CPU engine")]
    Halo,
    /// Too large for the kernels' 32-bit row counts.
    #[error("graph of {nodes} nodes and {edges} edges at width {width}: more than 2^31 - 1 values in one array")]
    TooLarge {
        /// Nodes.
        nodes: usize,
        /// Edges.
        edges: usize,
        /// The widest row.
        width: usize,
    },
    /// A device failure.
    #[error(transparent)]
    Device(#[from] BackendError),
}

impl DeviceGraph {
    /// Uploads `g`; `width` is the widest row the model keeps per node or edge (the node
    /// network's input), checked to fit the kernels' 32-bit row counts.
    pub fn upload(dev: &Arc<dyn Backend>, g: &GraphInput<f32>, width: usize) -> Result<Self, GraphError> {
        if g.halo.is_some() {
            return Err(GraphError::Halo);
        }
        let (n, e) = (g.num_nodes, g.num_edges());
        if n.max(e).saturating_mul(width.max(1)) > i32::MAX as usize {
            return Err(GraphError::TooLarge { nodes: n, edges: e, width });
        }
        Ok(DeviceGraph {
            num_nodes: n,
            num_edges: e,
            x: DevBuf::from_host(dev, &g.x)?,
            node_dim: g.node_dim,
            edge_attr: DevBuf::from_host(dev, &g.edge_attr)?,
            edge_dim: g.edge_dim,
            src: DevBuf::from_host(dev, &g.src)?,
            dst: DevBuf::from_host(dev, &g.dst)?,
            in_edges: DeviceCsr::upload(dev, &g.in_edges)?,
            out_edges: DeviceCsr::upload(dev, &g.out_edges)?,
        })
    }
}
