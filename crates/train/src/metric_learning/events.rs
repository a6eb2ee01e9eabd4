//! The events the learned stages train on: read and prepared in parallel, the last ones split
//! off for validation.

use std::path::Path;

use rayon::prelude::*;
use trackgnn_graph::features::FeatureConfig;
use trackgnn_trackml::csv::{EventFiles, ReadOptions, read_event};
use trackgnn_trackml::geometry::Detector;

use super::PreparedEvent;
use crate::error::{Error, Result};

/// Reads the events `files` of the directory `dir` with truth and particles (and cells if a
/// feature needs them) and prepares them ([`PreparedEvent::new`]) in parallel on the current
/// rayon pool; returns (training, validation), the validation events being the last
/// `val_events` (default: a fifth), at least one of each.
///
/// # Errors
/// Fewer than two events, an event that does not read or has no truth (naming it).
pub fn prepare_events(
    dir: &Path,
    files: &[EventFiles],
    det: &Detector,
    features: &FeatureConfig,
    train_pt_min: f64,
    val_events: Option<usize>,
) -> Result<(Vec<PreparedEvent>, Vec<PreparedEvent>)> {
    if files.len() < 2 {
        return Err(Error::Config(format!(
            "{}: needs at least 2 events (training and validation), found {}",
            dir.display(),
            files.len()
        )));
    }
    let opts =
        ReadOptions { truth: true, particles: true, cells: features.features.iter().any(|f| f.name.needs_cells()) };
    let mut events: Vec<PreparedEvent> = files
        .par_iter()
        .map(|f| {
            let event = read_event(f, opts).map_err(trackgnn_graph::Error::from)?;
            PreparedEvent::new(&event, det, features, train_pt_min)
                .map_err(|e| Error::InEvent { event_id: f.event_id, source: Box::new(e) })
        })
        .collect::<Result<_>>()?;
    let n_val = val_events.unwrap_or(events.len() / 5).clamp(1, events.len() - 1);
    let val = events.split_off(events.len() - n_val);
    Ok((events, val))
}
