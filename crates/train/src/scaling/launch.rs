//! The measured scaling study, run: trains with 1, 2, … ranks by launching
//! `mpirun -np N EXE train …` (EXE: the `trackgnn` binary), and reads the runs back into a
//! [`StudyReport`].
//!
//! Every configuration (ranks N, graphs G) runs `repeats` times; runs go to
//! `OUT/runs/<sampler>-t<T>-n<N>-g<G>-r<k>/` with the launcher's output in `<name>.log`. The
//! repeats are interleaved (all configurations once, then again), so a drift of the machine's
//! load spreads over all of them. A finished run whose arguments match is reused, so an
//! interrupted study continues where it stopped; an unfinished one is deleted and run again.
//!
//! Strong scaling trains every N on the same G graphs; weak scaling trains N ranks on N × G
//! graphs (`train --max-graphs`), so each rank keeps the graphs per epoch of one rank. The
//! 1-rank run is shared by both regimes. Times are training only (no validation), per epoch,
//! over the epochs that count ([`super::measured::timed_steps`]); the fastest repeat counts.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::Regime;
use super::options::{StudyOptions, parse_ranks};
use super::study::{RunSummary, StudyConfig, StudyReport, StudySetup, format_load, graphs_per_rank};
use super::{json_value, plot_speedup, write_bytes, write_json};
use crate::config::Sampler;
use crate::data::GraphSet;
use crate::error::{Error, Result};
use crate::logs::load_average;
use crate::run_dir::RunDir;

/// Whether this build trains over MPI (the launched binary is built with the same features).
const MPI: bool = cfg!(feature = "mpi");

/// The record beside a run that finished: its arguments and the load average around it
/// (`<name>.load.json`).
#[derive(Debug, Default, Serialize, Deserialize)]
struct LoadRecord {
    args: Vec<String>,
    load_average_start: Option<[f64; 3]>,
    load_average_end: Option<[f64; 3]>,
}

/// A measured study planned from the options: what to run, with which binary, and where.
#[derive(Debug)]
pub struct Launcher {
    options: StudyOptions,
    /// What the study trains.
    pub setup: StudySetup,
    exe: PathBuf,
    /// `OUT/runs`, canonical.
    runs_dir: PathBuf,
}

impl Launcher {
    /// Checks the options (in measure mode: [`StudyOptions::mode`] passed) against the build and
    /// the graph directory, and creates `OUT/runs`; `exe` is the `trackgnn` binary to launch.
    pub fn plan(options: &StudyOptions, exe: &Path) -> Result<Launcher> {
        let a = options;
        let ranks = parse_ranks(a.ranks.as_deref().unwrap_or("1,2"))?;
        let max_ranks = *ranks.last().expect("parse_ranks returns 1 at least");
        if max_ranks > 1 && !MPI {
            return Err(Error::flag(
                "--ranks",
                format!(
                    "{max_ranks} needs a trackgnn built with MPI (cargo build --release -p trackgnn --features mpi); \
                     this one was built without it and can only measure --ranks 1"
                ),
            ));
        }
        let regimes = a.regimes.regimes();
        let (Some(out), Some(graphs_arg)) = (a.out.as_deref(), a.graphs.as_deref()) else {
            return Err(Error::flag("--graphs", "DIR and --out DIR are needed to measure"));
        };
        let graphs = fs::canonicalize(graphs_arg)
            .map_err(|e| Error::context(format!("--graphs {}", graphs_arg.display()), e))?;
        let total =
            GraphSet::open(&graphs, 0).map_err(|e| Error::context(format!("opening {}", graphs.display()), e))?.len();
        let weak = regimes.contains(&Regime::Weak);
        let graphs_per_rank = graphs_per_rank(a.max_graphs, graphs_arg, total, max_ranks, weak)?;
        let runs_dir = out.join("runs");
        fs::create_dir_all(&runs_dir).map_err(|e| Error::context(format!("creating {}", runs_dir.display()), e))?;
        let runs_dir = fs::canonicalize(&runs_dir).map_err(|e| Error::io(&runs_dir, e))?;
        let setup = StudySetup {
            ranks,
            threads: a.threads_per_rank.unwrap_or(1),
            sampler: a.sampler.unwrap_or(Sampler::Balanced),
            regimes,
            graphs_per_rank,
            graphs,
            epochs: a.epochs,
            repeats: a.repeats,
        };
        Ok(Launcher { options: options.clone(), setup, exe: exe.to_path_buf(), runs_dir })
    }

    /// Runs every repeat of every configuration (or reuses those that finished before),
    /// reporting progress through `log`, then writes `OUT/speedup.{png,svg}` and
    /// `OUT/scaling.json` and returns the report.
    pub fn run(&self, log: &mut dyn FnMut(&str)) -> Result<StudyReport> {
        let s = &self.setup;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let load_start = load_average();
        let configs = s.configs();
        let total_runs = configs.len() * s.repeats;
        log(&format!(
            "scaling study: {total_runs} run(s) of {} configuration(s) × {} repeat(s); {} sampler, {} thread(s) per rank, \
             {cores} core(s), load average {}",
            configs.len(),
            s.repeats,
            s.sampler.name(),
            s.threads,
            format_load(load_start)
        ));
        // The repeats are interleaved, so a drift of the machine's load spreads over all of them.
        let mut summaries: Vec<RunSummary> = Vec::new();
        for repeat in 1..=s.repeats {
            for (k, &c) in configs.iter().enumerate() {
                let index = (repeat - 1) * configs.len() + k + 1;
                summaries.push(self.run_one(c, repeat, (index, total_runs), log)?);
            }
        }
        let report = s.report(&summaries, [load_start, load_average()], cores, MPI);
        let out = self.out();
        let title = format!("Measured speed-up ({} sampler)", s.sampler.name());
        plot_speedup(&out.join("speedup"), &title, &report.curves(), &s.ranks)?;
        write_json(&out.join("scaling.json"), &report)?;
        Ok(report)
    }

    /// The output directory.
    pub fn out(&self) -> &Path {
        self.options.out.as_deref().expect("checked by plan()")
    }

    /// Runs repeat `repeat` of configuration `c` (the `index`-th of `total` runs), or reuses it
    /// if it finished before with the same arguments; returns what it measured.
    fn run_one(
        &self,
        c: StudyConfig,
        repeat: usize,
        (index, total): (usize, usize),
        log: &mut dyn FnMut(&str),
    ) -> Result<RunSummary> {
        let s = &self.setup;
        let name = s.run_name(c, repeat);
        let run = self.runs_dir.join(&name);
        let [log_file, args_file, load_file] =
            ["log", "args.json", "load.json"].map(|ext| self.runs_dir.join(format!("{name}.{ext}")));
        let args = self.train_args(c, &run);
        let load = if finished(&run, &args_file, &args, c.ranks, s.epochs) {
            log(&format!("[{index}/{total}] {name}: finished before, reused"));
            let prev: LoadRecord =
                fs::read_to_string(&load_file).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default();
            [prev.load_average_start, prev.load_average_end]
        } else {
            if run.exists() {
                fs::remove_dir_all(&run)
                    .map_err(|e| Error::context(format!("removing the unfinished {}", run.display()), e))?;
            }
            let before = load_average();
            let t = Instant::now();
            let file =
                File::create(&log_file).map_err(|e| Error::context(format!("creating {}", log_file.display()), e))?;
            let mut cmd = self.command(c.ranks, &args);
            let err = file.try_clone().map_err(|e| Error::io(&log_file, e))?;
            cmd.stdin(Stdio::null()).stdout(file).stderr(err);
            let status = cmd.status().map_err(|e| {
                let what =
                    format!("starting {:?} (is it installed? set the launcher with --mpirun PATH)", cmd.get_program());
                Error::context(what, e)
            })?;
            if !status.success() {
                return Err(Error::RunFailed { name, status, tail: tail(&log_file, 15), log: log_file });
            }
            let after = load_average();
            let record = LoadRecord { args, load_average_start: before, load_average_end: after };
            write_json(&args_file, &record.args)?;
            write_bytes(&load_file, json_value(&load_file, &record)?.to_string().as_bytes())?;
            log(&format!(
                "[{index}/{total}] {name}: {:.1} s, load average {} → {}",
                t.elapsed().as_secs_f64(),
                format_load(before),
                format_load(after)
            ));
            [before, after]
        };
        RunSummary::read(&run, c, s.threads, repeat, load).map_err(|e| Error::context(format!("reading {name}"), e))
    }

    /// The training arguments of a run (everything after `trackgnn`).
    fn train_args(&self, c: StudyConfig, run: &Path) -> Vec<String> {
        let (a, s) = (&self.options, &self.setup);
        let mut v: Vec<String> = vec!["train".into(), "--graphs".into(), s.graphs.display().to_string()];
        v.extend(["--out".into(), run.display().to_string(), "--epochs".into(), s.epochs.to_string()]);
        v.extend(["--sampler".into(), s.sampler.name().into(), "--threads".into(), s.threads.to_string()]);
        v.extend(["--max-graphs".into(), c.graphs.to_string(), "--json".into()]);
        if let Some(cfg) = &a.config {
            v.extend(["--config".into(), cfg.display().to_string()]);
        }
        v.extend(a.train_args.iter().cloned());
        v
    }

    /// The launcher command of a run: `mpirun -np N … EXE ARGS`, or `EXE ARGS` without MPI.
    fn command(&self, ranks: usize, args: &[String]) -> Command {
        let (a, threads) = (&self.options, self.setup.threads);
        let mut cmd = if MPI {
            let mut cmd = Command::new(&a.mpirun);
            cmd.args(["-np", &ranks.to_string()]);
            if a.oversubscribe {
                cmd.arg("--oversubscribe");
            }
            // OpenMPI binds each of ≤ 2 ranks to one core by default: its threads would share it.
            if threads > 1 {
                cmd.args(["--bind-to", "none"]);
            }
            cmd.args(&a.mpirun_args);
            // OpenMPI refuses to start as root (containers, CI) without these.
            cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
            cmd.arg(&self.exe);
            cmd
        } else {
            Command::new(&self.exe)
        };
        cmd.args(args).env("RAYON_NUM_THREADS", threads.to_string()).env("OMP_NUM_THREADS", threads.to_string());
        cmd
    }
}

/// True if `run` finished the same arguments: every rank wrote its report and the epochs
/// are logged.
fn finished(run: &Path, args_file: &Path, args: &[String], ranks: usize, epochs: usize) -> bool {
    let same = fs::read_to_string(args_file).ok().and_then(|t| serde_json::from_str::<Vec<String>>(&t).ok());
    let run = RunDir::new(run);
    same.as_deref() == Some(args) && run.has_rank_reports(ranks) && run.read_metrics().is_ok_and(|r| r.len() == epochs)
}

/// The last `n` lines of a file.
fn tail(path: &Path, n: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launcher(dir: &Path, options: StudyOptions) -> Launcher {
        let setup = StudySetup {
            ranks: vec![1],
            threads: 2,
            sampler: Sampler::Random,
            regimes: vec![Regime::Strong],
            graphs_per_rank: 4,
            graphs: dir.join("g"),
            epochs: 3,
            repeats: 1,
        };
        Launcher { options, setup, exe: dir.join("trackgnn"), runs_dir: dir.join("runs") }
    }

    #[test]
    fn a_run_trains_with_the_study_arguments_then_the_extra_ones() {
        let dir = Path::new("/s");
        let options = StudyOptions {
            config: Some("c.toml".into()),
            train_args: vec!["--hidden".into(), "8".into()],
            ..StudyOptions::default()
        };
        let l = launcher(dir, options);
        let args = l.train_args(StudyConfig { ranks: 1, graphs: 4 }, Path::new("/s/runs/r"));
        assert_eq!(
            args.join(" "),
            "train --graphs /s/g --out /s/runs/r --epochs 3 --sampler random --threads 2 --max-graphs 4 --json \
             --config c.toml --hidden 8"
        );
        let cmd = l.command(1, &args);
        let envs: Vec<_> = cmd.get_envs().filter_map(|(k, v)| Some((k.to_str()?, v?.to_str()?))).collect();
        assert!(envs.contains(&("RAYON_NUM_THREADS", "2")), "{envs:?}");
        if MPI {
            assert_eq!(cmd.get_program(), "mpirun");
            let a: Vec<_> = cmd.get_args().filter_map(|a| a.to_str()).collect();
            assert_eq!(a[..4], ["-np", "1", "--bind-to", "none"], "two threads are not bound to one core");
        } else {
            assert_eq!(cmd.get_program(), "/s/trackgnn");
        }
    }

    #[test]
    fn a_run_counts_as_finished_only_with_the_same_arguments_and_every_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let args_file = dir.path().join("r.args.json");
        let args = vec!["train".to_string()];
        assert!(!finished(&dir.path().join("r"), &args_file, &args, 1, 2), "no run");
        write_json(&args_file, &args).unwrap();
        assert!(!finished(&dir.path().join("r"), &args_file, &args, 1, 2), "no rank report nor metrics");
        let log = dir.path().join("r.log");
        fs::write(&log, (1..=20).map(|i| format!("line {i}\n")).collect::<String>()).unwrap();
        assert_eq!(tail(&log, 2), "line 19\nline 20");
        assert_eq!(tail(&dir.path().join("missing"), 2), "");
    }

    #[test]
    fn without_mpi_more_than_one_rank_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let options = StudyOptions {
            graphs: Some(dir.path().join("missing")),
            out: Some(dir.path().join("out")),
            ranks: Some("1,2".into()),
            ..StudyOptions::default()
        };
        let e = trackgnn_trackml::error::report(&Launcher::plan(&options, Path::new("trackgnn")).unwrap_err());
        if MPI {
            assert!(e.starts_with("--graphs ") && e.contains("missing"), "{e}");
        } else {
            assert!(e.contains("--features mpi"), "{e}");
        }
        assert!(!dir.path().join("out").exists());
    }
}
