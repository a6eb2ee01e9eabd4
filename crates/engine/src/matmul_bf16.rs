//! Matrix products with bfloat16 operands and f32 accumulation (mixed precision,
//! [`Precision::Bf16`](crate::config::Precision::Bf16)).
//!
//! Both operands are rounded to bf16 (nearest, ties to even) and packed in pairs along the
//! inner dimension; every product of two bf16 values is exact in f32, and the sums are f32.
//! Two kernels compute exactly the same sums in the same order, chosen at run time:
//! - [`Bf16Path::Avx512Bf16`]: `vdpbf16ps` (`_mm512_dpbf16_ps`), 16 columns × a k-pair per
//!   instruction, on CPUs with AVX512-BF16 (Zen 4/5, Cooper Lake, Sapphire Rapids and later);
//! - [`Bf16Path::Portable`]: the same pair-wise sums in plain f32 arithmetic, vectorised by the
//!   compiler at the best SIMD level ([`crate::dispatch!`]); any CPU.
//!
//! `vdpbf16ps` adds, per lane, the odd element's product and then the even one's to the
//! accumulator, each addition rounded to nearest-even, with denormal inputs and outputs taken as
//! zero: the portable kernel adds in the same order, so the two agree bit for bit on data
//! without denormals (tested). [`matmul_bf16_slow`] is their slow twin (the same bf16 operands,
//! summed in f64). Like [`crate::matmul::matmul`], a call runs on the calling thread only, so
//! results never depend on the thread count.
//!
//! A weight is the right operand of many tile-sized products in one pass over an MLP's rows:
//! [`PackedB`] rounds and packs it once for all of them ([`matmul_bf16_packed`]), with the
//! same bits as packing it in every call. Likewise a backward tile's dz, the left operand of
//! both its weight-gradient and its input-gradient product: [`Bf16Rows`] rounds it once for
//! the two ([`matmul_bf16_rows_t`], [`matmul_bf16_rows_packed`]).
//!
//! An AMX-BF16 tile path is not written: the development machine has no AMX to test it on.

use std::cell::RefCell;

use crate::matmul::{Accum, MatRef, stats};
use crate::real::Real;

/// The kernel a bf16 product runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bf16Path {
    /// AVX512-BF16 dot products (`vdpbf16ps`).
    Avx512Bf16,
    /// Plain f32 arithmetic on the bf16 values, vectorised by the compiler.
    Portable,
}

impl Bf16Path {
    /// A short name for benchmark output.
    pub fn name(self) -> &'static str {
        match self {
            Bf16Path::Avx512Bf16 => "bf16 avx512-bf16 (vdpbf16ps)",
            Bf16Path::Portable => "bf16 portable (f32 arithmetic)",
        }
    }

    /// Whether this CPU can run the path.
    pub fn available(self) -> bool {
        match self {
            Bf16Path::Portable => true,
            Bf16Path::Avx512Bf16 => has_avx512_bf16(),
        }
    }
}

fn has_avx512_bf16() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The fastest bf16 path this CPU has.
pub fn best_path() -> Bf16Path {
    if has_avx512_bf16() { Bf16Path::Avx512Bf16 } else { Bf16Path::Portable }
}

/// `dst (m × n, row stride ld) = / += bf16(a) · bf16(b)`, accumulated in f32, on the fastest
/// path this CPU has.
///
/// # Panics
/// On shape mismatch or if `dst` is too short.
#[track_caller]
pub fn matmul_bf16<T: Real>(dst: &mut [T], ld: usize, a: MatRef<'_, T>, b: MatRef<'_, T>, accum: Accum) {
    matmul_bf16_on(best_path(), dst, ld, a, b, accum);
}

/// [`matmul_bf16`] on a given path.
///
/// # Panics
/// On shape mismatch, if `dst` is too short, or if the CPU lacks the path's instructions.
#[track_caller]
pub fn matmul_bf16_on<T: Real>(
    path: Bf16Path,
    dst: &mut [T],
    ld: usize,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    accum: Accum,
) {
    let (m, k, n) = (a.nrows(), a.ncols(), b.ncols());
    assert_eq!(b.nrows(), k, "matmul_bf16: inner dimensions {} and {}", k, b.nrows());
    assert!(ld >= n, "matmul_bf16: ld {ld} < n {n}");
    assert!(path.available(), "matmul_bf16: {path:?} is not available on this CPU");
    if m == 0 || n == 0 {
        return;
    }
    assert!(dst.len() >= (m - 1) * ld + n, "matmul_bf16: dst too short");
    stats::log(|| stats::Product {
        path: path.into(),
        m,
        k,
        n,
        a_row_major: a.is_row_major(),
        b_row_major: b.is_row_major(),
        b_packed: false,
        add: accum == Accum::Add,
    });
    let t0 = stats::enabled().then(std::time::Instant::now);
    a.check();
    b.check();
    PACK.with_borrow_mut(|p| {
        let np = path.padded_columns(n);
        pack_cols(&b, np, &mut p.b);
        let Pack { a: pa, b: pb, out } = p;
        product(path, pa, &a, pb, (n, np), dst, ld, out, accum);
    });
    if let Some(t0) = t0 {
        stats::add_path(stats::GemmPath::from(path), t0.elapsed().as_nanos() as u64, 2 * (m * n * k) as u64);
    }
}

/// A right operand (k × n) rounded to bf16 and packed once for a kernel path, to be used by
/// many products ([`matmul_bf16_packed`]): an MLP packs each weight once per pass over its
/// rows, not once per tile.
#[derive(Clone, Debug)]
pub struct PackedB {
    path: Bf16Path,
    k: usize,
    n: usize,
    np: usize,
    pairs: Vec<u32>,
}

impl PackedB {
    /// `b` packed for the fastest path this CPU has.
    pub fn new<T: Real>(b: MatRef<'_, T>) -> PackedB {
        PackedB::on(best_path(), b)
    }

    /// `b` packed for `path`.
    ///
    /// # Panics
    /// If the CPU lacks the path's instructions.
    #[track_caller]
    pub fn on<T: Real>(path: Bf16Path, b: MatRef<'_, T>) -> PackedB {
        assert!(path.available(), "PackedB: {path:?} is not available on this CPU");
        b.check();
        let (k, n) = (b.nrows(), b.ncols());
        let np = path.padded_columns(n);
        let mut pairs = Vec::new();
        pack_cols(&b, np, &mut pairs);
        PackedB { path, k, n, np, pairs }
    }

    /// A k × n operand written by `fill(pairs, np)` in the packed layout, for a pass that
    /// produces the operand (rounds it where it computes it) instead of packing an f32 matrix:
    /// `pairs[q·np + j]` = the bf16 pair (b(2q, j), b(2q + 1, j)) for j < n, the second half 0
    /// past the last row. Columns n..np are zeroed here; `fill` writes all others. Reuses
    /// this operand's buffer; packed for the fastest path this CPU has.
    pub fn fill(&mut self, k: usize, n: usize, fill: impl FnOnce(&mut [u32], usize)) {
        let path = best_path();
        let np = path.padded_columns(n);
        self.pairs.resize(k.div_ceil(2) * np, 0);
        if np > n {
            self.pairs.chunks_exact_mut(np).for_each(|o| o[n..].fill(0));
        }
        fill(&mut self.pairs, np);
        (self.path, self.k, self.n, self.np) = (path, k, n, np);
    }

    /// Rows (the inner dimension of a product).
    pub fn nrows(&self) -> usize {
        self.k
    }

    /// Columns.
    pub fn ncols(&self) -> usize {
        self.n
    }
}

impl Default for PackedB {
    /// An empty operand (0 × 0), to be [`PackedB::fill`]ed.
    fn default() -> Self {
        PackedB { path: best_path(), k: 0, n: 0, np: 0, pairs: Vec::new() }
    }
}

/// `dst (m × n, row stride ld) = / += bf16(a) · b` with `b` packed beforehand: the same sums,
/// bit for bit, as [`matmul_bf16_on`] on `b`'s path with `b` unpacked.
///
/// # Panics
/// On shape mismatch or if `dst` is too short.
#[track_caller]
pub fn matmul_bf16_packed<T: Real>(dst: &mut [T], ld: usize, a: MatRef<'_, T>, b: &PackedB, accum: Accum) {
    let shape = PackedProduct { name: "matmul_bf16_packed", m: a.nrows(), k: a.ncols(), a_row_major: a.is_row_major() };
    shape.run(dst.len(), ld, b, accum, || {
        a.check();
        let n = b.n;
        PACK.with_borrow_mut(|p| product(b.path, &mut p.a, &a, &b.pairs, (n, b.np), dst, ld, &mut p.out, accum));
    });
}

/// The left operand's side of a product with a packed right operand, for [`PackedProduct::run`].
struct PackedProduct {
    /// The public function's name, for the panic messages.
    name: &'static str,
    /// Rows of the product.
    m: usize,
    /// The inner dimension.
    k: usize,
    /// Whether the left operand is row-major (for the statistics).
    a_row_major: bool,
}

impl PackedProduct {
    /// What [`matmul_bf16_packed`] and [`matmul_bf16_rows_packed`] share: checks the shapes
    /// against `b`, `ld` and a `dst` of `dst_len`, returns at once if the product is empty, logs
    /// the product to [`stats`], and runs it (`product`) timed on `b`'s path.
    ///
    /// # Panics
    /// On shape mismatch or if `dst` is too short (reported at the caller's caller).
    #[track_caller]
    fn run(&self, dst_len: usize, ld: usize, b: &PackedB, accum: Accum, product: impl FnOnce()) {
        let (name, m, k, n) = (self.name, self.m, self.k, b.n);
        assert_eq!(b.k, k, "{name}: inner dimensions {} and {}", k, b.k);
        assert!(ld >= n, "{name}: ld {ld} < n {n}");
        if m == 0 || n == 0 {
            return;
        }
        assert!(dst_len >= (m - 1) * ld + n, "{name}: dst too short");
        stats::log(|| stats::Product {
            path: b.path.into(),
            m,
            k,
            n,
            a_row_major: self.a_row_major,
            b_row_major: true,
            b_packed: true,
            add: accum == Accum::Add,
        });
        let t0 = stats::enabled().then(std::time::Instant::now);
        product();
        if let Some(t0) = t0 {
            stats::add_path(stats::GemmPath::from(b.path), t0.elapsed().as_nanos() as u64, 2 * (m * n * k) as u64);
        }
    }
}

impl Bf16Path {
    /// Columns of a packed right operand: whole 16-lane vectors for the AVX-512 kernel.
    fn padded_columns(self, n: usize) -> usize {
        match self {
            Bf16Path::Avx512Bf16 => n.div_ceil(16) * 16,
            Bf16Path::Portable => n,
        }
    }
}

/// Packs `a` into `pa`, runs the kernel of `path` on it and the packed `pb` (kp × np pairs)
/// into `out`, and stores the first `n` columns of the result into `dst`.
#[allow(clippy::too_many_arguments)]
fn product<T: Real>(
    path: Bf16Path,
    pa: &mut Vec<u32>,
    a: &MatRef<'_, T>,
    pb: &[u32],
    (n, np): (usize, usize),
    dst: &mut [T],
    ld: usize,
    out: &mut Vec<f32>,
    accum: Accum,
) {
    // A as m × kp pairs (in whichever layout its view packs fastest); B as kp rows of np pairs
    // (columns past n zero), so that a kernel reads consecutive columns of a k-pair.
    let a_layout = pack_rows(a, pa);
    product_packed(path, pa, a_layout, (a.nrows(), a.ncols()), pb, (n, np), dst, ld, out, accum);
}

/// [`product`] with `a` (m × k) already packed in `pa` with layout `a_layout`.
#[allow(clippy::too_many_arguments)]
fn product_packed<T: Real>(
    path: Bf16Path,
    pa: &[u32],
    a_layout: PairLayout,
    (m, k): (usize, usize),
    pb: &[u32],
    (n, np): (usize, usize),
    dst: &mut [T],
    ld: usize,
    out: &mut Vec<f32>,
    accum: Accum,
) {
    // Every kernel writes all of out (m × np): no need to clear it.
    out.resize(m * np, 0.0);
    let kp = k.div_ceil(2);
    match path {
        Bf16Path::Avx512Bf16 => {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the callers asserted `path.available()` (or packed for it, which did):
            // the CPU has AVX-512F and AVX512-BF16; the packed buffers have the sizes the
            // kernel reads (m·kp in `a_layout`, kp·np, m·np).
            unsafe {
                avx512::gemm(pa, a_layout, pb, out, m, kp, np)
            };
        }
        Bf16Path::Portable => portable_gemm(pa, a_layout, pb, out, m, kp, np),
    }
    store(dst, ld, out, np, m, n, accum);
}

/// A left operand rounded to bf16 and packed once for two products: a backward tile's output
/// gradient gz feeds both dW += gzᵀ·a ([`matmul_bf16_rows_t`]) and dx = gz·W
/// ([`matmul_bf16_rows_packed`]). Held as its pairs along rows (the layout a row-major left
/// operand packs to); the transposed product regroups these bits without rounding again.
/// Both give the same bits as [`matmul_bf16`] on the f32 matrix.
#[derive(Clone, Debug, Default)]
pub struct Bf16Rows {
    pairs: Vec<u32>,
    rows: usize,
    cols: usize,
}

impl Bf16Rows {
    /// `x` (rows × cols, row-major) rounded and packed, reusing this buffer.
    pub fn pack<T: Real>(&mut self, x: &[T], rows: usize, cols: usize) {
        let layout = pack_rows(&MatRef::row_major(x, rows, cols), &mut self.pairs);
        debug_assert_eq!((layout.row, layout.pair), (cols.div_ceil(2), 1), "row-major packs by rows");
        (self.rows, self.cols) = (rows, cols);
    }

    /// A rows × cols operand written by `fill(pairs)` in [`Bf16Rows::pack`]'s layout, for a
    /// pass that produces the operand (rounds it where it computes it): `pairs[r·⌈cols/2⌉ + q]`
    /// = the bf16 pair (x(r, 2q), x(r, 2q + 1)), the second half 0 past the row's end. `fill`
    /// writes every element. Reuses this buffer.
    pub fn fill(&mut self, rows: usize, cols: usize, fill: impl FnOnce(&mut [u32])) {
        self.pairs.resize(rows * cols.div_ceil(2), 0);
        fill(&mut self.pairs);
        (self.rows, self.cols) = (rows, cols);
    }

    /// The pairs of the transpose (cols × rows), pair column after pair column, as
    /// [`pack_rows`] packs a transposed view: `out[q·cols + c]` = (x(2q, c), x(2q + 1, c)).
    fn pack_transposed(&self, out: &mut Vec<u32>) -> PairLayout {
        let (rows, cols) = (self.rows, self.cols);
        let kp = cols.div_ceil(2);
        out.resize(rows.div_ceil(2) * cols, 0);
        if cols > 0 {
            for (q, o) in out.chunks_exact_mut(cols).enumerate() {
                let p0 = &self.pairs[2 * q * kp..(2 * q + 1) * kp];
                transpose_pair_rows(p0, self.pairs.get((2 * q + 1) * kp..(2 * q + 2) * kp), o);
            }
        }
        PairLayout { row: 1, pair: cols }
    }
}

crate::dispatch! {
    /// Two rows of bf16 pairs (`p1`: none past the last row, read as zeros) regrouped into
    /// column pairs: `o[c]` = (row 0's element c, row 1's element c).
    fn transpose_pair_rows(p0: &[u32], p1: Option<&[u32]>, o: &mut [u32]) {
        let full = o.len() / 2;
        match p1 {
            Some(p1) => {
                for ((o, &a), &b) in o.chunks_exact_mut(2).zip(p0).zip(p1) {
                    o[0] = (a & 0xffff) | (b << 16);
                    o[1] = (a >> 16) | (b & 0xffff_0000);
                }
                if o.len() % 2 == 1 {
                    o[2 * full] = (p0[full] & 0xffff) | (p1[full] << 16);
                }
            }
            None => {
                for (o, &a) in o.chunks_exact_mut(2).zip(p0) {
                    o[0] = a & 0xffff;
                    o[1] = a >> 16;
                }
                if o.len() % 2 == 1 {
                    o[2 * full] = p0[full] & 0xffff;
                }
            }
        }
    }
}

/// `dst (m × n) = / += a · b` with `a` ([`Bf16Rows`], m × k) and `b` packed beforehand: the
/// same bits as [`matmul_bf16_packed`] on the f32 `a`.
///
/// # Panics
/// On shape mismatch or if `dst` is too short.
#[track_caller]
pub fn matmul_bf16_rows_packed<T: Real>(dst: &mut [T], ld: usize, a: &Bf16Rows, b: &PackedB, accum: Accum) {
    let (m, k) = (a.rows, a.cols);
    let shape = PackedProduct { name: "matmul_bf16_rows_packed", m, k, a_row_major: true };
    shape.run(dst.len(), ld, b, accum, || {
        let layout = PairLayout { row: k.div_ceil(2), pair: 1 };
        PACK.with_borrow_mut(|p| {
            product_packed(b.path, &a.pairs, layout, (m, k), &b.pairs, (b.n, b.np), dst, ld, &mut p.out, accum)
        });
    });
}

/// `dst (m × n) = / += aᵀ · b` with `a` ([`Bf16Rows`], k × m), on the fastest path: the same
/// bits as [`matmul_bf16`] on the f32 `a` transposed.
///
/// # Panics
/// On shape mismatch or if `dst` is too short.
#[track_caller]
pub fn matmul_bf16_rows_t<T: Real>(dst: &mut [T], ld: usize, a: &Bf16Rows, b: MatRef<'_, T>, accum: Accum) {
    let path = best_path();
    let (m, k, n) = (a.cols, a.rows, b.ncols());
    assert_eq!(b.nrows(), k, "matmul_bf16_rows_t: inner dimensions {} and {}", k, b.nrows());
    assert!(ld >= n, "matmul_bf16_rows_t: ld {ld} < n {n}");
    if m == 0 || n == 0 {
        return;
    }
    assert!(dst.len() >= (m - 1) * ld + n, "matmul_bf16_rows_t: dst too short");
    stats::log(|| stats::Product {
        path: path.into(),
        m,
        k,
        n,
        a_row_major: false,
        b_row_major: b.is_row_major(),
        b_packed: false,
        add: accum == Accum::Add,
    });
    let t0 = stats::enabled().then(std::time::Instant::now);
    b.check();
    PACK.with_borrow_mut(|p| {
        let np = path.padded_columns(n);
        pack_cols(&b, np, &mut p.b);
        let layout = a.pack_transposed(&mut p.a);
        let Pack { a: pa, b: pb, out } = p;
        product_packed(path, pa, layout, (m, k), pb, (n, np), dst, ld, out, accum);
    });
    if let Some(t0) = t0 {
        stats::add_path(stats::GemmPath::from(path), t0.elapsed().as_nanos() as u64, 2 * (m * n * k) as u64);
    }
}

/// `dst (m × n) = / += aᵀ · b` with `a` ([`Bf16Rows`], k × m) and `b` packed beforehand
/// ([`PackedB::fill`]): the same bits as [`matmul_bf16_rows_t`] on the f32 `b`.
///
/// # Panics
/// On shape mismatch or if `dst` is too short.
#[track_caller]
pub fn matmul_bf16_rows_t_packed<T: Real>(dst: &mut [T], ld: usize, a: &Bf16Rows, b: &PackedB, accum: Accum) {
    let (m, k) = (a.cols, a.rows);
    let shape = PackedProduct { name: "matmul_bf16_rows_t_packed", m, k, a_row_major: false };
    shape.run(dst.len(), ld, b, accum, || {
        PACK.with_borrow_mut(|p| {
            let layout = a.pack_transposed(&mut p.a);
            product_packed(b.path, &p.a, layout, (m, k), &b.pairs, (b.n, b.np), dst, ld, &mut p.out, accum)
        });
    });
}

#[inline(always)]
fn bf16_value(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
}

/// The bf16 bits of element (i, j) of `x`, or 0 past its last column (an odd k's padding).
#[inline]
fn bits<T: Real>(x: &MatRef<'_, T>, i: usize, j: usize) -> u32 {
    if j < x.ncols() { x.at(i, j).to_bf16_bits() as u32 } else { 0 }
}

/// Two values as one bf16 pair: `lo` in the low half (the even element), `hi` in the high one.
#[inline(always)]
pub(crate) fn pair_of<T: Real>(lo: T, hi: T) -> u32 {
    lo.to_bf16_bits() as u32 | ((hi.to_bf16_bits() as u32) << 16)
}

/// Packed operands of one thread, reused between calls.
#[derive(Default)]
struct Pack {
    a: Vec<u32>,
    b: Vec<u32>,
    out: Vec<f32>,
}

thread_local! {
    static PACK: RefCell<Pack> = RefCell::new(Pack::default());
}

/// Where the packed pair (r, q) of a left operand is: `r·row + q·pair`.
#[derive(Clone, Copy, Debug)]
struct PairLayout {
    row: usize,
    pair: usize,
}

/// Packs the pairs (x(r, 2q), x(r, 2q + 1)) of a rows × k matrix (kp = ⌈k/2⌉ per row) into
/// `out`, row after row (`out[r·kp + q]`), or for a transposed view, whose columns are
/// contiguous, pair column after pair column (`out[q·rows + r]`: two contiguous columns
/// interleaved, instead of strided writes); returns which.
fn pack_rows<T: Real>(x: &MatRef<'_, T>, out: &mut Vec<u32>) -> PairLayout {
    let (rows, k) = (x.nrows(), x.ncols());
    let kp = k.div_ceil(2);
    // Every branch below writes every element: no need to clear what the last call left.
    out.resize(rows * kp, 0);
    let (data, off, rs, cs) = x.raw();
    let by_rows = PairLayout { row: kp, pair: 1 };
    if rows == 0 || k == 0 {
        return by_rows;
    }
    if cs == 1 {
        // Rows contiguous.
        for (r, o) in out.chunks_exact_mut(kp).enumerate() {
            pack_contiguous(&data[off + r * rs..off + r * rs + k], o);
        }
    } else if rs == 1 {
        // Columns contiguous (a transposed view): two columns interleaved per pair column.
        for (q, o) in out.chunks_exact_mut(rows).enumerate() {
            let c0 = &data[off + 2 * q * cs..off + 2 * q * cs + rows];
            if 2 * q + 1 < k {
                interleave(c0, &data[off + (2 * q + 1) * cs..off + (2 * q + 1) * cs + rows], o);
            } else {
                o.iter_mut().zip(c0).for_each(|(o, &v)| *o = pair_of(v, T::ZERO));
            }
        }
        return PairLayout { row: 1, pair: rows };
    } else {
        for r in 0..rows {
            for q in 0..kp {
                out[r * kp + q] = bits(x, r, 2 * q) | (bits(x, r, 2 * q + 1) << 16);
            }
        }
    }
    by_rows
}

crate::dispatch! {
    /// o[q] = the pair (x[2q], x[2q + 1]), 0 past the end of x.
    fn pack_contiguous<T: Real>(x: &[T], o: &mut [u32]) {
        let full = x.len() / 2;
        for (o, p) in o.iter_mut().zip(x.chunks_exact(2)) {
            *o = pair_of(p[0], p[1]);
        }
        if x.len() % 2 == 1 {
            o[full] = pair_of(x[x.len() - 1], T::ZERO);
        }
    }
}

/// `out[q·np + j]` = the pair (b(2q, j), b(2q + 1, j)) of a k × n matrix for j < n, 0 for
/// n ≤ j < np.
fn pack_cols<T: Real>(b: &MatRef<'_, T>, np: usize, out: &mut Vec<u32>) {
    let (k, n) = (b.nrows(), b.ncols());
    let kp = k.div_ceil(2);
    // The branches below write columns 0..n of every pair row; only the padding is cleared
    // here, not the whole buffer the last call left.
    out.resize(kp * np, 0);
    if np > n {
        out.chunks_exact_mut(np).for_each(|o| o[n..].fill(0));
    }
    let (data, off, rs, cs) = b.raw();
    if n == 0 || k == 0 {
        return;
    }
    if cs == 1 {
        // Rows contiguous: rows 2q and 2q + 1 interleaved.
        for (q, o) in out.chunks_exact_mut(np).enumerate() {
            let r0 = &data[off + 2 * q * rs..off + 2 * q * rs + n];
            if 2 * q + 1 < k {
                let r1 = &data[off + (2 * q + 1) * rs..off + (2 * q + 1) * rs + n];
                interleave(r0, r1, &mut o[..n]);
            } else {
                o[..n].iter_mut().zip(r0).for_each(|(o, &v)| *o = pair_of(v, T::ZERO));
            }
        }
    } else if rs == 1 {
        // Columns contiguous (a transposed weight): each column gives all its pairs.
        for j in 0..n {
            let col = &data[off + j * cs..off + j * cs + k];
            for (q, p) in col.chunks(2).enumerate() {
                out[q * np + j] = pair_of(p[0], p.get(1).copied().unwrap_or(T::ZERO));
            }
        }
    } else {
        let bt = b.t();
        for q in 0..kp {
            for j in 0..n {
                out[q * np + j] = bits(&bt, j, 2 * q) | (bits(&bt, j, 2 * q + 1) << 16);
            }
        }
    }
}

crate::dispatch! {
    /// o[j] = the pair (lo[j], hi[j]).
    fn interleave<T: Real>(lo: &[T], hi: &[T], o: &mut [u32]) {
        for ((o, &l), &h) in o.iter_mut().zip(lo).zip(hi) {
            *o = pair_of(l, h);
        }
    }
}

crate::dispatch! {
    /// Writes the f32 result (m × n of a buffer with row stride `ldo`) into `dst`.
    fn store<T: Real>(dst: &mut [T], ld: usize, out: &[f32], ldo: usize, m: usize, n: usize, accum: Accum) {
        for i in 0..m {
            let (d, o) = (&mut dst[i * ld..i * ld + n], &out[i * ldo..i * ldo + n]);
            match accum {
                Accum::Replace => d.iter_mut().zip(o).for_each(|(d, &o)| *d = T::from_f64(o as f64)),
                Accum::Add => d.iter_mut().zip(o).for_each(|(d, &o)| *d += T::from_f64(o as f64)),
            }
        }
    }
}

crate::dispatch! {
    /// out (m × np) = Σ over pairs q of a\[i\]\[2q+1\]·b\[2q+1\]\[j\] then
    /// a\[i\]\[2q\]·b\[2q\]\[j\], added in that order (as `vdpbf16ps` does) from 0, from the packed
    /// pairs (A: m × kp laid out as `al`, B: kp × np). Products of two bf16 values are exact in f32.
    fn portable_gemm(a: &[u32], al: PairLayout, b: &[u32], out: &mut [f32], m: usize, kp: usize, np: usize) {
        for i in 0..m {
            let acc = &mut out[i * np..(i + 1) * np];
            acc.iter_mut().for_each(|c| *c = 0.0);
            for q in 0..kp {
                let pa = a[i * al.row + q * al.pair];
                let (lo, hi) = (f32::from_bits(pa << 16), f32::from_bits(pa & 0xffff_0000));
                let brow = &b[q * np..(q + 1) * np];
                for (c, &pb) in acc.iter_mut().zip(brow) {
                    let s = *c + hi * f32::from_bits(pb & 0xffff_0000);
                    *c = s + lo * f32::from_bits(pb << 16);
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    /// Rows per micro-tile.
    const MR: usize = 6;

    use super::PairLayout;

    /// out (m × np) = A · B with A packed as m × kp pairs laid out as `al` and B as kp × np
    /// pairs (np a multiple of 16).
    ///
    /// # Safety
    /// The CPU must have AVX-512F and AVX512-BF16; `a`, `b`, `out` must hold m·kp, np·kp and m·np
    /// elements.
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub(super) unsafe fn gemm(a: &[u32], al: PairLayout, b: &[u32], out: &mut [f32], m: usize, kp: usize, np: usize) {
        assert!(a.len() >= m * kp && b.len() >= np * kp && out.len() >= m * np && np.is_multiple_of(16));
        // Every pair index is below m·kp in either layout.
        assert!(m == 0 || kp == 0 || (m - 1) * al.row + (kp - 1) * al.pair < m * kp);
        let mut j0 = 0;
        while j0 < np {
            let nv = ((np - j0) / 16).min(4);
            let mut i0 = 0;
            while i0 < m {
                let mr = (m - i0).min(MR);
                // SAFETY: rows i0..i0+mr < m and columns j0..j0+16·nv ≤ np are in the buffers.
                unsafe {
                    match (mr, nv) {
                        (MR, 4) => tile::<MR, 4>(a, al, b, out, i0, j0, kp, np),
                        (MR, 3) => tile::<MR, 3>(a, al, b, out, i0, j0, kp, np),
                        (MR, 2) => tile::<MR, 2>(a, al, b, out, i0, j0, kp, np),
                        (MR, 1) => tile::<MR, 1>(a, al, b, out, i0, j0, kp, np),
                        (_, 4) => rows::<4>(a, al, b, out, i0, mr, j0, kp, np),
                        (_, 3) => rows::<3>(a, al, b, out, i0, mr, j0, kp, np),
                        (_, 2) => rows::<2>(a, al, b, out, i0, mr, j0, kp, np),
                        _ => rows::<1>(a, al, b, out, i0, mr, j0, kp, np),
                    }
                }
                i0 += mr;
            }
            j0 += 16 * nv;
        }
    }

    /// Fewer than MR rows, one at a time.
    #[target_feature(enable = "avx512f,avx512bf16")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn rows<const NV: usize>(
        a: &[u32],
        al: PairLayout,
        bt: &[u32],
        out: &mut [f32],
        i0: usize,
        mr: usize,
        j0: usize,
        kp: usize,
        np: usize,
    ) {
        for i in i0..i0 + mr {
            // SAFETY: as for the caller.
            unsafe { tile::<1, NV>(a, al, bt, out, i, j0, kp, np) };
        }
    }

    /// out\[i0..i0+R\]\[j0..j0+16·NV\] = A rows · B columns, accumulators in registers.
    #[target_feature(enable = "avx512f,avx512bf16")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile<const R: usize, const NV: usize>(
        a: &[u32],
        al: PairLayout,
        bt: &[u32],
        out: &mut [f32],
        i0: usize,
        j0: usize,
        kp: usize,
        np: usize,
    ) {
        let mut acc = [[_mm512_setzero_ps(); NV]; R];
        let (ap, bp) = (a.as_ptr(), bt.as_ptr());
        for q in 0..kp {
            let mut bv = [_mm512_setzero_si512(); NV];
            for (v, x) in bv.iter_mut().enumerate() {
                // SAFETY: q < kp and j0 + 16·(v + 1) ≤ np: inside bt (kp × np).
                *x = unsafe { _mm512_loadu_si512(bp.add(q * np + j0 + 16 * v) as *const __m512i) };
            }
            for (r, row) in acc.iter_mut().enumerate() {
                // SAFETY: row i0 + r < m, q < kp: inside a (m × kp, asserted for the layout).
                let pair = unsafe { *ap.add((i0 + r) * al.row + q * al.pair) };
                let av: __m512bh = bh(_mm512_set1_epi32(pair as i32));
                for (v, c) in row.iter_mut().enumerate() {
                    *c = _mm512_dpbf16_ps(*c, av, bh(bv[v]));
                }
            }
        }
        for (r, row) in acc.iter().enumerate() {
            for (v, c) in row.iter().enumerate() {
                // SAFETY: row i0 + r < m, columns j0 + 16v .. + 16 ≤ np: inside out (m × np).
                unsafe { _mm512_storeu_ps(out.as_mut_ptr().add((i0 + r) * np + j0 + 16 * v), *c) };
            }
        }
    }

    #[inline(always)]
    fn bh(x: __m512i) -> __m512bh {
        // SAFETY: both are 512-bit plain-data vector types.
        unsafe { std::mem::transmute::<__m512i, __m512bh>(x) }
    }
}

/// The slow twin of [`matmul_bf16`]: the same bf16-rounded operands, three plain loops summing
/// in f64 (what the kernels' f32 sums approximate).
pub fn matmul_bf16_slow<T: Real>(dst: &mut [T], ld: usize, a: MatRef<'_, T>, b: MatRef<'_, T>, accum: Accum) {
    let (m, k, n) = (a.nrows(), a.ncols(), b.ncols());
    assert_eq!(b.nrows(), k);
    let r = |x: T| bf16_value(x.to_bf16_bits()) as f64;
    for i in 0..m {
        for j in 0..n {
            let s: f64 = (0..k).map(|p| r(a.at(i, p)) * r(b.at(p, j))).sum();
            let d = &mut dst[i * ld + j];
            *d = match accum {
                Accum::Replace => T::from_f64(s),
                Accum::Add => T::from_f64(d.to_f64() + s),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trackgnn_trackml::rng::Rng;

    const SIZES: [(usize, usize, usize); 9] = [
        (1, 1, 1),
        (3, 5, 7),
        (17, 31, 13),
        (64, 64, 64),
        (129, 3, 65),
        (7, 512, 192),
        (13, 64, 1),
        (0, 4, 3),
        (5, 0, 3),
    ];

    /// Runs `f(path)` on every path the CPU has, saying which were skipped.
    fn on_every_path(mut f: impl FnMut(Bf16Path)) {
        for path in [Bf16Path::Avx512Bf16, Bf16Path::Portable] {
            if path.available() {
                f(path);
            } else {
                eprintln!("skipped: {path:?} (this CPU lacks its instructions)");
            }
        }
    }

    #[test]
    fn every_path_matches_the_f64_reference_on_awkward_sizes_and_views() {
        on_every_path(|path| {
            let mut rng = Rng::new(3);
            for &(m, k, n) in &SIZES {
                let a: Vec<f32> = (0..m * (k + 3)).map(|_| rng.normal() as f32).collect();
                let b: Vec<f32> = (0..n * (k + 1)).map(|_| rng.normal() as f32).collect();
                // Every layout the packers distinguish: rows contiguous, columns contiguous.
                let layouts = [
                    (MatRef::row_major(&a, m, k + 3).cols(2, 2 + k), MatRef::row_major(&b, n, k).t()),
                    (MatRef::row_major(&a, k + 3, m).rows(1, 1 + k).t(), MatRef::row_major(&b, k + 1, n).rows(0, k)),
                ];
                for ((av, bv), accum) in layouts.into_iter().flat_map(|l| [(l, Accum::Replace), (l, Accum::Add)]) {
                    let init: Vec<f32> = (0..m * (n + 2)).map(|_| rng.normal() as f32).collect();
                    let (mut fast, mut slow) = (init.clone(), init.clone());
                    matmul_bf16_on(path, &mut fast, n + 2, av, bv, accum);
                    matmul_bf16_slow(&mut slow, n + 2, av, bv, accum);
                    for i in 0..m {
                        for j in 0..n {
                            // f32 sums of k exact products: within k·2^-24 of Σ|a||b| (plus the
                            // rounding of the result and of an added destination).
                            let mag: f64 = (0..k).map(|p| (av.at(i, p) as f64 * bv.at(p, j) as f64).abs()).sum();
                            let (f, s) = (fast[i * (n + 2) + j] as f64, slow[i * (n + 2) + j] as f64);
                            let tol = (k as f64 + 2.0) * 6e-8 * (mag + init[i * (n + 2) + j].abs() as f64 + s.abs());
                            assert!((f - s).abs() <= tol, "{path:?} ({m},{k},{n}) {accum:?} [{i},{j}]: {f} vs {s}");
                        }
                        let pad = i * (n + 2) + n..i * (n + 2) + n + 2;
                        assert_eq!(fast[pad.clone()], init[pad], "padding untouched");
                    }
                }
            }
        });
    }

    #[test]
    fn an_operand_packed_once_gives_the_bits_of_packing_it_in_each_product() {
        // gz (rows × cols) feeds dW += gzᵀ·a and dx = gz·W: odd and even rows and columns.
        let mut rng = Rng::new(21);
        let mut gz16 = Bf16Rows::default();
        for (rows, cols, n) in [(512, 64, 192), (7, 5, 3), (6, 1, 33), (1, 8, 16), (33, 17, 2)] {
            let gz: Vec<f32> = (0..rows * cols).map(|_| rng.normal() as f32).collect();
            let a: Vec<f32> = (0..rows * n).map(|_| rng.normal() as f32).collect();
            let w: Vec<f32> = (0..cols * n).map(|_| rng.normal() as f32).collect();
            let (gzv, av, wv) =
                (MatRef::row_major(&gz, rows, cols), MatRef::row_major(&a, rows, n), MatRef::row_major(&w, cols, n));
            gz16.pack(&gz, rows, cols);
            let init: Vec<f32> = (0..cols * n).map(|_| rng.normal() as f32).collect();
            let (mut once, mut each) = (init.clone(), init);
            matmul_bf16_rows_t(&mut once, n, &gz16, av, Accum::Add);
            matmul_bf16(&mut each, n, gzv.t(), av, Accum::Add);
            assert!(once.iter().zip(&each).all(|(x, y)| x.to_bits() == y.to_bits()), "gzᵀ·a {rows}×{cols}×{n}");
            let packed = PackedB::new(wv);
            let (mut once, mut each) = (vec![0.0f32; rows * n], vec![0.0f32; rows * n]);
            matmul_bf16_rows_packed(&mut once, n, &gz16, &packed, Accum::Replace);
            matmul_bf16_packed(&mut each, n, gzv, &packed, Accum::Replace);
            assert!(once.iter().zip(&each).all(|(x, y)| x.to_bits() == y.to_bits()), "gz·W {rows}×{cols}×{n}");
        }
    }

    #[test]
    fn operands_filled_by_the_pass_that_computes_them_give_the_bits_of_packing_them() {
        use crate::ops::{Activation, act};
        let mut rng = Rng::new(22);
        let (mut gz16, mut a16, mut b16) = (Bf16Rows::default(), Bf16Rows::default(), PackedB::default());
        // Odd and even rows and widths, widths off 16 (padded columns).
        for (rows, d, n) in [(512, 64, 64), (7, 5, 3), (6, 1, 33), (1, 8, 16), (33, 17, 2)] {
            let y: Vec<f32> = (0..rows * d).map(|_| rng.normal() as f32).collect();
            let gz: Vec<f32> = (0..rows * n).map(|_| rng.normal() as f32).collect();
            let w: Vec<f32> = (0..d * n).map(|_| rng.normal() as f32).collect();
            let packed = PackedB::new(MatRef::row_major(&w, d, n));
            gz16.pack(&gz, rows, n);
            for f in [Activation::Relu, Activation::Silu, Activation::Identity] {
                let mut a = vec![0.0f32; rows * d];
                act::forward(f, &y, &mut a);
                let av = MatRef::row_major(&a, rows, d);
                // The forward's left operand: a·W.
                a16.fill(rows, d, |o| act::forward_bf16_rows(f, &y, d, o));
                let (mut filled, mut each) = (vec![0.0f32; rows * n], vec![0.0f32; rows * n]);
                matmul_bf16_rows_packed(&mut filled, n, &a16, &packed, Accum::Replace);
                matmul_bf16_packed(&mut each, n, av, &packed, Accum::Replace);
                assert!(filled.iter().zip(&each).all(|(x, y)| x.to_bits() == y.to_bits()), "a·W {f:?} {rows}×{d}×{n}");
                // The backward's right operand: dW += gzᵀ·a.
                b16.fill(rows, d, |o, np| act::forward_bf16_row_pairs(f, &y, d, np, o));
                let init: Vec<f32> = (0..n * d).map(|_| rng.normal() as f32).collect();
                let (mut filled, mut each) = (init.clone(), init);
                matmul_bf16_rows_t_packed(&mut filled, d, &gz16, &b16, Accum::Add);
                matmul_bf16_rows_t(&mut each, d, &gz16, av, Accum::Add);
                assert!(
                    filled.iter().zip(&each).all(|(x, y)| x.to_bits() == y.to_bits()),
                    "gzᵀ·a {f:?} {rows}×{d}×{n}"
                );
            }
        }
    }

    #[test]
    fn bf16_products_are_within_bf16_rounding_of_the_exact_f64_ones() {
        // The error of bf16 operands themselves: each is within 2^-9 relative, so a product of
        // k terms is within about 2·2^-9·Σ|a||b| of the exact one.
        let mut rng = Rng::new(8);
        let (m, k, n) = (40, 192, 64);
        let a: Vec<f64> = (0..m * k).map(|_| rng.normal()).collect();
        let b: Vec<f64> = (0..k * n).map(|_| rng.normal()).collect();
        let (av, bv) = (MatRef::row_major(&a, m, k), MatRef::row_major(&b, k, n));
        let mut exact = vec![0.0f64; m * n];
        crate::matmul::matmul_slow(&mut exact, n, av, bv, Accum::Replace);
        on_every_path(|path| {
            let mut got = vec![0.0f64; m * n];
            matmul_bf16_on(path, &mut got, n, av, bv, Accum::Replace);
            let (mut err2, mut ref2) = (0.0, 0.0);
            for i in 0..m {
                for j in 0..n {
                    let mag: f64 = (0..k).map(|p| (av.at(i, p) * bv.at(p, j)).abs()).sum();
                    let e = (got[i * n + j] - exact[i * n + j]).abs();
                    assert!(e <= 2.0 * mag / 512.0, "{path:?} [{i},{j}]: off by {e} of Σ|ab| {mag}");
                    err2 += e * e;
                    ref2 += exact[i * n + j].powi(2);
                }
            }
            let rel = (err2 / ref2).sqrt();
            // Random-sign rounding errors add in quadrature: far below the worst case.
            assert!(rel > 1e-5 && rel < 1e-2, "{path:?}: relative error {rel:e}");
        });
    }

    #[test]
    fn the_avx512_bf16_kernel_and_the_portable_one_agree_bit_for_bit() {
        if !Bf16Path::Avx512Bf16.available() {
            eprintln!("skipped: no AVX512-BF16 on this CPU");
            return;
        }
        let mut rng = Rng::new(11);
        for &(m, k, n) in &SIZES {
            let a: Vec<f32> = (0..m * k).map(|_| rng.normal() as f32).collect();
            let b: Vec<f32> = (0..k * n).map(|_| (rng.normal() * 3.0) as f32).collect();
            let bv = MatRef::row_major(&b, k, n);
            // A packed by rows, and a transposed A packed by pair columns.
            for av in [MatRef::row_major(&a, m, k), MatRef::row_major(&a, k, m).t()] {
                let (mut x, mut y) = (vec![0.0f32; m * n], vec![0.0f32; m * n]);
                matmul_bf16_on(Bf16Path::Avx512Bf16, &mut x, n, av, bv, Accum::Replace);
                matmul_bf16_on(Bf16Path::Portable, &mut y, n, av, bv, Accum::Replace);
                let same = x.iter().zip(&y).all(|(p, q)| p.to_bits() == q.to_bits());
                assert!(same, "({m},{k},{n}) A row-major {}: the kernels differ", av.is_row_major());
            }
        }
    }

    #[test]
    fn a_product_on_a_packed_weight_equals_the_unpacked_product_bit_for_bit() {
        on_every_path(|path| {
            let mut rng = Rng::new(17);
            for &(m, k, n) in &SIZES {
                let a: Vec<f32> = (0..m * k).map(|_| rng.normal() as f32).collect();
                let w: Vec<f32> = (0..n * (k + 2)).map(|_| rng.normal() as f32).collect();
                let av = MatRef::row_major(&a, m, k);
                // Both layouts a weight is read in: Wᵀ (forward) and a column block of W (backward).
                for bv in
                    [MatRef::row_major(&w, n, k + 2).cols(1, 1 + k).t(), MatRef::row_major(&w, k + 2, n).rows(2, 2 + k)]
                {
                    let packed = PackedB::on(path, bv);
                    assert_eq!((packed.nrows(), packed.ncols()), (k, n));
                    for accum in [Accum::Replace, Accum::Add] {
                        let init: Vec<f32> = (0..m * (n + 1)).map(|_| rng.normal() as f32).collect();
                        let (mut x, mut y) = (init.clone(), init.clone());
                        matmul_bf16_on(path, &mut x, n + 1, av, bv, accum);
                        matmul_bf16_packed(&mut y, n + 1, av, &packed, accum);
                        let same = x.iter().zip(&y).all(|(p, q)| p.to_bits() == q.to_bits());
                        assert!(same, "{path:?} ({m},{k},{n}) {accum:?}: packed and unpacked differ");
                    }
                }
            }
        });
    }

    #[test]
    fn both_packed_products_check_shapes_under_their_own_names() {
        let panic_text = |f: &mut dyn FnMut()| {
            let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).expect_err("should panic");
            e.downcast_ref::<String>().cloned().unwrap_or_default()
        };
        let w = vec![1.0f32; 4 * 3];
        let packed = PackedB::new(MatRef::row_major(&w, 4, 3));
        let a = vec![1.0f32; 2 * 5];
        let mut rows = Bf16Rows::default();
        rows.pack(&a, 2, 5);
        let mut dst = vec![0.0f32; 2 * 3];
        let e = panic_text(&mut || matmul_bf16_packed(&mut dst, 3, MatRef::row_major(&a, 2, 5), &packed, Accum::Add));
        assert!(e.contains("matmul_bf16_packed: inner dimensions 5 and 4"), "{e}");
        let e = panic_text(&mut || matmul_bf16_rows_packed(&mut dst, 3, &rows, &packed, Accum::Add));
        assert!(e.contains("matmul_bf16_rows_packed: inner dimensions 5 and 4"), "{e}");
        rows.pack(&a[..8], 2, 4);
        let e = panic_text(&mut || matmul_bf16_rows_packed(&mut dst, 2, &rows, &packed, Accum::Add));
        assert!(e.contains("matmul_bf16_rows_packed: ld 2 < n 3"), "{e}");
        let e = panic_text(&mut || matmul_bf16_rows_packed(&mut dst[..5], 3, &rows, &packed, Accum::Add));
        assert!(e.contains("matmul_bf16_rows_packed: dst too short"), "{e}");
        let e = panic_text(&mut || {
            matmul_bf16_packed(&mut dst[..5], 3, MatRef::row_major(&a[..8], 2, 4), &packed, Accum::Add)
        });
        assert!(e.contains("matmul_bf16_packed: dst too short"), "{e}");
        // An empty product returns before the length check.
        let mut empty = Bf16Rows::default();
        empty.pack::<f32>(&[], 0, 4);
        matmul_bf16_rows_packed::<f32>(&mut [], 3, &empty, &packed, Accum::Add);
        matmul_bf16_rows_packed(&mut dst, 3, &rows, &packed, Accum::Replace);
        assert_eq!(dst, vec![4.0; 6], "2 × 4 ones times 4 × 3 ones");
    }

    #[test]
    fn the_amx_path_is_not_written() {
        // Kept as a visible marker in the test output: the issue asks for an AMX-BF16 path where
        // the CPU has it; none is written yet (no AMX machine to test it on).
        #[cfg(target_arch = "x86_64")]
        // CPUID leaf 7, EDX bit 22: AMX-BF16 (the std macro for it is unstable).
        #[allow(unused_unsafe)]
        // SAFETY: CPUID leaf 7 exists on every x86-64 CPU this builds for.
        let amx = unsafe { std::arch::x86_64::__cpuid_count(7, 0) }.edx & (1 << 22) != 0;
        #[cfg(not(target_arch = "x86_64"))]
        let amx = false;
        eprintln!("skipped: AMX-BF16 ({}; no AMX kernel written)", if amx { "CPU has AMX" } else { "no AMX" });
    }
}
