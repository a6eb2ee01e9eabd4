//! Data-parallel communication over MPI (the `mpi` cargo feature), through rsmpi.
//!
//! The gradient all-reduce is done in place with the raw `MPI_Iallreduce` and `MPI_IN_PLACE`
//! (rsmpi has no safe in-place all-reduce), in chunks below 2^31 elements (MPI counts are C
//! ints). A panic on one rank calls `MPI_Abort`, because otherwise the other ranks would wait in
//! the next collective forever.
//!
//! # No hang
//! Every collective is started non-blocking and waited for against a deadline, the collective
//! timeout: a rank that does not arrive in time (stopped, stuck in I/O, far slower) is found
//! by pinging the others, each waiting rank answering pings while it waits, and the job is
//! aborted naming the ranks that did not answer. PyTorch's NCCL waits 30 minutes by default;
//! the default here is [`DEFAULT_COLLECTIVE_TIMEOUT`](super::DEFAULT_COLLECTIVE_TIMEOUT).

use std::os::raw::{c_int, c_void};
use std::time::{Duration, Instant};

use mpi::ffi;
use mpi::topology::{Communicator, SimpleCommunicator};

use std::sync::Arc;

use trackgnn_engine::halo::{HaloExchange, HaloPlan};

use super::mpi_halo::MpiHalo;
use super::{Comm, DEFAULT_COLLECTIVE_TIMEOUT};
use crate::error::{Error, Result};

unsafe extern "C" {
    fn trackgnn_mpi_in_place() -> *mut c_void;
}

/// The largest chunk one MPI call may carry (elements): below 2^31, the C int limit.
pub const MAX_CHUNK: usize = (1 << 31) - 1;

/// Point-to-point tags of the stall probe (apart from collectives: MPI keeps the two apart).
const TAG_PING: c_int = 0x7a01;
const TAG_PONG: c_int = 0x7a02;

/// The MPI world communicator.
pub struct MpiComm {
    _universe: mpi::environment::Universe,
    world: SimpleCommunicator,
    rank: usize,
    size: usize,
    chunk: usize,
    timeout: Duration,
    /// The domain group's communicator ([`Comm::set_domain_ranks`]), if split.
    domain: Option<ffi::MPI_Comm>,
    /// Ranks per domain group.
    domain_ranks: usize,
}

impl MpiComm {
    /// Initialises MPI (serialized threading: MPI is called by one thread at a time, which may
    /// be a rayon worker, while the other threads compute), checks the world size against the
    /// launcher, and installs the abort-on-panic hook. `chunk` is the largest count per MPI
    /// call (tests use a small one to exercise chunking). The collective timeout is
    /// [`DEFAULT_COLLECTIVE_TIMEOUT`] until [`MpiComm::set_collective_timeout`].
    pub fn init(chunk: usize) -> Result<MpiComm> {
        let (universe, _level) = mpi::initialize_with_threading(mpi::Threading::Serialized)
            .ok_or_else(|| Error::Dist("MPI was already initialised".into()))?;
        let world = universe.world();
        let (rank, size) = (world.rank() as usize, world.size() as usize);
        check_launcher(size)?;
        install_abort_on_panic();
        Ok(MpiComm {
            _universe: universe,
            world,
            rank,
            size,
            chunk: chunk.clamp(1, MAX_CHUNK),
            timeout: DEFAULT_COLLECTIVE_TIMEOUT,
            domain: None,
            domain_ranks: 1,
        })
    }

    /// Sets how long a rank waits in a collective for the others before it aborts the job
    /// naming the ranks that did not arrive.
    pub fn set_collective_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Prints `message` as this rank's and aborts every rank of the job (exit code `code`).
    pub fn abort(&self, message: &str, code: i32) -> ! {
        abort_job(&format!("rank {} of {}: {message}", self.rank, self.size), code)
    }

    fn raw(&self) -> ffi::MPI_Comm {
        mpi::raw::AsRaw::as_raw(&self.world)
    }

    /// Waits for the non-blocking collective `req` (`rc` its start's return code), answering
    /// stall probes meanwhile; aborts the job if it does not complete within the timeout.
    fn wait(&self, what: &str, rc: c_int, mut req: ffi::MPI_Request) -> Result<()> {
        if rc != 0 {
            return Err(Error::Dist(format!("{what} failed with MPI code {rc}")));
        }
        let start = Instant::now();
        loop {
            if self.test(&mut req)? {
                return Ok(());
            }
            self.answer_pings();
            let waited = start.elapsed();
            if waited >= self.timeout {
                return self.probe_stalled(what, &mut req, waited);
            }
            // Spin briefly (a collective between balanced ranks completes in microseconds),
            // then poll gently so a waiting rank leaves the cores to those still computing.
            if waited < Duration::from_millis(1) {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }

    fn test(&self, req: &mut ffi::MPI_Request) -> Result<bool> {
        let mut flag: c_int = 0;
        // SAFETY: `req` is an active request started by this communicator; the status is ignored.
        let rc = unsafe { ffi::MPI_Test(req, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
        if rc != 0 {
            return Err(Error::Dist(format!("MPI_Test failed with code {rc}")));
        }
        Ok(flag != 0)
    }

    /// Answers every pending stall probe of another rank: "I am here, waiting".
    fn answer_pings(&self) {
        loop {
            let Some(from) = self.poll(TAG_PING) else { return };
            let seq: u64 = self.rank as u64;
            // SAFETY: an 8-byte send of a local value; small messages go eagerly and the
            // prober is polling for the answer.
            unsafe {
                ffi::MPI_Send(&seq as *const u64 as *const c_void, 8, ffi::RSMPI_UINT8_T, from, TAG_PONG, self.raw());
            }
        }
    }

    /// Receives one pending message with `tag` if there is one; returns its source.
    fn poll(&self, tag: c_int) -> Option<c_int> {
        let mut flag: c_int = 0;
        // SAFETY: plain MPI calls on an initialised communicator with local buffers.
        unsafe {
            let mut status: ffi::MPI_Status = std::mem::zeroed();
            ffi::MPI_Iprobe(ffi::RSMPI_ANY_SOURCE, tag, self.raw(), &mut flag, &mut status);
            if flag == 0 {
                return None;
            }
            let from = status.MPI_SOURCE;
            let mut buf = 0u64;
            ffi::MPI_Recv(
                &mut buf as *mut u64 as *mut c_void,
                8,
                ffi::RSMPI_UINT8_T,
                from,
                tag,
                self.raw(),
                ffi::RSMPI_STATUS_IGNORE,
            );
            Some(from)
        }
    }

    /// The collective `what` timed out: pings every other rank, collects the answers for a
    /// short grace period, and aborts naming the ranks that did not answer (unless the
    /// collective completes meanwhile: the late rank arrived).
    fn probe_stalled(&self, what: &str, req: &mut ffi::MPI_Request, waited: Duration) -> Result<()> {
        let me = self.rank as u64;
        let mut sends = Vec::new();
        for peer in (0..self.size).filter(|&p| p != self.rank) {
            // SAFETY: an 8-byte non-blocking send of `me`, which lives until the process ends
            // (the requests are never waited for: the job either continues or aborts).
            unsafe {
                let mut r: ffi::MPI_Request = std::mem::zeroed();
                ffi::MPI_Isend(
                    &me as *const u64 as *const c_void,
                    8,
                    ffi::RSMPI_UINT8_T,
                    peer as c_int,
                    TAG_PING,
                    self.raw(),
                    &mut r,
                );
                sends.push(r);
            }
        }
        let grace = (self.timeout / 4).clamp(Duration::from_millis(200), Duration::from_secs(3));
        let t0 = Instant::now();
        let mut answered = vec![false; self.size];
        answered[self.rank] = true;
        while t0.elapsed() < grace {
            if self.test(req)? {
                for r in &mut sends {
                    // SAFETY: releasing send requests this rank started; MPI completes them.
                    unsafe { ffi::MPI_Request_free(r) };
                }
                return Ok(());
            }
            self.answer_pings();
            while let Some(from) = self.poll(TAG_PONG) {
                answered[from as usize] = true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let missing: Vec<String> = (0..self.size).filter(|&r| !answered[r]).map(|r| r.to_string()).collect();
        self.abort(
            &format!(
                "rank(s) {} did not reach the {what} within {:.1} s (stalled, or far slower than the others; \
                 the limit is --collective-timeout)",
                if missing.is_empty() { "?".to_string() } else { missing.join(", ") },
                waited.as_secs_f64()
            ),
            1,
        )
    }

    fn allreduce_raw<T>(&mut self, buf: &mut [T], datatype: ffi::MPI_Datatype) -> Result<()> {
        for part in buf.chunks_mut(self.chunk) {
            // SAFETY: MPI_IN_PLACE as the send buffer makes MPI read and write `part`, which is
            // valid for `part.len()` elements of the given datatype until the wait returns; the
            // count fits a C int because chunks are at most MAX_CHUNK long.
            let (rc, req) = unsafe {
                let mut req: ffi::MPI_Request = std::mem::zeroed();
                let rc = ffi::MPI_Iallreduce(
                    trackgnn_mpi_in_place(),
                    part.as_mut_ptr() as *mut c_void,
                    part.len() as c_int,
                    datatype,
                    ffi::RSMPI_SUM,
                    self.raw(),
                    &mut req,
                );
                (rc, req)
            };
            self.wait("all-reduce", rc, req)?;
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
        for part in buf.chunks_mut(self.chunk) {
            // SAFETY: `part` is valid for its length of f32 until the wait returns.
            let (rc, req) = unsafe {
                let mut req: ffi::MPI_Request = std::mem::zeroed();
                let rc = ffi::MPI_Ibcast(
                    part.as_mut_ptr() as *mut c_void,
                    part.len() as c_int,
                    ffi::RSMPI_FLOAT,
                    root as c_int,
                    self.raw(),
                    &mut req,
                );
                (rc, req)
            };
            self.wait("broadcast", rc, req)?;
        }
        Ok(())
    }
    fn barrier(&mut self) -> Result<()> {
        // SAFETY: a barrier has no buffers.
        let (rc, req) = unsafe {
            let mut req: ffi::MPI_Request = std::mem::zeroed();
            (ffi::MPI_Ibarrier(self.raw(), &mut req), req)
        };
        self.wait("barrier", rc, req)
    }
    fn set_domain_ranks(&mut self, parts: usize) -> Result<()> {
        if parts == 0 || !self.size.is_multiple_of(parts) {
            return Err(Error::Dist(format!(
                "{parts} domain ranks do not divide the {} ranks of the job (ranks = data groups × domain ranks)",
                self.size
            )));
        }
        if parts == 1 {
            return Ok(());
        }
        // SAFETY: a collective on the world communicator, every rank calling it in the same
        // order (the trainer's set-up); the new communicator is kept until the process ends.
        let (rc, comm) = unsafe {
            let mut comm: ffi::MPI_Comm = std::mem::zeroed();
            let rc = ffi::MPI_Comm_split(self.raw(), (self.rank / parts) as c_int, self.rank as c_int, &mut comm);
            (rc, comm)
        };
        if rc != 0 {
            return Err(Error::Dist(format!("splitting the ranks into domain groups failed with MPI code {rc}")));
        }
        self.domain = Some(comm);
        self.domain_ranks = parts;
        Ok(())
    }
    fn domain_ranks(&self) -> usize {
        self.domain_ranks
    }
    fn domain_halo(&mut self, plan: &HaloPlan) -> Result<Arc<dyn HaloExchange<f32>>> {
        let comm = self.domain.ok_or_else(|| Error::Dist("no domain groups: set_domain_ranks first".into()))?;
        Ok(Arc::new(MpiHalo { comm, plan: plan.clone(), timeout: self.timeout, world_rank: self.rank }))
    }
    fn allgather_f64(&mut self, values: &[f64]) -> Result<Vec<f64>> {
        let mut out = vec![0.0; values.len() * self.size];
        // SAFETY: `values` and `out` hold `len` and `len × size` doubles and live until the
        // wait returns.
        let (rc, req) = unsafe {
            let mut req: ffi::MPI_Request = std::mem::zeroed();
            let rc = ffi::MPI_Iallgather(
                values.as_ptr() as *const c_void,
                values.len() as c_int,
                ffi::RSMPI_DOUBLE,
                out.as_mut_ptr() as *mut c_void,
                values.len() as c_int,
                ffi::RSMPI_DOUBLE,
                self.raw(),
                &mut req,
            );
            (rc, req)
        };
        self.wait("all-gather", rc, req)?;
        Ok(out)
    }
}

/// Prints `message` and aborts every rank of the job (exit code `code`); MPI must be
/// initialised ([`MpiComm::init`]).
pub fn abort_job(message: &str, code: i32) -> ! {
    eprintln!("{message}; aborting the MPI job");
    // SAFETY: MPI is initialised; MPI_Abort may be called from any thread.
    unsafe {
        ffi::MPI_Abort(ffi::RSMPI_COMM_WORLD, code);
    }
    std::process::exit(code)
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
