//! Small helpers shared by subcommands: thread pools, geometry loading, JSON output.

use std::path::Path;

use anyhow::{Context, Result};
use trackgnn_trackml::Detector;

/// A rayon pool with `threads` workers (default: rayon's choice, which follows
/// RAYON_NUM_THREADS).
pub fn thread_pool(threads: Option<usize>) -> Result<rayon::ThreadPool> {
    let mut b = rayon::ThreadPoolBuilder::new();
    if let Some(t) = threads {
        anyhow::ensure!(t > 0, "--threads must be at least 1");
        b = b.num_threads(t);
    }
    b.build().context("building the thread pool")
}

/// The detector from `--detector FILE`, or the built-in TrackML geometry.
pub fn load_detector(path: Option<&Path>) -> Result<Detector> {
    match path {
        Some(p) => Detector::from_csv(p).with_context(|| format!("loading the geometry {}", p.display())),
        None => Ok(Detector::trackml()),
    }
}

/// Prints one JSON object on stdout.
pub fn print_json(value: &serde_json::Value) {
    println!("{}", serde_json::to_string_pretty(value).expect("JSON values serialise"));
}

/// Prints a report: one JSON object with `--json`, else its text.
pub fn print_report<R: serde::Serialize + std::fmt::Display>(report: &R, json: bool) -> Result<()> {
    if json {
        print_json(&serde_json::to_value(report)?);
    } else {
        print!("{report}");
    }
    Ok(())
}

/// Writes `bytes` to a temporary name next to `path`, then renames it into place, so a crash
/// never leaves a partial file under the real name ([`trackgnn_trackml::atomic::write`]).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    trackgnn_trackml::atomic::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}
