//! `trackgnn train` and `trackgnn eval`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result, bail};
use indicatif::ProgressBar;
use serde_json::json;
use trackgnn_engine::InteractionGnn;
use trackgnn_trackml::rng::Rng;
use trackgnn_train::checkpoint::load_weights;
use trackgnn_train::config::{LrScaling, Oversize, Sampler};
use trackgnn_train::data::{GraphSet, load_sample};
use trackgnn_train::dist::{Comm, SingleProcess};
use trackgnn_train::eval::evaluate;
use trackgnn_train::logs::read_records;
use trackgnn_train::{EpochRecord, Progress, TrainConfig, Trainer};

use crate::cli::{EvalArgs, TrainArgs};
use crate::progress;
use crate::util::{print_json, thread_pool};

/// The configuration: the TOML file if given (or the run's own on resume), then the flags.
fn resolve_config(a: &TrainArgs) -> Result<TrainConfig> {
    let file = a.config.clone().or_else(|| a.resume.then(|| a.out.join("config.toml")));
    let mut c: TrainConfig = match &file {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            toml::from_str(&text).with_context(|| format!("{}: invalid training config", p.display()))?
        }
        None => TrainConfig::default(),
    };
    macro_rules! set {
        ($flag:expr, $field:expr) => {
            if let Some(v) = $flag {
                $field = v;
            }
        };
    }
    set!(a.epochs, c.epochs);
    set!(a.seed, c.seed);
    set!(a.lr, c.optimizer.lr);
    set!(a.hidden, c.model.hidden);
    set!(a.iterations, c.model.iterations);
    set!(a.pos_weight, c.pos_weight);
    set!(a.graphs_per_step, c.graphs_per_step);
    set!(a.clip_grad_norm, c.clip_grad_norm);
    set!(a.early_stopping, c.early_stopping_patience);
    set!(a.checkpoint_every, c.checkpoint_every_steps);
    set!(a.max_graphs, c.max_graphs);
    set!(a.warmup_epochs, c.schedule.warmup_epochs);
    if let Some(p) = &a.init_weights {
        let file = if p.is_dir() { p.join("best.safetensors") } else { p.clone() };
        let file = std::fs::canonicalize(&file).with_context(|| format!("--init-weights {}", file.display()))?;
        c.init_weights = Some(file);
    }
    if let Some(s) = a.lr_scaling {
        c.lr_scaling = match s {
            crate::cli::LrScalingArg::None => LrScaling::None,
            crate::cli::LrScalingArg::Linear => LrScaling::Linear,
            crate::cli::LrScalingArg::Sqrt => LrScaling::Sqrt,
        };
    }
    set!(a.checkpointing, c.checkpointing);
    set!(a.precision, c.precision);
    set!(a.max_memory, c.max_memory_bytes);
    if let Some(o) = a.oversize {
        c.oversize = match o {
            crate::cli::OversizeArg::Split => Oversize::Split,
            crate::cli::OversizeArg::Skip => Oversize::Skip,
        };
    }
    if let Some(s) = a.sampler {
        c.sampler = match s {
            crate::cli::SamplerArg::Random => Sampler::Random,
            crate::cli::SamplerArg::Balanced => Sampler::Balanced,
        };
    }
    c.validate().map_err(anyhow::Error::msg)?;
    Ok(c)
}

/// A progress bar per epoch on rank 0.
struct Bars {
    bar: std::sync::Mutex<Option<ProgressBar>>,
    quiet: bool,
}

impl Progress for Bars {
    fn epoch_start(&self, epoch: u64, steps: u64) {
        if !self.quiet {
            *self.bar.lock().expect("bar") = Some(progress::bar(steps, &format!("epoch {epoch}")));
        }
    }
    fn step(&self, loss: f64) {
        if let Some(b) = self.bar.lock().expect("bar").as_ref() {
            b.set_message(format!("loss {loss:.4}"));
            b.inc(1);
        }
    }
    fn epoch_end(&self, r: &EpochRecord) {
        if let Some(b) = self.bar.lock().expect("bar").take() {
            b.finish_and_clear();
        }
        if !self.quiet {
            eprintln!(
                "epoch {:>3}: train loss {:.5}  val loss {:.5}  efficiency {:.4}  target purity {:.4}  total purity {:.4}  purity {:.4}  AUC {:.4}  {:.1} s ({:.3} s/batch)",
                r.epoch,
                r.train_loss,
                r.val_loss,
                r.efficiency,
                r.target_purity,
                r.total_purity,
                r.purity,
                r.auc,
                r.epoch_seconds,
                r.seconds_per_batch
            );
        }
    }
    fn message(&self, msg: &str) {
        if !self.quiet {
            eprintln!("{msg}");
        }
    }
}

/// Runs training with a communicator (single process here; MPI ranks in `dist`).
pub fn run_with(a: TrainArgs, comm: &mut dyn Comm) -> Result<ExitCode> {
    let cfg = resolve_config(&a)?;
    let pool = thread_pool(a.threads)?;
    let stop = Arc::new(AtomicBool::new(false));
    // SIGTERM (Slurm preemption) and SIGINT: finish the step, checkpoint, exit.
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(&stop)).context("installing the signal handler")?;
    }
    let root = comm.is_root();
    let bars = Bars { bar: std::sync::Mutex::new(None), quiet: !root || a.json };
    let outcome = pool.install(|| -> Result<_> {
        let mut trainer = Trainer::new(cfg.clone(), &a.graphs, &a.out, a.resume, comm)?;
        if root && !a.json {
            let s = trainer.split();
            eprintln!(
                "training on {} graphs ({} validation, {} test), {} parameters, run directory {}",
                s.train.len(),
                s.val.len(),
                s.test.len(),
                trainer.model.params.len(),
                a.out.display()
            );
        }
        Ok(trainer.run(&bars, &stop)?)
    })?;
    if root {
        if a.json {
            print_json(&json!({ "run": a.out, "outcome": outcome }));
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
                a.out.join("best.safetensors").display()
            );
        }
    }
    Ok(if outcome.interrupted { ExitCode::from(3) } else { ExitCode::SUCCESS })
}

/// Training in this process alone (the demo), whatever the build.
pub fn run_single(a: TrainArgs) -> Result<ExitCode> {
    run_with(a, &mut SingleProcess)
}

pub fn run(a: TrainArgs) -> Result<ExitCode> {
    #[cfg(feature = "mpi")]
    {
        // An MPI build always runs under MPI (a lone process is a world of one).
        let mut comm = trackgnn_train::dist::MpiComm::init(a.mpi_chunk.unwrap_or(trackgnn_train::dist::MAX_CHUNK))?;
        run_with(a, &mut comm)
    }
    #[cfg(not(feature = "mpi"))]
    {
        crate::dist_launch::refuse_if_launched_as_many_ranks()?;
        run_with(a, &mut SingleProcess)
    }
}

/// `trackgnn eval`: the Table-1 row of a run on a graph directory.
pub fn eval(a: EvalArgs) -> Result<ExitCode> {
    let run = &a.run;
    let cfg_path = run.join("config.toml");
    let text = std::fs::read_to_string(&cfg_path).with_context(|| format!("reading {}", cfg_path.display()))?;
    let mut cfg: TrainConfig =
        toml::from_str(&text).with_context(|| format!("{}: invalid training config", cfg_path.display()))?;
    if let Some(t) = a.threshold {
        cfg.threshold = t;
        cfg.validate().map_err(|e| anyhow::anyhow!("--threshold {t}: {e}"))?;
    }
    let set = GraphSet::open(&a.graphs, 0)?;
    // The run's test (or --split) events when evaluating on its own graph directory, else every graph.
    let events: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("events.json")).context("reading events.json")?)?;
    let same_dir = events["graphs_dir"].as_str().map(PathBuf::from).is_some_and(|d| same_path(&d, &a.graphs));
    let idx: Vec<usize> = if same_dir && !a.all {
        let key = match a.split {
            crate::cli::SplitArg::Train => "train",
            crate::cli::SplitArg::Val => "val",
            crate::cli::SplitArg::Test => "test",
        };
        let ids: Vec<u64> = serde_json::from_value(events[key].clone()).context("events.json")?;
        (0..set.len()).filter(|&i| ids.contains(&set.files[i].0)).collect()
    } else {
        (0..set.len()).collect()
    };
    if idx.is_empty() {
        bail!("no graphs to evaluate in {}", a.graphs.display());
    }
    let first = load_sample(&set.files[idx[0]].1, cfg.non_target_weight)?;
    let mut model =
        InteractionGnn::<f32>::new(cfg.model.clone(), first.input.node_dim, first.input.edge_dim, &mut Rng::new(0));
    let weights = match a.weights.as_str() {
        "best" => run.join("best.safetensors"),
        "last" => run.join("checkpoint").join("model.safetensors"),
        other => PathBuf::from(other),
    };
    load_weights(&weights, &mut model.params)?;
    model.set_precision(a.precision.unwrap_or(cfg.precision));
    let pool = thread_pool(a.threads)?;
    let r = pool.install(|| evaluate(&model, &set, &idx, &cfg, &mut SingleProcess, false))?;
    let last = read_records(&run.join("metrics.jsonl")).ok().and_then(|v| v.last().cloned());
    let (epoch_s, batch_s) = last.as_ref().map_or((f64::NAN, f64::NAN), |l| (l.epoch_seconds, l.seconds_per_batch));
    let m = &r.mean;
    if a.json {
        print_json(&json!({
            "run": run, "graphs": a.graphs, "weights": weights, "events": r.events,
            "threshold": cfg.threshold, "efficiency": m.efficiency, "target_purity": m.target_purity, "total_purity": m.total_purity,
            "purity": m.purity, "auc": m.auc, "loss": m.loss,
            "epoch_seconds": epoch_s, "seconds_per_batch": batch_s, "eval_seconds": r.seconds,
        }));
    } else {
        println!(
            "{} events of {} with {}, threshold {}",
            r.events,
            a.graphs.display(),
            weights.display(),
            cfg.threshold
        );
        println!(
            "| Efficiency % | Target purity % | Total purity % | Purity % | AUC % | Val loss | Epoch s | Batch s |"
        );
        println!("|---|---|---|---|---|---|---|---|");
        println!(
            "| {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.5} | {:.2} | {:.3} |",
            100.0 * m.efficiency,
            100.0 * m.target_purity,
            100.0 * m.total_purity,
            100.0 * m.purity,
            100.0 * m.auc,
            m.loss,
            epoch_s,
            batch_s
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn same_path(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}
