//! The kernel emulator: the kernels' CUDA C compiled as C for the host (build.rs), each thread
//! of a block a fiber, blocks one after another. It runs every kernel and the whole model on a
//! machine without a GPU, so that the kernels' arithmetic and the host code that drives them are
//! tested in CI against the CPU engine. Slow (a context switch per barrier): small graphs only.

use std::alloc::Layout;
use std::ffi::c_void;
use std::sync::Mutex;

use crate::backend::{Allocations, Arg, Backend, BackendError, DevPtr, Gemm, MemoryUse};

include!(concat!(env!("OUT_DIR"), "/emu_trampolines.rs"));

unsafe extern "C" {
    fn trackgnn_emu_run(
        tramp: unsafe extern "C" fn(*mut *mut c_void),
        args: *mut *mut c_void,
        grid: u32,
        block: u32,
    ) -> i32;
}

/// Device memory is host memory aligned as cudaMalloc's (256 bytes).
const ALIGN: usize = 256;

/// The emulator as a [`Backend`].
#[derive(Default)]
pub struct Emulator {
    /// Live allocations and their sizes.
    allocations: Allocations,
}

/// The scheduler's state is global: one launch at a time, whichever emulator issues it.
static LAUNCH: Mutex<()> = Mutex::new(());

impl Emulator {
    /// A new emulated device.
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks that `bytes` from `ptr` lie inside one live allocation.
    fn check(&self, ptr: DevPtr, bytes: usize) -> Result<(), BackendError> {
        if self.allocations.holds(ptr, bytes) {
            Ok(())
        } else {
            Err(BackendError::Device(format!("emulator: {bytes} bytes at {ptr:#x} are not allocated")))
        }
    }
}

impl Backend for Emulator {
    fn name(&self) -> String {
        "emulator".into()
    }

    fn alloc(&self, bytes: usize) -> Result<DevPtr, BackendError> {
        let layout = layout(bytes)?;
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        if p.is_null() {
            return Err(BackendError::OutOfMemory { device: self.name(), bytes, free: 0, total: 0 });
        }
        self.allocations.add(p as DevPtr, bytes);
        Ok(p as DevPtr)
    }

    fn free(&self, ptr: DevPtr) {
        if let Some(bytes) = self.allocations.remove(ptr) {
            // SAFETY: allocated by `alloc` with this layout, freed once (removed from the map).
            unsafe { std::alloc::dealloc(ptr as *mut u8, layout(bytes).expect("allocated with it")) };
        }
    }

    fn upload(&self, dst: DevPtr, src: &[u8]) -> Result<(), BackendError> {
        self.check(dst, src.len())?;
        // SAFETY: the range is inside a live allocation (checked) and does not overlap `src`.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst as *mut u8, src.len()) };
        Ok(())
    }

    fn download(&self, src: DevPtr, dst: &mut [u8]) -> Result<(), BackendError> {
        self.check(src, dst.len())?;
        // SAFETY: as in `upload`.
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    fn zero(&self, ptr: DevPtr, bytes: usize) -> Result<(), BackendError> {
        self.check(ptr, bytes)?;
        // SAFETY: inside a live allocation (checked).
        unsafe { std::ptr::write_bytes(ptr as *mut u8, 0, bytes) };
        Ok(())
    }

    fn launch_checked(&self, kernel: usize, grid: u32, block: u32, args: &[Arg]) -> Result<(), BackendError> {
        // Each argument by value in its own slot; the kernel reads its slot through its own type.
        let mut slots: Vec<u64> = args.iter().map(Arg::slot).collect();
        let mut params: Vec<*mut c_void> = slots.iter_mut().map(|s| (s as *mut u64).cast::<c_void>()).collect();
        let _one_at_a_time = LAUNCH.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the arguments match the kernel's parameters (checked by `backend::launch`);
        // every slot lives until the run returns; little-endian, so a 4-byte parameter reads the
        // low bytes of its slot.
        let rc = unsafe { trackgnn_emu_run(TRAMPOLINES[kernel], params.as_mut_ptr(), grid, block) };
        match rc {
            0 => Ok(()),
            -2 => Err(BackendError::Device(format!(
                "emulator: kernel {} deadlocked (threads of a block wait at different barriers)",
                crate::kernels::KERNELS[kernel].name
            ))),
            rc => Err(BackendError::Device(format!("emulator: launch failed ({rc})"))),
        }
    }

    fn gemm(&self, g: &Gemm) -> Result<(), BackendError> {
        for (ptr, bytes) in [g.a, g.b, g.c].into_iter().zip(g.byte_spans()) {
            self.check(ptr, bytes)?;
        }
        let (a, b, c) = (g.a as *const f32, g.b as *const f32, g.c as *mut f32);
        let operand = |v: f32| if g.bf16 { bf16_round(v) } else { v };
        // Rounded on the fly here, but the copies a GPU makes are allocated alike.
        crate::backend::mimic_bf16_copies(self, g)?;
        for i in 0..g.m {
            for j in 0..g.n {
                let mut acc = 0.0f32;
                for p in 0..g.k {
                    let ai = if g.trans_a { p * g.lda + i } else { i * g.lda + p };
                    let bi = if g.trans_b { j * g.ldb + p } else { p * g.ldb + j };
                    // SAFETY: indices inside the checked spans.
                    acc += unsafe { operand(*a.add(ai)) * operand(*b.add(bi)) };
                }
                // SAFETY: inside C's checked span.
                unsafe {
                    let cij = c.add(i * g.ldc + j);
                    *cij = if g.beta == 0.0 { g.alpha * acc } else { g.alpha * acc + g.beta * *cij };
                }
            }
        }
        Ok(())
    }

    fn copy(&self, dst: DevPtr, src: DevPtr, bytes: usize) -> Result<(), BackendError> {
        self.check(dst, bytes)?;
        self.check(src, bytes)?;
        // SAFETY: both ranges inside live allocations (checked); `copy` allows overlap.
        unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, bytes) };
        Ok(())
    }

    fn synchronize(&self) -> Result<(), BackendError> {
        Ok(())
    }

    fn memory(&self) -> MemoryUse {
        self.allocations.usage()
    }

    fn reset_peak(&self) {
        self.allocations.reset_peak();
    }
}

/// The host layout of an emulated allocation of `bytes`.
fn layout(bytes: usize) -> Result<Layout, BackendError> {
    Layout::from_size_align(bytes.max(1), ALIGN).map_err(|e| BackendError::Device(e.to_string()))
}

/// `v` rounded to bfloat16 (to nearest, ties to even), as the kernels' `bf16_round`.
fn bf16_round(v: f32) -> f32 {
    let u = v.to_bits();
    if u & 0x7fff_ffff > 0x7f80_0000 {
        return f32::from_bits((u | 0x0040_0000) & 0xffff_0000);
    }
    f32::from_bits((u.wrapping_add(0x7fff + ((u >> 16) & 1))) & 0xffff_0000)
}
