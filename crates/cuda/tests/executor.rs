//! The device executor on the kernel emulator against the CPU engine's, through the seam the
//! trainer uses: training steps (forward, backward, AdamW), inference, the auxiliary head, bf16.

use std::sync::Arc;

use trackgnn_cuda::testing::{max_rel_diff, random_graph};
use trackgnn_cuda::{Backend, DeviceExecutor, Emulator};
use trackgnn_engine::loss::bce_with_logits;
use trackgnn_engine::optim::AdamWConfig;
use trackgnn_engine::{
    Checkpointing, CpuExecutor, Device, GnnExecutor, GraphInput, InteractionGnn, ModelConfig, Precision,
};
use trackgnn_trackml::rng::Rng;

fn graph(n: usize, e: usize, seed: u64) -> (GraphInput<f32>, Vec<u8>) {
    random_graph(n, e, 0, seed)
}

/// Three AdamW steps on two graphs per step, on both executors; every step's logits, gradients
/// and updated parameters compared, then inference.
fn train_side_by_side(cfg: ModelConfig, precision: Precision, tol: f32) {
    let mut model = InteractionGnn::<f32>::new(cfg, 3, 0, &mut Rng::new(4));
    model.set_precision(precision);
    let adam = AdamWConfig { lr: 1e-2, ..AdamWConfig::default() };
    let mut cpu = CpuExecutor::new(model.clone(), adam);
    let emu: Arc<dyn Backend> = Arc::new(Emulator::new());
    let mut gpu = DeviceExecutor::new(emu, Device::Cuda(0), model, adam).unwrap();
    let graphs = [graph(24, 90, 1), graph(20, 70, 2)];
    for step in 0..3 {
        cpu.zero_grad();
        gpu.zero_grad();
        for (g, y) in &graphs {
            let mut dl = vec![0.0f32; g.num_edges()];
            let lc = cpu.forward(g).unwrap().to_vec();
            bce_with_logits(&lc, y, None, 2.0, &mut dl);
            cpu.backward(g, &dl).unwrap();
            let lg = gpu.forward(g).unwrap().to_vec();
            let d = max_rel_diff(&lg, &lc);
            assert!(d < tol, "step {step}: logits differ by {d:e}");
            gpu.backward(g, &dl).unwrap();
        }
        let d = max_rel_diff(&gpu.params().grad, &cpu.params().grad);
        assert!(d < tol, "step {step}: gradients differ by {d:e}");
        // The trainer's clipping happens on the host copy: the device must see it.
        for ex in [&mut cpu as &mut dyn GnnExecutor, &mut gpu] {
            ex.params_mut().grad.iter_mut().for_each(|g| *g *= 0.5);
            ex.optimizer_step(1e-2).unwrap();
        }
        let d = max_rel_diff(&gpu.params().data, &cpu.params().data);
        assert!(d < tol, "step {step}: parameters differ by {d:e}");
    }
    let (g, _) = &graphs[0];
    let d = max_rel_diff(&gpu.infer(g).unwrap(), &cpu.infer(g).unwrap());
    assert!(d < tol, "inference differs by {d:e}");
    assert_eq!(gpu.optimizer_state().unwrap().step, 3);
    assert!(gpu.buffer_bytes() > 0);
    // A run moves between devices: the host model is the trained one.
    assert_eq!(gpu.host_model().params.data, gpu.params().data);
}

#[test]
fn training_steps_match_the_cpu_engine_in_f32() {
    let small = ModelConfig { hidden: 16, iterations: 2, ..ModelConfig::default() };
    train_side_by_side(small, Precision::F32, 1e-4);
    let acorn = ModelConfig { hidden: 16, iterations: 2, ..ModelConfig::acorn() };
    train_side_by_side(acorn, Precision::F32, 1e-4);
}

#[test]
fn training_steps_match_the_cpu_engine_in_bf16() {
    // Both round the products' operands to bf16 and accumulate in f32, in different orders:
    // within the CPU bf16 path's 5% after three steps of each.
    let spec = ModelConfig { hidden: 32, iterations: 2, ..ModelConfig::bench_spec() };
    train_side_by_side(spec, Precision::Bf16, 5e-2);
}

#[test]
fn the_auxiliary_head_trains_through_the_device() {
    let cfg = ModelConfig { hidden: 16, iterations: 1, aux_pt: true, ..ModelConfig::default() };
    let model = InteractionGnn::<f32>::new(cfg, 3, 0, &mut Rng::new(8));
    let mut cpu = CpuExecutor::new(model.clone(), AdamWConfig::default());
    let emu: Arc<dyn Backend> = Arc::new(Emulator::new());
    let mut gpu = DeviceExecutor::new(emu, Device::Cuda(0), model, AdamWConfig::default()).unwrap();
    let (g, _) = graph(16, 60, 3);
    let dl: Vec<f32> = (0..60).map(|i| (i as f32 * 0.1).sin()).collect();
    let da: Vec<f32> = (0..60).map(|i| (i as f32 * 0.3).cos()).collect();
    cpu.forward(&g).unwrap();
    gpu.forward(&g).unwrap();
    assert!(max_rel_diff(gpu.aux(), cpu.aux()) < 1e-4);
    cpu.backward_aux(&g, &dl, &da).unwrap();
    gpu.backward_aux(&g, &dl, &da).unwrap();
    let d = max_rel_diff(&gpu.params().grad, &cpu.params().grad);
    assert!(d < 1e-4, "gradients differ by {d:e}");
    let (l, a) = gpu.infer_aux(&g).unwrap();
    let (lc, ac) = cpu.infer_aux(&g).unwrap();
    assert!(max_rel_diff(&l, &lc) < 1e-4 && max_rel_diff(&a, &ac) < 1e-4);
}

#[test]
fn checkpointed_steps_match_the_cpu_engine_and_keep_less() {
    // Nodes first (acorn: the recomputed output edge state is discarded) and edges first with
    // residual connections (the default: it is read).
    for base in [ModelConfig::acorn(), ModelConfig::default()] {
        checkpointed_steps_match(ModelConfig { hidden: 16, iterations: 3, ..base });
    }
}

fn checkpointed_steps_match(cfg: ModelConfig) {
    for tile in [1 << 17, 37] {
        checkpointed_steps_match_in_tiles(cfg.clone(), tile);
    }
}

/// With the split MLPs run in tiles of `tile` edges where they are (37: three tiles of 90 edges).
fn checkpointed_steps_match_in_tiles(cfg: ModelConfig, tile: usize) {
    let (g, y) = graph(24, 90, 1);
    let mut dl = vec![0.0f32; g.num_edges()];
    let mut peaks = Vec::new();
    // f32 states: the CPU engine's gradients within f32 rounding. bf16 states: the f32 step's
    // gradients within the bf16 tolerance (5%). The device recomputes each iteration's outputs
    // as the forward computed them, before the kept states' rounding, where the CPU engine
    // reads the rounded ones: closer to the f32 gradient (2% here against the CPU's 4%).
    let mut f32_grads = Vec::new();
    for (mode, tol) in [("none", 1e-4), ("per-iteration", 1e-4), ("every:2", 1e-4), ("every:2+bf16", 5e-2)] {
        let mut model = InteractionGnn::<f32>::new(cfg.clone(), 3, 0, &mut Rng::new(4));
        model.checkpointing = mode.parse().unwrap();
        let mut cpu = CpuExecutor::new(model.clone(), AdamWConfig::default());
        let emu: Arc<dyn Backend> = Arc::new(Emulator::new());
        let mut gpu = DeviceExecutor::new(emu.clone(), Device::Cuda(0), model, AdamWConfig::default()).unwrap();
        gpu.set_edge_tile(tile);
        for ex in [&mut cpu as &mut dyn GnnExecutor, &mut gpu] {
            ex.zero_grad();
            let logits = ex.forward(&g).unwrap().to_vec();
            bce_with_logits(&logits, &y, None, 2.0, &mut dl);
            ex.backward(&g, &dl).unwrap();
        }
        let d = max_rel_diff(gpu.forward(&g).unwrap(), cpu.forward(&g).unwrap());
        assert!(d < tol, "{mode}, tiles of {tile}: logits differ by {d:e}");
        let d = max_rel_diff(&gpu.infer(&g).unwrap(), &cpu.infer(&g).unwrap());
        assert!(d < 1e-4, "tiles of {tile}: inference differs by {d:e}");
        if f32_grads.is_empty() {
            f32_grads = cpu.params().grad.clone();
        }
        let reference = if mode.ends_with("bf16") { &f32_grads } else { &cpu.params().grad };
        for spec in &cpu.params().specs {
            let r = spec.range();
            let d = max_rel_diff(&gpu.params().grad[r.clone()], &reference[r]);
            assert!(d < tol, "{mode}, tiles of {tile}: gradient of {} differs by {d:e}", spec.name);
        }
        peaks.push((mode, gpu.buffer_bytes()));
    }
    // What a checkpointed step keeps between calls: the kept states, not every iteration's
    // activations.
    assert!(peaks[1..].iter().all(|p| p.1 < peaks[0].1), "{peaks:?}");
}

/// The peak device bytes of one training step of acorn's model on the BENCH_SPEC graph at
/// `nodes`, `edges`, planned.
fn planned_peak(mode: &str, nodes: usize, edges: usize) -> usize {
    let (g, y) = trackgnn_engine::bench::spec_graph_sized(nodes, edges);
    let mut model = InteractionGnn::<f32>::new(ModelConfig::acorn(), 3, 0, &mut Rng::new(1));
    model.checkpointing = mode.parse().unwrap();
    let plan = Arc::new(trackgnn_cuda::Planner::new());
    let mut ex = DeviceExecutor::new(plan.clone(), Device::Cuda(0), model, AdamWConfig::default()).unwrap();
    let mut dl = vec![0.0f32; edges];
    for _ in 0..2 {
        ex.zero_grad();
        let logits = ex.forward(&g).unwrap().to_vec();
        bce_with_logits(&logits, &y, None, 4.0, &mut dl);
        ex.backward(&g, &dl).unwrap();
        ex.optimizer_step(1e-3).unwrap();
    }
    plan.memory().peak
}

#[test]
fn checkpointing_cuts_the_planned_peak_of_acorns_step() {
    let peaks: Vec<(&str, usize)> =
        ["none", "per-iteration", "every:2+bf16"].iter().map(|&m| (m, planned_peak(m, 20_000, 160_000))).collect();
    let (none, per_it, bf16) = (peaks[0].1, peaks[1].1, peaks[2].1);
    // Acorn at 8 iterations keeps 8 iterations' caches without checkpointing, one with it
    // (planned at 20k nodes, 160k edges: 4.5, 1.8 and 1.3 GB).
    assert!(per_it * 2 < none, "{peaks:?}");
    assert!(bf16 < per_it, "{peaks:?}");
    // The planned peak grows with the graph: 10x the edges, 6 to 10x the bytes (a tile's
    // buffers do not grow).
    let big = planned_peak("every:2+bf16", 200_000, 1_600_000);
    assert!(big > 6 * bf16 && big < 10 * bf16, "{big} vs {bf16}");
}

#[test]
fn the_device_bench_times_a_step_and_replays_its_products() {
    use trackgnn_cuda::bench::{BenchRun, measure};
    let emu: Arc<dyn Backend> = Arc::new(Emulator::new());
    let model = ModelConfig { hidden: 8, iterations: 1, ..ModelConfig::bench_spec() };
    let mut run = BenchRun {
        variant: "bench_spec".into(),
        model,
        precision: Precision::F32,
        nodes: 40,
        edges: 160,
        steps: 2,
        warmup: 1,
        inference: false,
        checkpointing: Checkpointing::NONE,
    };
    let r = measure(emu.clone(), Device::Cuda(0), &run).unwrap();
    assert_eq!((r.nodes, r.edges, r.device.as_str()), (40, 160, "emulator"));
    assert!(r.step_seconds_mean > 0.0 && r.step_seconds_min <= r.step_seconds_mean);
    assert!(r.loss_first.unwrap().is_finite() && r.loss_last.unwrap() < r.loss_first.unwrap());
    // BENCH_SPEC with one iteration: encoders, edge and node networks, classifier.
    assert!(r.gemm_calls_per_step > 20 && r.gemm_only_seconds.unwrap() > 0.0, "{r:?}");
    assert!(r.peak_memory_bytes > 4 * r.parameters, "{r:?}");
    // The planner's figure is the step's own peak (nothing is allocated between steps).
    assert_eq!(r.planned_peak_bytes, Some(r.peak_memory_bytes), "{r:?}");
    assert!(r.copy_bandwidth_bytes_per_second > 0.0);
    // Bytes moved: every E × H pass at least once (160 edges × 8 channels × 4 bytes).
    assert!(r.kernel_bytes_per_step > 10 * 160 * 8 * 4 && r.gemm_bytes_per_step > 0, "{r:?}");
    assert!(r.memory_bound_seconds > 0.0 && r.step_over_bound.unwrap() > 0.0, "{r:?}");
    // The profiled step: every call in a line, slowest first, the bytes the traffic count's.
    let line = |name: &str| r.profile.iter().find(|p| p.name == name).unwrap_or_else(|| panic!("{name}: {r:?}"));
    assert_eq!(line("cuBLAS products (f32)").calls, r.gemm_calls_per_step);
    let kernels: u64 = r.profile.iter().filter(|p| !p.name.contains(' ') && p.name != "memset").map(|p| p.bytes).sum();
    assert_eq!(kernels, r.kernel_bytes_per_step, "{:?}", r.profile);
    assert_eq!(line("cuBLAS products (f32)").bytes, r.gemm_bytes_per_step);
    for name in ["mlp_layer_post", "bce_terms", "adamw_update", "copies host to device", "copies device to host"] {
        assert!(line(name).calls > 0 && line(name).seconds > 0.0 && line(name).fraction_of_copy_bandwidth > 0.0);
    }
    assert!(r.profile.windows(2).all(|w| w[0].seconds >= w[1].seconds));
    let total: f64 = r.profile.iter().map(|p| p.seconds).sum();
    assert!((total - r.profiled_seconds).abs() < 1e-9 && r.to_string().contains("each call synchronised"));
    // Everything the step allocated is freed with it.
    assert_eq!(emu.memory().current, 0);
    // Checkpointed, nodes first, bf16: the replay runs on its own buffers (the step's
    // recomputation buffers are freed by then), and the plan is still the peak.
    let ckpt = BenchRun {
        model: ModelConfig { hidden: 8, iterations: 2, ..ModelConfig::acorn() },
        precision: Precision::Bf16,
        checkpointing: "every:2+bf16".parse().unwrap(),
        ..run.clone()
    };
    let r = measure(emu.clone(), Device::Cuda(0), &ckpt).unwrap();
    assert_eq!(r.checkpointing, "every:2+bf16");
    assert!(r.gemm_only_seconds.unwrap() > 0.0, "{r:?}");
    assert_eq!(r.planned_peak_bytes, Some(r.peak_memory_bytes), "{r:?}");
    assert_eq!(emu.memory().current, 0);
    run.inference = true;
    let r = measure(emu, Device::Cuda(0), &run).unwrap();
    assert_eq!(r.what, "inference");
    assert!(r.loss_first.is_none() && r.gemm_only_seconds.is_none());
    assert!(r.kernel_bytes_per_step > 0 && r.gemm_bytes_per_step > 0, "{r:?}");
    assert!(r.profile.iter().any(|p| p.name == "mlp_layer_post") && r.profile.iter().all(|p| p.name != "bce_terms"));
}

#[test]
fn the_step_estimate_is_the_devices_own_plan() {
    use trackgnn_cuda::executor::planned_step_bytes;
    for mode in ["none", "every:2+bf16"] {
        let mut model = InteractionGnn::<f32>::new(ModelConfig::acorn(), 3, 0, &mut Rng::new(1));
        model.checkpointing = mode.parse().unwrap();
        let planned = planned_step_bytes(&model, 20_000, 160_000);
        let emu: Arc<dyn Backend> = Arc::new(Emulator::new());
        let ex = DeviceExecutor::new(emu, Device::Cuda(0), model, AdamWConfig::default()).unwrap();
        let estimate = ex.estimate_step_bytes(20_000, 160_000);
        assert_eq!(estimate, planned, "{mode}: below two tiles the estimate is the plan");
        // Beyond, a fit: never below the plan, a few percent above at most.
        let mut model = InteractionGnn::<f32>::new(ModelConfig::acorn(), 3, 0, &mut Rng::new(1));
        model.checkpointing = mode.parse().unwrap();
        let (planned, estimate) =
            (planned_step_bytes(&model, 60_000, 480_000), ex.estimate_step_bytes(60_000, 480_000));
        let ratio = estimate as f64 / planned as f64;
        assert!((1.0..1.07).contains(&ratio), "{mode}: estimate {estimate} against the plan {planned}");
    }
}

#[test]
fn bf16_training_keeps_its_saved_activations_in_half_the_bytes() {
    // Without checkpointing the MLPs' saved x̂ are most of the step; bf16 keeps them as bf16
    // bits (the values the CPU engine keeps rounded), f32 as f32.
    let peak = |precision| {
        let mut model = InteractionGnn::<f32>::new(ModelConfig::acorn(), 3, 0, &mut Rng::new(1));
        model.set_precision(precision);
        trackgnn_cuda::executor::planned_step_bytes(&model, 20_000, 160_000)
    };
    let (f32_peak, bf16_peak) = (peak(Precision::F32), peak(Precision::Bf16));
    assert!((bf16_peak as f64) < 0.85 * f32_peak as f64, "bf16 {bf16_peak} against f32 {f32_peak}");
}

#[test]
fn bench_memory_on_a_device_reads_its_allocator_beside_the_plan() {
    trackgnn_cuda::register_emulator();
    let mode = "every:2+bf16".parse().unwrap();
    let r = trackgnn_engine::bench::measure_memory(mode, 120, 4.0, (8, 2), 1, Device::Cuda(0)).unwrap();
    assert_eq!((r.device.as_str(), r.checkpointing.as_str(), r.edges), ("cuda:0", "every:2+bf16", 120));
    let planned = r.planned_peak_bytes.unwrap() as f64;
    // The estimate is the plan's affine fit; the emulator allocates what a GPU would.
    let off = (r.counted_peak_bytes as f64 / planned - 1.0).abs();
    assert!(off < 0.05, "device peak {} against the plan {planned}", r.counted_peak_bytes);
    assert!(r.step_seconds.unwrap() > 0.0 && r.engine_bytes > 0);
}

#[test]
fn adamw_runs_on_the_device_and_its_state_resumes_there() {
    // AMSGrad on, so the running maximum travels too.
    let adam = AdamWConfig { lr: 1e-2, amsgrad: true, ..AdamWConfig::default() };
    let model = InteractionGnn::<f32>::new(
        ModelConfig { hidden: 8, iterations: 1, ..ModelConfig::default() },
        3,
        0,
        &mut Rng::new(5),
    );
    let (g, y) = graph(20, 70, 3);
    let emu: Arc<dyn Backend> = Arc::new(Emulator::new());
    let step = |ex: &mut dyn GnnExecutor| {
        ex.zero_grad();
        let mut dl = vec![0.0f32; g.num_edges()];
        let logits = ex.forward(&g).unwrap().to_vec();
        bce_with_logits(&logits, &y, None, 2.0, &mut dl);
        ex.backward(&g, &dl).unwrap();
        ex.optimizer_step(1e-2).unwrap();
    };
    let mut cpu = CpuExecutor::new(model.clone(), adam);
    let mut gpu = DeviceExecutor::new(emu.clone(), Device::Cuda(0), model, adam).unwrap();
    for _ in 0..2 {
        step(&mut cpu);
        step(&mut gpu);
    }
    let (sc, sg) = (cpu.optimizer_state().unwrap(), gpu.optimizer_state().unwrap());
    assert_eq!((sg.step, sg.v_max.is_some()), (2, true));
    assert!(max_rel_diff(&sg.m, &sc.m) < 1e-4 && max_rel_diff(&sg.v, &sc.v) < 1e-4);
    // A run resumed from the device's checkpoint takes the same next step as one that went on.
    let mut resumed = DeviceExecutor::new(emu, Device::Cuda(0), gpu.host_model(), adam).unwrap();
    resumed.restore_optimizer(sg);
    assert_eq!(resumed.optimizer_state().unwrap().step, 2);
    step(&mut gpu);
    step(&mut resumed);
    assert_eq!(gpu.params().data, resumed.params().data);
    assert_eq!(resumed.optimizer_state().unwrap().step, 3);
}

/// The loss on the device (BCE with weights and `pos_weight`, the auxiliary MSE, the step's
/// scales) gives the host loss's figures and gradients; the validation figures from logits that
/// stay on the device are the host's from the same logits: counts and AUC exactly.
#[test]
fn the_loss_and_the_validation_figures_run_on_the_device_as_on_the_host() {
    use trackgnn_engine::graph_loss::{host_loss_backward, host_validate_graph};
    use trackgnn_engine::{AuxTargets, EdgeTargets};
    let cfg = ModelConfig { hidden: 16, iterations: 2, aux_pt: true, ..ModelConfig::default() };
    let model = InteractionGnn::<f32>::new(cfg, 3, 0, &mut Rng::new(9));
    let (g, target) = graph(30, 140, 5);
    let e = g.num_edges();
    let y: Vec<u8> = target.iter().enumerate().map(|(i, &t)| t | u8::from(i % 5 == 0)).collect();
    let weight: Vec<f32> = (0..e).map(|i| [1.0, 0.0, 0.5][i % 3]).collect();
    let log_pt: Vec<f32> = (0..e).map(|i| (i as f32 * 0.7).sin()).collect();
    let aux_weight: Vec<f32> = target.iter().map(|&t| f32::from(t)).collect();
    let aux = AuxTargets { log_pt: &log_pt, weight: &aux_weight, count: 41 };
    for with_aux in [false, true] {
        let targets = EdgeTargets { target: &target, weight: &weight, pos_weight: 3.0, aux: with_aux.then_some(aux) };
        let mut cpu = CpuExecutor::new(model.clone(), AdamWConfig::default());
        let emu: Arc<dyn Backend> = Arc::new(Emulator::new());
        let mut gpu = DeviceExecutor::new(emu, Device::Cuda(0), model.clone(), AdamWConfig::default()).unwrap();
        let on_host = cpu.loss_backward(&g, &targets, 0.5, 0.25).unwrap();
        let on_device = gpu.loss_backward(&g, &targets, 0.5, 0.25).unwrap();
        assert!((on_device.loss - on_host.loss).abs() < 1e-5 * on_host.loss, "{on_device:?} vs {on_host:?}");
        assert!((on_device.aux_loss - on_host.aux_loss).abs() < 1e-5 * on_host.aux_loss.max(1e-9));
        assert_eq!(on_host.aux_loss > 0.0, with_aux);
        let d = max_rel_diff(&gpu.params().grad, &cpu.params().grad);
        assert!(d < 1e-4, "aux {with_aux}: gradients differ by {d:e}");
        // The same device model with the loss on the host: the device loss's own arithmetic.
        gpu.zero_grad();
        let device_grad = {
            gpu.loss_backward(&g, &targets, 0.5, 0.25).unwrap();
            gpu.params().grad.clone()
        };
        gpu.zero_grad();
        let host = host_loss_backward(&mut gpu, &g, &targets, 0.5, 0.25).unwrap();
        assert!((host.loss - on_device.loss).abs() < 1e-6 * host.loss);
        let d = max_rel_diff(&device_grad, &gpu.params().grad);
        assert!(d < 1e-5, "aux {with_aux}: the device loss's gradients differ from the host loss's by {d:e}");

        // 0.5, and the median edge's score (an untrained model scores every edge alike).
        let mut sorted = gpu.infer(&g).unwrap();
        sorted.sort_by(f32::total_cmp);
        let median = trackgnn_engine::loss::sigmoid(f64::from(sorted[e / 2]));
        for threshold in [0.5, median] {
            let dev = gpu.validate_graph(&g, &targets, &y, threshold, true).unwrap();
            let host = host_validate_graph(&gpu, &g, &targets, &y, threshold, true).unwrap();
            assert_eq!((dev.counts, dev.auc.to_bits()), (host.counts, host.auc.to_bits()), "at {threshold}");
            assert_eq!(dev.logits, host.logits);
            assert!((dev.loss.loss - host.loss.loss).abs() < 1e-6 * host.loss.loss);
            assert!((dev.loss.aux_loss - host.loss.aux_loss).abs() < 1e-6 * host.loss.aux_loss.max(1e-9));
            assert!(gpu.validate_graph(&g, &targets, &y, threshold, false).unwrap().logits.is_empty());
        }
        let at_median = gpu.validate_graph(&g, &targets, &y, median, false).unwrap().counts;
        assert!(at_median.predicted > 0 && at_median.predicted < e as u64 / 2 + 1, "{at_median:?}");
    }
}
