use std::collections::HashMap;
use std::fs;
use std::path::Path;

use safetensors::SafeTensors;
use safetensors::tensor::TensorView;

use crate::util::{fails, json, ok, trackgnn};

/// The f32 values of tensor `name` of a safetensors file.
fn tensor(bytes: &[u8], name: &str) -> Vec<f32> {
    let st = SafeTensors::deserialize(bytes).unwrap();
    let t = st.tensor(name).unwrap_or_else(|e| panic!("{name}: {e}"));
    t.data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// Writes the parameters of an export-parity file, each value times `factor`, as a weights
/// file (parameters only, as a run's best.safetensors).
fn write_scaled_weights(parity: &[u8], factor: f32, skip: Option<&str>, out: &Path) {
    let st = SafeTensors::deserialize(parity).unwrap();
    let (_, meta) = SafeTensors::read_metadata(parity).unwrap();
    let order: Vec<String> = serde_json::from_str(&meta.metadata().as_ref().unwrap()["param_order"]).unwrap();
    let mut bufs = Vec::new();
    for name in order.iter().filter(|n| Some(n.as_str()) != skip) {
        let t = st.tensor(name).unwrap();
        let v: Vec<u8> = tensor(parity, name).iter().flat_map(|x| (x * factor).to_le_bytes()).collect();
        bufs.push((name.clone(), t.shape().to_vec(), v));
    }
    let views: Vec<(String, TensorView<'_>)> = bufs
        .iter()
        .map(|(n, s, b)| (n.clone(), TensorView::new(safetensors::Dtype::F32, s.clone(), b).unwrap()))
        .collect();
    fs::write(out, safetensors::serialize(views, None::<HashMap<String, String>>).unwrap()).unwrap();
}

#[test]
fn export_parity_uses_given_weights() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("m.toml"), "hidden = 8\niterations = 1\n").unwrap();
    let common = ["--model-config", "m.toml", "--nodes", "40", "--edges", "120"];
    let run = |out: &str, extra: &[&str]| {
        let mut args = vec!["export-parity", "--out", out];
        args.extend(common);
        args.extend(extra);
        json(&ok(trackgnn(d, &args)));
        fs::read(d.join(out)).unwrap()
    };
    let a = run("a.safetensors", &[]);
    write_scaled_weights(&a, 0.5, None, &d.join("w.safetensors"));
    // Another seed, so the weights can only come from the file.
    let b = run("b.safetensors", &["--weights", "w.safetensors", "--seed", "7"]);
    let w = fs::read(d.join("w.safetensors")).unwrap();
    for name in ["node_encoder.0.weight", "edge_classifier.2.bias", "node_network.1.weight"] {
        assert_eq!(tensor(&b, name), tensor(&w, name), "{name}");
    }
    assert_ne!(tensor(&a, "logits"), tensor(&b, "logits"));
    // Without --weights the seed decides, as before.
    let c = run("c.safetensors", &["--seed", "7"]);
    assert_ne!(tensor(&c, "node_encoder.0.weight"), tensor(&w, "node_encoder.0.weight"));
    // A weights file without one of the parameters: an error naming the file, no output.
    write_scaled_weights(&a, 1.0, Some("edge_network.0.bias"), &d.join("short.safetensors"));
    let mut args = vec!["export-parity", "--out", "d.safetensors", "--weights", "short.safetensors"];
    args.extend(common);
    let err = fails(trackgnn(d, &args));
    assert!(err.contains("short.safetensors") && err.contains("edge_network.0.bias"), "{err}");
    assert!(!d.join("d.safetensors").exists());
}
