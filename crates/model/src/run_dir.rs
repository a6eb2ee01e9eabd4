//! The run directory: the one place that knows what a training run leaves behind, under which
//! names, and in which format.
//!
//! ```text
//! run/
//!   config.toml         the resolved TrainConfig
//!   recipe.toml         the graph recipe, copied from the graph directory
//!   events.json         the event split (EventSplit)
//!   metrics.csv         one row per epoch (MetricsLog)
//!   metrics.jsonl       one EpochRecord per line, the source of truth of the two
//!   steps.jsonl         one StepRecord per optimiser step
//!   rank{r}.json        what rank r reports at the end (RankReport)
//!   best.safetensors    weights of the best epoch
//!   checkpoint/         the last checkpoint (model.safetensors is the last weights)
//!   plots/              loss, metrics, gradient norms, ROC
//! ```
//!
//! Everything else reads and writes these files through [`RunDir`] and the typed records here;
//! the file names are spelled here only (the learned stages' runs use the same names).
//!
//! ```no_run
//! use trackgnn_model::run_dir::{RunDir, Weights};
//! # fn main() -> Result<(), trackgnn_model::Error> {
//! let run = RunDir::open("runs/demo")?;
//! let cfg = run.read_config()?;
//! let recipe = run.read_recipe()?;
//! let weights = run.weights_path(&"best".parse::<Weights>().unwrap());
//! println!("{} iterations, {:?} graphs, weights {}", cfg.model.iterations, recipe.method, weights.display());
//! # Ok(()) }
//! ```

use std::fmt;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize};
use trackgnn_graph::GraphRecipe;

use crate::config::TrainConfig;
use crate::error::{Error, Result};

/// The resolved training configuration.
pub const CONFIG_FILE: &str = "config.toml";
/// The graph recipe of the run's graphs (the graph directory's own file, copied).
pub const RECIPE_FILE: &str = trackgnn_graph::recipe::RECIPE_FILE;
/// The event split ([`EventSplit`]).
pub const EVENTS_FILE: &str = "events.json";
/// The per-epoch metrics as CSV.
pub const METRICS_CSV_FILE: &str = "metrics.csv";
/// The per-epoch metrics as JSON lines ([`EpochRecord`]).
pub const METRICS_JSONL_FILE: &str = "metrics.jsonl";
/// The per-step diagnostics ([`StepRecord`]), JSON lines.
pub const STEPS_FILE: &str = "steps.jsonl";
/// Name of the log of resumes with another number of ranks in a run directory.
pub const RESUMES_FILE: &str = "resumes.jsonl";
/// Weights of the best epoch.
pub const BEST_FILE: &str = "best.safetensors";
/// The last checkpoint (a directory: [`MODEL_FILE`], [`OPTIMIZER_FILE`], [`STATE_FILE`]; the train
/// crate's `checkpoint` writes it).
pub const CHECKPOINT_DIR: &str = "checkpoint";
/// The plots of the run.
pub const PLOTS_DIR: &str = "plots";
/// File name of the model weights inside a checkpoint (the last weights of a run).
pub const MODEL_FILE: &str = "model.safetensors";
/// File name of the optimiser state inside a checkpoint.
pub const OPTIMIZER_FILE: &str = "optimizer.safetensors";
/// File name of the trainer's state inside a checkpoint.
pub const STATE_FILE: &str = "state.json";
/// Stem of the loss plot in [`PLOTS_DIR`] (`.png` and `.svg`), of the GNN and of the learned
/// stages alike.
pub const LOSS_PLOT: &str = "loss";
/// Stem of the GNN's validation edge-metrics plot.
pub const METRICS_PLOT: &str = "metrics";
/// Stem of the GNN's gradient-norm plot.
pub const GRADIENT_NORM_PLOT: &str = "gradient_norm";
/// Stem of the GNN's validation ROC plot.
pub const ROC_PLOT: &str = "roc";
/// Stem of a learned stage's validation graph plot (efficiency and purity per epoch).
pub const GRAPH_PLOT: &str = "graph";

/// The aside name of checkpoint `dir` (`<dir>.old`), where the previous checkpoint sits while
/// a new one is renamed into place.
pub fn aside_path(dir: &Path) -> PathBuf {
    let mut s = dir.as_os_str().to_owned();
    s.push(".old");
    PathBuf::from(s)
}

/// File name of what rank `rank` reports at the end of the run ([`RankReport`]).
pub fn rank_file_name(rank: usize) -> String {
    format!("rank{rank}.json")
}

/// Which weights of a run to use: `best` (the best epoch's), `last` (the last checkpoint's), or
/// any other text as a safetensors file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Weights {
    /// The best epoch's weights ([`BEST_FILE`]).
    #[default]
    Best,
    /// The last checkpoint's weights.
    Last,
    /// A safetensors file.
    File(PathBuf),
}

impl FromStr for Weights {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        Ok(match s {
            "best" => Weights::Best,
            "last" => Weights::Last,
            other => Weights::File(PathBuf::from(other)),
        })
    }
}

impl fmt::Display for Weights {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Weights::Best => f.write_str("best"),
            Weights::Last => f.write_str("last"),
            Weights::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// The weights a run started from (`init_weights`), named by path and content: the file may
/// later be overwritten (a continuing run's best weights).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InitWeights {
    /// Hash of the file's content when the run started.
    pub hash: String,
    /// The file.
    pub path: PathBuf,
}

/// The events of a run's split (`events.json`). Fields are in alphabetical order, the order
/// the file has always been written in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventSplit {
    /// The graph directory the run trained on.
    pub graphs_dir: PathBuf,
    /// The starting weights, if the run did not start from random ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_weights: Option<InitWeights>,
    /// Test event ids.
    pub test: Vec<u64>,
    /// Training event ids.
    pub train: Vec<u64>,
    /// Validation event ids.
    pub val: Vec<u64>,
}

/// One optimiser step (a line of `steps.jsonl`). Seconds; NaN (written as `null`) for a loss or
/// norm that was not finite. Fields are in alphabetical order, the order the file has always
/// been written in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// Seconds each rank spent in the gradient all-reduce (waiting for the slowest included).
    #[serde(default)]
    pub allreduce_seconds: Vec<f64>,
    /// The auxiliary target's loss (mean squared error of log10 pT over the true edges, not
    /// multiplied by `aux_pt_weight`), mean over the ranks; absent without the auxiliary head.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aux_loss: Option<f64>,
    /// Seconds each rank computed (forward and backward of its graphs).
    #[serde(default)]
    pub compute_seconds: Vec<f64>,
    /// Bytes of the engine's activations and workspace on rank 0.
    #[serde(default)]
    pub engine_bytes: u64,
    /// Peak resident set size of each rank's process so far, bytes (0 where unknown).
    #[serde(default)]
    pub peak_rss_bytes: Vec<u64>,
    /// Domain parallelism: halo nodes each rank held (remote nodes its edges reach), summed
    /// over its graphs of the step; empty without a domain split.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub halo_nodes: Vec<u64>,
    /// Domain parallelism: edges each rank held (a cut edge is held by both of its ranks),
    /// summed over its graphs of the step; empty without a domain split.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub local_edges: Vec<u64>,
    /// Epoch number.
    pub epoch: u64,
    /// Event ids each rank trained on, one list per rank (empty in logs of old versions).
    #[serde(default)]
    pub events: Vec<Vec<u64>>,
    /// Optimiser steps taken, this one included.
    #[serde(default)]
    pub global_step: u64,
    /// Global gradient L2 norm before clipping.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub grad_norm: f64,
    /// Slowest rank's compute / mean rank's compute (1 with one rank).
    #[serde(default = "one", deserialize_with = "nan_if_null")]
    pub load_imbalance: f64,
    /// True if the step's loss was a spike (`loss_spike_factor`).
    #[serde(default)]
    pub loss_spike: bool,
    /// Mean loss over the ranks (the classifier's BCE, without the auxiliary term).
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub loss: f64,
    /// Learning rate of the step.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub lr: f64,
    /// Wall time of the step.
    #[serde(deserialize_with = "nan_if_null")]
    pub seconds: f64,
    /// True if the step was skipped: its loss or a gradient was not finite (`non_finite =
    /// "skip"`).
    #[serde(default)]
    pub skipped: bool,
    /// Step within the epoch, from 0.
    #[serde(default)]
    pub step: u64,
}

fn nan() -> f64 {
    f64::NAN
}

fn one() -> f64 {
    1.0
}

/// A resume with another number of ranks than the checkpoint was written with: a line of
/// `resumes.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RankChange {
    /// The epoch resumed.
    pub epoch: u64,
    /// Optimiser steps taken before the resume.
    pub global_step: u64,
    /// Graphs of the interrupted epoch not trained in it: fewer than one step of the new ranks.
    pub graphs_left_out: u64,
    /// Learning rate before the schedule, scaled for `ranks`.
    pub lr: f64,
    /// The same for `previous_ranks`.
    pub previous_lr: f64,
    /// Ranks the checkpoint was written with.
    pub previous_ranks: usize,
    /// Ranks of the resumed run.
    pub ranks: usize,
    /// Steps of the epoch taken before the resume.
    pub step_in_epoch: u64,
    /// Steps of the epoch left, with the new ranks.
    pub steps_left_in_epoch: u64,
}

impl StepRecord {
    /// Parses one line of `steps.jsonl`.
    pub fn parse_line(line: &str) -> serde_json::Result<StepRecord> {
        serde_json::from_str(line)
    }
}

/// One epoch of a run. Fractions in 0–1; NaN for what was not measured (written as `NaN`
/// in the CSV and `null` in the JSON). `Default` is epoch 0 with every measurement NaN/0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EpochRecord {
    /// Epoch number, as the trainer counts it.
    pub epoch: u64,
    /// Optimiser steps taken so far.
    pub step: u64,
    /// Mean training loss over the epoch's steps.
    #[serde(deserialize_with = "nan_if_null")]
    pub train_loss: f64,
    /// Validation loss (per-event mean).
    #[serde(deserialize_with = "nan_if_null")]
    pub val_loss: f64,
    /// Edge efficiency `TP_target / N_target_true` (per-event mean).
    #[serde(deserialize_with = "nan_if_null")]
    pub efficiency: f64,
    /// Target purity `TP_target / N_predicted` (per-event mean).
    #[serde(deserialize_with = "nan_if_null")]
    pub target_purity: f64,
    /// Total purity `TP_any_true / N_predicted` (per-event mean).
    #[serde(deserialize_with = "nan_if_null")]
    pub total_purity: f64,
    /// Purity `TP_target / (N_predicted − predicted true non-target)` (per-event mean).
    #[serde(deserialize_with = "nan_if_null")]
    pub purity: f64,
    /// Edge AUC, target edges as positives (per-event mean).
    #[serde(deserialize_with = "nan_if_null")]
    pub auc: f64,
    /// Learning rate of the epoch's last step.
    #[serde(deserialize_with = "nan_if_null")]
    pub lr: f64,
    /// Mean global gradient L2 norm over the epoch's steps (before clipping).
    #[serde(deserialize_with = "nan_if_null")]
    pub grad_norm: f64,
    /// Largest global gradient L2 norm of the epoch (before clipping).
    #[serde(deserialize_with = "nan_if_null")]
    pub grad_norm_max: f64,
    /// L2 norm of all parameters at the end of the epoch.
    #[serde(deserialize_with = "nan_if_null")]
    pub weight_norm: f64,
    /// Wall time of the epoch (training and validation), seconds.
    #[serde(deserialize_with = "nan_if_null")]
    pub epoch_seconds: f64,
    /// Wall time per training batch (step), seconds.
    #[serde(deserialize_with = "nan_if_null")]
    pub seconds_per_batch: f64,
    /// Wall time of the validation pass, seconds.
    #[serde(deserialize_with = "nan_if_null")]
    pub val_seconds: f64,
    /// Data-parallel load imbalance: mean over steps of (slowest rank's compute time / mean
    /// rank compute time); 1 with one rank.
    #[serde(default = "one", deserialize_with = "nan_if_null")]
    pub load_imbalance: f64,
    /// Seconds ranks spent in the gradient all-reduce (waiting for the slowest included), summed
    /// over the epoch's steps and averaged over ranks.
    #[serde(default, deserialize_with = "nan_if_null")]
    pub allreduce_seconds: f64,
    /// Peak bytes of the engine's activations and gradient buffers (counted, not estimated).
    #[serde(default)]
    pub engine_peak_bytes: u64,
    /// Peak resident memory of the process so far, bytes (`trackgnn_engine::alloc::peak_rss_bytes`).
    pub peak_rss_bytes: u64,
    /// Mean auxiliary loss over the epoch's steps (mean squared error of log10 pT over the
    /// true edges); absent without the auxiliary head.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train_aux_loss: Option<f64>,
    /// Validation auxiliary loss (per-event mean; its square root is the RMS of the predicted
    /// − true log10 pT of the true edges); absent without the auxiliary head.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val_aux_loss: Option<f64>,
}

impl Default for EpochRecord {
    fn default() -> Self {
        let nan = f64::NAN;
        EpochRecord {
            epoch: 0,
            step: 0,
            train_loss: nan,
            val_loss: nan,
            train_aux_loss: None,
            val_aux_loss: None,
            efficiency: nan,
            target_purity: nan,
            total_purity: nan,
            purity: nan,
            auc: nan,
            lr: nan,
            grad_norm: nan,
            grad_norm_max: nan,
            weight_norm: nan,
            epoch_seconds: nan,
            seconds_per_batch: nan,
            val_seconds: nan,
            load_imbalance: 1.0,
            allreduce_seconds: 0.0,
            engine_peak_bytes: 0,
            peak_rss_bytes: 0,
        }
    }
}

/// The epoch's line of a training's progress: losses, edge metrics and time.
impl std::fmt::Display for EpochRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "epoch {:>3}: train loss {:.5}  val loss {:.5}  efficiency {:.4}  target purity {:.4}  total purity {:.4}  purity {:.4}  AUC {:.4}  {:.1} s ({:.3} s/batch)",
            self.epoch,
            self.train_loss,
            self.val_loss,
            self.efficiency,
            self.target_purity,
            self.total_purity,
            self.purity,
            self.auc,
            self.epoch_seconds,
            self.seconds_per_batch
        )
    }
}

impl EpochRecord {
    /// The CSV columns, in field order.
    pub const COLUMNS: &[&str] = &[
        "epoch",
        "step",
        "train_loss",
        "val_loss",
        "efficiency",
        "target_purity",
        "total_purity",
        "purity",
        "auc",
        "lr",
        "grad_norm",
        "grad_norm_max",
        "weight_norm",
        "epoch_seconds",
        "seconds_per_batch",
        "val_seconds",
        "load_imbalance",
        "allreduce_seconds",
        "engine_peak_bytes",
        "peak_rss_bytes",
        "train_aux_loss",
        "val_aux_loss",
    ];
}

/// JSON has no NaN: serde_json writes non-finite numbers as `null`; read them back as NaN.
pub fn nan_if_null<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// What one rank of a run reports when the run ends (`rank{r}.json` in the run directory).
/// Times cover this process from its start (a resumed run counts only its own process).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RankReport {
    /// The rank, 0-based.
    pub rank: usize,
    /// Number of ranks of the job.
    pub ranks: usize,
    /// Worker threads of the rank's thread pool.
    pub threads: usize,
    /// Host name (`/proc/sys/kernel/hostname`; empty if unavailable).
    pub host: String,
    /// Wall time since the process started, seconds.
    pub wall_seconds: f64,
    /// CPU time of the process (user + system, all threads), seconds.
    pub cpu_seconds: f64,
    /// `cpu_seconds / (wall_seconds × threads)`: the fraction of its threads' capacity the rank
    /// used (the loader thread and MPI can push it slightly above 1).
    pub cpu_utilisation: f64,
    /// Peak resident memory of the process, bytes (`trackgnn_engine::alloc::peak_rss_bytes`).
    pub peak_rss_bytes: u64,
}

/// A run directory. [`RunDir::open`] an existing run to read it; the trainer creates and
/// writes one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunDir {
    root: PathBuf,
}

impl RunDir {
    /// The run directory at `root`, whether or not it exists yet (for writing).
    pub fn new(root: impl Into<PathBuf>) -> RunDir {
        RunDir { root: root.into() }
    }

    /// An existing run: `root` must be a directory holding a run's `config.toml`.
    pub fn open(root: impl Into<PathBuf>) -> Result<RunDir> {
        let run = RunDir::new(root);
        if !run.root.is_dir() {
            return Err(Error::Config(format!("{}: no such run directory", run.root.display())));
        }
        if !run.config_path().is_file() {
            return Err(Error::Config(format!(
                "{}: not a run directory (no {CONFIG_FILE}; `trackgnn train --out DIR` makes one)",
                run.root.display()
            )));
        }
        Ok(run)
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `config.toml`.
    pub fn config_path(&self) -> PathBuf {
        self.root.join(CONFIG_FILE)
    }
    /// `recipe.toml`.
    pub fn recipe_path(&self) -> PathBuf {
        self.root.join(RECIPE_FILE)
    }
    /// `events.json`.
    pub fn events_path(&self) -> PathBuf {
        self.root.join(EVENTS_FILE)
    }
    /// `metrics.csv`.
    pub fn metrics_csv_path(&self) -> PathBuf {
        self.root.join(METRICS_CSV_FILE)
    }
    /// `metrics.jsonl`.
    pub fn metrics_jsonl_path(&self) -> PathBuf {
        self.root.join(METRICS_JSONL_FILE)
    }
    /// `steps.jsonl`.
    pub fn steps_path(&self) -> PathBuf {
        self.root.join(STEPS_FILE)
    }
    /// `resumes.jsonl`: one line per resume with another number of ranks ([`RankChange`]).
    pub fn resumes_path(&self) -> PathBuf {
        self.root.join(RESUMES_FILE)
    }
    /// The resumes with another number of ranks, oldest first (none if the file is missing).
    pub fn read_rank_changes(&self) -> Result<Vec<RankChange>> {
        let path = self.resumes_path();
        let Ok(text) = fs::read_to_string(&path) else {
            return Ok(Vec::new());
        };
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                serde_json::from_str(l)
                    .map_err(|e| Error::Json { path: format!("{}:{}", path.display(), i + 1).into(), source: e })
            })
            .collect()
    }
    /// `rank{rank}.json`.
    pub fn rank_report_path(&self, rank: usize) -> PathBuf {
        self.root.join(rank_file_name(rank))
    }
    /// `best.safetensors`.
    pub fn best_path(&self) -> PathBuf {
        self.root.join(BEST_FILE)
    }
    /// The last checkpoint's directory.
    pub fn checkpoint_dir(&self) -> PathBuf {
        self.root.join(CHECKPOINT_DIR)
    }
    /// True if the run holds a checkpoint (or the aside copy a crash in mid-save leaves): a
    /// run it makes sense to resume.
    pub fn has_checkpoint(&self) -> bool {
        let dir = self.checkpoint_dir();
        dir.join(MODEL_FILE).is_file() || aside_path(&dir).join(MODEL_FILE).is_file()
    }
    /// The last checkpoint's weights.
    pub fn last_weights_path(&self) -> PathBuf {
        self.checkpoint_dir().join(MODEL_FILE)
    }
    /// The plots directory.
    pub fn plots_dir(&self) -> PathBuf {
        self.root.join(PLOTS_DIR)
    }

    /// The file of `weights`: the best, the last, or the file given.
    pub fn weights_path(&self, weights: &Weights) -> PathBuf {
        match weights {
            Weights::Best => self.best_path(),
            Weights::Last => self.last_weights_path(),
            Weights::File(p) => p.clone(),
        }
    }

    /// The run's training configuration.
    pub fn read_config(&self) -> Result<TrainConfig> {
        TrainConfig::read(&self.config_path())
    }

    /// The graph recipe of the run's graphs, as they were built for training (with truth cuts;
    /// [`GraphRecipe::for_inference`] drops them).
    pub fn read_recipe(&self) -> Result<GraphRecipe> {
        let path = self.recipe_path();
        let text = fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        toml::from_str(&text).map_err(|e| Error::Corrupt { path, message: format!("invalid recipe: {e}") })
    }

    /// The run's event split.
    pub fn read_events(&self) -> Result<EventSplit> {
        read_json(&self.events_path())
    }

    /// The run's steps, in order. A last line cut short (a crash while writing it) is dropped;
    /// any other bad line is an error naming its line.
    pub fn read_steps(&self) -> Result<Vec<StepRecord>> {
        let path = self.steps_path();
        let text = fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        parse_steps(&path, &text)
    }

    /// The run's epochs (`metrics.jsonl`).
    pub fn read_metrics(&self) -> Result<Vec<EpochRecord>> {
        read_records(&self.metrics_jsonl_path())
    }

    /// What rank `rank` reported at the end of the run.
    pub fn read_rank_report(&self, rank: usize) -> Result<RankReport> {
        read_json(&self.rank_report_path(rank))
    }

    /// True if every one of `ranks` ranks wrote its report (the run ended).
    pub fn has_rank_reports(&self, ranks: usize) -> bool {
        (0..ranks).all(|r| self.rank_report_path(r).exists())
    }

    /// Writes `config.toml`.
    pub fn write_config(&self, cfg: &TrainConfig) -> Result<()> {
        let text = toml::to_string(cfg).map_err(|e| Error::context("serialising the configuration", e))?;
        write_atomic(&self.config_path(), text.as_bytes())
    }

    /// Copies the graph directory's `recipe.toml`, if it has one.
    pub fn copy_recipe(&self, graphs_dir: &Path) -> Result<()> {
        let recipe = graphs_dir.join(trackgnn_graph::recipe::RECIPE_FILE);
        if recipe.exists() {
            let text = fs::read(&recipe).map_err(|e| Error::io(&recipe, e))?;
            write_atomic(&self.recipe_path(), &text)?;
        }
        Ok(())
    }

    /// Writes `events.json`.
    pub fn write_events(&self, split: &EventSplit) -> Result<()> {
        let path = self.events_path();
        let text = serde_json::to_string_pretty(split).map_err(|e| Error::Json { path: path.clone(), source: e })?;
        write_atomic(&path, text.as_bytes())
    }

    /// Appends a line to `steps.jsonl`.
    pub fn append_step(&self, step: &StepRecord) -> Result<()> {
        let path = self.steps_path();
        let line = serde_json::to_string(step).map_err(|e| Error::Json { path: path.clone(), source: e })?;
        let mut f = fs::OpenOptions::new().create(true).append(true).open(&path).map_err(|e| Error::io(&path, e))?;
        writeln!(f, "{line}").map_err(|e| Error::io(&path, e))
    }

    /// Appends a line to `resumes.jsonl`.
    pub fn append_rank_change(&self, change: &RankChange) -> Result<()> {
        let path = self.resumes_path();
        let line = serde_json::to_string(change).map_err(|e| Error::Json { path: path.clone(), source: e })?;
        let mut f = fs::OpenOptions::new().create(true).append(true).open(&path).map_err(|e| Error::io(&path, e))?;
        writeln!(f, "{line}").map_err(|e| Error::io(&path, e))
    }

    /// Removes `steps.jsonl` (a fresh run).
    pub fn remove_steps(&self) {
        let _ = fs::remove_file(self.steps_path());
    }

    /// Keeps the lines of `steps.jsonl` up to `global_step`, verbatim (a resumed run rewrites
    /// the rest). Lines that do not parse are dropped.
    pub fn truncate_steps(&self, global_step: u64) -> Result<()> {
        let path = self.steps_path();
        let Ok(text) = fs::read_to_string(&path) else {
            return Ok(());
        };
        let kept: Vec<&str> =
            text.lines().filter(|l| StepRecord::parse_line(l).is_ok_and(|s| s.global_step <= global_step)).collect();
        let mut out = kept.join("\n");
        if !out.is_empty() {
            out.push('\n');
        }
        write_atomic(&path, out.as_bytes())
    }

    /// Writes `rank{r}.json`.
    pub fn write_rank_report(&self, report: &RankReport) -> Result<()> {
        fs::create_dir_all(&self.root).map_err(|e| Error::io(&self.root, e))?;
        let path = self.rank_report_path(report.rank);
        let text = serde_json::to_string_pretty(report).map_err(|e| Error::Json { path: path.clone(), source: e })?;
        write_atomic(&path, text.as_bytes())
    }
}

/// The steps of a `steps.jsonl` text: blank lines skipped, an unparsable last line without a
/// newline after it (a write cut short) dropped.
fn parse_steps(path: &Path, text: &str) -> Result<Vec<StepRecord>> {
    let lines: Vec<&str> = text.split('\n').collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match StepRecord::parse_line(line) {
            Ok(s) => out.push(s),
            Err(_) if i + 1 == lines.len() => break,
            Err(e) => {
                return Err(Error::Json { path: PathBuf::from(format!("{}:{}", path.display(), i + 1)), source: e });
            }
        }
    }
    Ok(out)
}

/// Reads the records of a `metrics.jsonl` (fields missing in old logs get their default; a
/// last line cut short is dropped).
pub fn read_records(path: &Path) -> Result<Vec<EpochRecord>> {
    let text = fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    parse_jsonl(path, &text)?
        .into_iter()
        .map(|r| {
            serde_json::from_value(serde_json::Value::Object(r.obj))
                .map_err(|e| Error::Json { path: line_path(path, r.line), source: e })
        })
        .collect()
}

/// One line of a JSON-lines log.
pub struct JsonLine<'a> {
    /// The line as written.
    pub raw: &'a str,
    /// Line number, from 1.
    pub line: usize,
    /// The record's `epoch`.
    pub epoch: u64,
    /// The record.
    pub obj: serde_json::Map<String, serde_json::Value>,
}

/// `path:line`, for errors.
fn line_path(path: &Path, line: usize) -> PathBuf {
    PathBuf::from(format!("{}:{line}", path.display()))
}

/// The records of a JSON-lines text. Blank lines are skipped; an unparsable last line
/// without a newline (a write cut short) is dropped.
pub fn parse_jsonl<'a>(path: &Path, text: &'a str) -> Result<Vec<JsonLine<'a>>> {
    let at = |line: usize| line_path(path, line);
    let lines: Vec<&str> = text.split('\n').collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let obj = match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(line) {
            Ok(obj) => obj,
            Err(_) if i + 1 == lines.len() => break, // no newline after it: cut short
            Err(e) => {
                return Err(Error::Json { path: at(i + 1), source: e });
            }
        };
        let Some(epoch) = obj.get("epoch").and_then(|e| e.as_u64()) else {
            return Err(Error::Corrupt { path: at(i + 1), message: "record without an integer `epoch`".into() });
        };
        out.push(JsonLine { raw: line.trim_end(), line: i + 1, epoch, obj });
    }
    Ok(out)
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text = fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| Error::Json { path: path.to_path_buf(), source: e })
}

/// Writes a file under a temporary name and renames it into place.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    trackgnn_trackml::atomic::write(path, bytes).map_err(|e| Error::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(epoch: u64, global_step: u64) -> StepRecord {
        StepRecord {
            allreduce_seconds: vec![0.01, 0.02],
            aux_loss: None,
            compute_seconds: vec![0.5, 0.4],
            engine_bytes: 1234,
            peak_rss_bytes: vec![2 << 30, 2 << 30],
            halo_nodes: Vec::new(),
            local_edges: Vec::new(),
            epoch,
            events: vec![vec![1000], vec![1001]],
            global_step,
            grad_norm: 0.7,
            load_imbalance: 1.1,
            loss_spike: false,
            loss: f64::NAN,
            lr: 1e-3,
            seconds: 0.6,
            skipped: false,
            step: global_step - 1,
        }
    }

    #[test]
    fn weights_parse_and_resolve() {
        let run = RunDir::new("r");
        assert_eq!("best".parse::<Weights>().unwrap(), Weights::Best);
        assert_eq!("last".parse::<Weights>().unwrap(), Weights::Last);
        assert_eq!("w.safetensors".parse::<Weights>().unwrap(), Weights::File("w.safetensors".into()));
        assert_eq!(run.weights_path(&Weights::Best), Path::new("r").join(BEST_FILE));
        assert_eq!(run.weights_path(&Weights::Last), Path::new("r/checkpoint/model.safetensors"));
        assert_eq!(run.weights_path(&Weights::File("x/w".into())), Path::new("x/w"));
        for w in ["best", "last", "x/w.safetensors"] {
            assert_eq!(w.parse::<Weights>().unwrap().to_string(), w);
        }
    }

    #[test]
    fn steps_round_trip_with_null_for_nan_and_a_cut_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path());
        for g in 1..=3 {
            run.append_step(&step(g / 2, g)).unwrap();
        }
        let text = fs::read_to_string(run.steps_path()).unwrap();
        assert!(text.lines().next().unwrap().starts_with("{\"allreduce_seconds\":[0.01,0.02],"), "{text}");
        assert!(text.contains("\"loss\":null"), "{text}");
        let back = run.read_steps().unwrap();
        assert_eq!(back.len(), 3);
        assert!(back[0].loss.is_nan());
        assert_eq!((back[2].epoch, back[2].global_step, &back[2].events), (1, 3, &vec![vec![1000], vec![1001]]));
        // A crash while writing a line: the partial line is dropped; a bad middle line is an error.
        fs::write(run.steps_path(), format!("{text}{{\"epoch\": 2, \"sec")).unwrap();
        assert_eq!(run.read_steps().unwrap().len(), 3);
        fs::write(run.steps_path(), format!("{{\"epoch\": 0}}\n{text}")).unwrap();
        let e = trackgnn_trackml::error::report(&run.read_steps().unwrap_err());
        assert!(e.contains("steps.jsonl:1") && e.contains("seconds"), "{e}");
        // Old logs without the per-rank lists still read.
        let old = StepRecord::parse_line(r#"{"epoch": 0, "seconds": 1.5, "loss": 0.3}"#).unwrap();
        assert_eq!((old.load_imbalance, old.events.len(), old.loss), (1.0, 0, 0.3));
    }

    #[test]
    fn truncating_steps_keeps_lines_verbatim() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path());
        for g in 1..=4 {
            run.append_step(&step(0, g)).unwrap();
        }
        let before = fs::read_to_string(run.steps_path()).unwrap();
        run.truncate_steps(2).unwrap();
        let after = fs::read_to_string(run.steps_path()).unwrap();
        assert_eq!(after.lines().collect::<Vec<_>>(), before.lines().take(2).collect::<Vec<_>>());
        run.truncate_steps(0).unwrap();
        assert_eq!(fs::read_to_string(run.steps_path()).unwrap(), "");
    }

    #[test]
    fn events_keep_their_keys_and_order() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path());
        let split =
            EventSplit { graphs_dir: "g".into(), init_weights: None, test: vec![3], train: vec![1], val: vec![2] };
        run.write_events(&split).unwrap();
        let text = fs::read_to_string(run.events_path()).unwrap();
        let keys: Vec<usize> = ["graphs_dir", "test", "train", "val"].iter().map(|k| text.find(k).unwrap()).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]) && !text.contains("init_weights"), "{text}");
        assert_eq!(run.read_events().unwrap(), split);
        let with =
            EventSplit { init_weights: Some(InitWeights { hash: "crc32:0:1".into(), path: "w".into() }), ..split };
        run.write_events(&with).unwrap();
        assert_eq!(run.read_events().unwrap(), with);
    }

    #[test]
    fn open_refuses_what_is_not_a_run_and_reads_the_config() {
        let dir = tempfile::tempdir().unwrap();
        let e = RunDir::open(dir.path().join("none")).unwrap_err().to_string();
        assert!(e.contains("no such run directory"), "{e}");
        let e = RunDir::open(dir.path()).unwrap_err().to_string();
        assert!(e.contains("not a run directory") && e.contains(CONFIG_FILE), "{e}");
        let run = RunDir::new(dir.path());
        let cfg = TrainConfig { epochs: 7, ..TrainConfig::default() };
        run.write_config(&cfg).unwrap();
        let run = RunDir::open(dir.path()).unwrap();
        assert_eq!(run.read_config().unwrap(), cfg);
        fs::write(run.config_path(), "epochs = \"x\"").unwrap();
        let e = run.read_config().unwrap_err().to_string();
        assert!(e.contains("config.toml: invalid training config"), "{e}");
        let e = run.read_recipe().unwrap_err().to_string();
        assert!(e.contains(RECIPE_FILE), "{e}");
    }
}
