//! The edge filter: a small [`DenseNet`] on the two hits' features of each candidate edge of
//! the embedding's radius graph, trained with binary cross-entropy against module-wise truth
//! (every particle); edges scoring below the cut are dropped before the GNN.

use std::collections::HashSet;
use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use trackgnn_engine::loss::{bce_with_logits, sigmoid};
use trackgnn_engine::mlp::MlpCache;
use trackgnn_engine::{DenseNet, DenseNetConfig};
use trackgnn_graph::features::{Feature, FeatureConfig, HitTable};
use trackgnn_graph::metric::{EdgeScorer, HitEmbedder, orient, radius_pairs};
use trackgnn_graph::truth::pair_key;
use trackgnn_trackml::physics::wrap_period;
use trackgnn_trackml::rng::Rng;

use super::embedding::{EmbeddingConfig, EmbeddingModel};
use super::{BestBy, GraphFigures, PreparedEvent, StageConfig, StageModel, StageRecord, StageRun, StageTraining, step};
use crate::error::Result;

/// Everything that decides a filter run (its `config.toml`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FilterConfig {
    /// Features of each of the edge's two hits (the input is both, source first).
    pub features: FeatureConfig,
    /// The network (its `out` must be 1, the logit).
    pub net: DenseNetConfig,
    /// Radius of the embedding's graph the filter trains on (`None`: the embedding's margin).
    pub radius: Option<f64>,
    /// Neighbours per hit of that graph (`None`: the embedding's `k_max`).
    pub k_max: Option<usize>,
    /// Edges scoring below this are dropped (recorded in the graph recipe).
    pub cut: f64,
    /// Weight of the true edges in the loss.
    pub pos_weight: f64,
    /// Edges per step (sampled).
    pub edges_per_step: usize,
    /// When positive, the input also holds the differences b − a of the two hits' features
    /// (φ wrapped into (−π, π]) times this. Neighbouring hits of a track differ by a few
    /// hundredths of the features' ranges, which a small network on the two hits alone
    /// resolves only after many steps (at 48 neighbours per hit it stayed at the constant
    /// predictor's loss). 0, the default, leaves them out, as before the key.
    pub difference_scale: f64,
    /// Optimisation.
    pub training: StageTraining,
}

impl Default for FilterConfig {
    fn default() -> Self {
        FilterConfig {
            features: EmbeddingConfig::default().features,
            net: DenseNetConfig { hidden: 64, hidden_layers: 3, out: 1 },
            radius: None,
            k_max: None,
            cut: 0.1,
            pos_weight: 2.0,
            edges_per_step: 50_000,
            difference_scale: 0.0,
            training: StageTraining::default(),
        }
    }
}

/// How an edge's input row is made from its two hits' feature rows.
#[derive(Clone, Copy, Debug, PartialEq)]
struct EdgeInput {
    /// Features per hit.
    dim: usize,
    /// [`FilterConfig::difference_scale`] (0: no differences).
    difference_scale: f32,
    /// The φ feature's column and its period in feature units (2π / scale).
    phi: Option<(usize, f32)>,
}

impl EdgeInput {
    fn new(cfg: &FilterConfig) -> EdgeInput {
        let f = &cfg.features.features;
        let phi =
            f.iter().position(|s| s.name == Feature::Phi).map(|i| (i, (std::f64::consts::TAU / f[i].scale) as f32));
        EdgeInput { dim: f.len(), difference_scale: cfg.difference_scale as f32, phi }
    }

    /// Width of a row.
    fn width(&self) -> usize {
        if self.difference_scale > 0.0 { 3 * self.dim } else { 2 * self.dim }
    }

    /// The rows of edges `src → dst`: the two hits' features, source first, then (with a
    /// difference scale) their differences.
    fn rows(&self, x: &[f32], src: &[u32], dst: &[u32]) -> Vec<f32> {
        let dim = self.dim;
        let mut out = Vec::with_capacity(src.len() * self.width());
        for (&a, &b) in src.iter().zip(dst) {
            let (xa, xb) = (&x[a as usize * dim..(a as usize + 1) * dim], &x[b as usize * dim..(b as usize + 1) * dim]);
            out.extend_from_slice(xa);
            out.extend_from_slice(xb);
            if self.difference_scale > 0.0 {
                for (k, (va, vb)) in xa.iter().zip(xb).enumerate() {
                    let d = match self.phi {
                        Some((col, period)) if col == k => wrap_period(vb - va, period),
                        _ => vb - va,
                    };
                    out.push(d * self.difference_scale);
                }
            }
        }
        out
    }
}

/// A trained filter, ready for graph building.
pub type FilterModel = StageModel<FilterConfig>;

impl StageConfig for FilterConfig {
    fn net(&self) -> &DenseNetConfig {
        &self.net
    }

    /// The two hits' features.
    fn input_width(&self) -> usize {
        EdgeInput::new(self).width()
    }
}

/// The logits of edges `src → dst` by `net` over node features `x`, in slices, so the input
/// rows and activations of millions of edges never exist at once.
fn edge_logits(net: &DenseNet<f32>, input: &EdgeInput, x: &[f32], src: &[u32], dst: &[u32]) -> Vec<f32> {
    let mut out = Vec::with_capacity(src.len());
    for (s, d) in src.chunks(1 << 16).zip(dst.chunks(1 << 16)) {
        out.extend(net.infer(&input.rows(x, s, d)));
    }
    out
}

impl EdgeScorer for FilterModel {
    fn score(&self, table: &HitTable, src: &[u32], dst: &[u32]) -> trackgnn_graph::Result<Vec<f32>> {
        let x = table.features(&self.config.features)?;
        Ok(edge_logits(&self.net, &EdgeInput::new(&self.config), &x, src, dst).into_iter().map(sigmoid).collect())
    }
}

/// The embedding's candidate edges of one event, their inputs and labels.
struct Candidates {
    src: Vec<u32>,
    dst: Vec<u32>,
    x: Vec<f32>,
    y: Vec<u8>,
}

fn candidates(
    cfg: &FilterConfig,
    emb: &EmbeddingModel,
    ev: &PreparedEvent,
    radius: f64,
    k_max: usize,
) -> Result<Candidates> {
    let e = emb.embed(&ev.table)?;
    let pairs = radius_pairs(&e, emb.dim(), radius, k_max)?;
    let (src, dst) = orient(&ev.table, &pairs);
    let x = ev.table.features(&cfg.features)?;
    let y = src.iter().zip(&dst).map(|(&a, &b)| ev.true_keys.contains(&pair_key(a, b)) as u8).collect();
    Ok(Candidates { src, dst, x, y })
}

/// BCE of edges `idx` of an event's candidates, accumulating the gradients.
fn edges_loss(net: &mut DenseNet<f32>, cfg: &FilterConfig, c: &Candidates, idx: &[usize]) -> f64 {
    let src: Vec<u32> = idx.iter().map(|&i| c.src[i]).collect();
    let dst: Vec<u32> = idx.iter().map(|&i| c.dst[i]).collect();
    let y: Vec<u8> = idx.iter().map(|&i| c.y[i]).collect();
    let x = EdgeInput::new(cfg).rows(&c.x, &src, &dst);
    let mut cache = MlpCache::default();
    let logits = net.forward(&x, &mut cache);
    let mut dl = vec![0.0f32; logits.len()];
    let loss = bce_with_logits(&logits, &y, None, cfg.pos_weight, &mut dl);
    net.backward(&x, &cache, &dl);
    loss
}

/// Trains a filter on the radius graph of the embedding in `embedding_run` into run directory
/// `out`, or with `resume` continues the run there.
///
/// # Errors
/// No events, an output width other than 1, the embedding's errors, I/O errors.
pub fn train_filter(
    out: &Path,
    cfg: &FilterConfig,
    embedding: &EmbeddingModel,
    train: &[PreparedEvent],
    val: &[PreparedEvent],
    resume: bool,
    mut on_epoch: impl FnMut(&StageRecord),
) -> Result<Vec<StageRecord>> {
    if train.is_empty() || val.is_empty() {
        return Err(crate::Error::Config("training a filter needs training and validation events".into()));
    }
    if cfg.net.out != 1 {
        return Err(crate::Error::Config(format!(
            "filter: net.out must be 1 (one logit per edge), not {}",
            cfg.net.out
        )));
    }
    let radius = cfg.radius.unwrap_or(embedding.config.margin);
    let k_max = cfg.k_max.unwrap_or(embedding.config.k_max);
    let train_c: Vec<Candidates> =
        train.iter().map(|ev| candidates(cfg, embedding, ev, radius, k_max)).collect::<Result<_>>()?;
    let val_c: Vec<Candidates> =
        val.iter().map(|ev| candidates(cfg, embedding, ev, radius, k_max)).collect::<Result<_>>()?;
    let t = &cfg.training;
    let mut net = DenseNet::<f32>::new(&cfg.net, cfg.input_width(), &mut Rng::new(t.seed));
    let mut run = StageRun::open(out, cfg, &mut net, t.lr, resume, BestBy::ValLoss)?;
    for epoch in run.start_epoch..t.epochs {
        let t0 = Instant::now();
        let mut order: Vec<usize> = (0..train.len()).collect();
        Rng::for_stream(&[t.seed, epoch, 0]).shuffle(&mut order);
        let (mut loss_sum, mut steps) = (0.0, 0usize);
        for (k, &e) in order.iter().enumerate() {
            let c = &train_c[e];
            if c.src.is_empty() {
                continue;
            }
            let mut rng = Rng::for_stream(&[t.seed, epoch, 1 + k as u64]);
            for _ in 0..t.steps_per_event.max(1) {
                let n = c.src.len().min(cfg.edges_per_step);
                let idx: Vec<usize> = if n == c.src.len() {
                    (0..n).collect()
                } else {
                    (0..n).map(|_| rng.below(c.src.len() as u64) as usize).collect()
                };
                net.params.zero_grad();
                loss_sum += edges_loss(&mut net, cfg, c, &idx);
                steps += 1;
                step(&mut run.opt, &mut net.params, t.clip_grad_norm, t.lr_at(epoch));
            }
        }
        let (mut val_loss, mut figures) = (0.0, GraphFigures::default());
        for (ev, c) in val.iter().zip(&val_c) {
            // Every candidate edge, without the training pass's cache (gigabytes at k = 48).
            let logits = edge_logits(&net, &EdgeInput::new(cfg), &c.x, &c.src, &c.dst);
            let mut dl = vec![0.0f32; logits.len()];
            val_loss += bce_with_logits(&logits, &c.y, None, cfg.pos_weight, &mut dl) / val.len() as f64;
            let keys: HashSet<u64> = (0..c.src.len())
                .filter(|&i| sigmoid(logits[i]) as f64 >= cfg.cut)
                .map(|i| pair_key(c.src[i], c.dst[i]))
                .collect();
            figures.add(&GraphFigures::of_event(ev, &keys));
        }
        let record =
            StageRecord::new(epoch, loss_sum / steps.max(1) as f64, val_loss, &figures, t0.elapsed().as_secs_f64());
        on_epoch(&record);
        run.finish_epoch(&net, record)?;
    }
    Ok(run.records)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows hold both hits, then their scaled differences with φ wrapped across ±π; without a
    /// scale (runs before the key) only the two hits.
    #[test]
    fn edge_rows_hold_the_wrapped_differences_when_asked() {
        let pi = std::f32::consts::PI;
        // Features r/1000, φ/π, z/1000, x/1000, y/1000, η/3: hit 0 just below +π, hit 1 just above −π.
        let x = [0.1, 0.98, 0.2, 0.0, 0.0, 0.3, 0.15, -0.99, 0.25, 0.0, 0.0, 0.33];
        let plain = FilterConfig::default();
        let input = EdgeInput::new(&plain);
        assert_eq!((input.width(), plain.input_width()), (12, 12));
        assert_eq!(input.rows(&x, &[0], &[1]), x.to_vec());
        let cfg = FilterConfig { difference_scale: 10.0, ..FilterConfig::default() };
        let input = EdgeInput::new(&cfg);
        assert_eq!((input.width(), cfg.input_width()), (18, 18));
        let row = input.rows(&x, &[0, 1], &[1, 0]);
        assert_eq!(row.len(), 36);
        let expect = [0.5, 0.3, 0.5, 0.0, 0.0, 0.3];
        for (k, e) in expect.iter().enumerate() {
            assert!((row[12 + k] - e).abs() < 1e-5, "column {k}: {} vs {e}", row[12 + k]);
            assert!((row[18 + 12 + k] + e).abs() < 1e-5, "reversed, column {k}");
        }
        // The φ difference is 0.03 of π (rad / π), not −1.97.
        assert!((row[13] / 10.0 * pi - 0.03 * pi).abs() < 1e-5);
    }
}
