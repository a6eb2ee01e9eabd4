//! The error type of the model crate.

use std::path::PathBuf;

/// Everything that can go wrong reading or writing a run's files: its configuration, records
/// and weights, and the learned stages' runs.
///
/// Every variant names the file or directory concerned and says what is wrong. The train
/// crate's error holds it whole (`trackgnn_train::Error::Model`).
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
    /// Data that do not fit together: in memory, what cannot be written as it is (two
    /// parameters with one name, …); on disk, weights changed since a recipe recorded them.
    #[error("{}: {message}", path.display())]
    Inconsistent {
        /// The file or directory concerned.
        path: PathBuf,
        /// What is inconsistent.
        message: String,
    },
    /// A graph (or a module map) could not be read; the graph crate's error names the file.
    #[error(transparent)]
    Graph(#[from] trackgnn_graph::Error),
    /// The model configuration cannot be used.
    #[error(transparent)]
    Model(#[from] trackgnn_engine::ConfigError),
    /// The model cannot run on the device asked for.
    #[error(transparent)]
    Device(#[from] trackgnn_engine::DeviceError),
    /// A setting that cannot be used, or a directory that is not a run.
    #[error("{0}")]
    Config(String),
    /// A setting of a training configuration that cannot be used, named by its key.
    #[error("invalid config: `{field}` {message}")]
    Setting {
        /// The configuration key (`graphs_per_step`, `optimizer.lr`, `net.out`, …).
        field: &'static str,
        /// What is wrong, with the value found.
        message: String,
    },
    /// A step that failed, said in words, with why as its source.
    #[error("{context}")]
    Context {
        /// What was being done.
        context: String,
        /// Why it failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An [`Error::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }

    /// An [`Error::Setting`] for the configuration key `field`.
    pub fn setting(field: &'static str, message: impl Into<String>) -> Self {
        Error::Setting { field, message: message.into() }
    }

    /// An [`Error::Context`]: `source`, while doing `context`.
    pub fn context(
        context: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        Error::Context { context: context.into(), source: source.into() }
    }
}
