//! `trackgnn plot-loss`: several runs' training and validation loss per epoch in one figure,
//! with a line of figures per run ([`trackgnn_train::plots::plot_runs_loss`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use serde_json::json;
use trackgnn_train::plots::{plot_runs_loss, with_ext};

use crate::util::print_json;

/// `trackgnn plot-loss`.
#[derive(Debug, clap::Args)]
pub struct PlotLossArgs {
    /// Run directories (of `trackgnn train`), each labelled by its directory's name.
    #[arg(required = true, value_name = "RUN")]
    pub runs: Vec<PathBuf>,
    /// The figure: FILE.png and FILE.svg (a .png or .svg extension given is dropped first).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    #[command(flatten)]
    pub json: crate::cli::JsonArg,
}

/// The figure's stem: `out` without a `.png` or `.svg` extension.
fn stem(out: &Path) -> PathBuf {
    match out.extension().and_then(|e| e.to_str()) {
        Some("png" | "svg") => out.with_extension(""),
        _ => out.to_path_buf(),
    }
}

pub fn run(a: PlotLossArgs) -> Result<ExitCode> {
    let stem = stem(&a.out);
    let runs = plot_runs_loss(&stem, &a.runs)?;
    let (png, svg) = (with_ext(&stem, "png"), with_ext(&stem, "svg"));
    if a.json.json {
        print_json(&json!({ "runs": runs, "png": png, "svg": svg }));
    } else {
        for r in &runs {
            println!("{r}");
        }
        println!("wrote {} and {}", png.display(), svg.display());
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_extension_is_dropped_from_the_stem() {
        assert_eq!(stem(Path::new("a/loss.png")), Path::new("a/loss"));
        assert_eq!(stem(Path::new("a/loss.svg")), Path::new("a/loss"));
        assert_eq!(stem(Path::new("a/loss.v2")), Path::new("a/loss.v2"));
        assert_eq!(stem(Path::new("loss")), Path::new("loss"));
    }
}
