"""A trained run: scores, tracks and metrics, the same as the command line's."""

import threading

import numpy as np
import pytest

import trackgnn


@pytest.fixture(scope="module")
def run(tiny):
    return trackgnn.Run(tiny / "run")


def graphs(tiny):
    return [trackgnn.read_graph(p) for p in sorted((tiny / "g").glob("*.graph"))]


def test_scores_are_the_sigmoid_of_the_logits(tiny, run):
    graph = graphs(tiny)[0]
    scores, logits = run.score(graph), run.logits(graph)
    assert scores.shape == (graph.num_edges,) and scores.dtype == np.float32
    np.testing.assert_allclose(scores, 1.0 / (1.0 + np.exp(-logits.astype(np.float64))), rtol=1e-6, atol=1e-7)
    assert scores.std() > 0, "a trained model does not score every edge alike"
    # The graph Run.build_graph makes from the event is the graph file's (no truth cuts).
    event = trackgnn.read_event(tiny / "ev" / "event000000001")
    assert run.build_graph(event) == graph
    np.testing.assert_array_equal(run.score(run.build_graph(event)), scores)


def test_edge_metrics_equal_trackgnn_eval(tiny, run, cli):
    import json

    out = json.loads(cli(tiny, "eval", "--run", "run", "--graphs", "g", "--all", "--json", "--threads", 1).stdout)
    per_event = [trackgnn.edge_metrics(g, run.logits(g), threshold=out["threshold"]) for g in graphs(tiny)]
    assert len(per_event) == out["events"] == 6
    for key in ("auc", "efficiency", "target_purity", "total_purity", "purity"):
        values = [m[key] for m in per_event if np.isfinite(m[key])]
        mean = float(np.mean(values)) if values else None
        assert (mean is None and out[key] is None) or mean == pytest.approx(out[key], rel=1e-9, abs=1e-12), key


def test_track_metrics_equal_trackgnn_reconstruct(tiny, cli):
    import json

    # Truth scores (a diagnostic) give real tracks even from a run trained for seconds.
    args = ["reconstruct", "--run", "run", "--input", "ev", "--out", "rec", "--min-hits", 3, "--truth-scores"]
    out = json.loads(cli(tiny, *args, "--json", "--threads", 1).stdout)
    run = trackgnn.Run(tiny / "run", min_hits=3, truth_scores=True)

    def check(event, graph, scores, tracks):
        np.testing.assert_array_equal(scores, graph.target.astype(np.float32))
        np.testing.assert_array_equal(run.tracks(event, graph, scores), tracks)

    assert_counts_equal(tiny, run, out, check, {"min_track_hits": 3, "min_particle_hits": 3})
    assert out["metrics"]["efficiency"] > 0.8


def assert_counts_equal(tiny, run, out, check=None, metrics=None):
    """The track metrics of `run` on the tiny events (`metrics`: their settings), summed, equal
    those of `reconstruct`'s JSON `out`; `check` sees each event's reconstruction."""
    counts = {}
    for i in range(1, 7):
        event = trackgnn.read_event(tiny / "ev" / f"event{i:09d}")
        graph, scores, tracks = run.reconstruct(event)
        if check:
            check(event, graph, scores, tracks)
        m = trackgnn.track_metrics(event, tracks, metrics)
        for k in ("n_target_particles", "n_target_matched", "n_candidates", "n_fake_candidates"):
            counts[k] = counts.get(k, 0) + m[k]
    for k, v in counts.items():
        assert v == out["metrics"][k], k
    assert counts["n_target_matched"] / counts["n_target_particles"] == pytest.approx(out["metrics"]["efficiency"])


def test_run_and_reconstruct_agree_with_their_defaults(tiny, cli):
    import json

    # Nothing set on either side: Python's Run, track_metrics and the CLI share the library's
    # defaults (track following's settings, min_hits 5, the run's score cut), so the figures match.
    args = ["reconstruct", "--run", "run", "--input", "ev", "--out", "rdef", "--json", "--threads", 1]
    out = json.loads(cli(tiny, *args).stdout)
    assert_counts_equal(tiny, trackgnn.Run(tiny / "run"), out)


def test_build_tracks_groups_the_nodes_of_a_scored_graph(event):
    graph, _ = trackgnn.build_graph(event)
    node_tracks = trackgnn.build_tracks(graph, graph.target.astype(np.float32), method="cc")
    assert node_tracks.shape == (graph.num_nodes,) and node_tracks.max() > 10
    # Perfect scores: each track's hits come from one particle (or it is a merger of few).
    pid = graph.particle_id
    pure = [len(set(pid[node_tracks == t])) == 1 for t in np.unique(node_tracks) if t != trackgnn.NO_TRACK]
    assert np.mean(pure) > 0.9
    hit_tracks = node_tracks  # every hit is a node of the geometric graph
    m = trackgnn.track_metrics(event, hit_tracks)
    assert m["efficiency"] > 0.8 and m["fake_rate"] < 0.05 and 0 < m["trackml_score"] <= 1
    with pytest.raises(trackgnn.ConfigError, match="3 scores for a graph of"):
        trackgnn.build_tracks(graph, np.zeros(3, dtype=np.float32))
    with pytest.raises(trackgnn.ConfigError, match="unknown track method `dbscan`"):
        trackgnn.build_tracks(graph, graph.target.astype(np.float32), method="dbscan")


def test_run_errors(tmp_path, tiny, run, event):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        trackgnn.Run(tmp_path / "nowhere")
    with pytest.raises(trackgnn.TrackgnnError, match="missing.safetensors"):
        trackgnn.Run(tiny / "run", weights=str(tmp_path / "missing.safetensors"))
    recipe = trackgnn.Recipe.from_toml(trackgnn.Recipe("geometric").to_toml().replace("edge_features = true", "edge_features = false"))
    graph, _ = trackgnn.build_graph(event, recipe)
    with pytest.raises(trackgnn.ConfigError, match="edge features"):
        run.score(graph)
    with pytest.raises(trackgnn.ConfigError, match="unknown device `gpu`"):
        trackgnn.Run(tiny / "run", device="gpu")
    if not trackgnn.Run(tiny / "run", device="cpu").score(graphs(tiny)[0]).size:
        raise AssertionError("the CPU scores")
    with pytest.raises(trackgnn.TrackgnnError, match="cuda:1: this build of trackgnn has no backend"):
        trackgnn.Run(tiny / "run", device="cuda:1")
    no_truth = trackgnn.Event.from_columns(1, event.hits())
    with pytest.raises(trackgnn.TrackgnnError, match="truth"):
        trackgnn.track_metrics(no_truth, np.zeros(no_truth.num_hits, dtype=np.uint32))


def test_long_calls_release_the_gil():
    # While a thread generates an event, this thread keeps running Python code.
    done = threading.Event()
    ticks = 0

    def work():
        trackgnn.generate_event(seed=1, event_id=1, pileup=40)
        done.set()

    t = threading.Thread(target=work)
    t.start()
    while not done.is_set():
        ticks += 1
    t.join()
    assert ticks > 1000, f"only {ticks} ticks: the call held the GIL"


def test_build_tracks_drops_candidates_held_by_a_weak_link(event):
    graph, _ = trackgnn.build_graph(event)
    # Perfect scores, but one true edge of every third track's particle scores 0.6 instead.
    scores = graph.target.astype(np.float32)
    true_edges = np.flatnonzero(graph.target)
    src, dst = graph.edge_index
    particle = graph.particle_id[src[true_edges]]
    _, first = np.unique(particle, return_index=True)
    weak = true_edges[first[::3]]
    scores[weak] = 0.6
    kept_all = trackgnn.build_tracks(graph, scores, score_cut=0.5)
    selected = trackgnn.build_tracks(graph, scores, score_cut=0.5, min_candidate_score=0.9)
    n = lambda ids: len(np.unique(ids[ids != trackgnn.NO_TRACK]))
    assert 0 < n(selected) < n(kept_all)
    # Every node kept had a track before; none of the weak edges joins two kept nodes.
    assert np.all(kept_all[selected != trackgnn.NO_TRACK] != trackgnn.NO_TRACK)
    s, d = src[weak], dst[weak]
    assert not np.any((selected[s] != trackgnn.NO_TRACK) & (selected[s] == selected[d]))
    # The mean of the hits' best edges does not see one weak edge among good ones.
    by_mean = trackgnn.build_tracks(graph, scores, score_cut=0.5, min_candidate_score=0.9, candidate_score="mean_best_edge")
    assert n(by_mean) > n(selected)
    # Only candidates of at most 2 nodes must reach the cut: every track (of 5 or more) stays.
    short_only = trackgnn.build_tracks(graph, scores, score_cut=0.5, min_candidate_score=0.9, candidate_score_max_hits=2)
    assert n(short_only) == n(kept_all)
    with pytest.raises(trackgnn.ConfigError, match="unknown candidate score `best`"):
        trackgnn.build_tracks(graph, scores, min_candidate_score=0.5, candidate_score="best")
    with pytest.raises(trackgnn.ConfigError, match="min_candidate_score"):
        trackgnn.build_tracks(graph, scores, min_candidate_score=1.5)


def test_a_quality_model_drops_what_reconstruct_drops(tiny, cli):
    import json

    # Fitted by `trackgnn train-quality` to track following's candidates of the tiny events.
    fit = ["train-quality", "--run", "run", "--input", "ev", "--out", "q.json", "--min-hits", 3, "--json"]
    q = json.loads(cli(tiny, *fit, "--threads", 1).stdout)
    assert q["fakes"] > 0 and q["candidates"] > q["fakes"], q
    args = ["reconstruct", "--run", "run", "--input", "ev", "--method", "follow", "--min-hits", 3, "--json"]
    judged = json.loads(cli(tiny, *args, "--out", "rq", "--quality", "q.json", "--threads", 1).stdout)
    plain = json.loads(cli(tiny, *args, "--out", "rp", "--threads", 1).stdout)
    assert judged["max_fake_probability"] == 0.5 and plain["max_fake_probability"] is None
    run = trackgnn.Run(tiny / "run", method="follow", min_hits=3, quality=tiny / "q.json")
    counts = {"n_candidates": 0, "n_fake_candidates": 0}
    for i in range(1, 7):
        event = trackgnn.read_event(tiny / "ev" / f"event{i:09d}")
        _, _, tracks = run.reconstruct(event)
        m = trackgnn.track_metrics(event, tracks, {"min_track_hits": 3, "min_particle_hits": 3})
        for k in counts:
            counts[k] += m[k]
    for k, v in counts.items():
        assert v == judged["metrics"][k], k
    assert judged["metrics"]["n_candidates"] <= plain["metrics"]["n_candidates"]
    # Following again around the kept candidates: the same candidates as `reconstruct --rebuild`.
    rebuilt = json.loads(cli(tiny, *args, "--out", "rr", "--quality", "q.json", "--rebuild", "--threads", 1).stdout)
    assert rebuilt["rebuild"] is True and judged["rebuild"] is False
    run = trackgnn.Run(tiny / "run", method="follow", min_hits=3, quality=tiny / "q.json", rebuild=True)
    n = 0
    for i in range(1, 7):
        event = trackgnn.read_event(tiny / "ev" / f"event{i:09d}")
        _, _, tracks = run.reconstruct(event)
        n += trackgnn.track_metrics(event, tracks, {"min_track_hits": 3, "min_particle_hits": 3})["n_candidates"]
    assert n == rebuilt["metrics"]["n_candidates"]
    with pytest.raises(trackgnn.MissingFileError, match="nowhere.json"):
        trackgnn.Run(tiny / "run", quality=tiny / "nowhere.json")
    (tiny / "bad.json").write_text("{")
    with pytest.raises(trackgnn.TrackgnnError, match="bad.json"):
        trackgnn.Run(tiny / "run", quality=tiny / "bad.json")
    with pytest.raises(trackgnn.ConfigError, match="fitted to follow candidates"):
        trackgnn.Run(tiny / "run", method="cc", min_hits=3, quality=tiny / "q.json")
    with pytest.raises(trackgnn.ConfigError, match="max_fake_probability"):
        trackgnn.Run(tiny / "run", quality=tiny / "q.json", max_fake_probability=2.0)


def test_fit_tracks_gives_the_parameters_file_of_reconstruct_fit(tiny, cli):
    import pandas as pd

    ev = trackgnn.read_event(tiny / "ev" / "event000000001")
    # Truth scores: the tiny run's GNN finds few tracks; the fit is what is tested here.
    run = trackgnn.Run(tiny / "run", method="cc", min_hits=3, truth_scores=True)
    _, _, hit_tracks = run.reconstruct(ev)
    fits = run.fit_tracks(ev, hit_tracks)
    assert list(fits) == ["track_id", "q_over_pt", "phi", "eta", "d0", "z0", "sigma_q_over_pt", "sigma_phi",
                          "sigma_eta", "sigma_d0", "sigma_z0", "chi2", "ndf"]
    assert len(fits["track_id"]) > 20 and set(fits["track_id"]) <= set(hit_tracks.tolist())
    assert 0.5 < np.median(fits["chi2"] / fits["ndf"]) < 2, "true tracks fit with χ²/ndf near 1"
    # The CLI's parameters file of the same reconstruction holds the same rows.
    cli(tiny, "reconstruct", "--run", "run", "--input", "ev", "--out", "rfit", "--method", "cc", "--min-hits", 3,
        "--truth-scores", "--fit", "--events", 1, "--threads", 1)
    csv = pd.read_csv(tiny / "rfit" / "event000000001-parameters.csv")
    np.testing.assert_array_equal(csv["track_id"].to_numpy(), fits["track_id"])
    np.testing.assert_allclose(csv["q_over_pt"].to_numpy(), fits["q_over_pt"], rtol=1e-12)
    np.testing.assert_allclose(csv["chi2"].to_numpy(), fits["chi2"], rtol=1e-12)
    with pytest.raises(trackgnn.ConfigError, match="3 track ids for an event of"):
        run.fit_tracks(ev, np.zeros(3, dtype=np.uint32))
