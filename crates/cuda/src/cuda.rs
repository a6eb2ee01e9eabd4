//! The GPU as a [`Backend`]: the CUDA driver (primary context, one stream, stream-ordered
//! allocations), the kernels from [`crate::nvrtc`] and cuBLAS, all loaded at run time.

use std::ffi::{CString, c_void};
use std::sync::Mutex;

use cudarc::cublas::{result as blas, sys as blas_sys};
use cudarc::driver::{result as drv, sys as drv_sys};

use crate::backend::{Allocations, Arg, Backend, BackendError, DevPtr, Gemm, MemoryUse};
use crate::kernels::KERNELS;

/// One GPU: its context, stream, kernels and cuBLAS handle.
pub struct CudaBackend {
    ordinal: usize,
    name: String,
    ctx: drv_sys::CUcontext,
    stream: drv_sys::CUstream,
    functions: Vec<drv_sys::CUfunction>,
    blas: blas_sys::cublasHandle_t,
    /// The compute capability (major, minor).
    pub capability: (i32, i32),
    /// Launches and products are issued by one thread at a time (the handle and the stream
    /// are shared).
    lock: Mutex<()>,
    /// Live allocations, for the memory figures.
    allocations: Allocations,
}

// SAFETY: the raw handles are only used with the context made current and under `lock`.
unsafe impl Send for CudaBackend {}
// SAFETY: as above.
unsafe impl Sync for CudaBackend {}

fn missing(library: &'static str, hint: &str) -> BackendError {
    BackendError::MissingLibrary { library, hint: hint.to_string() }
}

fn driver_err(what: &str) -> impl Fn(drv::DriverError) -> BackendError + '_ {
    move |e| BackendError::Device(format!("CUDA {what}: {e:?}"))
}

/// cuBLAS's operation for an operand stored transposed or not.
fn op(transposed: bool) -> blas_sys::cublasOperation_t {
    if transposed { blas_sys::cublasOperation_t::CUBLAS_OP_T } else { blas_sys::cublasOperation_t::CUBLAS_OP_N }
}

/// A matrix dimension as cuBLAS's `int`.
fn int(v: usize) -> Result<i32, BackendError> {
    i32::try_from(v).map_err(|_| BackendError::Device(format!("matrix dimension {v} exceeds cuBLAS's int")))
}

fn blas_err(what: &str) -> impl Fn(blas::CublasError) -> BackendError + '_ {
    move |e| BackendError::Device(format!("cuBLAS {what}: {e:?}"))
}

/// The number of CUDA devices of this machine.
pub fn device_count() -> Result<usize, BackendError> {
    // SAFETY: only tries to open the library.
    if !unsafe { drv_sys::is_culib_present() } {
        return Err(missing(
            "libcuda",
            "install an NVIDIA driver for CUDA 13 (580 or later), which provides libcuda.so.1",
        ));
    }
    drv::init().map_err(driver_err("init"))?;
    Ok(drv::device::get_count().map_err(driver_err("device count"))? as usize)
}

impl CudaBackend {
    /// GPU `ordinal`, with the kernels compiled (or read from the cache) for its architecture.
    pub fn new(ordinal: usize) -> Result<Self, BackendError> {
        // SAFETY: only tries to open the libraries.
        if !unsafe { drv_sys::is_culib_present() } {
            return Err(missing(
                "libcuda",
                "install an NVIDIA driver for CUDA 13 (580 or later), which provides libcuda.so.1",
            ));
        }
        if !unsafe { blas_sys::is_culib_present() } {
            return Err(missing(
                "libcublas",
                "install cuBLAS for CUDA 13 (PyPI: `pip install nvidia-cublas==13.*`, or a cluster's CUDA module) \
                 and put the folder holding libcublas.so.13 on LD_LIBRARY_PATH",
            ));
        }
        drv::init().map_err(driver_err("init"))?;
        let count = drv::device::get_count().map_err(driver_err("device count"))? as usize;
        if ordinal >= count {
            return Err(BackendError::Device(format!("cuda:{ordinal}: this machine has {count} CUDA device(s)")));
        }
        let dev = drv::device::get(ordinal as i32).map_err(driver_err("device"))?;
        let name = drv::device::get_name(dev).map_err(driver_err("device name"))?;
        let attr = |a| unsafe { drv::device::get_attribute(dev, a) }.map_err(driver_err("attribute"));
        let capability = (
            attr(drv_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(drv_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        if capability.0 < 8 {
            return Err(BackendError::Device(format!(
                "cuda:{ordinal} ({name}) has compute capability {}.{}: trackgnn needs 8.0 or later (A100, H100, …)",
                capability.0, capability.1
            )));
        }
        // SAFETY: `dev` came from device::get.
        let ctx = unsafe { drv::primary_ctx::retain(dev) }.map_err(driver_err("context"))?;
        unsafe { drv::ctx::set_current(ctx) }.map_err(driver_err("context"))?;
        let stream = drv::stream::create(drv::stream::StreamKind::NonBlocking).map_err(driver_err("stream"))?;
        // The stream-ordered allocator keeps freed memory in its pool instead of returning it
        // at each synchronisation: buffers freed between a step's phases come back at once.
        // SAFETY: `dev` came from device::get; the attribute takes a u64.
        unsafe {
            let pool = drv::device::get_default_mem_pool(dev).map_err(driver_err("memory pool"))?;
            let mut keep = u64::MAX;
            drv_sys::cuMemPoolSetAttribute(
                pool,
                drv_sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                (&mut keep as *mut u64).cast(),
            )
            .result()
            .map_err(driver_err("memory pool"))?;
        }
        let arch = format!("sm_{}{}", capability.0, capability.1);
        let cubin = crate::nvrtc::cubin_for(&arch)?;
        // SAFETY: a CUBIN image NVRTC produced for this architecture.
        let module = unsafe { drv::module::load_data(cubin.as_ptr().cast()) }.map_err(driver_err("module load"))?;
        let functions = KERNELS
            .iter()
            .map(|k| {
                // SAFETY: a loaded module; the names are the kernels' extern "C" names.
                unsafe { drv::module::get_function(module, CString::new(k.name).expect("kernel name")) }
                    .map_err(driver_err(k.name))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let handle = blas::create_handle().map_err(blas_err("handle"))?;
        // SAFETY: a new handle and a live stream; f32 products without TF32.
        unsafe {
            blas::set_stream(handle, stream as _).map_err(blas_err("stream"))?;
            blas_sys::cublasSetMathMode(handle, blas_sys::cublasMath_t::CUBLAS_DEFAULT_MATH)
                .result()
                .map_err(blas_err("math mode"))?;
        }
        Ok(CudaBackend {
            ordinal,
            name,
            ctx,
            stream,
            functions,
            blas: handle,
            capability,
            lock: Mutex::new(()),
            allocations: Allocations::default(),
        })
    }

    /// Makes the context current on the calling thread and takes the issue lock.
    fn enter(&self) -> Result<std::sync::MutexGuard<'_, ()>, BackendError> {
        let guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the context was retained in `new` and is released only on drop.
        unsafe { drv::ctx::set_current(self.ctx) }.map_err(driver_err("context"))?;
        Ok(guard)
    }

    /// Free and total device memory, bytes.
    pub fn free_and_total(&self) -> Result<(usize, usize), BackendError> {
        let _g = self.enter()?;
        drv::mem_get_info().map_err(driver_err("memory info"))
    }
}

impl Backend for CudaBackend {
    fn name(&self) -> String {
        format!("cuda:{} ({})", self.ordinal, self.name)
    }

    fn alloc(&self, bytes: usize) -> Result<DevPtr, BackendError> {
        let _g = self.enter()?;
        // SAFETY: a live stream; the memory is zeroed below before any use.
        let ptr = match unsafe { drv::malloc_async(self.stream, bytes.max(1)) } {
            Ok(p) => p,
            Err(e) => {
                let (free, total) = drv::mem_get_info().unwrap_or((0, 0));
                if free < bytes {
                    return Err(BackendError::OutOfMemory { device: self.name(), bytes, free, total });
                }
                return Err(driver_err("allocation")(e));
            }
        };
        // SAFETY: just allocated, `bytes` long, on this stream.
        unsafe { drv::memset_d8_async(ptr, 0, bytes, self.stream) }.map_err(driver_err("memset"))?;
        self.allocations.add(ptr, bytes);
        Ok(ptr)
    }

    fn free(&self, ptr: DevPtr) {
        if self.allocations.remove(ptr).is_some()
            && let Ok(_g) = self.enter()
        {
            // SAFETY: allocated by `alloc` on this stream, freed once (removed above).
            let _ = unsafe { drv::free_async(ptr, self.stream) };
        }
    }

    fn upload(&self, dst: DevPtr, src: &[u8]) -> Result<(), BackendError> {
        let _g = self.enter()?;
        // SAFETY: `dst` holds `src.len()` bytes (DevBuf's invariant); pageable host memory is
        // staged before the call returns.
        unsafe { drv::memcpy_htod_async(dst, src, self.stream) }.map_err(driver_err("upload"))
    }

    fn download(&self, src: DevPtr, dst: &mut [u8]) -> Result<(), BackendError> {
        let _g = self.enter()?;
        // SAFETY: `src` holds `dst.len()` bytes; the stream is synchronised before `dst` is read.
        unsafe {
            drv::memcpy_dtoh_async(dst, src, self.stream).map_err(driver_err("download"))?;
            drv::stream::synchronize(self.stream).map_err(driver_err("synchronize"))
        }
    }

    fn zero(&self, ptr: DevPtr, bytes: usize) -> Result<(), BackendError> {
        let _g = self.enter()?;
        // SAFETY: `ptr` holds `bytes` bytes.
        unsafe { drv::memset_d8_async(ptr, 0, bytes, self.stream) }.map_err(driver_err("memset"))
    }

    fn launch_checked(&self, kernel: usize, grid: u32, block: u32, args: &[Arg]) -> Result<(), BackendError> {
        let mut slots: Vec<u64> = args.iter().map(Arg::slot).collect();
        let mut params: Vec<*mut c_void> = slots.iter_mut().map(|s| (s as *mut u64).cast::<c_void>()).collect();
        let _g = self.enter()?;
        // SAFETY: arguments checked against the kernel's parameters; little-endian slots; the
        // driver copies the parameters before returning.
        unsafe { drv::launch_kernel(self.functions[kernel], (grid, 1, 1), (block, 1, 1), 0, self.stream, &mut params) }
            .map_err(driver_err(KERNELS[kernel].name))
    }

    fn gemm(&self, g: &Gemm) -> Result<(), BackendError> {
        if g.is_empty() {
            return Ok(());
        }
        if g.bf16 {
            return self.gemm_bf16(g);
        }
        let _guard = self.enter()?;
        // Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: B's memory first.
        // SAFETY: the pointers hold the matrices their shapes and strides say (the caller's
        // buffers); α and β are host scalars.
        unsafe {
            blas::sgemm(
                self.blas,
                op(g.trans_b),
                op(g.trans_a),
                int(g.n)?,
                int(g.m)?,
                int(g.k)?,
                &g.alpha,
                g.b as *const f32,
                int(g.ldb)?,
                g.a as *const f32,
                int(g.lda)?,
                &g.beta,
                g.c as *mut f32,
                int(g.ldc)?,
            )
        }
        .map_err(blas_err("sgemm"))
    }

    fn copy(&self, dst: DevPtr, src: DevPtr, bytes: usize) -> Result<(), BackendError> {
        self.copy_impl(dst, src, bytes)
    }

    fn synchronize(&self) -> Result<(), BackendError> {
        let _g = self.enter()?;
        // SAFETY: a live stream.
        unsafe { drv::stream::synchronize(self.stream) }.map_err(driver_err("synchronize"))
    }

    fn memory(&self) -> MemoryUse {
        self.allocations.usage()
    }

    fn reset_peak(&self) {
        self.allocations.reset_peak();
    }
}

impl CudaBackend {
    /// The rest of [`Backend`] (kept apart from the products).
    fn copy_impl(&self, dst: DevPtr, src: DevPtr, bytes: usize) -> Result<(), BackendError> {
        let _g = self.enter()?;
        // SAFETY: both ranges inside live allocations (the callers' buffers).
        unsafe { drv::memcpy_dtod_async(dst, src, bytes, self.stream) }.map_err(driver_err("copy"))
    }

    /// [`Backend::gemm`] with bf16 operands, in [`Gemm::pieces`] of at most
    /// [`BF16_PIECE_ELEMENTS`](crate::backend::BF16_PIECE_ELEMENTS) per operand.
    fn gemm_bf16(&self, g: &Gemm) -> Result<(), BackendError> {
        g.pieces(crate::backend::BF16_PIECE_ELEMENTS).iter().try_for_each(|p| self.gemm_bf16_piece(p))
    }

    /// One piece: A and B rounded into packed bf16 copies, then one cublasGemmEx accumulating in
    /// f32 on the tensor cores.
    fn gemm_bf16_piece(&self, g: &Gemm) -> Result<(), BackendError> {
        let ((a_rows, a_cols), (b_rows, b_cols)) = g.operand_shapes();
        let a16 = self.alloc(2 * a_rows * a_cols)?;
        let b16 = self.alloc(2 * b_rows * b_cols)?;
        let result = (|| {
            let convert = |x: DevPtr, rows: usize, cols: usize, ld: usize, out: DevPtr| {
                crate::backend::launch(
                    self,
                    "to_bf16",
                    rows * cols,
                    &[Arg::Ptr(x), Arg::int(rows), Arg::int(cols), Arg::int(ld), Arg::Ptr(out)],
                )
            };
            convert(g.a, a_rows, a_cols, g.lda, a16)?;
            convert(g.b, b_rows, b_cols, g.ldb, b16)?;
            let bf16 = blas_sys::cudaDataType::CUDA_R_16BF;
            let _guard = self.enter()?;
            // SAFETY: packed bf16 operands of the shapes above; C as the caller's.
            unsafe {
                blas::gemm_ex(
                    self.blas,
                    op(g.trans_b),
                    op(g.trans_a),
                    int(g.n)?,
                    int(g.m)?,
                    int(g.k)?,
                    (&g.alpha as *const f32).cast(),
                    b16 as *const c_void,
                    bf16,
                    int(b_cols)?,
                    a16 as *const c_void,
                    bf16,
                    int(a_cols)?,
                    (&g.beta as *const f32).cast(),
                    g.c as *mut c_void,
                    blas_sys::cudaDataType::CUDA_R_32F,
                    int(g.ldc)?,
                    blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                    blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                )
            }
            .map_err(blas_err("gemm_ex"))
        })();
        self.free(a16);
        self.free(b16);
        result
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        if let Ok(_g) = self.enter() {
            // SAFETY: created in `new`, destroyed once.
            unsafe {
                let _ = drv::stream::synchronize(self.stream);
                let _ = blas::destroy_handle(self.blas);
                let _ = drv::stream::destroy(self.stream);
            }
        }
    }
}
