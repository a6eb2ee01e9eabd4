//! The slow twin of the fused forward: explicit concatenation of [h_src, h_dst, e] per edge, a
//! full Linear on every row, plain loops in f64. Tests compare the fused forward against it.

use crate::config::{ModelConfig, UpdateOrder};
use crate::graph_input::GraphInput;
use crate::mlp::Mlp;
use crate::ops::Aggr;
use crate::ops::aggregate::STD_EPS;
use crate::ops::layer_norm::EPS;
use crate::params::ParamStore;

/// Applies an MLP to each row of `x` (rows × din) with plain loops.
pub fn mlp_naive(ps: &ParamStore<f64>, mlp: &Mlp, x: &[f64]) -> Vec<f64> {
    let mut cur = x.to_vec();
    for layer in &mlp.layers {
        let (din, dout) = (layer.din, layer.dout);
        let w = ps.value(layer.w);
        let b = ps.value(layer.b);
        let rows = cur.len() / din;
        let mut next = vec![0.0; rows * dout];
        for r in 0..rows {
            let xr = &cur[r * din..(r + 1) * din];
            let out = &mut next[r * dout..(r + 1) * dout];
            for o in 0..dout {
                out[o] = b[o] + (0..din).map(|i| w[o * din + i] * xr[i]).sum::<f64>();
            }
            if let Some((g, bb)) = layer.norm {
                let mean = out.iter().sum::<f64>() / dout as f64;
                let var = out.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / dout as f64;
                for (o, v) in out.iter_mut().enumerate() {
                    *v = (*v - mean) / (var + EPS).sqrt();
                    if let (Some(g), Some(bb)) = (g, bb) {
                        *v = *v * ps.value(g)[o] + ps.value(bb)[o];
                    }
                }
            }
            for v in out.iter_mut() {
                *v = layer.act.f(*v);
            }
        }
        cur = next;
    }
    cur
}

fn aggregate_naive(msg: &[f64], h: usize, node_of_edge: &[u32], n: usize, a: Aggr) -> Vec<f64> {
    let mut out = vec![0.0; n * h];
    for node in 0..n {
        let es: Vec<usize> = (0..node_of_edge.len()).filter(|&e| node_of_edge[e] as usize == node).collect();
        for j in 0..h {
            let vals: Vec<f64> = es.iter().map(|&e| msg[e * h + j]).collect();
            let cnt = vals.len() as f64;
            let mean = if vals.is_empty() { 0.0 } else { vals.iter().sum::<f64>() / cnt };
            out[node * h + j] = match a {
                Aggr::Sum => vals.iter().sum(),
                Aggr::Mean => mean,
                Aggr::Max => vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max).max(if vals.is_empty() {
                    0.0
                } else {
                    f64::NEG_INFINITY
                }),
                Aggr::Std => {
                    let var =
                        if vals.is_empty() { 0.0 } else { vals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / cnt };
                    (var + STD_EPS).sqrt()
                }
            };
        }
    }
    out
}

/// The naive forward of an InteractionGNN given its MLPs; returns the logits.
#[allow(clippy::too_many_arguments)]
pub fn forward_naive(
    cfg: &ModelConfig,
    ps: &ParamStore<f64>,
    node_encoder: &Mlp,
    edge_encoder: &Mlp,
    nets: &dyn Fn(usize) -> (Mlp, Mlp),
    classifier: &Mlp,
    g: &GraphInput<f64>,
) -> Vec<f64> {
    let (n, e, hd) = (g.num_nodes, g.num_edges(), cfg.hidden);
    let cat_edges = |h: &[f64], rest: Option<(&[f64], usize)>| -> Vec<f64> {
        let rd = rest.map_or(0, |r| r.1);
        let mut x = Vec::with_capacity(e * (2 * hd + rd));
        for k in 0..e {
            let (s, d) = (g.src[k] as usize, g.dst[k] as usize);
            x.extend_from_slice(&h[s * hd..(s + 1) * hd]);
            x.extend_from_slice(&h[d * hd..(d + 1) * hd]);
            if let Some((r, rd)) = rest {
                x.extend_from_slice(&r[k * rd..(k + 1) * rd]);
            }
        }
        x
    };
    let mut h = mlp_naive(ps, node_encoder, &g.x);
    let rest = (g.edge_dim > 0).then_some((&g.edge_attr[..], g.edge_dim));
    let mut ed = mlp_naive(ps, edge_encoder, &cat_edges(&h, rest));
    let edge_update = |edge_net: &Mlp, h: &[f64], ed: &[f64]| {
        let mut e_new = mlp_naive(ps, edge_net, &cat_edges(h, Some((ed, hd))));
        if cfg.residual {
            e_new.iter_mut().zip(ed).for_each(|(a, b)| *a += b);
        }
        e_new
    };
    let node_update = |node_net: &Mlp, h: &[f64], ed: &[f64]| {
        let ins: Vec<Vec<f64>> = cfg.aggregation.iter().map(|&a| aggregate_naive(ed, hd, &g.dst, n, a)).collect();
        let outs: Vec<Vec<f64>> = cfg.aggregation.iter().map(|&a| aggregate_naive(ed, hd, &g.src, n, a)).collect();
        let mut node_in = Vec::new();
        for v in 0..n {
            node_in.extend_from_slice(&h[v * hd..(v + 1) * hd]);
            for blk in ins.iter().chain(outs.iter()) {
                node_in.extend_from_slice(&blk[v * hd..(v + 1) * hd]);
            }
        }
        let mut h_new = mlp_naive(ps, node_net, &node_in);
        if cfg.residual {
            h_new.iter_mut().zip(h).for_each(|(a, b)| *a += b);
        }
        h_new
    };
    for it in 0..cfg.iterations {
        let (edge_net, node_net) = nets(it);
        match cfg.update_order {
            UpdateOrder::EdgeFirst => {
                ed = edge_update(&edge_net, &h, &ed);
                h = node_update(&node_net, &h, &ed);
            }
            UpdateOrder::NodeFirst => {
                h = node_update(&node_net, &h, &ed);
                ed = edge_update(&edge_net, &h, &ed);
            }
        }
    }
    mlp_naive(ps, classifier, &cat_edges(&h, Some((&ed, hd))))
}
