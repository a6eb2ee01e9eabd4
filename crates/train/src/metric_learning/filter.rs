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
use trackgnn_graph::features::{FeatureConfig, HitTable};
use trackgnn_graph::metric::{EdgeScorer, HitEmbedder, orient, radius_pairs};
use trackgnn_graph::truth::pair_key;
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
            training: StageTraining::default(),
        }
    }
}

/// The rows (cat of the two hits' features) of edges `src → dst`.
fn edge_inputs(x: &[f32], dim: usize, src: &[u32], dst: &[u32]) -> Vec<f32> {
    let mut out = Vec::with_capacity(src.len() * 2 * dim);
    for (&a, &b) in src.iter().zip(dst) {
        out.extend_from_slice(&x[a as usize * dim..(a as usize + 1) * dim]);
        out.extend_from_slice(&x[b as usize * dim..(b as usize + 1) * dim]);
    }
    out
}

/// A trained filter, ready for graph building.
pub type FilterModel = StageModel<FilterConfig>;

impl StageConfig for FilterConfig {
    fn net(&self) -> &DenseNetConfig {
        &self.net
    }

    /// The two hits' features.
    fn input_width(&self) -> usize {
        2 * self.features.features.len()
    }
}

impl EdgeScorer for FilterModel {
    fn score(&self, table: &HitTable, src: &[u32], dst: &[u32]) -> trackgnn_graph::Result<Vec<f32>> {
        let x = table.features(&self.config.features)?;
        let dim = self.config.features.features.len();
        // In slices, so the input rows of a million edges never exist at once.
        let mut out = Vec::with_capacity(src.len());
        for (s, d) in src.chunks(1 << 16).zip(dst.chunks(1 << 16)) {
            out.extend(self.net.infer(&edge_inputs(&x, dim, s, d)).into_iter().map(sigmoid));
        }
        Ok(out)
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

/// BCE of edges `idx` of an event's candidates; with `grad`, accumulates the gradients.
/// Returns the loss and the logits.
fn edges_loss(
    net: &mut DenseNet<f32>,
    cfg: &FilterConfig,
    c: &Candidates,
    idx: &[usize],
    grad: bool,
) -> (f64, Vec<f32>) {
    let dim = cfg.features.features.len();
    let src: Vec<u32> = idx.iter().map(|&i| c.src[i]).collect();
    let dst: Vec<u32> = idx.iter().map(|&i| c.dst[i]).collect();
    let y: Vec<u8> = idx.iter().map(|&i| c.y[i]).collect();
    let x = edge_inputs(&c.x, dim, &src, &dst);
    let mut cache = MlpCache::default();
    let logits = net.forward(&x, &mut cache);
    let mut dl = vec![0.0f32; logits.len()];
    let loss = bce_with_logits(&logits, &y, None, cfg.pos_weight, &mut dl);
    if grad {
        net.backward(&x, &cache, &dl);
    }
    (loss, logits)
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
    let mut net = DenseNet::<f32>::new(&cfg.net, 2 * cfg.features.features.len(), &mut Rng::new(t.seed));
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
                loss_sum += edges_loss(&mut net, cfg, c, &idx, true).0;
                steps += 1;
                step(&mut run.opt, &mut net.params, t.clip_grad_norm, t.lr_at(epoch));
            }
        }
        let (mut val_loss, mut figures) = (0.0, GraphFigures::default());
        for (ev, c) in val.iter().zip(&val_c) {
            let idx: Vec<usize> = (0..c.src.len()).collect();
            let (loss, logits) = edges_loss(&mut net, cfg, c, &idx, false);
            val_loss += loss / val.len() as f64;
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
