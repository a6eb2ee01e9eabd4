//! The traffic count of `bench engine`'s bandwidth bound ([`trackgnn_engine::traffic`]): what
//! it counts for a training step. Its own test binary, since the counters are process-wide.

use trackgnn_engine::bench::synthetic_graph;
use trackgnn_engine::loss::bce_with_logits;
use trackgnn_engine::optim::{AdamW, AdamWConfig};
use trackgnn_engine::traffic::{self, Pass};
use trackgnn_engine::{ForwardCache, InteractionGnn, ModelConfig, Precision};
use trackgnn_trackml::rng::Rng;

/// Bytes per pass of one step (forward, loss, backward, AdamW, zeroing) with the MLPs'
/// activations saved at `saved`, and the MLP caches' bytes.
fn counted_step(saved: Precision) -> ([(Pass, u64); Pass::ALL.len()], usize, usize, usize) {
    let (g, y) = synthetic_graph(3000, 8.0, 3);
    let cfg = ModelConfig { hidden: 16, ..ModelConfig::bench_spec() };
    let mut model = InteractionGnn::<f32>::new(cfg, 3, 4, &mut Rng::new(2));
    model.set_precision(Precision::Bf16);
    model.set_saved_activations(saved);
    let mut opt = AdamW::new(model.params.len(), AdamWConfig::default());
    let (mut cache, mut dl) = (ForwardCache::default(), vec![0.0f32; g.num_edges()]);
    traffic::take();
    traffic::enable(true);
    model.forward(&g, &mut cache);
    bce_with_logits(&cache.logits, &y, None, 4.0, &mut dl);
    model.params.zero_grad();
    model.backward(&g, &mut cache, &dl);
    opt.step(&mut model.params.data, &model.params.grad, 1e-3);
    traffic::enable(false);
    let c = &cache;
    let mlps = [&c.node_encoder, &c.edge_encoder, &c.classifier].into_iter().chain(&c.edge_net).chain(&c.node_net);
    let mlp_cache_bytes = mlps.map(|m| m.bytes()).sum();
    (traffic::take(), mlp_cache_bytes, model.params.len(), g.num_edges())
}

fn bytes(t: &[(Pass, u64)], p: Pass) -> u64 {
    t.iter().find(|(q, _)| *q == p).expect("every pass is listed").1
}

#[test]
fn a_step_counts_every_pass_and_its_saved_activations_once_each_way() {
    let (f32_saved, f32_cache, params, edges) = counted_step(Precision::F32);
    let (bf16_saved, bf16_cache, _, _) = counted_step(Precision::Bf16);
    for p in Pass::ALL {
        assert!(bytes(&f32_saved, p) > 0, "{} counted nothing", p.name());
    }
    // Exact for the simple passes: per edge a logit and a gradient (f32) and a label (u8); the
    // optimiser reads and writes parameters, m and v and reads the gradients, and zeroing
    // writes the gradients.
    assert_eq!(bytes(&f32_saved, Pass::Loss), 9 * edges as u64);
    assert_eq!(bytes(&f32_saved, Pass::Optimizer), 8 * 4 * params as u64);
    // Saving the activations in bf16 halves the saved x̂: the forward writes them once and the
    // backward reads them once, so each pass moves exactly the caches' difference less.
    let saved_less = (f32_cache - bf16_cache) as u64;
    assert!(saved_less > 0, "the activations were not saved in bf16");
    for p in [Pass::MlpForward, Pass::MlpBackward] {
        assert_eq!(bytes(&f32_saved, p) - bytes(&bf16_saved, p), saved_less, "{}", p.name());
    }
    for p in [Pass::SplitNodes, Pass::Aggregation, Pass::Elementwise] {
        assert_eq!(bytes(&f32_saved, p), bytes(&bf16_saved, p), "{}", p.name());
    }
    // Off, nothing is counted.
    let (g, _) = synthetic_graph(500, 8.0, 4);
    let model =
        InteractionGnn::<f32>::new(ModelConfig { hidden: 8, ..ModelConfig::bench_spec() }, 3, 4, &mut Rng::new(1));
    model.infer(&g, &mut ForwardCache::default());
    assert!(traffic::take().iter().all(|&(_, b)| b == 0));
}
