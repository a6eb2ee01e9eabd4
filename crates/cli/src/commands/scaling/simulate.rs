//! `trackgnn scaling --simulate`: epoch times for any number of ranks, predicted from one
//! measured run's per-graph step times and the ring all-reduce model.
//!
//! The model and its limits: [`trackgnn_train::scaling::predict`]; the report:
//! [`trackgnn_train::scaling::simulation`]. This command reads the run, the interconnect and
//! the options, calls the library and prints.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use serde_json::Value;
use trackgnn_train::RunDir;
use trackgnn_train::config::Sampler;
use trackgnn_train::scaling::allreduce::AllreduceCost;
use trackgnn_train::scaling::measured::MeasuredRun;
use trackgnn_train::scaling::plot_speedup;
use trackgnn_train::scaling::predict::{DEFAULT_BANDWIDTH_BYTES_PER_SECOND, DEFAULT_LATENCY_SECONDS};
use trackgnn_train::scaling::simulation::{MeasuredStudy, Simulation, SimulationPlan};

use super::{ScalingArgs, parse_ranks};
use crate::util::print_json;

fn read_json(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: invalid JSON", path.display()))
}

/// The interconnect: the options, else the fit file, else the defaults; and where it came from.
fn interconnect(a: &ScalingArgs) -> Result<(AllreduceCost, String)> {
    let mut cost = AllreduceCost::new(DEFAULT_LATENCY_SECONDS, DEFAULT_BANDWIDTH_BYTES_PER_SECOND);
    let mut source = "defaults (InfiniBand HDR-like)".to_string();
    if let Some(f) = &a.interconnect {
        let v = read_json(f)?;
        cost = serde_json::from_value(v["fit"].clone()).or_else(|_| serde_json::from_value(v.clone())).with_context(
            || {
                format!(
                    "{}: no `fit` with `latency_seconds` and `bandwidth_bytes_per_second` (write it with `bench allreduce --out`)",
                    f.display()
                )
            },
        )?;
        source = format!("fit {}", f.display());
    }
    if let Some(s) = a.latency {
        anyhow::ensure!(s >= 0.0 && s.is_finite(), "--latency must be a non-negative number of seconds");
        cost.latency_seconds = s;
        source = "options".into();
    }
    if let Some(b) = a.bandwidth {
        anyhow::ensure!(b > 0.0 && b.is_finite(), "--bandwidth must be a positive number of bytes per second");
        cost.bandwidth_bytes_per_second = b;
        source = "options".into();
    }
    Ok((cost, source))
}

/// A `scaling` study's scaling.json, given the file or its directory.
fn study_file(p: &Path) -> PathBuf {
    if p.is_dir() { p.join("scaling.json") } else { p.to_path_buf() }
}

/// The run to simulate from: `--from` (a run, or a study's 1-rank baseline), else the
/// `--check` study's baseline.
fn source_run(a: &ScalingArgs) -> Result<PathBuf> {
    let study = match (&a.from, &a.check) {
        (Some(f), _) if !f.join("scaling.json").exists() => return Ok(f.clone()),
        (Some(f), _) => f.join("scaling.json"),
        (None, Some(c)) => study_file(c),
        (None, None) => bail!("--simulate needs --from RUN_DIR"),
    };
    let v = read_json(&study)?;
    let run = v["baseline_run"].as_str().with_context(|| format!("{}: no `baseline_run`", study.display()))?;
    Ok(PathBuf::from(run))
}

/// The samplers to simulate: the one asked for, or both.
fn samplers(a: &ScalingArgs) -> Vec<Sampler> {
    match a.sampler {
        Some(s) => vec![s.into()],
        None => vec![Sampler::Random, Sampler::Balanced],
    }
}

/// `trackgnn scaling --simulate`.
pub fn run(a: &ScalingArgs) -> Result<ExitCode> {
    let from = source_run(a)?;
    let ranks = parse_ranks(a.ranks.as_deref().unwrap_or("1,2,4,8,16,32,64"))?;
    let run = MeasuredRun::load(&RunDir::open(&from)?, a.graphs.as_deref())?;
    let (cost, cost_source) = interconnect(a)?;
    let study: Option<MeasuredStudy> = match &a.check {
        Some(c) => {
            let path = study_file(c);
            Some(
                serde_json::from_value(read_json(&path)?)
                    .with_context(|| format!("{}: not a scaling study", path.display()))?,
            )
        }
        None => None,
    };
    let plan = SimulationPlan {
        ranks,
        regimes: a.regime.regimes(),
        samplers: samplers(a),
        strong_graphs: a.max_graphs,
        cost,
        cost_source,
        cores: a.cores,
        threads_per_rank: a.threads_per_rank,
        epochs: a.sim_epochs,
    };
    let sim = Simulation::run(&from, &run, &plan, study.as_ref())?;
    let out = serde_json::to_value(&sim)?;
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        plot_speedup(&dir.join("predicted_speedup"), "Predicted speed-up", &sim.curves(), &plan.ranks)?;
        crate::util::write_atomic(&dir.join("simulation.json"), serde_json::to_string_pretty(&out)?.as_bytes())?;
    }
    if a.json.json {
        print_json(&out);
    } else {
        print!("{sim}");
    }
    Ok(ExitCode::SUCCESS)
}
