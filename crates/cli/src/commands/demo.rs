//! `trackgnn demo`: the whole pipeline on a small generated data set, in minutes on a laptop:
//! simulate → build graphs → train → evaluate → reconstruct held-out events → report.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Result, bail};

use crate::cli::{
    BuildGraphsArgs, DemoArgs, DetectorArg, EvalArgs, GraphMethod, ReconstructArgs, SimulateArgs, TrackMethodArg,
    TrainArgs,
};

/// The demo's sizes: small enough for a few minutes on 2 cores, large enough to learn.
const TRAIN_EVENTS: u64 = 60;
const HELDOUT_EVENTS: u64 = 8;
const PILEUP: f64 = 10.0;
const EPOCHS: usize = 12;
const HIDDEN: usize = 64;
const ITERATIONS: usize = 6;

fn step(n: usize, what: &str, t0: Instant) {
    eprintln!("\n[{n}/6 at {:.0} s] {what}", t0.elapsed().as_secs_f64());
}

fn simulate(out: PathBuf, events: u64, seed: u64, first_event: u64, threads: Option<usize>) -> SimulateArgs {
    SimulateArgs {
        events,
        pileup: Some(PILEUP),
        seed,
        first_event,
        out,
        gzip: false,
        config: None,
        threads,
        json: false,
        detector: DetectorArg::default(),
    }
}

pub fn run(a: DemoArgs) -> Result<ExitCode> {
    let dir = &a.out;
    if dir.join("run").exists() {
        bail!("{} already holds a demo; remove it or pass --out with another directory", dir.display());
    }
    std::fs::create_dir_all(dir)?;
    let t0 = Instant::now();
    let p = |s: &str| -> PathBuf { dir.join(s) };
    step(
        1,
        &format!(
            "simulating {TRAIN_EVENTS} events at pile-up {PILEUP} for training and {HELDOUT_EVENTS} held-out events"
        ),
        t0,
    );
    super::simulate::run(simulate(p("events"), TRAIN_EVENTS, 1, 1, a.threads))?;
    super::simulate::run(simulate(p("heldout"), HELDOUT_EVENTS, 2, 1001, a.threads))?;
    step(2, "building graphs (geometric builder, all hits: no truth cuts)", t0);
    let bg = BuildGraphsArgs {
        input: p("events"),
        out: p("graphs"),
        method: GraphMethod::Geometric,
        map: None,
        pt_min: None,
        remove_noise: false,
        margin: None,
        no_triplets: false,
        keep_shortcuts: false,
        phi_slope_max: None,
        z0_max: None,
        skip_layers: None,
        sectors: None,
        sector_overlap: None,
        config: None,
        events: None,
        threads: a.threads,
        json: false,
        detector: DetectorArg::default(),
    };
    super::build_graphs::run(bg)?;
    step(3, &format!("training an InteractionGNN (hidden {HIDDEN}, {ITERATIONS} iterations, {EPOCHS} epochs)"), t0);
    let tr = TrainArgs {
        graphs: p("graphs"),
        out: p("run"),
        config: None,
        resume: false,
        epochs: Some(EPOCHS),
        seed: Some(1),
        lr: Some(2e-3),
        hidden: Some(HIDDEN),
        iterations: Some(ITERATIONS),
        pos_weight: Some(2.0),
        init_weights: None,
        graphs_per_step: None,
        clip_grad_norm: None,
        early_stopping: None,
        checkpoint_every: None,
        max_graphs: None,
        warmup_epochs: None,
        lr_scaling: None,
        sampler: None,
        threads: a.threads,
        checkpointing: None,
        precision: None,
        max_memory: None,
        oversize: None,
        mpi_chunk: None,
        json: false,
    };
    super::train::run_single(tr)?;
    step(4, "edge metrics of the trained model on the test events (the columns of MISSION.md's Table 1)", t0);
    let ev = EvalArgs {
        run: p("run"),
        graphs: p("graphs"),
        all: false,
        split: crate::cli::SplitArg::Test,
        threshold: None,
        weights: "best".into(),
        precision: None,
        threads: a.threads,
        json: false,
    };
    super::train::eval(ev)?;
    step(
        5,
        &format!("reconstructing tracks in the {HELDOUT_EVENTS} held-out events (no truth read), then scoring them"),
        t0,
    );
    let rc = ReconstructArgs {
        run: p("run"),
        input: p("heldout"),
        out: p("tracks"),
        score_cut: None,
        method: TrackMethodArg::Follow,
        min_hits: 5,
        branch_cut: None,
        no_hit_search: false,
        truth_scores: false,
        weights: "best".into(),
        precision: None,
        events: None,
        threads: a.threads,
        json: false,
        detector: DetectorArg::default(),
    };
    super::reconstruct::run(rc)?;
    step(6, "done", t0);
    report(dir, t0);
    Ok(ExitCode::SUCCESS)
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
