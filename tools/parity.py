#!/usr/bin/env python3
"""Recompute in PyTorch what trackgnn's CPU engine computed, and compare.

Input: one safetensors file written by `trackgnn export-parity` (the parameters, the engine's
gradient of every parameter as `grad.<name>`, the graph, the engine's logits and loss, and the
model configuration as metadata). This script rebuilds the InteractionGNN in plain PyTorch from
`model_config`, loads the weights by name (missing or extra names are an error), runs the
forward on the graph, the weighted BCE-with-logits loss (reduction mean), the backward, and
compares the logits, the loss and every gradient tensor by

    rel err = |a - b| / max(|a|, |b|, 1e-12)        (Frobenius norms, per tensor)

Exit code 0 when every compared quantity is within --tol, 1 otherwise, 2 on a malformed file.

Optional tooling only: trackgnn itself never needs Python. Needs torch and safetensors.

The model (see crates/engine/src/{config,model,mlp,naive}.rs; this is its PyTorch twin):
  MLP layer   = Linear -> [LayerNorm(eps 1e-5, affine or not)] -> activation; the last layer of
                an encoder/network uses the norm only if `output_norm`, and `output_activation`;
                the classifier's hidden layers use norm + activation, its last Linear (width 1)
                nothing.
  h = node_encoder(x);  e = edge_encoder(cat(h[src], h[dst] [, edge_attr]))
  repeat `iterations` times (one shared pair of networks if `recurrent`, else one per iteration):
    update_order = "edge_first" (the default):
      e' = edge_network(cat(h[src], h[dst], e));          e' += e if residual
      node_in = cat(h, agg_1(e' by dst), …, agg_K(e' by dst), agg_1(e' by src), …, agg_K(e' by src))
      h' = node_network(node_in);                         h' += h if residual
    update_order = "node_first" (acorn's order): the node update first, from the old edges
      h' = node_network(cat(h, agg_k(e by dst)…, agg_k(e by src)…));   h' += h if residual
      e' = edge_network(cat(h'[src], h'[dst], e));                      e' += e if residual
    h, e = h', e'
  logits = edge_classifier(cat(h[src], h[dst], e))
  aggregations over a node's edges (a node without edges gets 0, and sqrt(eps) for std):
      sum, mean, max (per channel), std = sqrt(mean((x - mean x)^2) + 1e-5)

Branches. ReLU and max aggregation make the model piecewise smooth: where a pre-activation is
within rounding of 0, or two edges' values within rounding of each other at a max, float32
rounding decides the branch, and the gradient jumps there. Two correct float32 computations can
then differ by far more than rounding (one such point in a network can move every upstream
gradient by ~1e-4). `--float64` shows it (each side against a float64 recomputation, and
against float64 forced onto the same branches); `--resolve K` finds which side the engine took:
it flips the K closest branch points one at a time and keeps a flip when it brings the PyTorch
gradients clearly closer to the engine's, then compares again on the engine's branches.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from safetensors import safe_open
except ImportError as exc:  # pragma: no cover
    sys.exit(f"parity.py needs torch and safetensors ({exc}); see tools/README.md")

LN_EPS = 1e-5
STD_EPS = 1e-5

# ModelConfig's serde keys and trackgnn's defaults (ModelConfig::default in config.rs).
DEFAULTS = {
    "hidden": 128,
    "iterations": 8,
    "mlp_depth": 2,
    "classifier_depth": 3,
    "activation": "silu",
    "output_activation": "tanh",
    "norm": "no-affine",
    "output_norm": True,
    "aggregation": ["sum", "mean", "max", "std"],
    "recurrent": True,
    "residual": True,
    "update_order": "edge_first",
}
UPDATE_ORDERS = ("edge_first", "node_first")
ACTIVATIONS = {
    "relu": F.relu,
    "silu": F.silu,
    "tanh": torch.tanh,
    "identity": lambda x: x,
}
NORMS = ("none", "affine", "no-affine")
AGGREGATIONS = ("sum", "mean", "max", "std")


class Malformed(Exception):
    """The file does not describe a model this script can rebuild."""


def parse_config(text: str) -> dict:
    cfg = json.loads(text)
    unknown = set(cfg) - set(DEFAULTS)
    if unknown:
        raise Malformed(f"model_config has unknown keys {sorted(unknown)}")
    cfg = {**DEFAULTS, **cfg}
    for key in ("activation", "output_activation"):
        if cfg[key] not in ACTIVATIONS:
            raise Malformed(f"{key} = {cfg[key]!r} is not one of {sorted(ACTIVATIONS)}")
    if cfg["norm"] not in NORMS:
        raise Malformed(f"norm = {cfg['norm']!r} is not one of {NORMS}")
    for a in cfg["aggregation"]:
        if a not in AGGREGATIONS:
            raise Malformed(f"aggregation {a!r} is not one of {AGGREGATIONS}")
    if not cfg["aggregation"] or len(set(cfg["aggregation"])) != len(cfg["aggregation"]):
        raise Malformed("aggregation must list distinct aggregators, at least one")
    if cfg["update_order"] not in UPDATE_ORDERS:
        raise Malformed(f"update_order = {cfg['update_order']!r} is not one of {UPDATE_ORDERS}")
    if min(cfg["hidden"], cfg["mlp_depth"], cfg["classifier_depth"]) < 1:
        raise Malformed("hidden, mlp_depth and classifier_depth must be at least 1")
    return cfg


# --------------------------------------------------------------------------------------------
# Branch decisions (ReLU signs, max arg-maxima): recorded, counted, optionally replayed.


class Branches:
    """The branch decisions of one forward, in call order: per ReLU the mask z > 0, per max
    aggregation the arg-max edge per (node, channel) (E for a node without edges).

    With `replay` (another Branches' `relu` and `max` lists), the forward takes those decisions
    instead of its own: the same piece of the piecewise-smooth model whatever the rounding.

    `edge_class` (E) numbers the edges so that edges with equal (src, dst, edge features) share
    a number: their states are equal at every step, so a tie between them does not change any
    parameter gradient, whichever edge gets it."""

    near_rtol = 0.0  # collect branch points closer than this (relative); 0: don't

    def __init__(self, edge_class, replay=None):
        self.edge_class = edge_class
        self.replay = replay
        self.relu: list = []
        self.max: list = []
        self.ties = 0  # (node, channel) maxima attained by several edges
        self.ties_distinct = 0  # … by non-equivalent edges
        self.near: list = []  # (relative gap, kind, call, position, alternative)

    def class_of(self, first):
        pad = torch.cat([self.edge_class, self.edge_class.new_full((1,), -1)])
        return pad[first]

    def decisions(self) -> dict:
        return {"relu": self.relu, "max": self.max}

    # ReLU --------------------------------------------------------------------------------
    def apply_relu(self, z):
        call = len(self.relu)
        if self.replay is not None:
            mask = self.replay["relu"][call]
            self.relu.append(mask)
            return z * mask.to(z.dtype)  # gradient: the mask, as relu' = [z > 0]
        mask = z.detach() > 0
        self.relu.append(mask)
        if self.near_rtol > 0:
            zd = z.detach()
            rms = zd.pow(2).mean(dim=-1, keepdim=True).sqrt().clamp_min(1e-30)
            gap = zd.abs() / rms
            for pos in torch.nonzero(gap <= self.near_rtol).tolist():
                self.near.append((float(gap[tuple(pos)]), "relu", call, tuple(pos), None))
        return F.relu(z)

    # max aggregation ------------------------------------------------------------------------
    def record_max(self, x, index, num_nodes, m, first):
        e, h = x.shape
        idx = index.unsqueeze(1).expand(e, h)
        hit = x == m[index]
        n_hits = torch.zeros(num_nodes, h, dtype=torch.long).index_add(0, index, hit.long())
        self.ties += int((n_hits > 1).sum())
        cls = self.edge_class.unsqueeze(1).expand(e, h)
        other = cls != self.class_of(first)[index]
        n_other = torch.zeros(num_nodes, h, dtype=torch.long).index_add(
            0, index, (hit & other).long()
        )
        self.ties_distinct += int((n_other > 0).sum())
        if self.near_rtol <= 0:
            return
        # The runner-up among edges not equivalent to the arg-max, and how close it is.
        neg = torch.full_like(x, -math.inf)
        m2 = torch.full_like(m, -math.inf).scatter_reduce(
            0, idx, torch.where(other, x, neg), reduce="amax", include_self=True
        )
        gap = (m - m2) / torch.maximum(m.abs(), torch.full_like(m, 1e-30))
        # Ties at exactly 0 (ReLU zeros) are exact on every side: not a rounding question.
        near = torch.nonzero((gap <= self.near_rtol) & ~((m == 0) & (m2 == 0)))
        if near.numel() == 0:
            return
        edge_id = torch.arange(e).unsqueeze(1).expand(e, h)
        hit2 = other & (x == m2[index])
        alt = torch.full((num_nodes, h), e, dtype=torch.long).scatter_reduce(
            0, idx, torch.where(hit2, edge_id, torch.full_like(edge_id, e)), reduce="amin"
        )
        call = len(self.max)
        for node, ch in near.tolist():
            self.near.append(
                (float(gap[node, ch]), "max", call, (node, ch), int(alt[node, ch]))
            )


def flip(decisions: dict, point) -> tuple[dict, str]:
    """A copy of `decisions` with one branch point taken on the other side."""
    _, kind, call, pos, alt = point
    lists = {k: list(v) for k, v in decisions.items()}
    t = lists[kind][call].clone()
    old = t[pos].item()
    t[pos] = (not old) if kind == "relu" else alt
    lists[kind][call] = t
    if kind == "relu":
        what = f"ReLU #{call} (row, channel) {pos}: {'off' if old else 'on'}, not {'on' if old else 'off'}"
    else:
        what = f"max #{call} (node, channel) {pos}: edge {alt}, not {old}"
    return lists, what


def branch_flips(a: Branches, b: Branches) -> tuple[int, int]:
    """(ReLU signs, non-equivalent arg-maxima) where two runs took different branches."""
    relu = sum(int((x != y).sum()) for x, y in zip(a.relu, b.relu))
    mx = sum(int((a.class_of(x) != a.class_of(y)).sum()) for x, y in zip(a.max, b.max))
    return relu, mx


ACTIVE: Branches | None = None  # the Branches of the forward being run


# --------------------------------------------------------------------------------------------
# The model.


class Layer(nn.Module):
    """Linear (PyTorch layout, `weight` (out, in) and `bias`), then an optional LayerNorm
    (registered as `norm`, so its parameters are `<layer>.norm.weight/.bias`), then an
    activation."""

    def __init__(self, din: int, dout: int, norm: str | None, act: str):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(dout, din))
        self.bias = nn.Parameter(torch.empty(dout))
        self.norm = (
            nn.LayerNorm(dout, eps=LN_EPS, elementwise_affine=(norm == "affine"))
            if norm not in (None, "none")
            else None
        )
        self.act_name = act
        self.act = ACTIVATIONS[act]

    def forward(self, x):
        z = F.linear(x, self.weight, self.bias)
        if self.norm is not None:
            z = self.norm(z)
        if self.act_name == "relu" and ACTIVE is not None:
            return ACTIVE.apply_relu(z)
        return self.act(z)


def make_mlp(cfg: dict, din: int) -> nn.Sequential:
    """An encoder / edge network / node network: `mlp_depth` layers of width `hidden`."""
    depth, h = cfg["mlp_depth"], cfg["hidden"]
    layers = []
    for l in range(depth):
        last = l + 1 == depth
        norm = (cfg["norm"] if cfg["output_norm"] else None) if last else cfg["norm"]
        act = cfg["output_activation"] if last else cfg["activation"]
        layers.append(Layer(din if l == 0 else h, h, norm, act))
    return nn.Sequential(*layers)


def make_classifier(cfg: dict) -> nn.Sequential:
    """3H -> H -> … -> 1: `classifier_depth` Linear layers, the last without norm/activation."""
    cd, h = cfg["classifier_depth"], cfg["hidden"]
    dims = [3 * h] + [h] * (cd - 1) + [1]
    layers = []
    for l in range(cd):
        last = l + 1 == cd
        layers.append(
            Layer(
                dims[l],
                dims[l + 1],
                None if last else cfg["norm"],
                "identity" if last else cfg["activation"],
            )
        )
    return nn.Sequential(*layers)


def aggregate(x, index, num_nodes: int, kind: str, max_ties: str = "first", br=None):
    """Aggregates edge rows `x` (E × H) at nodes `index` (E) into (N × H)."""
    e, h = x.shape
    zeros = x.new_zeros(num_nodes, h)
    cnt = torch.bincount(index, minlength=num_nodes).to(x.dtype).clamp(min=1).unsqueeze(1)
    if kind == "sum":
        return zeros.index_add(0, index, x)
    if kind == "mean":
        return zeros.index_add(0, index, x) / cnt
    if kind == "std":
        mean = zeros.index_add(0, index, x) / cnt
        dev = x - mean[index]
        var = zeros.index_add(0, index, dev * dev) / cnt
        return torch.sqrt(var + STD_EPS)
    if kind != "max":
        raise Malformed(f"unknown aggregation {kind!r}")
    idx = index.unsqueeze(1).expand(e, h)
    if br is not None and br.replay is not None:
        first = br.replay["max"][len(br.max)]
    else:
        # A node without edges keeps the initial 0 (include_self=False ignores it otherwise).
        m = zeros.scatter_reduce(0, idx, x, reduce="amax", include_self=False)
        if max_ties == "split":
            # PyTorch's own rule: the gradient is shared evenly by tied maxima.
            return m
        # "first": the gradient goes to the first edge (in edge order) attaining the maximum,
        # as in the engine (aggregate.rs keeps the first arg-max).
        with torch.no_grad():
            edge_id = torch.arange(e, device=x.device).unsqueeze(1).expand(e, h)
            cand = torch.where(x == m[index], edge_id, torch.full_like(edge_id, e))
            first = torch.full((num_nodes, h), e, dtype=torch.long, device=x.device)
            first = first.scatter_reduce(0, idx, cand, reduce="amin", include_self=True)
            if br is not None:
                br.record_max(x, index, num_nodes, m, first)
    if br is not None:
        br.max.append(first)
    padded = torch.cat([x, x.new_zeros(1, h)])  # row e: nodes without edges
    return padded.gather(0, first)


class InteractionGNN(nn.Module):
    def __init__(self, cfg: dict, node_dim: int, edge_dim: int):
        super().__init__()
        self.cfg = cfg
        h, k = cfg["hidden"], len(cfg["aggregation"])
        self.node_encoder = make_mlp(cfg, node_dim)
        self.edge_encoder = make_mlp(cfg, 2 * h + edge_dim)
        n_nets = 1 if cfg["recurrent"] else cfg["iterations"]
        edge_nets = [make_mlp(cfg, 3 * h) for _ in range(n_nets)]
        node_nets = [make_mlp(cfg, (1 + 2 * k) * h) for _ in range(n_nets)]
        if cfg["recurrent"]:
            self.edge_network, self.node_network = edge_nets[0], node_nets[0]
        else:
            self.edge_network = nn.ModuleList(edge_nets)
            self.node_network = nn.ModuleList(node_nets)
        self.edge_classifier = make_classifier(cfg)

    def nets(self, it: int):
        if self.cfg["recurrent"]:
            return self.edge_network, self.node_network
        return self.edge_network[it], self.node_network[it]

    def forward(self, x, edge_attr, src, dst, max_ties="first", br=None):
        cfg = self.cfg
        n = x.shape[0]
        h = self.node_encoder(x)
        first = [h[src], h[dst]] + ([edge_attr] if edge_attr is not None else [])
        e = self.edge_encoder(torch.cat(first, dim=1))
        def edge_update(edge_net, h, e):
            e_new = edge_net(torch.cat([h[src], h[dst], e], dim=1))
            return e_new + e if cfg["residual"] else e_new

        def node_update(node_net, h, e):
            ins = [aggregate(e, dst, n, a, max_ties, br) for a in cfg["aggregation"]]
            outs = [aggregate(e, src, n, a, max_ties, br) for a in cfg["aggregation"]]
            h_new = node_net(torch.cat([h] + ins + outs, dim=1))
            return h_new + h if cfg["residual"] else h_new

        for it in range(cfg["iterations"]):
            edge_net, node_net = self.nets(it)
            if cfg["update_order"] == "node_first":
                h = node_update(node_net, h, e)
                e = edge_update(edge_net, h, e)
            else:
                e = edge_update(edge_net, h, e)
                h = node_update(node_net, h, e)
        return self.edge_classifier(torch.cat([h[src], h[dst], e], dim=1)).squeeze(1)


# --------------------------------------------------------------------------------------------
# Loading, running, comparing.


def rel_err(a, b) -> float:
    a, b = a.double().reshape(-1), b.double().reshape(-1)
    na, nb = float(a.norm()), float(b.norm())
    return float((a - b).norm()) / max(na, nb, 1e-12)


def load(path: str):
    try:
        with safe_open(path, framework="pt") as f:
            meta = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as exc:  # missing file, not safetensors, …
        raise Malformed(f"cannot read: {exc}") from exc
    for key in ("model_config", "pos_weight"):
        if key not in meta:
            raise Malformed(f"metadata {key!r} missing")
    for key in ("graph.x", "graph.src", "graph.dst", "graph.y", "graph.weight", "logits", "loss"):
        if key not in tensors:
            raise Malformed(f"tensor {key!r} missing")
    return meta, tensors


def edge_classes(tensors):
    """Numbers the edges so that edges with equal (src, dst, edge features) share a number."""
    cols = [tensors["graph.src"].long().unsqueeze(1), tensors["graph.dst"].long().unsqueeze(1)]
    if "graph.edge_attr" in tensors:
        cols.append(tensors["graph.edge_attr"].float().contiguous().view(torch.int32).long())
    key = torch.cat(cols, dim=1)
    if key.shape[0] == 0:
        return torch.zeros(0, dtype=torch.long)
    return torch.unique(key, dim=0, return_inverse=True)[1]


def run(meta, tensors, dtype, max_ties="first", replay=None):
    """Builds the model in `dtype`, loads the weights, forward + loss + backward.
    Returns (model, logits, loss, Branches)."""
    global ACTIVE
    cfg = parse_config(meta["model_config"])
    x = tensors["graph.x"].to(dtype)
    ea = tensors.get("graph.edge_attr")
    ea = ea.to(dtype) if ea is not None else None
    src, dst = tensors["graph.src"].long(), tensors["graph.dst"].long()
    y, w = tensors["graph.y"].to(dtype), tensors["graph.weight"].to(dtype)
    n, e = x.shape[0], src.shape[0]
    if dst.shape[0] != e or y.shape[0] != e or w.shape[0] != e:
        raise Malformed("graph.src, graph.dst, graph.y and graph.weight differ in length")
    if ea is not None and ea.shape[0] != e:
        raise Malformed("graph.edge_attr has a row count other than the edge count")
    ends = torch.cat([src, dst])
    if e and (int(ends.max()) >= n or int(ends.min()) < 0):
        raise Malformed("edge index out of range")
    model = InteractionGNN(cfg, x.shape[1], 0 if ea is None else ea.shape[1]).to(dtype)

    params = {
        k: v
        for k, v in tensors.items()
        if not k.startswith(("grad.", "graph.")) and k not in ("logits", "loss")
    }
    expected = dict(model.named_parameters())
    missing = sorted(set(expected) - set(params))
    extra = sorted(set(params) - set(expected))
    if missing or extra:
        raise Malformed(f"parameter names differ: missing {missing}, extra {extra}")
    grads = {k[len("grad.") :] for k in tensors if k.startswith("grad.")}
    if grads != set(expected):
        raise Malformed(
            f"gradient names differ: missing {sorted(set(expected) - grads)}, "
            f"extra {sorted(grads - set(expected))}"
        )
    if "param_order" in meta:
        order = json.loads(meta["param_order"])
        if sorted(order) != sorted(expected):
            raise Malformed("param_order does not list the model's parameters")
    with torch.no_grad():
        for name, p in expected.items():
            for key in (name, "grad." + name):
                if tuple(tensors[key].shape) != tuple(p.shape):
                    raise Malformed(
                        f"{key}: shape {tuple(tensors[key].shape)} in the file, "
                        f"{tuple(p.shape)} in the model"
                    )
            p.copy_(params[name].to(dtype))

    br = Branches(edge_classes(tensors), replay)
    ACTIVE = br
    try:
        logits = model(x, ea, src, dst, max_ties=max_ties, br=br)
    finally:
        ACTIVE = None
    pw = torch.tensor(float(meta["pos_weight"]), dtype=dtype)
    loss = F.binary_cross_entropy_with_logits(logits, y, weight=w, pos_weight=pw, reduction="mean")
    model.zero_grad(set_to_none=True)
    loss.backward()
    return model, logits.detach(), loss.detach(), br


def outputs(result) -> dict:
    """logits, loss and grad.<name> of a run, by name."""
    model, logits, loss, _ = result
    out = {"logits": logits, "loss": loss.reshape(1)}
    for n, p in model.named_parameters():
        out["grad." + n] = p.grad if p.grad is not None else torch.zeros_like(p)
    return out


def compare(a: dict, b: dict, names) -> dict:
    return {k: rel_err(a[k], b[k]) for k in names}


def resolve(meta, tensors, base, engine, names, tol, budget, say):
    """Flips the `budget` closest branch points of the float32 run one at a time (closest
    first) and keeps a flip when it brings the PyTorch outputs clearly closer to the engine's.
    Stops when everything is within tol/10. Returns (result, kept flips, points tried)."""
    near = sorted(base[3].near, key=lambda p: p[0])[:budget]
    decisions = base[3].decisions()

    def cost(errs):
        return sum(v * v for v in errs.values())

    best, best_errs = base, compare(outputs(base), engine, names)
    best_cost = cost(best_errs)
    kept = []
    for i, point in enumerate(near):
        if max(best_errs.values()) <= tol / 10:
            return best, kept, i
        trial_dec, what = flip(decisions, point)
        trial = run(meta, tensors, torch.float32, "first", replay=trial_dec)
        errs = compare(outputs(trial), engine, names)
        c = cost(errs)
        if c < 0.5 * best_cost:
            say(
                f"  branch point {i} (gap {point[0]:.1e}), the engine's side: {what}; max rel err "
                f"{max(best_errs.values()):.2e} -> {max(errs.values()):.2e}"
            )
            best, best_errs, best_cost, decisions = trial, errs, c, trial_dec
            kept.append(what)
    return best, kept, len(near)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description="Compare trackgnn's engine (export-parity file) with PyTorch."
    )
    ap.add_argument("file", help="safetensors file from `trackgnn export-parity`")
    ap.add_argument("--tol", type=float, default=1e-4, help="relative error bound (1e-4)")
    ap.add_argument(
        "--float64",
        action="store_true",
        help="also recompute in float64, and in float64 on the float32 run's branches",
    )
    ap.add_argument(
        "--max-ties",
        choices=("first", "split"),
        default="first",
        help="gradient of max aggregation at exactly tied maxima: to the first edge (the "
        "engine's rule, default) or shared evenly (torch scatter_reduce amax)",
    )
    ap.add_argument(
        "--resolve",
        type=int,
        default=0,
        metavar="K",
        help="if the check fails: try the K closest ReLU / max branch points on the other "
        "side to find the engine's branches (0: off)",
    )
    ap.add_argument(
        "--near-rtol",
        type=float,
        default=1e-5,
        help="relative distance below which a ReLU input or max runner-up is a branch point "
        "(--resolve; 1e-5)",
    )
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1)")
    ap.add_argument("--quiet", action="store_true", help="no per-tensor table")
    ap.add_argument("--summary", action="store_true", help="end with a one-line JSON summary")
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, args.threads))
    say = print

    try:
        meta, tensors = load(args.file)
        cfg = parse_config(meta["model_config"])
        has_branches = (
            "relu" in (cfg["activation"], cfg["output_activation"]) or "max" in cfg["aggregation"]
        ) and args.max_ties == "first"
        Branches.near_rtol = args.near_rtol if (has_branches and args.resolve > 0) else 0.0
        own = run(meta, tensors, torch.float32, args.max_ties)
        Branches.near_rtol = 0.0
    except Malformed as exc:
        print(f"parity: {args.file}: {exc}", file=sys.stderr)
        return 2
    br = own[3]
    n, e = tensors["graph.x"].shape[0], tensors["graph.src"].shape[0]
    say(f"file      {args.file}")
    say(f"config    {json.dumps(cfg, separators=(',', ':'))}")
    say(
        f"graph     {n} nodes, {e} edges, {tensors['graph.x'].shape[1]} node features, "
        f"{tensors['graph.edge_attr'].shape[1] if 'graph.edge_attr' in tensors else 0} edge "
        f"features, pos_weight {meta['pos_weight']}"
    )
    if br.max:
        say(
            f"max ties  {br.ties} (node, channel) maxima attained by several edges, "
            f"{br.ties_distinct} of them by non-duplicate edges"
        )

    grad_names = ["grad." + k for k in json.loads(meta.get("param_order", "null")) or []]
    if not grad_names:
        grad_names = [k for k in outputs(own) if k.startswith("grad.")]
    names = ["logits", "loss"] + grad_names
    engine = {k: tensors[k] for k in names}
    own_errs = compare(outputs(own), engine, names)
    strict_ok = all(own_errs[k] <= args.tol for k in names)  # NaN fails

    final, kept, tried = own, [], 0
    if not strict_ok and has_branches and args.resolve > 0:
        say(
            f"resolving {min(len(br.near), args.resolve)} of {len(br.near)} branch points "
            f"(relative gap <= {args.near_rtol:g}), closest first"
        )
        final, kept, tried = resolve(
            meta, tensors, own, engine, names, args.tol, args.resolve, say
        )
    resolved = final is not own
    check = compare(outputs(final), engine, names) if resolved else own_errs

    cols = [("rel err", own_errs)] + ([("resolved", check)] if resolved else [])
    ref = pinned = None
    flips = None
    if args.float64:
        ref = run(meta, tensors, torch.float64, args.max_ties)
        t32 = outputs(final)
        o = outputs(ref)
        cols += [("eng~f64", compare(engine, o, names)), ("torch~f64", compare(t32, o, names))]
        if has_branches:
            flips = branch_flips(final[3], ref[3])
            say(
                f"branches  float32{' (resolved)' if resolved else ''} and float64 differ at "
                f"{flips[0]} ReLU inputs and {flips[1]} maxima"
            )
            pinned = run(meta, tensors, torch.float64, "first", replay=final[3].decisions())
            o = outputs(pinned)
            cols += [
                ("eng~f64*", compare(engine, o, names)),
                ("torch~f64*", compare(t32, o, names)),
            ]
    col = dict(cols)
    worst_grad = max(grad_names, key=lambda k: check[k])
    ok = all(check[k] <= args.tol for k in names)

    if not args.quiet:
        width = max(len(k) for k in names)
        head = f"{'tensor':<{width}}  {'|engine|':>10}" + "".join(f"  {h:>10}" for h, _ in cols)
        say()
        say(head)
        say("-" * len(head))
        for k in names:
            line = f"{k:<{width}}  {float(engine[k].double().norm()):>10.4e}" + "".join(
                f"  {v[k]:>10.2e}" for _, v in cols
            )
            say(line + ("" if check[k] <= args.tol else "  FAIL"))
        say()
        say("rel err     torch float32 vs engine (float32): the check")
        if resolved:
            say("resolved    the same with torch on the engine's branches found above")
        if ref:
            say("eng~f64     engine vs torch float64; torch~f64: torch float32 vs float64")
        if pinned:
            say("…~f64*      vs torch float64 forced onto the torch float32 run's branches")
    rust_loss = float(tensors["loss"].reshape(-1)[0])
    say(f"loss      engine {rust_loss:.9g}   torch f32 {float(own[2]):.9g}", end="")
    say(f"   torch f64 {float(ref[2]):.12g}" if ref else "")
    say(
        f"max rel err (gradients) {max(own_errs[k] for k in grad_names):.3e}"
        + (f", on the engine's branches {check[worst_grad]:.3e}" if resolved else "")
        + f"  (worst: {worst_grad})"
    )
    say(f"logits rel err {check['logits']:.3e}, loss rel err {check['loss']:.3e}")
    if ref:
        say(
            f"vs float64, gradients: engine {max(col['eng~f64'][k] for k in grad_names):.3e}, "
            f"torch f32 {max(col['torch~f64'][k] for k in grad_names):.3e}"
        )
    if pinned:
        say(
            "vs float64 on the same branches: engine "
            f"{max(col['eng~f64*'][k] for k in grad_names):.3e}, torch f32 "
            f"{max(col['torch~f64*'][k] for k in grad_names):.3e}"
        )
    if strict_ok:
        verdict = "PASS"
    elif ok:
        verdict = f"PASS on the engine's branches ({len(kept)} of {tried} branch points flipped)"
    else:
        verdict = "FAIL"
    say(f"{verdict}: {sum(check[k] <= args.tol for k in names)}/{len(names)} within tol {args.tol:g}")
    if not ok and has_branches and args.resolve == 0:
        say("note: ReLU / max branch points may explain it: try --float64 --resolve 64")
    if args.summary:
        s = {
            "file": args.file,
            "ok": ok,
            "strict_ok": strict_ok,
            "tensors": len(grad_names),
            "max_grad_rel_err": max(own_errs[k] for k in grad_names),
            "worst_grad": max(grad_names, key=lambda k: own_errs[k]),
            "logits_rel_err": own_errs["logits"],
            "loss_rel_err": own_errs["loss"],
            "loss_engine": rust_loss,
            "loss_torch": float(own[2]),
        }
        if resolved:
            s["resolved_max_grad_rel_err"] = max(check[k] for k in grad_names)
            s["resolved_flips"] = kept
            s["resolve_tried"] = tried
        if br.max:
            s["max_ties"] = br.ties
            s["max_ties_distinct"] = br.ties_distinct
        if ref:
            s["loss_torch64"] = float(ref[2])
            s["engine_vs_f64"] = max(col["eng~f64"][k] for k in grad_names)
            s["torch32_vs_f64"] = max(col["torch~f64"][k] for k in grad_names)
        if pinned:
            s["branch_flips_vs_f64"] = flips
            s["engine_vs_f64_pinned"] = max(col["eng~f64*"][k] for k in grad_names)
            s["torch32_vs_f64_pinned"] = max(col["torch~f64*"][k] for k in grad_names)
        print("SUMMARY " + json.dumps(s))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
