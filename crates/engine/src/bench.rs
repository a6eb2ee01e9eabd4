//! Measurements of the engine for `trackgnn bench engine` and `bench memory`: the training
//! step of the benchmark specification (docs/benchmarks.md) on its graph ([`measure_step`]: time,
//! GEMM share and paths, the GEMM-only replay), and the memory of a step on synthetic graphs of growing size
//! ([`measure_memory`], with the bytes-per-edge fits of [`MemoryStudy`]). Each returns typed
//! figures whose JSON is the command's; the binary runs rows in child processes so each peak
//! RSS is its own, and prints.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use trackgnn_trackml::rng::Rng;

use crate::alloc::{self, peak_rss_bytes};
use crate::executor::{CpuExecutor, Device, DeviceError, GnnExecutor, executor_on};
use crate::gemm_replay::replay;
use crate::loss::bce_with_logits;
use crate::matmul::stats;
use crate::optim::{AdamW, AdamWConfig};
use crate::traffic;
use crate::{Checkpointing, EdgeTargets, ForwardCache, GraphInput, InteractionGnn, ModelConfig, Precision};

/// The model of an engine benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Variant {
    /// The benchmark specification's: H=64, 4 separate iterations, ReLU, LayerNorm, residual, sum, Adam.
    BenchSpec,
    /// trackgnn's default model (H=128, 8 recurrent iterations, SiLU, sum/mean/max/std).
    Defaults,
    /// acorn's TrackML InteractionGNN exactly (`ModelConfig::acorn()`: the defaults with nodes
    /// updated first, no residual, no output norm), as the PyTorch reference's `--model acorn`
    /// runs it.
    Acorn,
    // Forward only. (The doc line below is also `bench engine --help`'s text.)
    /// The benchmark model's forward without the split Linear and tiles (explicit concatenation).
    Unfused,
}

impl Variant {
    /// `benchspec`, `defaults` or `unfused` (the `variant` of the JSON).
    pub fn name(self) -> &'static str {
        match self {
            Variant::BenchSpec => "benchspec",
            Variant::Defaults => "defaults",
            Variant::Acorn => "acorn",
            Variant::Unfused => "unfused",
        }
    }

    /// Its model: BENCH_SPEC's (also the unfused forward's), trackgnn's defaults or acorn's.
    pub fn model(self) -> ModelConfig {
        match self {
            Variant::BenchSpec | Variant::Unfused => ModelConfig::bench_spec(),
            Variant::Defaults => ModelConfig::default(),
            Variant::Acorn => ModelConfig::acorn(),
        }
    }
}

/// What `bench engine --device cuda:N` runs besides the models: the synthetic graph's size
/// (the PyTorch reference's `--nodes`, `--edges`) and inference instead of training steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct DeviceBench {
    /// GPU: nodes of the synthetic graph (the PyTorch reference's --nodes; the CPU runs 20000).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 20_000))]
    pub nodes: usize,
    /// GPU: edges of the synthetic graph (as the PyTorch reference's --edges).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 160_000))]
    pub edges: usize,
    /// GPU: time inference (the forward alone, nothing kept) instead of training steps.
    #[cfg_attr(feature = "clap", arg(long))]
    pub inference: bool,
}

/// The spec's graph: N = 20000, E = 160000, deterministic features, edges and labels.
pub fn spec_graph() -> (GraphInput<f32>, Vec<u8>) {
    spec_graph_sized(20_000, 160_000)
}

/// The synthetic graph of BENCH_SPEC at other sizes: `N` nodes and `E` edges by the same
/// formulas (`tools/torch_reference/bench.py --nodes N --edges E` builds it too), edges sorted
/// by destination.
pub fn spec_graph_sized(n: usize, e: usize) -> (GraphInput<f32>, Vec<u8>) {
    let mut x = Vec::with_capacity(n * 3);
    for i in 0..n {
        x.push((i % 10) as f32 / 10.0);
        x.push((i as f64 * 0.37).sin() as f32);
        x.push((i as f64 * 0.11).cos() as f32);
    }
    let mut edges: Vec<(u32, u32, u8)> = (0..e)
        .map(|k| {
            let s = (k * 7919) % n;
            let d = (s + 1 + (k * 104_729) % 97) % n;
            (s as u32, d as u32, (s + d).is_multiple_of(5) as u8)
        })
        .collect();
    // Edge order is ours to choose (the loss is a mean over edges): sorted by destination,
    // aggregation and the split Linear's gathers read memory in order. Labels follow their
    // edges; a stable sort keeps the original order of equal (destination, source) pairs.
    edges.sort_by_key(|&(s, d, _)| (d, s));
    let src: Vec<u32> = edges.iter().map(|e| e.0).collect();
    let dst: Vec<u32> = edges.iter().map(|e| e.1).collect();
    let y: Vec<u8> = edges.iter().map(|e| e.2).collect();
    (GraphInput::new(n, &x, 3, &[], 0, &src, &dst), y)
}

/// The products that ran on one kernel path, per timed step.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GemmPathFigures {
    /// The kernel path.
    pub path: String,
    /// Calls per step.
    pub calls_per_step: f64,
    /// GFLOP per step.
    pub gflop_per_step: f64,
    /// Thread-seconds per step.
    pub thread_seconds_per_step: f64,
}

/// What [`measure_step`] measured (one row of `bench engine`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StepFigures {
    /// [`Variant::name`].
    pub variant: String,
    /// `f32` or `bf16`.
    pub precision: String,
    /// The activation checkpointing mode ([`Checkpointing`]'s text: `none`, `per-iteration`,
    /// `every:K`, `+bf16` appended). Rows of older binaries, without it, read as `none`.
    #[serde(default = "no_checkpointing")]
    pub checkpointing: String,
    /// `forward + backward + Adam`, or `forward only`.
    pub what: String,
    /// The model.
    pub config: ModelConfig,
    /// Worker threads.
    pub threads: usize,
    /// Parameters.
    pub parameters: usize,
    /// Nodes of the graph.
    pub nodes: usize,
    /// Edges of the graph.
    pub edges: usize,
    /// Mean seconds of a timed step.
    pub step_seconds_mean: Option<f64>,
    /// Fastest timed step.
    pub step_seconds_min: Option<f64>,
    /// Loss of the first step.
    pub loss_first: Option<f64>,
    /// Loss of the last step.
    pub loss_last: Option<f64>,
    /// Steps run (warm-up and timed).
    pub steps: usize,
    /// GFLOP of matrix products per step.
    pub gemm_gflop_per_step: Option<f64>,
    /// GFLOP/s of the products over the step time.
    pub gemm_gflops_per_second: Option<f64>,
    /// The products' share of the thread time.
    pub gemm_share: Option<f64>,
    /// Per kernel path.
    pub gemm_paths: Vec<GemmPathFigures>,
    /// Seconds of the last step's products replayed alone.
    pub gemm_only_seconds: Option<f64>,
    /// Step time / GEMM-only time.
    pub step_over_gemm_only: Option<f64>,
    /// Bytes the memory-bound passes read and write per step, counted from the tensors each
    /// touches ([`crate::traffic`]); `null` with activation checkpointing (not counted there).
    #[serde(default)]
    pub memory_bytes_per_step: Option<f64>,
    /// Those bytes per kind of pass.
    #[serde(default)]
    pub memory_passes: Vec<MemoryPassFigures>,
    /// The machine's memory bandwidth measured after the step: bytes read and written per second
    /// copying a buffer far larger than the last-level cache, with the step's threads
    /// ([`memory_bandwidth`]).
    #[serde(default)]
    pub memory_bandwidth_bytes_per_second: Option<f64>,
    /// The memory bound of the step's memory-bound passes: their bytes at that bandwidth.
    #[serde(default)]
    pub memory_bound_seconds: Option<f64>,
    /// The step's memory-bound remainder: mean step minus the products alone (GEMM-only).
    #[serde(default)]
    pub remainder_seconds: Option<f64>,
    /// Remainder / memory bound (1: the passes run at the memory's speed).
    #[serde(default)]
    pub remainder_over_memory_bound: Option<f64>,
    /// Bytes of the forward cache.
    pub activation_cache_bytes: usize,
    /// Peak RSS of the process.
    pub peak_rss_bytes: u64,
}

/// The bytes of one kind of memory-bound pass per step ([`crate::traffic::Pass`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MemoryPassFigures {
    /// [`crate::traffic::Pass::name`].
    pub pass: String,
    /// Bytes read and written per step.
    pub bytes_per_step: f64,
}

/// Bytes per buffer of [`memory_bandwidth`]'s copy in `bench engine`: two of them, 1 GiB, far
/// beyond any last-level cache we run on (300 MB on the Xeons).
pub const BANDWIDTH_BUFFER_BYTES: usize = 512 << 20;

/// The memory bandwidth with the current rayon pool's threads: bytes read plus bytes written
/// per second copying a buffer of `bytes` into another (STREAM's copy convention), each thread
/// its own contiguous half; the best of three copies after one that maps the pages.
pub fn memory_bandwidth(bytes: usize) -> f64 {
    use rayon::prelude::*;
    let n = bytes / 4;
    let src: Vec<f32> = (0..n).into_par_iter().map(|i| (i % 251) as f32).collect();
    let mut dst = vec![0.0f32; n];
    let part = n.div_ceil(rayon::current_num_threads()).max(1);
    let copy = |dst: &mut [f32]| {
        let t = Instant::now();
        dst.par_chunks_mut(part).zip(src.par_chunks(part)).for_each(|(d, s)| {
            // Pieces of 256 KiB: each thread streams through its half in order.
            d.chunks_mut(1 << 16).zip(s.chunks(1 << 16)).for_each(|(d, s)| d.copy_from_slice(s));
        });
        t.elapsed().as_secs_f64()
    };
    copy(&mut dst);
    let best = (0..3).map(|_| copy(&mut dst)).fold(f64::MAX, f64::min);
    std::hint::black_box(&dst);
    (2 * n * 4) as f64 / best
}

/// [`Checkpointing::NONE`]'s text (the default of [`StepFigures::checkpointing`]).
fn no_checkpointing() -> String {
    Checkpointing::NONE.to_string()
}

/// `Some(x)` if `x` is finite: non-finite figures are `null` in the JSON.
fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// The CPU engine's executor reports no errors (its `Result`s are for device backends).
const CPU: &str = "the CPU engine does not fail";

/// How [`measure_step`] runs: the arithmetic, the activation checkpointing, the steps.
#[derive(Clone, Copy, Debug)]
pub struct StepRun {
    /// Arithmetic of the matrix products.
    pub precision: Precision,
    /// Activation checkpointing (the forward-only [`Variant::Unfused`] keeps nothing either way).
    pub checkpointing: Checkpointing,
    /// Timed steps.
    pub steps: usize,
    /// Warm-up steps before them.
    pub warmup: usize,
    /// Worker threads of the current rayon pool.
    pub threads: usize,
}

/// Times `run.steps` training steps of `v` on [`spec_graph`] after `run.warmup` steps, in the
/// current rayon pool, with the GEMM statistics of [`stats`] on.
pub fn measure_step(v: Variant, run: StepRun) -> StepFigures {
    let StepRun { precision, checkpointing, steps, warmup, threads } = run;
    let (g, y) = spec_graph();
    let cfg = v.model();
    let mut model = InteractionGnn::<f32>::new(cfg.clone(), 3, 0, &mut Rng::new(1));
    model.set_precision(precision);
    model.checkpointing = checkpointing;
    let adam = AdamWConfig { lr: 1e-3, weight_decay: 0.0, ..AdamWConfig::default() };
    // The step goes through the device seam, as the trainer's does.
    let mut exec = CpuExecutor::new(model, adam);
    let mut dl = vec![0.0f32; g.num_edges()];
    let (mut times, mut losses, mut gemm_s, mut gemm_flops) = (Vec::new(), Vec::new(), 0.0, 0u64);
    let mut cache_bytes = 0;
    let mut paths = vec![(0u64, 0.0f64, 0u64); stats::GemmPath::ALL.len()];
    let mut traffic_bytes = [0u64; traffic::Pass::ALL.len()];
    traffic::take();
    for step in 0..warmup + steps {
        stats::enable(step >= warmup);
        traffic::enable(step >= warmup);
        // The last timed step records its products' shapes for the GEMM-only replay.
        stats::record(step + 1 == warmup + steps);
        let t = Instant::now();
        if v == Variant::Unfused {
            let logits = exec.model().forward_unfused(&g);
            losses.push(bce_with_logits(&logits, &y, None, 4.0, &mut dl));
        } else {
            exec.zero_grad();
            losses.push(bce_with_logits(exec.forward(&g).expect(CPU), &y, None, 4.0, &mut dl));
            exec.backward(&g, &dl).expect(CPU);
            exec.optimizer_step(adam.lr).expect(CPU);
            cache_bytes = exec.cache().bytes();
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
            for (acc, (_, b)) in traffic_bytes.iter_mut().zip(traffic::take()) {
                *acc += b;
            }
        }
    }
    traffic::enable(false);
    stats::record(false);
    let products = stats::recorded();
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
    let gemm_paths = paths
        .iter()
        .zip(&stats::GemmPath::ALL)
        .filter(|((calls, _, _), _)| *calls > 0)
        .map(|(&(calls, s, f), p)| GemmPathFigures {
            path: p.name().to_string(),
            calls_per_step: calls as f64 / n_steps,
            gflop_per_step: f as f64 / n_steps / 1e9,
            thread_seconds_per_step: s / n_steps,
        })
        .collect();
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    let total: f64 = times.iter().sum();
    // The traffic count covers the step without checkpointing (and not the unfused forward).
    let counted = !checkpointing.is_on() && v != Variant::Unfused;
    let memory_passes: Vec<MemoryPassFigures> = if counted {
        traffic::Pass::ALL
            .iter()
            .zip(traffic_bytes)
            .map(|(p, b)| MemoryPassFigures { pass: p.name().to_string(), bytes_per_step: b as f64 / n_steps })
            .collect()
    } else {
        Vec::new()
    };
    let memory_bytes = counted.then(|| memory_passes.iter().map(|p| p.bytes_per_step).sum::<f64>());
    let peak_rss = peak_rss_bytes();
    // After the peak RSS is read: the copy's buffers are not the step's memory.
    let bandwidth = finite(memory_bandwidth(BANDWIDTH_BUFFER_BYTES));
    let bound = memory_bytes.zip(bandwidth).map(|(b, bw)| b / bw);
    let remainder = finite(mean - gemm_only);
    StepFigures {
        variant: v.name().to_string(),
        precision: precision.to_string(),
        checkpointing: checkpointing.to_string(),
        what: if v == Variant::Unfused { "forward only" } else { "forward + backward + Adam" }.to_string(),
        config: cfg,
        threads,
        parameters: exec.params().len(),
        nodes: g.num_nodes,
        edges: g.num_edges(),
        step_seconds_mean: finite(mean),
        step_seconds_min: finite(times.iter().cloned().fold(f64::MAX, f64::min)),
        loss_first: losses.first().copied(),
        loss_last: losses.last().copied(),
        steps: warmup + steps,
        gemm_gflop_per_step: finite(gemm_flops as f64 / times.len() as f64 / 1e9),
        gemm_gflops_per_second: finite(gemm_flops as f64 / total / 1e9),
        gemm_share: finite(gemm_s / (total * threads as f64)),
        gemm_paths,
        gemm_only_seconds: finite(gemm_only),
        step_over_gemm_only: finite(mean / gemm_only),
        memory_bytes_per_step: memory_bytes,
        memory_passes,
        memory_bandwidth_bytes_per_second: bandwidth,
        memory_bound_seconds: bound,
        remainder_seconds: remainder,
        remainder_over_memory_bound: remainder.zip(bound).and_then(|(r, b)| finite(r / b)),
        activation_cache_bytes: cache_bytes,
        peak_rss_bytes: peak_rss,
    }
}

/// One line of `bench engine` text, then one per kernel path. (The parameter count is not
/// padded: the text has always printed it so.)
impl fmt::Display for StepFigures {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        let f = |x: Option<f64>| x.unwrap_or(f64::NAN);
        writeln!(
            out,
            "{:<10} {:<4} {:<27} {} params  checkpointing {}  step mean {:.3} s  min {:.3} s  loss {:.4} -> {:.4}  GEMM {:.1} GFLOP/step at {:.0} GFLOP/s ({:.0}% of thread time)  GEMM-only {:.3} s (step / GEMM-only {:.2})  peak RSS {:.2} GB",
            self.variant,
            self.precision,
            self.what,
            self.parameters,
            self.checkpointing,
            f(self.step_seconds_mean),
            f(self.step_seconds_min),
            f(self.loss_first),
            f(self.loss_last),
            f(self.gemm_gflop_per_step),
            f(self.gemm_gflops_per_second),
            100.0 * f(self.gemm_share),
            f(self.gemm_only_seconds),
            f(self.step_over_gemm_only),
            self.peak_rss_bytes as f64 / 1e9
        )?;
        for p in &self.gemm_paths {
            writeln!(
                out,
                "           products on {}: {:.0} calls, {:.1} GFLOP, {:.3} thread-s per step",
                p.path, p.calls_per_step, p.gflop_per_step, p.thread_seconds_per_step
            )?;
        }
        if let (Some(bytes), Some(bw)) = (self.memory_bytes_per_step, self.memory_bandwidth_bytes_per_second) {
            let passes: Vec<String> =
                self.memory_passes.iter().map(|p| format!("{} {:.2}", p.pass, p.bytes_per_step / 1e9)).collect();
            writeln!(
                out,
                "           memory-bound remainder (step - GEMM-only) {:.3} s against {:.2} GB at {:.1} GB/s = {:.3} s ({:.1}x); GB per pass: {}",
                f(self.remainder_seconds),
                bytes / 1e9,
                bw / 1e9,
                f(self.memory_bound_seconds),
                f(self.remainder_over_memory_bound),
                passes.join(", ")
            )?;
        }
        Ok(())
    }
}

/// A random graph with `e` edges and e / `epn` nodes, 3 node and 4 edge features, and labels
/// (10% true).
pub fn synthetic_graph(e: usize, epn: f64, seed: u64) -> (GraphInput<f32>, Vec<u8>) {
    let n = ((e as f64 / epn) as usize).max(2);
    let mut rng = Rng::new(seed);
    let x: Vec<f32> = (0..n * 3).map(|_| rng.normal() as f32).collect();
    let ea: Vec<f32> = (0..e * 4).map(|_| rng.normal() as f32).collect();
    let src: Vec<u32> = (0..e).map(|_| rng.below(n as u64) as u32).collect();
    let dst: Vec<u32> = src.iter().map(|&s| ((s as u64 + 1 + rng.below(n as u64 - 1)) % n as u64) as u32).collect();
    let y: Vec<u8> = (0..e).map(|_| rng.bernoulli(0.1) as u8).collect();
    (GraphInput::new(n, &x, 3, &ea, 4, &src, &dst), y)
}

/// What [`measure_memory`] measured: one row of `bench memory` that ran.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MemoryFigures {
    /// The checkpointing mode.
    pub checkpointing: String,
    /// Edges of the graph.
    pub edges: usize,
    /// Nodes of the graph.
    pub nodes: usize,
    /// Hidden width.
    pub hidden: usize,
    /// Message-passing iterations.
    pub iterations: usize,
    /// Where the steps ran (`cpu`, `cuda:0`).
    #[serde(default = "cpu_name")]
    pub device: String,
    /// Mean seconds of a timed step.
    pub step_seconds: Option<f64>,
    /// Peak bytes counted during the timed steps: on the CPU the heap's (the counting
    /// allocator's), on a GPU the device allocator's (the backend's own buffers, as Table 2
    /// reports a GPU's memory).
    pub counted_peak_bytes: u64,
    /// On a GPU, the device's planned peak of the same step (the `--max-memory` budget's
    /// figure), to hold beside the measured one; null on the CPU.
    #[serde(default)]
    pub planned_peak_bytes: Option<u64>,
    /// The engine's own count of its buffers, parameters and optimiser state.
    pub engine_bytes: u64,
    /// Peak RSS of the process.
    pub peak_rss_bytes: u64,
    /// Always false (a row that ran).
    pub skipped: bool,
}

fn cpu_name() -> String {
    Device::Cpu.to_string()
}

/// What one device's steps measured: the timed steps' seconds, the counted peak, the planned
/// peak (a GPU's) and the engine's largest count of its own bytes.
type StepMemory = (Vec<f64>, u64, Option<u64>, usize);

/// Runs one warm-up and `steps` timed training steps of a model (`hidden`, `iterations`,
/// checkpointing `mode`) on a [`synthetic_graph`] of `edges` edges on `device`, counting
/// memory (a GPU's from its allocator, [`GnnExecutor::take_peak_bytes`]).
pub fn measure_memory(
    mode: Checkpointing,
    edges: usize,
    edges_per_node: f64,
    (hidden, iterations): (usize, usize),
    steps: usize,
    device: Device,
) -> Result<MemoryFigures, DeviceError> {
    let (g, y) = synthetic_graph(edges, edges_per_node, 1);
    let cfg = ModelConfig { hidden, iterations, ..ModelConfig::default() };
    let mut model = InteractionGnn::<f32>::new(cfg, 3, 4, &mut Rng::new(1));
    model.checkpointing = mode;
    let (times, counted, planned, engine) = match device {
        Device::Cpu => cpu_step_memory(&g, &y, model, steps),
        _ => device_step_memory(&g, &y, model, steps, device)?,
    };
    Ok(MemoryFigures {
        checkpointing: mode.to_string(),
        edges,
        nodes: g.num_nodes,
        hidden,
        iterations,
        device: device.to_string(),
        step_seconds: finite(times.iter().sum::<f64>() / times.len().max(1) as f64),
        counted_peak_bytes: counted,
        planned_peak_bytes: planned,
        engine_bytes: engine as u64,
        peak_rss_bytes: peak_rss_bytes(),
        skipped: false,
    })
}

/// [`measure_memory`]'s steps on the CPU engine, the heap counted by the counting allocator.
fn cpu_step_memory(g: &GraphInput<f32>, y: &[u8], mut model: InteractionGnn<f32>, steps: usize) -> StepMemory {
    let mut opt = AdamW::new(model.params.len(), AdamWConfig::default());
    let mut cache = ForwardCache::default();
    let mut dl = vec![0.0f32; g.num_edges()];
    let heap_before = alloc::current_bytes();
    alloc::reset_peak();
    let mut times = Vec::new();
    let mut engine_peak = 0;
    for step in 0..1 + steps {
        let t = Instant::now();
        model.forward(g, &mut cache);
        bce_with_logits(&cache.logits, y, None, 1.0, &mut dl);
        model.params.zero_grad();
        model.backward(g, &mut cache, &dl);
        opt.step(&mut model.params.data, &model.params.grad, 1e-3);
        engine_peak = engine_peak.max(model.engine_bytes(&cache) + 3 * model.params.len() * 4);
        if step > 0 {
            times.push(t.elapsed().as_secs_f64());
        }
    }
    (times, alloc::peak_bytes().saturating_sub(heap_before) as u64, None, engine_peak)
}

/// [`measure_memory`]'s steps on a GPU through its executor: the peak from its allocator after
/// the warm-up step, beside its planned peak.
fn device_step_memory(
    g: &GraphInput<f32>,
    y: &[u8],
    model: InteractionGnn<f32>,
    steps: usize,
    device: Device,
) -> Result<StepMemory, DeviceError> {
    let params = model.params.len();
    let mut exec = executor_on(device, model, AdamWConfig::default())?;
    let planned = exec.estimate_step_bytes(g.num_nodes, g.num_edges()) as u64;
    let weight = vec![1.0f32; g.num_edges()];
    let targets = EdgeTargets { target: y, weight: &weight, pos_weight: 1.0, aux: None };
    let (mut times, mut engine_peak, mut peak) = (Vec::new(), 0, 0);
    for step in 0..1 + steps {
        let t = Instant::now();
        exec.zero_grad();
        exec.loss_backward(g, &targets, 1.0, 0.0)?;
        exec.optimizer_step(1e-3)?;
        engine_peak = engine_peak.max(exec.buffer_bytes() + 3 * params * 4);
        let step_peak = exec.take_peak_bytes().unwrap_or(0);
        if step > 0 {
            times.push(t.elapsed().as_secs_f64());
            peak = peak.max(step_peak);
        }
    }
    Ok((times, peak as u64, Some(planned), engine_peak))
}

/// One row of `bench memory`: measured, or skipped because it would not fit.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum MemoryRow {
    /// A row that ran.
    Ran {
        /// What it measured.
        #[serde(flatten)]
        figures: MemoryFigures,
        /// Its peak as predicted from the smaller rows of its mode, bytes.
        predicted_bytes: Option<f64>,
    },
    /// A row whose predicted peak exceeds 85% of the available memory.
    Skipped {
        /// The checkpointing mode.
        checkpointing: String,
        /// Edges of the graph.
        edges: usize,
        /// Always true.
        skipped: bool,
        /// The predicted peak, bytes.
        predicted_bytes: Option<f64>,
        /// Memory available, bytes.
        available_bytes: f64,
        /// Why it did not run.
        note: String,
    },
}

/// Least-squares slope and intercept of y against x (`None` below two distinct x).
pub fn fit_line(points: &[(f64, f64)]) -> Option<(f64, f64)> {
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

/// The predicted counted peak at `edges` from a mode's `(edges, bytes)` rows so far: a line
/// through them, or proportional to the one row.
pub fn predict_peak(points: &[(f64, f64)], edges: usize) -> Option<f64> {
    fit_line(points)
        .map(|(slope, icpt)| slope * edges as f64 + icpt)
        .or_else(|| points.last().map(|p| p.1 / p.0 * edges as f64))
}

impl MemoryRow {
    /// The row of `mode` at `edges` that is not run: its `predicted` peak exceeds 85% of
    /// `available` bytes.
    pub fn skipped(mode: Checkpointing, edges: usize, predicted: f64, available: f64) -> MemoryRow {
        MemoryRow::Skipped {
            checkpointing: mode.to_string(),
            edges,
            skipped: true,
            predicted_bytes: Some(predicted),
            available_bytes: available,
            note: format!("predicted {:.1} GB > 85% of {:.1} GB available: not run", predicted / 1e9, available / 1e9),
        }
    }

    /// The figures of a row that ran.
    pub fn ran(&self) -> Option<&MemoryFigures> {
        match self {
            MemoryRow::Ran { figures, .. } => Some(figures),
            MemoryRow::Skipped { .. } => None,
        }
    }
}

/// Bytes of memory the system could still give (Linux's `MemAvailable`; unlimited where it
/// cannot be read).
pub fn available_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(u64::MAX, |kb| kb * 1024)
}

/// The rows of every mode and size, in that order: each measured by `run` (in `trackgnn bench
/// memory`, a process of its own, so its peak RSS is its own) unless the peak predicted from
/// the mode's rows so far exceeds 85% of `available()` bytes ([`MemoryRow::skipped`], never
/// run into the OOM killer). `on_row` sees each row as it comes.
///
/// # Errors
/// The first error of `run`.
pub fn memory_rows<E>(
    modes: &[Checkpointing],
    edges: &[usize],
    available: impl Fn() -> u64,
    mut run: impl FnMut(Checkpointing, usize) -> Result<MemoryFigures, E>,
    mut on_row: impl FnMut(&MemoryRow),
) -> Result<Vec<MemoryRow>, E> {
    let mut rows = Vec::new();
    for &mode in modes {
        let mut points: Vec<(f64, f64)> = Vec::new();
        for &e in edges {
            let avail = available() as f64;
            let predicted = predict_peak(&points, e);
            let row = match predicted {
                Some(p) if p > 0.85 * avail => MemoryRow::skipped(mode, e, p, avail),
                _ => {
                    let figures = run(mode, e)?;
                    points.push((e as f64, figures.counted_peak_bytes as f64));
                    MemoryRow::Ran { figures, predicted_bytes: predicted }
                }
            };
            on_row(&row);
            rows.push(row);
        }
    }
    Ok(rows)
}

/// The header of the rows' text ([`MemoryRow`]'s `Display`).
pub fn memory_header() -> String {
    format!(
        "{:<14} {:>9} {:>9} {:>9} {:>13} {:>13} {:>11}  note",
        "checkpointing", "edges", "nodes", "step s", "counted GB", "engine GB", "peak RSS GB"
    )
}

impl fmt::Display for MemoryRow {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gb = |v: Option<u64>| v.map_or("-".to_string(), |v| format!("{:.3}", v as f64 / 1e9));
        let (mode, edges, r, note) = match self {
            MemoryRow::Ran { figures: f, .. } => {
                let note = f.planned_peak_bytes.map_or(String::new(), |p| {
                    format!("{}: counted = device peak; planned {:.3} GB", f.device, p as f64 / 1e9)
                });
                (&f.checkpointing, f.edges, Some(f), note)
            }
            MemoryRow::Skipped { checkpointing, edges, note, .. } => (checkpointing, *edges, None, note.clone()),
        };
        write!(
            out,
            "{:<14} {:>9} {:>9} {:>9} {:>13} {:>13} {:>11}  {}",
            mode,
            edges,
            r.map_or("-".into(), |r| r.nodes.to_string()),
            r.and_then(|r| r.step_seconds).map_or("-".into(), |v| format!("{v:.2}")),
            gb(r.map(|r| r.counted_peak_bytes)),
            gb(r.map(|r| r.engine_bytes)),
            gb(r.map(|r| r.peak_rss_bytes)),
            note
        )
    }
}

/// A mode's counted peak against edges, fitted by a line.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct BytesPerEdge {
    /// The slope.
    pub bytes_per_edge: f64,
    /// The intercept.
    pub intercept_bytes: f64,
}

/// A mode against no checkpointing.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct RatioToNone {
    /// Bytes per edge / no checkpointing's.
    pub bytes_per_edge_ratio: f64,
    /// Step time / no checkpointing's, mean over the sizes both ran.
    pub step_time_ratio: Option<f64>,
}

/// The result of `bench memory`: the rows, the fits per mode, the ratios to no checkpointing.
#[derive(Clone, Debug, Serialize)]
pub struct MemoryStudy {
    /// Every row, per mode then size.
    pub rows: Vec<MemoryRow>,
    /// Bytes per edge of each mode with two rows or more.
    pub fits: BTreeMap<String, BytesPerEdge>,
    /// Ratios of each fitted mode to `none`.
    pub ratios_to_none: BTreeMap<String, RatioToNone>,
    /// Hidden width.
    pub hidden: usize,
    /// Message-passing iterations.
    pub iterations: usize,
}

impl MemoryStudy {
    /// The fits and ratios of `rows` of the modes `modes`.
    pub fn new(rows: Vec<MemoryRow>, modes: &[Checkpointing], hidden: usize, iterations: usize) -> MemoryStudy {
        let mut fits = BTreeMap::new();
        for mode in modes {
            let pts: Vec<(f64, f64)> =
                ran(&rows, &mode.to_string()).map(|r| (r.edges as f64, r.counted_peak_bytes as f64)).collect();
            if let Some((slope, icpt)) = fit_line(&pts) {
                fits.insert(mode.to_string(), BytesPerEdge { bytes_per_edge: slope, intercept_bytes: icpt });
            }
        }
        let time_ratio = |m: &str| -> Option<f64> {
            let t = |mode: &str| ran(&rows, mode).map(|r| (r.edges, r.step_seconds)).collect::<Vec<_>>();
            let (a, b) = (t(m), t("none"));
            let common: Vec<f64> = a
                .iter()
                .filter_map(|(e, ta)| {
                    b.iter().find(|(eb, _)| eb == e).map(|(_, tb)| ta.unwrap_or(f64::NAN) / tb.unwrap_or(f64::NAN))
                })
                .collect();
            (!common.is_empty()).then(|| common.iter().sum::<f64>() / common.len() as f64)
        };
        let mut ratios_to_none = BTreeMap::new();
        if let Some(none) = fits.get("none").map(|f| f.bytes_per_edge) {
            for mode in modes {
                let m = mode.to_string();
                if let Some(bpe) = fits.get(&m).map(|f| f.bytes_per_edge) {
                    let step_time_ratio = time_ratio(&m).and_then(finite);
                    ratios_to_none.insert(m.clone(), RatioToNone { bytes_per_edge_ratio: bpe / none, step_time_ratio });
                }
            }
        }
        MemoryStudy { rows, fits, ratios_to_none, hidden, iterations }
    }

    /// The `(edges, counted peak bytes)` of a mode's rows that ran.
    pub fn counted_peaks(&self, mode: &str) -> Vec<(f64, f64)> {
        ran(&self.rows, mode).map(|r| (r.edges as f64, r.counted_peak_bytes as f64)).collect()
    }
}

/// `x`, or NaN where the JSON has `null`.
fn nan_unless_finite(x: f64) -> f64 {
    if x.is_finite() { x } else { f64::NAN }
}

/// The rows of `mode` that ran.
fn ran<'r>(rows: &'r [MemoryRow], mode: &str) -> impl Iterator<Item = &'r MemoryFigures> {
    rows.iter().filter_map(MemoryRow::ran).filter(move |r| r.checkpointing == mode)
}

/// The fits and ratios, one line each (the rows are printed as they come).
impl fmt::Display for MemoryStudy {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (m, f) in &self.fits {
            writeln!(out, "{m:<14} {:.0} bytes per edge (fit)", nan_unless_finite(f.bytes_per_edge))?;
        }
        for (m, r) in &self.ratios_to_none {
            writeln!(
                out,
                "{m:<14} bytes/edge ratio to none {:.3}, step time ratio {:.3}",
                nan_unless_finite(r.bytes_per_edge_ratio),
                r.step_time_ratio.unwrap_or(f64::NAN)
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_fit_and_peak_prediction() {
        assert_eq!(fit_line(&[(1.0, 3.0), (3.0, 7.0)]), Some((2.0, 1.0)));
        assert_eq!(fit_line(&[(1.0, 3.0), (1.0, 5.0)]), None, "no spread in x");
        assert_eq!(fit_line(&[(1.0, 3.0)]), None);
        assert_eq!(predict_peak(&[], 10), None);
        assert_eq!(predict_peak(&[(2.0, 8.0)], 10), Some(40.0));
        assert_eq!(predict_peak(&[(1.0, 3.0), (3.0, 7.0)], 10), Some(21.0));
    }

    #[test]
    fn rows_predicted_beyond_the_available_memory_are_skipped_not_run() {
        let figures = |mode: Checkpointing, e: usize| MemoryFigures {
            checkpointing: mode.to_string(),
            edges: e,
            nodes: e / 15,
            hidden: 8,
            iterations: 1,
            device: cpu_name(),
            step_seconds: Some(0.1),
            counted_peak_bytes: 100 * e as u64,
            planned_peak_bytes: None,
            engine_bytes: 0,
            peak_rss_bytes: 0,
            skipped: false,
        };
        let mut ran = Vec::new();
        let mut seen = 0;
        // 100 bytes per edge, 50 kB available: 400 edges (40 kB) run, 1000 edges (100 kB) do not.
        let rows = memory_rows(
            &[Checkpointing::NONE],
            &[100, 200, 400, 1000],
            || 50_000,
            |m, e| -> Result<MemoryFigures, ()> {
                ran.push(e);
                Ok(figures(m, e))
            },
            |_| seen += 1,
        )
        .unwrap();
        assert_eq!((ran, seen), (vec![100, 200, 400], 4));
        assert!(
            matches!(&rows[3], MemoryRow::Skipped { predicted_bytes: Some(p), .. } if (p - 100_000.0).abs() < 1e-6)
        );
        assert!(matches!(rows[2], MemoryRow::Ran { predicted_bytes: Some(_), .. }));
        assert!(available_bytes() > 0);
        let failed = memory_rows(&[Checkpointing::NONE], &[100], || u64::MAX, |_, _| Err("no"), |_| {});
        assert_eq!(failed.unwrap_err(), "no");
    }

    #[test]
    fn graphs_are_deterministic_and_sorted() {
        let (g, y) = synthetic_graph(300, 15.0, 1);
        assert_eq!((g.num_nodes, g.num_edges(), y.len()), (20, 300, 300));
        assert!(g.src.iter().zip(&g.dst).all(|(s, d)| s != d), "no self-loops");
        let (a, _) = synthetic_graph(300, 15.0, 1);
        assert_eq!(a.src, g.src);
        let (s, ys) = spec_graph();
        assert_eq!((s.num_nodes, s.num_edges(), ys.len()), (20_000, 160_000, 160_000));
        assert!(s.dst.windows(2).all(|w| w[0] <= w[1]), "sorted by destination");
    }

    #[test]
    fn memory_rows_fit_per_mode() {
        let row = |mode: Checkpointing, edges: usize, bytes: u64, secs: f64| MemoryRow::Ran {
            figures: MemoryFigures {
                checkpointing: mode.to_string(),
                edges,
                nodes: edges / 10,
                hidden: 8,
                iterations: 1,
                device: cpu_name(),
                step_seconds: Some(secs),
                counted_peak_bytes: bytes,
                planned_peak_bytes: None,
                engine_bytes: bytes,
                peak_rss_bytes: bytes,
                skipped: false,
            },
            predicted_bytes: None,
        };
        let (none, per) = (Checkpointing::NONE, Checkpointing::PER_ITERATION);
        let rows = vec![
            row(none, 100, 1100, 1.0),
            row(none, 200, 2100, 2.0),
            row(per, 100, 600, 1.5),
            row(per, 200, 1100, 3.0),
            MemoryRow::skipped(per, 400, 5e12, 1e12),
        ];
        let m = MemoryStudy::new(rows, &[none, per], 8, 1);
        assert!((m.fits["none"].bytes_per_edge - 10.0).abs() < 1e-9);
        assert!((m.fits["per-iteration"].bytes_per_edge - 5.0).abs() < 1e-9);
        let r = m.ratios_to_none["per-iteration"];
        assert!((r.bytes_per_edge_ratio - 0.5).abs() < 1e-9 && (r.step_time_ratio.unwrap() - 1.5).abs() < 1e-9);
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(json["rows"][4]["skipped"], true);
        assert!(json["rows"][0]["predicted_bytes"].is_null() && json["rows"][0]["nodes"] == 10);
        assert!(m.rows[4].to_string().contains("not run"));
        assert!(m.to_string().contains("per-iteration  5 bytes per edge (fit)"), "{m}");
    }
}
