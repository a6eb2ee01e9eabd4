//! A data set read and summarised for `trackgnn inspect`: the events a path names, their
//! realism statistics and consistency checks ([`DataSet`]), and the report that sets them beside
//! the realism table's real TrackML values or another data set ([`Inspection`]: its JSON is
//! `inspect --json`, its [`Display`](fmt::Display) the text).

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{
    AgainstRow, CheckKind, CheckResult, ConsistencyChecks, RealismAccumulator, RealismStats, ReferenceRow,
    compare_with, compare_with_trackml,
};
use crate::csv::{EventFiles, FileKind, ReadOptions, discover_events, read_event};
use crate::error::{Error, Result};
use crate::{Detector, SolenoidField};

/// The marker `trackgnn simulate` writes beside its events: events in a directory that has it
/// were made by the generator, so its model checks decide the exit code.
pub const GENERATOR_MARKER: &str = "simulation.toml";

/// The events a path names: a directory of events, or one event by a file or its
/// `eventNNNNNNNNN` prefix; and the directory that holds them.
pub fn events_at(path: &Path) -> Result<(PathBuf, Vec<EventFiles>)> {
    if path.is_dir() {
        return Ok((path.to_path_buf(), discover_events(path)?));
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let digits: String = name.strip_prefix("event").unwrap_or("").chars().take_while(|c| c.is_ascii_digit()).collect();
    let invalid = |message: &str| Error::Inconsistent { path: path.to_path_buf(), message: message.into() };
    if digits.is_empty() {
        if !path.exists() {
            return Err(Error::missing(path));
        }
        return Err(invalid("not an event directory or an `eventNNNNNNNNN-…` file"));
    }
    let id: u64 = digits.parse().map_err(|_| invalid("event number too large"))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let files = EventFiles::new(&dir, id);
    files.path(FileKind::Hits)?;
    Ok((dir, vec![files]))
}

/// One data set read and summarised.
#[derive(Debug)]
pub struct DataSet {
    /// The directory of the events.
    pub dir: PathBuf,
    /// The geometry used: a detectors.csv, or `built-in TrackML`.
    pub detector: String,
    /// Whether `trackgnn simulate` wrote the events ([`GENERATOR_MARKER`]).
    pub generated: bool,
    /// The realism statistics.
    pub stats: RealismStats,
    /// The consistency checks.
    pub checks: ConsistencyChecks,
}

impl DataSet {
    /// Reads the events `path` names with the geometry `detector` (else the directory's
    /// `detectors.csv`, else the built-in one) and a TrackML field of `field_tesla` at the
    /// centre; `progress(total)` is called once per event read.
    pub fn read(path: &Path, detector: Option<&Path>, field_tesla: f64, progress: &dyn Fn(usize)) -> Result<DataSet> {
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
        for files in &events {
            let opts = ReadOptions {
                truth: files.has(FileKind::Truth),
                particles: files.has(FileKind::Particles),
                cells: files.has(FileKind::Cells),
            };
            let event = read_event(files, opts)?;
            acc.add(&event, Some(&det));
            checks.add(&event, Some(&det), Some(&field));
            progress(events.len());
        }
        let generated = dir.join(GENERATOR_MARKER).exists();
        Ok(DataSet { dir, detector: det_name, generated, stats: acc.finish(), checks })
    }

    /// True if the checks that apply to this data set passed: every check on generated events,
    /// the format checks (properties of any TrackML event) on others.
    pub fn passed(&self) -> bool {
        if self.generated { self.checks.all_passed() } else { self.checks.passed(CheckKind::Format) }
    }
}

/// A data set against the realism table's real TrackML values, or against another data set.
#[derive(Debug)]
pub struct Inspection {
    /// The path asked for.
    pub path: PathBuf,
    /// The data set.
    pub data: DataSet,
    /// Its rows of the realism table.
    pub realism: Vec<ReferenceRow>,
    /// The other data set, its path, and the rows compared with it.
    pub against: Option<(PathBuf, DataSet, Vec<AgainstRow>)>,
}

/// The JSON of an [`Inspection`] (`inspect --json`).
#[derive(Serialize)]
struct InspectionJson<'a> {
    path: &'a Path,
    events: u64,
    detector: &'a str,
    generated: bool,
    stats: &'a RealismStats,
    realism: &'a [ReferenceRow],
    realism_rows: usize,
    realism_rows_agreeing: usize,
    checks: &'a [CheckResult],
    all_checks_passed: bool,
    format_checks_passed: bool,
    generator_model_checks_passed: bool,
    checks_decide_exit: bool,
    #[serde(flatten)]
    against: Option<AgainstJson<'a>>,
}

#[derive(Serialize)]
struct AgainstJson<'a> {
    against: &'a Path,
    against_events: u64,
    against_detector: &'a str,
    against_generated: bool,
    against_stats: &'a RealismStats,
    against_rows: &'a [AgainstRow],
    against_rows_agreeing: usize,
    against_checks: &'a [CheckResult],
}

impl Inspection {
    /// Compares `data` with the realism table, and with `against` (its path and data) if given.
    pub fn new(path: &Path, data: DataSet, against: Option<(PathBuf, DataSet)>) -> Inspection {
        let realism = compare_with_trackml(&data.stats);
        let against = against.map(|(p, o)| {
            let rows = compare_with(&data.stats, &o.stats);
            (p, o, rows)
        });
        Inspection { path: path.to_path_buf(), data, realism, against }
    }
}

/// The JSON of `inspect --json`: the data set's figures, then the other data set's as
/// `against_*` keys.
impl Serialize for Inspection {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let (d, s) = (&self.data, &self.data.stats);
        let json = InspectionJson {
            path: &self.path,
            events: s.events,
            detector: &d.detector,
            generated: d.generated,
            stats: s,
            realism: &self.realism,
            realism_rows: self.realism.len(),
            realism_rows_agreeing: self.realism.iter().filter(|r| r.agrees).count(),
            checks: d.checks.results(),
            all_checks_passed: d.checks.all_passed(),
            format_checks_passed: d.checks.passed(CheckKind::Format),
            generator_model_checks_passed: d.checks.passed(CheckKind::GeneratorModel),
            checks_decide_exit: d.passed(),
            against: self.against.as_ref().map(|(p, o, rows)| AgainstJson {
                against: p,
                against_events: o.stats.events,
                against_detector: &o.detector,
                against_generated: o.generated,
                against_stats: &o.stats,
                against_rows: rows,
                against_rows_agreeing: rows.iter().filter(|r| r.agrees).count(),
                against_checks: o.checks.results(),
            }),
        };
        json.serialize(serializer)
    }
}

fn real_value(r: &ReferenceRow) -> String {
    if r.real_low == r.real_high { format!("{}", r.real_low) } else { format!("{}-{}", r.real_low, r.real_high) }
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "NO" }
}

fn write_data_set(out: &mut fmt::Formatter<'_>, prefix: &str, d: &DataSet) -> fmt::Result {
    let s = &d.stats;
    writeln!(
        out,
        "{prefix}{} event(s) in {} (geometry: {}; {})",
        s.events,
        d.dir.display(),
        d.detector,
        if d.generated { "written by trackgnn simulate" } else { "not written by trackgnn simulate" }
    )?;
    writeln!(
        out,
        "{prefix}per event: {:.0} hits, {:.0} particles, {:.0} with hits",
        s.hits_per_event, s.particles_per_event, s.particles_with_hits_per_event
    )
}

impl fmt::Display for Inspection {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows = &self.realism;
        write_data_set(out, "", &self.data)?;
        if let Some((_, o, against)) = &self.against {
            write_data_set(out, "against: ", o)?;
            writeln!(
                out,
                "\n{:<52} {:>10} {:>10} {:>10}  agrees  {:>11}",
                "realism (reference rows)", "this data", "other", "difference", "real TrackML"
            )?;
            for (r, m) in against.iter().zip(rows) {
                writeln!(
                    out,
                    "{:<52} {:>10.4} {:>10.4} {:>+10.4}  {:<6}  {:>11}",
                    r.label,
                    r.value,
                    r.other,
                    r.difference,
                    yes_no(r.agrees),
                    real_value(m)
                )?;
            }
            let agreeing = against.iter().filter(|r| r.agrees).count();
            writeln!(
                out,
                "{agreeing} of {} rows agree with the other data set (fractions ±0.03, other figures ±15%)",
                against.len()
            )?;
        } else {
            writeln!(out, "\n{:<52} {:>10} {:>15}  agrees", "realism (reference table)", "this data", "real TrackML")?;
            for r in rows {
                writeln!(out, "{:<52} {:>10.4} {:>15}  {}", r.label, r.value, real_value(r), yes_no(r.agrees))?;
            }
            let agreeing = rows.iter().filter(|r| r.agrees).count();
            writeln!(out, "{agreeing} of {} rows agree (fractions ±0.03, other figures ±15%)", rows.len())?;
        }
        let floors: Vec<String> =
            [("short_strip_barrel", "short-strip barrel z"), ("long_strip_barrel", "long-strip barrel z")]
                .iter()
                .filter_map(|(g, label)| {
                    self.data.stats.residuals.get(*g).map(|r| format!("{label} {:.4} mm", r.second_centroid_limit_mm))
                })
                .collect();
        if !floors.is_empty() {
            writeln!(out, "lowest residual any cluster centre allows at these crossing angles: {}", floors.join(", "))?;
        }
        writeln!(
            out,
            "\nconsistency checks (format: any TrackML event; model: trackgnn's generator, decides the exit code only on generated events)"
        )?;
        for c in self.data.checks.results() {
            let kind = match c.kind {
                CheckKind::Format => "format",
                CheckKind::GeneratorModel => "model ",
            };
            let status = match (c.passed, c.kind == CheckKind::Format || self.data.generated) {
                (true, _) => "ok  ",
                (false, true) => "FAIL",
                (false, false) => "info",
            };
            writeln!(out, "  {status} {kind} {:<40} {} checked, {} failed  {}", c.name, c.checked, c.failed, c.detail)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_at_names_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let e = events_at(&dir.path().join("nothing")).unwrap_err().to_string();
        assert!(e.ends_with("nothing: no such file or directory"), "{e}");
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        let e = events_at(&dir.path().join("notes.txt")).unwrap_err().to_string();
        assert!(e.contains("not an event directory"), "{e}");
        let e = events_at(&dir.path().join("event99999999999999999999999-hits.csv")).unwrap_err().to_string();
        assert!(e.contains("event number too large"), "{e}");
        let e = events_at(&dir.path().join("event000000001-hits.csv")).unwrap_err().to_string();
        assert!(e.contains("event000000001-hits.csv"), "the missing hits file is named: {e}");
        let e = events_at(dir.path()).unwrap_err().to_string();
        assert!(e.contains("eventNNNNNNNNN-hits.csv"), "a directory without events: {e}");
    }
}
