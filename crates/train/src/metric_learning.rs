//! The learned stages of metric-learning graph construction (the Exa.TrkX route): the hit
//! embedding trained with a hinge loss on pairs ([`embedding`]) and the edge filter that prunes
//! its radius graph ([`filter`]). Both train on events (not graph files), on every particle,
//! prompt and secondary, and leave a run directory like the GNN's:
//!
//! ```text
//! run/
//!   config.toml         the resolved EmbeddingConfig or FilterConfig
//!   metrics.jsonl       one StageRecord per epoch
//!   metrics.csv         the same as CSV
//!   best.safetensors    weights of the best epoch ([`BestBy`]: the embedding's highest
//!                       efficiency at its edge budget, the filter's lowest validation loss)
//!   checkpoint/         the last epoch's weights, optimiser and state (resume)
//!   plots/              loss.png and graph.png (efficiency, purity per epoch)
//! ```
//!
//! Inference goes through [`embedding::EmbeddingModel`] and [`filter::FilterModel`] (of
//! `trackgnn_model::stages`, re-exported here), which implement the graph crate's
//! `HitEmbedder` and `EdgeScorer`; [`events::prepare_events`]
//! reads and prepares the events they train on.

pub mod embedding;
pub mod events;
pub mod filter;
mod report;
mod trainer;

pub use report::{StageReport, read_stage_config};
pub use trackgnn_model::stages::{LearnedStages, StageConfig, StageModel, StageTraining, embedding_run, filter_run};
pub use trainer::StageOutcome;

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use trackgnn_engine::DenseNet;
use trackgnn_engine::optim::{AdamW, AdamWConfig};
use trackgnn_graph::features::{FeatureConfig, HitTable, NodeCuts};
use trackgnn_graph::recipe::PROMPT_R;
use trackgnn_graph::truth::{TargetConfig, pair_key, truth_edges};
use trackgnn_trackml::Event;
use trackgnn_trackml::geometry::Detector;

use crate::checkpoint::{self, save_weights};
use crate::error::{Error, Result};
use crate::plots::{plot_loss, plot_series};
use crate::run_dir::{
    BEST_FILE, CHECKPOINT_DIR, CONFIG_FILE, GRAPH_PLOT, METRICS_CSV_FILE, METRICS_JSONL_FILE, PLOTS_DIR,
};
use trackgnn_model::Error as ModelError;

/// An event ready for the learned stages: its node table (every hit), the node features and
/// its module-wise truth.
pub struct PreparedEvent {
    /// Event number.
    pub event_id: u64,
    /// The nodes (every hit, no cuts).
    pub table: HitTable,
    /// Node features, rows × features.
    pub x: Vec<f32>,
    /// Particle of each node (0 for noise).
    pub particle: Vec<u64>,
    /// Every true edge (module-wise truth, every particle), as unordered keys.
    pub true_keys: HashSet<u64>,
    /// True edges of particles with pT ≥ the training cut, the pairs the embedding pulls in.
    pub train_pairs: Vec<(u32, u32)>,
    /// Target edges (pT ≥ 1 GeV, ≥ 3 hits) and whether their particle is prompt.
    pub targets: Vec<(u64, bool)>,
}

impl PreparedEvent {
    /// Prepares an event with truth: features by `features`, training pairs of particles with
    /// pT ≥ `train_pt_min`.
    ///
    /// # Errors
    /// An event without truth, a hit on an unknown module, a bad feature.
    pub fn new(event: &Event, det: &Detector, features: &FeatureConfig, train_pt_min: f64) -> Result<PreparedEvent> {
        let table = HitTable::build(event, det, &NodeCuts::default())?;
        let truth = table.truth.as_ref().ok_or(Error::NoTruth { event_id: event.event_id })?;
        let x = table.features(features)?;
        let te = truth_edges(&table, &TargetConfig::default());
        let mut train_pairs = Vec::new();
        let mut targets = Vec::new();
        let mut true_keys = HashSet::with_capacity(te.len());
        for i in 0..te.len() {
            let (a, b) = (te.src[i], te.dst[i]);
            let key = pair_key(a, b);
            if !true_keys.insert(key) {
                continue;
            }
            if truth.particle_pt[a as usize] as f64 >= train_pt_min {
                train_pairs.push((a, b));
            }
            if te.target[i] {
                targets.push((key, truth.vertex_r[a as usize] <= PROMPT_R));
            }
        }
        Ok(PreparedEvent {
            event_id: event.event_id,
            particle: truth.particle_id.clone(),
            table,
            x,
            true_keys,
            train_pairs,
            targets,
        })
    }

    /// True if nodes a and b are hits of one particle.
    pub fn same_particle(&self, a: u32, b: u32) -> bool {
        let (pa, pb) = (self.particle[a as usize], self.particle[b as usize]);
        pa != 0 && pa == pb
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// True if the event has no hits.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}

/// Graph-construction figures of candidate edges against truth, summed over events.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GraphFigures {
    /// Events.
    pub events: u64,
    /// Edges.
    pub edges: u64,
    /// Edges that are true (module-wise truth, any particle).
    pub true_edges: u64,
    /// Target edges of the events, and found.
    pub targets: u64,
    /// Target edges found.
    pub targets_found: u64,
    /// Prompt target edges of the events.
    pub prompt: u64,
    /// Prompt target edges found.
    pub prompt_found: u64,
}

impl GraphFigures {
    /// The figures of one event's edges (given as unordered keys, without duplicates).
    pub fn of_event(ev: &PreparedEvent, keys: &HashSet<u64>) -> GraphFigures {
        let mut g = GraphFigures { events: 1, edges: keys.len() as u64, ..GraphFigures::default() };
        g.true_edges = keys.iter().filter(|k| ev.true_keys.contains(k)).count() as u64;
        for &(k, prompt) in &ev.targets {
            let found = keys.contains(&k) as u64;
            g.targets += 1;
            g.targets_found += found;
            if prompt {
                g.prompt += 1;
                g.prompt_found += found;
            }
        }
        g
    }

    /// Adds another event's figures.
    pub fn add(&mut self, o: &GraphFigures) {
        self.events += o.events;
        self.edges += o.edges;
        self.true_edges += o.true_edges;
        self.targets += o.targets;
        self.targets_found += o.targets_found;
        self.prompt += o.prompt;
        self.prompt_found += o.prompt_found;
    }

    fn ratio(a: u64, b: u64) -> f64 {
        if b > 0 { a as f64 / b as f64 } else { f64::NAN }
    }

    /// Efficiency over all, prompt and secondary targets, purity, edges per event.
    fn fractions(&self) -> [f64; 5] {
        [
            GraphFigures::ratio(self.targets_found, self.targets),
            GraphFigures::ratio(self.prompt_found, self.prompt),
            GraphFigures::ratio(self.targets_found - self.prompt_found, self.targets - self.prompt),
            GraphFigures::ratio(self.true_edges, self.edges),
            GraphFigures::ratio(self.edges, self.events),
        ]
    }
}

/// One epoch of a learned stage, a line of `metrics.jsonl` (a figure without a denominator,
/// e.g. the secondary efficiency of events without secondaries, is NaN: `null` in the JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageRecord {
    /// Epoch, from 0.
    pub epoch: u64,
    /// Mean training loss.
    #[serde(deserialize_with = "trackgnn_model::run_dir::nan_if_null")]
    pub train_loss: f64,
    /// Validation loss (the filter's best epoch has the lowest).
    #[serde(deserialize_with = "trackgnn_model::run_dir::nan_if_null")]
    pub val_loss: f64,
    /// Validation graph efficiency over target edges (pT ≥ 1 GeV, ≥ 3 hits).
    #[serde(deserialize_with = "trackgnn_model::run_dir::nan_if_null")]
    pub efficiency: f64,
    /// The same over target edges of prompt particles.
    #[serde(deserialize_with = "trackgnn_model::run_dir::nan_if_null")]
    pub efficiency_prompt: f64,
    /// The same over target edges of secondaries.
    #[serde(deserialize_with = "trackgnn_model::run_dir::nan_if_null")]
    pub efficiency_secondary: f64,
    /// Validation graph purity: true edges / edges.
    #[serde(deserialize_with = "trackgnn_model::run_dir::nan_if_null")]
    pub purity: f64,
    /// Validation edges per event.
    #[serde(deserialize_with = "trackgnn_model::run_dir::nan_if_null")]
    pub edges_per_event: f64,
    /// Seconds of the epoch (training and validation).
    #[serde(deserialize_with = "trackgnn_model::run_dir::nan_if_null")]
    pub seconds: f64,
    /// Embedding: validation efficiency over target edges of the graph of each hit's `k_max`
    /// nearest neighbours, whatever their distance: a fixed edge budget, so it measures how
    /// well the embedding ranks true pairs first even where the radius graph hits the k cap.
    /// The best epoch has the highest. `None` for the filter (and older runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efficiency_at_budget: Option<f64>,
    /// Edges per validation event of that budget graph.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edges_per_event_at_budget: Option<f64>,
    /// Embedding: neighbours per hit of the second, larger budget (the config's `wide_k_max`)
    /// whose figures follow. `None` for the filter, older runs and `wide_k_max = 0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wide_k_max: Option<u64>,
    /// Validation efficiency over target edges at that budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efficiency_wide: Option<f64>,
    /// The same over prompt target edges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efficiency_prompt_wide: Option<f64>,
    /// The same over secondary target edges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efficiency_secondary_wide: Option<f64>,
    /// Purity of that graph.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purity_wide: Option<f64>,
    /// Edges per validation event of that graph.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edges_per_event_wide: Option<f64>,
}

impl StageRecord {
    /// A record from validation figures.
    pub fn new(epoch: u64, train_loss: f64, val_loss: f64, g: &GraphFigures, seconds: f64) -> StageRecord {
        let [efficiency, efficiency_prompt, efficiency_secondary, purity, edges_per_event] = g.fractions();
        StageRecord {
            epoch,
            train_loss,
            val_loss,
            efficiency,
            efficiency_prompt,
            efficiency_secondary,
            purity,
            edges_per_event,
            seconds,
            efficiency_at_budget: None,
            edges_per_event_at_budget: None,
            wide_k_max: None,
            efficiency_wide: None,
            efficiency_prompt_wide: None,
            efficiency_secondary_wide: None,
            purity_wide: None,
            edges_per_event_wide: None,
        }
    }

    /// The record with the figures of the fixed-budget graph (see
    /// [`StageRecord::efficiency_at_budget`]).
    pub fn with_budget(self, g: &GraphFigures) -> StageRecord {
        let [efficiency, _, _, _, edges_per_event] = g.fractions();
        StageRecord { efficiency_at_budget: Some(efficiency), edges_per_event_at_budget: Some(edges_per_event), ..self }
    }

    /// The record with the figures of the second, larger budget's graph of `k_max` neighbours
    /// per hit (see [`StageRecord::efficiency_wide`]).
    pub fn with_wide(self, k_max: usize, g: &GraphFigures) -> StageRecord {
        let [efficiency, prompt, secondary, purity, edges_per_event] = g.fractions();
        StageRecord {
            wide_k_max: Some(k_max as u64),
            efficiency_wide: Some(efficiency),
            efficiency_prompt_wide: Some(prompt),
            efficiency_secondary_wide: Some(secondary),
            purity_wide: Some(purity),
            edges_per_event_wide: Some(edges_per_event),
            ..self
        }
    }
}

/// How a stage's best epoch (its `best.safetensors`) is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BestBy {
    /// The lowest validation loss (the filter, whose loss is what its cut acts on).
    ValLoss,
    /// The highest validation efficiency at the fixed edge budget (the embedding: its hinge
    /// loss did not follow the graph's efficiency). Epochs without the figure (runs older than
    /// it) count below every epoch with it.
    EfficiencyAtBudget,
}

impl BestBy {
    /// True if `r` is better than `best` (strictly: ties keep the earlier epoch).
    pub fn is_better(self, r: &StageRecord, best: Option<&StageRecord>) -> bool {
        let Some(b) = best else { return true };
        match self {
            BestBy::ValLoss => r.val_loss < b.val_loss || !b.val_loss.is_finite(),
            BestBy::EfficiencyAtBudget => {
                let eff = |r: &StageRecord| r.efficiency_at_budget.filter(|e| e.is_finite());
                match (eff(r), eff(b)) {
                    (Some(x), Some(y)) => x > y,
                    (Some(_), None) => true,
                    (None, _) => false,
                }
            }
        }
    }
}

/// The best record of a run's `records` by `by` (the first of equals), as its
/// `best.safetensors` was chosen.
pub fn best_record(records: &[StageRecord], by: BestBy) -> Option<&StageRecord> {
    records.iter().fold(None, |best, r| if by.is_better(r, best) { Some(r) } else { best })
}

/// A stage's state saved in its checkpoint.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct StageState {
    /// The last finished epoch (0 while none is finished: then `in_progress` says epoch 0).
    epoch: u64,
    /// Infinite (`null` in the JSON) before the first epoch is kept.
    #[serde(deserialize_with = "infinite_if_null")]
    best_val_loss: f64,
    /// The epoch a stop interrupted, where it stood.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    in_progress: Option<EpochInProgress>,
}

fn infinite_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
}

impl StageState {
    /// The epoch a resumed run trains next.
    fn next_epoch(&self) -> u64 {
        self.in_progress.as_ref().map_or(self.epoch + 1, |p| p.epoch)
    }
}

/// The epoch being trained: the next training event (in the epoch's order) and the sums so
/// far, saved when a stop interrupts it, so that the resumed epoch goes on exactly as an
/// uninterrupted one would.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct EpochInProgress {
    epoch: u64,
    next_event: usize,
    loss_sum: f64,
    steps: u64,
    /// Training seconds so far.
    seconds: f64,
}

/// The configuration as a run directory stores it.
fn config_toml<C: Serialize>(c: &C) -> Result<String> {
    toml::to_string(c).map_err(|e| Error::context("serialising the configuration", e))
}

/// Checks that `config` may resume the run in `root`: its `config.toml` (read with the defaults
/// of keys newer than it) equals `config` but for the number of epochs, which may change.
fn check_resumed_config<C: Serialize + serde::de::DeserializeOwned>(root: &Path, config: &C) -> Result<()> {
    let cfg_path = root.join(CONFIG_FILE);
    let text = std::fs::read_to_string(&cfg_path).map_err(|e| Error::io(&cfg_path, e))?;
    let then: C =
        toml::from_str(&text).map_err(|e| ModelError::Corrupt { path: cfg_path.clone(), message: e.to_string() })?;
    let without_epochs = |t: &str| t.lines().filter(|l| !l.starts_with("epochs =")).collect::<Vec<_>>().join("\n");
    if without_epochs(&config_toml(&then)?) != without_epochs(&config_toml(config)?) {
        return Err(Error::Model(ModelError::Inconsistent {
            path: cfg_path,
            message: "the configuration differs from the run's (only epochs may change); resume with the same one"
                .into(),
        }));
    }
    Ok(())
}

/// The stage state in checkpoint `ckpt`'s `state.json`.
fn stage_state(ckpt: &Path, state: serde_json::Value) -> Result<StageState> {
    serde_json::from_value(state)
        .map_err(|e| Error::Model(ModelError::Corrupt { path: ckpt.to_owned(), message: format!("state.json: {e}") }))
}

/// The epoch records of the run in `root` if resuming it under `config` would train no epoch:
/// its checkpoint holds epoch `epochs − 1` or later. `None` if the run has no checkpoint or has
/// epochs left. A finished stage re-run with `--resume` (as the recipes do) then skips
/// reading and scoring its events.
///
/// # Errors
/// A configuration that differs from the run's (as on resume), an unreadable checkpoint state
/// or metrics file.
pub fn finished_records<C: Serialize + serde::de::DeserializeOwned>(
    root: &Path,
    config: &C,
    epochs: u64,
) -> Result<Option<Vec<StageRecord>>> {
    let ckpt = root.join(CHECKPOINT_DIR);
    let state = match checkpoint::load_checkpoint_state(&ckpt) {
        Ok(state) => stage_state(&ckpt, state)?,
        Err(Error::NoCheckpoint { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    check_resumed_config(root, config)?;
    if state.next_epoch() < epochs {
        return Ok(None);
    }
    Ok(Some(records_before(root, state.next_epoch())?))
}

/// The epoch records of the run in `root` before epoch `next` (a resumed run drops those of
/// epochs after its checkpoint).
fn records_before(root: &Path, next: u64) -> Result<Vec<StageRecord>> {
    Ok(read_records(&root.join(METRICS_JSONL_FILE))?.into_iter().filter(|r| r.epoch < next).collect())
}

/// A learned stage's run directory being written: its optimiser, the epochs kept so far and
/// the epoch in progress.
pub(crate) struct StageRun<'a> {
    root: &'a Path,
    pub(crate) opt: AdamW,
    pub(crate) records: Vec<StageRecord>,
    /// The epoch to train next.
    pub(crate) epoch: u64,
    best_val_loss: f64,
    best_by: BestBy,
    /// Where the epoch being trained stands.
    in_progress: EpochInProgress,
}

impl<'a> StageRun<'a> {
    /// Opens the run directory `root`: with `resume`, restores the last checkpoint into `net`
    /// (an epoch a stop interrupted goes on where it stood); otherwise starts afresh (writing
    /// `config`), refusing a directory that already has a run. Best weights are chosen
    /// `best_by`. On resume, the run's `config.toml` is read with the defaults of keys newer
    /// than it, so an older run resumes under the same settings.
    pub(crate) fn open<C: Serialize + serde::de::DeserializeOwned>(
        root: &'a Path,
        config: &C,
        net: &mut DenseNet<f32>,
        lr: f64,
        resume: bool,
        best_by: BestBy,
    ) -> Result<StageRun<'a>> {
        std::fs::create_dir_all(root).map_err(|e| Error::io(root, e))?;
        let cfg_path = root.join(CONFIG_FILE);
        let ckpt = root.join(CHECKPOINT_DIR);
        let adam = AdamWConfig { lr, ..AdamWConfig::default() };
        let config_toml = &config_toml(config)?;
        if resume {
            check_resumed_config(root, config)?;
            trackgnn_trackml::atomic::write(&cfg_path, config_toml.as_bytes()).map_err(|e| Error::io(&cfg_path, e))?;
            let (opt_state, state) = checkpoint::load_checkpoint(&ckpt, &mut net.params)?;
            let state = stage_state(&ckpt, state)?;
            let epoch = state.next_epoch();
            return Ok(StageRun {
                root,
                opt: AdamW::from_state(adam, opt_state),
                records: records_before(root, epoch)?,
                epoch,
                best_val_loss: state.best_val_loss,
                best_by,
                in_progress: state.in_progress.unwrap_or(EpochInProgress { epoch, ..EpochInProgress::default() }),
            });
        }
        if cfg_path.exists() {
            return Err(Error::RunExists { dir: root.to_owned() });
        }
        trackgnn_trackml::atomic::write(&cfg_path, config_toml.as_bytes()).map_err(|e| Error::io(&cfg_path, e))?;
        Ok(StageRun {
            root,
            opt: AdamW::new(net.params.len(), adam),
            records: Vec::new(),
            epoch: 0,
            best_val_loss: f64::INFINITY,
            best_by,
            in_progress: EpochInProgress::default(),
        })
    }

    /// Writes a checkpoint of the epoch in progress (a stop interrupted it).
    fn save_in_progress(&self, net: &DenseNet<f32>) -> Result<()> {
        let state = StageState {
            epoch: self.epoch.saturating_sub(1),
            best_val_loss: self.best_val_loss,
            in_progress: Some(self.in_progress.clone()),
        };
        self.save_checkpoint(net, &state)
    }

    fn save_checkpoint(&self, net: &DenseNet<f32>, state: &StageState) -> Result<()> {
        let state = serde_json::to_value(state).map_err(|e| Error::context("serialising the stage state", e))?;
        checkpoint::save_checkpoint(&self.root.join(CHECKPOINT_DIR), &net.params, &self.opt.state(), &state)
    }

    /// Records an epoch: metrics files, best weights, checkpoint, plots.
    pub(crate) fn finish_epoch(&mut self, net: &DenseNet<f32>, record: StageRecord) -> Result<()> {
        let epoch = record.epoch;
        if self.best_by.is_better(&record, best_record(&self.records, self.best_by)) {
            save_weights(&self.root.join(BEST_FILE), &net.params)?;
        }
        // Kept in the checkpoint's state for runs of older versions, which read it.
        self.best_val_loss = self.best_val_loss.min(record.val_loss);
        self.records.push(record);
        self.write_metrics()?;
        self.save_checkpoint(net, &StageState { epoch, best_val_loss: self.best_val_loss, in_progress: None })?;
        self.epoch = epoch + 1;
        self.in_progress = EpochInProgress { epoch: self.epoch, ..EpochInProgress::default() };
        self.plot()
    }

    fn write_metrics(&self) -> Result<()> {
        let mut jsonl = Vec::new();
        let mut csv = b"epoch,train_loss,val_loss,efficiency,efficiency_prompt,efficiency_secondary,purity,edges_per_event,seconds,efficiency_at_budget,edges_per_event_at_budget,wide_k_max,efficiency_wide,efficiency_prompt_wide,efficiency_secondary_wide,purity_wide,edges_per_event_wide\n".to_vec();
        let opt = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
        for r in &self.records {
            serde_json::to_writer(&mut jsonl, r).map_err(|e| Error::context("serialising an epoch record", e))?;
            jsonl.push(b'\n');
            writeln!(
                csv,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                r.epoch,
                r.train_loss,
                r.val_loss,
                r.efficiency,
                r.efficiency_prompt,
                r.efficiency_secondary,
                r.purity,
                r.edges_per_event,
                r.seconds,
                opt(r.efficiency_at_budget),
                opt(r.edges_per_event_at_budget),
                opt(r.wide_k_max.map(|k| k as f64)),
                opt(r.efficiency_wide),
                opt(r.efficiency_prompt_wide),
                opt(r.efficiency_secondary_wide),
                opt(r.purity_wide),
                opt(r.edges_per_event_wide)
            )
            .expect("writing to a Vec");
        }
        for (name, bytes) in [(METRICS_JSONL_FILE, jsonl), (METRICS_CSV_FILE, csv)] {
            let p = self.root.join(name);
            trackgnn_trackml::atomic::write(&p, &bytes).map_err(|e| Error::io(&p, e))?;
        }
        Ok(())
    }

    fn plot(&self) -> Result<()> {
        let dir = self.root.join(PLOTS_DIR);
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let series =
            |f: fn(&StageRecord) -> f64| self.records.iter().map(|r| (r.epoch as f64, f(r))).collect::<Vec<_>>();
        plot_loss(&dir, &self.records.iter().map(|r| (r.epoch, r.train_loss, r.val_loss)).collect::<Vec<_>>())?;
        plot_series(
            &dir.join(GRAPH_PLOT),
            "Validation graph",
            "epoch",
            "fraction",
            &[
                ("efficiency", series(|r| r.efficiency)),
                ("efficiency prompt", series(|r| r.efficiency_prompt)),
                ("efficiency secondary", series(|r| r.efficiency_secondary)),
                ("purity", series(|r| r.purity)),
            ]
            .into_iter()
            .chain(
                self.records
                    .iter()
                    .any(|r| r.efficiency_at_budget.is_some())
                    .then(|| ("efficiency at edge budget", series(|r| r.efficiency_at_budget.unwrap_or(f64::NAN)))),
            )
            .chain(
                self.records
                    .iter()
                    .any(|r| r.efficiency_wide.is_some())
                    .then(|| ("efficiency at wide budget", series(|r| r.efficiency_wide.unwrap_or(f64::NAN)))),
            )
            .collect::<Vec<_>>(),
            false,
        )
    }
}

/// Reads a stage's `metrics.jsonl` (missing file: no records).
pub fn read_records(path: &Path) -> Result<Vec<StageRecord>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(path, e)),
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| {
                Error::Model(ModelError::Corrupt { path: path.to_owned(), message: format!("line {}: {e}", i + 1) })
            })
        })
        .collect()
}

/// Gathers rows `idx` of a row-major matrix of width `dim`.
pub(crate) fn gather_rows(x: &[f32], dim: usize, idx: &[u32]) -> Vec<f32> {
    let mut out = Vec::with_capacity(idx.len() * dim);
    for &i in idx {
        out.extend_from_slice(&x[i as usize * dim..(i as usize + 1) * dim]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use trackgnn_engine::DenseNetConfig;
    use trackgnn_trackml::rng::Rng;

    fn record(epoch: u64, val_loss: f64, at_budget: Option<f64>) -> StageRecord {
        let r = StageRecord::new(epoch, 1.0, val_loss, &GraphFigures::default(), 0.1);
        StageRecord { efficiency_at_budget: at_budget, ..r }
    }

    /// Trains nothing: each epoch sets every weight to its epoch number, so the best file
    /// tells which epoch it holds.
    fn run_epochs(dir: &Path, by: BestBy, resume: bool, epochs: &[(u64, f64, Option<f64>)]) -> f32 {
        let cfg = DenseNetConfig { hidden: 4, hidden_layers: 1, out: 2 };
        let mut net = DenseNet::<f32>::new(&cfg, 3, &mut Rng::new(1));
        let mut run = StageRun::open(dir, &StageTraining::default(), &mut net, 1e-3, resume, by).unwrap();
        for &(epoch, loss, eff) in epochs {
            assert_eq!(run.epoch.max(epoch), epoch);
            net.params.data.fill(epoch as f32);
            run.finish_epoch(&net, record(epoch, loss, eff)).unwrap();
        }
        let mut best = DenseNet::<f32>::new(&cfg, 3, &mut Rng::new(2));
        trackgnn_model::stages::load_net(dir, &mut best).unwrap();
        assert!(best.params.data.iter().all(|&w| w == best.params.data[0]));
        best.params.data[0]
    }

    #[test]
    fn the_embeddings_best_epoch_follows_the_efficiency_at_budget_not_the_loss() {
        // The loss falls every epoch while the efficiency peaks at epoch 1.
        let epochs = [(0, 3.0, Some(0.5)), (1, 2.0, Some(0.9)), (2, 1.0, Some(0.7))];
        let tmp = tempfile::tempdir().unwrap();
        let (by_eff, by_loss) = (tmp.path().join("eff"), tmp.path().join("loss"));
        assert_eq!(run_epochs(&by_eff, BestBy::EfficiencyAtBudget, false, &epochs), 1.0);
        assert_eq!(run_epochs(&by_loss, BestBy::ValLoss, false, &epochs), 2.0);
        // Resumed, the choice goes on from the recorded epochs: a worse one keeps epoch 1, a
        // better one takes over.
        assert_eq!(run_epochs(&by_eff, BestBy::EfficiencyAtBudget, true, &[(3, 0.5, Some(0.8))]), 1.0);
        assert_eq!(run_epochs(&by_eff, BestBy::EfficiencyAtBudget, true, &[(4, 0.5, Some(0.95))]), 4.0);
        let records = read_records(&by_eff.join(METRICS_JSONL_FILE)).unwrap();
        assert_eq!(records.len(), 5);
        assert_eq!(best_record(&records, BestBy::EfficiencyAtBudget).unwrap().epoch, 4);
        assert_eq!(best_record(&records, BestBy::ValLoss).unwrap().epoch, 3, "ties keep the first");
        let csv = std::fs::read_to_string(by_eff.join(METRICS_CSV_FILE)).unwrap();
        assert!(
            csv.lines().next().unwrap().ends_with(
                "efficiency_at_budget,edges_per_event_at_budget,wide_k_max,efficiency_wide,efficiency_prompt_wide,efficiency_secondary_wide,purity_wide,edges_per_event_wide"
            ),
            "{csv}"
        );
        // A record without the wide figures leaves their columns empty.
        assert!(csv.lines().nth(1).unwrap().ends_with(",,,,,,"), "{csv}");
    }

    #[test]
    fn a_run_written_before_a_key_resumes_with_its_default_and_a_changed_setting_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        run_epochs(&dir, BestBy::ValLoss, false, &[(0, 1.0, None)]);
        // The config.toml of a version before `lr_decay`.
        let cfg = dir.join(CONFIG_FILE);
        let text = std::fs::read_to_string(&cfg).unwrap();
        assert!(text.contains("lr_decay = 1.0"), "{text}");
        std::fs::write(&cfg, text.lines().filter(|l| !l.starts_with("lr_decay")).collect::<Vec<_>>().join("\n"))
            .unwrap();
        run_epochs(&dir, BestBy::ValLoss, true, &[(1, 0.5, None)]);
        let net_cfg = DenseNetConfig { hidden: 4, hidden_layers: 1, out: 2 };
        let mut net = DenseNet::<f32>::new(&net_cfg, 3, &mut Rng::new(1));
        let decayed = StageTraining { lr_decay: 0.9, ..StageTraining::default() };
        let err = StageRun::open(&dir, &decayed, &mut net, 1e-3, true, BestBy::ValLoss).err().unwrap();
        assert!(err.to_string().contains("differs from the run's"), "{err}");
        assert!((decayed.lr_at(2) - decayed.lr * 0.81).abs() < 1e-12);
    }

    #[test]
    fn a_run_is_finished_once_its_checkpoint_holds_the_last_epoch() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        let cfg = StageTraining::default();
        assert!(finished_records(&dir, &cfg, 2).unwrap().is_none(), "no run yet");
        run_epochs(&dir, BestBy::ValLoss, false, &[(0, 1.0, None)]);
        assert!(finished_records(&dir, &cfg, 2).unwrap().is_none(), "epoch 1 is left");
        run_epochs(&dir, BestBy::ValLoss, true, &[(1, 0.5, None)]);
        let records = finished_records(&dir, &cfg, 2).unwrap().expect("both epochs done");
        assert_eq!(records.iter().map(|r| r.epoch).collect::<Vec<_>>(), [0, 1]);
        assert!(finished_records(&dir, &cfg, 3).unwrap().is_none(), "more epochs asked");
        let decayed = StageTraining { lr_decay: 0.9, ..cfg };
        let err = finished_records(&dir, &decayed, 2).unwrap_err();
        assert!(err.to_string().contains("differs from the run's"), "{err}");
    }

    #[test]
    fn epochs_without_the_budget_figure_rank_below_those_with_it() {
        // An older run's records (no figure), then new ones.
        let records = [record(0, 1.0, None), record(1, 2.0, Some(0.3)), record(2, 0.5, Some(f64::NAN))];
        assert_eq!(best_record(&records, BestBy::EfficiencyAtBudget).unwrap().epoch, 1);
        assert_eq!(best_record(&records[..1], BestBy::EfficiencyAtBudget).unwrap().epoch, 0);
        assert!(best_record(&[], BestBy::ValLoss).is_none());
        // A record without the figure keeps it out of the JSON (older readers see the old keys).
        let json = serde_json::to_string(&records[0]).unwrap();
        assert!(!json.contains("at_budget"), "{json}");
        let back: StageRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(back.efficiency_at_budget, None);
    }
}
