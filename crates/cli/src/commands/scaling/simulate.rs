//! `trackgnn scaling --simulate`: epoch times for any number of ranks, predicted from one
//! measured run's per-graph step times and the ring all-reduce model.
//!
//! The model and its limits: [`trackgnn_train::scaling::predict`]. This command reads the run,
//! the interconnect and the options, tabulates predictions and sensitivities, checks them
//! against a measured study, and prints.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use trackgnn_train::config::Sampler;
use trackgnn_train::scaling::allreduce::AllreduceCost;
use trackgnn_train::scaling::measured::MeasuredRun;
use trackgnn_train::scaling::predict::{
    DEFAULT_BANDWIDTH_BYTES_PER_SECOND, DEFAULT_LATENCY_SECONDS, GraphTimes, SimSetup, graphs_for, predict, speedup,
};
use trackgnn_train::{RunDir, TrainConfig};

use super::ScalingArgs;
use super::{Regime, parse_ranks, sampler_name, speedup_plot};
use crate::util::print_json;

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
    let from = from.as_path();
    let ranks = parse_ranks(a.ranks.as_deref().unwrap_or("1,2,4,8,16,32,64"))?;
    let run = MeasuredRun::load(&RunDir::open(from)?, a.graphs.as_deref())?;
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
    if a.json.json {
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
    let Some(sampler) = m["sampler"].as_str().and_then(Sampler::from_name) else {
        bail!("--check: the file has no `sampler` (is it a `trackgnn scaling --json` output?)")
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
