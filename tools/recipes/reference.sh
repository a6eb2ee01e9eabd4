#!/usr/bin/env bash
# Regenerates the reference data and retrains the reference models of issue 4 from seeds:
#   (a) 100 mu=200 events, pT > 1 GeV hard cut, module-map graphs (maps drawn from the generator:
#       10,000 events' prompt particles merged with 5,000 events' prompt and secondary particles,
#       ids 1001 on, disjoint from the 100 training events), hidden 128, 8 iterations, then
#       fine-tuned with pos_weight 1.5 (runs/a_tune: the reference model (a));
#   (b) full graphs (all hits, no truth cut) of 100 mu=40 events, target pT >= 1 GeV, then
#       fine-tuned with pos_weight 6 (runs/b_tune: the reference model (b));
#   (c) model (b) fine-tuned on full graphs of the 100 mu=200 events of (a) (runs/c: the model
#       tracks are reconstructed with, issue 7);
# and the 20 held-out mu=200 events reconstruction is measured on.
# Usage: tools/recipes/reference.sh [WORKDIR] [a]   (default ./reference; `a` stops after model
#   (a) and its evaluation: the check of a generator change). TRACKGNN=path/to/trackgnn uses that
#   binary instead of building the release one. PRECISION=bf16 trains in mixed precision (issue
#   21's check) into runs named with a `_bf16` suffix (runs/a_bf16, ...), beside the f32 ones on
#   the same data; `trackgnn plot-loss runs/a runs/a_bf16 --out F` overlays their loss curves.
#   Hours on 2 cores; model (c) takes most of them.
# Measured times per model and the f32/bf16 comparison, in dated tables:
#   tools/recipes/results/reference.md.
# Interrupt at any time: re-running resumes training (--resume) and skips finished steps.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
only="${2:-}"
case "$only" in ""|a) ;; *) echo "reference.sh: the second argument is \`a\` or nothing, not \`$only\`" >&2; exit 2;; esac
if [ -n "${TRACKGNN:-}" ]; then
  tg="$(cd "$(dirname "$TRACKGNN")" && pwd)/$(basename "$TRACKGNN")"
else
  cargo build --release --manifest-path "$here/../../Cargo.toml" -p trackgnn
  tg="$here/../../target/release/trackgnn"
fi
[ -x "$tg" ] || { echo "reference.sh: no trackgnn binary at $tg" >&2; exit 2; }
work="${1:-reference}"
mkdir -p "$work" && cd "$work"

# train_and_eval RUN GRAPHS CONFIG [INIT_RUN]: trains runs/RUN (resuming it if it exists; a
# fresh run starts from INIT_RUN's best weights when given), then evaluates it.
# The precision is recorded in the run's config.toml, so a resumed run and `eval` keep it.
case "${PRECISION:-f32}" in f32) suffix="";; bf16) suffix="_bf16";;
  *) echo "reference.sh: PRECISION is f32 or bf16, not \`$PRECISION\`" >&2; exit 2;; esac
train_and_eval() {
  local run="runs/$1$suffix"
  if [ -d "$run" ]; then
    "$tg" train --graphs "$2" --out "$run" --resume --config "$here/$3"
  else
    "$tg" train --graphs "$2" --out "$run" --config "$here/$3" --precision "${PRECISION:-f32}" \
      ${4:+--init-weights "runs/$4$suffix"}
  fi
  "$tg" eval --run "$run" --graphs "$2"
}

# Events: the training set (seed 11, ids 1-100), held-out evaluation events (seed 12, ids
# 1001-1020), and low pile-up events for (b) (seed 21).
[ -d gnn_a_events ] || "$tg" simulate --events 100 --pileup 200 --seed 11 --out gnn_a_events
[ "$only" = a ] || [ -d mu200_eval ] || "$tg" simulate --events 20 --first-event 1001 --pileup 200 --seed 12 --out mu200_eval
[ "$only" = a ] || [ -d mu40 ] || "$tg" simulate --events 100 --pileup 40 --seed 21 --out mu40

# Module maps, drawn from the generator in memory (seed 11, ids from 1001: disjoint from the
# training events): the prompt map of 10,000 events (~10 min of one core) for full events, and
# for the pT > 1 GeV graphs that map merged with 5,000 events' prompt and secondary particles
# (~20 min), whose secondaries are 5-6% of the target edges.
[ -f map_prompt.bin ] || "$tg" module-map build --simulate 10000 --seed 11 --first-event 1001 --out map_prompt.bin
[ -f map_all.bin ] || "$tg" module-map build --simulate 5000 --all-particles --seed 11 --first-event 1001 --out map_all.bin
[ -f map_mix.bin ] || "$tg" module-map merge map_prompt.bin map_all.bin --out map_mix.bin

# (a) pT > 1 GeV module-map graphs (margin 10% of each range) and training.
[ -d graphs_a ] || "$tg" build-graphs --input gnn_a_events --out graphs_a --method module-map --map map_mix.bin \
  --pt-min 1 --remove-noise --margin 0.1
train_and_eval a graphs_a reference_a.toml
# ... then fine-tuned from its best weights with a positive-class weight of 1.5.
train_and_eval a_tune graphs_a reference_a_tune.toml a
[ "$only" = a ] && exit 0

# (b) full mu=40 graphs (no truth cut; the prompt map's ranges with a 30% margin) and training
# (~30 min of 2 cores) ...
[ -d graphs_b ] || "$tg" build-graphs --input mu40 --out graphs_b --method module-map --map map_prompt.bin --margin 0.3
train_and_eval b graphs_b reference_b.toml
# ... then fine-tuned from its best weights with pos_weight 6 (~14 min).
train_and_eval b_tune graphs_b reference_b_tune.toml b

# (c) model (b) fine-tuned on full graphs of the mu=200 events of (a) (~4.5 h).
[ -d graphs_c ] || "$tg" build-graphs --input gnn_a_events --out graphs_c --method module-map --map map_prompt.bin --margin 0.3
train_and_eval c graphs_c reference_c.toml b_tune

# Reconstruction of the held-out full mu=200 events (no truth read) with model (c) (issue 7).
"$tg" reconstruct --run runs/c --input mu200_eval --out tracks_c --method follow
"$tg" reconstruct --run runs/c --input mu200_eval --out tracks_c_walk --method walkthrough
"$tg" reconstruct --run runs/c --input mu200_eval --out tracks_c_cc --method cc
