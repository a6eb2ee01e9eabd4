//! `trackgnn scaling` (measure mode): trains with 1, 2, … ranks by launching
//! `mpirun -np N trackgnn train …`, and compares the runs.
//!
//! Every configuration (ranks N, graphs G) runs `--repeats` times; runs go to
//! `OUT/runs/<sampler>-t<T>-n<N>-g<G>-r<k>/` with the launcher's output in `<name>.log`. The
//! repeats are interleaved (all configurations once, then again), so a drift of the machine's
//! load spreads over all of them. A finished run whose arguments match is reused, so an
//! interrupted study continues where it stopped; an unfinished one is deleted and run again.
//!
//! Strong scaling trains every N on the same G graphs; weak scaling trains N ranks on N × G
//! graphs (`train --max-graphs`), so each rank keeps the graphs per epoch of one rank. The
//! 1-rank run is shared by both regimes. Times are training only (no validation), per epoch,
//! over the epochs that count ([`trackgnn_train::scaling::measured::timed_steps`]); the fastest
//! repeat counts.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use trackgnn_train::RunDir;
use trackgnn_train::config::Sampler;
use trackgnn_train::data::GraphSet;
use trackgnn_train::logs::load_average;
use trackgnn_train::scaling::plot_speedup;
use trackgnn_train::scaling::study::{RunSummary, StudyConfig, StudySetup, format_load, graphs_per_rank};

use super::{Regime, ScalingArgs, parse_ranks};
use crate::cli::SamplerArg;
use crate::util::{print_json, write_atomic};

/// The training arguments of a run (everything after `trackgnn`).
fn train_args(
    a: &ScalingArgs,
    graphs: &Path,
    c: StudyConfig,
    threads: usize,
    sampler: Sampler,
    run: &Path,
) -> Vec<String> {
    let mut v: Vec<String> = vec!["train".into(), "--graphs".into(), graphs.display().to_string()];
    v.extend(["--out".into(), run.display().to_string(), "--epochs".into(), a.epochs.to_string()]);
    v.extend(["--sampler".into(), sampler.name().into(), "--threads".into(), threads.to_string()]);
    v.extend(["--max-graphs".into(), c.graphs.to_string(), "--json".into()]);
    if let Some(cfg) = &a.config {
        v.extend(["--config".into(), cfg.display().to_string()]);
    }
    v.extend(a.train_args.iter().cloned());
    v
}

/// The launcher command of a run: `mpirun -np N … EXE ARGS`, or `EXE ARGS` without MPI.
fn command(a: &ScalingArgs, exe: &Path, ranks: usize, threads: usize, args: &[String]) -> Command {
    let mut cmd = if cfg!(feature = "mpi") {
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
        cmd.arg(exe);
        cmd
    } else {
        Command::new(exe)
    };
    cmd.args(args).env("RAYON_NUM_THREADS", threads.to_string()).env("OMP_NUM_THREADS", threads.to_string());
    cmd
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

/// A study planned from the options: what to run and where.
struct Study {
    setup: StudySetup,
    exe: PathBuf,
    /// `OUT/runs`, canonical.
    runs_dir: PathBuf,
}

impl Study {
    /// Checks the options against the build and the graph directory, and creates `OUT/runs`.
    fn plan(a: &ScalingArgs) -> Result<Study> {
        let ranks = parse_ranks(a.ranks.as_deref().unwrap_or("1,2"))?;
        let max_ranks = *ranks.last().expect("parse_ranks returns 1 at least");
        if max_ranks > 1 && !cfg!(feature = "mpi") {
            bail!(
                "--ranks {max_ranks} needs a trackgnn built with MPI (cargo build --release -p trackgnn --features mpi); \
                 this one was built without it and can only measure --ranks 1"
            );
        }
        let regimes = a.regime.regimes();
        let out = a.out.as_deref().expect("checked by mode()");
        let graphs_arg = a.graphs.as_deref().expect("checked by mode()");
        let graphs = fs::canonicalize(graphs_arg).with_context(|| format!("--graphs {}", graphs_arg.display()))?;
        let total = GraphSet::open(&graphs, 0).with_context(|| format!("opening {}", graphs.display()))?.len();
        let weak = regimes.contains(&Regime::Weak);
        let graphs_per_rank = graphs_per_rank(a.max_graphs, graphs_arg, total, max_ranks, weak)?;
        let exe = std::env::current_exe().context("finding the trackgnn executable")?;
        let runs_dir = out.join("runs");
        fs::create_dir_all(&runs_dir).with_context(|| format!("creating {}", runs_dir.display()))?;
        let runs_dir = fs::canonicalize(&runs_dir)?;
        let setup = StudySetup {
            ranks,
            threads: a.threads_per_rank.unwrap_or(1),
            sampler: a.sampler.unwrap_or(SamplerArg::Balanced).into(),
            regimes,
            graphs_per_rank,
            graphs,
            epochs: a.epochs,
            repeats: a.repeats,
        };
        Ok(Study { setup, exe, runs_dir })
    }

    /// Runs repeat `repeat` of configuration `c` (the `index`-th of `total` runs), or reuses it
    /// if it finished before with the same arguments; returns what it measured.
    fn run_one(
        &self,
        a: &ScalingArgs,
        c: StudyConfig,
        repeat: usize,
        (index, total): (usize, usize),
    ) -> Result<RunSummary> {
        let s = &self.setup;
        let name = s.run_name(c, repeat);
        let run = self.runs_dir.join(&name);
        let (log, args_file) =
            (self.runs_dir.join(format!("{name}.log")), self.runs_dir.join(format!("{name}.args.json")));
        let args = train_args(a, &s.graphs, c, s.threads, s.sampler, &run);
        let load = if finished(&run, &args_file, &args, c.ranks, a.epochs) {
            eprintln!("[{index}/{total}] {name}: finished before, reused");
            let prev = summaries_file_load(&args_file);
            [prev.0, prev.1]
        } else {
            if run.exists() {
                fs::remove_dir_all(&run).with_context(|| format!("removing the unfinished {}", run.display()))?;
            }
            let before = load_average();
            let t = Instant::now();
            let file = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
            let mut cmd = command(a, &self.exe, c.ranks, s.threads, &args);
            cmd.stdin(Stdio::null()).stdout(file.try_clone()?).stderr(file);
            let status = cmd.status().with_context(|| {
                format!("starting {:?} (is it installed? set the launcher with --mpirun PATH)", cmd.get_program())
            })?;
            if !status.success() {
                bail!("{name} failed ({status}); the end of {}:\n{}", log.display(), tail(&log, 15));
            }
            let after = load_average();
            let record = json!({ "args": args, "load_average_start": before, "load_average_end": after });
            write_atomic(&args_file, serde_json::to_string_pretty(&args)?.as_bytes())?;
            write_atomic(&self.runs_dir.join(format!("{name}.load.json")), record.to_string().as_bytes())?;
            eprintln!(
                "[{index}/{total}] {name}: {:.1} s, load average {} → {}",
                t.elapsed().as_secs_f64(),
                format_load(before),
                format_load(after)
            );
            [before, after]
        };
        RunSummary::read(&run, c, s.threads, repeat, load).with_context(|| format!("reading {name}"))
    }
}

/// `trackgnn scaling` (measure mode).
pub fn run(a: &ScalingArgs) -> Result<ExitCode> {
    let study = Study::plan(a)?;
    let s = &study.setup;
    let out = a.out.as_deref().expect("checked by mode()");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load_start = load_average();
    let configs = s.configs();
    let total_runs = configs.len() * a.repeats;
    eprintln!(
        "scaling study: {total_runs} run(s) of {} configuration(s) × {} repeat(s); {} sampler, {} thread(s) per rank, \
         {cores} core(s), load average {}",
        configs.len(),
        a.repeats,
        s.sampler.name(),
        s.threads,
        format_load(load_start)
    );
    // The repeats are interleaved, so a drift of the machine's load spreads over all of them.
    let mut summaries: Vec<RunSummary> = Vec::new();
    for repeat in 1..=a.repeats {
        for (k, &c) in configs.iter().enumerate() {
            let index = (repeat - 1) * configs.len() + k + 1;
            summaries.push(study.run_one(a, c, repeat, (index, total_runs))?);
        }
    }
    let report = s.report(&summaries, [load_start, load_average()], cores, cfg!(feature = "mpi"));
    let title = format!("Measured speed-up ({} sampler)", s.sampler.name());
    plot_speedup(&out.join("speedup"), &title, &report.curves(), &s.ranks)?;
    let out_json = serde_json::to_value(&report)?;
    write_atomic(&out.join("scaling.json"), serde_json::to_string_pretty(&out_json)?.as_bytes())?;
    if a.json.json {
        print_json(&out_json);
    } else {
        print!("{report}");
        println!("\nscaling.json and speedup.png/.svg in {}", out.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// The load averages recorded beside a finished run (`<name>.load.json`).
fn summaries_file_load(args_file: &Path) -> (Option<[f64; 3]>, Option<[f64; 3]>) {
    let name = args_file.file_name().map(|n| n.to_string_lossy().replace(".args.json", ".load.json"));
    let text = name.and_then(|n| fs::read_to_string(args_file.with_file_name(n)).ok());
    let v: Option<Value> = text.and_then(|t| serde_json::from_str(&t).ok());
    let get = |k: &str| v.as_ref().and_then(|v| serde_json::from_value(v[k].clone()).ok());
    (get("load_average_start"), get("load_average_end"))
}
