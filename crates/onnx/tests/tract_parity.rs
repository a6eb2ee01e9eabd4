//! The exported file run by a pure-Rust ONNX runtime (tract) on generated events gives the
//! engine's logits: max |Δ| ≤ 1e-4 and the same edges above 0.5, for the default model and for
//! every other option (affine / no norm, ReLU, identity, separate iterations, no residual, no
//! output norm, each aggregation, no edge features). One file serves graphs of any size.

use prost::Message;
use trackgnn_engine::config::Norm;
use trackgnn_engine::ops::{Activation, Aggr};
use trackgnn_engine::{ForwardCache, InteractionGnn, ModelConfig, UpdateOrder};
use trackgnn_graph::{Graph, GraphMethod, GraphRecipe, build_graph};
use trackgnn_model::graph_input;
use trackgnn_onnx::proto::{DimensionValue, ModelProto};
use trackgnn_onnx::{export, required_opset};
use trackgnn_simulate::{Generator, SimConfig};
use trackgnn_trackml::Detector;
use trackgnn_trackml::rng::Rng;
use tract_onnx::prelude::*;

/// Two generated events' graphs of different sizes.
fn graphs(edge_features: bool) -> Vec<Graph> {
    let g = Generator::new(Detector::trackml(), SimConfig { pileup: 1.0, ..SimConfig::default() });
    let recipe = GraphRecipe { edge_features, ..GraphRecipe::new(GraphMethod::Geometric) };
    (1..=2).map(|id| build_graph(&g.event(7, id).0, g.detector(), &recipe, None).unwrap().0).collect()
}

fn engine_logits(model: &InteractionGnn<f32>, g: &Graph) -> Vec<f32> {
    model.infer(&graph_input(g), &mut ForwardCache::default())
}

fn tract_logits(plan: &std::sync::Arc<TypedRunnableModel>, g: &Graph, edge_cols: usize) -> Vec<f32> {
    let (n, e) = (g.num_nodes(), g.num_edges());
    let x = tract_ndarray::Array2::from_shape_vec((n, g.num_node_features()), g.node_features.clone()).unwrap();
    let ei: Vec<i64> = g.src.iter().chain(&g.dst).map(|&v| v as i64).collect();
    let ei = tract_ndarray::Array2::from_shape_vec((2, e), ei).unwrap();
    let mut inputs: TVec<TValue> = tvec![x.into_tensor().into(), ei.into_tensor().into()];
    if g.num_edge_features() > 0 {
        // Wider than the model reads, as the ACTS module map's six columns: the extra ones
        // must be ignored.
        let f = g.num_edge_features();
        let mut ea = vec![0.0f32; e * edge_cols];
        for k in 0..e {
            ea[k * edge_cols..k * edge_cols + f].copy_from_slice(&g.edge_features[k * f..(k + 1) * f]);
            ea[k * edge_cols + f..(k + 1) * edge_cols].iter_mut().for_each(|v| *v = 1e3);
        }
        inputs.push(tract_ndarray::Array2::from_shape_vec((e, edge_cols), ea).unwrap().into_tensor().into());
    }
    let out = plan.run(inputs).unwrap();
    let view = out[0].to_plain_array_view::<f32>().unwrap();
    assert_eq!(view.shape(), &[e], "output is [E]");
    view.iter().copied().collect()
}

/// Exports a model of `cfg` with random weights and compares tract with the engine on both
/// graphs; returns the max |Δ|.
fn check(cfg: ModelConfig, edge_features: bool) -> f32 {
    let gs = graphs(edge_features);
    let edge_dim = gs[0].num_edge_features();
    let model = InteractionGnn::<f32>::new(cfg.clone(), gs[0].num_node_features(), edge_dim, &mut Rng::new(11));
    let exported = export(&model, &GraphRecipe::new(GraphMethod::Geometric).features, 0.5).unwrap();
    assert_eq!(exported.model.opset, required_opset(cfg.norm, &cfg.aggregation));

    // The file declares the ACTS names and symbolic N and E.
    let proto = ModelProto::decode(&exported.model.bytes[..]).unwrap();
    let graph = proto.graph.as_ref().unwrap();
    let names: Vec<&str> = graph.input.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, if edge_features { vec!["x", "edge_index", "edge_attr"] } else { vec!["x", "edge_index"] });
    assert_eq!(graph.output[0].name, "output");
    let dim0 = |v: &trackgnn_onnx::proto::ValueInfoProto, i: usize| {
        v.r#type.as_ref().unwrap().tensor_type.as_ref().unwrap().shape.as_ref().unwrap().dim[i].value.clone()
    };
    assert_eq!(dim0(&graph.input[0], 0), Some(DimensionValue::DimParam("N".into())));
    assert_eq!(dim0(&graph.input[1], 1), Some(DimensionValue::DimParam("E".into())));
    assert_eq!(proto.opset_import[0].version, exported.model.opset);

    let plan = tract_onnx::onnx()
        .model_for_read(&mut &exported.model.bytes[..])
        .unwrap()
        .into_optimized()
        .unwrap()
        .into_runnable()
        .unwrap();
    let mut worst = 0.0f32;
    for g in &gs {
        assert!(g.num_edges() > 100, "a real graph ({} edges)", g.num_edges());
        let want = engine_logits(&model, g);
        let got = tract_logits(&plan, g, 6);
        let dmax = want.iter().zip(&got).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(dmax <= 1e-4, "{cfg:?}: max |Δ logit| {dmax}");
        let flips = want.iter().zip(&got).filter(|(a, b)| (**a > 0.0) != (**b > 0.0)).count();
        assert_eq!(flips, 0, "{cfg:?}: edges on different sides of 0.5");
        worst = worst.max(dmax);
    }
    worst
}

#[test]
fn the_default_model_runs_in_tract_as_in_the_engine() {
    let d = check(ModelConfig { hidden: 32, iterations: 3, ..ModelConfig::default() }, true);
    eprintln!("default model: max |Δ logit| {d:e}");
}

#[test]
fn every_other_option_runs_in_tract_as_in_the_engine() {
    let base = ModelConfig { hidden: 16, iterations: 2, ..ModelConfig::default() };
    let cases = [
        ModelConfig {
            norm: Norm::Affine,
            activation: Activation::Relu,
            output_activation: Activation::Identity,
            recurrent: false,
            residual: false,
            aggregation: vec![Aggr::Max, Aggr::Sum],
            ..base.clone()
        },
        ModelConfig {
            norm: Norm::None,
            output_norm: false,
            mlp_depth: 3,
            classifier_depth: 1,
            aggregation: vec![Aggr::Std, Aggr::Mean],
            output_activation: Activation::Relu,
            ..base.clone()
        },
        ModelConfig { output_norm: false, activation: Activation::Tanh, aggregation: vec![Aggr::Sum], ..base.clone() },
    ];
    for (i, cfg) in cases.into_iter().enumerate() {
        let d = check(cfg, i != 1);
        eprintln!("case {i}: max |Δ logit| {d:e}");
    }
}

#[test]
fn node_first_models_run_in_tract_as_in_the_engine() {
    // acorn's order (nodes, then edges from the new nodes), as `tools/acorn.py` converts it.
    let acorn = ModelConfig { hidden: 16, iterations: 3, ..ModelConfig::acorn() };
    assert_eq!(acorn.update_order, UpdateOrder::NodeFirst);
    let d = check(acorn.clone(), false);
    eprintln!("acorn: max |Δ logit| {d:e}");
    let residual = ModelConfig { residual: true, recurrent: true, aggregation: vec![Aggr::Sum, Aggr::Max], ..acorn };
    let d = check(residual, true);
    eprintln!("node first, residual, recurrent: max |Δ logit| {d:e}");
}
