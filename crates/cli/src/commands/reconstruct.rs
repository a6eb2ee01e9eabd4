//! `trackgnn reconstruct`: events → graphs (the run's recipe, without truth) → edge scores →
//! track candidates → TrackML submission files; then, for events that have truth files, the
//! track metrics and their plots. Reconstruction itself never reads a truth file, except in the
//! `--truth-scores` diagnostic, where truth replaces the GNN's edge scores. `--method ckf`
//! needs no run: seeding, the combinatorial Kalman filter and ambiguity resolution
//! (`trackgnn_reco::ckf`) find the tracks from the hits alone.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use trackgnn_reco::ckf::{Ckf, CkfConfig, CkfReport};
use trackgnn_reco::inference::{RecoReport, Reconstructor};
use trackgnn_reco::kalman::OutlierRemoval;
use trackgnn_reco::quality::QualityModel;
use trackgnn_reco::tracks::TrackMethod;
use trackgnn_reco::{MetricsConfig, TrackBuilderConfig};
use trackgnn_train::run_dir::{RunDir, Weights};

use crate::cli::DetectorArg;
use crate::progress;
use crate::util::{load_detector, print_report, thread_pool};
use clap::Args;

/// `trackgnn reconstruct`.
#[derive(Debug, Args)]
pub struct ReconstructArgs {
    /// A training run directory (its recipe, config and weights). Required by every method
    /// but `ckf`.
    #[arg(long, value_name = "DIR")]
    pub run: Option<PathBuf>,
    /// Directory of events (hits; truth files are used only to score the tracks afterwards).
    #[arg(long, value_name = "DIR")]
    pub input: PathBuf,
    /// Output directory for the submission files and plots.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Edge score cut. Default: 0.5 (cc, walkthrough), 0.02 (follow, whose windows on the
    /// helix do the rest of the selection).
    #[arg(long)]
    pub score_cut: Option<f64>,
    /// Track building method.
    #[arg(long, value_enum, default_value_t = ReconstructMethod::Cc)]
    pub method: ReconstructMethod,
    /// CKF only: the seeds' smallest pT, in GeV.
    #[arg(long, value_name = "GEV", default_value_t = trackgnn_reco::ckf::SeedConfig::default().pt_min)]
    pub seed_pt_min: f64,
    /// Fit every track with the Kalman filter and smoother (any method) and write its perigee
    /// parameters (q/pT, φ, η, d0, z0 with errors, χ² and ndf) beside the submission, in
    /// `eventNNNNNNNNN-parameters.csv` (costs time).
    #[arg(long)]
    pub fit: bool,
    /// With `--fit` (not the CKF's): a hit whose χ² against the other hits' fit exceeds this is
    /// left out of the track's fit (the worst first, up to 3, never below 5 hits); `inf`: none.
    #[arg(long, value_name = "CHI2", default_value_t = 20.0)]
    pub outlier_chi2: f64,
    /// Smallest track candidate, in hits: shorter groups are left out (their hits become
    /// singletons in the submission). 5 is the field's usual track-quality cut (acorn's
    /// `min_track_length`); 3 keeps every candidate the metrics count.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub min_hits: u32,
    /// The metrics count particles of at least this many hits as reconstructable (and as
    /// targets). Default: `--min-hits`, as the field's evaluation does (acorn's
    /// `min_particle_length` = `min_track_length`): a shorter particle can never make a
    /// candidate. Graph efficiency's target edges keep particles of >= 3 hits.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub min_particle_hits: Option<u32>,
    /// Walk-through only: branchings whose second edge scores at least this are explored
    /// (the longest path wins). Default: the larger of 0.8 and the score cut.
    #[arg(long)]
    pub branch_cut: Option<f64>,
    #[command(flatten)]
    pub follow: crate::cli::FollowArgs,
    /// Drop the candidates whose score (`--candidate-score`) is below this. Default 0: keep
    /// every candidate.
    #[arg(long, value_name = "S", default_value_t = 0.0)]
    pub min_candidate_score: f64,
    /// How `--min-candidate-score` scores a candidate.
    #[arg(long, value_name = "MEASURE", default_value = "weakest-link", requires = "min_candidate_score")]
    pub candidate_score: trackgnn_reco::CandidateScore,
    /// `--min-candidate-score` applies only to candidates of at most this many hits (longer
    /// ones are kept whatever their score). Default: to all.
    #[arg(long, value_name = "N", requires = "min_candidate_score")]
    pub candidate_score_max_hits: Option<usize>,
    /// A candidate-quality model (`trackgnn train-quality`): drop the candidates it finds
    /// likely fake (after `--min-candidate-score`).
    #[arg(long, value_name = "FILE")]
    pub quality: Option<PathBuf>,
    /// With `--quality`: drop the candidates whose fake probability exceeds this.
    #[arg(long, value_name = "P", default_value_t = 0.5, requires = "quality")]
    pub max_fake_probability: f64,
    /// With `--quality` and `--method follow`: follow tracks again around the candidates the
    /// model keeps, from the hits of those it drops (fakes take hits from real tracks), then
    /// judge them again.
    #[arg(long, requires = "quality")]
    pub rebuild: bool,
    /// Diagnostic, not reconstruction: score each edge 1 if it joins consecutive hits of a
    /// target particle and 0 otherwise, from the truth files, instead of the GNN. The metrics
    /// are then the ceiling that the graph and the track builder allow a perfect classifier.
    #[arg(long)]
    pub truth_scores: bool,
    /// Split each event's graph across this many ranks to score it (an MPI build under
    /// `mpirun -np N`, N ranks): rank 0 builds the tracks and writes the files.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub domain_ranks: u32,
    /// `best`, `last` or a safetensors file.
    #[arg(long, default_value = "best")]
    pub weights: String,
    #[command(flatten)]
    pub scoring: trackgnn_reco::inference::Scoring,
    #[command(flatten)]
    pub events: crate::cli::EventsArg,
    #[command(flatten)]
    pub threads: crate::cli::ThreadsArg,
    #[command(flatten)]
    pub json: crate::cli::JsonArg,
    #[command(flatten)]
    pub detector: DetectorArg,
    #[command(flatten)]
    pub display: trackgnn_reco::display::DisplayArgs,
}

/// How `reconstruct` builds tracks: from a run's scored graph by one of the edge-based
/// builders, or from the hits alone by the combinatorial Kalman filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ReconstructMethod {
    /// Connected components of the edges above the cut.
    Cc,
    /// Walk along the best-scoring edges, resolving branchings.
    Walkthrough,
    /// Follow the helix along the edges down to a low score cut (for dense events).
    Follow,
    /// No GNN and no run: triplet seeding, a combinatorial Kalman filter and greedy ambiguity
    /// resolution, as ACTS does it.
    Ckf,
}

impl ReconstructMethod {
    /// The edge-based builder, `None` for the CKF.
    fn track_method(self) -> Option<TrackMethod> {
        match self {
            ReconstructMethod::Cc => Some(TrackMethod::Cc),
            ReconstructMethod::Walkthrough => Some(TrackMethod::Walkthrough),
            ReconstructMethod::Follow => Some(TrackMethod::Follow),
            ReconstructMethod::Ckf => None,
        }
    }
}

/// The CKF's settings of the flags.
fn ckf_config(a: &ReconstructArgs) -> CkfConfig {
    let mut c = CkfConfig::default();
    c.seeds.pt_min = a.seed_pt_min;
    c.min_hits = a.min_hits as usize;
    c.fit = a.fit;
    c
}

/// `reconstruct --method ckf`.
fn run_ckf(a: &ReconstructArgs) -> Result<ExitCode> {
    anyhow::ensure!(
        a.quality.is_none() && !a.truth_scores,
        "--quality and --truth-scores judge a GNN's edges: --method ckf has none"
    );
    let det = load_detector(a.detector.detector.as_deref())?;
    let ckf = Ckf::new(det, ckf_config(a))?.with_display(a.display.config());
    let events = a.events.discover(&a.input)?;
    let threads = thread_pool(a.threads.threads)?.current_num_threads();
    let mut metrics = MetricsConfig::for_min_hits(a.min_hits as usize, a.min_particle_hits.map(|n| n as usize));
    metrics.pt_edges_all = trackgnn_reco::ckf::pt_edges_all();
    let pb = progress::bar(events.len() as u64, "reconstruct (ckf)");
    let geometry = match &a.detector.detector {
        Some(p) => format!("the geometry {}", p.display()),
        None => "the built-in TrackML geometry".to_string(),
    };
    let done = ckf
        .reconstruct_events(&events, &a.out, &metrics, threads, |_| pb.inc(1))
        .with_context(|| format!("reconstructing {} against {geometry}", a.input.display()))?;
    pb.finish_and_clear();
    let report = CkfReport::new(&a.out, *ckf.config(), metrics, &done);
    print_report(&report, a.json.json)?;
    Ok(ExitCode::SUCCESS)
}

/// The track building settings of the flags: the method's defaults, then the flags.
fn track_config(a: &ReconstructArgs, method: TrackMethod) -> TrackBuilderConfig {
    let mut c = TrackBuilderConfig::for_method(method, a.score_cut);
    if let Some(b) = a.branch_cut {
        c.branch_cut = Some(b);
    }
    c.min_hits = a.min_hits as usize;
    a.follow.apply(&mut c.follow);
    c.min_candidate_score = a.min_candidate_score;
    c.candidate_score = a.candidate_score;
    c.candidate_score_max_hits = a.candidate_score_max_hits;
    c
}

pub fn run(a: ReconstructArgs) -> Result<ExitCode> {
    let Some(method) = a.method.track_method() else { return run_ckf(&a) };
    let Some(run) = &a.run else {
        anyhow::bail!(
            "--method {} needs a trained run: --run DIR (only --method ckf reconstructs without one)",
            format!("{method:?}").to_lowercase()
        )
    };
    let det = load_detector(a.detector.detector.as_deref())?;
    let weights: Weights = a.weights.parse()?;
    let rec = Reconstructor::open(&RunDir::open(run)?, &weights, det)?
        .with_tracks(track_config(&a, method))?
        .with_min_particle_hits(a.min_particle_hits.map(|n| n as usize))?
        .with_truth_scores(a.truth_scores)
        .with_scoring(&a.scoring)?
        .with_fit(a.fit)
        .with_outliers(OutlierRemoval::with_gate(a.outlier_chi2)?)
        .with_display(a.display.config());
    let rec = match &a.quality {
        Some(path) => rec.with_quality(QualityModel::load(path)?, a.max_fake_probability)?.with_rebuild(a.rebuild),
        None => rec,
    };
    let events = a.events.discover(&a.input)?;
    let pool = thread_pool(a.threads.threads)?;
    let Some(domain) = trackgnn_train::dist::domain_scoring(a.domain_ranks)? else {
        return pool.install(|| reconstruct(&rec, &events, &a));
    };
    let (rank, rec) = (domain.rank(), rec.with_logits_hook(domain.clone()));
    let done = pool.install(|| match rank {
        0 => reconstruct(&rec, &events, &a),
        _ => rec.score_events(&events).map(|_| ExitCode::SUCCESS).map_err(Into::into),
    });
    done.inspect_err(|e| domain.abort(&format!("error: {}", trackgnn_trackml::error::report(e.as_ref()))))
}

/// Reconstructs `events` with `rec` and prints the report.
fn reconstruct(
    rec: &Reconstructor,
    events: &[trackgnn_trackml::csv::EventFiles],
    a: &ReconstructArgs,
) -> Result<ExitCode> {
    let pb = progress::bar(events.len() as u64, "reconstruct");
    let done = rec.reconstruct_events(events, &a.out, |_| pb.inc(1))?;
    pb.finish_and_clear();
    print_report(&RecoReport::new(&a.out, rec, &done), a.json.json)?;
    Ok(ExitCode::SUCCESS)
}
