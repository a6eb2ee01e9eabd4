//! Launch checks: a build without MPI must not run as one of several ranks.

use anyhow::{Result, bail};

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
        bail!(
            "launched as one of {n} ranks ({var}={n}) but this trackgnn was built without MPI; \
             rebuild with `cargo build --release --features mpi` or run a single process"
        );
    }
    Ok(())
}
