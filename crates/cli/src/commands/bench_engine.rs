//! `trackgnn bench engine`: the training step of `../shared/bench/BENCH_SPEC.md` (and of the
//! default model, and the unfused forward), timed as the spec asks: mean and min over 10 steps
//! after 2 warm-up steps, peak RSS, GFLOP/s and the share of time inside GEMM; per precision
//! (f32, bf16), the kernel path each product ran on and the step's GEMM-only time (the same
//! products alone, same shapes, same threads).

use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use trackgnn_engine::loss::bce_with_logits;
use trackgnn_engine::matmul::{replay, stats};
use trackgnn_engine::optim::{AdamW, AdamWConfig};
use trackgnn_engine::{ForwardCache, GraphInput, InteractionGnn, ModelConfig, Precision};
use trackgnn_trackml::rng::Rng;

use crate::cli::EngineVariant;
use crate::util::{peak_rss_bytes, print_json, thread_pool};

/// `trackgnn bench engine`.
#[derive(Debug, clap::Args)]
pub struct BenchEngineArgs {
    /// Run one variant only (in this process).
    #[arg(long, value_enum)]
    pub only: Option<EngineVariant>,
    /// Timed steps.
    #[arg(long, default_value_t = 10)]
    pub steps: usize,
    /// Warm-up steps before timing.
    #[arg(long, default_value_t = 2)]
    pub warmup: usize,
    #[command(flatten)]
    pub threads: crate::cli::ThreadsArg,
    /// Arithmetic of the matrix products: f32, or bf16 (mixed precision: bf16 operands with
    /// f32 accumulation; weights, optimiser, norms, loss and scores in f32). Default: f32 with --only, else both.
    #[arg(long, value_name = "f32|bf16")]
    pub precision: Option<trackgnn_engine::Precision>,
    #[command(flatten)]
    pub json: crate::cli::JsonArg,
}

/// The spec's graph: N = 20000, E = 160000, deterministic features, edges and labels.
pub fn spec_graph() -> (GraphInput<f32>, Vec<u8>) {
    const N: usize = 20_000;
    const E: usize = 160_000;
    let mut x = Vec::with_capacity(N * 3);
    for i in 0..N {
        x.push((i % 10) as f32 / 10.0);
        x.push((i as f64 * 0.37).sin() as f32);
        x.push((i as f64 * 0.11).cos() as f32);
    }
    let (mut src, mut dst, mut y) = (Vec::with_capacity(E), Vec::with_capacity(E), Vec::with_capacity(E));
    for k in 0..E {
        let s = (k * 7919) % N;
        let d = (s + 1 + (k * 104_729) % 97) % N;
        src.push(s as u32);
        dst.push(d as u32);
        y.push((s + d).is_multiple_of(5) as u8);
    }
    // Edge order is ours to choose (the loss is a mean over edges): sorted by destination,
    // aggregation and the split Linear's gathers read memory in order. Labels follow their edges.
    let mut order: Vec<usize> = (0..E).collect();
    order.sort_by_key(|&k| (dst[k], src[k], k));
    let (src, dst, y): (Vec<u32>, Vec<u32>, Vec<u8>) = order.iter().map(|&k| (src[k], dst[k], y[k])).fold(
        (Vec::with_capacity(E), Vec::with_capacity(E), Vec::with_capacity(E)),
        |mut acc, (s, d, l)| {
            acc.0.push(s);
            acc.1.push(d);
            acc.2.push(l);
            acc
        },
    );
    (GraphInput::new(N, &x, 3, &[], 0, &src, &dst), y)
}

/// Runs one variant in this process and returns its figures.
fn run_variant(v: EngineVariant, precision: Precision, steps: usize, warmup: usize, threads: usize) -> Value {
    let (g, y) = spec_graph();
    let cfg = match v {
        EngineVariant::BenchSpec | EngineVariant::Unfused => ModelConfig::bench_spec(),
        EngineVariant::Defaults => ModelConfig::default(),
    };
    let mut model = InteractionGnn::<f32>::new(cfg.clone(), 3, 0, &mut Rng::new(1));
    model.set_precision(precision);
    let mut opt = AdamW::new(model.params.len(), AdamWConfig { lr: 1e-3, weight_decay: 0.0, ..AdamWConfig::default() });
    let mut cache = ForwardCache::default();
    let mut dl = vec![0.0f32; g.num_edges()];
    let (mut times, mut losses, mut gemm_s, mut gemm_flops) = (Vec::new(), Vec::new(), 0.0, 0u64);
    let mut cache_bytes = 0;
    let mut paths = vec![(0u64, 0.0f64, 0u64); stats::GemmPath::ALL.len()];
    let mut products = Vec::new();
    for step in 0..warmup + steps {
        stats::enable(step >= warmup);
        // The last timed step records its products' shapes for the GEMM-only replay.
        stats::record(step + 1 == warmup + steps);
        let t = Instant::now();
        if v == EngineVariant::Unfused {
            let logits = model.forward_unfused(&g);
            losses.push(bce_with_logits(&logits, &y, None, 4.0, &mut dl));
        } else {
            model.forward(&g, &mut cache);
            losses.push(bce_with_logits(&cache.logits, &y, None, 4.0, &mut dl));
            model.params.zero_grad();
            model.backward(&g, &mut cache, &dl);
            let lr = opt_lr(&opt);
            opt.step(&mut model.params.data, &model.params.grad, lr);
            cache_bytes = cache.bytes();
        }
        let dt = t.elapsed().as_secs_f64();
        if step >= warmup {
            times.push(dt);
            let (s, f) = stats::read();
            gemm_s += s;
            gemm_flops += f;
            for (acc, &p) in paths.iter_mut().zip(&stats::GemmPath::ALL) {
                let (c, s, f) = stats::read_path(p);
                *acc = (acc.0 + c, acc.1 + s, acc.2 + f);
            }
        }
    }
    stats::record(false);
    products.extend(stats::recorded());
    stats::enable(false);
    // GEMM-only: the last step's products alone, once to warm up, then timed.
    let gemm_only = if products.is_empty() {
        f64::NAN
    } else {
        replay(&products);
        let reps = steps.clamp(1, 3);
        (0..reps).map(|_| replay(&products)).sum::<f64>() / reps as f64
    };
    let n_steps = times.len().max(1) as f64;
    let gemm_paths: Vec<Value> = paths
        .iter()
        .zip(&stats::GemmPath::ALL)
        .filter(|((calls, _, _), _)| *calls > 0)
        .map(|(&(calls, s, f), p)| {
            json!({
                "path": p.name(),
                "calls_per_step": calls as f64 / n_steps,
                "gflop_per_step": f as f64 / n_steps / 1e9,
                "thread_seconds_per_step": s / n_steps,
            })
        })
        .collect();
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    let min = times.iter().cloned().fold(f64::MAX, f64::min);
    let total: f64 = times.iter().sum();
    json!({
        "variant": format!("{v:?}").to_lowercase(),
        "precision": precision.to_string(),
        "what": if v == EngineVariant::Unfused { "forward only" } else { "forward + backward + Adam" },
        "config": cfg,
        "threads": threads,
        "parameters": model.params.len(),
        "nodes": g.num_nodes, "edges": g.num_edges(),
        "step_seconds_mean": mean, "step_seconds_min": min,
        "loss_first": losses.first(), "loss_last": losses.last(), "steps": warmup + steps,
        "gemm_gflop_per_step": gemm_flops as f64 / times.len() as f64 / 1e9,
        "gemm_gflops_per_second": gemm_flops as f64 / total / 1e9,
        "gemm_share": gemm_s / (total * threads as f64),
        "gemm_paths": gemm_paths,
        "gemm_only_seconds": gemm_only,
        "step_over_gemm_only": mean / gemm_only,
        "activation_cache_bytes": cache_bytes,
        "peak_rss_bytes": peak_rss_bytes(),
    })
}

fn opt_lr(opt: &AdamW) -> f64 {
    opt.config().lr
}

pub fn run(a: BenchEngineArgs) -> Result<ExitCode> {
    let pool = thread_pool(a.threads.threads)?;
    let threads = pool.current_num_threads();
    if let Some(v) = a.only {
        let precision = a.precision.unwrap_or_default();
        let r = pool.install(|| run_variant(v, precision, a.steps, a.warmup, threads));
        if a.json.json {
            print_json(&r);
        } else {
            print_row(&r);
        }
        return Ok(ExitCode::SUCCESS);
    }
    // Each variant in its own process, so each peak RSS is its own.
    let exe = std::env::current_exe().context("locating the trackgnn binary")?;
    let mut rows = Vec::new();
    let precisions = match a.precision {
        Some(p) => vec![p],
        None => vec![Precision::F32, Precision::Bf16],
    };
    let runs = [EngineVariant::BenchSpec, EngineVariant::Defaults, EngineVariant::Unfused]
        .into_iter()
        .flat_map(|v| precisions.iter().map(move |&p| (v, p)))
        // The unfused forward is a reference point in f32 only (unless asked for).
        .filter(|&(v, p)| v != EngineVariant::Unfused || a.precision.is_some() || p == Precision::F32);
    for (v, precision) in runs {
        let name = format!("{v:?}").to_lowercase().replace("benchspec", "bench-spec");
        let mut cmd = Command::new(&exe);
        cmd.args([
            "bench",
            "engine",
            "--only",
            &name,
            "--json",
            "--steps",
            &a.steps.to_string(),
            "--warmup",
            &a.warmup.to_string(),
            "--precision",
            &precision.to_string(),
        ]);
        cmd.args(["--threads", &threads.to_string()]);
        let out = cmd.output().context("running a benchmark variant")?;
        if !out.status.success() {
            bail!("variant {name} failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        let r: Value = serde_json::from_slice(&out.stdout).context("variant output")?;
        if !a.json.json {
            print_row(&r);
        }
        rows.push(r);
    }
    if a.json.json {
        print_json(&json!({ "variants": rows }));
    }
    Ok(ExitCode::SUCCESS)
}

fn print_row(r: &Value) {
    let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
    println!(
        "{:<10} {:<4} {:<27} {:>8} params  step mean {:.3} s  min {:.3} s  loss {:.4} -> {:.4}  GEMM {:.1} GFLOP/step at {:.0} GFLOP/s ({:.0}% of thread time)  GEMM-only {:.3} s (step / GEMM-only {:.2})  peak RSS {:.2} GB",
        r["variant"].as_str().unwrap_or("?"),
        r["precision"].as_str().unwrap_or("?"),
        r["what"].as_str().unwrap_or(""),
        r["parameters"],
        f("step_seconds_mean"),
        f("step_seconds_min"),
        f("loss_first"),
        f("loss_last"),
        f("gemm_gflop_per_step"),
        f("gemm_gflops_per_second"),
        100.0 * f("gemm_share"),
        f("gemm_only_seconds"),
        f("step_over_gemm_only"),
        f("peak_rss_bytes") / 1e9
    );
    for p in r["gemm_paths"].as_array().into_iter().flatten() {
        let g = |k: &str| p[k].as_f64().unwrap_or(f64::NAN);
        println!(
            "           products on {}: {:.0} calls, {:.1} GFLOP, {:.3} thread-s per step",
            p["path"].as_str().unwrap_or("?"),
            g("calls_per_step"),
            g("gflop_per_step"),
            g("thread_seconds_per_step")
        );
    }
}
