//! `trackgnn inspect`: realism statistics (beside MISSION.md's real TrackML values) and
//! consistency checks of one event or a directory of events.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use serde_json::json;
use trackgnn_trackml::csv::{EventFiles, FileKind, ReadOptions, discover_events, read_event};
use trackgnn_trackml::summary::{ConsistencyChecks, RealismAccumulator, Tolerance, compare_with_trackml};
use trackgnn_trackml::{Detector, SolenoidField};

use crate::progress;
use crate::util::print_json;

/// `trackgnn inspect`.
#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// An event directory, or one event (any of its files, or its `eventNNNNNNNNN` prefix).
    pub path: std::path::PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Central field \[T\] for the helix check (the TrackML profile is scaled to it).
    #[arg(long, default_value_t = 2.0)]
    pub field_tesla: f64,
    /// Geometry for the checks; by default `detectors.csv` next to the events, else the
    /// built-in TrackML geometry.
    #[arg(long, value_name = "FILE")]
    pub detector: Option<std::path::PathBuf>,
}

/// The events a path names: a directory of events, or one event by a file or its prefix.
fn events_at(path: &Path) -> Result<(PathBuf, Vec<EventFiles>)> {
    if path.is_dir() {
        return Ok((path.to_path_buf(), discover_events(path)?));
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let digits: String = name.strip_prefix("event").unwrap_or("").chars().take_while(|c| c.is_ascii_digit()).collect();
    if digits.is_empty() {
        if !path.exists() {
            bail!("{}: no such file or directory", path.display());
        }
        bail!("{}: not an event directory or an `eventNNNNNNNNN-…` file", path.display());
    }
    let id: u64 = digits.parse().with_context(|| format!("{}: event number too large", path.display()))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let files = EventFiles::new(&dir, id);
    files.path(FileKind::Hits)?;
    Ok((dir, vec![files]))
}

pub fn run(a: InspectArgs) -> Result<ExitCode> {
    let (dir, events) = events_at(&a.path)?;
    let (det, det_name) = match &a.detector {
        Some(p) => (Detector::from_csv(p)?, p.display().to_string()),
        None if dir.join("detectors.csv").exists() => {
            let p = dir.join("detectors.csv");
            (Detector::from_csv(&p)?, p.display().to_string())
        }
        None => (Detector::trackml(), "built-in TrackML".to_string()),
    };
    let field = SolenoidField::trackml(a.field_tesla);
    let mut acc = RealismAccumulator::default();
    let mut checks = ConsistencyChecks::default();
    let pb = progress::bar(events.len() as u64, "inspect");
    for files in &events {
        let opts = ReadOptions {
            truth: files.has(FileKind::Truth),
            particles: files.has(FileKind::Particles),
            cells: files.has(FileKind::Cells),
        };
        let event = read_event(files, opts)?;
        acc.add(&event, Some(&det));
        checks.add(&event, Some(&det), Some(&field));
        pb.inc(1);
    }
    pb.finish_and_clear();
    let stats = acc.finish();
    let rows = compare_with_trackml(&stats);
    let agreeing = rows.iter().filter(|r| r.agrees).count();
    if a.json {
        print_json(&json!({
            "path": a.path, "events": stats.events, "detector": det_name,
            "stats": stats, "realism": rows,
            "realism_rows": rows.len(), "realism_rows_agreeing": agreeing,
            "checks": checks.results(), "all_checks_passed": checks.all_passed(),
        }));
    } else {
        println!("{} event(s) in {} (geometry: {det_name})", stats.events, dir.display());
        println!(
            "per event: {:.0} hits, {:.0} particles, {:.0} with hits",
            stats.hits_per_event, stats.particles_per_event, stats.particles_with_hits_per_event
        );
        println!("\n{:<52} {:>10} {:>15}  agrees", "realism (MISSION.md table)", "this data", "real TrackML");
        for r in &rows {
            let real = match r.tolerance {
                Tolerance::AtMost => format!("<= {}", r.real_high),
                _ if r.real_low == r.real_high => format!("{}", r.real_low),
                _ => format!("{}-{}", r.real_low, r.real_high),
            };
            println!("{:<52} {:>10.4} {:>15}  {}", r.label, r.value, real, if r.agrees { "yes" } else { "NO" });
        }
        println!("{agreeing} of {} rows agree (fractions ±0.03, other figures ±15%)", rows.len());
        let floors: Vec<String> =
            [("short_strip_barrel", "short-strip barrel z"), ("long_strip_barrel", "long-strip barrel z")]
                .iter()
                .filter_map(|(g, label)| {
                    stats.residuals.get(*g).map(|r| format!("{label} {:.4} mm", r.second_centroid_limit_mm))
                })
                .collect();
        if !floors.is_empty() {
            println!("lowest residual any cluster centre allows at these crossing angles: {}", floors.join(", "));
        }
        println!("\nconsistency checks");
        for c in checks.results() {
            println!(
                "  {} {:<36} {} checked, {} failed  {}",
                if c.passed { "ok  " } else { "FAIL" },
                c.name,
                c.checked,
                c.failed,
                c.detail
            );
        }
    }
    Ok(if checks.all_passed() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
