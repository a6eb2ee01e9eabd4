//! The error type of the train crate.

use std::path::PathBuf;

use trackgnn_model::Error as M;

/// Everything that can go wrong training: a run's files (the model crate's error, whole),
/// checkpoints and plots, a setting or an option that cannot be used, too few graphs or events,
/// the ranks' communication, a training that went bad.
///
/// Every variant names what is concerned (the file or directory, the configuration key, the
/// flag, the event) and says what is wrong.
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
    /// An option of a command (the scaling study's) that cannot be used, alone or with the
    /// others, named by its flag.
    #[error("{flag} {message}")]
    Flag {
        /// The flag (`--ranks`, `--simulate`, …).
        flag: &'static str,
        /// What is wrong, said after the flag.
        message: String,
    },
    /// A graph directory without a training graph, or with fewer graphs than asked for.
    #[error("{}: {message}", dir.display())]
    TooFewGraphs {
        /// The graph directory.
        dir: PathBuf,
        /// How many there are and what needs more.
        message: String,
    },
    /// An event directory with fewer than the two events a metric-learning stage needs.
    #[error("{}: needs at least 2 events (training and validation), found {found}", dir.display())]
    TooFewEvents {
        /// The event directory.
        dir: PathBuf,
        /// The events found.
        found: usize,
    },
    /// A metric-learning stage given no training or no validation events.
    #[error("training {stage} needs training and validation events")]
    NoEvents {
        /// The stage, with its article (`an embedding`, `a filter`).
        stage: &'static str,
    },
    /// An event without the truth and particles that training the metric-learning stages needs.
    #[error("event {event_id}: training the metric-learning stages needs truth and particles")]
    NoTruth {
        /// The event.
        event_id: u64,
    },
    /// A fresh run asked for in a directory that already holds one.
    #[error("{} already holds a run (use --resume to continue it, or another directory)", dir.display())]
    RunExists {
        /// The run directory.
        dir: PathBuf,
    },
    /// A run without weights (neither its last checkpoint's nor its best).
    #[error("{}: no {} or {} (did the run finish an epoch?)", run.display(), last.display(), best.display())]
    NoWeights {
        /// The run directory.
        run: PathBuf,
        /// Where its last weights would be.
        last: PathBuf,
        /// Where its best weights would be.
        best: PathBuf,
    },
    /// A run that the scaling study launched failed.
    #[error("{name} failed ({status}); the end of {}:\n{tail}", log.display())]
    RunFailed {
        /// The run's name.
        name: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// Its log file.
        log: PathBuf,
        /// The last lines of the log.
        tail: String,
    },
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

/// A device backend's failure (out of memory, a lost GPU), through the model crate's error
/// that already names the device.
impl From<trackgnn_engine::DeviceError> for Error {
    fn from(e: trackgnn_engine::DeviceError) -> Self {
        Error::Model(trackgnn_model::Error::from(e))
    }
}

impl Error {
    /// The model crate's [`Setting`](M::Setting): the configuration key `field` cannot be used.
    pub fn config(field: &'static str, message: impl Into<String>) -> Self {
        Error::Model(M::setting(field, message))
    }

    /// An [`Error::Flag`] for the command-line option `flag`.
    pub fn flag(flag: &'static str, message: impl Into<String>) -> Self {
        Error::Flag { flag, message: message.into() }
    }

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

    #[test]
    fn settings_and_options_are_named_in_the_message() {
        let e = Error::config("graphs_per_step", "= 4: 3 training graphs cannot fill one step of 1 ranks × 4 graphs");
        assert!(matches!(e, Error::Model(M::Setting { field: "graphs_per_step", .. })));
        assert_eq!(
            e.to_string(),
            "invalid config: `graphs_per_step` = 4: 3 training graphs cannot fill one step of 1 ranks × 4 graphs"
        );
        let e = Error::flag("--sim-epochs", "must be at least 1");
        assert!(matches!(e, Error::Flag { flag: "--sim-epochs", .. }));
        assert_eq!(e.to_string(), "--sim-epochs must be at least 1");
    }
}
