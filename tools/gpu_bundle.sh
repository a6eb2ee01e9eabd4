#!/usr/bin/env bash
# Builds what tools/gpu_check.sh runs on a GPU machine, into one folder that travels (the device
# tool's `carry`, or scp): the `trackgnn` binary and the `gpu_parity` checks, release builds with
# the `cuda` feature, stripped, and a copy of the PyTorch + PyG reference benchmark.
#
#   tools/gpu_bundle.sh [OUT_DIR]      (default: target/gpu-bundle)
#
# Nothing of CUDA is needed here: the binaries load the driver, NVRTC and cuBLAS at run time.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/.."
out="${1:-$root/target/gpu-bundle}"
cd "$root"
cargo build --release -p trackgnn --features cuda
cargo build --release -p trackgnn-cuda --features cuda --example gpu_parity
mkdir -p "$out"
cp target/release/trackgnn target/release/examples/gpu_parity "$out/"
# The commit the binaries were built from (results name it), `+dirty` with uncommitted changes.
echo "$(git rev-parse HEAD)$(git diff --quiet HEAD -- crates Cargo.toml Cargo.lock || echo +dirty)" >"$out/COMMIT"
strip "$out/trackgnn" "$out/gpu_parity"
bench="$root/../shared/bench/torch_reference/bench.py"
if [[ -f "$bench" ]]; then
    install -m 0644 "$bench" "$out/bench.py"
else
    echo "gpu_bundle.sh: $bench not found: the PyTorch side of the speed checks will be skipped" >&2
fi
du -sh "$out"
