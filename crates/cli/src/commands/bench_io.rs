//! `trackgnn bench io`: event generation time on one core, CSV writing (plain and gzip) and
//! reading throughput ([`IoBench`] measures; this command parses and prints).

use std::process::ExitCode;

use anyhow::{Context, Result};
use trackgnn_simulate::io_bench::IoBench;

use crate::util::print_json;

/// `trackgnn bench io`.
#[derive(Debug, clap::Args)]
pub struct BenchIoArgs {
    /// Events to generate and time.
    #[arg(long, default_value_t = 3)]
    pub events: u64,
    /// Pile-up of the generated events.
    #[arg(long, default_value_t = 200.0)]
    pub pileup: f64,
    /// Directory for the files written (a temporary one by default).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub json: crate::cli::JsonArg,
}

pub fn run(a: BenchIoArgs) -> Result<ExitCode> {
    anyhow::ensure!(a.events > 0, "--events must be at least 1");
    let tmp;
    let dir = match &a.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir().context("creating a temporary directory")?;
            tmp.path().to_path_buf()
        }
    };
    let bench = IoBench::run(a.events, a.pileup, &dir)?;
    if a.json.json {
        print_json(&serde_json::to_value(bench)?);
    } else {
        print!("{bench}");
    }
    Ok(ExitCode::SUCCESS)
}
