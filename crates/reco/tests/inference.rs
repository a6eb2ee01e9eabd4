//! Inference with a run: a small run written here, then one event, a directory of
//! events, the truth-scores diagnostic and the refusals.

use std::path::Path;

use trackgnn_engine::InteractionGnn;
use trackgnn_graph::recipe::RECIPE_FILE;
use trackgnn_graph::{GraphMethod, GraphRecipe, build_graph};
use trackgnn_model::TrainConfig;
use trackgnn_model::gnn::input_widths;
use trackgnn_model::run_dir::{RunDir, Weights};
use trackgnn_model::weights::save_weights;
use trackgnn_reco::inference::{RecoReport, Reconstructor};
use trackgnn_reco::{NO_TRACK, TrackBuilderConfig, TrackMethod, read_submission, submission_file_name};
use trackgnn_simulate::{Generator, SimConfig};
use trackgnn_trackml::csv::{ReadOptions, discover_events, read_event, write_event};
use trackgnn_trackml::rng::Rng;
use trackgnn_trackml::{Detector, Event};

fn generator() -> Generator {
    Generator::new(Detector::trackml(), SimConfig { pileup: 2.0, ..SimConfig::default() })
}

/// A run directory as training leaves it (configuration, recipe, best and last weights), with
/// the untrained weights of a tiny model: inference needs no trained model to be exercised.
fn tiny_run(dir: &Path) -> RunDir {
    let g = generator();
    let recipe = GraphRecipe::new(GraphMethod::Geometric);
    let graphs = dir.join("graphs");
    std::fs::create_dir_all(&graphs).unwrap();
    std::fs::write(graphs.join(RECIPE_FILE), toml::to_string(&recipe).unwrap()).unwrap();
    // Training takes the widths from its first graph, inference from the recipe: they agree.
    let (graph, _) = build_graph(&g.event(1, 1).0, g.detector(), &recipe, None).unwrap();
    let (node_dim, edge_dim) = input_widths(&recipe);
    assert_eq!((graph.num_node_features(), graph.num_edge_features()), (node_dim, edge_dim));
    let mut cfg = TrainConfig { epochs: 1, ..TrainConfig::default() };
    (cfg.model.hidden, cfg.model.iterations) = (8, 1);
    let run = RunDir::new(dir.join("run"));
    std::fs::create_dir_all(run.checkpoint_dir()).unwrap();
    run.write_config(&cfg).unwrap();
    run.copy_recipe(&graphs).unwrap();
    let model = InteractionGnn::<f32>::new(cfg.model.clone(), node_dim, edge_dim, &mut Rng::new(1));
    for w in [Weights::Best, Weights::Last] {
        save_weights(&run.weights_path(&w), &model.params).unwrap();
    }
    RunDir::open(run.root()).unwrap()
}

/// `event` with its hits only, as reconstruction reads it.
fn hits_only(event: &Event) -> Event {
    Event { truth: None, particles: None, cells: None, ..event.clone() }
}

#[test]
fn a_run_reconstructs_events_and_directories() {
    let dir = tempfile::tempdir().unwrap();
    let run = tiny_run(dir.path());
    let follow = TrackBuilderConfig::for_method(TrackMethod::Follow, None);
    assert_eq!((follow.score_cut, follow.branch_cut), (0.02, Some(0.8)));
    assert_eq!(TrackBuilderConfig::for_method(TrackMethod::Walkthrough, Some(0.9)).branch_cut, Some(0.9));
    let rec = Reconstructor::open(&run, &Weights::Best, Detector::trackml()).unwrap().with_tracks(follow).unwrap();
    assert_eq!(rec.read_options(), ReadOptions { truth: false, particles: false, cells: false });
    let event = generator().event(2, 1).0;

    // One event, from its hits alone: a score per edge, a track id per hit.
    let reco = rec.event(&hits_only(&event)).unwrap();
    assert_eq!(reco.scores.len(), reco.graph.num_edges());
    assert!(reco.scores.iter().all(|s| (0.0..=1.0).contains(s)));
    assert_eq!(reco.hit_tracks.len(), event.hits.len());
    assert!(reco.num_tracks() > 0);
    assert_eq!(reco.hit_tracks.iter().copied().max(), Some(reco.num_tracks()));
    // The same event with its truth gives the same tracks: inference never looks at it.
    assert_eq!(rec.event(&event).unwrap().hit_tracks, reco.hit_tracks);

    // Truth in place of the GNN: scores are 0 or 1, and need the truth.
    let truth = Reconstructor::open(&run, &Weights::Last, Detector::trackml()).unwrap().with_truth_scores(true);
    assert!(truth.read_options().truth && truth.read_options().particles);
    let ceiling = truth.event(&event).unwrap();
    assert!(ceiling.scores.iter().all(|&s| s == 0.0 || s == 1.0));
    let err = truth.event(&hits_only(&event)).unwrap_err().to_string();
    assert!(err.contains("truth scores need the event's truth"), "{err}");

    // A directory: a submission per event, then the metrics of the events with truth.
    let events = dir.path().join("events");
    std::fs::create_dir_all(&events).unwrap();
    for id in [1, 2] {
        write_event(&events, &generator().event(2, id).0, false).unwrap();
    }
    let mut seen = Vec::new();
    let out = dir.path().join("tracks");
    let done = rec.reconstruct_dir(&events, &out, None, |e| seen.push(e.event_id)).unwrap();
    assert_eq!(seen, [1, 2]);
    assert_eq!(done.events.iter().map(|e| e.event_id).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(done.events[0].tracks, reco.num_tracks());
    let m = done.metrics.as_ref().expect("the events have truth");
    assert!((0.0..=1.0).contains(&m.efficiency));
    assert_eq!(done.plots.len(), 4);
    let sub = &read_submission(&out.join(submission_file_name(1))).unwrap()[0];
    assert_eq!(sub.hit_id, event.hits.hit_id);
    // Hits in no track get a track id of their own in the file.
    let singles = reco.hit_tracks.iter().filter(|&&t| t == NO_TRACK).count();
    let mut ids = sub.track_id.clone();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), reco.num_tracks() as usize + singles);
    let files = discover_events(&events).unwrap();
    assert!(read_event(&files[0], rec.read_options()).unwrap().truth.is_none());

    // The report: settings, means per event, metrics and plots; the same as JSON.
    let report = RecoReport::new(&out, &rec, &done);
    let text = report.to_string();
    let lines: Vec<&str> = text.lines().collect();
    let settings = format!("(Follow, score cut 0.02, candidates of >= {} hits)", rec.track_config().min_hits);
    assert!(lines[0].starts_with("2 events reconstructed into ") && lines[0].ends_with(&settings), "{text}");
    assert!(lines[1].starts_with("per event: ") && lines[2].starts_with("track efficiency "), "{text}");
    assert_eq!(lines.len(), 3 + done.plots.len());
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(
        (json["method"].as_str(), json["branch_cut"].as_f64(), json["hit_search"].as_bool()),
        (Some("follow"), Some(0.8), Some(true))
    );
    let graph_s = (done.events[0].graph_seconds + done.events[1].graph_seconds) / 2.0;
    assert_eq!(json["mean_seconds_per_event"]["graph_seconds"].as_f64(), Some(graph_s));
    assert_eq!(json["metrics"]["efficiency"].as_f64(), Some(m.efficiency));
    // The metrics count particles as long as a candidate, unless overridden.
    let min_hits = rec.track_config().min_hits as u64;
    assert_eq!((json["min_particle_hits"].as_u64(), json["min_track_hits"].as_u64()), (Some(min_hits), Some(min_hits)));
    let rec = rec.with_min_particle_hits(Some(1)).unwrap();
    assert_eq!((rec.metrics_config().min_particle_hits, rec.metrics_config().min_track_hits), (1, min_hits as usize));
    assert!(rec.with_min_particle_hits(Some(0)).is_err());
}

#[test]
fn what_cannot_be_opened_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let run = tiny_run(dir.path());
    let det = Detector::trackml();
    let err = Reconstructor::open(&run, &Weights::File(dir.path().join("none.safetensors")), det.clone())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("none.safetensors"), "{err}");
    // A module-map recipe without its map, then with a map that changed since.
    let mut recipe: GraphRecipe = toml::from_str(&std::fs::read_to_string(run.recipe_path()).unwrap()).unwrap();
    recipe.method = GraphMethod::ModuleMap;
    std::fs::write(run.recipe_path(), toml::to_string(&recipe).unwrap()).unwrap();
    let err = Reconstructor::open(&run, &Weights::Best, det.clone()).err().unwrap().to_string();
    assert!(err.contains("module-map recipe without a map file") && err.contains(RECIPE_FILE), "{err}");
    let map = dir.path().join("map.bin");
    std::fs::write(&map, b"not this one").unwrap();
    recipe.map_file = Some(map.display().to_string());
    recipe.map_hash = Some("crc32:00000000".into());
    std::fs::write(run.recipe_path(), toml::to_string(&recipe).unwrap()).unwrap();
    let err = Reconstructor::open(&run, &Weights::Best, det).err().unwrap().to_string();
    assert!(err.contains("map.bin") && err.contains("changed since the graphs were built"), "{err}");
}
