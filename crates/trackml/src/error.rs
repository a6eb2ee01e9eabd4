//! The error type of the TrackML layer.

use std::path::{Path, PathBuf};

/// Everything that can go wrong reading or writing TrackML data and geometry.
///
/// Parse errors carry the file, the 1-based line and the column name, so a user can open the
/// file at the right place.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The operating system refused an operation on a file. The message names the file; the
    /// operating system's reason is the [`source`](std::error::Error::source), not repeated here.
    #[error("{}", path.display())]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A required file or directory is absent: `<path>: no such file or directory`, the one
    /// wording of a missing input across trackgnn (see [`require_exists`]).
    #[error("{}: no such file or directory{}", path.display(), looked_for(path, tried))]
    MissingFile {
        /// The file first looked for.
        path: PathBuf,
        /// Every name tried, comma separated (plain and `.gz`), or the path itself.
        tried: String,
    },
    /// The file has no header line at all.
    #[error("{}: empty file (no header line)", path.display())]
    EmptyFile {
        /// The file concerned.
        path: PathBuf,
    },
    /// The header lacks a column the reader needs.
    #[error("{}:{line}: missing required column `{column}` (header has: {header})", path.display())]
    MissingColumn {
        /// The file concerned.
        path: PathBuf,
        /// The line of the header (1 unless comments precede it).
        line: u64,
        /// The column that is absent.
        column: String,
        /// The header as read.
        header: String,
    },
    /// A value could not be parsed, or a row has too few fields.
    #[error("{}:{line}: column `{column}`: {message}", path.display())]
    Parse {
        /// The file concerned.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// The column name from the header.
        column: String,
        /// What is wrong, including the offending text.
        message: String,
    },
    /// The same hit_id appears twice.
    #[error("{}:{line}: column `hit_id`: duplicate hit_id {hit_id} (first on line {first_line})", path.display())]
    DuplicateHit {
        /// The file concerned.
        path: PathBuf,
        /// The line of the second occurrence.
        line: u64,
        /// The line of the first occurrence.
        first_line: u64,
        /// The repeated id.
        hit_id: u64,
    },
    /// The same particle_id appears twice in a particles file.
    #[error("{}:{line}: column `particle_id`: duplicate particle_id {particle_id} (first on line {first_line})", path.display())]
    DuplicateParticle {
        /// The file concerned.
        path: PathBuf,
        /// The line of the second occurrence.
        line: u64,
        /// The line of the first occurrence.
        first_line: u64,
        /// The repeated id.
        particle_id: u64,
    },
    /// A row (truth or cells) refers to a hit_id that hits.csv does not have.
    #[error("{}:{line}: column `hit_id`: hit_id {hit_id} is not in the hits file", path.display())]
    UnknownHit {
        /// The file concerned.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// The unknown id.
        hit_id: u64,
    },
    /// Data that parse but are inconsistent (e.g. a hit without a truth row).
    #[error("{}: {message}", path.display())]
    Inconsistent {
        /// The file concerned.
        path: PathBuf,
        /// What is inconsistent.
        message: String,
    },
    /// A geometry that cannot be used (no modules, a module without a layer, …).
    #[error("geometry: {0}")]
    Geometry(String),
}

impl Error {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }

    /// A [`Error::MissingFile`] for `path` alone.
    pub fn missing(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        Error::MissingFile { tried: path.display().to_string(), path }
    }
}

/// ` (looked for …)` when other names than `path` itself were tried.
fn looked_for(path: &Path, tried: &str) -> String {
    if tried == path.display().to_string() { String::new() } else { format!(" (looked for {tried})") }
}

/// `Ok` if `path` exists (file or directory), else [`Error::MissingFile`]: commands check their
/// input paths with it, so a missing input reads the same whatever the command.
pub fn require_exists(path: &Path) -> Result<()> {
    if path.exists() { Ok(()) } else { Err(Error::missing(path)) }
}

/// One line for an error and its causes, `outer: cause: cause`, each cause once: a cause whose
/// message the line already holds is left out (errors of other crates may repeat their
/// source's message in their own).
pub fn report(err: &(dyn std::error::Error + 'static)) -> String {
    let mut line = err.to_string();
    let mut cause = err.source();
    while let Some(c) = cause {
        let msg = c.to_string();
        if !msg.is_empty() && !line.contains(&msg) {
            line.push_str(": ");
            line.push_str(&msg);
        }
        cause = c.source();
    }
    line
}

/// The result type of this crate.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_io_error_prints_its_reason_once() {
        let e = Error::io("ev/event1-hits.csv.gz", std::io::Error::other("incomplete deflate stream"));
        assert_eq!(e.to_string(), "ev/event1-hits.csv.gz", "the reason is the source, not in the message");
        assert_eq!(report(&e), "ev/event1-hits.csv.gz: incomplete deflate stream");
    }

    #[test]
    fn report_leaves_out_a_cause_the_message_already_holds() {
        #[derive(Debug, thiserror::Error)]
        #[error("reading x: {0}")]
        struct Embeds(#[source] std::io::Error);
        let e = Embeds(std::io::Error::other("disk full"));
        assert_eq!(report(&e), "reading x: disk full");
    }

    #[test]
    fn a_missing_path_has_one_wording() {
        let e = require_exists(Path::new("no/such/dir")).unwrap_err();
        assert_eq!(e.to_string(), "no/such/dir: no such file or directory");
        let e = Error::MissingFile { path: "d/a.csv".into(), tried: "d/a.csv, d/a.csv.gz".into() };
        assert_eq!(e.to_string(), "d/a.csv: no such file or directory (looked for d/a.csv, d/a.csv.gz)");
        assert!(require_exists(Path::new(".")).is_ok());
    }
}
