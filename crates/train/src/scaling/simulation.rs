//! The simulated scaling study: predictions of one measured run at any number of ranks, per
//! sampler and regime, their sensitivity to the interconnect, and a check against a measured
//! study — one typed report ([`Simulation`]) whose JSON is `simulation.json` and whose
//! [`Display`](std::fmt::Display) is the text of `trackgnn scaling --simulate`.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Regime;
use super::allreduce::AllreduceCost;
use super::measured::MeasuredRun;
use super::predict::{GraphTimes, Prediction, SimSetup, graphs_for, predict, speedup};
use crate::config::{Sampler, TrainConfig};
use crate::error::{Error, Result};

/// What to simulate from a measured run.
#[derive(Clone, Debug)]
pub struct SimulationPlan {
    /// Rank counts, sorted, starting at 1.
    pub ranks: Vec<usize>,
    /// The regimes to predict.
    pub regimes: Vec<Regime>,
    /// The samplers to predict.
    pub samplers: Vec<Sampler>,
    /// Graphs of the strong data set (default: the run's training graphs).
    pub strong_graphs: Option<usize>,
    /// The interconnect of the all-reduce.
    pub cost: AllreduceCost,
    /// Where the interconnect came from (printed and recorded).
    pub cost_source: String,
    /// Cores the predicted ranks share (`None`: a rank per core set).
    pub cores: Option<usize>,
    /// Threads per rank (default: the run's).
    pub threads_per_rank: Option<usize>,
    /// Epochs whose step draws are averaged.
    pub epochs: u64,
}

/// A measured study (`scaling.json`) as far as the simulation reads it.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct MeasuredStudy {
    /// The study's sampler.
    #[serde(default)]
    pub sampler: Option<String>,
    /// Cores of the machine it ran on.
    #[serde(default)]
    pub cores: Option<u64>,
    /// The fastest 1-rank strong run, the study's baseline.
    #[serde(default)]
    pub baseline_run: Option<PathBuf>,
    /// The strong-scaling rows.
    #[serde(default)]
    pub strong: Option<Vec<MeasuredRow>>,
    /// The weak-scaling rows.
    #[serde(default)]
    pub weak: Option<Vec<MeasuredRow>>,
}

/// One measured row of a study, as far as the check reads it.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct MeasuredRow {
    /// Ranks.
    #[serde(default)]
    pub ranks: Option<u64>,
    /// Graphs the run trained on.
    #[serde(default)]
    pub train_graphs: Option<u64>,
    /// Training seconds per epoch.
    #[serde(default)]
    pub train_epoch_seconds: Option<f64>,
    /// Measured speed-up.
    #[serde(default)]
    pub speedup: Option<f64>,
    /// Measured load imbalance.
    #[serde(default)]
    pub load_imbalance: Option<f64>,
}

impl MeasuredStudy {
    /// The rows of a regime, if the study measured it.
    fn rows(&self, regime: Regime) -> Option<&[MeasuredRow]> {
        match regime {
            Regime::Strong => self.strong.as_deref(),
            Regime::Weak => self.weak.as_deref(),
        }
    }
}

/// Mean, extremes and coefficient of variation of the per-graph compute seconds.
#[derive(Clone, Debug, Serialize)]
pub struct Spread {
    /// Mean.
    pub mean: f64,
    /// Minimum.
    pub min: f64,
    /// Maximum.
    pub max: f64,
    /// Standard deviation / mean.
    pub cv: f64,
}

impl Spread {
    /// The spread of `xs` (population standard deviation).
    pub fn of(xs: &[f64]) -> Spread {
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64).sqrt();
        Spread {
            mean,
            min: xs.iter().copied().fold(f64::INFINITY, f64::min),
            max: xs.iter().copied().fold(0.0, f64::max),
            cv: sd / mean,
        }
    }
}

/// The interconnect of a simulation and where it came from.
#[derive(Clone, Debug, Serialize)]
pub struct Interconnect {
    /// Per-message latency, seconds.
    pub latency_seconds: f64,
    /// Link bandwidth, bytes per second.
    pub bandwidth_bytes_per_second: f64,
    /// `options`, `fit FILE` or the defaults.
    pub source: String,
}

/// One predicted row: a prediction with its speed-up, or a rank count the data cannot fill.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum PredictedRow {
    /// A predicted epoch.
    Predicted {
        /// The prediction.
        #[serde(flatten)]
        prediction: Prediction,
        /// Speed-up over one rank.
        speedup: f64,
        /// Speed-up / ranks.
        scaling_efficiency: f64,
    },
    /// No full step at this rank count.
    NoStep {
        /// Ranks.
        ranks: usize,
        /// Why.
        note: &'static str,
    },
}

impl PredictedRow {
    /// The speed-up, if predicted.
    pub fn speedup(&self) -> Option<f64> {
        match self {
            PredictedRow::Predicted { speedup, .. } => Some(*speedup),
            PredictedRow::NoStep { .. } => None,
        }
    }
}

/// The predictions of one sampler and regime.
#[derive(Clone, Debug, Serialize)]
pub struct PredictionTable {
    /// The sampler's name.
    pub sampler: &'static str,
    /// The regime.
    pub regime: Regime,
    /// One row per rank count.
    pub rows: Vec<PredictedRow>,
}

/// The speed-ups of one sampler and regime under a varied interconnect.
#[derive(Clone, Debug, Serialize)]
pub struct SensitivityRow {
    /// The sampler's name.
    pub sampler: &'static str,
    /// The regime.
    pub regime: Regime,
    /// Speed-up per rank count (`None` where no step fits).
    pub speedup: Vec<Option<f64>>,
}

/// The speed-ups under one variant of the interconnect.
#[derive(Clone, Debug, Serialize)]
pub struct Sensitivity {
    /// `nominal`, `bandwidth x10`, …
    pub label: &'static str,
    /// Latency of the variant, seconds.
    pub latency_seconds: f64,
    /// Bandwidth of the variant, bytes per second.
    pub bandwidth_bytes_per_second: f64,
    /// One row per sampler and regime.
    pub rows: Vec<SensitivityRow>,
}

/// A measured row beside its prediction.
#[derive(Clone, Debug, Serialize)]
pub struct CheckRow {
    /// The regime.
    pub regime: Regime,
    /// Ranks.
    pub ranks: u64,
    /// Graphs the measured run trained on.
    pub train_graphs: u64,
    /// The predicted compute slow-down of the shared cores.
    pub contention: f64,
    /// Measured training seconds per epoch.
    pub measured_train_seconds: f64,
    /// Predicted training seconds per epoch.
    pub predicted_train_seconds: f64,
    /// predicted / measured − 1.
    pub time_error: f64,
    /// Measured speed-up.
    pub measured_speedup: f64,
    /// Predicted speed-up.
    pub predicted_speedup: f64,
    /// predicted / measured − 1.
    pub speedup_error: f64,
    /// Measured load imbalance.
    pub measured_load_imbalance: Option<f64>,
    /// Predicted load imbalance.
    pub predicted_load_imbalance: f64,
}

/// The check against a measured study.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    /// The study's sampler.
    pub sampler: &'static str,
    /// Every measured row that can be predicted.
    pub rows: Vec<CheckRow>,
}

/// The report of `trackgnn scaling --simulate` (`simulation.json`).
#[derive(Clone, Debug, Serialize)]
pub struct Simulation {
    /// The measured run.
    pub from: PathBuf,
    /// Its ranks.
    pub run_ranks: usize,
    /// Its training graphs.
    pub train_graphs: usize,
    /// Graphs timed from their size (never stepped on).
    pub graphs_estimated: usize,
    /// Graphs of the strong data set.
    pub strong_graphs: usize,
    /// Bytes of the gradient.
    pub gradient_bytes: f64,
    /// Parameters (gradient bytes / 4).
    pub parameters: f64,
    /// Compute seconds per graph.
    pub compute_seconds_per_graph: Spread,
    /// Seconds of a step besides compute and all-reduce.
    pub step_overhead_seconds: f64,
    /// The interconnect.
    pub allreduce: Interconnect,
    /// Cores the predictions share.
    pub cores: Option<usize>,
    /// Cores the check shares (the measured machine's unless given).
    pub check_cores: Option<usize>,
    /// Threads per rank.
    pub threads_per_rank: usize,
    /// Epochs averaged.
    pub epochs_simulated: u64,
    /// Per sampler and regime.
    pub predictions: Vec<PredictionTable>,
    /// The speed-ups with the bandwidth and latency × and ÷ 10.
    pub sensitivity: Vec<Sensitivity>,
    /// Against a measured study, if given.
    pub check: Option<Check>,
    /// One graph split across the rank counts (`--domain-graph`), if asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<super::domain::DomainPrediction>,
}

const NO_STEP: &str = "no full step: fewer graphs (per size bin, balanced) than ranks × graphs per step";

/// One regime and sampler: predictions with speed-up and efficiency, one row per rank count.
fn table(
    cfg: &TrainConfig,
    times: &GraphTimes,
    ranks: &[usize],
    regime: Regime,
    strong_graphs: usize,
    s: &SimSetup,
) -> Vec<PredictedRow> {
    let base = predict(cfg, times, 1, graphs_for(regime, 1, strong_graphs, times.ids.len()), s);
    ranks
        .iter()
        .map(|&n| match (predict(cfg, times, n, graphs_for(regime, n, strong_graphs, times.ids.len()), s), &base) {
            (Some(prediction), Some(b)) => {
                let speedup = speedup(regime, b, &prediction);
                PredictedRow::Predicted { prediction, speedup, scaling_efficiency: speedup / n as f64 }
            }
            _ => PredictedRow::NoStep { ranks: n, note: NO_STEP },
        })
        .collect()
}

/// Predicted against measured for each regime and rank count: each measured row is predicted
/// on as many graphs as its run trained on.
fn check(m: &MeasuredStudy, run: &MeasuredRun, setup: &SimSetup) -> Result<Check> {
    let Some(sampler) = m.sampler.as_deref().and_then(Sampler::from_name) else {
        return Err(Error::flag(
            "--check",
            "names a file without `sampler` (is it a `trackgnn scaling --json` output?)",
        ));
    };
    let cfg = TrainConfig { sampler, ..run.cfg.clone() };
    let mut rows = Vec::new();
    for regime in [Regime::Strong, Regime::Weak] {
        let Some(measured) = m.rows(regime) else { continue };
        let base_graphs = measured.iter().find(|r| r.ranks == Some(1)).and_then(|r| r.train_graphs);
        let base = base_graphs.and_then(|g| predict(&cfg, &run.times, 1, g as usize, setup));
        for r in measured {
            let (Some(n), Some(g)) = (r.ranks, r.train_graphs) else { continue };
            let Some(p) = predict(&cfg, &run.times, n as usize, g as usize, setup) else { continue };
            let t_meas = r.train_epoch_seconds.unwrap_or(f64::NAN);
            let sp_pred = base.as_ref().map_or(f64::NAN, |b| speedup(regime, b, &p));
            let sp_meas = r.speedup.unwrap_or(f64::NAN);
            rows.push(CheckRow {
                regime,
                ranks: n,
                train_graphs: g,
                contention: p.contention,
                measured_train_seconds: t_meas,
                predicted_train_seconds: p.epoch_seconds,
                time_error: p.epoch_seconds / t_meas - 1.0,
                measured_speedup: sp_meas,
                predicted_speedup: sp_pred,
                speedup_error: sp_pred / sp_meas - 1.0,
                measured_load_imbalance: r.load_imbalance,
                predicted_load_imbalance: p.load_imbalance,
            });
        }
    }
    Ok(Check { sampler: sampler.name(), rows })
}

impl Simulation {
    /// Simulates `plan` from the run measured at `from`, and checks it against `study` if
    /// given (its rows predicted with its machine's cores unless the plan sets them).
    pub fn run(from: &Path, run: &MeasuredRun, plan: &SimulationPlan, study: Option<&MeasuredStudy>) -> Result<Self> {
        let check_cores = plan.cores.or_else(|| study.and_then(|m| m.cores.map(|c| c as usize)));
        let threads = plan.threads_per_rank.unwrap_or(run.threads);
        let setup = SimSetup {
            cost: plan.cost,
            gradient_bytes: run.gradient_bytes,
            step_overhead_seconds: run.step_overhead_seconds,
            oversubscription: plan.cores.map(|c| (c, threads)),
            epochs: plan.epochs.max(1),
        };
        let check_setup = SimSetup { oversubscription: check_cores.map(|c| (c, threads)), ..setup };
        let strong_graphs = plan.strong_graphs.unwrap_or(run.times.ids.len());
        let cfg_for = |s: Sampler| TrainConfig { sampler: s, ..run.cfg.clone() };
        let cases: Vec<(Sampler, Regime)> =
            plan.samplers.iter().flat_map(|&s| plan.regimes.iter().map(move |&r| (s, r))).collect();
        let tables = |st: &SimSetup| -> Vec<(Sampler, Regime, Vec<PredictedRow>)> {
            let rows = |&(s, r): &(Sampler, Regime)| table(&cfg_for(s), &run.times, &plan.ranks, r, strong_graphs, st);
            cases.iter().map(|c| (c.0, c.1, rows(c))).collect()
        };
        let predictions = tables(&setup)
            .into_iter()
            .map(|(s, regime, rows)| PredictionTable { sampler: s.name(), regime, rows })
            .collect();
        let variants = [("nominal", 1.0, 1.0), ("bandwidth x10", 1.0, 10.0), ("bandwidth /10", 1.0, 0.1)];
        let variants = variants.into_iter().chain([("latency x10", 10.0, 1.0), ("latency /10", 0.1, 1.0)]);
        let sensitivity = variants
            .map(|(label, lat, bw)| {
                let st = SimSetup { cost: plan.cost.scaled(lat, bw), ..setup };
                let rows = tables(&st)
                    .into_iter()
                    .map(|(s, regime, rows)| SensitivityRow {
                        sampler: s.name(),
                        regime,
                        speedup: rows.iter().map(PredictedRow::speedup).collect(),
                    })
                    .collect();
                Sensitivity {
                    label,
                    latency_seconds: st.cost.latency_seconds,
                    bandwidth_bytes_per_second: st.cost.bandwidth_bytes_per_second,
                    rows,
                }
            })
            .collect();
        let check = study.map(|m| check(m, run, &check_setup)).transpose()?;
        Ok(Simulation {
            from: from.to_path_buf(),
            run_ranks: run.ranks,
            train_graphs: run.times.ids.len(),
            graphs_estimated: run.estimated,
            strong_graphs,
            gradient_bytes: run.gradient_bytes,
            parameters: run.gradient_bytes / 4.0,
            compute_seconds_per_graph: Spread::of(&run.times.seconds),
            step_overhead_seconds: run.step_overhead_seconds,
            allreduce: Interconnect {
                latency_seconds: plan.cost.latency_seconds,
                bandwidth_bytes_per_second: plan.cost.bandwidth_bytes_per_second,
                source: plan.cost_source.clone(),
            },
            cores: plan.cores,
            check_cores,
            threads_per_rank: threads,
            epochs_simulated: setup.epochs,
            predictions,
            sensitivity,
            check,
            domain: None,
        })
    }

    /// The predicted speed-up curves, named `<regime> <sampler>`: `(ranks, speed-up)` points.
    pub fn curves(&self) -> Vec<(String, Vec<(f64, f64)>)> {
        let points = |rows: &[PredictedRow]| {
            rows.iter()
                .filter_map(|r| match r {
                    PredictedRow::Predicted { prediction, speedup, .. } if speedup.is_finite() => {
                        Some((prediction.ranks as f64, *speedup))
                    }
                    _ => None,
                })
                .collect()
        };
        self.predictions.iter().map(|t| (format!("{} {}", t.regime.name(), t.sampler), points(&t.rows))).collect()
    }
}

/// `x` with `digits` decimals, or `-` if it is not finite (not a number in the JSON).
pub(crate) fn fixed(x: f64, digits: usize) -> String {
    if x.is_finite() { format!("{x:.digits$}") } else { "-".into() }
}

/// `x` as it reads back from the JSON: non-finite values are `null`, printed as NaN.
pub(crate) fn finite_or_nan(x: f64) -> f64 {
    if x.is_finite() { x } else { f64::NAN }
}

/// The header of a Markdown table, its columns separated by ` | `, and the separator line.
pub(crate) fn table_head(out: &mut fmt::Formatter<'_>, columns: &str) -> fmt::Result {
    writeln!(out, "| {columns} |")?;
    writeln!(out, "|{}", "---|".repeat(columns.split(" | ").count()))
}

/// A row of a Markdown table.
pub(crate) fn table_row(out: &mut fmt::Formatter<'_>, cells: &[&dyn fmt::Display]) -> fmt::Result {
    write!(out, "|")?;
    for c in cells {
        write!(out, " {c} |")?;
    }
    writeln!(out)
}

/// A JSON-like rendering of an optional count: the number or `null`.
fn or_null(x: Option<usize>) -> String {
    x.map_or("null".into(), |c| c.to_string())
}

impl fmt::Display for Simulation {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.compute_seconds_per_graph;
        writeln!(
            out,
            "from {}: {} training graphs ({} timed from their size), compute {} s/graph (min {}, max {}, cv {}), step overhead {} s",
            self.from.display(),
            self.train_graphs,
            self.graphs_estimated,
            fixed(c.mean, 3),
            fixed(c.min, 3),
            fixed(c.max, 3),
            fixed(c.cv, 2),
            fixed(self.step_overhead_seconds, 4)
        )?;
        let ar = &self.allreduce;
        writeln!(
            out,
            "all-reduce of {:.2} MB: ring model, latency {:.2} µs, bandwidth {:.2} GB/s ({}); cores {}",
            finite_or_nan(self.gradient_bytes) / 1e6,
            finite_or_nan(ar.latency_seconds) * 1e6,
            finite_or_nan(ar.bandwidth_bytes_per_second) / 1e9,
            ar.source,
            self.cores.map_or("unlimited (a rank per core set)".to_string(), |c| c.to_string()),
        )?;
        for t in &self.predictions {
            writeln!(out, "\n{} scaling, {} sampler (predicted training time per epoch)", t.regime.name(), t.sampler)?;
            table_head(
                out,
                "Ranks | Graphs | Steps | Epoch s | Compute s | All-reduce s | Imbalance | Speed-up | Efficiency %",
            )?;
            for r in &t.rows {
                match r {
                    PredictedRow::NoStep { ranks, note } => table_row(out, &[ranks, note])?,
                    PredictedRow::Predicted { prediction: p, speedup, scaling_efficiency } => table_row(
                        out,
                        &[
                            &p.ranks,
                            &p.graphs,
                            &fixed(p.steps_per_epoch, 0),
                            &fixed(p.epoch_seconds, 2),
                            &fixed(p.compute_seconds, 2),
                            &fixed(p.allreduce_seconds, 3),
                            &fixed(p.load_imbalance, 3),
                            &fixed(*speedup, 2),
                            &format!("{:.1}", 100.0 * finite_or_nan(*scaling_efficiency)),
                        ],
                    )?,
                }
            }
        }
        writeln!(out, "\nsensitivity of the speed-up to the interconnect (per rank count)")?;
        for v in &self.sensitivity {
            for r in &v.rows {
                let sp: Vec<String> = r.speedup.iter().map(|x| fixed(x.unwrap_or(f64::NAN), 2)).collect();
                writeln!(out, "{:<14} {:<6} {:<8} {}", v.label, r.regime.name(), r.sampler, sp.join("  "))?;
            }
        }
        if let Some(check) = &self.check {
            writeln!(
                out,
                "\ncheck against measured runs ({} sampler, {} cores shared by the ranks)",
                check.sampler,
                or_null(self.check_cores)
            )?;
            table_head(
                out,
                "Regime | Ranks | Contention | Measured s | Predicted s | Error % | Measured speed-up | Predicted | Error %",
            )?;
            for r in &check.rows {
                table_row(
                    out,
                    &[
                        &r.regime.name(),
                        &r.ranks,
                        &fixed(r.contention, 2),
                        &fixed(r.measured_train_seconds, 2),
                        &fixed(r.predicted_train_seconds, 2),
                        &format!("{:.1}", 100.0 * finite_or_nan(r.time_error)),
                        &fixed(r.measured_speedup, 2),
                        &fixed(r.predicted_speedup, 2),
                        &format!("{:.1}", 100.0 * finite_or_nan(r.speedup_error)),
                    ],
                )?;
            }
        }
        if let Some(d) = &self.domain {
            write!(out, "{d}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(graphs: usize) -> MeasuredRun {
        MeasuredRun {
            cfg: TrainConfig::default(),
            times: GraphTimes {
                ids: (0..graphs as u64).collect(),
                edges: vec![1000; graphs],
                seconds: (0..graphs).map(|i| 0.1 + 0.01 * i as f64).collect(),
            },
            estimated: 0,
            gradient_bytes: 4e6,
            step_overhead_seconds: 0.0,
            threads: 1,
            ranks: 1,
        }
    }

    fn plan(ranks: &[usize]) -> SimulationPlan {
        SimulationPlan {
            ranks: ranks.to_vec(),
            regimes: vec![Regime::Strong, Regime::Weak],
            samplers: vec![Sampler::Random],
            strong_graphs: None,
            cost: AllreduceCost::new(2e-6, 20e9),
            cost_source: "test".into(),
            cores: None,
            threads_per_rank: None,
            epochs: 2,
        }
    }

    #[test]
    fn predicts_every_rank_count_and_marks_those_without_a_step() {
        let sim = Simulation::run(Path::new("r"), &run(8), &plan(&[1, 2, 16]), None).unwrap();
        assert_eq!(sim.predictions.len(), 2);
        let strong = &sim.predictions[0].rows;
        assert_eq!(strong[0].speedup(), Some(1.0));
        assert!(strong[1].speedup().unwrap() > 1.5, "{:?}", strong[1]);
        assert!(matches!(strong[2], PredictedRow::NoStep { ranks: 16, .. }), "16 ranks cannot share 8 graphs");
        // Weak scaling grows the data with the ranks: 16 ranks have their step.
        assert!(sim.predictions[1].rows[2].speedup().is_some());
        assert_eq!(sim.sensitivity.len(), 5);
        assert_eq!(sim.sensitivity[0].rows[0].speedup, strong.iter().map(PredictedRow::speedup).collect::<Vec<_>>());
        let json = serde_json::to_value(&sim).unwrap();
        assert_eq!(json["predictions"][0]["rows"][2]["note"], NO_STEP);
        assert_eq!(json["predictions"][0]["rows"][1]["ranks"], 2);
        assert_eq!(sim.curves()[0].1.len(), 2);
        let text = sim.to_string();
        assert!(text.contains("| 16 | no full step"), "{text}");
    }

    #[test]
    fn checks_against_a_measured_study() {
        let study: MeasuredStudy = serde_json::from_value(serde_json::json!({
            "sampler": "random", "cores": 2,
            "strong": [{ "ranks": 1, "train_graphs": 8, "train_epoch_seconds": 1.2, "speedup": 1.0 }],
        }))
        .unwrap();
        let sim = Simulation::run(Path::new("r"), &run(8), &plan(&[1]), Some(&study)).unwrap();
        assert_eq!(sim.check_cores, Some(2));
        let rows = &sim.check.as_ref().unwrap().rows;
        assert_eq!(rows.len(), 1);
        assert!((rows[0].predicted_train_seconds - 1.08).abs() < 1e-9, "{:?}", rows[0]);
        assert!((rows[0].time_error + 0.1).abs() < 1e-9);
        let no_sampler = MeasuredStudy::default();
        let e = Simulation::run(Path::new("r"), &run(8), &plan(&[1]), Some(&no_sampler)).unwrap_err();
        assert!(e.to_string().contains("--check names a file without `sampler`"), "{e}");
    }

    #[test]
    fn spread_of_times() {
        let s = Spread::of(&[1.0, 3.0]);
        assert_eq!((s.mean, s.min, s.max, s.cv), (2.0, 1.0, 3.0, 0.5));
        assert_eq!(fixed(f64::NAN, 2), "-");
        assert_eq!(fixed(1.234, 1), "1.2");
    }
}
