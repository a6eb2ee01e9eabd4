//! The MPI communicator in a build without the `mpi` feature: same signature, an error.

use crate::error::{Error, Result};

/// Stands in for the MPI communicator when trackgnn is built without MPI.
pub struct MpiComm;

/// The largest chunk one MPI call may carry (elements).
pub const MAX_CHUNK: usize = (1 << 31) - 1;

impl MpiComm {
    /// Always fails: this build has no MPI.
    pub fn init(_chunk: usize) -> Result<MpiComm> {
        Err(Error::Dist("trackgnn was built without the `mpi` feature (cargo build --release --features mpi)".into()))
    }
}
