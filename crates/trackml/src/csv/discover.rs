//! Finding events in a directory by their `eventNNNNNNNNN-` file prefix.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The `eventNNNNNNNNN` prefix of an event's files (nine digits, zero padded).
pub fn event_prefix(event_id: u64) -> String {
    format!("event{event_id:09}")
}

/// The per-event CSV files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// `-hits.csv`.
    Hits,
    /// `-truth.csv`.
    Truth,
    /// `-particles.csv`.
    Particles,
    /// `-cells.csv`.
    Cells,
}

impl FileKind {
    /// Every kind, in the order an event is read.
    pub const ALL: [FileKind; 4] = [FileKind::Hits, FileKind::Truth, FileKind::Particles, FileKind::Cells];

    /// The name after the prefix's dash: `hits`, `truth`, `particles` or `cells`.
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Hits => "hits",
            FileKind::Truth => "truth",
            FileKind::Particles => "particles",
            FileKind::Cells => "cells",
        }
    }

    /// The file name of this kind for `prefix`: `{prefix}-{name}.csv`, plus `.gz` if `gzip`.
    pub fn file_name(self, prefix: &str, gzip: bool) -> String {
        let gz = if gzip { ".gz" } else { "" };
        format!("{prefix}-{}.csv{gz}", self.name())
    }
}

/// The files of one event, found by its `eventNNNNNNNNN-` prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventFiles {
    /// The number in the prefix.
    pub event_id: u64,
    /// The directory holding the files.
    pub dir: PathBuf,
    /// The prefix as spelled in the file names, e.g. `event000000123`.
    pub prefix: String,
}

impl EventFiles {
    /// The files of event `event_id` in `dir`, with the standard nine-digit prefix (the files
    /// need not exist yet).
    pub fn new(dir: impl Into<PathBuf>, event_id: u64) -> EventFiles {
        EventFiles { event_id, dir: dir.into(), prefix: event_prefix(event_id) }
    }

    /// The path of the `kind` file: the plain `.csv` if it exists, else the `.csv.gz`.
    ///
    /// Errors: [`Error::MissingFile`] listing both names if neither exists.
    pub fn path(&self, kind: FileKind) -> Result<PathBuf> {
        let plain = self.dir.join(kind.file_name(&self.prefix, false));
        if plain.is_file() {
            return Ok(plain);
        }
        let gz = self.dir.join(kind.file_name(&self.prefix, true));
        if gz.is_file() {
            return Ok(gz);
        }
        Err(Error::MissingFile { tried: format!("{}, {}", plain.display(), gz.display()), path: plain })
    }

    /// True if the `kind` file exists, plain or gzip.
    pub fn has(&self, kind: FileKind) -> bool {
        self.path(kind).is_ok()
    }
}

/// The event id of a hits file name (`event<digits>-hits.csv` or `.csv.gz`) and its prefix.
fn parse_hits_name(name: &str) -> Option<(u64, &str)> {
    let stem = name.strip_suffix("-hits.csv").or_else(|| name.strip_suffix("-hits.csv.gz"))?;
    let digits = stem.strip_prefix("event")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((digits.parse().ok()?, stem))
}

/// The events in `dir`, sorted by event id: an event exists if its hits file (plain or
/// `.gz`) does. Other files are ignored.
///
/// Errors: [`Error::MissingFile`] if `dir` does not exist or holds no event,
/// [`Error::Io`] if it cannot be listed.
pub fn discover_events(dir: &Path) -> Result<Vec<EventFiles>> {
    let entries = std::fs::read_dir(dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::missing(dir),
        _ => Error::io(dir, e),
    })?;
    let mut events = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let name = entry.file_name();
        let Some((event_id, prefix)) = name.to_str().and_then(parse_hits_name) else {
            continue;
        };
        if entry.path().is_file() {
            events.push(EventFiles { event_id, dir: dir.to_path_buf(), prefix: prefix.to_string() });
        }
    }
    if events.is_empty() {
        return Err(Error::MissingFile {
            path: dir.join("eventNNNNNNNNN-hits.csv"),
            tried: format!("eventNNNNNNNNN-hits.csv or eventNNNNNNNNN-hits.csv.gz in {}", dir.display()),
        });
    }
    // An event with both a plain and a gzip hits file is listed once.
    events.sort_by(|a, b| (a.event_id, &a.prefix).cmp(&(b.event_id, &b.prefix)));
    events.dedup_by(|a, b| a.prefix == b.prefix);
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csv::testutil::{assert_err, write_text};

    #[test]
    fn names() {
        assert_eq!(event_prefix(123), "event000000123");
        assert_eq!(FileKind::Truth.file_name("event000000001", true), "event000000001-truth.csv.gz");
        assert_eq!(parse_hits_name("event000000123-hits.csv"), Some((123, "event000000123")));
        assert_eq!(parse_hits_name("event7-hits.csv.gz"), Some((7, "event7")));
        for bad in ["event-hits.csv", "eventx1-hits.csv", "event1-truth.csv", "event1-hits.csv.bak", "xevent1-hits.csv"]
        {
            assert_eq!(parse_hits_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn finds_plain_and_gz_events() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for name in [
            "event000000010-hits.csv.gz",
            "event000000010-truth.csv",
            "event000000002-hits.csv",
            "event000000002-hits.csv.gz",
            "event000000002-cells.csv.gz",
            "event000000003-truth.csv",
            "detectors.csv",
            "README",
            ".event000000004-hits.csv.tmp-1-0",
        ] {
            write_text(d, name, "x\n");
        }
        std::fs::create_dir(d.join("event000000005-hits.csv")).unwrap();
        let events = discover_events(d).unwrap();
        let ids: Vec<u64> = events.iter().map(|e| e.event_id).collect();
        assert_eq!(ids, [2, 10]);
        let (e2, e10) = (&events[0], &events[1]);
        assert_eq!(e2.prefix, "event000000002");
        assert_eq!(e2.path(FileKind::Hits).unwrap(), d.join("event000000002-hits.csv"));
        assert_eq!(e2.path(FileKind::Cells).unwrap(), d.join("event000000002-cells.csv.gz"));
        assert_eq!(e10.path(FileKind::Hits).unwrap(), d.join("event000000010-hits.csv.gz"));
        assert!(e10.has(FileKind::Truth) && !e10.has(FileKind::Cells));
        assert_err(
            &e10.path(FileKind::Particles).unwrap_err(),
            |e| matches!(e, Error::MissingFile { .. }),
            &["event000000010-particles.csv, ", "event000000010-particles.csv.gz"],
        );
    }

    #[test]
    fn no_events_and_no_dir() {
        let dir = tempfile::tempdir().unwrap();
        write_text(dir.path(), "event1-truth.csv", "x\n");
        let e = discover_events(dir.path()).unwrap_err();
        assert_err(&e, |e| matches!(e, Error::MissingFile { .. }), &[&dir.path().display().to_string(), "hits.csv"]);
        let gone = dir.path().join("nope");
        let e = discover_events(&gone).unwrap_err();
        assert_err(&e, |e| matches!(e, Error::MissingFile { .. }), &["nope"]);
    }
}
