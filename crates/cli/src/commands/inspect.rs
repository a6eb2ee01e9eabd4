//! `trackgnn inspect`: realism statistics (beside the real TrackML values of docs/references.md) and
//! consistency checks of one event or a directory of events ([`trackgnn_trackml::summary`]
//! reads, compares and formats them; this command parses and prints).

use std::cell::OnceCell;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use indicatif::ProgressBar;
use trackgnn_trackml::summary::{DataSet, Inspection, events_at};

use crate::progress;
use crate::util::print_json;

/// `trackgnn inspect`.
#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// An event directory, or one event (any of its files, or its `eventNNNNNNNNN` prefix).
    pub path: std::path::PathBuf,
    #[command(flatten)]
    pub json: crate::cli::JsonArg,
    /// Central field \[T\] for the helix check (the TrackML profile is scaled to it).
    #[arg(long, default_value_t = 2.0)]
    pub field_tesla: f64,
    /// Geometry for the checks; by default `detectors.csv` next to the events, else the
    /// built-in TrackML geometry.
    #[arg(long, value_name = "FILE")]
    pub detector: Option<std::path::PathBuf>,
    /// Another event directory (or event) to compare with, row by row, in place of the reference's
    /// real TrackML values (e.g. real TrackML files); its geometry is its own `detectors.csv`,
    /// else `--detector`, else the built-in one.
    #[arg(long, value_name = "PATH")]
    pub against: Option<std::path::PathBuf>,
}

pub fn run(a: InspectArgs) -> Result<ExitCode> {
    let read = |path: &Path, detector: Option<&Path>| -> Result<DataSet> {
        let pb: OnceCell<ProgressBar> = OnceCell::new();
        let data = DataSet::read(path, detector, a.field_tesla, &|total| {
            pb.get_or_init(|| progress::bar(total as u64, "inspect")).inc(1)
        })?;
        if let Some(pb) = pb.get() {
            pb.finish_and_clear();
        }
        Ok(data)
    };
    let data = read(&a.path, a.detector.as_deref())?;
    let other = match &a.against {
        Some(p) => {
            // The other data set's own geometry first: it may be the real detector.
            let own = events_at(p)?.0.join("detectors.csv");
            let det = if own.exists() { Some(own) } else { a.detector.clone() };
            Some((p.clone(), read(p, det.as_deref())?))
        }
        None => None,
    };
    let inspection = Inspection::new(&a.path, data, other);
    if a.json.json {
        print_json(&serde_json::to_value(&inspection)?);
    } else {
        print!("{inspection}");
    }
    Ok(if inspection.data.passed() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
