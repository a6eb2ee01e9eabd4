#!/usr/bin/env bash
# Issue 41 item 4: the whole-event chain's inference with each event split across 2 ranks
# (reconstruct --domain-ranks 2, one thread each) against 1 rank with 2 threads, back to back:
# the same submission files (compared byte for byte), the metrics, seconds per stage and each
# process's peak RSS.
# Usage: tools/recipes/domain_reconstruct.sh RECIPE_DIR [EVENTS] [WORKDIR]
#   RECIPE_DIR: whole_event.sh's directory (heldout/, runs/gnn_secondary, quality.json);
#   EVENTS: how many held-out events (default 20).
#   Needs the MPI build: cargo build --release --features mpi --target-dir target-mpi
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
recipe="$(realpath "$1")"
events="${2:-20}"
work="$(realpath -m "${3:-domain_reconstruct}")"
tg="$(realpath "${TRACKGNN:-$here/../../target-mpi/release/trackgnn}")"
mkdir -p "$work"
cd "$recipe"
chain=(reconstruct --run runs/gnn_secondary --input heldout --events "$events" --method follow
  --quality quality.json --max-fake-probability 0.5 --rebuild --json)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "$(date -u +%FT%TZ) load average: $(cut -d' ' -f1-3 /proc/loadavg); $(grep -m1 'model name' /proc/cpuinfo)"
rm -rf "$work/one" "$work/two"
RAYON_NUM_THREADS=2 /usr/bin/time -f "one rank: peak RSS %M kB, wall %e s" \
  "$tg" "${chain[@]}" --out "$work/one" --threads 2 > "$work/one.json"
mpirun -np 2 -x RAYON_NUM_THREADS=1 /usr/bin/time -f "a domain rank: peak RSS %M kB, wall %e s" \
  "$tg" "${chain[@]}" --out "$work/two" --threads 1 --domain-ranks 2 > "$work/two.json"
echo "$(date -u +%FT%TZ) load average: $(cut -d' ' -f1-3 /proc/loadavg)"
same=0 differ=0
for f in "$work"/one/*-submission.csv; do
  if cmp -s "$f" "$work/two/$(basename "$f")"; then same=$((same + 1)); else differ=$((differ + 1)); fi
done
echo "submission files: $same the same, $differ different"
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
for name in ("one", "two"):
    r = json.load(open(f"{work}/{name}.json"))
    m, s = r["metrics"], r["mean_seconds_per_event"]
    print(f"{name}: primary {m['efficiency_primary']:.4f}, all targets {m['efficiency']:.4f}, fake {m['fake_rate']:.4f}; "
          f"s per event: graph {s['graph_seconds']:.2f}, gnn {s['gnn_seconds']:.2f}, tracks {s['track_seconds']:.2f}")
PY
