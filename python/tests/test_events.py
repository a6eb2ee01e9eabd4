"""Events: generated, written and read back, as numpy arrays and pandas DataFrames."""

import numpy as np
import pandas as pd
import pytest

import trackgnn

HIT_COLUMNS = ["hit_id", "x", "y", "z", "volume_id", "layer_id", "module_id"]
TRUTH_COLUMNS = ["hit_id", "particle_id", "tx", "ty", "tz", "tpx", "tpy", "tpz", "weight"]


def test_generated_event_has_every_part_as_numpy_columns(event):
    assert event.parts == ["hits", "truth", "particles", "cells"]
    hits = event.hits()
    assert list(hits) == HIT_COLUMNS
    assert hits["x"].dtype == np.float32 and hits["hit_id"].dtype == np.uint64
    assert len(hits["x"]) == event.num_hits > 500
    truth = event.truth()
    assert list(truth) == TRUTH_COLUMNS
    np.testing.assert_array_equal(truth["hit_id"], hits["hit_id"])
    assert abs(truth["weight"].sum() - 1.0) < 1e-3, "TrackML weights sum to 1"
    # The truth's particles are in the particles part (0 is noise).
    pids = set(event.particles()["particle_id"].tolist())
    assert set(truth["particle_id"][truth["particle_id"] != 0].tolist()) <= pids


def test_generation_is_deterministic_and_seeded():
    a = trackgnn.generate_event(seed=5, event_id=2, pileup=1)
    assert a == trackgnn.generate_event(seed=5, event_id=2, pileup=1)
    assert a != trackgnn.generate_event(seed=6, event_id=2, pileup=1)


def test_generate_event_equals_trackgnn_simulate(tmp_path, cli):
    cli(tmp_path, "simulate", "--events", 1, "--first-event", 7, "--pileup", 2, "--seed", 11, "--out", "ev")
    from_cli = trackgnn.read_event(tmp_path / "ev" / "event000000007")
    assert from_cli == trackgnn.generate_event(seed=11, event_id=7, pileup=2)


@pytest.mark.parametrize("gzip", [False, True])
def test_write_read_round_trip(tmp_path, event, gzip):
    written = trackgnn.write_event(tmp_path, event, gzip=gzip)
    suffix = ".csv.gz" if gzip else ".csv"
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == [f"event000000001-{p}{suffix}" for p in ("cells", "hits", "particles", "truth")]
    assert written == sum(p.stat().st_size for p in tmp_path.iterdir())
    assert trackgnn.read_event(tmp_path / "event000000001") == event
    hits_only = trackgnn.read_event(tmp_path / "event000000001", parts=["hits"])
    assert hits_only.parts == ["hits"] and hits_only.truth() is None


def test_load_event_gives_dataframes_like_the_trackml_library(tmp_path, event):
    trackgnn.write_event(tmp_path, event)
    hits, cells, particles, truth = trackgnn.load_event(tmp_path / "event000000001")
    assert all(isinstance(f, pd.DataFrame) for f in (hits, cells, particles, truth))
    assert list(hits.columns) == HIT_COLUMNS and list(truth.columns) == TRUTH_COLUMNS
    assert list(cells.columns) == ["hit_id", "ch0", "ch1", "value"]
    assert len(hits) == event.num_hits and len(particles) == len(event.particles()["particle_id"])
    # The usual pandas work: hits joined with their truth.
    merged = hits.merge(truth, on="hit_id")
    assert len(merged) == len(hits)
    (only_truth,) = trackgnn.load_event(tmp_path / "event000000001", parts=["truth"])
    pd.testing.assert_frame_equal(only_truth, truth)


def test_dataframes_written_read_back_equal(tmp_path, event):
    hits, cells, particles, truth = trackgnn.to_dataframes(event)
    # Shuffled truth rows are matched to the hits by hit_id.
    truth = truth.sample(frac=1.0, random_state=0)
    trackgnn.write_event(tmp_path, event_id=1, hits=hits, truth=truth, particles=particles, cells=cells)
    assert trackgnn.read_event(tmp_path / "event000000001") == event
    # A hand-made event from numpy arrays: hits only.
    cols = {
        "hit_id": np.array([1, 2]),
        "x": np.array([30.0, 70.0]),
        "y": [0.5, 1.0],
        "z": np.zeros(2),
        "volume_id": [8, 8],
        "layer_id": [2, 4],
        "module_id": [1, 1],
    }
    trackgnn.write_event(tmp_path / "small", event_id=42, hits=cols)
    back = trackgnn.read_event(tmp_path / "small" / "event000000042", parts=["hits"]).hits()
    np.testing.assert_array_equal(back["x"], np.array([30.0, 70.0], dtype=np.float32))
    np.testing.assert_array_equal(back["layer_id"], [2, 4])


def test_missing_file_is_a_file_not_found_error_naming_it(tmp_path, event):
    trackgnn.write_event(tmp_path, event)
    (tmp_path / "event000000001-particles.csv").unlink()
    with pytest.raises(trackgnn.MissingFileError) as e:
        trackgnn.read_event(tmp_path / "event000000001")
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, trackgnn.TrackgnnError)
    assert str(e.value) == (
        f"{tmp_path}/event000000001-particles.csv: no such file or directory "
        f"(looked for {tmp_path}/event000000001-particles.csv, {tmp_path}/event000000001-particles.csv.gz)"
    )
    with pytest.raises(FileNotFoundError, match="event000000009-hits.csv"):
        trackgnn.load_event(tmp_path / "event000000009")


def test_a_corrupt_file_gives_the_command_lines_message(tmp_path, event, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    trackgnn.write_event("ev", event)
    hits = tmp_path / "ev" / "event000000001-hits.csv"
    lines = hits.read_text().splitlines()
    fields = lines[3].split(",")
    fields[1] = "1.5.7"
    lines[3] = ",".join(fields)
    hits.write_text("\n".join(lines) + "\n")
    with pytest.raises(trackgnn.TrackgnnError) as e:
        trackgnn.read_event("ev/event000000001")
    message = str(e.value)
    assert message.startswith("ev/event000000001-hits.csv:4: column `x`: "), message
    assert "1.5.7" in message
    p = cli(tmp_path, "build-graphs", "--input", "ev", "--out", "g", check=False)
    assert p.returncode != 0 and message in p.stderr, p.stderr


def test_bad_columns_and_arguments_are_config_errors(tmp_path):
    with pytest.raises(trackgnn.ConfigError, match="hits: missing column `z`"):
        trackgnn.write_event(tmp_path, event_id=1, hits={"hit_id": [1], "x": [1.0], "y": [1.0]})
    with pytest.raises(ValueError, match="unknown part `hit`"):
        trackgnn.read_event(tmp_path / "event000000001", parts=["hit"])
    with pytest.raises(trackgnn.ConfigError, match="not an event prefix"):
        trackgnn.read_event(tmp_path / "hits.csv")
    with pytest.raises(trackgnn.ConfigError, match="pileup"):
        trackgnn.generate_event(seed=1, event_id=1, pileup=-1.0)
