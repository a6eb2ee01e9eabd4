#!/usr/bin/env bash
# The whole-event reference recipe of issue 22: graphs that reach displaced particles and the
# GNN trained on them, from seeds, every stage resumable:
#   events -> prompt module map / hit embedding / edge filter -> graphs -> GNN -> tracks.
#   1. events: 100 mu=200 training events (seed 31) and the 20 held-out mu=200 events of
#      reference.sh (seed 12, ids 1001-1020), never used for maps, embeddings or training;
#   2. the prompt module map, drawn from the generator in memory (10,000 events, seed 11, ids
#      from 1001), as reference.sh makes it;
#   3. the embedding (whole_event/embedding.toml) and the filter (whole_event/filter.toml) on
#      the training events, the last fifth validating;
#   4. graphs of the training and held-out events by each method (module map with a 30% margin,
#      metric learning at 32 neighbours + filter, and their union, the hybrid), with the per-method table
#      (`build-graphs --compare`: edges per event, graph efficiency over prompt and secondary
#      target edges, purity, build seconds per event);
#   5. the GNN, pretrained (whole_event/gnn_pretrain.toml) on the training events' hybrid graphs
#      cut to the hits of pT >= 1 GeV particles, then trained (whole_event/gnn.toml) on the full
#      hybrid graphs, then fine-tuned with the target edges of secondaries weighed 4 times
#      (whole_event/gnn_secondary.toml);
#   6. the candidate-quality model fitted on 8 quality events (seed 41, ids 2001-2008, used for
#      nothing else); tracks of the held-out events (no truth read) without and with it and
#      with two score selections, primary and all-target efficiency, and the --truth-scores
#      ceiling of the hybrid graph.
# Usage: tools/recipes/whole_event.sh [--quick] [WORKDIR]   (default ./whole_event, with
#   --quick ./whole_event_quick). TRACKGNN=path/to/trackgnn uses that binary instead of
#   building the release one.
# Interrupt at any time: re-running skips finished steps and resumes the trainings.
#
# A finished embedding or filter, re-run, only reports its epochs (it reads no event). The full
# recipe takes about 4 h on 2 cores from nothing.
#
# Its trained runs are committed in whole_event/trained/ (restored into a new work directory,
# see below): a run of the recipe on a new machine rebuilds the events, the map and the graphs
# from their seeds and resumes from there (about 25 minutes on 2 cores). Graphs built before
# 2026-11-27 lack the production-vertex radii that the fine-tuning's secondary_weight needs (it
# stops with an error naming the graph): delete graphs_hybrid in such a work directory and re-run.
#
# --quick runs the same chain, the same commands and configurations with smaller sizes: 12
# training events and 2 held-out events at pile-up 20, a map of 2,000 events, 4 epochs of the
# embedding (a 64-wide network), 5 of the filter, 30 epochs of GNN pretraining and 15 of
# training, 32 wide, the training at lr 1e-3, and 2 epochs of the fine-tuning. It checks the
# chain end to end in a minute or two and prints the same tables.
#
# Measured times per stage and figures of past runs, full and --quick, in dated tables:
# tools/recipes/results/whole_event.md (the trained runs' held-out figures:
# whole_event/trained/README.md).
set -euo pipefail
# The whole script is one function, read before it runs: editing the file while it runs
# cannot change what runs (bash reads a plain script as it goes).
main() {
here="$(cd "$(dirname "$0")" && pwd)"
quick=0
if [ "${1:-}" = "--quick" ]; then quick=1; shift; fi
if [ $quick = 1 ]; then work="${1:-whole_event_quick}"; else work="${1:-whole_event}"; fi
if [ -n "${TRACKGNN:-}" ]; then
  tg="$(cd "$(dirname "$TRACKGNN")" && pwd)/$(basename "$TRACKGNN")"
else
  cargo build --release --manifest-path "$here/../../Cargo.toml" -p trackgnn
  tg="$here/../../target/release/trackgnn"
fi
[ -x "$tg" ] || { echo "whole_event.sh: no trackgnn binary at $tg" >&2; exit 2; }
mkdir -p "$work" && cd "$work"
cfg="$here/whole_event"
t0=$(date +%s)
stage() { echo; echo "[$(( $(date +%s) - t0 )) s] $*"; }

if [ $quick = 1 ]; then
  n_train=12 n_eval=2 n_quality=6 pileup=20 map_events=2000
  emb_flags=(--epochs 4) filt_flags=(--epochs 5)
  # The quick embedding is narrower: a run's config.toml must stay the same on resume, so the
  # quick run gets its own copy.
  sed -e 's/^hidden = 128/hidden = 64/' -e 's/^hidden_layers = 4/hidden_layers = 3/' "$cfg/embedding.toml" > embedding.toml
  emb_cfg=embedding.toml
  pre_flags=(--epochs 30 --hidden 32) gnn_flags=(--epochs 15 --hidden 32 --lr 0.001) sec_flags=(--epochs 2 --hidden 32)
else
  n_train=100 n_eval=20 n_quality=8 pileup=200 map_events=10000
  emb_flags=() filt_flags=() pre_flags=() gnn_flags=() sec_flags=()
  emb_cfg="$cfg/embedding.toml"
fi

# The trained runs committed beside the recipe (whole_event/trained/: weights, checkpoints
# and logs of the full chain, no plots) seed a new work directory, so that the chain resumes
# where they stopped instead of training for hours again; the absolute paths they record (the
# work directory they were trained in, written as the placeholder in trained/workdir) are
# rewritten to this one. Events, the map and the
# graphs are rebuilt from their seeds: the same bytes, so the recorded hashes hold.
trained="$cfg/trained"
if [ $quick = 0 ] && [ -f "$trained/workdir" ]; then
  from="$(cat "$trained/workdir")"
  for run in "$trained"/runs/*/; do
    name="$(basename "$run")"
    [ -e "runs/$name" ] && continue
    mkdir -p runs && cp -r "$run" "runs/$name"
    { grep -rlF "$from" "runs/$name" || true; } | while read -r f; do sed -i "s#$from#$PWD#g" "$f"; done
    echo "runs/$name: restored from $run"
  done
fi

stage "1. events: $n_train training and $n_eval held-out events at pile-up $pileup"
[ -d events ] || "$tg" simulate --events $n_train --pileup $pileup --seed 31 --out events
[ -d heldout ] || "$tg" simulate --events $n_eval --first-event 1001 --pileup $pileup --seed 12 --out heldout
# Events for the candidate-quality model (stage 6): neither trained on nor held out.
[ -d quality_events ] || "$tg" simulate --events $n_quality --first-event 2001 --pileup $pileup --seed 41 --out quality_events

stage "2. prompt module map of $map_events generated events"
[ -f map_prompt.bin ] || "$tg" module-map build --simulate $map_events --pileup $pileup --seed 11 --first-event 1001 \
  --out map_prompt.bin

# train_stage CMD RUN ARGS...: trains a learned stage into RUN, resuming it if it exists.
train_stage() {
  local cmd=$1 run=$2; shift 2
  if [ -f "$run/checkpoint/state.json" ]; then "$tg" "$cmd" --out "$run" --resume "$@"; else "$tg" "$cmd" --out "$run" "$@"; fi
}
stage "3. hit embedding and edge filter"
train_stage train-embedding runs/embedding --input events --config "$emb_cfg" "${emb_flags[@]}"
train_stage train-filter runs/filter --input events --embedding runs/embedding --config "$cfg/filter.toml" "${filt_flags[@]}"

stage "4. graphs by each method (training events, then held-out events with the per-method table)"
build() { # build DIR EVENTS ARGS...
  local dir=$1 ev=$2; shift 2
  [ -f "$dir/build-summary.json" ] || "$tg" build-graphs --input "$ev" --out "$dir" "$@"
}
map=(--map map_prompt.bin --margin 0.3)
# The embedding's graph at 32 neighbours per hit, filtered (whole_event/filter.toml, trained on
# the 48-neighbour candidates). 32, not 48, for the 5 s budget: on held-out events 1001-1002
# (this recipe's embedding and filter) the hybrid at 48 has 1.445M edges, secondaries 0.7316,
# all 0.9827, and builds in 4.97 s per event at --threads 1; at 32 1.109M, 0.7087, 0.9811,
# 3.73 s; at 24 0.922M, 0.6962, 0.9803, 3.11 s (a niced training beside it). The k-d tree
# queries dominate, and the GNN's time follows the edges. A radius does not prune: the 48
# nearest lie within 0.15 (the same graph at radius 0.15 as at 100).
ml=(--embedding runs/embedding --filter runs/filter --radius 100 --k-max 32)
build graphs_hybrid events --method hybrid "${map[@]}" "${ml[@]}"
build heldout_map heldout --method module-map "${map[@]}"
build heldout_ml heldout --method metric-learning "${ml[@]}"
rm -rf heldout_hybrid  # rebuilt every time: it prints the table
"$tg" build-graphs --input heldout --out heldout_hybrid --method hybrid "${map[@]}" "${ml[@]}" \
  --compare heldout_map --compare heldout_ml

stage "5. the GNN: pretrained on truth-cut hybrid graphs, trained on the full ones, fine-tuned for secondaries"
# From scratch on full hybrid graphs the GNN learns very slowly (see gnn.toml), as model (c)
# would have without models (a) and (b) before it: first the same graphs of the training events
# restricted to the hits of pT >= 1 GeV particles (truth cut, noise removed; ~12.6k nodes and
# 65k edges per event), then the full graphs from those weights.
build graphs_hybrid_pt1 events --method hybrid "${map[@]}" "${ml[@]}" --pt-min 1 --remove-noise
train_stage train runs/gnn_pretrain --graphs graphs_hybrid_pt1 --config "$cfg/gnn_pretrain.toml" "${pre_flags[@]}"
# fine_tune RUN INIT CONFIG ARGS...: trains RUN on the full hybrid graphs from INIT's best
# weights, resuming it if it exists, then evaluates it.
fine_tune() {
  local run=$1 init=$2 config=$3; shift 3
  if [ -d "$run" ]; then
    "$tg" train --graphs graphs_hybrid --out "$run" --resume --config "$config" "$@"
  else
    "$tg" train --graphs graphs_hybrid --out "$run" --config "$config" --init-weights "$init" "$@"
  fi
  "$tg" eval --run "$run" --graphs graphs_hybrid
}
fine_tune runs/gnn runs/gnn_pretrain "$cfg/gnn.toml" "${gnn_flags[@]}"
# Then the target edges of secondaries weighed 4 times (gnn_secondary.toml).
fine_tune runs/gnn_secondary runs/gnn "$cfg/gnn_secondary.toml" "${sec_flags[@]}"

stage "6. tracks of the held-out events (no truth read), then the hybrid graph's ceiling"
rm -rf tracks tracks_selected tracks_strict tracks_quality tracks_truth
gnn=runs/gnn_secondary  # the fine-tuned GNN
"$tg" reconstruct --run "$gnn" --input heldout --out tracks --method follow
# The candidate-quality model (a logistic regression on each candidate's length, layers, GNN
# scores and helix fit; trackgnn_reco::quality), fitted to the candidates that this GNN and
# track following build on the quality events, then the held-out tracks without the
# candidates it finds more likely fake than not, track following run again around those it
# keeps (--rebuild: the hits of the dropped fakes go back to their tracks). Refitted every run
# (under a minute): it belongs to the GNN and the track builder it was fitted with. Track
# following's displaced pass, its 3 seed tries and --rebuild were chosen on 8 separate tuning
# events (seed 51, ids 3001-3008; all-target efficiency with the quality model 0.9562 ->
# 0.9563 -> 0.9580 -> 0.9585, fake rate 0.0065 -> 0.0084). Held-out events, the fine-tuned GNN
# (best epoch 3), release e71675a: 0.9931 (primary) / 0.9610 (all), fake rate 0.0079,
# 3.36 s per event, against 0.9938 / 0.9633 / 0.189 without it; before the displaced pass and
# the seed tries (release c4b1288) 0.9901 / 0.9577 / 0.0062 with it, 0.9914 / 0.9603 / 0.132
# without. The two score selections below, chosen with the older builder, no longer reach a
# fake rate under 0.01: the displaced pass adds short fakes that only the quality model sees.
"$tg" train-quality --run "$gnn" --input quality_events --out quality.json --method follow
"$tg" reconstruct --run "$gnn" --input heldout --out tracks_quality --method follow \
  --quality quality.json --max-fake-probability 0.5 --rebuild
# The same with the candidates of at most 6 hits kept only if their weakest link scores 0.8:
# chosen on 4 separate tuning events (seed 41, ids 2001-2004) with the GNN's best epoch (17),
# it cut their fake rate from 0.120 to 0.022 for 0.44 points of primary efficiency (0.9916 ->
# 0.9872). Then a stricter selection, for a fake rate under 0.01: candidates of at most 7 hits
# need a weakest link of 0.9 (tuning events: 0.9797, fake rate 0.0089).
"$tg" reconstruct --run "$gnn" --input heldout --out tracks_selected --method follow \
  --min-candidate-score 0.8 --candidate-score-max-hits 6
"$tg" reconstruct --run "$gnn" --input heldout --out tracks_strict --method follow \
  --min-candidate-score 0.9 --candidate-score-max-hits 7
"$tg" reconstruct --run "$gnn" --input heldout --out tracks_truth --method follow --truth-scores
stage "done: tables above; plots in runs/*/plots and tracks/plots"
}
main "$@"
