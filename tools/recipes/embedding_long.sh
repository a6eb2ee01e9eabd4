#!/usr/bin/env bash
# A long training of the whole-event recipe's hit embedding (whole_event/embedding.toml) on
# idle CPU only (nice -n 19, one thread): EVENTS mu=200 events (default 20; seed 31, ids from
# 1, the first training events of whole_event.sh; the last fifth validate). Each pass of the
# loop resumes the run, trains one epoch (4 steps per training event), checkpoints and exits;
# the loop does not start an epoch it expects to end after STOP_AT, so the run always stops
# checkpointed. A pass re-reads and prepares its events before training. Keep
# EVENTS the same for a run: it decides the split.
# Usage: tools/recipes/embedding_long.sh [WORKDIR] [STOP_AT]
#   WORKDIR default ./embedding_long; STOP_AT anything `date -d` reads, e.g. "2026-11-26 00:05
#   UTC" (a bare time is today's; one already past is refused; default: no limit, the
#   config's 40 epochs). Resume: run it again with the same WORKDIR. TRACKGNN=path/to/trackgnn
#   uses that binary instead of building the release one.
# Past runs (q22, r22, the short runs behind the r22 settings), in dated tables:
# tools/recipes/results/embedding_long.md.
# Progress: WORKDIR/runs/embedding/metrics.csv (efficiency_at_budget per epoch; the best epoch's
# weights are best.safetensors).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
stop_at=$([ -n "${2:-}" ] && date -d "$2" +%s || echo 0)
if [ "$stop_at" -gt 0 ] && [ "$stop_at" -le "$(date +%s)" ]; then
  echo "embedding_long.sh: STOP_AT '$2' is $(date -u -d "@$stop_at"), already past (a bare time is today's)" >&2
  exit 2
fi
if [ -n "${TRACKGNN:-}" ]; then
  tg="$(cd "$(dirname "$TRACKGNN")" && pwd)/$(basename "$TRACKGNN")"
else
  cargo build --release --manifest-path "$here/../../Cargo.toml" -p trackgnn
  tg="$here/../../target/release/trackgnn"
fi
[ -x "$tg" ] || { echo "embedding_long.sh: no trackgnn binary at $tg" >&2; exit 2; }
work="${1:-embedding_long}"
mkdir -p "$work" && cd "$work"
cfg="$here/whole_event/embedding.toml"
max_epochs=$(sed -n 's/^epochs = //p' "$cfg")
run() { nice -n 19 "$tg" "$@" --threads 1; }

events=${EVENTS:-20}
val=$(( events / 5 > 0 ? events / 5 : 1 ))
[ -d events ] || run simulate --events "$events" --pileup 200 --seed 31 --out events
last=60  # seconds of the previous pass (a guess before the first)
while :; do
  done_epochs=$(if [ -f runs/embedding/metrics.jsonl ]; then wc -l < runs/embedding/metrics.jsonl; else echo 0; fi)
  [ "$done_epochs" -lt "$max_epochs" ] || { echo "all $max_epochs epochs done"; break; }
  if [ "$stop_at" -gt 0 ] && [ $(( $(date +%s) + last )) -gt "$stop_at" ]; then
    echo "stopping before epoch $done_epochs: the last pass took $last s and STOP_AT is near"
    break
  fi
  t=$(date +%s)
  resume=(); [ -f runs/embedding/checkpoint/state.json ] && resume=(--resume)
  run train-embedding --input events --events "$events" --out runs/embedding --config "$cfg" --val-events "$val" \
    --epochs $(( done_epochs + 1 )) "${resume[@]}"
  last=$(( $(date +%s) - t ))
done
