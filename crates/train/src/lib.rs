//! Training of the edge classifier, and what a run leaves behind: the field's edge metrics
//! ([`metrics`]: efficiency, target/total purity, purity, AUC, ROC curves), atomic checkpoints
//! in safetensors that PyTorch can load ([`checkpoint`]), the per-epoch metrics log in CSV
//! and JSON lines ([`logs`]) and PNG/SVG plots ([`plots`]); the run directory that holds
//! them all, read back through typed records ([`run_dir`]). The optimiser itself (AdamW,
//! clipping, schedule) lives in `trackgnn_engine::optim`.
//!
//! ```no_run
//! use trackgnn_engine::ParamStore;
//! use trackgnn_engine::optim::{AdamW, AdamWConfig};
//! use trackgnn_train::{EdgeMetrics, checkpoint, plots};
//! # fn main() -> Result<(), trackgnn_train::Error> {
//! let mut params = ParamStore::<f32>::default();
//! params.add("edge_classifier.0.weight", &[1, 8]);
//! let opt = AdamW::new(params.len(), AdamWConfig::default());
//! let m = EdgeMetrics::of_event(&[3.2, -1.5], &[1, 0], &[1, 0], 0.5, 0.02);
//! checkpoint::save_checkpoint("run/last".as_ref(), &params, &opt.state(), &serde_json::json!({"epoch": 0}))?;
//! plots::plot_series("run/loss".as_ref(), "Loss", "epoch", "loss", &[("val", vec![(0.0, m.loss)])], true)?;
//! # Ok(()) }
//! ```
//!
//! Not for: the model and its backward pass (`trackgnn-engine`), or graph building
//! (`trackgnn-graph`).
#![deny(missing_docs)]

pub mod budget;
pub mod checkpoint;
pub mod config;
pub mod data;
pub mod dist;
pub mod error;
pub mod eval;
pub mod logs;
pub mod metrics;
pub mod plots;
pub mod run_dir;
pub mod trainer;

pub use config::TrainConfig;
pub use error::{Error, Result};
pub use logs::{EpochRecord, MetricsLog};
pub use metrics::EdgeMetrics;
pub use run_dir::{RunDir, Weights};
pub use trainer::{Progress, Silent, TrainOutcome, Trainer};
