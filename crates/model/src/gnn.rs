//! The trained GNN, ready for inference: a run's configuration and its weights in an
//! [`InteractionGnn`], run on a device by a [`GnnExecutor`], giving a graph's edge logits and
//! scores.

use std::path::PathBuf;

use trackgnn_engine::loss::sigmoid;
use trackgnn_engine::optim::AdamWConfig;
use trackgnn_engine::{Device, GnnExecutor, InteractionGnn, Precision, executor_on};
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
    /// The weights file loaded.
    pub weights: PathBuf,
    /// The GNN with the weights loaded, on the device that scores graphs (its one copy).
    executor: Box<dyn GnnExecutor>,
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
    /// error naming the tensor), on the CPU in the run's precision.
    pub fn open(run: &RunDir, weights: &Weights, node_dim: usize, edge_dim: usize) -> Result<TrainedModel> {
        let config = run.read_config()?;
        let mut model = InteractionGnn::<f32>::new(config.model.clone(), node_dim, edge_dim, &mut Rng::new(0));
        let weights = run.weights_path(weights);
        load_weights(&weights, &mut model.params)?;
        model.set_precision(config.precision);
        let executor = executor_on(Device::Cpu, model, AdamWConfig::default())?;
        Ok(TrainedModel { config, weights, executor })
    }

    /// [`open`](Self::open) for the graphs of `recipe` (of its [`input_widths`]).
    pub fn for_recipe(run: &RunDir, weights: &Weights, recipe: &GraphRecipe) -> Result<TrainedModel> {
        let (node_dim, edge_dim) = input_widths(recipe);
        TrainedModel::open(run, weights, node_dim, edge_dim)
    }

    /// Scores graphs on `device` from now on (an error if this build cannot run it there).
    pub fn set_device(&mut self, device: Device) -> Result<()> {
        if device != self.executor.device() {
            self.executor = executor_on(device, self.executor.host_model(), AdamWConfig::default())?;
        }
        Ok(())
    }

    /// Scores graphs in `precision` from now on (the run's by default).
    pub fn set_precision(&mut self, precision: Precision) {
        self.executor.set_precision(precision);
    }

    /// The GNN's definition and trained weights in host memory, in the precision it scores
    /// in (what ONNX export reads): a copy.
    pub fn model(&self) -> InteractionGnn<f32> {
        self.executor.host_model()
    }

    /// The device that scores graphs.
    pub fn device(&self) -> Device {
        self.executor.device()
    }

    /// The model on its device.
    pub fn executor(&self) -> &dyn GnnExecutor {
        &*self.executor
    }

    /// The edge scores (probabilities) of a graph; an error only where the device fails.
    pub fn scores(&self, graph: &Graph) -> Result<Vec<f32>> {
        Ok(self.logits(graph)?.iter().map(|&x| sigmoid(x)).collect())
    }

    /// The edge logits of a graph (scores before the sigmoid).
    pub fn logits(&self, graph: &Graph) -> Result<Vec<f32>> {
        Ok(self.executor.infer(&graph_input(graph))?)
    }
}

/// How a trained model scores graphs (`--precision` and `--device` of `eval` and
/// `reconstruct`): `None` keeps the run's precision and the CPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Scoring {
    /// Arithmetic of the matrix products: f32, or bf16 (mixed precision: bf16 operands with
    /// f32 accumulation; weights, optimiser, norms, loss and scores in f32). Default: the run's.
    #[cfg_attr(feature = "clap", arg(long, value_name = "f32|bf16"))]
    pub precision: Option<Precision>,
    /// Where the model runs: cpu (the default), or cuda:N in a build with the GPU backend.
    #[cfg_attr(feature = "clap", arg(long, value_name = "cpu|cuda:N"))]
    pub device: Option<Device>,
}

impl TrainedModel {
    /// Scores graphs as `scoring` says from now on (an error if this build cannot run on its
    /// device).
    pub fn apply(&mut self, scoring: &Scoring) -> Result<()> {
        if let Some(d) = scoring.device {
            self.set_device(d)?;
        }
        if let Some(p) = scoring.precision {
            self.set_precision(p);
        }
        Ok(())
    }
}

/// Scores a graph's edges some other way than one process on the whole graph: in
/// domain-parallel inference each process scores its partition of the graph, exchanging the
/// halo's node states with the others, and the logits are gathered
/// (`trackgnn_train::dist::DomainScoring`). The reconstruction takes it with
/// `Reconstructor::with_logits_hook`.
pub trait LogitsHook: Send + Sync {
    /// The logits of every edge of `graph` by the model on `executor`, in the graph's edge
    /// order.
    fn logits(&self, executor: &dyn GnnExecutor, graph: &Graph) -> Result<Vec<f32>>;
}
