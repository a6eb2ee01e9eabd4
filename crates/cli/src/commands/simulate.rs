//! `trackgnn simulate`: generate events in parallel and write them as TrackML CSV
//! ([`trackgnn_simulate::dataset`] does; this command parses, records the settings and prints).

use std::fs;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use trackgnn_simulate::dataset::{DataSetFigures, DataSetReport, RunRecord, write_events};
use trackgnn_simulate::single::SingleArgs;
use trackgnn_simulate::{Generator, SimOverrides};
use trackgnn_trackml::csv::write_detectors;

use crate::progress;
use crate::util::{load_detector, print_report, thread_pool};

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
    pub single: SingleArgs,
    #[command(flatten)]
    pub threads: crate::cli::ThreadsArg,
    #[command(flatten)]
    pub json: crate::cli::JsonArg,
    #[command(flatten)]
    pub detector: crate::cli::DetectorArg,
}

pub fn run(a: SimulateArgs) -> Result<ExitCode> {
    let cfg = SimOverrides { pileup: a.pileup, single: a.single.settings() }.resolve(a.config.as_deref())?;
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
        detector: RunRecord::detector_name(a.detector.detector.as_deref()),
        config: &cfg,
    };
    record.write(&a.out)?;
    let report = DataSetReport {
        out: &a.out,
        events: ids.len(),
        seed: a.seed,
        threads,
        gzip: a.gzip,
        figures,
        wall_seconds: wall_s,
    };
    print_report(&report, a.json.json)?;
    Ok(ExitCode::SUCCESS)
}
