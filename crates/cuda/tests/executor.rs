//! The device executor on the kernel emulator against the CPU engine's, through the seam the
//! trainer uses: training steps (forward, backward, AdamW), inference, the auxiliary head, bf16.

use std::sync::Arc;

use trackgnn_cuda::{DeviceExecutor, Emulator};
use trackgnn_engine::loss::bce_with_logits;
use trackgnn_engine::optim::AdamWConfig;
use trackgnn_engine::{CpuExecutor, Device, GnnExecutor, GraphInput, InteractionGnn, ModelConfig, Precision};
use trackgnn_trackml::rng::Rng;

fn graph(n: usize, e: usize, seed: u64) -> (GraphInput<f32>, Vec<u8>) {
    let mut rng = Rng::new(seed);
    let src: Vec<u32> = (0..e).map(|_| rng.below(n as u64) as u32).collect();
    let dst: Vec<u32> = (0..e).map(|_| rng.below(n as u64) as u32).collect();
    let x: Vec<f32> = (0..n * 3).map(|_| rng.range(-1.0, 1.0) as f32).collect();
    let y: Vec<u8> = (0..e).map(|_| u8::from(rng.bernoulli(0.3))).collect();
    (GraphInput::new(n, &x, 3, &[], 0, &src, &dst), y)
}

fn max_rel_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-3);
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max) / scale
}

/// Three AdamW steps on two graphs per step, on both executors; every step's logits, gradients
/// and updated parameters compared, then inference.
fn train_side_by_side(cfg: ModelConfig, precision: Precision, tol: f32) {
    let mut model = InteractionGnn::<f32>::new(cfg, 3, 0, &mut Rng::new(4));
    model.set_precision(precision);
    let adam = AdamWConfig { lr: 1e-2, ..AdamWConfig::default() };
    let mut cpu = CpuExecutor::new(model.clone(), adam);
    let emu: Arc<dyn trackgnn_cuda::Backend> = Arc::new(Emulator::new());
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
    assert_eq!(gpu.optimizer_state().step, 3);
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
    // Both round the products' operands to bf16 and accumulate in f32, in different orders.
    let spec = ModelConfig { hidden: 32, iterations: 2, ..ModelConfig::bench_spec() };
    train_side_by_side(spec, Precision::Bf16, 2e-2);
}

#[test]
fn the_auxiliary_head_trains_through_the_device() {
    let cfg = ModelConfig { hidden: 16, iterations: 1, aux_pt: true, ..ModelConfig::default() };
    let model = InteractionGnn::<f32>::new(cfg, 3, 0, &mut Rng::new(8));
    let mut cpu = CpuExecutor::new(model.clone(), AdamWConfig::default());
    let emu: Arc<dyn trackgnn_cuda::Backend> = Arc::new(Emulator::new());
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
fn checkpointing_is_refused_with_a_message_naming_it() {
    let mut model = InteractionGnn::<f32>::new(
        ModelConfig { hidden: 8, iterations: 2, ..ModelConfig::default() },
        3,
        0,
        &mut Rng::new(1),
    );
    model.checkpointing = "per-iteration".parse().unwrap();
    let emu: Arc<dyn trackgnn_cuda::Backend> = Arc::new(Emulator::new());
    let e = DeviceExecutor::new(emu, Device::Cuda(2), model, AdamWConfig::default()).err().unwrap();
    assert!(e.to_string().starts_with("cuda:2: activation checkpointing (per-iteration)"), "{e}");
}

#[test]
fn the_device_bench_times_a_step_and_replays_its_products() {
    use trackgnn_cuda::bench::{BenchRun, measure};
    let emu: Arc<dyn trackgnn_cuda::Backend> = Arc::new(Emulator::new());
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
    };
    let r = measure(emu.clone(), Device::Cuda(0), &run).unwrap();
    assert_eq!((r.nodes, r.edges, r.device.as_str()), (40, 160, "emulator"));
    assert!(r.step_seconds_mean > 0.0 && r.step_seconds_min <= r.step_seconds_mean);
    assert!(r.loss_first.unwrap().is_finite() && r.loss_last.unwrap() < r.loss_first.unwrap());
    // BENCH_SPEC with one iteration: encoders, edge and node networks, classifier.
    assert!(r.gemm_calls_per_step > 20 && r.gemm_only_seconds.unwrap() > 0.0, "{r:?}");
    assert!(r.peak_memory_bytes > 4 * r.parameters, "{r:?}");
    assert!(r.copy_bandwidth_bytes_per_second > 0.0);
    // Everything the step allocated is freed with it.
    assert_eq!(emu.memory().current, 0);
    run.inference = true;
    let r = measure(emu, Device::Cuda(0), &run).unwrap();
    assert_eq!(r.what, "inference");
    assert!(r.loss_first.is_none() && r.gemm_only_seconds.is_none());
}
