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
# Runs here (debug binary, whose workspace crates are built at opt-level 3; one thread on a
# machine busy with 5 other developers' builds, so seconds are indicative; the efficiency is
# over target edges at the 16-neighbour budget):
# - q22, the settings before r22 (squared hinge, margin 0.2, 8-d; EVENTS=8: 7 training + 1
#   validation event, STOP_AT 20:58 UTC): 19 epochs = 532 steps in 40 min of epochs (67-250 s
#   per 28-step epoch); best epoch 15: 0.7943 (prompt 0.8097, secondary 0.4846), ~1.02M edges
#   per event; training loss flat at 0.0104 from epoch 1, efficiency 0.70-0.79 from step 56.
# - r22, whole_event/embedding.toml as of r22 (EVENTS=12: 10 + 2; events linked from the q22
#   run, the same seed-31 events; STOP_AT 00:05 UTC): by 23:55, 10 epochs = 400 steps (100-
#   600 s per 40-step epoch, the long ones while r22 compiled), efficiency per epoch 0.490
#   0.568 0.634 0.652 0.684 0.703 0.656 0.711 0.727 0.690; training loss 0.00273 → 0.00205,
#   still falling slowly; best epoch 8: 0.7270, ~1.24M edges per event.
# - Held-out event 13 (used by neither), `build-graphs --method metric-learning --radius 100
#   --k-max K` on each run's best weights (r22: epoch 8, 360 steps):
#     K = 16: q22 0.797 (prompt 0.804, secondary 0.670), r22 0.777 (0.784, 0.641); 1.01M edges,
#             purity 0.051 and 0.050;
#     K = 48: q22 0.940 (prompt 0.946, secondary 0.826), r22 0.937 (0.943, 0.824); 2.95M edges,
#             purity 0.022 both.
#   The 16-neighbour budget is about 3 times tighter than Exa.TrkX's operating point (its
#   ~0.96 is at a few % purity): the q22 embedding already reaches 0.94 at 48 neighbours.
# - Short runs behind the r22 settings (2 training + 1 validation event, 64×3 network, 2,000
#   true pairs per step, 100 steps per epoch; per epoch):
#     before r22 (squared hinge, margin 0.2, 8-d)          0.31 0.32 0.37
#     + hinge "distance"                                   0.33 0.41 0.41
#     + unit sphere, margin 0.1, pos_weight 2              0.46 0.49 0.49
#       that + cells (cluster_size, charge_sum / 10)       0.38 0.49 0.51
#       that + 4 hard negatives per true pair              0.36 0.33 0.38
#     + 12-d                                               0.56 0.56 0.56
#       that + lr_decay 0.5                                0.56 0.58 0.55
#       that + cells                                       0.40 0.50 0.55
#       that + cells at 128×4                              0.39 0.54
#   and at full size (whole_event/embedding.toml's sizes, EVENTS=12, the first epoch = 40 steps): before r22
#   0.589, + hinge "distance" 0.544, + 12-d 0.592, r22 without the unit sphere (margin 0.2)
#   0.553, r22 0.490: the short runs' ranking did not hold at the start of a full-size run.
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
