//! Communication between data-parallel workers (ranks).
//!
//! [`Comm`] is what training needs: rank and size, an in-place mean all-reduce of the flat
//! gradient buffer, broadcast, barrier and a gather of small statistics. [`SingleProcess`] is the
//! default build's implementation (size 1, every operation a no-op); the MPI implementation
//! lives behind the `mpi` cargo feature. [`requeue_slurm_job`] restarts a Slurm job that
//! checkpointed on a signal.

use std::sync::Arc;

use trackgnn_engine::halo::{HaloExchange, HaloPlan};

#[cfg(not(feature = "mpi"))]
mod disabled;
mod domain_scoring;
mod launch;
#[cfg(feature = "mpi")]
mod mpi;
#[cfg(feature = "mpi")]
mod mpi_halo;
mod requeue;
mod single;

#[cfg(feature = "mpi")]
pub use self::mpi::{MAX_CHUNK, MpiComm, abort_job};
#[cfg(not(feature = "mpi"))]
pub use disabled::{MAX_CHUNK, MpiComm};
pub use domain_scoring::{DomainScoring, partition_logits, split_graph};
pub use launch::{domain_scoring, launcher_ranks, refuse_if_launched_as_many_ranks};
pub use requeue::{Requeue, requeue_slurm_job};
pub use single::SingleProcess;

/// How long a rank waits in a collective for the others before it aborts the job naming the
/// ranks that did not arrive (MPI builds; `--collective-timeout`). Far below NCCL's 30 minutes,
/// far above the imbalance of a training step.
pub const DEFAULT_COLLECTIVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Collective operations between the ranks of one training job.
pub trait Comm: Send {
    /// This process's rank, 0-based.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn size(&self) -> usize;
    /// Replaces `buf` on every rank with the element-wise mean over ranks.
    fn allreduce_mean(&mut self, buf: &mut [f32]) -> crate::Result<()>;
    /// Replaces `buf` on every rank with the element-wise sum over ranks (f64 statistics).
    fn allreduce_sum_f64(&mut self, buf: &mut [f64]) -> crate::Result<()>;
    /// Copies rank `root`'s `buf` to every rank.
    fn broadcast(&mut self, buf: &mut [f32], root: usize) -> crate::Result<()>;
    /// Waits until every rank arrives.
    fn barrier(&mut self) -> crate::Result<()>;
    /// Every rank's `values` (same length on all ranks), concatenated in rank order, on every
    /// rank.
    fn allgather_f64(&mut self, values: &[f64]) -> crate::Result<Vec<f64>>;
    /// True on every rank if `flag` is true on any rank.
    fn any(&mut self, flag: bool) -> crate::Result<bool> {
        let mut v = [flag as u8 as f64];
        self.allreduce_sum_f64(&mut v)?;
        Ok(v[0] > 0.0)
    }
    /// True if this rank writes logs, plots and checkpoints.
    fn is_root(&self) -> bool {
        self.rank() == 0
    }
    /// Groups the ranks by `parts` consecutive ranks (ranks g·parts … g·parts + parts − 1), each
    /// group splitting one graph at a time across its ranks (domain parallelism); the group's
    /// rank r holds partition r mod `parts`. `parts` must divide the number of ranks; 1 (the
    /// default) is plain data parallelism.
    fn set_domain_ranks(&mut self, parts: usize) -> crate::Result<()> {
        if parts == 1 {
            return Ok(());
        }
        Err(crate::Error::Dist(format!(
            "{parts} domain ranks need as many ranks: launch with mpirun (or srun) and a build with the `mpi` feature"
        )))
    }
    /// Ranks per domain group (1: none; see [`Comm::set_domain_ranks`]).
    fn domain_ranks(&self) -> usize {
        1
    }
    /// The halo exchange of this rank's partition of a graph split across its domain group
    /// ([`Comm::set_domain_ranks`]), with the rows of `plan` (see `trackgnn_engine::halo`).
    fn domain_halo(&mut self, plan: &HaloPlan) -> crate::Result<Arc<dyn HaloExchange<f32>>> {
        let _ = plan;
        Err(crate::Error::Dist("a domain-parallel halo exchange needs MPI ranks".into()))
    }
}
