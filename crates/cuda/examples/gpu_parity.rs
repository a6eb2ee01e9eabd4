//! The GPU checks of the CUDA backend, parity first (run by `tools/gpu_check.sh` on a GPU
//! machine): for four option sets (trackgnn's default model, acorn's, BENCH_SPEC's and one with
//! the remaining options) in f32 and bf16, on a random graph of the parity size (300 nodes, 2400
//! edges):
//! - every node and edge state h_k, e_k, the logits and every parameter's gradient against the
//!   CPU engine (f32 within 1e-4 of each tensor's scale; bf16 within 5%, the CPU bf16 path's
//!   stated bound);
//! - two runs on the GPU giving the same bits;
//! - 200 training steps (AdamW) on both, their losses side by side (the GPU's loss on the
//!   device), then the GPU model's validation figures from the device against the host's
//!   from its logits (counts and AUC the same, the loss within 1e-6).
//!
//! Writes `parity.json` and `parity.md` into `--out DIR`; exit code 0 when everything passed.
//!
//!     cargo build --release --features cuda --example gpu_parity -p trackgnn-cuda
//!     gpu_parity --out DIR [--device N] [--steps 200] [--emulator]
//!
//! `--emulator` runs the same checks on the kernel emulator instead of a GPU, with the models
//! at hidden width 16 and two iterations on a graph of 40 nodes and 160 edges (the emulator is
//! slow): a check of this program itself on a machine without a GPU.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use serde_json::json;
use trackgnn_cuda::backward::Workspace;
use trackgnn_cuda::testing::{max_rel_diff, option_sets, random_graph};
use trackgnn_cuda::{Backend, DevBuf, DeviceCache, DeviceExecutor, DeviceGraph, DeviceModel};
use trackgnn_engine::graph_loss::host_validate_graph;
use trackgnn_engine::optim::AdamWConfig;
use trackgnn_engine::{
    CpuExecutor, Device, EdgeTargets, ForwardCache, GnnExecutor, GraphInput, InteractionGnn, Precision,
};
use trackgnn_trackml::rng::Rng;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    let Some(out) = value("--out").map(PathBuf::from) else {
        eprintln!("usage: gpu_parity --out DIR [--device N] [--steps 200] [--emulator]");
        return ExitCode::from(2);
    };
    let ordinal: usize = value("--device").map_or(0, |v| v.parse().expect("--device N"));
    let steps: usize = value("--steps").map_or(200, |v| v.parse().expect("--steps N"));
    let emulator = args.iter().any(|a| a == "--emulator");
    match run(&out, ordinal, steps, emulator) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("gpu_parity: {e}");
            ExitCode::from(2)
        }
    }
}

/// One forward and backward on the device: logits, gradients, the forward's buffers.
type Pass = (Vec<f32>, Vec<f32>, DeviceCache);

/// [`train_both`]'s losses (CPU, GPU), whether the device's validation figures are the host's,
/// and those figures.
type Trained = (Vec<f64>, Vec<f64>, bool, serde_json::Value);

/// max |a − b| over the largest |b| (at least 1e-3).
fn rel(a: &[f32], b: &[f32]) -> f64 {
    f64::from(max_rel_diff(a, b))
}

fn run(
    out: &std::path::Path,
    ordinal: usize,
    steps: usize,
    emulator: bool,
) -> Result<bool, Box<dyn std::error::Error>> {
    std::fs::create_dir_all(out)?;
    let dev: Arc<dyn Backend> =
        if emulator { Arc::new(trackgnn_cuda::Emulator::new()) } else { trackgnn_cuda::gpu(ordinal)? };
    let mut checks = Vec::new();
    let mut curves = Vec::new();
    let mut table = format!(
        "| option set | precision | logits | worst state | worst gradient | same bits | loss after {steps} steps (cpu / gpu) | validation figures = host's | pass |\n|---|---|---|---|---|---|---|---|---|\n"
    );
    let mut all_pass = true;
    let (nodes, edges) = if emulator { (40, 160) } else { (300, 2400) };
    for (name, mut cfg, edge_dim) in option_sets() {
        if emulator {
            (cfg.hidden, cfg.iterations) = (16, 2);
        }
        for precision in [Precision::F32, Precision::Bf16] {
            let tol = if precision == Precision::F32 { 1e-4 } else { 5e-2 };
            let (g, y) = random_graph(nodes, edges, edge_dim, 7);
            let mut model = InteractionGnn::<f32>::new(cfg.clone(), 3, edge_dim, &mut Rng::new(11));
            model.set_precision(precision);
            let mut rng = Rng::new(9);
            let dlogits: Vec<f32> = (0..edges).map(|_| rng.range(-1.0, 1.0) as f32 / edges as f32).collect();
            let daux: Vec<f32> = (0..edges).map(|_| rng.range(-1.0, 1.0) as f32 / edges as f32).collect();
            let mut cpu = ForwardCache::default();
            model.forward(&g, &mut cpu);
            model.params.zero_grad();
            model.backward_aux(&g, &mut cpu, &dlogits, cfg.aux_pt.then_some(&daux[..]));

            let dm = DeviceModel::upload(&dev, &model)?;
            let dg = DeviceGraph::upload(&dev, &g, dm.widest_row())?;
            let dl = DevBuf::from_host(&dev, &dlogits)?;
            let da = DevBuf::from_host(&dev, &daux)?;
            let pass_once = || -> Result<Pass, Box<dyn std::error::Error>> {
                let mut cache = DeviceCache::default();
                dm.forward(&dg, &mut cache)?;
                let grad = DevBuf::<f32>::zeros(&dev, model.params.len())?;
                dm.backward(
                    &dg,
                    &cache,
                    dl.ptr(),
                    cfg.aux_pt.then(|| da.ptr()),
                    grad.ptr(),
                    &mut Workspace::default(),
                )?;
                let logits = cache.logits.buf().expect("logits").to_host()?;
                Ok((logits, grad.to_host()?, cache))
            };
            let (logits, grad, cache) = pass_once()?;
            let (logits2, grad2, _) = pass_once()?;
            let same_bits = logits.iter().map(|v| v.to_bits()).eq(logits2.iter().map(|v| v.to_bits()))
                && grad.iter().map(|v| v.to_bits()).eq(grad2.iter().map(|v| v.to_bits()));
            let logits_rel = rel(&logits, &cpu.logits);
            let mut states = Vec::new();
            for (k, (d, c)) in cache.h.iter().zip(&cpu.h).enumerate() {
                states.push((format!("h_{k}"), rel(&d.buf().expect("h").to_host()?, c)));
            }
            for (k, (d, c)) in cache.e.iter().zip(&cpu.e).enumerate() {
                states.push((format!("e_{k}"), rel(&d.buf().expect("e").to_host()?, c)));
            }
            let tensors: Vec<(String, f64)> = model
                .params
                .specs
                .iter()
                .map(|s| (s.name.clone(), rel(&grad[s.range()], &model.params.grad[s.range()])))
                .collect();
            let worst = |v: &[(String, f64)]| {
                v.iter().cloned().fold((String::new(), 0.0), |a, b| if b.1 > a.1 { b } else { a })
            };
            let (ws, wsv) = worst(&states);
            let (wt, wtv) = worst(&tensors);
            // `steps` steps on both, from the same weights.
            let (losses_cpu, losses_gpu, figures_same, figures) = train_both(&dev, ordinal, &model, &g, &y, steps)?;
            let last = |v: &[f64]| v.last().copied().unwrap_or(f64::NAN);
            let curve_rel =
                losses_cpu.iter().zip(&losses_gpu).map(|(a, b)| (a - b).abs() / a.abs().max(1e-6)).fold(0.0, f64::max);
            let pass = logits_rel < tol
                && wsv < tol
                && wtv < tol
                && same_bits
                && figures_same
                && last(&losses_gpu) < losses_gpu[0];
            all_pass &= pass;
            writeln!(
                table,
                "| {name} | {precision} | {logits_rel:.2e} | {ws} {wsv:.2e} | {wt} {wtv:.2e} | {same_bits} | {:.5} / {:.5} | {figures_same} | {} |",
                last(&losses_cpu),
                last(&losses_gpu),
                if pass { "yes" } else { "**no**" }
            )?;
            checks.push(json!({
                "option_set": name, "precision": precision.to_string(), "tolerance": tol,
                "logits_rel": logits_rel, "states": states, "gradients": tensors,
                "worst_state": ws, "worst_state_rel": wsv, "worst_gradient": wt, "worst_gradient_rel": wtv,
                "same_bits": same_bits, "validation_figures": figures, "pass": pass,
            }));
            curves.push(json!({
                "option_set": name, "precision": precision.to_string(), "steps": steps,
                "cpu": losses_cpu, "gpu": losses_gpu, "max_rel_diff": curve_rel,
            }));
            eprintln!(
                "{name} {precision}: logits {logits_rel:.2e}, worst state {ws} {wsv:.2e}, worst gradient {wt} {wtv:.2e}, same bits {same_bits}, pass {pass}"
            );
        }
    }
    let report = json!({ "device": dev.name(), "checks": checks, "loss_curves": curves, "passed": all_pass });
    std::fs::write(out.join("parity.json"), serde_json::to_string_pretty(&report)?)?;
    std::fs::write(out.join("parity.md"), format!("Parity on {}\n\n{table}", dev.name()))?;
    print!("Parity on {}\n\n{table}", dev.name());
    Ok(all_pass)
}

/// `steps` AdamW steps of BCE (positive weight 4) on `g` on the CPU engine and on the GPU (its
/// loss on the device), from `model`'s weights: the losses of each, and the trained GPU model's
/// validation figures from the device beside those the host computes from its logits (the
/// counts at 0.5 and the AUC must be the same, the loss within 1e-6).
fn train_both(
    dev: &Arc<dyn Backend>,
    ordinal: usize,
    model: &InteractionGnn<f32>,
    g: &GraphInput<f32>,
    y: &[u8],
    steps: usize,
) -> Result<Trained, Box<dyn std::error::Error>> {
    let adam = AdamWConfig { lr: 1e-3, ..AdamWConfig::default() };
    let mut cpu = CpuExecutor::new(model.clone(), adam);
    let mut gpu = DeviceExecutor::new(dev.clone(), Device::Cuda(ordinal), model.clone(), adam)?;
    let mut losses = (Vec::new(), Vec::new());
    let weight = vec![1.0f32; g.num_edges()];
    let targets = EdgeTargets { target: y, weight: &weight, pos_weight: 4.0, aux: None };
    for _ in 0..steps {
        for (ex, l) in [(&mut cpu as &mut dyn GnnExecutor, &mut losses.0), (&mut gpu, &mut losses.1)] {
            ex.zero_grad();
            l.push(ex.loss_backward(g, &targets, 1.0, 0.0)?.loss);
            ex.optimizer_step(adam.lr)?;
        }
    }
    let on_device = gpu.validate_graph(g, &targets, y, 0.5, false)?;
    let on_host = host_validate_graph(&gpu, g, &targets, y, 0.5, false)?;
    let loss_rel = (on_device.loss.loss - on_host.loss.loss).abs() / on_host.loss.loss.abs().max(1e-12);
    let same =
        on_device.counts == on_host.counts && on_device.auc.to_bits() == on_host.auc.to_bits() && loss_rel < 1e-6;
    let figures = json!({
        "auc_device": on_device.auc, "auc_host": on_host.auc,
        "predicted_device": on_device.counts.predicted, "predicted_host": on_host.counts.predicted,
        "tp_target_device": on_device.counts.tp_target, "tp_target_host": on_host.counts.tp_target,
        "loss_rel": loss_rel, "same": same,
    });
    Ok((losses.0, losses.1, same, figures))
}
