//! `trackgnn demo`: the whole pipeline on a small generated data set, in minutes on a laptop:
//! simulate → build graphs → train → evaluate → reconstruct held-out events → report.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use trackgnn_graph::dataset::{self, BuildSummary};
use trackgnn_graph::{GraphMethod, GraphRecipe, Stages};
use trackgnn_reco::inference::{RecoReport, Reconstructor, Scoring};
use trackgnn_reco::{TrackBuilderConfig, TrackMethod};
use trackgnn_simulate::dataset::{RunRecord, write_events};
use trackgnn_simulate::{Generator, SimConfig};
use trackgnn_trackml::Detector;
use trackgnn_trackml::csv::{discover_events, write_detectors};
use trackgnn_train::TrainConfig;
use trackgnn_train::config::TrainOverrides;
use trackgnn_train::dist::SingleProcess;
use trackgnn_train::run_dir::{RunDir, Weights};

use crate::progress;
use crate::util::thread_pool;
use clap::Args;
use trackgnn_train::evaluation::SplitPart;

/// `trackgnn demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Directory for everything the demo makes.
    #[arg(long, value_name = "DIR", default_value = "trackgnn-demo")]
    pub out: PathBuf,
    /// A reduced configuration in seconds (12 events at pile-up 4, one epoch of a small model,
    /// 2 held-out events): checks the pipeline end to end, learns little.
    #[arg(long)]
    pub quick: bool,
    /// Where the model trains and scores: cpu, or cuda:N in a build with the GPU backend.
    #[arg(long, default_value = "cpu", value_name = "cpu|cuda:N")]
    pub device: trackgnn_engine::Device,
    #[command(flatten)]
    pub threads: crate::cli::ThreadsArg,
}

/// The demo's sizes.
struct Sizes {
    train_events: u64,
    heldout_events: u64,
    pileup: f64,
    epochs: usize,
    hidden: usize,
    iterations: usize,
}

/// Small enough for a few minutes on 2 cores, large enough to learn.
const FULL: Sizes = Sizes { train_events: 60, heldout_events: 8, pileup: 10.0, epochs: 12, hidden: 64, iterations: 6 };
/// `--quick`: seconds, for tests (validation needs ≥ 5 events at the 80/10/10 split).
const QUICK: Sizes = Sizes { train_events: 12, heldout_events: 2, pileup: 4.0, epochs: 1, hidden: 16, iterations: 2 };

fn step(n: usize, what: &str, t0: Instant) {
    eprintln!("\n[{n}/6 at {:.0} s] {what}", t0.elapsed().as_secs_f64());
}

pub fn run(a: DemoArgs) -> Result<ExitCode> {
    let dir = &a.out;
    if dir.join("run").exists() {
        bail!("{} already holds a demo; remove it or pass --out with another directory", dir.display());
    }
    std::fs::create_dir_all(dir)?;
    let t0 = Instant::now();
    let p = |s: &str| -> PathBuf { dir.join(s) };
    let pool = thread_pool(a.threads.threads)?;
    let Sizes { train_events, heldout_events, pileup, epochs, hidden, iterations } = if a.quick { QUICK } else { FULL };
    let generator = Generator::new(Detector::trackml(), SimConfig { pileup, ..SimConfig::default() });
    let what =
        format!("simulating {train_events} events at pile-up {pileup} for training and {heldout_events} held-out");
    step(1, &(what + " events"), t0);
    pool.install(|| simulate(&generator, &p("events"), 1, 1..=train_events))?;
    pool.install(|| simulate(&generator, &p("heldout"), 2, 1001..=1000 + heldout_events))?;
    step(2, "building graphs (geometric builder, all hits: no truth cuts)", t0);
    pool.install(|| build_graphs(generator.detector(), &p("events"), &p("graphs")))?;
    step(3, &format!("training an InteractionGNN (hidden {hidden}, {iterations} iterations, {epochs} epochs)"), t0);
    let settings = TrainOverrides {
        epochs: Some(epochs),
        seed: Some(1),
        lr: Some(2e-3),
        hidden: Some(hidden),
        iterations: Some(iterations),
        pos_weight: Some(2.0),
        device: Some(a.device),
        ..Default::default()
    };
    let cfg = settings.apply(TrainConfig::default())?;
    super::train::train(
        cfg,
        &p("graphs"),
        &p("run"),
        false,
        a.threads.threads,
        false,
        Default::default(),
        &mut SingleProcess,
    )?;
    step(4, "edge metrics of the trained model on the test events (docs/metrics.md)", t0);
    let run = RunDir::open(p("run"))?;
    pool.install(|| {
        super::train::eval_run(
            &run,
            &p("graphs"),
            Some(SplitPart::Test),
            &Weights::Best,
            None,
            &Scoring { device: Some(a.device), precision: None },
            false,
        )
    })?;
    let what = format!("reconstructing tracks in the {heldout_events} held-out events (no truth read)");
    step(5, &(what + ", then scoring them"), t0);
    let tracks = TrackBuilderConfig { min_hits: 5, ..TrackBuilderConfig::for_method(TrackMethod::Follow, None) };
    let rec = Reconstructor::open(&run, &Weights::Best, generator.detector().clone())?.with_tracks(tracks)?;
    let rec = rec.with_scoring(&Scoring { device: Some(a.device), precision: None })?;
    let done = pool.install(|| rec.reconstruct_dir(&p("heldout"), &p("tracks"), None, |_| {}))?;
    print!("{}", RecoReport::new(&p("tracks"), &rec, &done));
    step(6, "done", t0);
    report(dir, t0);
    Ok(ExitCode::SUCCESS)
}

/// Generates events `ids` of `seed` into `out` as TrackML CSV, with the detector's geometry.
fn simulate(generator: &Generator, out: &Path, seed: u64, ids: std::ops::RangeInclusive<u64>) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    write_detectors(&out.join("detectors.csv"), &generator.detector().modules)?;
    let n = ids.clone().count();
    let ids: Vec<u64> = ids.collect();
    let figures = write_events(generator, seed, &ids, out, false, &|| {})?;
    let hits: usize = figures.iter().map(|f| f.hits).sum();
    let record = RunRecord {
        seed,
        first_event: ids[0],
        events: n as u64,
        gzip: false,
        detector: RunRecord::detector_name(None),
        config: generator.config(),
    };
    record.write(out)?;
    println!("{n} events in {}: {:.0} hits per event", out.display(), hits as f64 / n as f64);
    Ok(())
}

/// Builds the graph of every event in `input` with the default geometric recipe (no truth
/// cuts) into `out`, with the recipe beside them.
fn build_graphs(det: &Detector, input: &Path, out: &Path) -> Result<()> {
    let recipe = GraphRecipe::new(GraphMethod::Geometric);
    let events = discover_events(input)?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let pb = progress::bar(events.len() as u64, "build graphs");
    let built = dataset::build_graphs(&events, det, &recipe, Stages::default(), out, &|| pb.inc(1))?;
    pb.finish_and_clear();
    let s = BuildSummary::of(&built, false, 0.0);
    println!(
        "{} graphs in {}: per event {:.0} nodes, {:.0} edges; graph efficiency {:.4}, graph purity {:.4}",
        built.len(),
        out.display(),
        s.nodes_per_event,
        s.edges_per_event,
        s.efficiency_total,
        s.purity_total,
    );
    Ok(())
}

fn report(dir: &Path, t0: Instant) {
    eprintln!(
        "the demo took {:.0} s. Look at:\n  {}/run/plots/      loss, edge metrics, gradient norms, ROC\n  {}/tracks/plots/   track efficiency vs pT and eta\n  {}/tracks/         TrackML submission files\n  {}/run/metrics.csv per-epoch metrics; {}/run/config.toml and recipe.toml record every setting",
        t0.elapsed().as_secs_f64(),
        dir.display(),
        dir.display(),
        dir.display(),
        dir.display(),
        dir.display()
    );
}
