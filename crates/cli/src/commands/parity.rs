//! `trackgnn export-parity`: one forward and backward of a model on a graph, written with the
//! weights, the graph, the loss and every gradient to one safetensors file, so
//! `tools/parity.py` can recompute them in PyTorch and compare.

use std::collections::HashMap;
use std::process::ExitCode;

use anyhow::{Context, Result};
use safetensors::{Dtype, tensor::TensorView};
use serde_json::json;
use trackgnn_engine::loss::bce_with_logits;
use trackgnn_engine::{ForwardCache, GraphInput, InteractionGnn, ModelConfig};
use trackgnn_trackml::rng::Rng;

use crate::util::write_atomic;

/// `trackgnn export-parity`.
#[derive(Debug, clap::Args)]
pub struct ExportParityArgs {
    /// Output safetensors file.
    #[arg(long, value_name = "FILE")]
    pub out: std::path::PathBuf,
    /// Model configuration (TOML, the keys of `ModelConfig`); default: trackgnn's defaults.
    #[arg(long, value_name = "FILE")]
    pub model_config: Option<std::path::PathBuf>,
    /// A graph file to use (its target labels and field weights); default: a random graph.
    #[arg(long, value_name = "FILE")]
    pub graph: Option<std::path::PathBuf>,
    /// Nodes of the random graph.
    #[arg(long, default_value_t = 200)]
    pub nodes: usize,
    /// Edges of the random graph.
    #[arg(long, default_value_t = 1500)]
    pub edges: usize,
    /// Edge features of the random graph.
    #[arg(long, default_value_t = 0)]
    pub edge_features: usize,
    /// Seed of the weights and of the random graph.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Positive-class weight of the loss.
    #[arg(long, default_value_t = 2.0)]
    pub pos_weight: f64,
    /// Weights to use (safetensors with the engine's parameter names, as a run's
    /// `best.safetensors`); default: a random initialisation from `--seed`.
    #[arg(long, value_name = "FILE")]
    pub weights: Option<std::path::PathBuf>,
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn run(a: ExportParityArgs) -> Result<ExitCode> {
    let cfg: ModelConfig = match &a.model_config {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            toml::from_str(&text).with_context(|| format!("{}: invalid model config", p.display()))?
        }
        None => ModelConfig::default(),
    };
    cfg.validate()?;
    // The graph: a graph file, or a random one.
    let (n, x, node_dim, ea, edge_dim, src, dst, y, w) = match &a.graph {
        Some(p) => {
            let g = trackgnn_graph::read_graph(p)?;
            let t = g.truth.as_ref().context("the graph has no truth labels")?;
            let w: Vec<f32> =
                t.y.iter().zip(&t.target).map(|(&y, &tg)| if y == 1 && tg == 0 { 0.0 } else { 1.0 }).collect();
            let (nf, ef) = (g.num_node_features(), g.num_edge_features());
            (
                g.num_nodes(),
                g.node_features.clone(),
                nf,
                g.edge_features.clone(),
                ef,
                g.src.clone(),
                g.dst.clone(),
                t.target.clone(),
                w,
            )
        }
        None => {
            let mut rng = Rng::new(a.seed);
            let (n, e) = (a.nodes, a.edges);
            let x: Vec<f32> = (0..n * 3).map(|_| rng.normal() as f32).collect();
            let ea: Vec<f32> = (0..e * a.edge_features).map(|_| rng.normal() as f32).collect();
            let src: Vec<u32> = (0..e).map(|_| rng.below(n as u64) as u32).collect();
            let dst: Vec<u32> =
                src.iter().map(|&s| ((s as u64 + 1 + rng.below(n as u64 - 1)) % n as u64) as u32).collect();
            let y: Vec<u8> = (0..e).map(|_| rng.bernoulli(0.3) as u8).collect();
            let w: Vec<f32> = (0..e).map(|_| if rng.bernoulli(0.1) { 0.0 } else { 1.0 }).collect();
            (n, x, 3, ea, a.edge_features, src, dst, y, w)
        }
    };
    let g = GraphInput::<f32>::new(n, &x, node_dim, &ea, edge_dim, &src, &dst);
    let mut model = InteractionGnn::<f32>::new(cfg.clone(), node_dim, edge_dim, &mut Rng::new(a.seed));
    if let Some(p) = &a.weights {
        trackgnn_train::checkpoint::load_weights(p, &mut model.params)?;
    }
    let mut cache = ForwardCache::default();
    model.forward(&g, &mut cache);
    let mut dl = vec![0.0f32; g.num_edges()];
    let loss = bce_with_logits(&cache.logits, &y, Some(&w), a.pos_weight, &mut dl) as f32;
    model.params.zero_grad();
    model.backward(&g, &mut cache, &dl);

    let mut buffers: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    for s in &model.params.specs {
        buffers.push((s.name.clone(), Dtype::F32, s.shape.clone(), f32_bytes(&model.params.data[s.range()])));
        buffers.push((
            format!("grad.{}", s.name),
            Dtype::F32,
            s.shape.clone(),
            f32_bytes(&model.params.grad[s.range()]),
        ));
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
    let views: Vec<(String, TensorView<'_>)> = buffers
        .iter()
        .map(|(name, dt, shape, bytes)| Ok((name.clone(), TensorView::new(*dt, shape.clone(), bytes)?)))
        .collect::<Result<_, safetensors::SafeTensorError>>()?;
    let mut meta = HashMap::new();
    meta.insert("model_config".to_string(), serde_json::to_string(&cfg)?);
    meta.insert("pos_weight".to_string(), a.pos_weight.to_string());
    meta.insert(
        "param_order".to_string(),
        serde_json::to_string(&model.params.specs.iter().map(|s| &s.name).collect::<Vec<_>>())?,
    );
    let bytes = safetensors::serialize(views, Some(meta))?;
    write_atomic(&a.out, &bytes)?;
    println!("{}", json!({ "out": a.out, "parameters": model.params.len(), "nodes": n, "edges": e, "loss": loss }));
    Ok(ExitCode::SUCCESS)
}
