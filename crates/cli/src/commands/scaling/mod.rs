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

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Result, bail};
use trackgnn_train::config::Sampler;
pub use trackgnn_train::scaling::Regime;

use crate::cli::{RegimeArg, ScalingArgs};

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

/// `random` or `balanced`.
pub fn sampler_name(s: Sampler) -> &'static str {
    s.name()
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

/// Speed-up against ranks, with the ideal line y = N; writes `<stem>.png` and `<stem>.svg`.
pub fn speedup_plot(stem: &Path, title: &str, curves: &[(String, Vec<(f64, f64)>)], ranks: &[usize]) -> Result<()> {
    let ideal: Vec<(f64, f64)> = ranks.iter().map(|&n| (n as f64, n as f64)).collect();
    let mut series: Vec<(&str, Vec<(f64, f64)>)> = vec![("ideal", ideal)];
    series.extend(curves.iter().map(|(name, pts)| (name.as_str(), pts.clone())));
    trackgnn_train::plots::plot_series(stem, title, "ranks", "speed-up", &series, false)?;
    Ok(())
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
        assert_eq!(sampler_name(SamplerArg::Balanced.into()), "balanced");
    }
}
