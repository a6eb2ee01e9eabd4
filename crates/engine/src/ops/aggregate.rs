//! Aggregation of edge messages at nodes: sum, mean, max and std over each node's incoming or
//! outgoing edges (`torch_geometric` aggregations), forward and backward.
//!
//! Deterministic by construction: a [`Csr`] lists each node's edges in increasing edge order and
//! every node sums its own list, so the forward is parallel over nodes and the backward over
//! edges with no atomics and no dependence on the thread count.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::real::Real;

/// An aggregation of the messages arriving at (or leaving) a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Aggr {
    /// Σ x
    Sum,
    /// Σ x / n (0 for a node without edges)
    Mean,
    /// max x per channel (0 for a node without edges)
    Max,
    /// √(var + ε) with var = mean((x − μ)²) (√ε for a node without edges). PyG clamps the
    /// variance at ε instead; adding ε keeps the gradient smooth at var = 0.
    Std,
}

/// ε of [`Aggr::Std`].
pub const STD_EPS: f64 = 1e-5;

/// Each node's edges, in increasing edge order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Csr {
    /// `offsets[n]..offsets[n+1]` indexes `edges` for node n.
    pub offsets: Vec<u32>,
    /// Edge ids.
    pub edges: Vec<u32>,
}

impl Csr {
    /// Groups edges by `node_of_edge` (e.g. `dst` for incoming edges).
    pub fn build(node_of_edge: &[u32], num_nodes: usize) -> Csr {
        let mut offsets = vec![0u32; num_nodes + 1];
        for &n in node_of_edge {
            offsets[n as usize + 1] += 1;
        }
        for i in 0..num_nodes {
            offsets[i + 1] += offsets[i];
        }
        let mut fill = offsets.clone();
        let mut edges = vec![0u32; node_of_edge.len()];
        for (e, &n) in node_of_edge.iter().enumerate() {
            edges[fill[n as usize] as usize] = e as u32;
            fill[n as usize] += 1;
        }
        Csr { offsets, edges }
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The edges of node `n`.
    #[inline]
    pub fn of(&self, n: usize) -> &[u32] {
        &self.edges[self.offsets[n] as usize..self.offsets[n + 1] as usize]
    }
}

/// What the backward of [`forward`] needs per node (only for the aggregations used).
#[derive(Clone, Debug, Default)]
pub struct AggCache<T> {
    /// Arg-max edge per node and channel (`u32::MAX` for none), for [`Aggr::Max`].
    pub argmax: Vec<u32>,
    /// Mean per node and channel, for [`Aggr::Std`].
    pub mean: Vec<T>,
    /// Std per node and channel, for [`Aggr::Std`].
    pub std: Vec<T>,
}

/// Nodes per parallel work item.
const NODE_CHUNK: usize = 256;

/// Aggregates messages `x` (E × h) over `csr` into columns `col0 ..` of `out` (N rows, row stride
/// `ld`): block k of h columns holds `aggs[k]`.
#[allow(clippy::too_many_arguments)]
pub fn forward<T: Real>(
    x: &[T],
    h: usize,
    csr: &Csr,
    aggs: &[Aggr],
    out: &mut [T],
    ld: usize,
    col0: usize,
    cache: &mut AggCache<T>,
) {
    let n = csr.num_nodes();
    assert!(
        out.len() >= n * ld && col0 + aggs.len() * h <= ld,
        "aggregate: out shape"
    );
    let has = |a: Aggr| aggs.contains(&a);
    cache.argmax = if has(Aggr::Max) {
        vec![u32::MAX; n * h]
    } else {
        Vec::new()
    };
    cache.mean = if has(Aggr::Std) {
        vec![T::ZERO; n * h]
    } else {
        Vec::new()
    };
    cache.std = if has(Aggr::Std) {
        vec![T::ZERO; n * h]
    } else {
        Vec::new()
    };
    let eps = T::from_f64(STD_EPS);
    let out_chunks = out[..n * ld].par_chunks_mut(NODE_CHUNK * ld);
    let arg_chunks: Vec<&mut [u32]> = if has(Aggr::Max) {
        cache.argmax.chunks_mut(NODE_CHUNK * h).collect()
    } else {
        Vec::new()
    };
    let mean_chunks: Vec<&mut [T]> = if has(Aggr::Std) {
        cache.mean.chunks_mut(NODE_CHUNK * h).collect()
    } else {
        Vec::new()
    };
    let std_chunks: Vec<&mut [T]> = if has(Aggr::Std) {
        cache.std.chunks_mut(NODE_CHUNK * h).collect()
    } else {
        Vec::new()
    };
    let mut arg_it = arg_chunks
        .into_iter()
        .map(Some)
        .chain(std::iter::repeat_with(|| None));
    let mut mean_it = mean_chunks
        .into_iter()
        .map(Some)
        .chain(std::iter::repeat_with(|| None));
    let mut std_it = std_chunks
        .into_iter()
        .map(Some)
        .chain(std::iter::repeat_with(|| None));
    let n_chunks = n.div_ceil(NODE_CHUNK);
    let aux: Vec<_> = (0..n_chunks)
        .map(|_| {
            (
                arg_it.next().unwrap(),
                mean_it.next().unwrap(),
                std_it.next().unwrap(),
            )
        })
        .collect();
    out_chunks
        .zip(aux)
        .enumerate()
        .for_each(|(c, (out_c, (mut arg_c, mut mean_c, mut std_c)))| {
            let mut acc = vec![T::ZERO; h];
            for local in 0..out_c.len() / ld {
                let node = c * NODE_CHUNK + local;
                let edges = csr.of(node);
                let cnt = edges.len();
                let row = &mut out_c[local * ld..local * ld + ld];
                for (k, a) in aggs.iter().enumerate() {
                    let dst = &mut row[col0 + k * h..col0 + (k + 1) * h];
                    match a {
                        Aggr::Sum | Aggr::Mean => {
                            dst.iter_mut().for_each(|v| *v = T::ZERO);
                            for &e in edges {
                                let xr = &x[e as usize * h..(e as usize + 1) * h];
                                dst.iter_mut().zip(xr).for_each(|(d, &v)| *d += v);
                            }
                            if *a == Aggr::Mean && cnt > 0 {
                                let inv = T::ONE / T::from_usize(cnt);
                                dst.iter_mut().for_each(|v| *v *= inv);
                            }
                        }
                        Aggr::Max => {
                            let arg = &mut arg_c.as_deref_mut().expect("max cache")
                                [local * h..(local + 1) * h];
                            dst.iter_mut().for_each(|v| *v = T::ZERO);
                            for (i, &e) in edges.iter().enumerate() {
                                let xr = &x[e as usize * h..(e as usize + 1) * h];
                                for j in 0..h {
                                    if i == 0 || xr[j] > dst[j] {
                                        dst[j] = xr[j];
                                        arg[j] = e;
                                    }
                                }
                            }
                        }
                        Aggr::Std => {
                            let mean = &mut mean_c.as_deref_mut().expect("std cache")
                                [local * h..(local + 1) * h];
                            let sd = &mut std_c.as_deref_mut().expect("std cache")
                                [local * h..(local + 1) * h];
                            acc.iter_mut().for_each(|v| *v = T::ZERO);
                            for &e in edges {
                                let xr = &x[e as usize * h..(e as usize + 1) * h];
                                acc.iter_mut().zip(xr).for_each(|(d, &v)| *d += v);
                            }
                            let inv = if cnt > 0 {
                                T::ONE / T::from_usize(cnt)
                            } else {
                                T::ZERO
                            };
                            mean.iter_mut().zip(&acc).for_each(|(m, &s)| *m = s * inv);
                            acc.iter_mut().for_each(|v| *v = T::ZERO);
                            for &e in edges {
                                let xr = &x[e as usize * h..(e as usize + 1) * h];
                                for j in 0..h {
                                    let d = xr[j] - mean[j];
                                    acc[j] += d * d;
                                }
                            }
                            for j in 0..h {
                                sd[j] = (acc[j] * inv + eps).sqrt();
                                dst[j] = sd[j];
                            }
                        }
                    }
                }
            }
        });
}

/// Backward of [`forward`]: accumulates into `dx` (E × h) the gradient from `dout` (columns
/// `col0 ..` of an N × ld matrix). `node_of_edge` is the array `csr` was built from.
#[allow(clippy::too_many_arguments)]
pub fn backward<T: Real>(
    x: &[T],
    h: usize,
    csr: &Csr,
    node_of_edge: &[u32],
    aggs: &[Aggr],
    dout: &[T],
    ld: usize,
    col0: usize,
    cache: &AggCache<T>,
    dx: &mut [T],
) {
    const EDGE_CHUNK: usize = 1024;
    dx.par_chunks_mut(EDGE_CHUNK * h)
        .enumerate()
        .for_each(|(c, dx_c)| {
            for local in 0..dx_c.len() / h {
                let e = c * EDGE_CHUNK + local;
                let node = node_of_edge[e] as usize;
                let cnt = csr.of(node).len();
                let d = &mut dx_c[local * h..(local + 1) * h];
                let row = &dout[node * ld..node * ld + ld];
                for (k, a) in aggs.iter().enumerate() {
                    let g = &row[col0 + k * h..col0 + (k + 1) * h];
                    match a {
                        Aggr::Sum => d.iter_mut().zip(g).for_each(|(d, &g)| *d += g),
                        Aggr::Mean => {
                            let inv = T::ONE / T::from_usize(cnt);
                            d.iter_mut().zip(g).for_each(|(d, &g)| *d += g * inv);
                        }
                        Aggr::Max => {
                            let arg = &cache.argmax[node * h..(node + 1) * h];
                            for j in 0..h {
                                if arg[j] == e as u32 {
                                    d[j] += g[j];
                                }
                            }
                        }
                        Aggr::Std => {
                            // d std / d x_e = (x_e − μ) / (n · std)
                            let inv = T::ONE / T::from_usize(cnt);
                            let xr = &x[e * h..(e + 1) * h];
                            let mean = &cache.mean[node * h..(node + 1) * h];
                            let sd = &cache.std[node * h..(node + 1) * h];
                            for j in 0..h {
                                d[j] += g[j] * (xr[j] - mean[j]) * inv / sd[j];
                            }
                        }
                    }
                }
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use trackgnn_trackml::rng::Rng;

    #[test]
    fn csr_lists_edges_in_order() {
        let dst = [2u32, 0, 2, 1, 2];
        let c = Csr::build(&dst, 4);
        assert_eq!(c.of(0), &[1]);
        assert_eq!(c.of(2), &[0, 2, 4]);
        assert!(c.of(3).is_empty());
    }

    #[test]
    fn aggregations_match_definitions_and_finite_differences() {
        let mut rng = Rng::new(2);
        let (n, e, h) = (5usize, 13usize, 3usize);
        let dst: Vec<u32> = (0..e).map(|_| rng.below(n as u64 - 1) as u32).collect(); // node 4 has no edges
        let x: Vec<f64> = (0..e * h).map(|_| rng.normal()).collect();
        let aggs = [Aggr::Sum, Aggr::Mean, Aggr::Max, Aggr::Std];
        let csr = Csr::build(&dst, n);
        let ld = aggs.len() * h + 2;
        let run = |x: &[f64]| {
            let mut out = vec![0.0; n * ld];
            let mut cache = AggCache::default();
            forward(x, h, &csr, &aggs, &mut out, ld, 2, &mut cache);
            (out, cache)
        };
        let (out, cache) = run(&x);
        for node in 0..n {
            let es: Vec<usize> = (0..e).filter(|&k| dst[k] as usize == node).collect();
            for j in 0..h {
                let vals: Vec<f64> = es.iter().map(|&k| x[k * h + j]).collect();
                let s: f64 = vals.iter().sum();
                let cnt = vals.len() as f64;
                let mean = if vals.is_empty() { 0.0 } else { s / cnt };
                let max = vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let var = if vals.is_empty() {
                    0.0
                } else {
                    vals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / cnt
                };
                let r = &out[node * ld + 2..];
                assert!((r[j] - s).abs() < 1e-12);
                assert!((r[h + j] - mean).abs() < 1e-12);
                assert!((r[2 * h + j] - if vals.is_empty() { 0.0 } else { max }).abs() < 1e-12);
                assert!((r[3 * h + j] - (var + STD_EPS).sqrt()).abs() < 1e-12);
            }
        }
        let w: Vec<f64> = (0..n * ld).map(|_| rng.normal()).collect();
        let mut dx = vec![0.0; e * h];
        backward(&x, h, &csr, &dst, &aggs, &w, ld, 2, &cache, &mut dx);
        let loss = |x: &[f64]| run(x).0.iter().zip(&w).map(|(a, b)| a * b).sum::<f64>();
        for i in 0..e * h {
            let (mut xp, mut xm) = (x.clone(), x.clone());
            xp[i] += 1e-6;
            xm[i] -= 1e-6;
            let fd = (loss(&xp) - loss(&xm)) / 2e-6;
            assert!(
                (fd - dx[i]).abs() < 1e-5 * (1.0 + fd.abs()),
                "dx[{i}]: {fd} vs {}",
                dx[i]
            );
        }
    }
}
