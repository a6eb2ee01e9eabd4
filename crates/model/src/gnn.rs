//! The trained GNN, ready for inference: a run's configuration and its weights in an
//! [`InteractionGnn`], giving a graph's edge logits and scores.

use std::path::PathBuf;

use trackgnn_engine::loss::sigmoid;
use trackgnn_engine::{ForwardCache, InteractionGnn};
use trackgnn_graph::recipe::EDGE_FEATURE_NAMES;
use trackgnn_graph::{Graph, GraphRecipe};
use trackgnn_trackml::rng::Rng;

use crate::config::TrainConfig;
use crate::error::Result;
use crate::graph_input::graph_input;
use crate::run_dir::{RunDir, Weights};
use crate::weights::load_weights;

/// A run's model with its trained weights, and the configuration it was trained with.
pub struct TrainedModel {
    /// The run's training configuration.
    pub config: TrainConfig,
    /// The GNN, with the weights loaded.
    pub model: InteractionGnn<f32>,
    /// The weights file loaded.
    pub weights: PathBuf,
}

/// The input widths of the graphs `recipe` builds: node features and edge features. Training
/// takes them from its first graph file, which was built with the recipe, so the two agree.
pub fn input_widths(recipe: &GraphRecipe) -> (usize, usize) {
    let edge_dim = if recipe.edge_features { EDGE_FEATURE_NAMES.len() } else { 0 };
    (recipe.features.features.len(), edge_dim)
}

impl TrainedModel {
    /// Loads `run`'s configuration and the `weights` chosen into a model for graphs of
    /// `node_dim` node features and `edge_dim` edge features (weights of other sizes are an
    /// error naming the tensor).
    pub fn open(run: &RunDir, weights: &Weights, node_dim: usize, edge_dim: usize) -> Result<TrainedModel> {
        let config = run.read_config()?;
        let mut model = InteractionGnn::<f32>::new(config.model.clone(), node_dim, edge_dim, &mut Rng::new(0));
        let weights = run.weights_path(weights);
        load_weights(&weights, &mut model.params)?;
        model.set_precision(config.precision);
        Ok(TrainedModel { config, model, weights })
    }

    /// [`open`](Self::open) for the graphs of `recipe` (of its [`input_widths`]).
    pub fn for_recipe(run: &RunDir, weights: &Weights, recipe: &GraphRecipe) -> Result<TrainedModel> {
        let (node_dim, edge_dim) = input_widths(recipe);
        TrainedModel::open(run, weights, node_dim, edge_dim)
    }

    /// The edge scores (probabilities) of a graph, reusing `cache`'s buffers.
    pub fn scores(&self, graph: &Graph, cache: &mut ForwardCache<f32>) -> Vec<f32> {
        self.logits(graph, cache).iter().map(|&x| sigmoid(x)).collect()
    }

    /// The edge logits of a graph (scores before the sigmoid), reusing `cache`'s buffers.
    pub fn logits(&self, graph: &Graph, cache: &mut ForwardCache<f32>) -> Vec<f32> {
        self.model.infer(&graph_input(graph), cache).to_vec()
    }
}
