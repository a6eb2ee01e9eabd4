//! Every setting of a training run ([`TrainConfig`]), as the run directory records it in its
//! `config.toml`.

use serde::{Deserialize, Serialize};
use trackgnn_engine::optim::{AdamWConfig, LrScheduleConfig};
use trackgnn_engine::{Checkpointing, Device, ModelConfig, Precision};

/// What to do with a graph whose training step would exceed the memory budget
/// (`--max-memory`; see the train crate's `budget`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Oversize {
    /// Cut it into overlapping φ sectors, trained in one step with their gradients summed.
    #[default]
    #[cfg_attr(feature = "clap", value(help = "Cut the graph into overlapping φ sectors trained in one step"))]
    Split,
    /// Leave it out of training (with a warning naming it).
    #[cfg_attr(feature = "clap", value(help = "Leave the graph out of training"))]
    Skip,
}

/// Which validation figure selects the best model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BestMetric {
    /// Lowest validation loss.
    ValLoss,
    /// Highest validation efficiency.
    Efficiency,
    /// Highest validation AUC.
    Auc,
}

/// How the learning rate grows with the number of ranks (the global batch grows with them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum LrScaling {
    /// The configured learning rate at any number of ranks.
    #[cfg_attr(feature = "clap", value(help = "The same learning rate at any number of ranks"))]
    None,
    /// × ranks (Goyal et al. 2017), with warm-up.
    #[cfg_attr(feature = "clap", value(help = "× ranks"))]
    Linear,
    /// × √ranks.
    Sqrt,
}

/// How each step's graphs are drawn from the training set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Sampler {
    /// A random permutation per epoch.
    Random,
    /// Graphs binned by edge count; every rank's graph in a step comes from the same bin.
    #[cfg_attr(feature = "clap", value(help = "Steps draw their graphs from one size bin"))]
    Balanced,
}

impl Sampler {
    /// Every sampler.
    pub const ALL: [Sampler; 2] = [Sampler::Random, Sampler::Balanced];

    /// The name in configuration files and JSON outputs: `random` or `balanced`.
    pub fn name(self) -> &'static str {
        match self {
            Sampler::Random => "random",
            Sampler::Balanced => "balanced",
        }
    }

    /// The sampler of a [`name`](Sampler::name).
    pub fn from_name(name: &str) -> Option<Sampler> {
        Sampler::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// What a step whose loss or gradient is not finite does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum NonFinite {
    /// Stop the training with an error naming the step and the graphs, keeping the last
    /// checkpoint (which holds no non-finite step).
    #[cfg_attr(
        feature = "clap",
        value(help = "Stop the training naming the step and the graphs; the last checkpoint is kept")
    )]
    Stop,
    /// Skip the step (no update), count it (`skipped_steps`, `skipped` in `steps.jsonl`) and go
    /// on.
    #[cfg_attr(feature = "clap", value(help = "Skip the step (no update) and count it"))]
    Skip,
}

/// What a loss spike does: a step whose loss exceeds `loss_spike_factor` × the median loss of
/// the steps before it (see [`TrainConfig::loss_spike_factor`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum SpikeAction {
    /// Log it (with the step's graphs) and update as usual.
    #[cfg_attr(feature = "clap", value(help = "Log it with the step's graphs and update as usual"))]
    Warn,
    /// Log it and skip the step's update.
    #[cfg_attr(feature = "clap", value(help = "Log it and skip the step's update"))]
    Skip,
    /// Log it, skip the update and go back to the weights and optimiser state of the last
    /// checkpoint; training goes on with the next step (the steps since the checkpoint are
    /// not replayed: their graphs are left out, as large-model practice does after a spike).
    #[cfg_attr(feature = "clap", value(help = "Log it, skip the update and go back to the last checkpoint's weights"))]
    Rollback,
}

/// The settings of a training run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainConfig {
    /// The model.
    pub model: ModelConfig,
    /// The optimiser (AdamW; `weight_decay = 0` is Adam).
    pub optimizer: AdamWConfig,
    /// Warm-up and step decay of the learning rate.
    pub schedule: LrScheduleConfig,
    /// Learning-rate scaling with the number of ranks.
    pub lr_scaling: LrScaling,
    /// Epochs.
    pub epochs: usize,
    /// Graphs per optimiser step on each rank (their gradients are averaged).
    pub graphs_per_step: usize,
    /// Seed of the weights, the split and every shuffle.
    pub seed: u64,
    /// Fractions of the graphs for training, validation and test.
    pub split: [f64; 3],
    /// Use at most this many graphs of the directory (0: all).
    pub max_graphs: usize,
    /// Weight of the positive class in the loss (`pos_weight`).
    pub pos_weight: f64,
    /// Loss weight of true edges of non-target particles (the field's default: 0).
    pub non_target_weight: f64,
    /// Loss weight of target edges of secondaries, particles produced more than 1 mm from the
    /// beam line (1: as prompt ones). Needs graphs that store production-vertex radii.
    pub secondary_weight: f64,
    /// Clip the global gradient norm to this (0: no clipping).
    pub clip_grad_norm: f64,
    /// Score threshold of the edge metrics.
    pub threshold: f64,
    /// Stop after this many epochs without improvement of `best_metric` (0: never).
    pub early_stopping_patience: usize,
    /// Which validation figure selects the best model.
    pub best_metric: BestMetric,
    /// Also checkpoint every this many optimiser steps (0: at the end of each epoch only).
    pub checkpoint_every_steps: usize,
    /// How steps draw their graphs.
    pub sampler: Sampler,
    /// Bins of the balanced sampler.
    pub sampler_bins: usize,
    /// Activation checkpointing of the engine (`none`, `per-iteration`, `every:K`, each but
    /// `none` optionally `+bf16`): less memory for some recomputation; the gradients are the
    /// same (with `+bf16`, those of the forward with its saved states rounded).
    pub checkpointing: Checkpointing,
    /// Arithmetic of the matrix products: `f32`, or `bf16` (mixed precision: bf16 operands,
    /// f32 accumulation, f32 weights and optimiser state). Configs written before it load as
    /// `f32`.
    pub precision: Precision,
    /// Where the model runs: `cpu` (the default; configs written before it load so) or
    /// `cuda:N`. It changes neither the model nor its weight files, and may change on resume.
    pub device: Device,
    /// Memory budget of one training step in bytes (0: none). A graph whose step would need
    /// more is cut into φ sectors or skipped (`oversize`).
    pub max_memory_bytes: u64,
    /// What to do with a graph over the budget.
    pub oversize: Oversize,
    /// φ overlap \[rad\] on each side of the sectors an oversize graph is cut into.
    pub sector_overlap_phi: f64,
    /// Start from these weights (a `best.safetensors` of an earlier run with the same model)
    /// instead of the seed's random ones: fine-tuning, e.g. with another loss weighting. The
    /// optimiser, schedule and epochs start afresh.
    pub init_weights: Option<std::path::PathBuf>,
    /// What a step whose loss or gradient is not finite does: `stop` or `skip`.
    pub non_finite: NonFinite,
    /// Compare the replicas' weight checksums every this many steps (and at every epoch's
    /// end; 0: at epoch ends only). One all-gather of two numbers and a pass over the weights.
    pub replica_check_every_steps: usize,
    /// A step's loss beyond this many times the median loss of the previous
    /// `loss_spike_window` steps is a loss spike (0: no alarm). Spikes are counted in
    /// `steps.jsonl` and `metrics.csv` and handled as `loss_spike` says.
    pub loss_spike_factor: f64,
    /// Steps whose losses make the median a spike is judged against (spikes themselves left
    /// out); the alarm waits until this many steps are taken.
    pub loss_spike_window: usize,
    /// What a loss spike does.
    pub loss_spike: SpikeAction,
    /// Weight λ of the auxiliary target (0: none, the default): an extra head on the final
    /// edge states regresses log10 pT \[GeV\] of each true edge's particle, and the loss
    /// minimised is the classifier's BCE + λ · the mean squared error over the true edges.
    /// Above 0 the model gets the head ([`ModelConfig::aux_pt`], parameters `aux_pt.*`, a
    /// training-only head that inference and export leave out). The logged `loss` stays the
    /// BCE; the auxiliary term is logged as `aux_loss`.
    pub aux_pt_weight: f64,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            model: ModelConfig::default(),
            optimizer: AdamWConfig::default(),
            schedule: LrScheduleConfig::default(),
            lr_scaling: LrScaling::None,
            epochs: 10,
            graphs_per_step: 1,
            seed: 1,
            split: [0.8, 0.1, 0.1],
            max_graphs: 0,
            pos_weight: 1.0,
            non_target_weight: 0.0,
            secondary_weight: 1.0,
            clip_grad_norm: 0.0,
            threshold: 0.5,
            early_stopping_patience: 0,
            best_metric: BestMetric::ValLoss,
            checkpoint_every_steps: 0,
            sampler: Sampler::Random,
            sampler_bins: 8,
            checkpointing: Checkpointing::NONE,
            precision: Precision::F32,
            device: Device::Cpu,
            max_memory_bytes: 0,
            oversize: Oversize::Split,
            sector_overlap_phi: 0.3,
            init_weights: None,
            non_finite: NonFinite::Stop,
            replica_check_every_steps: 50,
            loss_spike_factor: 5.0,
            loss_spike_window: 20,
            loss_spike: SpikeAction::Warn,
            aux_pt_weight: 0.0,
        }
    }
}

impl TrainConfig {
    /// Reads a configuration file (TOML; missing settings take their defaults). Not checked:
    /// see [`TrainConfig::validate`].
    pub fn read(path: &std::path::Path) -> crate::Result<TrainConfig> {
        use crate::Error;
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        toml::from_str(&text)
            .map_err(|e| Error::Corrupt { path: path.to_path_buf(), message: format!("invalid training config: {e}") })
    }

    /// Checks the settings: [`Error::Setting`](crate::Error::Setting) naming the setting, or
    /// [`Error::Model`](crate::Error::Model).
    pub fn validate(&self) -> crate::Result<()> {
        let bad = |field: &'static str, message: String| Err(crate::Error::setting(field, message));
        self.model.validate()?;
        let o = &self.optimizer;
        if !(o.lr > 0.0 && o.lr.is_finite()) {
            return bad("optimizer.lr", format!("= {} must be positive", o.lr));
        }
        if !(0.0..1.0).contains(&o.betas.0) || !(0.0..1.0).contains(&o.betas.1) {
            return bad("optimizer.betas", format!("= {:?} must lie in [0, 1)", o.betas));
        }
        if self.epochs == 0 {
            return bad("epochs", "must be at least 1".into());
        }
        if self.graphs_per_step == 0 {
            return bad("graphs_per_step", "must be at least 1".into());
        }
        if self.split.iter().any(|&f| !(0.0..=1.0).contains(&f)) || (self.split.iter().sum::<f64>() - 1.0).abs() > 1e-6
        {
            return bad("split", format!("= {:?} must be three fractions summing to 1", self.split));
        }
        if self.split[0] <= 0.0 {
            return bad("split", format!("= {:?}: the training fraction must be positive", self.split));
        }
        if self.pos_weight.is_nan() || self.pos_weight <= 0.0 {
            return bad("pos_weight", format!("= {} must be positive", self.pos_weight));
        }
        if self.non_target_weight < 0.0 {
            return bad("non_target_weight", format!("= {} must be non-negative", self.non_target_weight));
        }
        if !(self.secondary_weight.is_finite() && self.secondary_weight > 0.0) {
            return bad("secondary_weight", format!("= {} must be positive and finite", self.secondary_weight));
        }
        if !(0.0..1.0).contains(&self.threshold) {
            return bad("threshold", format!("= {} must lie in (0, 1)", self.threshold));
        }
        if !(0.0..std::f64::consts::PI).contains(&self.sector_overlap_phi) {
            return bad("sector_overlap_phi", format!("= {} must lie in [0, π)", self.sector_overlap_phi));
        }
        if !(self.loss_spike_factor == 0.0 || self.loss_spike_factor > 1.0) || self.loss_spike_factor.is_nan() {
            return bad("loss_spike_factor", format!("= {} must be 0 (off) or above 1", self.loss_spike_factor));
        }
        if !(self.aux_pt_weight.is_finite() && self.aux_pt_weight >= 0.0) {
            return bad("aux_pt_weight", format!("= {} must be 0 (off) or positive and finite", self.aux_pt_weight));
        }
        if self.model.aux_pt && self.aux_pt_weight == 0.0 {
            return bad(
                "model.aux_pt",
                "= true with aux_pt_weight = 0: the auxiliary head exists exactly when it is trained (set \
                 aux_pt_weight above 0, or leave model.aux_pt out)"
                    .into(),
            );
        }
        if self.loss_spike_window == 0 {
            return bad("loss_spike_window", "must be at least 1".into());
        }
        if self.sampler_bins == 0 {
            return bad("sampler_bins", "must be at least 1".into());
        }
        Ok(())
    }

    /// The configuration with the model's auxiliary head set from `aux_pt_weight` (what the
    /// trainer runs and writes into the run: the head exists exactly when λ > 0).
    pub fn with_aux_head(mut self) -> TrainConfig {
        self.model.aux_pt = self.aux_pt_weight > 0.0;
        self
    }

    /// The learning rate at `ranks` ranks.
    pub fn scaled_lr(&self, ranks: usize) -> f64 {
        let r = ranks as f64;
        self.optimizer.lr
            * match self.lr_scaling {
                LrScaling::None => 1.0,
                LrScaling::Linear => r,
                LrScaling::Sqrt => r.sqrt(),
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampler_names_are_the_config_file_names() {
        for s in Sampler::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), s.name());
            assert_eq!(Sampler::from_name(s.name()), Some(s));
        }
        assert_eq!(Sampler::from_name("Balanced"), None);
    }

    #[test]
    fn validate_names_the_setting_in_a_typed_error() {
        let cfg = TrainConfig { threshold: 1.5, ..TrainConfig::default() };
        let err = cfg.validate().unwrap_err();
        assert!(matches!(err, crate::Error::Setting { field: "threshold", .. }), "{err}");
        assert_eq!(err.to_string(), "invalid config: `threshold` = 1.5 must lie in (0, 1)");
        let mut cfg = TrainConfig::default();
        cfg.model.hidden = 0;
        assert!(matches!(cfg.validate(), Err(crate::Error::Model(_))));
        for w in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let err = TrainConfig { secondary_weight: w, ..TrainConfig::default() }.validate().unwrap_err();
            assert!(err.to_string().contains("secondary_weight"), "{err}");
        }
    }

    #[test]
    fn aux_pt_weight_is_off_by_default_sets_the_head_and_is_validated() {
        let old: TrainConfig = toml::from_str("epochs = 3\n").unwrap();
        assert_eq!(old.aux_pt_weight, 0.0);
        assert!(!old.clone().with_aux_head().model.aux_pt);
        let text = toml::to_string(&old.with_aux_head()).unwrap();
        assert!(!text.contains("aux_pt ="), "no head, no key in [model]: {text}");
        let cfg: TrainConfig = toml::from_str("aux_pt_weight = 0.5\n").unwrap();
        let cfg = cfg.with_aux_head();
        assert!(cfg.model.aux_pt && cfg.validate().is_ok());
        assert!(toml::to_string(&cfg).unwrap().contains("aux_pt = true"));
        for w in [-1.0, f64::NAN, f64::INFINITY] {
            let err = TrainConfig { aux_pt_weight: w, ..TrainConfig::default() }.validate().unwrap_err();
            assert!(err.to_string().contains("aux_pt_weight"), "{err}");
        }
        let mut head_only = TrainConfig::default();
        head_only.model.aux_pt = true;
        assert!(head_only.validate().unwrap_err().to_string().contains("model.aux_pt"));
        // The stability study's pair: reference (a) at 8 graphs per step, without and with.
        for (text, weight) in [
            (include_str!("../../../tools/recipes/stability_a8.toml"), 0.0),
            (include_str!("../../../tools/recipes/stability_a8_aux.toml"), 0.5),
        ] {
            let cfg = toml::from_str::<TrainConfig>(text).unwrap().with_aux_head();
            cfg.validate().unwrap();
            assert_eq!((cfg.aux_pt_weight, cfg.graphs_per_step, cfg.model.aux_pt), (weight, 8, weight > 0.0));
        }
    }

    #[test]
    fn configs_without_secondary_weight_load_with_weight_one() {
        let old: TrainConfig = toml::from_str("epochs = 3\nnon_target_weight = 0.5\n").unwrap();
        assert_eq!(old.secondary_weight, 1.0);
        let cfg: TrainConfig = toml::from_str("secondary_weight = 4.0\n").unwrap();
        assert_eq!(cfg.secondary_weight, 4.0);
    }

    #[test]
    fn precision_is_recorded_and_configs_without_it_load_as_f32() {
        let old: TrainConfig = toml::from_str("epochs = 3\n").unwrap();
        assert_eq!(old.precision, Precision::F32);
        let cfg = TrainConfig { precision: Precision::Bf16, ..TrainConfig::default() };
        let text = toml::to_string(&cfg).unwrap();
        assert!(text.contains("precision = \"bf16\""), "{text}");
        assert_eq!(toml::from_str::<TrainConfig>(&text).unwrap(), cfg);
        assert!(toml::from_str::<TrainConfig>("precision = \"fp8\"\n").is_err());
    }
}
