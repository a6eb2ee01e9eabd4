//! The error type of the reco crate.

use std::path::PathBuf;

/// Everything that can go wrong building tracks, scoring them, and reading or writing
/// submissions and plots.
///
/// Variants carry what is needed to act on them: the file and line, the edge and node, the
/// hit id, the config field.
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
    /// A line of a CSV file could not be parsed.
    #[error("{}:{line}: column `{column}`: {message}", path.display())]
    Parse {
        /// The file concerned.
        path: PathBuf,
        /// The 1-based line number.
        line: u64,
        /// The column name (from the header), or `header` for a bad header line.
        column: String,
        /// What is wrong.
        message: String,
    },
    /// A configuration value is out of its valid range.
    #[error("invalid config: `{field}` {message}")]
    Config {
        /// The config field concerned.
        field: &'static str,
        /// What is wrong, with the value found.
        message: String,
    },
    /// An edge refers to a node that does not exist.
    #[error("edge {edge} refers to node {node}, but the graph has {num_nodes} nodes")]
    NodeOutOfRange {
        /// Index of the edge.
        edge: usize,
        /// The node index found.
        node: u32,
        /// The number of nodes.
        num_nodes: usize,
    },
    /// A hit appears more than once where every hit must appear exactly once.
    #[error("{context}: hit {hit_id} appears more than once")]
    DuplicateHit {
        /// The hit_id.
        hit_id: u64,
        /// Where: `file:line`, or the function concerned.
        context: String,
    },
    /// A hit of the event has no track id in the submission.
    #[error("{context}: hit {hit_id} of the event is missing")]
    MissingHit {
        /// The hit_id.
        hit_id: u64,
        /// Where: the submission's event and file, or the function concerned.
        context: String,
    },
    /// A hit id that is not a hit of the event.
    #[error("{context}: hit {hit_id} is not a hit of the event")]
    UnknownHit {
        /// The hit_id.
        hit_id: u64,
        /// Where: the submission's event and file, or the function concerned.
        context: String,
    },
    /// A model file (a candidate-quality model) is not what it must be.
    #[error("{}: {message}", path.display())]
    BadModel {
        /// The file concerned.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The event lacks a part the operation needs (truth or particles).
    #[error("event {event_id} has no {part}")]
    MissingPart {
        /// The event concerned.
        event_id: u64,
        /// `truth` or `particles`.
        part: &'static str,
    },
    /// Two [`TrackMetrics`](crate::TrackMetrics) with different bins cannot be merged.
    #[error("cannot merge track metrics: the `{histogram}` bins differ")]
    BinMismatch {
        /// The histogram whose edges differ.
        histogram: &'static str,
    },
    /// More tracks than a `u32` track id can number.
    #[error("too many track ids for u32: {needed}")]
    TooManyTracks {
        /// The number of ids needed.
        needed: u64,
    },
    /// The module map of a run changed since its graphs were built.
    #[error("{}: the module map changed since the graphs were built ({then} then, {now} now)", path.display())]
    MapChanged {
        /// The map file.
        path: PathBuf,
        /// Its hash when the graphs were built.
        then: String,
        /// Its hash now.
        now: String,
    },
    /// A module-map recipe that names no map file.
    #[error("{}: module-map recipe without a map file", recipe.display())]
    MapMissing {
        /// The recipe file.
        recipe: PathBuf,
    },
    /// Truth scores were asked for an event read without truth.
    #[error("event {event_id}: truth scores need the event's truth and particles files")]
    TruthScoresWithoutTruth {
        /// The event concerned.
        event_id: u64,
    },
    /// A hit lies on a module that the detector geometry does not have (the event was made
    /// with another detector file).
    #[error("event {event_id}: hit {hit_id} lies on module {module}, which is not in the detector geometry")]
    HitOffDetector {
        /// The event.
        event_id: u64,
        /// The hit's hit_id.
        hit_id: u64,
        /// Its module (volume/layer/module).
        module: trackgnn_trackml::ids::ModuleId,
    },
    /// An error in one event's file, with the file named.
    #[error("{}: {source}", path.display())]
    InFile {
        /// The file.
        path: std::path::PathBuf,
        /// What went wrong.
        source: Box<Error>,
    },
    /// A track fit or a propagation that cannot be carried out (a trajectory that does not
    /// reach its surface, a singular covariance, a hit on no module of the detector).
    #[error("track fit: {0}")]
    Fit(String),
    /// Reading an event failed.
    #[error(transparent)]
    Event(#[from] trackgnn_trackml::Error),
    /// Building a graph or reading a module map failed.
    #[error(transparent)]
    Graph(#[from] trackgnn_graph::Error),
    /// Reading a run (its configuration, recipe or weights) failed.
    #[error(transparent)]
    Run(#[from] trackgnn_model::Error),
    /// A plot could not be drawn or written.
    #[error("{}: cannot draw plot: {message}", path.display())]
    Plot {
        /// The file concerned.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

impl From<trackgnn_plot::Error> for Error {
    fn from(e: trackgnn_plot::Error) -> Self {
        match e {
            trackgnn_plot::Error::Io { path, source } => Error::Io { path, source },
            trackgnn_plot::Error::Draw { path, message } => Error::Plot { path, message },
        }
    }
}

impl Error {
    /// An [`Error::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io { path: path.into(), source }
    }

    /// An [`Error::Config`] for `field`.
    pub(crate) fn config(field: &'static str, message: impl Into<String>) -> Error {
        Error::Config { field, message: message.into() }
    }
}

/// The result type of the reco crate.
pub type Result<T> = std::result::Result<T, Error>;
