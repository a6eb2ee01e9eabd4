//! `trackgnn scaling`: the scaling study of data-parallel training.
//!
//! Three modes share the arguments ([`ScalingArgs`]), which become a
//! [`StudyOptions`] that the library checks and runs ([`trackgnn_train::scaling`]):
//! - **measure** (default, [`Launcher`]): launches `mpirun -np N trackgnn train …` for every
//!   rank count, regime and repeat, reads back each run's logs and prints the analogues of the
//!   reference Tables 1 and 2 (validation metrics and time; utilisation, memory, speed-up);
//! - **simulate** (`--simulate`, [`StudyOptions::simulate`]): predicts the epoch time of any
//!   number of ranks from one measured run's per-graph step times and the ring all-reduce model;
//! - **check** (`--check`): the simulation, compared with a measured study.
//!
//! Two regimes, named as such everywhere: **strong** scaling keeps the data set (speed-up
//! t₁ / t_N, efficiency t₁ / (N·t_N)); **weak** scaling gives each rank the graphs of one rank
//! (N ranks train on N × the graphs, as in the reference tables), and its speed-up is the
//! throughput ratio (graphs/s)_N / (graphs/s)₁.

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
