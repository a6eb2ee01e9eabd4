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
use serde::Serialize;
use serde_json::{Value, json};
use trackgnn_train::RunDir;
use trackgnn_train::config::Sampler;
use trackgnn_train::data::GraphSet;
use trackgnn_train::logs::{RankReport, load_average};
use trackgnn_train::scaling::measured::StepFigures;

use super::ScalingArgs;
use super::{Regime, parse_ranks, sampler_name, speedup_plot};
use crate::cli::SamplerArg;
use crate::util::{print_json, write_atomic};

/// One configuration to train: ranks and graphs (`--max-graphs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Config {
    ranks: usize,
    graphs: usize,
}

/// What a finished run measured (one repeat of one configuration).
#[derive(Clone, Debug, Serialize)]
struct RunSummary {
    run: PathBuf,
    ranks: usize,
    threads_per_rank: usize,
    max_graphs: usize,
    repeat: usize,
    train_graphs: usize,
    timed_epochs: usize,
    steps_per_epoch: f64,
    graphs_per_epoch: f64,
    train_epoch_seconds: f64,
    seconds_per_batch: f64,
    graphs_per_second: f64,
    load_imbalance: f64,
    allreduce_seconds: f64,
    imbalance_wait_seconds: f64,
    efficiency: f64,
    target_purity: f64,
    total_purity: f64,
    purity: f64,
    auc: f64,
    val_loss: f64,
    peak_rss_bytes: u64,
    peak_rss_bytes_per_rank: Vec<u64>,
    cpu_utilisation: f64,
    cpu_utilisation_per_rank: Vec<f64>,
    wall_seconds: f64,
    cpu_seconds: f64,
    cpu_seconds_per_rank: Vec<f64>,
    load_average_start: Option<[f64; 3]>,
    load_average_end: Option<[f64; 3]>,
}

fn read_json(path: &Path) -> Result<Value> {
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: invalid JSON", path.display()))
}

/// Reads a finished run back.
fn summarize(run: &Path, c: Config, threads: usize, repeat: usize, load: [Option<[f64; 3]>; 2]) -> Result<RunSummary> {
    let rd = RunDir::new(run);
    let s = StepFigures::of_run(&rd)?;
    let records = rd.read_metrics()?;
    let last = records.last().with_context(|| format!("{}: no epoch logged", rd.metrics_jsonl_path().display()))?;
    let train_graphs = rd.read_events()?.train.len();
    let reports: Vec<RankReport> = (0..c.ranks).map(|r| rd.read_rank_report(r)).collect::<Result<_, _>>()?;
    let graphs_per_epoch = s.steps_per_epoch * s.graphs_per_step;
    let cpu: Vec<f64> = reports.iter().map(|r| r.cpu_seconds).collect();
    let util: Vec<f64> = reports.iter().map(|r| r.cpu_utilisation).collect();
    let rss: Vec<u64> = reports.iter().map(|r| r.peak_rss_bytes).collect();
    Ok(RunSummary {
        run: run.to_path_buf(),
        ranks: c.ranks,
        threads_per_rank: threads,
        max_graphs: c.graphs,
        repeat,
        train_graphs,
        timed_epochs: s.timed_epochs,
        steps_per_epoch: s.steps_per_epoch,
        graphs_per_epoch,
        train_epoch_seconds: s.train_epoch_seconds,
        seconds_per_batch: s.train_epoch_seconds / s.steps_per_epoch.max(1.0),
        graphs_per_second: graphs_per_epoch / s.train_epoch_seconds,
        load_imbalance: s.load_imbalance,
        allreduce_seconds: s.allreduce_seconds,
        imbalance_wait_seconds: s.imbalance_wait_seconds,
        efficiency: last.efficiency,
        target_purity: last.target_purity,
        total_purity: last.total_purity,
        purity: last.purity,
        auc: last.auc,
        val_loss: last.val_loss,
        peak_rss_bytes: rss.iter().copied().max().unwrap_or(0),
        peak_rss_bytes_per_rank: rss,
        cpu_utilisation: util.iter().sum::<f64>() / util.len().max(1) as f64,
        cpu_utilisation_per_rank: util,
        wall_seconds: reports.iter().map(|r| r.wall_seconds).fold(0.0, f64::max),
        cpu_seconds: cpu.iter().sum(),
        cpu_seconds_per_rank: cpu,
        load_average_start: load[0],
        load_average_end: load[1],
    })
}

/// Graphs of one rank: `--max-graphs`, else all graphs (strong only) or all / the largest
/// rank count (with weak scaling, which needs N × them); checked against the directory.
fn base_graphs(a: &ScalingArgs, total: usize, max_ranks: usize, regimes: &[Regime]) -> Result<usize> {
    let weak = regimes.contains(&Regime::Weak);
    let g = match a.max_graphs {
        Some(0) => bail!("--max-graphs must be at least 1"),
        Some(g) => g,
        None if weak => total / max_ranks,
        None => total,
    };
    let need = if weak { g * max_ranks } else { g };
    if need > total || g == 0 {
        bail!(
            "{} holds {total} graphs; {} needs {need}{}: build more graphs or lower --max-graphs / --ranks",
            a.graphs.as_deref().unwrap_or(Path::new("")).display(),
            if weak { format!("weak scaling to {max_ranks} ranks × {g} graphs") } else { format!("--max-graphs {g}") },
            if g == 0 { " (at least one graph per rank)" } else { "" },
        );
    }
    Ok(g)
}

/// The training arguments of a run (everything after `trackgnn`).
fn train_args(a: &ScalingArgs, graphs: &Path, c: Config, threads: usize, sampler: Sampler, run: &Path) -> Vec<String> {
    let mut v: Vec<String> = vec!["train".into(), "--graphs".into(), graphs.display().to_string()];
    v.extend(["--out".into(), run.display().to_string(), "--epochs".into(), a.epochs.to_string()]);
    v.extend(["--sampler".into(), sampler_name(sampler).into(), "--threads".into(), threads.to_string()]);
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

/// A named curve of (ranks, speed-up) points.
type Curve = (String, Vec<(f64, f64)>);

/// A study planned from the options: what to run and where.
struct Study {
    ranks: Vec<usize>,
    threads: usize,
    sampler: Sampler,
    regimes: Vec<Regime>,
    /// Graphs of one rank.
    graphs_per_rank: usize,
    /// The graph directory, canonical.
    graphs: PathBuf,
    exe: PathBuf,
    /// `OUT/runs`, canonical.
    runs_dir: PathBuf,
    /// Every configuration once, in the order they run.
    configs: Vec<Config>,
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
        let g = base_graphs(a, total, max_ranks, &regimes)?;
        let exe = std::env::current_exe().context("finding the trackgnn executable")?;
        let runs_dir = out.join("runs");
        fs::create_dir_all(&runs_dir).with_context(|| format!("creating {}", runs_dir.display()))?;
        let runs_dir = fs::canonicalize(&runs_dir)?;
        let mut study = Study {
            ranks,
            threads: a.threads_per_rank.unwrap_or(1),
            sampler: a.sampler.unwrap_or(SamplerArg::Balanced).into(),
            regimes,
            graphs_per_rank: g,
            graphs,
            exe,
            runs_dir,
            configs: Vec::new(),
        };
        let all: Vec<Config> = study.regimes.iter().flat_map(|&r| study.configs_of(r)).collect();
        for c in all {
            if !study.configs.contains(&c) {
                study.configs.push(c);
            }
        }
        Ok(study)
    }

    /// The configurations of a regime, one per rank count.
    fn configs_of(&self, r: Regime) -> Vec<Config> {
        let g = self.graphs_per_rank;
        self.ranks.iter().map(|&n| Config { ranks: n, graphs: if r == Regime::Weak { n * g } else { g } }).collect()
    }

    /// The one-rank configuration, the baseline of both regimes.
    fn baseline(&self) -> Config {
        Config { ranks: 1, graphs: self.graphs_per_rank }
    }

    /// Runs repeat `repeat` of configuration `c` (the `index`-th of `total` runs), or reuses it
    /// if it finished before with the same arguments; returns what it measured.
    fn run_one(&self, a: &ScalingArgs, c: Config, repeat: usize, (index, total): (usize, usize)) -> Result<RunSummary> {
        let name = format!("{}-t{}-n{}-g{}-r{repeat}", sampler_name(self.sampler), self.threads, c.ranks, c.graphs);
        let run = self.runs_dir.join(&name);
        let (log, args_file) =
            (self.runs_dir.join(format!("{name}.log")), self.runs_dir.join(format!("{name}.args.json")));
        let args = train_args(a, &self.graphs, c, self.threads, self.sampler, &run);
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
            let mut cmd = command(a, &self.exe, c.ranks, self.threads, &args);
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
                fmt_load(before),
                fmt_load(after)
            );
            [before, after]
        };
        summarize(&run, c, self.threads, repeat, load).with_context(|| format!("reading {name}"))
    }

    /// `scaling.json`: the study, every run, and per regime the best repeat of each rank count
    /// with its speed-up over the baseline; and the speed-up curves.
    fn results(&self, a: &ScalingArgs, summaries: &[RunSummary], load: [Option<[f64; 3]>; 2]) -> (Value, Vec<Curve>) {
        // Best of the repeats per configuration.
        let best = |c: Config| -> (&RunSummary, Vec<f64>) {
            let reps: Vec<&RunSummary> =
                summaries.iter().filter(|s| s.ranks == c.ranks && s.max_graphs == c.graphs).collect();
            let times = reps.iter().map(|s| s.train_epoch_seconds).collect();
            let b = reps.into_iter().min_by(|x, y| x.train_epoch_seconds.total_cmp(&y.train_epoch_seconds));
            (b.expect("every configuration ran"), times)
        };
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut out_json = json!({
            "sampler": sampler_name(self.sampler), "threads_per_rank": self.threads, "epochs": a.epochs,
            "repeats": a.repeats, "ranks": self.ranks, "graphs_per_rank": self.graphs_per_rank,
            "graphs_dir": self.graphs, "cores": cores, "mpi": cfg!(feature = "mpi"),
            "load_average_start": load[0], "load_average_end": load[1],
            "baseline_run": best(self.baseline()).0.run,
            "runs": summaries,
        });
        let mut curves = Vec::new();
        for &r in &self.regimes {
            let base = best(self.baseline()).0.clone();
            let rows: Vec<Value> = self
                .configs_of(r)
                .into_iter()
                .map(|c| {
                    let (b, times) = best(c);
                    // Strong: t₁ / t_N per graph trained (a sampler drops the remainder that cannot
                    // fill a step of N ranks); weak: the throughput ratio. Both are a ratio of graphs/s.
                    let sp = b.graphs_per_second / base.graphs_per_second;
                    let mut v = serde_json::to_value(b).expect("serialises");
                    v["speedup"] = json!(sp);
                    v["scaling_efficiency"] = json!(sp / c.ranks as f64);
                    v["train_epoch_seconds_repeats"] = json!(times);
                    v
                })
                .collect();
            let pts: Vec<(f64, f64)> =
                rows.iter().filter_map(|v| Some((v["ranks"].as_f64()?, v["speedup"].as_f64()?))).collect();
            curves.push((format!("{} scaling", r.name()), pts));
            out_json[r.name()] = json!(rows);
        }
        (out_json, curves)
    }
}

/// `trackgnn scaling` (measure mode).
pub fn run(a: &ScalingArgs) -> Result<ExitCode> {
    let study = Study::plan(a)?;
    let out = a.out.as_deref().expect("checked by mode()");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load_start = load_average();
    let total_runs = study.configs.len() * a.repeats;
    eprintln!(
        "scaling study: {total_runs} run(s) of {} configuration(s) × {} repeat(s); {} sampler, {} thread(s) per rank, \
         {cores} core(s), load average {}",
        study.configs.len(),
        a.repeats,
        sampler_name(study.sampler),
        study.threads,
        fmt_load(load_start)
    );
    // The repeats are interleaved, so a drift of the machine's load spreads over all of them.
    let mut summaries: Vec<RunSummary> = Vec::new();
    for repeat in 1..=a.repeats {
        for (k, &c) in study.configs.iter().enumerate() {
            let index = (repeat - 1) * study.configs.len() + k + 1;
            summaries.push(study.run_one(a, c, repeat, (index, total_runs))?);
        }
    }
    let (out_json, curves) = study.results(a, &summaries, [load_start, load_average()]);
    speedup_plot(
        &out.join("speedup"),
        &format!("Measured speed-up ({} sampler)", sampler_name(study.sampler)),
        &curves,
        &study.ranks,
    )?;
    write_atomic(&out.join("scaling.json"), serde_json::to_string_pretty(&out_json)?.as_bytes())?;
    if a.json.json {
        print_json(&out_json);
    } else {
        print_tables(&out_json, &study.regimes);
        println!("\nscaling.json and speedup.png/.svg in {}", out.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// The load averages recorded beside a finished run (`<name>.load.json`).
fn summaries_file_load(args_file: &Path) -> (Option<[f64; 3]>, Option<[f64; 3]>) {
    let name = args_file.file_name().map(|n| n.to_string_lossy().replace(".args.json", ".load.json"));
    let v = name.and_then(|n| read_json(&args_file.with_file_name(n)).ok());
    let get = |k: &str| v.as_ref().and_then(|v| serde_json::from_value(v[k].clone()).ok());
    (get("load_average_start"), get("load_average_end"))
}

fn fmt_load(l: Option<[f64; 3]>) -> String {
    l.map_or("-".into(), |l| format!("{:.2}/{:.2}/{:.2}", l[0], l[1], l[2]))
}

fn f(v: &Value, digits: usize) -> String {
    v.as_f64().map_or("-".into(), |x| format!("{x:.digits$}"))
}

fn pct(v: &Value, digits: usize) -> String {
    v.as_f64().map_or("-".into(), |x| format!("{:.digits$}", 100.0 * x))
}

/// Tables 1 and 2 of the reference, per regime.
fn print_tables(o: &Value, regimes: &[Regime]) {
    for r in regimes {
        let rows = o[r.name()].as_array().cloned().unwrap_or_default();
        println!(
            "\n{} scaling: {} sampler, {} thread(s) per rank, best of {} repeat(s), {} core(s){}",
            r.name(),
            o["sampler"].as_str().unwrap_or(""),
            o["threads_per_rank"],
            o["repeats"],
            o["cores"],
            match r {
                Regime::Strong => format!(", {} graphs at every rank count", o["graphs_per_rank"]),
                Regime::Weak => format!(", {} graphs per rank", o["graphs_per_rank"]),
            }
        );
        println!(
            "| Ranks | Train graphs | Efficiency % | Target purity % | Total purity % | Purity % | AUC % | Val loss | Epoch s | Batch s |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|");
        for v in &rows {
            println!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                v["ranks"],
                v["train_graphs"],
                pct(&v["efficiency"], 3),
                pct(&v["target_purity"], 3),
                pct(&v["total_purity"], 3),
                pct(&v["purity"], 3),
                pct(&v["auc"], 3),
                f(&v["val_loss"], 5),
                f(&v["train_epoch_seconds"], 2),
                f(&v["seconds_per_batch"], 3)
            );
        }
        println!();
        println!(
            "| Ranks | CPU util % | Peak RSS MB/rank | Wall s | CPU s | Graphs/s | Speed-up | Scaling eff. % | Imbalance | All-reduce s | Wait s | Load avg start → end | Epoch s of repeats |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
        for v in &rows {
            let reps: Vec<String> =
                v["train_epoch_seconds_repeats"].as_array().into_iter().flatten().map(|x| f(x, 2)).collect();
            let load = |k: &str| fmt_load(serde_json::from_value(v[k].clone()).ok().flatten());
            println!(
                "| {} | {} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} | {} → {} | {} |",
                v["ranks"],
                pct(&v["cpu_utilisation"], 1),
                v["peak_rss_bytes"].as_f64().unwrap_or(f64::NAN) / 1e6,
                f(&v["wall_seconds"], 1),
                f(&v["cpu_seconds"], 1),
                f(&v["graphs_per_second"], 2),
                f(&v["speedup"], 3),
                pct(&v["scaling_efficiency"], 1),
                f(&v["load_imbalance"], 3),
                f(&v["allreduce_seconds"], 3),
                f(&v["imbalance_wait_seconds"], 3),
                load("load_average_start"),
                load("load_average_end"),
                reps.join(" ")
            );
        }
    }
}
