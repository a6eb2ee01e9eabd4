//! `trackgnn export`: a trained run's model as a standard ONNX file for the ACTS GNN plugin,
//! with the ACTS feature configuration beside it; optionally reference inputs and the engine's
//! logits for events, for `tools/onnx_check.py`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use trackgnn_engine::Precision;
use trackgnn_onnx::ExportReport;
use trackgnn_onnx::reference::Reference;
use trackgnn_reco::inference::{Reconstructor, Scoring, TrainedModel};
use trackgnn_trackml::csv::read_event;
use trackgnn_train::run_dir::{RunDir, Weights};

use crate::cli::DetectorArg;
use crate::util::{load_detector, print_report, thread_pool};

/// The export formats.
#[derive(Debug, Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
pub enum ExportFormat {
    /// ONNX, in the conventions of the ACTS GNN plugin's ONNX edge classifier.
    Onnx,
}

/// `trackgnn export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// A training run directory (its recipe, config and weights).
    #[arg(long, value_name = "DIR")]
    pub run: PathBuf,
    /// The file format.
    #[arg(long, value_enum, default_value_t = ExportFormat::Onnx)]
    pub format: ExportFormat,
    /// The model file to write (the ACTS configuration goes beside it, `<stem>.acts.json`).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// `best`, `last` or a safetensors file.
    #[arg(long, default_value = "best")]
    pub weights: String,
    /// Also write, for each event of this directory, the model's inputs and the engine's
    /// logits (f32) as .npy files, and the engine's scoring time, into --reference-out.
    #[arg(long, value_name = "DIR", requires = "reference_out")]
    pub reference: Option<PathBuf>,
    /// Where the reference files go.
    #[arg(long, value_name = "DIR", requires = "reference")]
    pub reference_out: Option<PathBuf>,
    #[command(flatten)]
    pub events: crate::cli::EventsArg,
    #[command(flatten)]
    pub threads: crate::cli::ThreadsArg,
    #[command(flatten)]
    pub json: crate::cli::JsonArg,
    #[command(flatten)]
    pub detector: DetectorArg,
}

pub fn run(a: ExportArgs) -> Result<ExitCode> {
    let run = RunDir::open(&a.run)?;
    let weights: Weights = a.weights.parse()?;
    let recipe = run.read_recipe()?.for_inference();
    let trained = TrainedModel::for_recipe(&run, &weights, &recipe)?;
    let model = trained.model();
    let export = trackgnn_onnx::export(&model, &recipe.features, trained.config.threshold)
        .with_context(|| format!("{}", a.run.display()))?;
    let sidecar = trackgnn_onnx::write(&export, &a.out)?;
    let reference = match (&a.reference, &a.reference_out) {
        (Some(events), Some(out)) => Some(write_reference(&a, &run, &weights, events, out)?),
        _ => None,
    };
    let parameters = model.params.len();
    let report = ExportReport::new(&a.out, &sidecar, &export, parameters, trained.config.precision, reference.as_ref());
    print_report(&report, a.json.json)?;
    Ok(ExitCode::SUCCESS)
}

/// Builds each event's graph with the run's recipe, scores it with the engine in f32 (timed,
/// after one untimed warm-up: [`Reference`]), and writes `<event>.x.npy`, `<event>.edge_index.npy`,
/// `<event>.edge_attr.npy` (when the model has edge features), `<event>.logits.npy` and
/// `reference.json` into `out`; returns what reference.json holds.
fn write_reference(a: &ExportArgs, run: &RunDir, weights: &Weights, events: &Path, out: &Path) -> Result<Reference> {
    let det = load_detector(a.detector.detector.as_deref())?;
    let rec = Reconstructor::open(run, weights, det)?
        .with_scoring(&Scoring { precision: Some(Precision::F32), device: None })?;
    let files = a.events.discover(events)?;
    std::fs::create_dir_all(out).with_context(|| format!("{}", out.display()))?;
    let pool = thread_pool(a.threads.threads)?;
    let mut reference = Reference::new(out, pool.current_num_threads())?;
    let model = rec.model().model();
    for f in &files {
        let event = read_event(f, rec.read_options())?;
        let graph = rec.event(&event)?.graph;
        pool.install(|| reference.add(&model, event.event_id, &graph))?;
    }
    reference.finish()?;
    Ok(reference)
}
