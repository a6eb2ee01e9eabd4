//! The configuration space of the InteractionGNN.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::ops::{Activation, Aggr};

/// The arithmetic of the matrix products (a compute choice, not part of the model: weights
/// trained in one precision load in the other).
///
/// `Bf16` is mixed precision as `torch.autocast(bfloat16)` does it: every matrix product
/// rounds its operands to bfloat16 and accumulates in f32 ([`crate::matmul_bf16`]); the weights
/// (the f32 masters), optimiser state, LayerNorm statistics, aggregations, the loss and the
/// scores stay f32.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// f32 throughout.
    #[default]
    F32,
    /// bf16 operands with f32 accumulation in the matrix products.
    Bf16,
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
        })
    }
}

impl FromStr for Precision {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "f32" => Ok(Precision::F32),
            "bf16" => Ok(Precision::Bf16),
            _ => Err(format!("precision `{s}`: expected f32 or bf16")),
        }
    }
}

/// LayerNorm after each Linear of the MLPs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Norm {
    /// No normalisation.
    None,
    /// LayerNorm with learned γ and β (`elementwise_affine=True`).
    Affine,
    /// LayerNorm without learned parameters (`elementwise_affine=False`, as acorn).
    NoAffine,
}

/// The order of the two updates inside one message-passing iteration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UpdateOrder {
    /// trackgnn's order: e' = edge_net(h\[src\], h\[dst\], e) from the old nodes, then
    /// h' = node_net(h, agg(e')) from the new edges.
    #[default]
    EdgeFirst,
    /// acorn's order (its `InteractionGNN.message_step`): h' = node_net(h, agg(e)) from the old
    /// edges, then e' = edge_net(h'\[src\], h'\[dst\], e) from the new nodes.
    NodeFirst,
}

impl UpdateOrder {
    /// Whether this is the default order (the key is then left out of written configs, so
    /// configs and runs written before the key existed read and write unchanged).
    pub fn is_edge_first(&self) -> bool {
        *self == UpdateOrder::EdgeFirst
    }
}

impl fmt::Display for UpdateOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            UpdateOrder::EdgeFirst => "edge_first",
            UpdateOrder::NodeFirst => "node_first",
        })
    }
}

/// The InteractionGNN edge classifier (Battaglia et al. 2016; the Exa.TrkX/acorn
/// `InteractionGNN`): node and edge encoders, `iterations` rounds of message passing (edge
/// network on [h_src, h_dst, e], aggregation of edge states at nodes, node network on
/// [h, aggregated incoming, aggregated outgoing], in the order `update_order` says) and an
/// edge classifier on [h_src, h_dst, e].
///
/// Each encoder/network is an MLP of `mlp_depth` Linear layers of width `hidden`; every hidden
/// Linear is followed by `norm` and `activation`, the last one by `norm` (if `output_norm`) and
/// `output_activation`. The classifier has `classifier_depth` Linear layers, the last of width 1
/// with no norm or activation (its output is the logit).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelConfig {
    /// Width of node and edge states and of every hidden layer.
    pub hidden: usize,
    /// Message-passing iterations.
    pub iterations: usize,
    /// Linear layers per encoder and network MLP (≥ 1).
    pub mlp_depth: usize,
    /// Linear layers of the edge classifier (≥ 1; the last one has width 1).
    pub classifier_depth: usize,
    /// Activation after hidden layers.
    pub activation: Activation,
    /// Activation on encoder and network outputs.
    pub output_activation: Activation,
    /// LayerNorm mode.
    pub norm: Norm,
    /// Apply the norm to encoder and network outputs too.
    pub output_norm: bool,
    /// Aggregations of incoming and of outgoing edge states (each contributes `hidden` columns
    /// per direction to the node network's input).
    pub aggregation: Vec<Aggr>,
    /// One edge network and one node network shared by all iterations (acorn's default), or a
    /// set per iteration.
    pub recurrent: bool,
    /// h ← h + node_net(…), e ← e + edge_net(…) instead of replacing the states.
    pub residual: bool,
    /// Edges then nodes (trackgnn's default) or nodes then edges (acorn's) in each iteration.
    #[serde(skip_serializing_if = "UpdateOrder::is_edge_first")]
    pub update_order: UpdateOrder,
    /// A training-only auxiliary head `aux_pt` on the final edge states that regresses the
    /// log10 pT \[GeV\] of each true edge's particle (its layers as the classifier's, on
    /// input H). Set by the trainer from `aux_pt_weight`; the head's parameters are stored
    /// with the weights under `aux_pt.*`, inference, ONNX export and acorn conversion ignore
    /// it. Left out of written configs when off, so older configs and runs read unchanged.
    #[serde(skip_serializing_if = "is_false")]
    pub aux_pt: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Default for ModelConfig {
    /// trackgnn's defaults: acorn's TrackML InteractionGNN (hidden 128, 8 recurrent iterations,
    /// 2-layer SiLU MLPs, LayerNorm without affine parameters, Tanh on network outputs, sum / mean
    /// / max / std aggregation, classifier 3H → H → H → 1), with residual connections on.
    fn default() -> Self {
        ModelConfig {
            hidden: 128,
            iterations: 8,
            mlp_depth: 2,
            classifier_depth: 3,
            activation: Activation::Silu,
            output_activation: Activation::Tanh,
            norm: Norm::NoAffine,
            output_norm: true,
            aggregation: vec![Aggr::Sum, Aggr::Mean, Aggr::Max, Aggr::Std],
            recurrent: true,
            residual: true,
            update_order: UpdateOrder::EdgeFirst,
            aux_pt: false,
        }
    }
}

impl ModelConfig {
    /// The model of the benchmark specification (docs/benchmarks.md): hidden 64, 4 separate
    /// iterations, ReLU, affine LayerNorm on every layer, residual, sum aggregation, classifier 3H → H → 1.
    pub fn bench_spec() -> Self {
        ModelConfig {
            hidden: 64,
            iterations: 4,
            mlp_depth: 2,
            classifier_depth: 2,
            activation: Activation::Relu,
            output_activation: Activation::Relu,
            norm: Norm::Affine,
            output_norm: true,
            aggregation: vec![Aggr::Sum],
            recurrent: false,
            residual: true,
            update_order: UpdateOrder::EdgeFirst,
            aux_pt: false,
        }
    }

    /// acorn's TrackML InteractionGNN exactly (`InteractionGNN` of acorn's edge-classifier
    /// stage with its TrackML hparams): nodes updated before edges in each iteration, no
    /// residual connections, no LayerNorm on the last layer of an encoder or network; 362,241
    /// parameters with 3 node features. `tools/acorn.py` converts its weights both ways.
    pub fn acorn() -> Self {
        ModelConfig {
            residual: false,
            output_norm: false,
            update_order: UpdateOrder::NodeFirst,
            ..ModelConfig::default()
        }
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |message: &str| Err(ConfigError { message: message.into() });
        if self.hidden == 0 || self.mlp_depth == 0 || self.classifier_depth == 0 {
            return bad("hidden, mlp_depth and classifier_depth must be at least 1");
        }
        if self.aggregation.is_empty() {
            return bad("aggregation needs at least one of sum, mean, max, std");
        }
        if let Some((i, a)) = self.aggregation.iter().enumerate().find(|(i, a)| self.aggregation[..*i].contains(a)) {
            return Err(ConfigError {
                message: format!("aggregation lists {} twice (entry {})", aggr_name(*a), i + 1),
            });
        }
        if self.update_order == UpdateOrder::NodeFirst && self.iterations == 0 {
            return bad("update_order = \"node_first\" with iterations = 0: without message passing there is \
                 no order to choose (leave update_order out)");
        }
        Ok(())
    }
}

/// The config name of an aggregator (`sum`, `mean`, `max`, `std`).
fn aggr_name(a: Aggr) -> &'static str {
    match a {
        Aggr::Sum => "sum",
        Aggr::Mean => "mean",
        Aggr::Max => "max",
        Aggr::Std => "std",
    }
}

/// A [`ModelConfig`] that cannot be used; the message names the setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ConfigError {
    /// What is wrong, naming the setting.
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(cfg: &ModelConfig) -> String {
        cfg.validate().unwrap_err().message
    }

    #[test]
    fn an_aggregator_listed_twice_is_refused_even_when_not_adjacent() {
        let twice = |aggregation| ModelConfig { aggregation, ..ModelConfig::default() };
        assert_eq!(error(&twice(vec![Aggr::Sum, Aggr::Mean, Aggr::Sum])), "aggregation lists sum twice (entry 3)");
        assert!(error(&twice(vec![Aggr::Max, Aggr::Max])).contains("max twice"));
        assert!(twice(vec![Aggr::Std, Aggr::Max, Aggr::Sum]).validate().is_ok());
    }

    #[test]
    fn update_order_reads_writes_and_is_validated() {
        // Left out: edge first, and a default config writes no key (old runs read unchanged).
        let cfg: ModelConfig = toml::from_str("hidden = 8").unwrap();
        assert_eq!(cfg.update_order, UpdateOrder::EdgeFirst);
        assert!(!toml::to_string(&ModelConfig::default()).unwrap().contains("update_order"));
        let acorn = toml::to_string(&ModelConfig::acorn()).unwrap();
        assert!(acorn.contains("update_order = \"node_first\""), "{acorn}");
        assert_eq!(toml::from_str::<ModelConfig>(&acorn).unwrap(), ModelConfig::acorn());
        let err = toml::from_str::<ModelConfig>("update_order = \"nodes\"").unwrap_err().to_string();
        assert!(err.contains("update_order") && err.contains("node_first"), "{err}");
        let none = ModelConfig { iterations: 0, update_order: UpdateOrder::NodeFirst, ..ModelConfig::default() };
        assert!(error(&none).contains("update_order"), "{}", error(&none));
        assert!(ModelConfig { iterations: 0, ..ModelConfig::default() }.validate().is_ok());
        assert!(ModelConfig::acorn().validate().is_ok());
    }
}
