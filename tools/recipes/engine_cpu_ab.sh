#!/usr/bin/env bash
# Issue 42's back-to-back measurement of two trackgnn builds on one CPU (results/engine_cpu.md):
# BENCH_SPEC in f32 and bf16 (3 interleaved rounds), PyTorch's BENCH_SPEC and acorn steps, acorn's
# model in both builds, and the whole-event recipe's stage 6 on the first 6 held-out events (2
# interleaved rounds; the submissions are compared afterwards). Run it on a quiet machine: each
# line logs the load average.
#
#   OLD=path/to/trackgnn NEW=path/to/trackgnn WE=whole-event-work-dir tools/recipes/engine_cpu_ab.sh OUT_DIR
#
# TORCH: the PyTorch reference of the benchmark (default tools/torch_reference/run.sh;
# docs/benchmarks.md). WE: a directory where tools/recipes/whole_event.sh has run
# (runs/gnn_secondary, heldout).
set -u
out=${1:?usage: OLD=… NEW=… WE=… engine_cpu_ab.sh OUT_DIR}
: "${OLD:?OLD: the first trackgnn binary}" "${NEW:?NEW: the second trackgnn binary}" "${WE:?WE: the whole-event work directory}"
here=$(cd "$(dirname "$0")" && pwd)
TORCH=${TORCH:-$here/../torch_reference/run.sh}
mkdir -p "$out" && cd "$out" || exit 2
log() { echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) $*"; }
log start
for r in 1 2 3; do
  for p in f32 bf16; do
    log "bench-spec $p round $r old"; "$OLD" bench engine --only bench-spec --precision $p --threads 2 --json > old_${p}_$r.json
    log "bench-spec $p round $r new"; "$NEW" bench engine --only bench-spec --precision $p --threads 2 --json > new_${p}_$r.json
  done
done
log "torch bench-spec bf16"; "$TORCH" bf16 --threads 2 > torch_bf16.txt 2>&1
log "torch bench-spec plain"; "$TORCH" plain --threads 2 > torch_plain.txt 2>&1
log "acorn bf16 new"; "$NEW" bench engine --only acorn --precision bf16 --threads 2 --json > new_acorn_bf16.json
log "acorn bf16 old"; "$OLD" bench engine --only acorn --precision bf16 --threads 2 --json > old_acorn_bf16.json
log "acorn f32 new"; "$NEW" bench engine --only acorn --precision f32 --threads 2 --json > new_acorn_f32.json
log "torch acorn bf16"; "$TORCH" bf16 --model acorn --threads 2 --steps 3 > torch_acorn_bf16.txt 2>&1
log "torch acorn plain"; "$TORCH" plain --model acorn --threads 2 --steps 3 > torch_acorn_plain.txt 2>&1
for r in 1 2; do
  for w in old new; do
    b=$OLD; [ $w = new ] && b=$NEW
    rm -rf s6_${w}_$r
    log "stage 6 $w round $r"
    "$b" reconstruct --run "$WE/runs/gnn_secondary" --input "$WE/heldout" --out s6_${w}_$r --method follow \
      --events 6 --threads 2 --json > s6_${w}_$r.json 2> s6_${w}_$r.err
  done
done
for r in 1 2; do diff -rq s6_old_$r s6_new_$r > /dev/null && log "stage 6 round $r: submissions identical" || log "stage 6 round $r: submissions differ"; done
log end
