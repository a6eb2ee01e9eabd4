//! The InteractionGNN's forward on a device: the CPU engine's algorithm (the split first Linear
//! on nodes, a fused epilogue per layer, fixed-order aggregations over the CSR groupings) with
//! the products in [`Backend::gemm`] and everything else in the kernels.

use std::sync::Arc;

use trackgnn_engine::ops::Aggr;
use trackgnn_engine::{InteractionGnn, ModelConfig, Precision, UpdateOrder};

use crate::backend::{Arg, Backend, BackendError, DevBuf, DevPtr, Gemm, WARP, launch};
use crate::graph::DeviceGraph;
use crate::layout::{MlpLayout, ModelLayout};

/// The kernels' code of a list of aggregations: the kind of aggregation k (numbered as the
/// kernels' `AGG_*`) in bits 4k...
pub(crate) fn aggregation_kinds(aggs: &[Aggr]) -> i32 {
    let code = |a: Aggr| match a {
        Aggr::Sum => 0,
        Aggr::Mean => 1,
        Aggr::Max => 2,
        Aggr::Std => 3,
    };
    aggs.iter().enumerate().fold(0, |acc, (k, &a)| acc | (code(a) << (4 * k)))
}

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

/// What a forward of one MLP keeps for its backward: per layer x̂ (or z without a norm), in
/// f32 or (bf16 saved activations) as bf16 bits, and 1/σ per row.
#[derive(Default)]
pub struct MlpCache {
    /// Per layer (rows × dout; unallocated when the layer's x̂ is in `pre16`).
    pub pre: Vec<Slot<f32>>,
    /// Per layer, x̂ rounded to bf16 (rows × dout; unallocated when it is in `pre`).
    pub pre16: Vec<Slot<u16>>,
    /// Per layer (rows; unallocated without a norm).
    pub rstd: Vec<Slot<f32>>,
    /// Keep nothing for a backward (inference, and checkpointing's recomputation of the states
    /// alone): each layer's product goes into its output buffer and x̂ is not saved.
    pub transient: bool,
}

impl MlpCache {
    /// Bytes held on the device.
    pub fn bytes(&self) -> usize {
        self.pre.iter().chain(&self.rstd).map(Slot::bytes).sum::<usize>()
            + self.pre16.iter().map(Slot::bytes).sum::<usize>()
    }

    /// Layer `l`'s saved x̂ for the kernels: its address and whether it is bf16 bits.
    pub(crate) fn saved(&self, l: usize) -> (Arg, Arg) {
        match self.pre16.get(l).and_then(Slot::buf) {
            Some(p) => (p.arg(), Arg::I32(1)),
            None => (Arg::Ptr(self.pre[l].ptr()), Arg::I32(0)),
        }
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

impl AggCache {
    /// Bytes held on the device.
    pub fn bytes(&self) -> usize {
        self.argmax.bytes() + self.mean.bytes() + self.std.bytes()
    }
}

/// What one message-passing iteration keeps for its backward.
#[derive(Default)]
pub struct IterCache {
    /// The node network's input (N × (1 + 2K)·H).
    pub node_in: Slot<f32>,
    /// The aggregation caches: incoming, outgoing.
    pub agg: (AggCache, AggCache),
    /// The edge network's.
    pub edge_net: MlpCache,
    /// The node network's.
    pub node_net: MlpCache,
}

impl IterCache {
    /// Makes its MLP caches [`transient`](MlpCache::transient) or not.
    pub fn set_transient(&mut self, transient: bool) {
        self.edge_net.transient = transient;
        self.node_net.transient = transient;
    }

    /// Bytes held on the device.
    pub fn bytes(&self) -> usize {
        self.node_in.bytes() + self.agg.0.bytes() + self.agg.1.bytes() + self.edge_net.bytes() + self.node_net.bytes()
    }
}

/// Buffers every pass reuses: the split Linear's node products and the MLPs' hidden
/// activations.
#[derive(Default)]
pub struct Scratch {
    /// h·W_aᵀ of a split first layer.
    pub split_a: Slot<f32>,
    /// h·W_bᵀ of a split first layer.
    pub split_b: Slot<f32>,
    /// Hidden activations of the MLPs, two to alternate between layers.
    pub act: [Slot<f32>; 2],
}

impl Scratch {
    /// Bytes held on the device.
    pub fn bytes(&self) -> usize {
        [&self.split_a, &self.split_b, &self.act[0], &self.act[1]].iter().map(|s| s.bytes()).sum()
    }
}

/// The device buffers of a forward: the states, the caches its backward reads, the logits.
/// With activation checkpointing only the states at segment boundaries are kept (in `h`, `e`,
/// or rounded to bf16 in `packed_h`, `packed_e`) and the iterations' caches stay empty.
#[derive(Default)]
pub struct DeviceCache {
    /// Node states h_0 … h_L (N × H; unallocated where not kept).
    pub h: Vec<Slot<f32>>,
    /// Edge states e_0 … e_L (E × H; unallocated where not kept).
    pub e: Vec<Slot<f32>>,
    /// Kept node states in bf16 (checkpointing with `+bf16`).
    pub packed_h: Vec<Slot<u16>>,
    /// Kept edge states in bf16.
    pub packed_e: Vec<Slot<u16>>,
    /// Per iteration (empty with checkpointing).
    pub iters: Vec<IterCache>,
    /// Node encoder.
    pub node_encoder: MlpCache,
    /// Edge encoder (empty with checkpointing).
    pub edge_encoder: MlpCache,
    /// Classifier (empty with checkpointing).
    pub classifier: MlpCache,
    /// Auxiliary head (empty with checkpointing).
    pub aux_head: MlpCache,
    /// Logits (E).
    pub logits: Slot<f32>,
    /// Auxiliary predictions (E; unallocated without the head).
    pub aux: Slot<f32>,
    /// Two rolling states (h, e) of a forward that keeps few.
    pub roll: [(Slot<f32>, Slot<f32>); 2],
    /// Reused buffers.
    pub scratch: Scratch,
}

impl DeviceCache {
    /// Bytes held on the device.
    pub fn bytes(&self) -> usize {
        let slots = |v: &[Slot<f32>]| v.iter().map(Slot::bytes).sum::<usize>();
        let packed = |v: &[Slot<u16>]| v.iter().map(Slot::bytes).sum::<usize>();
        slots(&self.h)
            + slots(&self.e)
            + packed(&self.packed_h)
            + packed(&self.packed_e)
            + self.iters.iter().map(IterCache::bytes).sum::<usize>()
            + [&self.node_encoder, &self.edge_encoder, &self.classifier, &self.aux_head]
                .iter()
                .map(|c| c.bytes())
                .sum::<usize>()
            + self.logits.bytes()
            + self.aux.bytes()
            + self.roll.iter().map(|(a, b)| a.bytes() + b.bytes()).sum::<usize>()
            + self.scratch.bytes()
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
        /// The first edge these rows are (a tile of the edges; 0: from the first).
        row0: usize,
        /// h·W_aᵀ and h·W_bᵀ computed already (the tiles of one MLP application share them).
        products: Option<(DevPtr, DevPtr)>,
    },
}

impl Input {
    /// cat(h\[src\], h\[dst\], rest) over all edges, its node products computed by the call.
    pub fn split(h: DevPtr, nodes: usize, h_dim: usize, rest: Option<(DevPtr, usize)>) -> Input {
        Input::Split { h, nodes, h_dim, rest, row0: 0, products: None }
    }
}

/// Edges per tile where a split MLP runs tile by tile (checkpointing's recomputation and
/// inference): its hidden activations and saved x̂ are a tile's, not the whole graph's.
pub const EDGE_TILE: usize = 1 << 17;

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
    /// Edges per tile of the split MLPs run tile by tile ([`EDGE_TILE`]; at least 1; tests set
    /// small ones through `DeviceExecutor::set_edge_tile`).
    pub(crate) edge_tile: usize,
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
            edge_tile: EDGE_TILE,
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

    /// A split first layer's node products h·W_aᵀ, h·W_bᵀ (nodes × dout) into `split`'s buffers.
    pub(crate) fn split_products(
        &self,
        h: DevPtr,
        nodes: usize,
        h_dim: usize,
        layer: &crate::layout::LayerLayout,
        split: (&mut Slot<f32>, &mut Slot<f32>),
    ) -> Result<(DevPtr, DevPtr), BackendError> {
        let ga = split.0.scratch(&self.dev, nodes * layer.dout)?.ptr();
        let gb = split.1.scratch(&self.dev, nodes * layer.dout)?.ptr();
        self.linear(h, nodes, h_dim, h_dim, layer.w, layer.din, 0, layer.dout, ga)?;
        self.linear(h, nodes, h_dim, h_dim, layer.w, layer.din, h_dim, layer.dout, gb)?;
        Ok((ga, gb))
    }

    /// Forward of split MLP `mlp` (node states `h`, third block `rest`) over every edge into
    /// `out` (+ `residual`): whole when `cache` keeps x̂ for a backward, else tile by tile
    /// ([`EDGE_TILE`] edges), the node products computed once.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn split_forward(
        &self,
        g: &DeviceGraph,
        mlp: &MlpLayout,
        (h, rest): (DevPtr, Option<(DevPtr, usize)>),
        out: DevPtr,
        residual: Option<DevPtr>,
        cache: &mut MlpCache,
        sc: &mut Scratch,
    ) -> Result<(), BackendError> {
        let (n, e, hd) = (g.num_nodes, g.num_edges, self.cfg.hidden);
        if !cache.transient || e <= self.edge_tile {
            return self.mlp_forward(g, mlp, Input::split(h, n, hd, rest), e, cache, out, residual, sc);
        }
        let products = Some(self.split_products(h, n, hd, &mlp.layers[0], (&mut sc.split_a, &mut sc.split_b))?);
        let dout = mlp.layers.last().map_or(0, |l| l.dout);
        for r0 in (0..e).step_by(self.edge_tile) {
            let rows = self.edge_tile.min(e - r0);
            let at = |p: DevPtr, width: usize| p + (r0 * width * 4) as u64;
            let rest = rest.map(|(r, rd)| (at(r, rd), rd));
            let input = Input::Split { h, nodes: n, h_dim: hd, rest, row0: r0, products };
            self.mlp_forward(g, mlp, input, rows, cache, at(out, dout), residual.map(|r| at(r, dout)), sc)?;
        }
        Ok(())
    }

    /// Forward of `mlp` over `rows` rows of `input` into `out` (rows × dout, plus `residual`
    /// when given), keeping x̂ and 1/σ in `cache` (at least rows long: a cache reused by MLPs of
    /// other row counts keeps its largest buffers).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn mlp_forward(
        &self,
        g: &DeviceGraph,
        mlp: &MlpLayout,
        input: Input,
        rows: usize,
        cache: &mut MlpCache,
        out: DevPtr,
        residual: Option<DevPtr>,
        sc: &mut Scratch,
    ) -> Result<(), BackendError> {
        let dev = &self.dev;
        let (split, act) = ((&mut sc.split_a, &mut sc.split_b), &mut sc.act);
        let n_layers = mlp.layers.len();
        cache.pre.resize_with(n_layers, Slot::default);
        cache.pre16.resize_with(n_layers, Slot::default);
        cache.rstd.resize_with(n_layers, Slot::default);
        let width = mlp.layers.iter().map(|l| l.dout).max().unwrap_or(0);
        let packed = self.saved == Precision::Bf16;
        for (l, layer) in mlp.layers.iter().enumerate() {
            let last = l + 1 == n_layers;
            let y = if last { out } else { act[l % 2].scratch(dev, rows * width)?.ptr() };
            // With bf16 saved activations the product goes into the output, where the epilogue
            // turns it into y in place, and x̂ into half the bytes; else it goes into the f32
            // cache, which keeps x̂.
            let (z, saved16) = if cache.transient {
                cache.pre[l] = Slot::default();
                cache.pre16[l] = Slot::default();
                (y, 0)
            } else if packed {
                cache.pre[l] = Slot::default();
                (y, cache.pre16[l].scratch(dev, rows * layer.dout)?.ptr())
            } else {
                cache.pre16[l] = Slot::default();
                (cache.pre[l].scratch(dev, rows * layer.dout)?.ptr(), 0)
            };
            let rstd = if layer.norm { cache.rstd[l].scratch(dev, rows)?.ptr() } else { 0 };
            let (mut split_mode, mut row0) = (0, 0);
            let (mut ga, mut gb) = (0, 0);
            if l == 0 {
                match input {
                    Input::Dense { x, dim } => self.linear(x, rows, dim, dim, layer.w, layer.din, 0, layer.dout, z)?,
                    Input::Split { h, nodes, h_dim, rest, row0: r0, products } => {
                        (ga, gb) = match products {
                            Some(p) => p,
                            None => self.split_products(h, nodes, h_dim, layer, (&mut *split.0, &mut *split.1))?,
                        };
                        row0 = r0;
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
                    Arg::Ptr(g.src.ptr() + (row0 * 4) as u64),
                    Arg::Ptr(g.dst.ptr() + (row0 * 4) as u64),
                    Arg::I32(split_mode),
                    Arg::Ptr(gamma),
                    Arg::Ptr(beta),
                    Arg::I32(layer.norm.into()),
                    Arg::Ptr(rstd),
                    Arg::I32(layer.act),
                    Arg::Ptr(res),
                    Arg::Ptr(y),
                    Arg::Ptr(saved16),
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
            let argmax = if has_max { cache.argmax.scratch(&self.dev, n * hd)?.ptr() } else { 0 };
            let (mean, std) = if has_std {
                (cache.mean.scratch(&self.dev, n * hd)?.ptr(), cache.std.scratch(&self.dev, n * hd)?.ptr())
            } else {
                (0, 0)
            };
            // Every aggregation of this side in one pass over its edges (two with std).
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
                    Arg::I32(aggregation_kinds(aggs)),
                    Arg::int(k),
                    Arg::Ptr(node_in),
                    Arg::int(ld),
                    Arg::int((1 + side * k) * hd),
                    Arg::Ptr(argmax),
                    Arg::Ptr(mean),
                    Arg::Ptr(std),
                ],
            )?;
        }
        Ok(())
    }

    /// The encoders: h_0 from the node features, e_0 from h_0 and the edge features, keeping
    /// their caches in `node_cache` and `edge_cache`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn encoders(
        &self,
        g: &DeviceGraph,
        h0: DevPtr,
        e0: DevPtr,
        node_cache: &mut MlpCache,
        edge_cache: &mut MlpCache,
        sc: &mut Scratch,
    ) -> Result<(), BackendError> {
        let (n, lay) = (g.num_nodes, &self.layout);
        let x = Input::Dense { x: g.x.ptr(), dim: g.node_dim };
        self.mlp_forward(g, &lay.node_encoder, x, n, node_cache, h0, None, sc)?;
        self.split_forward(g, &lay.edge_encoder, (h0, self.edge_features(g)), e0, None, edge_cache, sc)
    }

    /// The edge features as a split MLP's third block, if the graph has any.
    pub(crate) fn edge_features(&self, g: &DeviceGraph) -> Option<(DevPtr, usize)> {
        (g.edge_dim > 0).then(|| (g.edge_attr.ptr(), g.edge_dim))
    }

    /// The edge encoder's input: its split first layer on h_0, the edge features its rest.
    pub(crate) fn edge_encoder_input(&self, g: &DeviceGraph, h0: DevPtr) -> Input {
        Input::split(h0, g.num_nodes, self.cfg.hidden, self.edge_features(g))
    }

    /// Message-passing iteration `it`: (h_prev, e_prev) → (h_next, e_next), keeping its caches
    /// in `ic`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn iteration(
        &self,
        g: &DeviceGraph,
        it: usize,
        (h_prev, e_prev): (DevPtr, DevPtr),
        (h_next, e_next): (DevPtr, DevPtr),
        ic: &mut IterCache,
        sc: &mut Scratch,
    ) -> Result<(), BackendError> {
        let hd = self.cfg.hidden;
        let (edge_mlp, node_mlp) = self.layout.nets(&self.cfg, it);
        let node_first = self.cfg.update_order == UpdateOrder::NodeFirst;
        let residual = self.cfg.residual;
        if !node_first {
            let res = residual.then_some(e_prev);
            self.split_forward(g, edge_mlp, (h_prev, Some((e_prev, hd))), e_next, res, &mut ic.edge_net, sc)?;
        }
        let e_agg = if node_first { e_prev } else { e_next };
        self.node_update(g, node_mlp, h_prev, e_agg, h_next, ic, sc)?;
        if node_first {
            let res = residual.then_some(e_prev);
            self.split_forward(g, edge_mlp, (h_next, Some((e_prev, hd))), e_next, res, &mut ic.edge_net, sc)?;
        }
        Ok(())
    }

    /// The node update h_next = \[h_prev +\] node_mlp(cat(h_prev, aggregations of e_agg)),
    /// keeping the node network's input and caches in `ic`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn node_update(
        &self,
        g: &DeviceGraph,
        node_mlp: &MlpLayout,
        h_prev: DevPtr,
        e_agg: DevPtr,
        h_next: DevPtr,
        ic: &mut IterCache,
        sc: &mut Scratch,
    ) -> Result<(), BackendError> {
        let node_in = ic.node_in.scratch(&self.dev, g.num_nodes * self.widest_row())?.ptr();
        self.node_input(g, h_prev, e_agg, node_in, &mut ic.agg)?;
        let input = Input::Dense { x: node_in, dim: self.widest_row() };
        let residual = self.cfg.residual.then_some(h_prev);
        self.mlp_forward(g, node_mlp, input, g.num_nodes, &mut ic.node_net, h_next, residual, sc)
    }

    /// The classifier's logits from h_L, e_L into `logits`, and the auxiliary head's
    /// predictions into `aux` when the model has it; their caches in `cls`, `head`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn heads(
        &self,
        g: &DeviceGraph,
        (h_last, e_last): (DevPtr, DevPtr),
        (logits, aux): (DevPtr, DevPtr),
        cls: &mut MlpCache,
        head: &mut MlpCache,
        sc: &mut Scratch,
    ) -> Result<(), BackendError> {
        let (e, hd, lay) = (g.num_edges, self.cfg.hidden, &self.layout);
        self.split_forward(g, &lay.classifier, (h_last, Some((e_last, hd))), logits, None, cls, sc)?;
        if let Some(aux_mlp) = &lay.aux_head {
            self.mlp_forward(g, aux_mlp, Input::Dense { x: e_last, dim: hd }, e, head, aux, None, sc)?;
        }
        Ok(())
    }

    /// The forward on `g`: fills `cache`, its logits (and auxiliary predictions) included.
    pub fn forward(&self, g: &DeviceGraph, cache: &mut DeviceCache) -> Result<(), BackendError> {
        let dev = &self.dev;
        let (n, e, hd) = (g.num_nodes, g.num_edges, self.cfg.hidden);
        let iters = self.cfg.iterations;
        cache.packed_h.clear();
        cache.packed_e.clear();
        cache.h.resize_with(iters + 1, Slot::default);
        cache.e.resize_with(iters + 1, Slot::default);
        cache.iters.resize_with(iters, Default::default);
        for s in &mut cache.h {
            s.get(dev, n * hd)?;
        }
        for s in &mut cache.e {
            s.get(dev, e * hd)?;
        }
        let DeviceCache {
            h,
            e: es,
            iters: ics,
            node_encoder,
            edge_encoder,
            classifier,
            aux_head,
            logits,
            aux,
            scratch,
            ..
        } = cache;
        // Every cache is kept for the backward (a checkpointed forward or an inference on this
        // cache may have made some transient).
        for c in [&mut *node_encoder, &mut *edge_encoder, &mut *classifier, &mut *aux_head] {
            c.transient = false;
        }
        ics.iter_mut().for_each(|ic| ic.set_transient(false));
        self.encoders(g, h[0].ptr(), es[0].ptr(), node_encoder, edge_encoder, scratch)?;
        for (it, ic) in ics.iter_mut().enumerate() {
            self.iteration(g, it, (h[it].ptr(), es[it].ptr()), (h[it + 1].ptr(), es[it + 1].ptr()), ic, scratch)?;
        }
        let logits = logits.get(dev, e)?.ptr();
        let aux = if self.layout.aux_head.is_some() { aux.get(dev, e)?.ptr() } else { 0 };
        self.heads(g, (h[iters].ptr(), es[iters].ptr()), (logits, aux), classifier, aux_head, scratch)
    }

    /// The logits (and auxiliary predictions) of `g` with the least memory: two rolling states
    /// and every MLP's cache in one reused buffer, nothing kept for a backward.
    pub fn infer(&self, g: &DeviceGraph, cache: &mut DeviceCache) -> Result<(), BackendError> {
        let dev = &self.dev;
        let (n, e, hd) = (g.num_nodes, g.num_edges, self.cfg.hidden);
        cache.h.clear();
        cache.e.clear();
        cache.packed_h.clear();
        cache.packed_e.clear();
        cache.iters.truncate(1);
        cache.iters.resize_with(1, Default::default);
        let DeviceCache { iters, node_encoder, logits, aux, roll, scratch, .. } = cache;
        let mut ptrs = [(0, 0); 2];
        for (p, (hs, es)) in ptrs.iter_mut().zip(roll.iter_mut()) {
            *p = (hs.scratch(dev, n * hd)?.ptr(), es.scratch(dev, e * hd)?.ptr());
        }
        // One cache for every MLP, its buffers at the largest row count: the iteration's; none
        // keeps anything for a backward.
        let ic = &mut iters[0];
        ic.set_transient(true);
        node_encoder.transient = true;
        let mlp = &mut ic.edge_net;
        self.encoders(g, ptrs[0].0, ptrs[0].1, node_encoder, mlp, scratch)?;
        for it in 0..self.cfg.iterations {
            let (cur, next) = (ptrs[it % 2], ptrs[(it + 1) % 2]);
            self.iteration(g, it, cur, next, ic, scratch)?;
        }
        let last = ptrs[self.cfg.iterations % 2];
        let logits = logits.get(dev, e)?.ptr();
        let aux = if self.layout.aux_head.is_some() { aux.get(dev, e)?.ptr() } else { 0 };
        let IterCache { edge_net, node_net, .. } = &mut iters[0];
        self.heads(g, last, (logits, aux), edge_net, node_net, scratch)
    }
}
