//! `trackgnn bench memory`: step time, counted peak bytes and peak RSS of training steps on
//! graphs of growing size, with and without activation checkpointing; the fitted bytes per edge;
//! rows that would not fit in free memory are predicted and skipped, never run into the OOM
//! killer. Each row runs in its own process so its peak RSS is its own.

use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use trackgnn_engine::loss::bce_with_logits;
use trackgnn_engine::optim::{AdamW, AdamWConfig};
use trackgnn_engine::{Checkpointing, ForwardCache, GraphInput, InteractionGnn, ModelConfig, alloc};
use trackgnn_trackml::rng::Rng;

use crate::util::{peak_rss_bytes, print_json, thread_pool};
use clap::Args;

/// `trackgnn bench memory`.
#[derive(Debug, Args)]
pub struct BenchMemoryArgs {
    /// Graph sizes in edges, comma separated.
    #[arg(long, default_value = "100000,400000,1000000,1600000")]
    pub edges: String,
    /// Hidden width.
    #[arg(long, default_value_t = 128)]
    pub hidden: usize,
    /// Message-passing iterations.
    #[arg(long, default_value_t = 8)]
    pub iters: usize,
    /// Checkpointing modes, comma separated (none, per-iteration, every:K; `+bf16` appended keeps
    /// the saved states in bf16).
    #[arg(long, default_value = "none,per-iteration,every:4,per-iteration+bf16")]
    pub modes: String,
    /// Edges per node of the synthetic graphs (full TrackML events: about 15).
    #[arg(long, default_value_t = 15.0)]
    pub edges_per_node: f64,
    /// Timed steps per row (after one warm-up step).
    #[arg(long, default_value_t = 2)]
    pub steps: usize,
    #[command(flatten)]
    pub threads: crate::cli::ThreadsArg,
    /// Directory for the memory-vs-size plot.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Run one row `MODE@EDGES` in this process (used internally).
    #[arg(long, hide = true)]
    pub only: Option<String>,
    #[command(flatten)]
    pub json: crate::cli::JsonArg,
}

/// A random graph with `e` edges and e / `epn` nodes, 3 node and 4 edge features.
fn synthetic(e: usize, epn: f64, seed: u64) -> (GraphInput<f32>, Vec<u8>) {
    let n = ((e as f64 / epn) as usize).max(2);
    let mut rng = Rng::new(seed);
    let x: Vec<f32> = (0..n * 3).map(|_| rng.normal() as f32).collect();
    let ea: Vec<f32> = (0..e * 4).map(|_| rng.normal() as f32).collect();
    let src: Vec<u32> = (0..e).map(|_| rng.below(n as u64) as u32).collect();
    let dst: Vec<u32> = src.iter().map(|&s| ((s as u64 + 1 + rng.below(n as u64 - 1)) % n as u64) as u32).collect();
    let y: Vec<u8> = (0..e).map(|_| rng.bernoulli(0.1) as u8).collect();
    (GraphInput::new(n, &x, 3, &ea, 4, &src, &dst), y)
}

/// Bytes of memory the system could still give (MemAvailable).
fn available_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(u64::MAX, |kb| kb * 1024)
}

/// One row, in this process.
fn run_row(a: &BenchMemoryArgs, mode: Checkpointing, edges: usize) -> Value {
    let (g, y) = synthetic(edges, a.edges_per_node, 1);
    let cfg = ModelConfig { hidden: a.hidden, iterations: a.iters, ..ModelConfig::default() };
    let mut model = InteractionGnn::<f32>::new(cfg, 3, 4, &mut Rng::new(1));
    model.checkpointing = mode;
    let mut opt = AdamW::new(model.params.len(), AdamWConfig::default());
    let mut cache = ForwardCache::default();
    let mut dl = vec![0.0f32; edges];
    let heap_before = alloc::current_bytes();
    alloc::reset_peak();
    let mut times = Vec::new();
    let mut engine_peak = 0;
    for step in 0..1 + a.steps {
        let t = Instant::now();
        model.forward(&g, &mut cache);
        bce_with_logits(&cache.logits, &y, None, 1.0, &mut dl);
        model.params.zero_grad();
        model.backward(&g, &mut cache, &dl);
        opt.step(&mut model.params.data, &model.params.grad, 1e-3);
        engine_peak = engine_peak.max(model.engine_bytes(&cache) + 3 * model.params.len() * 4);
        if step > 0 {
            times.push(t.elapsed().as_secs_f64());
        }
    }
    json!({
        "checkpointing": mode.to_string(), "edges": edges, "nodes": g.num_nodes, "hidden": a.hidden, "iterations": a.iters,
        "step_seconds": times.iter().sum::<f64>() / times.len() as f64,
        "counted_peak_bytes": alloc::peak_bytes().saturating_sub(heap_before) as u64,
        "engine_bytes": engine_peak as u64,
        "peak_rss_bytes": peak_rss_bytes(),
        "skipped": false,
    })
}

/// Least-squares slope and intercept of y against x.
fn fit(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let (sx, sy) = points.iter().fold((0.0, 0.0), |a, p| (a.0 + p.0, a.1 + p.1));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| (sxy / sxx, my - sxy / sxx * mx))
}

/// The counted peaks and step times of a mode's rows that ran.
fn ran<'r>(rows: &'r [Value], mode: &str) -> impl Iterator<Item = &'r Value> {
    rows.iter().filter(move |r| r["checkpointing"] == json!(mode) && r["skipped"] == json!(false))
}

/// One row of `mode` at `edges` edges in a child process (`bench memory --only`), so its peak
/// RSS is its own.
fn run_in_child(a: &BenchMemoryArgs, exe: &std::path::Path, mode: Checkpointing, e: usize) -> Result<Value> {
    let mut cmd = Command::new(exe);
    cmd.args(["bench", "memory", "--only", &format!("{mode}@{e}"), "--hidden", &a.hidden.to_string()]);
    cmd.args(["--iters", &a.iters.to_string(), "--steps", &a.steps.to_string()]);
    cmd.args(["--edges-per-node", &a.edges_per_node.to_string()]);
    if let Some(t) = a.threads.threads {
        cmd.args(["--threads", &t.to_string()]);
    }
    let out = cmd.output().context("running a memory row")?;
    if !out.status.success() {
        bail!("row {mode} @ {e} edges failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// The rows of every mode and size, printed as they come (without `--json`). A row whose
/// predicted peak (a line through the mode's rows so far) exceeds 85% of the available memory
/// is skipped.
fn measure_rows(a: &BenchMemoryArgs, modes: &[Checkpointing], edges: &[usize]) -> Result<Vec<Value>> {
    let exe = std::env::current_exe().context("locating the trackgnn binary")?;
    let mut rows: Vec<Value> = Vec::new();
    if !a.json.json {
        println!(
            "{:<14} {:>9} {:>9} {:>9} {:>13} {:>13} {:>11}  note",
            "checkpointing", "edges", "nodes", "step s", "counted GB", "engine GB", "peak RSS GB"
        );
    }
    for mode in modes {
        let mut points: Vec<(f64, f64)> = Vec::new();
        for &e in edges {
            let avail = available_bytes() as f64;
            let predicted = fit(&points)
                .map(|(slope, icpt)| slope * e as f64 + icpt)
                .or_else(|| points.last().map(|p| p.1 / p.0 * e as f64));
            let row = if predicted.is_some_and(|p| p > 0.85 * avail) {
                json!({
                    "checkpointing": mode.to_string(), "edges": e, "skipped": true,
                    "predicted_bytes": predicted, "available_bytes": avail,
                    "note": format!("predicted {:.1} GB > 85% of {:.1} GB available: not run", predicted.unwrap() / 1e9, avail / 1e9),
                })
            } else {
                let mut r = run_in_child(a, &exe, *mode, e)?;
                r["predicted_bytes"] = json!(predicted);
                points.push((e as f64, r["counted_peak_bytes"].as_f64().unwrap_or(0.0)));
                r
            };
            if !a.json.json {
                print_row(&row, e);
            }
            rows.push(row);
        }
    }
    Ok(rows)
}

fn print_row(row: &Value, e: usize) {
    let gb = |k: &str| row[k].as_f64().map_or("-".to_string(), |v| format!("{:.3}", v / 1e9));
    println!(
        "{:<14} {:>9} {:>9} {:>9} {:>13} {:>13} {:>11}  {}",
        row["checkpointing"].as_str().unwrap_or(""),
        e,
        row["nodes"].as_u64().map_or("-".into(), |v| v.to_string()),
        row["step_seconds"].as_f64().map_or("-".into(), |v| format!("{v:.2}")),
        gb("counted_peak_bytes"),
        gb("engine_bytes"),
        gb("peak_rss_bytes"),
        row["note"].as_str().unwrap_or("")
    );
}

/// Bytes per edge per mode: the slope of the counted peak against edges.
fn fits_per_mode(rows: &[Value], modes: &[Checkpointing]) -> serde_json::Map<String, Value> {
    let mut fits = serde_json::Map::new();
    for mode in modes {
        let pts: Vec<(f64, f64)> = ran(rows, &mode.to_string())
            .map(|r| (r["edges"].as_f64().unwrap(), r["counted_peak_bytes"].as_f64().unwrap()))
            .collect();
        if let Some((slope, icpt)) = fit(&pts) {
            fits.insert(mode.to_string(), json!({ "bytes_per_edge": slope, "intercept_bytes": icpt }));
        }
    }
    fits
}

/// Each mode's bytes per edge and step time (mean over the sizes both ran) as ratios to no
/// checkpointing's.
fn ratios_to_none(
    rows: &[Value],
    modes: &[Checkpointing],
    fits: &serde_json::Map<String, Value>,
) -> serde_json::Map<String, Value> {
    let time_ratio = |m: &str| -> Option<f64> {
        let t = |mode: &str| {
            ran(rows, mode)
                .map(|r| (r["edges"].as_u64().unwrap(), r["step_seconds"].as_f64().unwrap()))
                .collect::<Vec<_>>()
        };
        let (a, b) = (t(m), t("none"));
        let common: Vec<f64> =
            a.iter().filter_map(|(e, ta)| b.iter().find(|(eb, _)| eb == e).map(|(_, tb)| ta / tb)).collect();
        (!common.is_empty()).then(|| common.iter().sum::<f64>() / common.len() as f64)
    };
    let mut ratios = serde_json::Map::new();
    if let Some(none) = fits.get("none").and_then(|f| f["bytes_per_edge"].as_f64()) {
        for mode in modes {
            let m = mode.to_string();
            if let Some(bpe) = fits.get(&m).and_then(|f| f["bytes_per_edge"].as_f64()) {
                ratios.insert(
                    m.clone(),
                    json!({ "bytes_per_edge_ratio": bpe / none, "step_time_ratio": time_ratio(&m) }),
                );
            }
        }
    }
    ratios
}

/// The counted peak against edges, one curve per mode.
fn plot(dir: &std::path::Path, rows: &[Value], modes: &[Checkpointing]) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let series: Vec<(String, Vec<(f64, f64)>)> = modes
        .iter()
        .map(|m| {
            let pts = ran(rows, &m.to_string())
                .map(|r| (r["edges"].as_f64().unwrap() / 1e6, r["counted_peak_bytes"].as_f64().unwrap() / 1e9))
                .collect();
            (m.to_string(), pts)
        })
        .collect();
    let refs: Vec<(&str, Vec<(f64, f64)>)> = series.iter().map(|(n, p)| (n.as_str(), p.clone())).collect();
    trackgnn_train::plots::plot_series(
        &dir.join("memory_vs_edges"),
        "Training-step memory vs graph size",
        "edges [millions]",
        "counted peak [GB]",
        &refs,
        false,
    )?;
    Ok(())
}

pub fn run(a: BenchMemoryArgs) -> Result<ExitCode> {
    let modes: Vec<Checkpointing> = a
        .modes
        .split(',')
        .map(|m| m.trim().parse::<Checkpointing>().map_err(anyhow::Error::msg))
        .collect::<Result<_>>()?;
    let edges: Vec<usize> =
        a.edges.split(',').map(|e| e.trim().parse::<usize>().context("--edges")).collect::<Result<_>>()?;
    if let Some(only) = &a.only {
        let (m, e) = only.split_once('@').context("--only MODE@EDGES")?;
        let pool = thread_pool(a.threads.threads)?;
        let (mode, e): (Checkpointing, usize) = (m.parse().map_err(anyhow::Error::msg)?, e.parse()?);
        let row = pool.install(|| run_row(&a, mode, e));
        print_json(&row);
        return Ok(ExitCode::SUCCESS);
    }
    let rows = measure_rows(&a, &modes, &edges)?;
    let fits = fits_per_mode(&rows, &modes);
    let ratios = ratios_to_none(&rows, &modes, &fits);
    if let Some(dir) = &a.plot {
        plot(dir, &rows, &modes)?;
    }
    if a.json.json {
        print_json(
            &json!({ "rows": rows, "fits": fits, "ratios_to_none": ratios, "hidden": a.hidden, "iterations": a.iters }),
        );
    } else {
        for (m, f) in &fits {
            println!("{m:<14} {:.0} bytes per edge (fit)", f["bytes_per_edge"].as_f64().unwrap_or(f64::NAN));
        }
        for (m, r) in &ratios {
            println!(
                "{m:<14} bytes/edge ratio to none {:.3}, step time ratio {:.3}",
                r["bytes_per_edge_ratio"].as_f64().unwrap_or(f64::NAN),
                r["step_time_ratio"].as_f64().unwrap_or(f64::NAN)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
