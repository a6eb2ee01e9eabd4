//! The device forward in the kernel emulator against the CPU engine's, for the model's option
//! sets: the kernels' arithmetic and the code that drives them, without a GPU.

use std::sync::Arc;

use trackgnn_cuda::backward::Workspace;
use trackgnn_cuda::testing::{max_rel_diff, option_sets, random_graph};
use trackgnn_cuda::{Backend, DevBuf, DeviceCache, DeviceGraph, DeviceModel, Emulator};
use trackgnn_engine::{ForwardCache, GraphInput, InteractionGnn, ModelConfig};
use trackgnn_trackml::rng::Rng;

/// The option sets at small sizes (widths below, at and above a warp, not multiples of it).
fn configs() -> Vec<(&'static str, ModelConfig, usize)> {
    let hidden = [16, 16, 40, 36];
    option_sets()
        .into_iter()
        .zip(hidden)
        .map(|((name, cfg, edge_dim), hidden)| {
            let iterations = if name == "other" { 3 } else { 2 };
            (name, ModelConfig { hidden, iterations, ..cfg }, edge_dim)
        })
        .collect()
}

/// A random graph of `n` nodes and `e` edges with isolated nodes and repeated pairs.
fn graph(n: usize, e: usize, edge_dim: usize, seed: u64) -> GraphInput<f32> {
    random_graph(n, e, edge_dim, seed).0
}

#[test]
fn emulated_forward_matches_the_cpu_engine_for_every_option_set() {
    let dev: Arc<dyn Backend> = Arc::new(Emulator::new());
    for (name, cfg, edge_dim) in configs() {
        let g = graph(30, 120, edge_dim, 7);
        let model = InteractionGnn::<f32>::new(cfg.clone(), 3, edge_dim, &mut Rng::new(11));
        let mut cpu = ForwardCache::default();
        model.forward(&g, &mut cpu);
        let dm = DeviceModel::upload(&dev, &model).unwrap();
        let dg = DeviceGraph::upload(&dev, &g, dm.widest_row()).unwrap();
        let mut cache = DeviceCache::default();
        dm.forward(&dg, &mut cache).unwrap();
        let logits = cache.logits.buf().unwrap().to_host().unwrap();
        let d = max_rel_diff(&logits, &cpu.logits);
        assert!(d < 1e-5, "{name}: logits differ by {d:e} of their scale");
        for (k, (dh, ch)) in cache.h.iter().zip(&cpu.h).enumerate() {
            let d = max_rel_diff(&dh.buf().unwrap().to_host().unwrap(), ch);
            assert!(d < 1e-5, "{name}: h_{k} differs by {d:e}");
        }
        if cfg.aux_pt {
            let aux = cache.aux.buf().unwrap().to_host().unwrap();
            let d = max_rel_diff(&aux, &cpu.aux);
            assert!(d < 1e-5, "{name}: aux differs by {d:e}");
        }
        // Two runs give the same bits, and so does inference with its rolling states.
        let mut again = DeviceCache::default();
        dm.forward(&dg, &mut again).unwrap();
        assert_eq!(again.logits.buf().unwrap().to_host().unwrap(), logits, "{name}: second run");
        let mut inferred = DeviceCache::default();
        dm.infer(&dg, &mut inferred).unwrap();
        assert_eq!(inferred.logits.buf().unwrap().to_host().unwrap(), logits, "{name}: inference");
        if cfg.aux_pt {
            let aux = cache.aux.buf().unwrap().to_host().unwrap();
            assert_eq!(inferred.aux.buf().unwrap().to_host().unwrap(), aux, "{name}: inference's aux");
        }
        assert!(inferred.bytes() < cache.bytes(), "{name}: inference keeps less");
    }
}

#[test]
fn emulated_backward_matches_the_cpu_engine_for_every_option_set() {
    let dev: Arc<dyn Backend> = Arc::new(Emulator::new());
    for (name, cfg, edge_dim) in configs() {
        let g = graph(30, 120, edge_dim, 5);
        let mut model = InteractionGnn::<f32>::new(cfg.clone(), 3, edge_dim, &mut Rng::new(3));
        let mut rng = Rng::new(9);
        let dlogits: Vec<f32> = (0..g.num_edges()).map(|_| rng.range(-1.0, 1.0) as f32).collect();
        let daux: Vec<f32> = (0..g.num_edges()).map(|_| rng.range(-1.0, 1.0) as f32).collect();
        let daux_opt = cfg.aux_pt.then_some(&daux[..]);
        let mut cpu = ForwardCache::default();
        model.forward(&g, &mut cpu);
        model.params.zero_grad();
        model.backward_aux(&g, &mut cpu, &dlogits, daux_opt);

        let dm = DeviceModel::upload(&dev, &model).unwrap();
        let dg = DeviceGraph::upload(&dev, &g, dm.widest_row()).unwrap();
        let mut cache = DeviceCache::default();
        dm.forward(&dg, &mut cache).unwrap();
        let grad = DevBuf::<f32>::zeros(&dev, model.params.len()).unwrap();
        let dl = DevBuf::from_host(&dev, &dlogits).unwrap();
        let da = DevBuf::from_host(&dev, &daux).unwrap();
        let mut ws = Workspace::default();
        dm.backward(&dg, &cache, dl.ptr(), cfg.aux_pt.then(|| da.ptr()), grad.ptr(), &mut ws).unwrap();
        let got = grad.to_host().unwrap();
        for spec in &model.params.specs {
            let r = spec.range();
            let d = max_rel_diff(&got[r.clone()], &model.params.grad[r]);
            assert!(d < 1e-4, "{name}: gradient of {} differs by {d:e} of its scale", spec.name);
        }
        // Two backwards from the same forward give the same bits.
        let again = DevBuf::<f32>::zeros(&dev, model.params.len()).unwrap();
        dm.backward(&dg, &cache, dl.ptr(), cfg.aux_pt.then(|| da.ptr()), again.ptr(), &mut ws).unwrap();
        assert_eq!(again.to_host().unwrap(), got, "{name}: second backward");
    }
}
