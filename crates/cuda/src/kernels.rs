//! The kernels' CUDA C and their table: names and parameter kinds, read from the sources at
//! build time (build.rs), so that a launch with the wrong arguments is an error, not a crash.

/// What a kernel parameter is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// A device pointer.
    Ptr,
    /// `int`.
    I32,
    /// `unsigned`.
    U32,
    /// `float`.
    F32,
}

/// One kernel's name and parameters.
#[derive(Clone, Copy, Debug)]
pub struct KernelSignature {
    /// The `extern "C"` name.
    pub name: &'static str,
    /// The kinds of its parameters, in order.
    pub kinds: &'static [ParamKind],
    /// The names of its parameters, in order (for error messages).
    pub names: &'static [&'static str],
}

include!(concat!(env!("OUT_DIR"), "/kernel_table.rs"));

/// The whole program NVRTC compiles: the CUDA prelude, the shared helpers and every kernel.
pub const SOURCE: &str = concat!(
    include_str!("../kernels/prelude_cuda.h"),
    include_str!("../kernels/common.cuh"),
    include_str!("../kernels/forward.cu"),
    include_str!("../kernels/backward.cu"),
    include_str!("../kernels/loss.cu"),
);

/// The index of kernel `name` in [`KERNELS`].
pub fn index_of(name: &str) -> Option<usize> {
    KERNELS.iter().position(|k| k.name == name)
}

/// A 64-bit FNV-1a hash of [`SOURCE`] and the compile options: the key of the on-disk cache of
/// compiled kernels.
pub fn source_hash(options: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for bytes in std::iter::once(SOURCE.as_bytes()).chain(options.iter().map(|o| o.as_bytes())) {
        for &b in bytes.iter().chain(&[0u8]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}
