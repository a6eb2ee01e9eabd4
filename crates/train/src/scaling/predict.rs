//! Epoch times for any number of ranks, predicted from one measured run's per-graph step times
//! and the ring all-reduce model (`trackgnn scaling --simulate`).
//!
//! # The model
//! Each graph g has a measured compute time c_g (forward + backward of one step, mean over its
//! occurrences in the run's `steps.jsonl`). The step groups are drawn exactly as the trainer
//! draws them ([`epoch_groups`], same seed, sampler and bins), and each step costs
//!
//! `t_step = s · max_r Σ_{g ∈ rank r} c_g + T_ar(N, B) + o`
//!
//! with `T_ar` the ring all-reduce of the gradient buffer (B = 4 bytes × parameters,
//! [`AllreduceCost`]), `o` the rest of a step measured in the run (optimiser, clipping, logging)
//! and `s = max(1, N·T / cores)` the slow-down of oversubscribed ranks (only when the machine's
//! cores are given, to check predictions against runs on it). An epoch is the sum of its steps
//! (training only, no validation), averaged over several epochs' draws. The load imbalance is
//! the mean over steps of max_r / mean_r of the ranks' compute, as the trainer logs it.
//!
//! Strong scaling keeps the data set (the run's training graphs); weak scaling gives every
//! rank the run's data set, i.e. N × the graphs, the measured ones repeated, so the size
//! distribution stays the same. Speed-up: strong t₁ / t_N, weak the throughput ratio
//! (graphs/s)_N / (graphs/s)₁; efficiency = speed-up / N.
//!
//! What it leaves out: memory-bandwidth contention between ranks on one node, overlap of
//! communication with the backward pass (the trainer does not overlap), stragglers from other
//! jobs, and all-reduce algorithms other than the ring (trees for small buffers).

use std::path::PathBuf;

use serde::Serialize;

use super::Regime;
use super::allreduce::AllreduceCost;
use crate::config::TrainConfig;
use crate::data::{GraphSet, epoch_groups};

/// Default latency α of the simulated interconnect, seconds (InfiniBand HDR-like).
pub const DEFAULT_LATENCY_SECONDS: f64 = 2e-6;
/// Default bandwidth β of the simulated interconnect, bytes/s (InfiniBand HDR-like: 200 Gb/s
/// links, about 20 GB/s achieved).
pub const DEFAULT_BANDWIDTH_BYTES_PER_SECOND: f64 = 20e9;

/// The measured training graphs of a run.
#[derive(Clone, Debug, Default)]
pub struct GraphTimes {
    /// Event id of each graph.
    pub ids: Vec<u64>,
    /// Edges of each graph (the balanced sampler bins by them).
    pub edges: Vec<u64>,
    /// Compute seconds of one step on each graph, one rank.
    pub seconds: Vec<f64>,
}

/// Everything besides the graphs that a prediction needs.
#[derive(Clone, Copy, Debug)]
pub struct SimSetup {
    /// The interconnect.
    pub cost: AllreduceCost,
    /// Bytes of the gradient buffer.
    pub gradient_bytes: f64,
    /// Seconds of a step besides compute and all-reduce.
    pub step_overhead_seconds: f64,
    /// `(cores, threads per rank)` of a machine the ranks share: compute slows by
    /// max(1, N·T / cores). `None`: every rank has its own cores.
    pub oversubscription: Option<(usize, usize)>,
    /// Epochs whose draws are averaged.
    pub epochs: u64,
}

/// The predicted training epoch at one number of ranks.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Prediction {
    /// Ranks.
    pub ranks: usize,
    /// Graphs in the training set.
    pub graphs: usize,
    /// Optimiser steps per epoch.
    pub steps_per_epoch: f64,
    /// Graphs trained on per epoch (all ranks).
    pub graphs_per_epoch: f64,
    /// Training seconds per epoch.
    pub epoch_seconds: f64,
    /// Seconds per epoch the slowest rank of each step computes.
    pub compute_seconds: f64,
    /// Seconds per epoch in the all-reduce (its modelled cost, without waiting).
    pub allreduce_seconds: f64,
    /// Mean over steps of the slowest rank's compute / the mean rank's compute.
    pub load_imbalance: f64,
    /// The compute slow-down factor of oversubscription.
    pub contention: f64,
    /// Training throughput, graphs per second.
    pub graphs_per_second: f64,
}

/// Predicts a training epoch of `ranks` ranks on `graphs` graphs (the measured ones repeated
/// cyclically); `None` if the graphs cannot fill one step (with the balanced sampler: one
/// step from one size bin).
pub fn predict(cfg: &TrainConfig, times: &GraphTimes, ranks: usize, graphs: usize, s: &SimSetup) -> Option<Prediction> {
    let n = times.seconds.len();
    let gps = cfg.graphs_per_step;
    if n == 0 || ranks == 0 || graphs < ranks * gps || s.epochs == 0 {
        return None;
    }
    let set = GraphSet {
        files: (0..graphs).map(|i| (i as u64, PathBuf::new())).collect(),
        edges: (0..graphs).map(|i| times.edges[i % n]).collect(),
        nodes: vec![0; graphs],
    };
    let train: Vec<usize> = (0..graphs).collect();
    let contention = s
        .oversubscription
        .map_or(1.0, |(cores, threads)| ((ranks * threads.max(1)) as f64 / cores.max(1) as f64).max(1.0));
    let (mut steps, mut compute, mut imbalance) = (0usize, 0.0, 0.0);
    for epoch in 0..s.epochs {
        for group in epoch_groups(cfg, &set, &train, ranks, epoch) {
            let per_rank: Vec<f64> =
                group.chunks_exact(gps).map(|g| g.iter().map(|&i| times.seconds[i % n]).sum::<f64>()).collect();
            let max = per_rank.iter().copied().fold(0.0, f64::max);
            let mean = per_rank.iter().sum::<f64>() / ranks as f64;
            compute += contention * max;
            imbalance += if mean > 0.0 { max / mean } else { 1.0 };
            steps += 1;
        }
    }
    if steps == 0 {
        return None;
    }
    let e = s.epochs as f64;
    let steps_per_epoch = steps as f64 / e;
    let ar = s.cost.seconds(ranks, s.gradient_bytes);
    let compute_seconds = compute / e;
    let epoch_seconds = compute_seconds + (ar + s.step_overhead_seconds) * steps_per_epoch;
    let graphs_per_epoch = steps_per_epoch * (ranks * gps) as f64;
    Some(Prediction {
        ranks,
        graphs,
        steps_per_epoch,
        graphs_per_epoch,
        epoch_seconds,
        compute_seconds,
        allreduce_seconds: ar * steps_per_epoch,
        load_imbalance: imbalance / steps.max(1) as f64,
        contention,
        graphs_per_second: graphs_per_epoch / epoch_seconds,
    })
}

/// Speed-up of `p` over the one-rank `base`: t₁ / t_N (strong) or the throughput ratio (weak).
/// Strong-scaling times are per graph trained: a sampler drops the remainder of the data set
/// that cannot fill a step of N ranks, so the epochs of N ranks may cover fewer graphs.
pub fn speedup(regime: Regime, base: &Prediction, p: &Prediction) -> f64 {
    match regime {
        Regime::Strong => (base.epoch_seconds / base.graphs_per_epoch) / (p.epoch_seconds / p.graphs_per_epoch),
        Regime::Weak => p.graphs_per_second / base.graphs_per_second,
    }
}

/// Graphs of the training set at `ranks` ranks: the strong set, or `ranks` × the run's.
pub fn graphs_for(regime: Regime, ranks: usize, strong: usize, run_graphs: usize) -> usize {
    match regime {
        Regime::Strong => strong,
        Regime::Weak => ranks * run_graphs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Sampler;

    fn times(seconds: Vec<f64>) -> GraphTimes {
        let n = seconds.len();
        GraphTimes { ids: (0..n as u64).collect(), edges: (0..n as u64).map(|i| 1000 + 37 * i).collect(), seconds }
    }

    fn setup(cost: AllreduceCost) -> SimSetup {
        SimSetup { cost, gradient_bytes: 4e6, step_overhead_seconds: 0.0, oversubscription: None, epochs: 4 }
    }

    fn cfg(sampler: Sampler) -> TrainConfig {
        TrainConfig { sampler, sampler_bins: 4, ..TrainConfig::default() }
    }

    #[test]
    fn identical_graphs_are_balanced_under_both_samplers() {
        let t = times(vec![0.25; 64]);
        for s in [Sampler::Random, Sampler::Balanced] {
            for n in [1, 2, 4, 8] {
                let p = predict(&cfg(s), &t, n, 64, &setup(AllreduceCost::zero())).unwrap();
                assert!((p.load_imbalance - 1.0).abs() < 1e-12, "{s:?} {n}: {}", p.load_imbalance);
                assert_eq!(p.steps_per_epoch, (64 / n) as f64);
                assert!((p.epoch_seconds - 0.25 * (64 / n) as f64).abs() < 1e-9);
            }
        }
    }

    #[test]
    fn one_slow_graph_makes_an_imbalance() {
        let mut s = vec![0.1; 32];
        s[5] = 1.0;
        let p = predict(&cfg(Sampler::Random), &times(s), 4, 32, &setup(AllreduceCost::zero())).unwrap();
        // One step of eight holds the slow graph: max/mean there = 1.0 / 0.325.
        let expect = (7.0 + 1.0 / 0.325) / 8.0;
        assert!((p.load_imbalance - expect).abs() < 1e-9, "{}", p.load_imbalance);
        assert!(p.load_imbalance > 1.0);
    }

    #[test]
    fn balanced_sampling_beats_random_on_varied_sizes() {
        // Compute time proportional to size, sizes spread over a factor of 8.
        let t = GraphTimes {
            ids: (0..64).collect(),
            edges: (0..64).map(|i| 1000 + 100 * ((i * 37) % 64)).collect(),
            seconds: (0..64).map(|i| (1000 + 100 * ((i * 37) % 64)) as f64 * 1e-4).collect(),
        };
        let st = setup(AllreduceCost::zero());
        let r = predict(&cfg(Sampler::Random), &t, 8, 64, &st).unwrap();
        let b = predict(&cfg(Sampler::Balanced), &t, 8, 64, &st).unwrap();
        assert!(b.load_imbalance < r.load_imbalance && b.epoch_seconds < r.epoch_seconds, "{b:?} vs {r:?}");
        // Within one of 4 bins sizes still vary (the smallest spans 1000–2500 edges), so the
        // steps of 8 ranks keep some imbalance; random sampling's is about 1.5.
        assert!(b.load_imbalance < 1.25 && r.load_imbalance > 1.35, "{} vs {}", b.load_imbalance, r.load_imbalance);
    }

    #[test]
    fn weak_throughput_without_communication_is_n_times_one_rank() {
        let t = times(vec![0.2; 16]);
        for s in [Sampler::Random, Sampler::Balanced] {
            let c = cfg(s);
            let st = setup(AllreduceCost::zero());
            let one = predict(&c, &t, 1, 16, &st).unwrap();
            for n in [2, 4, 16, 64] {
                let p = predict(&c, &t, n, graphs_for(Regime::Weak, n, 16, 16), &st).unwrap();
                assert!((speedup(Regime::Weak, &one, &p) - n as f64).abs() < 1e-9, "{s:?} {n}");
                assert!((p.epoch_seconds - one.epoch_seconds).abs() < 1e-9, "same work per rank");
            }
        }
    }

    #[test]
    fn communication_and_oversubscription_cost_what_the_model_says() {
        let t = times(vec![0.5; 8]);
        let cost = AllreduceCost::new(10e-6, 1e9);
        let mut st = setup(cost);
        st.step_overhead_seconds = 0.01;
        let p = predict(&cfg(Sampler::Random), &t, 2, 8, &st).unwrap();
        let ar = 2.0 * 10e-6 + 4e6 / 1e9;
        assert!((p.epoch_seconds - 4.0 * (0.5 + ar + 0.01)).abs() < 1e-9, "{p:?}");
        assert!((p.allreduce_seconds - 4.0 * ar).abs() < 1e-12);
        // Four single-thread ranks on two cores: compute twice as slow; two ranks not at all.
        st.oversubscription = Some((2, 1));
        let p4 = predict(&cfg(Sampler::Random), &t, 4, 8, &st).unwrap();
        assert_eq!(p4.contention, 2.0);
        assert!((p4.compute_seconds - 2.0 * 1.0).abs() < 1e-12, "2 steps × 0.5 s × 2");
        assert_eq!(predict(&cfg(Sampler::Random), &t, 2, 8, &st).unwrap().contention, 1.0);
        assert_eq!(predict(&cfg(Sampler::Random), &t, 16, 8, &st), None, "8 graphs cannot fill 16 ranks");
    }

    /// A skewed (log-normal-like) size distribution: a few graphs much larger than most.
    fn skewed(n: usize, seed: u64) -> GraphTimes {
        let mut rng = trackgnn_trackml::rng::Rng::new(seed);
        let edges: Vec<u64> = (0..n).map(|_| (2000.0 * (0.8 * rng.normal()).exp()) as u64 + 100).collect();
        GraphTimes { ids: (0..n as u64).collect(), seconds: edges.iter().map(|&e| e as f64 * 5e-5).collect(), edges }
    }

    #[test]
    fn one_rank_costs_the_measured_sum_and_imbalance_is_at_least_one() {
        let t = skewed(50, 3);
        let sum: f64 = t.seconds.iter().sum();
        let mut st = setup(AllreduceCost::new(5e-6, 1e9));
        st.step_overhead_seconds = 0.002;
        for s in [Sampler::Random, Sampler::Balanced] {
            let one = predict(&cfg(s), &t, 1, 50, &st).unwrap();
            assert_eq!(one.steps_per_epoch, 50.0, "{s:?}: one rank trains every graph");
            assert!((one.compute_seconds - sum).abs() < 1e-9 * sum, "{s:?}: {} vs {sum}", one.compute_seconds);
            assert!((one.epoch_seconds - (sum + 50.0 * 0.002)).abs() < 1e-9, "no all-reduce at one rank");
            assert_eq!((one.load_imbalance, one.allreduce_seconds), (1.0, 0.0));
            for n in [2, 3, 4, 8] {
                let p = predict(&cfg(s), &t, n, 50, &st).unwrap();
                assert!(p.load_imbalance >= 1.0, "{s:?} {n}: {}", p.load_imbalance);
                assert!(p.allreduce_seconds > 0.0);
            }
        }
    }

    #[test]
    fn balanced_imbalance_is_at_most_random_on_a_skewed_distribution() {
        for seed in [1, 2, 3] {
            let t = skewed(256, seed);
            let st = setup(AllreduceCost::zero());
            for n in [2, 4, 8, 16] {
                let r = predict(&cfg(Sampler::Random), &t, n, 256, &st).unwrap();
                let b = predict(&cfg(Sampler::Balanced), &t, n, 256, &st).unwrap();
                assert!(b.load_imbalance <= r.load_imbalance, "seed {seed}, {n} ranks: {b:?} vs {r:?}");
            }
        }
    }

    #[test]
    fn strong_speedup_counts_graphs_trained() {
        let t = times(vec![0.1; 10]);
        let st = setup(AllreduceCost::zero());
        let one = predict(&cfg(Sampler::Random), &t, 1, 10, &st).unwrap();
        // Four ranks fill two steps of 10 graphs: 8 trained, the remainder dropped.
        let four = predict(&cfg(Sampler::Random), &t, 4, 10, &st).unwrap();
        assert_eq!(four.graphs_per_epoch, 8.0);
        assert!((speedup(Regime::Strong, &one, &four) - 4.0).abs() < 1e-9);
    }
}
