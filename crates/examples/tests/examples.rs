//! Runs the three example programs in turn, on a temporary directory, with small sizes: the
//! code of each example file is compiled in here as a module.

#[allow(dead_code)]
#[path = "../examples/generate_graphs.rs"]
mod generate_graphs;
#[allow(dead_code)]
#[path = "../examples/reconstruct_event.rs"]
mod reconstruct_event;
#[allow(dead_code)]
#[path = "../examples/train.rs"]
mod train;

#[test]
fn the_examples_generate_train_and_reconstruct() {
    let dir = tempfile::tempdir().unwrap();
    let efficiency = generate_graphs::generate_graphs(dir.path(), 10).unwrap();
    assert!(efficiency > 0.8, "graph efficiency {efficiency}");
    let outcome = train::train(dir.path(), 2).unwrap();
    assert_eq!(outcome.epochs_completed, 2);
    let run = trackgnn_train::RunDir::open(trackgnn_examples::run_dir(dir.path())).unwrap();
    assert!(run.best_path().is_file());
    let reco = reconstruct_event::reconstruct_event(dir.path(), 1).unwrap();
    assert!(reco.num_tracks() > 0);
    assert_eq!(reco.scores.len(), reco.graph.num_edges());
    assert!(reco.scores.iter().all(|s| (0.0..=1.0).contains(s)));
    // A run that is not there is named.
    let err = reconstruct_event::reconstruct_event(&dir.path().join("nowhere"), 1).unwrap_err().to_string();
    assert!(err.contains("nowhere"), "{err}");
}
