//! The InteractionGNN on the CPU: the edge classifier trackgnn trains, with its fused forward
//! and hand-derived backward ([`InteractionGnn`], [`mod@model`]), its parameters
//! ([`ParamStore`]), the loss ([`loss`]), the AdamW optimiser with clipping and learning-rate
//! schedule ([`optim`]), in `f32` or `f64` ([`Real`]), with activation checkpointing
//! ([`Checkpointing`]) and counted heap allocations ([`alloc`]) for the memory budget; the
//! measurements of `trackgnn bench engine` and `bench memory` ([`mod@bench`]).
//!
//! A graph reaches the engine as a [`GraphInput`]: node features, edge features and the edge
//! list. [`InteractionGnn::forward`] leaves one logit per edge in a [`ForwardCache`], whose
//! buffers are reused from call to call; [`InteractionGnn::backward`] accumulates the
//! gradients of the parameters.
//!
//! ```
//! use trackgnn_engine::optim::{AdamW, AdamWConfig};
//! use trackgnn_engine::{ForwardCache, GraphInput, InteractionGnn, ModelConfig, loss};
//! use trackgnn_trackml::rng::Rng;
//!
//! // A chain of 4 nodes (one feature each), 3 edges, the middle one false.
//! let (x, src, dst, labels) = ([0.1f32, 0.2, 0.3, 0.4], [0u32, 1, 2], [1u32, 2, 3], [1u8, 0, 1]);
//! let graph = GraphInput::<f32>::new(4, &x, 1, &[], 0, &src, &dst);
//! let config = ModelConfig { hidden: 8, iterations: 2, ..ModelConfig::default() };
//! let mut model = InteractionGnn::<f32>::new(config, 1, 0, &mut Rng::new(1));
//! let mut opt = AdamW::new(model.params.len(), AdamWConfig::default());
//! let (mut cache, mut dlogits, mut losses) = (ForwardCache::default(), vec![0.0; 3], Vec::new());
//! for _ in 0..20 {
//!     model.forward(&graph, &mut cache);
//!     losses.push(loss::bce_with_logits(&cache.logits, &labels, None, 1.0, &mut dlogits));
//!     model.params.zero_grad();
//!     model.backward(&graph, &mut cache, &dlogits);
//!     opt.step(&mut model.params.data, &model.params.grad, 1e-2);
//! }
//! assert!(losses[19] < losses[0], "{losses:?}");
//! ```
//!
//! The trainer, evaluation and inference reach a model through [`GnnExecutor`] ([`executor`]):
//! forward, backward, the optimiser step and inference on one [`Device`], with the CPU engine
//! ([`CpuExecutor`]) as its implementation today.
//!
//! Not for: graphs from events (`trackgnn-graph`), the training loop, data sets, metrics and
//! checkpoints (`trackgnn-train`).
#![deny(missing_docs)]

pub mod alloc;
pub mod bench;
pub mod bf16;
pub mod checkpointing;
pub mod config;
pub mod dense;
pub mod edge_metrics;
pub mod executor;
pub mod gemm_replay;
pub mod graph_input;
pub mod graph_loss;
pub mod halo;
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
pub mod traffic;

pub use checkpointing::Checkpointing;
pub use config::{ConfigError, ModelConfig, Norm, Precision, UpdateOrder};
pub use dense::{DenseNet, DenseNetConfig};
pub use executor::{
    CpuExecutor, Device, DeviceError, GnnExecutor, GpuExecutorFactory, executor_on, register_cuda_backend,
};
pub use graph_input::GraphInput;
pub use graph_loss::{AuxTargets, EdgeTargets, GraphFigures, GraphLoss};
pub use model::{ForwardCache, InteractionGnn};
pub use params::{ParamSpec, ParamStore};
pub use real::Real;
