//! The options of a scaling study, checked and resolved: which mode they ask for
//! ([`StudyOptions::mode`]), the rank counts ([`parse_ranks`]), and for the simulation the
//! source run, the interconnect, the samplers and the measured study to check against
//! ([`StudyOptions::simulate`]). Messages name the command-line options of
//! `trackgnn scaling`, whose arguments are [`StudyOptions`] (its `clap::Args`, feature `clap`).

use std::path::{Path, PathBuf};

use super::Regime;
use super::allreduce::AllreduceCost;
use super::domain::{DomainPrediction, DomainSetup, predict_domain};
use super::measured::MeasuredRun;
use super::predict::{DEFAULT_BANDWIDTH_BYTES_PER_SECOND, DEFAULT_LATENCY_SECONDS};
use super::simulation::{MeasuredStudy, Simulation, SimulationPlan};
use super::{plot_speedup, read_json, write_json};
use crate::config::Sampler;
use crate::error::{Error, Result};
use crate::run_dir::RunDir;
use trackgnn_model::Error as ModelError;

/// The regimes a study measures or simulates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Regimes {
    /// A fixed data set: speed-up t1 / tN, efficiency t1 / (N·tN).
    Strong,
    /// Every rank keeps the graphs per epoch of one rank (N × the graphs): throughput ratio.
    Weak,
    /// Both regimes.
    #[default]
    Both,
}

impl Regimes {
    /// The regimes chosen, strong first.
    pub fn regimes(self) -> Vec<Regime> {
        match self {
            Regimes::Strong => vec![Regime::Strong],
            Regimes::Weak => vec![Regime::Weak],
            Regimes::Both => vec![Regime::Strong, Regime::Weak],
        }
    }
}

/// Everything a scaling study is asked, as `trackgnn scaling` takes it (`None`: the mode's
/// default): with the `clap` feature, its arguments (each field's doc comment its help).
/// [`Default`] is the command's defaults.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct StudyOptions {
    /// Graph directory (measure mode; in simulate mode: where the run's graphs are now, if moved).
    #[cfg_attr(feature = "clap", arg(long, value_name = "DIR"))]
    pub graphs: Option<PathBuf>,
    /// Rank counts, comma separated; must include 1 (default: 1,2 to measure,
    /// 1,2,4,8,16,32,64 to simulate).
    #[cfg_attr(feature = "clap", arg(long, value_name = "LIST"))]
    pub ranks: Option<String>,
    /// Threads per rank (`train --threads`; default 1 to measure, the run's to simulate).
    #[cfg_attr(feature = "clap", arg(long))]
    pub threads_per_rank: Option<usize>,
    /// Epochs of every measured run (the first is not timed when there are several).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DEFAULT_EPOCHS))]
    pub epochs: usize,
    /// Step sampler (default: balanced to measure, both to simulate).
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub sampler: Option<Sampler>,
    /// Runs per configuration; speed-ups use the fastest.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DEFAULT_REPEATS))]
    pub repeats: usize,
    /// Graphs of one rank (`train --max-graphs`): the strong data set, and each rank's share in
    /// weak scaling (N ranks use N × it). Default: all graphs for strong, all / the largest
    /// rank count for weak.
    #[cfg_attr(feature = "clap", arg(long))]
    pub max_graphs: Option<usize>,
    /// Scaling regimes.
    #[cfg_attr(feature = "clap", arg(long = "regime", value_name = "REGIME", value_enum, default_value_t = Regimes::Both))]
    pub regimes: Regimes,
    /// Output directory: runs/, logs, scaling.json, speed-up plots (simulate: simulation.json).
    #[cfg_attr(feature = "clap", arg(long, value_name = "DIR"))]
    pub out: Option<PathBuf>,
    /// The MPI launcher.
    #[cfg_attr(feature = "clap", arg(long, default_value = DEFAULT_MPIRUN))]
    pub mpirun: String,
    /// Allow more ranks than cores (`mpirun --oversubscribe`).
    #[cfg_attr(feature = "clap", arg(long))]
    pub oversubscribe: bool,
    /// An extra argument for the launcher (repeatable), e.g. `--mpirun-arg=--bind-to=core`.
    #[cfg_attr(feature = "clap", arg(long = "mpirun-arg", value_name = "ARG", allow_hyphen_values = true))]
    pub mpirun_args: Vec<String>,
    /// Training configuration for every run (`train --config`).
    #[cfg_attr(feature = "clap", arg(long, value_name = "FILE"))]
    pub config: Option<PathBuf>,
    /// Predict rank counts beyond this machine from a measured run (see --from).
    #[cfg_attr(feature = "clap", arg(long))]
    pub simulate: bool,
    /// The measured run to simulate from: a `train` run directory with one graph per step, or
    /// a `scaling` output directory (its fastest 1-rank strong run).
    #[cfg_attr(feature = "clap", arg(long, value_name = "DIR"))]
    pub from: Option<PathBuf>,
    /// Compare the predictions with a measured study (its scaling.json or directory); implies
    /// --simulate, and --from defaults to the study.
    #[cfg_attr(feature = "clap", arg(long, value_name = "FILE"))]
    pub check: Option<PathBuf>,
    /// Interconnect of the simulation from `bench allreduce --out FILE` (its fit).
    #[cfg_attr(feature = "clap", arg(long, value_name = "FILE"))]
    pub interconnect: Option<PathBuf>,
    /// All-reduce latency α of the simulation, seconds per message (default 2e-6: InfiniBand
    /// HDR-like); wins over --interconnect.
    #[cfg_attr(feature = "clap", arg(long, value_name = "SECONDS"))]
    pub latency: Option<f64>,
    /// All-reduce link bandwidth β of the simulation, bytes/s (default 20e9: InfiniBand
    /// HDR-like); wins over --interconnect.
    #[cfg_attr(feature = "clap", arg(long, value_name = "BYTES_PER_S"))]
    pub bandwidth: Option<f64>,
    /// Cores the simulated ranks share (slows compute by max(1, N·threads / cores)); default:
    /// unlimited, or the --check study's.
    #[cfg_attr(feature = "clap", arg(long))]
    pub cores: Option<usize>,
    /// Also predict one step of this graph split across each rank count (domain parallelism,
    /// `train --domain-ranks`), from its step's compute in the --from run.
    #[cfg_attr(feature = "clap", arg(long, value_name = "FILE"))]
    pub domain_graph: Option<PathBuf>,
    /// With --domain-graph: compare with the graph's steps in this domain-parallel run.
    #[cfg_attr(feature = "clap", arg(long, value_name = "RUN", requires = "domain_graph"))]
    pub domain_check: Option<PathBuf>,
    /// Epochs whose step draws the simulation averages.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DEFAULT_SIM_EPOCHS))]
    pub sim_epochs: u64,
    /// Further `train` arguments for every run, after `--` (e.g. `-- --hidden 64`).
    #[cfg_attr(feature = "clap", arg(last = true, value_name = "TRAIN_ARGS"))]
    pub train_args: Vec<String>,
}

impl Default for StudyOptions {
    fn default() -> Self {
        StudyOptions {
            graphs: None,
            ranks: None,
            threads_per_rank: None,
            epochs: DEFAULT_EPOCHS,
            sampler: None,
            repeats: DEFAULT_REPEATS,
            max_graphs: None,
            regimes: Regimes::Both,
            out: None,
            mpirun: DEFAULT_MPIRUN.into(),
            oversubscribe: false,
            mpirun_args: Vec::new(),
            domain_graph: None,
            domain_check: None,
            config: None,
            simulate: false,
            from: None,
            check: None,
            interconnect: None,
            latency: None,
            bandwidth: None,
            cores: None,
            sim_epochs: DEFAULT_SIM_EPOCHS,
            train_args: Vec::new(),
        }
    }
}

/// Epochs of every measured run unless told otherwise.
pub const DEFAULT_EPOCHS: usize = 2;
/// The MPI launcher unless told otherwise.
pub const DEFAULT_MPIRUN: &str = "mpirun";
/// Epochs whose step draws the simulation averages unless told otherwise.
pub const DEFAULT_SIM_EPOCHS: u64 = 4;
/// Runs per configuration unless told otherwise.
pub const DEFAULT_REPEATS: usize = 3;

/// What a scaling study was asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StudyMode {
    /// Train with every rank count and compare ([`super::launch`]).
    Measure,
    /// Predict from one measured run ([`super::simulation`]).
    Simulate,
}

/// Parses `--ranks 1,2,4`: positive, distinct, sorted on return, and including 1 (the
/// baseline of every speed-up).
pub fn parse_ranks(text: &str) -> Result<Vec<usize>> {
    let mut v = Vec::new();
    for part in text.split(',').map(str::trim) {
        match part.parse::<usize>() {
            Ok(n) if n > 0 => v.push(n),
            _ => return Err(Error::flag("--ranks", format!("takes positive rank counts (e.g. 1,2,4), not `{part}`"))),
        }
    }
    v.sort_unstable();
    if v.windows(2).any(|w| w[0] == w[1]) {
        return Err(Error::flag("--ranks", format!("lists a rank count twice: `{text}`")));
    }
    if v.first() != Some(&1) {
        return Err(Error::flag("--ranks", format!("must include 1, the baseline of the speed-ups: `{text}`")));
    }
    Ok(v)
}

impl StudyOptions {
    /// Checks the combination of options, with messages that name them.
    pub fn mode(&self) -> Result<StudyMode> {
        let simulate = self.simulate || self.check.is_some();
        if simulate {
            if self.from.is_none() && self.check.is_none() {
                return Err(Error::flag(
                    "--simulate",
                    "needs --from RUN_DIR (a measured run, or a `scaling` output directory)",
                ));
            }
            if self.repeats != DEFAULT_REPEATS
                || self.oversubscribe
                || !self.mpirun_args.is_empty()
                || !self.train_args.is_empty()
            {
                return Err(Error::flag(
                    "--simulate",
                    "does not take --repeats, --oversubscribe, --mpirun-arg or train arguments (they are for measuring)",
                ));
            }
            if self.sim_epochs == 0 {
                return Err(Error::flag("--sim-epochs", "must be at least 1"));
            }
            return Ok(StudyMode::Simulate);
        }
        for (given, flag) in [
            (self.interconnect.is_some(), "--interconnect"),
            (self.latency.is_some(), "--latency"),
            (self.bandwidth.is_some(), "--bandwidth"),
            (self.from.is_some(), "--from"),
            (self.cores.is_some(), "--cores"),
        ] {
            if given {
                return Err(Error::flag(flag, "is an option of the simulation: add --simulate"));
            }
        }
        let checks = [
            (self.graphs.is_none(), "--graphs", "DIR is needed to measure (or --simulate --from RUN_DIR to predict)"),
            (self.out.is_none(), "--out", "DIR is needed to measure, for the runs and scaling.json"),
            (self.repeats == 0, "--repeats", "must be at least 1"),
            (self.epochs == 0, "--epochs", "must be at least 1"),
            (self.threads_per_rank == Some(0), "--threads-per-rank", "must be at least 1"),
        ];
        match checks.into_iter().find(|c| c.0) {
            Some((_, flag, message)) => Err(Error::flag(flag, message)),
            None => Ok(StudyMode::Measure),
        }
    }

    /// The interconnect: the options, else the fit file, else the defaults; and where it came
    /// from.
    pub fn interconnect(&self) -> Result<(AllreduceCost, String)> {
        let mut cost = AllreduceCost::new(DEFAULT_LATENCY_SECONDS, DEFAULT_BANDWIDTH_BYTES_PER_SECOND);
        let mut source = "defaults (InfiniBand HDR-like)".to_string();
        if let Some(f) = &self.interconnect {
            let v: serde_json::Value = read_json(f)?;
            cost = serde_json::from_value(v["fit"].clone()).or_else(|_| serde_json::from_value(v)).map_err(|e| {
                let what = format!(
                    "{}: no `fit` with `latency_seconds` and `bandwidth_bytes_per_second` (write it with `bench allreduce --out`)",
                    f.display()
                );
                Error::context(what, e)
            })?;
            source = format!("fit {}", f.display());
        }
        if let Some(s) = self.latency {
            if !(s >= 0.0 && s.is_finite()) {
                return Err(Error::flag("--latency", "must be a non-negative number of seconds"));
            }
            cost.latency_seconds = s;
            source = "options".into();
        }
        if let Some(b) = self.bandwidth {
            if !(b > 0.0 && b.is_finite()) {
                return Err(Error::flag("--bandwidth", "must be a positive number of bytes per second"));
            }
            cost.bandwidth_bytes_per_second = b;
            source = "options".into();
        }
        Ok((cost, source))
    }

    /// The run to simulate from: `--from` (a run, or a study's 1-rank baseline), else the
    /// `--check` study's baseline.
    pub fn source_run(&self) -> Result<PathBuf> {
        let study = match (&self.from, &self.check) {
            (Some(f), _) if !f.join("scaling.json").exists() => return Ok(f.clone()),
            (Some(f), _) => f.join("scaling.json"),
            (None, Some(c)) => study_file(c),
            (None, None) => return Err(Error::flag("--simulate", "needs --from RUN_DIR")),
        };
        let v: serde_json::Value = read_json(&study)?;
        let run = v["baseline_run"].as_str().ok_or_else(|| {
            Error::Model(ModelError::Corrupt { path: study.clone(), message: "no `baseline_run`".into() })
        })?;
        Ok(PathBuf::from(run))
    }

    /// The samplers to simulate: the one asked for, or both.
    pub fn samplers(&self) -> Vec<Sampler> {
        match self.sampler {
            Some(s) => vec![s],
            None => vec![Sampler::Random, Sampler::Balanced],
        }
    }

    /// The measured study of `--check`, if given.
    pub fn measured_study(&self) -> Result<Option<MeasuredStudy>> {
        let Some(c) = &self.check else { return Ok(None) };
        let path = study_file(c);
        let v: serde_json::Value = read_json(&path)?;
        serde_json::from_value(v)
            .map(Some)
            .map_err(|e| Error::context(format!("{}: not a scaling study", path.display()), e))
    }

    /// The simulation the options ask for (in simulate mode: [`StudyOptions::mode`] passed):
    /// reads the source run, the interconnect and the `--check` study, predicts the rank
    /// counts (default 1, 2, 4, …, 64), and with `out` writes `OUT/predicted_speedup.{png,svg}`
    /// and `OUT/simulation.json`.
    pub fn simulate(&self) -> Result<Simulation> {
        let from = self.source_run()?;
        let ranks = parse_ranks(self.ranks.as_deref().unwrap_or("1,2,4,8,16,32,64"))?;
        let run = MeasuredRun::load(&RunDir::open(&from)?, self.graphs.as_deref())?;
        let (cost, cost_source) = self.interconnect()?;
        let study = self.measured_study()?;
        let plan = SimulationPlan {
            ranks,
            regimes: self.regimes.regimes(),
            samplers: self.samplers(),
            strong_graphs: self.max_graphs,
            cost,
            cost_source,
            cores: self.cores,
            threads_per_rank: self.threads_per_rank,
            epochs: self.sim_epochs,
        };
        let mut sim = Simulation::run(&from, &run, &plan, study.as_ref())?;
        if let Some(path) = &self.domain_graph {
            sim.domain = Some(self.predict_domain(path, &run, &plan)?);
        }
        if let Some(dir) = &self.out {
            std::fs::create_dir_all(dir).map_err(|e| Error::context(format!("creating {}", dir.display()), e))?;
            plot_speedup(&dir.join("predicted_speedup"), "Predicted speed-up", &sim.curves(), &plan.ranks)?;
            write_json(&dir.join("simulation.json"), &sim)?;
        }
        Ok(sim)
    }
}

impl StudyOptions {
    /// The domain-parallel prediction of `--domain-graph` from the measured run's step on it.
    fn predict_domain(&self, path: &Path, run: &MeasuredRun, plan: &SimulationPlan) -> Result<DomainPrediction> {
        let graph = trackgnn_graph::read_graph(path)?;
        let Some(k) = run.times.ids.iter().position(|&id| id == graph.event_id) else {
            return Err(Error::flag(
                "--domain-graph",
                format!("event {} of {} is not among the --from run's training graphs", graph.event_id, path.display()),
            ));
        };
        let setup = DomainSetup {
            cfg: &run.cfg,
            one_rank: (run.times.seconds[k], run.threads),
            threads_per_rank: plan.threads_per_rank.unwrap_or(1),
            cost: plan.cost,
            gradient_bytes: run.gradient_bytes,
            step_overhead_seconds: run.step_overhead_seconds,
        };
        predict_domain(path, &graph, &plan.ranks, &setup, self.domain_check.as_deref())
    }
}

/// A `scaling` study's scaling.json, given the file or its directory.
fn study_file(p: &Path) -> PathBuf {
    if p.is_dir() { p.join("scaling.json") } else { p.to_path_buf() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measuring() -> StudyOptions {
        StudyOptions { graphs: Some("g".into()), out: Some("o".into()), ..StudyOptions::default() }
    }

    fn error(o: StudyOptions) -> String {
        o.mode().unwrap_err().to_string()
    }

    #[test]
    fn ranks_parse_with_clear_errors() {
        assert_eq!(parse_ranks("1,2").unwrap(), vec![1, 2]);
        assert_eq!(parse_ranks(" 4, 1,2 ").unwrap(), vec![1, 2, 4]);
        let e = parse_ranks("1,x").unwrap_err().to_string();
        assert!(e.contains("--ranks takes positive rank counts (e.g. 1,2,4), not `x`"), "{e}");
        assert!(parse_ranks("1,0").unwrap_err().to_string().contains("`0`"));
        assert!(parse_ranks("1,2,2").unwrap_err().to_string().contains("twice"));
        assert!(parse_ranks("2,4").unwrap_err().to_string().contains("must include 1"));
        assert!(parse_ranks("").is_err());
    }

    #[test]
    fn modes_and_option_errors() {
        assert_eq!(measuring().mode().unwrap(), StudyMode::Measure);
        assert!(error(StudyOptions { graphs: None, ..measuring() }).contains("--graphs DIR is needed to measure"));
        assert!(error(StudyOptions { out: None, ..measuring() }).contains("--out DIR is needed to measure"));
        assert!(error(StudyOptions { repeats: 0, ..measuring() }).contains("--repeats"));
        assert!(error(StudyOptions { epochs: 0, ..measuring() }).contains("--epochs"));
        assert!(error(StudyOptions { threads_per_rank: Some(0), ..measuring() }).contains("--threads-per-rank"));
        assert!(error(StudyOptions { latency: Some(1e-6), ..measuring() }).contains("add --simulate"));
        let simulate = StudyOptions { simulate: true, ..StudyOptions::default() };
        assert!(error(simulate.clone()).contains("needs --from"));
        let from = StudyOptions { from: Some("r".into()), ..simulate };
        assert!(error(StudyOptions { oversubscribe: true, ..from.clone() }).contains("for measuring"));
        assert!(error(StudyOptions { sim_epochs: 0, ..from.clone() }).contains("--sim-epochs"));
        assert_eq!(StudyOptions { regimes: Regimes::Weak, ..from }.mode().unwrap(), StudyMode::Simulate);
        let check = StudyOptions { check: Some("s.json".into()), ..StudyOptions::default() };
        assert_eq!(check.mode().unwrap(), StudyMode::Simulate, "--check implies --simulate");
        assert_eq!(Regimes::Both.regimes(), [Regime::Strong, Regime::Weak]);
        assert_eq!(Regimes::default(), Regimes::Both);
    }

    #[test]
    fn the_interconnect_comes_from_the_options_the_fit_or_the_defaults() {
        let o = StudyOptions::default();
        let (cost, source) = o.interconnect().unwrap();
        assert_eq!(
            (cost.latency_seconds, source.as_str()),
            (DEFAULT_LATENCY_SECONDS, "defaults (InfiniBand HDR-like)")
        );
        let dir = tempfile::tempdir().unwrap();
        let fit = dir.path().join("fit.json");
        std::fs::write(&fit, r#"{"fit": {"latency_seconds": 1e-5, "bandwidth_bytes_per_second": 1e9}}"#).unwrap();
        let o = StudyOptions { interconnect: Some(fit.clone()), bandwidth: Some(2e9), ..StudyOptions::default() };
        let (cost, source) = o.interconnect().unwrap();
        assert_eq!((cost.latency_seconds, cost.bandwidth_bytes_per_second, source.as_str()), (1e-5, 2e9, "options"));
        std::fs::write(&fit, r#"{"other": 1}"#).unwrap();
        let o = StudyOptions { interconnect: Some(fit.clone()), ..StudyOptions::default() };
        let e = trackgnn_trackml::error::report(&o.interconnect().unwrap_err());
        assert!(e.starts_with(&format!("{}: no `fit`", fit.display())), "{e}");
        let o = StudyOptions { latency: Some(-1.0), ..StudyOptions::default() };
        assert!(o.interconnect().unwrap_err().to_string().contains("--latency"));
    }

    #[test]
    fn the_source_run_is_the_run_or_a_study_baseline() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let o = StudyOptions { from: Some(run.clone()), ..StudyOptions::default() };
        assert_eq!(o.source_run().unwrap(), run);
        let study = dir.path().join("study");
        std::fs::create_dir(&study).unwrap();
        std::fs::write(study.join("scaling.json"), r#"{"baseline_run": "/runs/n1"}"#).unwrap();
        let o = StudyOptions { from: Some(study.clone()), ..StudyOptions::default() };
        assert_eq!(o.source_run().unwrap(), PathBuf::from("/runs/n1"));
        let o = StudyOptions { check: Some(study.clone()), ..StudyOptions::default() };
        assert_eq!(o.source_run().unwrap(), PathBuf::from("/runs/n1"));
        assert!(o.measured_study().unwrap().is_some());
        std::fs::write(study.join("scaling.json"), "{}").unwrap();
        let e = o.source_run().unwrap_err().to_string();
        assert!(e.ends_with("scaling.json: no `baseline_run`"), "{e}");
        let o = StudyOptions { check: Some(dir.path().join("missing.json")), ..StudyOptions::default() };
        let e = trackgnn_trackml::error::report(&o.source_run().unwrap_err());
        assert!(e.starts_with("reading ") && e.contains("missing.json: "), "{e}");
        assert_eq!(StudyOptions::default().samplers(), [Sampler::Random, Sampler::Balanced]);
    }
}
