//! `trackgnn scaling --simulate`: epoch times for any number of ranks, predicted from one
//! measured run's per-graph step times and the ring all-reduce model.
//!
//! # The model
//! Each graph g has a measured compute time c_g (forward + backward of one step, mean over its
//! occurrences in the run's `steps.jsonl`). The step groups are drawn exactly as the trainer
//! draws them ([`epoch_groups`], same seed, sampler and bins), and each step costs
//!
//! `t_step = s · max_r Σ_{g ∈ rank r} c_g + T_ar(N, B) + o`
//!
//! with `T_ar` the ring all-reduce of the gradient buffer (B = 4 bytes × parameters,
//! [`AllreduceCost`]), `o` the rest of a step measured in the run (optimiser, clipping, logging)
//! and `s = max(1, N·T / cores)` the slow-down of oversubscribed ranks (only when the machine's
//! cores are given, to check predictions against runs on it). An epoch is the sum of its steps
//! (training only, no validation), averaged over several epochs' draws. The load imbalance is
//! the mean over steps of max_r / mean_r of the ranks' compute, as the trainer logs it.
//!
//! Strong scaling keeps the data set (the run's training graphs); weak scaling gives every
//! rank the run's data set, i.e. N × the graphs, the measured ones repeated, so the size
//! distribution stays the same. Speed-up: strong t₁ / t_N, weak the throughput ratio
//! (graphs/s)_N / (graphs/s)₁; efficiency = speed-up / N.
//!
//! What it leaves out: memory-bandwidth contention between ranks on one node, overlap of
//! communication with the backward pass (the trainer does not overlap), stragglers from other
//! jobs, and all-reduce algorithms other than the ring (trees for small buffers).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use serde::Serialize;
use serde_json::{Value, json};
use trackgnn_train::config::Sampler;
use trackgnn_train::data::{GraphSet, epoch_groups};
use trackgnn_train::{RunDir, TrainConfig, Weights};

use super::model::AllreduceCost;
use super::{Regime, parse_ranks, sampler_name, sampler_of, speedup_plot};
use crate::cli::ScalingArgs;
use crate::util::print_json;

/// Default latency α of the simulated interconnect, seconds (InfiniBand HDR-like).
pub const DEFAULT_LATENCY_SECONDS: f64 = 2e-6;
/// Default bandwidth β of the simulated interconnect, bytes/s (InfiniBand HDR-like: 200 Gb/s
/// links, about 20 GB/s achieved).
pub const DEFAULT_BANDWIDTH_BYTES_PER_SECOND: f64 = 20e9;

/// The measured training graphs of a run.
#[derive(Clone, Debug, Default)]
pub struct GraphTimes {
    /// Event id of each graph.
    pub ids: Vec<u64>,
    /// Edges of each graph (the balanced sampler bins by them).
    pub edges: Vec<u64>,
    /// Compute seconds of one step on each graph, one rank.
    pub seconds: Vec<f64>,
}

/// Everything besides the graphs that a prediction needs.
#[derive(Clone, Copy, Debug)]
pub struct SimSetup {
    /// The interconnect.
    pub cost: AllreduceCost,
    /// Bytes of the gradient buffer.
    pub gradient_bytes: f64,
    /// Seconds of a step besides compute and all-reduce.
    pub step_overhead_seconds: f64,
    /// `(cores, threads per rank)` of a machine the ranks share: compute slows by
    /// max(1, N·T / cores). `None`: every rank has its own cores.
    pub oversubscription: Option<(usize, usize)>,
    /// Epochs whose draws are averaged.
    pub epochs: u64,
}

/// The predicted training epoch at one number of ranks.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Prediction {
    /// Ranks.
    pub ranks: usize,
    /// Graphs in the training set.
    pub graphs: usize,
    /// Optimiser steps per epoch.
    pub steps_per_epoch: f64,
    /// Graphs trained on per epoch (all ranks).
    pub graphs_per_epoch: f64,
    /// Training seconds per epoch.
    pub epoch_seconds: f64,
    /// Seconds per epoch the slowest rank of each step computes.
    pub compute_seconds: f64,
    /// Seconds per epoch in the all-reduce (its modelled cost, without waiting).
    pub allreduce_seconds: f64,
    /// Mean over steps of the slowest rank's compute / the mean rank's compute.
    pub load_imbalance: f64,
    /// The compute slow-down factor of oversubscription.
    pub contention: f64,
    /// Training throughput, graphs per second.
    pub graphs_per_second: f64,
}

/// Predicts a training epoch of `ranks` ranks on `graphs` graphs (the measured ones repeated
/// cyclically); `None` if the graphs cannot fill one step (with the balanced sampler: one
/// step from one size bin).
pub fn predict(cfg: &TrainConfig, times: &GraphTimes, ranks: usize, graphs: usize, s: &SimSetup) -> Option<Prediction> {
    let n = times.seconds.len();
    let gps = cfg.graphs_per_step;
    if n == 0 || ranks == 0 || graphs < ranks * gps || s.epochs == 0 {
        return None;
    }
    let set = GraphSet {
        files: (0..graphs).map(|i| (i as u64, PathBuf::new())).collect(),
        edges: (0..graphs).map(|i| times.edges[i % n]).collect(),
        nodes: vec![0; graphs],
    };
    let train: Vec<usize> = (0..graphs).collect();
    let contention = s
        .oversubscription
        .map_or(1.0, |(cores, threads)| ((ranks * threads.max(1)) as f64 / cores.max(1) as f64).max(1.0));
    let (mut steps, mut compute, mut imbalance) = (0usize, 0.0, 0.0);
    for epoch in 0..s.epochs {
        for group in epoch_groups(cfg, &set, &train, ranks, epoch) {
            let per_rank: Vec<f64> =
                group.chunks_exact(gps).map(|g| g.iter().map(|&i| times.seconds[i % n]).sum::<f64>()).collect();
            let max = per_rank.iter().copied().fold(0.0, f64::max);
            let mean = per_rank.iter().sum::<f64>() / ranks as f64;
            compute += contention * max;
            imbalance += if mean > 0.0 { max / mean } else { 1.0 };
            steps += 1;
        }
    }
    if steps == 0 {
        return None;
    }
    let e = s.epochs as f64;
    let steps_per_epoch = steps as f64 / e;
    let ar = s.cost.seconds(ranks, s.gradient_bytes);
    let compute_seconds = compute / e;
    let epoch_seconds = compute_seconds + (ar + s.step_overhead_seconds) * steps_per_epoch;
    let graphs_per_epoch = steps_per_epoch * (ranks * gps) as f64;
    Some(Prediction {
        ranks,
        graphs,
        steps_per_epoch,
        graphs_per_epoch,
        epoch_seconds,
        compute_seconds,
        allreduce_seconds: ar * steps_per_epoch,
        load_imbalance: imbalance / steps.max(1) as f64,
        contention,
        graphs_per_second: graphs_per_epoch / epoch_seconds,
    })
}

/// Speed-up of `p` over the one-rank `base`: t₁ / t_N (strong) or the throughput ratio (weak).
/// Strong-scaling times are per graph trained: a sampler drops the remainder of the data set
/// that cannot fill a step of N ranks, so the epochs of N ranks may cover fewer graphs.
pub fn speedup(regime: Regime, base: &Prediction, p: &Prediction) -> f64 {
    match regime {
        Regime::Strong => (base.epoch_seconds / base.graphs_per_epoch) / (p.epoch_seconds / p.graphs_per_epoch),
        Regime::Weak => p.graphs_per_second / base.graphs_per_second,
    }
}

/// Graphs of the training set at `ranks` ranks: the strong set, or `ranks` × the run's.
fn graphs_for(regime: Regime, ranks: usize, strong: usize, run_graphs: usize) -> usize {
    match regime {
        Regime::Strong => strong,
        Regime::Weak => ranks * run_graphs,
    }
}

/// One regime and sampler: predictions with speed-up and efficiency, one row per rank count
/// (`None` where the training set cannot fill a step).
fn table(
    cfg: &TrainConfig,
    times: &GraphTimes,
    ranks: &[usize],
    regime: Regime,
    strong_graphs: usize,
    s: &SimSetup,
) -> Vec<Value> {
    let base = predict(cfg, times, 1, graphs_for(regime, 1, strong_graphs, times.ids.len()), s);
    ranks
        .iter()
        .map(|&n| {
            let p = predict(cfg, times, n, graphs_for(regime, n, strong_graphs, times.ids.len()), s);
            match (p, &base) {
                (Some(p), Some(b)) => {
                    let sp = speedup(regime, b, &p);
                    let mut v = serde_json::to_value(&p).expect("serialises");
                    v["speedup"] = json!(sp);
                    v["scaling_efficiency"] = json!(sp / n as f64);
                    v
                }
                _ => json!({ "ranks": n, "note": "no full step: fewer graphs (per size bin, balanced) than ranks × graphs per step" }),
            }
        })
        .collect()
}

/// A run read back for simulation.
struct MeasuredRun {
    cfg: TrainConfig,
    times: GraphTimes,
    /// Graphs whose time was estimated from their size (not seen in `steps.jsonl`).
    estimated: usize,
    gradient_bytes: f64,
    step_overhead_seconds: f64,
    threads: usize,
    ranks: usize,
}

fn read_json(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: invalid JSON", path.display()))
}

/// Bytes of the model's parameters (= of the flat f32 gradient buffer), from the run's weights.
fn gradient_bytes(run: &RunDir) -> Result<f64> {
    let candidates = [run.weights_path(&Weights::Last), run.weights_path(&Weights::Best)];
    let path = candidates.iter().find(|p| p.exists()).with_context(|| {
        format!(
            "{}: no {} or {} (did the run finish an epoch?)",
            run.root().display(),
            candidates[0].display(),
            candidates[1].display()
        )
    })?;
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let st = safetensors::SafeTensors::deserialize(&bytes)
        .map_err(|e| anyhow::anyhow!("{}: invalid safetensors file: {e}", path.display()))?;
    Ok(st.tensors().iter().map(|(_, t)| t.data().len() as f64).sum())
}

/// Per event id: the summed compute seconds of its steps and their count.
type PerGraph = BTreeMap<u64, (f64, u32)>;

/// Per-graph mean compute seconds, per-step overhead and the run's ranks from `steps.jsonl`.
fn step_times(run: &RunDir, gps: usize) -> Result<(PerGraph, f64, usize)> {
    let path = run.steps_path();
    let mut steps = run.read_steps()?;
    let mut per_graph = PerGraph::new();
    let (mut overhead, mut lines, mut ranks) = (0.0, 0usize, 0usize);
    // The first epoch warms up (page cache, allocator): skip it when there are later ones, as
    // the measured study does.
    let first = steps.iter().map(|s| s.epoch).min();
    if steps.iter().any(|s| Some(s.epoch) != first) {
        steps.retain(|s| Some(s.epoch) != first);
    }
    for s in &steps {
        let at = || format!("{}, global step {}", path.display(), s.global_step);
        if s.events.is_empty() {
            bail!("{}: no `events` list (written by an older trackgnn: train the run again)", at());
        }
        if s.compute_seconds.is_empty() {
            bail!("{}: no `compute_seconds` list", at());
        }
        if s.events.len() != s.compute_seconds.len() || s.events.iter().any(|e| e.len() != gps) {
            bail!("{}: expected {} rank(s) × {gps} graph(s) per step", at(), s.compute_seconds.len());
        }
        for (ev, &c) in s.events.iter().zip(&s.compute_seconds) {
            let e = per_graph.entry(ev[0]).or_default();
            e.0 += c;
            e.1 += 1;
        }
        overhead += (s.seconds - s.compute_seconds[0] - s.allreduce_seconds.first().copied().unwrap_or(0.0)).max(0.0);
        lines += 1;
        ranks = ranks.max(s.compute_seconds.len());
    }
    if lines == 0 {
        bail!("{}: no steps", path.display());
    }
    Ok((per_graph, overhead / lines as f64, ranks))
}

/// Least-squares line of `y` against `x`, or the mean of `y` if `x` does not vary.
fn line_fit(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len().max(1) as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx > 0.0 { (my - sxy / sxx * mx, sxy / sxx) } else { (my, 0.0) }
}

/// Reads a run directory: its configuration, training graphs and their measured times.
fn load_run(run: &Path, graphs_override: Option<&Path>) -> Result<MeasuredRun> {
    let rd = RunDir::open(run)?;
    let cfg = rd.read_config()?;
    if cfg.graphs_per_step != 1 {
        bail!("{}: the simulation needs a run with one graph per step (graphs_per_step = 1)", run.display());
    }
    let events = rd.read_events()?;
    let train = events.train;
    let dir = match graphs_override {
        Some(d) => d.to_path_buf(),
        None => events.graphs_dir,
    };
    let set = GraphSet::open(&dir, cfg.max_graphs)
        .with_context(|| format!("opening the run's graphs {} (pass --graphs if they moved)", dir.display()))?;
    let size: BTreeMap<u64, u64> = set.files.iter().zip(&set.edges).map(|((id, _), &e)| (*id, e)).collect();
    let (measured, step_overhead_seconds, ranks) = step_times(&rd, 1)?;
    let mut times = GraphTimes::default();
    for id in &train {
        let edges = *size.get(id).with_context(|| format!("event {id} of the run is not in {}", dir.display()))?;
        times.ids.push(*id);
        times.edges.push(edges);
        times.seconds.push(measured.get(id).map_or(f64::NAN, |(s, k)| s / *k as f64));
    }
    // Graphs the run never trained on (a remainder its steps dropped): time from their size.
    let known: Vec<(f64, f64)> =
        times.edges.iter().zip(&times.seconds).filter(|p| p.1.is_finite()).map(|(&e, &s)| (e as f64, s)).collect();
    if known.is_empty() {
        bail!("{}: no step on the run's training graphs", rd.steps_path().display());
    }
    let (a, b) = line_fit(&known);
    let mut estimated = 0;
    for (s, &e) in times.seconds.iter_mut().zip(&times.edges) {
        if !s.is_finite() {
            *s = (a + b * e as f64).max(0.0);
            estimated += 1;
        }
    }
    let threads = rd.read_rank_report(0).map_or(1, |r| r.threads);
    Ok(MeasuredRun {
        cfg,
        times,
        estimated,
        gradient_bytes: gradient_bytes(&rd)?,
        step_overhead_seconds,
        threads,
        ranks,
    })
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
        Some(s) => vec![sampler_of(s)],
        None => vec![Sampler::Random, Sampler::Balanced],
    }
}

/// `trackgnn scaling --simulate`.
pub fn run(a: &ScalingArgs) -> Result<ExitCode> {
    let from = source_run(a)?;
    let from = from.as_path();
    let ranks = parse_ranks(a.ranks.as_deref().unwrap_or("1,2,4,8,16,32,64"))?;
    let run = load_run(from, a.graphs.as_deref())?;
    let (cost, source) = interconnect(a)?;
    let measured = a.check.as_deref().map(|c| read_json(&study_file(c))).transpose()?;
    // Predictions share cores only with --cores; the check uses the measured machine's cores.
    let cores = a.cores;
    let check_cores = a.cores.or_else(|| measured.as_ref().and_then(|m| m["cores"].as_u64().map(|c| c as usize)));
    let threads = a.threads_per_rank.unwrap_or(run.threads);
    let setup = SimSetup {
        cost,
        gradient_bytes: run.gradient_bytes,
        step_overhead_seconds: run.step_overhead_seconds,
        oversubscription: cores.map(|c| (c, threads)),
        epochs: a.sim_epochs.max(1),
    };
    let check_setup = SimSetup { oversubscription: check_cores.map(|c| (c, threads)), ..setup };
    let strong_graphs = a.max_graphs.unwrap_or(run.times.ids.len());
    let regimes = a.regime.regimes();
    let cfg_for = |s: Sampler| TrainConfig { sampler: s, ..run.cfg.clone() };
    let mut predictions = Vec::new();
    for &s in &samplers(a) {
        for &r in &regimes {
            let rows = table(&cfg_for(s), &run.times, &ranks, r, strong_graphs, &setup);
            predictions.push(json!({ "sampler": sampler_name(s), "regime": r, "rows": rows }));
        }
    }
    // Sensitivity to the interconnect: speed-ups with bandwidth and latency × and ÷ 10.
    let variants = [("nominal", 1.0, 1.0), ("bandwidth x10", 1.0, 10.0), ("bandwidth /10", 1.0, 0.1)];
    let variants = variants.into_iter().chain([("latency x10", 10.0, 1.0), ("latency /10", 0.1, 1.0)]);
    let sensitivity: Vec<Value> = variants
        .map(|(label, lat, bw)| {
            let st = SimSetup { cost: cost.scaled(lat, bw), ..setup };
            let rows: Vec<Value> = samplers(a)
                .iter()
                .flat_map(|&s| regimes.iter().map(move |&r| (s, r)))
                .map(|(s, r)| {
                    let t = table(&cfg_for(s), &run.times, &ranks, r, strong_graphs, &st);
                    let sp: Vec<Value> = t.iter().map(|v| v["speedup"].clone()).collect();
                    json!({ "sampler": sampler_name(s), "regime": r, "speedup": sp })
                })
                .collect();
            json!({ "label": label, "latency_seconds": st.cost.latency_seconds,
                    "bandwidth_bytes_per_second": st.cost.bandwidth_bytes_per_second, "rows": rows })
        })
        .collect();
    let check = measured.as_ref().map(|m| check_rows(m, &run, &check_setup)).transpose()?;
    let c = &run.times.seconds;
    let mean = c.iter().sum::<f64>() / c.len() as f64;
    let sd = (c.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / c.len() as f64).sqrt();
    let out = json!({
        "from": from, "run_ranks": run.ranks, "train_graphs": run.times.ids.len(), "graphs_estimated": run.estimated,
        "strong_graphs": strong_graphs, "gradient_bytes": run.gradient_bytes, "parameters": run.gradient_bytes / 4.0,
        "compute_seconds_per_graph": { "mean": mean, "min": c.iter().copied().fold(f64::INFINITY, f64::min),
            "max": c.iter().copied().fold(0.0, f64::max), "cv": sd / mean },
        "step_overhead_seconds": run.step_overhead_seconds,
        "allreduce": { "latency_seconds": cost.latency_seconds, "bandwidth_bytes_per_second": cost.bandwidth_bytes_per_second, "source": source },
        "cores": cores, "check_cores": check_cores, "threads_per_rank": threads, "epochs_simulated": setup.epochs,
        "predictions": predictions, "sensitivity": sensitivity, "check": check,
    });
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let curves: Vec<(String, Vec<(f64, f64)>)> = out["predictions"]
            .as_array()
            .map(|p| {
                p.iter()
                    .map(|t| {
                        (
                            format!("{} {}", t["regime"].as_str().unwrap_or(""), t["sampler"].as_str().unwrap_or("")),
                            points(&t["rows"]),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        speedup_plot(&dir.join("predicted_speedup"), "Predicted speed-up", &curves, &ranks)?;
        crate::util::write_atomic(&dir.join("simulation.json"), serde_json::to_string_pretty(&out)?.as_bytes())?;
    }
    if a.json {
        print_json(&out);
    } else {
        print_text(&out);
    }
    Ok(ExitCode::SUCCESS)
}

/// `(ranks, speed-up)` of a table's rows.
fn points(rows: &Value) -> Vec<(f64, f64)> {
    rows.as_array()
        .map(|r| r.iter().filter_map(|v| Some((v["ranks"].as_f64()?, v["speedup"].as_f64()?))).collect())
        .unwrap_or_default()
}

/// Predicted against measured (a `scaling --json` output) for each regime and rank count:
/// each measured row is predicted on as many graphs as its run trained on.
fn check_rows(m: &Value, run: &MeasuredRun, setup: &SimSetup) -> Result<Value> {
    let sampler = match m["sampler"].as_str() {
        Some("balanced") => Sampler::Balanced,
        Some("random") => Sampler::Random,
        _ => bail!("--check: the file has no `sampler` (is it a `trackgnn scaling --json` output?)"),
    };
    let cfg = TrainConfig { sampler, ..run.cfg.clone() };
    let mut rows = Vec::new();
    for regime in [Regime::Strong, Regime::Weak] {
        let Some(measured) = m[regime.name()].as_array() else { continue };
        let base_graphs = measured.iter().find(|r| r["ranks"] == 1).and_then(|r| r["train_graphs"].as_u64());
        let base = base_graphs.and_then(|g| predict(&cfg, &run.times, 1, g as usize, setup));
        for r in measured {
            let (Some(n), Some(g)) = (r["ranks"].as_u64(), r["train_graphs"].as_u64()) else { continue };
            let Some(p) = predict(&cfg, &run.times, n as usize, g as usize, setup) else { continue };
            let t_meas = r["train_epoch_seconds"].as_f64().unwrap_or(f64::NAN);
            let sp_pred = base.as_ref().map_or(f64::NAN, |b| speedup(regime, b, &p));
            let sp_meas = r["speedup"].as_f64().unwrap_or(f64::NAN);
            rows.push(json!({
                "regime": regime, "ranks": n, "train_graphs": g, "contention": p.contention,
                "measured_train_seconds": t_meas, "predicted_train_seconds": p.epoch_seconds,
                "time_error": p.epoch_seconds / t_meas - 1.0,
                "measured_speedup": sp_meas, "predicted_speedup": sp_pred, "speedup_error": sp_pred / sp_meas - 1.0,
                "measured_load_imbalance": r["load_imbalance"], "predicted_load_imbalance": p.load_imbalance,
            }));
        }
    }
    Ok(json!({ "sampler": sampler_name(sampler), "rows": rows }))
}

fn f(v: &Value, digits: usize) -> String {
    v.as_f64().map_or("-".into(), |x| format!("{x:.digits$}"))
}

fn print_text(o: &Value) {
    let c = &o["compute_seconds_per_graph"];
    println!(
        "from {}: {} training graphs ({} timed from their size), compute {} s/graph (min {}, max {}, cv {}), step overhead {} s",
        o["from"].as_str().unwrap_or(""),
        o["train_graphs"],
        o["graphs_estimated"],
        f(&c["mean"], 3),
        f(&c["min"], 3),
        f(&c["max"], 3),
        f(&c["cv"], 2),
        f(&o["step_overhead_seconds"], 4)
    );
    let ar = &o["allreduce"];
    println!(
        "all-reduce of {:.2} MB: ring model, latency {:.2} µs, bandwidth {:.2} GB/s ({}); cores {}",
        o["gradient_bytes"].as_f64().unwrap_or(0.0) / 1e6,
        ar["latency_seconds"].as_f64().unwrap_or(f64::NAN) * 1e6,
        ar["bandwidth_bytes_per_second"].as_f64().unwrap_or(f64::NAN) / 1e9,
        ar["source"].as_str().unwrap_or(""),
        if o["cores"].is_null() { "unlimited (a rank per core set)".to_string() } else { o["cores"].to_string() },
    );
    for t in o["predictions"].as_array().into_iter().flatten() {
        println!(
            "\n{} scaling, {} sampler (predicted training time per epoch)",
            t["regime"].as_str().unwrap_or(""),
            t["sampler"].as_str().unwrap_or("")
        );
        println!(
            "| Ranks | Graphs | Steps | Epoch s | Compute s | All-reduce s | Imbalance | Speed-up | Efficiency % |"
        );
        println!("|---|---|---|---|---|---|---|---|---|");
        for r in t["rows"].as_array().into_iter().flatten() {
            if r["epoch_seconds"].is_null() {
                println!("| {} | {} |", r["ranks"], r["note"].as_str().unwrap_or(""));
                continue;
            }
            println!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {:.1} |",
                r["ranks"],
                r["graphs"],
                f(&r["steps_per_epoch"], 0),
                f(&r["epoch_seconds"], 2),
                f(&r["compute_seconds"], 2),
                f(&r["allreduce_seconds"], 3),
                f(&r["load_imbalance"], 3),
                f(&r["speedup"], 2),
                100.0 * r["scaling_efficiency"].as_f64().unwrap_or(f64::NAN)
            );
        }
    }
    println!("\nsensitivity of the speed-up to the interconnect (per rank count)");
    for v in o["sensitivity"].as_array().into_iter().flatten() {
        for r in v["rows"].as_array().into_iter().flatten() {
            let sp: Vec<String> = r["speedup"].as_array().into_iter().flatten().map(|x| f(x, 2)).collect();
            println!(
                "{:<14} {:<6} {:<8} {}",
                v["label"].as_str().unwrap_or(""),
                r["regime"].as_str().unwrap_or(""),
                r["sampler"].as_str().unwrap_or(""),
                sp.join("  ")
            );
        }
    }
    if let Some(rows) = o["check"]["rows"].as_array() {
        println!(
            "\ncheck against measured runs ({} sampler, {} cores shared by the ranks)",
            o["check"]["sampler"].as_str().unwrap_or(""),
            o["check_cores"]
        );
        println!(
            "| Regime | Ranks | Contention | Measured s | Predicted s | Error % | Measured speed-up | Predicted | Error % |"
        );
        println!("|---|---|---|---|---|---|---|---|---|");
        for r in rows {
            println!(
                "| {} | {} | {} | {} | {} | {:.1} | {} | {} | {:.1} |",
                r["regime"].as_str().unwrap_or(""),
                r["ranks"],
                f(&r["contention"], 2),
                f(&r["measured_train_seconds"], 2),
                f(&r["predicted_train_seconds"], 2),
                100.0 * r["time_error"].as_f64().unwrap_or(f64::NAN),
                f(&r["measured_speedup"], 2),
                f(&r["predicted_speedup"], 2),
                100.0 * r["speedup_error"].as_f64().unwrap_or(f64::NAN)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(seconds: Vec<f64>) -> GraphTimes {
        let n = seconds.len();
        GraphTimes { ids: (0..n as u64).collect(), edges: (0..n as u64).map(|i| 1000 + 37 * i).collect(), seconds }
    }

    fn setup(cost: AllreduceCost) -> SimSetup {
        SimSetup { cost, gradient_bytes: 4e6, step_overhead_seconds: 0.0, oversubscription: None, epochs: 4 }
    }

    fn cfg(sampler: Sampler) -> TrainConfig {
        TrainConfig { sampler, sampler_bins: 4, ..TrainConfig::default() }
    }

    #[test]
    fn identical_graphs_are_balanced_under_both_samplers() {
        let t = times(vec![0.25; 64]);
        for s in [Sampler::Random, Sampler::Balanced] {
            for n in [1, 2, 4, 8] {
                let p = predict(&cfg(s), &t, n, 64, &setup(AllreduceCost::zero())).unwrap();
                assert!((p.load_imbalance - 1.0).abs() < 1e-12, "{s:?} {n}: {}", p.load_imbalance);
                assert_eq!(p.steps_per_epoch, (64 / n) as f64);
                assert!((p.epoch_seconds - 0.25 * (64 / n) as f64).abs() < 1e-9);
            }
        }
    }

    #[test]
    fn one_slow_graph_makes_an_imbalance() {
        let mut s = vec![0.1; 32];
        s[5] = 1.0;
        let p = predict(&cfg(Sampler::Random), &times(s), 4, 32, &setup(AllreduceCost::zero())).unwrap();
        // One step of eight holds the slow graph: max/mean there = 1.0 / 0.325.
        let expect = (7.0 + 1.0 / 0.325) / 8.0;
        assert!((p.load_imbalance - expect).abs() < 1e-9, "{}", p.load_imbalance);
        assert!(p.load_imbalance > 1.0);
    }

    #[test]
    fn balanced_sampling_beats_random_on_varied_sizes() {
        // Compute time proportional to size, sizes spread over a factor of 8.
        let t = GraphTimes {
            ids: (0..64).collect(),
            edges: (0..64).map(|i| 1000 + 100 * ((i * 37) % 64)).collect(),
            seconds: (0..64).map(|i| (1000 + 100 * ((i * 37) % 64)) as f64 * 1e-4).collect(),
        };
        let st = setup(AllreduceCost::zero());
        let r = predict(&cfg(Sampler::Random), &t, 8, 64, &st).unwrap();
        let b = predict(&cfg(Sampler::Balanced), &t, 8, 64, &st).unwrap();
        assert!(b.load_imbalance < r.load_imbalance && b.epoch_seconds < r.epoch_seconds, "{b:?} vs {r:?}");
        // Within one of 4 bins sizes still vary (the smallest spans 1000–2500 edges), so the
        // steps of 8 ranks keep some imbalance; random sampling's is about 1.5.
        assert!(b.load_imbalance < 1.25 && r.load_imbalance > 1.35, "{} vs {}", b.load_imbalance, r.load_imbalance);
    }

    #[test]
    fn weak_throughput_without_communication_is_n_times_one_rank() {
        let t = times(vec![0.2; 16]);
        for s in [Sampler::Random, Sampler::Balanced] {
            let c = cfg(s);
            let st = setup(AllreduceCost::zero());
            let one = predict(&c, &t, 1, 16, &st).unwrap();
            for n in [2, 4, 16, 64] {
                let p = predict(&c, &t, n, graphs_for(Regime::Weak, n, 16, 16), &st).unwrap();
                assert!((speedup(Regime::Weak, &one, &p) - n as f64).abs() < 1e-9, "{s:?} {n}");
                assert!((p.epoch_seconds - one.epoch_seconds).abs() < 1e-9, "same work per rank");
            }
        }
    }

    #[test]
    fn communication_and_oversubscription_cost_what_the_model_says() {
        let t = times(vec![0.5; 8]);
        let cost = AllreduceCost::new(10e-6, 1e9);
        let mut st = setup(cost);
        st.step_overhead_seconds = 0.01;
        let p = predict(&cfg(Sampler::Random), &t, 2, 8, &st).unwrap();
        let ar = 2.0 * 10e-6 + 4e6 / 1e9;
        assert!((p.epoch_seconds - 4.0 * (0.5 + ar + 0.01)).abs() < 1e-9, "{p:?}");
        assert!((p.allreduce_seconds - 4.0 * ar).abs() < 1e-12);
        // Four single-thread ranks on two cores: compute twice as slow; two ranks not at all.
        st.oversubscription = Some((2, 1));
        let p4 = predict(&cfg(Sampler::Random), &t, 4, 8, &st).unwrap();
        assert_eq!(p4.contention, 2.0);
        assert!((p4.compute_seconds - 2.0 * 1.0).abs() < 1e-12, "2 steps × 0.5 s × 2");
        assert_eq!(predict(&cfg(Sampler::Random), &t, 2, 8, &st).unwrap().contention, 1.0);
        assert_eq!(predict(&cfg(Sampler::Random), &t, 16, 8, &st), None, "8 graphs cannot fill 16 ranks");
    }

    /// A skewed (log-normal-like) size distribution: a few graphs much larger than most.
    fn skewed(n: usize, seed: u64) -> GraphTimes {
        let mut rng = trackgnn_trackml::rng::Rng::new(seed);
        let edges: Vec<u64> = (0..n).map(|_| (2000.0 * (0.8 * rng.normal()).exp()) as u64 + 100).collect();
        GraphTimes { ids: (0..n as u64).collect(), seconds: edges.iter().map(|&e| e as f64 * 5e-5).collect(), edges }
    }

    #[test]
    fn one_rank_costs_the_measured_sum_and_imbalance_is_at_least_one() {
        let t = skewed(50, 3);
        let sum: f64 = t.seconds.iter().sum();
        let mut st = setup(AllreduceCost::new(5e-6, 1e9));
        st.step_overhead_seconds = 0.002;
        for s in [Sampler::Random, Sampler::Balanced] {
            let one = predict(&cfg(s), &t, 1, 50, &st).unwrap();
            assert_eq!(one.steps_per_epoch, 50.0, "{s:?}: one rank trains every graph");
            assert!((one.compute_seconds - sum).abs() < 1e-9 * sum, "{s:?}: {} vs {sum}", one.compute_seconds);
            assert!((one.epoch_seconds - (sum + 50.0 * 0.002)).abs() < 1e-9, "no all-reduce at one rank");
            assert_eq!((one.load_imbalance, one.allreduce_seconds), (1.0, 0.0));
            for n in [2, 3, 4, 8] {
                let p = predict(&cfg(s), &t, n, 50, &st).unwrap();
                assert!(p.load_imbalance >= 1.0, "{s:?} {n}: {}", p.load_imbalance);
                assert!(p.allreduce_seconds > 0.0);
            }
        }
    }

    #[test]
    fn balanced_imbalance_is_at_most_random_on_a_skewed_distribution() {
        for seed in [1, 2, 3] {
            let t = skewed(256, seed);
            let st = setup(AllreduceCost::zero());
            for n in [2, 4, 8, 16] {
                let r = predict(&cfg(Sampler::Random), &t, n, 256, &st).unwrap();
                let b = predict(&cfg(Sampler::Balanced), &t, n, 256, &st).unwrap();
                assert!(b.load_imbalance <= r.load_imbalance, "seed {seed}, {n} ranks: {b:?} vs {r:?}");
            }
        }
    }

    #[test]
    fn strong_speedup_counts_graphs_trained() {
        let t = times(vec![0.1; 10]);
        let st = setup(AllreduceCost::zero());
        let one = predict(&cfg(Sampler::Random), &t, 1, 10, &st).unwrap();
        // Four ranks fill two steps of 10 graphs: 8 trained, the remainder dropped.
        let four = predict(&cfg(Sampler::Random), &t, 4, 10, &st).unwrap();
        assert_eq!(four.graphs_per_epoch, 8.0);
        assert!((speedup(Regime::Strong, &one, &four) - 4.0).abs() < 1e-9);
    }

    #[test]
    fn unmeasured_graphs_get_a_line_through_the_measured_ones() {
        assert_eq!(line_fit(&[(1.0, 3.0), (3.0, 7.0)]), (1.0, 2.0));
        assert_eq!(line_fit(&[(2.0, 3.0), (2.0, 5.0)]), (4.0, 0.0));
    }
}
