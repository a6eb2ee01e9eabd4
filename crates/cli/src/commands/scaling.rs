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

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use trackgnn_train::config::Sampler;
use trackgnn_train::scaling::launch::Launcher;
use trackgnn_train::scaling::options::{Regimes, StudyMode, StudyOptions};

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
    /// Graph directory (measure mode; in simulate mode: where the run's graphs are now, if moved).
    #[arg(long, value_name = "DIR")]
    pub graphs: Option<PathBuf>,
    /// Rank counts, comma separated; must include 1 (default: 1,2 to measure,
    /// 1,2,4,8,16,32,64 to simulate).
    #[arg(long, value_name = "LIST")]
    pub ranks: Option<String>,
    /// Threads per rank (`train --threads`; default 1 to measure, the run's to simulate).
    #[arg(long)]
    pub threads_per_rank: Option<usize>,
    /// Epochs of every measured run (the first is not timed when there are several).
    #[arg(long, default_value_t = 2)]
    pub epochs: usize,
    /// Step sampler (default: balanced to measure, both to simulate).
    #[arg(long, value_enum)]
    pub sampler: Option<Sampler>,
    /// Runs per configuration; speed-ups use the fastest.
    #[arg(long, default_value_t = trackgnn_train::scaling::options::DEFAULT_REPEATS)]
    pub repeats: usize,
    /// Graphs of one rank (`train --max-graphs`): the strong data set, and each rank's share in
    /// weak scaling (N ranks use N × it). Default: all graphs for strong, all / the largest
    /// rank count for weak.
    #[arg(long)]
    pub max_graphs: Option<usize>,
    /// Scaling regimes.
    #[arg(long, value_enum, default_value_t = Regimes::Both)]
    pub regime: Regimes,
    /// Output directory: runs/, logs, scaling.json, speed-up plots (simulate: simulation.json).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The MPI launcher.
    #[arg(long, default_value = "mpirun")]
    pub mpirun: String,
    /// Allow more ranks than cores (`mpirun --oversubscribe`).
    #[arg(long)]
    pub oversubscribe: bool,
    /// An extra argument for the launcher (repeatable), e.g. `--mpirun-arg=--bind-to=core`.
    #[arg(long = "mpirun-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub mpirun_args: Vec<String>,
    /// Training configuration for every run (`train --config`).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Predict rank counts beyond this machine from a measured run (see --from).
    #[arg(long)]
    pub simulate: bool,
    /// The measured run to simulate from: a `train` run directory with one graph per step, or
    /// a `scaling` output directory (its fastest 1-rank strong run).
    #[arg(long, value_name = "DIR")]
    pub from: Option<PathBuf>,
    /// Compare the predictions with a measured study (its scaling.json or directory); implies
    /// --simulate, and --from defaults to the study.
    #[arg(long, value_name = "FILE")]
    pub check: Option<PathBuf>,
    /// Interconnect of the simulation from `bench allreduce --out FILE` (its fit).
    #[arg(long, value_name = "FILE")]
    pub interconnect: Option<PathBuf>,
    /// All-reduce latency α of the simulation, seconds per message (default 2e-6: InfiniBand
    /// HDR-like); wins over --interconnect.
    #[arg(long, value_name = "SECONDS")]
    pub latency: Option<f64>,
    /// All-reduce link bandwidth β of the simulation, bytes/s (default 20e9: InfiniBand
    /// HDR-like); wins over --interconnect.
    #[arg(long, value_name = "BYTES_PER_S")]
    pub bandwidth: Option<f64>,
    /// Cores the simulated ranks share (slows compute by max(1, N·threads / cores)); default:
    /// unlimited, or the --check study's.
    #[arg(long)]
    pub cores: Option<usize>,
    /// Epochs whose step draws the simulation averages.
    #[arg(long, default_value_t = 4)]
    pub sim_epochs: u64,
    #[command(flatten)]
    pub json: crate::cli::JsonArg,
    /// Further `train` arguments for every run, after `--` (e.g. `-- --hidden 64`).
    #[arg(last = true, value_name = "TRAIN_ARGS")]
    pub train_args: Vec<String>,
}

impl From<ScalingArgs> for StudyOptions {
    fn from(a: ScalingArgs) -> Self {
        StudyOptions {
            graphs: a.graphs,
            ranks: a.ranks,
            threads_per_rank: a.threads_per_rank,
            epochs: a.epochs,
            sampler: a.sampler,
            repeats: a.repeats,
            max_graphs: a.max_graphs,
            regimes: a.regime,
            out: a.out,
            mpirun: a.mpirun,
            oversubscribe: a.oversubscribe,
            mpirun_args: a.mpirun_args,
            config: a.config,
            simulate: a.simulate,
            from: a.from,
            check: a.check,
            interconnect: a.interconnect,
            latency: a.latency,
            bandwidth: a.bandwidth,
            cores: a.cores,
            sim_epochs: a.sim_epochs,
            train_args: a.train_args,
        }
    }
}

/// `trackgnn scaling`.
pub fn run(a: ScalingArgs) -> Result<ExitCode> {
    let as_json = a.json.json;
    let options = StudyOptions::from(a);
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

    use super::*;
    use crate::cli::{Cli, Command};

    fn options(extra: &[&str]) -> StudyOptions {
        let mut v = vec!["trackgnn", "scaling"];
        v.extend(extra);
        let Command::Scaling(a) = Cli::try_parse_from(v).unwrap().command else { panic!() };
        a.into()
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
