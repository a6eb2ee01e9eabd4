//! A backend that runs nothing: it hands out addresses and counts the bytes allocated, so that
//! a step "run" on it gives the device's exact memory plan (the peak of every buffer the real
//! step allocates) at any graph size, in milliseconds, on any machine.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::backend::{Allocations, Arg, Backend, BackendError, DevPtr, Gemm, MemoryUse};

/// The planning backend: allocations are counted (the bf16 products' packed operand copies
/// included, as the CUDA backend makes them), kernels and products compute nothing, downloads
/// read zeros.
pub struct Planner {
    next: AtomicU64,
    allocations: Allocations,
}

impl Default for Planner {
    fn default() -> Self {
        // Addresses far from 0, which stays the null pointer.
        Planner { next: AtomicU64::new(1 << 40), allocations: Allocations::default() }
    }
}

impl Planner {
    /// A new plan.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Backend for Planner {
    fn name(&self) -> String {
        "planner".into()
    }
    fn alloc(&self, bytes: usize) -> Result<DevPtr, BackendError> {
        let size = (bytes.max(1) as u64).div_ceil(256) * 256;
        let ptr = self.next.fetch_add(size, Ordering::Relaxed);
        self.allocations.add(ptr, bytes);
        Ok(ptr)
    }
    fn free(&self, ptr: DevPtr) {
        self.allocations.remove(ptr);
    }
    fn upload(&self, _: DevPtr, _: &[u8]) -> Result<(), BackendError> {
        Ok(())
    }
    fn download(&self, _: DevPtr, dst: &mut [u8]) -> Result<(), BackendError> {
        dst.fill(0);
        Ok(())
    }
    fn zero(&self, _: DevPtr, _: usize) -> Result<(), BackendError> {
        Ok(())
    }
    fn launch_checked(&self, _: usize, _: u32, _: u32, _: &[Arg]) -> Result<(), BackendError> {
        Ok(())
    }
    fn gemm(&self, g: &Gemm) -> Result<(), BackendError> {
        crate::backend::mimic_bf16_copies(self, g)
    }
    fn copy(&self, _: DevPtr, _: DevPtr, _: usize) -> Result<(), BackendError> {
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
