//! Aggregation of edge messages at nodes: sum, mean, max and std over each node's incoming or
//! outgoing edges (`torch_geometric` aggregations), forward and backward.
//!
//! Deterministic by construction: a [`Csr`] lists each node's edges in increasing edge order and
//! every node sums its own list, so the forward is parallel over nodes and the backward over
//! edges with no atomics and no dependence on the thread count.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::real::Real;
use crate::traffic::{self, Pass};

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

/// Each node's edges, in increasing edge order (the one counting-sort index of trackgnn).
pub use trackgnn_trackml::index::Csr;

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

/// Nodes per parallel work item of the forward.
const NODE_CHUNK: usize = 256;
/// Edges per parallel work item of the backward.
const EDGE_CHUNK: usize = 1024;

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
    assert!(out.len() >= n * ld && col0 + aggs.len() * h <= ld, "aggregate: out shape");
    let has_max = aggs.contains(&Aggr::Max);
    let has_std = aggs.contains(&Aggr::Std);
    // The messages once (std's variance reads them again), the edge lists, the output columns
    // and the caches.
    let e = csr.edges.len();
    let reads = traffic::of::<T>(e * h * (1 + usize::from(has_std))) + traffic::of::<u32>(e + n + 1);
    let writes = traffic::of::<T>(n * h * (aggs.len() + 2 * usize::from(has_std)))
        + traffic::of::<u32>(n * h * usize::from(has_max));
    traffic::add(Pass::Aggregation, reads + writes);
    cache.argmax.clear();
    cache.argmax.resize(if has_max { n * h } else { 0 }, u32::MAX);
    cache.mean.clear();
    cache.mean.resize(if has_std { n * h } else { 0 }, T::ZERO);
    cache.std.clear();
    cache.std.resize(if has_std { n * h } else { 0 }, T::ZERO);
    // One work item per chunk of nodes, with its slices of the output and the caches.
    let n_chunks = n.div_ceil(NODE_CHUNK);
    let mut arg = cache.argmax.chunks_mut(NODE_CHUNK * h);
    let mut mean = cache.mean.chunks_mut(NODE_CHUNK * h);
    let mut std = cache.std.chunks_mut(NODE_CHUNK * h);
    let work: Vec<_> = out[..n * ld]
        .chunks_mut(NODE_CHUNK * ld)
        .enumerate()
        .map(|(c, o)| (c, o, arg.next(), mean.next(), std.next()))
        .collect();
    debug_assert_eq!(work.len(), n_chunks);
    work.into_par_iter().for_each(|(c, o, a, m, s)| {
        let view = ChunkCache { argmax: a, mean: m, std: s };
        forward_chunk(x, h, csr, aggs, c * NODE_CHUNK, o, ld, col0, view);
    });
}

/// One chunk's slices of an [`AggCache`].
struct ChunkCache<'a, T> {
    argmax: Option<&'a mut [u32]>,
    mean: Option<&'a mut [T]>,
    std: Option<&'a mut [T]>,
}

crate::dispatch! {
    /// The nodes n0.. of one chunk of [`forward`].
    fn forward_chunk<T: Real>(
        x: &[T],
        h: usize,
        csr: &Csr,
        aggs: &[Aggr],
        n0: usize,
        out: &mut [T],
        ld: usize,
        col0: usize,
        cc: ChunkCache<'_, T>,
    ) {
        let ChunkCache { mut argmax, mut mean, mut std } = cc;
        let eps = T::from_f64(STD_EPS);
        for local in 0..out.len() / ld {
            let edges = csr.of(n0 + local);
            let cnt = edges.len();
            let inv = if cnt > 0 { T::ONE / T::from_usize(cnt) } else { T::ZERO };
            let row = &mut out[local * ld..(local + 1) * ld];
            for (k, a) in aggs.iter().enumerate() {
                let dst = &mut row[col0 + k * h..col0 + (k + 1) * h];
                dst.iter_mut().for_each(|v| *v = T::ZERO);
                match a {
                    Aggr::Sum | Aggr::Mean => {
                        for &e in edges {
                            let xr = &x[e as usize * h..(e as usize + 1) * h];
                            dst.iter_mut().zip(xr).for_each(|(d, &v)| *d += v);
                        }
                        if *a == Aggr::Mean {
                            dst.iter_mut().for_each(|v| *v *= inv);
                        }
                    }
                    Aggr::Max => {
                        let arg = &mut argmax.as_deref_mut().expect("max cache")[local * h..(local + 1) * h];
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
                        let m = &mut mean.as_deref_mut().expect("std cache")[local * h..(local + 1) * h];
                        let sd = &mut std.as_deref_mut().expect("std cache")[local * h..(local + 1) * h];
                        m.iter_mut().for_each(|v| *v = T::ZERO);
                        for &e in edges {
                            let xr = &x[e as usize * h..(e as usize + 1) * h];
                            m.iter_mut().zip(xr).for_each(|(d, &v)| *d += v);
                        }
                        m.iter_mut().for_each(|v| *v *= inv);
                        // dst accumulates Σ (x − μ)² before the square root.
                        for &e in edges {
                            let xr = &x[e as usize * h..(e as usize + 1) * h];
                            for j in 0..h {
                                let d = xr[j] - m[j];
                                dst[j] += d * d;
                            }
                        }
                        for j in 0..h {
                            sd[j] = (dst[j] * inv + eps).sqrt();
                            dst[j] = sd[j];
                        }
                    }
                }
            }
        }
    }
}

/// One edge grouping of a backward ([`backward`]): the aggregation over `csr` whose output
/// is in columns `col0 ..` of the output gradient, `node_of_edge` the array `csr` was built
/// from (`dst` for incoming edges, `src` for outgoing), `cache` its forward's.
#[derive(Clone, Copy)]
pub struct Grouping<'a, T> {
    /// Each node's edges.
    pub csr: &'a Csr,
    /// The node of each edge in this grouping.
    pub node_of_edge: &'a [u32],
    /// The first column of this aggregation's blocks in the output gradient.
    pub col0: usize,
    /// Its forward's cache.
    pub cache: &'a AggCache<T>,
}

/// Backward of [`forward`] over one or more groupings of the same messages `x` (E × h):
/// accumulates into `dx` (E × h) the gradient from `dout` (an N × ld matrix), grouping after
/// grouping for each edge, in one pass over `dx` (the bits of one call per grouping in turn).
pub fn backward<T: Real>(
    x: &[T],
    h: usize,
    groups: &[Grouping<'_, T>],
    aggs: &[Aggr],
    dout: &[T],
    ld: usize,
    dx: &mut [T],
) {
    // Per edge and grouping: its node's output-gradient columns and cache rows, its message
    // (std), its node; dx read and written once.
    let e = dx.len() / h.max(1);
    let has = |a| usize::from(aggs.contains(&a));
    let per_group =
        traffic::of::<T>(h * (aggs.len() + 3 * has(Aggr::Std))) + traffic::of::<u32>(1 + h * has(Aggr::Max));
    let offsets: usize = groups.iter().map(|g| traffic::of::<u32>(g.csr.num_nodes() + 1)).sum();
    traffic::add(Pass::Aggregation, e * (groups.len() * per_group + traffic::of::<T>(2 * h)) + offsets);
    dx.par_chunks_mut(EDGE_CHUNK * h).enumerate().for_each(|(c, dx_c)| {
        for g in groups {
            backward_chunk(x, h, g.csr, g.node_of_edge, aggs, dout, ld, g.col0, g.cache, c * EDGE_CHUNK, dx_c);
        }
    });
}

crate::dispatch! {
    /// The edges e0.. of one chunk of [`backward`].
    fn backward_chunk<T: Real>(
        x: &[T],
        h: usize,
        csr: &Csr,
        node_of_edge: &[u32],
        aggs: &[Aggr],
        dout: &[T],
        ld: usize,
        col0: usize,
        cache: &AggCache<T>,
        e0: usize,
        dx: &mut [T],
    ) {
        for local in 0..dx.len() / h {
            let e = e0 + local;
            let node = node_of_edge[e] as usize;
            let cnt = csr.of(node).len();
            let inv = T::ONE / T::from_usize(cnt);
            let d = &mut dx[local * h..(local + 1) * h];
            let row = &dout[node * ld..(node + 1) * ld];
            for (k, a) in aggs.iter().enumerate() {
                let g = &row[col0 + k * h..col0 + (k + 1) * h];
                match a {
                    Aggr::Sum => d.iter_mut().zip(g).for_each(|(d, &g)| *d += g),
                    Aggr::Mean => d.iter_mut().zip(g).for_each(|(d, &g)| *d += g * inv),
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
    }
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
                let var =
                    if vals.is_empty() { 0.0 } else { vals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / cnt };
                let r = &out[node * ld + 2..];
                assert!((r[j] - s).abs() < 1e-12);
                assert!((r[h + j] - mean).abs() < 1e-12);
                assert!((r[2 * h + j] - if vals.is_empty() { 0.0 } else { max }).abs() < 1e-12);
                assert!((r[3 * h + j] - (var + STD_EPS).sqrt()).abs() < 1e-12);
            }
        }
        let w: Vec<f64> = (0..n * ld).map(|_| rng.normal()).collect();
        let mut dx = vec![0.0; e * h];
        let grouping = Grouping { csr: &csr, node_of_edge: &dst, col0: 2, cache: &cache };
        backward(&x, h, &[grouping], &aggs, &w, ld, &mut dx);
        let loss = |x: &[f64]| run(x).0.iter().zip(&w).map(|(a, b)| a * b).sum::<f64>();
        for i in 0..e * h {
            let (mut xp, mut xm) = (x.clone(), x.clone());
            xp[i] += 1e-6;
            xm[i] -= 1e-6;
            let fd = (loss(&xp) - loss(&xm)) / 2e-6;
            assert!((fd - dx[i]).abs() < 1e-5 * (1.0 + fd.abs()), "dx[{i}]: {fd} vs {}", dx[i]);
        }
    }

    #[test]
    fn one_pass_over_both_groupings_has_the_bits_of_one_pass_per_grouping() {
        let mut rng = Rng::new(5);
        // More edges than one work item, so chunks meet both groupings' nodes.
        let (n, e, h) = (300usize, 2500usize, 4usize);
        let src: Vec<u32> = (0..e).map(|_| rng.below(n as u64) as u32).collect();
        let dst: Vec<u32> = (0..e).map(|_| rng.below(n as u64) as u32).collect();
        let x: Vec<f32> = (0..e * h).map(|_| rng.normal() as f32).collect();
        let aggs = [Aggr::Sum, Aggr::Mean, Aggr::Max, Aggr::Std];
        let (csr_in, csr_out) = (Csr::build(&dst, n), Csr::build(&src, n));
        let ld = (1 + 2 * aggs.len()) * h;
        let mut out = vec![0.0f32; n * ld];
        let (mut c_in, mut c_out) = (AggCache::default(), AggCache::default());
        forward(&x, h, &csr_in, &aggs, &mut out, ld, h, &mut c_in);
        forward(&x, h, &csr_out, &aggs, &mut out, ld, (1 + aggs.len()) * h, &mut c_out);
        let w: Vec<f32> = (0..n * ld).map(|_| rng.normal() as f32).collect();
        let incoming = Grouping { csr: &csr_in, node_of_edge: &dst, col0: h, cache: &c_in };
        let outgoing = Grouping { csr: &csr_out, node_of_edge: &src, col0: (1 + aggs.len()) * h, cache: &c_out };
        let start: Vec<f32> = (0..e * h).map(|_| rng.normal() as f32).collect();
        let mut both = start.clone();
        backward(&x, h, &[incoming, outgoing], &aggs, &w, ld, &mut both);
        let mut each = start.clone();
        backward(&x, h, &[incoming], &aggs, &w, ld, &mut each);
        backward(&x, h, &[outgoing], &aggs, &w, ld, &mut each);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&both), bits(&each));
        assert_ne!(bits(&both), bits(&start), "the gradient reached dx");
    }
}
