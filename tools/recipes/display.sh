#!/usr/bin/env bash
# The CKF and the GNN chain on the whole-event recipe's held-out events (issue 40, item 5):
#   1. both reconstructions with every track fitted (`--fit`), each drawing one event in a
#      region (`--display`, PNG/SVG and the Phoenix JSON file);
#   2. the Phoenix files checked with the format's own validator (HSF/phoenix-helpers,
#      checkers/event_file_checker.py, plain Python 3);
#   3. the comparison figures (efficiency against pT and η, pT resolution, pulls) by the
#      example `compare_reco` of trackgnn-reco.
# Usage: tools/recipes/display.sh RUN_DIR CHECKER OUT [EVENT] [REGION]
#   RUN_DIR: a finished whole_event.sh directory (heldout/, runs/gnn_secondary, quality.json);
#   CHECKER: path to event_file_checker.py; OUT: where the tracks and figures go.
#   EVENT (default 1001) and REGION (default phi=0:0.35,eta=0:1) choose the display.
# TRACKGNN=path/to/trackgnn and COMPARE=path/to/compare_reco use those binaries instead of
# building the release ones.
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,14p' "$0"; exit 2; }
RUN=$(cd "$1" && pwd)
CHECKER=$(realpath "$2")
mkdir -p "$3"
OUT=$(cd "$3" && pwd)
EVENT=${4:-1001}
REGION=${5:-phi=0:0.35,eta=0:1}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
if [ -z "${TRACKGNN:-}" ] || [ -z "${COMPARE:-}" ]; then
    (cd "$ROOT" && cargo build --release -p trackgnn && cargo build --release -p trackgnn-reco --example compare_reco)
    TARGET=$(cd "$ROOT" && cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
fi
TRACKGNN=${TRACKGNN:-$TARGET/release/trackgnn}
COMPARE=${COMPARE:-$TARGET/release/examples/compare_reco}
cd "$RUN"
show=(--display "$EVENT" --display-region "$REGION")
time "$TRACKGNN" reconstruct --run runs/gnn_secondary --input heldout --out "$OUT/gnn" --method follow \
    --quality quality.json --max-fake-probability 0.5 --rebuild --threads 2 --fit "${show[@]}"
time "$TRACKGNN" reconstruct --method ckf --input heldout --out "$OUT/ckf" --detector heldout/detectors.csv \
    --threads 2 --fit "${show[@]}"
name=$(printf 'event%09d-phoenix.json' "$EVENT")
for m in gnn ckf; do
    python3 "$CHECKER" "$OUT/$m/display/$name" && echo "$m: $name passes event_file_checker.py"
done
"$COMPARE" --input heldout --detector heldout/detectors.csv --out "$OUT/compare" \
    CKF="$OUT/ckf" "GNN chain=$OUT/gnn"
