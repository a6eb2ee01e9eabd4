//! The error type of the train crate.

use std::path::PathBuf;

/// Everything that can go wrong writing or reading checkpoints, logs and plots.
///
/// Every variant names the file or directory concerned and says what is wrong.
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
    /// A safetensors file could not be parsed (truncated, bad header, bad offsets) or written.
    #[error("{}: invalid safetensors file", path.display())]
    Safetensors {
        /// The file concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: safetensors::SafeTensorError,
    },
    /// A JSON file (or a line of a JSON-lines file) could not be parsed or written.
    #[error("{}: invalid JSON", path.display())]
    Json {
        /// The file concerned, with `:line` for JSON-lines files.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// A tensor the model needs is not in the file.
    #[error("{}: missing tensor `{name}`", path.display())]
    MissingTensor {
        /// The file concerned.
        path: PathBuf,
        /// The name of the tensor.
        name: String,
    },
    /// The file holds a tensor the model does not have (loading is strict, like PyTorch's
    /// `load_state_dict(strict=True)`).
    #[error("{}: unexpected tensor `{name}` (not a parameter of this model)", path.display())]
    UnexpectedTensor {
        /// The file concerned.
        path: PathBuf,
        /// The name of the tensor.
        name: String,
    },
    /// A tensor in the file has another shape than the model's parameter.
    #[error("{}: tensor `{name}` has shape {found:?}, the model expects {expected:?}", path.display())]
    ShapeMismatch {
        /// The file concerned.
        path: PathBuf,
        /// The name of the tensor.
        name: String,
        /// The model's shape.
        expected: Vec<usize>,
        /// The shape in the file.
        found: Vec<usize>,
    },
    /// A tensor in the file is not of the expected element type.
    #[error("{}: tensor `{name}` has dtype {found}, expected {expected}", path.display())]
    WrongDtype {
        /// The file concerned.
        path: PathBuf,
        /// The name of the tensor.
        name: String,
        /// The expected dtype (`F32`).
        expected: String,
        /// The dtype in the file.
        found: String,
    },
    /// A file parses but its content is wrong (a missing or bad metadata entry, a log line
    /// without an epoch, …).
    #[error("{}: {message}", path.display())]
    Corrupt {
        /// The file concerned.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Data in memory that cannot be written as they are (optimiser state of another length
    /// than the parameters, two parameters with one name, …).
    #[error("{}: {message}", path.display())]
    Inconsistent {
        /// The file or directory that was being written.
        path: PathBuf,
        /// What is inconsistent.
        message: String,
    },
    /// No checkpoint under the given name nor under its aside name.
    #[error("{}: no checkpoint here (nor at {})", path.display(), aside.display())]
    NoCheckpoint {
        /// The checkpoint directory asked for.
        path: PathBuf,
        /// The aside name a crash during a save can leave.
        aside: PathBuf,
    },
    /// Drawing a plot failed.
    #[error("{}: cannot draw plot: {message}", path.display())]
    Plot {
        /// The file being drawn.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A graph (or a module map) could not be read; the graph crate's error names the file.
    #[error(transparent)]
    Graph(#[from] trackgnn_graph::Error),
    /// The model configuration cannot be used.
    #[error(transparent)]
    Model(#[from] trackgnn_engine::ConfigError),
    /// A training setting that cannot be used, or a run directory that does not match it.
    #[error("{0}")]
    Config(String),
    /// Communication between ranks failed, or the ranks disagree.
    #[error("{0}")]
    Dist(String),
    /// The training state went bad (a non-finite loss or gradient): the run stopped.
    #[error("{0}")]
    Training(String),
    /// Preparing an event failed.
    #[error("event {event_id}")]
    InEvent {
        /// The event.
        event_id: u64,
        /// Why.
        #[source]
        source: Box<Error>,
    },
    /// A step that failed, said in words (`--graphs DIR`, `creating DIR`, `reading RUN`), with
    /// why as its source.
    #[error("{context}")]
    Context {
        /// What was being done.
        context: String,
        /// Why it failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A graph directory holds none of the graphs asked for (e.g. none of a run's test events).
    #[error("no graphs to evaluate in {}", dir.display())]
    NothingToEvaluate {
        /// The graph directory.
        dir: PathBuf,
    },
    /// A checkpoint could not be written (disk full, …); the previous one is intact.
    #[error("{}: writing the checkpoint of step {step} failed; {kept}", dir.display())]
    CheckpointWrite {
        /// The checkpoint directory.
        dir: PathBuf,
        /// The optimiser step the checkpoint was for.
        step: u64,
        /// What the run directory still holds.
        kept: String,
        /// Why the write failed (naming the file).
        #[source]
        source: Box<Error>,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl From<trackgnn_plot::Error> for Error {
    fn from(e: trackgnn_plot::Error) -> Self {
        match e {
            trackgnn_plot::Error::Io { path, source } => Error::Io { path, source },
            trackgnn_plot::Error::Draw { path, message } => Error::Plot { path, message },
        }
    }
}

impl From<trackgnn_model::Error> for Error {
    /// The same variant: the model crate's errors are a part of this crate's.
    fn from(e: trackgnn_model::Error) -> Self {
        use trackgnn_model::Error as M;
        match e {
            M::Io { path, source } => Error::Io { path, source },
            M::Safetensors { path, source } => Error::Safetensors { path, source },
            M::Json { path, source } => Error::Json { path, source },
            M::MissingTensor { path, name } => Error::MissingTensor { path, name },
            M::UnexpectedTensor { path, name } => Error::UnexpectedTensor { path, name },
            M::ShapeMismatch { path, name, expected, found } => Error::ShapeMismatch { path, name, expected, found },
            M::WrongDtype { path, name, expected, found } => Error::WrongDtype { path, name, expected, found },
            M::Corrupt { path, message } => Error::Corrupt { path, message },
            M::Inconsistent { path, message } => Error::Inconsistent { path, message },
            M::Graph(e) => Error::Graph(e),
            M::Model(e) => Error::Model(e),
            M::Config(message) => Error::Config(message),
            M::Context { context, source } => Error::Context { context, source },
            // The model crate's error is non-exhaustive: a variant it adds is kept whole.
            other => Error::context("reading a run", other),
        }
    }
}

impl Error {
    /// An [`Error::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }

    /// An [`Error::Context`]: `source`, while doing `context`.
    pub fn context(
        context: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        Error::Context { context: context.into(), source: source.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_file_and_the_tensor() {
        let e = Error::ShapeMismatch {
            path: "ck/model.safetensors".into(),
            name: "edge_network.0.weight".into(),
            expected: vec![8, 4],
            found: vec![4, 8],
        };
        let s = e.to_string();
        assert!(s.starts_with("ck/model.safetensors: "), "{s}");
        assert!(s.contains("edge_network.0.weight") && s.contains("[4, 8]") && s.contains("[8, 4]"), "{s}");
        let io = Error::io("run/metrics.csv", std::io::Error::other("disk full"));
        assert_eq!(trackgnn_trackml::error::report(&io), "run/metrics.csv: disk full");
        let graph = Error::from(trackgnn_graph::Error::io("g/event1.graph", std::io::Error::other("gone")));
        let source = std::error::Error::source(&graph).expect("the graph error's cause is kept");
        assert_eq!(source.to_string(), "gone");
        assert_eq!(trackgnn_trackml::error::report(&graph), "g/event1.graph: gone");
    }
}
