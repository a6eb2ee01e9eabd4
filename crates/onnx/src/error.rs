//! The error type of the ONNX export.

use std::path::PathBuf;

/// What can go wrong exporting a model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The model uses something the ONNX file or the ACTS plugin cannot carry; the message
    /// names the setting.
    #[error("cannot export for the ACTS ONNX edge classifier: {0}")]
    Unsupported(String),
    /// The weights do not match the configuration.
    #[error("weights: {0}")]
    Weights(String),
    /// Writing a file failed.
    #[error("{}", path.display())]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
