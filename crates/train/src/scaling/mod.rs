//! The scaling study's model of data-parallel training: the cost of the gradient all-reduce
//! and its fit to measured times ([`allreduce`]), the per-step simulation that replays the
//! trainer's sampler to predict an epoch at any number of ranks ([`predict`]), and what a
//! finished run measured, read back with one rule for which epochs count ([`measured`]); and
//! the typed reports of `trackgnn scaling`: the measured study ([`study`]) and the simulated one
//! ([`simulation`]), whose JSON is the command's and whose `Display` its text; the study's
//! options, checked and resolved ([`options`]), and the launcher that trains the measured runs
//! ([`launch`]). The study's JSON files are read and written here, for both.
//!
//! Two regimes, named as such everywhere: **strong** scaling keeps the data set (speed-up
//! t₁ / t_N, efficiency t₁ / (N·t_N)); **weak** scaling gives each rank the graphs of one rank
//! (N ranks train on N × the graphs), and its speed-up is the throughput ratio
//! (graphs/s)_N / (graphs/s)₁.
//!
//! ```
//! use trackgnn_train::TrainConfig;
//! use trackgnn_train::scaling::{Regime, allreduce::AllreduceCost, predict};
//! let times = predict::GraphTimes { ids: (0..16).collect(), edges: vec![1000; 16], seconds: vec![0.2; 16] };
//! let setup = predict::SimSetup {
//!     cost: AllreduceCost::new(2e-6, 20e9),
//!     gradient_bytes: 4e6,
//!     step_overhead_seconds: 0.0,
//!     oversubscription: None,
//!     epochs: 2,
//! };
//! let cfg = TrainConfig::default();
//! let one = predict::predict(&cfg, &times, 1, 16, &setup).unwrap();
//! let four = predict::predict(&cfg, &times, 4, 16, &setup).unwrap();
//! assert!(predict::speedup(Regime::Strong, &one, &four) > 3.9);
//! ```

pub mod allreduce;
pub mod domain;
pub mod launch;
pub mod measured;
pub mod options;
pub mod predict;
pub mod simulation;
pub mod study;

use std::path::Path;

use serde::Serialize;
use serde::de::DeserializeOwned;
use trackgnn_model::Error as ModelError;

use crate::error::{Error, Result};

/// A scaling regime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Regime {
    /// A fixed data set.
    Strong,
    /// The data set grows with the ranks (each rank keeps the same graphs per epoch).
    Weak,
}

impl Regime {
    /// `strong` or `weak` (the keys of `scaling.json`).
    pub fn name(self) -> &'static str {
        match self {
            Regime::Strong => "strong",
            Regime::Weak => "weak",
        }
    }
}

/// Writes `value` as pretty JSON (keys sorted, as the command prints it), atomically.
fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(&json_value(path, value)?).expect("JSON values serialise");
    write_bytes(path, text.as_bytes())
}

/// `value` as a JSON value, whose objects have their keys sorted.
fn json_value(path: &Path, value: &impl Serialize) -> Result<serde_json::Value> {
    serde_json::to_value(value).map_err(|source| Error::Model(ModelError::Json { path: path.into(), source }))
}

fn write_bytes(path: &Path, bytes: &[u8]) -> Result<()> {
    trackgnn_trackml::atomic::write(path, bytes).map_err(|e| Error::context(format!("writing {}", path.display()), e))
}

/// Reads a JSON file of the study (a study, a simulation, an interconnect fit) as `T`.
fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::context(format!("reading {}", path.display()), e))?;
    serde_json::from_str(&text).map_err(|source| Error::Model(ModelError::Json { path: path.to_path_buf(), source }))
}

/// Speed-up against ranks, with the ideal line y = N; writes `<stem>.png` and `<stem>.svg`.
pub fn plot_speedup(
    stem: &Path,
    title: &str,
    curves: &[(String, Vec<(f64, f64)>)],
    ranks: &[usize],
) -> crate::Result<()> {
    let ideal: Vec<(f64, f64)> = ranks.iter().map(|&n| (n as f64, n as f64)).collect();
    let mut series: Vec<(&str, Vec<(f64, f64)>)> = vec![("ideal", ideal)];
    series.extend(curves.iter().map(|(name, pts)| (name.as_str(), pts.clone())));
    crate::plots::plot_series(stem, title, "ranks", "speed-up", &series, false)
}
