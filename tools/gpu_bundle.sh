#!/usr/bin/env bash
# Builds what tools/gpu_check.sh runs on a GPU machine, into one folder that travels (the device
# tool's `carry`, or scp): the `trackgnn` binary and the `gpu_parity` checks, release builds with
# the `cuda` feature, stripped, and a copy of the PyTorch + PyG reference of the engine benchmark
# (tools/torch_reference/bench.py).
#
#   tools/gpu_bundle.sh [--mpi] [OUT_DIR]      (default: target/gpu-bundle)
#
# --mpi adds gpu_check.sh's `mpi` part (2 ranks sharing the GPU against 1 rank): `trackgnn-mpi`,
# built with the `cuda` and `mpi` features (needs libopenmpi-dev here), and `openmpi/`, the
# OpenMPI runtime of this machine's Debian packages unpacked (no root needed there).
#
# Nothing of CUDA is needed here: the binaries load the driver, NVRTC and cuBLAS at run time.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/.."
mpi=0
[[ "${1:-}" == "--mpi" ]] && { mpi=1; shift; }
out="${1:-$root/target/gpu-bundle}"
cd "$root"
cargo build --release -p trackgnn --features cuda
cargo build --release -p trackgnn-cuda --features cuda --example gpu_parity
mkdir -p "$out"
cp target/release/trackgnn target/release/examples/gpu_parity "$out/"
# The commit the binaries were built from (results name it), `+dirty` with uncommitted changes.
echo "$(git rev-parse HEAD)$(git diff --quiet HEAD -- crates Cargo.toml Cargo.lock || echo +dirty)" >"$out/COMMIT"
strip "$out/trackgnn" "$out/gpu_parity"
if ((mpi)); then
    cargo build --release -p trackgnn --features cuda,mpi
    install -m 0755 target/release/trackgnn "$out/trackgnn-mpi"
    strip "$out/trackgnn-mpi"
    # OpenMPI's runtime packages and the libraries they load beyond a base system's, unpacked:
    # gpu_check.sh runs them from there with OPAL_PREFIX (Debian's build relocates).
    debs="$(mktemp -d)"
    (cd "$debs" && apt-get download openmpi-bin libopenmpi3 openmpi-common libpmix2 libhwloc15 \
        libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libucx0 libnuma1 libibverbs1 librdmacm1 \
        libnl-3-200 libnl-route-3-200 libpsm2-2 libpsm-infinipath1 libmunge2 libpciaccess0 libxnvctrl0 >/dev/null)
    rm -rf "$out/openmpi"
    for d in "$debs"/*.deb; do dpkg-deb -x "$d" "$out/openmpi"; done
    rm -rf "$debs" "$out/openmpi/usr/share/doc" "$out/openmpi/usr/share/man"
fi
install -m 0644 "$root/tools/torch_reference/bench.py" "$out/bench.py"
du -sh "$out"
