#!/usr/bin/env bash
# Issue 41: one whole event's training step split across 2 ranks (--domain-ranks 2, one thread
# each) against 1 rank with 2 threads, same checkpointing, back to back, twice.
# Usage: tools/recipes/domain_whole_event.sh GRAPHS_DIR [WORKDIR]
#   GRAPHS_DIR: whole-event hybrid graphs (whole_event.sh's graphs_hybrid: ~110k nodes, 1.1M
#   edges each); the first three are used (two train, one validates).
#   Needs the MPI build: cargo build --release --features mpi --target-dir target-mpi
#   Prints per run and rank: the second step's compute seconds, peak RSS, halo nodes, held
#   edges, and the halo's bytes per message-passing iteration (H = 128, f32, each way).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
graphs="$1"
work="${2:-domain_whole_event}"
tg="${TRACKGNN:-$here/../../target-mpi/release/trackgnn}"
cfg="$here/domain_whole_event.toml"
mkdir -p "$work/g"
for f in $(ls "$graphs" | grep '\.graph$' | head -3); do ln -sf "$(realpath "$graphs/$f")" "$work/g/$f"; done
[ -f "$graphs/recipe.toml" ] && cp "$graphs/recipe.toml" "$work/g/"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for round in 1 2; do
  rm -rf "$work/one$round" "$work/two$round"
  RAYON_NUM_THREADS=2 "$tg" train --graphs "$work/g" --out "$work/one$round" --config "$cfg" --threads 2 --json > /dev/null
  mpirun -np 2 -x RAYON_NUM_THREADS=1 "$tg" train --graphs "$work/g" --out "$work/two$round" --config "$cfg" \
    --threads 1 --domain-ranks 2 --json > /dev/null
done
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
print(f"{'run':<6} {'step':>4} {'compute s (per rank)':<24} {'peak RSS GiB':<16} {'halo nodes':<16} {'held edges':<20} {'halo MB/iter':>12}")
for round in (1, 2):
    for name in ("one", "two"):
        for line in open(f"{work}/{name}{round}/steps.jsonl"):
            s = json.loads(line)
            halo = s.get("halo_nodes", [])
            mb = sum(halo) * 128 * 4 / 1e6
            print(f"{name}{round:<3} {s['step']:>4} {' '.join(f'{c:.2f}' for c in s['compute_seconds']):<24} "
                  f"{' '.join(f'{b / 2**30:.2f}' for b in s['peak_rss_bytes']):<16} {' '.join(map(str, halo)):<16} "
                  f"{' '.join(map(str, s.get('local_edges', []))):<20} {mb:>12.2f}")
PY
