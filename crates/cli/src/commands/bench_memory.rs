//! `trackgnn bench memory`: step time, counted peak bytes and peak RSS of training steps on
//! graphs of growing size, with and without activation checkpointing; the fitted bytes per edge;
//! rows that would not fit in free memory are predicted and skipped, never run into the OOM
//! killer. Each row runs in its own process so its peak RSS is its own. The measurement and
//! the fits: [`trackgnn_engine::bench`].

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use anyhow::{Context, Result};
use trackgnn_engine::Checkpointing;
use trackgnn_engine::bench::{
    MemoryFigures, MemoryRow, MemoryStudy, available_bytes, measure_memory, memory_header, memory_rows,
};

use crate::util::{print_json, thread_pool};
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
    /// Where the steps run: cpu, or cuda:N (the GPU allocator's peak; docs/gpu.md).
    #[arg(long, default_value = "cpu", value_name = "cpu|cuda:N")]
    pub device: trackgnn_engine::Device,
    /// Directory for the memory-vs-size plot.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Run one row `MODE@EDGES` in this process (used internally).
    #[arg(long, hide = true)]
    pub only: Option<String>,
    #[command(flatten)]
    pub json: crate::cli::JsonArg,
}

/// One row of `mode` at `edges` edges in a child process (`bench memory --only`), so its peak
/// RSS is its own.
fn run_in_child(a: &BenchMemoryArgs, exe: &std::path::Path, mode: Checkpointing, e: usize) -> Result<MemoryFigures> {
    let mut cmd = Command::new(exe);
    cmd.args(["bench", "memory", "--only", &format!("{mode}@{e}"), "--hidden", &a.hidden.to_string()]);
    cmd.args(["--iters", &a.iters.to_string(), "--steps", &a.steps.to_string()]);
    cmd.args(["--edges-per-node", &a.edges_per_node.to_string(), "--device", &a.device.to_string()]);
    if let Some(t) = a.threads.threads {
        cmd.args(["--threads", &t.to_string()]);
    }
    let out = cmd.output().context("running a memory row")?;
    let why = String::from_utf8_lossy(&out.stderr).trim().trim_start_matches("error: ").to_owned();
    anyhow::ensure!(out.status.success(), "row {mode} @ {e} edges failed: {why}");
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// The rows of every mode and size ([`memory_rows`]), each in a child process, printed as
/// they come (without `--json`).
fn measure_rows(a: &BenchMemoryArgs, modes: &[Checkpointing], edges: &[usize]) -> Result<Vec<MemoryRow>> {
    let exe = std::env::current_exe().context("locating the trackgnn binary")?;
    if !a.json.json {
        println!("{}", memory_header());
    }
    let print = |row: &MemoryRow| {
        if !a.json.json {
            println!("{row}");
        }
    };
    memory_rows(modes, edges, available_bytes, |mode, e| run_in_child(a, &exe, mode, e), print)
}

/// The counted peak against edges, one curve per mode.
fn plot(dir: &std::path::Path, m: &MemoryStudy, modes: &[Checkpointing]) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let series: Vec<(String, Vec<(f64, f64)>)> = modes
        .iter()
        .map(|mode| {
            let pts = m.counted_peaks(&mode.to_string()).into_iter().map(|(e, b)| (e / 1e6, b / 1e9)).collect();
            (mode.to_string(), pts)
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
        let row = pool.install(|| measure_memory(mode, e, a.edges_per_node, (a.hidden, a.iters), a.steps, a.device))?;
        print_json(&serde_json::to_value(&row)?);
        return Ok(ExitCode::SUCCESS);
    }
    let rows = measure_rows(&a, &modes, &edges)?;
    let study = MemoryStudy::new(rows, &modes, a.hidden, a.iters);
    if let Some(dir) = &a.plot {
        plot(dir, &study, &modes)?;
    }
    if a.json.json {
        print_json(&serde_json::to_value(&study)?);
    } else {
        print!("{study}");
    }
    Ok(ExitCode::SUCCESS)
}
