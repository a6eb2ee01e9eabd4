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
        return Err(Error::TooFewEvents { dir: dir.to_path_buf(), found: files.len() });
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
    let (_, n_val) = split_sizes(events.len(), val_events);
    let val = events.split_off(events.len() - n_val);
    Ok((events, val))
}

/// How [`prepare_events`] splits `n` events: (training, validation), the validation events
/// `val_events` or a fifth, at least one of each (fewer than 2 events: all training).
pub fn split_sizes(n: usize, val_events: Option<usize>) -> (usize, usize) {
    if n < 2 {
        return (n, 0);
    }
    let n_val = val_events.unwrap_or(n / 5).clamp(1, n - 1);
    (n - n_val, n_val)
}

#[cfg(test)]
mod tests {
    use super::split_sizes;

    #[test]
    fn a_fifth_validates_with_at_least_one_of_each() {
        assert_eq!(split_sizes(100, None), (80, 20));
        assert_eq!(split_sizes(4, None), (3, 1));
        assert_eq!(split_sizes(12, Some(2)), (10, 2));
        assert_eq!(split_sizes(5, Some(9)), (1, 4));
        assert_eq!(split_sizes(1, None), (1, 0));
    }
}
