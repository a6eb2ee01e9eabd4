#!/usr/bin/env bash
# Issue 42's one-binary measurement on one CPU kind (results/engine_cpu.md): BENCH_SPEC in f32
# and in bf16 with the CPU rule's kernel and every other bf16 kernel the CPU can run (3
# interleaved rounds), PyTorch's BENCH_SPEC (bf16 autocast, eager), acorn's model in both
# precisions beside PyTorch's. Run it on a quiet machine: each line logs the load average.
#
#   BIN=path/to/trackgnn tools/recipes/engine_cpu_kind.sh OUT_DIR
#
# TORCH: the PyTorch reference of the benchmark (default tools/torch_reference/run.sh;
# docs/benchmarks.md).
set -u
out=${1:?usage: BIN=… engine_cpu_kind.sh OUT_DIR}
: "${BIN:?BIN: the trackgnn binary}"
here=$(cd "$(dirname "$0")" && pwd)
TORCH=${TORCH:-$here/../torch_reference/run.sh}
mkdir -p "$out" && cd "$out" || exit 2
log() { echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) $*"; }
log start "$(grep -m1 'model name' /proc/cpuinfo)" "$(grep -o 'amx_bf16\|avx512_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
kernels="amx avx512-bf16 f32-fma"
for r in 1 2 3; do
  log "bench-spec f32 round $r"; "$BIN" bench engine --only bench-spec --precision f32 --threads 2 --json > f32_$r.json
  log "bench-spec bf16 (rule) round $r"; "$BIN" bench engine --only bench-spec --precision bf16 --threads 2 --json > bf16_$r.json
  for k in $kernels; do
    log "bench-spec bf16 --bf16-kernel $k round $r"
    "$BIN" bench engine --only bench-spec --precision bf16 --bf16-kernel $k --threads 2 --json > bf16_${k}_$r.json 2> bf16_${k}_$r.err \
      || { log "  $k refused: $(tail -1 bf16_${k}_$r.err)"; rm -f bf16_${k}_$r.json; }
  done
done
log "torch bench-spec bf16"; "$TORCH" bf16 --threads 2 > torch_bf16.txt 2>&1
log "torch bench-spec plain"; "$TORCH" plain --threads 2 > torch_plain.txt 2>&1
log "acorn bf16"; "$BIN" bench engine --only acorn --precision bf16 --threads 2 --json > acorn_bf16.json
log "acorn f32"; "$BIN" bench engine --only acorn --precision f32 --threads 2 --json > acorn_f32.json
log "torch acorn bf16"; "$TORCH" bf16 --model acorn --threads 2 --steps 3 > torch_acorn_bf16.txt 2>&1
log "torch acorn plain"; "$TORCH" plain --model acorn --threads 2 --steps 3 > torch_acorn_plain.txt 2>&1
log end
