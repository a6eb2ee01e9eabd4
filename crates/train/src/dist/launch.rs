//! Launch checks: a build without MPI must not run as one of several ranks, and reconstruction
//! runs on several only to split each event across them.

use std::sync::Arc;

use super::DomainScoring;
use crate::error::{Error, Result};

/// Ranks the launcher says this job has (OpenMPI, MPICH/PMI, Slurm), if any says more than one.
pub fn launcher_ranks() -> Option<(String, usize)> {
    for var in ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"] {
        let n = std::env::var(var).ok().and_then(|v| v.trim().parse::<usize>().ok());
        if let Some(n) = n.filter(|&n| n > 1) {
            return Some((var.to_string(), n));
        }
    }
    None
}

/// Refuses to train when launched as one of several ranks without MPI support: otherwise N
/// copies would each train alone and write one run directory.
pub fn refuse_if_launched_as_many_ranks() -> Result<()> {
    if let Some((var, n)) = launcher_ranks() {
        return Err(Error::Dist(format!(
            "launched as one of {n} ranks ({var}={n}) but this trackgnn was built without MPI; \
             rebuild with `cargo build --release --features mpi` or run a single process"
        )));
    }
    Ok(())
}

/// The scoring of `reconstruct --domain-ranks P`: each event's graph split across the P ranks
/// of an MPI build's job (`mpirun -np P`); `None` for one rank, refusing to run as one of
/// several.
pub fn domain_scoring(parts: u32) -> Result<Option<Arc<DomainScoring>>> {
    if parts <= 1 {
        if let Some((var, n)) = launcher_ranks() {
            return Err(Error::Dist(format!(
                "launched as one of {n} ranks ({var}={n}): reconstruct splits each event across them with --domain-ranks {n}"
            )));
        }
        return Ok(None);
    }
    #[cfg(feature = "mpi")]
    {
        let comm = super::MpiComm::init(super::MAX_CHUNK)?;
        Ok(Some(Arc::new(DomainScoring::new(Box::new(comm), parts as usize)?)))
    }
    #[cfg(not(feature = "mpi"))]
    Err(Error::Dist(format!(
        "--domain-ranks {parts} needs an MPI build (`cargo build --release --features mpi`) launched with `mpirun -np {parts}`"
    )))
}
