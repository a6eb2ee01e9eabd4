//! A trained run from Python: [`PyRun`] (`trackgnn.Run`) opens a run directory with
//! `trackgnn_reco::inference::Reconstructor` and scores graphs, builds tracks and
//! reconstructs events; [`build_tracks`] groups the nodes of any scored graph.

use std::path::PathBuf;
use std::str::FromStr;

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use trackgnn_model::run_dir::{RunDir, Weights};
use trackgnn_reco::inference::{Reconstructor, Scoring};
use trackgnn_reco::quality::QualityModel;
use trackgnn_reco::submission::PARAMETERS_COLUMNS;
use trackgnn_reco::{CandidateScore, ScoredEdges, TrackBuilder, TrackBuilderConfig, TrackMethod};

use crate::errors::{config_error, to_py, to_py_at};
use crate::event::{PyEvent, detector};
use crate::graph::{PyGraph, PyRecipe};

/// The track building settings of `method` (`cc`, `walkthrough` or `follow`) cutting edges
/// at `score_cut` (default: the method's own).
fn track_config(method: &str, score_cut: Option<f64>) -> PyResult<TrackBuilderConfig> {
    let method = match method {
        "cc" => TrackMethod::Cc,
        "walkthrough" => TrackMethod::Walkthrough,
        "follow" => TrackMethod::Follow,
        other => return Err(config_error(format!("unknown track method `{other}` (cc, walkthrough or follow)"))),
    };
    Ok(TrackBuilderConfig::for_method(method, score_cut))
}

/// `config` with the candidate selection: candidates of at most `max_hits` hits (all when
/// `None`) whose score by `measure` (`weakest_link` or `mean_best_edge`) is below `min_score`
/// (0: none) are dropped.
fn with_selection(
    mut config: TrackBuilderConfig,
    min_score: f64,
    measure: &str,
    max_hits: Option<usize>,
) -> PyResult<TrackBuilderConfig> {
    config.candidate_score = match measure {
        "weakest_link" => CandidateScore::WeakestLink,
        "mean_best_edge" => CandidateScore::MeanBestEdge,
        other => {
            return Err(config_error(format!("unknown candidate score `{other}` (weakest_link or mean_best_edge)")));
        }
    };
    config.min_candidate_score = min_score;
    config.candidate_score_max_hits = max_hits;
    Ok(config)
}

/// `scores` as a slice checked against the graph's edge count.
fn edge_values<'a>(graph: &PyGraph, scores: &'a PyReadonlyArray1<'_, f32>, what: &str) -> PyResult<&'a [f32]> {
    let s = scores.as_slice()?;
    if s.len() != graph.graph.num_edges() {
        let e = graph.graph.num_edges();
        return Err(config_error(format!("{} {what} for a graph of {e} edges", s.len())));
    }
    Ok(s)
}

/// What [`PyRun::reconstruct`] returns: the graph, its edge scores, a track id per hit.
type Reconstructed<'py> = (PyGraph, Bound<'py, PyArray1<f32>>, Bound<'py, PyArray1<u32>>);

/// A trained run (`trackgnn.Run`): its recipe without truth cuts, its module map, its GNN
/// with the weights chosen, and a track builder.
#[pyclass(name = "Run", module = "trackgnn", frozen)]
pub struct PyRun {
    rec: Reconstructor,
    root: PathBuf,
}

#[pymethods]
impl PyRun {
    /// Opens the run directory `path` with its `weights` (`best`, `last` or a safetensors
    /// file), building tracks with `method` (`cc`, `walkthrough`, `follow`) at `score_cut`
    /// (default: the method's own) of at least `min_hits` hits (default 5, as `trackgnn
    /// reconstruct`), on the built-in TrackML
    /// detector or `detector` (a `detectors.csv`). Candidates of at most
    /// `candidate_score_max_hits` hits (default: all) whose score by `candidate_score`
    /// (`weakest_link` or `mean_best_edge`) is below `min_candidate_score` are dropped (default
    /// 0: none; `trackgnn reconstruct --min-candidate-score`). With `quality`, a model file
    /// of `trackgnn train-quality`, the candidates whose fake probability exceeds
    /// `max_fake_probability` are dropped too (`trackgnn reconstruct --quality`), and with
    /// `rebuild` track following runs again around the candidates kept (`--rebuild`). With
    /// `truth_scores`, edges are scored from the truth instead of the GNN (`trackgnn
    /// reconstruct --truth-scores`, a diagnostic). `device` says where the GNN scores: `cpu`, or
    /// `cuda`, `cuda:N` in a package built with the `cuda` feature (`--device`).
    #[new]
    #[pyo3(signature = (
        path, weights="best", method="cc", score_cut=None, min_hits=5, truth_scores=false, detector=None,
        min_candidate_score=0.0, candidate_score="weakest_link", candidate_score_max_hits=None, quality=None,
        max_fake_probability=0.5, rebuild=false, device="cpu"
    ))]
    #[allow(clippy::too_many_arguments)] // Python keyword arguments
    fn new(
        py: Python<'_>,
        path: PathBuf,
        weights: &str,
        method: &str,
        score_cut: Option<f64>,
        min_hits: usize,
        truth_scores: bool,
        detector: Option<PathBuf>,
        min_candidate_score: f64,
        candidate_score: &str,
        candidate_score_max_hits: Option<usize>,
        quality: Option<PathBuf>,
        max_fake_probability: f64,
        rebuild: bool,
        device: &str,
    ) -> PyResult<PyRun> {
        let device: trackgnn_engine::Device = device.parse().map_err(|e| config_error(format!("device: {e}")))?;
        let weights = Weights::from_str(weights).expect("infallible");
        let mut tracks = track_config(method, score_cut)?;
        tracks.min_hits = min_hits;
        let tracks = with_selection(tracks, min_candidate_score, candidate_score, candidate_score_max_hits)?;
        let det = self::detector(py, detector)?;
        let rec = py
            .detach(|| {
                let run = RunDir::open(&path)?;
                let rec =
                    Reconstructor::open(&run, &weights, det)?.with_tracks(tracks)?.with_truth_scores(truth_scores);
                rec.with_scoring(&Scoring { device: Some(device), precision: None })
            })
            .map_err(|e| to_py_at(e, &path))?;
        let rec = match quality {
            Some(q) => {
                let model = QualityModel::load(&q).map_err(|e| to_py_at(e, &q))?;
                rec.with_quality(model, max_fake_probability).map_err(to_py)?.with_rebuild(rebuild)
            }
            None => rec,
        };
        Ok(PyRun { rec, root: path })
    }

    /// The run directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.root.clone()
    }

    /// The recipe graphs are built with (the run's, without truth cuts).
    #[getter]
    fn recipe(&self) -> PyRecipe {
        PyRecipe { recipe: self.rec.recipe().clone() }
    }

    /// The weights file loaded.
    #[getter]
    fn weights(&self) -> PathBuf {
        self.rec.model().weights.clone()
    }

    /// The graph of `event` with the run's recipe and module map.
    fn build_graph(&self, py: Python<'_>, event: &PyEvent) -> PyResult<PyGraph> {
        let (graph, _) = py.detach(|| self.rec.graph(&event.event)).map_err(to_py)?;
        Ok(PyGraph { graph })
    }

    /// The GNN's edge scores (probabilities) of `graph`, `[E]` float32.
    fn score<'py>(&self, py: Python<'py>, graph: &PyGraph) -> PyResult<Bound<'py, PyArray1<f32>>> {
        self.check_features(graph)?;
        let scores = py.detach(|| self.rec.scores(&graph.graph)).map_err(to_py)?;
        Ok(PyArray1::from_vec(py, scores))
    }

    /// The GNN's edge logits of `graph` (the scores before the sigmoid), `[E]` float32.
    fn logits<'py>(&self, py: Python<'py>, graph: &PyGraph) -> PyResult<Bound<'py, PyArray1<f32>>> {
        self.check_features(graph)?;
        let logits = py.detach(|| self.rec.logits(&graph.graph)).map_err(to_py)?;
        Ok(PyArray1::from_vec(py, logits))
    }

    /// A track id per hit of `event` (in its hit order; 0 = no track) from the `scores` of
    /// `graph`'s edges, `graph` being `event`'s, with the run's track builder.
    fn tracks<'py>(
        &self,
        py: Python<'py>,
        event: &PyEvent,
        graph: &PyGraph,
        scores: PyReadonlyArray1<'py, f32>,
    ) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let s = edge_values(graph, &scores, "scores")?;
        let ids = py.detach(|| self.rec.tracks(&event.event, &graph.graph, s)).map_err(to_py)?;
        Ok(PyArray1::from_vec(py, ids))
    }

    /// The Kalman fits of `event`'s tracks, given a track id per hit (`hit_tracks`, in its hit
    /// order, as `reconstruct` returns them): a dict of arrays, one entry per fitted track, with
    /// the columns of `trackgnn reconstruct --fit`'s parameters file (`track_id`, `q_over_pt`
    /// \[e/GeV\], `phi`, `eta`, `d0`, `z0` \[mm\], their `sigma_…`, `chi2`, `ndf`), each fitted
    /// without its outlier hits as `--fit` drops them. Tracks whose fit fails are left out.
    fn fit_tracks<'py>(
        &self,
        py: Python<'py>,
        event: &PyEvent,
        hit_tracks: PyReadonlyArray1<'py, u32>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let ids = hit_tracks.as_slice().map_err(|e| config_error(format!("hit_tracks: {e}")))?;
        if ids.len() != event.event.hits.len() {
            return Err(config_error(format!(
                "{} track ids for an event of {} hits",
                ids.len(),
                event.event.hits.len()
            )));
        }
        let fits = py.detach(|| self.rec.fit_tracks(&event.event, ids, self.rec.outliers())).map_err(to_py)?;
        let rows: Vec<[f64; 13]> = fits.tracks.iter().map(|f| f.row()).collect();
        let d = PyDict::new(py);
        for (k, name) in PARAMETERS_COLUMNS.iter().enumerate() {
            match *name {
                "track_id" | "ndf" => d.set_item(name, PyArray1::from_iter(py, rows.iter().map(|r| r[k] as u32)))?,
                _ => d.set_item(name, PyArray1::from_iter(py, rows.iter().map(|r| r[k])))?,
            }
        }
        Ok(d)
    }

    /// Reconstructs `event`: its graph, the edge scores and a track id per hit (as
    /// `trackgnn reconstruct` does for each event of a directory).
    fn reconstruct<'py>(&self, py: Python<'py>, event: &PyEvent) -> PyResult<Reconstructed<'py>> {
        let reco = py.detach(|| self.rec.event(&event.event)).map_err(to_py)?;
        Ok((
            PyGraph { graph: reco.graph },
            PyArray1::from_vec(py, reco.scores),
            PyArray1::from_vec(py, reco.hit_tracks),
        ))
    }

    fn __repr__(&self) -> String {
        format!(
            "Run({:?}, weights={:?})",
            self.root.display().to_string(),
            self.rec.model().weights.display().to_string()
        )
    }
}

impl PyRun {
    /// A graph whose node features are not the run's is refused (the GNN would read garbage).
    fn check_features(&self, graph: &PyGraph) -> PyResult<()> {
        let want: Vec<String> = self.rec.recipe().features.features.iter().map(|f| f.name.to_string()).collect();
        if graph.graph.node_feature_names != want {
            return Err(config_error(format!(
                "the graph's node features {:?} are not the run's {want:?} (build it with Run.build_graph or the run's recipe)",
                graph.graph.node_feature_names
            )));
        }
        let want_edge = if self.rec.recipe().edge_features { 4 } else { 0 };
        if graph.graph.num_edge_features() != want_edge {
            return Err(config_error(format!(
                "the graph has {} edge features, the run's model takes {want_edge}",
                graph.graph.num_edge_features()
            )));
        }
        Ok(())
    }
}

/// A track id per node of `graph` (0 = no track) from the `scores` of its edges, grouped by
/// `method` (`cc`, `walkthrough`, or `follow` without the hit search, which needs the event:
/// see `Run.tracks`) at `score_cut` (default: the method's own), tracks of at least
/// `min_hits` nodes (default 5, as `Run`), with the candidate selection of `Run`.
#[pyfunction]
#[pyo3(signature = (
    graph, scores, method="cc", score_cut=None, min_hits=5,
    min_candidate_score=0.0, candidate_score="weakest_link", candidate_score_max_hits=None
))]
#[allow(clippy::too_many_arguments)] // Python keyword arguments
pub fn build_tracks<'py>(
    py: Python<'py>,
    graph: &PyGraph,
    scores: PyReadonlyArray1<'py, f32>,
    method: &str,
    score_cut: Option<f64>,
    min_hits: usize,
    min_candidate_score: f64,
    candidate_score: &str,
    candidate_score_max_hits: Option<usize>,
) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let mut config = track_config(method, score_cut)?;
    config.min_hits = min_hits;
    let mut config = with_selection(config, min_candidate_score, candidate_score, candidate_score_max_hits)?;
    config.follow.search = false;
    let builder = TrackBuilder::new(config).map_err(to_py)?;
    let s = edge_values(graph, &scores, "scores")?;
    let ids = py.detach(|| builder.build(&ScoredEdges::from_graph(&graph.graph, s))).map_err(to_py)?;
    Ok(PyArray1::from_vec(py, ids))
}

/// Adds the run class and track building to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRun>()?;
    m.add_function(wrap_pyfunction!(build_tracks, m)?)?;
    m.add("NO_TRACK", trackgnn_reco::NO_TRACK)?;
    Ok(())
}
