//! Generate events and build their graphs.
//!
//! ```text
//! cargo run -p trackgnn-examples --example generate_graphs -- [DIR] [EVENTS]
//! ```
//!
//! Simulates EVENTS (default 10) events at low pile-up, builds each one's graph with the
//! geometric builder (every hit a node: no truth cuts) and writes the graphs and their recipe
//! into DIR/graphs (default DIR: `trackgnn-example`), where the `train` example finds them.

use std::error::Error;
use std::path::Path;

use trackgnn_examples::{PILEUP, dir_arg, graphs_dir};
use trackgnn_graph::recipe::RECIPE_FILE;
use trackgnn_graph::{GraphMethod, GraphRecipe, build_graph, graph_file_name, write_graph};
use trackgnn_simulate::{Generator, SimConfig};
use trackgnn_trackml::Detector;

fn main() -> Result<(), Box<dyn Error>> {
    let events = std::env::args().nth(2).map_or(Ok(10), |n| n.parse())?;
    generate_graphs(&dir_arg(), events)?;
    Ok(())
}

/// Simulates events 1..=`events` (seed 1) and writes their graphs into `dir/graphs`; returns
/// the graph efficiency over all of them (the share of the target edges the graphs hold).
pub fn generate_graphs(dir: &Path, events: u64) -> Result<f64, Box<dyn Error>> {
    let generator = Generator::new(Detector::trackml(), SimConfig { pileup: PILEUP, ..SimConfig::default() });
    let recipe = GraphRecipe::new(GraphMethod::Geometric);
    let out = graphs_dir(dir);
    std::fs::create_dir_all(&out)?;
    let (mut found, mut targets) = (0, 0);
    for id in 1..=events {
        let (event, _) = generator.event(1, id);
        let (graph, stats) = build_graph(&event, generator.detector(), &recipe, None)?;
        write_graph(&out.join(graph_file_name(id)), &graph)?;
        println!(
            "event {id}: {} hits, {} nodes, {} edges, efficiency {:.3}, purity {:.3}",
            event.hits.len(),
            graph.num_nodes(),
            graph.num_edges(),
            stats.efficiency,
            stats.purity
        );
        (found, targets) = (found + stats.target_edges, targets + stats.event_target_edges);
    }
    // Training copies the recipe into its run, where inference finds how to build graphs.
    std::fs::write(out.join(RECIPE_FILE), toml::to_string(&recipe)?)?;
    let efficiency = found as f64 / targets.max(1) as f64;
    println!("{events} graphs in {}, graph efficiency {efficiency:.3}", out.display());
    Ok(efficiency)
}
