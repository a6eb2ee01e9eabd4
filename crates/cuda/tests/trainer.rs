//! The trainer on a `cuda:0` device (the kernel emulator registered as the CUDA backend) against
//! the same run on the CPU engine: the seam's loss-and-backward and validation figures on the
//! device give the CPU run's losses, metrics and weights.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use trackgnn_engine::Device;
use trackgnn_graph::features::NodeCuts;
use trackgnn_graph::{GraphMethod, GraphRecipe, build_graph, graph_file_name, write_graph};
use trackgnn_simulate::{Generator, SimConfig};
use trackgnn_trackml::Detector;
use trackgnn_train::dist::SingleProcess;
use trackgnn_train::{RunDir, Silent, TrainConfig, Trainer};

/// `n` small geometric graphs (pile-up 2, pT > 2 GeV) in `dir`.
fn make_graphs(dir: &Path, n: u64) {
    let g = Generator::new(Detector::trackml(), SimConfig { pileup: 2.0, ..SimConfig::default() });
    let mut recipe = GraphRecipe::new(GraphMethod::Geometric);
    recipe.node_cuts = NodeCuts { pt_min: Some(2.0), remove_noise: true, eta_range: None };
    for id in 1..=n {
        let (ev, _) = g.event(5, id);
        let (graph, _) = build_graph(&ev, g.detector(), &recipe, None).unwrap();
        write_graph(&dir.join(graph_file_name(id)), &graph).unwrap();
    }
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * a.abs().max(b.abs()).max(1e-9) || (a.is_nan() && b.is_nan())
}

#[test]
fn training_on_the_device_gives_the_cpu_runs_losses_metrics_and_weights() {
    trackgnn_cuda::register_emulator();
    let dir = tempfile::tempdir().unwrap();
    let graphs = dir.path().join("g");
    std::fs::create_dir_all(&graphs).unwrap();
    make_graphs(&graphs, 6);
    let run = |device: Device| {
        let mut cfg = TrainConfig { epochs: 2, seed: 3, device, pos_weight: 2.0, ..TrainConfig::default() };
        (cfg.model.hidden, cfg.model.iterations, cfg.model.aux_pt, cfg.aux_pt_weight) = (8, 1, true, 0.5);
        cfg.optimizer.lr = 3e-3;
        let out = dir.path().join(device.to_string().replace(':', "_"));
        let mut comm = SingleProcess;
        let mut t = Trainer::new(cfg, &graphs, &out, false, &mut comm).unwrap();
        t.run(&Silent, &AtomicBool::new(false)).unwrap();
        (RunDir::open(&out).unwrap().read_metrics().unwrap(), t.executor().params().data.clone())
    };
    let (cpu, cpu_w) = run(Device::Cpu);
    let (gpu, gpu_w) = run(Device::Cuda(0));
    assert_eq!(cpu.len(), gpu.len());
    for (c, g) in cpu.iter().zip(&gpu) {
        let pairs = [
            ("train_loss", c.train_loss, g.train_loss),
            ("val_loss", c.val_loss, g.val_loss),
            ("train_aux_loss", c.train_aux_loss.unwrap(), g.train_aux_loss.unwrap()),
            ("val_aux_loss", c.val_aux_loss.unwrap(), g.val_aux_loss.unwrap()),
            ("efficiency", c.efficiency, g.efficiency),
            ("target_purity", c.target_purity, g.target_purity),
            ("auc", c.auc, g.auc),
        ];
        for (name, a, b) in pairs {
            assert!(close(a, b, 1e-4), "epoch {}: {name} {a} on the CPU, {b} on the device", c.epoch);
        }
        assert!(c.val_aux_loss.unwrap() > 0.0 && c.auc > 0.0);
    }
    let worst = cpu_w.iter().zip(&gpu_w).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    let scale = cpu_w.iter().map(|a| a.abs()).fold(0.0f32, f32::max);
    assert!(worst <= 1e-4 * scale, "weights differ by {worst} (largest {scale})");
}
