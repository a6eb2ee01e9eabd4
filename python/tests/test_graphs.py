"""Graphs: built from an event with a recipe, the same as `trackgnn build-graphs`."""

import numpy as np
import pytest

import trackgnn


def test_geometric_graph_arrays(event):
    graph, stats = trackgnn.build_graph(event, trackgnn.Recipe("geometric"))
    n, e = graph.num_nodes, graph.num_edges
    assert n == event.num_hits and e > n / 2
    assert graph.x.shape == (n, 3) and graph.x.dtype == np.float32
    assert graph.node_feature_names == ["r", "phi", "z"]
    assert graph.edge_index.shape == (2, e) and graph.edge_index.dtype == np.int64
    assert graph.edge_index.min() >= 0 and graph.edge_index.max() < n
    assert graph.edge_attr.shape == (e, 4)
    np.testing.assert_array_equal(graph.hit_id, event.hits()["hit_id"])
    r, phi, z = graph.positions
    np.testing.assert_allclose(graph.x[:, 0], r / 1000.0, rtol=1e-6)
    # Truth labels and the construction figures agree.
    assert graph.has_truth and graph.y.shape == (e,)
    assert stats["nodes"] == n and stats["edges"] == e
    assert stats["true_edges"] == graph.y.sum() and stats["target_edges"] == graph.target.sum()
    assert 0.8 < stats["efficiency"] <= 1.0


def test_graph_equals_trackgnn_build_graphs(tmp_path, event, cli):
    trackgnn.write_event(tmp_path / "ev", event)
    cli(tmp_path, "build-graphs", "--input", "ev", "--out", "g", "--threads", 1)
    recipe = trackgnn.Recipe.load(tmp_path / "g" / "recipe.toml")
    assert recipe == trackgnn.Recipe("geometric")
    from_cli = trackgnn.read_graph(tmp_path / "g" / "event000000001.graph")
    mine, _ = trackgnn.build_graph(trackgnn.read_event(tmp_path / "ev" / "event000000001"), recipe)
    assert mine == from_cli
    np.testing.assert_array_equal(mine.edge_index, from_cli.edge_index)
    # Written by Python, read by Python: the same graph.
    trackgnn.write_graph(tmp_path / "again.graph", mine)
    assert trackgnn.read_graph(tmp_path / "again.graph") == from_cli


def test_recipe_toml_round_trip():
    r = trackgnn.Recipe("module-map")
    assert r.method == "module-map" and r.node_features == ["r", "phi", "z"]
    assert trackgnn.Recipe.from_toml(r.to_toml()) == r
    with pytest.raises(trackgnn.ConfigError, match="unknown graph method `knn`"):
        trackgnn.Recipe("knn")
    with pytest.raises(trackgnn.ConfigError, match="invalid graph recipe"):
        trackgnn.Recipe.from_toml("method = 'geometric'\nbogus = 1\n")


def test_graph_errors_name_the_file(tmp_path, event):
    with pytest.raises(FileNotFoundError, match="nowhere.graph"):
        trackgnn.read_graph(tmp_path / "nowhere.graph")
    (tmp_path / "bad.graph").write_bytes(b"not a graph file at all")
    with pytest.raises(trackgnn.TrackgnnError, match="bad.graph"):
        trackgnn.read_graph(tmp_path / "bad.graph")
    with pytest.raises(FileNotFoundError, match="nowhere.toml"):
        trackgnn.Recipe.load(tmp_path / "nowhere.toml")
    with pytest.raises(trackgnn.ConfigError, match="module map"):
        trackgnn.build_graph(event, trackgnn.Recipe("module-map"))
