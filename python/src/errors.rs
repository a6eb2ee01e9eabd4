//! Library errors as Python exceptions: one hierarchy under `TrackgnnError`, whose message is
//! [`trackgnn_trackml::error::report`]'s line (the same text the command line prints).
//!
//! - `TrackgnnError(Exception)`: every error of the libraries;
//! - `MissingFileError(TrackgnnError, FileNotFoundError)`: an input that does not exist;
//! - `ConfigError(TrackgnnError, ValueError)`: a setting out of range, an unknown name.

use std::error::Error as StdError;

use pyo3::exceptions::{PyFileNotFoundError, PyValueError};
use pyo3::prelude::*;
use pyo3::{create_exception, exceptions::PyException};
use trackgnn_trackml::error::report;

create_exception!(trackgnn, TrackgnnError, PyException, "Every error of the trackgnn libraries.");

/// The Python classes of the hierarchy that have two bases (`create_exception!` takes one).
const SUBCLASSES: &str = r#"
class MissingFileError(TrackgnnError, FileNotFoundError):
    """An input file or directory that does not exist (also a FileNotFoundError)."""

class ConfigError(TrackgnnError, ValueError):
    """A setting out of range or an unknown name (also a ValueError)."""
"#;

/// What kind of failure an error is, deciding its exception class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `MissingFileError`.
    MissingFile,
    /// `ConfigError`.
    Config,
    /// `TrackgnnError`.
    Other,
}

/// The kind of `err`: a missing file anywhere in its chain (the libraries' `MissingFile` or
/// `NotFound`, or an I/O error "not found"), a configuration error at its top, else other.
pub fn kind(err: &(dyn StdError + 'static)) -> Kind {
    use trackgnn_graph::Error as G;
    use trackgnn_model::Error as M;
    use trackgnn_reco::Error as R;
    use trackgnn_trackml::Error as T;
    let mut cur: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = cur {
        // `#[error(transparent)]` wrappers skip the inner error in the source chain, so look
        // inside them here.
        let missing = match (e.downcast_ref::<T>(), e.downcast_ref::<G>(), e.downcast_ref::<R>()) {
            (Some(T::MissingFile { .. }), ..) => true,
            (_, Some(G::NotFound { .. }), _) => true,
            (_, _, Some(R::Event(T::MissingFile { .. }))) => true,
            (_, _, Some(R::Graph(G::NotFound { .. }))) => true,
            _ => e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound),
        };
        if missing {
            return Kind::MissingFile;
        }
        cur = e.source();
    }
    let config = matches!(err.downcast_ref::<G>(), Some(G::Config(_)))
        || matches!(err.downcast_ref::<R>(), Some(R::Config { .. } | R::Graph(G::Config(_))))
        || matches!(err.downcast_ref::<M>(), Some(M::Config(_) | M::Setting { .. }));
    if config { Kind::Config } else { Kind::Other }
}

/// The Python exception of a library error: its class by [`kind`], its message
/// [`report`]'s line.
pub fn to_py<E: StdError + 'static>(err: E) -> PyErr {
    let message = report(&err);
    Python::attach(|py| match kind(&err) {
        Kind::MissingFile => exception(py, "MissingFileError", message),
        Kind::Config => exception(py, "ConfigError", message),
        Kind::Other => TrackgnnError::new_err(message),
    })
}

/// [`to_py`], except that the exception is a `MissingFileError` when `path` does not exist (for
/// library errors that say so in their own words, e.g. "no such run directory").
pub fn to_py_at<E: StdError + 'static>(err: E, path: &std::path::Path) -> PyErr {
    if path.exists() {
        return to_py(err);
    }
    let message = report(&err);
    Python::attach(|py| exception(py, "MissingFileError", message))
}

/// A `ConfigError` with `message` (bad arguments found by this crate).
pub fn config_error(message: impl Into<String>) -> PyErr {
    let message = message.into();
    Python::attach(|py| exception(py, "ConfigError", message))
}

/// An exception of the class `name` of `trackgnn._native` with `message`.
fn exception(py: Python<'_>, name: &str, message: String) -> PyErr {
    let class = py.import("trackgnn._native").and_then(|m| m.getattr(name));
    match class {
        Ok(class) => PyErr::from_type(class.cast_into().expect("an exception class"), message),
        Err(_) if name == "MissingFileError" => PyFileNotFoundError::new_err(message),
        Err(_) => PyValueError::new_err(message),
    }
}

/// Adds the exception classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("TrackgnnError", py.get_type::<TrackgnnError>())?;
    let globals = pyo3::types::PyDict::new(py);
    globals.set_item("TrackgnnError", py.get_type::<TrackgnnError>())?;
    globals.set_item("__name__", "trackgnn")?;
    py.run(&std::ffi::CString::new(SUBCLASSES).expect("no NUL"), Some(&globals), None)?;
    for name in ["MissingFileError", "ConfigError"] {
        m.add(name, globals.get_item(name)?.expect("defined above"))?;
    }
    Ok(())
}
