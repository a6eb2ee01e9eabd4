#!/usr/bin/env bash
# Issue 5: validation metrics of 2 ranks against 1 rank after the same number of epochs, with
# the recommended learning-rate scaling (sqrt, one epoch of warm-up) and a step decay so that
# both runs settle. 2 ranks take half the optimiser steps per epoch of 1 rank.
# Usage: tools/recipes/ranks_equivalence.sh GRAPHS_DIR [WORKDIR]
#   GRAPHS_DIR: e.g. graphs_a of reference.sh (100 mu=200 events, pT > 1 GeV).
#   Needs the MPI build: cargo build --release --features mpi --target-dir target-mpi
#   Trains WORKDIR/one (1 rank) and WORKDIR/two (mpirun -np 2) with ranks_equivalence.toml,
#   resuming either if it exists, then prints the last epoch's efficiency, target and total
#   purity and AUC of both and their difference in percentage points.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
graphs="$1"
work="${2:-ranks_equivalence}"
tg="$here/../../target-mpi/release/trackgnn"
cfg="$here/ranks_equivalence.toml"
mkdir -p "$work"
train() { # train OUT [mpirun -np N]
  local out="$work/$1"
  shift
  local resume=()
  [ -f "$out/checkpoint/state.json" ] && resume=(--resume)
  "$@" "$tg" train --graphs "$graphs" --out "$out" --config "$cfg" --threads 1 "${resume[@]}"
}
train one
train two mpirun -np 2
# Last epoch of each: efficiency, target purity, total purity, AUC; and the differences in pp.
awk -F, 'FNR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
  FILENAME == ARGV[1] { split($0, one, ",") }
  FILENAME == ARGV[2] { split($0, two, ",") }
  END {
    printf "%-14s %10s %10s %10s\n", "last epoch", "1 rank", "2 ranks", "diff pp"
    n = split("efficiency target_purity total_purity auc", keys, " ")
    for (j = 1; j <= n; j++) {
      c = col[keys[j]]
      printf "%-14s %10.5f %10.5f %10.3f\n", keys[j], one[c], two[c], 100 * (two[c] - one[c])
    }
  }' "$work/one/metrics.csv" "$work/two/metrics.csv"
