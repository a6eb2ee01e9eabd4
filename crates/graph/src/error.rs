//! The error type of the graph crate.

use std::path::PathBuf;

use crate::method::GraphMethod;

/// Everything that can go wrong building, writing or reading graphs.
///
/// Every variant names the file or directory concerned and says what is wrong, so that a run
/// over thousands of graph files can report the bad one and go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The operating system refused an operation on a file or directory.
    #[error("{}", path.display())]
    Io {
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file is shorter than its own header says it must be.
    #[error(
        "{}: truncated file: {actual} bytes, expected {expected} (the file ends inside the {part})",
        path.display()
    )]
    Truncated {
        /// The file concerned.
        path: PathBuf,
        /// The size the file must have. Exact once the header could be read; when the file ends
        /// inside the header itself, the size needed to hold the header.
        expected: u64,
        /// The size the file has.
        actual: u64,
        /// Where the file ends: `fixed header`, `JSON header`, `data section` or `checksum`.
        part: &'static str,
    },
    /// The file was written in a format version this build cannot read.
    #[error(
        "{}: unsupported graph file format version {found} (this build reads version {supported})",
        path.display()
    )]
    UnsupportedVersion {
        /// The file concerned.
        path: PathBuf,
        /// The version in the file.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// The stored CRC32 of the data section differs from the one computed on reading.
    #[error(
        "{}: checksum mismatch (corrupt file): stored CRC32 {stored:08x}, computed {computed:08x}",
        path.display()
    )]
    ChecksumMismatch {
        /// The file concerned.
        path: PathBuf,
        /// The CRC32 at the end of the file.
        stored: u32,
        /// The CRC32 of the data section as read.
        computed: u32,
    },
    /// The file is not a valid file of its format (bad magic, unparsable header, an array out
    /// of bounds or of the wrong type or length, an index out of range, …).
    #[error("{}: {message}", path.display())]
    Corrupt {
        /// The file concerned.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Data in memory (or a set of files) that cannot be written or used as they are, e.g. a
    /// graph whose arrays disagree in length, or two files for one event.
    #[error("{}: {message}", path.display())]
    Inconsistent {
        /// The file or directory concerned.
        path: PathBuf,
        /// What is inconsistent.
        message: String,
    },
    /// A setting or an input that graph building cannot use (an unknown feature, truth cuts on
    /// an event without truth, a method without its module map, …).
    #[error("{0}")]
    Config(String),
    /// Recipe settings that cannot be built together ([`crate::recipe::RecipeOverrides`]).
    #[error(transparent)]
    Overrides(#[from] OverrideError),
    /// Building the graph of an event failed.
    #[error("event {event_id}")]
    InEvent {
        /// The event.
        event_id: u64,
        /// Why.
        #[source]
        source: Box<Error>,
    },
    /// An event that could not be read.
    #[error(transparent)]
    Event(#[from] trackgnn_trackml::Error),
    /// A directory holds none of the files looked for.
    #[error("{}: no {what} found", dir.display())]
    NotFound {
        /// The directory searched.
        dir: PathBuf,
        /// What was looked for, e.g. `graph files (event<id>.graph)`.
        what: &'static str,
    },
}

impl Error {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }

    /// A [`Error::Corrupt`] error for `path`.
    pub fn corrupt(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Error::Corrupt { path: path.into(), message: message.into() }
    }

    /// An [`Error::Inconsistent`] error for `path`.
    pub fn inconsistent(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Error::Inconsistent { path: path.into(), message: message.into() }
    }
}

/// The result type of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// A combination of recipe settings that cannot be built ([`crate::recipe::RecipeOverrides`]).
/// The texts name the command-line flags, which is what these overrides are.
#[derive(Debug, thiserror::Error)]
pub enum OverrideError {
    /// The method needs a module map and none was given.
    #[error("--method {0} needs --map FILE (build one with `trackgnn module-map build`)")]
    NeedsMap(GraphMethod),
    /// The method needs an embedding and none was given.
    #[error("--method {0} needs --embedding RUN (train one with `trackgnn train-embedding`)")]
    NeedsEmbedding(GraphMethod),
    /// A filter without an embedding.
    #[error("--filter needs --embedding RUN")]
    FilterWithoutEmbedding,
    /// Metric-learning cuts without an embedding.
    #[error("--radius, --k-max and --filter-cut need --embedding RUN")]
    CutsWithoutEmbedding,
    /// A sector split into a single sector.
    #[error("--sectors must make more than one sector")]
    OneSector,
}
