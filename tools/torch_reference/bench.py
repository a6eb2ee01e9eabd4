#!/usr/bin/env python3
"""trackgnn's PyTorch + PyTorch Geometric reference for the engine benchmark.

It times the training step (or the forward alone) that docs/benchmarks.md specifies
("The benchmark specification"), written the way the field's Python pipelines write an
InteractionGNN: gathers `h[src]`, PyG's scatter and aggregation modules, `torch.autocast` for
mixed precision, `torch.utils.checkpoint` per message-passing iteration. `trackgnn bench engine`
times the same models on the same graph, so the two step times compare the same work.

    python3 bench.py [--model spec|acorn] [--variant plain|ckpt|bf16|bf16-ckpt|compile]
                     [--threads 2] [--warmup 2] [--steps 10] [--seed 0] [--device cpu|cuda]
                     [--nodes 20000] [--edges 160000] [--inference]

Models: `spec`, the specification's model (hidden 64, 4 iterations with their own weights,
residual, ReLU, affine LayerNorm, sum aggregation; 164,033 parameters, trackgnn's
`ModelConfig::bench_spec()`), and `acorn`, acorn's TrackML InteractionGNN as trackgnn's
`ModelConfig::acorn()` has it (hidden 128, 8 recurrent iterations, nodes updated before edges,
SiLU, LayerNorm without affine parameters on hidden layers, Tanh outputs, sum/mean/max/std
aggregation; 362,241 parameters). Variants: `plain` (eager f32), `ckpt` (activation
checkpointing per iteration), `bf16` (autocast to bfloat16: AMX or AVX512-BF16 on CPUs that have
them, tensor cores on GPUs), `bf16-ckpt` (both), `compile` (`torch.compile`, f32).

`--device cuda` synchronises before every clock reading and prints the GPU's peak allocated
bytes over the timed steps; `--nodes/--edges` scale the synthetic graph (e.g. 200000 / 1600000,
a whole event's size); `--inference` times the forward without gradients and prints edges per
second. The parameter count is checked against trackgnn's (exit 1 on a mismatch), and so is the
loss falling from 10 steps on. `run.sh` beside this file makes a CPU venv and runs it under
`/usr/bin/time -v` for the peak resident memory.
"""

import argparse
import os
import resource
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

try:
    from torch_geometric.nn.aggr import MultiAggregation
    from torch_geometric.utils import scatter
except ImportError as exc:  # the reference is PyTorch + PyG: no silent fallback to plain torch
    sys.exit(f"bench.py: torch_geometric is needed ({exc}); pip install torch_geometric")

SPEC_NODES, SPEC_EDGES = 20_000, 160_000
POS_WEIGHT = 4.0
LEARNING_RATE = 1e-3
# docs/benchmarks.md's estimate of one spec step at the spec's size (forward + backward).
SPEC_STEP_GFLOP = 79.0
# trackgnn's counts: ModelConfig::bench_spec() and ModelConfig::acorn() with 3 node features.
TRACKGNN_PARAMETERS = {"spec": ("ModelConfig::bench_spec()", 164_033), "acorn": ("ModelConfig::acorn()", 362_241)}
VARIANTS = ("plain", "ckpt", "bf16", "bf16-ckpt", "compile")


def synthetic_graph(nodes: int, edges: int):
    """The specification's graph: features (r, phi, z) of node i, edge k's source and
    destination, and its label; the formulas of docs/benchmarks.md, in edge order k."""
    i = torch.arange(nodes, dtype=torch.int64)
    fi = i.to(torch.float64)
    x = torch.stack([(i % 10).to(torch.float64) / 10.0, torch.sin(fi * 0.37), torch.cos(fi * 0.11)], dim=1)
    k = torch.arange(edges, dtype=torch.int64)
    src = (k * 7919) % nodes
    dst = (src + 1 + (k * 104_729) % 97) % nodes
    y = ((src + dst) % 5 == 0).to(torch.float32)
    return x.to(torch.float32), src, dst, y


def spec_mlp(d_in: int, hidden: int) -> nn.Sequential:
    """MLP(in, H, H) of the specification: two Linear layers, each followed by an affine
    LayerNorm and ReLU."""
    return nn.Sequential(
        nn.Linear(d_in, hidden), nn.LayerNorm(hidden), nn.ReLU(),
        nn.Linear(hidden, hidden), nn.LayerNorm(hidden), nn.ReLU(),
    )


def acorn_mlp(d_in: int, hidden: int, layers: int = 2, d_out: int | None = None, tanh_out: bool = True) -> nn.Sequential:
    """An acorn MLP as ModelConfig::acorn() builds it: hidden Linear layers with LayerNorm
    (no affine parameters) and SiLU; the last Linear bare, then Tanh on encoder and network
    outputs (none on the classifier, whose output is the logit)."""
    mods, d = [], d_in
    for _ in range(layers - 1):
        mods += [nn.Linear(d, hidden), nn.LayerNorm(hidden, elementwise_affine=False), nn.SiLU()]
        d = hidden
    mods.append(nn.Linear(d, hidden if d_out is None else d_out))
    if tanh_out:
        mods.append(nn.Tanh())
    return nn.Sequential(*mods)


class EdgeClassifier(nn.Module):
    """An InteractionGNN edge classifier: encoders, `iterations` message-passing rounds
    (`round`, checkpointed when asked and gradients are on), a classifier on
    [h_src, h_dst, e]. Returns one logit per edge."""

    iterations: int

    def __init__(self, checkpointing: bool):
        super().__init__()
        self.checkpointing = checkpointing

    def round(self, k: int, h, e, src, dst):
        raise NotImplementedError

    def forward(self, x, src, dst):
        h = self.node_encoder(x)
        e = self.edge_encoder(torch.cat([h[src], h[dst]], dim=1))
        for k in range(self.iterations):
            if self.checkpointing and torch.is_grad_enabled():
                h, e = checkpoint(self.round, k, h, e, src, dst, use_reentrant=False)
            else:
                h, e = self.round(k, h, e, src, dst)
        return self.classifier(torch.cat([h[src], h[dst], e], dim=1)).squeeze(1)


class SpecModel(EdgeClassifier):
    """The specification's model: H = 64, 4 iterations with their own networks, residual
    updates, edges first, incoming and outgoing sums; classifier 3H -> H -> 1."""

    def __init__(self, checkpointing: bool, hidden: int = 64, iterations: int = 4):
        super().__init__(checkpointing)
        self.iterations = iterations
        self.node_encoder = spec_mlp(3, hidden)
        self.edge_encoder = spec_mlp(2 * hidden, hidden)
        self.edge_nets = nn.ModuleList(spec_mlp(3 * hidden, hidden) for _ in range(iterations))
        self.node_nets = nn.ModuleList(spec_mlp(3 * hidden, hidden) for _ in range(iterations))
        self.classifier = nn.Sequential(
            nn.Linear(3 * hidden, hidden), nn.LayerNorm(hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def round(self, k, h, e, src, dst):
        e = e + self.edge_nets[k](torch.cat([h[src], h[dst], e], dim=1))
        n = h.shape[0]
        incoming = scatter(e, dst, dim=0, dim_size=n, reduce="sum")
        outgoing = scatter(e, src, dim=0, dim_size=n, reduce="sum")
        h = h + self.node_nets[k](torch.cat([h, incoming, outgoing], dim=1))
        return h, e


class AcornModel(EdgeClassifier):
    """acorn's TrackML InteractionGNN (trackgnn's ModelConfig::acorn()): H = 128, one node and
    one edge network shared by 8 iterations, nodes updated first from the old edges, then edges
    from the new nodes, no residual; PyG's sum, mean, max and std of incoming and of outgoing
    edges (node-network input 9H); classifier 3H -> H -> H -> 1."""

    def __init__(self, checkpointing: bool, hidden: int = 128, iterations: int = 8):
        super().__init__(checkpointing)
        self.iterations = iterations
        self.node_encoder = acorn_mlp(3, hidden)
        self.edge_encoder = acorn_mlp(2 * hidden, hidden)
        self.node_net = acorn_mlp(9 * hidden, hidden)
        self.edge_net = acorn_mlp(3 * hidden, hidden)
        self.classifier = acorn_mlp(3 * hidden, hidden, layers=3, d_out=1, tanh_out=False)
        self.aggregate = MultiAggregation(["sum", "mean", "max", "std"], mode="cat")

    def round(self, k, h, e, src, dst):
        n = h.shape[0]
        h = self.node_net(torch.cat([h, self.aggregate(e, dst, dim_size=n), self.aggregate(e, src, dim_size=n)], dim=1))
        e = self.edge_net(torch.cat([h[src], h[dst], e], dim=1))
        return h, e


def arguments(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="trackgnn's PyTorch + PyG reference of the engine benchmark (docs/benchmarks.md)")
    ap.add_argument("--model", choices=("spec", "acorn"), default="spec",
                    help="spec: the specification's model; acorn: acorn's TrackML InteractionGNN (default: spec)")
    ap.add_argument("--variant", choices=VARIANTS, default="plain",
                    help="plain: eager f32; ckpt: checkpointing per iteration; bf16: autocast to bfloat16; "
                         "bf16-ckpt: both; compile: torch.compile (default: plain)")
    ap.add_argument("--threads", type=int, default=2, help="intra-op threads (default: 2)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first (default: 2)")
    ap.add_argument("--steps", type=int, default=10, help="timed steps (default: 10)")
    ap.add_argument("--seed", type=int, default=0, help="torch.manual_seed of the weights (default: 0)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="default: cpu")
    ap.add_argument("--nodes", type=int, default=SPEC_NODES, help=f"nodes of the synthetic graph (default: {SPEC_NODES})")
    ap.add_argument("--edges", type=int, default=SPEC_EDGES, help=f"edges of the synthetic graph (default: {SPEC_EDGES})")
    ap.add_argument("--inference", action="store_true", help="time the forward alone, without gradients")
    a = ap.parse_args(argv)
    if a.threads < 1 or a.steps < 1 or a.warmup < 0:
        ap.error("--threads and --steps must be at least 1, --warmup at least 0")
    if a.nodes < 98 or a.edges < 1:
        ap.error("--nodes must be at least 98 (an edge joins nodes 1 to 97 apart) and --edges at least 1")
    if a.inference and a.variant in ("ckpt", "bf16-ckpt"):
        ap.error(f"--inference with --variant {a.variant}: checkpointing saves memory in training only")
    if a.device == "cuda" and not torch.cuda.is_available():
        ap.error(f"--device cuda: torch {torch.__version__} sees no CUDA device")
    return a


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main(argv=None) -> int:
    a = arguments(argv)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    x, src, dst, y = (t.to(device) for t in synthetic_graph(a.nodes, a.edges))
    checkpointing = a.variant in ("ckpt", "bf16-ckpt")
    bf16 = a.variant in ("bf16", "bf16-ckpt")
    model = (SpecModel if a.model == "spec" else AcornModel)(checkpointing).to(device)
    parameters = sum(p.numel() for p in model.parameters())
    run = torch.compile(model) if a.variant == "compile" else model
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    pos_weight = torch.tensor(POS_WEIGHT, device=device)
    rss_before = rss_mib()

    def clock() -> float:
        if cuda:
            torch.cuda.synchronize(device)
        return time.perf_counter()

    def autocast():
        return torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16)

    def loss_of(logits):
        return F.binary_cross_entropy_with_logits(logits.float(), y, pos_weight=pos_weight)

    def step():
        """One step: (loss, forward s, backward s, optimiser s, total s, process CPU s)."""
        cpu0, t0 = time.process_time(), clock()
        if a.inference:
            with torch.inference_mode(), autocast():
                logits = run(x, src, dst)
                loss = loss_of(logits)
                torch.sigmoid(logits)
            t1 = clock()
            return loss.item(), t1 - t0, 0.0, 0.0, t1 - t0, time.process_time() - cpu0
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            logits = run(x, src, dst)
        loss = loss_of(logits)
        t1 = clock()
        loss.backward()
        t2 = clock()
        optimizer.step()
        t3 = clock()
        return loss.item(), t1 - t0, t2 - t1, t3 - t2, t3 - t0, time.process_time() - cpu0

    gpu = f"  gpu={torch.cuda.get_device_name(device)}" if cuda else ""
    print(f"torch {torch.__version__}  threads={torch.get_num_threads()}  model={a.model}  variant={a.variant}  "
          f"device={a.device}{gpu}  {'inference' if a.inference else 'training'}")
    print(f"graph N={a.nodes} E={a.edges} positives={int(y.sum().item())} ({y.mean().item():.3f})  params={parameters}")
    print(f"load avg at start: {os.getloadavg()}", flush=True)
    losses, timed = [], []
    total_steps = a.warmup + a.steps
    for s in range(1, total_steps + 1):
        if cuda and s == a.warmup + 1:
            torch.cuda.reset_peak_memory_stats(device)
        loss, fwd, bwd, opt, total, cpu = step()
        losses.append(loss)
        tag = "warm-up" if s <= a.warmup else "timed"
        print(f"step {s:2d} [{tag:7s}] loss={loss:.6f}  total={total * 1e3:8.1f} ms  "
              f"(fwd {fwd * 1e3:7.1f}, bwd {bwd * 1e3:7.1f}, adam {opt * 1e3:5.1f})  cpu {cpu:6.2f} s", flush=True)
        if s > a.warmup:
            timed.append((fwd, bwd, opt, total, cpu))

    def mean(values):
        return sum(values) / len(values)

    totals = [t[3] for t in timed]
    print("---- summary ----")
    print(f"params            : {parameters}")
    print(f"loss step1/step{total_steps}: {losses[0]:.6f} -> {losses[-1]:.6f}")
    print(f"time per step (s) : mean {mean(totals):.4f}  min {min(totals):.4f}  max {max(totals):.4f}  over {len(totals)} steps")
    for j, name in enumerate(("fwd", "bwd", "adam")):
        part = [t[j] for t in timed]
        print(f"  {name:4s} mean {mean(part):.4f} s  min {min(part):.4f} s")
    print(f"process CPU s/step: mean {mean([t[4] for t in timed]):.3f}  (all threads; under load, wall >> cpu/threads)")
    if a.inference:
        print(f"edges per second  : mean {a.edges / mean(totals):.4g}  best {a.edges / min(totals):.4g}")
    elif a.model == "spec" and (a.nodes, a.edges) == (SPEC_NODES, SPEC_EDGES):
        print(f"GFLOP/s ({SPEC_STEP_GFLOP:.0f} GFLOP nominal): mean {SPEC_STEP_GFLOP / mean(totals):.1f}  "
              f"best {SPEC_STEP_GFLOP / min(totals):.1f}")
    if cuda:
        peak = torch.cuda.max_memory_allocated(device)
        print(f"GPU peak memory (bytes): {peak}  ({peak / 2**30:.3f} GiB allocated, "
              f"{torch.cuda.max_memory_reserved(device) / 2**30:.3f} GiB reserved, timed steps)")
    print(f"maxrss before steps {rss_before:.0f} MiB, after {rss_mib():.0f} MiB (ru_maxrss)")
    print(f"load avg at end: {os.getloadavg()}")

    status = 0
    config, want = TRACKGNN_PARAMETERS[a.model]
    if parameters == want:
        print(f"params check      : {parameters} = trackgnn's {config}")
    else:
        print(f"error: {parameters} parameters, trackgnn's {config} has {want}: the models differ", file=sys.stderr)
        status = 1
    if not a.inference and total_steps >= 2:
        fell = losses[-1] < losses[0]
        print(f"loss fell         : {'yes' if fell else 'no'} (step 1 {losses[0]:.6f}, step {total_steps} {losses[-1]:.6f})")
        if not fell and total_steps >= 10:
            print(f"error: the loss did not fall in {total_steps} steps: gradients do not flow", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
