//! The training loop: epochs over the training graphs, one optimiser step per group of graphs,
//! validation every epoch, logs, plots, checkpoints, best model and early stopping, exact resume.
//!
//! Data parallel by construction: every rank holds a full replica, takes its own graphs of each
//! step's group, and the gradients are averaged with one all-reduce of the flat buffer before the
//! optimiser step, so replicas stay identical. With one rank ([`crate::dist::SingleProcess`]) the
//! all-reduce is a no-op.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use trackgnn_engine::optim::{LrSchedule, clip_grad_norm, l2_norm};
use trackgnn_engine::{AuxTargets, EdgeTargets, GnnExecutor, InteractionGnn, executor_on};
use trackgnn_trackml::rng::Rng;

use crate::budget::{self, Oversize};
use crate::checkpoint::{load_checkpoint, load_weights, save_checkpoint, save_weights};
use crate::config::{BestMetric, NonFinite, SpikeAction, TrainConfig};
use crate::data::{GraphSet, LossWeights, Prefetcher, Split, epoch_groups};
use crate::dist::Comm;
use crate::epochs::{EpochTraining, Progress, run_epochs};
use crate::error::{Error, Result};
use crate::eval::{EvalResult, evaluate};
use crate::logs::{EpochRecord, MetricsLog, peak_rss_bytes};
use crate::plots;
use crate::run_dir::{EventSplit, InitWeights, RankChange, RunDir, StepRecord};

/// RNG stream of the weight initialisation.
const STREAM_INIT: u64 = 13;

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TrainOutcome {
    /// Epochs completed in total (including before a resume).
    pub epochs_completed: u64,
    /// Optimiser steps taken in total.
    pub global_step: u64,
    /// Stopped by a signal (a checkpoint was written).
    pub interrupted: bool,
    /// Stopped by early stopping.
    pub stopped_early: bool,
    /// The best epoch and its metric value.
    pub best_epoch: Option<u64>,
    /// Best value of the selection metric.
    pub best_value: f64,
    /// Steps skipped because the loss or a gradient was not finite (`non_finite = "skip"`).
    pub skipped_steps: u64,
    /// Loss spikes the alarm saw (`loss_spike_factor`), whatever `loss_spike` did with them.
    pub loss_spikes: u64,
}

/// Sums of the running epoch, kept in checkpoints so a resumed epoch reports what an
/// uninterrupted one would.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
struct EpochAccum {
    loss_sum: f64,
    /// Sum of the steps' auxiliary losses (0 without the auxiliary head).
    aux_loss_sum: f64,
    steps: u64,
    grad_norm_sum: f64,
    grad_norm_max: f64,
    train_seconds: f64,
    imbalance_sum: f64,
    allreduce_seconds: f64,
    engine_peak_bytes: u64,
}

/// Everything besides weights and optimiser state that resuming needs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct RunState {
    epoch: u64,
    step_in_epoch: u64,
    global_step: u64,
    ranks: usize,
    best_value: Option<f64>,
    best_epoch: Option<u64>,
    bad_epochs: u64,
    skipped_steps: u64,
    accum: EpochAccum,
    /// Loss spikes so far, and the losses of the last steps that were not spikes (the alarm's
    /// window, oldest first).
    #[serde(default)]
    loss_spikes: u64,
    #[serde(default)]
    recent_losses: Vec<f64>,
    config: TrainConfig,
    /// The current epoch's step groups when they are not the sampler's: after a resume with
    /// another number of ranks in mid-epoch, the graphs not yet trained, regrouped.
    #[serde(default)]
    regrouped: Option<Vec<Vec<usize>>>,
}

fn better(metric: BestMetric, new: f64, old: Option<f64>) -> bool {
    if !new.is_finite() {
        return false;
    }
    match (metric, old) {
        (_, None) => true,
        (BestMetric::ValLoss, Some(o)) => new < o,
        (_, Some(o)) => new > o,
    }
}

fn metric_value(metric: BestMetric, r: &EvalResult) -> f64 {
    match metric {
        BestMetric::ValLoss => r.mean.loss,
        BestMetric::Efficiency => r.mean.efficiency,
        BestMetric::Auc => r.mean.auc,
    }
}

/// The φ sectors each graph of `set` trains as under the memory budget (1: whole; all 1
/// without a budget). Graphs over it are cut or, with `oversize = skip`, removed from
/// `split.train`; rank 0 warns about each by name. Decided from headers only, so every rank
/// decides alike.
fn plan_parts(
    cfg: &TrainConfig,
    set: &GraphSet,
    split: &mut Split,
    model: &dyn GnnExecutor,
    dims: (usize, usize),
    warn: bool,
) -> Result<Vec<usize>> {
    let mut parts = vec![1; set.len()];
    if cfg.max_memory_bytes == 0 {
        return Ok(parts);
    }
    let budget = cfg.max_memory_bytes;
    let mut skipped = Vec::new();
    for &i in &split.train {
        let (n, e) = (set.nodes[i] as usize, set.edges[i] as usize);
        let need = budget::step_bytes(model, n, e, dims.0, dims.1);
        if need <= budget {
            continue;
        }
        let path = set.files[i].1.display();
        let k = match cfg.oversize {
            Oversize::Skip => None,
            Oversize::Split => budget::parts_needed(model, (n, e), dims, budget, cfg.sector_overlap_phi),
        };
        match (k, cfg.oversize) {
            (Some(k), _) => {
                parts[i] = k;
                if warn {
                    tracing::warn!(
                        "{path}: {n} nodes, {e} edges need ~{:.2} GB per step, over the budget of {:.2} GB: trained as {k} φ sectors",
                        need as f64 / 1e9,
                        budget as f64 / 1e9
                    );
                }
            }
            (None, Oversize::Split) => {
                return Err(Error::config(
                    "max_memory_bytes",
                    format!(
                        "= {budget} is too small for {path} ({n} nodes, {e} edges) even in {} sectors",
                        budget::MAX_PARTS
                    ),
                ));
            }
            (None, Oversize::Skip) => {
                skipped.push(i);
                if warn {
                    tracing::warn!(
                        "{path}: {n} nodes, {e} edges need ~{:.2} GB per step, over the budget of {:.2} GB: skipped",
                        need as f64 / 1e9,
                        budget as f64 / 1e9
                    );
                }
            }
        }
    }
    split.train.retain(|i| !skipped.contains(i));
    if split.train.is_empty() {
        return Err(Error::config("max_memory_bytes", format!("= {budget} is less than every training graph needs")));
    }
    Ok(parts)
}

/// Refuses, before anything is written, a domain split the run cannot make: with a memory
/// budget (whose φ sectors would split the partitions again), or with a graph of fewer nodes
/// than domain ranks.
fn check_domain_split(cfg: &TrainConfig, set: &GraphSet, graphs_dir: &Path, domain: usize) -> Result<()> {
    if cfg.max_memory_bytes > 0 {
        return Err(Error::config(
            "max_memory_bytes",
            format!("a memory budget cuts graphs into sectors, which {domain} domain ranks do not combine with yet"),
        ));
    }
    if let Some(i) = (0..set.len()).find(|&i| (set.nodes[i] as usize) < domain) {
        return Err(Error::TooFewGraphs {
            dir: graphs_dir.to_path_buf(),
            message: format!(
                "{} has {} nodes, fewer than the {domain} domain ranks to split it across",
                set.files[i].1.display(),
                set.nodes[i]
            ),
        });
    }
    Ok(())
}

/// The error of a split without validation events: validation picks the best weights and
/// drives early stopping, so a run without it would have nothing to keep.
fn empty_validation(graphs_dir: &Path, set: &GraphSet, fractions: [f64; 3]) -> Error {
    let mut ids: Vec<u64> = set.files.iter().map(|f| f.0).collect();
    ids.dedup();
    let what = format!(
        "{fractions:?} of the {} event(s) of {} leaves no validation event (validation picks the best weights and \
         drives early stopping)",
        ids.len(),
        graphs_dir.display()
    );
    Error::config(
        "split",
        match Split::events_for_validation(fractions) {
            Some(n) => {
                format!("{what}: it needs at least {n} events; build more graphs or raise the validation fraction")
            }
            None => format!("{what}: give validation a positive fraction (split = [train, validation, test])"),
        },
    )
}

/// A training run in progress.
pub struct Trainer<'a> {
    cfg: TrainConfig,
    set: GraphSet,
    split: Split,
    run: RunDir,
    comm: &'a mut dyn Comm,
    /// The model on its device, with its optimiser.
    exec: Box<dyn GnnExecutor>,
    schedule: LrSchedule,
    state: RunState,
    /// φ sectors each graph of the set is trained as (1: whole), from the memory budget.
    parts: Vec<usize>,
    /// Global step of the last checkpoint written or resumed from.
    last_saved_step: Option<u64>,
    /// Fault injection for tests of the replica check: at global step `.0`, rank `.1` changes
    /// one weight of its replica.
    pub inject_divergence: Option<(u64, usize)>,
    /// Fault injection for tests of the loss-spike alarm: before global step `.0` (counted
    /// from 1), every weight is multiplied by `.1`.
    pub inject_weight_scale: Option<(u64, f32)>,
}

impl<'a> Trainer<'a> {
    /// The model on its device (its parameters, for tests and evaluation).
    pub fn executor(&self) -> &dyn GnnExecutor {
        &*self.exec
    }

    /// The φ sectors each graph of the set trains as (1: whole), by index into the set.
    pub fn parts(&self) -> &[usize] {
        &self.parts
    }

    /// Indices (into the graph set) of the training graphs, after any skipped for memory.
    pub fn train_graphs(&self) -> &[usize] {
        &self.split.train
    }

    /// Sets up a run in `run_dir` on the graphs of `graphs_dir`; with `resume`, continues from
    /// the run's last checkpoint (which must exist).
    pub fn new(
        cfg: TrainConfig,
        graphs_dir: &Path,
        run_dir: &Path,
        resume: bool,
        comm: &'a mut dyn Comm,
    ) -> Result<Self> {
        let cfg = cfg.with_aux_head();
        cfg.validate()?;
        let set = GraphSet::open(graphs_dir, cfg.max_graphs)?;
        let mut split = Split::by_event(&set, cfg.split, cfg.seed);
        if split.train.is_empty() {
            return Err(Error::TooFewGraphs { dir: graphs_dir.to_path_buf(), message: "no training graphs".into() });
        }
        if split.val.is_empty() {
            return Err(empty_validation(graphs_dir, &set, cfg.split));
        }
        let first = crate::data::load_sample(&set.files[split.train[0]].1, LossWeights::of(&cfg))?;
        let (node_dim, edge_dim) = (first.input.node_dim, first.input.edge_dim);
        let mut model =
            InteractionGnn::new(cfg.model.clone(), node_dim, edge_dim, &mut Rng::for_stream(&[cfg.seed, STREAM_INIT]));
        model.checkpointing = cfg.checkpointing;
        model.set_precision(cfg.precision);
        if let (Some(path), false) = (&cfg.init_weights, resume) {
            load_weights(path, &mut model.params)?;
        }
        let mut exec =
            executor_on(cfg.device, model, cfg.optimizer).map_err(|e| Error::config("device", e.to_string()))?;
        let domain = comm.domain_ranks();
        if domain > 1 {
            check_domain_split(&cfg, &set, graphs_dir, domain)?;
        }
        let data_ranks = comm.size() / domain;
        let parts = plan_parts(&cfg, &set, &mut split, &*exec, (node_dim, edge_dim), comm.is_root())?;
        let per = data_ranks * cfg.graphs_per_step;
        if split.train.len() < per {
            return Err(Error::config(
                "graphs_per_step",
                format!(
                    "= {2}: {} training graphs cannot fill one step of {} data-parallel ranks × {} graphs",
                    split.train.len(),
                    data_ranks,
                    cfg.graphs_per_step
                ),
            ));
        }
        if epoch_groups(&cfg, &set, &split.train, data_ranks, 0).is_empty() {
            return Err(Error::config(
                "sampler_bins",
                format!(
                    "= {1}: {} training graphs in {} size bins give no full step of {} ranks × {} graphs (the balanced \
                     sampler draws a step from one bin): use more graphs or fewer sampler_bins",
                    split.train.len(),
                    cfg.sampler_bins,
                    data_ranks,
                    cfg.graphs_per_step
                ),
            ));
        }
        // Every replica starts from rank 0's weights.
        comm.broadcast(&mut exec.params_mut().data, 0)?;
        let schedule = LrSchedule::new(cfg.schedule);
        let state = RunState {
            epoch: 0,
            step_in_epoch: 0,
            global_step: 0,
            ranks: data_ranks,
            best_value: None,
            best_epoch: None,
            bad_epochs: 0,
            skipped_steps: 0,
            accum: EpochAccum::default(),
            loss_spikes: 0,
            recent_losses: Vec::new(),
            config: cfg.clone(),
            regrouped: None,
        };
        let run = RunDir::new(run_dir);
        let mut t = Trainer {
            cfg,
            set,
            split,
            run,
            comm,
            exec,
            schedule,
            state,
            parts,
            last_saved_step: None,
            inject_divergence: None,
            inject_weight_scale: None,
        };
        if resume {
            t.resume()?;
        } else if t.comm.is_root() {
            t.start_run_dir(graphs_dir)?;
        }
        t.comm.barrier()?;
        Ok(t)
    }

    fn start_run_dir(&self, graphs_dir: &Path) -> Result<()> {
        let root = self.run.root();
        if self.run.checkpoint_dir().exists() {
            return Err(Error::RunExists { dir: root.to_path_buf() });
        }
        fs::create_dir_all(root).map_err(|e| Error::io(root, e))?;
        self.run.write_config(&self.cfg)?;
        self.run.copy_recipe(graphs_dir)?;
        let init_weights = match &self.cfg.init_weights {
            Some(path) => {
                let hash = trackgnn_graph::module_map::file_hash(path)?;
                Some(InitWeights { hash, path: path.clone() })
            }
            None => None,
        };
        self.run.write_events(&EventSplit {
            graphs_dir: graphs_dir.to_path_buf(),
            init_weights,
            test: self.event_ids(&self.split.test),
            train: self.event_ids(&self.split.train),
            val: self.event_ids(&self.split.val),
        })?;
        self.run.remove_steps();
        MetricsLog::create(root)?;
        Ok(())
    }

    fn resume(&mut self) -> Result<()> {
        let dir = self.run.checkpoint_dir();
        let (opt_state, state) = load_checkpoint(&dir, self.exec.params_mut())?;
        let saved: RunState = serde_json::from_value(state)
            .map_err(|e| trackgnn_model::Error::Json { path: dir.join(crate::run_dir::STATE_FILE), source: e })?;
        // The starting weights matter only to a fresh run: a resume continues from the
        // checkpoint's, with or without `init_weights` given again.
        self.cfg.init_weights = saved.config.init_weights.clone();
        let mut a = saved.config.clone();
        a.epochs = self.cfg.epochs;
        // Checkpointing changes memory and time, never the gradients; the fault policies change
        // nothing a finished step did.
        a.checkpointing = self.cfg.checkpointing;
        a.device = self.cfg.device;
        a.non_finite = self.cfg.non_finite;
        (a.loss_spike_factor, a.loss_spike_window, a.loss_spike) =
            (self.cfg.loss_spike_factor, self.cfg.loss_spike_window, self.cfg.loss_spike);
        a.replica_check_every_steps = self.cfg.replica_check_every_steps;
        // A new schedule that gave every step already taken its learning rate (a decay that
        // starts from now on) keeps the run one that a fresh start with it reproduces.
        if self.schedule_agrees_with_the_past(&saved) {
            a.schedule = self.cfg.schedule;
        }
        if a != self.cfg {
            return Err(Error::Model(trackgnn_model::Error::Inconsistent {
                path: dir.clone(),
                message: format!(
                    "the checkpoint was written with another configuration (only `epochs`, `checkpointing`, `non_finite`, the loss-spike alarm, \
                     `replica_check_every_steps` and a schedule that keeps the learning rates of the {} steps already taken may change on resume)",
                    saved.global_step
                ),
            }));
        }
        self.exec.restore_optimizer(opt_state);
        let previous_ranks = saved.ranks;
        self.state = RunState { ranks: self.data_ranks(), ..saved };
        self.state.config = self.cfg.clone();
        self.last_saved_step = Some(self.state.global_step);
        let change = (previous_ranks != self.data_ranks()).then(|| self.regroup(previous_ranks));
        // Every rank resumes from the same weights (rank 0's, which wrote them).
        self.comm.broadcast(&mut self.exec.params_mut().data, 0)?;
        if self.comm.is_root() {
            MetricsLog::resume(self.run.root(), self.state.epoch)?;
            self.run.truncate_steps(self.state.global_step)?;
            if let Some(change) = change {
                tracing::warn!(
                    "resuming a run of {} rank(s) with {}: learning rate {} → {}, the rest of epoch {} regrouped \
                     into {} step(s) ({} graph(s) left out); recorded in {}",
                    change.previous_ranks,
                    change.ranks,
                    change.previous_lr,
                    change.lr,
                    change.epoch,
                    change.steps_left_in_epoch,
                    change.graphs_left_out,
                    self.run.resumes_path().display()
                );
                self.run.append_rank_change(&change)?;
            }
        }
        Ok(())
    }

    /// After a resume with another number of ranks than `previous` ran with: the rest of the
    /// interrupted epoch (its graphs not yet trained, in the sampler's order) regrouped into
    /// steps of this run's ranks, the leftover that fills no step left out as the sampler
    /// leaves it out. The learning-rate scaling follows the ranks by itself (it is computed
    /// from them each step). Returns the record of the change.
    fn regroup(&mut self, previous: usize) -> RankChange {
        let (size, gps, done) = (self.data_ranks(), self.cfg.graphs_per_step, self.state.step_in_epoch as usize);
        let mut left_out = 0;
        self.state.regrouped = if done == 0 {
            None
        } else {
            let old =
                self.state.regrouped.take().unwrap_or_else(|| {
                    epoch_groups(&self.cfg, &self.set, &self.split.train, previous, self.state.epoch)
                });
            let rest: Vec<usize> = old[done.min(old.len())..].concat();
            let chunks = rest.chunks_exact(size * gps);
            left_out = chunks.remainder().len();
            // The steps already taken keep their numbers (their groups are not needed again).
            Some(std::iter::repeat_n(Vec::new(), done).chain(chunks.map(<[usize]>::to_vec)).collect())
        };
        let steps = self.groups(self.state.epoch).len() as u64;
        RankChange {
            epoch: self.state.epoch,
            global_step: self.state.global_step,
            graphs_left_out: left_out as u64,
            lr: self.cfg.scaled_lr(size),
            previous_lr: self.cfg.scaled_lr(previous),
            previous_ranks: previous,
            ranks: size,
            step_in_epoch: done as u64,
            steps_left_in_epoch: steps.saturating_sub(done as u64),
        }
    }

    /// Whether this run's schedule gives each step `saved` has taken the learning rate that the
    /// saved run's schedule gave it.
    fn schedule_agrees_with_the_past(&self, saved: &RunState) -> bool {
        let (old, new) = (LrSchedule::new(saved.config.schedule), LrSchedule::new(self.cfg.schedule));
        (0..=saved.epoch).all(|epoch| {
            let steps = epoch_groups(&saved.config, &self.set, &self.split.train, saved.ranks, epoch).len();
            let done = if epoch < saved.epoch { steps } else { saved.step_in_epoch as usize };
            (0..done).all(|s| {
                let (x, y) = (old.lr(1.0, epoch as usize, s, steps), new.lr(1.0, epoch as usize, s, steps));
                (x - y).abs() <= 1e-12 * x.abs()
            })
        })
    }

    /// Rank 0 writes a checkpoint. A failed write (disk full, …) leaves the previous one
    /// intact, and the error says which step it holds.
    fn save(&mut self) -> Result<()> {
        if self.comm.is_root() {
            let state = serde_json::to_value(&self.state).expect("state serialises");
            let dir = self.run.checkpoint_dir();
            let opt_state = self.exec.optimizer_state()?;
            save_checkpoint(&dir, self.exec.params(), &opt_state, &state).map_err(|e| Error::CheckpointWrite {
                kept: match self.last_saved_step {
                    Some(s) => format!("the previous checkpoint there (step {s}) is intact"),
                    None => "the run has no checkpoint yet".into(),
                },
                dir,
                step: self.state.global_step,
                source: Box::new(e),
            })?;
        }
        self.last_saved_step = Some(self.state.global_step);
        Ok(())
    }

    /// Whether `loss` is a spike: beyond `loss_spike_factor` × the median of the window of
    /// earlier losses (once it is full). A loss that is not a spike joins the window.
    fn loss_spike(&mut self, loss: f64) -> bool {
        let (k, window) = (self.cfg.loss_spike_factor, self.cfg.loss_spike_window);
        let recent = &mut self.state.recent_losses;
        let spike = k > 0.0 && recent.len() >= window && {
            let mut sorted = recent.clone();
            sorted.sort_by(f64::total_cmp);
            let n = sorted.len();
            let median = if n % 2 == 1 { sorted[n / 2] } else { 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]) };
            loss > k * median
        };
        if !spike {
            recent.push(loss);
            if recent.len() > window {
                recent.remove(0);
            }
        }
        spike
    }

    /// Back to the weights and optimiser state of the last checkpoint (every rank reads it,
    /// then takes rank 0's weights), the run's counters untouched; without a checkpoint yet, the
    /// weights stay as they are.
    fn rollback(&mut self) -> Result<()> {
        if self.last_saved_step.is_none() {
            return Ok(());
        }
        let (opt_state, _) = load_checkpoint(&self.run.checkpoint_dir(), self.exec.params_mut())?;
        self.exec.restore_optimizer(opt_state);
        self.comm.broadcast(&mut self.exec.params_mut().data, 0)
    }

    /// Data-parallel ranks: the ranks over domain ranks (each domain group trains one graph
    /// split across its ranks).
    fn data_ranks(&self) -> usize {
        self.comm.size() / self.comm.domain_ranks()
    }

    /// This rank's data-parallel rank (its domain group).
    fn data_rank(&self) -> usize {
        self.comm.rank() / self.comm.domain_ranks()
    }

    /// The step groups of `epoch` for this run's ranks.
    fn groups(&self, epoch: u64) -> Vec<Vec<usize>> {
        match &self.state.regrouped {
            Some(g) if epoch == self.state.epoch => g.clone(),
            _ => epoch_groups(&self.cfg, &self.set, &self.split.train, self.data_ranks(), epoch),
        }
    }

    /// Runs epochs until the configured number, early stopping, or `stop` turns true (then a
    /// checkpoint is written and the outcome says `interrupted`), through the epoch driver
    /// every training shares ([`run_epochs`]).
    pub fn run(&mut self, progress: &dyn Progress, stop: &AtomicBool) -> Result<TrainOutcome> {
        let root = self.comm.is_root();
        let log = if root { Some(MetricsLog::resume(self.run.root(), self.state.epoch)?) } else { None };
        let history = if root { self.run.read_metrics().unwrap_or_default() } else { Vec::new() };
        let mut epochs = GnnEpochs { trainer: self, log, history, steps: 0 };
        let end = run_epochs(&mut epochs, progress, stop)?;
        self.write_rank_report()?;
        Ok(TrainOutcome {
            epochs_completed: self.state.epoch,
            global_step: self.state.global_step,
            interrupted: end.interrupted,
            stopped_early: end.stopped_early,
            best_epoch: self.state.best_epoch,
            best_value: self.state.best_value.unwrap_or(f64::NAN),
            skipped_steps: self.state.skipped_steps,
            loss_spikes: self.state.loss_spikes,
        })
    }

    /// Validates the epoch just trained (of `steps` steps) and keeps it: best weights, the
    /// state moved to the next epoch, the metrics log and plots (rank 0), the checkpoint.
    fn end_epoch(
        &mut self,
        steps: u64,
        log: Option<&mut MetricsLog>,
        history: &mut Vec<EpochRecord>,
    ) -> Result<EpochRecord> {
        let epoch = self.state.epoch;
        self.check_replicas()?;
        // Under a memory budget, validation runs with the training step's activations freed:
        // the two never need to be in memory together, and a full event's step holds
        // gigabytes. Without one they are kept: freeing and faulting them in again each
        // epoch costs seconds of kernel time (page zeroing, which two ranks on one memory
        // bus slow each other at).
        if self.cfg.max_memory_bytes > 0 {
            self.exec.release_buffers();
        }
        let val = evaluate(&*self.exec, &self.set, &self.split.val, &self.cfg, self.comm, true)?;
        if self.cfg.max_memory_bytes > 0 {
            self.exec.release_buffers();
        }
        let rec = self.epoch_record(epoch, steps, &val);
        self.keep_if_best(epoch, &val)?;
        self.state.epoch += 1;
        self.state.step_in_epoch = 0;
        self.state.accum = EpochAccum::default();
        self.state.regrouped = None;
        if let Some(log) = log {
            log.append(&rec)?;
            history.push(rec.clone());
            self.plot(history, &val)?;
        }
        self.save()?;
        Ok(rec)
    }

    /// The remaining steps of the current epoch (whose step groups are `groups`), each logged,
    /// with the periodic replica checks and checkpoints. True if `stop` interrupted it (a
    /// checkpoint was written).
    fn train_epoch(&mut self, groups: &[Vec<usize>], progress: &dyn Progress, stop: &AtomicBool) -> Result<bool> {
        let (epoch, rank, gps) = (self.state.epoch, self.data_rank(), self.cfg.graphs_per_step);
        let steps = groups.len() as u64;
        progress.epoch_start(epoch, steps);
        let first_step = self.state.step_in_epoch;
        let paths: Vec<(PathBuf, usize)> = groups[first_step as usize..]
            .iter()
            .flat_map(|g| g[rank * gps..(rank + 1) * gps].iter().map(|&i| (self.set.files[i].1.clone(), self.parts[i])))
            .collect();
        let domain = self.comm.domain_ranks();
        let mut loader = if domain > 1 {
            Prefetcher::domain(
                paths.into_iter().map(|p| p.0).collect(),
                LossWeights::of(&self.cfg),
                self.comm.rank() % domain,
                domain,
            )
        } else {
            Prefetcher::with_parts(paths, LossWeights::of(&self.cfg), self.cfg.sector_overlap_phi)
        };
        for step in first_step..steps {
            if let Some((at, k)) = self.inject_weight_scale
                && at == self.state.global_step + 1
            {
                self.exec.params_mut().data.iter_mut().for_each(|w| *w *= k);
            }
            let record = self.step(&mut loader, &groups[step as usize], steps, progress)?;
            if self.comm.is_root() {
                // Every rank derives the same groups, so rank 0 knows what each trained on.
                let events = groups[step as usize].chunks_exact(gps).map(|g| self.event_ids(g)).collect();
                self.run.append_step(&StepRecord { events, ..record })?;
            }
            if let Some((at, r)) = self.inject_divergence
                && at == self.state.global_step
                && r == self.comm.rank()
            {
                self.exec.params_mut().data[0] += 1e-3;
            }
            let k = self.cfg.replica_check_every_steps as u64;
            if k > 0 && self.state.global_step.is_multiple_of(k) {
                self.check_replicas()?;
            }
            let every = self.cfg.checkpoint_every_steps as u64;
            let stop_now = self.comm.any(stop.load(Ordering::Relaxed))?;
            if (every > 0 && self.state.global_step.is_multiple_of(every) && step + 1 < steps) || stop_now {
                self.save()?;
            }
            if stop_now {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The next optimiser step of the current epoch (of `steps`), on the graphs of `group`
    /// (every rank's, in rank order): gradients of this rank's graphs, their all-reduce,
    /// clipping and the update; the epoch's sums updated. A loss or gradient that is not finite
    /// on any rank stops the run naming the step and the graphs, or, with `non_finite = skip`,
    /// skips the update. Returns the step's record without its events.
    fn step(
        &mut self,
        loader: &mut Prefetcher,
        group: &[usize],
        steps: u64,
        progress: &dyn Progress,
    ) -> Result<StepRecord> {
        let (epoch, size, gps) = (self.state.epoch, self.comm.size(), self.cfg.graphs_per_step);
        let (data_ranks, domain) = (self.data_ranks(), self.comm.domain_ranks());
        let step = self.state.step_in_epoch;
        let t_step = Instant::now();
        let (loss_sum, aux_sum, held) = self.gradients(loader)?;
        // Checked before the all-reduce, which would spread a NaN to every rank's gradient.
        let local_finite = loss_sum.is_finite() && self.exec.params().grad.iter().all(|g| g.is_finite());
        let compute_s = t_step.elapsed().as_secs_f64();
        let engine_bytes = self.exec.buffer_bytes() as u64;
        self.state.accum.engine_peak_bytes = self.state.accum.engine_peak_bytes.max(engine_bytes);
        // One all-reduce of the flat gradient buffer averages the replicas' gradients (a domain
        // group's ranks hold parts of one gradient: their sum, so the mean over all ranks times
        // the group's size). Its duration includes waiting for the slowest rank: the load
        // imbalance.
        let t_reduce = Instant::now();
        self.comm.allreduce_mean(&mut self.exec.params_mut().grad)?;
        if domain > 1 {
            let k = domain as f32;
            self.exec.params_mut().grad.iter_mut().for_each(|g| *g *= k);
        }
        let reduce_s = t_reduce.elapsed().as_secs_f64();
        // Loss, finiteness and per-rank timings travel together in one small gather.
        let rss = trackgnn_engine::alloc::peak_rss_bytes() as f64;
        let mine = [
            loss_sum / gps as f64,
            local_finite as u8 as f64,
            compute_s,
            reduce_s,
            rss,
            held.0,
            held.1,
            aux_sum / gps as f64,
        ];
        let stats = self.comm.allgather_f64(&mine)?;
        let per_rank = |k: usize| -> Vec<f64> { stats.chunks_exact(mine.len()).map(|r| r[k]).collect() };
        let loss = per_rank(0).iter().sum::<f64>() / data_ranks as f64;
        let aux_loss = (self.cfg.aux_pt_weight > 0.0).then(|| per_rank(7).iter().sum::<f64>() / data_ranks as f64);
        let bad_ranks: Vec<usize> = (0..size).filter(|&r| per_rank(1)[r] == 0.0).collect();
        let (computes, reduces) = (per_rank(2), per_rank(3));
        let counts = |k: usize| -> Vec<u64> { per_rank(k).iter().map(|&v| v as u64).collect() };
        let split = domain > 1;
        let mean_compute = computes.iter().sum::<f64>() / size as f64;
        let imbalance = computes.iter().cloned().fold(0.0, f64::max) / mean_compute.max(1e-12);
        self.state.accum.imbalance_sum += imbalance;
        self.state.accum.allreduce_seconds += reduces.iter().sum::<f64>() / size as f64;
        let grad_norm = clip_grad_norm(&mut self.exec.params_mut().grad, self.cfg.clip_grad_norm);
        let lr = self.schedule.lr(self.cfg.scaled_lr(data_ranks), epoch as usize, step as usize, steps as usize);
        let finite = bad_ranks.is_empty() && loss.is_finite() && grad_norm.is_finite();
        if !finite && self.cfg.non_finite == NonFinite::Stop {
            // Every rank saw the same gathered flags: all stop with the same message.
            return Err(self.non_finite_error(step, group, &bad_ranks, loss, grad_norm));
        }
        let spike = finite && self.loss_spike(loss);
        if spike {
            self.state.loss_spikes += 1;
            let action = self.cfg.loss_spike;
            let what = match action {
                SpikeAction::Warn => "updating as usual",
                SpikeAction::Skip => "step skipped",
                SpikeAction::Rollback => "step skipped, back to the last checkpoint's weights",
            };
            let graphs = self.graph_names(group, &[]);
            let message = format!(
                "epoch {epoch} step {step}: loss spike, {loss:.5} > {} × the median of the last {} steps ({graphs}); {what}",
                self.cfg.loss_spike_factor,
                self.state.recent_losses.len()
            );
            progress.message(&message);
            tracing::warn!("{message}");
            if action == SpikeAction::Rollback {
                self.rollback()?;
            }
        }
        let update = finite && !(spike && self.cfg.loss_spike != SpikeAction::Warn);
        if update {
            self.exec.optimizer_step(lr)?;
            self.state.accum.loss_sum += loss;
            self.state.accum.aux_loss_sum += aux_loss.unwrap_or(0.0);
            self.state.accum.grad_norm_sum += grad_norm;
            self.state.accum.grad_norm_max = self.state.accum.grad_norm_max.max(grad_norm);
        } else if !finite {
            // Every rank sees the same gathered values, so all skip together.
            self.state.skipped_steps += 1;
            let graphs = self.graph_names(group, &bad_ranks);
            progress.message(&format!(
                "epoch {epoch} step {step}: loss {loss} / gradient norm {grad_norm} not finite ({graphs}), step skipped \
                 ({} skipped so far)",
                self.state.skipped_steps
            ));
            tracing::warn!("epoch {epoch} step {step}: not finite ({graphs}), step skipped");
        }
        self.state.accum.steps += 1;
        self.state.global_step += 1;
        self.state.step_in_epoch = step + 1;
        let dt = t_step.elapsed().as_secs_f64();
        self.state.accum.train_seconds += dt;
        progress.step(loss);
        Ok(StepRecord {
            allreduce_seconds: reduces,
            aux_loss,
            compute_seconds: computes,
            engine_bytes,
            peak_rss_bytes: counts(4),
            halo_nodes: if split { counts(5) } else { Vec::new() },
            local_edges: if split { counts(6) } else { Vec::new() },
            epoch,
            events: Vec::new(),
            global_step: self.state.global_step,
            grad_norm,
            load_imbalance: imbalance,
            loss_spike: spike,
            loss,
            lr,
            seconds: dt,
            skipped: !finite,
            step,
        })
    }

    /// The graphs of the ranks in `ranks` (all of the step's if empty) in step `group`.
    fn graph_names(&self, group: &[usize], ranks: &[usize]) -> String {
        let gps = self.cfg.graphs_per_step;
        let all: Vec<usize> = (0..self.comm.size()).collect();
        let ranks = if ranks.is_empty() { &all[..] } else { ranks };
        let names: Vec<String> = ranks
            .iter()
            .flat_map(|&r| {
                let d = r / self.comm.domain_ranks();
                group[d * gps..(d + 1) * gps].iter().map(move |&i| (r, i))
            })
            .map(|(r, i)| format!("rank {r}: {}", self.set.files[i].1.display()))
            .collect();
        names.join(", ")
    }

    /// The error that stops a run at a step whose loss or gradient is not finite.
    fn non_finite_error(&self, step: u64, group: &[usize], bad_ranks: &[usize], loss: f64, grad_norm: f64) -> Error {
        let kept = match self.last_saved_step {
            Some(s) => format!("the last checkpoint ({}, step {s}) is kept", self.run.checkpoint_dir().display()),
            None => "no checkpoint was written yet".into(),
        };
        Error::Training(format!(
            "epoch {} step {step} (global step {}): the loss or a gradient is not finite (loss {loss}, gradient norm \
             {grad_norm}) on {}; training stopped, {kept} (`non_finite = \"skip\"` skips such steps instead)",
            self.state.epoch,
            self.state.global_step + 1,
            self.graph_names(group, bad_ranks)
        ))
    }

    /// The gradients of this rank's graphs of one step, summed into the parameters' gradient
    /// buffer (zeroed first); returns the sum of their losses and of their auxiliary losses
    /// (0 without the auxiliary head), and the halo nodes and edges they held (domain
    /// parallelism; 0 and their edges otherwise).
    fn gradients(&mut self, loader: &mut Prefetcher) -> Result<(f64, f64, (f64, f64))> {
        let gps = self.cfg.graphs_per_step;
        let lambda = self.cfg.aux_pt_weight;
        self.exec.zero_grad();
        let (mut loss_sum, mut aux_sum, mut halo_nodes, mut edges) = (0.0, 0.0, 0.0, 0.0);
        for _ in 0..gps {
            // A graph over the memory budget comes as sectors; the gradients of their mean
            // losses, scaled by their share of the edges, add up to the whole graph's (less the
            // few edges no sector holds).
            for mut s in loader.next_parts().expect("a graph per slot")? {
                if let Some(plan) = &s.halo {
                    s.input.halo = Some(self.comm.domain_halo(plan)?);
                    halo_nodes += plan.halo_rows() as f64;
                }
                edges += s.input.num_edges() as f64;
                // BCE + λ·MSE: the auxiliary head's gradient enters the backward with the
                // logits'. The part's sum over its counted true edges is already divided by the
                // whole graph's count, so it needs no loss_scale.
                let aux = (lambda > 0.0).then_some(AuxTargets {
                    log_pt: &s.log_pt,
                    weight: &s.aux_weight,
                    count: s.aux_edges,
                });
                let targets =
                    EdgeTargets { target: &s.target, weight: &s.weight, pos_weight: self.cfg.pos_weight, aux };
                let scale = (s.loss_scale / gps as f64) as f32;
                let l = self.exec.loss_backward(&s.input, &targets, scale, (lambda / gps as f64) as f32)?;
                loss_sum += l.loss * s.loss_scale;
                aux_sum += l.aux_loss;
            }
        }
        Ok((loss_sum, aux_sum, (halo_nodes, edges)))
    }

    /// The log record of an epoch of `steps` steps that just finished, validated as `val`.
    fn epoch_record(&self, epoch: u64, steps: u64, val: &EvalResult) -> EpochRecord {
        let a = &self.state.accum;
        let per_step = |x: f64| x / (a.steps.max(1)) as f64;
        let base_lr = self.cfg.scaled_lr(self.data_ranks());
        EpochRecord {
            epoch,
            step: self.state.global_step,
            train_loss: per_step(a.loss_sum),
            val_loss: val.mean.loss,
            train_aux_loss: (self.cfg.aux_pt_weight > 0.0).then(|| per_step(a.aux_loss_sum)),
            val_aux_loss: val.aux_loss,
            efficiency: val.mean.efficiency,
            target_purity: val.mean.target_purity,
            total_purity: val.mean.total_purity,
            purity: val.mean.purity,
            auc: val.mean.auc,
            lr: self.schedule.lr(base_lr, epoch as usize, steps.saturating_sub(1) as usize, steps as usize),
            grad_norm: per_step(a.grad_norm_sum),
            grad_norm_max: a.grad_norm_max,
            weight_norm: l2_norm(&self.exec.params().data),
            epoch_seconds: a.train_seconds + val.seconds,
            seconds_per_batch: per_step(a.train_seconds),
            val_seconds: val.seconds,
            load_imbalance: per_step(a.imbalance_sum),
            allreduce_seconds: a.allreduce_seconds,
            engine_peak_bytes: a.engine_peak_bytes,
            peak_rss_bytes: peak_rss_bytes(),
        }
    }

    /// Best model and early stopping: keeps the weights (rank 0 writes them) if `val` beats
    /// the best so far, else counts a bad epoch.
    fn keep_if_best(&mut self, epoch: u64, val: &EvalResult) -> Result<()> {
        let value = metric_value(self.cfg.best_metric, val);
        if better(self.cfg.best_metric, value, self.state.best_value) {
            self.state.best_value = Some(value);
            self.state.best_epoch = Some(epoch);
            self.state.bad_epochs = 0;
            if self.comm.is_root() {
                save_weights(&self.run.best_path(), self.exec.params())?;
            }
        } else {
            self.state.bad_epochs += 1;
        }
        Ok(())
    }

    /// Event ids of graphs (indices into the graph set).
    fn event_ids(&self, idx: &[usize]) -> Vec<u64> {
        idx.iter().map(|&i| self.set.files[i].0).collect()
    }

    /// Every rank writes `rank{r}.json`: its process's peak memory, CPU and wall time.
    fn write_rank_report(&self) -> Result<()> {
        let (rank, size) = (self.comm.rank(), self.comm.size());
        Ok(self.run.write_rank_report(&crate::logs::measure_rank(rank, size, rayon::current_num_threads()))?)
    }

    /// Stops with an error if the replicas' weights differ (they must stay bit-identical).
    fn check_replicas(&mut self) -> Result<()> {
        if self.comm.size() == 1 {
            return Ok(());
        }
        let mine = checksum(&self.exec.params().data);
        let all = self.comm.allgather_f64(&mine)?;
        if all.chunks_exact(2).any(|c| c != mine) {
            return Err(Error::Dist(format!(
                "the model replicas diverged by step {} (weight checksums per rank: {:?}); \
                 ranks must run the same binary with the same settings",
                self.state.global_step, all
            )));
        }
        Ok(())
    }

    fn plot(&self, history: &[EpochRecord], val: &EvalResult) -> Result<()> {
        let dir = self.run.plots_dir();
        fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let series = |f: fn(&EpochRecord) -> f64| history.iter().map(|r| (r.epoch as f64, f(r))).collect::<Vec<_>>();
        plots::plot_gnn_loss(&dir, history)?;
        plots::plot_series(
            &dir.join(crate::run_dir::METRICS_PLOT),
            "Validation edge metrics",
            "epoch",
            "fraction",
            &[
                ("efficiency", series(|r| r.efficiency)),
                ("target purity", series(|r| r.target_purity)),
                ("total purity", series(|r| r.total_purity)),
                ("purity", series(|r| r.purity)),
                ("AUC", series(|r| r.auc)),
            ],
            false,
        )?;
        plots::plot_series(
            &dir.join(crate::run_dir::GRADIENT_NORM_PLOT),
            "Gradient and weight norms",
            "epoch",
            "L2 norm",
            &[
                ("gradient (mean)", series(|r| r.grad_norm)),
                ("gradient (max)", series(|r| r.grad_norm_max)),
                ("weights", series(|r| r.weight_norm)),
            ],
            true,
        )?;
        if !val.roc.is_empty() {
            plots::plot_roc(&dir.join(crate::run_dir::ROC_PLOT), &[("validation", val.roc.clone())])?;
        }
        Ok(())
    }

    /// The run's split.
    pub fn split(&self) -> &Split {
        &self.split
    }

    /// The run's graphs.
    pub fn graph_set(&self) -> &GraphSet {
        &self.set
    }
}

/// A [`Trainer`]'s epochs as the epoch driver runs them, with rank 0's metrics log and history.
struct GnnEpochs<'t, 'a> {
    trainer: &'t mut Trainer<'a>,
    log: Option<MetricsLog>,
    history: Vec<EpochRecord>,
    /// Steps of the epoch in progress.
    steps: u64,
}

impl EpochTraining for GnnEpochs<'_, '_> {
    type Record = EpochRecord;

    fn next_epoch(&self) -> u64 {
        self.trainer.state.epoch
    }

    fn epochs(&self) -> u64 {
        self.trainer.cfg.epochs as u64
    }

    fn train_epoch(&mut self, progress: &dyn Progress, stop: &AtomicBool) -> Result<bool> {
        let groups = self.trainer.groups(self.trainer.state.epoch);
        self.steps = groups.len() as u64;
        self.trainer.train_epoch(&groups, progress, stop)
    }

    fn end_epoch(&mut self) -> Result<EpochRecord> {
        self.trainer.end_epoch(self.steps, self.log.as_mut(), &mut self.history)
    }

    fn stop_early(&self) -> Option<String> {
        let patience = self.trainer.cfg.early_stopping_patience as u64;
        (patience > 0 && self.trainer.state.bad_epochs >= patience).then(|| {
            format!("early stopping after epoch {}: no improvement for {patience} epochs", self.trainer.state.epoch - 1)
        })
    }
}

/// A checksum of the weights that any bit difference changes: the bit patterns summed as
/// integers (split into two halves that f64 holds exactly) in a fixed order.
fn checksum(w: &[f32]) -> [f64; 2] {
    let (mut lo, mut hi) = (0u64, 0u64);
    for (i, v) in w.iter().enumerate() {
        let b = v.to_bits() as u64 ^ (i as u64).wrapping_mul(0x9E37_79B9);
        lo = lo.wrapping_add(b & 0xFFFF);
        hi = hi.wrapping_add(b >> 16);
    }
    [(lo % (1 << 52)) as f64, (hi % (1 << 52)) as f64]
}
