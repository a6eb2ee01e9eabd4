//! `trackgnn inspect`: realism statistics (beside MISSION.md's real TrackML values) and
//! consistency checks of one event or a directory of events.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use serde_json::json;
use trackgnn_trackml::csv::{EventFiles, FileKind, ReadOptions, discover_events, read_event};
use trackgnn_trackml::summary::{
    AgainstRow, CheckKind, ConsistencyChecks, RealismAccumulator, RealismStats, ReferenceRow, compare_with,
    compare_with_trackml,
};
use trackgnn_trackml::{Detector, SolenoidField};

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
    /// Another event directory (or event) to compare with, row by row, in place of MISSION.md's
    /// real TrackML values (e.g. real TrackML files); its geometry is its own `detectors.csv`,
    /// else `--detector`, else the built-in one.
    #[arg(long, value_name = "PATH")]
    pub against: Option<std::path::PathBuf>,
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

/// The marker `trackgnn simulate` writes beside its events: events in a directory that has it
/// were made by the generator, so its model checks decide the exit code.
const GENERATOR_MARKER: &str = "simulation.toml";

/// One data set read and summarised.
struct DataSet {
    dir: PathBuf,
    detector: String,
    generated: bool,
    stats: RealismStats,
    checks: ConsistencyChecks,
}

impl DataSet {
    /// True if the checks that apply to this data set passed: every check on generated events,
    /// the format checks (properties of any TrackML event) on others.
    fn passed(&self) -> bool {
        if self.generated { self.checks.all_passed() } else { self.checks.passed(CheckKind::Format) }
    }
}

fn read_data_set(path: &Path, detector: Option<&Path>, field_tesla: f64) -> Result<DataSet> {
    let (dir, events) = events_at(path)?;
    let (det, det_name) = match detector {
        Some(p) => (Detector::from_csv(p)?, p.display().to_string()),
        None if dir.join("detectors.csv").exists() => {
            let p = dir.join("detectors.csv");
            (Detector::from_csv(&p)?, p.display().to_string())
        }
        None => (Detector::trackml(), "built-in TrackML".to_string()),
    };
    let field = SolenoidField::trackml(field_tesla);
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
    let generated = dir.join(GENERATOR_MARKER).exists();
    Ok(DataSet { dir, detector: det_name, generated, stats: acc.finish(), checks })
}

pub fn run(a: InspectArgs) -> Result<ExitCode> {
    let data = read_data_set(&a.path, a.detector.as_deref(), a.field_tesla)?;
    let other = match &a.against {
        Some(p) => {
            // The other data set's own geometry first: it may be the real detector.
            let own = events_at(p)?.0.join("detectors.csv");
            let det = if own.exists() { Some(own) } else { a.detector.clone() };
            Some(read_data_set(p, det.as_deref(), a.field_tesla)?)
        }
        None => None,
    };
    let stats = &data.stats;
    let rows = compare_with_trackml(stats);
    let agreeing = rows.iter().filter(|r| r.agrees).count();
    let against = other.as_ref().map(|o| compare_with(stats, &o.stats));
    if a.json.json {
        let mut out = json!({
            "path": a.path, "events": stats.events, "detector": data.detector,
            "generated": data.generated,
            "stats": stats, "realism": rows,
            "realism_rows": rows.len(), "realism_rows_agreeing": agreeing,
            "checks": data.checks.results(), "all_checks_passed": data.checks.all_passed(),
            "format_checks_passed": data.checks.passed(CheckKind::Format),
            "generator_model_checks_passed": data.checks.passed(CheckKind::GeneratorModel),
            "checks_decide_exit": data.passed(),
        });
        if let (Some(o), Some(rows), Some(p)) = (&other, &against, &a.against) {
            let extra = json!({
                "against": p, "against_events": o.stats.events, "against_detector": o.detector,
                "against_generated": o.generated, "against_stats": o.stats,
                "against_rows": rows, "against_rows_agreeing": rows.iter().filter(|r| r.agrees).count(),
                "against_checks": o.checks.results(),
            });
            out.as_object_mut().expect("an object").extend(extra.as_object().expect("an object").clone());
        }
        print_json(&out);
    } else {
        print_data_set("", &data);
        match (&other, &against) {
            (Some(o), Some(against)) => {
                print_data_set("against: ", o);
                print_against(against, &rows);
            }
            _ => print_reference(&rows),
        }
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
        print_checks(&data);
    }
    Ok(if data.passed() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn print_data_set(prefix: &str, d: &DataSet) {
    let s = &d.stats;
    println!(
        "{prefix}{} event(s) in {} (geometry: {}; {})",
        s.events,
        d.dir.display(),
        d.detector,
        if d.generated { "written by trackgnn simulate" } else { "not written by trackgnn simulate" }
    );
    println!(
        "{prefix}per event: {:.0} hits, {:.0} particles, {:.0} with hits",
        s.hits_per_event, s.particles_per_event, s.particles_with_hits_per_event
    );
}

fn real_value(r: &ReferenceRow) -> String {
    if r.real_low == r.real_high { format!("{}", r.real_low) } else { format!("{}-{}", r.real_low, r.real_high) }
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "NO" }
}

fn print_reference(rows: &[ReferenceRow]) {
    println!("\n{:<52} {:>10} {:>15}  agrees", "realism (MISSION.md table)", "this data", "real TrackML");
    for r in rows {
        println!("{:<52} {:>10.4} {:>15}  {}", r.label, r.value, real_value(r), yes_no(r.agrees));
    }
    let agreeing = rows.iter().filter(|r| r.agrees).count();
    println!("{agreeing} of {} rows agree (fractions ±0.03, other figures ±15%)", rows.len());
}

fn print_against(rows: &[AgainstRow], reference: &[ReferenceRow]) {
    println!(
        "\n{:<52} {:>10} {:>10} {:>10}  agrees  {:>11}",
        "realism (MISSION.md rows)", "this data", "other", "difference", "MISSION.md"
    );
    for (r, m) in rows.iter().zip(reference) {
        println!(
            "{:<52} {:>10.4} {:>10.4} {:>+10.4}  {:<6}  {:>11}",
            r.label,
            r.value,
            r.other,
            r.difference,
            yes_no(r.agrees),
            real_value(m)
        );
    }
    let agreeing = rows.iter().filter(|r| r.agrees).count();
    println!("{agreeing} of {} rows agree with the other data set (fractions ±0.03, other figures ±15%)", rows.len());
}

fn print_checks(d: &DataSet) {
    println!(
        "\nconsistency checks (format: any TrackML event; model: trackgnn's generator, decides the exit code only on generated events)"
    );
    for c in d.checks.results() {
        let kind = match c.kind {
            CheckKind::Format => "format",
            CheckKind::GeneratorModel => "model ",
        };
        let status = match (c.passed, c.kind == CheckKind::Format || d.generated) {
            (true, _) => "ok  ",
            (false, true) => "FAIL",
            (false, false) => "info",
        };
        println!("  {status} {kind} {:<40} {} checked, {} failed  {}", c.name, c.checked, c.failed, c.detail);
    }
}
