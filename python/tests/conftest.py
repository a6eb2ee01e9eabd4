"""Fixtures: small generated events, and the `trackgnn` binary for comparisons with the
command line and the tiny run the scoring tests use (trained by `trackgnn train` in seconds)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import trackgnn

REPO = Path(__file__).resolve().parents[2]


def trackgnn_binary() -> Path | None:
    """$TRACKGNN_BIN, else the workspace's debug or release build."""
    if os.environ.get("TRACKGNN_BIN"):
        return Path(os.environ["TRACKGNN_BIN"])
    for profile in ("debug", "release"):
        p = REPO / "target" / profile / "trackgnn"
        if p.is_file():
            return p
    found = shutil.which("trackgnn")
    return Path(found) if found else None


@pytest.fixture(scope="session")
def cli():
    """Runs `trackgnn ARGS` in a directory; returns the completed process."""
    binary = trackgnn_binary()
    if binary is None:
        pytest.skip("no trackgnn binary: set TRACKGNN_BIN or `cargo build -p trackgnn`")

    def run(cwd, *args, check=True):
        p = subprocess.run([str(binary), *map(str, args)], cwd=cwd, capture_output=True, text=True)
        if check and p.returncode != 0:
            raise AssertionError(f"trackgnn {' '.join(map(str, args))} failed:\n{p.stderr}")
        return p

    return run


@pytest.fixture(scope="session")
def event():
    """A small generated event (seed 3, event 1, pile-up 2)."""
    return trackgnn.generate_event(seed=3, event_id=1, pileup=2)


@pytest.fixture(scope="session")
def tiny(tmp_path_factory, cli):
    """Six events (`trackgnn simulate`), their graphs (`build-graphs`) and a run trained on
    them for two epochs (`train`, hidden 8, one iteration): a few seconds."""
    d = tmp_path_factory.mktemp("tiny")
    cli(d, "simulate", "--events", 6, "--pileup", 2, "--seed", 3, "--out", "ev", "--threads", 1)
    cli(d, "build-graphs", "--input", "ev", "--out", "g", "--threads", 1)
    cli(d, "train", "--graphs", "g", "--out", "run", "--epochs", 2, "--hidden", 8, "--iterations", 1, "--threads", 1)
    return d
