//! What a directory's reconstruction reports ([`RecoReport`]): the settings, the sizes and
//! seconds per event, the track metrics and plots; as text lines or as one JSON object.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{DirReco, EventSummary, Reconstructor};
use crate::metrics::{MetricsConfig, TrackMetrics};
use crate::tracks::{CandidateScore, FollowConfig, TrackMethod};

/// Mean seconds per event in each stage.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MeanSeconds {
    /// Reading the event's files.
    pub read_seconds: f64,
    /// Building the graph.
    pub graph_seconds: f64,
    /// GNN inference.
    pub gnn_seconds: f64,
    /// Building tracks.
    pub track_seconds: f64,
    /// Writing the submission.
    pub write_seconds: f64,
    /// Fitting the tracks and writing their parameters (0 without a fit).
    pub fit_seconds: f64,
}

/// A reconstruction of a directory of events into `out`, as reported.
#[derive(Clone, Debug, Serialize)]
pub struct RecoReport<'a> {
    /// The directory of the submission files.
    pub out: &'a Path,
    /// The track builder (`cc`, `walkthrough`, `follow`).
    pub method: String,
    /// Edges scoring at least this are kept.
    pub score_cut: f64,
    /// Smallest track candidate, in hits.
    pub min_hits: usize,
    /// Smallest reconstructable (and target) particle the metrics count, in hits: `min_hits`
    /// unless overridden.
    pub min_particle_hits: usize,
    /// Smallest candidate the metrics count, in hits (`min_hits`).
    pub min_track_hits: usize,
    /// The walk-through's branching cut (the score cut when unset).
    pub branch_cut: f64,
    /// Whether track following searches hits beyond the graph's edges.
    pub hit_search: bool,
    /// Track following's settings (`None` for the other methods).
    pub follow: Option<FollowConfig>,
    /// Candidates scoring below this (by `candidate_score`) were dropped; 0 keeps all.
    pub min_candidate_score: f64,
    /// How candidates were scored for `min_candidate_score`.
    pub candidate_score: CandidateScore,
    /// The longest candidate, in hits, that `min_candidate_score` applied to (`None`: all).
    pub candidate_score_max_hits: Option<usize>,
    /// Candidates whose fake probability by the quality model exceeded this were dropped
    /// (`None`: no quality selection).
    pub max_fake_probability: Option<f64>,
    /// Whether track following ran again around the candidates the quality model kept.
    pub rebuild: bool,
    /// Whether the edge scores came from the truth (a diagnostic).
    pub truth_scores: bool,
    /// Whether every track was fitted, its parameters written beside the submission.
    pub fit: bool,
    /// With the fit: the χ² above which a hit is an outlier, left out of its track's fit (`None`: none).
    pub outlier_chi2: Option<f64>,
    /// Each event's sizes and seconds.
    pub events: &'a [EventSummary],
    /// Mean seconds per event of each stage.
    pub mean_seconds_per_event: MeanSeconds,
    /// The track metrics of the events with truth.
    pub metrics: &'a Option<TrackMetrics>,
    /// The efficiency plots written.
    pub plots: &'a [PathBuf],
    /// The event display's figures and Phoenix file (`--display`; empty without).
    pub display: &'a [PathBuf],
    /// The definitions of the metrics (pT cut, hits, prompt radius), for the text.
    #[serde(skip)]
    pub metrics_config: MetricsConfig,
    #[serde(skip)]
    track_method: TrackMethod,
}

impl<'a> RecoReport<'a> {
    /// The report of `done`, what `rec` reconstructed into `out`.
    pub fn new(out: &'a Path, rec: &Reconstructor, done: &'a DirReco) -> Self {
        let c = rec.track_config();
        let metrics_config = rec.metrics_config();
        let n = done.events.len().max(1) as f64;
        let mean = |f: fn(&EventSummary) -> f64| done.events.iter().map(f).sum::<f64>() / n;
        RecoReport {
            out,
            method: format!("{:?}", c.method).to_lowercase(),
            score_cut: c.score_cut,
            min_hits: c.min_hits,
            min_particle_hits: metrics_config.min_particle_hits,
            min_track_hits: metrics_config.min_track_hits,
            branch_cut: c.branch_cut.unwrap_or(c.score_cut),
            hit_search: c.hit_search(),
            follow: c.follow_settings().cloned(),
            min_candidate_score: c.min_candidate_score,
            candidate_score: c.candidate_score,
            candidate_score_max_hits: c.candidate_score_max_hits,
            max_fake_probability: rec.quality().map(|(_, p)| p),
            rebuild: rec.rebuild(),
            truth_scores: rec.truth_scores(),
            fit: rec.fit(),
            outlier_chi2: rec.outliers().filter(|_| rec.fit()).map(|o| o.chi2_gate),
            events: &done.events,
            mean_seconds_per_event: MeanSeconds {
                read_seconds: mean(|e| e.read_seconds),
                graph_seconds: mean(|e| e.graph_seconds),
                gnn_seconds: mean(|e| e.gnn_seconds),
                track_seconds: mean(|e| e.track_seconds),
                write_seconds: mean(|e| e.write_seconds),
                fit_seconds: mean(|e| e.fit_seconds),
            },
            metrics: &done.metrics,
            plots: &done.plots,
            display: &done.display,
            metrics_config,
            track_method: c.method,
        }
    }

    /// The mean over events of a figure.
    fn mean(&self, f: fn(&EventSummary) -> f64) -> f64 {
        self.events.iter().map(f).sum::<f64>() / self.events.len().max(1) as f64
    }
}

impl fmt::Display for RecoReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let measure = match self.candidate_score {
            CandidateScore::WeakestLink => "weakest link",
            CandidateScore::MeanBestEdge => "mean best edge",
        };
        let mut selection = match (self.min_candidate_score > 0.0, self.candidate_score_max_hits) {
            (false, _) => String::new(),
            (true, None) => format!(" with {measure} >= {}", self.min_candidate_score),
            (true, Some(n)) => format!(", those of <= {n} hits with {measure} >= {}", self.min_candidate_score),
        };
        if let Some(p) = self.max_fake_probability {
            selection += &format!(", fake probability <= {p} by the quality model");
            if self.rebuild {
                selection += ", tracks followed again around those it kept";
            }
        }
        writeln!(
            f,
            "{} events reconstructed into {} ({:?}, score cut {}, candidates of >= {} hits{selection})",
            self.events.len(),
            self.out.display(),
            self.track_method,
            self.score_cut,
            self.min_hits
        )?;
        if self.truth_scores {
            writeln!(
                f,
                "edge scores from truth (--truth-scores): the metrics below are the ceiling of this graph and track builder"
            )?;
        }
        let t = &self.mean_seconds_per_event;
        writeln!(
            f,
            "per event: {:.0} nodes, {:.0} edges, {:.0} tracks; seconds: read {:.3}, graph {:.3}, GNN {:.3}, tracks {:.3}, write {:.3}",
            self.mean(|e| e.nodes as f64),
            self.mean(|e| e.edges as f64),
            self.mean(|e| e.tracks as f64),
            t.read_seconds,
            t.graph_seconds,
            t.gnn_seconds,
            t.track_seconds,
            t.write_seconds
        )?;
        if self.fit {
            writeln!(
                f,
                "track fit: {:.0} tracks fitted per event in {:.3} s, {:.0} outlier hits dropped per event (chi2 > {}), parameters in eventNNNNNNNNN-parameters.csv",
                self.mean(|e| e.fitted_tracks as f64),
                t.fit_seconds,
                self.mean(|e| e.outlier_hits as f64),
                self.outlier_chi2.map_or("inf".to_string(), |c| c.to_string())
            )?;
        }
        if let Some(m) = self.metrics {
            let cfg = &self.metrics_config;
            writeln!(
                f,
                "track efficiency {:.4} over primary targets (pT >= {} GeV, >= {} hits, produced within {} mm of the beam line; double majority), {:.4} over all targets (secondaries included), {:.4} over all reconstructable particles (>= {} hits); candidates of >= {} hits; fake rate {:.4}; duplicate rate {:.4}; TrackML score {:.4}",
                m.efficiency_primary,
                cfg.target_pt_min,
                cfg.min_particle_hits,
                cfg.prompt_max_vertex_r,
                m.efficiency,
                m.efficiency_all,
                cfg.min_particle_hits,
                cfg.min_track_hits,
                m.fake_rate,
                m.duplicate_rate,
                m.trackml_score
            )?;
            for p in self.plots {
                writeln!(f, "plot: {}", p.display())?;
            }
        }
        for p in self.display {
            writeln!(f, "display: {}", p.display())?;
        }
        Ok(())
    }
}
