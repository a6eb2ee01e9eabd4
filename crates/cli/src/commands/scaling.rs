//! `trackgnn scaling`: the scaling study of data-parallel training.
//!
//! The arguments are the library's [`StudyOptions`], which it checks and runs in one of three
//! modes (measure, the default, with [`Launcher`]; `--simulate`; `--check`), and which
//! [`trackgnn_train::scaling`] describes with the two regimes, strong and weak.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use trackgnn_train::scaling::launch::Launcher;
use trackgnn_train::scaling::options::{StudyMode, StudyOptions};

use crate::util::print_json;

/// `trackgnn scaling`: measure mode (default), or `--simulate` / `--check`.
///
/// Measure: `trackgnn scaling --graphs DIR --ranks 1,2 --out DIR` launches
/// `mpirun -np N trackgnn train …` for every rank count, regime and repeat, then prints the
/// tables and writes `scaling.json` and `speedup.{png,svg}`. Simulate:
/// `trackgnn scaling --simulate --from RUN --ranks 1,2,4,…,64` predicts more ranks from a
/// measured run; `--check SCALING_JSON` also compares the predictions with measured runs.
#[derive(Debug, Args)]
pub struct ScalingArgs {
    #[command(flatten)]
    pub options: StudyOptions,
    #[command(flatten)]
    pub json: crate::cli::JsonArg,
}

/// `trackgnn scaling`.
pub fn run(a: ScalingArgs) -> Result<ExitCode> {
    let as_json = a.json.json;
    let options = a.options;
    let (value, text) = match options.mode()? {
        StudyMode::Measure => {
            let exe = std::env::current_exe().context("finding the trackgnn executable")?;
            let launcher = Launcher::plan(&options, &exe)?;
            let report = launcher.run(&mut |line| eprintln!("{line}"))?;
            let text = format!("{report}\nscaling.json and speedup.png/.svg in {}\n", launcher.out().display());
            (serde_json::to_value(&report)?, text)
        }
        StudyMode::Simulate => {
            let sim = options.simulate()?;
            (serde_json::to_value(&sim)?, sim.to_string())
        }
    };
    if as_json {
        print_json(&value);
    } else {
        print!("{text}");
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use trackgnn_train::config::Sampler;
    use trackgnn_train::scaling::options::Regimes;

    use super::*;
    use crate::cli::{Cli, Command};

    fn options(extra: &[&str]) -> StudyOptions {
        let mut v = vec!["trackgnn", "scaling"];
        v.extend(extra);
        let Command::Scaling(a) = Cli::try_parse_from(v).unwrap().command else { panic!() };
        a.options
    }

    #[test]
    fn arguments_become_the_study_options() {
        let m = options(&["--graphs", "g", "--out", "o", "--ranks", "1,2", "--sampler", "random", "--repeats", "2"]);
        assert_eq!(m.mode().unwrap(), StudyMode::Measure);
        assert_eq!((m.repeats, m.sampler, m.regimes), (2, Some(Sampler::Random), Regimes::Both));
        let d = options(&[]);
        let lib = StudyOptions::default();
        assert_eq!(
            (d.epochs, d.repeats, &d.mpirun, d.sim_epochs),
            (lib.epochs, lib.repeats, &lib.mpirun, lib.sim_epochs)
        );
        let t = options(&["--graphs", "g", "--out", "o", "--", "--hidden", "16"]);
        assert_eq!(t.train_args, ["--hidden", "16"]);
        let e = options(&["--simulate", "--from", "r", "--oversubscribe"]).mode().unwrap_err().to_string();
        assert!(e.contains("for measuring"), "{e}");
        assert_eq!(options(&["--simulate", "--from", "r", "--regime", "weak"]).regimes, Regimes::Weak);
        // Last one wins.
        assert_eq!(options(&["--graphs", "g", "--out", "o", "--epochs", "3", "--epochs", "5"]).epochs, 5);
    }
}
