//! The InteractionGNN's hand-derived backward on a device, the CPU engine's in the same order:
//! each MLP from its last layer to its first (the epilogue's backward in one kernel, the weight
//! gradients as products, the bias and norm gradients as fixed-order column sums), the split
//! first Linear's node side through CSR pulls, the aggregations' backward per edge.

use trackgnn_engine::UpdateOrder;

use crate::backend::{Arg, BackendError, DevPtr, Gemm, WARP, launch};
use crate::graph::{DeviceCsr, DeviceGraph};
use crate::layout::MlpLayout;
use crate::model::{AggCache, DeviceCache, DeviceModel, Input, IterCache, MlpCache, Slot, aggregation_kinds};

/// Where an MLP's backward puts the gradient with respect to its input.
#[derive(Clone, Copy)]
pub enum DInput {
    /// Nowhere.
    None,
    /// dx (rows × dim), added to (`accumulate`) or overwritten.
    Dense {
        /// The buffer.
        dx: DevPtr,
        /// Add instead of overwrite.
        accumulate: bool,
    },
    /// A tile of a split first layer (a split MLP backpropagated tile by tile): the rest block's
    /// gradient to `drest` (the tile's rows), dz_1 into `dz1` (the tile's rows of one buffer
    /// over all edges, pulled to the nodes once every tile is done).
    SplitTile {
        /// The rest block's gradient and whether to add to it.
        drest: Option<(DevPtr, bool)>,
        /// Where the tile's dz_1 goes.
        dz1: DevPtr,
    },
    /// A split first layer: the rest block's gradient to `drest` (added or overwritten), the
    /// node states' gradient added to `dh` (through dz_1 summed over each node's edges).
    Split {
        /// The rest block's gradient and whether to add to it.
        drest: Option<(DevPtr, bool)>,
        /// dL/dh of the node states the split products read.
        dh: DevPtr,
    },
}

/// Where an iteration's backward finds its edge network's activations.
#[derive(Clone, Copy)]
pub(crate) enum EdgeActivations {
    /// In the iteration's cache, from its forward.
    Cached,
    /// Nowhere: the network is recomputed and backpropagated tile by tile (checkpointing).
    Recomputed,
}

/// The backward's device buffers, reused from step to step.
#[derive(Default)]
pub struct Workspace {
    /// dL/dh of the current iteration (N × H).
    pub dh: Slot<f32>,
    /// dL/dh of the previous iteration (N × H).
    pub dh_prev: Slot<f32>,
    /// dL/de, updated in place from iteration to iteration (E × H).
    pub de: Slot<f32>,
    /// A split MLP's first-layer gradient over all edges, held during its tiled backward only.
    pub dz1: Slot<f32>,
    /// dL/d(node-network input) (N × (1 + 2K)·H), held during a node update's backward only.
    pub dnode_in: Slot<f32>,
    /// dz_1 pulled over each node's outgoing edges (N × d1).
    pub da: Slot<f32>,
    /// dz_1 pulled over each node's incoming edges (N × d1).
    pub db: Slot<f32>,
    /// Layer gradients in `act` (two to alternate between layers), and the checkpointed
    /// backward's recomputed forwards, whose hidden activations are dead by the time their
    /// backward needs gradient buffers.
    pub sc: crate::model::Scratch,
    /// Partial column sums.
    pub partial: Slot<f32>,
    /// The upstream gradients uploaded: dL/dlogits, dL/daux.
    pub upstream: [Slot<f32>; 2],
    /// The checkpointed backward's recomputation.
    pub recompute: crate::checkpoint::RecomputeScratch,
}

impl Workspace {
    /// Bytes held on the device.
    pub fn bytes(&self) -> usize {
        [&self.dh, &self.dh_prev, &self.de, &self.dz1, &self.dnode_in, &self.da, &self.db]
            .iter()
            .chain([&self.partial, &self.upstream[0], &self.upstream[1]].iter())
            .map(|s| s.bytes())
            .sum::<usize>()
            + self.sc.bytes()
            + self.recompute.bytes()
    }
}

/// Rows per partial of the column sums (the kernels' `COLUMN_CHUNK`).
pub(crate) const COLUMN_CHUNK: usize = 1024;

impl DeviceModel {
    /// out (d) += Σ over rows of a (rows × d), times b element-wise when given; fixed order.
    fn column_sums(
        &self,
        a: DevPtr,
        b: Option<DevPtr>,
        rows: usize,
        d: usize,
        out: DevPtr,
        partial: &mut Slot<f32>,
    ) -> Result<(), BackendError> {
        let chunks = rows.div_ceil(COLUMN_CHUNK);
        if chunks == 0 {
            return Ok(());
        }
        let p = partial.scratch(&self.dev, chunks * d)?.ptr();
        let dev = self.dev.as_ref();
        launch(
            dev,
            "column_partials",
            chunks * d,
            &[Arg::Ptr(a), Arg::Ptr(b.unwrap_or(0)), Arg::int(rows), Arg::int(d), Arg::Ptr(p)],
        )?;
        launch(dev, "column_total", d, &[Arg::Ptr(p), Arg::int(chunks), Arg::int(d), Arg::Ptr(out)])
    }

    /// An affine norm's γ and β gradients (added at `out`) from dL/d(its layer's output) `g_in`
    /// and the saved x̂: the column sums of gy ⊙ x̂ and of gy, gy = g_in ⊙ act'(x̂·γ + β),
    /// without storing gy.
    #[allow(clippy::too_many_arguments)]
    fn norm_param_grads(
        &self,
        g_in: DevPtr,
        (pre, pre_bf16): (Arg, Arg),
        (gamma, beta, act): (DevPtr, DevPtr, i32),
        rows: usize,
        d: usize,
        (out_g, out_b): (DevPtr, DevPtr),
        ws: &mut Workspace,
    ) -> Result<(), BackendError> {
        let chunks = rows.div_ceil(COLUMN_CHUNK);
        if chunks == 0 {
            return Ok(());
        }
        let pg = ws.partial.scratch(&self.dev, 2 * chunks * d)?.ptr();
        let pb = pg + (chunks * d * 4) as u64;
        let dev = self.dev.as_ref();
        launch(
            dev,
            "norm_param_partials",
            chunks * d,
            &[
                Arg::Ptr(g_in),
                pre,
                pre_bf16,
                Arg::Ptr(gamma),
                Arg::Ptr(beta),
                Arg::I32(act),
                Arg::int(rows),
                Arg::int(d),
                Arg::Ptr(pg),
                Arg::Ptr(pb),
            ],
        )?;
        for (p, out) in [(pg, out_g), (pb, out_b)] {
            launch(dev, "column_total", d, &[Arg::Ptr(p), Arg::int(chunks), Arg::int(d), Arg::Ptr(out)])?;
        }
        Ok(())
    }

    /// C (+)= op(A)·op(B) on row-major matrices.
    #[allow(clippy::too_many_arguments)]
    fn product(
        &self,
        (m, n, k): (usize, usize, usize),
        a: (DevPtr, usize, bool),
        b: (DevPtr, usize, bool),
        c: (DevPtr, usize),
        accumulate: bool,
    ) -> Result<(), BackendError> {
        self.dev.gemm(&Gemm {
            m,
            n,
            k,
            a: a.0,
            lda: a.1,
            trans_a: a.2,
            b: b.0,
            ldb: b.1,
            trans_b: b.2,
            c: c.0,
            ldc: c.1,
            alpha: 1.0,
            beta: if accumulate { 1.0 } else { 0.0 },
            bf16: self.precision == trackgnn_engine::Precision::Bf16,
        })
    }

    /// Backward of one MLP application over `rows` rows: from dL/d(output) in `dy`, adds its
    /// parameters' gradients into `grad` and the input's as `din` asks.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn mlp_backward(
        &self,
        g: &DeviceGraph,
        mlp: &MlpLayout,
        input: Input,
        rows: usize,
        cache: &MlpCache,
        dy: DevPtr,
        din: DInput,
        grad: DevPtr,
        ws: &mut Workspace,
    ) -> Result<(), BackendError> {
        let dev = &self.dev;
        let n_layers = mlp.layers.len();
        // A layer's gradient and a hidden layer's input are as wide as some layer's output (the
        // first layer's input gradient goes where `din` says, never into these).
        let width = mlp.layers.iter().map(|l| l.dout).max().unwrap_or(0);
        let gw = |offset: usize| grad + (offset * 4) as u64;
        let mut g_in = dy;
        for l in (0..n_layers).rev() {
            let layer = &mlp.layers[l];
            let d = layer.dout;
            // dz in place of the layer's output gradient where that is ours (a split first
            // layer's dz_1 included: it never leaves this call).
            let dz = match (l, din) {
                (0, DInput::SplitTile { dz1, .. }) => dz1,
                _ => ws.sc.act[l % 2].scratch(dev, rows * width)?.ptr(),
            };
            let (gamma, beta) = layer.affine.map_or((0, 0), |(g, b)| (self.w(g), self.w(b)));
            let (pre, pre_bf16) = cache.saved(l);
            if let Some((gi, bi)) = layer.affine {
                // γ and β from g_in before the layer's backward overwrites it (dz may be g_in).
                self.norm_param_grads(g_in, (pre, pre_bf16), (gamma, beta, layer.act), rows, d, (gw(gi), gw(bi)), ws)?;
            }
            launch(
                dev.as_ref(),
                "layer_backward",
                rows * WARP,
                &[
                    Arg::Ptr(g_in),
                    pre,
                    pre_bf16,
                    Arg::Ptr(cache.rstd[l].ptr()),
                    Arg::Ptr(gamma),
                    Arg::Ptr(beta),
                    Arg::I32(layer.norm.into()),
                    Arg::I32(layer.act),
                    Arg::Ptr(dz),
                    Arg::int(rows),
                    Arg::int(d),
                ],
            )?;
            self.column_sums(dz, None, rows, d, gw(layer.b), &mut ws.partial)?;
            let din_w = layer.din;
            if l > 0 {
                // dW_l += dzᵀ·a_{l−1}, with a_{l−1} recomputed into the buffer that then takes
                // dL/da_{l−1} = dz·W_l.
                let prev = &mlp.layers[l - 1];
                let next = ws.sc.act[(l + 1) % 2].scratch(dev, rows * width)?.ptr();
                let acts = next;
                let (pg, pb) = prev.affine.map_or((0, 0), |(g, b)| (self.w(g), self.w(b)));
                let prev_saved = cache.saved(l - 1);
                launch(
                    dev.as_ref(),
                    "recompute_act",
                    rows * din_w,
                    &[
                        prev_saved.0,
                        prev_saved.1,
                        Arg::Ptr(pg),
                        Arg::Ptr(pb),
                        Arg::I32(prev.act),
                        Arg::Ptr(acts),
                        Arg::int(rows),
                        Arg::int(din_w),
                    ],
                )?;
                self.product((d, din_w, rows), (dz, d, true), (acts, din_w, false), (gw(layer.w), din_w), true)?;
                self.product((rows, din_w, d), (dz, d, false), (self.w(layer.w), din_w, false), (next, din_w), false)?;
                g_in = next;
                continue;
            }
            match (input, din) {
                (Input::Dense { x, dim }, _) => {
                    self.product((d, dim, rows), (dz, d, true), (x, dim, false), (gw(layer.w), din_w), true)?;
                    if let DInput::Dense { dx, accumulate } = din {
                        self.product(
                            (rows, dim, d),
                            (dz, d, false),
                            (self.w(layer.w), din_w, false),
                            (dx, dim),
                            accumulate,
                        )?;
                    }
                }
                (Input::Split { rest, .. }, DInput::SplitTile { drest, .. }) => {
                    self.rest_backward(layer, rest, dz, rows, drest, grad)?;
                }
                (Input::Split { h, nodes, h_dim, rest, .. }, DInput::Split { drest, dh }) => {
                    self.rest_backward(layer, rest, dz, rows, drest, grad)?;
                    self.split_backward_nodes(g, layer.w, (d, din_w), dz, (h, nodes, h_dim), dh, grad, ws)?;
                }
                (Input::Split { .. }, _) => unreachable!("a split input's gradient is DInput::Split"),
            }
        }
        Ok(())
    }

    /// The rest block's side of a split first layer over `rows` rows: dW_c += dzᵀ·rest and,
    /// where `drest` says, dL/drest (+)= dz·W_c.
    fn rest_backward(
        &self,
        layer: &crate::layout::LayerLayout,
        rest: Option<(DevPtr, usize)>,
        dz: DevPtr,
        rows: usize,
        drest: Option<(DevPtr, bool)>,
        grad: DevPtr,
    ) -> Result<(), BackendError> {
        let Some((r, rd)) = rest else { return Ok(()) };
        let (d, din) = (layer.dout, layer.din);
        let wc = ((layer.w + din - rd) * 4) as u64;
        self.product((d, rd, rows), (dz, d, true), (r, rd, false), (grad + wc, din), true)?;
        if let Some((dr, accumulate)) = drest {
            self.product((rows, rd, d), (dz, d, false), (self.params.ptr() + wc, din, false), (dr, rd), accumulate)?;
        }
        Ok(())
    }

    /// The backward of split MLP `mlp` (node states `h`, third block `rest`) over every edge,
    /// recomputed tile by tile ([`DeviceModel::edge_tile`] edges): each tile's forward with its
    /// caches, then its backward from its rows of `dy`, the rest block's gradient into its rows
    /// of `drest`; the first layer's dz over all edges in one buffer, pulled to the nodes into
    /// `dh` once at the end. Only a tile's activations are ever alive.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn split_backward_tiled(
        &self,
        g: &DeviceGraph,
        mlp: &MlpLayout,
        (h, rest): (DevPtr, Option<(DevPtr, usize)>),
        dy: DevPtr,
        drest: Option<(DevPtr, bool)>,
        dh: DevPtr,
        grad: DevPtr,
        ws: &mut Workspace,
    ) -> Result<(), BackendError> {
        let (n, e, hd) = (g.num_nodes, g.num_edges, self.cfg.hidden);
        let first = &mlp.layers[0];
        let (d1, dout) = (first.dout, mlp.layers.last().map_or(0, |l| l.dout));
        // The MLP buffers at a tile's size from here on.
        ws.sc.act = Default::default();
        let products = Some(self.split_products(h, n, hd, first, (&mut ws.sc.split_a, &mut ws.sc.split_b))?);
        let dz1 = ws.dz1.get(&self.dev, e * d1)?.ptr();
        let mut cache = MlpCache::default();
        let mut out = Slot::<f32>::default();
        for r0 in (0..e).step_by(self.edge_tile) {
            let rows = self.edge_tile.min(e - r0);
            let at = |p: DevPtr, width: usize| p + (r0 * width * 4) as u64;
            let rest = rest.map(|(r, rd)| (at(r, rd), rd));
            let input = Input::Split { h, nodes: n, h_dim: hd, rest, row0: r0, products };
            let y = out.scratch(&self.dev, rows * dout)?.ptr();
            self.mlp_forward(g, mlp, input, rows, &mut cache, y, None, &mut ws.sc)?;
            let drest = rest.and(drest).map(|(p, acc)| (at(p, rest.map_or(0, |r| r.1)), acc));
            let din = DInput::SplitTile { drest, dz1: at(dz1, d1) };
            self.mlp_backward(g, mlp, input, rows, &cache, at(dy, dout), din, grad, ws)?;
        }
        drop((cache, out));
        ws.sc.act = Default::default();
        self.split_backward_nodes(g, first.w, (d1, first.din), dz1, (h, n, hd), dh, grad, ws)?;
        ws.dz1 = Slot::default();
        Ok(())
    }

    /// The node side of a split first layer (weight at `w`, d1 × din): dA, dB = dz_1 pulled
    /// over each node's outgoing and incoming edges; dW_a += dAᵀ·h, dW_b += dBᵀ·h;
    /// dh += dA·W_a + dB·W_b.
    #[allow(clippy::too_many_arguments)]
    fn split_backward_nodes(
        &self,
        g: &DeviceGraph,
        w: usize,
        (d1, din): (usize, usize),
        dz1: DevPtr,
        (h, nodes, h_dim): (DevPtr, usize, usize),
        dh: DevPtr,
        grad: DevPtr,
        ws: &mut Workspace,
    ) -> Result<(), BackendError> {
        let dev = &self.dev;
        let da = ws.da.scratch(dev, nodes * d1)?.ptr();
        let db = ws.db.scratch(dev, nodes * d1)?.ptr();
        self.pull(dz1, d1, &g.out_edges, nodes, da)?;
        self.pull(dz1, d1, &g.in_edges, nodes, db)?;
        let gwa = grad + (w * 4) as u64;
        let gwb = gwa + (h_dim * 4) as u64;
        self.product((d1, h_dim, nodes), (da, d1, true), (h, h_dim, false), (gwa, din), true)?;
        self.product((d1, h_dim, nodes), (db, d1, true), (h, h_dim, false), (gwb, din), true)?;
        let wa = self.w(w);
        let wb = wa + (h_dim * 4) as u64;
        self.product((nodes, h_dim, d1), (da, d1, false), (wa, din, false), (dh, h_dim), true)?;
        self.product((nodes, h_dim, d1), (db, d1, false), (wb, din, false), (dh, h_dim), true)
    }

    /// out\[v\] = Σ over node v's edges of x\[e\] (rows of width d).
    fn pull(&self, x: DevPtr, d: usize, csr: &DeviceCsr, nodes: usize, out: DevPtr) -> Result<(), BackendError> {
        launch(
            self.dev.as_ref(),
            "csr_pull",
            nodes * d,
            &[Arg::Ptr(x), Arg::int(d), csr.offsets.arg(), csr.edges.arg(), Arg::int(nodes), Arg::Ptr(out)],
        )
    }

    /// Backward of a node update h_next = \[h_in +\] node_net(node_in): from dL/dh_next in
    /// `ws.dh`, writes dL/dh_in into `ws.dh_prev` and adds dL/de_agg into `ws.de`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn node_update_backward(
        &self,
        g: &DeviceGraph,
        node_mlp: &MlpLayout,
        node_in: DevPtr,
        cache: &MlpCache,
        e_agg: DevPtr,
        agg: &(AggCache, AggCache),
        grad: DevPtr,
        ws: &mut Workspace,
    ) -> Result<(), BackendError> {
        let (n, e, hd) = (g.num_nodes, g.num_edges, self.cfg.hidden);
        let aggs = &self.cfg.aggregation;
        let k = aggs.len();
        let ld = (1 + 2 * k) * hd;
        let dnode_in = ws.dnode_in.get(&self.dev, n * ld)?.ptr();
        let input = Input::Dense { x: node_in, dim: ld };
        let dh = ws.dh.ptr();
        self.mlp_backward(
            g,
            node_mlp,
            input,
            n,
            cache,
            dh,
            DInput::Dense { dx: dnode_in, accumulate: false },
            grad,
            ws,
        )?;
        let dev = self.dev.as_ref();
        let dh_prev = ws.dh_prev.ptr();
        launch(
            dev,
            "node_state_grad",
            n * hd,
            &[
                Arg::Ptr(dh),
                Arg::Ptr(dnode_in),
                Arg::int(ld),
                Arg::I32(self.cfg.residual.into()),
                Arg::Ptr(dh_prev),
                Arg::int(n),
                Arg::int(hd),
            ],
        )?;
        let kinds = aggregation_kinds(aggs);
        let groupings = [(&g.dst, &g.in_edges, hd, &agg.0), (&g.src, &g.out_edges, (1 + k) * hd, &agg.1)];
        for (node_of_edge, csr, col0, cache) in groupings {
            launch(
                dev,
                "aggregate_backward",
                e * hd,
                &[
                    Arg::Ptr(e_agg),
                    Arg::int(hd),
                    node_of_edge.arg(),
                    csr.offsets.arg(),
                    Arg::I32(kinds),
                    Arg::int(k),
                    Arg::Ptr(dnode_in),
                    Arg::int(ld),
                    Arg::int(col0),
                    Arg::Ptr(cache.argmax.ptr()),
                    Arg::Ptr(cache.mean.ptr()),
                    Arg::Ptr(cache.std.ptr()),
                    Arg::Ptr(ws.de.ptr()),
                    Arg::int(e),
                ],
            )?;
        }
        // The widest buffer of the node side goes back to the allocator until the next node
        // update's backward: it would otherwise sit beside the edge network's backward.
        ws.dnode_in = Slot::default();
        Ok(())
    }

    /// Sizes the backward's gradient buffers and zeroes dL/dh and dL/de.
    pub(crate) fn start_backward(&self, g: &DeviceGraph, ws: &mut Workspace) -> Result<(), BackendError> {
        let (dev, n, e, hd) = (&self.dev, g.num_nodes, g.num_edges, self.cfg.hidden);
        for s in [&mut ws.dh, &mut ws.dh_prev] {
            s.get(dev, n * hd)?.zero()?;
        }
        ws.de.get(dev, e * hd)?.zero()?;
        Ok(())
    }

    /// Backward of the classifier (and the auxiliary head, given dL/daux) on h_L, e_L: dL/de_L
    /// into `ws.de`, dL/dh_L into `ws.dh`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn heads_backward(
        &self,
        g: &DeviceGraph,
        (h_last, e_last): (DevPtr, DevPtr),
        (cls, head_cache): (&MlpCache, &MlpCache),
        (dlogits, daux): (DevPtr, Option<DevPtr>),
        grad: DevPtr,
        ws: &mut Workspace,
    ) -> Result<(), BackendError> {
        let (n, e, hd, lay) = (g.num_nodes, g.num_edges, self.cfg.hidden, &self.layout);
        let input = Input::split(h_last, n, hd, Some((e_last, hd)));
        let din = DInput::Split { drest: Some((ws.de.ptr(), true)), dh: ws.dh.ptr() };
        self.mlp_backward(g, &lay.classifier, input, e, cls, dlogits, din, grad, ws)?;
        if let (Some(head), Some(daux)) = (&lay.aux_head, daux) {
            let input = Input::Dense { x: e_last, dim: hd };
            let din = DInput::Dense { dx: ws.de.ptr(), accumulate: true };
            self.mlp_backward(g, head, input, e, head_cache, daux, din, grad, ws)?;
        }
        Ok(())
    }

    /// Backward of iteration `it` (its input states h_it, e_it, its outputs h_next, e_next, its
    /// caches `ic`): from dL/dh_next in `ws.dh` and dL/de_next in `ws.de` to dL/dh_it in `ws.dh`
    /// and dL/de_it in `ws.de`. The edge network's activations are `edge`'s: its cache in `ic`,
    /// or recomputed tile by tile ([`EdgeActivations::Recomputed`]: `ic` then holds the node
    /// update's caches alone).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn iteration_backward(
        &self,
        g: &DeviceGraph,
        it: usize,
        (h_it, e_it): (DevPtr, DevPtr),
        (h_next, e_next): (DevPtr, DevPtr),
        ic: &IterCache,
        edge: EdgeActivations,
        grad: DevPtr,
        ws: &mut Workspace,
    ) -> Result<(), BackendError> {
        let (edge_mlp, node_mlp) = self.layout.nets(&self.cfg, it);
        let node_in = ic.node_in.ptr();
        // The edge network on (h_in, e_it), its node side into `dh`.
        let edge_backward = |this: &Self, h_in: DevPtr, dh: DevPtr, ws: &mut Workspace| {
            let (de, hd) = (ws.de.ptr(), this.cfg.hidden);
            let drest = Some((de, this.cfg.residual));
            match edge {
                EdgeActivations::Cached => {
                    let input = Input::split(h_in, g.num_nodes, hd, Some((e_it, hd)));
                    let din = DInput::Split { drest, dh };
                    this.mlp_backward(g, edge_mlp, input, g.num_edges, &ic.edge_net, de, din, grad, ws)
                }
                EdgeActivations::Recomputed => {
                    this.split_backward_tiled(g, edge_mlp, (h_in, Some((e_it, hd))), de, drest, dh, grad, ws)
                }
            }
        };
        if self.cfg.update_order == UpdateOrder::NodeFirst {
            // e_{it+1} from h_{it+1} and e_it, after h_{it+1} from h_it and agg(e_it).
            edge_backward(self, h_next, ws.dh.ptr(), ws)?;
            self.node_update_backward(g, node_mlp, node_in, &ic.node_net, e_it, &ic.agg, grad, ws)?;
        } else {
            // h_{it+1} from h_it and agg(e_{it+1}), after e_{it+1} from h_it and e_it.
            self.node_update_backward(g, node_mlp, node_in, &ic.node_net, e_next, &ic.agg, grad, ws)?;
            edge_backward(self, h_it, ws.dh_prev.ptr(), ws)?;
        }
        std::mem::swap(&mut ws.dh, &mut ws.dh_prev);
        Ok(())
    }

    /// Backward of the encoders from dL/de_0 in `ws.de` and dL/dh_0 in `ws.dh`: the edge
    /// encoder (its node side into dL/dh_0), then the node encoder.
    pub(crate) fn encoders_backward(
        &self,
        g: &DeviceGraph,
        h0: DevPtr,
        (node_cache, edge_cache): (&MlpCache, &MlpCache),
        grad: DevPtr,
        ws: &mut Workspace,
    ) -> Result<(), BackendError> {
        let (n, e, lay) = (g.num_nodes, g.num_edges, &self.layout);
        let input = self.edge_encoder_input(g, h0);
        let din = DInput::Split { drest: None, dh: ws.dh.ptr() };
        self.mlp_backward(g, &lay.edge_encoder, input, e, edge_cache, ws.de.ptr(), din, grad, ws)?;
        let input = Input::Dense { x: g.x.ptr(), dim: g.node_dim };
        self.mlp_backward(g, &lay.node_encoder, input, n, node_cache, ws.dh.ptr(), DInput::None, grad, ws)
    }

    /// The backward of the last [`forward`](DeviceModel::forward) on `g` (its `cache`), from
    /// dL/dlogits (and dL/d(auxiliary predictions) when given): adds every parameter's gradient
    /// into `grad` (the flat layout of the parameters).
    #[allow(clippy::too_many_arguments)]
    pub fn backward(
        &self,
        g: &DeviceGraph,
        cache: &DeviceCache,
        dlogits: DevPtr,
        daux: Option<DevPtr>,
        grad: DevPtr,
        ws: &mut Workspace,
    ) -> Result<(), BackendError> {
        let iters = self.cfg.iterations;
        self.start_backward(g, ws)?;
        let (h, es) = (&cache.h, &cache.e);
        let last = (h[iters].ptr(), es[iters].ptr());
        self.heads_backward(g, last, (&cache.classifier, &cache.aux_head), (dlogits, daux), grad, ws)?;
        for it in (0..iters).rev() {
            let (cur, next) = ((h[it].ptr(), es[it].ptr()), (h[it + 1].ptr(), es[it + 1].ptr()));
            self.iteration_backward(g, it, cur, next, &cache.iters[it], EdgeActivations::Cached, grad, ws)?;
        }
        self.encoders_backward(g, h[0].ptr(), (&cache.node_encoder, &cache.edge_encoder), grad, ws)
    }
}
