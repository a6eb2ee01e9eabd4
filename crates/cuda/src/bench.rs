//! `bench engine --device cuda`: the training step (forward, backward, AdamW) or the inference
//! of a model on the synthetic graph of BENCH_SPEC at any size, timed on the device with
//! synchronisation, beside its products alone (the same cuBLAS calls replayed), the bytes it
//! moves ([`crate::traffic`]) at the device's copy bandwidth and the backend's peak memory, and
//! one more step profiled call by call.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use trackgnn_engine::bench::{DeviceBench, spec_graph_sized};
use trackgnn_engine::optim::AdamWConfig;
use trackgnn_engine::{
    Checkpointing, Device, DeviceError, EdgeTargets, GnnExecutor, InteractionGnn, ModelConfig, Precision,
};
use trackgnn_trackml::rng::Rng;

use crate::backend::{Arg, Backend, BackendError, DevPtr, Gemm, MemoryUse};
use crate::executor::{DeviceExecutor, planned_step_bytes};

/// What [`measure`] runs.
#[derive(Clone, Debug)]
pub struct BenchRun {
    /// The variant's name (`bench_spec`, `acorn`, …).
    pub variant: String,
    /// Its model.
    pub model: ModelConfig,
    /// Arithmetic of the products.
    pub precision: Precision,
    /// Nodes of the synthetic graph.
    pub nodes: usize,
    /// Edges of the synthetic graph.
    pub edges: usize,
    /// Timed steps.
    pub steps: usize,
    /// Warm-up steps.
    pub warmup: usize,
    /// Time inference (the forward alone, nothing kept) instead of training steps.
    pub inference: bool,
    /// Activation checkpointing of the training step.
    pub checkpointing: Checkpointing,
}

impl BenchRun {
    /// Steps on the synthetic graph `graph` says, checkpointed as `checkpointing` says (the
    /// model and precision are set per row by `measure_all`, feature `cuda`).
    pub fn sized(graph: DeviceBench, steps: usize, warmup: usize, checkpointing: Checkpointing) -> Self {
        BenchRun {
            variant: String::new(),
            model: ModelConfig::default(),
            precision: Precision::F32,
            nodes: graph.nodes,
            edges: graph.edges,
            steps,
            warmup,
            inference: graph.inference,
            checkpointing,
        }
    }
}

/// One row of `bench engine --device cuda` (`--json`: one object; seconds, bytes).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GpuStepFigures {
    /// The device (`cuda:0 (NVIDIA H200)`).
    pub device: String,
    /// The variant.
    pub variant: String,
    /// `f32` or `bf16`.
    pub precision: String,
    /// `forward + backward + Adam` or `inference`.
    pub what: String,
    /// Activation checkpointing of the training step (`none`, `every:2+bf16`, …).
    pub checkpointing: String,
    /// Parameters.
    pub parameters: usize,
    /// Nodes.
    pub nodes: usize,
    /// Edges.
    pub edges: usize,
    /// Mean seconds per timed step (host to host: the graph uploaded, the loss on the device,
    /// the gradients copied back for the all-reduce and over again, the parameters after AdamW
    /// copied back).
    pub step_seconds_mean: f64,
    /// Fastest timed step.
    pub step_seconds_min: f64,
    /// Edges per second of the mean step.
    pub edges_per_second: f64,
    /// The loss of the first and last step (training).
    pub loss_first: Option<f64>,
    /// See `loss_first`.
    pub loss_last: Option<f64>,
    /// The last step's matrix products alone, replayed with the same shapes (training only).
    pub gemm_only_seconds: Option<f64>,
    /// Matrix products per step.
    pub gemm_calls_per_step: usize,
    /// The device's copy bandwidth (bytes read + written per second, a 1 GiB device copy).
    pub copy_bandwidth_bytes_per_second: f64,
    /// Bytes the last step's kernels moved through device memory ([`crate::traffic`]).
    pub kernel_bytes_per_step: u64,
    /// Bytes the last step's matrix products moved (operands, results, bf16 packing).
    pub gemm_bytes_per_step: u64,
    /// Both at the copy bandwidth: the step's time if it only moved its bytes.
    pub memory_bound_seconds: f64,
    /// The mean step over the larger of the products alone and the memory bound (issue 39's
    /// aim: within 2).
    pub step_over_bound: Option<f64>,
    /// The most bytes the backend held at once during the timed steps (its own allocations:
    /// activations, workspace, parameters, gradients, the graph).
    pub peak_memory_bytes: usize,
    /// The training step's peak as the memory planner predicts it ([`planned_step_bytes`]: the
    /// `--max-memory` budget's figure), to hold beside the measured one (training only).
    pub planned_peak_bytes: Option<usize>,
    /// One more step after the timed ones with every device call synchronised and timed alone:
    /// where the step's time goes, by kernel (and products, copies), slowest first.
    pub profile: Vec<ProfileRow>,
    /// The profiled step's calls added up (above the step: each call waits for the device).
    pub profiled_seconds: f64,
}

/// One line of a step's profile: the calls of one kernel (or the matrix products of one
/// arithmetic, or the copies of one direction) in one step, each synchronised.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProfileRow {
    /// The kernel's name, `cuBLAS products (f32)` / `(bf16)`, `copies host to device`, `copies
    /// device to host`, `copies device to device`, `memset`.
    pub name: String,
    /// Calls in the step.
    pub calls: usize,
    /// Their seconds, added up.
    pub seconds: f64,
    /// The bytes they moved (device memory as [`crate::traffic`] counts it; a host copy's
    /// bytes).
    pub bytes: u64,
    /// Bytes per second over the device's copy bandwidth (how near the memory's limit they
    /// ran; host copies against it too, though PCIe bounds them).
    pub fraction_of_copy_bandwidth: f64,
}

impl std::fmt::Display for GpuStepFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gib = |b: usize| b as f64 / (1u64 << 30) as f64;
        writeln!(
            f,
            "{} {} on {}: {} of {} nodes, {} edges ({} parameters)",
            self.variant, self.precision, self.device, self.what, self.nodes, self.edges, self.parameters
        )?;
        write!(
            f,
            "  step {:.4} s mean, {:.4} s min; {:.4} G edges/s",
            self.step_seconds_mean,
            self.step_seconds_min,
            self.edges_per_second / 1e9
        )?;
        if let (Some(a), Some(b)) = (self.loss_first, self.loss_last) {
            write!(f, "; loss {a:.5} -> {b:.5}")?;
        }
        writeln!(f)?;
        if let Some(g) = self.gemm_only_seconds {
            writeln!(
                f,
                "  products alone {g:.4} s ({} calls, {:.0}% of the step)",
                self.gemm_calls_per_step,
                100.0 * g / self.step_seconds_mean
            )?;
        }
        write!(f, "  peak memory {:.3} GiB", gib(self.peak_memory_bytes))?;
        if let Some(p) = self.planned_peak_bytes {
            write!(f, " (planned {:.3} GiB, checkpointing {})", gib(p), self.checkpointing)?;
        }
        writeln!(f, "; device copy bandwidth {:.0} GB/s", self.copy_bandwidth_bytes_per_second / 1e9)?;
        write!(
            f,
            "  bytes moved {:.3} GB (kernels {:.3}, products {:.3}): {:.4} s at the copy bandwidth",
            (self.kernel_bytes_per_step + self.gemm_bytes_per_step) as f64 / 1e9,
            self.kernel_bytes_per_step as f64 / 1e9,
            self.gemm_bytes_per_step as f64 / 1e9,
            self.memory_bound_seconds
        )?;
        match self.step_over_bound {
            Some(r) => writeln!(f, "; step / max(products alone, memory bound) = {r:.2}")?,
            None => writeln!(f)?,
        }
        if !self.profile.is_empty() {
            writeln!(f, "  one step, each call synchronised ({:.4} s in all), slowest first:", self.profiled_seconds)?;
        }
        for r in self.profile.iter().take(PROFILE_LINES) {
            writeln!(
                f,
                "    {:<28} {:>5} calls {:>9.5} s {:>5.1}%  {:>7.1} GB/s ({:.0}% of the copy bandwidth)",
                r.name,
                r.calls,
                r.seconds,
                100.0 * r.seconds / self.profiled_seconds.max(f64::MIN_POSITIVE),
                r.bytes as f64 / r.seconds.max(f64::MIN_POSITIVE) / 1e9,
                100.0 * r.fraction_of_copy_bandwidth
            )?;
        }
        Ok(())
    }
}

/// Profile lines printed (all of them go to `--json`).
const PROFILE_LINES: usize = 12;

/// Times `run` on `dev` (named `device`).
pub fn measure(dev: Arc<dyn Backend>, device: Device, run: &BenchRun) -> Result<GpuStepFigures, DeviceError> {
    let failed = |e: BackendError| DeviceError::Failed { device, message: e.to_string() };
    let recording =
        Arc::new(Recording { inner: dev.clone(), log: Mutex::new(None), profile: Mutex::new(None), edges: run.edges });
    let (g, y) = spec_graph_sized(run.nodes, run.edges);
    let mut model = InteractionGnn::<f32>::new(run.model.clone(), 3, 0, &mut Rng::new(1));
    model.set_precision(run.precision);
    model.checkpointing = run.checkpointing;
    let planned = (!run.inference).then(|| planned_step_bytes(&model, run.nodes, run.edges));
    let parameters = model.params.len();
    let adam = AdamWConfig { lr: 1e-3, weight_decay: 0.0, ..AdamWConfig::default() };
    let backend: Arc<dyn Backend> = recording.clone();
    let mut exec = DeviceExecutor::new(backend, device, model, adam)?;
    let weight = vec![1.0f32; g.num_edges()];
    let targets = EdgeTargets { target: &y, weight: &weight, pos_weight: 4.0, aux: None };
    let (mut times, mut losses) = (Vec::new(), Vec::new());
    for step in 0..run.warmup + run.steps {
        if step == run.warmup {
            dev.synchronize().map_err(failed)?;
            dev.reset_peak();
        }
        let last = step + 1 == run.warmup + run.steps;
        *recording.log.lock().unwrap_or_else(|e| e.into_inner()) = last.then(Log::default);
        let t = Instant::now();
        if run.inference {
            exec.infer(&g)?;
        } else {
            exec.zero_grad();
            losses.push(exec.loss_backward(&g, &targets, 1.0, 0.0)?.loss);
            exec.optimizer_step(adam.lr)?;
        }
        dev.synchronize().map_err(failed)?;
        if step >= run.warmup {
            times.push(t.elapsed().as_secs_f64());
        }
    }
    let MemoryUse { peak, .. } = dev.memory();
    let log = recording.log.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or_default();
    // The profiled step, after the peak was read (its extra waits change nothing it holds).
    *recording.profile.lock().unwrap_or_else(|e| e.into_inner()) = Some(Profile::default());
    if run.inference {
        exec.infer(&g)?;
    } else {
        exec.zero_grad();
        exec.loss_backward(&g, &targets, 1.0, 0.0)?;
        exec.optimizer_step(adam.lr)?;
    }
    let profile = recording.profile.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or_default();
    let gemms = if run.inference { Vec::new() } else { log.gemms };
    let gemm_only =
        if gemms.is_empty() { None } else { Some(replay(dev.as_ref(), &gemms, run.steps).map_err(failed)?) };
    let bandwidth = copy_bandwidth(dev.as_ref(), 1 << 29).map_err(failed)?;
    let mean = times.iter().sum::<f64>() / times.len().max(1) as f64;
    let memory_bound = (log.kernel_bytes + log.gemm_bytes) as f64 / bandwidth;
    let bound = gemm_only.unwrap_or(0.0).max(memory_bound);
    Ok(GpuStepFigures {
        device: dev.name(),
        variant: run.variant.clone(),
        precision: run.precision.to_string(),
        what: if run.inference { "inference" } else { "forward + backward + Adam" }.into(),
        checkpointing: run.checkpointing.to_string(),
        parameters,
        nodes: run.nodes,
        edges: run.edges,
        step_seconds_mean: mean,
        step_seconds_min: times.iter().cloned().fold(f64::INFINITY, f64::min),
        edges_per_second: run.edges as f64 / mean,
        loss_first: losses.first().copied(),
        loss_last: losses.last().copied(),
        gemm_only_seconds: gemm_only,
        gemm_calls_per_step: gemms.len(),
        copy_bandwidth_bytes_per_second: bandwidth,
        kernel_bytes_per_step: log.kernel_bytes,
        gemm_bytes_per_step: log.gemm_bytes,
        memory_bound_seconds: memory_bound,
        step_over_bound: (bound > 0.0).then(|| mean / bound),
        peak_memory_bytes: peak,
        planned_peak_bytes: planned,
        profiled_seconds: profile.values().map(|c| c.seconds).sum(),
        profile: profile_rows(profile, bandwidth),
    })
}

/// The profile's lines, slowest first.
fn profile_rows(profile: Profile, bandwidth: f64) -> Vec<ProfileRow> {
    let mut rows: Vec<ProfileRow> = profile
        .into_iter()
        .map(|(name, c)| ProfileRow {
            name,
            calls: c.calls,
            seconds: c.seconds,
            bytes: c.bytes,
            fraction_of_copy_bandwidth: c.bytes as f64 / c.seconds.max(f64::MIN_POSITIVE) / bandwidth,
        })
        .collect();
    rows.sort_by(|a, b| b.seconds.total_cmp(&a.seconds).then_with(|| a.name.cmp(&b.name)));
    rows
}

/// Seconds of `gemms` replayed alone (the mean of up to three replays after one): the same
/// shapes, strides and flags, on three buffers of this replay's own as large as the largest A,
/// B and C, since the step's buffers may be freed by now (transient workspace, a checkpointed
/// backward's recomputation).
fn replay(dev: &dyn Backend, gemms: &[Gemm], steps: usize) -> Result<f64, BackendError> {
    let mut sizes = [1usize; 3];
    for g in gemms {
        for (s, b) in sizes.iter_mut().zip(g.byte_spans()) {
            *s = (*s).max(b);
        }
    }
    let mut bufs = Vec::new();
    let run = (|| {
        for s in sizes {
            bufs.push(dev.alloc(s)?);
            dev.zero(*bufs.last().expect("pushed"), s)?;
        }
        let once = || -> Result<f64, BackendError> {
            let t = Instant::now();
            for g in gemms {
                dev.gemm(&Gemm { a: bufs[0], b: bufs[1], c: bufs[2], ..*g })?;
            }
            dev.synchronize()?;
            Ok(t.elapsed().as_secs_f64())
        };
        once()?;
        let reps = steps.clamp(1, 3);
        let mut total = 0.0;
        for _ in 0..reps {
            total += once()?;
        }
        Ok(total / reps as f64)
    })();
    bufs.into_iter().for_each(|b| dev.free(b));
    run
}

/// [`measure`] for each of `models` (name, configuration) in each of `precisions` on `device`
/// (a `cuda` one), the other settings from `base`.
#[cfg(feature = "cuda")]
pub fn measure_all(
    device: Device,
    models: &[(&str, ModelConfig)],
    precisions: &[Precision],
    base: &BenchRun,
) -> Result<Vec<GpuStepFigures>, DeviceError> {
    let (device, dev) = crate::register::open(device)?;
    let mut rows = Vec::new();
    for (name, model) in models {
        for &precision in precisions {
            let run = BenchRun { variant: name.to_string(), model: model.clone(), precision, ..base.clone() };
            rows.push(measure(dev.clone(), device, &run)?);
        }
    }
    Ok(rows)
}

/// Bytes read plus written per second copying a buffer of `bytes` into another on the device
/// (the best of three after one to warm up).
pub fn copy_bandwidth(dev: &dyn Backend, bytes: usize) -> Result<f64, BackendError> {
    let a = dev.alloc(bytes)?;
    let b = dev.alloc(bytes).inspect_err(|_| dev.free(a))?;
    let run = || -> Result<f64, BackendError> {
        let t = Instant::now();
        dev.copy(b, a, bytes)?;
        dev.synchronize()?;
        Ok(t.elapsed().as_secs_f64())
    };
    let best = (|| {
        run()?;
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            best = best.min(run()?);
        }
        Ok(best)
    })();
    dev.free(a);
    dev.free(b);
    Ok(2.0 * bytes as f64 / best?)
}

/// What [`Recording`] logs of a step: its products, and the bytes its kernels and products
/// move.
#[derive(Default)]
struct Log {
    gemms: Vec<Gemm>,
    kernel_bytes: u64,
    gemm_bytes: u64,
}

/// One profile line's sums.
#[derive(Default)]
struct Calls {
    calls: usize,
    seconds: f64,
    bytes: u64,
}

/// A profiled step: its calls by name.
type Profile = std::collections::BTreeMap<String, Calls>;

/// A backend that passes everything through and, while its log is on, keeps a copy of every
/// matrix product and counts the bytes moved (on a graph of `edges` edges); while its profile is
/// on, it synchronises before and after every call and times it.
struct Recording {
    inner: Arc<dyn Backend>,
    log: Mutex<Option<Log>>,
    profile: Mutex<Option<Profile>>,
    edges: usize,
}

impl Recording {
    fn profiling(&self) -> bool {
        self.profile.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    /// `call` timed alone (the device idle before, finished after) into the profile's line
    /// `name` when profiling; else just `call`.
    fn timed<R>(
        &self,
        name: impl FnOnce() -> String,
        bytes: u64,
        call: impl FnOnce() -> Result<R, BackendError>,
    ) -> Result<R, BackendError> {
        if !self.profiling() {
            return call();
        }
        self.inner.synchronize()?;
        let t = Instant::now();
        let r = call()?;
        self.inner.synchronize()?;
        let dt = t.elapsed().as_secs_f64();
        if let Some(p) = self.profile.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            let c = p.entry(name()).or_default();
            (c.calls, c.seconds, c.bytes) = (c.calls + 1, c.seconds + dt, c.bytes + bytes);
        }
        Ok(r)
    }
}

impl Backend for Recording {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn alloc(&self, bytes: usize) -> Result<DevPtr, BackendError> {
        self.inner.alloc(bytes)
    }
    fn free(&self, ptr: DevPtr) {
        self.inner.free(ptr)
    }
    fn upload(&self, dst: DevPtr, src: &[u8]) -> Result<(), BackendError> {
        self.timed(|| "copies host to device".into(), src.len() as u64, || self.inner.upload(dst, src))
    }
    fn download(&self, src: DevPtr, dst: &mut [u8]) -> Result<(), BackendError> {
        let bytes = dst.len() as u64;
        self.timed(|| "copies device to host".into(), bytes, || self.inner.download(src, dst))
    }
    fn zero(&self, ptr: DevPtr, bytes: usize) -> Result<(), BackendError> {
        self.timed(|| "memset".into(), bytes as u64, || self.inner.zero(ptr, bytes))
    }
    fn launch_checked(&self, kernel: usize, grid: u32, block: u32, args: &[Arg]) -> Result<(), BackendError> {
        let sig = &crate::kernels::KERNELS[kernel];
        let bytes = crate::traffic::kernel_bytes(sig, args, self.edges).unwrap_or(0);
        if let Some(log) = self.log.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            log.kernel_bytes += bytes;
        }
        self.timed(|| sig.name.into(), bytes, || self.inner.launch_checked(kernel, grid, block, args))
    }
    fn gemm(&self, g: &Gemm) -> Result<(), BackendError> {
        let bytes = crate::traffic::gemm_bytes(g);
        if let Some(log) = self.log.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            log.gemms.push(*g);
            log.gemm_bytes += bytes;
        }
        let name = || format!("cuBLAS products ({})", if g.bf16 { "bf16" } else { "f32" });
        self.timed(name, bytes, || self.inner.gemm(g))
    }
    fn copy(&self, dst: DevPtr, src: DevPtr, bytes: usize) -> Result<(), BackendError> {
        // Read and written.
        self.timed(|| "copies device to device".into(), 2 * bytes as u64, || self.inner.copy(dst, src, bytes))
    }
    fn synchronize(&self) -> Result<(), BackendError> {
        self.inner.synchronize()
    }
    fn memory(&self) -> MemoryUse {
        self.inner.memory()
    }
    fn reset_peak(&self) {
        self.inner.reset_peak()
    }
}
