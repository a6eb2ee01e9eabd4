//! Graph file names, and finding the graphs of a directory.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The file name of event `event_id`'s graph: `event{event_id:09}.graph`.
pub fn graph_file_name(event_id: u64) -> String {
    format!("event{event_id:09}.graph")
}

/// The file name of sector `sector` of event `event_id`: `event<9 digits>-s<3 digits>.graph`.
pub fn sector_graph_file_name(event_id: u64, sector: u32) -> String {
    format!("event{event_id:09}-s{sector:03}.graph")
}

/// The event id and sector (`None` for a whole event) in a graph file name
/// (`event<digits>.graph` or `event<digits>-s<digits>.graph`), or `None` if `name` is not one.
pub fn parse_graph_file_key(name: &str) -> Option<(u64, Option<u32>)> {
    let stem = name.strip_prefix("event")?.strip_suffix(".graph")?;
    let (digits, sector) = match stem.split_once("-s") {
        Some((d, s)) => (d, Some(s)),
        None => (stem, None),
    };
    let numeric = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if !numeric(digits) || sector.is_some_and(|s| !numeric(s)) {
        return None;
    }
    Some((
        digits.parse().ok()?,
        match sector {
            Some(s) => Some(s.parse().ok()?),
            None => None,
        },
    ))
}

/// The event id in a graph file name (whole event or sector), or `None` if `name` is not one.
/// The inverse of [`graph_file_name`].
pub fn parse_graph_file_name(name: &str) -> Option<u64> {
    parse_graph_file_key(name).map(|k| k.0)
}

/// The graph files in `dir` (not its subdirectories), as `(event_id, path)` sorted by event id.
///
/// Other files, including the temporaries of a writer (`.event….graph.tmp-…`), are ignored.
///
/// Errors: [`Error::Io`] if `dir` cannot be listed; [`Error::NotFound`] if it holds no graph
/// file; [`Error::Inconsistent`] if two files name the same event (`event1.graph` and
/// `event000000001.graph`).
pub fn discover_graphs(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let Some(key) = entry.file_name().to_str().and_then(parse_graph_file_key) else {
            continue;
        };
        let path = entry.path();
        if path.is_file() {
            found.push((key, path));
        }
    }
    if found.is_empty() {
        return Err(Error::NotFound { dir: dir.to_path_buf(), what: "graph files (event<id>.graph)" });
    }
    found.sort();
    if let Some(w) = found
        .windows(2)
        .find(|w| w[0].0 == w[1].0 || (w[0].0.0 == w[1].0.0 && w[0].0.1.is_none() != w[1].0.1.is_none()))
    {
        return Err(Error::inconsistent(
            dir,
            format!("two graph files for event {}: {} and {}", w[0].0.0, w[0].1.display(), w[1].1.display()),
        ));
    }
    Ok(found.into_iter().map(|((id, _), p)| (id, p)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(graph_file_name(42), "event000000042.graph");
        assert_eq!(graph_file_name(1_234_567_890), "event1234567890.graph");
        for id in [0, 42, 999_999_999, 1_234_567_890, u64::MAX] {
            assert_eq!(parse_graph_file_name(&graph_file_name(id)), Some(id));
        }
        for bad in [
            "event.graph",
            "event12.graph.tmp",
            "event-1.graph",
            "evt1.graph",
            "event1a.graph",
            ".event000000001.graph.tmp-3-0",
        ] {
            assert_eq!(parse_graph_file_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn discovers_sorted_and_skips_others() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "event000000010.graph",
            "event000000002.graph",
            "notes.txt",
            ".event000000003.graph.tmp-1-0",
            "event000000004-hits.csv",
        ] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        std::fs::create_dir(dir.path().join("event000000005.graph")).unwrap();
        let found = discover_graphs(dir.path()).unwrap();
        assert_eq!(
            found,
            [(2, dir.path().join("event000000002.graph")), (10, dir.path().join("event000000010.graph")),]
        );
    }

    #[test]
    fn empty_missing_and_duplicate_dirs_are_errors_naming_the_dir() {
        let dir = tempfile::tempdir().unwrap();
        let err = discover_graphs(dir.path()).unwrap_err();
        assert!(matches!(err, Error::NotFound { .. }));
        let msg = err.to_string();
        assert!(msg.contains(&*dir.path().to_string_lossy()) && msg.contains("no graph files"), "{msg}");

        let missing = dir.path().join("nope");
        let msg = discover_graphs(&missing).unwrap_err().to_string();
        assert!(msg.contains("nope"), "{msg}");

        std::fs::write(dir.path().join("event1.graph"), b"").unwrap();
        std::fs::write(dir.path().join("event000000001.graph"), b"").unwrap();
        let msg = discover_graphs(dir.path()).unwrap_err().to_string();
        assert!(msg.contains("two graph files for event 1"), "{msg}");
    }
}
