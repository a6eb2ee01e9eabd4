#!/usr/bin/env bash
# kill -9 during training, then --resume: ends with the same weights as an uninterrupted run.
# It generates 30 events at pile-up 10 and their pT > 1 GeV geometric graphs in a temporary
# directory, trains 3 epochs uninterrupted (A) and again (B), kills B with SIGKILL once it has
# logged 33 steps, resumes it, and compares the final weights and the validation loss per epoch
# of A and B.
# Usage: T=path/to/trackgnn tools/recipes/kill9_resume.sh   (default T=target/release/trackgnn,
#   relative to the current directory; needs python3).
set -euo pipefail
T=${T:-target/release/trackgnn}; T=$(realpath "$T")
d=$(mktemp -d /tmp/kill9.XXXX); cd "$d"
$T simulate --events 30 --pileup 10 --seed 9 --out ev >/dev/null 2>&1
$T build-graphs --input ev --out g --method geometric --pt-min 1 --remove-noise >/dev/null 2>&1
args=(--graphs g --epochs 3 --hidden 32 --iterations 4 --checkpoint-every 5 --threads 1)
$T train "${args[@]}" --out A >/dev/null 2>&1
$T train "${args[@]}" --out B >/dev/null 2>&1 &
pid=$!
while [ "$(cat B/steps.jsonl 2>/dev/null | wc -l)" -lt 33 ]; do sleep 0.05; done
kill -9 $pid; wait $pid 2>/dev/null || echo "killed with SIGKILL (exit $?) after $(wc -l < B/steps.jsonl) steps; checkpoint at step $(python3 -c 'import json;print(json.load(open("B/checkpoint/state.json"))["global_step"])')"
$T train --graphs g --out B --resume --epochs 3 --threads 1 >/dev/null 2>&1
echo "uninterrupted: $(sha256sum A/checkpoint/model.safetensors | cut -c1-16)  resumed: $(sha256sum B/checkpoint/model.safetensors | cut -c1-16)"
cmp A/checkpoint/model.safetensors B/checkpoint/model.safetensors && echo "final weights identical"
python3 - <<'P'
import json
a=[json.loads(l)["val_loss"] for l in open("A/metrics.jsonl")]; b=[json.loads(l)["val_loss"] for l in open("B/metrics.jsonl")]
print("val loss per epoch A", a); print("val loss per epoch B", b)
P
