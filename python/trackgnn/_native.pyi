"""Type stubs of trackgnn._native, the Rust extension (re-exported by ``trackgnn``)."""

import os
from typing import Any, Mapping, Sequence

import numpy as np
import numpy.typing as npt

_Path = str | os.PathLike[str]
_Columns = dict[str, npt.NDArray[Any]]

NO_TRACK: int
"""The track id of hits in no track (0)."""

class TrackgnnError(Exception):
    """Every error of the trackgnn libraries; the message is the command line's."""

class MissingFileError(TrackgnnError, FileNotFoundError):
    """An input file or directory that does not exist."""

class ConfigError(TrackgnnError, ValueError):
    """A setting out of range or an unknown name."""

class Event:
    """One TrackML event: hits always; truth, particles and cells when read or generated."""

    @staticmethod
    def from_columns(
        event_id: int,
        hits: Mapping[str, Any],
        truth: Mapping[str, Any] | None = None,
        particles: Mapping[str, Any] | None = None,
        cells: Mapping[str, Any] | None = None,
    ) -> Event:
        """An event from TrackML columns (dicts of arrays or DataFrames)."""
    @property
    def event_id(self) -> int: ...
    @property
    def num_hits(self) -> int: ...
    @property
    def parts(self) -> list[str]:
        """``hits`` and the other parts present."""
    def hits(self) -> _Columns:
        """hit_id, x, y, z [mm], volume_id, layer_id, module_id."""
    def truth(self) -> _Columns | None:
        """hit_id, particle_id, tx, ty, tz [mm], tpx, tpy, tpz [GeV], weight."""
    def particles(self) -> _Columns | None:
        """particle_id, (particle_type), vx, vy, vz [mm], px, py, pz [GeV], q, nhits."""
    def cells(self) -> _Columns | None:
        """hit_id, ch0, ch1, value."""

def read_event(prefix: _Path, parts: Sequence[str] | None = None) -> Event:
    """The event at ``DIR/eventNNNNNNNNN`` (plain or gzipped CSV), with ``parts``."""

def write_event(dir: _Path, event: Event, gzip: bool = False) -> int:
    """Writes every part of ``event`` into ``dir``; returns the bytes written."""

def generate_event(
    seed: int,
    event_id: int,
    pileup: float | None = None,
    config: Mapping[str, Any] | None = None,
    detector: _Path | None = None,
) -> Event:
    """Event ``event_id`` of the data set ``seed`` (as ``trackgnn simulate --seed``)."""

class Recipe:
    """How an event becomes a graph."""

    def __init__(self, method: str = "geometric") -> None:
        """The defaults of ``geometric`` or ``module-map``."""
    @staticmethod
    def load(path: _Path) -> Recipe:
        """A ``recipe.toml``."""
    @staticmethod
    def from_toml(text: str) -> Recipe: ...
    def to_toml(self) -> str: ...
    def for_inference(self) -> Recipe:
        """The same without truth-based node cuts."""
    @property
    def method(self) -> str: ...
    @property
    def node_features(self) -> list[str]: ...
    @property
    def map_file(self) -> str | None: ...

class Graph:
    """One event's graph, arrays in the PyTorch Geometric layout."""

    @property
    def event_id(self) -> int: ...
    @property
    def num_nodes(self) -> int: ...
    @property
    def num_edges(self) -> int: ...
    @property
    def node_feature_names(self) -> list[str]: ...
    @property
    def edge_feature_names(self) -> list[str]: ...
    @property
    def x(self) -> npt.NDArray[np.float32]:
        """Node features [N, F]."""
    @property
    def edge_attr(self) -> npt.NDArray[np.float32]:
        """Edge features [E, F_e]."""
    @property
    def edge_index(self) -> npt.NDArray[np.int64]:
        """Source and destination node of each edge [2, E]."""
    @property
    def hit_id(self) -> npt.NDArray[np.uint64]: ...
    @property
    def positions(self) -> list[npt.NDArray[np.float32]]:
        """Unscaled r [mm], phi [rad], z [mm] of each node."""
    @property
    def has_truth(self) -> bool: ...
    @property
    def y(self) -> npt.NDArray[np.uint8]:
        """1 for true edges [E]."""
    @property
    def target(self) -> npt.NDArray[np.uint8]:
        """1 for true edges of target particles [E]."""
    @property
    def particle_id(self) -> npt.NDArray[np.uint64]:
        """Each node's particle (0 for noise) [N]."""

def build_graph(
    event: Event,
    recipe: Recipe | None = None,
    module_map: _Path | None = None,
    detector: _Path | None = None,
) -> tuple[Graph, dict[str, Any]]:
    """The graph of ``event`` and its construction figures."""

def read_graph(path: _Path) -> Graph:
    """A graph file of ``trackgnn build-graphs``."""

def write_graph(path: _Path, graph: Graph) -> int:
    """Writes a graph file; returns the bytes written."""

class Run:
    """A trained run: recipe, module map, GNN weights and a track builder."""

    def __init__(
        self,
        path: _Path,
        weights: str = "best",
        method: str = "cc",
        score_cut: float | None = None,
        min_hits: int = 5,
        truth_scores: bool = False,
        detector: _Path | None = None,
        min_candidate_score: float = 0.0,
        candidate_score: str = "weakest_link",
        candidate_score_max_hits: int | None = None,
        quality: _Path | None = None,
        max_fake_probability: float = 0.5,
        rebuild: bool = False,
    ) -> None: ...
    @property
    def path(self) -> str: ...
    @property
    def recipe(self) -> Recipe: ...
    @property
    def weights(self) -> str: ...
    def build_graph(self, event: Event) -> Graph:
        """The graph of ``event`` with the run's recipe and module map."""
    def score(self, graph: Graph) -> npt.NDArray[np.float32]:
        """Edge scores (probabilities) [E]."""
    def logits(self, graph: Graph) -> npt.NDArray[np.float32]:
        """Edge logits [E]."""
    def tracks(self, event: Event, graph: Graph, scores: npt.NDArray[np.float32]) -> npt.NDArray[np.uint32]:
        """A track id per hit of ``event`` (0 = no track)."""
    def reconstruct(
        self, event: Event
    ) -> tuple[Graph, npt.NDArray[np.float32], npt.NDArray[np.uint32]]:
        """Graph, edge scores and a track id per hit."""
    def fit_tracks(
        self, event: Event, hit_tracks: npt.NDArray[np.uint32]
    ) -> dict[str, npt.NDArray[Any]]:
        """Kalman fits of the tracks: the columns of `reconstruct --fit`'s parameters file."""

def build_tracks(
    graph: Graph,
    scores: npt.NDArray[np.float32],
    method: str = "cc",
    score_cut: float | None = None,
    min_hits: int = 5,
    min_candidate_score: float = 0.0,
    candidate_score: str = "weakest_link",
    candidate_score_max_hits: int | None = None,
) -> npt.NDArray[np.uint32]:
    """A track id per node of ``graph`` (0 = no track)."""

def edge_metrics(graph: Graph, logits: npt.NDArray[np.float32], threshold: float = 0.5) -> dict[str, float]:
    """efficiency, target_purity, total_purity, purity, auc."""

def track_metrics(
    event: Event, track_ids: npt.NDArray[np.uint32], config: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """efficiency, fake_rate, duplicate_rate, trackml_score, counts, binned efficiencies
    (candidates and reconstructable particles of >= 5 hits unless config says otherwise)."""
