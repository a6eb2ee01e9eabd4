//! Runs an exported `.onnx` file with tract (pure Rust) on the reference files of
//! `trackgnn export --reference EVENTS --reference-out DIR` and prints, per event, the max
//! |Δ logit| against the engine and the edges on different sides of 0.5: the Rust twin of
//! `tools/onnx_check.py`.
//!
//! ```sh
//! cargo run -p trackgnn-onnx --example tract_check -- model.onnx REF_DIR
//! ```

use std::path::Path;
use std::process::ExitCode;

use tract_onnx::prelude::*;

/// A `.npy` file as written by `trackgnn_onnx::npy`: (shape, little-endian payload).
fn read_npy(path: &Path) -> (Vec<usize>, Vec<u8>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&bytes[..6], b"\x93NUMPY", "{}: not a .npy file", path.display());
    let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(&bytes[10..10 + hlen]).expect("ASCII header");
    let shape_text = header.split("'shape': (").nth(1).and_then(|s| s.split(')').next()).expect("a shape");
    let shape = shape_text.split(',').filter_map(|d| d.trim().parse().ok()).collect();
    (shape, bytes[10 + hlen..].to_vec())
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn main() -> TractResult<ExitCode> {
    let args: Vec<String> = std::env::args().collect();
    let [_, model, refdir] = &args[..] else {
        eprintln!("usage: tract_check MODEL.onnx REF_DIR");
        return Ok(ExitCode::from(2));
    };
    let refdir = Path::new(refdir);
    let reference: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(refdir.join("reference.json"))?)?;
    let plan = tract_onnx::onnx().model_for_path(model)?.into_optimized()?.into_runnable()?;
    let n_inputs = plan.model().inputs.len();
    let mut worst = 0.0f32;
    let mut flips_total = 0;
    for ev in reference["events"].as_array().expect("events") {
        let prefix = ev["prefix"].as_str().expect("prefix");
        let file = |what: &str| refdir.join(format!("{prefix}.{what}.npy"));
        let (xs, xb) = read_npy(&file("x"));
        let (es, eb) = read_npy(&file("edge_index"));
        let ei: Vec<i64> = eb.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect();
        let mut inputs: TVec<TValue> = tvec![
            tract_ndarray::Array2::from_shape_vec((xs[0], xs[1]), f32s(&xb))?.into_tensor().into(),
            tract_ndarray::Array2::from_shape_vec((es[0], es[1]), ei)?.into_tensor().into(),
        ];
        if n_inputs == 3 {
            let (s, b) = read_npy(&file("edge_attr"));
            inputs.push(tract_ndarray::Array2::from_shape_vec((s[0], s[1]), f32s(&b))?.into_tensor().into());
        }
        let want = f32s(&read_npy(&file("logits")).1);
        let t0 = std::time::Instant::now();
        let out = plan.run(inputs)?;
        let seconds = t0.elapsed().as_secs_f64();
        let got: Vec<f32> = out[0].to_plain_array_view::<f32>()?.iter().copied().collect();
        assert_eq!(got.len(), want.len(), "{prefix}: output length");
        let dmax = want.iter().zip(&got).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        let flips = want.iter().zip(&got).filter(|(a, b)| (**a > 0.0) != (**b > 0.0)).count();
        println!(
            "{prefix}: {} edges, max |Δ logit| {dmax:.2e}, {flips} edges change side, tract {seconds:.3} s",
            want.len()
        );
        worst = worst.max(dmax);
        flips_total += flips;
    }
    println!("tract: max |Δ logit| {worst:.2e} over all events, {flips_total} edges change side");
    Ok(if worst <= 1e-4 && flips_total == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
