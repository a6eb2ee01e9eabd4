#!/usr/bin/env python3
"""Run a model exported by `trackgnn export --format onnx` with onnxruntime, and compare.

Input: the .onnx file and the reference directory written by

    trackgnn export --run RUN --out model.onnx --reference EVENTS --reference-out REF

which holds, per event, the model's inputs (`<event>.x.npy`, `<event>.edge_index.npy`,
`<event>.edge_attr.npy` when the model reads edge features) and the engine's f32 logits
(`<event>.logits.npy`), and `reference.json` with the engine's scoring seconds per event.

For each event the script feeds the inputs by position, as the ACTS plugin does, checks the
output's shape, and reports max |logit(onnxruntime) - logit(engine)|, the edges on different
sides of the 0.5 score cut, and onnxruntime's inference seconds (median of --repeat runs, after
one warm-up) beside the engine's. With --acts-threads the session uses the ACTS plugin's
settings (1 intra-op thread, sequential, extended graph optimisation).

Exit code 0 when every event is within --tol and no edge changes side, 1 otherwise,
2 on missing files.

Optional tooling: needs onnxruntime and numpy (see tools/README.md); not run in CI.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

try:
    import numpy as np
    import onnxruntime as ort
except ImportError as exc:  # pragma: no cover
    sys.exit(f"onnx_check.py needs onnxruntime and numpy ({exc}); see tools/README.md")


def session(model: Path, acts_threads: bool, threads: int | None) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    if acts_threads:
        # As OnnxEdgeClassifier.cpp configures it.
        opts.intra_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    elif threads:
        opts.intra_op_num_threads = threads
    return ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", type=Path, help="the .onnx file")
    p.add_argument("reference", type=Path, help="the --reference-out directory")
    p.add_argument("--tol", type=float, default=1e-4, help="max |Δ logit| allowed (default 1e-4)")
    p.add_argument("--repeat", type=int, default=3, help="timed runs per event (default 3)")
    p.add_argument("--acts-threads", action="store_true", help="the ACTS plugin's session settings")
    p.add_argument("--threads", type=int, default=None, help="onnxruntime intra-op threads")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args()

    ref_file = a.reference / "reference.json"
    for f in (a.model, ref_file):
        if not f.exists():
            print(f"{f}: no such file", file=sys.stderr)
            return 2
    ref = json.loads(ref_file.read_text())
    sess = session(a.model, a.acts_threads, a.threads)
    inputs = sess.get_inputs()
    outputs = sess.get_outputs()
    rows = []
    ok = True
    for ev in ref["events"]:
        prefix = a.reference / ev["prefix"]
        arrays = [np.load(f"{prefix}.x.npy"), np.load(f"{prefix}.edge_index.npy")]
        if len(inputs) == 3:
            arrays.append(np.load(f"{prefix}.edge_attr.npy"))
        want = np.load(f"{prefix}.logits.npy")
        feed = {i.name: arr for i, arr in zip(inputs, arrays)}
        got = sess.run(None, feed)[0]  # warm-up, and the values compared
        seconds = []
        for _ in range(max(a.repeat, 1)):
            t0 = time.perf_counter()
            sess.run(None, feed)
            seconds.append(time.perf_counter() - t0)
        if got.shape != want.shape:
            print(f"{ev['prefix']}: output shape {got.shape}, expected {want.shape}", file=sys.stderr)
            ok = False
            continue
        dmax = float(np.max(np.abs(got.astype(np.float64) - want))) if want.size else 0.0
        flips = int(np.sum((got > 0) != (want > 0)))
        ok &= dmax <= a.tol and flips == 0
        rows.append(
            {
                "event_id": ev["event_id"],
                "nodes": ev["nodes"],
                "edges": ev["edges"],
                "max_abs_diff": dmax,
                "flipped_edges": flips,
                "onnxruntime_seconds": statistics.median(seconds),
                "engine_seconds": ev["engine_seconds"],
            }
        )
    n = max(len(rows), 1)
    summary = {
        "model": str(a.model),
        "onnxruntime_version": ort.__version__,
        "inputs": [{"name": i.name, "shape": i.shape, "type": i.type} for i in inputs],
        "outputs": [{"name": o.name, "shape": o.shape, "type": o.type} for o in outputs],
        "session": "acts (1 intra-op thread, sequential)" if a.acts_threads else f"threads={a.threads or 'default'}",
        "engine_threads": ref.get("threads"),
        "events": rows,
        "max_abs_diff": max((r["max_abs_diff"] for r in rows), default=0.0),
        "flipped_edges": sum(r["flipped_edges"] for r in rows),
        "mean_onnxruntime_seconds": sum(r["onnxruntime_seconds"] for r in rows) / n,
        "mean_engine_seconds": sum(r["engine_seconds"] for r in rows) / n,
        "ok": ok,
    }
    if a.json:
        print(json.dumps(summary, indent=1))
    else:
        print(f"onnxruntime {ort.__version__}, session {summary['session']}, engine threads {ref.get('threads')}")
        print("inputs: " + ", ".join(f"{i.name} {i.shape} {i.type}" for i in inputs))
        print("outputs: " + ", ".join(f"{o.name} {o.shape} {o.type}" for o in outputs))
        print(f"{'event':>10} {'nodes':>7} {'edges':>8} {'max|Δ|':>10} {'flips':>5} {'ort s':>8} {'engine s':>8}")
        for r in rows:
            print(
                f"{r['event_id']:>10} {r['nodes']:>7} {r['edges']:>8} {r['max_abs_diff']:>10.2e} "
                f"{r['flipped_edges']:>5} {r['onnxruntime_seconds']:>8.4f} {r['engine_seconds']:>8.4f}"
            )
        print(
            f"max |Δ logit| {summary['max_abs_diff']:.2e} (tol {a.tol:g}), {summary['flipped_edges']} edges change side; "
            f"mean seconds per event: onnxruntime {summary['mean_onnxruntime_seconds']:.4f}, "
            f"engine {summary['mean_engine_seconds']:.4f}: {'OK' if ok else 'FAILED'}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
