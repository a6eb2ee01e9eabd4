//! The fused CPU InteractionGNN engine (work in progress).
#![deny(missing_docs)]

pub mod alloc;
pub mod bf16;
pub mod checkpointing;
pub mod config;
pub mod graph_input;
pub mod loss;
pub mod matmul;
pub mod matmul_bf16;
pub mod mlp;
pub mod model;
pub mod naive;
pub mod ops;
pub mod optim;
pub mod params;
pub mod real;
pub mod simd;

pub use checkpointing::Checkpointing;
pub use config::{ModelConfig, Norm, Precision};
pub use graph_input::GraphInput;
pub use model::{ForwardCache, InteractionGnn};
pub use params::{ParamSpec, ParamStore};
pub use real::Real;
