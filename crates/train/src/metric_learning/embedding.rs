//! The hit embedding: a [`DenseNet`] from hit features to a point of an embedding space,
//! trained with the hinge loss on pairs ([`trackgnn_engine::loss::hinge_pairs`]): the true
//! pairs of module-wise truth (every particle above `train_pt_min`, prompt and secondary)
//! pulled within the margin, random pairs and hard negatives (pairs of different particles that
//! the current embedding puts within the margin) pushed beyond it.

use std::collections::HashSet;
use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use trackgnn_engine::loss::{HingeForm, HingeOptions, hinge_pairs_with};
use trackgnn_engine::mlp::MlpCache;
use trackgnn_engine::{DenseNet, DenseNetConfig};
use trackgnn_graph::features::{Feature, FeatureConfig, FeatureSpec, HitTable};
use trackgnn_graph::metric::{HitEmbedder, radius_pairs};
use trackgnn_graph::truth::pair_key;
use trackgnn_trackml::rng::Rng;

use super::{
    BestBy, GraphFigures, PreparedEvent, StageConfig, StageModel, StageRecord, StageRun, StageTraining, gather_rows,
    step,
};
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
    /// The false pairs' term: `squared_distance`, max(0, m² − d²) (Exa.TrkX 2020; the
    /// default, as runs before the key), or `distance`, max(0, m − d)² (acorn): the first
    /// stops pushing false pairs that sit on top of each other (its gradient is 2d), which are
    /// the hard negatives that matter at mu=200; the second pushes those hardest.
    pub hinge: HingeForm,
    /// Weight of the true pairs' term against the false pairs' (Exa.TrkX repeats its true
    /// pairs 4 times); 1 before the key.
    pub pos_weight: f64,
    /// Put each embedding on the unit sphere (acorn's `F.normalize`): the scale of the space
    /// is fixed, so the margin means the same at every step; off before the key.
    pub normalize: bool,
    /// Neighbours per hit of the graph (and of the hard-negative search).
    pub k_max: usize,
    /// Neighbours per hit of a second, larger validation budget, reported beside the `k_max`
    /// one (`efficiency_wide` and the rest of [`StageRecord`]'s `_wide` figures): the
    /// embedding's efficiency is limited mostly by the budget, and the filter prunes a larger
    /// graph. 0 turns it off; 48 before the key (it changes no training).
    pub wide_k_max: usize,
    /// Radius of that graph in the embedding space (`None`, the default: no limit, each hit's
    /// `wide_k_max` nearest neighbours whatever their distance, as the `k_max` budget).
    pub wide_radius: Option<f64>,
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
            hinge: HingeForm::SquaredDistance,
            pos_weight: 1.0,
            normalize: false,
            k_max: 16,
            wide_k_max: 48,
            wide_radius: None,
            train_pt_min: 0.5,
            pairs_per_step: 20_000,
            random_per_true: 2.0,
            hard_per_true: 1.0,
            training: StageTraining::default(),
        }
    }
}

/// A trained embedding, ready for graph building.
pub type EmbeddingModel = StageModel<EmbeddingConfig>;

impl StageConfig for EmbeddingConfig {
    fn net(&self) -> &DenseNetConfig {
        &self.net
    }

    fn input_width(&self) -> usize {
        self.features.features.len()
    }
}

impl HitEmbedder for EmbeddingModel {
    fn dim(&self) -> usize {
        self.net.out()
    }

    fn embed(&self, table: &HitTable) -> trackgnn_graph::Result<Vec<f32>> {
        Ok(embed_rows(&self.net, &self.config, &table.features(&self.config.features)?))
    }
}

/// The embedding of feature rows `x` by `net` (on the unit sphere if `cfg.normalize`).
pub fn embed_rows(net: &DenseNet<f32>, cfg: &EmbeddingConfig, x: &[f32]) -> Vec<f32> {
    let mut emb = net.infer(x);
    if cfg.normalize {
        for row in emb.chunks_exact_mut(net.out()) {
            let n = norm(row);
            row.iter_mut().for_each(|v| *v /= n);
        }
    }
    emb
}

/// The L2 norm of a row, kept off 0.
fn norm(row: &[f32]) -> f32 {
    row.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-6)
}

/// Backpropagates `dy` through y = x/|x| row-wise (x = `raw`, y = `unit`), in place:
/// dx = (dy − y (y·dy)) / |x|.
fn normalize_backward(raw: &[f32], unit: &[f32], dy: &mut [f32], dim: usize) {
    for ((x, y), g) in raw.chunks_exact(dim).zip(unit.chunks_exact(dim)).zip(dy.chunks_exact_mut(dim)) {
        let n = norm(x);
        let dot: f32 = y.iter().zip(g.iter()).map(|(a, b)| a * b).sum();
        for (gk, yk) in g.iter_mut().zip(y) {
            *gk = (*gk - yk * dot) / n;
        }
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
    let raw = net.forward(&x, &mut cache);
    let dim = net.out();
    let emb = if cfg.normalize {
        raw.chunks_exact(dim).flat_map(|r| r.iter().map(move |v| v / norm(r))).collect()
    } else {
        raw.clone()
    };
    let mut demb = vec![0.0f32; emb.len()];
    let opts = HingeOptions { margin: cfg.margin, form: cfg.hinge, pos_weight: cfg.pos_weight };
    let loss = hinge_pairs_with(&emb, dim, &a, &b, &pairs.truth, &opts, &mut demb);
    if grad {
        if cfg.normalize {
            normalize_backward(&raw, &emb, &mut demb, dim);
        }
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
    let t = &cfg.training;
    let mut net = DenseNet::<f32>::new(&cfg.net, cfg.features.features.len(), &mut Rng::new(t.seed));
    let mut run = StageRun::open(out, cfg, &mut net, t.lr, resume, BestBy::EfficiencyAtBudget)?;
    for epoch in run.start_epoch..t.epochs {
        let t0 = Instant::now();
        let mut order: Vec<usize> = (0..train.len()).collect();
        Rng::for_stream(&[t.seed, epoch, 0]).shuffle(&mut order);
        let (mut loss_sum, mut steps) = (0.0, 0usize);
        for (k, &e) in order.iter().enumerate() {
            let ev = &train[e];
            let mut rng = Rng::for_stream(&[t.seed, epoch, 1 + k as u64]);
            // Hard negatives: different particles within the margin of the current embedding.
            let emb = embed_rows(&net, cfg, &ev.x);
            let hard: Vec<(u32, u32)> = radius_pairs(&emb, net.out(), cfg.margin, cfg.k_max)?
                .into_iter()
                .filter(|&(a, b)| !ev.same_particle(a, b))
                .collect();
            for _ in 0..t.steps_per_event.max(1) {
                let pairs = sample_pairs(cfg, ev, &hard, &mut rng);
                net.params.zero_grad();
                loss_sum += pairs_loss(&mut net, cfg, ev, &pairs, true);
                steps += 1;
                step(&mut run.opt, &mut net.params, t.clip_grad_norm, t.lr_at(epoch));
            }
        }
        let (mut val_loss, mut figures) = (0.0, GraphFigures::default());
        let (mut budget, mut wide) = (GraphFigures::default(), GraphFigures::default());
        for (k, ev) in val.iter().enumerate() {
            let pairs = sample_pairs(cfg, ev, &[], &mut Rng::for_stream(&[t.seed, u64::MAX, k as u64]));
            val_loss += pairs_loss(&mut net, cfg, ev, &pairs, false) / val.len() as f64;
            let emb = embed_rows(&net, cfg, &ev.x);
            figures.add(&graph_figures(&emb, net.out(), ev, cfg.margin, cfg.k_max)?);
            budget.add(&budget_figures(&emb, net.out(), ev, cfg.k_max)?);
            if cfg.wide_k_max > 0 {
                let radius = cfg.wide_radius.unwrap_or(f64::INFINITY);
                wide.add(&graph_figures(&emb, net.out(), ev, radius, cfg.wide_k_max)?);
            }
        }
        let mut record =
            StageRecord::new(epoch, loss_sum / steps.max(1) as f64, val_loss, &figures, t0.elapsed().as_secs_f64())
                .with_budget(&budget);
        if cfg.wide_k_max > 0 {
            record = record.with_wide(cfg.wide_k_max, &wide);
        }
        on_epoch(&record);
        run.finish_epoch(&net, record)?;
    }
    Ok(run.records)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config.toml written before the wide budget (the q22 run's keys) reads with the
    /// default of 48 neighbours and no radius limit, and writes them back.
    #[test]
    fn an_older_config_reads_with_the_default_wide_budget() {
        let old = "margin = 0.2\nk_max = 16\ntrain_pt_min = 0.5\n\n[net]\nhidden = 128\nhidden_layers = 4\nout = 8\n";
        let cfg: EmbeddingConfig = toml::from_str(old).unwrap();
        assert_eq!((cfg.wide_k_max, cfg.wide_radius, cfg.k_max, cfg.net.out), (48, None, 16, 8));
        let set: EmbeddingConfig = toml::from_str(&format!("wide_k_max = 32\nwide_radius = 0.5\n{old}")).unwrap();
        assert_eq!((set.wide_k_max, set.wide_radius), (32, Some(0.5)));
        let back: EmbeddingConfig = toml::from_str(&toml::to_string(&set).unwrap()).unwrap();
        assert_eq!(back, set);
    }

    /// The gradient through the unit-sphere projection equals central differences of a loss
    /// on the projected rows, and the projection leaves unit rows.
    #[test]
    fn normalize_backward_matches_central_differences() {
        let dim = 3;
        let raw = vec![0.3f32, -1.2, 0.5, 2.0, 0.1, -0.4];
        let w = [0.7f32, -0.2, 1.1, -0.5, 0.9, 0.3];
        let project =
            |x: &[f32]| -> Vec<f32> { x.chunks_exact(dim).flat_map(|r| r.iter().map(move |v| v / norm(r))).collect() };
        let loss = |x: &[f32]| project(x).iter().zip(&w).map(|(y, w)| y * w).sum::<f32>();
        let unit = project(&raw);
        for r in unit.chunks_exact(dim) {
            assert!((norm(r) - 1.0).abs() < 1e-6);
        }
        let mut g = w.to_vec();
        normalize_backward(&raw, &unit, &mut g, dim);
        let h = 1e-3;
        for i in 0..raw.len() {
            let (mut p, mut m) = (raw.clone(), raw.clone());
            p[i] += h;
            m[i] -= h;
            let fd = (loss(&p) - loss(&m)) / (2.0 * h);
            assert!((fd - g[i]).abs() < 1e-3, "component {i}: {fd} vs {}", g[i]);
        }
    }
}
