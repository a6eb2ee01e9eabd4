//! `trackgnn scaling`: the scaling study of data-parallel training.
//!
//! Three modes share the arguments ([`ScalingArgs`]):
//! - **measure** (default, [`measure`]): launches `mpirun -np N trackgnn train …` for every
//!   rank count, regime and repeat, reads back each run's logs and prints the analogues of the
//!   reference Tables 1 and 2 (validation metrics and time; utilisation, memory, speed-up);
//! - **simulate** (`--simulate`, [`simulate`]): predicts the epoch time of any number of ranks
//!   from one measured run's per-graph step times and the ring all-reduce model
//!   ([`trackgnn_train::scaling`], which holds the model; this command parses, calls and prints);
//! - **check** (`--check`): the simulation, compared with a measured study.
//!
//! Two regimes, named as such everywhere: **strong** scaling keeps the data set (speed-up
//! t₁ / t_N, efficiency t₁ / (N·t_N)); **weak** scaling gives each rank the graphs of one rank
//! (N ranks train on N × the graphs, as in the reference tables), and its speed-up is the
//! throughput ratio (graphs/s)_N / (graphs/s)₁.

pub mod measure;
pub mod simulate;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
pub use trackgnn_train::scaling::Regime;

use crate::cli::{RegimeArg, SamplerArg};
use clap::Args;

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
    pub sampler: Option<SamplerArg>,
    /// Runs per configuration; speed-ups use the fastest.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Graphs of one rank (`train --max-graphs`): the strong data set, and each rank's share in
    /// weak scaling (N ranks use N × it). Default: all graphs for strong, all / the largest
    /// rank count for weak.
    #[arg(long)]
    pub max_graphs: Option<usize>,
    /// Scaling regimes.
    #[arg(long, value_enum, default_value_t = RegimeArg::Both)]
    pub regime: RegimeArg,
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

impl RegimeArg {
    /// The regimes the option selects.
    pub fn regimes(self) -> Vec<Regime> {
        match self {
            RegimeArg::Strong => vec![Regime::Strong],
            RegimeArg::Weak => vec![Regime::Weak],
            RegimeArg::Both => vec![Regime::Strong, Regime::Weak],
        }
    }
}

/// Parses `--ranks 1,2,4`: positive, distinct, sorted on return, and including 1 (the
/// baseline of every speed-up).
pub fn parse_ranks(text: &str) -> Result<Vec<usize>> {
    let mut v = Vec::new();
    for part in text.split(',').map(str::trim) {
        match part.parse::<usize>() {
            Ok(n) if n > 0 => v.push(n),
            _ => bail!("--ranks: `{part}` is not a positive rank count (expected e.g. 1,2,4)"),
        }
    }
    v.sort_unstable();
    if v.windows(2).any(|w| w[0] == w[1]) {
        bail!("--ranks: `{text}` lists a rank count twice");
    }
    if v.first() != Some(&1) {
        bail!("--ranks: `{text}` must include 1, the baseline of the speed-ups");
    }
    Ok(v)
}

/// What `trackgnn scaling` was asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Measure,
    Simulate,
}

/// Checks the combination of options, with messages that name them.
fn mode(a: &ScalingArgs) -> Result<Mode> {
    let simulate = a.simulate || a.check.is_some();
    if simulate {
        if a.from.is_none() && a.check.is_none() {
            bail!("--simulate needs --from RUN_DIR (a measured run, or a `scaling` output directory)");
        }
        if a.repeats != 3 || a.oversubscribe || !a.mpirun_args.is_empty() || !a.train_args.is_empty() {
            bail!("--repeats, --oversubscribe, --mpirun-arg and train arguments are for measuring, not --simulate");
        }
        if a.sim_epochs == 0 {
            bail!("--sim-epochs must be at least 1");
        }
        return Ok(Mode::Simulate);
    }
    for (given, flag) in [
        (a.interconnect.is_some(), "--interconnect"),
        (a.latency.is_some(), "--latency"),
        (a.bandwidth.is_some(), "--bandwidth"),
        (a.from.is_some(), "--from"),
        (a.cores.is_some(), "--cores"),
    ] {
        if given {
            bail!("{flag} is an option of the simulation: add --simulate");
        }
    }
    if a.graphs.is_none() {
        bail!("measuring needs --graphs DIR (or --simulate --from RUN_DIR to predict)");
    }
    if a.out.is_none() {
        bail!("measuring needs --out DIR for the runs and scaling.json");
    }
    if a.repeats == 0 {
        bail!("--repeats must be at least 1");
    }
    if a.epochs == 0 {
        bail!("--epochs must be at least 1");
    }
    if a.threads_per_rank == Some(0) {
        bail!("--threads-per-rank must be at least 1");
    }
    Ok(Mode::Measure)
}

/// `trackgnn scaling`.
pub fn run(a: ScalingArgs) -> Result<ExitCode> {
    match mode(&a)? {
        Mode::Measure => measure::run(&a),
        Mode::Simulate => simulate::run(&a),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command, SamplerArg};

    fn args(extra: &[&str]) -> ScalingArgs {
        let mut v = vec!["trackgnn", "scaling"];
        v.extend(extra);
        let Command::Scaling(a) = Cli::try_parse_from(v).unwrap().command else { panic!() };
        a
    }

    fn error(extra: &[&str]) -> String {
        format!("{:#}", mode(&args(extra)).unwrap_err())
    }

    #[test]
    fn ranks_parse_with_clear_errors() {
        assert_eq!(parse_ranks("1,2").unwrap(), vec![1, 2]);
        assert_eq!(parse_ranks(" 4, 1,2 ").unwrap(), vec![1, 2, 4]);
        let e = parse_ranks("1,x").unwrap_err().to_string();
        assert!(e.contains("`x` is not a positive rank count"), "{e}");
        assert!(parse_ranks("1,0").unwrap_err().to_string().contains("`0`"));
        assert!(parse_ranks("1,2,2").unwrap_err().to_string().contains("twice"));
        assert!(parse_ranks("2,4").unwrap_err().to_string().contains("must include 1"));
        assert!(parse_ranks("").is_err());
    }

    #[test]
    fn modes_and_argument_errors() {
        let m = args(&["--graphs", "g", "--out", "o", "--ranks", "1,2", "--sampler", "random", "--repeats", "2"]);
        assert_eq!(mode(&m).unwrap(), Mode::Measure);
        assert_eq!((m.repeats, m.sampler, m.regime), (2, Some(SamplerArg::Random), RegimeArg::Both));
        let t = args(&["--graphs", "g", "--out", "o", "--", "--hidden", "16"]);
        assert_eq!(t.train_args, ["--hidden", "16"]);
        assert!(error(&["--out", "o"]).contains("needs --graphs"));
        assert!(error(&["--graphs", "g"]).contains("needs --out"));
        assert!(error(&["--graphs", "g", "--out", "o", "--repeats", "0"]).contains("--repeats"));
        assert!(error(&["--graphs", "g", "--out", "o", "--threads-per-rank", "0"]).contains("--threads-per-rank"));
        assert!(error(&["--graphs", "g", "--out", "o", "--latency", "1e-6"]).contains("add --simulate"));
        assert!(error(&["--simulate"]).contains("needs --from"));
        assert!(error(&["--simulate", "--from", "r", "--oversubscribe"]).contains("for measuring"));
        assert_eq!(mode(&args(&["--simulate", "--from", "r", "--regime", "weak"])).unwrap(), Mode::Simulate);
        assert_eq!(mode(&args(&["--check", "s.json"])).unwrap(), Mode::Simulate, "--check implies --simulate");
        // Last one wins.
        assert_eq!(args(&["--graphs", "g", "--out", "o", "--epochs", "3", "--epochs", "5"]).epochs, 5);
        assert_eq!(RegimeArg::Both.regimes(), [Regime::Strong, Regime::Weak]);
    }
}
