//! `trackgnn train-quality`: fit the candidate-quality model ([`trackgnn_reco::quality`]) to
//! the candidates a trained run builds on events with truth, and write it for `reconstruct
//! --quality`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use trackgnn_reco::TrackBuilderConfig;
use trackgnn_reco::inference::Reconstructor;
use trackgnn_reco::quality::{CandidateSource, QualityFitReport, QualityModel, QualitySamples};
use trackgnn_reco::tracks::TrackMethod;
use trackgnn_trackml::csv::read_event;
use trackgnn_train::run_dir::{RunDir, Weights};

use crate::cli::DetectorArg;
use crate::progress;
use crate::util::{load_detector, print_report, thread_pool};
use clap::Args;

/// `trackgnn train-quality`.
#[derive(Debug, Args)]
pub struct TrainQualityArgs {
    /// A training run directory: its graphs, GNN scores and track builder make the candidates.
    #[arg(long, value_name = "DIR")]
    pub run: PathBuf,
    /// Directory of events with truth, none of them held out for evaluation (and, better, none
    /// the GNN trained on: its scores are sharper there than on new events).
    #[arg(long, value_name = "DIR")]
    pub input: PathBuf,
    /// Where to write the model (JSON).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Track building method: use the one `reconstruct --quality` will use.
    #[arg(long, value_enum, default_value_t = TrackMethod::Follow)]
    pub method: TrackMethod,
    /// Edge score cut (default: the method's, as in `reconstruct`).
    #[arg(long)]
    pub score_cut: Option<f64>,
    /// Smallest track candidate, in hits (as in `reconstruct`).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub min_hits: u32,
    #[command(flatten)]
    pub follow: crate::cli::FollowArgs,
    /// Fit every candidate (Kalman filter, outliers dropped) and give the model its χ²/ndf,
    /// outliers and failure as features (`reconstruct --quality` then fits every candidate).
    #[arg(long)]
    pub fit_features: bool,
    /// L2 penalty on the weights of the standardised features (per candidate).
    #[arg(long, default_value_t = 1e-4)]
    pub l2: f64,
    /// The fake-probability cut whose effect on the training candidates is printed.
    #[arg(long, value_name = "P", default_value_t = 0.5)]
    pub max_fake_probability: f64,
    /// `best`, `last` or a safetensors file.
    #[arg(long, default_value = "best")]
    pub weights: String,
    #[command(flatten)]
    pub events: crate::cli::EventsArg,
    #[command(flatten)]
    pub threads: crate::cli::ThreadsArg,
    #[command(flatten)]
    pub json: crate::cli::JsonArg,
    #[command(flatten)]
    pub detector: DetectorArg,
}

pub fn run(a: TrainQualityArgs) -> Result<ExitCode> {
    anyhow::ensure!(
        (0.0..=1.0).contains(&a.max_fake_probability),
        "--max-fake-probability must be in [0, 1], got {}",
        a.max_fake_probability
    );
    let t = std::time::Instant::now();
    let det = load_detector(a.detector.detector.as_deref())?;
    let weights: Weights = a.weights.parse()?;
    let mut tracks = TrackBuilderConfig::for_method(a.method, a.score_cut);
    tracks.min_hits = a.min_hits as usize;
    a.follow.apply(&mut tracks.follow);
    let rec = Reconstructor::open(&RunDir::open(&a.run)?, &weights, det)?.with_tracks(tracks)?;
    let files = a.events.discover(&a.input)?;
    anyhow::ensure!(!files.is_empty(), "{}: no events", a.input.display());
    let mut opts = rec.read_options();
    opts.truth = true;
    let pool = thread_pool(a.threads.threads)?;
    let pb = progress::bar(files.len() as u64, "candidates");
    let mut samples = QualitySamples::default();
    for f in &files {
        let event = read_event(f, opts)?;
        let (features, fake) = pool.install(|| rec.quality_samples(&event, a.fit_features))?;
        samples.extend(features, fake);
        pb.inc(1);
    }
    pb.finish_and_clear();
    let mut model = QualityModel::fit(&samples, a.l2, a.fit_features)?;
    model.candidates = Some(CandidateSource::of(rec.track_config()));
    model.save(&a.out).with_context(|| format!("writing the quality model {}", a.out.display()))?;

    let seconds = t.elapsed().as_secs_f64();
    let report = QualityFitReport::new(a.out.clone(), &samples, &model, a.max_fake_probability, a.l2, seconds);
    print_report(&report, a.json.json)?;
    Ok(ExitCode::SUCCESS)
}
