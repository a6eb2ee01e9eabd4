//! Evaluation of a model on graphs: the field's edge metrics per event and their mean, with
//! the events shared among ranks and the figures combined over all of them.

use std::time::Instant;

use trackgnn_engine::GnnExecutor;
use trackgnn_engine::{AuxTargets, EdgeTargets};

use crate::config::TrainConfig;
use crate::data::{GraphSet, LossWeights, Prefetcher};
use crate::dist::Comm;
use crate::error::Result;
use crate::metrics::{EdgeMetrics, roc_curve};

/// What an evaluation gives.
#[derive(Clone, Debug)]
pub struct EvalResult {
    /// Mean over events of each metric (and of the loss).
    pub mean: EdgeMetrics,
    /// Events evaluated (on all ranks).
    pub events: usize,
    /// Mean over events of the auxiliary loss (mean squared error of log10 pT over the true
    /// edges); `None` for a model without the auxiliary head.
    pub aux_loss: Option<f64>,
    /// ROC curve of this rank's events, pooled (for plots; empty unless asked).
    pub roc: Vec<(f64, f64)>,
    /// Wall time, seconds.
    pub seconds: f64,
}

/// Figures per event sent between ranks: a validity flag (padding rows have 0), the loss, the
/// five metrics and the auxiliary loss (0 without the head).
const FIELDS: usize = 8;

/// Evaluates `model` on the graphs `idx` of `set`; rank r takes every size-th graph from r.
pub fn evaluate(
    model: &dyn GnnExecutor,
    set: &GraphSet,
    idx: &[usize],
    cfg: &TrainConfig,
    comm: &mut dyn Comm,
    want_roc: bool,
) -> Result<EvalResult> {
    let t0 = Instant::now();
    let (rank, size) = (comm.rank(), comm.size());
    let mine: Vec<usize> = idx.iter().copied().skip(rank).step_by(size).collect();
    let per_rank = idx.len().div_ceil(size);
    let mut rows = vec![f64::NAN; per_rank * FIELDS];
    let has_aux = model.config().aux_pt;
    let mut loader = Prefetcher::new(mine.iter().map(|&i| set.files[i].1.clone()).collect(), LossWeights::of(cfg));
    let (mut pooled_logits, mut pooled_pos) = (Vec::new(), Vec::new());
    for k in 0..mine.len() {
        let s = loader.next_sample().expect("one sample per path")?;
        // Inference keeps two states, not a backward's worth: whole events fit where training
        // needed sectors.
        let aux = has_aux.then_some(AuxTargets { log_pt: &s.log_pt, weight: &s.aux_weight, count: s.aux_edges });
        let targets = EdgeTargets { target: &s.target, weight: &s.weight, pos_weight: cfg.pos_weight, aux };
        let f = model
            .validate_graph(&s.input, &targets, &s.y, cfg.threshold, want_roc)
            .map_err(|e| crate::Error::Model(trackgnn_model::Error::from(e)))?;
        let m = EdgeMetrics::of_counts(&f.counts, f.auc, f.loss.loss);
        let aux_loss = f.loss.aux_loss;
        rows[k * FIELDS..(k + 1) * FIELDS].copy_from_slice(&[
            1.0,
            m.loss,
            m.efficiency,
            m.target_purity,
            m.total_purity,
            m.purity,
            m.auc,
            aux_loss,
        ]);
        if want_roc {
            pooled_logits.extend_from_slice(&f.logits);
            pooled_pos.extend_from_slice(&s.target);
        }
    }
    let all = comm.allgather_f64(&rows)?;
    let valid = all.chunks_exact(FIELDS).filter(|r| r[0] == 1.0);
    let aux_loss = has_aux.then(|| valid.clone().map(|r| r[7]).sum::<f64>() / valid.count().max(1) as f64);
    let events: Vec<EdgeMetrics> = all
        .chunks_exact(FIELDS)
        .filter(|r| r[0] == 1.0)
        .map(|r| EdgeMetrics {
            loss: r[1],
            efficiency: r[2],
            target_purity: r[3],
            total_purity: r[4],
            purity: r[5],
            auc: r[6],
        })
        .collect();
    let roc =
        if want_roc && !pooled_logits.is_empty() { roc_curve(&pooled_logits, &pooled_pos, 200) } else { Vec::new() };
    let (mean, seconds) = (EdgeMetrics::mean(&events), t0.elapsed().as_secs_f64());
    Ok(EvalResult { mean, events: events.len(), aux_loss, roc, seconds })
}
