//! `trackgnn geometry`: write the detector as detectors.csv and summarise it
//! ([`DetectorSummary`]).

use std::process::ExitCode;

use anyhow::{Context, Result};
use serde_json::json;
use trackgnn_trackml::csv::write_detectors;
use trackgnn_trackml::geometry::summary::DetectorSummary;

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
    let summary = DetectorSummary::of(&det);
    if a.json.json {
        let mut value = serde_json::to_value(&summary)?;
        (value["out"], value["bytes"]) = (json!(a.out), json!(bytes));
        print_json(&value);
    } else {
        print!("{summary}");
        let out = a.out.display();
        println!("{} modules in {} layers written to {out} ({bytes} bytes)", summary.modules, summary.layers);
    }
    Ok(ExitCode::SUCCESS)
}
