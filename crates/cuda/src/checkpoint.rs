//! Activation checkpointing on the device, as the CPU engine's ([`Checkpointing`]): the forward
//! keeps the node and edge states only at segment boundaries (every K iterations and the last),
//! in f32 or rounded to bf16 (`+bf16`: the forward goes on from the rounded values); the
//! backward recomputes each segment's states from its boundary, then each iteration's caches
//! just before its backward, so one iteration's activations are alive at a time.

use trackgnn_engine::{Checkpointing, UpdateOrder};

use crate::backend::{Arg, BackendError, DevPtr, launch};
use crate::backward::{DInput, EdgeActivations, Workspace};
use crate::graph::DeviceGraph;
use crate::model::{DeviceCache, DeviceModel, Input, IterCache, MlpCache, Scratch, Slot};

/// The checkpointed backward's own buffers, reused from step to step.
#[derive(Default)]
pub struct RecomputeScratch {
    /// The states of the segment being worked on, from its boundary (h, e): its iterations'
    /// inputs (the last iteration's outputs are recomputed into `out`).
    pub seg: Vec<(Slot<f32>, Slot<f32>)>,
    /// A recomputed iteration's outputs (h, e), as the forward computed them.
    pub out: (Slot<f32>, Slot<f32>),
    /// The recomputed iteration's caches (and the auxiliary head's, before the segments).
    pub ic: IterCache,
    /// The recomputed auxiliary predictions (not read).
    pub aux: Slot<f32>,
}

impl RecomputeScratch {
    /// Bytes held on the device.
    pub fn bytes(&self) -> usize {
        let pairs =
            self.seg.iter().chain(std::iter::once(&self.out)).map(|(a, b)| a.bytes() + b.bytes()).sum::<usize>();
        pairs + self.ic.bytes() + self.aux.bytes()
    }
}

impl DeviceModel {
    /// Whether state k is kept with segments of `seg` iterations.
    fn kept(&self, k: usize, seg: usize) -> bool {
        k.is_multiple_of(seg) || k == self.cfg.iterations
    }

    /// Keeps state `x` (`len` values) in `full` (a copy) or, with bf16 states, in `packed`
    /// (rounding `x` in place).
    fn keep(&self, x: DevPtr, len: usize, full: &Slot<f32>, packed: &Slot<u16>) -> Result<(), BackendError> {
        match packed.buf() {
            Some(p) => launch(self.dev.as_ref(), "round_and_pack_bf16", len, &[Arg::Ptr(x), Arg::int(len), p.arg()]),
            None => self.dev.copy(full.ptr(), x, len * 4),
        }
    }

    /// Kept state `k` (`len` values) into `dst`.
    fn restore(&self, full: &Slot<f32>, packed: &Slot<u16>, len: usize, dst: DevPtr) -> Result<(), BackendError> {
        match packed.buf() {
            Some(p) => launch(self.dev.as_ref(), "unpack_bf16", len, &[p.arg(), Arg::int(len), Arg::Ptr(dst)]),
            None => self.dev.copy(dst, full.ptr(), len * 4),
        }
    }

    /// The forward with activation checkpointing `ckpt` (on): the states at its boundaries in
    /// `cache`, the node encoder's cache, the logits; no iteration caches.
    pub fn forward_checkpointed(
        &self,
        g: &DeviceGraph,
        cache: &mut DeviceCache,
        ckpt: Checkpointing,
    ) -> Result<(), BackendError> {
        let dev = &self.dev;
        let (n, e, hd) = (g.num_nodes, g.num_edges, self.cfg.hidden);
        let iters = self.cfg.iterations;
        let (seg, bf16) = (ckpt.segment().max(1), ckpt.bf16_states());
        for c in [&mut cache.edge_encoder, &mut cache.classifier, &mut cache.aux_head] {
            *c = MlpCache::default();
        }
        cache.iters.truncate(1);
        cache.iters.resize_with(1, Default::default);
        for (states, packed, len) in
            [(&mut cache.h, &mut cache.packed_h, n * hd), (&mut cache.e, &mut cache.packed_e, e * hd)]
        {
            states.resize_with(iters + 1, Slot::default);
            packed.resize_with(iters + 1, Slot::default);
            for k in 0..=iters {
                let keep = self.kept(k, seg);
                if keep && !bf16 {
                    states[k].get(dev, len)?;
                } else {
                    states[k] = Slot::default();
                }
                if keep && bf16 {
                    packed[k].get(dev, len)?;
                } else {
                    packed[k] = Slot::default();
                }
            }
        }
        let DeviceCache { h, e: es, packed_h, packed_e, iters: ics, node_encoder, logits, aux, roll, scratch, .. } =
            cache;
        let mut ptrs = [(0, 0); 2];
        for (p, (hs, est)) in ptrs.iter_mut().zip(roll.iter_mut()) {
            *p = (hs.scratch(dev, n * hd)?.ptr(), est.scratch(dev, e * hd)?.ptr());
        }
        let ic = &mut ics[0];
        // Only the node encoder's cache is kept for the backward; the rest is recomputed.
        ic.set_transient(true);
        node_encoder.transient = false;
        // The encoders one at a time: with bf16 states the edge encoder reads the rounded h_0.
        let (h0, e0) = ptrs[0];
        let x = crate::model::Input::Dense { x: g.x.ptr(), dim: g.node_dim };
        self.mlp_forward(g, &self.layout.node_encoder, x, n, node_encoder, h0, None, scratch)?;
        self.keep(h0, n * hd, &h[0], &packed_h[0])?;
        self.split_forward(
            g,
            &self.layout.edge_encoder,
            (h0, self.edge_features(g)),
            e0,
            None,
            &mut ic.edge_net,
            scratch,
        )?;
        self.keep(e0, e * hd, &es[0], &packed_e[0])?;
        for it in 0..iters {
            let (cur, next) = (ptrs[it % 2], ptrs[(it + 1) % 2]);
            self.iteration(g, it, cur, next, ic, scratch)?;
            if self.kept(it + 1, seg) {
                self.keep(next.0, n * hd, &h[it + 1], &packed_h[it + 1])?;
                self.keep(next.1, e * hd, &es[it + 1], &packed_e[it + 1])?;
            }
        }
        let last = ptrs[iters % 2];
        let logits = logits.get(dev, e)?.ptr();
        let aux = if self.layout.aux_head.is_some() { aux.get(dev, e)?.ptr() } else { 0 };
        let IterCache { edge_net, node_net, .. } = ic;
        self.heads(g, last, (logits, aux), edge_net, node_net, scratch)?;
        // The forward's working buffers go before the backward allocates its own.
        cache.iters.clear();
        cache.roll = Default::default();
        cache.scratch = Scratch::default();
        Ok(())
    }

    /// The backward of [`forward_checkpointed`](Self::forward_checkpointed) with `ckpt`: the
    /// heads, each segment's iterations and the edge encoder recomputed with their caches just
    /// before their backward.
    #[allow(clippy::too_many_arguments)]
    pub fn backward_checkpointed(
        &self,
        g: &DeviceGraph,
        cache: &DeviceCache,
        ckpt: Checkpointing,
        dlogits: DevPtr,
        daux: Option<DevPtr>,
        grad: DevPtr,
        ws: &mut Workspace,
    ) -> Result<(), BackendError> {
        let dev = &self.dev;
        let (n, e, hd) = (g.num_nodes, g.num_edges, self.cfg.hidden);
        let (nh, eh) = (n * hd, e * hd);
        let iters = self.cfg.iterations;
        let seg = ckpt.segment().max(1);
        self.start_backward(g, ws)?;
        let mut rc = std::mem::take(&mut ws.recompute);
        let result = (|| -> Result<(), BackendError> {
            rc.seg.resize_with(seg, Default::default);
            for (hs, _) in rc.seg.iter_mut() {
                hs.scratch(dev, nh)?;
            }
            // The other states' edge buffers come and go with the segments.
            rc.seg[0].1.scratch(dev, eh)?;
            // Nodes first, an iteration's backward does not read its output edge state, which
            // is then never made whole (below); edges first, it is.
            let node_first = self.cfg.update_order == UpdateOrder::NodeFirst;
            let mut out = (rc.out.0.scratch(dev, nh)?.ptr(), 0);
            if !node_first {
                out.1 = rc.out.1.scratch(dev, eh)?.ptr();
            }
            let state = |k: usize, into: (DevPtr, DevPtr)| -> Result<(), BackendError> {
                self.restore(&cache.h[k], &cache.packed_h[k], nh, into.0)?;
                self.restore(&cache.e[k], &cache.packed_e[k], eh, into.1)
            };
            let ptr = |s: &(Slot<f32>, Slot<f32>)| (s.0.ptr(), s.1.ptr());
            // The heads on h_L, e_L.
            let last = ptr(&rc.seg[0]);
            state(iters, last)?;
            let aux_out = if self.layout.aux_head.is_some() { rc.aux.scratch(dev, e)?.ptr() } else { 0 };
            // The classifier recomputed and backpropagated tile by tile, then the auxiliary
            // head (its cache the iteration caches' buffer, idle until the segments).
            let (de, dh) = (ws.de.ptr(), ws.dh.ptr());
            let cls_in = (last.0, Some((last.1, self.cfg.hidden)));
            self.split_backward_tiled(g, &self.layout.classifier, cls_in, dlogits, Some((de, true)), dh, grad, ws)?;
            if let (Some(aux_mlp), Some(daux)) = (&self.layout.aux_head, daux) {
                let input = Input::Dense { x: last.1, dim: self.cfg.hidden };
                let head = &mut rc.ic.node_net;
                self.mlp_forward(g, aux_mlp, input, e, head, aux_out, None, &mut ws.sc)?;
                let din = DInput::Dense { dx: de, accumulate: true };
                self.mlp_backward(g, aux_mlp, input, e, head, daux, din, grad, ws)?;
            }
            // The classifier's hidden layers held two E × H buffers: gone before the segments.
            rc.ic = IterCache::default();
            ws.sc.act = Default::default();
            // Segments [b, end) from the last: states b … end−1 from the boundary b.
            let mut end = iters;
            while end > 0 {
                let b = (end - 1) / seg * seg;
                rc.seg[0].1.scratch(dev, eh)?;
                state(b, ptr(&rc.seg[0]))?;
                // The segment's states alone: nothing kept for a backward.
                rc.ic.set_transient(true);
                for it in b..end - 1 {
                    rc.seg[it - b + 1].1.scratch(dev, eh)?;
                    let (cur, next) = (ptr(&rc.seg[it - b]), ptr(&rc.seg[it - b + 1]));
                    self.iteration(g, it, cur, next, &mut rc.ic, &mut ws.sc)?;
                }
                rc.ic.set_transient(false);
                // Only the iteration being backpropagated needs its input edge state: the
                // boundary's (kept in `cache`) is restored again when its turn comes, and a
                // state goes once its iteration is done, so at most one E × H state is alive
                // beside the backward's buffers (two with segments longer than 2).
                let restore_boundary = end - 1 > b;
                if restore_boundary {
                    rc.seg[0].1 = Slot::default();
                }
                for it in (b..end).rev() {
                    rc.seg[it - b + 1..].iter_mut().for_each(|s| s.1 = Slot::default());
                    if it == b && restore_boundary {
                        rc.seg[0].1.scratch(dev, eh)?;
                        state(b, ptr(&rc.seg[0]))?;
                    }
                    // The iteration again, with its caches, into `out`: its outputs as the
                    // forward computed them (before any rounding of a kept state).
                    let cur = ptr(&rc.seg[it - b]);
                    if node_first {
                        // The node update with its caches; the edge network is recomputed and
                        // backpropagated tile by tile (its output edge state, which the
                        // backward does not read, never whole).
                        let node_mlp = self.layout.nets(&self.cfg, it).1;
                        self.node_update(g, node_mlp, cur.0, cur.1, out.0, &mut rc.ic, &mut ws.sc)?;
                        self.iteration_backward(g, it, cur, out, &rc.ic, EdgeActivations::Recomputed, grad, ws)?;
                    } else {
                        self.iteration(g, it, cur, out, &mut rc.ic, &mut ws.sc)?;
                        self.iteration_backward(g, it, cur, out, &rc.ic, EdgeActivations::Cached, grad, ws)?;
                        // Its edge cache goes before the next segment's states are restored.
                        rc.ic.edge_net = MlpCache::default();
                    }
                }
                end = b;
            }
            // The encoders: the edge encoder recomputed and backpropagated tile by tile from
            // h_0 (the iterations' caches gone first), its node side into dL/dh_0, then the
            // node encoder from its kept cache.
            rc.ic = IterCache::default();
            let (h0, _) = ptr(&rc.seg[0]);
            state(0, ptr(&rc.seg[0]))?;
            let (de, dh) = (ws.de.ptr(), ws.dh.ptr());
            self.split_backward_tiled(
                g,
                &self.layout.edge_encoder,
                (h0, self.edge_features(g)),
                de,
                None,
                dh,
                grad,
                ws,
            )?;
            let x = Input::Dense { x: g.x.ptr(), dim: g.node_dim };
            self.mlp_backward(g, &self.layout.node_encoder, x, n, &cache.node_encoder, dh, DInput::None, grad, ws)
        })();
        // Checkpointing is for memory: the recomputation's buffers and the gradient workspace
        // go back to the allocator (a caching pool on a GPU) before the next forward.
        drop(rc);
        *ws = Workspace::default();
        result
    }
}
