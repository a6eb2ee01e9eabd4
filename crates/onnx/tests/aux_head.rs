//! A model with the training-only auxiliary pT head (`aux_pt.*`) exports as the same model
//! without it: the same ONNX file, byte for byte (graph, tensor names, weights, metadata).

use prost::Message;
use trackgnn_engine::{InteractionGnn, ModelConfig};
use trackgnn_graph::{GraphMethod, GraphRecipe};
use trackgnn_onnx::export;
use trackgnn_onnx::proto::ModelProto;
use trackgnn_trackml::rng::Rng;

#[test]
fn the_aux_head_is_left_out_of_the_export() {
    let features = GraphRecipe::new(GraphMethod::Geometric).features;
    let node_dim = features.features.len();
    let cfg = ModelConfig { hidden: 8, iterations: 2, ..ModelConfig::default() };
    let plain = InteractionGnn::<f32>::new(cfg.clone(), node_dim, 0, &mut Rng::new(3));
    let aux = InteractionGnn::<f32>::new(ModelConfig { aux_pt: true, ..cfg }, node_dim, 0, &mut Rng::new(3));
    assert!(aux.params.specs.iter().any(|s| s.name.starts_with("aux_pt.")));
    let (a, b) = (export(&plain, &features, 0.5).unwrap(), export(&aux, &features, 0.5).unwrap());
    let proto = ModelProto::decode(&b.model.bytes[..]).unwrap();
    let graph = proto.graph.as_ref().unwrap();
    let names: Vec<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
    assert!(!names.is_empty() && names.iter().all(|n| !n.contains("aux_pt")), "{names:?}");
    assert!(!proto.metadata_props.iter().any(|p| p.value.contains("aux_pt")), "metadata names the head");
    assert!(a.model.bytes == b.model.bytes, "the export of a model with the head differs from one without");
    assert_eq!(a.acts, b.acts);
}
