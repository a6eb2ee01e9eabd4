#!/usr/bin/env bash
# The GPU checks of the CUDA backend (issue 39), on a machine with an NVIDIA GPU, the CUDA 13
# driver and a python3 holding PyTorch, torch_geometric and PyPI's nvidia-* libraries (cuBLAS,
# NVRTC). Parity first, then speed and memory beside PyTorch + PyG on the same GPU, then a short
# training run. Each part has its own time limit; the whole takes about 5 minutes.
#
#   tools/gpu_check.sh BUNDLE OUT [PART ...]
#
#   BUNDLE  the folder tools/gpu_bundle.sh wrote (trackgnn, gpu_parity, bench.py, COMMIT)
#   OUT     where the results go: summary.md (the tables), results.json, log.txt
#   PART    parity, speed, inference, memory, demo, mpi (default: all of them, in that order;
#           mpi needs a bundle built with `gpu_bundle.sh --mpi`)
#
# Exit code: 0 when the parity checks passed (the figures are for reading), 1 otherwise.
set -uo pipefail
bundle="$(cd "$1" && pwd)"
out="$2"
shift 2
parts=("$@")
[[ ${#parts[@]} -eq 0 ]] && parts=(parity speed inference memory demo mpi)
mkdir -p "$out"
out="$(cd "$out" && pwd)"
work="$(mktemp -d -t trackgnn-gpu.XXXXXX)"
log="$out/log.txt"
: >"$log"
say() { echo "$@" | tee -a "$log"; }
has() { [[ " ${parts[*]} " == *" $1 "* ]]; }

# The CUDA 13 libraries of the machine's Python (PyPI's nvidia-* wheels).
nvlibs="$(python3 - <<'PY'
import glob, os, site, sys
dirs = set()
for sp in site.getsitepackages() + [site.getusersitepackages()] + sys.path:
    for so in glob.glob(os.path.join(sp, "nvidia", "*", "lib", "lib*.so*")):
        dirs.add(os.path.dirname(so))
print(":".join(sorted(dirs)))
PY
)"
export LD_LIBRARY_PATH="$nvlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TRACKGNN_KERNEL_CACHE="$work/kernels"
export PYTHONUNBUFFERED=1
tg="$bundle/trackgnn"
say "== $(date -u +%FT%TZ) gpu_check on $(hostname)"
{
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
    echo "trackgnn commit: $(cat "$bundle/COMMIT" 2>/dev/null || echo unknown)"
} | tee -a "$log" >"$work/gpu.txt"
say "trackgnn: $("$tg" --version), commit $(cat "$bundle/COMMIT" 2>/dev/null || echo unknown)  load: $(cut -d' ' -f1-3 /proc/loadavg)"

# run NAME SECONDS CMD...: the command's output into the log and $work/NAME.out.
run() {
    local name="$1" secs="$2"
    shift 2
    say "-- $name: $*"
    local t0=$SECONDS
    timeout "$secs" "$@" >"$work/$name.out" 2>"$work/$name.err"
    local rc=$?
    cat "$work/$name.out" >>"$log"
    tail -n 20 "$work/$name.err" >>"$log"
    say "-- $name: exit $rc after $((SECONDS - t0)) s"
    return $rc
}

status=0
parity="not run"
if has parity; then
    parity=passed
    run parity 150 "$bundle/gpu_parity" --out "$work/parity" --steps 200 || { status=1; parity=FAILED; }
fi
torch_bench() { # NAME SECONDS ARGS...: PyTorch + PyG's bench.py on the GPU
    local name="$1" secs="$2"
    shift 2
    [[ -f "$bundle/bench.py" ]] && run "$name" "$secs" python3 "$bundle/bench.py" --device cuda "$@"
}
if has speed; then
    run speed 120 "$tg" bench engine --device cuda:0 --json --steps 10 --warmup 2
    for model in spec acorn; do
        torch_bench "torch_${model}_f32" 60 --model "$model" --variant plain --steps 10
        torch_bench "torch_${model}_bf16" 60 --model "$model" --variant bf16 --steps 10
    done
fi
if has inference; then
    big=(--nodes 114000 --edges 1150000)
    run inference 90 "$tg" bench engine --device cuda:0 --only acorn --inference "${big[@]}" --json --steps 5
    torch_bench torch_inference_bf16 60 --model acorn --variant bf16 --inference "${big[@]}" --steps 5
    torch_bench torch_inference_f32 60 --model acorn --variant plain --inference "${big[@]}" --steps 5
fi
if has memory; then
    huge=(--nodes 200000 --edges 1600000)
    run memory 120 "$tg" bench engine --device cuda:0 --only acorn --precision bf16 --checkpoint every:2+bf16 "${huge[@]}" --json --steps 3 --warmup 1
    run memory_none 120 "$tg" bench engine --device cuda:0 --only acorn --precision bf16 "${huge[@]}" --json --steps 3 --warmup 1
    torch_bench torch_memory_bf16_ckpt 90 --model acorn --variant bf16-ckpt "${huge[@]}" --steps 3 --warmup 1
    torch_bench torch_memory_f32 90 --model acorn --variant plain "${huge[@]}" --steps 3 --warmup 1
fi
if has demo; then
    run demo 240 "$tg" demo --out "$work/demo" --device cuda:0
fi
if has mpi; then
    if [[ -x "$bundle/trackgnn-mpi" && -d "$bundle/openmpi/usr" ]]; then
        # 2 ranks sharing the one GPU (`cuda` is the local rank's GPU modulo the GPUs) against 1
        # rank with 2 graphs per step: the same weights (issue 39), as tests/mpi.rs checks on CPUs.
        m="$bundle/openmpi/usr"
        mpienv=(env OPAL_PREFIX="$m" PATH="$m/bin:$PATH" LD_LIBRARY_PATH="$m/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH"
            OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 RAYON_NUM_THREADS=1)
        tgm="$bundle/trackgnn-mpi"
        d="$work/mpi"
        # GPU_CHECK_MPI_DEVICE=cpu runs this part on a machine without a GPU (to check the script).
        train=(train --graphs "$d/g" --epochs 2 --hidden 16 --iterations 2 --threads 1 --device "${GPU_CHECK_MPI_DEVICE:-cuda}")
        run mpi_events 60 "${mpienv[@]}" "$tgm" simulate --events 12 --pileup 8 --seed 4 --out "$d/ev" &&
            run mpi_graphs 60 "${mpienv[@]}" "$tgm" build-graphs --input "$d/ev" --out "$d/g" --pt-min 1 &&
            run mpi_one 90 "${mpienv[@]}" "$tgm" "${train[@]}" --out "$d/one" --graphs-per-step 2 &&
            run mpi_two 90 "${mpienv[@]}" "$m/bin/orterun" --oversubscribe -np 2 "$tgm" "${train[@]}" --out "$d/two" --mpi-chunk 1000 &&
            python3 - "$d" >"$work/mpi.json" <<'PY'
import json, struct, sys
def weights(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    head = json.loads(b[8:8 + n])
    out = {}
    for name, t in head.items():
        if name == "__metadata__":
            continue
        s, e = t["data_offsets"]
        out[name] = struct.unpack(f"<{(e - s) // 4}f", b[8 + n + s:8 + n + e])
    return out
d = sys.argv[1]
a, b = weights(f"{d}/one/checkpoint/model.safetensors"), weights(f"{d}/two/checkpoint/model.safetensors")
worst = 0.0
for k in a:
    diff = sum((x - y) ** 2 for x, y in zip(a[k], b[k])) ** 0.5
    norm = max(sum(x * x for x in a[k]) ** 0.5, 1e-12)
    worst = max(worst, diff / norm)
print(json.dumps({"tensors": len(a), "same_names": sorted(a) == sorted(b), "max_relative_difference": worst,
                  "passed": sorted(a) == sorted(b) and worst < 1e-6}))
PY
        say "-- mpi: $(cat "$work/mpi.json" 2>/dev/null || echo 'did not finish')"
    else
        say "-- mpi: skipped (the bundle was built without --mpi)"
    fi
fi

# The tables: parity as gpu_parity wrote it, then every timing side by side.
python3 - "$work" "$out" <<'PY' | tee -a "$log"
import glob, json, os, re, sys
work, out = sys.argv[1], sys.argv[2]
res = {"parity": None, "trackgnn": {}, "pytorch": {}}
gpu = os.path.join(work, "gpu.txt")
lines = ["```", open(gpu).read().strip() if os.path.exists(gpu) else "no GPU information", "```", ""]
p = os.path.join(work, "parity", "parity.json")
if os.path.exists(p):
    res["parity"] = json.load(open(p))
    lines += [open(os.path.join(work, "parity", "parity.md")).read(), ""]
for name in ("speed", "inference", "memory", "memory_none"):
    f = os.path.join(work, name + ".out")
    if os.path.exists(f) and os.path.getsize(f):
        try:
            res["trackgnn"][name] = json.load(open(f))["variants"]
        except Exception as e:
            res["trackgnn"][name] = {"error": str(e)}
def torch_figures(f):
    t = open(f).read()
    m = re.search(r"time per step \(s\) : mean ([\d.]+)\s+min ([\d.]+)", t)
    pk = re.search(r"GPU peak memory \(bytes\): (\d+)", t)
    return {"step_seconds_mean": float(m.group(1)) if m else None,
            "step_seconds_min": float(m.group(2)) if m else None,
            "peak_memory_bytes": int(pk.group(1)) if pk else None}
for f in sorted(glob.glob(os.path.join(work, "torch_*.out"))):
    res["pytorch"][os.path.basename(f)[:-4]] = torch_figures(f)
rows = []
for name, vs in res["trackgnn"].items():
    if not isinstance(vs, list):
        continue
    for v in vs:
        rows.append((name, v))
lines.append("| check | model | precision | checkpointing | nodes | edges | trackgnn s/step | products alone | bytes bound s | step / bound | peak GiB | planned GiB | PyTorch eager f32 | PyTorch bf16 | × eager | × bf16 |")
lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
pt = res["pytorch"]
for name, v in rows:
    model = "spec" if v["variant"] == "benchspec" else v["variant"]
    if name == "speed":
        eager, bf = pt.get(f"torch_{model}_f32", {}), pt.get(f"torch_{model}_bf16", {})
    elif name == "inference":
        eager, bf = pt.get("torch_inference_f32", {}), pt.get("torch_inference_bf16", {})
    else:
        eager, bf = pt.get("torch_memory_f32", {}), pt.get("torch_memory_bf16_ckpt", {})
    s = v["step_seconds_mean"]
    e, b = eager.get("step_seconds_mean"), bf.get("step_seconds_mean")
    g = v.get("gemm_only_seconds")
    fmt = lambda x: "—" if x is None else f"{x:.4f}"
    ratio = lambda x: "—" if x is None else f"{x / s:.2f}"
    plan = v.get("planned_peak_bytes")
    plan = "—" if plan is None else f"{plan / 2**30:.2f}"
    lines.append(f"| {name} | {v['variant']} | {v['precision']} | {v.get('checkpointing', '—')} | {v['nodes']} | {v['edges']} | "
                 f"{s:.4f} | {fmt(g)} | {fmt(v.get('memory_bound_seconds'))} | {fmt(v.get('step_over_bound'))} | "
                 f"{v['peak_memory_bytes'] / 2**30:.2f} | {plan} | {fmt(e)} | {fmt(b)} | {ratio(e)} | {ratio(b)} |")
for name, v in rows:
    prof, total = v.get("profile") or [], v.get("profiled_seconds") or 0.0
    if not prof:
        continue
    lines.append(f"\n{name}, {v['variant']} {v['precision']} ({v['what']}, checkpointing {v.get('checkpointing', '—')}): "
                 f"one step with each call synchronised, {total:.4f} s in all")
    lines.append("\n| call | calls | s | share | GB/s | of copy bandwidth |\n|---|---|---|---|---|---|")
    for r in prof[:10]:
        gbs = r["bytes"] / max(r["seconds"], 1e-12) / 1e9
        lines.append(f"| {r['name']} | {r['calls']} | {r['seconds']:.5f} | {100 * r['seconds'] / max(total, 1e-12):.1f}% | "
                     f"{gbs:.1f} | {100 * r['fraction_of_copy_bandwidth']:.0f}% |")
for k, v in pt.items():
    if v.get("peak_memory_bytes"):
        lines.append(f"\nPyTorch {k}: peak {v['peak_memory_bytes'] / 2**30:.2f} GiB, {v['step_seconds_mean']} s/step")
m = os.path.join(work, "mpi.json")
if os.path.exists(m) and os.path.getsize(m):
    res["mpi"] = json.load(open(m))
    lines.append(f"\n2 ranks sharing the GPU against 1 rank with 2 graphs per step: {res['mpi']}")
json.dump(res, open(os.path.join(out, "results.json"), "w"), indent=1)
open(os.path.join(out, "summary.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
say "== done in $SECONDS s; parity $parity"
exit $status
