//! `trackgnn geometry`: write the detector as detectors.csv and summarise it.

use std::process::ExitCode;

use anyhow::{Context, Result};
use serde_json::json;
use trackgnn_trackml::csv::write_detectors;

use crate::util::{load_detector, print_json};

/// `trackgnn geometry`.
#[derive(Debug, clap::Args)]
pub struct GeometryArgs {
    /// Where to write detectors.csv.
    #[arg(long, value_name = "FILE")]
    pub out: std::path::PathBuf,
    #[command(flatten)]
    pub json: crate::cli::JsonArg,
    #[command(flatten)]
    pub detector: crate::cli::DetectorArg,
}

pub fn run(a: GeometryArgs) -> Result<ExitCode> {
    let det = load_detector(a.detector.detector.as_deref())?;
    let bytes = write_detectors(&a.out, &det.modules).with_context(|| format!("writing {}", a.out.display()))?;
    let layers: Vec<_> = det
        .layers
        .iter()
        .map(|l| {
            json!({
                "volume_id": l.id.volume(), "layer_id": l.id.layer(), "modules": l.modules.len(),
                "kind": format!("{:?}", l.kind).to_lowercase(), "technology": l.technology.name(),
                "r_min_mm": l.r_min, "r_max_mm": l.r_max, "z_min_mm": l.z_min, "z_max_mm": l.z_max,
            })
        })
        .collect();
    if a.json.json {
        print_json(&json!({
            "out": a.out, "modules": det.modules.len(), "layers": det.layers.len(),
            "volumes": det.layers.iter().map(|l| l.id.volume()).collect::<std::collections::BTreeSet<_>>().len(),
            "bytes": bytes, "per_layer": layers,
        }));
    } else {
        println!(
            "{:>6} {:>5} {:>7}  {:>9} {:>9} {:>9} {:>9}  kind",
            "volume", "layer", "modules", "r_min", "r_max", "z_min", "z_max"
        );
        for l in &det.layers {
            println!(
                "{:>6} {:>5} {:>7}  {:>9.1} {:>9.1} {:>9.1} {:>9.1}  {:?} {}",
                l.id.volume(),
                l.id.layer(),
                l.modules.len(),
                l.r_min,
                l.r_max,
                l.z_min,
                l.z_max,
                l.kind,
                l.technology.name()
            );
        }
        println!(
            "{} modules in {} layers written to {} ({} bytes)",
            det.modules.len(),
            det.layers.len(),
            a.out.display(),
            bytes
        );
    }
    Ok(ExitCode::SUCCESS)
}
