//! Classical track finding of whole events: seeding, the combinatorial Kalman filter and
//! ambiguity resolution in one call ([`Ckf::event`]), and a directory of events into TrackML
//! submissions with the track metrics ([`Ckf::reconstruct_events`]).

use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;
use serde::Serialize;
use trackgnn_trackml::csv::{EventFiles, FileKind, ReadOptions, read_event};
use trackgnn_trackml::physics::material::MaterialModel;
use trackgnn_trackml::{Detector, Event, SolenoidField};

use super::ambiguity::{Candidate, resolve};
use super::config::CkfConfig;
use super::finder::{Track, TrackFinder};
use super::hits::HitStore;
use super::navigation::{NavigationConfig, Navigator};
use super::seeding::find_seeds;
use crate::display::{DisplayConfig, DisplayEvent, write_display};
use crate::error::{Error, Result};
use crate::inference::score_against_truth;
use crate::kalman::{FitContext, FittedTrack, KalmanFitter, MeasurementModel, fit_candidate};
use crate::metrics::{MetricsConfig, TrackMetrics};
use crate::submission::{parameters_file_name, write_event_submission, write_parameters};
use crate::tracks::NO_TRACK;

/// Seconds one event spent in each stage of [`Ckf::event`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct CkfSeconds {
    /// Grouping the hits by module.
    pub hits_seconds: f64,
    /// Seeding.
    pub seeding_seconds: f64,
    /// The combinatorial Kalman filter from every seed.
    pub finding_seconds: f64,
    /// Ambiguity resolution.
    pub ambiguity_seconds: f64,
    /// The final fits ([`CkfConfig::fit`]; 0 without).
    pub fit_seconds: f64,
}

impl CkfSeconds {
    /// The sum of the stages.
    pub fn total(&self) -> f64 {
        self.hits_seconds + self.seeding_seconds + self.finding_seconds + self.ambiguity_seconds + self.fit_seconds
    }
}

/// One event's tracks.
#[derive(Clone, Debug)]
pub struct CkfEvent {
    /// The tracks kept, in the order found.
    pub tracks: Vec<Track>,
    /// Each hit's track id (1-based in the order of `tracks`), [`NO_TRACK`] for none.
    pub hit_tracks: Vec<u32>,
    /// Seeds found.
    pub seeds: usize,
    /// Seeds followed (the others held hits of tracks found before).
    pub seeds_followed: usize,
    /// Tracks before ambiguity resolution.
    pub candidates: usize,
    /// Seconds per stage.
    pub seconds: CkfSeconds,
}

/// The classical track finder: triplet seeding, the combinatorial Kalman filter and greedy
/// ambiguity resolution (issue 40), with no GNN.
///
/// ```
/// use trackgnn_reco::ckf::{Ckf, CkfConfig};
/// use trackgnn_trackml::{Detector, Event};
/// let ckf = Ckf::new(Detector::trackml(), CkfConfig::default())?;
/// let out = ckf.event(&Event::default())?; // no hits: no tracks
/// assert!(out.tracks.is_empty());
/// # Ok::<(), trackgnn_reco::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Ckf {
    det: Detector,
    field: SolenoidField,
    material: MaterialModel,
    measurement: MeasurementModel,
    navigation: NavigationConfig,
    config: CkfConfig,
    display: Option<DisplayConfig>,
}

impl Ckf {
    /// A track finder on `det` in the generator's default field and material, with the
    /// calibrated hit errors of [`MeasurementModel::default`].
    ///
    /// # Errors
    /// [`Error::Config`] for a setting of `config` out of range.
    pub fn new(det: Detector, config: CkfConfig) -> Result<Ckf> {
        config.validate()?;
        Ok(Ckf {
            det,
            field: SolenoidField::default(),
            material: MaterialModel::default(),
            measurement: MeasurementModel::default(),
            navigation: NavigationConfig::default(),
            config,
            display: None,
        })
    }

    /// The same finder in another field.
    pub fn with_field(self, field: SolenoidField) -> Ckf {
        Ckf { field, ..self }
    }

    /// The same finder with another material model.
    pub fn with_material(self, material: MaterialModel) -> Ckf {
        Ckf { material, ..self }
    }

    /// The same finder, drawing one event and exporting it for Phoenix into `<out>/display`
    /// ([`write_display`]) in [`reconstruct_events`](Self::reconstruct_events) when `display`
    /// is given (its tracks fitted for the Phoenix file's perigees).
    pub fn with_display(self, display: Option<DisplayConfig>) -> Ckf {
        Ckf { display, ..self }
    }

    /// The settings.
    pub fn config(&self) -> &CkfConfig {
        &self.config
    }

    /// The detector.
    pub fn detector(&self) -> &Detector {
        &self.det
    }

    fn context(&self) -> FitContext<'_> {
        FitContext::new(&self.det, &self.field, self.material, self.config.mass)
    }

    /// Finds the tracks of `event` (its hits only; truth is never read).
    ///
    /// # Errors
    /// [`Error::HitOffDetector`] for a hit on a module that the detector does not have.
    pub fn event(&self, event: &Event) -> Result<CkfEvent> {
        let mut seconds = CkfSeconds::default();
        let t = Instant::now();
        let hits = HitStore::new(&self.det, event)?;
        seconds.hits_seconds = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let mut seeds = find_seeds(&self.det, &self.field, &hits, &self.config.seeds);
        // The best seeds first: a track is then found from its best seed, and the seeds that
        // repeat its hits are skipped.
        seeds.sort_by(|a, b| b.weight.total_cmp(&a.weight).then(a.hits.cmp(&b.hits)));
        seconds.seeding_seconds = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let finder = TrackFinder {
            context: self.context(),
            measurement: self.measurement,
            navigator: Navigator::new(&self.det, self.navigation),
            config: self.config,
        };
        let mut used = vec![false; hits.len()];
        let mut found: Vec<Track> = Vec::new();
        let mut followed = 0;
        for seed in &seeds {
            if seed.hits.iter().filter(|&&h| used[h as usize]).count() >= self.config.skip_seed_used_hits {
                continue;
            }
            followed += 1;
            if let Some(track) = finder.find(&hits, seed) {
                for &h in &track.hits {
                    used[h as usize] = true;
                }
                found.push(track);
            }
        }
        seconds.finding_seconds = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let candidates: Vec<Candidate<'_>> =
            found.iter().map(|t| Candidate { hits: &t.hits, chi2_per_ndf: t.chi2_per_ndf() }).collect();
        let keep = resolve(&candidates, hits.len(), self.config.max_shared_hits);
        let n_candidates = found.len();
        let mut tracks: Vec<Track> = Vec::with_capacity(keep.len());
        let mut keep_iter = keep.into_iter().peekable();
        for (i, t) in found.into_iter().enumerate() {
            if keep_iter.peek() == Some(&i) {
                keep_iter.next();
                tracks.push(t);
            }
        }
        // A hit shared by two tracks kept goes to the one found first.
        let mut hit_tracks = vec![NO_TRACK; hits.len()];
        for (i, t) in tracks.iter().enumerate() {
            for &h in &t.hits {
                if hit_tracks[h as usize] == NO_TRACK {
                    hit_tracks[h as usize] = i as u32 + 1;
                }
            }
        }
        seconds.ambiguity_seconds = t.elapsed().as_secs_f64();
        if self.config.fit {
            let t = Instant::now();
            let fitter = KalmanFitter::new(self.context(), self.measurement);
            for track in &mut tracks {
                let candidate: Vec<_> = track.hits.iter().map(|&h| hits.candidate_hit(h)).collect();
                track.fit = fit_candidate(&fitter, &candidate).ok();
            }
            seconds.fit_seconds = t.elapsed().as_secs_f64();
        }
        Ok(CkfEvent {
            tracks,
            hit_tracks,
            seeds: seeds.len(),
            seeds_followed: followed,
            candidates: n_candidates,
            seconds,
        })
    }

    /// Reconstructs the events `files` (their hits), `threads` events at a time (1: in turn;
    /// each event's result does not depend on it), writes a TrackML submission for each into
    /// `out` (created if needed) and, with [`CkfConfig::fit`], the fitted tracks' parameters
    /// beside it ([`write_parameters`]), then scores the events that have truth and particles files
    /// with `metrics` and plots the efficiencies into `out/plots`. Calls `done` after each
    /// event (from the worker that reconstructed it).
    ///
    /// # Errors
    /// The first event that cannot be read ([`Error::Event`], naming its file), that holds a
    /// hit off the detector ([`Error::InFile`] naming its hits file, around
    /// [`Error::HitOffDetector`]), or whose submission cannot be written ([`Error::Io`]).
    pub fn reconstruct_events(
        &self,
        files: &[EventFiles],
        out: &Path,
        metrics: &MetricsConfig,
        threads: usize,
        done: impl Fn(&CkfEventSummary) + Sync,
    ) -> Result<CkfDirReco> {
        if let Some(d) = &self.display {
            d.check_listed(files)?;
        }
        std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
        let start = Instant::now();
        let display_files = std::sync::Mutex::new(Vec::new());
        let one = |f: &EventFiles| -> Result<(CkfEventSummary, Vec<u32>)> {
            let t = Instant::now();
            let event = read_event(f, ReadOptions { truth: false, particles: false, cells: false })?;
            let read_seconds = t.elapsed().as_secs_f64();
            let display = self.display.filter(|d| d.event_id == event.event_id);
            // The displayed event's tracks are fitted for the Phoenix file's perigees.
            let refit;
            let finder = if display.is_some() && !self.config.fit {
                refit = Ckf { config: CkfConfig { fit: true, ..self.config }, ..self.clone() };
                &refit
            } else {
                self
            };
            let reco = finder.event(&event).map_err(|e| match e {
                Error::HitOffDetector { .. } => Error::InFile {
                    path: f.path(FileKind::Hits).unwrap_or_else(|_| f.dir.join(&f.prefix)),
                    source: Box::new(e),
                },
                e => e,
            })?;
            let t = Instant::now();
            write_event_submission(out, event.event_id, &event.hits.hit_id, &reco.hit_tracks)?;
            let fitted = if self.config.fit {
                let fitted = fitted_tracks(&reco);
                write_parameters(&out.join(parameters_file_name(event.event_id)), &fitted)?;
                fitted.len()
            } else {
                0
            };
            if let Some(d) = &display {
                let fits = fitted_tracks(&reco);
                let shown = DisplayEvent {
                    event: &event,
                    hit_tracks: &reco.hit_tracks,
                    edges: None,
                    fitted: &fits,
                    method: "CKF",
                };
                let files = write_display(&out.join("display"), &shown, d)?;
                display_files.lock().expect("no panic while holding it").extend(files);
            }
            let summary = CkfEventSummary {
                event_id: event.event_id,
                hits: event.hits.len(),
                seeds: reco.seeds,
                seeds_followed: reco.seeds_followed,
                candidates: reco.candidates,
                tracks: reco.tracks.len(),
                fitted_tracks: fitted,
                read_seconds,
                stages: reco.seconds,
                write_seconds: t.elapsed().as_secs_f64(),
            };
            done(&summary);
            Ok((summary, reco.hit_tracks))
        };
        let per_event: Vec<(CkfEventSummary, Vec<u32>)> = if threads <= 1 {
            files.iter().map(one).collect::<Result<_>>()?
        } else {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .map_err(|e| Error::Config { field: "threads", message: e.to_string() })?;
            pool.install(|| files.par_iter().map(one).collect::<Result<_>>())?
        };
        let wall_seconds = start.elapsed().as_secs_f64();
        let tracks: Vec<&[u32]> = per_event.iter().map(|(_, t)| t.as_slice()).collect();
        let metrics = score_against_truth(files, &tracks, metrics)?;
        let plots = match &metrics {
            Some(m) => crate::plots::plot_track_efficiency(&out.join("plots"), m)?,
            None => Vec::new(),
        };
        Ok(CkfDirReco {
            events: per_event.into_iter().map(|(s, _)| s).collect(),
            wall_seconds,
            threads: threads.max(1),
            metrics,
            plots,
            display: display_files.into_inner().expect("no panic while holding it"),
        })
    }
}

/// The fitted tracks of an event whose fit succeeded and that keep a hit in the submission,
/// with their track ids there (1-based in the order of `tracks`).
fn fitted_tracks(reco: &CkfEvent) -> Vec<FittedTrack> {
    let mut present = vec![false; reco.tracks.len() + 1];
    for &t in &reco.hit_tracks {
        present[t as usize] = true;
    }
    reco.tracks
        .iter()
        .enumerate()
        .filter(|(i, _)| present[i + 1])
        .filter_map(|(i, t)| t.fit.as_ref().and_then(|f| FittedTrack::of(i as u32 + 1, f)))
        .collect()
}

/// One event of a directory's reconstruction by [`Ckf::reconstruct_events`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CkfEventSummary {
    /// The event.
    pub event_id: u64,
    /// Its hits.
    pub hits: usize,
    /// Seeds found.
    pub seeds: usize,
    /// Seeds followed.
    pub seeds_followed: usize,
    /// Tracks before ambiguity resolution.
    pub candidates: usize,
    /// Tracks kept.
    pub tracks: usize,
    /// Tracks fitted, with their parameters in the event's parameters file (0 without
    /// [`CkfConfig::fit`]).
    pub fitted_tracks: usize,
    /// Seconds reading the hits.
    pub read_seconds: f64,
    /// Seconds per stage.
    #[serde(flatten)]
    pub stages: CkfSeconds,
    /// Seconds writing the submission (and the parameters file).
    pub write_seconds: f64,
}

/// What [`Ckf::reconstruct_events`] did.
#[derive(Clone, Debug)]
pub struct CkfDirReco {
    /// Each event, in order.
    pub events: Vec<CkfEventSummary>,
    /// Wall-clock seconds of the reconstruction (reading, finding, writing; not the scoring).
    pub wall_seconds: f64,
    /// Events reconstructed at a time.
    pub threads: usize,
    /// The metrics of the events with truth (`None`: none has).
    pub metrics: Option<TrackMetrics>,
    /// The efficiency plots written.
    pub plots: Vec<PathBuf>,
    /// The display's figures and Phoenix file (none without a display).
    pub display: Vec<PathBuf>,
}
