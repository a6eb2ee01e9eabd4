//! `trackgnn simulate`: generate events in parallel and write them as TrackML CSV
//! ([`trackgnn_simulate::dataset`] does; this command parses, records the settings and prints).

use std::fs;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::json;
use trackgnn_simulate::dataset::{DataSetFigures, write_events};
use trackgnn_simulate::{Generator, SimConfig};
use trackgnn_trackml::csv::write_detectors;

use crate::progress;
use crate::util::{load_detector, print_json, thread_pool, write_atomic};

/// `trackgnn simulate`.
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// Number of events.
    #[arg(long, default_value_t = 10)]
    pub events: u64,
    /// Mean number of pile-up interactions per event (TrackML: 200).
    #[arg(long)]
    pub pileup: Option<f64>,
    /// Seed of the data set: same seed, same bytes, whatever the thread count.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Number of the first event (events are numbered consecutively from it).
    #[arg(long, default_value_t = 1)]
    pub first_event: u64,
    /// Output directory (created if needed).
    #[arg(long, value_name = "DIR")]
    pub out: std::path::PathBuf,
    /// Write `.csv.gz` files.
    #[arg(long)]
    pub gzip: bool,
    /// Generator settings (TOML, the keys of `SimConfig`); flags win over the file.
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub threads: crate::cli::ThreadsArg,
    #[command(flatten)]
    pub json: crate::cli::JsonArg,
    #[command(flatten)]
    pub detector: crate::cli::DetectorArg,
}

/// The settings of a run, written to `simulation.toml` in the output directory.
#[derive(serde::Serialize)]
pub struct RunRecord<'a> {
    /// The seed of the data set.
    pub seed: u64,
    /// The first event's number.
    pub first_event: u64,
    /// The number of events.
    pub events: u64,
    /// Whether the files are gzipped.
    pub gzip: bool,
    /// The geometry: a detectors.csv, or "built-in TrackML".
    pub detector: String,
    /// The generator settings.
    pub config: &'a SimConfig,
}

impl RunRecord<'_> {
    /// Writes the record into `out` (atomically).
    pub fn write(&self, out: &Path) -> Result<()> {
        write_atomic(&out.join("simulation.toml"), toml::to_string(self)?.as_bytes())
    }
}

/// Reads the generator settings: the TOML file if given, then the flags.
fn resolve_config(a: &SimulateArgs) -> Result<SimConfig> {
    let mut cfg = match &a.config {
        Some(p) => {
            let text = fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            toml::from_str(&text).with_context(|| format!("{}: invalid simulation config", p.display()))?
        }
        None => SimConfig::default(),
    };
    if let Some(mu) = a.pileup {
        cfg.pileup = mu;
    }
    cfg.validate()?;
    Ok(cfg)
}

pub fn run(a: SimulateArgs) -> Result<ExitCode> {
    let cfg = resolve_config(&a)?;
    anyhow::ensure!(a.events > 0, "--events must be at least 1");
    let det = load_detector(a.detector.detector.as_deref())?;
    fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    write_detectors(&a.out.join("detectors.csv"), &det.modules)?;
    let generator = Generator::new(det, cfg.clone());
    let pool = thread_pool(a.threads.threads)?;
    let threads = pool.current_num_threads();
    let pb = progress::bar(a.events, "simulate");
    let wall = Instant::now();
    let ids: Vec<u64> = (a.first_event..a.first_event + a.events).collect();
    let events = pool.install(|| write_events(&generator, a.seed, &ids, &a.out, a.gzip, &|| pb.inc(1)));
    pb.finish_and_clear();
    let figures = DataSetFigures::of(&events?);
    let wall_s = wall.elapsed().as_secs_f64();
    let record = RunRecord {
        seed: a.seed,
        first_event: a.first_event,
        events: a.events,
        gzip: a.gzip,
        detector: a.detector.detector.as_ref().map_or("built-in TrackML".into(), |p| p.display().to_string()),
        config: &cfg,
    };
    record.write(&a.out)?;
    report(&a, &figures, ids.len(), wall_s, threads);
    Ok(ExitCode::SUCCESS)
}

fn report(a: &SimulateArgs, f: &DataSetFigures, events: usize, wall_s: f64, threads: usize) {
    if a.json.json {
        print_json(&json!({
            "out": a.out, "events": events, "seed": a.seed, "threads": threads, "gzip": a.gzip,
            "hits_per_event": f.hits_per_event, "particles_per_event": f.particles_per_event,
            "particles_with_hits_per_event": f.particles_with_hits_per_event,
            "generate_seconds_per_event": f.generate_seconds_per_event,
            "write_seconds_per_event": f.write_seconds_per_event,
            "bytes_written": f.bytes_written, "wall_seconds": wall_s,
        }));
    } else {
        println!(
            "{} events in {} ({} threads, {:.2} s wall): {:.0} hits and {:.0} particles with hits per event",
            events,
            a.out.display(),
            threads,
            wall_s,
            f.hits_per_event,
            f.particles_with_hits_per_event
        );
        println!(
            "per event: generation {:.3} s, writing{} {:.3} s; {:.1} MB written",
            f.generate_seconds_per_event,
            if a.gzip { " (gzip)" } else { "" },
            f.write_seconds_per_event,
            f.bytes_written as f64 / 1e6
        );
    }
}
