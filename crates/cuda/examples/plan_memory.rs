//! The device's planned peak memory of one training step (`trackgnn_cuda::Planner`: every
//! allocation the real step makes, counted, nothing run), for acorn's model and BENCH_SPEC's in
//! f32 and bf16, each checkpointing mode, on the BENCH_SPEC graph at the sizes given.
//!
//!     cargo run --release -p trackgnn-cuda --example plan_memory [NODES,EDGES ...]
//!
//! Default sizes: 20000,160000 (BENCH_SPEC) and 200000,1600000 (issue 39's memory target).

use trackgnn_cuda::executor::planned_step_bytes;
use trackgnn_engine::{InteractionGnn, ModelConfig, Precision};
use trackgnn_trackml::rng::Rng;

fn main() {
    let sizes: Vec<(usize, usize)> = match std::env::args().skip(1).collect::<Vec<_>>() {
        a if a.is_empty() => vec![(20_000, 160_000), (200_000, 1_600_000)],
        a => a
            .iter()
            .map(|s| {
                let (n, e) = s.split_once(',').expect("NODES,EDGES");
                (n.parse().expect("nodes"), e.parse().expect("edges"))
            })
            .collect(),
    };
    println!("| model | precision | checkpointing | nodes | edges | planned peak (GB) |");
    println!("|---|---|---|---|---|---|");
    for (name, cfg) in [("acorn", ModelConfig::acorn()), ("bench_spec", ModelConfig::bench_spec())] {
        for precision in [Precision::F32, Precision::Bf16] {
            for mode in ["none", "per-iteration", "per-iteration+bf16", "every:2+bf16", "every:4+bf16"] {
                for &(nodes, edges) in &sizes {
                    let mut model = InteractionGnn::<f32>::new(cfg.clone(), 3, 0, &mut Rng::new(1));
                    model.set_precision(precision);
                    model.checkpointing = mode.parse().expect("mode");
                    let peak = planned_step_bytes(&model, nodes, edges);
                    println!("| {name} | {precision} | {mode} | {nodes} | {edges} | {:.2} |", peak as f64 / 1e9);
                }
            }
        }
    }
}
