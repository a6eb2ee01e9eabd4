//! One graph's training step split across P ranks (domain parallelism, `train --domain-ranks`),
//! predicted from its one-rank step (`trackgnn scaling --simulate --domain-graph FILE`).
//!
//! # The model
//! The graph is split as the trainer splits it ([`phi_owners`], [`Partition::split`]) at every
//! rank count, so the figures of the split are exact: each rank's held edges (its owned nodes'
//! edges, a cut edge on both ranks), its halo and the peers it exchanges with. A step then costs
//!
//! `t_P = c₁ · (T₁ / T) · max_p E_p / E + X · max_p (n_p·α + R_p·H·4 / β) + T_ar(P, B) + o`
//!
//! with c₁ the measured compute of the graph's step on one rank of T₁ threads, T the threads per
//! rank (compute taken as linear in the threads: the engine's thread scaling is below that, so
//! the prediction errs slow), E_p the edges rank p holds, X the halo exchanges of a step (node
//! encoder and every iteration forward, as many gradient returns backward, and the recomputed
//! iterations with checkpointing), n_p the peers of rank p and R_p the rows it sends or receives
//! (the larger), α and β the interconnect's latency and bandwidth, `T_ar` the ring all-reduce
//! of the gradient (B bytes) and o the measured step overhead. What it leaves out: overlap of
//! exchange and compute (the trainer does not overlap), the node network's work on halo rows,
//! and the memory bandwidth ranks on one node share.

use std::path::{Path, PathBuf};

use serde::Serialize;
use trackgnn_engine::halo::Partition;
use trackgnn_graph::Graph;
use trackgnn_graph::partition::phi_owners;

use super::allreduce::AllreduceCost;
use crate::config::TrainConfig;
use crate::error::{Error, Result};
use crate::run_dir::RunDir;

/// One rank count of a [`DomainPrediction`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DomainRow {
    /// Ranks the graph is split across.
    pub ranks: usize,
    /// The busiest rank's held edges / the graph's edges.
    pub max_edge_fraction: f64,
    /// Edges held by two ranks / the graph's edges.
    pub cut_fraction: f64,
    /// Halo nodes of all ranks / the graph's nodes.
    pub halo_fraction: f64,
    /// Bytes the busiest rank sends or receives in one exchange (f32 rows of H).
    pub max_exchange_bytes: f64,
    /// Most peers one rank exchanges with.
    pub max_peers: usize,
    /// Predicted compute seconds of the busiest rank.
    pub compute_seconds: f64,
    /// Predicted seconds of a step's halo exchanges.
    pub exchange_seconds: f64,
    /// Predicted seconds of the gradient all-reduce.
    pub allreduce_seconds: f64,
    /// Predicted seconds of the step.
    pub step_seconds: f64,
    /// The one-rank step's seconds / this one's.
    pub speedup: f64,
}

/// A measured domain-parallel step against its prediction.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DomainCheck {
    /// The domain-parallel run.
    pub run: PathBuf,
    /// Its ranks.
    pub ranks: usize,
    /// Its measured compute seconds of the graph's step (the slowest rank; halo exchanges
    /// included), mean over the steps on the graph.
    pub measured_seconds: f64,
    /// The predicted compute and exchange seconds at its ranks and threads.
    pub predicted_seconds: f64,
    /// predicted / measured − 1.
    pub error: f64,
}

/// The predicted step of one graph split across each rank count.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DomainPrediction {
    /// The graph file.
    pub graph: PathBuf,
    /// Its event id.
    pub event_id: u64,
    /// Its nodes.
    pub nodes: usize,
    /// Its edges.
    pub edges: usize,
    /// Measured compute seconds of its step on one rank.
    pub one_rank_seconds: f64,
    /// Threads of that rank.
    pub one_rank_threads: usize,
    /// Threads per rank of the predictions.
    pub threads_per_rank: usize,
    /// Halo exchanges per step.
    pub exchanges_per_step: usize,
    /// One row per rank count.
    pub rows: Vec<DomainRow>,
    /// Against a measured domain-parallel run, if given.
    pub check: Option<DomainCheck>,
}

/// What a domain prediction takes besides the graph.
#[derive(Clone, Copy, Debug)]
pub struct DomainSetup<'a> {
    /// The measured run's configuration (model width, iterations, checkpointing).
    pub cfg: &'a TrainConfig,
    /// Measured compute seconds of the graph's step on one rank, and that rank's threads.
    pub one_rank: (f64, usize),
    /// Threads per rank of the predictions.
    pub threads_per_rank: usize,
    /// The interconnect.
    pub cost: AllreduceCost,
    /// Bytes of the gradient.
    pub gradient_bytes: f64,
    /// Seconds of a step besides compute and communication.
    pub step_overhead_seconds: f64,
}

/// Halo exchanges per step: after the node encoder and each iteration forward, as many
/// gradient returns backward, and the recomputed iterations' exchanges with checkpointing.
pub fn exchanges_per_step(cfg: &TrainConfig) -> usize {
    let l = cfg.model.iterations;
    let recomputed = if cfg.checkpointing.is_on() { l } else { 0 };
    2 * (1 + l) + recomputed
}

/// The figures of `graph` split across `ranks` ranks and its predicted step.
fn row(graph: &Graph, ranks: usize, s: &DomainSetup<'_>) -> Result<DomainRow> {
    let (n, e) = (graph.num_nodes(), graph.num_edges().max(1));
    let owner = phi_owners(graph, ranks);
    let parts = Partition::split(n, &graph.src, &graph.dst, &owner, ranks)
        .map_err(|err| Error::config("domain_ranks", format!("{ranks} ranks: {err}")))?;
    let held: Vec<usize> = parts.iter().map(|p| p.edges.len()).collect();
    let row_bytes = (s.cfg.model.hidden * 4) as f64;
    let (alpha, beta) = (s.cost.latency_seconds, s.cost.bandwidth_bytes_per_second);
    let per_rank: Vec<(usize, f64)> = parts
        .iter()
        .map(|p| {
            let peers = (0..ranks).filter(|&q| !p.plan.send[q].is_empty() || !p.plan.recv[q].is_empty()).count();
            (peers, p.plan.sent_rows().max(p.plan.halo_rows()) as f64 * row_bytes)
        })
        .collect();
    let max_peers = per_rank.iter().map(|r| r.0).max().unwrap_or(0);
    let max_bytes = per_rank.iter().map(|r| r.1).fold(0.0, f64::max);
    let exchange = per_rank.iter().map(|&(k, b)| k as f64 * alpha + b / beta).fold(0.0, f64::max);
    let max_edge_fraction = *held.iter().max().unwrap_or(&0) as f64 / e as f64;
    let (c1, t1) = s.one_rank;
    let compute = c1 * t1 as f64 / s.threads_per_rank.max(1) as f64 * max_edge_fraction;
    let exchange_seconds = if ranks > 1 { exchanges_per_step(s.cfg) as f64 * exchange } else { 0.0 };
    let allreduce_seconds = s.cost.seconds(ranks, s.gradient_bytes);
    let step_seconds = compute + exchange_seconds + allreduce_seconds + s.step_overhead_seconds;
    Ok(DomainRow {
        ranks,
        max_edge_fraction,
        cut_fraction: (held.iter().sum::<usize>() - graph.num_edges()) as f64 / e as f64,
        halo_fraction: parts.iter().map(Partition::halo_nodes).sum::<usize>() as f64 / n.max(1) as f64,
        max_exchange_bytes: max_bytes,
        max_peers,
        compute_seconds: compute,
        exchange_seconds,
        allreduce_seconds,
        step_seconds,
        speedup: (c1 + s.step_overhead_seconds) / step_seconds,
    })
}

/// Predicts the step of `graph` (read from `path`) at each of `ranks`, and checks the
/// prediction against the domain-parallel run `check` if given.
pub fn predict_domain(
    path: &Path,
    graph: &Graph,
    ranks: &[usize],
    s: &DomainSetup<'_>,
    check: Option<&Path>,
) -> Result<DomainPrediction> {
    let rows = ranks.iter().map(|&p| row(graph, p, s)).collect::<Result<Vec<_>>>()?;
    let check = match check {
        Some(dir) => Some(check_against(dir, graph, s)?),
        None => None,
    };
    Ok(DomainPrediction {
        graph: path.to_path_buf(),
        event_id: graph.event_id,
        nodes: graph.num_nodes(),
        edges: graph.num_edges(),
        one_rank_seconds: s.one_rank.0,
        one_rank_threads: s.one_rank.1,
        threads_per_rank: s.threads_per_rank,
        exchanges_per_step: exchanges_per_step(s.cfg),
        rows,
        check,
    })
}

/// The measured compute of `graph`'s steps in the domain-parallel run `dir` against the
/// prediction at its ranks (its rank 0's threads per rank).
fn check_against(dir: &Path, graph: &Graph, s: &DomainSetup<'_>) -> Result<DomainCheck> {
    let run = RunDir::open(dir)?;
    let steps: Vec<_> =
        run.read_steps()?.into_iter().filter(|st| st.events.iter().flatten().any(|&e| e == graph.event_id)).collect();
    let Some(first) = steps.first() else {
        return Err(Error::flag(
            "--domain-check",
            format!("{} has no step on event {}", dir.display(), graph.event_id),
        ));
    };
    let ranks = first.compute_seconds.len();
    let measured =
        steps.iter().map(|st| st.compute_seconds.iter().copied().fold(0.0, f64::max)).sum::<f64>() / steps.len() as f64;
    let threads = run.read_rank_report(0).map_or(s.threads_per_rank, |r| r.threads);
    let r = row(graph, ranks, &DomainSetup { threads_per_rank: threads, ..*s })?;
    let predicted = r.compute_seconds + r.exchange_seconds;
    Ok(DomainCheck {
        run: dir.to_path_buf(),
        ranks,
        measured_seconds: measured,
        predicted_seconds: predicted,
        error: predicted / measured - 1.0,
    })
}

impl std::fmt::Display for DomainPrediction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "\none graph across ranks (domain parallelism): {} (event {}, {} nodes, {} edges), one rank × {} threads {:.2} s; \
             {} thread(s) per rank, {} halo exchanges per step",
            self.graph.display(),
            self.event_id,
            self.nodes,
            self.edges,
            self.one_rank_threads,
            self.one_rank_seconds,
            self.threads_per_rank,
            self.exchanges_per_step
        )?;
        writeln!(
            f,
            "{:>6} {:>9} {:>8} {:>8} {:>10} {:>6} {:>10} {:>10} {:>10} {:>9} {:>8}",
            "ranks",
            "max edges",
            "cut",
            "halo",
            "MB/exch",
            "peers",
            "compute s",
            "exchange s",
            "allreduce",
            "step s",
            "speedup"
        )?;
        for r in &self.rows {
            writeln!(
                f,
                "{:>6} {:>9.4} {:>8.4} {:>8.4} {:>10.3} {:>6} {:>10.3} {:>10.4} {:>10.4} {:>9.3} {:>8.2}",
                r.ranks,
                r.max_edge_fraction,
                r.cut_fraction,
                r.halo_fraction,
                r.max_exchange_bytes / 1e6,
                r.max_peers,
                r.compute_seconds,
                r.exchange_seconds,
                r.allreduce_seconds,
                r.step_seconds,
                r.speedup
            )?;
        }
        if let Some(c) = &self.check {
            writeln!(
                f,
                "check against {} ({} ranks): measured {:.2} s, predicted {:.2} s, error {:+.1}%",
                c.run.display(),
                c.ranks,
                c.measured_seconds,
                c.predicted_seconds,
                100.0 * c.error
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(n: usize) -> Graph {
        Graph {
            phi: (0..n).map(|i| -3.1 + 6.2 * i as f32 / n as f32).collect(),
            r: vec![100.0; n],
            z: vec![0.0; n],
            src: (0..n as u32 - 1).collect(),
            dst: (1..n as u32).collect(),
            hit_id: (0..n as u64).collect(),
            ..Graph::default()
        }
    }

    #[test]
    fn a_split_halves_the_compute_and_pays_its_exchanges() {
        let cfg = TrainConfig::default();
        let s = DomainSetup {
            cfg: &cfg,
            one_rank: (10.0, 1),
            threads_per_rank: 1,
            cost: AllreduceCost::new(1e-3, 1e6),
            gradient_bytes: 0.0,
            step_overhead_seconds: 0.0,
        };
        let p = predict_domain(Path::new("g"), &ring(1001), &[1, 2, 4], &s, None).unwrap();
        let (one, two, four) = (&p.rows[0], &p.rows[1], &p.rows[2]);
        assert_eq!((one.compute_seconds, one.exchange_seconds, one.speedup), (10.0, 0.0, 1.0));
        // Two φ halves of a chain: 501 of 1000 edges (the cut one on both), one peer each, one
        // row of H f32 each way.
        assert!((two.max_edge_fraction - 0.501).abs() < 1e-12, "{two:?}");
        assert_eq!(two.max_peers, 1);
        let row = (cfg.model.hidden * 4) as f64;
        assert_eq!(two.max_exchange_bytes, row);
        let per_exchange = 1e-3 + row / 1e6;
        assert!((two.exchange_seconds - exchanges_per_step(&cfg) as f64 * per_exchange).abs() < 1e-12);
        assert!((two.compute_seconds - 5.01).abs() < 1e-9);
        assert!(four.compute_seconds < two.compute_seconds && four.max_peers == 2);
        assert!((p.rows[1].cut_fraction - 0.001).abs() < 1e-12);
    }
}
