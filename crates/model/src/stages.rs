//! The learned stages of metric-learning graph construction, ready for inference: the hit
//! embedding ([`embedding`]) and the edge filter ([`filter`]), each loaded from its run
//! directory (its `config.toml` and `best.safetensors`, the names of [`crate::run_dir`]), and
//! [`LearnedStages`], what a graph recipe names of them. Their training is the train crate's
//! `metric_learning`.

pub mod embedding;
pub mod filter;

use std::path::Path;

use serde::{Deserialize, Serialize};
use trackgnn_engine::{DenseNet, DenseNetConfig};
use trackgnn_graph::recipe::{EmbeddingRun, FilterRun, LearnedRun, absolute};

use crate::error::{Error, Result};
use crate::run_dir::{BEST_FILE, CONFIG_FILE};
use crate::weights::load_weights;

/// Optimisation settings shared by the two stages.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StageTraining {
    /// Epochs (passes over the training events).
    pub epochs: u64,
    /// Optimiser steps per training event and epoch.
    pub steps_per_event: usize,
    /// AdamW learning rate (of the first epoch).
    pub lr: f64,
    /// The learning rate of epoch e is `lr · lr_decay^e`: a late, smaller rate settles the
    /// noise of the small pair samples (a step per epoch, so a resumed run continues on the
    /// same schedule whatever its final number of epochs). 1 (constant) before the key.
    pub lr_decay: f64,
    /// Gradient clipping (L2 norm).
    pub clip_grad_norm: f64,
    /// Seed of the initialisation and of the sampling.
    pub seed: u64,
}

impl Default for StageTraining {
    fn default() -> Self {
        StageTraining { epochs: 10, steps_per_event: 4, lr: 3e-3, lr_decay: 1.0, clip_grad_norm: 1.0, seed: 1 }
    }
}

impl StageTraining {
    /// The learning rate of `epoch` (see [`StageTraining::lr_decay`]).
    pub fn lr_at(&self, epoch: u64) -> f64 {
        self.lr * self.lr_decay.powf(epoch as f64)
    }
}

/// Loads a stage's weights (`best.safetensors` of its run) into a network of its shape.
pub fn load_net(run: &Path, net: &mut DenseNet<f32>) -> Result<()> {
    load_weights(&run.join(BEST_FILE), &mut net.params)
}

/// Reads and parses a stage's `config.toml`.
pub fn read_config<T: serde::de::DeserializeOwned>(run: &Path) -> Result<T> {
    let p = run.join(CONFIG_FILE);
    let text = std::fs::read_to_string(&p).map_err(|e| Error::io(&p, e))?;
    toml::from_str(&text).map_err(|e| Error::Config(format!("{}: {e}", p.display())))
}

/// What [`StageModel::load`] needs of a learned stage's configuration.
pub trait StageConfig: serde::de::DeserializeOwned {
    /// The network's shape.
    fn net(&self) -> &DenseNetConfig;
    /// The network's input width.
    fn input_width(&self) -> usize;
}

/// A trained learned stage, ready for graph building: its configuration and its network with
/// the best weights ([`embedding::EmbeddingModel`], [`filter::FilterModel`]).
pub struct StageModel<C> {
    /// Its configuration.
    pub config: C,
    /// The network with its best weights.
    pub net: DenseNet<f32>,
}

impl<C: StageConfig> StageModel<C> {
    /// Loads the best weights of a stage's run directory.
    ///
    /// # Errors
    /// A missing or invalid `config.toml` or weights file (naming it).
    pub fn load(run: &Path) -> Result<StageModel<C>> {
        let config: C = read_config(run)?;
        let mut net = DenseNet::new(config.net(), config.input_width(), &mut trackgnn_trackml::rng::Rng::new(0));
        load_net(run, &mut net)?;
        Ok(StageModel { config, net })
    }
}

/// The learned stages a graph recipe names (embedding and filter), loaded and checked against
/// the weight hashes the recipe recorded.
#[derive(Default)]
pub struct LearnedStages {
    /// The embedding (metric-learning and hybrid methods).
    pub embedding: Option<embedding::EmbeddingModel>,
    /// The edge filter, if the recipe has one.
    pub filter: Option<filter::FilterModel>,
}

impl LearnedStages {
    /// Loads what `recipe` needs (nothing for the geometric and module-map methods).
    ///
    /// # Errors
    /// A metric-learning recipe without `[metric_learning]`, a run that cannot be loaded, or
    /// weights whose hash differs from the one recorded (the run was retrained since).
    pub fn load(recipe: &trackgnn_graph::GraphRecipe) -> Result<LearnedStages> {
        if !recipe.needs_embedding() {
            return Ok(LearnedStages::default());
        }
        let ml = recipe.metric_learning.as_ref().ok_or_else(|| {
            Error::Config(format!("the {:?} graph recipe has no [metric_learning] section", recipe.method))
        })?;
        let check = |run: &str, hash: &Option<String>| -> Result<()> {
            let Some(then) = hash else { return Ok(()) };
            let path = Path::new(run).join(BEST_FILE);
            let now = trackgnn_graph::module_map::file_hash(&path)?;
            if &now != then {
                return Err(Error::Inconsistent {
                    path,
                    message: format!("weights changed since the graphs were built (hash {then}, now {now})"),
                });
            }
            Ok(())
        };
        check(&ml.embedding_run, &ml.embedding_hash)?;
        let embedding = Some(embedding::EmbeddingModel::load(Path::new(&ml.embedding_run))?);
        let filter = match &ml.filter_run {
            Some(run) => {
                check(run, &ml.filter_hash)?;
                Some(filter::FilterModel::load(Path::new(run))?)
            }
            None => None,
        };
        Ok(LearnedStages { embedding, filter })
    }

    /// The stages for [`trackgnn_graph::build_graph_with`], with the module map if any.
    pub fn stages<'a>(&'a self, map: Option<&'a trackgnn_graph::ModuleMap>) -> trackgnn_graph::Stages<'a> {
        trackgnn_graph::Stages {
            map,
            embedder: self.embedding.as_ref().map(|e| e as &dyn trackgnn_graph::metric::HitEmbedder),
            filter: self.filter.as_ref().map(|f| f as &dyn trackgnn_graph::metric::EdgeScorer),
        }
    }

    /// True if a stage's features need the cells file.
    pub fn needs_cells(&self) -> bool {
        let e = self.embedding.as_ref().map(|e| &e.config.features);
        let f = self.filter.as_ref().map(|f| &f.config.features);
        e.into_iter().chain(f).any(|c| c.features.iter().any(|s| s.name.needs_cells()))
    }
}

/// The embedding run in `dir` as a graph recipe records it ([`RecipeOverrides`]): its
/// absolute path, its weights' hash, and its training margin and `k_max` as the default cuts.
///
/// [`RecipeOverrides`]: trackgnn_graph::recipe::RecipeOverrides
///
/// # Errors
/// The run cannot be loaded.
pub fn embedding_run(dir: &Path) -> Result<EmbeddingRun> {
    let model = embedding::EmbeddingModel::load(dir)?;
    Ok(EmbeddingRun { run: learned_run(dir)?, radius: model.config.margin, k_max: model.config.k_max })
}

/// The edge-filter run in `dir` as a graph recipe records it, with its score cut.
///
/// # Errors
/// The run cannot be loaded.
pub fn filter_run(dir: &Path) -> Result<FilterRun> {
    let model = filter::FilterModel::load(dir)?;
    Ok(FilterRun { run: learned_run(dir)?, cut: model.config.cut })
}

fn learned_run(dir: &Path) -> Result<LearnedRun> {
    let weights_hash = trackgnn_graph::module_map::file_hash(&dir.join(BEST_FILE))?;
    Ok(LearnedRun { dir: absolute(dir), weights_hash })
}
