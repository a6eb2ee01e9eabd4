//! The graph of one event: plain data that graph building, the GNN engine and track building
//! exchange.

/// One event's graph: nodes are hits, directed edges join hits that may be consecutive on a
/// track. Per-node and per-edge truth is optional (graphs built for inference have none).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Graph {
    /// The event the graph was built from.
    pub event_id: u64,
    /// Names of the node features, in column order (e.g. `r`, `phi`, `z`).
    pub node_feature_names: Vec<String>,
    /// Node features, row-major `(num_nodes, node_feature_names.len())`, scaled.
    pub node_features: Vec<f32>,
    /// Names of the edge features, in column order (e.g. `dr`, `dphi`, `dz`, `deta`).
    pub edge_feature_names: Vec<String>,
    /// Edge features, row-major `(num_edges, edge_feature_names.len())`; empty if none.
    pub edge_features: Vec<f32>,
    /// Source node of each edge (the hit nearer the interaction point).
    pub src: Vec<u32>,
    /// Destination node of each edge.
    pub dst: Vec<u32>,
    /// TrackML hit_id of each node.
    pub hit_id: Vec<u64>,
    /// Unscaled cylindrical coordinates of each node: r \[mm\], phi \[rad\], z \[mm\].
    pub r: Vec<f32>,
    /// Azimuth \[rad\].
    pub phi: Vec<f32>,
    /// z \[mm\].
    pub z: Vec<f32>,
    /// Truth per node and edge, when the graph was built with truth.
    pub truth: Option<GraphTruth>,
    /// For a sector graph: 1 for the edges this sector owns (its source node lies in the
    /// sector's core, not its overlap), so losses over overlapping sectors count each edge once.
    /// Empty for whole-event graphs: every edge is owned.
    pub edge_owned: Vec<u8>,
}

/// Truth labels of a graph.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GraphTruth {
    /// particle_id of each node (0 for noise).
    pub particle_id: Vec<u64>,
    /// pT \[GeV\] of each node's particle (0 for noise).
    pub particle_pt: Vec<f32>,
    /// η of each node's particle at production (0 for noise).
    pub particle_eta: Vec<f32>,
    /// Transverse distance \[mm\] of each node's particle's production vertex from the beam
    /// line (0 for noise); empty in files written before it was stored.
    pub particle_vertex_r: Vec<f32>,
    /// 1 if the edge joins consecutive hits of one particle (module-wise truth), else 0.
    pub y: Vec<u8>,
    /// 1 if the edge is true and its particle is a target (pT and hit-count cuts), else 0.
    pub target: Vec<u8>,
    /// Number of true edges of the event (after the node cuts), present in the graph or not.
    pub n_true_edges_event: u64,
    /// Number of target edges of the event, present in the graph or not.
    pub n_target_edges_event: u64,
}

impl Graph {
    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.hit_id.len()
    }
    /// Number of edges.
    pub fn num_edges(&self) -> usize {
        self.src.len()
    }
    /// Number of node feature columns.
    pub fn num_node_features(&self) -> usize {
        self.node_feature_names.len()
    }
    /// Number of edge feature columns.
    pub fn num_edge_features(&self) -> usize {
        self.edge_feature_names.len()
    }
}
