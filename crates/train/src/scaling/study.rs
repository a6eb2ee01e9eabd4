//! The measured scaling study: which configurations to train, what each finished run measured
//! ([`RunSummary`]), and the report that compares them ([`StudyReport`], `scaling.json`, whose
//! [`Display`](fmt::Display) prints the analogues of the reference Tables 1 and 2). The runs are
//! launched by [`super::launch`].

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::Regime;
use super::measured::StepFigures;
use super::simulation::{finite_or_nan, fixed, table_head, table_row};
use crate::config::Sampler;
use crate::error::{Error, Result};
use crate::logs::RankReport;
use crate::run_dir::RunDir;
use trackgnn_model::Error as ModelError;

/// One configuration to train: ranks and graphs (`train --max-graphs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StudyConfig {
    /// Ranks.
    pub ranks: usize,
    /// Graphs of the whole training set.
    pub graphs: usize,
}

/// What a study trains: rank counts, regimes, and the graphs of one rank.
#[derive(Clone, Debug)]
pub struct StudySetup {
    /// Rank counts, sorted, starting at 1.
    pub ranks: Vec<usize>,
    /// Threads per rank.
    pub threads: usize,
    /// The step sampler of every run.
    pub sampler: Sampler,
    /// The regimes measured.
    pub regimes: Vec<Regime>,
    /// Graphs of one rank.
    pub graphs_per_rank: usize,
    /// The graph directory.
    pub graphs: PathBuf,
    /// Epochs of every run.
    pub epochs: usize,
    /// Runs per configuration.
    pub repeats: usize,
}

/// Graphs of one rank: `max_graphs`, else all `total` graphs (strong only) or all / the largest
/// rank count (weak scaling needs N × them); checked against the `total` graphs of `dir`.
pub fn graphs_per_rank(
    max_graphs: Option<usize>,
    dir: &Path,
    total: usize,
    max_ranks: usize,
    weak: bool,
) -> Result<usize> {
    let g = match max_graphs {
        Some(0) => return Err(Error::flag("--max-graphs", "must be at least 1")),
        Some(g) => g,
        None if weak => total / max_ranks,
        None => total,
    };
    let need = if weak { g * max_ranks } else { g };
    if need > total || g == 0 {
        return Err(Error::TooFewGraphs {
            dir: dir.to_path_buf(),
            message: format!(
                "holds {total} graphs; {} needs {need}{}: build more graphs or lower --max-graphs / --ranks",
                if weak {
                    format!("weak scaling to {max_ranks} ranks × {g} graphs")
                } else {
                    format!("--max-graphs {g}")
                },
                if g == 0 { " (at least one graph per rank)" } else { "" },
            ),
        });
    }
    Ok(g)
}

impl StudySetup {
    /// The configurations of a regime, one per rank count.
    pub fn configs_of(&self, r: Regime) -> Vec<StudyConfig> {
        let g = self.graphs_per_rank;
        self.ranks
            .iter()
            .map(|&n| StudyConfig { ranks: n, graphs: if r == Regime::Weak { n * g } else { g } })
            .collect()
    }

    /// Every configuration once, in the order they run (the 1-rank run serves both regimes).
    pub fn configs(&self) -> Vec<StudyConfig> {
        let mut configs = Vec::new();
        for c in self.regimes.iter().flat_map(|&r| self.configs_of(r)) {
            if !configs.contains(&c) {
                configs.push(c);
            }
        }
        configs
    }

    /// The one-rank configuration, the baseline of both regimes.
    pub fn baseline(&self) -> StudyConfig {
        StudyConfig { ranks: 1, graphs: self.graphs_per_rank }
    }

    /// The name of a run: `<sampler>-t<threads>-n<ranks>-g<graphs>-r<repeat>`.
    pub fn run_name(&self, c: StudyConfig, repeat: usize) -> String {
        format!("{}-t{}-n{}-g{}-r{repeat}", self.sampler.name(), self.threads, c.ranks, c.graphs)
    }

    /// The report of the finished runs: per regime the fastest repeat of each rank count with
    /// its speed-up over the baseline. `cores` and `mpi` describe the machine and the build.
    pub fn report(
        &self,
        summaries: &[RunSummary],
        load: [Option<[f64; 3]>; 2],
        cores: usize,
        mpi: bool,
    ) -> StudyReport {
        // Best of the repeats per configuration.
        let best = |c: StudyConfig| -> (&RunSummary, Vec<f64>) {
            let reps: Vec<&RunSummary> =
                summaries.iter().filter(|s| s.ranks == c.ranks && s.max_graphs == c.graphs).collect();
            let times = reps.iter().map(|s| s.train_epoch_seconds).collect();
            let b = reps.into_iter().min_by(|x, y| x.train_epoch_seconds.total_cmp(&y.train_epoch_seconds));
            (b.expect("every configuration ran"), times)
        };
        let base = best(self.baseline()).0;
        let rows = |r: Regime| -> Option<Vec<StudyRow>> {
            let rows = self.configs_of(r).into_iter().map(|c| {
                let (b, times) = best(c);
                // Strong: t₁ / t_N per graph trained (a sampler drops the remainder that cannot
                // fill a step of N ranks); weak: the throughput ratio. Both are a ratio of graphs/s.
                let speedup = b.graphs_per_second / base.graphs_per_second;
                StudyRow {
                    summary: b.clone(),
                    speedup,
                    scaling_efficiency: speedup / c.ranks as f64,
                    train_epoch_seconds_repeats: times,
                }
            });
            self.regimes.contains(&r).then(|| rows.collect())
        };
        StudyReport {
            sampler: self.sampler.name(),
            threads_per_rank: self.threads,
            epochs: self.epochs,
            repeats: self.repeats,
            ranks: self.ranks.clone(),
            graphs_per_rank: self.graphs_per_rank,
            graphs_dir: self.graphs.clone(),
            cores,
            mpi,
            load_average_start: load[0],
            load_average_end: load[1],
            baseline_run: base.run.clone(),
            runs: summaries.to_vec(),
            strong: rows(Regime::Strong),
            weak: rows(Regime::Weak),
        }
    }
}

/// What a finished run measured (one repeat of one configuration).
#[derive(Clone, Debug, Serialize)]
pub struct RunSummary {
    /// The run directory.
    pub run: PathBuf,
    /// Ranks.
    pub ranks: usize,
    /// Threads per rank.
    pub threads_per_rank: usize,
    /// `--max-graphs` of the run.
    pub max_graphs: usize,
    /// Which repeat (from 1).
    pub repeat: usize,
    /// Training graphs of the split.
    pub train_graphs: usize,
    /// Epochs timed.
    pub timed_epochs: usize,
    /// Optimiser steps per epoch.
    pub steps_per_epoch: f64,
    /// Graphs trained on per epoch.
    pub graphs_per_epoch: f64,
    /// Training seconds per epoch.
    pub train_epoch_seconds: f64,
    /// Seconds per step.
    pub seconds_per_batch: f64,
    /// Training throughput.
    pub graphs_per_second: f64,
    /// Mean slowest / mean rank compute.
    pub load_imbalance: f64,
    /// All-reduce seconds per epoch.
    pub allreduce_seconds: f64,
    /// Seconds per epoch waiting for the slowest rank.
    pub imbalance_wait_seconds: f64,
    /// Edge efficiency of the last epoch.
    pub efficiency: f64,
    /// Target purity of the last epoch.
    pub target_purity: f64,
    /// Total purity of the last epoch.
    pub total_purity: f64,
    /// Purity of the last epoch.
    pub purity: f64,
    /// AUC of the last epoch.
    pub auc: f64,
    /// Validation loss of the last epoch.
    pub val_loss: f64,
    /// The largest peak RSS of a rank.
    pub peak_rss_bytes: u64,
    /// Peak RSS of each rank.
    pub peak_rss_bytes_per_rank: Vec<u64>,
    /// Mean CPU utilisation of the ranks.
    pub cpu_utilisation: f64,
    /// CPU utilisation of each rank.
    pub cpu_utilisation_per_rank: Vec<f64>,
    /// The slowest rank's wall seconds.
    pub wall_seconds: f64,
    /// CPU seconds of all ranks.
    pub cpu_seconds: f64,
    /// CPU seconds of each rank.
    pub cpu_seconds_per_rank: Vec<f64>,
    /// Load average when the run started.
    pub load_average_start: Option<[f64; 3]>,
    /// Load average when it ended.
    pub load_average_end: Option<[f64; 3]>,
}

impl RunSummary {
    /// Reads a finished run of configuration `c` back; `load` is the load average at its start
    /// and end.
    pub fn read(
        run: &Path,
        c: StudyConfig,
        threads: usize,
        repeat: usize,
        load: [Option<[f64; 3]>; 2],
    ) -> Result<Self> {
        let rd = RunDir::new(run);
        let s = StepFigures::of_run(&rd)?;
        let records = rd.read_metrics()?;
        let last = records.last().ok_or_else(|| {
            Error::Model(ModelError::Corrupt { path: rd.metrics_jsonl_path(), message: "no epoch logged".into() })
        })?;
        let train_graphs = rd.read_events()?.train.len();
        let reports: Vec<RankReport> =
            (0..c.ranks).map(|r| rd.read_rank_report(r)).collect::<trackgnn_model::Result<_>>()?;
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
}

/// The fastest repeat of one configuration and its speed-up over the baseline.
#[derive(Clone, Debug, Serialize)]
pub struct StudyRow {
    /// The fastest repeat.
    #[serde(flatten)]
    pub summary: RunSummary,
    /// Throughput over the baseline's.
    pub speedup: f64,
    /// Speed-up / ranks.
    pub scaling_efficiency: f64,
    /// Training seconds per epoch of every repeat.
    pub train_epoch_seconds_repeats: Vec<f64>,
}

/// `scaling.json`: the study, every run, and per regime the best repeat of each rank count.
#[derive(Clone, Debug, Serialize)]
pub struct StudyReport {
    /// The step sampler.
    pub sampler: &'static str,
    /// Threads per rank.
    pub threads_per_rank: usize,
    /// Epochs of every run.
    pub epochs: usize,
    /// Runs per configuration.
    pub repeats: usize,
    /// Rank counts.
    pub ranks: Vec<usize>,
    /// Graphs of one rank.
    pub graphs_per_rank: usize,
    /// The graph directory.
    pub graphs_dir: PathBuf,
    /// Cores of the machine.
    pub cores: usize,
    /// Whether the binary was built with MPI.
    pub mpi: bool,
    /// Load average at the start of the study.
    pub load_average_start: Option<[f64; 3]>,
    /// Load average at its end.
    pub load_average_end: Option<[f64; 3]>,
    /// The fastest 1-rank run (the simulation's default source).
    pub baseline_run: PathBuf,
    /// Every run, in the order they ran.
    pub runs: Vec<RunSummary>,
    /// Strong scaling, if measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strong: Option<Vec<StudyRow>>,
    /// Weak scaling, if measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weak: Option<Vec<StudyRow>>,
}

impl StudyReport {
    /// The measured regimes and their rows.
    pub fn regimes(&self) -> impl Iterator<Item = (Regime, &[StudyRow])> {
        [(Regime::Strong, &self.strong), (Regime::Weak, &self.weak)]
            .into_iter()
            .filter_map(|(r, rows)| rows.as_deref().map(|rows| (r, rows)))
    }

    /// The measured speed-up curves, named `<regime> scaling`: `(ranks, speed-up)` points.
    pub fn curves(&self) -> Vec<(String, Vec<(f64, f64)>)> {
        let points = |rows: &[StudyRow]| {
            rows.iter().filter(|v| v.speedup.is_finite()).map(|v| (v.summary.ranks as f64, v.speedup)).collect()
        };
        self.regimes().map(|(r, rows)| (format!("{} scaling", r.name()), points(rows))).collect()
    }
}

/// A load average as `1.00/0.50/0.25`, or `-`.
pub fn format_load(l: Option<[f64; 3]>) -> String {
    l.map_or("-".into(), |l| format!("{:.2}/{:.2}/{:.2}", l[0], l[1], l[2]))
}

fn pct(x: f64, digits: usize) -> String {
    if x.is_finite() { format!("{:.digits$}", 100.0 * x) } else { "-".into() }
}

/// The columns of Table 1: what the model learned, and the epoch time.
const FIT_COLUMNS: &str = "Ranks | Train graphs | Efficiency % | Target purity % | Total purity % | Purity % | AUC % | Val loss | Epoch s | Batch s";

/// The columns of Table 2: resources and speed-up.
const SPEED_COLUMNS: &str = "Ranks | CPU util % | Peak RSS MB/rank | Wall s | CPU s | Graphs/s | Speed-up | Scaling eff. % | Imbalance | All-reduce s | Wait s | Load avg start → end | Epoch s of repeats";

/// Tables 1 and 2 of the reference, per regime.
impl fmt::Display for StudyReport {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (r, rows) in self.regimes() {
            writeln!(
                out,
                "\n{} scaling: {} sampler, {} thread(s) per rank, best of {} repeat(s), {} core(s){}",
                r.name(),
                self.sampler,
                self.threads_per_rank,
                self.repeats,
                self.cores,
                match r {
                    Regime::Strong => format!(", {} graphs at every rank count", self.graphs_per_rank),
                    Regime::Weak => format!(", {} graphs per rank", self.graphs_per_rank),
                }
            )?;
            table_head(out, FIT_COLUMNS)?;
            for v in rows.iter().map(|v| &v.summary) {
                table_row(
                    out,
                    &[
                        &v.ranks,
                        &v.train_graphs,
                        &pct(v.efficiency, 3),
                        &pct(v.target_purity, 3),
                        &pct(v.total_purity, 3),
                        &pct(v.purity, 3),
                        &pct(v.auc, 3),
                        &fixed(v.val_loss, 5),
                        &fixed(v.train_epoch_seconds, 2),
                        &fixed(v.seconds_per_batch, 3),
                    ],
                )?;
            }
            writeln!(out)?;
            table_head(out, SPEED_COLUMNS)?;
            for row in rows {
                let v = &row.summary;
                let reps: Vec<String> = row.train_epoch_seconds_repeats.iter().map(|&x| fixed(x, 2)).collect();
                table_row(
                    out,
                    &[
                        &v.ranks,
                        &pct(v.cpu_utilisation, 1),
                        &format!("{:.1}", finite_or_nan(v.peak_rss_bytes as f64) / 1e6),
                        &fixed(v.wall_seconds, 1),
                        &fixed(v.cpu_seconds, 1),
                        &fixed(v.graphs_per_second, 2),
                        &fixed(row.speedup, 3),
                        &pct(row.scaling_efficiency, 1),
                        &fixed(v.load_imbalance, 3),
                        &fixed(v.allreduce_seconds, 3),
                        &fixed(v.imbalance_wait_seconds, 3),
                        &format!("{} → {}", format_load(v.load_average_start), format_load(v.load_average_end)),
                        &reps.join(" "),
                    ],
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(regimes: Vec<Regime>) -> StudySetup {
        StudySetup {
            ranks: vec![1, 2],
            threads: 1,
            sampler: Sampler::Balanced,
            regimes,
            graphs_per_rank: 4,
            graphs: PathBuf::from("g"),
            epochs: 2,
            repeats: 2,
        }
    }

    fn summary(c: StudyConfig, repeat: usize, seconds: f64) -> RunSummary {
        RunSummary {
            run: PathBuf::from(format!("n{}-g{}-r{repeat}", c.ranks, c.graphs)),
            ranks: c.ranks,
            threads_per_rank: 1,
            max_graphs: c.graphs,
            repeat,
            train_graphs: c.graphs,
            timed_epochs: 1,
            steps_per_epoch: 4.0,
            graphs_per_epoch: c.graphs as f64,
            train_epoch_seconds: seconds,
            seconds_per_batch: seconds / 4.0,
            graphs_per_second: c.graphs as f64 / seconds,
            load_imbalance: 1.0,
            allreduce_seconds: 0.0,
            imbalance_wait_seconds: 0.0,
            efficiency: 0.9,
            target_purity: 0.8,
            total_purity: 0.7,
            purity: 0.6,
            auc: 0.99,
            val_loss: f64::NAN,
            peak_rss_bytes: 1 << 20,
            peak_rss_bytes_per_rank: vec![1 << 20; c.ranks],
            cpu_utilisation: 1.0,
            cpu_utilisation_per_rank: vec![1.0; c.ranks],
            wall_seconds: seconds,
            cpu_seconds: seconds,
            cpu_seconds_per_rank: vec![seconds; c.ranks],
            load_average_start: None,
            load_average_end: Some([1.0, 0.5, 0.25]),
        }
    }

    #[test]
    fn configurations_and_graphs_per_rank() {
        let s = setup(vec![Regime::Strong, Regime::Weak]);
        let c = |ranks, graphs| StudyConfig { ranks, graphs };
        assert_eq!(s.configs(), [c(1, 4), c(2, 4), c(2, 8)], "the 1-rank run serves both regimes");
        assert_eq!(s.run_name(c(2, 8), 3), "balanced-t1-n2-g8-r3");
        let dir = Path::new("graphs");
        assert_eq!(graphs_per_rank(None, dir, 10, 4, true).unwrap(), 2);
        assert_eq!(graphs_per_rank(None, dir, 10, 4, false).unwrap(), 10);
        let e = graphs_per_rank(Some(3), dir, 10, 4, true).unwrap_err().to_string();
        assert!(e.contains("graphs: holds 10 graphs; weak scaling to 4 ranks × 3 graphs needs 12"), "{e}");
        assert!(
            graphs_per_rank(None, dir, 3, 4, true).unwrap_err().to_string().contains("at least one graph per rank")
        );
        assert!(graphs_per_rank(Some(0), dir, 3, 1, false).is_err());
    }

    #[test]
    fn report_takes_the_fastest_repeat_and_its_speedup() {
        let s = setup(vec![Regime::Strong]);
        let runs: Vec<RunSummary> = [(1, 2.0), (2, 1.5), (1, 1.0), (2, 2.0)]
            .iter()
            .enumerate()
            .map(|(i, &(ranks, t))| summary(StudyConfig { ranks, graphs: 4 }, 1 + i / 2, t))
            .collect();
        let report = s.report(&runs, [None, None], 2, false);
        assert!(report.weak.is_none());
        let strong = report.strong.as_ref().unwrap();
        assert_eq!(strong[0].train_epoch_seconds_repeats, [2.0, 1.0]);
        assert_eq!(strong[0].summary.repeat, 2, "the fastest 1-rank repeat");
        assert!((strong[1].speedup - 1.0 / 1.5).abs() < 1e-12);
        assert_eq!(report.baseline_run, PathBuf::from("n1-g4-r2"));
        let json = serde_json::to_value(&report).unwrap();
        assert!(json.get("weak").is_none() && json["strong"][1]["speedup"].is_number());
        assert!(json["strong"][0]["val_loss"].is_null(), "NaN is null in the JSON");
        let text = report.to_string();
        assert!(text.contains("| 1 | 4 | 90.000 | 80.000 | 70.000 | 60.000 | 99.000 | - | 1.00 | 0.250 |"), "{text}");
        assert!(text.contains("- → 1.00/0.50/0.25"), "{text}");
        assert_eq!(report.curves()[0].1, [(1.0, 1.0), (2.0, 1.0 / 1.5)]);
    }
}
