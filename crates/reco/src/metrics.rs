//! Track-level metrics: efficiency (double majority), fake and duplicate rates, the TrackML
//! score, and efficiency against pT and η.
//!
//! # Definitions
//! Inputs are one event's hits (their particle_id and TrackML weight, plus each particle's
//! pT and η) and a track id per hit, with [`NO_TRACK`] (0) meaning "in no track": each such
//! hit is treated as a track of its own (as [`singleton_track_ids`](crate::singleton_track_ids)
//! would number it). All counts are over
//! the hits given, so pass every hit of the event (hits not in the graph with
//! [`NO_TRACK`], as [`event_track_ids`](crate::event_track_ids) does) for the
//! event-level numbers.
//!
//! - **Candidate**: a track with ≥ `min_track_hits` hits (unassigned hits never are).
//! - **Reconstructable particle**: a non-noise particle with ≥ `min_particle_hits` hits
//!   (over the hits given). **Target particle**: reconstructable and pT ≥ `target_pt_min`.
//! - **Primary target** (also called prompt): a target produced within
//!   `prompt_max_vertex_r` of the beam line (transverse production radius; default 1 mm),
//!   i.e. not a secondary from a decay or an interaction in the material. The efficiency over
//!   primary targets, `efficiency_primary`, is the headline, as the ATLAS ITk GNN results
//!   quote it; the efficiency over all targets, secondaries included (`efficiency`), is
//!   always reported beside it. `efficiency_prompt` is the same figure as
//!   `efficiency_primary` under its earlier name.
//! - **Double-majority match** (efficiency): a candidate matches particle p if more than
//!   50 % of the candidate's hits are p's **and** more than 50 % of p's hits are on the
//!   candidate. Noise is never matched. efficiency_primary = matched primary targets /
//!   primary targets; efficiency = matched targets / targets; efficiency_all = matched
//!   reconstructable / reconstructable.
//! - **Pure candidate** (fakes and duplicates): more than 50 % of its hits come from one
//!   non-noise particle (the one-way match of ATLAS/acorn, "track purity > 0.5").
//!   fake_rate = candidates that are not pure / candidates.
//!   duplicate_rate = (pure candidates − distinct particles they match) / pure candidates,
//!   i.e. the fraction of matched candidates that are extra copies of an already-matched
//!   particle.
//!
//!   *Why not the double majority here*: each hit has one track id, so no two tracks can
//!   both hold more than half of one particle's hits; under the double majority the
//!   duplicate rate would be 0 by construction. With the one-way match, a particle split
//!   in two pure pieces gives one duplicate, as in ACTS's and acorn's duplicate rates.
//! - **TrackML score**: exactly the challenge's definition (see [`trackml_score`]), mean
//!   over events when aggregated.
//! - **Efficiency vs pT and η**: primary targets, all targets and all reconstructable
//!   particles, each binned by their pT / η at production; `(lo, hi, n_target, n_matched)`
//!   per bin (see [`bins`] for the edge convention).
//!
//! A particle in the truth that is missing from the particle table counts as reconstructable
//! (if it has the hits) but never as a target, and lands in no bin.
//!
//! All fractions are in [0, 1]; a fraction with a zero denominator is reported as 0.

pub mod bins;
pub(crate) mod composition;
mod score;

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use trackgnn_trackml::{Event, ParticleId, Particles};

use crate::error::{Error, Result};
use crate::tracks::{DEFAULT_MIN_HITS, NO_TRACK};
use composition::{compose, singleton_key};

pub use bins::{EfficiencyBin, linear_edges, log_edges};
pub use score::trackml_score;

/// Settings of the track metrics. `Default` gives the reference values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// Smallest pT \[GeV\] of a target particle. Default 1.0 (the field's target definition).
    pub target_pt_min: f64,
    /// Smallest number of hits of a reconstructable (and target) particle, ≥ 1. Default
    /// [`DEFAULT_MIN_HITS`] (5), as the track builders'.
    pub min_particle_hits: usize,
    /// Smallest number of hits of a candidate track, ≥ 1. Default [`DEFAULT_MIN_HITS`] (5).
    pub min_track_hits: usize,
    /// Largest transverse production radius \[mm\] of a prompt target particle, ≥ 0.
    /// Default [`PROMPT_R`](trackgnn_graph::recipe::PROMPT_R) (1 mm), the graphs' definition.
    pub prompt_max_vertex_r: f64,
    /// Bin edges in pT \[GeV\] for the target efficiency. Default 10 log bins from 1 to 100.
    pub pt_edges: Vec<f64>,
    /// Bin edges in pT \[GeV\] for the efficiency of all reconstructable particles. Default 15
    /// log bins from 0.1 to 100.
    pub pt_edges_all: Vec<f64>,
    /// Bin edges in η for both efficiencies. Default −4 to 4 in steps of 0.5.
    pub eta_edges: Vec<f64>,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            target_pt_min: 1.0,
            min_particle_hits: DEFAULT_MIN_HITS,
            min_track_hits: DEFAULT_MIN_HITS,
            prompt_max_vertex_r: f64::from(trackgnn_graph::recipe::PROMPT_R),
            pt_edges: log_edges(1.0, 100.0, 10),
            pt_edges_all: log_edges(0.1, 100.0, 15),
            eta_edges: linear_edges(-4.0, 4.0, 16),
        }
    }
}

impl MetricsConfig {
    /// The reference values for candidates of at least `min_hits` hits: candidates and
    /// reconstructable particles both of at least `min_hits` hits (acorn's and Exa.TrkX's
    /// `min_track_length` = `min_particle_length`), so that a particle too short to ever make
    /// a candidate is not counted as missed; `min_particle_hits` overrides the particles'.
    pub fn for_min_hits(min_hits: usize, min_particle_hits: Option<usize>) -> MetricsConfig {
        MetricsConfig {
            min_track_hits: min_hits,
            min_particle_hits: min_particle_hits.unwrap_or(min_hits),
            ..MetricsConfig::default()
        }
    }

    /// Checks every field's range.
    pub fn validate(&self) -> Result<()> {
        if !(self.target_pt_min.is_finite() && self.target_pt_min >= 0.0) {
            return Err(Error::config("target_pt_min", format!("must be finite and ≥ 0, got {}", self.target_pt_min)));
        }
        if !(self.prompt_max_vertex_r.is_finite() && self.prompt_max_vertex_r >= 0.0) {
            return Err(Error::config(
                "prompt_max_vertex_r",
                format!("must be finite and ≥ 0, got {}", self.prompt_max_vertex_r),
            ));
        }
        if self.min_particle_hits == 0 {
            return Err(Error::config("min_particle_hits", "must be at least 1, got 0"));
        }
        if self.min_track_hits == 0 {
            return Err(Error::config("min_track_hits", "must be at least 1, got 0"));
        }
        bins::validate_edges("pt_edges", &self.pt_edges)?;
        bins::validate_edges("pt_edges_all", &self.pt_edges_all)?;
        bins::validate_edges("eta_edges", &self.eta_edges)
    }
}

/// pT \[GeV\], η and transverse radius \[mm\] at production of each particle, by id.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ParticleKinematics {
    map: HashMap<ParticleId, (f64, f64, f64)>,
}

impl ParticleKinematics {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// The table of an event's particles (pT and η from the production momentum, the
    /// radius from the production vertex).
    pub fn from_particles(particles: &Particles) -> Self {
        let map = (0..particles.len())
            .map(|i| (particles.particle_id[i], (particles.pt(i), particles.eta(i), particles.vertex_r(i))))
            .collect();
        ParticleKinematics { map }
    }

    /// Sets particle `id`'s pT \[GeV\] and η, produced on the beam line.
    pub fn insert(&mut self, id: ParticleId, pt: f64, eta: f64) {
        self.insert_at(id, pt, eta, 0.0);
    }

    /// Sets particle `id`'s pT \[GeV\], η and transverse production radius \[mm\].
    pub fn insert_at(&mut self, id: ParticleId, pt: f64, eta: f64, vertex_r: f64) {
        self.map.insert(id, (pt, eta, vertex_r));
    }

    /// Particle `id`'s (pT \[GeV\], η), if known.
    pub fn get(&self, id: ParticleId) -> Option<(f64, f64)> {
        self.map.get(&id).map(|&(pt, eta, _)| (pt, eta))
    }

    /// Particle `id`'s transverse production radius \[mm\], if known.
    pub fn vertex_r(&self, id: ParticleId) -> Option<f64> {
        self.map.get(&id).map(|v| v.2)
    }

    /// The number of particles.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// The truth the metrics need about one event's hits.
#[derive(Clone, Copy, Debug)]
pub struct EventTruth<'a> {
    /// The particle of each hit (0 for noise).
    pub particle_id: &'a [ParticleId],
    /// The TrackML weight of each hit.
    pub weight: &'a [f32],
    /// pT and η of the particles.
    pub kinematics: &'a ParticleKinematics,
}

/// Track metrics of one or more events. Counts add up over events, fractions are
/// recomputed from the summed counts, the TrackML score is the mean over events.
///
/// Fields added after the first release (`efficiency_primary` and its bins) read as 0 and
/// empty from older JSON.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrackMetrics {
    /// Number of events aggregated.
    pub n_events: u64,
    /// The headline: `n_prompt_target_matched / n_prompt_target_particles`, the efficiency
    /// over primary targets (targets produced within `prompt_max_vertex_r` of the beam line).
    #[serde(default)]
    pub efficiency_primary: f64,
    /// Target particles (pT ≥ `target_pt_min`, ≥ `min_particle_hits` hits).
    pub n_target_particles: u64,
    /// Target particles matched (double majority) by a candidate.
    pub n_target_matched: u64,
    /// `n_target_matched / n_target_particles`.
    pub efficiency: f64,
    /// Prompt target particles (produced within `prompt_max_vertex_r` of the beam line).
    pub n_prompt_target_particles: u64,
    /// Prompt target particles matched (double majority) by a candidate.
    pub n_prompt_target_matched: u64,
    /// `n_prompt_target_matched / n_prompt_target_particles`: the same as
    /// [`efficiency_primary`](Self::efficiency_primary), its earlier name.
    pub efficiency_prompt: f64,
    /// Reconstructable particles (≥ `min_particle_hits` hits, any pT).
    pub n_reconstructable_particles: u64,
    /// Reconstructable particles matched (double majority) by a candidate.
    pub n_reconstructable_matched: u64,
    /// `n_reconstructable_matched / n_reconstructable_particles`.
    pub efficiency_all: f64,
    /// Candidate tracks (≥ `min_track_hits` hits).
    pub n_candidates: u64,
    /// Candidates without a particle holding more than half of their hits.
    pub n_fake_candidates: u64,
    /// `n_fake_candidates / n_candidates`.
    pub fake_rate: f64,
    /// Pure candidates (more than half of their hits from one particle).
    pub n_matched_candidates: u64,
    /// Distinct particles that pure candidates match.
    pub n_matched_particles: u64,
    /// `(n_matched_candidates − n_matched_particles) / n_matched_candidates`.
    pub duplicate_rate: f64,
    /// TrackML score, mean over events.
    pub trackml_score: f64,
    /// Primary-target efficiency against pT \[GeV\]: `(lo, hi, n_target, n_matched)` per bin
    /// (the bins of [`efficiency_vs_pt`](Self::efficiency_vs_pt)).
    #[serde(default)]
    pub efficiency_primary_vs_pt: Vec<EfficiencyBin>,
    /// Primary-target efficiency against η.
    #[serde(default)]
    pub efficiency_primary_vs_eta: Vec<EfficiencyBin>,
    /// Target efficiency against pT \[GeV\]: `(lo, hi, n_target, n_matched)` per bin.
    pub efficiency_vs_pt: Vec<EfficiencyBin>,
    /// Target efficiency against η.
    pub efficiency_vs_eta: Vec<EfficiencyBin>,
    /// Efficiency of all reconstructable particles against pT \[GeV\].
    pub efficiency_all_vs_pt: Vec<EfficiencyBin>,
    /// Efficiency of all reconstructable particles against η.
    pub efficiency_all_vs_eta: Vec<EfficiencyBin>,
}

fn ratio(num: u64, den: u64) -> f64 {
    if den == 0 { 0.0 } else { num as f64 / den as f64 }
}

impl TrackMetrics {
    /// Recomputes the fractions from the counts.
    fn update_fractions(&mut self) {
        self.efficiency = ratio(self.n_target_matched, self.n_target_particles);
        self.efficiency_prompt = ratio(self.n_prompt_target_matched, self.n_prompt_target_particles);
        self.efficiency_primary = self.efficiency_prompt;
        self.efficiency_all = ratio(self.n_reconstructable_matched, self.n_reconstructable_particles);
        self.fake_rate = ratio(self.n_fake_candidates, self.n_candidates);
        self.duplicate_rate =
            ratio(self.n_matched_candidates.saturating_sub(self.n_matched_particles), self.n_matched_candidates);
    }

    /// Adds the events of `other`: counts add, the score becomes the mean over all events.
    /// Merging into an empty (`Default`) value takes `other`'s bins; otherwise the bin edges
    /// must be equal ([`Error::BinMismatch`]).
    pub fn merge(&mut self, other: &TrackMetrics) -> Result<()> {
        if other.n_events == 0 {
            return Ok(());
        }
        if self.n_events == 0 {
            *self = other.clone();
            return Ok(());
        }
        let mut m = self.clone();
        bins::add("efficiency_primary_vs_pt", &mut m.efficiency_primary_vs_pt, &other.efficiency_primary_vs_pt)?;
        bins::add("efficiency_primary_vs_eta", &mut m.efficiency_primary_vs_eta, &other.efficiency_primary_vs_eta)?;
        bins::add("efficiency_vs_pt", &mut m.efficiency_vs_pt, &other.efficiency_vs_pt)?;
        bins::add("efficiency_vs_eta", &mut m.efficiency_vs_eta, &other.efficiency_vs_eta)?;
        bins::add("efficiency_all_vs_pt", &mut m.efficiency_all_vs_pt, &other.efficiency_all_vs_pt)?;
        bins::add("efficiency_all_vs_eta", &mut m.efficiency_all_vs_eta, &other.efficiency_all_vs_eta)?;
        let n = m.n_events + other.n_events;
        m.trackml_score =
            (m.trackml_score * m.n_events as f64 + other.trackml_score * other.n_events as f64) / n as f64;
        m.n_events = n;
        m.n_target_particles += other.n_target_particles;
        m.n_target_matched += other.n_target_matched;
        m.n_prompt_target_particles += other.n_prompt_target_particles;
        m.n_prompt_target_matched += other.n_prompt_target_matched;
        m.n_reconstructable_particles += other.n_reconstructable_particles;
        m.n_reconstructable_matched += other.n_reconstructable_matched;
        m.n_candidates += other.n_candidates;
        m.n_fake_candidates += other.n_fake_candidates;
        m.n_matched_candidates += other.n_matched_candidates;
        m.n_matched_particles += other.n_matched_particles;
        m.update_fractions();
        *self = m;
        Ok(())
    }
}

/// The metrics of one event (see the [module docs](self) for every definition).
///
/// # Panics
/// If `truth.particle_id`, `truth.weight` and `track_ids` differ in length.
#[track_caller]
pub fn evaluate(truth: &EventTruth<'_>, track_ids: &[u32], config: &MetricsConfig) -> Result<TrackMetrics> {
    assert_eq!(truth.particle_id.len(), truth.weight.len(), "one weight per hit");
    assert_eq!(truth.particle_id.len(), track_ids.len(), "one track id per hit");
    config.validate()?;
    let comp = compose(truth.particle_id, truth.weight, |i| {
        if track_ids[i] == NO_TRACK { singleton_key(i) } else { u64::from(track_ids[i]) }
    });

    let mut m = TrackMetrics {
        n_events: 1,
        trackml_score: score::score_of(&comp),
        efficiency_primary_vs_pt: bins::empty_bins(&config.pt_edges),
        efficiency_primary_vs_eta: bins::empty_bins(&config.eta_edges),
        efficiency_vs_pt: bins::empty_bins(&config.pt_edges),
        efficiency_vs_eta: bins::empty_bins(&config.eta_edges),
        efficiency_all_vs_pt: bins::empty_bins(&config.pt_edges_all),
        efficiency_all_vs_eta: bins::empty_bins(&config.eta_edges),
        ..Default::default()
    };

    let mut matched: HashSet<ParticleId> = HashSet::new();
    let mut pure_particles: HashSet<ParticleId> = HashSet::new();
    let min_track = config.min_track_hits as u32;
    for t in comp.tracks.iter().filter(|t| t.assigned && t.nhits >= min_track) {
        m.n_candidates += 1;
        if !comp.is_pure(t) {
            m.n_fake_candidates += 1;
            continue;
        }
        m.n_matched_candidates += 1;
        pure_particles.insert(t.majority);
        if comp.is_double_majority(t) {
            matched.insert(t.majority);
        }
    }
    m.n_matched_particles = pure_particles.len() as u64;

    let min_hits = config.min_particle_hits as u32;
    for (&p, &nhits) in &comp.particle_nhits {
        if p.is_noise() || nhits < min_hits {
            continue;
        }
        let ok = matched.contains(&p);
        m.n_reconstructable_particles += 1;
        m.n_reconstructable_matched += u64::from(ok);
        let Some((pt, eta)) = truth.kinematics.get(p) else { continue };
        bins::fill(&mut m.efficiency_all_vs_pt, pt, ok);
        bins::fill(&mut m.efficiency_all_vs_eta, eta, ok);
        if pt >= config.target_pt_min {
            m.n_target_particles += 1;
            m.n_target_matched += u64::from(ok);
            if truth.kinematics.vertex_r(p).is_some_and(|r| r <= config.prompt_max_vertex_r) {
                m.n_prompt_target_particles += 1;
                m.n_prompt_target_matched += u64::from(ok);
                bins::fill(&mut m.efficiency_primary_vs_pt, pt, ok);
                bins::fill(&mut m.efficiency_primary_vs_eta, eta, ok);
            }
            bins::fill(&mut m.efficiency_vs_pt, pt, ok);
            bins::fill(&mut m.efficiency_vs_eta, eta, ok);
        }
    }
    m.update_fractions();
    Ok(m)
}

/// The metrics of one event read with its truth and particles; `track_ids` holds one id per
/// hit of `event.hits` (e.g. from [`event_track_ids`](crate::event_track_ids) or
/// [`Submission::track_ids_for`](crate::Submission::track_ids_for)).
///
/// # Panics
/// If `track_ids.len()` differs from the number of hits, or the truth is not aligned with
/// the hits.
#[track_caller]
pub fn evaluate_event(event: &Event, track_ids: &[u32], config: &MetricsConfig) -> Result<TrackMetrics> {
    let truth = event.truth.as_ref().ok_or(Error::MissingPart { event_id: event.event_id, part: "truth" })?;
    let particles =
        event.particles.as_ref().ok_or(Error::MissingPart { event_id: event.event_id, part: "particles" })?;
    assert_eq!(truth.len(), event.hits.len(), "truth aligned with the hits");
    let kinematics = ParticleKinematics::from_particles(particles);
    let t = EventTruth { particle_id: &truth.particle_id, weight: &truth.weight, kinematics: &kinematics };
    evaluate(&t, track_ids, config)
}

#[cfg(test)]
mod tests {
    use trackgnn_trackml::event::{ParticleRecord, Truth};
    use trackgnn_trackml::{Hits, ModuleId};

    use super::*;
    use crate::submission::singleton_track_ids;

    /// A hand-made event: hits listed particle by particle.
    #[derive(Default)]
    struct Ev {
        pid: Vec<ParticleId>,
        w: Vec<f32>,
        kin: ParticleKinematics,
    }

    impl Ev {
        /// Adds particle `id` with `nhits` hits of weight `w` each.
        fn particle(mut self, id: u64, pt: f64, eta: f64, nhits: usize, w: f32) -> Self {
            self.kin.insert(ParticleId(id), pt, eta);
            self.pid.extend(std::iter::repeat_n(ParticleId(id), nhits));
            self.w.extend(std::iter::repeat_n(w, nhits));
            self
        }
        fn noise(mut self, nhits: usize) -> Self {
            self.pid.extend(std::iter::repeat_n(ParticleId::NOISE, nhits));
            self.w.extend(std::iter::repeat_n(0.0, nhits));
            self
        }
        fn eval(&self, tracks: &[u32]) -> TrackMetrics {
            let t = EventTruth { particle_id: &self.pid, weight: &self.w, kinematics: &self.kin };
            evaluate(&t, tracks, &MetricsConfig::for_min_hits(3, None)).unwrap()
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    fn total(bins: &[EfficiencyBin]) -> (u64, u64) {
        bins.iter().fold((0, 0), |(n, k), b| (n + b.2, k + b.3))
    }

    #[test]
    fn particles_shorter_than_a_candidate_are_not_counted() {
        // Particle 1 (4 hits) can make a candidate at min-hits 3, never at 5: a builder at 5
        // leaves its hits in no track.
        let ev = Ev::default().particle(1, 2.0, 0.3, 4, 0.1).particle(2, 3.0, -0.5, 5, 0.1);
        let eval = |tracks: &[u32], cfg: &MetricsConfig| {
            let t = EventTruth { particle_id: &ev.pid, weight: &ev.w, kinematics: &ev.kin };
            evaluate(&t, tracks, cfg).unwrap()
        };
        let at5 = [0, 0, 0, 0, 1, 1, 1, 1, 1];
        let m = eval(&at5, &MetricsConfig::for_min_hits(5, None));
        assert_eq!((m.n_target_particles, m.n_target_matched, m.efficiency_primary), (1, 1, 1.0));
        assert_eq!(m.n_reconstructable_particles, 1);
        // Overridden to 3, the 4-hit particle is a target again, and missed.
        let m = eval(&at5, &MetricsConfig::for_min_hits(5, Some(3)));
        assert_eq!((m.n_target_particles, m.n_target_matched, m.efficiency), (2, 1, 0.5));
        // At min-hits 3 it is a target, and the builder can find it.
        let at3 = [1, 1, 1, 1, 2, 2, 2, 2, 2];
        let cfg = MetricsConfig::for_min_hits(3, None);
        assert_eq!((cfg.min_particle_hits, cfg.min_track_hits), (3, 3));
        let m = eval(&at3, &cfg);
        assert_eq!((m.n_target_particles, m.n_target_matched, m.efficiency_primary), (2, 2, 1.0));
        // A candidate of 4 hits is no candidate at min-hits 5.
        assert_eq!((eval(&at3, &MetricsConfig::for_min_hits(5, None)).n_candidates), 1);
    }

    #[test]
    fn perfect_reconstruction() {
        let w = 1.0 / 12.0;
        let ev = Ev::default()
            .particle(1, 2.0, 0.3, 4, w)
            .particle(2, 10.0, -1.2, 5, w)
            .particle(3, 0.5, 2.1, 3, w)
            .particle(4, 3.0, 0.0, 2, 0.0) // too few hits to be reconstructable
            .noise(3);
        let tracks = [1, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 4, 4, 0, 0, 0];
        let m = ev.eval(&tracks);
        assert_eq!((m.n_target_particles, m.n_target_matched, m.efficiency), (2, 2, 1.0));
        assert_eq!((m.n_reconstructable_particles, m.n_reconstructable_matched, m.efficiency_all), (3, 3, 1.0));
        assert_eq!((m.n_candidates, m.n_fake_candidates, m.fake_rate), (3, 0, 0.0));
        assert_eq!((m.n_matched_candidates, m.n_matched_particles, m.duplicate_rate), (3, 3, 0.0));
        assert!(close(m.trackml_score, 1.0), "{}", m.trackml_score);
        assert_eq!(total(&m.efficiency_vs_pt), (2, 2));
        assert_eq!(total(&m.efficiency_all_vs_pt), (3, 3));
        assert_eq!(total(&m.efficiency_vs_eta), (2, 2));
        // pT 2 GeV is in the bin [1.585, 2.512), 10 GeV at the edge of [6.31, 10) / [10, 15.85).
        let at = |v: f64| m.efficiency_vs_pt.iter().position(|b| b.0 <= v && v < b.1).unwrap();
        assert_eq!(m.efficiency_vs_pt[at(2.0)].2, 1);
        assert_eq!(m.efficiency_vs_pt[at(10.0)].2, 1);
        // η −1.2 lies in [−1.5, −1.0).
        assert_eq!(m.efficiency_vs_eta.iter().find(|b| b.0 == -1.5).unwrap().2, 1);
    }

    #[test]
    fn split_tracks_are_duplicates_and_the_smaller_half_is_no_match() {
        let ev = Ev::default().particle(1, 2.0, 0.0, 7, 0.1).particle(2, 2.0, 0.0, 6, 0.05);
        // Particle 1: 4 + 3 hits; particle 2: 3 + 3 hits.
        let tracks = [1, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4];
        let m = ev.eval(&tracks);
        assert_eq!((m.n_candidates, m.n_fake_candidates), (4, 0), "every piece is pure");
        assert_eq!((m.n_matched_candidates, m.n_matched_particles), (4, 2));
        assert!(close(m.duplicate_rate, 0.5));
        assert_eq!((m.n_target_particles, m.n_target_matched), (2, 1), "4 of 7 hits match, 3 of 6 do not");
        assert!(close(m.efficiency, 0.5));
        // Score: only particle 1's 4-hit piece counts: 0.4 of 1.0.
        assert!(close(m.trackml_score, 0.4), "{}", m.trackml_score);
    }

    #[test]
    fn merged_tracks_fail_the_majority_rule() {
        let ev = Ev::default()
            .particle(1, 2.0, 0.0, 3, 0.1)
            .particle(2, 2.0, 0.0, 3, 0.1)
            .particle(3, 2.0, 0.0, 4, 0.05)
            .particle(4, 2.0, 0.0, 3, 0.0);
        // 1 and 2 merged 3 + 3 (a 50 % track: fake); 3 and 4 merged 4 + 3 (pure for 3).
        let tracks = [1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2];
        let m = ev.eval(&tracks);
        assert_eq!((m.n_candidates, m.n_fake_candidates), (2, 1));
        assert!(close(m.fake_rate, 0.5));
        assert_eq!((m.n_target_particles, m.n_target_matched), (4, 1));
        assert_eq!((m.n_matched_candidates, m.n_matched_particles, m.duplicate_rate), (1, 1, 0.0));
        assert!(close(m.trackml_score, 0.2 / 0.8), "{}", m.trackml_score);
    }

    #[test]
    fn noise_only_candidates_are_fakes() {
        let ev = Ev::default().particle(1, 5.0, 0.0, 3, 1.0 / 3.0).noise(4);
        let m = ev.eval(&[1, 1, 1, 2, 2, 2, 0]);
        assert_eq!((m.n_candidates, m.n_fake_candidates, m.fake_rate), (2, 1, 0.5));
        assert_eq!(m.n_target_matched, 1);
        assert!(close(m.trackml_score, 1.0));
        // Noise holding the majority of a track with particle hits: still a fake.
        let m = ev.eval(&[1, 1, 2, 1, 1, 0, 0]);
        assert_eq!((m.n_candidates, m.n_fake_candidates, m.n_target_matched), (1, 1, 0));
    }

    #[test]
    fn particles_below_the_pt_cut_are_not_targets() {
        let ev = Ev::default().particle(1, 0.9, 0.0, 5, 0.1).particle(2, 1.0, 0.0, 5, 0.1);
        let m = ev.eval(&[1, 1, 1, 1, 1, 0, 0, 0, 0, 0]);
        assert_eq!((m.n_target_particles, m.n_target_matched, m.efficiency), (1, 0, 0.0), "pT = 1 is a target");
        assert_eq!((m.n_reconstructable_particles, m.n_reconstructable_matched), (2, 1));
        assert!(close(m.efficiency_all, 0.5));
        assert_eq!(total(&m.efficiency_vs_pt), (1, 0));
        assert_eq!(total(&m.efficiency_all_vs_pt), (2, 1));
        let m = ev.eval(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!((m.n_candidates, m.fake_rate, m.efficiency), (0, 0.0, 0.0), "nothing to divide by");
    }

    #[test]
    fn secondaries_count_as_targets_but_not_as_prompt_targets() {
        let mut ev =
            Ev::default().particle(1, 2.0, 0.0, 4, 0.1).particle(2, 3.0, 0.0, 4, 0.1).particle(3, 0.5, 0.0, 4, 0.1);
        ev.kin.insert_at(ParticleId(2), 3.0, 0.0, 70.0); // produced in a pixel layer
        ev.kin.insert_at(ParticleId(3), 0.5, 0.0, 0.5); // prompt, but below the pT cut
        // Particle 1 found, the secondary 2 missed, 3 found.
        let m = ev.eval(&[1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 2, 2]);
        assert_eq!((m.n_target_particles, m.n_target_matched), (2, 1));
        assert_eq!((m.n_prompt_target_particles, m.n_prompt_target_matched, m.efficiency_prompt), (1, 1, 1.0));
        assert_eq!((m.efficiency_primary, m.efficiency), (1.0, 0.5), "the headline counts primaries only");
        assert_eq!((total(&m.efficiency_primary_vs_pt), total(&m.efficiency_primary_vs_eta)), ((1, 1), (1, 1)));
        assert_eq!(total(&m.efficiency_vs_pt), (2, 1));
        // The secondary found instead: both efficiencies change.
        let m = ev.eval(&[0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
        assert_eq!((m.efficiency, m.efficiency_prompt, m.efficiency_primary), (0.5, 0.0, 0.0));
        assert_eq!(total(&m.efficiency_primary_vs_pt), (1, 0));
        // Merged, the two events' primary counts and bins add up.
        let mut both = ev.eval(&[1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 2, 2]);
        both.merge(&m).unwrap();
        assert_eq!((both.efficiency_primary, total(&both.efficiency_primary_vs_eta)), (0.5, (2, 1)));
        // A wider prompt radius takes the secondary in.
        let cfg = MetricsConfig { prompt_max_vertex_r: 100.0, ..MetricsConfig::for_min_hits(3, None) };
        let t = EventTruth { particle_id: &ev.pid, weight: &ev.w, kinematics: &ev.kin };
        let m = evaluate(&t, &[0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2], &cfg).unwrap();
        assert_eq!((m.n_prompt_target_particles, m.n_prompt_target_matched), (2, 1));
        let bad = MetricsConfig { prompt_max_vertex_r: f64::NAN, ..MetricsConfig::default() };
        assert!(evaluate(&t, &[0; 12], &bad).unwrap_err().to_string().contains("prompt_max_vertex_r"));
    }

    #[test]
    fn half_right_reconstruction_scores_the_hand_computed_weights() {
        // Weights: particle 1 (6 hits) 0.1 each, particle 2 (4 hits) 0.1 each.
        let ev = Ev::default().particle(1, 2.0, 0.0, 6, 0.1).particle(2, 2.0, 0.0, 4, 0.1);
        // Track 1: 5 hits of particle 1 and 1 of particle 2 (5/6 of the track, 5/6 of the
        // particle: counts 0.5); particle 1's 6th hit unassigned. Track 2: particle 2's other
        // 3 hits (3/3 of the track, 3/4 of the particle: counts 0.3).
        let tracks = [1, 1, 1, 1, 1, 0, 1, 2, 2, 2];
        let m = ev.eval(&tracks);
        assert!(close(m.trackml_score, 0.8), "{}", m.trackml_score);
        let singles = singleton_track_ids(&tracks).unwrap();
        assert!(close(trackml_score(&ev.pid, &ev.w, &singles), m.trackml_score));
        assert_eq!((m.n_target_matched, m.n_candidates), (2, 2));
    }

    #[test]
    fn unassigned_hits_form_no_candidate_but_singletons_score() {
        // A 1-hit particle alone: a singleton track holding all of it (the official scorer
        // counts it); TrackML gives such hits weight 0, here 0.4 to see it.
        let ev = Ev::default().particle(1, 2.0, 0.0, 1, 0.4).particle(2, 2.0, 0.0, 3, 0.2);
        let m = ev.eval(&[0, 0, 0, 0]);
        assert_eq!((m.n_candidates, m.n_reconstructable_particles, m.n_reconstructable_matched), (0, 1, 0));
        assert!(close(m.trackml_score, 0.4));
        // With 0 as an ordinary track id the four hits are one track, which particle 2
        // dominates (3/4 of the track, all of the particle).
        assert!(close(trackml_score(&ev.pid, &ev.w, &[0, 0, 0, 0]), 0.6));
    }

    #[test]
    fn particles_without_kinematics_are_reconstructable_but_not_targets() {
        let mut ev = Ev::default().particle(1, 2.0, 0.0, 3, 0.5).particle(2, 2.0, 0.0, 3, 0.5);
        ev.kin = ParticleKinematics::new();
        ev.kin.insert(ParticleId(1), 2.0, 0.0);
        let m = ev.eval(&[1, 1, 1, 2, 2, 2]);
        assert_eq!((m.n_target_particles, m.n_reconstructable_particles), (1, 2));
        assert_eq!(total(&m.efficiency_all_vs_eta), (1, 1));
    }

    #[test]
    fn metrics_merge_over_events() {
        let a = Ev::default().particle(1, 2.0, 0.0, 4, 0.25).eval(&[1, 1, 1, 1]);
        // Particle 1 found, particle 2 split 3 + 3 (two pure candidates, no double majority).
        let b = Ev::default()
            .particle(1, 2.0, 0.0, 3, 0.2)
            .particle(2, 2.0, 0.0, 6, 0.4 / 6.0)
            .eval(&[1, 1, 1, 2, 2, 2, 3, 3, 3]);
        assert!(close(a.trackml_score, 1.0) && close(b.trackml_score, 0.6 / 1.0));
        let mut m = TrackMetrics::default();
        m.merge(&a).unwrap();
        assert_eq!(m, a, "merging into an empty value copies");
        m.merge(&b).unwrap();
        m.merge(&TrackMetrics::default()).unwrap();
        assert_eq!(m.n_events, 2);
        assert_eq!((m.n_target_particles, m.n_target_matched), (3, 2));
        assert!(close(m.efficiency, 2.0 / 3.0));
        assert_eq!((m.n_candidates, m.n_matched_candidates, m.n_matched_particles), (4, 4, 3));
        assert!(close(m.duplicate_rate, 0.25) && close(b.duplicate_rate, 1.0 / 3.0));
        assert!(close(m.trackml_score, (1.0 + 0.6) / 2.0));
        assert_eq!(total(&m.efficiency_vs_pt), (3, 2));

        let mut other = b.clone();
        other.efficiency_vs_eta.pop();
        assert!(matches!(m.merge(&other), Err(Error::BinMismatch { histogram: "efficiency_vs_eta" })));
        assert_eq!(m.n_events, 2, "a failed merge changes nothing");
    }

    #[test]
    fn metrics_serialise_in_snake_case_json() {
        let m = Ev::default().particle(1, 2.0, 0.0, 4, 0.25).eval(&[1, 1, 1, 1]);
        let v: serde_json::Value = serde_json::to_value(&m).unwrap();
        for key in [
            "efficiency_primary",
            "efficiency",
            "efficiency_prompt",
            "fake_rate",
            "duplicate_rate",
            "trackml_score",
            "efficiency_primary_vs_pt",
            "efficiency_vs_pt",
            "n_events",
        ] {
            assert!(v.get(key).is_some(), "{key}");
        }
        // JSON written before the primary keys existed still reads.
        let mut old = v.clone();
        for key in ["efficiency_primary", "efficiency_primary_vs_pt", "efficiency_primary_vs_eta"] {
            old.as_object_mut().unwrap().remove(key);
        }
        let old: TrackMetrics = serde_json::from_value(old).unwrap();
        assert_eq!((old.efficiency_primary, old.efficiency_primary_vs_pt.len()), (0.0, 0));
        assert_eq!(v["efficiency_vs_eta"][8], serde_json::json!([0.0, 0.5, 1, 1]));
        let back: TrackMetrics = serde_json::from_value(v).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn bad_config_is_an_error() {
        let ev = Ev::default().particle(1, 2.0, 0.0, 4, 0.25);
        let t = EventTruth { particle_id: &ev.pid, weight: &ev.w, kinematics: &ev.kin };
        let cfg = MetricsConfig { eta_edges: vec![1.0, 0.0], ..Default::default() };
        assert!(matches!(evaluate(&t, &[1; 4], &cfg), Err(Error::Config { field: "eta_edges", .. })));
        let cfg = MetricsConfig { min_track_hits: 0, ..Default::default() };
        assert!(matches!(evaluate(&t, &[1; 4], &cfg), Err(Error::Config { field: "min_track_hits", .. })));
        // Configs read from JSON/TOML take the reference defaults for missing fields.
        let cfg: MetricsConfig = serde_json::from_str(r#"{"target_pt_min": 0.5}"#).unwrap();
        assert_eq!(cfg, MetricsConfig { target_pt_min: 0.5, ..Default::default() });
        assert_eq!((cfg.pt_edges.len(), cfg.pt_edges_all.len(), cfg.eta_edges.len()), (11, 16, 17));
        assert!(serde_json::from_str::<MetricsConfig>(r#"{"pt_min": 0.5}"#).is_err());
    }

    #[test]
    fn events_are_evaluated_from_their_truth_and_particles() {
        let mut ev = Event { event_id: 7, ..Default::default() };
        let mut truth = Truth::default();
        let mut particles = Particles::default();
        let mut hits = Hits::default();
        for (p, pt) in [(11u64, 3.0f32), (12, 0.4)] {
            particles.push(ParticleRecord {
                particle_id: ParticleId(p),
                particle_type: 211,
                vertex: [0.0; 3],
                momentum: [pt, 0.0, 0.0],
                q: 1,
                nhits: 3,
            });
            for k in 0..3 {
                hits.push(hits.len() as u64 + 1, [k as f32, 0.0, 0.0], ModuleId::new(8, 2, 1));
                truth.push(ParticleId(p), [0.0; 3], [0.0; 3], 1.0 / 6.0);
            }
        }
        ev.hits = hits;
        ev.truth = Some(truth);
        assert!(matches!(
            evaluate_event(&ev, &[1; 6], &MetricsConfig::default()),
            Err(Error::MissingPart { event_id: 7, part: "particles" })
        ));
        ev.particles = Some(particles);
        let m = evaluate_event(&ev, &[1, 1, 1, 2, 2, 2], &MetricsConfig::for_min_hits(3, None)).unwrap();
        assert_eq!((m.n_target_particles, m.n_target_matched, m.n_reconstructable_particles), (1, 1, 2));
        assert!(close(m.trackml_score, 1.0));
    }
}
