#!/usr/bin/env bash
# The candidate-quality model without and with the Kalman fit's features (issue 40 item 4), on
# the whole-event recipe's directory (whole_event.sh stages 1-6 done): fitted to the same 8
# quality events, then judged on the 20 held-out events; the second pair also fits every track
# (`--fit`, outliers left out of the fits). Results: results/kalman.md.
# Usage: tools/recipes/quality_fit.sh WHOLE_EVENT_DIR OUT_DIR [TRACKGNN]
set -euo pipefail
run="$1"; out="$(realpath -m "$2")"; tg="$(realpath "${3:-target/release/trackgnn}")"
mkdir -p "$out"
cd "$run"
"$tg" train-quality --run runs/gnn_secondary --input quality_events --out "$out/q_base.json" --method follow --json > "$out/train_base.json"
"$tg" train-quality --run runs/gnn_secondary --input quality_events --out "$out/q_fit.json" --method follow --fit-features --json > "$out/train_fit.json"
for q in base fit; do
  for fit in nofit fit; do
    d="$out/reco_${q}_${fit}"; rm -rf "$d"; mkdir -p "$d"
    extra=(); [ "$fit" = fit ] && extra=(--fit)
    "$tg" reconstruct --run runs/gnn_secondary --input heldout --out "$d" --method follow \
      --quality "$out/q_$q.json" --max-fake-probability 0.5 --rebuild --threads 2 --json "${extra[@]}" > "$d.json"
  done
done
