//! Domain-parallel inference: the ranks of a domain group each score their partition of an
//! event's graph (the φ sectors training splits it into, [`phi_owners`]), exchanging the halo's
//! node states at every message-passing iteration, and the logits are gathered on every rank.
//! Each edge's logit comes from the partition that counts it, so the scores are those of the
//! domain-parallel step, which equal one rank's within the tolerances of the halo tests.

use std::sync::{Arc, Mutex};

use trackgnn_engine::GnnExecutor;
use trackgnn_engine::halo::{HaloExchange, Partition};
use trackgnn_graph::Graph;
use trackgnn_graph::partition::phi_owners;
use trackgnn_model::{LogitsHook, graph_input};

use super::Comm;
use crate::error::{Error, Result};

/// The logits of a graph split across the ranks of one domain group, for
/// `Reconstructor::with_logits_hook`: every rank of the job is one partition.
pub struct DomainScoring {
    comm: Mutex<Box<dyn Comm>>,
    parts: usize,
    rank: usize,
}

impl DomainScoring {
    /// Scores graphs split across the `parts` ranks of `comm`, which must be all of them:
    /// reconstruction splits each event across the whole job.
    pub fn new(mut comm: Box<dyn Comm>, parts: usize) -> Result<DomainScoring> {
        if comm.size() != parts {
            return Err(Error::Dist(format!(
                "reconstruction splits each event across every rank: --domain-ranks {parts} with {} ranks",
                comm.size()
            )));
        }
        comm.set_domain_ranks(parts)?;
        let rank = comm.rank();
        Ok(DomainScoring { comm: Mutex::new(comm), parts, rank })
    }

    /// This rank's partition.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of partitions (ranks).
    pub fn parts(&self) -> usize {
        self.parts
    }

    /// Ends every rank of the job with this rank's `message`: after one rank's error the others
    /// would wait for its halo. (Without MPI only one rank runs, and it does nothing.)
    pub fn abort(&self, message: &str) {
        #[cfg(feature = "mpi")]
        super::abort_job(&format!("rank {}: {message}", self.rank), 1);
        #[cfg(not(feature = "mpi"))]
        let _ = message;
    }

    fn gather(&self, executor: &dyn GnnExecutor, graph: &Graph) -> Result<Vec<f32>> {
        let partitions = split_graph(graph, self.parts)?;
        let p = &partitions[self.rank];
        let mut comm = self.comm.lock().map_err(|_| Error::Dist("a rank's communicator was poisoned".into()))?;
        let halo = comm.domain_halo(&p.plan)?;
        // An edge's logit travels from the partition that counts it; the others add zero, so
        // the sum is that logit exactly (f32 → f64 → f32 round-trips).
        let mut all = vec![0.0f64; graph.num_edges()];
        for (e, logit) in partition_logits(executor, graph, p, halo)? {
            all[e as usize] = f64::from(logit);
        }
        comm.allreduce_sum_f64(&mut all)?;
        Ok(all.into_iter().map(|x| x as f32).collect())
    }
}

impl LogitsHook for DomainScoring {
    fn logits(&self, executor: &dyn GnnExecutor, graph: &Graph) -> trackgnn_model::Result<Vec<f32>> {
        self.gather(executor, graph).map_err(|e| trackgnn_model::Error::Context {
            context: format!("scoring event {} across {} domain ranks", graph.event_id, self.parts),
            source: Box::new(e),
        })
    }
}

/// `graph` split into `parts` φ sectors of nearly equal edge counts ([`phi_owners`]), as
/// domain-parallel training splits it.
pub fn split_graph(graph: &Graph, parts: usize) -> Result<Vec<Partition>> {
    let owner = phi_owners(graph, parts);
    Partition::split(graph.num_nodes(), &graph.src, &graph.dst, &owner, parts)
        .map_err(|e| Error::Dist(format!("event {}: cannot split its graph: {e}", graph.event_id)))
}

/// The logits of the edges partition `p` of `graph` counts, by global edge index: the
/// partition's local graph run with `halo` exchanging its boundary with the other partitions'.
pub fn partition_logits(
    executor: &dyn GnnExecutor,
    graph: &Graph,
    p: &Partition,
    halo: Arc<dyn HaloExchange<f32>>,
) -> Result<Vec<(u32, f32)>> {
    let local = p.local_input(&graph_input(graph)).with_halo(halo);
    let logits = executor.infer(&local).map_err(trackgnn_model::Error::from)?;
    Ok(p.edges.iter().zip(&p.edge_counted).zip(logits).filter(|((_, c), _)| **c).map(|((&e, _), l)| (e, l)).collect())
}
