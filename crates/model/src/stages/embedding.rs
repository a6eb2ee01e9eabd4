//! The hit embedding, ready for graph building: its run's configuration ([`EmbeddingConfig`])
//! and network, a point of the embedding space per hit ([`HitEmbedder`]).

use serde::{Deserialize, Serialize};
use trackgnn_engine::loss::HingeForm;
use trackgnn_engine::{DenseNet, DenseNetConfig};
use trackgnn_graph::features::{Feature, FeatureConfig, FeatureSpec, HitTable};
use trackgnn_graph::metric::HitEmbedder;

use super::{StageConfig, StageModel, StageTraining};

/// Everything that decides an embedding run (its `config.toml`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmbeddingConfig {
    /// Input features of each hit.
    pub features: FeatureConfig,
    /// The network (its `out` is the embedding dimension, 1 to 16).
    pub net: DenseNetConfig,
    /// Hinge margin; also the default radius of the graph.
    pub margin: f64,
    /// The false pairs' term: `squared_distance`, max(0, m² − d²) (Exa.TrkX 2020; the
    /// default, as runs before the key), or `distance`, max(0, m − d)² (acorn): the first
    /// stops pushing false pairs that sit on top of each other (its gradient is 2d), which are
    /// the hard negatives that matter at mu=200; the second pushes those hardest.
    pub hinge: HingeForm,
    /// Weight of the true pairs' term against the false pairs' (Exa.TrkX repeats its true
    /// pairs 4 times); 1 before the key.
    pub pos_weight: f64,
    /// Put each embedding on the unit sphere (acorn's `F.normalize`): the scale of the space
    /// is fixed, so the margin means the same at every step; off before the key.
    pub normalize: bool,
    /// Neighbours per hit of the graph (and of the hard-negative search).
    pub k_max: usize,
    /// Neighbours per hit of a second, larger validation budget, reported beside the `k_max`
    /// one (`efficiency_wide` and the rest of the train crate's `StageRecord`'s `_wide` figures): the
    /// embedding's efficiency is limited mostly by the budget, and the filter prunes a larger
    /// graph. 0 turns it off; 48 before the key (it changes no training).
    pub wide_k_max: usize,
    /// Radius of that graph in the embedding space (`None`, the default: no limit, each hit's
    /// `wide_k_max` nearest neighbours whatever their distance, as the `k_max` budget).
    pub wide_radius: Option<f64>,
    /// True pairs of particles with pT at least this \[GeV\] are pulled together.
    pub train_pt_min: f64,
    /// True pairs per step (sampled when the event has more).
    pub pairs_per_step: usize,
    /// Random pairs per true pair.
    pub random_per_true: f64,
    /// Hard negatives per true pair (at most).
    pub hard_per_true: f64,
    /// Optimisation.
    pub training: StageTraining,
}

impl Default for EmbeddingConfig {
    fn default() -> Self {
        let f = |name, scale| FeatureSpec { name, scale };
        EmbeddingConfig {
            features: FeatureConfig {
                features: vec![
                    f(Feature::R, 1000.0),
                    f(Feature::Phi, std::f64::consts::PI),
                    f(Feature::Z, 1000.0),
                    f(Feature::X, 1000.0),
                    f(Feature::Y, 1000.0),
                    f(Feature::Eta, 3.0),
                ],
            },
            net: DenseNetConfig { hidden: 64, hidden_layers: 3, out: 8 },
            margin: 0.2,
            hinge: HingeForm::SquaredDistance,
            pos_weight: 1.0,
            normalize: false,
            k_max: 16,
            wide_k_max: 48,
            wide_radius: None,
            train_pt_min: 0.5,
            pairs_per_step: 20_000,
            random_per_true: 2.0,
            hard_per_true: 1.0,
            training: StageTraining::default(),
        }
    }
}

/// A trained embedding, ready for graph building.
pub type EmbeddingModel = StageModel<EmbeddingConfig>;

impl StageConfig for EmbeddingConfig {
    fn net(&self) -> &DenseNetConfig {
        &self.net
    }

    fn input_width(&self) -> usize {
        self.features.features.len()
    }
}

impl HitEmbedder for EmbeddingModel {
    fn dim(&self) -> usize {
        self.net.out()
    }

    fn embed(&self, table: &HitTable) -> trackgnn_graph::Result<Vec<f32>> {
        Ok(embed_rows(&self.net, &self.config, &table.features(&self.config.features)?))
    }
}

/// The embedding of feature rows `x` by `net` (on the unit sphere if `cfg.normalize`).
pub fn embed_rows(net: &DenseNet<f32>, cfg: &EmbeddingConfig, x: &[f32]) -> Vec<f32> {
    let mut emb = net.infer(x);
    if cfg.normalize {
        for row in emb.chunks_exact_mut(net.out()) {
            let n = norm(row);
            row.iter_mut().for_each(|v| *v /= n);
        }
    }
    emb
}

/// The L2 norm of a row, kept off 0.
pub fn norm(row: &[f32]) -> f32 {
    row.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-6)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config.toml written before the wide budget (the q22 run's keys) reads with the
    /// default of 48 neighbours and no radius limit, and writes them back.
    #[test]
    fn an_older_config_reads_with_the_default_wide_budget() {
        let old = "margin = 0.2\nk_max = 16\ntrain_pt_min = 0.5\n\n[net]\nhidden = 128\nhidden_layers = 4\nout = 8\n";
        let cfg: EmbeddingConfig = toml::from_str(old).unwrap();
        assert_eq!((cfg.wide_k_max, cfg.wide_radius, cfg.k_max, cfg.net.out), (48, None, 16, 8));
        let set: EmbeddingConfig = toml::from_str(&format!("wide_k_max = 32\nwide_radius = 0.5\n{old}")).unwrap();
        assert_eq!((set.wide_k_max, set.wide_radius), (32, Some(0.5)));
        let back: EmbeddingConfig = toml::from_str(&toml::to_string(&set).unwrap()).unwrap();
        assert_eq!(back, set);
    }
}
