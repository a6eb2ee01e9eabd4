//! What an export reports ([`ExportReport`]): the file, its inputs and output, the ACTS
//! configuration and the reference files; as text lines or as one JSON object.

use std::fmt;
use std::path::Path;

use serde::Serialize;
use trackgnn_engine::Precision;

use crate::reference::Reference;
use crate::{ActsConfig, Export, TensorInfo};

/// An exported model as reported.
#[derive(Clone, Debug, Serialize)]
pub struct ExportReport<'a> {
    /// The model file.
    pub out: &'a Path,
    /// The ACTS configuration beside it.
    pub sidecar: &'a Path,
    /// The format (`onnx`).
    pub format: &'static str,
    /// Bytes of the model file.
    pub bytes: usize,
    /// Its opset.
    pub opset: i64,
    /// ONNX nodes in its graph.
    pub onnx_nodes: usize,
    /// Parameters of the model.
    pub parameters: usize,
    /// The inputs.
    pub inputs: &'a [TensorInfo],
    /// The output.
    pub output: &'a TensorInfo,
    /// The arithmetic the run scores in (the file computes in f32).
    pub run_precision: Precision,
    /// The ACTS configuration.
    pub acts: &'a ActsConfig,
    /// The reference files, when written.
    pub reference: Option<&'a Reference>,
}

impl<'a> ExportReport<'a> {
    /// The report of `export`, written to `out` with its `sidecar`, of a model of `parameters`
    /// parameters that its run scores in `run_precision`.
    pub fn new(
        out: &'a Path,
        sidecar: &'a Path,
        export: &'a Export,
        parameters: usize,
        run_precision: Precision,
        reference: Option<&'a Reference>,
    ) -> Self {
        let m = &export.model;
        ExportReport {
            out,
            sidecar,
            format: "onnx",
            bytes: m.bytes.len(),
            opset: m.opset,
            onnx_nodes: m.nodes,
            parameters,
            inputs: &m.inputs,
            output: &m.output,
            run_precision,
            acts: &export.acts,
            reference,
        }
    }
}

/// `name [d0, d1] dtype`.
fn shape(t: &TensorInfo) -> String {
    format!("{} [{}] {}", t.name, t.shape.join(", "), t.dtype)
}

impl fmt::Display for ExportReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: {} bytes, ONNX opset {}, {} nodes, {} parameters",
            self.out.display(),
            self.bytes,
            self.opset,
            self.onnx_nodes,
            self.parameters
        )?;
        writeln!(f, "inputs: {}", self.inputs.iter().map(shape).collect::<Vec<_>>().join(", "))?;
        writeln!(f, "output: {} (logits; the ACTS plugin applies the sigmoid and its cut)", shape(self.output))?;
        writeln!(
            f,
            "ACTS configuration: {} (nodeFeatures [{}], selectedFeatures {:?}, featureScales {:?})",
            self.sidecar.display(),
            self.acts.node_features.join(", "),
            self.acts.selected_features,
            self.acts.feature_scales
        )?;
        if self.run_precision != Precision::F32 {
            writeln!(f, "the run scores in {}; the ONNX file computes in f32", self.run_precision)?;
        }
        if let Some(r) = self.reference {
            writeln!(
                f,
                "reference: {} events in {}, engine scoring {:.4} s per event (f32, mean)",
                r.events.len(),
                r.dir.display(),
                r.mean_engine_seconds
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use trackgnn_engine::{InteractionGnn, ModelConfig};
    use trackgnn_graph::features::FeatureConfig;

    use super::*;

    #[test]
    fn an_export_reports_its_file_and_configuration() {
        let features = FeatureConfig::default();
        let model = InteractionGnn::<f32>::new(
            ModelConfig::default(),
            features.features.len(),
            4,
            &mut trackgnn_trackml::rng::Rng::new(0),
        );
        let export = crate::export(&model, &features, 0.5).unwrap();
        let (out, sidecar) = (Path::new("m.onnx"), Path::new("m.acts.json"));
        let report = ExportReport::new(out, sidecar, &export, 1234, Precision::Bf16, None);
        let text = report.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            format!(
                "m.onnx: {} bytes, ONNX opset {}, {} nodes, 1234 parameters",
                export.model.bytes.len(),
                export.model.opset,
                export.model.nodes
            )
        );
        assert!(lines[1].starts_with("inputs: x [N, ") && lines[2].starts_with("output: output [E] float32"), "{text}");
        assert!(lines[3].starts_with("ACTS configuration: m.acts.json (nodeFeatures ["));
        assert_eq!(lines[4], "the run scores in bf16; the ONNX file computes in f32");
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!((json["format"].as_str(), json["parameters"].as_u64()), (Some("onnx"), Some(1234)));
        assert!(json["reference"].is_null() && json["acts"]["opset"] == json["opset"]);
    }
}
