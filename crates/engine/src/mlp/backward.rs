//! The MLP's backward: per tile, the activations recomputed while the tile is in cache, the
//! gradients through each layer, the weight gradients summed per fixed chunk of rows (see the
//! parent module for the determinism rule), and the node-side half of a split first layer.

use super::*;

impl Mlp {
    /// The tile-sized buffers of one backward worker (one per rayon job, reused over its
    /// tiles): per layer the recomputed norm outputs y_l and activations a_l, two gradient
    /// buffers, with `recompute` (activation checkpointing) the tile forward's buffers, and
    /// with `unpack` (activations saved in bf16) the tile's unpacked x̂ of every layer.
    pub fn backward_scratch<T: Real>(&self, recompute: bool, unpack: bool) -> BackwardScratch<T> {
        let width = self.width();
        let tile_layers = || self.layers.iter().map(|l| vec![T::ZERO; TILE * l.dout]).collect();
        BackwardScratch {
            unpacked: if unpack { tile_layers() } else { Vec::new() },
            acts: self.layers.iter().map(|l| vec![T::ZERO; TILE * l.dout]).collect(),
            acts16: PackedB::default(),
            ys: self.layers.iter().map(|l| vec![T::ZERO; TILE * l.dout]).collect(),
            g: vec![T::ZERO; TILE * width],
            g_prev: vec![T::ZERO; TILE * width],
            gz16: Bf16Rows::default(),
            forward: recompute.then(|| TileScratch::new(&self.layers, width)),
        }
    }

    /// The widest layer input or output.
    pub(super) fn width(&self) -> usize {
        self.layers.iter().map(|l| l.dout.max(l.din)).max().unwrap_or(0)
    }

    /// Backward over `rows` rows given dL/d(output) in `dout`; accumulates parameter gradients
    /// into `grad` (the whole flat gradient buffer) and input gradients as `dinput` asks.
    pub fn backward<T: Real>(
        &self,
        ps: &ParamStore<T>,
        input: Input<'_, T>,
        source: Acts<'_, T>,
        dout: DOut<'_, T>,
        grad: &mut [T],
        dinput: DInput<'_, T>,
    ) {
        let rows = match source {
            Acts::Cached(c) => c.rows,
            Acts::Recompute { rows } => rows,
        };
        let d_out = self.dout();
        traffic::add(Pass::MlpBackward, self.backward_bytes::<T>(input, source, rows, &dout, &dinput));
        let chunk = chunk_rows(rows);
        let n_chunks = rows.div_ceil(chunk);
        let (given, mut io_chunks, keep) = match dout {
            DOut::Given(g) => {
                assert_eq!(g.len(), rows * d_out, "mlp backward: dout shape");
                (Some(g), Vec::new(), true)
            }
            DOut::SharedWithRest { buf, keep } => {
                assert_eq!(buf.len(), rows * d_out, "mlp backward: dout shape");
                (None, buf.chunks_mut(chunk * d_out).map(Some).collect::<Vec<_>>(), keep)
            }
        };
        // Per-chunk views of the input-gradient outputs.
        let (din_dim, split_d1) = match input {
            Input::Dense { dim, .. } => (dim, 0),
            Input::Split { rest, .. } => (rest.map_or(0, |r| r.1), self.layers[0].dout),
        };
        let mut dense_chunks: Vec<Option<&mut [T]>> = (0..n_chunks).map(|_| None).collect();
        let mut dz1_chunks: Vec<Option<&mut [T]>> = (0..n_chunks).map(|_| None).collect();
        let mut drest_chunks: Vec<Option<&mut [T]>> = (0..n_chunks).map(|_| None).collect();
        match dinput {
            DInput::None => {}
            DInput::Dense(dx) => {
                for (c, s) in dx.chunks_mut(chunk * din_dim).enumerate() {
                    dense_chunks[c] = Some(s);
                }
            }
            DInput::Split { dz1, drest } => {
                for (c, s) in dz1.chunks_mut(chunk * split_d1).enumerate() {
                    dz1_chunks[c] = Some(s);
                }
                if let Some(dr) = drest {
                    for (c, s) in dr.chunks_mut(chunk * din_dim).enumerate() {
                        drest_chunks[c] = Some(s);
                    }
                }
            }
        }
        io_chunks.resize_with(n_chunks, || None);
        let work: Vec<ChunkGrads<'_, T>> = (0..n_chunks)
            .zip(dense_chunks)
            .zip(dz1_chunks)
            .zip(drest_chunks)
            .zip(io_chunks)
            .map(|((((c, dx), dz1), drest), io)| ChunkGrads {
                rows: c * chunk..((c + 1) * chunk).min(rows),
                dx,
                dz1,
                drest,
                io,
            })
            .collect();
        let recompute = matches!(source, Acts::Recompute { .. });
        let unpack = matches!(source, Acts::Cached(c) if c.is_bf16());
        let plen = self.range.len();
        let packs = &self.weight_packs(ps, input, recompute, true);
        let step = TileStep { ps, input, source, packs, given, keep };
        let partials: Vec<Vec<T>> = work
            .into_par_iter()
            .map_init(
                || self.backward_scratch(recompute, unpack),
                |scratch, mut out| {
                    let mut g_local = vec![T::ZERO; plen];
                    let mut r0 = out.rows.start;
                    while r0 < out.rows.end {
                        let tr = TILE.min(out.rows.end - r0);
                        self.backward_tile(&step, scratch, &mut out, &mut g_local, r0, tr);
                        r0 += tr;
                    }
                    g_local
                },
            )
            .collect();
        for p in partials {
            grad[self.range.clone()].iter_mut().zip(&p).for_each(|(g, &v)| *g += v);
        }
    }

    /// Bytes a backward over `rows` rows reads and writes ([`crate::traffic`]'s rule): the
    /// saved x̂ and 1/σ (recomputed: the input again), the first layer's input for its weight
    /// gradient (a split layer's rest block), the output gradient (shared with the rest's: read
    /// and written), and the input gradients (dz_1 written, accumulations read and written).
    fn backward_bytes<T>(
        &self,
        input: Input<'_, T>,
        source: Acts<'_, T>,
        rows: usize,
        dout: &DOut<'_, T>,
        dinput: &DInput<'_, T>,
    ) -> usize {
        let of = traffic::of::<T>;
        let (in_dim, d1) = match input {
            Input::Dense { dim, .. } => (dim, 0),
            Input::Split { rest, .. } => (rest.map_or(0, |r| r.1), self.layers[0].dout),
        };
        let acts = match source {
            Acts::Cached(_) => self.saved_bytes::<T>(rows) + of(rows * in_dim),
            Acts::Recompute { .. } => self.input_bytes(input, rows),
        };
        let grad_out = match dout {
            DOut::Given(_) => of(rows * self.dout()),
            DOut::SharedWithRest { .. } => 2 * of(rows * self.dout()),
        };
        let grad_in = match dinput {
            DInput::None => 0,
            DInput::Dense(_) => 2 * of(rows * in_dim),
            DInput::Split { drest, .. } => of(rows * d1) + if drest.is_some() { 2 * of(rows * in_dim) } else { 0 },
        };
        acts + grad_out + grad_in
    }

    /// The backward of rows r0..r0+tr (one tile of the chunk `out`): parameter gradients into
    /// `g_local` (this MLP's parameters only), input gradients into `out`.
    pub(super) fn backward_tile<T: Real>(
        &self,
        step: &TileStep<'_, T>,
        scratch: &mut BackwardScratch<T>,
        out: &mut ChunkGrads<'_, T>,
        g_local: &mut [T],
        r0: usize,
        tr: usize,
    ) {
        let TileStep { ps, input, source, packs, given, keep } = *step;
        let BackwardScratch { unpacked, acts, acts16, ys, g, g_prev, gz16, forward } = scratch;
        let n_layers = self.layers.len();
        let base = self.range.start;
        // Activations saved in bf16: this tile's rows unpacked once, for all uses below.
        if let Acts::Cached(c) = source
            && !unpacked.is_empty()
        {
            for ((u, p), layer) in unpacked.iter_mut().zip(&c.pre_bf16).zip(&self.layers) {
                let d = layer.dout;
                crate::bf16::unpack_slice(&p[r0 * d..(r0 + tr) * d], &mut u[..tr * d]);
            }
        }
        let unpacked = &*unpacked;
        // With checkpointing, the tile's forward runs again here, while it is hot.
        if let Some(f) = forward.as_mut() {
            f.forward(self, ps, input, packs, r0, tr, self.dout());
            // As the forward would have saved them: the same gradients with or without
            // checkpointing.
            if self.saved == Precision::Bf16 {
                for (p, layer) in f.pre.iter_mut().zip(&self.layers) {
                    crate::bf16::round_slice(&mut p[..tr * layer.dout]);
                }
            }
        }
        let forward = forward.as_ref();
        // x̂ (or z) and rstd of layer l for this tile.
        let pre_of = |l: usize| -> &[T] {
            let d = self.layers[l].dout;
            match (source, forward) {
                (Acts::Cached(_), _) if !unpacked.is_empty() => &unpacked[l][..tr * d],
                (Acts::Cached(c), _) => &c.pre[l][r0 * d..(r0 + tr) * d],
                (_, Some(f)) => &f.pre[l][..tr * d],
                _ => unreachable!("recompute has scratch"),
            }
        };
        let rstd_of = |l: usize| -> &[T] {
            match (source, forward) {
                _ if self.layers[l].norm.is_none() => &[],
                (Acts::Cached(c), _) => &c.rstd[l][r0..r0 + tr],
                (_, Some(f)) => &f.rstd[l][..tr],
                _ => unreachable!("recompute has scratch"),
            }
        };
        // Recompute y_l (norm outputs) once, and the activations a_l (inputs of layer l + 1).
        for (l, layer) in self.layers.iter().enumerate() {
            let d = layer.dout;
            self.recompute_y(ps, layer, pre_of(l), &mut ys[l][..tr * d]);
            // In bf16 the next layer's weight-gradient product takes a_l as its packed operand,
            // written by that product's caller below.
            if l + 1 < n_layers && packs.bwd.get(l + 1).is_none_or(Option::is_none) {
                act::forward(layer.act, &ys[l][..tr * d], &mut acts[l][..tr * d]);
            }
        }
        let n_last = n_layers - 1;
        let lr = r0 - out.rows.start;
        // A split first layer's dz_1 is worked out in place, in the tile's rows of the caller's
        // dz_1 buffer: no copy from scratch.
        let d1 = self.layers[0].dout;
        let mut dz1 = match input {
            Input::Split { .. } => out.dz1.as_deref_mut().map(|z| &mut z[lr * d1..(lr + tr) * d1]),
            Input::Dense { .. } => None,
        };
        // The last layer's activation backward reads dL/d(output) where the caller keeps it.
        {
            let layer = &self.layers[n_last];
            let d = layer.dout;
            let gl = match dz1.as_deref_mut() {
                Some(z) if n_last == 0 => z,
                _ => &mut g[..tr * d],
            };
            let y = &ys[n_last][..tr * d];
            match (given, out.io.as_deref_mut()) {
                (Some(dg), _) => act::backward(layer.act, y, &dg[r0 * d..(r0 + tr) * d], gl),
                (None, Some(io)) => {
                    // The tile's output gradient is read before its rows receive the rest
                    // gradient (added to it with a residual, replacing it without).
                    let rows_io = &mut io[lr * d..(lr + tr) * d];
                    act::backward(layer.act, y, rows_io, gl);
                    if !keep {
                        rows_io.iter_mut().for_each(|v| *v = T::ZERO);
                    }
                }
                _ => unreachable!("every chunk has its output gradient"),
            }
        }
        for l in (0..n_layers).rev() {
            let layer = &self.layers[l];
            let d = layer.dout;
            let wr = ps.specs[layer.w].range();
            let w = MatRef::row_major(ps.value(layer.w), d, layer.din);
            let packed = packs.bwd.get(l).and_then(Option::as_ref);
            let act_done = l == n_last;
            if l > 0 {
                let gl = &mut g[..tr * d];
                self.dz_of_layer(ps, l, act_done, &ys[l][..tr * d], pre_of(l), rstd_of(l), gl, g_local);
                let gz = MatRef::row_major(&*gl, tr, d);
                let dw = &mut g_local[wr.start - base..wr.end - base];
                let din = layer.din;
                let into_dz1 = dz1.is_some() && l == 1;
                let dx = match dz1.as_deref_mut().filter(|_| l == 1) {
                    Some(z) => z,
                    None => &mut g_prev[..tr * din],
                };
                match packed {
                    Some(p) => {
                        // bf16: a_{l−1} rounded and paired as the activation computes it, the
                        // right operand of dW += gzᵀ·a; gz rounded once for its two products.
                        let prev = &self.layers[l - 1];
                        let y_prev = &ys[l - 1][..tr * din];
                        acts16.fill(tr, din, |o, np| act::forward_bf16_row_pairs(prev.act, y_prev, din, np, o));
                        gz16.pack(&g[..tr * d], tr, d);
                        matmul_bf16_rows_t_packed(dw, din, gz16, acts16, Accum::Add);
                        matmul_bf16_rows_packed(dx, din, gz16, p, Accum::Replace);
                    }
                    None => {
                        let a_in = MatRef::row_major(&acts[l - 1][..tr * din], tr, din);
                        self.grad_products(gz, gz16, (dw, din), a_in, Some((dx, w, Accum::Replace)), None);
                    }
                }
                if !into_dz1 {
                    std::mem::swap(g, g_prev);
                }
                continue;
            }
            let gl = match dz1.as_deref_mut() {
                Some(z) => z,
                None => &mut g[..tr * d],
            };
            self.dz_of_layer(ps, l, act_done, &ys[l][..tr * d], pre_of(l), rstd_of(l), gl, g_local);
            let gz = MatRef::row_major(&*gl, tr, d);
            let dw = &mut g_local[wr.start - base..wr.end - base];
            match input {
                Input::Dense { x, dim } => {
                    let xv = MatRef::row_major(&x[r0 * dim..(r0 + tr) * dim], tr, dim);
                    let dx = out.dx.as_deref_mut().map(|dx| (&mut dx[lr * dim..(lr + tr) * dim], w, Accum::Add));
                    self.grad_products(gz, gz16, (dw, dim), xv, dx, packed);
                }
                Input::Split { h_dim, rest, .. } => {
                    if let Some((rx, rd)) = rest {
                        let rv = MatRef::row_major(&rx[r0 * rd..(r0 + tr) * rd], tr, rd);
                        let wc = w.cols(2 * h_dim, 2 * h_dim + rd);
                        let dr = out.drest.as_deref_mut().or(out.io.as_deref_mut());
                        let dr = dr.map(|dr| (&mut dr[lr * rd..(lr + tr) * rd], wc, Accum::Add));
                        self.grad_products(gz, gz16, (&mut dw[2 * h_dim..], layer.din), rv, dr, packed);
                    }
                }
            }
        }
    }

    /// Turns dL/d(output of layer l) in `gl` into dz_l in place (the activation's backward,
    /// unless `act_done`, then the norm's with dγ, dβ) and adds the bias gradient; parameter
    /// gradients into `g_local` (this MLP's parameters only).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn dz_of_layer<T: Real>(
        &self,
        ps: &ParamStore<T>,
        l: usize,
        act_done: bool,
        y: &[T],
        xhat: &[T],
        rstd: &[T],
        gl: &mut [T],
        g_local: &mut [T],
    ) {
        let layer = &self.layers[l];
        let (d, base) = (layer.dout, self.range.start);
        if !act_done {
            act::backward_in_place(layer.act, y, gl);
        }
        if let Some((gi, bi)) = layer.norm {
            let gamma = gi.map(|i| ps.value(i));
            match (gi, bi) {
                (Some(gi), Some(bi)) => {
                    let (gr, br) = (ps.specs[gi].range(), ps.specs[bi].range());
                    let (dg, db) = two_slices(g_local, gr.start - base..gr.end - base, br.start - base..br.end - base);
                    layer_norm::backward(xhat, rstd, d, gamma, gl, Some(dg), Some(db));
                }
                _ => layer_norm::backward(xhat, rstd, d, gamma, gl, None, None),
            }
        }
        let br = ps.specs[layer.b].range();
        sum_rows(gl, d, &mut g_local[br.start - base..br.end - base]);
    }

    /// The two products of a layer's dz (`gz`, tr × d) in the backward: dW (rows of stride
    /// `ld`) += gzᵀ·a_in, and, when `dx` is given, dx = / += gz·W. In bf16 with both, gz is
    /// rounded and packed once into `gz16` for the two (the same bits as packing it in each).
    #[allow(clippy::type_complexity)]
    pub(super) fn grad_products<T: Real>(
        &self,
        gz: MatRef<'_, T>,
        gz16: &mut Bf16Rows,
        (dw, ld): (&mut [T], usize),
        a_in: MatRef<'_, T>,
        dx: Option<(&mut [T], MatRef<'_, T>, Accum)>,
        packed: Option<&PackedB>,
    ) {
        match (dx, packed) {
            (Some((dx, w, accum)), Some(p)) if self.precision == Precision::Bf16 => {
                let (data, off, _, _) = gz.raw();
                gz16.pack(&data[off..off + gz.nrows() * gz.ncols()], gz.nrows(), gz.ncols());
                matmul_bf16_rows_t(dw, ld, gz16, a_in, Accum::Add);
                debug_assert_eq!((p.nrows(), p.ncols()), (w.nrows(), w.ncols()), "packed weight shape");
                matmul_bf16_rows_packed(dx, w.ncols(), gz16, p, accum);
            }
            (dx, packed) => {
                self.matmul(dw, ld, gz.t(), a_in, Accum::Add);
                if let Some((dx, w, accum)) = dx {
                    self.matmul_w(dx, w.ncols(), gz, w, packed, accum);
                }
            }
        }
    }

    /// y_l (the norm's output, or z) of rows r0..r0+tr, from the cache.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn recompute_y<T: Real>(&self, ps: &ParamStore<T>, layer: &Layer, pre: &[T], y: &mut [T]) {
        let d = layer.dout;
        match layer.norm {
            Some((g, b)) => layer_norm::affine(pre, d, g.map(|i| ps.value(i)), b.map(|i| ps.value(i)), y),
            None => y.copy_from_slice(pre),
        }
    }

    /// Scalars in each of the two node-sized buffers of [`Mlp::split_backward_nodes`] for `n`
    /// nodes (dA and dB, N × the first layer's width).
    pub fn split_scratch_len(&self, n: usize) -> usize {
        n * self.layers[0].dout
    }

    /// The node-side half of a split first layer's backward: dA = Σ over each node's outgoing
    /// edges of dz_1, dB over its incoming edges; dW_a += dAᵀ·h, dW_b += dBᵀ·h; dh += dA·W_a + dB·W_b.
    /// dA and dB live in `scratch`, sized here by [`Mlp::split_scratch_len`] and reused from call
    /// to call (every row is overwritten, so they are never cleared).
    #[allow(clippy::too_many_arguments)]
    pub fn split_backward_nodes<T: Real>(
        &self,
        ps: &ParamStore<T>,
        dz1: &[T],
        h: &[T],
        h_dim: usize,
        out_edges: &Csr,
        in_edges: &Csr,
        grad: &mut [T],
        dh: &mut [T],
        scratch: &mut SplitScratch<T>,
    ) {
        let l0 = &self.layers[0];
        let d1 = l0.dout;
        let n = h.len() / h_dim;
        let len = self.split_scratch_len(n);
        scratch.da.resize(len, T::ZERO);
        scratch.db.resize(len, T::ZERO);
        let (da, db) = (&mut scratch.da[..], &mut scratch.db[..]);
        // dz_1 pulled over both groupings, dA and dB written and read again, h read, dh += .
        let pulled = 2 * traffic::of::<T>(dz1.len()) + 2 * traffic::of::<u32>(dz1.len() / d1.max(1));
        traffic::add(Pass::SplitNodes, pulled + traffic::of::<T>(4 * n * d1 + 3 * n * h_dim));
        pull(dz1, d1, out_edges, da);
        pull(dz1, d1, in_edges, db);
        let (da, db) = (&*da, &*db);
        let wr = ps.specs[l0.w].range();
        let din = l0.din;
        let chunk = chunk_rows(n);
        let partials: Vec<Vec<T>> = (0..n.div_ceil(chunk).max(1))
            .into_par_iter()
            .map(|c| {
                let (r0, r1) = (c * chunk, ((c + 1) * chunk).min(n));
                let mut dw = vec![T::ZERO; d1 * din];
                if r1 > r0 {
                    let hv = MatRef::row_major(&h[r0 * h_dim..r1 * h_dim], r1 - r0, h_dim);
                    let dav = MatRef::row_major(&da[r0 * d1..r1 * d1], r1 - r0, d1);
                    let dbv = MatRef::row_major(&db[r0 * d1..r1 * d1], r1 - r0, d1);
                    self.matmul(&mut dw, din, dav.t(), hv, Accum::Add);
                    self.matmul(&mut dw[h_dim..], din, dbv.t(), hv, Accum::Add);
                }
                dw
            })
            .collect();
        for p in partials {
            grad[wr.clone()].iter_mut().zip(&p).for_each(|(g, &v)| *g += v);
        }
        let w = MatRef::row_major(ps.value(l0.w), d1, din);
        let (wa, wb) = (w.cols(0, h_dim), w.cols(h_dim, 2 * h_dim));
        let (pa, pb) = (self.pack(wa), self.pack(wb));
        dh.par_chunks_mut(TILE * h_dim).enumerate().for_each(|(t, dhc)| {
            let r0 = t * TILE;
            let rows = dhc.len() / h_dim;
            let (dav, dbv) = (&da[r0 * d1..(r0 + rows) * d1], &db[r0 * d1..(r0 + rows) * d1]);
            self.matmul_w(dhc, h_dim, MatRef::row_major(dav, rows, d1), wa, pa.as_ref(), Accum::Add);
            self.matmul_w(dhc, h_dim, MatRef::row_major(dbv, rows, d1), wb, pb.as_ref(), Accum::Add);
        });
    }
}
