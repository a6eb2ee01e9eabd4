//! What a finished run measured, read back for the scaling study: per-epoch step figures (the
//! measured study) and per-graph compute times (the simulation's input). Both time the same
//! epochs ([`timed_steps`]).

use std::collections::BTreeMap;
use std::path::Path;

use super::predict::GraphTimes;
use crate::config::TrainConfig;
use crate::data::GraphSet;
use crate::error::{Error, Result};
use crate::run_dir::{RunDir, StepRecord, Weights};
use trackgnn_model::Error as ModelError;

/// The steps that are timed: the first epoch warms up (page cache, allocator), so it is left
/// out when there are later ones.
pub fn timed_steps(mut steps: Vec<StepRecord>) -> Vec<StepRecord> {
    let first = steps.iter().map(|s| s.epoch).min();
    if steps.iter().any(|s| Some(s.epoch) != first) {
        steps.retain(|s| Some(s.epoch) != first);
    }
    steps
}

/// Per-epoch training figures of a run, over its timed epochs ([`timed_steps`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepFigures {
    /// Epochs timed.
    pub timed_epochs: usize,
    /// Mean optimiser steps per epoch.
    pub steps_per_epoch: f64,
    /// Graphs per step (all ranks).
    pub graphs_per_step: f64,
    /// Mean training seconds per epoch (the steps' wall times summed).
    pub train_epoch_seconds: f64,
    /// Mean load imbalance over the steps.
    pub load_imbalance: f64,
    /// Mean all-reduce seconds per epoch (mean over ranks).
    pub allreduce_seconds: f64,
    /// Mean seconds per epoch the ranks waited for the slowest one's compute (mean over ranks
    /// of max − own).
    pub imbalance_wait_seconds: f64,
}

impl StepFigures {
    /// Reads a run's `steps.jsonl`: per epoch the sum of step seconds, the mean over ranks of
    /// the all-reduce seconds and of the wait for the slowest rank's compute, averaged over the
    /// timed epochs.
    pub fn of_run(run: &RunDir) -> Result<StepFigures> {
        let no_steps = || {
            Error::Model(ModelError::Corrupt {
                path: run.steps_path(),
                message: "the run took no training step (its training graphs cannot fill one step of all ranks; the \
                      balanced sampler needs that many in one size bin): use more graphs (--max-graphs)"
                    .into(),
            })
        };
        if !run.steps_path().exists() {
            return Err(no_steps());
        }
        Self::of_steps(run.read_steps()?).ok_or_else(no_steps)
    }

    /// The figures of `steps`; `None` without a step.
    pub fn of_steps(steps: Vec<StepRecord>) -> Option<StepFigures> {
        // epoch → (steps, seconds, imbalance sum, all-reduce, wait, graphs per step)
        let mut per: BTreeMap<u64, [f64; 6]> = BTreeMap::new();
        for s in timed_steps(steps) {
            let n = s.compute_seconds.len().max(1) as f64;
            let max = s.compute_seconds.iter().copied().fold(0.0, f64::max);
            let graphs = if s.events.is_empty() { n } else { s.events.iter().map(Vec::len).sum::<usize>() as f64 };
            let e = per.entry(s.epoch).or_default();
            e[0] += 1.0;
            e[1] += s.seconds;
            e[2] += s.load_imbalance;
            e[3] += s.allreduce_seconds.iter().sum::<f64>() / n;
            e[4] += s.compute_seconds.iter().map(|c| max - c).sum::<f64>() / n;
            e[5] = graphs;
        }
        if per.is_empty() {
            return None;
        }
        let k = per.len() as f64;
        let mean = |i: usize| per.values().map(|e| e[i]).sum::<f64>() / k;
        let steps: f64 = per.values().map(|e| e[0]).sum();
        Some(StepFigures {
            timed_epochs: per.len(),
            steps_per_epoch: mean(0),
            graphs_per_step: per.values().map(|e| e[5]).fold(0.0, f64::max),
            train_epoch_seconds: mean(1),
            load_imbalance: per.values().map(|e| e[2]).sum::<f64>() / steps,
            allreduce_seconds: mean(3),
            imbalance_wait_seconds: mean(4),
        })
    }
}

/// A run read back for simulation: its configuration and the measured compute time of each of
/// its training graphs.
#[derive(Clone, Debug)]
pub struct MeasuredRun {
    /// The run's configuration.
    pub cfg: TrainConfig,
    /// The training graphs and their compute seconds per step.
    pub times: GraphTimes,
    /// Graphs whose time was estimated from their size (not seen in `steps.jsonl`).
    pub estimated: usize,
    /// Bytes of the gradient buffer (4 × parameters).
    pub gradient_bytes: f64,
    /// Mean seconds of a step besides compute and all-reduce.
    pub step_overhead_seconds: f64,
    /// Threads of rank 0 (1 if it wrote no report).
    pub threads: usize,
    /// Ranks of the run.
    pub ranks: usize,
}

impl MeasuredRun {
    /// Reads a run directory: its configuration, training graphs (from `graphs_override`, else
    /// the run's graph directory) and their measured times. Graphs its steps never trained on
    /// (a remainder the sampler dropped) are timed from their size by a line through the others.
    pub fn load(run: &RunDir, graphs_override: Option<&Path>) -> Result<MeasuredRun> {
        let cfg = run.read_config()?;
        if cfg.graphs_per_step != 1 {
            return Err(Error::config(
                "graphs_per_step",
                format!(
                    "= {} in {}: the simulation needs a run with one graph per step (1)",
                    cfg.graphs_per_step,
                    run.config_path().display()
                ),
            ));
        }
        let events = run.read_events()?;
        let dir = graphs_override.map_or(events.graphs_dir, Path::to_path_buf);
        let set = GraphSet::open(&dir, cfg.max_graphs).map_err(|e| {
            Error::context(format!("opening the run's graphs {} (pass --graphs if they moved)", dir.display()), e)
        })?;
        let size: BTreeMap<u64, u64> = set.files.iter().zip(&set.edges).map(|((id, _), &e)| (*id, e)).collect();
        let (measured, step_overhead_seconds, ranks) = step_times(run, 1)?;
        let mut times = GraphTimes::default();
        for id in &events.train {
            let edges = *size.get(id).ok_or_else(|| ModelError::Inconsistent {
                path: dir.clone(),
                message: format!("does not hold event {id} of the run"),
            })?;
            times.ids.push(*id);
            times.edges.push(edges);
            times.seconds.push(measured.get(id).map_or(f64::NAN, |(s, k)| s / *k as f64));
        }
        let known: Vec<(f64, f64)> =
            times.edges.iter().zip(&times.seconds).filter(|p| p.1.is_finite()).map(|(&e, &s)| (e as f64, s)).collect();
        if known.is_empty() {
            return Err(Error::Model(ModelError::Corrupt {
                path: run.steps_path(),
                message: "no step on the run's training graphs".into(),
            }));
        }
        let (a, b) = line_fit(&known);
        let mut estimated = 0;
        for (s, &e) in times.seconds.iter_mut().zip(&times.edges) {
            if !s.is_finite() {
                *s = (a + b * e as f64).max(0.0);
                estimated += 1;
            }
        }
        let threads = run.read_rank_report(0).map_or(1, |r| r.threads);
        Ok(MeasuredRun {
            cfg,
            times,
            estimated,
            gradient_bytes: gradient_bytes(run)?,
            step_overhead_seconds,
            threads,
            ranks,
        })
    }
}

/// Bytes of the model's parameters (= of the flat f32 gradient buffer), from the run's last
/// or best weights.
fn gradient_bytes(run: &RunDir) -> Result<f64> {
    let candidates = [run.weights_path(&Weights::Last), run.weights_path(&Weights::Best)];
    let path = candidates.iter().find(|p| p.exists()).ok_or_else(|| Error::NoWeights {
        run: run.root().to_path_buf(),
        last: candidates[0].clone(),
        best: candidates[1].clone(),
    })?;
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let st = safetensors::SafeTensors::deserialize(&bytes)
        .map_err(|e| Error::Model(ModelError::Safetensors { path: path.clone(), source: e }))?;
    Ok(st.tensors().iter().map(|(_, t)| t.data().len() as f64).sum())
}

/// Per event id: the summed compute seconds of its steps and their count.
type PerGraph = BTreeMap<u64, (f64, u32)>;

/// Per-graph mean compute seconds, per-step overhead and the run's ranks from the timed steps
/// of `steps.jsonl`.
fn step_times(run: &RunDir, gps: usize) -> Result<(PerGraph, f64, usize)> {
    let path = run.steps_path();
    let steps = timed_steps(run.read_steps()?);
    let mut per_graph = PerGraph::new();
    let (mut overhead, mut ranks) = (0.0, 0usize);
    for s in &steps {
        let bad = |message: String| Error::Model(ModelError::Corrupt { path: path.clone(), message });
        let at = format!("global step {}", s.global_step);
        if s.events.is_empty() {
            return Err(bad(format!("{at}: no `events` list (written by an older trackgnn: train the run again)")));
        }
        if s.compute_seconds.is_empty() {
            return Err(bad(format!("{at}: no `compute_seconds` list")));
        }
        if s.events.len() != s.compute_seconds.len() || s.events.iter().any(|e| e.len() != gps) {
            return Err(bad(format!("{at}: expected {} rank(s) × {gps} graph(s) per step", s.compute_seconds.len())));
        }
        for (ev, &c) in s.events.iter().zip(&s.compute_seconds) {
            let e = per_graph.entry(ev[0]).or_default();
            e.0 += c;
            e.1 += 1;
        }
        overhead += (s.seconds - s.compute_seconds[0] - s.allreduce_seconds.first().copied().unwrap_or(0.0)).max(0.0);
        ranks = ranks.max(s.compute_seconds.len());
    }
    if steps.is_empty() {
        return Err(Error::Model(ModelError::Corrupt { path, message: "no steps".into() }));
    }
    Ok((per_graph, overhead / steps.len() as f64, ranks))
}

/// Least-squares line of `y` against `x`, or the mean of `y` if `x` does not vary.
fn line_fit(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len().max(1) as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx > 0.0 { (my - sxy / sxx * mx, sxy / sxx) } else { (my, 0.0) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(epoch: u64, seconds: f64, c: [f64; 2], r: [f64; 2]) -> StepRecord {
        StepRecord {
            allreduce_seconds: r.to_vec(),
            aux_loss: None,
            compute_seconds: c.to_vec(),
            engine_bytes: 0,
            peak_rss_bytes: vec![2 << 30, 2 << 30],
            halo_nodes: Vec::new(),
            local_edges: Vec::new(),
            epoch,
            events: vec![vec![1], vec![2]],
            global_step: 0,
            grad_norm: 0.0,
            load_imbalance: c[0].max(c[1]) / ((c[0] + c[1]) / 2.0),
            loss_spike: false,
            loss: 0.0,
            lr: 0.0,
            seconds,
            skipped: false,
            step: 0,
        }
    }

    #[test]
    fn step_figures_skip_the_first_epoch_and_average_the_rest() {
        let steps = vec![
            step(0, 9.0, [1.0, 1.0], [0.0, 0.0]),
            step(1, 1.0, [0.9, 0.6], [0.01, 0.31]),
            step(1, 1.0, [0.6, 0.6], [0.01, 0.01]),
            step(2, 2.0, [0.9, 0.6], [0.01, 0.31]),
        ];
        let s = StepFigures::of_steps(steps.clone()).unwrap();
        assert_eq!((s.timed_epochs, s.steps_per_epoch, s.graphs_per_step), (2, 1.5, 2.0));
        assert!((s.train_epoch_seconds - 2.0).abs() < 1e-12, "{s:?}");
        // Waits: 0.15 per imbalanced step (mean over ranks of max − own), two in epoch 1 and 2.
        assert!((s.imbalance_wait_seconds - 0.15).abs() < 1e-12, "{s:?}");
        assert!((s.load_imbalance - (1.2 + 1.0 + 1.2) / 3.0).abs() < 1e-12, "{s:?}");
        assert!(s.load_imbalance >= 1.0);
        // One epoch alone is timed.
        assert_eq!(StepFigures::of_steps(steps[..1].to_vec()).unwrap().train_epoch_seconds, 9.0);
        assert_eq!(StepFigures::of_steps(Vec::new()), None);
    }

    #[test]
    fn both_readers_time_the_same_epochs() {
        let epochs = |v: &[u64]| timed_steps(v.iter().map(|&e| step(e, 1.0, [1.0, 1.0], [0.0, 0.0])).collect());
        let kept = |v: &[u64]| epochs(v).iter().map(|s| s.epoch).collect::<Vec<_>>();
        assert_eq!(kept(&[0, 0, 1, 2]), [1, 2]);
        assert_eq!(kept(&[3, 3]), [3, 3], "one epoch: all of it");
        assert_eq!(kept(&[2, 3, 3]), [3, 3], "a resumed run starts later");
        assert!(kept(&[]).is_empty());
    }

    #[test]
    fn a_run_without_steps_says_to_use_more_graphs() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path());
        let e = StepFigures::of_run(&run).unwrap_err().to_string();
        assert!(e.contains("steps.jsonl") && e.contains("use more graphs"), "{e}");
        std::fs::write(run.steps_path(), "").unwrap();
        assert!(StepFigures::of_run(&run).unwrap_err().to_string().contains("no training step"));
    }

    #[test]
    fn unmeasured_graphs_get_a_line_through_the_measured_ones() {
        assert_eq!(line_fit(&[(1.0, 3.0), (3.0, 7.0)]), (1.0, 2.0));
        assert_eq!(line_fit(&[(2.0, 3.0), (2.0, 5.0)]), (4.0, 0.0));
    }
}
