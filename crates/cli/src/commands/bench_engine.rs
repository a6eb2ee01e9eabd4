//! `trackgnn bench engine`: the training step of the benchmark specification (docs/benchmarks.md;
//! and of the default model, and the unfused forward), timed as the spec asks: mean and min over 10 steps
//! after 2 warm-up steps, peak RSS, GFLOP/s and the share of time inside GEMM; per precision
//! (f32, bf16), the kernel path each product ran on and the step's GEMM-only time (the same
//! products alone, same shapes, same threads). The measurement: [`trackgnn_engine::bench`].

use std::process::{Command, ExitCode};

use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use serde_json::json;
use trackgnn_engine::bench::{StepFigures, StepRun, Variant, measure_step};
use trackgnn_engine::matmul_bf16::{Bf16Path, force_path};
use trackgnn_engine::{Checkpointing, Precision};

use crate::util::{print_json, thread_pool};

/// `trackgnn bench engine`.
#[derive(Debug, clap::Args)]
pub struct BenchEngineArgs {
    /// Run one variant only (in this process).
    #[arg(long, value_enum)]
    pub only: Option<Variant>,
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
    /// Activation checkpointing of the step, as `train --checkpointing` takes it: none,
    /// per-iteration or every:K, `+bf16` appended to keep the saved states in bf16.
    #[arg(long, visible_alias = "checkpointing", value_name = "MODE", default_value = "none")]
    pub checkpoint: Checkpointing,
    /// The kernel of the bf16 products instead of the one this CPU's rule chooses (to compare
    /// kernels on one machine); refused if the CPU cannot run it.
    #[arg(long, value_enum, value_name = "KERNEL")]
    pub bf16_kernel: Option<Bf16Path>,
    /// Where the steps run: cpu, or cuda:N in a build with the GPU backend (docs/gpu.md).
    #[arg(long, default_value = "cpu", value_name = "cpu|cuda:N")]
    pub device: trackgnn_engine::Device,
    #[command(flatten)]
    pub gpu: trackgnn_engine::bench::DeviceBench,
    #[command(flatten)]
    pub json: crate::cli::JsonArg,
}

pub fn run(a: BenchEngineArgs) -> Result<ExitCode> {
    if a.device != trackgnn_engine::Device::Cpu {
        anyhow::ensure!(a.only != Some(Variant::Unfused), "--only unfused is a CPU reference: not on a GPU");
        return gpu_bench(&a, a.device);
    }
    let pool = thread_pool(a.threads.threads)?;
    let threads = pool.current_num_threads();
    if let Some(k) = a.bf16_kernel {
        force_path(Some(k)).map_err(|why| anyhow::anyhow!("--bf16-kernel {}: {why}", flag(k)))?;
    }
    if let Some(v) = a.only {
        let precision = a.precision.unwrap_or_default();
        let run = StepRun { precision, checkpointing: a.checkpoint, steps: a.steps, warmup: a.warmup, threads };
        let r = pool.install(|| measure_step(v, run));
        if a.json.json {
            print_json(&serde_json::to_value(&r)?);
        } else {
            print!("{r}");
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
    let runs = [Variant::BenchSpec, Variant::Defaults, Variant::Acorn, Variant::Unfused]
        .into_iter()
        .flat_map(|v| precisions.iter().map(move |&p| (v, p)))
        // The unfused forward is a reference point in f32 only (unless asked for).
        .filter(|&(v, p)| v != Variant::Unfused || a.precision.is_some() || p == Precision::F32);
    for (v, precision) in runs {
        let name = flag(v);
        let mut cmd = Command::new(&exe);
        // No value here holds a space.
        let line = format!(
            "bench engine --json --only {name} --steps {} --warmup {} --precision {precision} --checkpoint {} --threads {threads}",
            a.steps, a.warmup, a.checkpoint
        );
        cmd.args(line.split(' '));
        if let Some(k) = a.bf16_kernel {
            cmd.args(["--bf16-kernel", &flag(k)]);
        }
        let out = cmd.output().context("running a benchmark variant")?;
        if !out.status.success() {
            bail!("variant {name} failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        let r: StepFigures = serde_json::from_slice(&out.stdout).context("variant output")?;
        if !a.json.json {
            print!("{r}");
        }
        rows.push(r);
    }
    if a.json.json {
        print_json(&json!({ "variants": rows }));
    }
    Ok(ExitCode::SUCCESS)
}

/// A flag's value as the command line writes it.
fn flag(v: impl ValueEnum) -> String {
    v.to_possible_value().expect("no value is skipped").get_name().to_owned()
}

/// `--device cuda:N`: BENCH_SPEC's and acorn's models (or `--only`'s) on GPU N.
#[cfg(feature = "cuda")]
fn gpu_bench(a: &BenchEngineArgs, device: trackgnn_engine::Device) -> Result<ExitCode> {
    let variants = a.only.map_or(vec![Variant::BenchSpec, Variant::Acorn], |v| vec![v]);
    let precisions = a.precision.map_or(vec![Precision::F32, Precision::Bf16], |p| vec![p]);
    let run = trackgnn_cuda::bench::BenchRun::sized(a.gpu, a.steps, a.warmup, a.checkpoint);
    let models: Vec<_> = variants.iter().map(|v| (v.name(), v.model())).collect();
    let rows = trackgnn_cuda::bench::measure_all(device, &models, &precisions, &run)?;
    match a.json.json {
        true => print_json(&json!({ "variants": rows })),
        false => rows.iter().for_each(|r| print!("{r}")),
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(not(feature = "cuda"))]
fn gpu_bench(_: &BenchEngineArgs, device: trackgnn_engine::Device) -> Result<ExitCode> {
    Err(trackgnn_engine::DeviceError::NotBuilt { device }.into())
}
