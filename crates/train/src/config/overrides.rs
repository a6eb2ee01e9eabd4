//! Settings given on top of a training configuration (a command line's flags): one place
//! where each flag meets the configuration key it replaces.

use std::path::{Path, PathBuf};

use trackgnn_engine::{Checkpointing, Precision};

use super::{LrScaling, NonFinite, Oversize, Sampler, TrainConfig};
use crate::error::{Error, Result};
use crate::run_dir::RunDir;

/// Settings that replace a [`TrainConfig`]'s: each `Some` wins over the configuration's value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TrainOverrides {
    /// [`TrainConfig::epochs`].
    pub epochs: Option<usize>,
    /// [`TrainConfig::seed`].
    pub seed: Option<u64>,
    /// The optimiser's learning rate.
    pub lr: Option<f64>,
    /// The model's hidden width.
    pub hidden: Option<usize>,
    /// The model's message-passing iterations.
    pub iterations: Option<usize>,
    /// [`TrainConfig::pos_weight`].
    pub pos_weight: Option<f64>,
    /// [`TrainConfig::secondary_weight`].
    pub secondary_weight: Option<f64>,
    /// [`TrainConfig::graphs_per_step`].
    pub graphs_per_step: Option<usize>,
    /// [`TrainConfig::clip_grad_norm`].
    pub clip_grad_norm: Option<f64>,
    /// [`TrainConfig::early_stopping_patience`].
    pub early_stopping_patience: Option<usize>,
    /// [`TrainConfig::checkpoint_every_steps`].
    pub checkpoint_every_steps: Option<usize>,
    /// [`TrainConfig::max_graphs`].
    pub max_graphs: Option<usize>,
    /// The schedule's warm-up epochs.
    pub warmup_epochs: Option<f64>,
    /// Starting weights: a run directory (its best weights) or a weights file.
    pub init_weights: Option<PathBuf>,
    /// [`TrainConfig::lr_scaling`].
    pub lr_scaling: Option<LrScaling>,
    /// [`TrainConfig::checkpointing`].
    pub checkpointing: Option<Checkpointing>,
    /// [`TrainConfig::precision`].
    pub precision: Option<Precision>,
    /// [`TrainConfig::max_memory_bytes`].
    pub max_memory_bytes: Option<u64>,
    /// [`TrainConfig::oversize`].
    pub oversize: Option<Oversize>,
    /// [`TrainConfig::sampler`].
    pub sampler: Option<Sampler>,
    /// [`TrainConfig::non_finite`].
    pub non_finite: Option<NonFinite>,
    /// [`TrainConfig::replica_check_every_steps`].
    pub replica_check_every_steps: Option<usize>,
    /// [`TrainConfig::threshold`] (the edge metrics' score threshold).
    pub threshold: Option<f64>,
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
        fn set<T: Clone>(value: &Option<T>, field: &mut T) {
            if let Some(v) = value {
                *field = v.clone();
            }
        }
        set(&self.epochs, &mut c.epochs);
        set(&self.seed, &mut c.seed);
        set(&self.lr, &mut c.optimizer.lr);
        set(&self.hidden, &mut c.model.hidden);
        set(&self.iterations, &mut c.model.iterations);
        set(&self.pos_weight, &mut c.pos_weight);
        set(&self.secondary_weight, &mut c.secondary_weight);
        set(&self.graphs_per_step, &mut c.graphs_per_step);
        set(&self.clip_grad_norm, &mut c.clip_grad_norm);
        set(&self.early_stopping_patience, &mut c.early_stopping_patience);
        set(&self.checkpoint_every_steps, &mut c.checkpoint_every_steps);
        set(&self.max_graphs, &mut c.max_graphs);
        set(&self.warmup_epochs, &mut c.schedule.warmup_epochs);
        if let Some(p) = &self.init_weights {
            let file = if p.is_dir() { RunDir::new(p).best_path() } else { p.clone() };
            let file = std::fs::canonicalize(&file).map_err(|e| Error::io(&file, e))?;
            c.init_weights = Some(file);
        }
        set(&self.lr_scaling, &mut c.lr_scaling);
        set(&self.checkpointing, &mut c.checkpointing);
        set(&self.precision, &mut c.precision);
        set(&self.max_memory_bytes, &mut c.max_memory_bytes);
        set(&self.oversize, &mut c.oversize);
        set(&self.sampler, &mut c.sampler);
        set(&self.non_finite, &mut c.non_finite);
        set(&self.replica_check_every_steps, &mut c.replica_check_every_steps);
        set(&self.threshold, &mut c.threshold);
        c.validate()?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
