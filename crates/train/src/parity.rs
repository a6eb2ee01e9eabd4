//! The parity export: one forward and backward of a model on a graph, with the weights, the
//! graph, the loss and every gradient in one safetensors file, so `tools/parity.py` can
//! recompute them in PyTorch and compare ([`export_parity`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use safetensors::{Dtype, tensor::TensorView};
use trackgnn_engine::loss::bce_with_logits;
use trackgnn_engine::{ForwardCache, GraphInput, InteractionGnn, ModelConfig};
use trackgnn_trackml::rng::Rng;

use crate::checkpoint::load_weights;
use crate::error::{Error, Result};
use trackgnn_model::Error as ModelError;

/// The random graph of a parity export without a graph file.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RandomGraph {
    /// Nodes (3 features each).
    pub nodes: usize,
    /// Edges.
    pub edges: usize,
    /// Edge features.
    pub edge_features: usize,
}

/// What a parity export runs: the model, its weights and the graph.
#[derive(Clone, Debug)]
pub struct ParitySpec {
    /// The model configuration.
    pub model: ModelConfig,
    /// A graph file (its target labels and field weights); `None`: `random`.
    pub graph: Option<PathBuf>,
    /// The random graph used without a graph file.
    pub random: RandomGraph,
    /// Seed of the weights and of the random graph.
    pub seed: u64,
    /// Positive-class weight of the loss.
    pub pos_weight: f64,
    /// Weights (a safetensors file with the engine's parameter names); `None`: random from `seed`.
    pub weights: Option<PathBuf>,
}

/// A parity export: the safetensors bytes and what they hold.
#[derive(Clone, Debug)]
pub struct ParityExport {
    /// The safetensors file's bytes.
    pub bytes: Vec<u8>,
    /// Parameters of the model.
    pub parameters: usize,
    /// Nodes of the graph.
    pub nodes: usize,
    /// Edges of the graph.
    pub edges: usize,
    /// The loss.
    pub loss: f32,
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The graph of `spec`: node features, their width, edge features, their width, src, dst,
/// labels, loss weights.
type ParityGraph = (usize, Vec<f32>, usize, Vec<f32>, usize, Vec<u32>, Vec<u32>, Vec<u8>, Vec<f32>);

fn graph_of(spec: &ParitySpec) -> Result<ParityGraph> {
    Ok(match &spec.graph {
        Some(p) => {
            let g = trackgnn_graph::read_graph(p)?;
            let t = g
                .truth
                .as_ref()
                .ok_or_else(|| ModelError::Corrupt { path: p.clone(), message: "graph has no truth labels".into() })?;
            let w: Vec<f32> =
                t.y.iter().zip(&t.target).map(|(&y, &tg)| if y == 1 && tg == 0 { 0.0 } else { 1.0 }).collect();
            let (nf, ef) = (g.num_node_features(), g.num_edge_features());
            let (x, ea) = (g.node_features.clone(), g.edge_features.clone());
            (g.num_nodes(), x, nf, ea, ef, g.src.clone(), g.dst.clone(), t.target.clone(), w)
        }
        None => {
            let mut rng = Rng::new(spec.seed);
            let RandomGraph { nodes: n, edges: e, edge_features } = spec.random;
            let x: Vec<f32> = (0..n * 3).map(|_| rng.normal() as f32).collect();
            let ea: Vec<f32> = (0..e * edge_features).map(|_| rng.normal() as f32).collect();
            let src: Vec<u32> = (0..e).map(|_| rng.below(n as u64) as u32).collect();
            let dst: Vec<u32> =
                src.iter().map(|&s| ((s as u64 + 1 + rng.below(n as u64 - 1)) % n as u64) as u32).collect();
            let y: Vec<u8> = (0..e).map(|_| rng.bernoulli(0.3) as u8).collect();
            let w: Vec<f32> = (0..e).map(|_| if rng.bernoulli(0.1) { 0.0 } else { 1.0 }).collect();
            (n, x, 3, ea, edge_features, src, dst, y, w)
        }
    })
}

/// Runs `spec`'s model forward and backward on its graph and returns the safetensors file of
/// the weights (`name`), the gradients (`grad.name`), the graph (`graph.*`), the logits and the
/// loss, with the model configuration, the positive weight and the parameter order as metadata.
/// `out` names the file in errors.
pub fn export_parity(spec: &ParitySpec, out: &Path) -> Result<ParityExport> {
    spec.model.validate()?;
    let (n, x, node_dim, ea, edge_dim, src, dst, y, w) = graph_of(spec)?;
    let g = GraphInput::<f32>::new(n, &x, node_dim, &ea, edge_dim, &src, &dst);
    let mut model = InteractionGnn::<f32>::new(spec.model.clone(), node_dim, edge_dim, &mut Rng::new(spec.seed));
    if let Some(p) = &spec.weights {
        load_weights(p, &mut model.params)?;
    }
    let mut cache = ForwardCache::default();
    model.forward(&g, &mut cache);
    let mut dl = vec![0.0f32; g.num_edges()];
    let loss = bce_with_logits(&cache.logits, &y, Some(&w), spec.pos_weight, &mut dl) as f32;
    model.params.zero_grad();
    model.backward(&g, &mut cache, &dl);

    let mut buffers: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    for s in &model.params.specs {
        buffers.push((s.name.clone(), Dtype::F32, s.shape.clone(), f32_bytes(&model.params.data[s.range()])));
        let grad = f32_bytes(&model.params.grad[s.range()]);
        buffers.push((format!("grad.{}", s.name), Dtype::F32, s.shape.clone(), grad));
    }
    let idx = |v: &[u32]| v.iter().flat_map(|&i| (i as i64).to_le_bytes()).collect::<Vec<u8>>();
    let e = g.num_edges();
    buffers.push(("graph.x".into(), Dtype::F32, vec![n, node_dim], f32_bytes(&x)));
    if edge_dim > 0 {
        buffers.push(("graph.edge_attr".into(), Dtype::F32, vec![e, edge_dim], f32_bytes(&ea)));
    }
    buffers.push(("graph.src".into(), Dtype::I64, vec![e], idx(&src)));
    buffers.push(("graph.dst".into(), Dtype::I64, vec![e], idx(&dst)));
    buffers.push(("graph.y".into(), Dtype::F32, vec![e], f32_bytes(&y.iter().map(|&v| v as f32).collect::<Vec<_>>())));
    buffers.push(("graph.weight".into(), Dtype::F32, vec![e], f32_bytes(&w)));
    buffers.push(("logits".into(), Dtype::F32, vec![e], f32_bytes(&cache.logits)));
    buffers.push(("loss".into(), Dtype::F32, vec![1], f32_bytes(&[loss])));
    let st = |source| Error::Model(ModelError::Safetensors { path: out.to_path_buf(), source });
    let views: Vec<(String, TensorView<'_>)> = buffers
        .iter()
        .map(|(name, dt, shape, bytes)| Ok((name.clone(), TensorView::new(*dt, shape.clone(), bytes).map_err(st)?)))
        .collect::<Result<_>>()?;
    let mut meta = HashMap::new();
    meta.insert("model_config".to_string(), serde_json::to_string(&spec.model).expect("a model config serialises"));
    meta.insert("pos_weight".to_string(), spec.pos_weight.to_string());
    let order: Vec<&String> = model.params.specs.iter().map(|s| &s.name).collect();
    meta.insert("param_order".to_string(), serde_json::to_string(&order).expect("names serialise"));
    let bytes = trackgnn_model::weights::serialize_sorted(views, meta).map_err(st)?;
    Ok(ParityExport { bytes, parameters: model.params.len(), nodes: n, edges: e, loss })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_export_holds_weights_gradients_graph_and_loss_and_repeats_exactly() {
        let model = ModelConfig { hidden: 8, iterations: 1, ..ModelConfig::default() };
        let random = RandomGraph { nodes: 20, edges: 60, edge_features: 2 };
        let spec = ParitySpec { model, graph: None, random, seed: 4, pos_weight: 2.0, weights: None };
        let a = export_parity(&spec, Path::new("p.safetensors")).unwrap();
        assert_eq!((a.nodes, a.edges), (20, 60));
        assert!(a.loss.is_finite() && a.loss > 0.0);
        let st = safetensors::SafeTensors::deserialize(&a.bytes).unwrap();
        assert_eq!(st.tensor("graph.edge_attr").unwrap().shape(), [60, 2]);
        assert_eq!(st.tensor("loss").unwrap().data(), a.loss.to_le_bytes());
        let grads = st.names().iter().filter(|n| n.starts_with("grad.")).count();
        assert!(grads > 0 && st.len() == 2 * grads + 8, "{} tensors", st.len());
        let b = export_parity(&spec, Path::new("p.safetensors")).unwrap();
        assert_eq!((b.loss, b.parameters), (a.loss, a.parameters));
    }
}
