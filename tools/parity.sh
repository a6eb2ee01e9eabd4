#!/usr/bin/env bash
# Exports one forward/backward of the engine per model configuration (`trackgnn export-parity`)
# and checks each against PyTorch with tools/parity.py (float32 comparison, plus a float64
# recomputation). Optional tooling: needs Python with torch, safetensors and numpy.
#
#   tools/parity.sh [TRACKGNN_BINARY] [OUT_DIR]
#
#   TRACKGNN_BINARY    default: target/release/trackgnn (build: cargo build --release -p trackgnn)
#   OUT_DIR            where the .safetensors, model configs, logs and table.txt go
#                      (default: a new temporary directory)
#   PYTHON             interpreter with torch (default: python3)
#   TOL                relative error bound (default: 1e-4)
#   RESOLVE            branch points parity.py may try to resolve (default: 64; 0: off)
#   RAYON_NUM_THREADS  engine threads (default: 1; the engine's results do not depend on it)
#   PARITY_GRAPH       optionally, a .graph file with truth: one more case on a real graph
#   PARITY_ONLY        optionally, a regex: run only the cases whose name matches
#
# Exit code 0 when every case passes, 1 otherwise, 2 when something is missing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${1:-$here/../target/release/trackgnn}"
out="${2:-$(mktemp -d -t trackgnn-parity.XXXXXX)}"
python="${PYTHON:-python3}"
tol="${TOL:-1e-4}"
export RAYON_NUM_THREADS="${RAYON_NUM_THREADS:-1}"

if [[ ! -x "$bin" ]]; then
    echo "parity.sh: no trackgnn binary at $bin (cargo build --release -p trackgnn)" >&2
    exit 2
fi
if ! "$python" -c 'import torch, safetensors' 2>/dev/null; then
    echo "parity.sh: $python cannot import torch and safetensors (see tools/README.md)" >&2
    exit 2
fi
mkdir -p "$out"
: >"$out/summary.jsonl"

small=(--nodes 300 --edges 2400)
# The small base of the variants: trackgnn's defaults at hidden 32 with 3 iterations.
base='hidden = 32
iterations = 3'

failures=0
# case_ NAME TOML [export-parity flags...]; TOML "-" means no --model-config (the defaults).
case_() {
    local name="$1" toml="$2"
    shift 2
    if [[ -n "${PARITY_ONLY:-}" && ! "$name" =~ $PARITY_ONLY ]]; then
        return 0
    fi
    local cfg=()
    if [[ "$toml" != "-" ]]; then
        printf '%s\n' "$toml" >"$out/$name.toml"
        cfg=(--model-config "$out/$name.toml")
    fi
    local rc=0 line=""
    "$bin" export-parity --out "$out/$name.safetensors" "${cfg[@]}" "$@" \
        >"$out/$name.export.json" 2>"$out/$name.export.err" || rc=$?
    if [[ $rc -ne 0 ]]; then
        local why
        why="$(grep -m1 -A1 -E 'panicked|[Ee]rror' "$out/$name.export.err" | tr '\n' ' ' |
            tr -d '"\\' || true)"
        line="{\"ok\": false, \"error\": \"export-parity exit $rc: ${why:-see $name.export.err}\"}"
    else
        "$python" "$here/parity.py" "$out/$name.safetensors" --tol "$tol" --float64 --summary \
            --resolve "${RESOLVE:-64}" >"$out/$name.log" 2>&1 || rc=$?
        line="$(grep '^SUMMARY ' "$out/$name.log" | sed 's/^SUMMARY //' || true)"
        if [[ -z "$line" ]]; then
            line="{\"ok\": false, \"error\": \"parity.py exit $rc, no summary: see $name.log\"}"
        fi
    fi
    if [[ $rc -ne 0 ]]; then
        failures=$((failures + 1))
        echo "FAIL $name (exit $rc): $out/$name.*" >&2
    fi
    printf '{"case": "%s", "args": "%s", "result": %s}\n' "$name" "$*" "$line" \
        >>"$out/summary.jsonl"
    printf '%s ' "$name" >&2
}

# The named configurations (full width).
case_ defaults - "${small[@]}"
case_ defaults-1500 - # export-parity's default graph: 200 nodes, 1500 edges
case_ bench-spec 'hidden = 64
iterations = 4
mlp_depth = 2
classifier_depth = 2
activation = "relu"
output_activation = "relu"
norm = "affine"
output_norm = true
aggregation = ["sum"]
recurrent = false
residual = true' "${small[@]}"
# ModelConfig::acorn(): acorn's TrackML InteractionGNN.
case_ acorn 'residual = false
output_norm = false
update_order = "node_first"' "${small[@]}"

# Variants of the small base (hidden 32, 3 iterations, otherwise trackgnn's defaults).
case_ small-base "$base" "${small[@]}"
for a in sum mean max std; do
    case_ "agg-$a" "$base
aggregation = [\"$a\"]" "${small[@]}"
done
case_ agg-max-sum "$base
aggregation = [\"max\", \"sum\"]" "${small[@]}"
for n in none affine no-affine; do
    case_ "norm-$n" "$base
norm = \"$n\"" "${small[@]}"
done
case_ output-norm-false "$base
output_norm = false" "${small[@]}"
for act in tanh silu relu; do
    case_ "act-$act" "$base
activation = \"$act\"
output_activation = \"$act\"" "${small[@]}"
done
case_ mlp-depth-1 "$base
mlp_depth = 1" "${small[@]}"
case_ classifier-depth-1 "$base
classifier_depth = 1" "${small[@]}"
# The same where edges × hidden <= 4096 (one gradient chunk of the engine's classifier).
case_ classifier-depth-1-tiny "$base
classifier_depth = 1" --nodes 50 --edges 128
case_ depth-3 "$base
mlp_depth = 3
classifier_depth = 3" "${small[@]}"
case_ recurrent-false "$base
recurrent = false" "${small[@]}"
case_ residual-false "$base
residual = false" "${small[@]}"
# acorn's update order (nodes, then edges) on the small base, and with its other structures.
case_ node-first "$base
update_order = \"node_first\"" "${small[@]}"
case_ node-first-separate-no-residual-max "$base
update_order = \"node_first\"
recurrent = false
residual = false
aggregation = [\"max\", \"sum\"]" "${small[@]}"
case_ edge-features-3 "$base" "${small[@]}" --edge-features 3
case_ relu-plain "$base
residual = false
recurrent = false
activation = \"relu\"
output_activation = \"relu\"
norm = \"none\"" "${small[@]}" --edge-features 3 --seed 5 --pos-weight 1
# Larger: several row tiles (512) and gradient chunks (4096 rows) of the engine.
case_ large-graph 'hidden = 32
iterations = 2
activation = "relu"
output_activation = "relu"
norm = "affine"
aggregation = ["sum", "max"]
recurrent = false' --nodes 3000 --edges 20000 --seed 7
if [[ -n "${PARITY_GRAPH:-}" ]]; then
    case_ real-graph "$base" --graph "$PARITY_GRAPH"
fi
echo >&2

"$python" - "$out/summary.jsonl" "$tol" <<'PY' | tee "$out/table.txt"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
tol = float(sys.argv[2])
f = lambda v: "-" if v is None else f"{v:.1e}"
print(f"{'case':<23} {'grad rel':>8} {'resolved':>8} {'logits':>8} {'eng~f64':>8} "
      f"{'tch~f64':>8} {'eng~f64*':>8} {'loss engine':>11} {'loss torch':>11}  ok")
for r in rows:
    s = r["result"]
    if "max_grad_rel_err" not in s:
        print(f"{r['case']:<23} ERROR {s.get('error', '?')}")
        continue
    res = f(s["resolved_max_grad_rel_err"]) if "resolved_flips" in s else "-"
    ok = "yes" if s["strict_ok"] else (f"yes*{len(s['resolved_flips'])}" if s["ok"] else "NO")
    print(f"{r['case']:<23} {f(s['max_grad_rel_err']):>8} {res:>8} {f(s['logits_rel_err']):>8} "
          f"{f(s.get('engine_vs_f64')):>8} {f(s.get('torch32_vs_f64')):>8} "
          f"{f(s.get('engine_vs_f64_pinned')):>8} {s['loss_engine']:>11.7f} "
          f"{s['loss_torch']:>11.7f}  {ok}")
print()
print("grad rel  max over the gradient tensors of |g_torch - g_engine| / max(|g_torch|, "
      "|g_engine|), both float32")
print("resolved  the same once torch takes the engine's side at ReLU / max branch points "
      "(yes*N: N such points)")
print("eng~f64   engine gradients vs torch float64; tch~f64: torch float32 (on the engine's "
      "branches if resolved) vs float64")
print("eng~f64*  engine vs torch float64 forced onto the branches (ReLU signs, arg-maxima) of "
      "torch float32")
print(f"{sum(r['result'].get('ok', False) for r in rows)}/{len(rows)} cases within {tol:g}")
PY
echo "files: $out"
if [[ $failures -ne 0 ]]; then
    echo "$failures case(s) failed" >&2
    exit 1
fi
