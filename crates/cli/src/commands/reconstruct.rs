//! `trackgnn reconstruct`: events → graphs (the run's recipe, without truth) → edge scores →
//! track candidates → TrackML submission files; then, for events that have truth files, the
//! track metrics and their plots. Reconstruction itself never reads a truth file, except in the
//! `--truth-scores` diagnostic, where truth replaces the GNN's edge scores.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::json;
use trackgnn_engine::{ForwardCache, GraphInput, InteractionGnn};
use trackgnn_graph::module_map::file_hash;
use trackgnn_graph::{GraphRecipe, Method, ModuleMap, build_graph};
use trackgnn_reco::submission::{event_track_ids, singleton_track_ids, submission_file_name, write_submission};
use trackgnn_reco::tracks::Method as TrackMethod;
use trackgnn_reco::tracks::search::{NodeLayers, Surface, node_layers};
use trackgnn_reco::{MetricsConfig, ScoredEdges, TrackBuilder, TrackBuilderConfig, TrackMetrics, evaluate_event};
use trackgnn_trackml::Detector;
use trackgnn_trackml::csv::{FileKind, ReadOptions, discover_events, read_event};
use trackgnn_trackml::rng::Rng;
use trackgnn_train::TrainConfig;
use trackgnn_train::checkpoint::load_weights;

use crate::cli::{ReconstructArgs, TrackMethodArg};
use crate::progress;
use crate::util::{load_detector, print_json, thread_pool};

/// What reconstructing one event gives.
pub struct EventTracks {
    /// A track id per hit of the event (0: in no track).
    pub hit_tracks: Vec<u32>,
    /// Seconds of graph building, GNN inference and track building.
    pub seconds: [f64; 3],
    /// Nodes and edges of the graph.
    pub graph_size: (usize, usize),
}

/// A trained run, ready for inference: its recipe (without truth cuts), map and model.
pub struct Reconstructor {
    /// The recipe for inference.
    pub recipe: GraphRecipe,
    map: Option<ModuleMap>,
    model: InteractionGnn<f32>,
    det: Detector,
    /// The detector's layers for the hit search of track following.
    surfaces: Vec<Surface>,
}

impl Reconstructor {
    /// Loads a run directory's recipe, module map (checked against its recorded hash), config
    /// and weights (`best`, `last` or a file).
    pub fn load(run: &Path, weights: &str, det: Detector) -> Result<Self> {
        let rp = run.join("recipe.toml");
        let text = std::fs::read_to_string(&rp).with_context(|| format!("reading {}", rp.display()))?;
        let recipe: GraphRecipe = toml::from_str(&text).with_context(|| format!("{}: invalid recipe", rp.display()))?;
        let recipe = recipe.for_inference();
        let map = match (&recipe.method, &recipe.map_file) {
            (Method::ModuleMap, Some(p)) => {
                let p = PathBuf::from(p);
                if let Some(h) = &recipe.map_hash {
                    let now = file_hash(&p)?;
                    if &now != h {
                        bail!(
                            "{}: the module map changed since the graphs were built ({h} then, {now} now)",
                            p.display()
                        );
                    }
                }
                Some(ModuleMap::load(&p)?)
            }
            (Method::ModuleMap, None) => bail!("{}: module-map recipe without a map file", rp.display()),
            _ => None,
        };
        let cp = run.join("config.toml");
        let text = std::fs::read_to_string(&cp).with_context(|| format!("reading {}", cp.display()))?;
        let cfg: TrainConfig =
            toml::from_str(&text).with_context(|| format!("{}: invalid training config", cp.display()))?;
        let node_dim = recipe.features.features.len();
        let edge_dim = if recipe.edge_features { trackgnn_graph::recipe::EDGE_FEATURE_NAMES.len() } else { 0 };
        let mut model = InteractionGnn::<f32>::new(cfg.model.clone(), node_dim, edge_dim, &mut Rng::new(0));
        let wp = match weights {
            "best" => run.join("best.safetensors"),
            "last" => run.join("checkpoint").join("model.safetensors"),
            other => PathBuf::from(other),
        };
        load_weights(&wp, &mut model.params)?;
        model.set_precision(cfg.precision);
        let surfaces = Surface::of_detector(&det);
        Ok(Reconstructor { recipe, map, model, det, surfaces })
    }

    /// The GNN's edge scores (probabilities) on a graph.
    fn gnn_scores(&self, graph: &trackgnn_graph::Graph, cache: &mut ForwardCache<f32>) -> Vec<f32> {
        let input = GraphInput::<f32>::new(
            graph.num_nodes(),
            &graph.node_features,
            graph.num_node_features(),
            &graph.edge_features,
            graph.num_edge_features(),
            &graph.src,
            &graph.dst,
        );
        let logits = self.model.infer(&input, cache);
        logits.iter().map(|&x| 1.0 / (1.0 + (-x).exp())).collect()
    }

    /// Tracks of one event (hits only; with `truth_scores`, truth scores the edges instead of
    /// the GNN, for which the event must carry truth and particles).
    pub fn event(
        &self,
        event: &trackgnn_trackml::Event,
        builder: &TrackBuilder,
        cache: &mut ForwardCache<f32>,
        truth_scores: bool,
    ) -> Result<EventTracks> {
        let t = Instant::now();
        let (graph, _) = build_graph(event, &self.det, &self.recipe, self.map.as_ref())?;
        let t_graph = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let scores = if truth_scores {
            let truth = graph.truth.as_ref().with_context(|| {
                format!("event {}: --truth-scores needs the event's truth and particles files", event.event_id)
            })?;
            truth.target.iter().map(|&y| y as f32).collect()
        } else {
            self.gnn_scores(&graph, cache)
        };
        let t_gnn = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let edges = ScoredEdges::from_graph(&graph, &scores);
        let node_tracks = if builder.config().hit_search() {
            let layer = node_layers(&self.det, &event.hits.hit_id, &event.hits.module, &graph.hit_id)?;
            builder.build(&edges.with_layers(NodeLayers { layer: &layer, surfaces: &self.surfaces }))?
        } else {
            builder.build(&edges)?
        };
        let hit_tracks = event_track_ids(&event.hits.hit_id, &graph.hit_id, &node_tracks)?;
        let t_tracks = t.elapsed().as_secs_f64();
        Ok(EventTracks {
            hit_tracks,
            seconds: [t_graph, t_gnn, t_tracks],
            graph_size: (graph.num_nodes(), graph.num_edges()),
        })
    }
}

pub fn run(a: ReconstructArgs) -> Result<ExitCode> {
    let det = load_detector(a.detector.detector.as_deref())?;
    let mut rec = Reconstructor::load(&a.run, &a.weights, det)?;
    if let Some(p) = a.precision {
        rec.model.set_precision(p);
    }
    let method = match a.method {
        TrackMethodArg::Cc => TrackMethod::Cc,
        TrackMethodArg::Walkthrough => TrackMethod::Walkthrough,
        TrackMethodArg::Follow => TrackMethod::Follow,
    };
    let score_cut = a.score_cut.unwrap_or(method.default_score_cut());
    let defaults = TrackBuilderConfig::default();
    let branch_cut = a.branch_cut.unwrap_or_else(|| defaults.branch_cut.map_or(score_cut, |b| b.max(score_cut)));
    let mut follow = defaults.follow.clone();
    follow.search = !a.no_hit_search;
    let builder = TrackBuilder::new(TrackBuilderConfig {
        method,
        score_cut,
        min_hits: a.min_hits as usize,
        branch_cut: Some(branch_cut),
        follow,
        ..defaults
    })?;
    let mut events = discover_events(&a.input)?;
    if let Some(n) = a.events {
        events.truncate(n);
    }
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let pool = thread_pool(a.threads)?;
    let pb = progress::bar(events.len() as u64, "reconstruct");
    let mut per_event = Vec::new();
    let mut cache = ForwardCache::default();
    // Reconstruction: hits (and cells when features need them), never truth but for the
    // --truth-scores diagnostic.
    let needs_cells = rec.recipe.features.features.iter().any(|f| f.name == "cluster_size" || f.name == "charge_sum");
    for files in &events {
        let t = Instant::now();
        let opts = ReadOptions { truth: a.truth_scores, particles: a.truth_scores, cells: needs_cells };
        let event = read_event(files, opts)?;
        let t_read = t.elapsed().as_secs_f64();
        let et = pool.install(|| rec.event(&event, &builder, &mut cache, a.truth_scores))?;
        let (tracks, [t_graph, t_gnn, t_tracks], (nodes, edges)) = (et.hit_tracks, et.seconds, et.graph_size);
        let t = Instant::now();
        let ids = singleton_track_ids(&tracks)?;
        write_submission(&a.out.join(submission_file_name(event.event_id)), event.event_id, &event.hits.hit_id, &ids)?;
        let t_write = t.elapsed().as_secs_f64();
        let n_tracks = trackgnn_reco::tracks::num_tracks(&tracks);
        per_event.push((event.event_id, tracks, json!({
            "event_id": event.event_id, "hits": event.hits.len(), "nodes": nodes, "edges": edges, "tracks": n_tracks,
            "read_seconds": t_read, "graph_seconds": t_graph, "gnn_seconds": t_gnn, "track_seconds": t_tracks, "write_seconds": t_write,
        })));
        pb.inc(1);
    }
    pb.finish_and_clear();
    // Evaluation: only now, and only for events with truth files.
    let mut total: Option<TrackMetrics> = None;
    let cfg = MetricsConfig::default();
    for (files, (_, tracks, _)) in events.iter().zip(&per_event) {
        if !(files.has(FileKind::Truth) && files.has(FileKind::Particles)) {
            continue;
        }
        let event = read_event(files, ReadOptions { truth: true, particles: true, cells: false })?;
        let m = evaluate_event(&event, tracks, &cfg)?;
        match total.as_mut() {
            Some(t) => t.merge(&m)?,
            None => total = Some(m),
        }
    }
    let plots = match &total {
        Some(m) => trackgnn_reco::plot_track_efficiency(&a.out.join("plots"), m)?,
        None => Vec::new(),
    };
    let rows: Vec<&serde_json::Value> = per_event.iter().map(|p| &p.2).collect();
    let mean = |k: &str| rows.iter().map(|r| r[k].as_f64().unwrap_or(0.0)).sum::<f64>() / rows.len().max(1) as f64;
    let timing = json!({
        "read_seconds": mean("read_seconds"), "graph_seconds": mean("graph_seconds"), "gnn_seconds": mean("gnn_seconds"),
        "track_seconds": mean("track_seconds"), "write_seconds": mean("write_seconds"),
    });
    if a.json {
        print_json(
            &json!({ "out": a.out, "method": format!("{method:?}").to_lowercase(), "score_cut": score_cut, "min_hits": a.min_hits, "branch_cut": branch_cut, "hit_search": builder.config().hit_search(), "truth_scores": a.truth_scores, "events": rows, "mean_seconds_per_event": timing, "metrics": total, "plots": plots }),
        );
    } else {
        println!(
            "{} events reconstructed into {} ({:?}, score cut {}, candidates of >= {} hits)",
            rows.len(),
            a.out.display(),
            method,
            score_cut,
            a.min_hits
        );
        if a.truth_scores {
            println!(
                "edge scores from truth (--truth-scores): the metrics below are the ceiling of this graph and track builder"
            );
        }
        println!(
            "per event: {:.0} nodes, {:.0} edges, {:.0} tracks; seconds: read {:.3}, graph {:.3}, GNN {:.3}, tracks {:.3}, write {:.3}",
            mean("nodes"),
            mean("edges"),
            mean("tracks"),
            mean("read_seconds"),
            mean("graph_seconds"),
            mean("gnn_seconds"),
            mean("track_seconds"),
            mean("write_seconds")
        );
        if let Some(m) = &total {
            println!(
                "track efficiency {:.4} (target: pT >= {} GeV, >= {} hits; double majority), prompt targets {:.4} (produced within {} mm of the beam line), all reconstructable {:.4}; fake rate {:.4}; duplicate rate {:.4}; TrackML score {:.4}",
                m.efficiency,
                cfg.target_pt_min,
                cfg.min_particle_hits,
                m.efficiency_prompt,
                cfg.prompt_max_vertex_r,
                m.efficiency_all,
                m.fake_rate,
                m.duplicate_rate,
                m.trackml_score
            );
            for p in &plots {
                println!("plot: {}", p.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
