//! The report of a directory's CKF reconstruction: its settings, seconds per stage and per
//! event, and the track metrics, as text or one JSON object.

use std::fmt;
use std::path::Path;

use serde::Serialize;

use super::config::CkfConfig;
use super::reconstruct::{CkfDirReco, CkfEventSummary, CkfSeconds};
use crate::metrics::{MetricsConfig, TrackMetrics};

/// The efficiency over reconstructable particles of pT in [`LOW_PT`] (the pT bins of
/// `efficiency_all_vs_pt` that lie in it), with the counts.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RangeEfficiency {
    /// Lower end of the pT range \[GeV\].
    pub pt_min: f64,
    /// Upper end \[GeV\].
    pub pt_max: f64,
    /// Reconstructable particles in it.
    pub particles: u64,
    /// Of them matched.
    pub matched: u64,
    /// matched / particles (0 for none).
    pub efficiency: f64,
}

/// The pT range \[GeV\] whose efficiency the report gives beside the targets': below the
/// targets' 1 GeV, above the seeds' default 0.5 GeV.
pub const LOW_PT: [f64; 2] = [0.5, 1.0];

impl RangeEfficiency {
    /// The efficiency of `m`'s reconstructable particles in the bins of `efficiency_all_vs_pt`
    /// within `[lo, hi]`.
    pub fn of(m: &TrackMetrics, lo: f64, hi: f64) -> RangeEfficiency {
        let (mut particles, mut matched) = (0, 0);
        for &(b_lo, b_hi, n, k) in &m.efficiency_all_vs_pt {
            if b_lo >= lo - 1e-9 && b_hi <= hi + 1e-9 {
                particles += n;
                matched += k;
            }
        }
        let efficiency = if particles == 0 { 0.0 } else { matched as f64 / particles as f64 };
        RangeEfficiency { pt_min: lo, pt_max: hi, particles, matched, efficiency }
    }
}

/// pT bin edges \[GeV\] of the efficiency of all particles that hold [`LOW_PT`]'s ends.
pub fn pt_edges_all() -> Vec<f64> {
    vec![0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0]
}

/// The report of [`Ckf::reconstruct_events`](super::Ckf::reconstruct_events).
#[derive(Clone, Debug, Serialize)]
pub struct CkfReport<'a> {
    /// Where the submissions went.
    pub out: &'a Path,
    /// `ckf`.
    pub method: &'static str,
    /// The settings.
    pub config: CkfConfig,
    /// Events reconstructed at a time.
    pub threads: usize,
    /// Wall-clock seconds of the whole reconstruction.
    pub wall_seconds: f64,
    /// wall_seconds / events: the throughput with `threads` workers.
    pub seconds_per_event: f64,
    /// The mean per event of each stage's seconds (on one worker).
    pub mean_stage_seconds: CkfSeconds,
    /// The mean per event of reading and writing.
    pub mean_io_seconds: f64,
    /// Each event.
    pub events: &'a [CkfEventSummary],
    /// The metrics (none without truth).
    pub metrics: &'a Option<TrackMetrics>,
    /// The efficiency for pT in [`LOW_PT`].
    pub efficiency_low_pt: Option<RangeEfficiency>,
    /// Plots written.
    pub plots: Vec<String>,
    /// The event display's figures and Phoenix file (`--display`; empty without).
    pub display: Vec<String>,
    #[serde(skip)]
    metrics_config: MetricsConfig,
}

impl<'a> CkfReport<'a> {
    /// The report of `done`, reconstructed with `config` into `out` and scored with `metrics_config`.
    pub fn new(out: &'a Path, config: CkfConfig, metrics_config: MetricsConfig, done: &'a CkfDirReco) -> Self {
        let n = done.events.len().max(1) as f64;
        let mean = |f: &dyn Fn(&CkfEventSummary) -> f64| done.events.iter().map(f).sum::<f64>() / n;
        let mean_stage_seconds = CkfSeconds {
            hits_seconds: mean(&|e| e.stages.hits_seconds),
            seeding_seconds: mean(&|e| e.stages.seeding_seconds),
            finding_seconds: mean(&|e| e.stages.finding_seconds),
            ambiguity_seconds: mean(&|e| e.stages.ambiguity_seconds),
            fit_seconds: mean(&|e| e.stages.fit_seconds),
        };
        CkfReport {
            out,
            method: "ckf",
            config,
            threads: done.threads,
            wall_seconds: done.wall_seconds,
            seconds_per_event: done.wall_seconds / n,
            mean_stage_seconds,
            mean_io_seconds: mean(&|e| e.read_seconds + e.write_seconds),
            events: &done.events,
            metrics: &done.metrics,
            efficiency_low_pt: done.metrics.as_ref().map(|m| RangeEfficiency::of(m, LOW_PT[0], LOW_PT[1])),
            plots: done.plots.iter().map(|p| p.display().to_string()).collect(),
            display: done.display.iter().map(|p| p.display().to_string()).collect(),
            metrics_config,
        }
    }
}

impl fmt::Display for CkfReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.events.len().max(1) as f64;
        let mean = |g: fn(&CkfEventSummary) -> usize| self.events.iter().map(|e| g(e) as f64).sum::<f64>() / n;
        writeln!(
            f,
            "{} events reconstructed into {} by the combinatorial Kalman filter (seeds of pT >= {} GeV, tracks of >= {} hits), {} at a time",
            self.events.len(),
            self.out.display(),
            self.config.seeds.pt_min,
            self.config.min_hits,
            self.threads
        )?;
        let t = &self.mean_stage_seconds;
        writeln!(
            f,
            "per event: {:.0} hits, {:.0} seeds ({:.0} followed), {:.0} candidates, {:.0} tracks; seconds: hits {:.3}, seeding {:.3}, CKF {:.3}, ambiguity {:.3}, fit {:.3}, read+write {:.3}",
            mean(|e| e.hits),
            mean(|e| e.seeds),
            mean(|e| e.seeds_followed),
            mean(|e| e.candidates),
            mean(|e| e.tracks),
            t.hits_seconds,
            t.seeding_seconds,
            t.finding_seconds,
            t.ambiguity_seconds,
            t.fit_seconds,
            self.mean_io_seconds
        )?;
        writeln!(
            f,
            "wall time {:.2} s: {:.3} s per event with {} worker(s)",
            self.wall_seconds, self.seconds_per_event, self.threads
        )?;
        if self.config.fit {
            writeln!(
                f,
                "track fit: {:.0} tracks fitted per event, parameters in eventNNNNNNNNN-parameters.csv",
                mean(|e| e.fitted_tracks)
            )?;
        }
        if let Some(m) = self.metrics {
            let cfg = &self.metrics_config;
            writeln!(
                f,
                "track efficiency {:.4} over primary targets (pT >= {} GeV, >= {} hits, produced within {} mm of the beam line; double majority), {:.4} over all targets, {:.4} over all reconstructable particles; fake rate {:.4}; duplicate rate {:.4}; TrackML score {:.4}",
                m.efficiency_primary,
                cfg.target_pt_min,
                cfg.min_particle_hits,
                cfg.prompt_max_vertex_r,
                m.efficiency,
                m.efficiency_all,
                m.fake_rate,
                m.duplicate_rate,
                m.trackml_score
            )?;
            if let Some(e) = &self.efficiency_low_pt {
                writeln!(
                    f,
                    "efficiency for {} < pT < {} GeV (all reconstructable particles): {:.4} ({} of {})",
                    e.pt_min, e.pt_max, e.efficiency, e.matched, e.particles
                )?;
            }
            for p in &self.plots {
                writeln!(f, "plot: {p}")?;
            }
        }
        for p in &self.display {
            writeln!(f, "display: {p}")?;
        }
        Ok(())
    }
}
