//! Matrix products with bfloat16 operands and f32 accumulation (mixed precision,
//! [`Precision::Bf16`](crate::config::Precision::Bf16)).
//!
//! Both operands are rounded to bf16 (nearest, ties to even) and packed in pairs along the
//! inner dimension; every product of two bf16 values is exact in f32, and the sums are f32.
//! Three kernels, chosen at run time by a fixed rule on the CPU's features ([`best_path`]):
//! - [`Bf16Path::Amx`]: AMX-BF16 tiles (`tdpbf16ps`: 16 × 16 f32 accumulators, 32 bf16
//!   products per element and instruction), on Intel CPUs with AMX (Sapphire Rapids and later)
//!   where the kernel grants the tile data;
//! - [`Bf16Path::Avx512Bf16`]: `vdpbf16ps` (`_mm512_dpbf16_ps`), 16 columns × a k-pair per
//!   instruction, on CPUs with AVX512-BF16 (Zen 4/5, Cooper Lake, Sapphire Rapids and later);
//! - [`Bf16Path::F32Fma`]: the bf16 operands widened to f32 and multiplied by the `gemm` crate's
//!   f32 kernel (FMAs on two ports): Intel CPUs without usable AMX, and CPUs without
//!   AVX512-BF16;
//! - [`Bf16Path::Portable`]: the same pair-wise sums as `vdpbf16ps` in plain f32 arithmetic,
//!   vectorised by the compiler ([`crate::dispatch!`]); any CPU: the reference twin of the
//!   AVX512-BF16 kernel, chosen only by [`force_path`].
//!
//! `vdpbf16ps` adds, per lane, the odd element's product and then the even one's to the
//! accumulator, each addition rounded to nearest-even, with denormal inputs and outputs taken as
//! zero: the portable kernel adds in the same order, so the two agree bit for bit on data
//! without denormals (tested). AMX adds 32 products per instruction in the hardware's own order:
//! it agrees with them within f32 rounding of the sums (tested against the f64 reference). [`matmul_bf16_slow`] is their slow twin (the same bf16 operands,
//! summed in f64). Like [`crate::matmul::matmul`], a call runs on the calling thread only, so
//! results never depend on the thread count.
//!
//! A weight is the right operand of many tile-sized products in one pass over an MLP's rows:
//! [`PackedB`] rounds and packs it once for all of them ([`matmul_bf16_packed`]), with the
//! same bits as packing it in every call. Likewise a backward tile's dz, the left operand of
//! both its weight-gradient and its input-gradient product: [`Bf16Rows`] rounds it once for
//! the two ([`matmul_bf16_rows_t`], [`matmul_bf16_rows_packed`]).

use std::cell::RefCell;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::matmul::{Accum, MatRef, stats};
use crate::real::Real;

mod amx;
mod pairs;

use pairs::Pairs;

/// The kernel a bf16 product runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Bf16Path {
    /// AMX-BF16 tiles (`tdpbf16ps`).
    Amx,
    /// AVX512-BF16 dot products (`vdpbf16ps`).
    Avx512Bf16,
    /// The bf16 values widened to f32, the `gemm` crate's f32 FMA kernel.
    F32Fma,
    /// Plain f32 arithmetic on the bf16 values, vectorised by the compiler.
    Portable,
}

impl Bf16Path {
    /// A short name for benchmark output.
    pub fn name(self) -> &'static str {
        stats::GemmPath::from(self).name()
    }

    /// Whether this CPU can run the path.
    pub fn available(self) -> bool {
        self.unavailable().is_none()
    }

    /// Why this CPU cannot run the path (the CPU lacks it, or the kernel refused AMX's tile
    /// data), or `None` where it can.
    pub fn unavailable(self) -> Option<&'static str> {
        match self {
            Bf16Path::Portable | Bf16Path::F32Fma => None,
            Bf16Path::Avx512Bf16 => (!has_avx512_bf16()).then_some("the CPU has no AVX512-BF16"),
            Bf16Path::Amx => amx::unavailable(),
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

impl From<Bf16Path> for stats::GemmPath {
    fn from(p: Bf16Path) -> Self {
        match p {
            Bf16Path::Avx512Bf16 => stats::GemmPath::Bf16Avx512,
            Bf16Path::Amx => stats::GemmPath::Bf16Amx,
            Bf16Path::F32Fma => stats::GemmPath::Bf16F32Fma,
            Bf16Path::Portable => stats::GemmPath::Bf16Portable,
        }
    }
}

/// The path bf16 products take on this machine ([`force_path`]'s, if set), by a fixed rule on
/// the CPU's features, never a timing probe, so that the same machine always takes the same
/// path ([`chosen_path`] says why):
/// 1. AMX where the CPU has it and the kernel grants its tile data;
/// 2. else AVX512-BF16 on CPUs that are not Intel's: on AMD Zen 4 `vdpbf16ps` beats f32 FMAs;
/// 3. else f32 FMAs on the bf16 values ([`Bf16Path::F32Fma`]): Intel cores issue `vdpbf16ps`
///    on one port where f32 FMAs issue on two, and without AVX512-BF16 there is nothing better.
///
/// The measurements behind the rule are in `tools/recipes/results/engine_cpu.md`.
pub fn best_path() -> Bf16Path {
    match FORCED.load(Ordering::Relaxed) {
        0 => chosen_path().0,
        f => ALL_PATHS[f as usize - 1],
    }
}

/// The path the rule of [`best_path`] chooses on this CPU, and why, in a line for logs and
/// benchmark output (a forced path is not considered).
pub fn chosen_path() -> (Bf16Path, &'static str) {
    static CHOSEN: std::sync::OnceLock<(Bf16Path, &'static str)> = std::sync::OnceLock::new();
    *CHOSEN.get_or_init(|| {
        if Bf16Path::Amx.available() {
            (Bf16Path::Amx, "the CPU has AMX-BF16")
        } else if Bf16Path::Avx512Bf16.available() && !is_intel() {
            (Bf16Path::Avx512Bf16, "AVX512-BF16 on a CPU that is not Intel's, no AMX")
        } else if Bf16Path::Avx512Bf16.available() {
            (Bf16Path::F32Fma, "an Intel CPU without usable AMX: f32 FMAs outrun vdpbf16ps")
        } else {
            (Bf16Path::F32Fma, "no bf16 instructions")
        }
    })
}

/// Every path, in [`force_path`]'s numbering (index + 1).
const ALL_PATHS: [Bf16Path; 4] = [Bf16Path::Amx, Bf16Path::Avx512Bf16, Bf16Path::F32Fma, Bf16Path::Portable];

static FORCED: AtomicU8 = AtomicU8::new(0);

/// Makes every later bf16 product take `path` (benchmarks compare paths on one machine);
/// `None` restores the rule of [`best_path`].
///
/// # Errors
/// If this CPU cannot run `path`: why.
pub fn force_path(path: Option<Bf16Path>) -> Result<(), &'static str> {
    let v = match path {
        None => 0,
        Some(p) => {
            if let Some(why) = p.unavailable() {
                return Err(why);
            }
            ALL_PATHS.iter().position(|&q| q == p).expect("every path is listed") as u8 + 1
        }
    };
    FORCED.store(v, Ordering::Relaxed);
    Ok(())
}

/// True on a CPU whose vendor string is `GenuineIntel`.
fn is_intel() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let r = std::arch::x86_64::__cpuid(0);
        (r.ebx, r.edx, r.ecx)
            == (u32::from_le_bytes(*b"Genu"), u32::from_le_bytes(*b"ineI"), u32::from_le_bytes(*b"ntel"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
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
    pairs: Pairs,
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
        let mut pairs = Pairs::new();
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
        PackedB { path: best_path(), k: 0, n: 0, np: 0, pairs: Pairs::new() }
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
            Bf16Path::Avx512Bf16 | Bf16Path::Amx => n.div_ceil(16) * 16,
            Bf16Path::Portable | Bf16Path::F32Fma => n,
        }
    }
}

/// Packs `a` into `pa`, runs the kernel of `path` on it and the packed `pb` (kp × np pairs)
/// into `out`, and stores the first `n` columns of the result into `dst`.
#[allow(clippy::too_many_arguments)]
fn product<T: Real>(
    path: Bf16Path,
    pa: &mut Pairs,
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
    let kp = k.div_ceil(2);
    // An f32 destination takes the AMX and f32-FMA results straight, without the f32 scratch
    // and its copy (the memory-bound part of a product at H = 64).
    if let Some(d) = as_f32(dst) {
        match path {
            Bf16Path::Amx => {
                let dest = amx::Dest::Direct { dst: d, ld, n, add: accum == Accum::Add };
                // SAFETY: the callers asserted `path.available()` (or packed for it, which did):
                // AMX is usable; the packed buffers have the sizes the kernel reads (m·kp in
                // `a_layout`, kp·np); the callers checked dst's (m − 1)·ld + n and n ≤ ld.
                unsafe { amx::gemm(pa, a_layout, pb, m, kp, np, dest) };
                return;
            }
            Bf16Path::F32Fma => return f32_fma_gemm(pa, a_layout, pb, m, kp, np, (d, ld, n, accum)),
            _ => {}
        }
    }
    // Every kernel writes all of out (m × np; AMX whole tiles of rows): no need to clear it.
    let rows = if path == Bf16Path::Amx { amx::padded_rows(m) } else { m };
    out.resize(rows * np, 0.0);
    match path {
        Bf16Path::Amx => {
            // SAFETY: as above; out holds whole tiles of rows · np.
            unsafe { amx::gemm(pa, a_layout, pb, m, kp, np, amx::Dest::Out(out)) };
        }
        Bf16Path::Avx512Bf16 => {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the callers asserted `path.available()` (or packed for it, which did):
            // the CPU has AVX-512F and AVX512-BF16; the packed buffers have the sizes the
            // kernel reads (m·kp in `a_layout`, kp·np, m·np).
            unsafe {
                avx512::gemm(pa, a_layout, pb, out, m, kp, np)
            };
        }
        Bf16Path::F32Fma => f32_fma_gemm(pa, a_layout, pb, m, kp, np, (out, np, np, Accum::Replace)),
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
    pairs: Pairs,
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
    fn pack_transposed(&self, out: &mut Pairs) -> PairLayout {
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

/// `dst` as f32, where `T` is f32.
fn as_f32<T: Real>(dst: &mut [T]) -> Option<&mut [f32]> {
    if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() {
        // SAFETY: T is f32: the same type, length and alignment.
        Some(unsafe { std::slice::from_raw_parts_mut(dst.as_mut_ptr().cast::<f32>(), dst.len()) })
    } else {
        None
    }
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
    a: Pairs,
    b: Pairs,
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
fn pack_rows<T: Real>(x: &MatRef<'_, T>, out: &mut Pairs) -> PairLayout {
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
        pack_contiguous_rows(&data[off..], rs, k, out);
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

/// o[q] = the pair (x[2q], x[2q + 1]), 0 past the end of x.
#[inline(always)]
fn pack_contiguous<T: Real>(x: &[T], o: &mut [u32]) {
    let full = x.len() / 2;
    for (o, p) in o.iter_mut().zip(x.chunks_exact(2)) {
        *o = pair_of(p[0], p[1]);
    }
    if x.len() % 2 == 1 {
        o[full] = pair_of(x[x.len() - 1], T::ZERO);
    }
}

crate::dispatch! {
    /// Every row of `out` (⌈k/2⌉ pairs each) packed from the k values of a row of `data` (row
    /// stride `rs`) by [`pack_contiguous`]: one dispatched call for all rows.
    fn pack_contiguous_rows<T: Real>(data: &[T], rs: usize, k: usize, out: &mut [u32]) {
        let kp = k.div_ceil(2);
        for (r, o) in out.chunks_exact_mut(kp).enumerate() {
            pack_contiguous(&data[r * rs..r * rs + k], o);
        }
    }
}

/// `out[q·np + j]` = the pair (b(2q, j), b(2q + 1, j)) of a k × n matrix for j < n, 0 for
/// n ≤ j < np.
fn pack_cols<T: Real>(b: &MatRef<'_, T>, np: usize, out: &mut Pairs) {
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
        interleave_row_pairs(&data[off..], rs, k, n, np, out);
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
        interleave_inline(lo, hi, o);
    }
}

#[inline(always)]
fn interleave_inline<T: Real>(lo: &[T], hi: &[T], o: &mut [u32]) {
    for ((o, &l), &h) in o.iter_mut().zip(lo).zip(hi) {
        *o = pair_of(l, h);
    }
}

crate::dispatch! {
    /// The first n columns of every pair row q of `out` (np pairs each) = rows 2q and 2q + 1
    /// of a k-row matrix `data` (row stride `rs`) interleaved, the second half 0 past its last
    /// row: one dispatched call for all rows.
    fn interleave_row_pairs<T: Real>(data: &[T], rs: usize, k: usize, n: usize, np: usize, out: &mut [u32]) {
        for (q, o) in out.chunks_exact_mut(np).enumerate() {
            let r0 = &data[2 * q * rs..2 * q * rs + n];
            if 2 * q + 1 < k {
                interleave_inline(r0, &data[(2 * q + 1) * rs..(2 * q + 1) * rs + n], &mut o[..n]);
            } else {
                o[..n].iter_mut().zip(r0).for_each(|(o, &v)| *o = pair_of(v, T::ZERO));
            }
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

thread_local! {
    /// [`f32_fma_gemm`]'s operands widened to f32, reused between calls.
    static WIDE: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// `out` (its first n columns, row stride ld) = / += A · B with A (m × kp pairs, laid out as
/// `al`) and B (kp × np pairs) widened to f32 (exactly: a bf16 value is an f32 with a zero low
/// half) and multiplied by the `gemm` crate's f32 kernel.
fn f32_fma_gemm(
    a: &[u32],
    al: PairLayout,
    b: &[u32],
    m: usize,
    kp: usize,
    np: usize,
    (out, ld, n, accum): (&mut [f32], usize, usize, Accum),
) {
    use crate::matmul::gemm_checked;
    let k = 2 * kp;
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if accum == Accum::Replace {
            (0..m).for_each(|i| out[i * ld..i * ld + n].fill(0.0));
        }
        return;
    }
    WIDE.with_borrow_mut(|(wa, wb)| {
        wa.resize(m * k, 0.0);
        wb.resize(k * np, 0.0);
        let av = if al.pair == 1 {
            // Rows of pairs widen to rows of values.
            for (i, row) in wa.chunks_exact_mut(k).enumerate() {
                widen_pairs(&a[i * al.row..i * al.row + kp], row);
            }
            MatRef::row_major(wa, m, k)
        } else {
            // Pair columns (al.row == 1): pair column q gives columns 2q and 2q + 1, stored as
            // rows of the transpose.
            for (q, cols) in wa.chunks_exact_mut(2 * m).enumerate() {
                let (lo, hi) = cols.split_at_mut(m);
                split_pairs(&a[q * al.pair..q * al.pair + m], lo, hi);
            }
            MatRef::row_major(wa, k, m).t()
        };
        for (q, rows) in wb.chunks_exact_mut(2 * np).enumerate() {
            let (lo, hi) = rows.split_at_mut(np);
            split_pairs(&b[q * np..(q + 1) * np], lo, hi);
        }
        gemm_checked(out, ld, av, MatRef::row_major(wb, k, np).cols(0, n), accum);
    });
}

crate::dispatch! {
    /// o[2t], o[2t + 1] = the two bf16 values of the pair p[t], as f32.
    fn widen_pairs(p: &[u32], o: &mut [f32]) {
        for (o, &p) in o.chunks_exact_mut(2).zip(p) {
            o[0] = f32::from_bits(p << 16);
            o[1] = f32::from_bits(p & 0xffff_0000);
        }
    }
}

crate::dispatch! {
    /// lo[t], hi[t] = the even and odd bf16 values of the pair p[t], as f32.
    fn split_pairs(p: &[u32], lo: &mut [f32], hi: &mut [f32]) {
        for ((l, h), &p) in lo.iter_mut().zip(hi.iter_mut()).zip(p) {
            *l = f32::from_bits(p << 16);
            *h = f32::from_bits(p & 0xffff_0000);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512;

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
mod tests;
