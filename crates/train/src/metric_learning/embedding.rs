//! The hit embedding: a [`DenseNet`] from hit features to a point of an embedding space,
//! trained with the hinge loss on pairs ([`trackgnn_engine::loss::hinge_pairs`]): the true
//! pairs of module-wise truth (every particle above `train_pt_min`, prompt and secondary)
//! pulled within the margin, random pairs and hard negatives (pairs of different particles that
//! the current embedding puts within the margin) pushed beyond it.

use std::collections::HashSet;
use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use trackgnn_engine::loss::hinge_pairs;
use trackgnn_engine::mlp::MlpCache;
use trackgnn_engine::{DenseNet, DenseNetConfig};
use trackgnn_graph::features::{Feature, FeatureConfig, FeatureSpec, HitTable};
use trackgnn_graph::metric::{HitEmbedder, radius_pairs};
use trackgnn_graph::truth::pair_key;
use trackgnn_trackml::rng::Rng;

use super::{BestBy, GraphFigures, PreparedEvent, StageRecord, StageRun, StageTraining, gather_rows, step};
use crate::error::Result;

/// Everything that decides an embedding run (its `config.toml`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmbeddingConfig {
    /// Input features of each hit.
    pub features: FeatureConfig,
    /// The network (its `out` is the embedding dimension, 1 to 16).
    pub net: DenseNetConfig,
    /// Hinge margin; also the default radius of the graph.
    pub margin: f64,
    /// Neighbours per hit of the graph (and of the hard-negative search).
    pub k_max: usize,
    /// True pairs of particles with pT at least this \[GeV\] are pulled together.
    pub train_pt_min: f64,
    /// True pairs per step (sampled when the event has more).
    pub pairs_per_step: usize,
    /// Random pairs per true pair.
    pub random_per_true: f64,
    /// Hard negatives per true pair (at most).
    pub hard_per_true: f64,
    /// Optimisation.
    pub training: StageTraining,
}

impl Default for EmbeddingConfig {
    fn default() -> Self {
        let f = |name, scale| FeatureSpec { name, scale };
        EmbeddingConfig {
            features: FeatureConfig {
                features: vec![
                    f(Feature::R, 1000.0),
                    f(Feature::Phi, std::f64::consts::PI),
                    f(Feature::Z, 1000.0),
                    f(Feature::X, 1000.0),
                    f(Feature::Y, 1000.0),
                    f(Feature::Eta, 3.0),
                ],
            },
            net: DenseNetConfig { hidden: 64, hidden_layers: 3, out: 8 },
            margin: 0.2,
            k_max: 16,
            train_pt_min: 0.5,
            pairs_per_step: 20_000,
            random_per_true: 2.0,
            hard_per_true: 1.0,
            training: StageTraining::default(),
        }
    }
}

/// A trained embedding, ready for graph building.
pub struct EmbeddingModel {
    /// Its configuration.
    pub config: EmbeddingConfig,
    /// The network with its best weights.
    pub net: DenseNet<f32>,
}

impl EmbeddingModel {
    /// Loads the best weights of an embedding run directory.
    ///
    /// # Errors
    /// A missing or invalid `config.toml` or weights file (naming it).
    pub fn load(run: &Path) -> Result<EmbeddingModel> {
        let config: EmbeddingConfig = super::read_config(run)?;
        let mut net = DenseNet::new(&config.net, config.features.features.len(), &mut Rng::new(0));
        super::load_net(run, &mut net)?;
        Ok(EmbeddingModel { config, net })
    }
}

impl HitEmbedder for EmbeddingModel {
    fn dim(&self) -> usize {
        self.net.out()
    }

    fn embed(&self, table: &HitTable) -> trackgnn_graph::Result<Vec<f32>> {
        Ok(self.net.infer(&table.features(&self.config.features)?))
    }
}

/// The figures of the radius graph of an embedding on one event.
pub fn graph_figures(emb: &[f32], dim: usize, ev: &PreparedEvent, radius: f64, k_max: usize) -> Result<GraphFigures> {
    let pairs = radius_pairs(emb, dim, radius, k_max)?;
    let keys: HashSet<u64> = pairs.iter().map(|&(a, b)| pair_key(a, b)).collect();
    Ok(GraphFigures::of_event(ev, &keys))
}

/// The figures of the fixed-budget graph of an embedding on one event: each hit joined to its
/// `k` nearest neighbours whatever their distance ([`StageRecord::efficiency_at_budget`]).
pub fn budget_figures(emb: &[f32], dim: usize, ev: &PreparedEvent, k: usize) -> Result<GraphFigures> {
    graph_figures(emb, dim, ev, f64::INFINITY, k)
}

/// Pairs of one step: true pairs, random pairs and hard negatives.
struct Pairs {
    a: Vec<u32>,
    b: Vec<u32>,
    truth: Vec<bool>,
}

fn sample_pairs(cfg: &EmbeddingConfig, ev: &PreparedEvent, hard: &[(u32, u32)], rng: &mut Rng) -> Pairs {
    let mut p = Pairs { a: Vec::new(), b: Vec::new(), truth: Vec::new() };
    let n_true = ev.train_pairs.len().min(cfg.pairs_per_step);
    for k in 0..n_true {
        let (a, b) = if ev.train_pairs.len() <= cfg.pairs_per_step {
            ev.train_pairs[k]
        } else {
            ev.train_pairs[rng.below(ev.train_pairs.len() as u64) as usize]
        };
        p.a.push(a);
        p.b.push(b);
        p.truth.push(true);
    }
    let n = ev.len() as u64;
    let n_random = (n_true.max(1) as f64 * cfg.random_per_true) as usize;
    for _ in 0..n_random {
        let (a, b) = (rng.below(n) as u32, rng.below(n) as u32);
        if a != b && !ev.same_particle(a, b) {
            p.a.push(a);
            p.b.push(b);
            p.truth.push(false);
        }
    }
    let n_hard = ((n_true.max(1) as f64 * cfg.hard_per_true) as usize).min(hard.len());
    for _ in 0..n_hard {
        let (a, b) = hard[rng.below(hard.len() as u64) as usize];
        p.a.push(a);
        p.b.push(b);
        p.truth.push(false);
    }
    p
}

/// The hinge loss of `pairs` on one event; with `grad`, also accumulates the gradients.
fn pairs_loss(net: &mut DenseNet<f32>, cfg: &EmbeddingConfig, ev: &PreparedEvent, pairs: &Pairs, grad: bool) -> f64 {
    // Only the nodes the pairs touch go through the network.
    let mut row = vec![u32::MAX; ev.len()];
    let mut nodes = Vec::new();
    let mut local = |i: u32| -> u32 {
        if row[i as usize] == u32::MAX {
            row[i as usize] = nodes.len() as u32;
            nodes.push(i);
        }
        row[i as usize]
    };
    let a: Vec<u32> = pairs.a.iter().map(|&i| local(i)).collect();
    let b: Vec<u32> = pairs.b.iter().map(|&i| local(i)).collect();
    let dim_in = cfg.features.features.len();
    let x = gather_rows(&ev.x, dim_in, &nodes);
    let mut cache = MlpCache::default();
    let emb = net.forward(&x, &mut cache);
    let mut demb = vec![0.0f32; emb.len()];
    let loss = hinge_pairs(&emb, net.out(), &a, &b, &pairs.truth, cfg.margin, &mut demb);
    if grad {
        net.backward(&x, &cache, &demb);
    }
    loss
}

/// Trains an embedding into run directory `out` (see [`super`] for its files), or with
/// `resume` continues the run there. `on_epoch` sees each epoch's record.
///
/// # Errors
/// No training or validation events, an I/O error (naming the file), a configuration that
/// differs from the run's on resume.
pub fn train_embedding(
    out: &Path,
    cfg: &EmbeddingConfig,
    train: &[PreparedEvent],
    val: &[PreparedEvent],
    resume: bool,
    mut on_epoch: impl FnMut(&StageRecord),
) -> Result<Vec<StageRecord>> {
    if train.is_empty() || val.is_empty() {
        return Err(crate::Error::Config("training an embedding needs training and validation events".into()));
    }
    let toml = toml::to_string(cfg).map_err(|e| crate::Error::Config(e.to_string()))?;
    let t = &cfg.training;
    let mut net = DenseNet::<f32>::new(&cfg.net, cfg.features.features.len(), &mut Rng::new(t.seed));
    let mut run = StageRun::open(out, &toml, &mut net, t.lr, resume, BestBy::EfficiencyAtBudget)?;
    for epoch in run.start_epoch..t.epochs {
        let t0 = Instant::now();
        let mut order: Vec<usize> = (0..train.len()).collect();
        Rng::for_stream(&[t.seed, epoch, 0]).shuffle(&mut order);
        let (mut loss_sum, mut steps) = (0.0, 0usize);
        for (k, &e) in order.iter().enumerate() {
            let ev = &train[e];
            let mut rng = Rng::for_stream(&[t.seed, epoch, 1 + k as u64]);
            // Hard negatives: different particles within the margin of the current embedding.
            let emb = net.infer(&ev.x);
            let hard: Vec<(u32, u32)> = radius_pairs(&emb, net.out(), cfg.margin, cfg.k_max)?
                .into_iter()
                .filter(|&(a, b)| !ev.same_particle(a, b))
                .collect();
            for _ in 0..t.steps_per_event.max(1) {
                let pairs = sample_pairs(cfg, ev, &hard, &mut rng);
                net.params.zero_grad();
                loss_sum += pairs_loss(&mut net, cfg, ev, &pairs, true);
                steps += 1;
                step(&mut run.opt, &mut net.params, t.clip_grad_norm, t.lr);
            }
        }
        let (mut val_loss, mut figures, mut budget) = (0.0, GraphFigures::default(), GraphFigures::default());
        for (k, ev) in val.iter().enumerate() {
            let pairs = sample_pairs(cfg, ev, &[], &mut Rng::for_stream(&[t.seed, u64::MAX, k as u64]));
            val_loss += pairs_loss(&mut net, cfg, ev, &pairs, false) / val.len() as f64;
            let emb = net.infer(&ev.x);
            figures.add(&graph_figures(&emb, net.out(), ev, cfg.margin, cfg.k_max)?);
            budget.add(&budget_figures(&emb, net.out(), ev, cfg.k_max)?);
        }
        let record =
            StageRecord::new(epoch, loss_sum / steps.max(1) as f64, val_loss, &figures, t0.elapsed().as_secs_f64())
                .with_budget(&budget);
        on_epoch(&record);
        run.finish_epoch(&net, record)?;
    }
    Ok(run.records)
}
