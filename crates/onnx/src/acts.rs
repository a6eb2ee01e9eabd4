//! The ACTS-side configuration of an exported model: which node features the ACTS GNN
//! pipeline must compute, how it scales them, and which ones its ONNX edge classifier selects
//! and divides by which scale, so that the model's input `x` is what trackgnn fed it.
//!
//! How ACTS fills the inputs (acts-project/acts, `Examples/Algorithms/TrackFindingGnn` and
//! `Plugins/Gnn`): the algorithm computes its `nodeFeatures` per space point, each divided by
//! its `featureScales` entry; graph construction (the CUDA module map) reads columns 0–3 of that
//! tensor as r, φ, z, η and derives six edge features from them, `[Δr, Δφ (wrapped), Δz, Δη,
//! φ slope, rφ slope]`; the ONNX edge classifier then keeps the `selectedFeatures` columns (a
//! mask: the kept columns stay in ascending order) and divides each by its `featureScales`
//! entry. So the layout written here always starts with r/1000, φ/π, z/1000, η — the scales of
//! trackgnn's edge features `[Δr/1000, Δφ/π, Δz/1000, Δη]`, which then are exactly the first four
//! module-map edge features — and the classifier's scales are the model's scales divided by the
//! algorithm's.

use serde::Serialize;
use trackgnn_graph::features::{Feature, FeatureConfig};
use trackgnn_graph::recipe::EDGE_FEATURE_NAMES;

use crate::error::{Error, Result};
use crate::model::TensorInfo;

/// The first node features of the ACTS layout, with the algorithm-level scales trackgnn's edge
/// features are computed with.
pub const LEADING: [(Feature, f64); 4] =
    [(Feature::R, 1000.0), (Feature::Phi, std::f64::consts::PI), (Feature::Z, 1000.0), (Feature::Eta, 1.0)];

/// The name of a trackgnn node feature in ACTS's `TrackFindingAlgorithmGnn::NodeFeature`
/// (`None`: ACTS cannot compute it).
pub fn acts_name(feature: Feature) -> Option<&'static str> {
    // Exhaustive on purpose: a new trackgnn feature must be mapped or refused here.
    Some(match feature {
        Feature::R => "eR",
        Feature::Phi => "ePhi",
        Feature::Z => "eZ",
        Feature::Eta => "eEta",
        Feature::X => "eX",
        Feature::Y => "eY",
        Feature::ClusterSize => "eCellCount",
        Feature::ChargeSum => "eChargeSum",
    })
}

/// The sidecar written beside the `.onnx` file (`<stem>.acts.json`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ActsConfig {
    /// The `.onnx` file's name.
    pub model: String,
    /// The ONNX opset of the file.
    pub opset: i64,
    /// Inputs in the order the plugin fills them.
    pub inputs: Vec<TensorInfo>,
    /// The output: logits (the plugin applies the sigmoid and its cut).
    pub output: TensorInfo,
    /// `TrackFindingAlgorithmGnn.Config.nodeFeatures`: the features ACTS computes per space
    /// point (enum names).
    pub node_features: Vec<String>,
    /// `TrackFindingAlgorithmGnn.Config.featureScales`: each computed feature is divided by
    /// this.
    pub node_feature_scales: Vec<f64>,
    /// `OnnxEdgeClassifier.Config.selectedFeatures`: the columns the model reads.
    pub selected_features: Vec<usize>,
    /// `OnnxEdgeClassifier.Config.featureScales`: each selected column is divided by this.
    pub feature_scales: Vec<f64>,
    /// What column j of `x` is in trackgnn's terms: `quantity / scale`.
    pub model_features: Vec<ModelFeature>,
    /// The edge features the model reads (the first columns of `edge_attr`), empty without.
    pub edge_features: Vec<String>,
    /// The scales the module map's graph construction must undo (`ModuleMapCuda.Config`
    /// `rScale`, `phiScale`, `zScale`) to cut on r, φ, z in mm and rad.
    pub module_map_scales: ModuleMapScales,
    /// The edge score cut the run used (`OnnxEdgeClassifier.Config.cut`).
    pub cut: f64,
}

/// A node feature as trackgnn computes it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelFeature {
    /// trackgnn's name (`r`, `phi`, …).
    pub name: String,
    /// The column is `quantity / scale`.
    pub scale: f64,
}

/// `ModuleMapCuda.Config` scales matching [`ActsConfig::node_feature_scales`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModuleMapScales {
    /// `rScale`.
    pub r_scale: f64,
    /// `phiScale`.
    pub phi_scale: f64,
    /// `zScale`.
    pub z_scale: f64,
}

/// The ACTS feature configuration for a model reading `features` (and trackgnn's edge features
/// when `edge_features`).
///
/// # Errors
/// A feature ACTS cannot compute, one listed twice, or features out of the order the
/// classifier's selection keeps (the message says which order works).
pub fn acts_features(features: &FeatureConfig, edge_features: bool) -> Result<ActsFeatures> {
    let mut layout: Vec<(Feature, f64)> = LEADING.to_vec();
    for f in &features.features {
        let Some(_) = acts_name(f.name) else {
            return Err(Error::Unsupported(format!(
                "node feature `{}`: the ACTS GNN pipeline cannot compute it",
                f.name
            )));
        };
        if features.features.iter().filter(|g| g.name == f.name).count() > 1 {
            return Err(Error::Unsupported(format!(
                "node feature `{}` is listed twice; the ACTS edge classifier selects each column once",
                f.name
            )));
        }
        if !layout.iter().any(|(g, _)| *g == f.name) {
            layout.push((f.name, 1.0));
        }
    }
    let selected: Vec<usize> = features
        .features
        .iter()
        .map(|f| layout.iter().position(|(g, _)| *g == f.name).expect("every feature is in the layout"))
        .collect();
    if selected.windows(2).any(|w| w[0] > w[1]) {
        let order: Vec<String> = {
            let mut s = selected.clone();
            s.sort_unstable();
            s.iter().map(|&i| layout[i].0.to_string()).collect()
        };
        return Err(Error::Unsupported(format!(
            "node features [{}]: the ACTS edge classifier keeps its selected columns in the pipeline's order \
             (r, phi, z, eta first); train with the features in the order [{}]",
            features.features.iter().map(|f| f.name.to_string()).collect::<Vec<_>>().join(", "),
            order.join(", ")
        )));
    }
    let feature_scales = features.features.iter().zip(&selected).map(|(f, &i)| f.scale / layout[i].1).collect();
    Ok(ActsFeatures {
        node_features: layout.iter().map(|(f, _)| acts_name(*f).expect("checked").to_string()).collect(),
        node_feature_scales: layout.iter().map(|(_, s)| *s).collect(),
        selected_features: selected,
        feature_scales,
        model_features: features
            .features
            .iter()
            .map(|f| ModelFeature { name: f.name.to_string(), scale: f.scale })
            .collect(),
        edge_features: if edge_features { EDGE_FEATURE_NAMES.iter().map(|s| s.to_string()).collect() } else { vec![] },
    })
}

/// The feature part of [`ActsConfig`].
#[derive(Clone, Debug, PartialEq)]
pub struct ActsFeatures {
    /// See [`ActsConfig::node_features`].
    pub node_features: Vec<String>,
    /// See [`ActsConfig::node_feature_scales`].
    pub node_feature_scales: Vec<f64>,
    /// See [`ActsConfig::selected_features`].
    pub selected_features: Vec<usize>,
    /// See [`ActsConfig::feature_scales`].
    pub feature_scales: Vec<f64>,
    /// See [`ActsConfig::model_features`].
    pub model_features: Vec<ModelFeature>,
    /// See [`ActsConfig::edge_features`].
    pub edge_features: Vec<String>,
}

/// The module-map scales of the layout ([`LEADING`]).
pub fn module_map_scales() -> ModuleMapScales {
    ModuleMapScales { r_scale: LEADING[0].1, phi_scale: LEADING[1].1, z_scale: LEADING[2].1 }
}

#[cfg(test)]
mod tests {
    use trackgnn_graph::features::FeatureSpec;

    use super::*;

    fn cfg(fs: &[(Feature, f64)]) -> FeatureConfig {
        FeatureConfig { features: fs.iter().map(|&(name, scale)| FeatureSpec { name, scale }).collect() }
    }

    #[test]
    fn the_default_features_select_the_leading_columns_unscaled() {
        let a = acts_features(&FeatureConfig::default(), true).unwrap();
        assert_eq!(a.node_features, ["eR", "ePhi", "eZ", "eEta"]);
        assert_eq!(a.selected_features, [0, 1, 2]);
        assert_eq!(a.feature_scales, [1.0, 1.0, 1.0]);
        assert_eq!(a.edge_features, ["dr", "dphi", "dz", "deta"]);
    }

    #[test]
    fn other_scales_and_extra_features_divide_relative_to_the_pipeline() {
        let a = acts_features(&cfg(&[(Feature::R, 500.0), (Feature::Eta, 2.0), (Feature::ClusterSize, 10.0)]), false)
            .unwrap();
        assert_eq!(a.node_features, ["eR", "ePhi", "eZ", "eEta", "eCellCount"]);
        assert_eq!(a.node_feature_scales[4], 1.0);
        assert_eq!(a.selected_features, [0, 3, 4]);
        assert_eq!(a.feature_scales, [0.5, 2.0, 10.0]);
    }

    #[test]
    fn features_out_of_pipeline_order_or_twice_are_refused() {
        let err = acts_features(&cfg(&[(Feature::Z, 1.0), (Feature::R, 1.0)]), false).unwrap_err().to_string();
        assert!(err.contains("[r, z]"), "{err}");
        let err = acts_features(&cfg(&[(Feature::R, 1.0), (Feature::R, 2.0)]), false).unwrap_err().to_string();
        assert!(err.contains("twice"), "{err}");
    }
}
