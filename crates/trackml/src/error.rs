//! The error type of the TrackML layer.

use std::path::PathBuf;

/// Everything that can go wrong reading or writing TrackML data and geometry.
///
/// Parse errors carry the file, the 1-based line and the column name, so a user can open the
/// file at the right place.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The operating system refused an operation on a file.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A required file of an event is absent.
    #[error("{}: missing file (looked for {tried})", path.display())]
    MissingFile {
        /// The file first looked for.
        path: PathBuf,
        /// Every name tried, comma separated (plain and `.gz`).
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
}

/// The result type of this crate.
pub type Result<T> = std::result::Result<T, Error>;
