//! Issue 42's layout question, measured: does the order of a graph's edges and nodes change
//! the GNN's inference time? Scores each graph file with a run's model three ways, the same
//! edges and features each time: as stored, edges sorted by destination (then source), and
//! nodes renumbered by φ with edges sorted by destination. Prints the seconds of the second of
//! two rounds and the sum of the logits (the same up to the order of sums).
//!
//! `cargo run --release -p trackgnn-model --example edge_order -- RUN_DIR GRAPH...`

use std::path::Path;
use std::time::Instant;

use trackgnn_engine::GraphInput;
use trackgnn_graph::{Graph, read_graph};
use trackgnn_model::{RunDir, TrainedModel, Weights, graph_input};

/// The engine's input of `g` with its nodes in the order `nodes` (new index → old; `None`:
/// as stored) and its edges sorted by (destination, source).
fn reordered(g: &Graph, nodes: Option<&[u32]>) -> GraphInput<f32> {
    let (n, nd, ed) = (g.num_nodes(), g.num_node_features(), g.num_edge_features());
    let order: Vec<u32> = nodes.map_or_else(|| (0..n as u32).collect(), <[u32]>::to_vec);
    let mut new_of = vec![0u32; n];
    for (new, &old) in order.iter().enumerate() {
        new_of[old as usize] = new as u32;
    }
    let x: Vec<f32> =
        order.iter().flat_map(|&o| &g.node_features[o as usize * nd..(o as usize + 1) * nd]).copied().collect();
    let src: Vec<u32> = g.src.iter().map(|&s| new_of[s as usize]).collect();
    let dst: Vec<u32> = g.dst.iter().map(|&d| new_of[d as usize]).collect();
    let mut edges: Vec<usize> = (0..src.len()).collect();
    edges.sort_by_key(|&e| (dst[e], src[e]));
    let pick = |v: &[u32]| edges.iter().map(|&e| v[e]).collect::<Vec<_>>();
    let attr: Vec<f32> = edges.iter().flat_map(|&e| &g.edge_features[e * ed..(e + 1) * ed]).copied().collect();
    GraphInput::new(n, &x, nd, &attr, ed, &pick(&src), &pick(&dst))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [run, files @ ..] = &args[..] else {
        return Err("usage: edge_order RUN_DIR GRAPH...".into());
    };
    let run = RunDir::open(run)?;
    let mut model: Option<TrainedModel> = None;
    for f in files {
        let g = read_graph(Path::new(f))?;
        let m = match &model {
            Some(m) => m,
            None => {
                model.insert(TrainedModel::open(&run, &Weights::Best, g.num_node_features(), g.num_edge_features())?)
            }
        };
        let mut by_phi: Vec<u32> = (0..g.num_nodes() as u32).collect();
        by_phi.sort_by(|&a, &b| g.phi[a as usize].total_cmp(&g.phi[b as usize]));
        let inputs = [
            ("as stored", graph_input(&g)),
            ("edges by destination", reordered(&g, None)),
            ("nodes by phi, edges by destination", reordered(&g, Some(&by_phi))),
        ];
        println!("{f}: {} nodes, {} edges", g.num_nodes(), g.num_edges());
        for round in 0..2 {
            for (name, input) in &inputs {
                let t = Instant::now();
                let logits = m.executor().infer(input)?;
                let s = t.elapsed().as_secs_f64();
                let sum: f64 = logits.iter().map(|&v| v as f64).sum();
                if round == 1 {
                    println!("  {name:<36} {s:.3} s  (sum of logits {sum:.3})");
                }
            }
        }
    }
    Ok(())
}
