//! Export of a trained InteractionGNN as a standard ONNX graph for the ACTS GNN plugin.
//!
//! The file follows the conventions of the plugin's ONNX edge classifier
//! (acts-project/acts, `Plugins/Gnn/src/OnnxEdgeClassifier.cpp`): inputs filled by position —
//! node features `x [N, F]` float32, `edge_index [2, E]` int64 and, for models with edge
//! features, `edge_attr [E, F_e]` float32 — and one output `output [E]` holding logits (the
//! plugin applies the sigmoid and the cut). N and E are symbolic: one file serves every event.
//! The tensor names are the ones the plugin's TensorRT backend looks up.
//!
//! Beside the model, [`write()`] puts the ACTS configuration ([`acts::ActsConfig`]) that makes
//! the plugin feed exactly trackgnn's node features. [`model`] says which ONNX operators (and
//! opsets) each part of the model uses. [`mod@reference`] writes events' graph arrays and the
//! engine's logits for checking the file elsewhere; [`ExportReport`] is what an export reports.
//!
//! ```no_run
//! use trackgnn_engine::{InteractionGnn, ModelConfig};
//! use trackgnn_graph::features::FeatureConfig;
//! # fn main() -> Result<(), trackgnn_onnx::Error> {
//! let model = InteractionGnn::<f32>::new(ModelConfig::default(), 3, 4, &mut trackgnn_trackml::rng::Rng::new(0));
//! let export = trackgnn_onnx::export(&model, &FeatureConfig::default(), 0.5)?;
//! let sidecar = trackgnn_onnx::write(&export, "model.onnx".as_ref())?;
//! println!("opset {}, sidecar {}", export.model.opset, sidecar.display());
//! # Ok(()) }
//! ```

pub mod acts;
mod builder;
pub mod error;
pub mod model;
pub mod npy;
pub mod proto;
pub mod reference;
pub mod report;

use std::path::{Path, PathBuf};

use trackgnn_engine::InteractionGnn;
use trackgnn_graph::features::FeatureConfig;
use trackgnn_graph::recipe::EDGE_FEATURE_NAMES;

pub use acts::ActsConfig;
pub use error::{Error, Result};
pub use model::{OnnxModel, TensorInfo, export_model, required_opset};
pub use report::ExportReport;

/// An exported model and its ACTS configuration.
#[derive(Clone, Debug)]
pub struct Export {
    /// The ONNX model.
    pub model: OnnxModel,
    /// The sidecar (its `model` field is filled by [`write()`]).
    pub acts: ActsConfig,
}

/// Exports `model`, which reads the node `features` (and trackgnn's edge features when it has
/// an edge width), with the edge score `cut` the run used.
///
/// # Errors
/// Features the ACTS pipeline cannot provide (see [`acts::acts_features`]), an edge width other
/// than trackgnn's edge features, a node width other than `features`', weights that do not
/// match the configuration.
pub fn export(model: &InteractionGnn<f32>, features: &FeatureConfig, cut: f64) -> Result<Export> {
    if model.node_dim != features.features.len() {
        return Err(Error::Weights(format!(
            "the model reads {} node features, the recipe lists {}",
            model.node_dim,
            features.features.len()
        )));
    }
    if model.edge_dim != 0 && model.edge_dim != EDGE_FEATURE_NAMES.len() {
        return Err(Error::Unsupported(format!(
            "the model reads {} edge features; the ACTS module map provides [{}] first",
            model.edge_dim,
            EDGE_FEATURE_NAMES.join(", ")
        )));
    }
    let feats = acts::acts_features(features, model.edge_dim > 0)?;
    let doc = format!(
        "trackgnn InteractionGNN edge classifier; x = [{}]; output = logits",
        feats.model_features.iter().map(|f| format!("{}/{}", f.name, f.scale)).collect::<Vec<_>>().join(", ")
    );
    let onnx = export_model(model, &doc)?;
    let acts = ActsConfig {
        model: String::new(),
        opset: onnx.opset,
        inputs: onnx.inputs.clone(),
        output: onnx.output.clone(),
        node_features: feats.node_features,
        node_feature_scales: feats.node_feature_scales,
        selected_features: feats.selected_features,
        feature_scales: feats.feature_scales,
        model_features: feats.model_features,
        edge_features: feats.edge_features,
        module_map_scales: acts::module_map_scales(),
        cut,
    };
    Ok(Export { model: onnx, acts })
}

/// The sidecar's path for a model written to `out`: `model.onnx` → `model.acts.json`.
pub fn sidecar_path(out: &Path) -> PathBuf {
    out.with_extension("acts.json")
}

/// Writes the `.onnx` file to `out` and the ACTS configuration beside it (both atomically);
/// returns the sidecar's path.
///
/// # Errors
/// A file that cannot be written (the error names it).
pub fn write(export: &Export, out: &Path) -> Result<PathBuf> {
    let sidecar = sidecar_path(out);
    let mut acts = export.acts.clone();
    acts.model = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let json = serde_json::to_string_pretty(&acts).expect("the ACTS config serialises") + "\n";
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    trackgnn_trackml::atomic::write(out, &export.model.bytes).map_err(io(out))?;
    trackgnn_trackml::atomic::write(&sidecar, json.as_bytes()).map_err(io(&sidecar))?;
    Ok(sidecar)
}
