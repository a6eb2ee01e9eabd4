//! Matrix products through the `gemm` crate (run-time AVX-512/AVX2 kernels), behind a safe,
//! bounds-checked view type. The engine calls it on cache-sized tiles without internal
//! threading (`Parallelism::None`): parallelism is over tiles, so results do not depend on the
//! thread count.

use crate::real::Real;

/// Overwrite or accumulate into the destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accum {
    /// dst = a·b
    Replace,
    /// dst += a·b
    Add,
}

/// A read-only strided matrix view: element (i, j) is `data[offset + i·rs + j·cs]`.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a, T> {
    data: &'a [T],
    offset: usize,
    rows: usize,
    cols: usize,
    rs: isize,
    cs: isize,
}

impl<'a, T> MatRef<'a, T> {
    /// A row-major `rows × cols` matrix.
    ///
    /// # Panics
    /// If `data` is shorter than `rows·cols`.
    #[track_caller]
    pub fn row_major(data: &'a [T], rows: usize, cols: usize) -> Self {
        assert!(data.len() >= rows * cols, "MatRef::row_major: {} < {rows}×{cols}", data.len());
        MatRef { data, offset: 0, rows, cols, rs: cols as isize, cs: 1 }
    }

    /// The transpose (no copy).
    pub fn t(self) -> Self {
        MatRef { rows: self.cols, cols: self.rows, rs: self.cs, cs: self.rs, ..self }
    }

    /// Columns `c0..c1` (no copy).
    ///
    /// # Panics
    /// If the range is out of bounds.
    #[track_caller]
    pub fn cols(self, c0: usize, c1: usize) -> Self {
        assert!(c0 <= c1 && c1 <= self.cols, "MatRef::cols({c0}, {c1}) of {} columns", self.cols);
        MatRef { offset: (self.offset as isize + c0 as isize * self.cs) as usize, cols: c1 - c0, ..self }
    }

    /// Rows `r0..r1` (no copy).
    ///
    /// # Panics
    /// If the range is out of bounds.
    #[track_caller]
    pub fn rows(self, r0: usize, r1: usize) -> Self {
        assert!(r0 <= r1 && r1 <= self.rows, "MatRef::rows({r0}, {r1}) of {} rows", self.rows);
        MatRef { offset: (self.offset as isize + r0 as isize * self.rs) as usize, rows: r1 - r0, ..self }
    }

    /// Number of rows.
    pub fn nrows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    pub fn ncols(&self) -> usize {
        self.cols
    }

    /// Element (i, j).
    #[inline]
    pub fn at(&self, i: usize, j: usize) -> T
    where
        T: Copy,
    {
        self.data[(self.offset as isize + i as isize * self.rs + j as isize * self.cs) as usize]
    }

    /// True when rows are contiguous (column stride 1); false for a transposed view.
    pub(crate) fn is_row_major(&self) -> bool {
        self.cs == 1
    }

    /// The backing slice, offset, row stride and column stride (after [`MatRef::check`]: every
    /// reachable index `offset + i·rs + j·cs` is in the slice).
    pub(crate) fn raw(&self) -> (&'a [T], usize, usize, usize) {
        (self.data, self.offset, self.rs as usize, self.cs as usize)
    }

    /// Checks every reachable index is in bounds (strides are non-negative here).
    pub(crate) fn check(&self) {
        if self.rows == 0 || self.cols == 0 {
            return;
        }
        assert!(self.rs >= 0 && self.cs >= 0, "negative strides are not used");
        let last = self.offset + (self.rows - 1) * self.rs as usize + (self.cols - 1) * self.cs as usize;
        assert!(last < self.data.len(), "MatRef out of bounds: index {last} of {}", self.data.len());
    }
}

/// Time and floating-point work spent in matrix products ([`matmul`] and
/// [`crate::matmul_bf16`]), in total and per kernel path, counted only while enabled
/// (benchmarks report the GEMM share of a step and which kernels ran).
pub mod stats {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    use crate::simd::{self, Level};

    /// The kernel a product ran on.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum GemmPath {
        /// f32 through the `gemm` crate (its own AVX-512 / AVX2 / portable kernels).
        F32Gemm,
        /// bf16 operands, AVX512-BF16 dot products.
        Bf16Avx512,
        /// bf16 operands, AMX-BF16 tiles.
        Bf16Amx,
        /// bf16 operands, f32 FMAs (the `gemm` crate's f32 kernel).
        Bf16F32Fma,
        /// bf16 operands, portable f32 arithmetic.
        Bf16Portable,
    }

    impl GemmPath {
        /// Every path, in report order.
        pub const ALL: [GemmPath; 5] =
            [GemmPath::F32Gemm, GemmPath::Bf16Amx, GemmPath::Bf16Avx512, GemmPath::Bf16F32Fma, GemmPath::Bf16Portable];

        /// What ran, for benchmark output (the f32 path names the SIMD level this CPU gives it).
        pub fn name(self) -> &'static str {
            match self {
                GemmPath::F32Gemm => match simd::level() {
                    Level::Avx512 => "f32 gemm crate (AVX-512)",
                    Level::Avx2 => "f32 gemm crate (AVX2+FMA)",
                    Level::Scalar => "f32 gemm crate (portable)",
                },
                GemmPath::Bf16Avx512 => "bf16 avx512-bf16 (vdpbf16ps)",
                GemmPath::Bf16Amx => "bf16 amx (tdpbf16ps)",
                GemmPath::Bf16F32Fma => "bf16 operands on f32 FMA (gemm crate)",
                GemmPath::Bf16Portable => "bf16 portable (f32 arithmetic)",
            }
        }
    }

    /// One product as recorded by [`record`]: its path and shape, and how its operands were
    /// laid out (row-major, or read transposed).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Product {
        /// The kernel it ran on.
        pub path: GemmPath,
        /// Rows of the result.
        pub m: usize,
        /// Inner dimension.
        pub k: usize,
        /// Columns of the result.
        pub n: usize,
        /// The left operand was row-major (else a transposed view).
        pub a_row_major: bool,
        /// The right operand was row-major (else a transposed view).
        pub b_row_major: bool,
        /// The right operand was packed before the product (a bf16 weight packed once per
        /// pass, [`crate::matmul_bf16::PackedB`]); the replay packs it outside the timing.
        pub b_packed: bool,
        /// It accumulated into its destination.
        pub add: bool,
    }

    static RECORD: AtomicBool = AtomicBool::new(false);
    static LOG: Mutex<Vec<Product>> = Mutex::new(Vec::new());

    /// Starts recording every product's shape (clearing the record), or stops (keeping it).
    pub fn record(on: bool) {
        if on {
            LOG.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
        RECORD.store(on, Ordering::Relaxed);
    }

    /// The products recorded since [`record`]`(true)`, in no particular order.
    pub fn recorded() -> Vec<Product> {
        LOG.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    #[inline]
    pub(crate) fn log(p: impl FnOnce() -> Product) {
        if RECORD.load(Ordering::Relaxed) {
            LOG.lock().unwrap_or_else(|e| e.into_inner()).push(p());
        }
    }

    static ENABLED: AtomicBool = AtomicBool::new(false);
    static NANOS: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];
    static FLOPS: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];
    static CALLS: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];

    /// Starts (or stops) counting and resets the counters.
    pub fn enable(on: bool) {
        for c in NANOS.iter().chain(&FLOPS).chain(&CALLS) {
            c.store(0, Ordering::Relaxed);
        }
        ENABLED.store(on, Ordering::Relaxed);
    }

    /// True while counting.
    #[inline]
    pub fn enabled() -> bool {
        ENABLED.load(Ordering::Relaxed)
    }

    /// Stops counting without resetting; returns whether it was on (for [`resume`]).
    pub(crate) fn pause() -> bool {
        ENABLED.swap(false, Ordering::Relaxed)
    }

    /// Counts again if `on`.
    pub(crate) fn resume(on: bool) {
        ENABLED.store(on, Ordering::Relaxed);
    }

    pub(crate) fn add_path(path: GemmPath, nanos: u64, flops: u64) {
        let i = path as usize;
        NANOS[i].fetch_add(nanos, Ordering::Relaxed);
        FLOPS[i].fetch_add(flops, Ordering::Relaxed);
        CALLS[i].fetch_add(1, Ordering::Relaxed);
    }

    /// (thread-seconds inside GEMM, floating-point operations) since [`enable`], all paths.
    pub fn read() -> (f64, u64) {
        GemmPath::ALL.iter().fold((0.0, 0), |(s, f), &p| {
            let (_, ps, pf) = read_path(p);
            (s + ps, f + pf)
        })
    }

    /// (calls, thread-seconds, floating-point operations) of one path since [`enable`].
    pub fn read_path(path: GemmPath) -> (u64, f64, u64) {
        let i = path as usize;
        (
            CALLS[i].load(Ordering::Relaxed),
            NANOS[i].load(Ordering::Relaxed) as f64 * 1e-9,
            FLOPS[i].load(Ordering::Relaxed),
        )
    }
}

/// `dst (m × n, row-major with row stride ld) = / += a (m × k) · b (k × n)`.
///
/// # Panics
/// On shape mismatch or if `dst` is too short.
#[track_caller]
pub fn matmul<T: Real>(dst: &mut [T], ld: usize, a: MatRef<'_, T>, b: MatRef<'_, T>, accum: Accum) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert_eq!(b.rows, k, "matmul: inner dimensions {} and {}", k, b.rows);
    assert!(ld >= n, "matmul: ld {ld} < n {n}");
    if m == 0 || n == 0 {
        return;
    }
    assert!(dst.len() >= (m - 1) * ld + n, "matmul: dst too short");
    if k == 0 {
        if accum == Accum::Replace {
            for i in 0..m {
                dst[i * ld..i * ld + n].iter_mut().for_each(|x| *x = T::ZERO);
            }
        }
        return;
    }
    a.check();
    b.check();
    stats::log(|| stats::Product {
        path: stats::GemmPath::F32Gemm,
        m,
        k,
        n,
        a_row_major: a.is_row_major(),
        b_row_major: b.is_row_major(),
        b_packed: false,
        add: accum == Accum::Add,
    });
    let t0 = stats::enabled().then(std::time::Instant::now);
    gemm_checked(dst, ld, a, b, accum);
    if let Some(t0) = t0 {
        stats::add_path(stats::GemmPath::F32Gemm, t0.elapsed().as_nanos() as u64, 2 * (m * n * k) as u64);
    }
}

/// The `gemm` crate's product of [`matmul`], not counted by [`stats`] (for a caller that counts
/// it under its own path).
///
/// # Panics
/// On shape mismatch or if `dst` is too short.
pub(crate) fn gemm_checked<T: Real>(dst: &mut [T], ld: usize, a: MatRef<'_, T>, b: MatRef<'_, T>, accum: Accum) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert!(b.rows == k && ld >= n && (m == 0 || n == 0 || dst.len() >= (m - 1) * ld + n));
    if m == 0 || n == 0 || k == 0 {
        if accum == Accum::Replace && k == 0 {
            (0..m).for_each(|i| dst[i * ld..i * ld + n].iter_mut().for_each(|x| *x = T::ZERO));
        }
        return;
    }
    a.check();
    b.check();
    // SAFETY: every index gemm reads or writes was bounds-checked above: dst covers
    // (m−1)·ld + n elements and both operands' last reachable elements are in their slices.
    unsafe {
        gemm::gemm(
            /* m = */ m,
            /* n = */ n,
            /* k = */ k,
            /* dst = */ dst.as_mut_ptr(),
            /* dst_cs = */ 1,
            /* dst_rs = */ ld as isize,
            /* read_dst = */ accum == Accum::Add,
            /* lhs = */ a.data.as_ptr().add(a.offset),
            /* lhs_cs = */ a.cs,
            /* lhs_rs = */ a.rs,
            /* rhs = */ b.data.as_ptr().add(b.offset),
            /* rhs_cs = */ b.cs,
            /* rhs_rs = */ b.rs,
            /* alpha = */ T::ONE,
            /* beta = */ T::ONE,
            /* conj_dst = */ false,
            /* conj_lhs = */ false,
            /* conj_rhs = */ false,
            /* parallelism = */ gemm::Parallelism::None,
        );
    }
}

/// The slow twin of [`matmul`]: three plain loops, summing in f64.
pub fn matmul_slow<T: Real>(dst: &mut [T], ld: usize, a: MatRef<'_, T>, b: MatRef<'_, T>, accum: Accum) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert_eq!(b.rows, k);
    for i in 0..m {
        for j in 0..n {
            let s: f64 = (0..k).map(|p| a.at(i, p).to_f64() * b.at(p, j).to_f64()).sum();
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

    #[test]
    fn gemm_matches_loops_on_awkward_sizes_and_views() {
        let mut rng = Rng::new(1);
        for &(m, k, n) in &[(1, 1, 1), (3, 5, 7), (17, 31, 13), (64, 64, 64), (129, 3, 65), (0, 4, 3), (5, 0, 3)] {
            let a: Vec<f64> = (0..m * (k + 3)).map(|_| rng.normal()).collect();
            let b: Vec<f64> = (0..n * k).map(|_| rng.normal()).collect();
            // a: columns 2..2+k of an m×(k+3) matrix; b given as n×k and transposed.
            let av = MatRef::row_major(&a, m, k + 3).cols(2, 2 + k);
            let bv = MatRef::row_major(&b, n, k).t();
            for accum in [Accum::Replace, Accum::Add] {
                let init: Vec<f64> = (0..m * (n + 2)).map(|_| rng.normal()).collect();
                let (mut fast, mut slow) = (init.clone(), init.clone());
                matmul(&mut fast, n + 2, av, bv, accum);
                matmul_slow(&mut slow, n + 2, av, bv, accum);
                let diff = fast.iter().zip(&slow).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
                assert!(diff < 1e-12 * (k.max(1) as f64), "({m},{k},{n}) {accum:?}: max |Δ| {diff}");
                for i in 0..m {
                    assert_eq!(
                        fast[i * (n + 2) + n..i * (n + 2) + n + 2],
                        init[i * (n + 2) + n..i * (n + 2) + n + 2],
                        "padding untouched"
                    );
                }
            }
        }
    }
}
