//! `trackgnn train` and `trackgnn eval`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use serde_json::json;
use trackgnn_train::config::TrainOverrides;
use trackgnn_train::dist::{Comm, requeue_slurm_job};
use trackgnn_train::evaluation::{SplitPart, evaluate_run};
use trackgnn_train::{RunDir, TrainConfig, Trainer, Weights};

use crate::cli::ResumeArg;
use crate::progress;
use crate::util::{print_json, thread_pool};
use clap::Args;

/// `trackgnn train`.
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// Graph directory (from `build-graphs`).
    #[arg(long, value_name = "DIR")]
    pub graphs: PathBuf,
    /// Run directory.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Training configuration (TOML, the keys of `TrainConfig`); flags win over it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Continue the run in --out from its last checkpoint; `--resume auto` continues it if it
    /// has one and starts it otherwise (a requeued job).
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "always", value_name = "auto")]
    pub resume: Option<ResumeArg>,
    /// On SIGUSR1/SIGTERM, after the checkpoint, requeue the Slurm job (`scontrol requeue
    /// $SLURM_JOB_ID`); with `--resume auto` the restarted job continues the run.
    #[arg(long)]
    pub requeue: bool,
    /// Split each graph across this many consecutive ranks (domain parallelism: φ sectors with
    /// a halo exchanged at every message-passing iteration); the ranks form ranks / P
    /// data-parallel groups. Must divide the number of ranks (MPI builds).
    #[arg(long, value_name = "P", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub domain_ranks: u32,
    /// Seconds a rank waits in a collective for the others before it aborts the job naming the
    /// ranks that did not arrive (MPI builds).
    #[arg(long, value_name = "SECONDS", default_value_t = trackgnn_train::dist::DEFAULT_COLLECTIVE_TIMEOUT.as_secs_f64(), value_parser = parse_seconds)]
    pub collective_timeout: f64,
    /// Fault injection for tests: at global step STEP, rank RANK changes one of its weights.
    #[arg(long, hide = true, value_name = "STEP:RANK", value_parser = parse_step_rank)]
    pub inject_divergence: Option<(u64, usize)>,
    // The settings that replace the configuration's: the flags of `trackgnn_train`'s one list.
    #[command(flatten)]
    pub settings: TrainOverrides,
    #[command(flatten)]
    pub threads: crate::cli::ThreadsArg,
    /// Largest element count per MPI call (tests use a small one to exercise chunking).
    #[arg(long, hide = true)]
    pub mpi_chunk: Option<usize>,
    #[command(flatten)]
    pub json: crate::cli::JsonArg,
}

/// `trackgnn eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Run directory.
    #[arg(long, value_name = "DIR")]
    pub run: PathBuf,
    /// Graph directory. The run's test events when it is the run's own directory, else all.
    #[arg(long, value_name = "DIR")]
    pub graphs: PathBuf,
    /// Evaluate every graph of the directory, even the run's training events.
    #[arg(long)]
    pub all: bool,
    /// Which of the run's events to evaluate on its own graph directory.
    #[arg(long, value_enum, default_value = "test")]
    pub split: SplitPart,
    /// Score threshold of the edge metrics (default: the run's).
    #[arg(long)]
    pub threshold: Option<f64>,
    /// `best`, `last` or a safetensors file.
    #[arg(long, default_value = "best")]
    pub weights: String,
    #[command(flatten)]
    pub scoring: trackgnn_reco::inference::Scoring,
    #[command(flatten)]
    pub threads: crate::cli::ThreadsArg,
    #[command(flatten)]
    pub json: crate::cli::JsonArg,
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("`{s}` is not a positive number of seconds")),
    }
}

fn parse_step_rank(s: &str) -> Result<(u64, usize), String> {
    let (a, b) = s.split_once(':').ok_or("expected STEP:RANK")?;
    Ok((a.parse().map_err(|_| "bad STEP")?, b.parse().map_err(|_| "bad RANK")?))
}

/// Runs training with a communicator (single process here; MPI ranks in `dist`).
pub fn run_with(a: TrainArgs, comm: &mut dyn Comm) -> Result<ExitCode> {
    super::require_inputs(&[Some(&a.graphs), a.config.as_deref(), a.settings.init_weights.as_deref()])?;
    comm.set_domain_ranks(a.domain_ranks as usize).context("--domain-ranks")?;
    let resume = match a.resume {
        None => false,
        Some(ResumeArg::Always) => true,
        // Rank 0 decides, so every rank does the same even on a file system that lags.
        Some(ResumeArg::Auto) => comm.any(comm.is_root() && RunDir::new(&a.out).has_checkpoint())?,
    };
    let cfg = a.settings.resolve(a.config.as_deref(), &RunDir::new(&a.out), resume)?;
    let opts = TrainOptions { requeue: a.requeue, inject_divergence: a.inject_divergence };
    if resume && a.resume == Some(ResumeArg::Auto) && comm.is_root() && !a.json.json {
        eprintln!("--resume auto: continuing the run in {} from its checkpoint", a.out.display());
    }
    train(cfg, &a.graphs, &a.out, resume, a.threads.threads, a.json.json, opts, comm)
}

/// Options of `train` beyond the configuration.
#[derive(Clone, Copy, Debug, Default)]
pub struct TrainOptions {
    /// Requeue the Slurm job after a checkpoint on a signal.
    pub requeue: bool,
    /// Test hook: at global step `.0`, rank `.1` changes one weight.
    pub inject_divergence: Option<(u64, usize)>,
}

/// Trains with `cfg` on the graphs of `graphs` into the run directory `out` (continuing it with
/// `resume`), on `threads` threads; SIGUSR1, SIGTERM and SIGINT stop it after a checkpoint (exit
/// code 3; with `opts.requeue`, rank 0 then requeues the Slurm job). Rank 0 prints progress and
/// the outcome, one JSON object with `as_json`.
#[allow(clippy::too_many_arguments)]
pub fn train(
    cfg: TrainConfig,
    graphs: &Path,
    out: &Path,
    resume: bool,
    threads: Option<usize>,
    as_json: bool,
    opts: TrainOptions,
    comm: &mut dyn Comm,
) -> Result<ExitCode> {
    let pool = thread_pool(threads)?;
    // On a signal all ranks agree at the end of the step, checkpoint, exit.
    let stop = progress::stop_on_signals()?;
    let root = comm.is_root();
    let bars = progress::EpochBars::new(!root || as_json, false);
    let outcome = pool.install(|| -> Result<_> {
        let mut trainer = Trainer::new(cfg.clone(), graphs, out, resume, comm)?;
        trainer.inject_divergence = opts.inject_divergence;
        if root && !as_json {
            let s = trainer.split();
            eprintln!(
                "training on {} graphs ({} validation, {} test), {} parameters, run directory {}",
                s.train.len(),
                s.val.len(),
                s.test.len(),
                trainer.executor().params().len(),
                out.display()
            );
            if cfg.precision == trackgnn_engine::Precision::Bf16 {
                let (path, why) = trackgnn_engine::matmul_bf16::chosen_path();
                eprintln!("bf16 products on {} ({why})", path.name());
            }
        }
        Ok(trainer.run(&bars, &stop)?)
    })?;
    let requeued = root && outcome.interrupted && opts.requeue && {
        let r = requeue_slurm_job();
        if !(as_json && r.requeued()) {
            eprintln!("{r}");
        }
        r.requeued()
    };
    if root {
        if as_json {
            print_json(&json!({ "run": out, "outcome": outcome, "requeued": requeued }));
        } else if outcome.interrupted {
            eprintln!("interrupted: checkpoint written at step {}; continue with --resume", outcome.global_step);
        } else {
            let metric = serde_json::to_value(cfg.best_metric).ok().and_then(|v| v.as_str().map(String::from));
            let best = match outcome.best_epoch {
                Some(e) => format!("best epoch {e} ({} {:.5})", metric.unwrap_or_default(), outcome.best_value),
                None => "no best epoch yet".to_string(),
            };
            eprintln!(
                "done: {} epochs, {} steps; {best}; weights in {}",
                outcome.epochs_completed,
                outcome.global_step,
                RunDir::new(out).best_path().display()
            );
        }
    }
    Ok(if outcome.interrupted { ExitCode::from(3) } else { ExitCode::SUCCESS })
}

pub fn run(a: TrainArgs) -> Result<ExitCode> {
    #[cfg(feature = "mpi")]
    {
        // An MPI build always runs under MPI (a lone process is a world of one).
        let mut comm = trackgnn_train::dist::MpiComm::init(a.mpi_chunk.unwrap_or(trackgnn_train::dist::MAX_CHUNK))?;
        comm.set_collective_timeout(std::time::Duration::from_secs_f64(a.collective_timeout));
        match run_with(a, &mut comm) {
            // An error on one rank (a graph that does not read, a full disk, …) would leave the
            // others waiting in the next collective: it ends the whole job with its message.
            Err(e) if comm.size() > 1 => {
                comm.abort(&format!("error: {}", trackgnn_trackml::error::report(e.as_ref())), 1)
            }
            other => other,
        }
    }
    #[cfg(not(feature = "mpi"))]
    {
        trackgnn_train::dist::refuse_if_launched_as_many_ranks()?;
        run_with(a, &mut trackgnn_train::dist::SingleProcess)
    }
}

/// `trackgnn eval`: the Table-1 row of a run on a graph directory.
pub fn eval(a: EvalArgs) -> Result<ExitCode> {
    let run = RunDir::open(&a.run)?;
    let weights = a.weights.parse::<Weights>()?;
    let pool = thread_pool(a.threads.threads)?;
    let split = (!a.all).then_some(a.split);
    pool.install(|| eval_run(&run, &a.graphs, split, &weights, a.threshold, &a.scoring, a.json.json))?;
    Ok(ExitCode::SUCCESS)
}

/// Evaluates `run`'s `weights` on the graphs of `graphs` ([`evaluate_run`]) at the run's edge
/// threshold unless `threshold` is given, and prints the Table-1 row (one JSON object with
/// `as_json`).
pub fn eval_run(
    run: &RunDir,
    graphs: &Path,
    split: Option<SplitPart>,
    weights: &Weights,
    threshold: Option<f64>,
    scoring: &trackgnn_reco::inference::Scoring,
    as_json: bool,
) -> Result<()> {
    let mut cfg = run.read_config()?;
    if let Some(t) = threshold {
        cfg = TrainOverrides { threshold: Some(t), ..Default::default() }
            .apply(cfg)
            .with_context(|| format!("--threshold {t}"))?;
    }
    let r = evaluate_run(run, &cfg, graphs, split, weights, scoring)?;
    if as_json {
        print_json(&serde_json::to_value(&r)?);
    } else {
        print!("{r}");
    }
    Ok(())
}
