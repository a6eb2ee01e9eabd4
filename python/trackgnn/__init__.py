"""trackgnn from Python: TrackML events, graphs, GNN edge scores, tracks and metrics.

Every function calls the trackgnn Rust libraries (the ``trackgnn._native`` extension); this
file only adds the pandas side (``load_event`` and ``write_event`` with DataFrames, as the
``trackml`` library's users know them). pandas is imported only when a DataFrame is asked for.

    >>> import trackgnn
    >>> event = trackgnn.generate_event(seed=1, event_id=1, pileup=5)
    >>> graph, stats = trackgnn.build_graph(event, trackgnn.Recipe("geometric"))
"""

from __future__ import annotations

import os
from typing import Mapping, Sequence

from ._native import (
    NO_TRACK,
    ConfigError,
    Event,
    Graph,
    MissingFileError,
    Recipe,
    Run,
    TrackgnnError,
    build_graph,
    build_tracks,
    edge_metrics,
    generate_event,
    read_event,
    read_graph,
    track_metrics,
    write_graph,
)
from ._native import write_event as _write_event

__all__ = [
    "NO_TRACK",
    "ConfigError",
    "Event",
    "Graph",
    "MissingFileError",
    "Recipe",
    "Run",
    "TrackgnnError",
    "build_graph",
    "build_tracks",
    "edge_metrics",
    "generate_event",
    "load_event",
    "read_event",
    "read_graph",
    "to_dataframes",
    "track_metrics",
    "write_event",
    "write_graph",
]

ALL_PARTS = ("hits", "cells", "particles", "truth")


def to_dataframes(event: Event, parts: Sequence[str] = ALL_PARTS) -> tuple:
    """The ``parts`` of ``event`` as pandas DataFrames, in the order asked for."""
    import pandas as pd

    frames = []
    for part in parts:
        if part not in ALL_PARTS:
            raise ConfigError(f"unknown part `{part}` (hits, truth, particles or cells)")
        columns = getattr(event, part)()
        if columns is None:
            raise ConfigError(f"event {event.event_id} has no {part}")
        frames.append(pd.DataFrame(columns))
    return tuple(frames)


def load_event(prefix: str | os.PathLike, parts: Sequence[str] = ALL_PARTS) -> tuple:
    """The event at ``prefix`` (``DIR/eventNNNNNNNNN``) as pandas DataFrames, one per part in
    the order of ``parts`` (default hits, cells, particles, truth), like the ``trackml``
    library's ``load_event``. Plain or gzipped CSV; a missing file raises
    ``MissingFileError`` (a ``FileNotFoundError``) naming it."""
    return to_dataframes(read_event(prefix, list(parts)), parts)


def write_event(
    dir: str | os.PathLike,
    event: Event | None = None,
    *,
    event_id: int | None = None,
    hits: Mapping | None = None,
    truth: Mapping | None = None,
    particles: Mapping | None = None,
    cells: Mapping | None = None,
    gzip: bool = False,
) -> int:
    """Writes an event into ``dir`` as TrackML CSV (``.csv.gz`` if ``gzip``), each file whole
    or not at all; returns the bytes written. Either an ``Event``, or ``event_id`` and the
    parts as DataFrames or dicts of numpy arrays (``hits`` required)."""
    if event is None:
        if event_id is None or hits is None:
            raise ConfigError("write_event needs an Event, or event_id and hits")
        event = Event.from_columns(event_id, hits, truth, particles, cells)
    elif event_id is not None or hits is not None:
        raise ConfigError("write_event takes an Event or columns, not both")
    return _write_event(dir, event, gzip)
