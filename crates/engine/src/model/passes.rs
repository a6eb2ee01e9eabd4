//! The InteractionGNN's passes behind [`InteractionGnn::forward`] and
//! [`InteractionGnn::backward`]: the edge and node updates' backward, inference without a
//! cache, the checkpointed and rolling forwards and the checkpointed backward.

use super::*;
use crate::ops::aggregate::Grouping;

impl<T: Real> InteractionGnn<T> {
    /// Backward of an edge update e_next = \[e_prev +\] edge_net(h_in\[src\], h_in\[dst\], e_prev), with
    /// `input` the network's split input on h_in and e_prev: `de` goes from dL/de_next to
    /// dL/de_prev in place (see [`DOut::SharedWithRest`]) and `dh` (dL/dh_in) gains the edge
    /// network's part; `dz1` and `split` are scratch.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn edge_update_backward(
        &self,
        g: &GraphInput<T>,
        edge_net: &Mlp,
        input: Input<'_, T>,
        acts: Acts<'_, T>,
        h_in: &[T],
        grad: &mut [T],
        dz1: &mut [T],
        de: &mut [T],
        dh: &mut [T],
        split: &mut SplitScratch<T>,
    ) {
        let ps = &self.params;
        let din = DInput::Split { dz1: &mut *dz1, drest: None };
        let dout = DOut::SharedWithRest { buf: de, keep: self.cfg.residual };
        edge_net.backward(ps, input, acts, dout, grad, din);
        let (o, i) = (&g.out_edges, &g.in_edges);
        edge_net.split_backward_nodes(ps, dz1, h_in, self.cfg.hidden, o, i, grad, dh, split);
    }

    /// Backward of a node update h_next = \[h_in +\] node_net(`node_in`), where `node_in` =
    /// cat(h_in, aggregations of `e_agg` over incoming, over outgoing edges) with their caches
    /// `agg`: from dL/dh_next in `ws.dh`, writes dL/dh_in into `ws.dh_prev` and adds dL/de_agg
    /// into `ws.de`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn node_update_backward(
        &self,
        g: &GraphInput<T>,
        node_net: &Mlp,
        node_in: &[T],
        acts: Acts<'_, T>,
        e_agg: &[T],
        agg: (&AggCache<T>, &AggCache<T>),
        grad: &mut [T],
        ws: &mut Workspace<T>,
    ) {
        let (ps, h, aggs) = (&self.params, self.cfg.hidden, &self.cfg.aggregation);
        let ld = (1 + 2 * aggs.len()) * h;
        traffic::add(Pass::Elementwise, traffic::of::<T>(ws.dnode_in.len()));
        ws.dnode_in.iter_mut().for_each(|v| *v = T::ZERO);
        let input = Input::Dense { x: node_in, dim: ld };
        node_net.backward(ps, input, acts, DOut::Given(&ws.dh), grad, DInput::Dense(&mut ws.dnode_in));
        set_or_zero(&mut ws.dh_prev, &ws.dh, self.cfg.residual);
        add_columns(&ws.dnode_in, ld, 0, h, &mut ws.dh_prev);
        let dn = &ws.dnode_in;
        let incoming = Grouping { csr: &g.in_edges, node_of_edge: &g.dst, col0: h, cache: agg.0 };
        let outgoing = Grouping { csr: &g.out_edges, node_of_edge: &g.src, col0: (1 + aggs.len()) * h, cache: agg.1 };
        aggregate::backward(e_agg, h, &[incoming, outgoing], aggs, dn, ld, &mut ws.de);
    }

    /// Backward of the encoders, both passes' last step: the edge encoder from dL/de_0 in
    /// `ws.de` (its split `input` on h_0 and the edge features, its activations `acts.0`), whose
    /// node side adds into dL/dh_0 in `ws.dh`; the halo's part of that goes to its owners;
    /// then the node encoder (its cache `acts.1`).
    pub(super) fn encoders_backward(
        &self,
        g: &GraphInput<T>,
        input: Input<'_, T>,
        acts: (Acts<'_, T>, &MlpCache<T>),
        h0: &[T],
        grad: &mut [T],
        ws: &mut Workspace<T>,
    ) {
        let (ps, h) = (&self.params, self.cfg.hidden);
        let din = DInput::Split { dz1: &mut ws.dz1, drest: None };
        self.edge_encoder.backward(ps, input, acts.0, DOut::Given(&ws.de), grad, din);
        let (o, i) = (&g.out_edges, &g.in_edges);
        self.edge_encoder.split_backward_nodes(ps, &ws.dz1, h0, h, o, i, grad, &mut ws.dh, &mut ws.split);
        g.return_gradients(&mut ws.dh, h);
        let input = Input::Dense { x: &g.x, dim: g.node_dim };
        self.node_encoder.backward(ps, input, Acts::Cached(acts.1), DOut::Given(&ws.dh), grad, DInput::None);
    }

    /// The states kept with checkpointing segment K: h_k, e_k for k = 0, K, 2K, … and the last.
    pub(super) fn stored(&self, k: usize, seg: usize) -> bool {
        k.is_multiple_of(seg) || k == self.cfg.iterations
    }

    /// One message-passing iteration without caches: (h_prev, e_prev) → (h_next, e_next), with
    /// `node_in`, `agg` and `a`, `b` as scratch.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn iteration_nocache(
        &self,
        g: &GraphInput<T>,
        it: usize,
        h_prev: &[T],
        e_prev: &[T],
        h_next: &mut [T],
        e_next: &mut [T],
        scratch: &mut IterScratch<T>,
    ) {
        let (n, e, h) = (g.num_nodes, g.num_edges(), self.cfg.hidden);
        let (edge_net, node_net) = self.nets(it);
        let ps = &self.params;
        let k = self.cfg.aggregation.len();
        let ld = (1 + 2 * k) * h;
        let node_first = self.cfg.update_order == UpdateOrder::NodeFirst;
        let edge_update = |h_in: &[T], e_next: &mut [T], scratch: &mut IterScratch<T>| {
            edge_net.split_precompute(ps, h_in, h, &mut scratch.a, &mut scratch.b);
            let (a, b) = (&scratch.a[..], &scratch.b[..]);
            let input = Input::Split { a, b, src: &g.src, dst: &g.dst, h_dim: h, rest: Some((e_prev, h)) };
            edge_net.forward_nocache_residual(ps, input, e, e_next, self.cfg.residual.then_some(e_prev));
        };
        if !node_first {
            edge_update(h_prev, e_next, scratch);
        }
        self.node_input(g, h_prev, if node_first { e_prev } else { e_next }, scratch);
        let input = Input::Dense { x: &scratch.node_in, dim: ld };
        node_net.forward_nocache_residual(ps, input, n, h_next, self.cfg.residual.then_some(h_prev));
        g.exchange_states(h_next, h);
        if node_first {
            edge_update(h_next, e_next, scratch);
        }
    }

    /// scratch.node_in = cat(h, aggregations of e over incoming, over outgoing edges).
    pub(super) fn node_input(&self, g: &GraphInput<T>, h_prev: &[T], e_agg: &[T], scratch: &mut IterScratch<T>) {
        let (n, h) = (g.num_nodes, self.cfg.hidden);
        let aggs = &self.cfg.aggregation;
        let k = aggs.len();
        let ld = (1 + 2 * k) * h;
        scratch.node_in.resize(n * ld, T::ZERO);
        copy_columns(h_prev, h, &mut scratch.node_in, ld, 0);
        aggregate::forward(e_agg, h, &g.in_edges, aggs, &mut scratch.node_in, ld, h, &mut scratch.agg_in);
        aggregate::forward(e_agg, h, &g.out_edges, aggs, &mut scratch.node_in, ld, (1 + k) * h, &mut scratch.agg_out);
    }

    /// (nodes, edges, hidden) of a graph, after checking its feature widths against the model's.
    #[track_caller]
    pub(super) fn checked_dims(&self, g: &GraphInput<T>) -> (usize, usize, usize) {
        assert_eq!(g.node_dim, self.node_dim, "node feature width");
        assert_eq!(g.edge_dim, self.edge_dim, "edge feature width");
        (g.num_nodes, g.num_edges(), self.cfg.hidden)
    }

    /// Forward with activation checkpointing: keeps h_k, e_k at the stored boundaries only.
    pub(super) fn forward_checkpointed(&self, g: &GraphInput<T>, cache: &mut ForwardCache<T>, seg: usize) {
        let (n, e, h) = self.checked_dims(g);
        let iters = self.cfg.iterations;
        let ps = &self.params;
        cache.drop_uncheckpointed();
        cache.packed_h.clear();
        cache.packed_e.clear();
        cache.h.resize_with(iters + 1, Vec::new);
        cache.e.resize_with(iters + 1, Vec::new);
        for k in 0..=iters {
            let (hn, en) = if self.stored(k, seg) { (n * h, e * h) } else { (0, 0) };
            cache.h[k].resize(hn, T::ZERO);
            cache.h[k].shrink_to_fit();
            cache.e[k].resize(en, T::ZERO);
            cache.e[k].shrink_to_fit();
        }
        let mut sc = std::mem::take(&mut cache.iter_scratch);
        let x = Input::Dense { x: &g.x, dim: g.node_dim };
        self.node_encoder.forward(ps, x, n, &mut cache.node_encoder, &mut cache.h[0]);
        g.exchange_states(&mut cache.h[0], h);
        self.edge_encoder.split_precompute(ps, &cache.h[0], h, &mut sc.a, &mut sc.b);
        let rest = (g.edge_dim > 0).then_some((&g.edge_attr[..], g.edge_dim));
        let input = Input::Split { a: &sc.a, b: &sc.b, src: &g.src, dst: &g.dst, h_dim: h, rest };
        self.edge_encoder.forward_nocache(ps, input, e, &mut cache.e[0]);
        // States go straight into the cache when kept, else into two rolling buffers.
        let mut roll: [(Vec<T>, Vec<T>); 2] = [(Vec::new(), Vec::new()), (Vec::new(), Vec::new())];
        let mut src_slot: Option<usize> = None; // None: the state is in the cache at index `it`
        for it in 0..iters {
            let keep = self.stored(it + 1, seg);
            let dst_slot = match src_slot {
                Some(r) => 1 - r,
                None => 0,
            };
            if !keep {
                roll[dst_slot].0.resize(n * h, T::ZERO);
                roll[dst_slot].1.resize(e * h, T::ZERO);
            }
            // Borrow the source and the destination from disjoint places.
            let (h_done, h_todo) = cache.h.split_at_mut(it + 1);
            let (e_done, e_todo) = cache.e.split_at_mut(it + 1);
            let (roll_a, roll_b) = roll.split_at_mut(1);
            let (src_roll, dst_roll) =
                if dst_slot == 0 { (&roll_b[0], &mut roll_a[0]) } else { (&roll_a[0], &mut roll_b[0]) };
            let (hp, ep): (&[T], &[T]) = match src_slot {
                None => (&h_done[it], &e_done[it]),
                Some(_) => (&src_roll.0, &src_roll.1),
            };
            let (hn, en): (&mut [T], &mut [T]) =
                if keep { (&mut h_todo[0], &mut e_todo[0]) } else { (&mut dst_roll.0, &mut dst_roll.1) };
            self.iteration_nocache(g, it, hp, ep, hn, en, &mut sc);
            src_slot = if keep { None } else { Some(dst_slot) };
        }
        drop(roll);
        self.classifier.split_precompute(ps, &cache.h[iters], h, &mut sc.a, &mut sc.b);
        cache.logits.resize(e, T::ZERO);
        let rest = Some((&cache.e[iters][..], h));
        let input = Input::Split { a: &sc.a, b: &sc.b, src: &g.src, dst: &g.dst, h_dim: h, rest };
        self.classifier.forward_nocache(ps, input, e, &mut cache.logits);
        self.aux_forward(&cache.e[iters], e, &mut cache.aux);
        cache.iter_scratch = sc;
    }

    /// The auxiliary head's predictions from e_L into `out` (cleared without the head).
    pub(super) fn aux_forward(&self, e_last: &[T], e: usize, out: &mut Vec<T>) {
        out.clear();
        if let Some(head) = &self.aux_head {
            out.resize(e, T::ZERO);
            let input = Input::Dense { x: e_last, dim: self.cfg.hidden };
            head.forward_nocache(&self.params, input, e, out);
        }
    }

    /// Forward through two rolling f32 states. With `packed: Some(K)` (checkpointing with bf16
    /// saved states), each state kept for segment K is rounded in place and packed, so the
    /// forward goes on from exactly the value the backward will unpack and recompute from; with
    /// `None` (inference) nothing is kept but the logits (and, with `aux`, the auxiliary
    /// head's predictions).
    pub(super) fn forward_rolling(
        &self,
        g: &GraphInput<T>,
        cache: &mut ForwardCache<T>,
        packed: Option<usize>,
        aux: bool,
    ) {
        let (n, e, h) = self.checked_dims(g);
        let iters = self.cfg.iterations;
        let ps = &self.params;
        cache.drop_uncheckpointed();
        for states in [&mut cache.h, &mut cache.e] {
            states.clear();
            states.resize_with(iters + 1, Vec::new);
        }
        let keep = |k: usize| packed.is_some_and(|seg| self.stored(k, seg));
        for buf in [&mut cache.packed_h, &mut cache.packed_e] {
            buf.resize_with(iters + 1, Vec::new);
            for (k, p) in buf.iter_mut().enumerate() {
                if !keep(k) {
                    *p = Vec::new();
                }
            }
        }
        // The rolling states borrow the backward's gradient buffers: they are idle until the
        // backward, so the forward needs no memory of its own beyond the packed states.
        let ws = &mut cache.workspace;
        let (mut hc, mut hn) = (std::mem::take(&mut ws.dh), std::mem::take(&mut ws.dh_prev));
        let (mut ec, mut en) = (std::mem::take(&mut ws.dz1), std::mem::take(&mut ws.de));
        for (v, len) in [(&mut hc, n * h), (&mut hn, n * h), (&mut ec, e * h), (&mut en, e * h)] {
            v.resize(len, T::ZERO);
        }
        let mut sc = std::mem::take(&mut cache.iter_scratch);
        let x = Input::Dense { x: &g.x, dim: g.node_dim };
        self.node_encoder.forward(ps, x, n, &mut cache.node_encoder, &mut hc);
        g.exchange_states(&mut hc, h);
        if keep(0) {
            bf16::round_and_pack(&mut hc, &mut cache.packed_h[0]);
        }
        self.edge_encoder.split_precompute(ps, &hc, h, &mut sc.a, &mut sc.b);
        let rest = (g.edge_dim > 0).then_some((&g.edge_attr[..], g.edge_dim));
        let input = Input::Split { a: &sc.a, b: &sc.b, src: &g.src, dst: &g.dst, h_dim: h, rest };
        self.edge_encoder.forward_nocache(ps, input, e, &mut ec);
        if keep(0) {
            bf16::round_and_pack(&mut ec, &mut cache.packed_e[0]);
        }
        for it in 0..iters {
            self.iteration_nocache(g, it, &hc, &ec, &mut hn, &mut en, &mut sc);
            if keep(it + 1) {
                bf16::round_and_pack(&mut hn, &mut cache.packed_h[it + 1]);
                bf16::round_and_pack(&mut en, &mut cache.packed_e[it + 1]);
            }
            std::mem::swap(&mut hc, &mut hn);
            std::mem::swap(&mut ec, &mut en);
        }
        self.classifier.split_precompute(ps, &hc, h, &mut sc.a, &mut sc.b);
        cache.logits.resize(e, T::ZERO);
        let input = Input::Split { a: &sc.a, b: &sc.b, src: &g.src, dst: &g.dst, h_dim: h, rest: Some((&ec, h)) };
        self.classifier.forward_nocache(ps, input, e, &mut cache.logits);
        if aux {
            self.aux_forward(&ec, e, &mut cache.aux);
        } else {
            cache.aux.clear();
        }
        let ws = &mut cache.workspace;
        (ws.dh, ws.dh_prev, ws.dz1, ws.de) = (hc, hn, ec, en);
        cache.iter_scratch = sc;
    }

    /// Backward with activation checkpointing (see [`crate::checkpointing`]).
    pub(super) fn backward_checkpointed(
        &mut self,
        g: &GraphInput<T>,
        cache: &mut ForwardCache<T>,
        dlogits: &[T],
        daux: Option<&[T]>,
    ) {
        let (n, e, h) = (g.num_nodes, g.num_edges(), self.cfg.hidden);
        let iters = self.cfg.iterations;
        let k = self.cfg.aggregation.len();
        let ld = (1 + 2 * k) * h;
        let seg = self.checkpointing.segment();
        let mut grad = std::mem::take(&mut self.params.grad);
        let mut ws = std::mem::take(&mut cache.workspace);
        let mut sc = std::mem::take(&mut cache.iter_scratch);
        let ps = &self.params;
        ws.dz1.resize(e * h, T::ZERO);
        ws.dnode_in.resize(n * ld, T::ZERO);
        for v in [&mut ws.dh, &mut ws.dh_prev] {
            v.clear();
            v.resize(n * h, T::ZERO);
        }
        ws.de.clear();
        ws.de.resize(e * h, T::ZERO);
        traffic::add(Pass::Elementwise, traffic::of::<T>(e * h + 2 * n * h));
        let (src, dst) = (&g.src[..], &g.dst[..]);
        let (o, i) = (&g.out_edges, &g.in_edges);
        // bf16 saved states are unpacked into these when used, one edge state at a time.
        let (mut hbuf, mut ebuf) = (Vec::new(), Vec::new());
        let (ch, ce, ph, pe) = (&cache.h, &cache.e, &cache.packed_h, &cache.packed_e);
        // Classifier, recomputed tile by tile.
        let d1 = self.classifier.layers[0].dout;
        let hl = saved(ch, ph, iters, &mut hbuf);
        self.classifier.split_precompute(ps, hl, h, &mut sc.a, &mut sc.b);
        let el = saved(ce, pe, iters, &mut ebuf);
        let input = Input::Split { a: &sc.a, b: &sc.b, src, dst, h_dim: h, rest: Some((el, h)) };
        let din = DInput::Split { dz1: &mut ws.dz1[..e * d1], drest: Some(&mut ws.de) };
        self.classifier.backward(ps, input, Acts::Recompute { rows: e }, DOut::Given(dlogits), &mut grad, din);
        if let (Some(head), Some(daux)) = (&self.aux_head, daux) {
            // The head's dL/de_L adds to the classifier's; its activations recomputed too.
            let input = Input::Dense { x: el, dim: h };
            let (acts, dx) = (Acts::Recompute { rows: e }, DInput::Dense(&mut ws.de[..]));
            head.backward(ps, input, acts, DOut::Given(daux), &mut grad, dx);
        }
        let dz1 = &ws.dz1[..e * d1];
        self.classifier.split_backward_nodes(ps, dz1, hl, h, o, i, &mut grad, &mut ws.dh, &mut ws.split);
        // Segments [b, end) from the last; states b+1 … end−1 recomputed from the boundary b.
        let node_first = self.cfg.update_order == UpdateOrder::NodeFirst;
        let mut end = iters;
        while end > 0 {
            let b = (end - 1) / seg * seg;
            let mut seg_h: Vec<Vec<T>> = Vec::new();
            let mut seg_e: Vec<Vec<T>> = Vec::new();
            for it in b..end - 1 {
                let (hp, ep) = if it == b {
                    (saved(ch, ph, b, &mut hbuf), saved(ce, pe, b, &mut ebuf))
                } else {
                    (&seg_h[it - b - 1][..], &seg_e[it - b - 1][..])
                };
                let (mut hn, mut en) = (vec![T::ZERO; n * h], vec![T::ZERO; e * h]);
                self.iteration_nocache(g, it, hp, ep, &mut hn, &mut en, &mut sc);
                seg_h.push(hn);
                seg_e.push(en);
            }
            for it in (b..end).rev() {
                let (edge_net, node_net) = self.nets(it);
                // States b+1 … end−1 that are not saved were recomputed into seg_h, seg_e; a saved
                // bf16 state is unpacked into hbuf or ebuf when used, so at most one of each is live.
                let recomputed = |j: usize| j != b && !self.stored(j, seg);
                let (edges, nodes) = (Acts::Recompute { rows: e }, Acts::Recompute { rows: n });
                if node_first {
                    // As the uncheckpointed backward, activations recomputed tile by tile.
                    let h_next = if recomputed(it + 1) { &seg_h[it - b][..] } else { saved(ch, ph, it + 1, &mut hbuf) };
                    let e_it = if recomputed(it) { &seg_e[it - b - 1][..] } else { saved(ce, pe, it, &mut ebuf) };
                    edge_net.split_precompute(ps, h_next, h, &mut sc.a, &mut sc.b);
                    let input = Input::Split { a: &sc.a, b: &sc.b, src, dst, h_dim: h, rest: Some((e_it, h)) };
                    let Workspace { dz1, de, dh, split, .. } = &mut ws;
                    self.edge_update_backward(g, edge_net, input, edges, h_next, &mut grad, dz1, de, dh, split);
                    g.return_gradients(&mut ws.dh, h);
                    let h_it = if recomputed(it) { &seg_h[it - b - 1][..] } else { saved(ch, ph, it, &mut hbuf) };
                    self.node_input(g, h_it, e_it, &mut sc);
                    let aggs = (&sc.agg_in, &sc.agg_out);
                    self.node_update_backward(g, node_net, &sc.node_in, nodes, e_it, aggs, &mut grad, &mut ws);
                } else {
                    g.return_gradients(&mut ws.dh, h);
                    let h_it = if recomputed(it) { &seg_h[it - b - 1][..] } else { saved(ch, ph, it, &mut hbuf) };
                    let e_next = if recomputed(it + 1) { &seg_e[it - b][..] } else { saved(ce, pe, it + 1, &mut ebuf) };
                    self.node_input(g, h_it, e_next, &mut sc);
                    let aggs = (&sc.agg_in, &sc.agg_out);
                    self.node_update_backward(g, node_net, &sc.node_in, nodes, e_next, aggs, &mut grad, &mut ws);
                    let e_it = if recomputed(it) { &seg_e[it - b - 1][..] } else { saved(ce, pe, it, &mut ebuf) };
                    edge_net.split_precompute(ps, h_it, h, &mut sc.a, &mut sc.b);
                    let input = Input::Split { a: &sc.a, b: &sc.b, src, dst, h_dim: h, rest: Some((e_it, h)) };
                    let Workspace { dz1, de, dh_prev, split, .. } = &mut ws;
                    self.edge_update_backward(g, edge_net, input, edges, h_it, &mut grad, dz1, de, dh_prev, split);
                }
                std::mem::swap(&mut ws.dh, &mut ws.dh_prev);
            }
            sc.peak_segment_bytes = sc.peak_segment_bytes.max(
                (seg_h.iter().map(Vec::capacity).sum::<usize>()
                    + seg_e.iter().map(Vec::capacity).sum::<usize>()
                    + hbuf.capacity()
                    + ebuf.capacity())
                    * std::mem::size_of::<T>(),
            );
            end = b;
        }
        // Encoders.
        let h0 = saved(ch, ph, 0, &mut hbuf);
        self.edge_encoder.split_precompute(ps, h0, h, &mut sc.a, &mut sc.b);
        let rest = (g.edge_dim > 0).then_some((&g.edge_attr[..], g.edge_dim));
        let input = Input::Split { a: &sc.a, b: &sc.b, src, dst, h_dim: h, rest };
        let acts = (Acts::Recompute { rows: e }, &cache.node_encoder);
        self.encoders_backward(g, input, acts, h0, &mut grad, &mut ws);
        self.params.grad = grad;
        cache.workspace = ws;
        cache.iter_scratch = sc;
    }
}

/// A saved state: the f32 one, or the bf16 one unpacked into `buf`.
pub(super) fn saved<'a, T: Real>(full: &'a [Vec<T>], packed: &[Vec<u16>], j: usize, buf: &'a mut Vec<T>) -> &'a [T] {
    match packed.get(j) {
        Some(p) if !p.is_empty() => {
            bf16::unpack(p, buf);
            buf
        }
        _ => &full[j],
    }
}
