//! The engine's CUDA backend.
//!
//! The model runs as on the CPU engine (the split first Linear on nodes, a fused epilogue per
//! layer, fixed-order reductions over the edge groupings, never float atomics), with its matrix
//! products in cuBLAS and everything else in the kernels of `kernels/`, CUDA C compiled at run
//! time by NVRTC for the GPU's own architecture.
//!
//! Every device operation goes through [`Backend`]. Two implement it: `CudaBackend` (feature
//! `cuda`: the CUDA driver, NVRTC and cuBLAS, loaded at run time) and [`Emulator`], the same
//! kernels compiled as C for the host, which runs them on a machine without a GPU so that CI
//! tests the kernels and the code that drives them against the CPU engine.

pub mod backend;
pub mod backward;
pub mod bench;
pub mod checkpoint;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod emu;
pub mod executor;
pub mod graph;
pub mod kernels;
pub mod layout;
pub mod loss;
pub mod model;
#[cfg(feature = "cuda")]
pub mod nvrtc;
pub mod plan;
pub mod register;
pub mod testing;
pub mod traffic;

pub use backend::{Arg, Backend, BackendError, DevBuf, DevPtr, Gemm};
#[cfg(feature = "cuda")]
pub use cuda::CudaBackend;
pub use emu::Emulator;
pub use executor::DeviceExecutor;
pub use graph::{DeviceGraph, GraphError};
pub use model::{DeviceCache, DeviceModel};
pub use plan::Planner;
#[cfg(feature = "cuda")]
pub use register::{gpu, open, register};
pub use register::{local_ordinal, local_rank, register_emulator};
