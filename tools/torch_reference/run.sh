#!/usr/bin/env bash
# The PyTorch + PyG reference of the engine benchmark on the CPU (bench.py beside this file;
# docs/benchmarks.md, "The benchmark specification"), under /usr/bin/time -v for the peak
# resident memory ("Maximum resident set size").
#
#   tools/torch_reference/run.sh [plain|ckpt|bf16|bf16-ckpt|compile] [bench.py's options]
#   e.g. tools/torch_reference/run.sh bf16 --model acorn --threads 2 --steps 3
#
# On first use it makes a virtual environment with torch, torch_geometric and numpy from PyPI
# (PyPI's torch wheel brings its CUDA libraries too: ~3 GB; a CPU wheel from another index works
# as well). VENV names the environment (default: $TMPDIR or /tmp, trackgnn-torch-reference-venv).
# OMP_NUM_THREADS and MKL_NUM_THREADS follow --threads (default 2). On a busy machine
# OMP_WAIT_POLICY=PASSIVE keeps idle OpenMP threads from spinning.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${VENV:-${TMPDIR:-/tmp}/trackgnn-torch-reference-venv}"
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import torch, torch_geometric' 2>/dev/null; then
    echo "run.sh: installing torch, torch_geometric and numpy into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check torch torch_geometric numpy
fi
variant=plain
if [[ $# -gt 0 && "$1" != -* ]]; then
    variant="$1"
    shift
fi
threads=2
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    case "${args[i]}" in
        --threads) threads="${args[i + 1]:-2}" ;;
        --threads=*) threads="${args[i]#--threads=}" ;;
    esac
done
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$threads}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-$threads}"
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore}"
cmd=("$venv/bin/python" "$here/bench.py" --variant "$variant" "$@")
if [[ -x /usr/bin/time ]]; then
    exec /usr/bin/time -v "${cmd[@]}"
fi
echo "run.sh: /usr/bin/time not found (Debian: apt-get install time): no peak RSS line beyond bench.py's ru_maxrss" >&2
exec "${cmd[@]}"
