//! The edge filter: a small [`DenseNet`] on the two hits' features of each candidate edge of
//! the embedding's radius graph (with, when asked, their differences and their distance in the
//! embedding), trained with binary cross-entropy against module-wise truth (every particle);
//! edges scoring below the cut are dropped before the GNN.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use trackgnn_engine::DenseNet;
use trackgnn_engine::loss::{bce_with_logits, sigmoid};
use trackgnn_engine::mlp::MlpCache;
use trackgnn_graph::metric::{HitEmbedder, orient, radius_pairs};
use trackgnn_graph::recipe::PROMPT_R;
use trackgnn_graph::truth::pair_key;
use trackgnn_trackml::rng::Rng;

use super::embedding::EmbeddingModel;
use super::trainer::{StageOutcome, StageSteps, StageTrainer};
use super::{BestBy, GraphFigures, PreparedEvent, StageConfig, StageRecord, StageRun};
use crate::epochs::Progress;
use crate::error::Result;
pub use trackgnn_model::stages::filter::{EdgeInput, Embedded, FilterConfig, FilterModel, edge_logits};

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

/// The filter's steps: binary cross-entropy on a sample of each event's candidate edges.
struct FilterSteps<'c> {
    cfg: &'c FilterConfig,
    train: Vec<Candidates>,
    val: &'c [PreparedEvent],
    val_c: Vec<Candidates>,
}

impl StageSteps for FilterSteps<'_> {
    fn train_events(&self) -> usize {
        self.train.len()
    }

    fn begin_event(&mut self, _net: &DenseNet<f32>, e: usize) -> Result<bool> {
        Ok(!self.train[e].src.is_empty())
    }

    fn step_loss(&mut self, net: &mut DenseNet<f32>, e: usize, rng: &mut Rng) -> f64 {
        let c = &self.train[e];
        let n = c.src.len().min(self.cfg.edges_per_step);
        let idx: Vec<usize> = if n == c.src.len() {
            (0..n).collect()
        } else {
            (0..n).map(|_| rng.below(c.src.len() as u64) as usize).collect()
        };
        edges_loss(net, self.cfg, c, &idx)
    }

    fn validate(&mut self, net: &mut DenseNet<f32>, epoch: u64, train_loss: f64) -> Result<StageRecord> {
        let cfg = self.cfg;
        let (mut val_loss, mut figures) = (0.0, GraphFigures::default());
        for (ev, c) in self.val.iter().zip(&self.val_c) {
            // Every candidate edge, without the training pass's cache (gigabytes at k = 48).
            let logits = edge_logits(net, &EdgeInput::new(cfg), &c.x, c.embedded(), &c.src, &c.dst);
            let mut dl = vec![0.0f32; logits.len()];
            val_loss += bce_with_logits(&logits, &c.y, c.w.as_deref(), cfg.pos_weight, &mut dl) / self.val.len() as f64;
            let keys: HashSet<u64> = (0..c.src.len())
                .filter(|&i| sigmoid(logits[i]) as f64 >= cfg.cut)
                .map(|i| pair_key(c.src[i], c.dst[i]))
                .collect();
            figures.add(&GraphFigures::of_event(ev, &keys));
        }
        Ok(StageRecord::new(epoch, train_loss, val_loss, &figures, 0.0))
    }
}

/// Trains a filter on the radius graph of the embedding in `embedding_run` into run directory
/// `out`, or with `resume` continues the run there, through the epoch driver as
/// [`super::embedding::train_embedding`] does (`progress`, `stop`).
///
/// # Errors
/// No events, an output width other than 1, the embedding's errors, I/O errors.
#[allow(clippy::too_many_arguments)]
pub fn train_filter(
    out: &Path,
    cfg: &FilterConfig,
    embedding: &EmbeddingModel,
    train: &[PreparedEvent],
    val: &[PreparedEvent],
    resume: bool,
    progress: &dyn Progress<StageRecord>,
    stop: &AtomicBool,
) -> Result<StageOutcome> {
    if train.is_empty() || val.is_empty() {
        return Err(crate::Error::NoEvents { stage: "a filter" });
    }
    if cfg.net.out != 1 {
        return Err(crate::Error::config(
            "net.out",
            format!("must be 1 for a filter (one logit per edge), not {}", cfg.net.out),
        ));
    }
    let radius = cfg.radius.unwrap_or(embedding.config.margin);
    let k_max = cfg.k_max.unwrap_or(embedding.config.k_max);
    let candidates_of = |events: &[PreparedEvent]| -> Result<Vec<Candidates>> {
        events.iter().map(|ev| candidates(cfg, embedding, ev, radius, k_max)).collect()
    };
    let steps = FilterSteps { cfg, train: candidates_of(train)?, val, val_c: candidates_of(val)? };
    let t = &cfg.training;
    let mut net = DenseNet::<f32>::new(&cfg.net, cfg.input_width(), &mut Rng::new(t.seed));
    let run = StageRun::open(out, cfg, &mut net, t.lr, resume, BestBy::ValLoss)?;
    StageTrainer { run, net, training: t, steps }.train(progress, stop)
}

#[cfg(test)]
mod tests {
    use super::*;

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
