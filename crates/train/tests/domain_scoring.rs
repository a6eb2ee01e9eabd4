//! Domain-parallel inference in one process: an event's graph split into φ partitions
//! ([`split_graph`]) scored on threads that exchange their halos ([`ThreadHalo`]) gives every
//! edge the logit one process gives on the whole graph, within 3e-5 relative in f32 and the bf16
//! path's tolerance (only the sums over a node's edges come in other tiles, so in another
//! order).

use std::sync::Arc;

use trackgnn_engine::halo::ThreadHalo;
use trackgnn_engine::optim::AdamWConfig;
use trackgnn_engine::{Device, InteractionGnn, ModelConfig, Precision, executor_on};
use trackgnn_graph::{Graph, GraphMethod, GraphRecipe, build_graph};
use trackgnn_model::graph_input;
use trackgnn_simulate::{Generator, SimConfig};
use trackgnn_trackml::Detector;
use trackgnn_trackml::rng::Rng;
use trackgnn_train::dist::{partition_logits, split_graph};

fn event_graph() -> Graph {
    let g = Generator::new(Detector::trackml(), SimConfig { pileup: 10.0, ..SimConfig::default() });
    let (ev, _) = g.event(5, 1);
    build_graph(&ev, g.detector(), &GraphRecipe::new(GraphMethod::Geometric), None).unwrap().0
}

fn model(graph: &Graph, precision: Precision) -> InteractionGnn<f32> {
    let config = ModelConfig { hidden: 24, iterations: 3, ..ModelConfig::default() };
    let edge_dim = graph.num_edge_features();
    let mut m = InteractionGnn::<f32>::new(config, graph.num_node_features(), edge_dim, &mut Rng::new(9));
    m.set_precision(precision);
    m
}

/// Every edge's logit from the partitions run on `parts` threads.
fn split_logits(m: &InteractionGnn<f32>, graph: &Graph, parts: usize) -> Vec<f32> {
    let partitions = split_graph(graph, parts).unwrap();
    let halos = ThreadHalo::<f32>::group(&partitions);
    let mut all = vec![f32::NAN; graph.num_edges()];
    let per_rank: Vec<Vec<(u32, f32)>> = std::thread::scope(|s| {
        let handles: Vec<_> = partitions
            .iter()
            .zip(halos)
            .map(|(p, halo)| {
                let executor = executor_on(Device::Cpu, m.clone(), AdamWConfig::default()).unwrap();
                s.spawn(move || partition_logits(&*executor, graph, p, Arc::new(halo)))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("rank thread").unwrap()).collect()
    });
    for (e, l) in per_rank.into_iter().flatten() {
        assert!(all[e as usize].is_nan(), "edge {e} counted by two partitions");
        all[e as usize] = l;
    }
    all
}

#[test]
fn an_event_scored_across_partitions_gets_the_whole_graphs_logits() {
    let graph = event_graph();
    for precision in [Precision::F32, Precision::Bf16] {
        let m = model(&graph, precision);
        let whole =
            executor_on(Device::Cpu, m.clone(), AdamWConfig::default()).unwrap().infer(&graph_input(&graph)).unwrap();
        for parts in [2, 3] {
            let split = split_logits(&m, &graph, parts);
            let worst = whole.iter().zip(&split).map(|(a, b)| (a - b).abs() / a.abs().max(1e-3)).fold(0.0, f32::max);
            let tol = if precision == Precision::F32 { 3e-5 } else { 4e-3 };
            eprintln!("{precision}, {parts} partitions: largest relative logit difference {worst:e}");
            assert!(worst < tol, "{precision}, {parts} partitions: logits differ by {worst:e} (tolerance {tol:e})");
        }
    }
}

#[test]
fn a_graph_with_fewer_nodes_than_partitions_is_refused_naming_the_event() {
    let graph = event_graph();
    let e = split_graph(&graph, graph.num_nodes() + 1).expect_err("refused");
    let msg = e.to_string();
    assert!(msg.contains("event 1") && msg.contains("cannot split"), "{msg}");
}
