//! The edge filter: a small [`DenseNet`] on the two hits' features of each candidate edge of
//! the embedding's radius graph (with, when asked, their differences and their distance in the
//! embedding), trained with binary cross-entropy against module-wise truth (every particle);
//! edges scoring below the cut are dropped before the GNN.

use std::collections::HashSet;
use std::path::Path;
use std::time::Instant;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use trackgnn_engine::loss::{bce_with_logits, sigmoid};
use trackgnn_engine::mlp::MlpCache;
use trackgnn_engine::{DenseNet, DenseNetConfig};
use trackgnn_graph::features::{Feature, FeatureConfig, HitTable};
use trackgnn_graph::metric::{EdgeScorer, HitEmbedder, orient, radius_pairs};
use trackgnn_graph::recipe::PROMPT_R;
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
    /// When positive, the input also holds the two hits' Euclidean distance in the embedding
    /// times this (the embedding pulls a track's neighbouring hits within its margin, so
    /// 1 / margin puts the margin at 1). 0, the default, leaves it out, as before the key.
    pub distance_scale: f64,
    /// Weight of the true edges of secondaries (particles produced beyond 1 mm of the beam
    /// line) relative to the other true edges, whose weight is `pos_weight`: > 1 keeps more of
    /// the displaced tracks' edges, which a prompt-dominated sample otherwise sacrifices. 1,
    /// the default, weighs them alike, as before the key.
    pub secondary_weight: f64,
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
            distance_scale: 0.0,
            secondary_weight: 1.0,
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
    /// [`FilterConfig::distance_scale`] (0: no distance).
    distance_scale: f32,
}

/// The hits' embedding, rows × `dim` (for the distance input).
#[derive(Clone, Copy, Debug)]
struct Embedded<'a> {
    rows: &'a [f32],
    dim: usize,
}

impl Embedded<'_> {
    fn distance(&self, a: u32, b: u32) -> f32 {
        let (a, b) = (a as usize * self.dim, b as usize * self.dim);
        let (ea, eb) = (&self.rows[a..a + self.dim], &self.rows[b..b + self.dim]);
        ea.iter().zip(eb).map(|(u, v)| (u - v) * (u - v)).sum::<f32>().sqrt()
    }
}

impl EdgeInput {
    fn new(cfg: &FilterConfig) -> EdgeInput {
        let f = &cfg.features.features;
        let phi =
            f.iter().position(|s| s.name == Feature::Phi).map(|i| (i, (std::f64::consts::TAU / f[i].scale) as f32));
        EdgeInput {
            dim: f.len(),
            difference_scale: cfg.difference_scale as f32,
            phi,
            distance_scale: cfg.distance_scale as f32,
        }
    }

    /// Width of a row.
    fn width(&self) -> usize {
        let hits = if self.difference_scale > 0.0 { 3 * self.dim } else { 2 * self.dim };
        hits + (self.distance_scale > 0.0) as usize
    }

    /// The rows of edges `src → dst`: the two hits' features, source first, then (with a
    /// difference scale) their differences, then (with a distance scale) their scaled distance
    /// in `emb`.
    fn rows(&self, x: &[f32], emb: Embedded<'_>, src: &[u32], dst: &[u32]) -> Vec<f32> {
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
            if self.distance_scale > 0.0 {
                out.push(emb.distance(a, b) * self.distance_scale);
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

/// The logits of edges `src → dst` by `net` over node features `x`, in slices of 2^14 edges
/// on the current rayon pool's threads, so the input rows and activations of millions of
/// edges never exist at once.
fn edge_logits(
    net: &DenseNet<f32>,
    input: &EdgeInput,
    x: &[f32],
    emb: Embedded<'_>,
    src: &[u32],
    dst: &[u32],
) -> Vec<f32> {
    const SLICE: usize = 1 << 14;
    let slices: Vec<Vec<f32>> =
        src.par_chunks(SLICE).zip(dst.par_chunks(SLICE)).map(|(s, d)| net.infer(&input.rows(x, emb, s, d))).collect();
    slices.concat()
}

impl EdgeScorer for FilterModel {
    fn score(
        &self,
        table: &HitTable,
        embedding: &[f32],
        dim: usize,
        src: &[u32],
        dst: &[u32],
    ) -> trackgnn_graph::Result<Vec<f32>> {
        let x = table.features(&self.config.features)?;
        let emb = Embedded { rows: embedding, dim };
        Ok(edge_logits(&self.net, &EdgeInput::new(&self.config), &x, emb, src, dst).into_iter().map(sigmoid).collect())
    }
}

/// The embedding's candidate edges of one event, their inputs, labels and loss weights.
struct Candidates {
    src: Vec<u32>,
    dst: Vec<u32>,
    x: Vec<f32>,
    /// The hits' embedding and its width.
    emb: Vec<f32>,
    dim: usize,
    y: Vec<u8>,
    /// Each edge's weight in the loss, when some true edges weigh more than others.
    w: Option<Vec<f32>>,
}

impl Candidates {
    fn embedded(&self) -> Embedded<'_> {
        Embedded { rows: &self.emb, dim: self.dim }
    }
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
    let y: Vec<u8> = src.iter().zip(&dst).map(|(&a, &b)| ev.true_keys.contains(&pair_key(a, b)) as u8).collect();
    let w = ev.table.truth.as_ref().and_then(|t| loss_weights(&src, &y, &t.vertex_r, cfg.secondary_weight));
    Ok(Candidates { src, dst, x, emb: e, dim: emb.dim(), y, w })
}

/// Each edge's weight in the loss: `secondary_weight` for true edges whose source hit's
/// particle was produced beyond [`PROMPT_R`] of the beam line (`vertex_r` per node), 1 for the
/// others; `None` when every weight is 1.
fn loss_weights(src: &[u32], y: &[u8], vertex_r: &[f32], secondary_weight: f64) -> Option<Vec<f32>> {
    if secondary_weight == 1.0 {
        return None;
    }
    let secondary = |a: u32| vertex_r[a as usize] > PROMPT_R;
    Some(src.iter().zip(y).map(|(&a, &t)| if t == 1 && secondary(a) { secondary_weight as f32 } else { 1.0 }).collect())
}

/// BCE of edges `idx` of an event's candidates, accumulating the gradients.
fn edges_loss(net: &mut DenseNet<f32>, cfg: &FilterConfig, c: &Candidates, idx: &[usize]) -> f64 {
    let src: Vec<u32> = idx.iter().map(|&i| c.src[i]).collect();
    let dst: Vec<u32> = idx.iter().map(|&i| c.dst[i]).collect();
    let y: Vec<u8> = idx.iter().map(|&i| c.y[i]).collect();
    let w: Option<Vec<f32>> = c.w.as_ref().map(|w| idx.iter().map(|&i| w[i]).collect());
    let x = EdgeInput::new(cfg).rows(&c.x, c.embedded(), &src, &dst);
    let mut cache = MlpCache::default();
    let logits = net.forward(&x, &mut cache);
    let mut dl = vec![0.0f32; logits.len()];
    let loss = bce_with_logits(&logits, &y, w.as_deref(), cfg.pos_weight, &mut dl);
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
            let logits = edge_logits(&net, &EdgeInput::new(cfg), &c.x, c.embedded(), &c.src, &c.dst);
            let mut dl = vec![0.0f32; logits.len()];
            val_loss += bce_with_logits(&logits, &c.y, c.w.as_deref(), cfg.pos_weight, &mut dl) / val.len() as f64;
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
        let none = Embedded { rows: &[], dim: 0 };
        assert_eq!(input.rows(&x, none, &[0], &[1]), x.to_vec());
        let cfg = FilterConfig { difference_scale: 10.0, ..FilterConfig::default() };
        let input = EdgeInput::new(&cfg);
        assert_eq!((input.width(), cfg.input_width()), (18, 18));
        let row = input.rows(&x, none, &[0, 1], &[1, 0]);
        assert_eq!(row.len(), 36);
        let expect = [0.5, 0.3, 0.5, 0.0, 0.0, 0.3];
        for (k, e) in expect.iter().enumerate() {
            assert!((row[12 + k] - e).abs() < 1e-5, "column {k}: {} vs {e}", row[12 + k]);
            assert!((row[18 + 12 + k] + e).abs() < 1e-5, "reversed, column {k}");
        }
        // The φ difference is 0.03 of π (rad / π), not −1.97.
        assert!((row[13] / 10.0 * pi - 0.03 * pi).abs() < 1e-5);
        // With a distance scale, one more column: the scaled distance in the embedding.
        let cfg = FilterConfig { distance_scale: 5.0, ..cfg };
        let input = EdgeInput::new(&cfg);
        assert_eq!((input.width(), cfg.input_width()), (19, 19));
        let emb = Embedded { rows: &[0.0, 0.0, 0.03, 0.04], dim: 2 };
        let row = input.rows(&x, emb, &[0, 1], &[1, 0]);
        assert_eq!(row.len(), 38);
        assert!((row[18] - 0.25).abs() < 1e-6 && (row[37] - 0.25).abs() < 1e-6, "{row:?}");
        assert_eq!(&row[..18], &input.rows(&x, emb, &[0], &[1])[..18]);
    }

    /// Only true edges of secondaries weigh more; a weight of 1 needs no weights.
    #[test]
    fn secondary_true_edges_get_their_weight() {
        // Nodes 0, 1 prompt (0.1 mm), 2, 3 secondary (30 mm).
        let vertex_r = [0.1, 0.1, 30.0, 30.0];
        let (src, y) = ([0, 2, 2, 1], [1, 1, 0, 0]);
        assert_eq!(loss_weights(&src, &y, &vertex_r, 1.0), None);
        assert_eq!(loss_weights(&src, &y, &vertex_r, 3.0), Some(vec![1.0, 3.0, 1.0, 1.0]));
    }
}
