//! A multi-layer perceptron applied to many rows (nodes or edges), tile by tile.
//!
//! Layer l: z_l = a_{l−1}·W_lᵀ + b_l, then LayerNorm (optional) and an activation. Only what
//! the backward cannot cheaply recompute is cached: per layer the normalised x̂ (or z without a
//! norm) and 1/σ per row. The backward recomputes activations tile by tile while the tile is in
//! cache.
//!
//! The first layer of an edge MLP on cat(h\[src\], h\[dst\], e) is split (the engine's main trick):
//! z_1 = (h·W_aᵀ)\[src\] + (h·W_bᵀ)\[dst\] + e·W_cᵀ + b, so the two big products run on nodes,
//! E/N ≈ 8–16× fewer rows, and in the backward dz_1 is summed onto nodes before the weight
//! products ([`Mlp::split_backward_nodes`]).
//!
//! Determinism: rows are processed in tiles of [`TILE`]; weight gradients are summed per fixed
//! chunk of rows into private buffers that are then added in chunk order. The chunking depends
//! on the number of rows only, never on the thread count.

use std::ops::Range;

use rayon::prelude::*;

use crate::config::Precision;
use crate::matmul::{Accum, MatRef, matmul};
use crate::matmul_bf16::{
    Bf16Rows, PackedB, matmul_bf16, matmul_bf16_packed, matmul_bf16_rows_packed, matmul_bf16_rows_t,
    matmul_bf16_rows_t_packed,
};
use crate::ops::aggregate::Csr;
use crate::ops::{Activation, act, layer_norm};
use crate::params::ParamStore;
use crate::real::Real;
use crate::traffic::{self, Pass};

mod backward;

thread_local! {
    /// A forward tile's activations as the next layer's bf16 left operand (bf16 MLPs): written
    /// by the activation pass, read by the next product on the same thread.
    static A16: std::cell::RefCell<Bf16Rows> = std::cell::RefCell::new(Bf16Rows::default());
}

/// Rows per tile: a tile's activations stay in L2 while it passes through all layers.
pub const TILE: usize = 512;
/// At most this many private gradient buffers per backward.
const MAX_CHUNKS: usize = 64;
/// Fewest rows per gradient chunk.
const MIN_CHUNK_ROWS: usize = 8 * TILE;

/// One Linear layer and what follows it.
#[derive(Clone, Debug)]
pub struct Layer {
    /// Weight tensor index, shape (dout, din).
    pub w: usize,
    /// Bias tensor index, shape (dout).
    pub b: usize,
    /// LayerNorm after the Linear: `Some((γ, β))` with `None` parameters for no-affine.
    pub norm: Option<(Option<usize>, Option<usize>)>,
    /// Activation after the norm.
    pub act: Activation,
    /// Input width.
    pub din: usize,
    /// Output width.
    pub dout: usize,
}

/// An MLP: its layers and the contiguous range of its parameters in the flat buffer.
#[derive(Clone, Debug)]
pub struct Mlp {
    /// The layers in order.
    pub layers: Vec<Layer>,
    /// Where its parameters (and gradients) live.
    pub range: Range<usize>,
    /// The arithmetic of its matrix products.
    pub precision: Precision,
    /// How the forward saves each layer's x̂ (or z) for the backward: f32, or rounded to bf16
    /// (half the memory; the backward then works from the rounded values).
    pub saved: Precision,
}

/// How each layer of an MLP ends.
#[derive(Clone, Copy, Debug)]
pub struct LayerStyle {
    /// LayerNorm (with affine parameters or not).
    pub norm: Option<bool>,
    /// Activation.
    pub act: Activation,
}

/// The input of an MLP's first layer.
#[derive(Clone, Copy)]
pub enum Input<'a, T> {
    /// A row-major matrix (rows × dim).
    Dense {
        /// The rows.
        x: &'a [T],
        /// Columns.
        dim: usize,
    },
    /// cat(h\[src\], h\[dst\], rest) with `a = h·W_aᵀ`, `b = h·W_bᵀ` precomputed on nodes.
    Split {
        /// (N × d1) h·W_aᵀ.
        a: &'a [T],
        /// (N × d1) h·W_bᵀ.
        b: &'a [T],
        /// Source node of each row (edge).
        src: &'a [u32],
        /// Destination node of each row.
        dst: &'a [u32],
        /// Width of h (the columns of W_a and of W_b).
        h_dim: usize,
        /// The third block (edge state or edge features) and its width.
        rest: Option<(&'a [T], usize)>,
    },
}

/// Where the gradient with respect to the input goes.
pub enum DInput<'a, T> {
    /// Not needed.
    None,
    /// Accumulate dx (rows × dim).
    Dense(&'a mut [T]),
    /// Write dz_1 (rows × d1) for [`Mlp::split_backward_nodes`], accumulate d rest.
    Split {
        /// dz of the first layer, overwritten.
        dz1: &'a mut [T],
        /// Accumulated gradient of the rest block (rows × rest width).
        drest: Option<&'a mut [T]>,
    },
}

/// The gradient with respect to an MLP's output.
pub enum DOut<'a, T> {
    /// Read from this buffer (rows × dout).
    Given(&'a [T]),
    /// Read from `buf` (rows × dout), which also receives the gradient of the split input's rest
    /// block (same width): each tile's rows are read first, then the rest gradient is added
    /// (`keep`: a residual connection passes the output gradient through) or replaces them.
    /// Saves one E × H buffer in the edge networks' backward.
    SharedWithRest {
        /// The shared buffer.
        buf: &'a mut [T],
        /// Keep the output gradient and add to it.
        keep: bool,
    },
}

/// Where the backward finds each tile's activations.
#[derive(Clone, Copy)]
pub enum Acts<'a, T> {
    /// In the cache the forward filled.
    Cached(&'a MlpCache<T>),
    /// Nowhere: the backward re-runs each tile's forward (activation checkpointing). `rows` is
    /// the number of rows the forward ran on.
    Recompute {
        /// Rows.
        rows: usize,
    },
}

/// Tile-sized buffers of one worker: activations of every layer, scratch, output.
struct TileScratch<T> {
    pre: Vec<Vec<T>>,
    rstd: Vec<Vec<T>>,
    a: Vec<T>,
    y: Vec<T>,
    out: Vec<T>,
}

impl<T: Real> TileScratch<T> {
    fn new(layers: &[Layer], width: usize) -> Self {
        TileScratch {
            pre: layers.iter().map(|l| vec![T::ZERO; TILE * l.dout]).collect(),
            rstd: layers.iter().map(|_| vec![T::ZERO; TILE]).collect(),
            a: vec![T::ZERO; TILE * width],
            y: vec![T::ZERO; TILE * width],
            out: Vec::new(),
        }
    }

    /// Runs the forward of rows r0..r0+tr into these buffers.
    #[allow(clippy::too_many_arguments)]
    fn forward<M: ?Sized + TileForward<T>>(
        &mut self,
        mlp: &M,
        ps: &ParamStore<T>,
        input: Input<'_, T>,
        packs: &WeightPacks,
        r0: usize,
        tr: usize,
        dout: usize,
    ) {
        let mut out = std::mem::take(&mut self.out);
        out.resize(tr * dout, T::ZERO);
        self.forward_into(mlp, ps, input, packs, r0, tr, &mut out[..tr * dout], None);
        self.out = out;
    }

    /// Runs the forward of rows r0..r0+tr with these buffers as scratch, its output (plus
    /// `residual`'s rows, when given) into `out`.
    #[allow(clippy::too_many_arguments)]
    fn forward_into<M: ?Sized + TileForward<T>>(
        &mut self,
        mlp: &M,
        ps: &ParamStore<T>,
        input: Input<'_, T>,
        packs: &WeightPacks,
        r0: usize,
        tr: usize,
        out: &mut [T],
        residual: Option<&[T]>,
    ) {
        let TileScratch { pre, rstd, a, y, .. } = self;
        let layers = mlp.layers();
        let mut pv: Vec<&mut [T]> = pre.iter_mut().zip(layers).map(|(p, l)| &mut p[..tr * l.dout]).collect();
        let mut rv: Vec<&mut [T]> = rstd
            .iter_mut()
            .zip(layers)
            .map(|(r, l)| if l.norm.is_some() { &mut r[..tr] } else { &mut r[..0] })
            .collect();
        mlp.tile(ps, input, packs, (r0, tr), &mut pv, &mut rv, (out, residual), a, y);
    }
}

/// The node-sized buffers of [`Mlp::split_backward_nodes`] (dA, dB), owned by the backward's
/// workspace so that no call allocates them.
#[derive(Clone, Debug, Default)]
pub struct SplitScratch<T> {
    /// dz_1 summed over each node's outgoing edges (N × d1).
    pub da: Vec<T>,
    /// dz_1 summed over each node's incoming edges (N × d1).
    pub db: Vec<T>,
}

impl<T> SplitScratch<T> {
    /// Bytes held (capacities).
    pub fn bytes(&self) -> usize {
        (self.da.capacity() + self.db.capacity()) * std::mem::size_of::<T>()
    }
}

/// Tile-sized buffers of one backward worker; see [`Mlp::backward_scratch`].
pub struct BackwardScratch<T> {
    /// Per layer, the tile's saved x̂ (or z) unpacked from bf16 (empty when saved in f32).
    unpacked: Vec<Vec<T>>,
    /// Per layer the recomputed activation a_l (f32 products only).
    acts: Vec<Vec<T>>,
    /// bf16: the tile's a_{l−1} as the packed right operand of a weight-gradient product.
    acts16: PackedB,
    ys: Vec<Vec<T>>,
    g: Vec<T>,
    g_prev: Vec<T>,
    /// The tile's dz rounded to bf16 once for its two products (bf16 only).
    gz16: Bf16Rows,
    forward: Option<TileScratch<T>>,
}

/// One backward's inputs, shared by all its tiles.
#[derive(Clone, Copy)]
struct TileStep<'a, T> {
    ps: &'a ParamStore<T>,
    input: Input<'a, T>,
    source: Acts<'a, T>,
    /// The weights packed for this backward's products (bf16).
    packs: &'a WeightPacks,
    /// The output gradient, when given (else it is in each chunk's `io`).
    given: Option<&'a [T]>,
    /// With `io`: keep the output gradient and add the rest gradient to it.
    keep: bool,
}

/// One gradient chunk of a backward: its rows and its slices of the input-gradient outputs.
struct ChunkGrads<'a, T> {
    rows: Range<usize>,
    dx: Option<&'a mut [T]>,
    dz1: Option<&'a mut [T]>,
    drest: Option<&'a mut [T]>,
    io: Option<&'a mut [T]>,
}

/// The tile forward, as a trait so [`TileScratch`] can call it without borrowing conflicts.
trait TileForward<T> {
    fn layers(&self) -> &[Layer];
    #[allow(clippy::too_many_arguments)]
    fn tile(
        &self,
        ps: &ParamStore<T>,
        input: Input<'_, T>,
        packs: &WeightPacks,
        rows: (usize, usize),
        pre: &mut [&mut [T]],
        rstd: &mut [&mut [T]],
        out: (&mut [T], Option<&[T]>),
        a: &mut [T],
        y: &mut [T],
    );
}

impl<T: Real> TileForward<T> for Mlp {
    fn layers(&self) -> &[Layer] {
        &self.layers
    }
    fn tile(
        &self,
        ps: &ParamStore<T>,
        input: Input<'_, T>,
        packs: &WeightPacks,
        (r0, tr): (usize, usize),
        pre: &mut [&mut [T]],
        rstd: &mut [&mut [T]],
        (out, residual): (&mut [T], Option<&[T]>),
        a: &mut [T],
        y: &mut [T],
    ) {
        self.forward_tile(ps, input, packs, r0, tr, pre, rstd, out, residual, a, y);
    }
}

/// What the forward keeps for the backward.
#[derive(Clone, Debug, Default)]
pub struct MlpCache<T> {
    /// Per layer (rows × dout): x̂ after a norm, else the pre-activation z (empty when saved in
    /// bf16).
    pub pre: Vec<Vec<T>>,
    /// `pre` rounded to bf16, when the MLP saves its activations in bf16 (else empty).
    pub pre_bf16: Vec<Vec<u16>>,
    /// Per normalised layer: 1/σ per row.
    pub rstd: Vec<Vec<T>>,
    /// Rows the cache holds.
    pub rows: usize,
}

impl<T> MlpCache<T> {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        (self.pre.iter().map(Vec::len).sum::<usize>() + self.rstd.iter().map(Vec::len).sum::<usize>())
            * std::mem::size_of::<T>()
            + self.pre_bf16.iter().map(Vec::len).sum::<usize>() * 2
    }

    /// Whether the activations are saved in bf16.
    fn is_bf16(&self) -> bool {
        self.pre_bf16.iter().any(|p| !p.is_empty())
    }
}

/// The bf16 weight operands of one pass over an MLP's rows, each converted and packed once
/// ([`PackedB`]) instead of in every tile's product; empty in f32, where the products read
/// the weights in place.
#[derive(Default)]
struct WeightPacks {
    /// Per layer, the forward's right operand Wᵀ (a split first layer's: W_cᵀ of its rest block).
    fwd: Vec<Option<PackedB>>,
    /// Per layer, the backward's right operand W (a split first layer's: W_c).
    bwd: Vec<Option<PackedB>>,
}

fn chunk_rows(rows: usize) -> usize {
    let c = rows.div_ceil(MAX_CHUNKS).max(MIN_CHUNK_ROWS);
    c.div_ceil(TILE) * TILE
}

impl Mlp {
    /// Registers an MLP `dims[0] → … → dims.last()` named `name` (tensors `name.{l}.weight`,
    /// `name.{l}.bias`, `name.{l}.norm.weight`, `name.{l}.norm.bias`); `style(l)` says how layer
    /// l ends.
    pub fn register<T: Real>(
        ps: &mut ParamStore<T>,
        name: &str,
        dims: &[usize],
        style: impl Fn(usize) -> LayerStyle,
    ) -> Mlp {
        assert!(dims.len() >= 2, "an MLP needs at least one layer");
        let start = ps.len();
        let mut layers = Vec::new();
        for l in 0..dims.len() - 1 {
            let (din, dout) = (dims[l], dims[l + 1]);
            let w = ps.add(format!("{name}.{l}.weight"), &[dout, din]);
            let b = ps.add(format!("{name}.{l}.bias"), &[dout]);
            let s = style(l);
            let norm = s.norm.map(|affine| {
                if affine {
                    let g = ps.add(format!("{name}.{l}.norm.weight"), &[dout]);
                    let b = ps.add(format!("{name}.{l}.norm.bias"), &[dout]);
                    (Some(g), Some(b))
                } else {
                    (None, None)
                }
            });
            layers.push(Layer { w, b, norm, act: s.act, din, dout });
        }
        Mlp { layers, range: start..ps.len(), precision: Precision::F32, saved: Precision::F32 }
    }

    /// A matrix product in this MLP's precision.
    #[inline]
    #[track_caller]
    fn matmul<T: Real>(&self, dst: &mut [T], ld: usize, a: MatRef<'_, T>, b: MatRef<'_, T>, accum: Accum) {
        match self.precision {
            Precision::F32 => matmul(dst, ld, a, b, accum),
            Precision::Bf16 => matmul_bf16(dst, ld, a, b, accum),
        }
    }

    /// A product whose right operand `b` is a weight, read from `packed` when it was packed
    /// for this pass (bf16), else in place.
    #[inline]
    #[track_caller]
    fn matmul_w<T: Real>(
        &self,
        dst: &mut [T],
        ld: usize,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        packed: Option<&PackedB>,
        accum: Accum,
    ) {
        match packed {
            Some(p) => {
                debug_assert_eq!((p.nrows(), p.ncols()), (b.nrows(), b.ncols()), "packed weight shape");
                matmul_bf16_packed(dst, ld, a, p, accum)
            }
            None => self.matmul(dst, ld, a, b, accum),
        }
    }

    /// `b` packed once for the products of a pass, in bf16; `None` in f32.
    fn pack<T: Real>(&self, b: MatRef<'_, T>) -> Option<PackedB> {
        (self.precision == Precision::Bf16).then(|| PackedB::new(b))
    }

    /// The weight operands of a pass over rows of `input`, packed once in bf16: the forward's
    /// (`forward`) and the backward's (`backward`) right operands of every layer.
    fn weight_packs<T: Real>(
        &self,
        ps: &ParamStore<T>,
        input: Input<'_, T>,
        forward: bool,
        backward: bool,
    ) -> WeightPacks {
        if self.precision != Precision::Bf16 {
            return WeightPacks::default();
        }
        let (mut fwd, mut bwd) = (Vec::new(), Vec::new());
        for (l, layer) in self.layers.iter().enumerate() {
            let w = MatRef::row_major(ps.value(layer.w), layer.dout, layer.din);
            // The first layer of a split MLP multiplies only its rest block in tile products.
            let w = match input {
                Input::Split { h_dim, rest, .. } if l == 0 => rest.map(|(_, rd)| w.cols(2 * h_dim, 2 * h_dim + rd)),
                _ => Some(w),
            };
            fwd.push(w.filter(|_| forward).and_then(|w| self.pack(w.t())));
            bwd.push(w.filter(|_| backward).and_then(|w| self.pack(w)));
        }
        WeightPacks { fwd, bwd }
    }

    /// Output width.
    pub fn dout(&self) -> usize {
        self.layers.last().expect("non-empty").dout
    }

    /// Bytes a pass over `rows` rows reads of its input ([`crate::traffic`]'s rule): dense rows,
    /// or a split first layer's two gathered node rows and edge lists per row and its rest block.
    fn input_bytes<T>(&self, input: Input<'_, T>, rows: usize) -> usize {
        match input {
            Input::Dense { dim, .. } => traffic::of::<T>(rows * dim),
            Input::Split { rest, .. } => {
                let d1 = self.layers[0].dout;
                traffic::of::<T>(rows * (2 * d1 + rest.map_or(0, |r| r.1))) + traffic::of::<u32>(2 * rows)
            }
        }
    }

    /// Bytes of what a forward over `rows` rows saves for the backward: x̂ (or z) of every layer
    /// at the saved width, 1/σ of every normalised layer.
    fn saved_bytes<T>(&self, rows: usize) -> usize {
        let pre = if self.saved == Precision::Bf16 { 2 } else { std::mem::size_of::<T>() };
        let per_row: usize = self
            .layers
            .iter()
            .map(|l| pre * l.dout + if l.norm.is_some() { std::mem::size_of::<T>() } else { 0 })
            .sum();
        rows * per_row
    }

    /// For a split MLP: A = h·W_aᵀ and B = h·W_bᵀ (each N × d1) from node states h (N × h_dim).
    pub fn split_precompute<T: Real>(&self, ps: &ParamStore<T>, h: &[T], h_dim: usize, a: &mut Vec<T>, b: &mut Vec<T>) {
        let l0 = &self.layers[0];
        let n = h.len() / h_dim;
        let w = MatRef::row_major(ps.value(l0.w), l0.dout, l0.din);
        a.resize(n * l0.dout, T::ZERO);
        b.resize(n * l0.dout, T::ZERO);
        traffic::add(Pass::SplitNodes, traffic::of::<T>(h.len() + 2 * n * l0.dout));
        let (wa, wb) = (w.cols(0, h_dim).t(), w.cols(h_dim, 2 * h_dim).t());
        let (pa, pb) = (self.pack(wa), self.pack(wb));
        a.par_chunks_mut(TILE * l0.dout).zip(b.par_chunks_mut(TILE * l0.dout)).enumerate().for_each(|(t, (ac, bc))| {
            let r0 = t * TILE;
            let rows = ac.len() / l0.dout;
            let hv = MatRef::row_major(&h[r0 * h_dim..(r0 + rows) * h_dim], rows, h_dim);
            self.matmul_w(ac, l0.dout, hv, wa, pa.as_ref(), Accum::Replace);
            self.matmul_w(bc, l0.dout, hv, wb, pb.as_ref(), Accum::Replace);
        });
    }

    /// Forward over `rows` rows; writes the output (rows × dout) and fills the cache.
    pub fn forward<T: Real>(
        &self,
        ps: &ParamStore<T>,
        input: Input<'_, T>,
        rows: usize,
        cache: &mut MlpCache<T>,
        out: &mut [T],
    ) {
        self.forward_residual(ps, input, rows, cache, out, None);
    }

    /// [`Mlp::forward`] with a residual connection when `residual` is given: out = MLP(input) +
    /// residual (rows × dout), added as each tile's output is stored (the bits of adding it
    /// afterwards, without the pass over both arrays).
    pub fn forward_residual<T: Real>(
        &self,
        ps: &ParamStore<T>,
        input: Input<'_, T>,
        rows: usize,
        cache: &mut MlpCache<T>,
        out: &mut [T],
        residual: Option<&[T]>,
    ) {
        let n_layers = self.layers.len();
        let dout = self.dout();
        assert_eq!(out.len(), rows * dout, "mlp forward: out shape");
        assert!(residual.is_none_or(|r| r.len() == out.len()), "mlp forward: residual shape");
        cache.rows = rows;
        let res = residual.map_or(0, <[T]>::len);
        let io = self.input_bytes(input, rows) + traffic::of::<T>(out.len() + res);
        traffic::add(Pass::MlpForward, io + self.saved_bytes::<T>(rows));
        let bf16 = self.saved == Precision::Bf16;
        cache.pre.resize_with(n_layers, Vec::new);
        cache.pre_bf16.resize_with(n_layers, Vec::new);
        cache.rstd.resize_with(n_layers, Vec::new);
        for (l, layer) in self.layers.iter().enumerate() {
            // Only one of the two forms is held; the other is freed (a switch of mode).
            let (keep, drop) = if bf16 { (rows * layer.dout, 0) } else { (0, rows * layer.dout) };
            resize_or_free(&mut cache.pre[l], drop, T::ZERO);
            resize_or_free(&mut cache.pre_bf16[l], keep, 0);
            cache.rstd[l].resize(if layer.norm.is_some() { rows } else { 0 }, T::ZERO);
        }
        let width = self.width();
        let packs = &self.weight_packs(ps, input, true, false);
        if bf16 {
            // Each tile runs in tile-sized buffers, then its x̂ (or z) is rounded into the cache.
            let tiles = TileViews::split(&mut cache.pre_bf16, &mut cache.rstd, &self.layers, out, dout, rows);
            let scratch = || TileScratch::new(&self.layers, width);
            tiles.into_par_iter().for_each_init(scratch, |s, t| {
                let TileView { r0, rows, pre, mut rstd, out } = t;
                let TileScratch { pre: tile_pre, a, y, .. } = s;
                let mut pv: Vec<&mut [T]> =
                    tile_pre.iter_mut().zip(&self.layers).map(|(p, l)| &mut p[..rows * l.dout]).collect();
                let res = residual.map(|r| &r[r0 * dout..(r0 + rows) * dout]);
                self.forward_tile(ps, input, packs, r0, rows, &mut pv, &mut rstd, out, res, a, y);
                for (p, saved) in pv.iter().zip(pre) {
                    crate::bf16::pack_slice(p, saved);
                }
            });
            return;
        }
        let tiles = TileViews::split(&mut cache.pre, &mut cache.rstd, &self.layers, out, dout, rows);
        // Scratch per rayon job, not per tile: tile-sized buffers are large enough that the
        // allocator would map and unmap them every time.
        let scratch = || (vec![T::ZERO; TILE * width], vec![T::ZERO; TILE * width]);
        tiles.into_par_iter().for_each_init(scratch, |(a, y), t| {
            let TileView { r0, rows, mut pre, mut rstd, out } = t;
            let res = residual.map(|r| &r[r0 * dout..(r0 + rows) * dout]);
            self.forward_tile(ps, input, packs, r0, rows, &mut pre, &mut rstd, out, res, a, y);
        });
    }

    /// The forward of rows r0..r0+tr: fills per-layer `pre` (x̂ or z) and `rstd` (tile rows
    /// each) and the output, plus the tile's rows of `residual` when given; `a`, `y` are
    /// scratch of TILE × the widest layer.
    #[allow(clippy::too_many_arguments)]
    fn forward_tile<T: Real>(
        &self,
        ps: &ParamStore<T>,
        input: Input<'_, T>,
        packs: &WeightPacks,
        r0: usize,
        tr: usize,
        pre: &mut [&mut [T]],
        rstd: &mut [&mut [T]],
        out: &mut [T],
        residual: Option<&[T]>,
        a: &mut [T],
        y: &mut [T],
    ) {
        let n_layers = self.layers.len();
        for (l, layer) in self.layers.iter().enumerate() {
            let z = &mut *pre[l];
            let w = MatRef::row_major(ps.value(layer.w), layer.dout, layer.din);
            let packed = packs.fwd.get(l).and_then(Option::as_ref);
            match (l, packed) {
                (0, _) => first_layer(self, input, w, packed, layer, r0, tr, z),
                // The bf16 operand the previous layer's activation wrote.
                (_, Some(p)) => A16.with_borrow(|a16| matmul_bf16_rows_packed(z, layer.dout, a16, p, Accum::Replace)),
                (_, None) => {
                    let a_in = MatRef::row_major(&a[..tr * layer.din], tr, layer.din);
                    self.matmul(z, layer.dout, a_in, w.t(), Accum::Replace);
                }
            }
            add_bias(z, ps.value(layer.b));
            let ys = &mut y[..tr * layer.dout];
            self.post(ps, layer, z, rstd[l], ys);
            if l + 1 == n_layers {
                act::forward(layer.act, ys, out);
                if let Some(r) = residual {
                    add_rows(out, r);
                }
            } else if packs.fwd.get(l + 1).is_some_and(Option::is_some) {
                // The next layer's bf16 left operand, rounded and paired as it is computed.
                A16.with_borrow_mut(|a16| {
                    a16.fill(tr, layer.dout, |o| act::forward_bf16_rows(layer.act, ys, layer.dout, o))
                });
            } else {
                act::forward(layer.act, ys, &mut a[..tr * layer.dout]);
            }
        }
    }

    /// Forward over `rows` rows keeping nothing for the backward (activation checkpointing:
    /// [`Acts::Recompute`] rebuilds each tile's activations inside the backward).
    pub fn forward_nocache<T: Real>(&self, ps: &ParamStore<T>, input: Input<'_, T>, rows: usize, out: &mut [T]) {
        self.forward_nocache_residual(ps, input, rows, out, None);
    }

    /// [`Mlp::forward_nocache`] with a residual connection when `residual` is given, as
    /// [`Mlp::forward_residual`].
    pub fn forward_nocache_residual<T: Real>(
        &self,
        ps: &ParamStore<T>,
        input: Input<'_, T>,
        rows: usize,
        out: &mut [T],
        residual: Option<&[T]>,
    ) {
        let dout = self.dout();
        assert_eq!(out.len(), rows * dout, "mlp forward: out shape");
        assert!(residual.is_none_or(|r| r.len() == out.len()), "mlp forward: residual shape");
        let res = residual.map_or(0, <[T]>::len);
        traffic::add(Pass::MlpForward, self.input_bytes(input, rows) + traffic::of::<T>(out.len() + res));
        let width = self.width();
        let scratch = || TileScratch::new(&self.layers, width);
        let packs = &self.weight_packs(ps, input, true, false);
        // Each tile's output goes straight into its rows of `out`.
        out.par_chunks_mut(TILE * dout).enumerate().for_each_init(scratch, |s, (t, o)| {
            let (r0, tr) = (t * TILE, o.len() / dout);
            let res = residual.map(|r| &r[r0 * dout..(r0 + tr) * dout]);
            s.forward_into(self, ps, input, packs, r0, tr, o, res);
        });
    }

    /// Norm (in place on z, caching x̂ and rstd) and affine into `y`, in one row pass; without a
    /// norm, y = z.
    fn post<T: Real>(&self, ps: &ParamStore<T>, layer: &Layer, z: &mut [T], rstd: &mut [T], y: &mut [T]) {
        match layer.norm {
            Some((g, b)) => {
                layer_norm::normalize(z, layer.dout, rstd, g.map(|i| ps.value(i)), b.map(|i| ps.value(i)), y)
            }
            None => y.copy_from_slice(z),
        }
    }
}

/// out\[n\] = Σ_{e ∈ csr.of(n)} x\[e\], rows of width d, in edge order.
pub fn pull<T: Real>(x: &[T], d: usize, csr: &Csr, out: &mut [T]) {
    if d == 0 {
        return;
    }
    out.par_chunks_mut(TILE * d).enumerate().for_each(|(t, oc)| pull_tile(x, d, csr, t * TILE, oc));
}

crate::dispatch! {
    /// The nodes n0.. of one tile of [`pull`], in one call: the rows are gathered in a loop
    /// compiled for the SIMD level, not one dispatched call per edge.
    fn pull_tile<T: Real>(x: &[T], d: usize, csr: &Csr, n0: usize, out: &mut [T]) {
        let last = csr.num_nodes();
        for (local, o) in out.chunks_exact_mut(d).enumerate() {
            // The next node's rows are fetched while this one sums its own: the edge rows are
            // scattered over an E-row buffer, so the hardware prefetcher cannot guess them.
            if n0 + local + 1 < last {
                prefetch_rows(x, d, csr.of(n0 + local + 1));
            }
            o.iter_mut().for_each(|v| *v = T::ZERO);
            for &e in csr.of(n0 + local) {
                let xr = &x[e as usize * d..(e as usize + 1) * d];
                o.iter_mut().zip(xr).for_each(|(o, &v)| *o += v);
            }
        }
    }
}

/// A hint to bring rows `edges` of `x` (width d) into the cache; no effect on any value.
#[inline(always)]
fn prefetch_rows<T>(x: &[T], d: usize, edges: &[u32]) {
    #[cfg(target_arch = "x86_64")]
    for &e in edges {
        let row = &x[e as usize * d..(e as usize + 1) * d];
        let bytes = std::mem::size_of_val(row);
        let p = row.as_ptr().cast::<i8>();
        for off in (0..bytes).step_by(64) {
            // SAFETY: `p + off` is inside `row`; a prefetch reads nothing architecturally.
            unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.add(off)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (x, d, edges);
}

crate::dispatch! {
    /// out += r, element-wise (a residual connection).
    pub(crate) fn add_rows<T: Real>(out: &mut [T], r: &[T]) {
        out.iter_mut().zip(r).for_each(|(o, &v)| *o += v);
    }
}

crate::dispatch! {
    /// z (rows × d) += bias on every row.
    fn add_bias<T: Real>(z: &mut [T], bias: &[T]) {
        let d = bias.len();
        for row in z.chunks_exact_mut(d) {
            row.iter_mut().zip(bias).for_each(|(v, &b)| *v += b);
        }
    }
}

crate::dispatch! {
    /// out += Σ over rows of g (rows × d).
    fn sum_rows<T: Real>(g: &[T], d: usize, out: &mut [T]) {
        for row in g.chunks_exact(d) {
            out.iter_mut().zip(row).for_each(|(o, &v)| *o += v);
        }
    }
}

crate::dispatch! {
    /// z[i] = a[src[i]] + b[dst[i]] for the rows of a tile.
    fn gather_pair<T: Real>(a: &[T], b: &[T], src: &[u32], dst: &[u32], d: usize, z: &mut [T]) {
        for ((row, &s), &t) in z.chunks_exact_mut(d).zip(src).zip(dst) {
            let ar = &a[s as usize * d..(s as usize + 1) * d];
            let br = &b[t as usize * d..(t as usize + 1) * d];
            for j in 0..d {
                row[j] = ar[j] + br[j];
            }
        }
    }
}

/// z = first Linear of rows r0..r0+tr (without bias); `packed`: its tile product's weight
/// operand packed for the pass (bf16).
#[allow(clippy::too_many_arguments)]
fn first_layer<T: Real>(
    mlp: &Mlp,
    input: Input<'_, T>,
    w: MatRef<'_, T>,
    packed: Option<&PackedB>,
    layer: &Layer,
    r0: usize,
    tr: usize,
    z: &mut [T],
) {
    match input {
        Input::Dense { x, dim } => {
            let xv = MatRef::row_major(&x[r0 * dim..(r0 + tr) * dim], tr, dim);
            mlp.matmul_w(z, layer.dout, xv, w.t(), packed, Accum::Replace);
        }
        Input::Split { a, b, src, dst, h_dim, rest } => {
            gather_pair(a, b, &src[r0..r0 + tr], &dst[r0..r0 + tr], layer.dout, z);
            if let Some((rx, rd)) = rest {
                let rv = MatRef::row_major(&rx[r0 * rd..(r0 + tr) * rd], tr, rd);
                mlp.matmul_w(z, layer.dout, rv, w.cols(2 * h_dim, 2 * h_dim + rd).t(), packed, Accum::Add);
            }
        }
    }
}

/// `v` resized to `len`; to 0 its memory is released too.
fn resize_or_free<V: Clone>(v: &mut Vec<V>, len: usize, fill: V) {
    if len == 0 {
        *v = Vec::new();
    } else {
        v.resize(len, fill);
    }
}

/// Two disjoint sub-slices of one slice.
fn two_slices<T>(s: &mut [T], a: Range<usize>, b: Range<usize>) -> (&mut [T], &mut [T]) {
    assert!(a.end <= b.start || b.end <= a.start, "overlapping ranges");
    if a.start < b.start {
        let (lo, hi) = s.split_at_mut(b.start);
        (&mut lo[a], &mut hi[..b.end - b.start])
    } else {
        let (lo, hi) = s.split_at_mut(a.start);
        (&mut hi[..a.end - a.start], &mut lo[b])
    }
}

/// Mutable views of one tile: each layer's cache rows (saved as `P`) and the output rows.
struct TileView<'a, P, T> {
    r0: usize,
    rows: usize,
    pre: Vec<&'a mut [P]>,
    rstd: Vec<&'a mut [T]>,
    out: &'a mut [T],
}

struct TileViews;

impl TileViews {
    fn split<'a, P, T>(
        pre: &'a mut [Vec<P>],
        rstd: &'a mut [Vec<T>],
        layers: &[Layer],
        out: &'a mut [T],
        dout: usize,
        rows: usize,
    ) -> Vec<TileView<'a, P, T>> {
        let n_tiles = rows.div_ceil(TILE);
        let mut pre_it: Vec<std::slice::ChunksMut<'a, P>> =
            pre.iter_mut().zip(layers).map(|(p, l)| p.chunks_mut(TILE * l.dout)).collect();
        let mut rstd_it: Vec<std::slice::ChunksMut<'a, T>> = rstd.iter_mut().map(|r| r.chunks_mut(TILE)).collect();
        let mut out_it = out.chunks_mut(TILE * dout);
        (0..n_tiles)
            .map(|t| TileView {
                r0: t * TILE,
                rows: TILE.min(rows - t * TILE),
                pre: pre_it.iter_mut().map(|it| it.next().expect("tile")).collect(),
                rstd: rstd_it.iter_mut().map(|it| it.next().unwrap_or(&mut [])).collect(),
                out: out_it.next().expect("tile"),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trackgnn_trackml::rng::Rng;

    #[test]
    fn pull_sums_each_nodes_edges_in_edge_order_across_tiles() {
        let mut rng = Rng::new(40);
        // Two full tiles of nodes and a partial one; nodes without edges among them.
        let (n, e, d) = (2 * TILE + 37, 3000, 24);
        let key: Vec<u32> = (0..e).map(|_| rng.below(n as u64) as u32).collect();
        let csr = Csr::build(&key, n);
        let x: Vec<f32> = (0..e * d).map(|_| rng.normal() as f32).collect();
        let mut out = vec![f32::NAN; n * d];
        pull(&x, d, &csr, &mut out);
        // The same sums, edge after edge in increasing order, from zero.
        let mut want = vec![0.0f32; n * d];
        for (i, &k) in key.iter().enumerate() {
            for j in 0..d {
                want[k as usize * d + j] += x[i * d + j];
            }
        }
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&out), bits(&want));
    }

    #[test]
    fn residual_added_at_the_store_has_the_bits_of_adding_it_afterwards() {
        let mut rng = Rng::new(41);
        // A split first layer with a rest block, over more rows than one tile.
        let (n, e, h) = (300usize, 2 * TILE + 77, 16usize);
        let mut ps = ParamStore::<f32>::default();
        let style = |_| LayerStyle { norm: Some(true), act: Activation::Silu };
        let mut mlp = Mlp::register(&mut ps, "net", &[3 * h, h, h], style);
        ps.data.iter_mut().for_each(|v| *v = 0.3 * rng.normal() as f32);
        let nodes: Vec<f32> = (0..n * h).map(|_| rng.normal() as f32).collect();
        let src: Vec<u32> = (0..e).map(|_| rng.below(n as u64) as u32).collect();
        let dst: Vec<u32> = (0..e).map(|_| rng.below(n as u64) as u32).collect();
        let rest: Vec<f32> = (0..e * h).map(|_| rng.normal() as f32).collect();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for precision in [Precision::F32, Precision::Bf16] {
            (mlp.precision, mlp.saved) = (precision, precision);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            mlp.split_precompute(&ps, &nodes, h, &mut a, &mut b);
            let input = Input::Split { a: &a, b: &b, src: &src, dst: &dst, h_dim: h, rest: Some((&rest, h)) };
            let mut after = vec![0.0f32; e * h];
            mlp.forward(&ps, input, e, &mut MlpCache::default(), &mut after);
            after.iter_mut().zip(&rest).for_each(|(o, &r)| *o += r);
            let mut fused = vec![0.0f32; e * h];
            mlp.forward_residual(&ps, input, e, &mut MlpCache::default(), &mut fused, Some(&rest));
            assert_eq!(bits(&fused), bits(&after), "{precision:?} forward");
            let mut nocache = vec![0.0f32; e * h];
            mlp.forward_nocache_residual(&ps, input, e, &mut nocache, Some(&rest));
            assert_eq!(bits(&nocache), bits(&after), "{precision:?} forward without cache");
        }
    }
}
