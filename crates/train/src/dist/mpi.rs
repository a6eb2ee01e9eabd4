//! Data-parallel communication over MPI (the `mpi` cargo feature), through rsmpi.
//!
//! The gradient all-reduce is done in place with the raw `MPI_Allreduce` and `MPI_IN_PLACE`
//! (rsmpi has no safe in-place all-reduce), in chunks below 2^31 elements (MPI counts are C
//! ints). A panic on one rank calls `MPI_Abort`, because otherwise the other ranks would wait in
//! the next collective forever.

use std::os::raw::c_void;

use mpi::collective::{CommunicatorCollectives, Root};
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::{Communicator, SimpleCommunicator};

use super::Comm;
use crate::error::{Error, Result};

unsafe extern "C" {
    fn trackgnn_mpi_in_place() -> *mut c_void;
}

/// The largest chunk one MPI call may carry (elements): below 2^31, the C int limit.
pub const MAX_CHUNK: usize = (1 << 31) - 1;

/// The MPI world communicator.
pub struct MpiComm {
    _universe: mpi::environment::Universe,
    world: SimpleCommunicator,
    rank: usize,
    size: usize,
    chunk: usize,
}

impl MpiComm {
    /// Initialises MPI (serialized threading: MPI is called by one thread at a time, which may
    /// be a rayon worker, while the other threads compute), checks the world size against the launcher, and installs the abort-on-panic hook.
    /// `chunk` is the largest count per MPI call (tests use a small one to exercise chunking).
    pub fn init(chunk: usize) -> Result<MpiComm> {
        let (universe, _level) = mpi::initialize_with_threading(mpi::Threading::Serialized)
            .ok_or_else(|| Error::Dist("MPI was already initialised".into()))?;
        let world = universe.world();
        let (rank, size) = (world.rank() as usize, world.size() as usize);
        check_launcher(size)?;
        install_abort_on_panic();
        Ok(MpiComm { _universe: universe, world, rank, size, chunk: chunk.clamp(1, MAX_CHUNK) })
    }

    fn allreduce_raw<T>(&mut self, buf: &mut [T], datatype: ffi::MPI_Datatype) -> Result<()> {
        for part in buf.chunks_mut(self.chunk) {
            // SAFETY: MPI_IN_PLACE as the send buffer makes MPI read and write `part`, which is
            // valid for `part.len()` elements of the given datatype; the count fits a C int
            // because chunks are at most MAX_CHUNK long.
            let rc = unsafe {
                ffi::MPI_Allreduce(
                    trackgnn_mpi_in_place(),
                    part.as_mut_ptr() as *mut c_void,
                    part.len() as i32,
                    datatype,
                    ffi::RSMPI_SUM,
                    self.world.as_raw(),
                )
            };
            if rc != 0 {
                return Err(Error::Dist(format!("MPI_Allreduce failed with code {rc}")));
            }
        }
        Ok(())
    }
}

// SAFETY: MPI is initialised with MPI_THREAD_SERIALIZED, so its handles may be used from any
// thread as long as calls do not overlap; `Comm` methods take `&mut self`, so they cannot.
unsafe impl Send for MpiComm {}

impl Comm for MpiComm {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn allreduce_mean(&mut self, buf: &mut [f32]) -> Result<()> {
        // SAFETY: reading an extern constant exported by rsmpi's shim.
        let dt = unsafe { ffi::RSMPI_FLOAT };
        self.allreduce_raw(buf, dt)?;
        let inv = 1.0 / self.size as f32;
        buf.iter_mut().for_each(|v| *v *= inv);
        Ok(())
    }
    fn allreduce_sum_f64(&mut self, buf: &mut [f64]) -> Result<()> {
        // SAFETY: as above.
        let dt = unsafe { ffi::RSMPI_DOUBLE };
        self.allreduce_raw(buf, dt)
    }
    fn broadcast(&mut self, buf: &mut [f32], root: usize) -> Result<()> {
        let chunk = self.chunk;
        for part in buf.chunks_mut(chunk) {
            self.world.process_at_rank(root as i32).broadcast_into(part);
        }
        Ok(())
    }
    fn barrier(&mut self) -> Result<()> {
        self.world.barrier();
        Ok(())
    }
    fn allgather_f64(&mut self, values: &[f64]) -> Result<Vec<f64>> {
        let mut out = vec![0.0; values.len() * self.size];
        self.world.all_gather_into(values, &mut out[..]);
        Ok(out)
    }
}

/// Fails if the launcher says the job has a different number of ranks than MPI sees: `srun`
/// without MPI support (or a mismatched MPI library) starts N independent singletons, which
/// would each train alone.
fn check_launcher(size: usize) -> Result<()> {
    for var in ["SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"] {
        if let Some(n) = std::env::var(var).ok().and_then(|v| v.trim().parse::<usize>().ok())
            && n != size
        {
            return Err(Error::Dist(format!(
                "the launcher set {var}={n} but MPI sees {size} rank(s): the ranks are not connected \
                 (with Slurm, use `srun --mpi=pmix` or `mpirun`, and an MPI library that matches)"
            )));
        }
    }
    Ok(())
}

/// A panic on any rank aborts the whole job instead of leaving the others in a collective.
fn install_abort_on_panic() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default(info);
        eprintln!("trackgnn: a rank panicked; aborting the MPI job");
        // SAFETY: MPI is initialised (this hook is installed after MPI_Init) and MPI_Abort may be
        // called from any thread.
        unsafe {
            ffi::MPI_Abort(ffi::RSMPI_COMM_WORLD, 1);
        }
    }));
}
