//! What the model code asks of a device: memory, copies, kernel launches and matrix products.
//! [`crate::Emulator`] runs it on the CPU (tests, CI); `CudaBackend` (feature `cuda`) on a GPU.

use std::sync::Arc;

use crate::kernels::{KERNELS, ParamKind};

/// A device address (a `CUdeviceptr`, or a host address in the emulator).
pub type DevPtr = u64;

/// One launch argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg {
    /// A device pointer (0 for a null pointer).
    Ptr(DevPtr),
    /// `int`.
    I32(i32),
    /// `unsigned`.
    U32(u32),
    /// `float`.
    F32(f32),
}

impl Arg {
    /// Its kind.
    pub fn kind(&self) -> ParamKind {
        match self {
            Arg::Ptr(_) => ParamKind::Ptr,
            Arg::I32(_) => ParamKind::I32,
            Arg::U32(_) => ParamKind::U32,
            Arg::F32(_) => ParamKind::F32,
        }
    }

    /// The argument's bits in a 64-bit parameter slot (a 4-byte value in the low bytes, read by
    /// a little-endian kernel through its own type).
    pub fn slot(&self) -> u64 {
        match *self {
            Arg::Ptr(p) => p,
            Arg::I32(v) => u64::from(v as u32),
            Arg::U32(v) => u64::from(v),
            Arg::F32(v) => u64::from(v.to_bits()),
        }
    }

    /// An `int` argument from a size (sizes are checked to fit when a graph is uploaded).
    pub fn int(v: usize) -> Arg {
        Arg::I32(i32::try_from(v).expect("size fits a kernel's int"))
    }
}

/// A matrix product on row-major matrices: C (m × n) = α·op(A)·op(B) + β·C, op(A) m × k and
/// op(B) k × n; `trans_a`: A is stored k × m (row stride `lda`), else m × k; likewise B.
#[derive(Clone, Copy, Debug)]
pub struct Gemm {
    /// Rows of C.
    pub m: usize,
    /// Columns of C.
    pub n: usize,
    /// The inner dimension.
    pub k: usize,
    /// A.
    pub a: DevPtr,
    /// A's row stride.
    pub lda: usize,
    /// Whether A is stored transposed.
    pub trans_a: bool,
    /// B.
    pub b: DevPtr,
    /// B's row stride.
    pub ldb: usize,
    /// Whether B is stored transposed.
    pub trans_b: bool,
    /// C.
    pub c: DevPtr,
    /// C's row stride.
    pub ldc: usize,
    /// α.
    pub alpha: f32,
    /// β (0: C is only written).
    pub beta: f32,
    /// Round A and B to bfloat16 and accumulate in f32 (`--precision bf16`), else f32 without
    /// TF32.
    pub bf16: bool,
}

impl Gemm {
    /// op(A)'s stored shape (rows, columns) and op(B)'s: the packed bf16 copies' sizes.
    pub fn operand_shapes(&self) -> ((usize, usize), (usize, usize)) {
        let a = if self.trans_a { (self.k, self.m) } else { (self.m, self.k) };
        let b = if self.trans_b { (self.n, self.k) } else { (self.k, self.n) };
        (a, b)
    }

    /// The bytes A, B and C span in memory, from their first element to their last, with
    /// their row strides.
    pub fn byte_spans(&self) -> [usize; 3] {
        let span = |(rows, cols): (usize, usize), ld: usize| if rows == 0 { 0 } else { 4 * ((rows - 1) * ld + cols) };
        let (a, b) = self.operand_shapes();
        [span(a, self.lda), span(b, self.ldb), span((self.m, self.n), self.ldc)]
    }

    /// Whether a backend runs anything for it (an empty product with β = 1 leaves C alone).
    pub fn is_empty(&self) -> bool {
        self.m == 0 || self.n == 0 || (self.k == 0 && self.beta == 1.0)
    }

    /// The product as pieces whose operands hold at most `max` elements each, where its shape
    /// allows: by rows of C when A is stored m × k and B fits (a layer's forward, an input
    /// gradient: the pieces' results are the product's), or along k when A and B are both
    /// stored k-major (a weight gradient over the rows: the pieces accumulate, in a fixed
    /// order). A bf16 product rounds each piece's operands into packed copies of that size, not
    /// the whole operands.
    pub fn pieces(&self, max: usize) -> Vec<Gemm> {
        let ((ar, ac), (br, bc)) = self.operand_shapes();
        let max = max.max(1);
        if (ar * ac <= max && br * bc <= max) || self.is_empty() {
            return vec![*self];
        }
        if !self.trans_a && br * bc <= max {
            let rows = (max / self.k.max(1)).max(1);
            return (0..self.m)
                .step_by(rows)
                .map(|m0| Gemm {
                    m: rows.min(self.m - m0),
                    a: self.a + (m0 * self.lda * 4) as u64,
                    c: self.c + (m0 * self.ldc * 4) as u64,
                    ..*self
                })
                .collect();
        }
        if self.trans_a && !self.trans_b && self.k > 0 {
            let rows = (max / self.m.max(self.n)).max(1);
            return (0..self.k)
                .step_by(rows)
                .map(|k0| Gemm {
                    k: rows.min(self.k - k0),
                    a: self.a + (k0 * self.lda * 4) as u64,
                    b: self.b + (k0 * self.ldb * 4) as u64,
                    beta: if k0 == 0 { self.beta } else { 1.0 },
                    ..*self
                })
                .collect();
        }
        vec![*self]
    }
}

/// Allocates and frees, piece by piece, the packed operand copies the CUDA backend makes for
/// bf16 product `g`: what the planner and the emulator do in its place, so that their peak
/// memory is a GPU's.
pub fn mimic_bf16_copies(dev: &dyn Backend, g: &Gemm) -> Result<(), BackendError> {
    if g.bf16 && !g.is_empty() {
        for p in g.pieces(BF16_PIECE_ELEMENTS) {
            let ((ar, ac), (br, bc)) = p.operand_shapes();
            let a16 = dev.alloc(2 * ar * ac)?;
            let b16 = dev.alloc(2 * br * bc).inspect_err(|_| dev.free(a16))?;
            dev.free(a16);
            dev.free(b16);
        }
    }
    Ok(())
}

/// The most elements a bf16 product's packed operand copy holds (64 MiB of bf16): larger
/// products run in [`Gemm::pieces`], so the copies stay small beside a whole event's activations.
pub const BF16_PIECE_ELEMENTS: usize = 1 << 25;

/// Why a device operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// A library the backend loads at run time is missing.
    #[error("{library} not found: {hint}")]
    MissingLibrary {
        /// The library (`libcuda`, `libnvrtc`, `libcublas`).
        library: &'static str,
        /// Where it is looked for and how to provide it.
        hint: String,
    },
    /// The device has too little free memory for an allocation.
    #[error("{device}: out of memory allocating {bytes} bytes ({free} free of {total})")]
    OutOfMemory {
        /// The device.
        device: String,
        /// The allocation asked for.
        bytes: usize,
        /// Free bytes at the time.
        free: usize,
        /// Total bytes.
        total: usize,
    },
    /// A launch whose arguments do not match the kernel's parameters.
    #[error("kernel {kernel}: {message}")]
    BadLaunch {
        /// The kernel.
        kernel: String,
        /// What does not match.
        message: String,
    },
    /// The kernels did not compile.
    #[error("NVRTC could not compile the kernels for {arch}:\n{log}")]
    Compile {
        /// The target architecture (`sm_90`).
        arch: String,
        /// NVRTC's log.
        log: String,
    },
    /// Any other failure of the driver, NVRTC, cuBLAS or the emulator, as it reported it.
    #[error("{0}")]
    Device(String),
}

/// A device that runs the kernels of [`crate::kernels`] and row-major matrix products.
/// Operations are ordered as issued (one stream); `download` waits for what came before.
pub trait Backend: Send + Sync {
    /// The device, for messages (`cuda:0 (NVIDIA H200)`, `emulator`).
    fn name(&self) -> String;

    /// `bytes` of device memory, zeroed.
    fn alloc(&self, bytes: usize) -> Result<DevPtr, BackendError>;

    /// Frees what [`alloc`](Self::alloc) returned.
    fn free(&self, ptr: DevPtr);

    /// Copies host bytes to the device.
    fn upload(&self, dst: DevPtr, src: &[u8]) -> Result<(), BackendError>;

    /// Copies device bytes to the host, after every operation issued before.
    fn download(&self, src: DevPtr, dst: &mut [u8]) -> Result<(), BackendError>;

    /// Sets `bytes` bytes at `ptr` to zero.
    fn zero(&self, ptr: DevPtr, bytes: usize) -> Result<(), BackendError>;

    /// Launches kernel number `kernel` of [`KERNELS`] on `grid` blocks of `block` threads
    /// (arguments already checked by [`launch`]).
    fn launch_checked(&self, kernel: usize, grid: u32, block: u32, args: &[Arg]) -> Result<(), BackendError>;

    /// A row-major matrix product: f32 without TF32, or bf16 operands with f32 accumulation.
    fn gemm(&self, g: &Gemm) -> Result<(), BackendError>;

    /// Copies `bytes` bytes between device buffers.
    fn copy(&self, dst: DevPtr, src: DevPtr, bytes: usize) -> Result<(), BackendError>;

    /// Waits for every operation issued so far.
    fn synchronize(&self) -> Result<(), BackendError>;

    /// Bytes allocated now, and the most allocated at once since the last
    /// [`reset_peak`](Self::reset_peak) (the backend's own allocations: what Table 2 reports).
    fn memory(&self) -> MemoryUse;

    /// Starts the peak of [`memory`](Self::memory) afresh from what is allocated now.
    fn reset_peak(&self);
}

/// A backend's allocations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryUse {
    /// Bytes allocated now.
    pub current: usize,
    /// The most allocated at once.
    pub peak: usize,
}

/// Allocation bookkeeping shared by the backends: each live allocation's size, the current
/// total and its peak.
#[derive(Default)]
pub struct Allocations {
    inner: std::sync::Mutex<(std::collections::HashMap<DevPtr, usize>, MemoryUse)>,
}

impl Allocations {
    /// Records an allocation.
    pub fn add(&self, ptr: DevPtr, bytes: usize) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.0.insert(ptr, bytes);
        g.1.current += bytes;
        g.1.peak = g.1.peak.max(g.1.current);
    }

    /// Forgets an allocation; its size, if it was recorded.
    pub fn remove(&self, ptr: DevPtr) -> Option<usize> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let bytes = g.0.remove(&ptr)?;
        g.1.current -= bytes;
        Some(bytes)
    }

    /// The live allocation holding `bytes` bytes from `ptr`, if any.
    pub fn holds(&self, ptr: DevPtr, bytes: usize) -> bool {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.0.iter().any(|(&p, &n)| ptr >= p && ptr + bytes as u64 <= p + n as u64)
    }

    /// Current and peak bytes.
    pub fn usage(&self) -> MemoryUse {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).1
    }

    /// Sets the peak to the current total.
    pub fn reset_peak(&self) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.1.peak = g.1.current;
    }
}

/// Launches kernel `name` with `threads` threads in blocks of [`BLOCK`] after checking `args`
/// against its parameters.
pub fn launch(dev: &dyn Backend, name: &str, threads: usize, args: &[Arg]) -> Result<(), BackendError> {
    let bad = |message: String| BackendError::BadLaunch { kernel: name.to_string(), message };
    let index = crate::kernels::index_of(name).ok_or_else(|| bad("no such kernel".into()))?;
    let sig = &KERNELS[index];
    if sig.kinds.len() != args.len() {
        return Err(bad(format!("{} arguments given, {} expected", args.len(), sig.kinds.len())));
    }
    if let Some(i) = (0..args.len()).find(|&i| args[i].kind() != sig.kinds[i]) {
        return Err(bad(format!(
            "argument {} (`{}`) is {:?}, expected {:?}",
            i,
            sig.names[i],
            args[i].kind(),
            sig.kinds[i]
        )));
    }
    if threads == 0 {
        return Ok(());
    }
    let grid = u32::try_from(threads.div_ceil(BLOCK)).map_err(|_| bad(format!("{threads} threads")))?;
    dev.launch_checked(index, grid, BLOCK as u32, args)
}

/// Threads per block of every launch (the kernels' `BLOCK`).
pub const BLOCK: usize = 256;
/// Threads per warp.
pub const WARP: usize = 32;

/// A device buffer of `len` values of `T`, freed on drop.
pub struct DevBuf<T> {
    dev: Arc<dyn Backend>,
    ptr: DevPtr,
    len: usize,
    _t: std::marker::PhantomData<T>,
}

impl<T: Copy + Default> DevBuf<T> {
    /// `len` zeros.
    pub fn zeros(dev: &Arc<dyn Backend>, len: usize) -> Result<Self, BackendError> {
        let ptr = if len == 0 { 0 } else { dev.alloc(len * size_of::<T>())? };
        Ok(DevBuf { dev: dev.clone(), ptr, len, _t: std::marker::PhantomData })
    }

    /// A copy of `host`.
    pub fn from_host(dev: &Arc<dyn Backend>, host: &[T]) -> Result<Self, BackendError> {
        let b = Self::zeros(dev, host.len())?;
        b.upload(host)?;
        Ok(b)
    }

    /// Overwrites the buffer with `host` (same length).
    pub fn upload(&self, host: &[T]) -> Result<(), BackendError> {
        assert_eq!(host.len(), self.len, "upload: length");
        if self.len > 0 {
            // SAFETY: T is plain data (f32, u32), viewed as its bytes.
            let bytes = unsafe { std::slice::from_raw_parts(host.as_ptr().cast::<u8>(), size_of_val(host)) };
            self.dev.upload(self.ptr, bytes)?;
        }
        Ok(())
    }

    /// The values, in host memory.
    pub fn to_host(&self) -> Result<Vec<T>, BackendError> {
        let mut v = vec![T::default(); self.len];
        if self.len > 0 {
            // SAFETY: as in `upload`; every bit pattern is a valid f32 or u32.
            let bytes = unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), size_of_val(&v[..])) };
            self.dev.download(self.ptr, bytes)?;
        }
        Ok(v)
    }

    /// Sets every value to zero.
    pub fn zero(&self) -> Result<(), BackendError> {
        if self.len > 0 {
            self.dev.zero(self.ptr, self.len * size_of::<T>())?;
        }
        Ok(())
    }

    /// The device address (0 when empty).
    pub fn ptr(&self) -> DevPtr {
        self.ptr
    }

    /// The address of element `i`.
    pub fn at(&self, i: usize) -> DevPtr {
        assert!(i <= self.len, "device buffer index {i} of {}", self.len);
        self.ptr + (i * size_of::<T>()) as u64
    }

    /// The number of values.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no values.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// As a launch argument.
    pub fn arg(&self) -> Arg {
        Arg::Ptr(self.ptr)
    }
}

impl<T> Drop for DevBuf<T> {
    fn drop(&mut self) {
        if self.ptr != 0 {
            self.dev.free(self.ptr);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Emulator;

    /// C of `g` (with A, B, C0 uploaded), whole and in pieces of at most `max` elements.
    fn whole_and_pieces(g: Gemm, a: &[f32], b: &[f32], c0: &[f32], max: usize) -> (Vec<f32>, Vec<f32>, usize) {
        let dev: Arc<dyn Backend> = Arc::new(Emulator::new());
        let (da, db) = (DevBuf::from_host(&dev, a).unwrap(), DevBuf::from_host(&dev, b).unwrap());
        let run = |pieces: Vec<Gemm>| {
            let dc = DevBuf::from_host(&dev, c0).unwrap();
            for p in &pieces {
                let shift = |x: DevPtr, base: DevPtr, to: DevPtr| to + (x - base);
                let p = Gemm {
                    a: shift(p.a, g.a, da.ptr()),
                    b: shift(p.b, g.b, db.ptr()),
                    c: shift(p.c, g.c, dc.ptr()),
                    ..*p
                };
                dev.gemm(&p).unwrap();
            }
            dc.to_host().unwrap()
        };
        let pieces = g.pieces(max);
        let n = pieces.len();
        (run(vec![g]), run(pieces), n)
    }

    #[test]
    fn a_product_in_pieces_is_the_whole_product() {
        let vals = |n: usize, s: f32| (0..n).map(|i| ((i * 37 % 101) as f32 - 50.0) * s).collect::<Vec<f32>>();
        let base = Gemm {
            m: 0,
            n: 0,
            k: 0,
            a: 1 << 30,
            lda: 0,
            trans_a: false,
            b: 2 << 30,
            ldb: 0,
            trans_b: false,
            c: 3 << 30,
            ldc: 0,
            alpha: 1.0,
            beta: 0.0,
            bf16: true,
        };
        // A layer's forward: x (37 × 6) · Wᵀ (W 5 × 6), by rows of C.
        let fwd = Gemm { m: 37, n: 5, k: 6, lda: 6, trans_b: true, ldb: 6, ldc: 5, ..base };
        let (whole, pieces, n) = whole_and_pieces(fwd, &vals(37 * 6, 0.01), &vals(30, 0.02), &[0.0; 185], 40);
        assert_eq!((n, whole), (7, pieces));
        // A weight gradient: dzᵀ (dz 53 × 4) · x (53 × 3), accumulated into C, along k.
        let dw = Gemm { m: 4, n: 3, k: 53, lda: 4, trans_a: true, ldb: 3, ldc: 3, beta: 1.0, ..base };
        let (whole, pieces, n) = whole_and_pieces(dw, &vals(212, 0.01), &vals(159, 0.02), &[0.5; 12], 40);
        assert_eq!(n, 6);
        for (w, p) in whole.iter().zip(&pieces) {
            assert!((w - p).abs() <= 1e-5 * w.abs().max(1.0), "{w} against {p}");
        }
        // Small products stay whole.
        assert_eq!(fwd.pieces(1 << 20).len(), 1);
    }
}
