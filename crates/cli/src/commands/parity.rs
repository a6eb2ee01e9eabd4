//! `trackgnn export-parity`: one forward and backward of a model on a graph, written with the
//! weights, the graph, the loss and every gradient to one safetensors file, so
//! `tools/parity.py` can recompute them in PyTorch and compare ([`trackgnn_train::parity`]
//! runs the model and makes the file; this command parses and writes it).

use std::process::ExitCode;

use anyhow::{Context, Result};
use serde_json::json;
use trackgnn_engine::ModelConfig;
use trackgnn_train::parity::{ParitySpec, RandomGraph, export_parity};

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

pub fn run(a: ExportParityArgs) -> Result<ExitCode> {
    let model: ModelConfig = match &a.model_config {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            toml::from_str(&text).with_context(|| format!("{}: invalid model config", p.display()))?
        }
        None => ModelConfig::default(),
    };
    let random = RandomGraph { nodes: a.nodes, edges: a.edges, edge_features: a.edge_features };
    let spec = ParitySpec { model, graph: a.graph, random, seed: a.seed, pos_weight: a.pos_weight, weights: a.weights };
    let export = export_parity(&spec, &a.out)?;
    write_atomic(&a.out, &export.bytes)?;
    let (parameters, nodes, edges, loss) = (export.parameters, export.nodes, export.edges, export.loss);
    println!("{}", json!({ "out": a.out, "parameters": parameters, "nodes": nodes, "edges": edges, "loss": loss }));
    Ok(ExitCode::SUCCESS)
}
