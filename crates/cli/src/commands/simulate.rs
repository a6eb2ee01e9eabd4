//! `trackgnn simulate`: generate events in parallel and write them as TrackML CSV.

use std::fs;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use rayon::prelude::*;
use serde_json::json;
use trackgnn_simulate::{Generator, SimConfig};
use trackgnn_trackml::csv::{write_detectors, write_event};

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
    let results: Vec<Result<EventFigures>> = pool.install(|| {
        ids.par_iter()
            .map(|&id| {
                let r = one_event(&generator, a.seed, id, &a.out, a.gzip);
                pb.inc(1);
                r
            })
            .collect()
    });
    pb.finish_and_clear();
    let figures: Vec<EventFigures> = results.into_iter().collect::<Result<_>>()?;
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
    report(&a, &figures, wall_s, threads);
    Ok(ExitCode::SUCCESS)
}

/// What one event cost and contains.
struct EventFigures {
    hits: usize,
    particles: usize,
    particles_with_hits: usize,
    generate_s: f64,
    write_s: f64,
    bytes: u64,
}

fn one_event(g: &Generator, seed: u64, id: u64, out: &Path, gzip: bool) -> Result<EventFigures> {
    let t = Instant::now();
    let (event, _) = g.event(seed, id);
    let generate_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let stats = write_event(out, &event, gzip)?;
    let write_s = t.elapsed().as_secs_f64();
    let parts = event.particles.as_ref().expect("generated events have particles");
    Ok(EventFigures {
        hits: event.hits.len(),
        particles: parts.len(),
        particles_with_hits: parts.nhits.iter().filter(|&&n| n > 0).count(),
        generate_s,
        write_s,
        bytes: stats.bytes_written,
    })
}

fn report(a: &SimulateArgs, f: &[EventFigures], wall_s: f64, threads: usize) {
    let n = f.len() as f64;
    let mean = |g: fn(&EventFigures) -> f64| f.iter().map(g).sum::<f64>() / n;
    let hits = mean(|e| e.hits as f64);
    let parts = mean(|e| e.particles_with_hits as f64);
    let gen_s = mean(|e| e.generate_s);
    let write_s = mean(|e| e.write_s);
    let bytes: u64 = f.iter().map(|e| e.bytes).sum();
    if a.json.json {
        print_json(&json!({
            "out": a.out, "events": f.len(), "seed": a.seed, "threads": threads, "gzip": a.gzip,
            "hits_per_event": hits, "particles_per_event": mean(|e| e.particles as f64),
            "particles_with_hits_per_event": parts,
            "generate_seconds_per_event": gen_s, "write_seconds_per_event": write_s,
            "bytes_written": bytes, "wall_seconds": wall_s,
        }));
    } else {
        println!(
            "{} events in {} ({} threads, {:.2} s wall): {:.0} hits and {:.0} particles with hits per event",
            f.len(),
            a.out.display(),
            threads,
            wall_s,
            hits,
            parts
        );
        println!(
            "per event: generation {:.3} s, writing{} {:.3} s; {:.1} MB written",
            gen_s,
            if a.gzip { " (gzip)" } else { "" },
            write_s,
            bytes as f64 / 1e6
        );
    }
}
