//! The InteractionGNN's forward on a device: the CPU engine's algorithm (the split first Linear
//! on nodes, a fused epilogue per layer, fixed-order aggregations over the CSR groupings) with
//! the products in [`Backend::gemm`] and everything else in the kernels.

use std::sync::Arc;

use trackgnn_engine::ops::Aggr;
use trackgnn_engine::{InteractionGnn, ModelConfig, Precision, UpdateOrder};

use crate::backend::{Arg, Backend, BackendError, DevBuf, DevPtr, Gemm, WARP, launch};
use crate::graph::DeviceGraph;
use crate::layout::{MlpLayout, ModelLayout};

/// A device buffer kept from call to call and reallocated only when its length changes.
pub struct Slot<T>(Option<DevBuf<T>>);

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Slot(None)
    }
}

impl<T: Copy + Default> Slot<T> {
    /// The buffer at length `len` (contents undefined after a reallocation: zeros).
    pub fn get(&mut self, dev: &Arc<dyn Backend>, len: usize) -> Result<&DevBuf<T>, BackendError> {
        if self.0.as_ref().is_none_or(|b| b.len() != len) {
            self.0 = None;
            self.0 = Some(DevBuf::zeros(dev, len)?);
        }
        Ok(self.0.as_ref().expect("just set"))
    }

    /// A scratch buffer of at least `len` values, reallocated only to grow (contents undefined).
    pub fn scratch(&mut self, dev: &Arc<dyn Backend>, len: usize) -> Result<&DevBuf<T>, BackendError> {
        if self.0.as_ref().is_none_or(|b| b.len() < len) {
            self.0 = None;
            self.0 = Some(DevBuf::zeros(dev, len)?);
        }
        Ok(self.0.as_ref().expect("just set"))
    }

    /// The buffer, if allocated.
    pub fn buf(&self) -> Option<&DevBuf<T>> {
        self.0.as_ref()
    }

    /// Its address (0 when not allocated).
    pub fn ptr(&self) -> DevPtr {
        self.0.as_ref().map_or(0, DevBuf::ptr)
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.0.as_ref().map_or(0, |b| b.len() * size_of::<T>())
    }
}

/// What a forward of one MLP keeps for its backward: per layer x̂ (or z without a norm) and
/// 1/σ per row.
#[derive(Default)]
pub struct MlpCache {
    /// Per layer (rows × dout).
    pub pre: Vec<Slot<f32>>,
    /// Per layer (rows; unallocated without a norm).
    pub rstd: Vec<Slot<f32>>,
}

impl MlpCache {
    fn bytes(&self) -> usize {
        self.pre.iter().chain(&self.rstd).map(Slot::bytes).sum()
    }
}

/// What one aggregation pass keeps: the arg-max edges (max) and the mean and std (std).
#[derive(Default)]
pub struct AggCache {
    /// Arg-max edge per node and channel, per max aggregation.
    pub argmax: Slot<u32>,
    /// Mean per node and channel (std).
    pub mean: Slot<f32>,
    /// Std per node and channel (std).
    pub std: Slot<f32>,
}

/// The device buffers of a forward: the states, the node networks' inputs, the caches.
#[derive(Default)]
pub struct DeviceCache {
    /// Node states h_0 … h_L (N × H).
    pub h: Vec<Slot<f32>>,
    /// Edge states e_0 … e_L (E × H).
    pub e: Vec<Slot<f32>>,
    /// Node-network inputs per iteration (N × (1 + 2K)·H).
    pub node_in: Vec<Slot<f32>>,
    /// Aggregation caches per iteration: incoming, outgoing.
    pub agg: Vec<(AggCache, AggCache)>,
    /// Node encoder.
    pub node_encoder: MlpCache,
    /// Edge encoder.
    pub edge_encoder: MlpCache,
    /// Edge networks per iteration.
    pub edge_net: Vec<MlpCache>,
    /// Node networks per iteration.
    pub node_net: Vec<MlpCache>,
    /// Classifier.
    pub classifier: MlpCache,
    /// Auxiliary head.
    pub aux_head: MlpCache,
    /// Logits (E).
    pub logits: Slot<f32>,
    /// Auxiliary predictions (E; unallocated without the head).
    pub aux: Slot<f32>,
    /// The split Linear's node products h·W_aᵀ, h·W_bᵀ.
    pub split_a: Slot<f32>,
    /// See `split_a`.
    pub split_b: Slot<f32>,
    /// Hidden activations of the MLPs, two to alternate between layers.
    pub act: [Slot<f32>; 2],
}

impl DeviceCache {
    /// Bytes held on the device.
    pub fn bytes(&self) -> usize {
        let slots = |v: &[Slot<f32>]| v.iter().map(Slot::bytes).sum::<usize>();
        let agg = |a: &AggCache| a.argmax.bytes() + a.mean.bytes() + a.std.bytes();
        slots(&self.h)
            + slots(&self.e)
            + slots(&self.node_in)
            + self.agg.iter().map(|(a, b)| agg(a) + agg(b)).sum::<usize>()
            + [&self.node_encoder, &self.edge_encoder, &self.classifier, &self.aux_head]
                .iter()
                .map(|c| c.bytes())
                .sum::<usize>()
            + self.edge_net.iter().chain(&self.node_net).map(MlpCache::bytes).sum::<usize>()
            + [&self.logits, &self.aux, &self.split_a, &self.split_b, &self.act[0], &self.act[1]]
                .iter()
                .map(|s| s.bytes())
                .sum::<usize>()
    }
}

/// The input of an MLP's first layer.
#[derive(Clone, Copy)]
pub enum Input {
    /// A row-major matrix (rows × dim).
    Dense {
        /// The rows.
        x: DevPtr,
        /// Columns.
        dim: usize,
    },
    /// cat(h\[src\], h\[dst\], rest), its first Linear split: h·W_aᵀ and h·W_bᵀ on the nodes.
    Split {
        /// Node states (nodes × h_dim).
        h: DevPtr,
        /// Nodes.
        nodes: usize,
        /// Width of h.
        h_dim: usize,
        /// The third block (edge state or features) and its width.
        rest: Option<(DevPtr, usize)>,
    },
}

/// A model on a device: its layout and parameters.
pub struct DeviceModel {
    pub(crate) dev: Arc<dyn Backend>,
    /// The configuration.
    pub cfg: ModelConfig,
    /// Where each layer's parameters are.
    pub layout: ModelLayout,
    /// The parameters (the host model's flat buffer).
    pub params: DevBuf<f32>,
    /// Node feature width.
    pub node_dim: usize,
    /// Edge feature width.
    pub edge_dim: usize,
    /// The arithmetic of the matrix products; in bf16 the saved activations are rounded to
    /// bf16 too, as the CPU engine's ([`InteractionGnn::set_precision`]).
    pub precision: Precision,
    /// How the forward saves x̂ (or z) for the backward: f32, or rounded to bf16.
    pub saved: Precision,
}

impl DeviceModel {
    /// `model`'s parameters uploaded to `dev`.
    pub fn upload(dev: &Arc<dyn Backend>, model: &InteractionGnn<f32>) -> Result<Self, BackendError> {
        Ok(DeviceModel {
            dev: dev.clone(),
            cfg: model.cfg.clone(),
            layout: ModelLayout::of(model),
            params: DevBuf::from_host(dev, &model.params.data)?,
            node_dim: model.node_dim,
            edge_dim: model.edge_dim,
            precision: model.precision(),
            saved: model.saved_activations(),
        })
    }

    /// The widest row per node or edge (the node network's input).
    pub fn widest_row(&self) -> usize {
        (1 + 2 * self.cfg.aggregation.len()) * self.cfg.hidden
    }

    pub(crate) fn w(&self, offset: usize) -> DevPtr {
        self.params.at(offset)
    }

    /// z (rows × dout) = x (rows × k, stride ldx) · W\[:, c0 .. c0 + k\]ᵀ with W (dout × din) at
    /// parameter offset `w`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn linear(
        &self,
        x: DevPtr,
        rows: usize,
        k: usize,
        ldx: usize,
        w: usize,
        din: usize,
        c0: usize,
        dout: usize,
        z: DevPtr,
    ) -> Result<(), BackendError> {
        self.dev.gemm(&Gemm {
            m: rows,
            n: dout,
            k,
            a: x,
            lda: ldx,
            trans_a: false,
            b: self.w(w) + (c0 * 4) as u64,
            ldb: din,
            trans_b: true,
            c: z,
            ldc: dout,
            alpha: 1.0,
            beta: 0.0,
            bf16: self.precision == Precision::Bf16,
        })
    }

    /// Forward of `mlp` over `rows` rows of `input` into `out` (rows × dout, plus `residual`
    /// when given), keeping x̂ and 1/σ in `cache`; `split` and `act` are scratch.
    #[allow(clippy::too_many_arguments)]
    fn mlp_forward(
        &self,
        g: &DeviceGraph,
        mlp: &MlpLayout,
        input: Input,
        rows: usize,
        cache: &mut MlpCache,
        out: DevPtr,
        residual: Option<DevPtr>,
        split: (&mut Slot<f32>, &mut Slot<f32>),
        act: &mut [Slot<f32>; 2],
    ) -> Result<(), BackendError> {
        let dev = &self.dev;
        let n_layers = mlp.layers.len();
        cache.pre.resize_with(n_layers, Slot::default);
        cache.rstd.resize_with(n_layers, Slot::default);
        let width = mlp.layers.iter().map(|l| l.dout).max().unwrap_or(0);
        for (l, layer) in mlp.layers.iter().enumerate() {
            let z = cache.pre[l].get(dev, rows * layer.dout)?.ptr();
            let rstd = if layer.norm { cache.rstd[l].get(dev, rows)?.ptr() } else { 0 };
            let mut split_mode = 0;
            let (mut ga, mut gb) = (0, 0);
            if l == 0 {
                match input {
                    Input::Dense { x, dim } => self.linear(x, rows, dim, dim, layer.w, layer.din, 0, layer.dout, z)?,
                    Input::Split { h, nodes, h_dim, rest } => {
                        ga = split.0.scratch(dev, nodes * layer.dout)?.ptr();
                        gb = split.1.scratch(dev, nodes * layer.dout)?.ptr();
                        self.linear(h, nodes, h_dim, h_dim, layer.w, layer.din, 0, layer.dout, ga)?;
                        self.linear(h, nodes, h_dim, h_dim, layer.w, layer.din, h_dim, layer.dout, gb)?;
                        split_mode = 2;
                        if let Some((r, rd)) = rest {
                            self.linear(r, rows, rd, rd, layer.w, layer.din, 2 * h_dim, layer.dout, z)?;
                            split_mode = 1;
                        }
                    }
                }
            } else {
                let x = act[(l - 1) % 2].ptr();
                self.linear(x, rows, layer.din, layer.din, layer.w, layer.din, 0, layer.dout, z)?;
            }
            let last = l + 1 == n_layers;
            let y = if last { out } else { act[l % 2].scratch(dev, rows * width)?.ptr() };
            let (gamma, beta) = layer.affine.map_or((0, 0), |(g, b)| (self.w(g), self.w(b)));
            let res = if last { residual.unwrap_or(0) } else { 0 };
            launch(
                dev.as_ref(),
                "mlp_layer_post",
                rows * WARP,
                &[
                    Arg::Ptr(z),
                    Arg::Ptr(self.w(layer.b)),
                    Arg::Ptr(ga),
                    Arg::Ptr(gb),
                    g.src.arg(),
                    g.dst.arg(),
                    Arg::I32(split_mode),
                    Arg::Ptr(gamma),
                    Arg::Ptr(beta),
                    Arg::I32(layer.norm.into()),
                    Arg::Ptr(rstd),
                    Arg::I32(layer.act),
                    Arg::Ptr(res),
                    Arg::Ptr(y),
                    Arg::I32((self.saved == Precision::Bf16).into()),
                    Arg::int(rows),
                    Arg::int(layer.dout),
                ],
            )?;
        }
        Ok(())
    }

    /// node_in = cat(h, aggregations of e over incoming, over outgoing edges).
    fn node_input(
        &self,
        g: &DeviceGraph,
        h: DevPtr,
        e_agg: DevPtr,
        node_in: DevPtr,
        agg: &mut (AggCache, AggCache),
    ) -> Result<(), BackendError> {
        let (n, hd) = (g.num_nodes, self.cfg.hidden);
        let aggs = &self.cfg.aggregation;
        let k = aggs.len();
        let ld = (1 + 2 * k) * hd;
        let dev = self.dev.as_ref();
        launch(
            dev,
            "copy_columns",
            n * hd,
            &[Arg::Ptr(h), Arg::int(hd), Arg::Ptr(node_in), Arg::int(ld), Arg::I32(0), Arg::int(n)],
        )?;
        for (side, (csr, cache)) in [(&g.in_edges, &mut agg.0), (&g.out_edges, &mut agg.1)].into_iter().enumerate() {
            let has_max = aggs.contains(&Aggr::Max);
            let has_std = aggs.contains(&Aggr::Std);
            let argmax = if has_max { cache.argmax.get(&self.dev, n * hd)?.ptr() } else { 0 };
            let (mean, std) = if has_std {
                (cache.mean.get(&self.dev, n * hd)?.ptr(), cache.std.get(&self.dev, n * hd)?.ptr())
            } else {
                (0, 0)
            };
            for (j, a) in aggs.iter().enumerate() {
                let col = (1 + side * k + j) * hd;
                let kind = match a {
                    Aggr::Sum => 0,
                    Aggr::Mean => 1,
                    Aggr::Max => 2,
                    Aggr::Std => 3,
                };
                launch(
                    dev,
                    "aggregate_forward",
                    n * hd,
                    &[
                        Arg::Ptr(e_agg),
                        Arg::int(hd),
                        csr.offsets.arg(),
                        csr.edges.arg(),
                        Arg::int(n),
                        Arg::I32(kind),
                        Arg::Ptr(node_in),
                        Arg::int(ld),
                        Arg::int(col),
                        Arg::Ptr(argmax),
                        Arg::Ptr(mean),
                        Arg::Ptr(std),
                    ],
                )?;
            }
        }
        Ok(())
    }

    /// The forward on `g`: fills `cache`, its logits (and auxiliary predictions) included.
    pub fn forward(&self, g: &DeviceGraph, cache: &mut DeviceCache) -> Result<(), BackendError> {
        let dev = &self.dev;
        let (n, e, hd) = (g.num_nodes, g.num_edges, self.cfg.hidden);
        let iters = self.cfg.iterations;
        let ld = self.widest_row();
        cache.h.resize_with(iters + 1, Slot::default);
        cache.e.resize_with(iters + 1, Slot::default);
        cache.node_in.resize_with(iters, Slot::default);
        cache.agg.resize_with(iters, Default::default);
        cache.edge_net.resize_with(iters, Default::default);
        cache.node_net.resize_with(iters, Default::default);
        for s in &mut cache.h {
            s.get(dev, n * hd)?;
        }
        for s in &mut cache.e {
            s.get(dev, e * hd)?;
        }
        for s in &mut cache.node_in {
            s.get(dev, n * ld)?;
        }
        let DeviceCache {
            h,
            e: es,
            node_in,
            agg,
            node_encoder,
            edge_encoder,
            edge_net,
            node_net,
            classifier,
            aux_head,
            logits,
            aux,
            split_a,
            split_b,
            act,
        } = cache;
        let lay = &self.layout;
        // Encoders.
        let x = Input::Dense { x: g.x.ptr(), dim: g.node_dim };
        self.mlp_forward(g, &lay.node_encoder, x, n, node_encoder, h[0].ptr(), None, (split_a, split_b), act)?;
        let rest = (g.edge_dim > 0).then(|| (g.edge_attr.ptr(), g.edge_dim));
        let input = Input::Split { h: h[0].ptr(), nodes: n, h_dim: hd, rest };
        self.mlp_forward(g, &lay.edge_encoder, input, e, edge_encoder, es[0].ptr(), None, (split_a, split_b), act)?;
        // Message passing.
        let node_first = self.cfg.update_order == UpdateOrder::NodeFirst;
        let residual = self.cfg.residual;
        for it in 0..iters {
            let (edge_mlp, node_mlp) = lay.nets(&self.cfg, it);
            let (h_prev, h_next, e_prev, e_next) = (h[it].ptr(), h[it + 1].ptr(), es[it].ptr(), es[it + 1].ptr());
            let edge_input = |h_in: DevPtr| Input::Split { h: h_in, nodes: n, h_dim: hd, rest: Some((e_prev, hd)) };
            if !node_first {
                let res = residual.then_some(e_prev);
                self.mlp_forward(
                    g,
                    edge_mlp,
                    edge_input(h_prev),
                    e,
                    &mut edge_net[it],
                    e_next,
                    res,
                    (split_a, split_b),
                    act,
                )?;
            }
            let e_agg = if node_first { e_prev } else { e_next };
            self.node_input(g, h_prev, e_agg, node_in[it].ptr(), &mut agg[it])?;
            let input = Input::Dense { x: node_in[it].ptr(), dim: ld };
            let res = residual.then_some(h_prev);
            self.mlp_forward(g, node_mlp, input, n, &mut node_net[it], h_next, res, (split_a, split_b), act)?;
            if node_first {
                let res = residual.then_some(e_prev);
                self.mlp_forward(
                    g,
                    edge_mlp,
                    edge_input(h_next),
                    e,
                    &mut edge_net[it],
                    e_next,
                    res,
                    (split_a, split_b),
                    act,
                )?;
            }
        }
        // Classifier, and the auxiliary head on the same e_L.
        let out = logits.get(dev, e)?.ptr();
        let input = Input::Split { h: h[iters].ptr(), nodes: n, h_dim: hd, rest: Some((es[iters].ptr(), hd)) };
        self.mlp_forward(g, &lay.classifier, input, e, classifier, out, None, (split_a, split_b), act)?;
        if let Some(head) = &lay.aux_head {
            let out = aux.get(dev, e)?.ptr();
            let input = Input::Dense { x: es[iters].ptr(), dim: hd };
            self.mlp_forward(g, head, input, e, aux_head, out, None, (split_a, split_b), act)?;
        }
        Ok(())
    }
}
