//! Reference inputs and outputs for checking an exported model elsewhere (ONNX Runtime, the
//! ACTS plugin): each event's graph arrays and the engine's logits as `.npy` files, and
//! `reference.json` listing them with the engine's scoring time ([`Reference`]).

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;
use trackgnn_engine::{ForwardCache, InteractionGnn};
use trackgnn_graph::Graph;
use trackgnn_model::graph_input;

use crate::error::{Error, Result};
use crate::npy::write_npy;

/// One event of a [`Reference`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReferenceEvent {
    /// The event.
    pub event_id: u64,
    /// The files' common prefix, `eventNNNNNNNNN`.
    pub prefix: String,
    /// Nodes of the graph.
    pub nodes: usize,
    /// Edges of the graph.
    pub edges: usize,
    /// Seconds the engine took to score the graph.
    pub engine_seconds: f64,
}

/// What `reference.json` holds: the directory, the engine's threads and the events.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Reference {
    /// The directory of the files.
    pub dir: PathBuf,
    /// Threads the engine scored with.
    pub threads: usize,
    /// One entry per event.
    pub events: Vec<ReferenceEvent>,
    /// Mean of the events' `engine_seconds`.
    pub mean_engine_seconds: f64,
}

impl Reference {
    /// An empty reference written into `dir` (created if missing) by a model on `threads` threads.
    pub fn new(dir: &Path, threads: usize) -> Result<Reference> {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io { path: dir.to_path_buf(), source })?;
        Ok(Reference { dir: dir.to_path_buf(), threads, events: Vec::new(), mean_engine_seconds: 0.0 })
    }

    /// Scores `graph` (event `event_id`) with `model` (timed; the first event after one untimed
    /// warm-up) and writes `<prefix>.x.npy`, `<prefix>.edge_index.npy`, `<prefix>.edge_attr.npy`
    /// (when the graph has edge features) and `<prefix>.logits.npy`.
    pub fn add(&mut self, model: &InteractionGnn<f32>, event_id: u64, graph: &Graph) -> Result<()> {
        let g = graph;
        let (n, e, nf, ef) = (g.num_nodes(), g.num_edges(), g.num_node_features(), g.num_edge_features());
        let input = graph_input(g);
        let mut cache = ForwardCache::default();
        if self.events.is_empty() {
            model.infer(&input, &mut cache);
        }
        let t0 = Instant::now();
        let logits = model.infer(&input, &mut cache);
        let engine_seconds = t0.elapsed().as_secs_f64();
        let prefix = format!("event{event_id:09}");
        let path = |what: &str| self.dir.join(format!("{prefix}.{what}.npy"));
        write_npy(&path("x"), &[n, nf], &g.node_features)?;
        let ei: Vec<i64> = g.src.iter().chain(&g.dst).map(|&v| v as i64).collect();
        write_npy(&path("edge_index"), &[2, e], &ei)?;
        if ef > 0 {
            write_npy(&path("edge_attr"), &[e, ef], &g.edge_features)?;
        }
        write_npy(&path("logits"), &[e], &logits)?;
        self.events.push(ReferenceEvent { event_id, prefix, nodes: n, edges: e, engine_seconds });
        let total: f64 = self.events.iter().map(|r| r.engine_seconds).sum();
        self.mean_engine_seconds = total / self.events.len() as f64;
        Ok(())
    }

    /// Writes `reference.json` (atomically) and returns its JSON.
    pub fn finish(&self) -> Result<serde_json::Value> {
        let value = serde_json::to_value(self).expect("a reference serialises");
        let text = serde_json::to_string_pretty(&value).expect("JSON values serialise") + "\n";
        let path = self.dir.join("reference.json");
        trackgnn_trackml::atomic::write(&path, text.as_bytes()).map_err(|source| Error::Io { path, source })?;
        Ok(value)
    }
}
