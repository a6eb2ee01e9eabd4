#!/usr/bin/env bash
# Issue 41 item 6: does the auxiliary pT target change convergence, or the loss spikes of a large
# global batch? Trains stability_aux.toml (reference model (a) narrowed, 8 graphs per step, the
# learning rate scaled linearly) with each aux_pt_weight of LAMBDAS and each SEED, one after the
# other on all cores, then prints the study's table from the logs of every run in WORKDIR.
# Usage: tools/recipes/stability_aux.sh GRAPHS_DIR [WORKDIR] [LAMBDAS] [SEEDS]
#   GRAPHS_DIR: pT > 1 GeV graphs (the study used 96 mu=200 events:
#     trackgnn simulate --events 48 --pileup 200 --seed 61 --out ev (and --first-event 49 --out ev2),
#     trackgnn build-graphs --input ev --out g --pt-min 1 (and ev2), both in one directory).
#   LAMBDAS: default "0 1"; SEEDS: default "1 2". Interrupted runs resume (--resume auto).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
graphs="$1"
work="${2:-stability_aux}"
lambdas="${3:-0 1}"
seeds="${4:-1 2}"
tg="${TRACKGNN:-$here/../../target/release/trackgnn}"
mkdir -p "$work"
echo "$(date -u +%FT%TZ) load average: $(cut -d' ' -f1-3 /proc/loadavg); $(grep -m1 'model name' /proc/cpuinfo)"
for seed in $seeds; do
  for w in $lambdas; do
    name="$work/seed${seed}_aux$w"
    # Top-level keys must precede the config's tables.
    { [ "$w" = 0 ] || echo "aux_pt_weight = $w"; grep -v '^seed = ' "$here/stability_aux.toml" | sed "1i seed = $seed"; } > "$name.toml"
    start=$(date +%s)
    "$tg" train --graphs "$graphs" --out "$name" --config "$name.toml" --resume auto --json > "$name.json"
    echo "$name: $(( $(date +%s) - start )) s"
  done
done
python3 - "$work" <<'PY'
import glob, json, os, re, sys
work = sys.argv[1]
def lines(path):
    return [json.loads(l) for l in open(path) if l.strip()]
runs = {}
for d in sorted(glob.glob(f"{work}/seed*_aux*/metrics.jsonl")):
    seed, w = re.fullmatch(r"seed(\d+)_aux(.+)", os.path.basename(os.path.dirname(d))).groups()
    runs[(seed, w)] = (lines(f"{os.path.dirname(d)}/steps.jsonl"), lines(d))
# Epochs to a validation loss: the worst of the runs' best, plus 5%, so every run reaches it.
target = 1.05 * max(min(m["val_loss"] for m in ms) for _, ms in runs.values())
print(f"| seed | aux_pt_weight | loss spikes | largest step loss / running median | final val_loss | final efficiency | final purity | final AUC | epochs to val_loss <= {target:.4f} | final val_aux_loss |")
print("|---|---|---|---|---|---|---|---|---|---|")
for (seed, w), (steps, ms) in runs.items():
    spikes = sum(1 for s in steps if s.get("loss_spike"))
    losses = [s["loss"] for s in steps]
    ratio = 0.0
    for i in range(1, len(losses)):
        window = sorted(losses[max(0, i - 20):i])
        ratio = max(ratio, losses[i] / window[len(window) // 2])
    last = ms[-1]
    reach = next((m["epoch"] for m in ms if m["val_loss"] <= target), None)
    aux = last.get("val_aux_loss", "")
    aux = f"{aux:.4f}" if isinstance(aux, float) else "-"
    print(f"| {seed} | {w} | {spikes} | {ratio:.2f} | {last['val_loss']:.4f} | {last['efficiency']:.4f} | "
          f"{last['purity']:.4f} | {last['auc']:.4f} | {reach} | {aux} |")
PY
