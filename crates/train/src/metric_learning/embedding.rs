//! The hit embedding: a [`DenseNet`] from hit features to a point of an embedding space,
//! trained with the hinge loss on pairs ([`trackgnn_engine::loss::hinge_pairs`]): the true
//! pairs of module-wise truth (every particle above `train_pt_min`, prompt and secondary)
//! pulled within the margin, random pairs and hard negatives (pairs of different particles that
//! the current embedding puts within the margin) pushed beyond it.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use trackgnn_engine::DenseNet;
use trackgnn_engine::loss::{HingeOptions, hinge_pairs_with};
use trackgnn_engine::mlp::MlpCache;
use trackgnn_graph::metric::radius_pairs;
use trackgnn_graph::truth::pair_key;
use trackgnn_trackml::rng::Rng;

use super::trainer::{StageOutcome, StageSteps, StageTrainer};
use super::{BestBy, GraphFigures, PreparedEvent, StageRecord, StageRun, gather_rows};
use crate::epochs::Progress;
use crate::error::Result;
pub use trackgnn_model::stages::embedding::{EmbeddingConfig, EmbeddingModel, embed_rows, norm};

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

/// The embedding's steps: hinge loss on sampled pairs, hard negatives from the current
/// embedding of each event.
struct EmbeddingSteps<'c> {
    cfg: &'c EmbeddingConfig,
    train: &'c [PreparedEvent],
    val: &'c [PreparedEvent],
    /// The hard negatives of the event being trained.
    hard: Vec<(u32, u32)>,
}

impl StageSteps for EmbeddingSteps<'_> {
    fn train_events(&self) -> usize {
        self.train.len()
    }

    fn begin_event(&mut self, net: &DenseNet<f32>, e: usize) -> Result<bool> {
        // Hard negatives: different particles within the margin of the current embedding.
        let ev = &self.train[e];
        let emb = embed_rows(net, self.cfg, &ev.x);
        self.hard = radius_pairs(&emb, net.out(), self.cfg.margin, self.cfg.k_max)?
            .into_iter()
            .filter(|&(a, b)| !ev.same_particle(a, b))
            .collect();
        Ok(true)
    }

    fn step_loss(&mut self, net: &mut DenseNet<f32>, e: usize, rng: &mut Rng) -> f64 {
        let ev = &self.train[e];
        let pairs = sample_pairs(self.cfg, ev, &self.hard, rng);
        pairs_loss(net, self.cfg, ev, &pairs, true)
    }

    fn validate(&mut self, net: &mut DenseNet<f32>, epoch: u64, train_loss: f64) -> Result<StageRecord> {
        let (cfg, val, seed) = (self.cfg, self.val, self.cfg.training.seed);
        let (mut val_loss, mut figures) = (0.0, GraphFigures::default());
        let (mut budget, mut wide) = (GraphFigures::default(), GraphFigures::default());
        for (k, ev) in val.iter().enumerate() {
            let pairs = sample_pairs(cfg, ev, &[], &mut Rng::for_stream(&[seed, u64::MAX, k as u64]));
            val_loss += pairs_loss(net, cfg, ev, &pairs, false) / val.len() as f64;
            let emb = embed_rows(net, cfg, &ev.x);
            figures.add(&graph_figures(&emb, net.out(), ev, cfg.margin, cfg.k_max)?);
            budget.add(&budget_figures(&emb, net.out(), ev, cfg.k_max)?);
            if cfg.wide_k_max > 0 {
                let radius = cfg.wide_radius.unwrap_or(f64::INFINITY);
                wide.add(&graph_figures(&emb, net.out(), ev, radius, cfg.wide_k_max)?);
            }
        }
        let record = StageRecord::new(epoch, train_loss, val_loss, &figures, 0.0).with_budget(&budget);
        Ok(if cfg.wide_k_max > 0 { record.with_wide(cfg.wide_k_max, &wide) } else { record })
    }
}

/// Trains an embedding into run directory `out` (see [`super`] for its files), or with
/// `resume` continues the run there, through the epoch driver ([`crate::epochs`]): `progress`
/// sees each step and epoch; when `stop` turns true the run checkpoints after the event in
/// hand and returns, `interrupted` (resuming it goes on exactly from there).
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
    progress: &dyn Progress<StageRecord>,
    stop: &AtomicBool,
) -> Result<StageOutcome> {
    if train.is_empty() || val.is_empty() {
        return Err(crate::Error::NoEvents { stage: "an embedding" });
    }
    let t = &cfg.training;
    let mut net = DenseNet::<f32>::new(&cfg.net, cfg.features.features.len(), &mut Rng::new(t.seed));
    let run = StageRun::open(out, cfg, &mut net, t.lr, resume, BestBy::EfficiencyAtBudget)?;
    let steps = EmbeddingSteps { cfg, train, val, hard: Vec::new() };
    StageTrainer { run, net, training: t, steps }.train(progress, stop)
}

#[cfg(test)]
mod tests {
    use super::*;

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
