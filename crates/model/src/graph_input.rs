//! A graph as the engine's input: the one conversion from a [`Graph`] (a graph file's
//! content) to a [`GraphInput`], for training, evaluation, inference and the ONNX reference.

use trackgnn_engine::GraphInput;
use trackgnn_graph::Graph;

/// The engine's input of `graph`: its node features, edge features and edges, with the widths
/// the graph has.
pub fn graph_input(graph: &Graph) -> GraphInput<f32> {
    GraphInput::new(
        graph.num_nodes(),
        &graph.node_features,
        graph.num_node_features(),
        &graph.edge_features,
        graph.num_edge_features(),
        &graph.src,
        &graph.dst,
    )
}
