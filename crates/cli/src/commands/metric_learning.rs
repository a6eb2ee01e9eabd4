//! `trackgnn train-embedding` and `trackgnn train-filter`: the learned stages of
//! metric-learning graphs, trained on events with truth.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Result;
use trackgnn_graph::features::FeatureConfig;
use trackgnn_trackml::csv::EventFiles;
use trackgnn_train::metric_learning::embedding::{EmbeddingConfig, EmbeddingModel, train_embedding};
use trackgnn_train::metric_learning::events::{prepare_events, split_sizes};
use trackgnn_train::metric_learning::filter::{FilterConfig, train_filter};
use trackgnn_train::metric_learning::{
    BestBy, PreparedEvent, StageOutcome, StageReport, finished_records, read_stage_config,
};

use crate::progress::{EpochBars, stop_on_signals};
use crate::util::{load_detector, print_json, thread_pool};

/// What the two trainings share.
#[derive(Debug, clap::Args)]
pub struct StageArgs {
    /// Directory of events with truth and particles.
    #[arg(long, value_name = "DIR")]
    pub input: PathBuf,
    /// The run directory to write.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// A configuration (TOML, the keys of the stage's config); flags win over it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Epochs.
    #[arg(long)]
    pub epochs: Option<u64>,
    /// Validation events: the last N of the events used (default: a fifth, at least 1).
    #[arg(long)]
    pub val_events: Option<usize>,
    /// Continue the run in --out from its checkpoint.
    #[arg(long)]
    pub resume: bool,
    #[command(flatten)]
    pub events: crate::cli::EventsArg,
    #[command(flatten)]
    pub threads: crate::cli::ThreadsArg,
    #[command(flatten)]
    pub json: crate::cli::JsonArg,
    #[command(flatten)]
    pub detector: crate::cli::DetectorArg,
}

/// `trackgnn train-embedding`.
#[derive(Debug, clap::Args)]
pub struct TrainEmbeddingArgs {
    #[command(flatten)]
    pub stage: StageArgs,
}

/// `trackgnn train-filter`.
#[derive(Debug, clap::Args)]
pub struct TrainFilterArgs {
    #[command(flatten)]
    pub stage: StageArgs,
    /// The embedding run whose radius graph the filter learns to prune.
    #[arg(long, value_name = "RUN")]
    pub embedding: PathBuf,
}

/// The paths these commands read, for the common missing-input check.
pub(crate) fn inputs(a: &StageArgs) -> Vec<Option<&Path>> {
    vec![Some(a.input.as_path()), a.config.as_deref(), a.detector.detector.as_deref()]
}

/// Reads and prepares the events; splits off the validation events (the last ones).
fn prepare(
    a: &StageArgs,
    features: &FeatureConfig,
    train_pt_min: f64,
) -> Result<(Vec<PreparedEvent>, Vec<PreparedEvent>)> {
    let det = load_detector(a.detector.detector.as_deref())?;
    let files = event_files(a)?;
    Ok(prepare_events(&a.input, &files, &det, features, train_pt_min, a.val_events)?)
}

/// The event files used: those of `--input`, the first `--events` of them if given.
fn event_files(a: &StageArgs) -> Result<Vec<EventFiles>> {
    let files = a.events.discover(&a.input)?;
    Ok(files)
}

/// With `--resume` on a run that has trained all its epochs: its report, without reading the
/// events (only counting them), and `true`.
fn report_if_finished<C: serde::Serialize + serde::de::DeserializeOwned>(
    a: &StageArgs,
    stage: &'static str,
    best_by: BestBy,
    cfg: &C,
    epochs: u64,
) -> Result<bool> {
    if !a.resume {
        return Ok(false);
    }
    let Some(records) = finished_records(&a.out, cfg, epochs)? else {
        return Ok(false);
    };
    let n = event_files(a)?.len();
    if !a.json.json {
        println!("{}: all {epochs} epochs already trained; nothing to do", a.out.display());
    }
    report(a, &StageReport::new(&a.out, stage, best_by, &records, split_sizes(n, a.val_events), 0.0))?;
    Ok(true)
}

/// Reports how a stage's training ended: the run's summary, or that a signal stopped it after
/// a checkpoint (exit code 3, as `train`).
fn finish(
    a: &StageArgs,
    stage: &'static str,
    best_by: BestBy,
    outcome: &StageOutcome,
    counts: (usize, usize),
    wall: Instant,
) -> Result<ExitCode> {
    if outcome.interrupted {
        if a.json.json {
            print_json(&serde_json::json!({ "run": a.out, "interrupted": true }));
        } else {
            eprintln!("interrupted: checkpoint written; continue with --resume");
        }
        return Ok(ExitCode::from(3));
    }
    let elapsed = wall.elapsed().as_secs_f64();
    report(a, &StageReport::new(&a.out, stage, best_by, &outcome.records, counts, elapsed))?;
    Ok(ExitCode::SUCCESS)
}

/// Prints the run's summary: one JSON object, or its line.
fn report(a: &StageArgs, r: &StageReport) -> Result<()> {
    if a.json.json {
        print_json(&serde_json::to_value(r)?);
    } else {
        print!("{r}");
    }
    Ok(())
}

pub fn train_embedding_cmd(a: TrainEmbeddingArgs) -> Result<ExitCode> {
    let a = a.stage;
    let mut cfg: EmbeddingConfig = read_stage_config(a.config.as_deref())?;
    if let Some(e) = a.epochs {
        cfg.training.epochs = e;
    }
    if report_if_finished(&a, "embedding", BestBy::EfficiencyAtBudget, &cfg, cfg.training.epochs)? {
        return Ok(ExitCode::SUCCESS);
    }
    let pool = thread_pool(a.threads.threads)?;
    let wall = Instant::now();
    let (train, val) = pool.install(|| prepare(&a, &cfg.features, cfg.train_pt_min))?;
    let (bars, stop) = (EpochBars::new(a.json.json, true), stop_on_signals()?);
    let outcome = pool.install(|| train_embedding(&a.out, &cfg, &train, &val, a.resume, &bars, &stop))?;
    let counts = (train.len(), val.len());
    finish(&a, "embedding", BestBy::EfficiencyAtBudget, &outcome, counts, wall)
}

pub fn train_filter_cmd(a: TrainFilterArgs) -> Result<ExitCode> {
    let embedding = EmbeddingModel::load(&a.embedding)?;
    let a_stage = a.stage;
    let mut cfg: FilterConfig = read_stage_config(a_stage.config.as_deref())?;
    if let Some(e) = a_stage.epochs {
        cfg.training.epochs = e;
    }
    if report_if_finished(&a_stage, "filter", BestBy::ValLoss, &cfg, cfg.training.epochs)? {
        return Ok(ExitCode::SUCCESS);
    }
    let pool = thread_pool(a_stage.threads.threads)?;
    let wall = Instant::now();
    let (train, val) = pool.install(|| prepare(&a_stage, &embedding.config.features, embedding.config.train_pt_min))?;
    let (bars, stop) = (EpochBars::new(a_stage.json.json, true), stop_on_signals()?);
    let outcome =
        pool.install(|| train_filter(&a_stage.out, &cfg, &embedding, &train, &val, a_stage.resume, &bars, &stop))?;
    let counts = (train.len(), val.len());
    finish(&a_stage, "filter", BestBy::ValLoss, &outcome, counts, wall)
}
