//! Inference with a trained run: an event's hits → its graph (the run's recipe, without truth)
//! → edge scores (the run's GNN) → track candidates → a TrackML submission; and, for events
//! that have truth files, the track metrics afterwards.
//!
//! [`TrainedModel::open`] (of `trackgnn-model`) loads a run's configuration and weights;
//! [`Reconstructor::open`] adds the module map and the detector, and then reconstructs one
//! event at a time ([`Reconstructor::event`]) or a whole directory of events
//! ([`Reconstructor::reconstruct_dir`]). Reconstruction never reads a truth file, except in
//! the truth-scores diagnostic ([`Reconstructor::with_truth_scores`]), where truth replaces
//! the GNN's edge scores.
//!
//! ```no_run
//! use trackgnn_reco::inference::Reconstructor;
//! use trackgnn_reco::{TrackMethod, TrackBuilderConfig};
//! use trackgnn_trackml::{Detector, csv};
//! use trackgnn_model::run_dir::{RunDir, Weights};
//! # fn main() -> Result<(), trackgnn_reco::Error> {
//! let run = RunDir::open("trackgnn-demo/run")?;
//! let rec = Reconstructor::open(&run, &Weights::Best, Detector::trackml())?
//!     .with_tracks(TrackBuilderConfig::for_method(TrackMethod::Follow, None))?;
//! let files = &csv::discover_events("trackgnn-demo/heldout".as_ref())?[0];
//! let event = csv::read_event(files, rec.read_options())?;
//! let reco = rec.event(&event)?;
//! println!("{} tracks from {} edges", reco.num_tracks(), reco.scores.len());
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use trackgnn_engine::loss::sigmoid;
use trackgnn_graph::module_map::file_hash;
use trackgnn_graph::{BuildStats, Graph, GraphRecipe, ModuleMap, build_graph_with};
use trackgnn_model::run_dir::{RunDir, Weights};
use trackgnn_model::{LearnedStages, LogitsHook};
use trackgnn_trackml::csv::{EventFiles, FileKind, ReadOptions, discover_events, read_event};
use trackgnn_trackml::physics::material::MaterialModel;
use trackgnn_trackml::{Detector, Event, SolenoidField};

use crate::ckf::HitStore;
use crate::display::{DisplayConfig, DisplayEvent, write_display};
use crate::error::{Error, Result};
use crate::kalman::candidate::PION_MASS;
use crate::kalman::{EventFits, FitContext, KalmanFitter, MeasurementModel, OutlierRemoval, fit_event_tracks};

mod report;
use crate::metrics::{MetricsConfig, TrackMetrics, evaluate_event};
use crate::phoenix::TrackPoints;
use crate::quality::{
    CandidateSource, Features, QualityModel, add_fit_features, candidate_features, fake_candidates, select_by_quality,
};
use crate::submission::{event_track_ids, parameters_file_name, write_event_submission, write_parameters};
use crate::tracks::search::{NodeLayers, Surface, module_layers, node_modules};
use crate::tracks::{ScoredEdges, TrackBuilder, TrackBuilderConfig, TrackMethod, num_tracks};
pub use report::{MeanSeconds, RecoReport};
/// A run's GNN with its trained weights (the model crate's, here where inference uses it).
pub use trackgnn_model::{Scoring, TrainedModel};

/// Seconds one event spent in each stage of [`Reconstructor::event`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageSeconds {
    /// Graph building.
    pub graph: f64,
    /// GNN inference (or reading the truth scores).
    pub gnn: f64,
    /// Track building.
    pub tracks: f64,
}

/// What reconstructing one event gives.
#[derive(Clone, Debug)]
pub struct EventReco {
    /// The event.
    pub event_id: u64,
    /// The event's graph (its nodes are hits, `graph.hit_id`).
    pub graph: Graph,
    /// The score of each edge of `graph`, a probability.
    pub scores: Vec<f32>,
    /// A track id per hit of the event, in the event's hit order ([`NO_TRACK`](crate::NO_TRACK)
    /// for hits in no track).
    pub hit_tracks: Vec<u32>,
    /// Seconds per stage.
    pub seconds: StageSeconds,
}

impl EventReco {
    /// The number of track candidates.
    pub fn num_tracks(&self) -> u32 {
        num_tracks(&self.hit_tracks)
    }
}

/// A trained run, ready for inference: its recipe without truth cuts, module map, model,
/// detector and track builder.
pub struct Reconstructor {
    model: TrainedModel,
    recipe: GraphRecipe,
    map: Option<ModuleMap>,
    /// The embedding and filter of metric-learning and hybrid graphs.
    learned: LearnedStages,
    det: Detector,
    /// The detector's layers for the hit search of track following.
    surfaces: Vec<Surface>,
    builder: TrackBuilder,
    truth_scores: bool,
    /// The smallest reconstructable particle the metrics count, in hits, when it is not the
    /// track builder's `min_hits`.
    min_particle_hits: Option<usize>,
    /// The candidate-quality model and the largest fake probability kept.
    quality: Option<(QualityModel, f64)>,
    /// Whether track following runs again around the candidates the quality model keeps.
    rebuild: bool,
    /// Whether every track is fitted, its parameters written beside the submission.
    fit: bool,
    /// The outlier hits the fit drops from the tracks (`None`: none).
    outliers: Option<OutlierRemoval>,
    /// Who scores the graphs when not this process alone (domain-parallel inference).
    logits_hook: Option<Arc<dyn LogitsHook>>,
    /// The event drawn and exported for Phoenix, if any.
    display: Option<DisplayConfig>,
}

impl Reconstructor {
    /// Opens `run` for inference with the `weights` chosen: its recipe (without truth cuts),
    /// its module map (checked against the hash recorded when the graphs were built) and its
    /// model. Tracks are built with [`TrackBuilderConfig::default`] until
    /// [`with_tracks`](Self::with_tracks) says otherwise.
    pub fn open(run: &RunDir, weights: &Weights, det: Detector) -> Result<Reconstructor> {
        let recipe = run.read_recipe()?.for_inference();
        let map = match (recipe.needs_map(), &recipe.map_file) {
            (true, Some(p)) => {
                let path = PathBuf::from(p);
                if let Some(then) = &recipe.map_hash {
                    let now = file_hash(&path)?;
                    if &now != then {
                        return Err(Error::MapChanged { path, then: then.clone(), now });
                    }
                }
                Some(ModuleMap::load(&path)?)
            }
            (true, None) => return Err(Error::MapMissing { recipe: run.recipe_path() }),
            _ => None,
        };
        let learned = LearnedStages::load(&recipe)?;
        let model = TrainedModel::for_recipe(run, weights, &recipe)?;
        let surfaces = Surface::of_detector(&det);
        let builder = TrackBuilder::new(TrackBuilderConfig::default())?;
        Ok(Reconstructor {
            model,
            recipe,
            map,
            learned,
            det,
            surfaces,
            builder,
            truth_scores: false,
            min_particle_hits: None,
            quality: None,
            rebuild: false,
            fit: false,
            outliers: Some(OutlierRemoval::default()),
            logits_hook: None,
            display: None,
        })
    }

    /// The same, building tracks with `config` (checked).
    pub fn with_tracks(self, config: TrackBuilderConfig) -> Result<Reconstructor> {
        Ok(Reconstructor { builder: TrackBuilder::new(config)?, ..self })
    }

    /// The same, dropping the candidates whose fake probability by `model` exceeds
    /// `max_fake_probability` ([`select_by_quality`]), after the track builder's own selection.
    ///
    /// # Errors
    /// If `max_fake_probability` is not in [0, 1], or the model records candidates built
    /// otherwise than by this track builder (method, score cut, smallest candidate, track
    /// following's settings).
    pub fn with_quality(self, model: QualityModel, max_fake_probability: f64) -> Result<Reconstructor> {
        if !(0.0..=1.0).contains(&max_fake_probability) {
            return Err(Error::config(
                "max_fake_probability",
                format!("must be in [0, 1], got {max_fake_probability}"),
            ));
        }
        let here = CandidateSource::of(self.builder.config());
        if let Some(fitted) = model.candidates.as_ref().filter(|&c| *c != here) {
            return Err(Error::config(
                "quality",
                format!("the model was fitted to {fitted}, but tracks are built as {here}"),
            ));
        }
        Ok(Reconstructor { quality: Some((model, max_fake_probability)), ..self })
    }

    /// The same, with track following run again around the candidates the quality model keeps
    /// ([`TrackBuilder::rebuild_around`]): the hits of the candidates it drops, most often
    /// fakes that took them from real tracks, go back to their tracks; the quality model then
    /// judges the candidates again. Without a quality model, or for the other track builders,
    /// nothing changes.
    pub fn with_rebuild(self, rebuild: bool) -> Reconstructor {
        Reconstructor { rebuild, ..self }
    }

    /// The same, fitting every track when `fit` (the Kalman filter and smoother,
    /// [`fit_event_tracks`]): [`write_submissions`](Self::write_submissions) then writes the
    /// fitted parameters beside each submission ([`write_parameters`]), each track fitted
    /// without its outlier hits ([`with_outliers`](Self::with_outliers)); the submission keeps
    /// them on their tracks.
    pub fn with_fit(self, fit: bool) -> Reconstructor {
        Reconstructor { fit, ..self }
    }

    /// The same, dropping outlier hits from the fitted tracks by `outliers` (`None`: every hit
    /// is kept). Default: [`OutlierRemoval::default`].
    pub fn with_outliers(self, outliers: Option<OutlierRemoval>) -> Reconstructor {
        Reconstructor { outliers, ..self }
    }

    /// The same, with `hook` computing the GNN's logits of each graph instead of this process
    /// alone: domain-parallel inference, where the processes of a domain group each score
    /// their partition of the graph (`trackgnn_train::dist::DomainScoring`). Every process of
    /// the group must then score the same events in the same order: the root with
    /// [`reconstruct_events`](Self::reconstruct_events), the others with
    /// [`score_events`](Self::score_events).
    pub fn with_logits_hook(self, hook: Arc<dyn LogitsHook>) -> Reconstructor {
        Reconstructor { logits_hook: Some(hook), ..self }
    }

    /// The same, drawing one event and exporting it for Phoenix into `<out>/display`
    /// ([`write_display`]) when `display` is given.
    pub fn with_display(self, display: Option<DisplayConfig>) -> Reconstructor {
        Reconstructor { display, ..self }
    }

    /// Whether every track is fitted.
    pub fn fit(&self) -> bool {
        self.fit
    }

    /// The outlier hits the fit drops, if any ([`with_outliers`](Self::with_outliers)).
    pub fn outliers(&self) -> Option<&OutlierRemoval> {
        self.outliers.as_ref()
    }

    /// The fits of an event's tracks: `hit_tracks` is a track id per hit of `event` (in its hit
    /// order, [`NO_TRACK`](crate::NO_TRACK) for none), as [`event`](Self::event) gives it. Each
    /// track's hits are ordered along the path and fitted in the generator's default field and
    /// material with the pion's mass, dropping outliers by `outliers`; the tracks whose fit
    /// fails are left out.
    ///
    /// # Errors
    /// [`Error::HitOffDetector`] for a hit on a module the detector does not have.
    pub fn fit_tracks(
        &self,
        event: &Event,
        hit_tracks: &[u32],
        outliers: Option<&OutlierRemoval>,
    ) -> Result<EventFits> {
        let store = HitStore::new(&self.det, event)?;
        let (field, material) = (SolenoidField::default(), MaterialModel::default());
        let fitter =
            KalmanFitter::new(FitContext::new(&self.det, &field, material, PION_MASS), MeasurementModel::default());
        Ok(fit_event_tracks(&fitter, &store.candidate_hits(), hit_tracks, outliers))
    }

    /// The fits of `graph`'s candidates `node_tracks` (a track id per node) when the quality
    /// model judges fits: the quality features' fits, with [`OutlierRemoval::default`].
    fn candidate_fits(
        &self,
        event: &Event,
        graph: &Graph,
        node_tracks: &[u32],
        needed: bool,
    ) -> Result<Option<EventFits>> {
        if !needed {
            return Ok(None);
        }
        let hit_tracks = event_track_ids(&event.hits.hit_id, &graph.hit_id, node_tracks)?;
        self.fit_tracks(event, &hit_tracks, Some(&OutlierRemoval::default())).map(Some)
    }

    /// Whether tracks are rebuilt around the candidates the quality model keeps.
    pub fn rebuild(&self) -> bool {
        self.rebuild && self.quality.is_some() && self.builder.config().method == TrackMethod::Follow
    }

    /// The candidate-quality model and the largest fake probability kept, if any.
    pub fn quality(&self) -> Option<(&QualityModel, f64)> {
        self.quality.as_ref().map(|(m, p)| (m, *p))
    }

    /// The same, counting particles of at least `min_particle_hits` hits as reconstructable
    /// (and as targets) in the metrics; `None` takes the track builder's `min_hits`, so that
    /// every counted particle could make a candidate (see [`metrics_config`](Self::metrics_config)).
    pub fn with_min_particle_hits(self, min_particle_hits: Option<usize>) -> Result<Reconstructor> {
        if min_particle_hits == Some(0) {
            return Err(Error::config("min_particle_hits", "must be at least 1, got 0"));
        }
        Ok(Reconstructor { min_particle_hits, ..self })
    }

    /// The track metrics' settings: [`MetricsConfig::for_min_hits`] of the track builder's
    /// `min_hits` (candidates and reconstructable particles of at least as many hits), with
    /// [`with_min_particle_hits`](Self::with_min_particle_hits)'s override.
    pub fn metrics_config(&self) -> MetricsConfig {
        MetricsConfig::for_min_hits(self.builder.config().min_hits, self.min_particle_hits)
    }

    /// The same, scoring edges from the truth instead of the GNN when `truth_scores` (a
    /// diagnostic: the ceiling of the graph and the track builder). Events must then carry
    /// truth and particles ([`read_options`](Self::read_options) asks for them).
    pub fn with_truth_scores(self, truth_scores: bool) -> Reconstructor {
        Reconstructor { truth_scores, ..self }
    }

    /// The same, scoring as `scoring` says: the matrix products' precision instead of the
    /// run's own, and the device (an error if this build cannot run on it).
    pub fn with_scoring(mut self, scoring: &trackgnn_model::Scoring) -> Result<Reconstructor> {
        self.model.apply(scoring)?;
        Ok(self)
    }

    /// The recipe graphs are built with (the run's, without truth cuts).
    pub fn recipe(&self) -> &GraphRecipe {
        &self.recipe
    }

    /// The run's model.
    pub fn model(&self) -> &TrainedModel {
        &self.model
    }

    /// The track building settings.
    pub fn track_config(&self) -> &TrackBuilderConfig {
        self.builder.config()
    }

    /// Whether edges are scored from the truth instead of the GNN.
    pub fn truth_scores(&self) -> bool {
        self.truth_scores
    }

    /// The files of an event reconstruction reads: the hits, the cells when the node features
    /// need them, and truth and particles only for truth scores.
    pub fn read_options(&self) -> ReadOptions {
        let cells = self.recipe.features.features.iter().any(|f| f.name.needs_cells()) || self.learned.needs_cells();
        ReadOptions { truth: self.truth_scores, particles: self.truth_scores, cells }
    }

    /// Reconstructs one event: graph, edge scores, tracks.
    pub fn event(&self, event: &Event) -> Result<EventReco> {
        let t = Instant::now();
        let (graph, _) = self.graph(event)?;
        let graph_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let scores = self.scores(&graph)?;
        let gnn_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let hit_tracks = self.tracks(event, &graph, &scores)?;
        let tracks_s = t.elapsed().as_secs_f64();
        let seconds = StageSeconds { graph: graph_s, gnn: gnn_s, tracks: tracks_s };
        Ok(EventReco { event_id: event.event_id, graph, scores, hit_tracks, seconds })
    }

    /// The graph of `event` with the run's recipe (without truth cuts) and module map, and its
    /// construction figures.
    pub fn graph(&self, event: &Event) -> Result<(Graph, BuildStats)> {
        Ok(build_graph_with(event, &self.det, &self.recipe, self.learned.stages(self.map.as_ref()))?)
    }

    /// The scores of `graph`'s edges: the GNN's, or the truth's with truth scores.
    pub fn scores(&self, graph: &Graph) -> Result<Vec<f32>> {
        if self.truth_scores {
            let event_id = graph.event_id;
            let truth = graph.truth.as_ref().ok_or(Error::TruthScoresWithoutTruth { event_id })?;
            return Ok(truth.target.iter().map(|&y| y as f32).collect());
        }
        match &self.logits_hook {
            Some(hook) => Ok(hook.logits(self.model.executor(), graph)?.into_iter().map(sigmoid).collect()),
            None => Ok(self.model.scores(graph)?),
        }
    }

    /// The GNN's logits of `graph`'s edges (the scores before the sigmoid).
    pub fn logits(&self, graph: &Graph) -> Result<Vec<f32>> {
        Ok(self.model.logits(graph)?)
    }

    /// A track id per hit of `event` (in its hit order) from the `scores` of `graph`'s edges,
    /// `graph` being `event`'s (built by [`graph`](Self::graph)), with the run's track builder
    /// and the quality selection, if any.
    pub fn tracks(&self, event: &Event, graph: &Graph, scores: &[f32]) -> Result<Vec<u32>> {
        let node_tracks = self.with_edges(event, graph, scores, |edges| {
            let ids = self.builder.build(edges)?;
            let Some((model, max_p)) = &self.quality else { return Ok(ids) };
            let fits = self.candidate_fits(event, graph, &ids, model.uses_fit())?;
            let kept = select_by_quality(edges, &ids, model, *max_p, fits.as_ref()).0;
            if !self.rebuild() {
                return Ok(kept);
            }
            let again = self.builder.rebuild_around(edges, &kept)?;
            let fits = self.candidate_fits(event, graph, &again, model.uses_fit())?;
            Ok(select_by_quality(edges, &again, model, *max_p, fits.as_ref()).0)
        })?;
        event_track_ids(&event.hits.hit_id, &graph.hit_id, &node_tracks)
    }

    /// The features of the track builder's candidates of `event` (before any quality
    /// selection), with their fit's when `fit_features` ([`add_fit_features`]), and whether
    /// each is fake: one event's training samples for a [`QualityModel`]. The event must carry
    /// truth.
    pub fn quality_samples(&self, event: &Event, fit_features: bool) -> Result<(Vec<Features>, Vec<bool>)> {
        let (graph, _) = self.graph(event)?;
        let scores = self.scores(&graph)?;
        let (features, ids) = self.with_edges(event, &graph, &scores, |edges| {
            let ids = self.builder.build(edges)?;
            let mut features = candidate_features(edges, &ids);
            if let Some(fits) = self.candidate_fits(event, &graph, &ids, fit_features)? {
                add_fit_features(&mut features, &fits);
            }
            Ok((features, ids))
        })?;
        let fake = fake_candidates(event, &graph.hit_id, &ids)?;
        Ok((features, fake))
    }

    /// `f` of `graph`'s edges with `scores`, with the nodes' layers when the track builder or
    /// the quality selection needs them.
    fn with_edges<T>(
        &self,
        event: &Event,
        graph: &Graph,
        scores: &[f32],
        f: impl FnOnce(&ScoredEdges<'_>) -> Result<T>,
    ) -> Result<T> {
        let edges = ScoredEdges::from_graph(graph, scores);
        if self.builder.config().uses_layers() || self.quality.is_some() {
            let module = node_modules(&self.det, &event.hits.hit_id, &event.hits.module, &graph.hit_id)?;
            let layer = module_layers(&self.det, &module);
            let layers = NodeLayers { layer: &layer, module: &module, surfaces: &self.surfaces };
            f(&edges.with_layers(layers))
        } else {
            f(&edges)
        }
    }

    /// Reconstructs the events `files` and writes a TrackML submission for each into `out`
    /// (which must exist), and with [`with_fit`](Self::with_fit) the fitted tracks' parameters
    /// beside it, calling `done` after each event. Returns each event's summary and
    /// its track id per hit, and the display's files ([`with_display`](Self::with_display)).
    ///
    /// # Errors
    /// Besides reading and writing, [`Error::Config`] if the event to display is not among
    /// `files`.
    #[allow(clippy::type_complexity)]
    pub fn write_submissions(
        &self,
        files: &[EventFiles],
        out: &Path,
        mut done: impl FnMut(&EventSummary),
    ) -> Result<(Vec<(EventSummary, Vec<u32>)>, Vec<PathBuf>)> {
        if let Some(d) = &self.display {
            d.check_listed(files)?;
        }
        let mut display_files = Vec::new();
        let mut per_event = Vec::with_capacity(files.len());
        for f in files {
            let t = Instant::now();
            let event = read_event(f, self.read_options())?;
            let read_seconds = t.elapsed().as_secs_f64();
            let reco = self.event(&event)?;
            let t = Instant::now();
            let display = self.display.filter(|d| d.event_id == event.event_id);
            let fits = if self.fit || display.is_some_and(|d| d.phoenix_tracks == TrackPoints::Perigee) {
                self.fit_tracks(&event, &reco.hit_tracks, self.outliers.as_ref()).map_err(|e| match e {
                    Error::HitOffDetector { .. } => Error::InFile {
                        path: f.path(FileKind::Hits).unwrap_or_else(|_| f.dir.join(&f.prefix)),
                        source: Box::new(e),
                    },
                    e => e,
                })?
            } else {
                EventFits::default()
            };
            if self.fit {
                write_parameters(&out.join(parameters_file_name(event.event_id)), &fits.tracks)?;
            }
            let fit_seconds = t.elapsed().as_secs_f64();
            let t = Instant::now();
            write_event_submission(out, event.event_id, &event.hits.hit_id, &reco.hit_tracks)?;
            let write_seconds = t.elapsed().as_secs_f64();
            let fitted_tracks = if self.fit { fits.tracks.len() } else { 0 };
            if let Some(d) = &display {
                let method = format!("GNN chain ({})", format!("{:?}", self.builder.config().method).to_lowercase());
                let shown = DisplayEvent {
                    event: &event,
                    hit_tracks: &reco.hit_tracks,
                    edges: Some((&reco.graph, &reco.scores)),
                    fitted: &fits.tracks,
                    method: &method,
                };
                display_files.extend(write_display(&out.join("display"), &shown, d)?);
            }
            let summary = EventSummary {
                event_id: event.event_id,
                hits: event.hits.len(),
                nodes: reco.graph.num_nodes(),
                edges: reco.graph.num_edges(),
                tracks: reco.num_tracks(),
                fitted_tracks,
                outlier_hits: if self.fit { fits.outlier_hits.len() } else { 0 },
                read_seconds,
                graph_seconds: reco.seconds.graph,
                gnn_seconds: reco.seconds.gnn,
                track_seconds: reco.seconds.tracks,
                write_seconds,
                fit_seconds,
            };
            done(&summary);
            per_event.push((summary, reco.hit_tracks));
        }
        Ok((per_event, display_files))
    }

    /// Reconstructs the events of directory `input` (the first `limit` of them, if given): see
    /// [`reconstruct_events`](Self::reconstruct_events).
    pub fn reconstruct_dir(
        &self,
        input: &Path,
        out: &Path,
        limit: Option<usize>,
        done: impl FnMut(&EventSummary),
    ) -> Result<DirReco> {
        let mut files = discover_events(input)?;
        if let Some(n) = limit {
            files.truncate(n);
        }
        self.reconstruct_events(&files, out, done)
    }

    /// Reads each of the events `files`, builds its graph and scores its edges, writing
    /// nothing: what the other processes of a domain group do while the root reconstructs
    /// the same events ([`with_logits_hook`](Self::with_logits_hook)). Returns the number of
    /// edges scored.
    pub fn score_events(&self, files: &[EventFiles]) -> Result<usize> {
        let mut edges = 0;
        for f in files {
            let event = read_event(f, self.read_options())?;
            let (graph, _) = self.graph(&event)?;
            edges += self.scores(&graph)?.len();
        }
        Ok(edges)
    }

    /// Reconstructs the events `files` into submission files in `out` (created if needed); then
    /// scores the tracks of the events that have truth and particles files (with
    /// [`metrics_config`](Self::metrics_config)), and plots the efficiency into `out/plots`;
    /// draws the event of [`with_display`](Self::with_display) into `out/display`. Calls `done`
    /// after each event.
    pub fn reconstruct_events(
        &self,
        files: &[EventFiles],
        out: &Path,
        done: impl FnMut(&EventSummary),
    ) -> Result<DirReco> {
        std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
        let (per_event, display) = self.write_submissions(files, out, done)?;
        let tracks: Vec<&[u32]> = per_event.iter().map(|(_, t)| t.as_slice()).collect();
        let metrics = score_against_truth(files, &tracks, &self.metrics_config())?;
        let plots = match &metrics {
            Some(m) => crate::plots::plot_track_efficiency(&out.join("plots"), m)?,
            None => Vec::new(),
        };
        Ok(DirReco { events: per_event.into_iter().map(|(s, _)| s).collect(), metrics, plots, display })
    }
}

/// One event of a directory's reconstruction: its sizes and seconds per stage.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EventSummary {
    /// The event.
    pub event_id: u64,
    /// Hits of the event.
    pub hits: usize,
    /// Nodes of its graph.
    pub nodes: usize,
    /// Edges of its graph.
    pub edges: usize,
    /// Track candidates.
    pub tracks: u32,
    /// Tracks fitted, with their parameters in the event's parameters file (0 without a fit).
    pub fitted_tracks: usize,
    /// Hits the fit left out of their tracks' fits as outliers (0 without a fit).
    pub outlier_hits: usize,
    /// Seconds reading the event's files.
    pub read_seconds: f64,
    /// Seconds building the graph.
    pub graph_seconds: f64,
    /// Seconds of GNN inference.
    pub gnn_seconds: f64,
    /// Seconds building tracks.
    pub track_seconds: f64,
    /// Seconds writing the submission.
    pub write_seconds: f64,
    /// Seconds fitting the tracks and writing their parameters (0 without a fit).
    pub fit_seconds: f64,
}

/// What [`Reconstructor::reconstruct_dir`] did.
#[derive(Clone, Debug)]
pub struct DirReco {
    /// Each event reconstructed, in order.
    pub events: Vec<EventSummary>,
    /// The track metrics of the events with truth files, merged (`None` if none has).
    pub metrics: Option<TrackMetrics>,
    /// The efficiency plots written (none without metrics).
    pub plots: Vec<PathBuf>,
    /// The display's figures and Phoenix file (none without a display).
    pub display: Vec<PathBuf>,
}

/// The track metrics of the events among `files` that have truth and particles files, merged;
/// `tracks[i]` is event `files[i]`'s track id per hit. Truth is read only here, after
/// reconstruction. `None` if no event has truth.
pub fn score_against_truth(
    files: &[EventFiles],
    tracks: &[&[u32]],
    config: &MetricsConfig,
) -> Result<Option<TrackMetrics>> {
    let mut total: Option<TrackMetrics> = None;
    for (f, t) in files.iter().zip(tracks) {
        if !(f.has(FileKind::Truth) && f.has(FileKind::Particles)) {
            continue;
        }
        let event = read_event(f, ReadOptions { truth: true, particles: true, cells: false })?;
        let m = evaluate_event(&event, t, config)?;
        match total.as_mut() {
            Some(total) => total.merge(&m)?,
            None => total = Some(m),
        }
    }
    Ok(total)
}
