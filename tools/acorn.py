#!/usr/bin/env python3
"""Convert InteractionGNN weights between acorn (Lightning `.ckpt`) and trackgnn (safetensors +
model config TOML), and check the conversion against a faithful copy of acorn's model class.

    acorn.py from-acorn MODEL.ckpt --out DIR          -> DIR/model.safetensors, DIR/model.toml,
                                                         DIR/features.toml
    acorn.py to-acorn --run RUN --out MODEL.ckpt      (or --model-config, --weights, --features)
    acorn.py check [--trackgnn BIN] [--graph G.graph] -> a table: which configurations convert,
                                                         with the score difference

Optional tooling only: trackgnn itself never needs Python. Needs torch and safetensors.

acorn's model, as its source writes it (gnn4itk acorn, acorn/stages/edge_classifier/models/
interaction_gnn.py `InteractionGNN`, and acorn/utils/ml_utils.py `make_mlp`); `AcornInteractionGNN`
below is a copy of it without the Lightning stage around it:
  make_mlp(in, [H]*L, hidden_activation, output_activation, layer_norm):
      hidden layers: Linear -> LayerNorm(elementwise_affine=False) if layer_norm -> activation
      last layer:    Linear -> output_activation if not None. InteractionGNN never passes
                     `output_layer_norm`, so the last layer has no LayerNorm (False by default).
      Linear weights sit at Sequential indices 0, 3, 6, ... with layernorm (0, 2, 4, ... without).
  x = node_encoder(features)              (nb_node_layer layers; features already / node_scales)
  e = edge_encoder(cat[x[src], x[dst]])   (nb_edge_layer layers; no edge features)
  repeat n_graph_iters times (message_step): NODES FIRST, then edges from the new nodes
      x = node_network(cat[x, agg(e, dst), agg(e, src)])   agg = PyG MultiAggregation(list, "cat")
      e = edge_network(cat[x[src], x[dst], e])
  logits = output_edge_classifier(cat[x[src], x[dst], e])   ([H]*nb_edge_layer + [1]; the last
      Linear bare: logits, no sigmoid)
  modules: node_network / edge_network when *_net_recurrent (default True), else
  node_networks.{i} / edge_networks.{i}.

Where trackgnn's InteractionGNN (crates/engine/src/model.rs, twin in tools/parity.py) differs:
  * update order: trackgnn updates the EDGES first by default (update_order = "edge_first"),
    from the old nodes, and aggregates the new edge states; update_order = "node_first" is
    acorn's order, and every acorn model with message passing converts to it. A trackgnn model
    with iterations >= 1 in the edge-first order has no acorn counterpart (refused).
  * residual connections (trackgnn's `residual`, on by default): acorn has none.
  * output norm: trackgnn's `output_norm` (default true) puts the LayerNorm on the last layer of
    every encoder/network too; acorn never does -> output_norm = false.
  * one depth `mlp_depth` for every encoder/network in trackgnn, and `classifier_depth` Linear
    layers in the classifier; acorn has nb_node_layer (node encoder, node networks),
    nb_edge_layer (edge encoder, edge networks) and nb_edge_layer + 1 in the classifier.
  * one `recurrent` in trackgnn; acorn has node_net_recurrent and edge_net_recurrent.
  * `norm`: acorn's LayerNorm has no affine parameters (trackgnn `no-affine`); batchnorm has no
    trackgnn counterpart.
  * activations: acorn names torch.nn classes (ReLU, SiLU, Tanh, Identity), trackgnn relu, silu,
    tanh, identity; acorn's output_activation None is trackgnn's identity.
  * aggregation: acorn's names are PyG's; sum, mean, max and std are trackgnn's sum, mean, max,
    std (PyG std = sqrt(relu(mean(x^2) - mean(x)^2) + 1e-5), trackgnn sqrt(mean((x - mean)^2) +
    1e-5): equal up to rounding; a node without edges gets 0, sqrt(1e-5) for std, in both).
    Others (min, var, softmax, ...) are refused.
  * node features: acorn reads `node_features` from the event and its dataset divides them by
    `node_scales`; trackgnn's recipe lists features with a scale and stores value / scale in the
    graph. The geometric ones share names and definitions (r, phi, z, eta, x, y); others are
    refused. Edge features: acorn's InteractionGNN takes none.
  * `undirected` (acorn doubles the edges and averages the two scores) is refused.

Weight names (acorn -> trackgnn): <module>.<index>.weight/bias -> <module'>.<layer>.weight/bias
with index = layer * (3 if layernorm else 2), node_encoder/edge_encoder/node_network/
edge_network kept, node_networks.{i}/edge_networks.{i} -> node_network.{i}/edge_network.{i},
output_edge_classifier -> edge_classifier. Tensors are copied bit for bit (PyTorch's Linear
layout (out, in) is trackgnn's).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from collections import OrderedDict

try:
    import torch
    import torch.nn as nn
    from safetensors import safe_open
    from safetensors.torch import save_file
except ImportError as exc:  # pragma: no cover
    sys.exit(f"acorn.py needs torch and safetensors ({exc}); see tools/README.md")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity  # noqa: E402  (the PyTorch twin of trackgnn's engine)

# acorn's activation names (torch.nn classes) <-> trackgnn's.
ACTIVATIONS = {"ReLU": "relu", "SiLU": "silu", "Tanh": "tanh", "Identity": "identity"}
# PyG aggregation names <-> trackgnn's (the same four names).
AGGREGATIONS = ("sum", "mean", "max", "std")
# Node features with the same name and definition in acorn's TrackML data and trackgnn's graphs.
FEATURES = ("r", "phi", "z", "eta", "x", "y")
# The hparams the conversion reads; everything else in a checkpoint's hparams is left alone.
MODEL_HPARAMS = (
    "hidden",
    "n_graph_iters",
    "nb_node_layer",
    "nb_edge_layer",
    "layernorm",
    "batchnorm",
    "hidden_activation",
    "output_activation",
    "aggregation",
    "node_net_recurrent",
    "edge_net_recurrent",
    "node_features",
    "node_scales",
)


class Refused(Exception):
    """A configuration one of the two models cannot express: one reason per setting, each
    naming it, and the file or run it comes from."""

    def __init__(self, reasons: list, source: str = ""):
        super().__init__(reasons, source)
        self.reasons, self.source = reasons, source

    def __str__(self) -> str:
        return (f"{self.source}: " if self.source else "") + "; ".join(self.reasons)


class Malformed(Exception):
    """A file that is not what it should be; the message names the file."""


# --------------------------------------------------------------------------------------------
# A faithful copy of acorn's InteractionGNN (the model only, no Lightning stage).


def acorn_make_mlp(
    input_size,
    sizes,
    hidden_activation="ReLU",
    output_activation=None,
    layer_norm=False,
    output_layer_norm=False,
    batch_norm=False,
    output_batch_norm=False,
    input_dropout=0,
    hidden_dropout=0,
    track_running_stats=False,
):
    """acorn.utils.make_mlp, layer for layer (the Sequential indices are the weight names)."""
    hidden_activation = getattr(nn, hidden_activation)
    if output_activation is not None:
        output_activation = getattr(nn, output_activation)
    layers = []
    n_layers = len(sizes)
    sizes = [input_size] + sizes
    for i in range(n_layers - 1):
        if i == 0 and input_dropout > 0:
            layers.append(nn.Dropout(input_dropout))
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if layer_norm:
            layers.append(nn.LayerNorm(sizes[i + 1], elementwise_affine=False))
        if batch_norm:
            layers.append(
                nn.BatchNorm1d(
                    sizes[i + 1], eps=6e-05, track_running_stats=track_running_stats, affine=True
                )
            )
        layers.append(hidden_activation())
        if hidden_dropout > 0:
            layers.append(nn.Dropout(hidden_dropout))
    layers.append(nn.Linear(sizes[-2], sizes[-1]))
    if output_activation is not None:
        if output_layer_norm:
            layers.append(nn.LayerNorm(sizes[-1], elementwise_affine=False))
        if output_batch_norm:
            layers.append(
                nn.BatchNorm1d(
                    sizes[-1], eps=6e-05, track_running_stats=track_running_stats, affine=True
                )
            )
        layers.append(output_activation())
    return nn.Sequential(*layers)


def pyg_aggregate(name: str, x, index, dim_size: int):
    """torch_geometric.nn.aggr Sum/Mean/Max/Min/Var/Std aggregation along dim 0 (a node without
    edges gets 0; std then sqrt(1e-5))."""
    h = x.shape[1]
    idx = index.unsqueeze(1).expand_as(x)

    def reduce(v, how):
        out = v.new_zeros(dim_size, h)
        if how == "sum":
            return out.index_add(0, index, v)
        if how == "mean":
            cnt = torch.bincount(index, minlength=dim_size).clamp(min=1).to(v.dtype)
            return out.index_add(0, index, v) / cnt.unsqueeze(1)
        return out.scatter_reduce(0, idx, v, reduce="a" + how, include_self=False)

    if name in ("sum", "mean", "max", "min"):
        return reduce(x, name)
    if name in ("var", "std"):
        var = reduce(x * x, "mean") - reduce(x, "mean") ** 2
        return var if name == "var" else torch.sqrt(var.relu() + 1e-5)
    raise ValueError(f"Unknown aggregation type {name!r}")


class AcornInteractionGNN(nn.Module):
    """acorn's InteractionGNN: __init__, message_step, output_step and forward as acorn writes
    them (PyG's MultiAggregation(mode="cat") is `pyg_aggregate` over the list, concatenated;
    torch checkpointing, which does not change values, is left out)."""

    def __init__(self, hparams: dict):
        super().__init__()
        hparams = dict(hparams)
        self.hparams = hparams
        self.setup_aggregation()
        hparams["node_net_recurrent"] = hparams.get("node_net_recurrent", True)
        hparams["edge_net_recurrent"] = hparams.get("edge_net_recurrent", True)
        hparams["batchnorm"] = hparams.get("batchnorm", False)
        hparams["output_activation"] = hparams.get("output_activation")
        hparams["track_running_stats"] = hparams.get("track_running_stats", False)

        def mlp(din, sizes, output_activation):
            return acorn_make_mlp(
                din,
                sizes,
                output_activation=output_activation,
                hidden_activation=hparams["hidden_activation"],
                layer_norm=hparams["layernorm"],
                batch_norm=hparams["batchnorm"],
                track_running_stats=hparams["track_running_stats"],
            )

        h, oa = hparams["hidden"], hparams["output_activation"]
        node_sizes, edge_sizes = [h] * hparams["nb_node_layer"], [h] * hparams["nb_edge_layer"]
        self.node_encoder = mlp(len(hparams["node_features"]), node_sizes, oa)
        self.edge_encoder = mlp(2 * h, edge_sizes, oa)
        if not hparams["edge_net_recurrent"]:
            self.edge_networks = nn.ModuleList(
                [mlp(3 * h, edge_sizes, oa) for _ in range(hparams["n_graph_iters"])]
            )
        else:
            self.edge_network = mlp(3 * h, edge_sizes, oa)
        if not hparams["node_net_recurrent"]:
            self.node_networks = nn.ModuleList(
                [
                    mlp(self.network_input_size, node_sizes, oa)
                    for _ in range(hparams["n_graph_iters"])
                ]
            )
        else:
            self.node_network = mlp(self.network_input_size, node_sizes, oa)
        self.output_edge_classifier = mlp(3 * h, edge_sizes + [1], None)

    def setup_aggregation(self):
        hp = self.hparams
        if "aggregation" not in hp:
            hp["aggregation"] = ["sum"]
        elif isinstance(hp["aggregation"], str):
            hp["aggregation"] = [hp["aggregation"]]
        elif not isinstance(hp["aggregation"], list):
            raise ValueError("Unknown aggregation type")
        self.network_input_size = (1 + 2 * len(hp["aggregation"])) * hp["hidden"]

    def aggregation(self, e, index, dim_size):
        aggs = self.hparams["aggregation"]
        return torch.cat([pyg_aggregate(a, e, index, dim_size) for a in aggs], -1)

    def message_step(self, x, start, end, e, i):
        edge_messages = torch.cat(
            [self.aggregation(e, end, x.shape[0]), self.aggregation(e, start, x.shape[0])], dim=-1
        )
        node_inputs = torch.cat([x, edge_messages], dim=-1)
        if not self.hparams["node_net_recurrent"]:
            x_out = self.node_networks[i](node_inputs)
        else:
            x_out = self.node_network(node_inputs)
        edge_inputs = torch.cat([x_out[start], x_out[end], e], dim=-1)
        if not self.hparams["edge_net_recurrent"]:
            e_out = self.edge_networks[i](edge_inputs)
        else:
            e_out = self.edge_network(edge_inputs)
        return x_out, e_out

    def output_step(self, x, start, end, e):
        classifier_inputs = torch.cat([x[start], x[end], e], dim=1)
        scores = self.output_edge_classifier(classifier_inputs).squeeze(-1)
        if self.hparams.get("undirected"):
            scores = torch.mean(scores.view(2, -1), dim=0)
        return scores

    def forward(self, x, edge_index):
        """`x`: the node features (N, len(node_features)), already divided by node_scales (as
        acorn's dataset does); `edge_index` (2, E)."""
        start, end = edge_index
        if self.hparams.get("undirected"):
            start, end = torch.cat([start, end]), torch.cat([end, start])
        x = self.node_encoder(x)
        e = self.edge_encoder(torch.cat([x[start], x[end]], dim=1))
        for i in range(self.hparams["n_graph_iters"]):
            x, e = self.message_step(x, start, end, e, i)
        return self.output_step(x, start, end, e)


# --------------------------------------------------------------------------------------------
# The configuration mapping.


def trackgnn_config(hp: dict) -> tuple[dict, list]:
    """acorn hparams -> (trackgnn ModelConfig keys, [(feature, scale)]). Raises Refused naming
    every setting trackgnn cannot express."""
    missing = [k for k in ("hidden", "n_graph_iters", "nb_node_layer", "nb_edge_layer", "layernorm",
                           "hidden_activation", "node_features") if k not in hp]
    if missing:
        raise Refused([f"hparams lack {missing} (acorn's InteractionGNN needs them)"])
    why = []
    iters = int(hp["n_graph_iters"])
    if hp.get("batchnorm"):
        why.append("batchnorm = true: trackgnn has LayerNorm only")
    if hp.get("undirected"):
        why.append("undirected = true: trackgnn scores each directed edge once")
    if hp["nb_node_layer"] != hp["nb_edge_layer"]:
        why.append(
            f"nb_node_layer = {hp['nb_node_layer']} != nb_edge_layer = {hp['nb_edge_layer']}: "
            "trackgnn has one mlp_depth"
        )
    nr, er = hp.get("node_net_recurrent", True), hp.get("edge_net_recurrent", True)
    if nr != er:
        why.append(
            f"node_net_recurrent = {nr} != edge_net_recurrent = {er}: trackgnn has one recurrent"
        )
    act = hp["hidden_activation"]
    if act not in ACTIVATIONS:
        why.append(f"hidden_activation = {act!r}: trackgnn has {sorted(ACTIVATIONS)}")
    oact = hp.get("output_activation")
    if oact is not None and oact not in ACTIVATIONS:
        why.append(f"output_activation = {oact!r}: trackgnn has {sorted(ACTIVATIONS)} or None")
    aggs = hp.get("aggregation", ["sum"])
    aggs = [aggs] if isinstance(aggs, str) else list(aggs)
    bad = [a for a in aggs if a not in AGGREGATIONS]
    if bad:
        why.append(f"aggregation {bad}: trackgnn has {list(AGGREGATIONS)}")
    if len(set(aggs)) != len(aggs):
        why.append(f"aggregation {aggs} lists an aggregator twice: trackgnn lists each once")
    feats = list(hp["node_features"])
    scales = list(hp.get("node_scales", [1.0] * len(feats)))
    if len(scales) != len(feats):
        why.append(f"node_scales has {len(scales)} entries for {len(feats)} node_features")
    bad = [f for f in feats if f not in FEATURES]
    if bad:
        why.append(f"node_features {bad}: trackgnn computes {list(FEATURES)} (same definitions)")
    if why:
        raise Refused(why)
    cfg = {
        "hidden": int(hp["hidden"]),
        "iterations": iters,
        "mlp_depth": int(hp["nb_node_layer"]),
        "classifier_depth": int(hp["nb_edge_layer"]) + 1,
        "activation": ACTIVATIONS[act],
        "output_activation": "identity" if oact is None else ACTIVATIONS[oact],
        "norm": "no-affine" if hp["layernorm"] else "none",
        "output_norm": False,
        "aggregation": aggs,
        "recurrent": bool(nr),
        "residual": False,
    }
    if iters > 0:  # acorn's message_step: nodes, then edges (trackgnn refuses the key at 0)
        cfg["update_order"] = "node_first"
    return cfg, list(zip(feats, [float(s) for s in scales]))


def acorn_hparams(cfg: dict, features: list, edge_dim: int = 0) -> dict:
    """trackgnn ModelConfig keys (defaults filled in) + [(feature, scale)] -> acorn hparams (the
    model's keys only). Raises Refused naming every setting acorn cannot express."""
    cfg = {**parity.DEFAULTS, **cfg}
    why = []
    if cfg["iterations"] > 0 and cfg["update_order"] != "node_first":
        why.append(
            f"update_order = \"{cfg['update_order']}\" with iterations = {cfg['iterations']}: "
            "acorn updates the nodes before the edges in each iteration (trackgnn's "
            "update_order = \"node_first\"); the edge-first model is another function"
        )
    if cfg["residual"]:
        why.append("residual = true: acorn's InteractionGNN has no residual connections")
    if cfg["norm"] == "affine":
        why.append("norm = \"affine\": acorn's LayerNorm has no affine parameters")
    if cfg["output_norm"] and cfg["norm"] != "none":
        why.append(
            "output_norm = true: acorn's InteractionGNN never puts a LayerNorm on the last layer "
            "of an encoder or network"
        )
    if cfg["classifier_depth"] != cfg["mlp_depth"] + 1:
        why.append(
            f"classifier_depth = {cfg['classifier_depth']} with mlp_depth = {cfg['mlp_depth']}: "
            "acorn's classifier has nb_edge_layer + 1 layers"
        )
    if edge_dim:
        why.append(f"{edge_dim} edge features: acorn's InteractionGNN reads node features only")
    bad = [f for f, _ in features if f not in FEATURES]
    if bad:
        why.append(f"features {bad}: no acorn node feature with the same definition")
    if why:
        raise Refused(why)
    to_acorn = {v: k for k, v in ACTIVATIONS.items()}
    return {
        "hidden": cfg["hidden"],
        "n_graph_iters": cfg["iterations"],
        "nb_node_layer": cfg["mlp_depth"],
        "nb_edge_layer": cfg["mlp_depth"],
        "layernorm": cfg["norm"] == "no-affine",
        "batchnorm": False,
        "hidden_activation": to_acorn[cfg["activation"]],
        "output_activation": (
            None if cfg["output_activation"] == "identity" else to_acorn[cfg["output_activation"]]
        ),
        "aggregation": list(cfg["aggregation"]),
        "node_net_recurrent": cfg["recurrent"],
        "edge_net_recurrent": cfg["recurrent"],
        "node_features": [f for f, _ in features],
        "node_scales": [s for _, s in features],
    }


def name_pairs(hp: dict) -> list[tuple[str, str]]:
    """(acorn state_dict key, trackgnn tensor name) of every parameter of a convertible model."""
    stride = 3 if hp["layernorm"] else 2  # Linear [, LayerNorm], activation
    depth, iters = hp["nb_node_layer"], hp["n_graph_iters"]
    recurrent = hp.get("node_net_recurrent", True)
    modules = [("node_encoder", "node_encoder", depth), ("edge_encoder", "edge_encoder", depth)]
    if recurrent:
        modules += [
            ("edge_network", "edge_network", depth),
            ("node_network", "node_network", depth),
        ]
    else:  # in acorn's registration order: every edge network, then every node network
        modules += [(f"edge_networks.{i}", f"edge_network.{i}", depth) for i in range(iters)]
        modules += [(f"node_networks.{i}", f"node_network.{i}", depth) for i in range(iters)]
    modules.append(("output_edge_classifier", "edge_classifier", depth + 1))
    return [
        (f"{a}.{layer * stride}.{kind}", f"{t}.{layer}.{kind}")
        for a, t, n in modules
        for layer in range(n)
        for kind in ("weight", "bias")
    ]


# --------------------------------------------------------------------------------------------
# Files.


def read_ckpt(path: str, trust_pickle: bool = False) -> tuple[dict, dict]:
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=not trust_pickle)
    except FileNotFoundError as exc:
        raise Malformed(f"{path}: no such file") from exc
    except Exception as exc:
        hint = "" if trust_pickle else " (if you trust the file: --trust-pickle)"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise Malformed(f"{path}: cannot read as a torch checkpoint: {first}{hint}") from exc
    if not isinstance(ckpt, dict) or "state_dict" not in ckpt or "hyper_parameters" not in ckpt:
        raise Malformed(f"{path}: not a Lightning checkpoint (no state_dict / hyper_parameters)")
    return dict(ckpt["hyper_parameters"]), ckpt["state_dict"]


def write_atomic(path: str, write) -> None:
    """Calls write(tmp) on a temporary sibling of `path`, then renames it over `path`."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=os.path.basename(path))
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    return "[" + ", ".join(toml_value(x) for x in v) + "]"


def features_toml(features: list) -> str:
    out = "# Node features for a trackgnn recipe (value / scale), from acorn's node_features and\n"
    out += "# node_scales. Copy into the recipe of the graphs you score with this model.\n"
    for name, scale in features:
        out += f"\n[[features.features]]\nname = {json.dumps(name)}\nscale = {float(scale)!r}\n"
    return out


def from_acorn(ckpt: str, out: str, trust_pickle: bool = False) -> dict:
    """acorn .ckpt -> out/model.safetensors, out/model.toml, out/features.toml. Returns the
    trackgnn model config."""
    hp, sd = read_ckpt(ckpt, trust_pickle)
    try:
        cfg, features = trackgnn_config(hp)
    except Refused as exc:
        raise Refused(exc.reasons, ckpt) from None
    pairs = name_pairs(hp)
    expected = {a for a, _ in pairs}
    missing, extra = sorted(expected - set(sd)), sorted(set(sd) - expected)
    if missing or extra:
        raise Malformed(f"{ckpt}: state_dict keys differ from the hparams' model: missing "
                        f"{missing}, extra {extra}")
    tensors = {}
    for a, t in pairs:
        v = sd[a]
        if v.dtype != torch.float32:
            raise Malformed(f"{ckpt}: {a} is {v.dtype}, not float32")
        tensors[t] = v.detach().contiguous().clone()
    shapes = expected_shapes(cfg, len(features))
    for t, v in tensors.items():
        if tuple(v.shape) != shapes[t]:
            raise Malformed(f"{ckpt}: {t} has shape {tuple(v.shape)}, the config says {shapes[t]}")
    os.makedirs(out, exist_ok=True)
    write_atomic(os.path.join(out, "model.safetensors"),
                 lambda p: save_file(tensors, p, metadata={"format": "pt"}))
    text = "".join(f"{k} = {toml_value(v)}\n" for k, v in cfg.items())
    write_atomic(os.path.join(out, "model.toml"), lambda p: open(p, "w").write(text))
    write_atomic(os.path.join(out, "features.toml"),
                 lambda p: open(p, "w").write(features_toml(features)))
    return cfg


def expected_shapes(cfg: dict, node_dim: int, edge_dim: int = 0) -> dict:
    """trackgnn tensor name -> shape, from parity.py's twin of the engine."""
    model = parity.InteractionGNN(parity.parse_config(json.dumps(cfg)), node_dim, edge_dim)
    return {n: tuple(p.shape) for n, p in model.named_parameters()}


def read_weights(path: str) -> dict:
    try:
        with safe_open(path, framework="pt") as f:
            return {k: f.get_tensor(k) for k in f.keys()}
    except FileNotFoundError as exc:
        raise Malformed(f"{path}: no such file") from exc
    except Exception as exc:
        raise Malformed(f"{path}: cannot read as safetensors: {exc}") from exc


def read_toml(path: str) -> dict:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError as exc:
        raise Malformed(f"{path}: no such file") from exc
    except tomllib.TOMLDecodeError as exc:
        raise Malformed(f"{path}: invalid TOML: {exc}") from exc


def without_aux_head(tensors: dict, cfg: dict) -> tuple[dict, dict]:
    """The weights and model config without trackgnn's training-only auxiliary pT head
    (`aux_pt = true`, tensors `aux_pt.*`): acorn's model has no such head."""
    kept = {k: v for k, v in tensors.items() if not k.startswith("aux_pt.")}
    return kept, {k: v for k, v in cfg.items() if k != "aux_pt"}


def to_acorn(cfg: dict, features: list, weights: str, out: str, source: str = "") -> None:
    """trackgnn model config + weights + features -> acorn .ckpt (torch.save of a dict with
    `hyper_parameters` and `state_dict`, as Lightning writes it)."""
    tensors, cfg = without_aux_head(read_weights(weights), cfg)
    cfg = {**parity.DEFAULTS, **cfg}
    if "node_encoder.0.weight" not in tensors or "edge_encoder.0.weight" not in tensors:
        raise Malformed(f"{weights}: no node_encoder.0.weight / edge_encoder.0.weight")
    if tensors["node_encoder.0.weight"].shape[0] != cfg["hidden"]:
        raise Malformed(f"{weights}: node_encoder.0.weight has "
                        f"{tensors['node_encoder.0.weight'].shape[0]} rows, the model config "
                        f"says hidden = {cfg['hidden']}")
    node_dim = tensors["node_encoder.0.weight"].shape[1]
    edge_dim = tensors["edge_encoder.0.weight"].shape[1] - 2 * cfg["hidden"]
    if node_dim != len(features):
        raise Malformed(f"{weights}: {node_dim} node features, the recipe lists {len(features)}")
    try:
        hp = acorn_hparams(cfg, features, edge_dim)
    except Refused as exc:
        raise Refused(exc.reasons, source or weights) from None
    pairs = name_pairs(hp)
    shapes = expected_shapes(cfg, node_dim, edge_dim)
    missing, extra = sorted(set(shapes) - set(tensors)), sorted(set(tensors) - set(shapes))
    if missing or extra:
        raise Malformed(f"{weights}: tensor names differ from the config's model: missing "
                        f"{missing}, extra {extra}")
    state = OrderedDict()
    for a, t in pairs:
        if tuple(tensors[t].shape) != shapes[t]:
            raise Malformed(f"{weights}: {t} has shape {tuple(tensors[t].shape)}, the config "
                            f"says {shapes[t]}")
        state[a] = tensors[t].to(torch.float32).contiguous().clone()
    # The keys Lightning's load_from_checkpoint reads: hyper_parameters, state_dict, and the
    # version that decides checkpoint migrations (none apply to a 2.x checkpoint).
    ckpt = {
        "hyper_parameters": hp,
        "state_dict": state,
        "pytorch-lightning_version": "2.0.0",
        "epoch": 0,
        "global_step": 0,
    }
    write_atomic(out, lambda p: torch.save(ckpt, p))


def run_inputs(run: str) -> tuple[dict, list, str]:
    """A trackgnn run directory -> (model config, features, best weights)."""
    cfg = read_toml(os.path.join(run, "config.toml")).get("model", {})
    recipe = read_toml(os.path.join(run, "recipe.toml"))
    features = recipe_features(recipe, os.path.join(run, "recipe.toml"))
    return cfg, features, os.path.join(run, "best.safetensors")


def recipe_features(recipe: dict, path: str) -> list:
    try:
        return [(f["name"], float(f["scale"])) for f in recipe["features"]["features"]]
    except (KeyError, TypeError) as exc:
        raise Malformed(f"{path}: no [[features.features]] with name and scale") from exc


# --------------------------------------------------------------------------------------------
# The check.


def twin_logits(cfg: dict, tensors: dict, x, src, dst):
    """parity.py's PyTorch twin of the engine (it follows `update_order`) with these weights."""
    model = parity.InteractionGNN(parity.parse_config(json.dumps(cfg)), x.shape[1], 0)
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(tensors[n])
        return model(x, None, src, dst)


ACORN_BASE = {
    "hidden": 32,
    "n_graph_iters": 8,
    "nb_node_layer": 2,
    "nb_edge_layer": 2,
    "layernorm": True,
    "batchnorm": False,
    "hidden_activation": "SiLU",
    "output_activation": "Tanh",
    "aggregation": ["sum", "mean", "max", "std"],
    "node_net_recurrent": True,
    "edge_net_recurrent": True,
    "node_features": ["r", "phi", "z"],
    "node_scales": [1000.0, math.pi, 1000.0],
}


def cases() -> list[tuple[str, dict]]:
    """The grid: acorn's TrackML configuration (hidden 32 to keep it quick) and one change at a
    time, with message passing (n_graph_iters 8 or 2) and without (0)."""
    out = [("acorn-trackml", {})]
    for iters in (0, 2):
        base = {"n_graph_iters": iters}
        t = f"it{iters}"
        out += [
            (f"{t}", base),
            (f"{t}-nonrecurrent",
             {**base, "node_net_recurrent": False, "edge_net_recurrent": False}),
            (f"{t}-no-layernorm", {**base, "layernorm": False}),
            (f"{t}-output-None", {**base, "output_activation": None}),
            (f"{t}-relu", {**base, "hidden_activation": "ReLU", "output_activation": "ReLU"}),
            (f"{t}-tanh", {**base, "hidden_activation": "Tanh"}),
            (f"{t}-depth1", {**base, "nb_node_layer": 1, "nb_edge_layer": 1}),
            (f"{t}-depth3", {**base, "nb_node_layer": 3, "nb_edge_layer": 3}),
            (f"{t}-features-eta-x-y", {**base, "node_features": ["eta", "x", "y"],
                                       "node_scales": [3.0, 1000.0, 1000.0]}),
        ]
    for aggs in (["sum"], ["mean"], ["max"], ["std"], ["sum", "max"], ["max", "sum", "std"]):
        out.append((f"it2-agg-{'-'.join(aggs)}", {"n_graph_iters": 2, "aggregation": aggs}))
    out += [
        ("it8-nonrecurrent", {"node_net_recurrent": False, "edge_net_recurrent": False}),
        ("it8-agg-sum", {"aggregation": ["sum"]}),
        ("it8-relu-no-layernorm", {"hidden_activation": "ReLU", "layernorm": False}),
    ]
    out += [
        ("it0-batchnorm", {"n_graph_iters": 0, "batchnorm": True}),
        ("it0-node3-edge2", {"n_graph_iters": 0, "nb_node_layer": 3}),
        ("it0-recurrent-mixed", {"n_graph_iters": 0, "edge_net_recurrent": False}),
        ("it0-gelu", {"n_graph_iters": 0, "hidden_activation": "GELU"}),
        ("it0-agg-min", {"n_graph_iters": 0, "aggregation": ["min"]}),
        ("it0-undirected", {"n_graph_iters": 0, "undirected": True}),
        ("it0-cell-count", {"n_graph_iters": 0, "node_features": ["r", "phi", "cell_count"]}),
    ]
    return out


def engine_logits(trackgnn: str, model_toml: str, weights: str, graph: str | None, out: str):
    """Runs `trackgnn export-parity` with the given weights; returns (x, src, dst, logits)."""
    cmd = [trackgnn, "export-parity", "--out", out, "--model-config", model_toml,
           "--weights", weights, "--nodes", "300", "--edges", "2400"]
    if graph:
        cmd += ["--graph", graph]
    env = {**os.environ, "RAYON_NUM_THREADS": "1"}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr.strip()}")
    with safe_open(out, framework="pt") as f:
        t = {k: f.get_tensor(k) for k in ("graph.x", "graph.src", "graph.dst", "logits")}
        if "graph.edge_attr" in f.keys():
            raise RuntimeError(f"{graph}: has edge features; acorn's InteractionGNN takes none")
    return t["graph.x"], t["graph.src"].long(), t["graph.dst"].long(), t["logits"]


def check_case(name: str, over: dict, trackgnn: str, graph: str | None, work: str,
               seed: int) -> dict:
    """One configuration of the grid: a random acorn model, converted, scored both ways,
    round-tripped. Returns the table row."""
    row = {"case": name}
    hp = {**ACORN_BASE, **over}
    torch.manual_seed(seed)
    try:
        acorn = AcornInteractionGNN(hp).eval()
    except (AttributeError, ValueError) as exc:
        row["verdict"] = f"acorn itself refuses: {exc}"
        return row
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    ckpt = os.path.join(d, "acorn.ckpt")
    torch.save({"hyper_parameters": hp, "state_dict": acorn.state_dict()}, ckpt)
    try:
        cfg = from_acorn(ckpt, d)
    except Refused as exc:
        row["reasons"] = exc.reasons
        row["verdict"] = "refused"
        return row
    x, src, dst, eng = engine_logits(trackgnn, os.path.join(d, "model.toml"),
                                     os.path.join(d, "model.safetensors"), graph,
                                     os.path.join(d, "parity.safetensors"))
    edge_index = torch.stack([src, dst])
    with torch.no_grad():
        ref = acorn(x, edge_index)
        ref64 = copy.deepcopy(acorn).double()(x.double(), edge_index)
    row["edges"] = int(src.shape[0])
    row.update(differences(ref, ref64, eng))
    tensors = read_weights(os.path.join(d, "model.safetensors"))
    twin = twin_logits({**parity.DEFAULTS, **cfg}, tensors, x, src, dst)
    row["d_twin"] = float((ref - twin).abs().max())
    # Round trip: acorn -> trackgnn -> acorn gives the same tensors and model hparams.
    back = os.path.join(d, "back.ckpt")
    feats = list(zip(hp["node_features"], hp["node_scales"]))
    to_acorn(cfg, feats, os.path.join(d, "model.safetensors"), back)
    hp2, sd2 = read_ckpt(back)
    sd1 = acorn.state_dict()
    same = set(sd1) == set(sd2) and all(torch.equal(sd1[k], sd2[k]) for k in sd1)
    same_hp = all(hp2.get(k) == AcornInteractionGNN(hp).hparams.get(k) for k in MODEL_HPARAMS)
    row["round_trip"] = same and same_hp
    row["verdict"] = "converts"
    return row


def differences(ref, ref64, eng) -> dict:
    """Max |difference| between acorn's class in float32 (`ref`), in float64 (`ref64`) and the
    engine (`eng`): logits, scores (sigmoid), and each side against acorn in float64."""
    ref64 = ref64.double()
    return {
        "d_logit": float((ref - eng).abs().max()),
        "d_score": float((torch.sigmoid(ref) - torch.sigmoid(eng)).abs().max()),
        "d_engine_f64": float((eng.double() - ref64).abs().max()),
        "d_acorn_f64": float((ref.double() - ref64).abs().max()),
    }


def check_run(run: str, trackgnn: str, graph: str | None, work: str, tol: float) -> bool:
    """A trained trackgnn run through acorn and back: the run's weights into an acorn .ckpt, the
    faithful acorn class on the graph against the engine with the run's weights, and the .ckpt
    back to trackgnn (identical tensors). Prints what it finds; False when a check fails."""
    cfg, features, weights = run_inputs(run)
    ckpt = os.path.join(work, "run.ckpt")
    try:
        to_acorn(cfg, features, weights, ckpt, source=run)
    except Refused as exc:
        print(f"run {exc}")
        return True
    model_toml = os.path.join(work, "run-model.toml")
    with open(model_toml, "w") as f:
        f.write("".join(f"{k} = {toml_value(v)}\n" for k, v in cfg.items()))
    x, src, dst, eng = engine_logits(trackgnn, model_toml, weights, graph,
                                     os.path.join(work, "run-parity.safetensors"))
    hp, sd = read_ckpt(ckpt)
    acorn = AcornInteractionGNN(hp).eval()
    acorn.load_state_dict(sd)
    edge_index = torch.stack([src, dst])
    with torch.no_grad():
        ref = acorn(x, edge_index)
        ref64 = copy.deepcopy(acorn).double()(x.double(), edge_index)
    d = differences(ref, ref64, eng)
    back = os.path.join(work, "run-back")
    back_cfg = from_acorn(ckpt, back)
    w0, w1 = read_weights(weights), read_weights(os.path.join(back, "model.safetensors"))
    same = set(w0) == set(w1) and all(torch.equal(w0[k], w1[k]) for k in w0)
    same_cfg = {**parity.DEFAULTS, **back_cfg} == {**parity.DEFAULTS, **cfg}
    agree = int(((ref > 0) == (eng > 0)).sum())
    print(f"run {run}: converts; {src.shape[0]} edges, acorn vs engine max |Δ logit| "
          f"{d['d_logit']:.1e}, max |Δ score| {d['d_score']:.1e} (engine vs acorn in float64: "
          f"{d['d_engine_f64']:.1e}, acorn float32 vs float64: {d['d_acorn_f64']:.1e}); same side "
          f"of 0.5 on {agree}/{src.shape[0]} edges; back to trackgnn: "
          f"{'identical' if same else 'DIFFERENT'} tensors, "
          f"{'the same' if same_cfg else 'a DIFFERENT'} model config")
    return d["d_score"] <= tol and same and same_cfg


def check(args) -> int:
    work = args.out_dir or tempfile.mkdtemp(prefix="acorn-check-")
    os.makedirs(work, exist_ok=True)
    rows = []
    only = re.compile(args.only) if args.only else None
    cols = ("|Δ| logit", "|Δ| score", "eng~f64", "acorn~f64", "|Δ| twin")
    print(f"{'case':<24} " + " ".join(f"{c:>9}" for c in cols) + f" {'trip':>5}  verdict")
    keys = ("d_logit", "d_score", "d_engine_f64", "d_acorn_f64", "d_twin")
    for i, (name, over) in enumerate(cases()):
        if only and not only.search(name):
            continue
        rows.append(check_case(name, over, args.trackgnn, args.graph, work, seed=i + 1))
        r = rows[-1]
        # The table names each refused setting; the full reasons follow it.
        heads = [reason.split(":")[0] for reason in r.get("reasons", [])]
        verdict = "refused: " + "; ".join(heads) if heads else r["verdict"]
        print(
            f"{r['case']:<24} " + " ".join(f"{fmt(r.get(k)):>9}" for k in keys)
            + f" {str(r.get('round_trip', '-')):>5}  {verdict}",
            flush=True,
        )
    reasons = list(OrderedDict.fromkeys(x for r in rows for x in r.get("reasons", [])))
    if reasons:
        print("\nreasons:\n" + "\n".join(f"  {x}" for x in reasons))
    bad = [r for r in rows if r["verdict"] == "converts" and not (
        r["d_score"] <= args.tol and r["round_trip"])]
    converts = sum(r["verdict"] == "converts" for r in rows)
    worst = max((r["d_score"] for r in rows if r["verdict"] == "converts"), default=float("nan"))
    worst_logit = max((r["d_logit"] for r in rows if r["verdict"] == "converts"),
                      default=float("nan"))
    print(f"\n{converts} of {len(rows)} configurations convert; max |Δ score| {worst:.1e}, "
          f"max |Δ logit| {worst_logit:.1e}; {len(bad)} of those fail the check "
          f"(|Δ score| > {args.tol:g} or round trip not identical)")
    ok = not bad
    for run in args.run or []:
        ok &= check_run(run, args.trackgnn, args.graph, work, args.tol)
    print(f"(files in {work})")
    return 0 if ok else 1


def fmt(v) -> str:
    return "-" if v is None else f"{v:.1e}"


# --------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("from-acorn", help="acorn .ckpt -> trackgnn weights + model.toml")
    a.add_argument("ckpt")
    a.add_argument("--out", required=True, help="directory for model.safetensors, model.toml, "
                   "features.toml")
    a.add_argument("--trust-pickle", action="store_true",
                   help="load the checkpoint with torch.load(weights_only=False)")
    b = sub.add_parser("to-acorn", help="trackgnn run (or config + weights) -> acorn .ckpt")
    b.add_argument("--run", help="a trackgnn run directory (config.toml, recipe.toml, weights)")
    b.add_argument("--model-config", help="ModelConfig TOML (instead of --run)")
    b.add_argument("--features", help="a recipe or features.toml with [[features.features]]")
    b.add_argument("--weights", help="safetensors weights (default with --run: best.safetensors)")
    b.add_argument("--out", required=True, help="the .ckpt to write")
    c = sub.add_parser("check", help="convert a grid of configurations and compare scores")
    c.add_argument("--trackgnn", default="target/debug/trackgnn", help="the trackgnn binary")
    c.add_argument("--graph", help="a graph file without edge features (default: a random graph)")
    c.add_argument("--run", action="append", help="also take this trackgnn run to acorn and "
                   "back, and compare its scores on the graph (repeatable)")
    c.add_argument("--out-dir", help="where to keep the files (default: a temporary directory)")
    c.add_argument("--only", help="regex on the case names")
    c.add_argument("--tol", type=float, default=1e-5,
                   help="max |Δ| of scores, the sigmoid of the logits (1e-5)")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "from-acorn":
            cfg = from_acorn(args.ckpt, args.out, args.trust_pickle)
            print(json.dumps({"out": args.out, "model_config": cfg}))
        elif args.cmd == "to-acorn":
            if args.run:
                cfg, features, weights = run_inputs(args.run)
                source = args.run
            elif args.model_config and args.features and args.weights:
                cfg, source = read_toml(args.model_config), args.model_config
                features = recipe_features(read_toml(args.features), args.features)
                weights = None
            else:
                ap.error("to-acorn needs --run, or --model-config, --features and --weights")
            to_acorn(cfg, features, args.weights or weights, args.out, source=source)
            print(json.dumps({"out": args.out}))
        else:
            return check(args)
    except (Refused, Malformed) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
