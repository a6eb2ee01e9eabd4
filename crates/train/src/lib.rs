//! Training of the edge classifier, and what a run leaves behind: atomic checkpoints in
//! safetensors that PyTorch can load ([`checkpoint`]), the per-epoch metrics log in CSV and
//! JSON lines ([`logs`]) and PNG/SVG plots ([`plots`]), written into the run directory of
//! `trackgnn-model` (re-exported as [`run_dir`], with the field's edge metrics as
//! [`metrics`]); a run evaluated on a graph directory ([`evaluation`], `trackgnn eval`); one forward and backward written
//! for `tools/parity.py` to recompute in PyTorch ([`parity`]). The optimiser itself (AdamW,
//! clipping, schedule) lives in `trackgnn_engine::optim`.
//!
//! ```
//! use trackgnn_engine::ParamStore;
//! use trackgnn_engine::optim::{AdamW, AdamWConfig};
//! use trackgnn_train::{EdgeMetrics, checkpoint, plots};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let run = tempfile::tempdir()?;
//! let mut params = ParamStore::<f32>::default();
//! params.add("edge_classifier.0.weight", &[1, 8]);
//! let opt = AdamW::new(params.len(), AdamWConfig::default());
//! // Two edges: a target edge scored high, a false one scored low (logits), loss 0.02.
//! let m = EdgeMetrics::of_event(&[3.2, -1.5], &[1, 0], &[1, 0], 0.5, 0.02);
//! assert_eq!((m.efficiency, m.purity), (1.0, 1.0));
//! checkpoint::save_checkpoint(&run.path().join("last"), &params, &opt.state(), &serde_json::json!({"epoch": 0}))?;
//! plots::plot_series(&run.path().join("loss"), "Loss", "epoch", "loss", &[("val", vec![(0.0, m.loss)])], true)?;
//! assert!(run.path().join("loss.png").is_file() && run.path().join("last").is_dir());
//! # Ok(()) }
//! ```
//!
//! A whole training is [`Trainer::new`] on a directory of graph files then [`Trainer::run`];
//! the `train` program of `crates/examples` shows it.
//!
//! Not for: the model and its backward pass (`trackgnn-engine`), graph building
//! (`trackgnn-graph`), loading a trained run for inference (`trackgnn-model`), or
//! reconstruction with one (`trackgnn-reco`'s `inference`).
#![deny(missing_docs)]

pub mod budget;
pub mod checkpoint;
pub mod config;
pub mod data;
pub mod dist;
pub mod epochs;
pub mod error;
pub mod eval;
pub mod evaluation;
pub mod logs;
pub mod metric_learning;
pub mod parity;
pub mod plots;
pub mod scaling;
pub mod trainer;

pub use trackgnn_model::{metrics, run_dir};

pub use config::TrainConfig;
pub use epochs::{Progress, Silent};
pub use error::{Error, Result};
pub use logs::{EpochRecord, MetricsLog};
pub use run_dir::{RunDir, Weights};
pub use trackgnn_model::EdgeMetrics;
pub use trainer::{TrainOutcome, Trainer};
