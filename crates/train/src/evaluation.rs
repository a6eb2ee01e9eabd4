//! A trained run evaluated on a graph directory: the edge metrics of the reference table
//! (`trackgnn eval`), on the run's own test (or other) events or on every graph.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use trackgnn_model::TrainedModel;

use crate::data::{GraphSet, LossWeights, load_sample};
use crate::dist::SingleProcess;
use crate::error::{Error, Result};
use crate::eval::evaluate;
use crate::{EdgeMetrics, RunDir, TrainConfig, Weights};

/// One part of a run's train/validation/test split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum SplitPart {
    /// The training events.
    Train,
    /// The validation events.
    Val,
    /// The test events.
    Test,
}

/// The edge metrics of a run on a graph directory (the Table-1 row). Fractions 0–1, seconds.
/// Its JSON is `trackgnn eval --json`'s; its `Display` the text.
#[derive(Clone, Debug, Serialize)]
pub struct RunEvaluation {
    /// The run directory.
    pub run: PathBuf,
    /// The graph directory.
    pub graphs: PathBuf,
    /// The weights file evaluated.
    pub weights: PathBuf,
    /// Events evaluated.
    pub events: usize,
    /// The score threshold of the metrics.
    pub threshold: f64,
    /// The edge metrics, means over the events (their keys are this JSON's own).
    #[serde(flatten)]
    pub metrics: EdgeMetrics,
    /// The run's last epoch time (NaN if it has no metrics).
    pub epoch_seconds: f64,
    /// The run's last seconds per batch (NaN if it has no metrics).
    pub seconds_per_batch: f64,
    /// Time of the evaluation.
    pub eval_seconds: f64,
}

/// Evaluates `run`'s `weights` with `cfg` (the run's configuration, its threshold possibly
/// changed) on the graphs of `graphs`, on the current rayon pool: on the run's `split` events
/// when `graphs` is the run's own graph directory, else (or without `split`) on every graph;
/// `precision` overrides the run's arithmetic.
pub fn evaluate_run(
    run: &RunDir,
    cfg: &TrainConfig,
    graphs: &Path,
    split: Option<SplitPart>,
    weights: &Weights,
    scoring: &trackgnn_model::Scoring,
) -> Result<RunEvaluation> {
    let set = GraphSet::open(graphs, 0)?;
    let events = run.read_events()?;
    let idx: Vec<usize> = match split {
        Some(split) if same_path(&events.graphs_dir, graphs) => {
            let ids = match split {
                SplitPart::Train => &events.train,
                SplitPart::Val => &events.val,
                SplitPart::Test => &events.test,
            };
            (0..set.len()).filter(|&i| ids.contains(&set.files[i].0)).collect()
        }
        _ => (0..set.len()).collect(),
    };
    if idx.is_empty() {
        return Err(Error::NothingToEvaluate { dir: graphs.to_path_buf() });
    }
    let first = load_sample(&set.files[idx[0]].1, LossWeights::of(cfg))?;
    let mut trained = TrainedModel::open(run, weights, first.input.node_dim, first.input.edge_dim)?;
    trained.apply(scoring)?;
    let r = evaluate(trained.executor(), &set, &idx, cfg, &mut SingleProcess, false)?;
    let last = run.read_metrics().ok().and_then(|v| v.last().cloned());
    let (epoch_seconds, seconds_per_batch) =
        last.as_ref().map_or((f64::NAN, f64::NAN), |l| (l.epoch_seconds, l.seconds_per_batch));
    Ok(RunEvaluation {
        run: run.root().to_path_buf(),
        graphs: graphs.to_path_buf(),
        weights: trained.weights,
        events: r.events,
        threshold: cfg.threshold,
        metrics: r.mean,
        epoch_seconds,
        seconds_per_batch,
        eval_seconds: r.seconds,
    })
}

impl fmt::Display for RunEvaluation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (graphs, weights) = (self.graphs.display(), self.weights.display());
        writeln!(f, "{} events of {graphs} with {weights}, threshold {}", self.events, self.threshold)?;
        writeln!(
            f,
            "| Efficiency % | Target purity % | Total purity % | Purity % | AUC % | Val loss | Epoch s | Batch s |"
        )?;
        writeln!(f, "|---|---|---|---|---|---|---|---|")?;
        writeln!(
            f,
            "| {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.5} | {:.2} | {:.3} |",
            100.0 * self.metrics.efficiency,
            100.0 * self.metrics.target_purity,
            100.0 * self.metrics.total_purity,
            100.0 * self.metrics.purity,
            100.0 * self.metrics.auc,
            self.metrics.loss,
            self.epoch_seconds,
            self.seconds_per_batch
        )
    }
}

fn same_path(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}
