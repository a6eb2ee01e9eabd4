//! Settings given on top of a training configuration (a command line's flags): one list where
//! each flag meets the configuration key it replaces.
//!
//! The list ([`TrainOverrides`]) is the `trackgnn train` command line's too: with the `clap`
//! feature it derives `clap::Args`, each field's doc comment its help, so a flag is added in one
//! place, the list below.

use std::path::{Path, PathBuf};

use trackgnn_engine::{Checkpointing, Device, Precision};

use super::{LrScaling, NonFinite, Oversize, Sampler, SpikeAction, TrainConfig};
use crate::error::{Error, Result};
use crate::run_dir::RunDir;

/// Declares [`TrainOverrides`] from one list: each entry is a field (with its doc comment, the
/// flag's help, and its `clap` attributes) and the [`TrainConfig`] setting it replaces; `apply`
/// sets them all.
macro_rules! overrides {
    ($( $(#[$attr:meta])* $name:ident: $ty:ty => $($key:ident).+, )*) => {
        /// Settings that replace a [`TrainConfig`]'s: each `Some` wins over the configuration's
        /// value. The flags of `trackgnn train` (feature `clap`), in the order of its help.
        #[derive(Clone, Debug, Default, PartialEq)]
        #[cfg_attr(feature = "clap", derive(clap::Args))]
        pub struct TrainOverrides {
            $( $(#[$attr])* pub $name: Option<$ty>, )*
        }

        impl TrainOverrides {
            /// Replaces each setting of `c` that is given here.
            fn set_given(&self, c: &mut TrainConfig) {
                $( if let Some(v) = &self.$name { c.$($key).+ = v.clone().into(); } )*
            }
        }
    };
}

overrides! {
    /// What a step whose loss or gradient is not finite does: stop the run (naming the step and
    /// graphs, keeping the last checkpoint) or skip the step.
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    non_finite: NonFinite => non_finite,
    /// A loss spike is a step's loss beyond this many times the median of the previous
    /// steps' (0: no alarm).
    #[cfg_attr(feature = "clap", arg(long, value_name = "K"))]
    loss_spike_factor: f64 => loss_spike_factor,
    /// What a loss spike does.
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    loss_spike: SpikeAction => loss_spike,
    /// Compare the replicas' weight checksums every K steps (0: at epoch ends only).
    #[cfg_attr(feature = "clap", arg(long = "replica-check-every", value_name = "K"))]
    replica_check_every_steps: usize => replica_check_every_steps,
    /// Epochs.
    #[cfg_attr(feature = "clap", arg(long))]
    epochs: usize => epochs,
    /// Seed.
    #[cfg_attr(feature = "clap", arg(long))]
    seed: u64 => seed,
    /// Learning rate.
    #[cfg_attr(feature = "clap", arg(long))]
    lr: f64 => optimizer.lr,
    /// Hidden width.
    #[cfg_attr(feature = "clap", arg(long))]
    hidden: usize => model.hidden,
    /// Message-passing iterations.
    #[cfg_attr(feature = "clap", arg(long))]
    iterations: usize => model.iterations,
    /// Positive-class weight of the loss.
    #[cfg_attr(feature = "clap", arg(long))]
    pos_weight: f64 => pos_weight,
    /// Loss weight of the target edges of secondaries (particles produced beyond 1 mm of the
    /// beam line); needs graphs with production-vertex radii.
    #[cfg_attr(feature = "clap", arg(long))]
    secondary_weight: f64 => secondary_weight,
    /// Start from the weights of an earlier run (its directory, for its best.safetensors, or a
    /// weights file) instead of random ones; optimiser and schedule start afresh.
    #[cfg_attr(feature = "clap", arg(long, value_name = "RUN_OR_FILE"))]
    init_weights: PathBuf => init_weights,
    /// Graphs per optimiser step (per rank).
    #[cfg_attr(feature = "clap", arg(long))]
    graphs_per_step: usize => graphs_per_step,
    /// Clip the gradient norm (0: off).
    #[cfg_attr(feature = "clap", arg(long))]
    clip_grad_norm: f64 => clip_grad_norm,
    /// Early-stopping patience in epochs (0: off).
    #[cfg_attr(feature = "clap", arg(long = "early-stopping", value_name = "EARLY_STOPPING"))]
    early_stopping_patience: usize => early_stopping_patience,
    /// Checkpoint every N steps too (0: per epoch only).
    #[cfg_attr(feature = "clap", arg(long = "checkpoint-every", value_name = "CHECKPOINT_EVERY"))]
    checkpoint_every_steps: usize => checkpoint_every_steps,
    /// Use at most N graphs.
    #[cfg_attr(feature = "clap", arg(long))]
    max_graphs: usize => max_graphs,
    /// Linear warm-up of the learning rate over this many epochs.
    #[cfg_attr(feature = "clap", arg(long))]
    warmup_epochs: f64 => schedule.warmup_epochs,
    /// Learning-rate scaling with the number of ranks.
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    lr_scaling: LrScaling => lr_scaling,
    /// Step sampler.
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    sampler: Sampler => sampler,
    /// Activation checkpointing: none, per-iteration or every:K (less memory, some recompute);
    /// append `+bf16` to keep the saved states in bf16 (half their bytes; e.g. every:2+bf16).
    #[cfg_attr(feature = "clap", arg(long, value_name = "MODE"))]
    checkpointing: Checkpointing => checkpointing,
    /// Arithmetic of the matrix products: f32, or bf16 (mixed precision: bf16 operands with
    /// f32 accumulation; weights, optimiser, norms, loss and scores in f32). Recorded in the run's config.toml.
    #[cfg_attr(feature = "clap", arg(long, value_name = "f32|bf16"))]
    precision: Precision => precision,
    /// Where the model runs: cpu, or cuda:N in a build with a GPU backend (refused before
    /// anything is written where the build has none). Recorded in the run's config.toml.
    #[cfg_attr(feature = "clap", arg(long, value_name = "cpu|cuda:N"))]
    device: Device => device,
    /// Memory budget of a training step, bytes (suffixes K, M, G, T: powers of 1024; 0: none).
    /// A graph over it is cut into φ sectors, or skipped with `--oversize skip`.
    #[cfg_attr(feature = "clap", arg(long = "max-memory", value_name = "BYTES", value_parser = parse_bytes))]
    max_memory_bytes: u64 => max_memory_bytes,
    /// What to do with a graph over `--max-memory`.
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    oversize: Oversize => oversize,
    /// The edge metrics' score threshold (not a flag of `trackgnn train`: `eval --threshold`).
    #[cfg_attr(feature = "clap", arg(skip))]
    threshold: f64 => threshold,
}

/// A byte count: digits with an optional K, M, G or T suffix (powers of 1024; a trailing `B`
/// or `iB` is allowed), as `--max-memory` takes it.
///
/// # Errors
/// Text that is not a non-negative byte count, quoted.
pub fn parse_bytes(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let t = t.strip_suffix("iB").or_else(|| t.strip_suffix('B')).unwrap_or(t);
    let (num, shift) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 10),
        Some('M') => (&t[..t.len() - 1], 20),
        Some('G') => (&t[..t.len() - 1], 30),
        Some('T') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let v: f64 = num.trim().parse().map_err(|_| format!("`{s}` is not a byte count (e.g. 8G, 512M, 1000000)"))?;
    if !(v >= 0.0 && v.is_finite()) {
        return Err(format!("`{s}`: a byte count must be non-negative"));
    }
    Ok((v * (1u64 << shift) as f64).round() as u64)
}

impl TrainOverrides {
    /// The configuration of a training into `run`: the TOML file `file` if given (else, with
    /// `resume`, the run's own `config.toml`; else the defaults), then these settings
    /// ([`apply`](Self::apply)).
    ///
    /// # Errors
    /// A configuration file that does not read, and the errors of [`apply`](Self::apply).
    pub fn resolve(&self, file: Option<&Path>, run: &RunDir, resume: bool) -> Result<TrainConfig> {
        let config = match file.map(Path::to_path_buf).or_else(|| resume.then(|| run.config_path())) {
            Some(p) => TrainConfig::read(&p)?,
            None => TrainConfig::default(),
        };
        self.apply(config)
    }

    /// `config` with every given setting replaced, validated. `init_weights` becomes the
    /// absolute path of the weights file (a run directory's best weights).
    ///
    /// # Errors
    /// Starting weights that do not exist, a setting out of range.
    pub fn apply(&self, mut c: TrainConfig) -> Result<TrainConfig> {
        self.set_given(&mut c);
        if let Some(p) = &self.init_weights {
            let file = if p.is_dir() { RunDir::new(p).best_path() } else { p.clone() };
            let file = std::fs::canonicalize(&file).map_err(|e| Error::io(&file, e))?;
            c.init_weights = Some(file);
        }
        c.validate()?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_take_binary_suffixes() {
        assert_eq!(parse_bytes("8G"), Ok(8 << 30));
        assert_eq!(parse_bytes("512MiB"), Ok(512 << 20));
        assert_eq!(parse_bytes("1.5k"), Ok(1536));
        assert_eq!(parse_bytes("1000"), Ok(1000));
        assert!(parse_bytes("eight").unwrap_err().contains("eight"));
        assert!(parse_bytes("-1G").is_err());
    }

    #[test]
    fn given_settings_win_and_the_rest_stay() {
        let base = TrainConfig { epochs: 7, ..TrainConfig::default() };
        let flags =
            TrainOverrides { lr: Some(0.01), hidden: Some(16), sampler: Some(Sampler::Random), ..Default::default() };
        let c = flags.apply(base.clone()).unwrap();
        assert_eq!((c.epochs, c.optimizer.lr, c.model.hidden, c.sampler), (7, 0.01, 16, Sampler::Random));
        assert_eq!(TrainOverrides::default().apply(base.clone()).unwrap(), base);
        assert!(TrainOverrides { epochs: Some(0), ..Default::default() }.apply(base.clone()).is_err());
    }

    #[test]
    fn a_given_threshold_wins_and_is_checked() {
        let base = TrainConfig { threshold: 0.3, ..TrainConfig::default() };
        let c = TrainOverrides { threshold: Some(0.7), ..Default::default() }.apply(base.clone()).unwrap();
        assert_eq!(c, TrainConfig { threshold: 0.7, ..base.clone() }, "only the threshold changes");
        assert_eq!(TrainOverrides::default().apply(base.clone()).unwrap().threshold, 0.3);
        let err = TrainOverrides { threshold: Some(1.5), ..Default::default() }.apply(base).unwrap_err();
        assert!(err.to_string().contains("threshold"), "{err}");
    }

    #[test]
    fn the_configuration_is_the_file_or_on_resume_the_runs_own_then_the_settings() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path());
        std::fs::write(run.config_path(), "epochs = 5\n").unwrap();
        let file = dir.path().join("other.toml");
        std::fs::write(&file, "epochs = 6\nseed = 2\n").unwrap();
        let none = TrainOverrides::default();
        assert_eq!(none.resolve(None, &run, false).unwrap(), TrainConfig::default());
        assert_eq!(none.resolve(None, &run, true).unwrap().epochs, 5, "a resumed run keeps its configuration");
        assert_eq!(none.resolve(Some(&file), &run, true).unwrap().epochs, 6, "a given file wins");
        let flags = TrainOverrides { epochs: Some(9), ..Default::default() };
        assert_eq!(flags.resolve(Some(&file), &run, false).unwrap().seed, 2);
        assert_eq!(flags.resolve(Some(&file), &run, false).unwrap().epochs, 9, "flags win over the file");
        assert!(none.resolve(Some(&dir.path().join("missing.toml")), &run, false).is_err());
    }

    #[test]
    fn starting_weights_of_a_run_are_its_best_weights_by_absolute_path() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path());
        std::fs::write(run.best_path(), b"w").unwrap();
        let flags = TrainOverrides { init_weights: Some(dir.path().to_path_buf()), ..Default::default() };
        let c = flags.apply(TrainConfig::default()).unwrap();
        assert_eq!(c.init_weights, Some(std::fs::canonicalize(run.best_path()).unwrap()));
        let missing = TrainOverrides { init_weights: Some(dir.path().join("nowhere")), ..Default::default() };
        assert!(missing.apply(TrainConfig::default()).unwrap_err().to_string().contains("nowhere"));
    }
}
