//! The metrics, as dicts with the keys of the libraries' JSON: the edge metrics of a scored
//! graph (`trackgnn_model::metrics::EdgeMetrics`, those of `trackgnn eval`) and the track
//! metrics of an event's tracks (`trackgnn_reco::TrackMetrics`, those of `trackgnn
//! reconstruct`).

use numpy::{PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use trackgnn_model::metrics::EdgeMetrics;
use trackgnn_reco::{MetricsConfig, evaluate_event};

use crate::errors::{config_error, to_py};
use crate::event::PyEvent;
use crate::graph::{PyGraph, json_to_py, py_to_json};

/// The edge metrics of `graph` (which must carry truth) from the GNN's `logits` of its edges
/// (`Run.logits`): an edge is kept when sigmoid(logit) > `threshold`. Keys `efficiency`,
/// `target_purity`, `total_purity`, `purity`, `auc` (fractions 0–1, NaN where undefined).
#[pyfunction]
#[pyo3(signature = (graph, logits, threshold=0.5))]
pub fn edge_metrics<'py>(
    py: Python<'py>,
    graph: &PyGraph,
    logits: PyReadonlyArray1<'py, f32>,
    threshold: f64,
) -> PyResult<Bound<'py, PyAny>> {
    let g = &graph.graph;
    let truth = g
        .truth
        .as_ref()
        .ok_or_else(|| config_error(format!("edge metrics need truth: the graph of event {} has none", g.event_id)))?;
    let l = logits.as_slice()?;
    if l.len() != g.num_edges() {
        return Err(config_error(format!("{} logits for a graph of {} edges", l.len(), g.num_edges())));
    }
    if !(0.0..=1.0).contains(&threshold) {
        return Err(config_error(format!("threshold must be in [0, 1], got {threshold}")));
    }
    let m = py.detach(|| EdgeMetrics::of_event(l, &truth.y, &truth.target, threshold, f64::NAN));
    let d: Bound<'py, PyDict> = PyDict::new(py);
    for (k, v) in [
        ("efficiency", m.efficiency),
        ("target_purity", m.target_purity),
        ("total_purity", m.total_purity),
        ("purity", m.purity),
        ("auc", m.auc),
    ] {
        d.set_item(k, v)?;
    }
    Ok(d.into_any())
}

/// The track metrics of `event` (read with its truth and particles) given a track id per hit
/// (`Run.tracks`, `Run.reconstruct`; 0 = no track), with `config` overriding the keys of
/// `MetricsConfig` (`target_pt_min`, `min_particle_hits`, `min_track_hits`: both 5 by default, as
/// `Run`'s `min_hits` and `trackgnn reconstruct`'s, …). Keys as `trackgnn reconstruct
/// --json`'s `metrics`: `efficiency` (double majority, target particles), `fake_rate`,
/// `duplicate_rate`, `trackml_score`, the counts and the binned efficiencies.
#[pyfunction]
#[pyo3(signature = (event, track_ids, config=None))]
pub fn track_metrics<'py>(
    py: Python<'py>,
    event: &PyEvent,
    track_ids: PyReadonlyArray1<'py, u32>,
    config: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyAny>> {
    let config = match config {
        Some(d) => serde_json::from_str::<MetricsConfig>(&py_to_json(d)?)
            .map_err(|e| config_error(format!("metrics config: {e}")))?,
        None => MetricsConfig::default(),
    };
    config.validate().map_err(to_py)?;
    let ev = &event.event;
    if track_ids.len() != ev.hits.len() {
        return Err(config_error(format!("{} track ids for an event of {} hits", track_ids.len(), ev.hits.len())));
    }
    let ids = track_ids.as_slice()?;
    let m = py.detach(|| evaluate_event(ev, ids, &config)).map_err(to_py)?;
    json_to_py(py, &serde_json::to_string(&m).expect("metrics serialise"))
}

/// Adds the metric functions to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(edge_metrics, m)?)?;
    m.add_function(wrap_pyfunction!(track_metrics, m)?)?;
    Ok(())
}
