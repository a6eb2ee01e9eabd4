//! Track reconstruction from scored graphs, and how good the tracks are.
//!
//! The last stage of the pipeline: the GNN gives every edge of an event's graph a score;
//! this crate turns the scores into track candidates and measures them against the truth.
//!
//! - [`tracks`]: [`TrackBuilder`] (configured by [`TrackBuilderConfig`]) cuts the edges at a
//!   score threshold and groups the nodes by [`connected_components`], by a
//!   [`walkthrough()`] that resolves branchings, or by following the helix along them
//!   ([`follow()`], whose paths a hit search beyond the graph's edges extends:
//!   [`tracks::search`]). Output: a track id per node, [`NO_TRACK`] for nodes in no track.
//! - [`metrics`]: [`evaluate`] computes [`TrackMetrics`] for one event: double-majority
//!   efficiency (target and all particles, and against pT and η), fake and duplicate rates,
//!   the TrackML score ([`trackml_score`]); metrics of several events [`merge`](TrackMetrics::merge).
//! - [`submission`]: TrackML submission files ([`write_submission`], [`read_submission`]) and
//!   the mapping from graph nodes to event hits ([`event_track_ids`], [`singleton_track_ids`]).
//! - [`plots`]: efficiency against pT and η as PNG and SVG.
//! - [`compare`]: reconstructions of the same events side by side (the CKF and the GNN
//!   chain): efficiency against pT and η, pT resolution against pT, pulls.
//! - [`display`]: an event display (hits, edges coloured by score, tracks; x–y and r–z), and
//!   [`phoenix`]: the same event in the JSON format of Phoenix, the HSF's web event display.
//! - [`propagation`]: the helix arithmetic that track following, the hit search and the
//!   quality features share, and the propagation of track parameters through the field.
//! - [`kalman`]: a Kalman-filter track fit (filter, RTS smoother, perigee parameters with
//!   errors) on the detector's own module surfaces.
//! - [`ckf`]: classical track finding with no GNN, as ACTS does it: triplet seeding, a
//!   combinatorial Kalman filter through the detector's layers and greedy ambiguity
//!   resolution ([`ckf::Ckf`]), the baseline the GNN chain is set against.
//! - [`inference`]: all of it with a trained run, from an event's hits to its tracks and
//!   submission ([`inference::Reconstructor`]), for one event or a directory of events.
//!
//! ```
//! use trackgnn_reco::{
//!     evaluate, EventTruth, TrackMethod, MetricsConfig, ParticleKinematics, ScoredEdges, TrackBuilder,
//!     TrackBuilderConfig,
//! };
//! use trackgnn_trackml::ParticleId;
//!
//! // Two 3-hit tracks (nodes 0-1-2 and 3-4-5) and a fake edge 1→4 scored 0.6.
//! let (src, dst) = ([0, 1, 3, 4, 1], [1, 2, 4, 5, 4]);
//! let scores = [0.9, 0.9, 0.95, 0.9, 0.6];
//! let edges = ScoredEdges::new(6, &src, &dst, &scores);
//! // Tracks of 3 hits or more (the default is 5).
//! let short = TrackBuilderConfig { min_hits: 3, ..Default::default() };
//! let cc = TrackBuilder::new(short.clone())?.build(&edges)?;
//! assert_eq!(cc, [1, 1, 1, 1, 1, 1]); // merged by the fake edge
//! let walk = TrackBuilderConfig { method: TrackMethod::Walkthrough, ..short };
//! let tracks = TrackBuilder::new(walk)?.build(&edges)?;
//! assert_eq!(tracks, [1, 1, 1, 2, 2, 2]);
//!
//! let particle_id: Vec<ParticleId> = [7, 7, 7, 8, 8, 8].map(ParticleId).to_vec();
//! let mut kinematics = ParticleKinematics::new();
//! kinematics.insert(ParticleId(7), 2.5, 0.4); // pT \[GeV\], η
//! kinematics.insert(ParticleId(8), 0.7, -1.1);
//! let truth = EventTruth { particle_id: &particle_id, weight: &[1.0 / 6.0; 6], kinematics: &kinematics };
//! // Candidates and particles of 3 hits or more count (the default is 5, as the builders').
//! let m = evaluate(&truth, &tracks, &MetricsConfig::for_min_hits(3, None))?;
//! assert_eq!((m.efficiency, m.efficiency_all, m.fake_rate), (1.0, 1.0, 0.0));
//! assert!((m.trackml_score - 1.0).abs() < 1e-6);
//! # Ok::<(), trackgnn_reco::Error>(())
//! ```
//!
//! Not for: scoring the edges (the GNN is `trackgnn-engine`, a trained one `trackgnn-model`,
//! training `trackgnn-train`), the edge-level metrics of item 7 of the mission
//! (efficiency/purity of edges, in `trackgnn-model`, and a run's evaluation with them in
//! `trackgnn-train`). [`inference`]
//! calls the graph builder, the GNN and the run directory of those crates; it does not
//! reimplement them.
#![deny(missing_docs)]

pub mod ckf;
pub mod compare;
pub mod display;
pub mod error;
pub mod inference;
pub mod kalman;
pub mod metrics;
pub mod phoenix;
pub mod plots;
pub mod propagation;
pub mod quality;
pub mod submission;
pub mod tracks;

pub use error::{Error, Result};
pub use metrics::{
    EfficiencyBin, EventTruth, MetricsConfig, ParticleKinematics, TrackMetrics, evaluate, evaluate_event, trackml_score,
};
pub use plots::{plot_efficiency, plot_track_efficiency};
pub use quality::{QualityModel, QualitySamples, candidate_features, fake_candidates, select_by_quality};
pub use submission::{
    Submission, TrackParameters, event_track_ids, parameters_file_name, read_parameters, read_submission,
    singleton_track_ids, submission_file_name, write_event_submission, write_parameters, write_submission,
};
pub use tracks::{
    CandidateScore, DEFAULT_MIN_HITS, FollowConfig, NO_TRACK, ScoredEdges, TrackBuilder, TrackBuilderConfig,
    TrackMethod, candidate_scores, connected_components, follow, num_tracks, select_candidates, walkthrough,
};
