//! The error type of the train crate.

use std::path::PathBuf;

use trackgnn_model::Error as M;

/// Everything that can go wrong writing or reading checkpoints, logs and plots.
///
/// Every variant names the file or directory concerned and says what is wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading or writing a run's files (configuration, records, weights, graphs), or a model
    /// configuration that cannot be used: the model crate's error, with its message.
    #[error(transparent)]
    Model(#[from] trackgnn_model::Error),
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
            trackgnn_plot::Error::Io { path, source } => Error::io(path, source),
            trackgnn_plot::Error::Draw { path, message } => Error::Plot { path, message },
        }
    }
}

impl From<trackgnn_graph::Error> for Error {
    /// A graph (or a module map) that could not be read: the model crate's [`Graph`](M::Graph).
    fn from(e: trackgnn_graph::Error) -> Self {
        Error::Model(M::Graph(e))
    }
}

impl From<trackgnn_engine::ConfigError> for Error {
    /// A model configuration that cannot be used: the model crate's [`Model`](M::Model).
    fn from(e: trackgnn_engine::ConfigError) -> Self {
        Error::Model(M::Model(e))
    }
}

impl Error {
    /// The model crate's [`Io`](M::Io) for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Model(M::io(path, source))
    }

    /// The model crate's [`Context`](M::Context): `source`, while doing `context` (`--graphs
    /// DIR`, `creating DIR`, `reading RUN`).
    pub fn context(
        context: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        Error::Model(M::context(context, source))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_file_and_the_tensor() {
        let e = Error::from(M::ShapeMismatch {
            path: "ck/model.safetensors".into(),
            name: "edge_network.0.weight".into(),
            expected: vec![8, 4],
            found: vec![4, 8],
        });
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
