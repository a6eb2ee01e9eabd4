//! The halo exchange of domain parallelism over MPI (`trackgnn_engine::halo`): each rank sends
//! the rows its peers hold in their halos and receives its own halo's rows, point to point on
//! the domain group's communicator; gradients travel back the same way and are added in peer
//! order, so a step is the same at every run.
//!
//! The engine calls the exchange from inside its passes, where an error cannot be returned: a
//! failed MPI call or a peer that does not answer within the collective timeout aborts the job
//! naming the peers, as the collectives do.

use std::os::raw::{c_int, c_void};
use std::time::{Duration, Instant};

use mpi::ffi;
use trackgnn_engine::halo::{HaloExchange, HaloPlan};

use super::mpi::MAX_CHUNK;

const TAG_STATES: c_int = 0x7a10;
const TAG_GRADIENTS: c_int = 0x7a11;

/// One rank's halo exchange with the other ranks of its domain group.
#[derive(Debug)]
pub(super) struct MpiHalo {
    /// The domain group's communicator (peers are numbered by their rank in it).
    pub(super) comm: ffi::MPI_Comm,
    /// The rows to send and receive, per peer.
    pub(super) plan: HaloPlan,
    /// How long to wait for the peers before aborting.
    pub(super) timeout: Duration,
    /// This rank in the world, for messages.
    pub(super) world_rank: usize,
}

// SAFETY: MPI is initialised with MPI_THREAD_SERIALIZED and the trainer calls MPI from one
// thread at a time (the engine's passes run between its collectives, never beside them), so the
// communicator handle may move between threads and be shared.
unsafe impl Send for MpiHalo {}
unsafe impl Sync for MpiHalo {}

impl MpiHalo {
    fn abort(&self, message: &str) -> ! {
        eprintln!("rank {}: {message}; aborting the MPI job", self.world_rank);
        // SAFETY: MPI is initialised; MPI_Abort may be called from any thread.
        unsafe {
            ffi::MPI_Abort(ffi::RSMPI_COMM_WORLD, 1);
        }
        unreachable!("MPI_Abort returned")
    }

    /// Sends the rows `outgoing[p]` of `data` to each peer p and receives from it as many rows
    /// as `incoming[p]` lists: returned per peer, row after row.
    fn swap(
        &self,
        data: &[f32],
        width: usize,
        outgoing: &[Vec<u32>],
        incoming: &[Vec<u32>],
        tag: c_int,
    ) -> Vec<Vec<f32>> {
        let what = if tag == TAG_STATES { "halo exchange of node states" } else { "halo return of node gradients" };
        let mut inbox: Vec<Vec<f32>> = incoming.iter().map(|rows| vec![0.0; rows.len() * width]).collect();
        let outbox: Vec<Vec<f32>> = outgoing.iter().map(|rows| HaloPlan::pack(rows, data, width)).collect();
        let mut requests: Vec<ffi::MPI_Request> = Vec::new();
        let mut peers: Vec<usize> = Vec::new();
        let receives = inbox.iter_mut().map(|b| (b.as_mut_ptr(), b.len()));
        let sends = outbox.iter().map(|b| (b.as_ptr() as *mut f32, b.len()));
        for (ops, is_send) in [(receives.collect::<Vec<_>>(), false), (sends.collect(), true)] {
            for (peer, (ptr, len)) in ops.into_iter().enumerate().filter(|(_, op)| op.1 > 0) {
                if len > MAX_CHUNK {
                    self.abort(&format!("{what}: {len} values for rank {peer}, more than one MPI message carries"));
                }
                let (buf, count) = (ptr as *mut c_void, len as c_int);
                // SAFETY: `buf` holds `len` f32 (inbox or outbox), both outlive the wait below;
                // a send only reads it.
                let rc = unsafe {
                    let (mut r, dt): (ffi::MPI_Request, _) = (std::mem::zeroed(), ffi::RSMPI_FLOAT);
                    let rc = if is_send {
                        ffi::MPI_Isend(buf, count, dt, peer as c_int, tag, self.comm, &mut r)
                    } else {
                        ffi::MPI_Irecv(buf, count, dt, peer as c_int, tag, self.comm, &mut r)
                    };
                    requests.push(r);
                    rc
                };
                if rc != 0 {
                    let dir = if is_send { "sending to" } else { "receiving from" };
                    self.abort(&format!("{what}: {dir} rank {peer} failed with MPI code {rc}"));
                }
                peers.push(peer);
            }
        }
        self.wait_all(what, &mut requests, &peers);
        inbox
    }

    /// Waits for every request, aborting the job if they are not all done within the timeout.
    fn wait_all(&self, what: &str, requests: &mut [ffi::MPI_Request], peers: &[usize]) {
        let start = Instant::now();
        loop {
            let mut flag: c_int = 0;
            // SAFETY: active requests started above; statuses ignored.
            let rc = unsafe {
                ffi::MPI_Testall(requests.len() as c_int, requests.as_mut_ptr(), &mut flag, ffi::RSMPI_STATUSES_IGNORE)
            };
            if rc != 0 {
                self.abort(&format!("{what} failed with MPI code {rc}"));
            }
            if flag != 0 {
                return;
            }
            let waited = start.elapsed();
            if waited >= self.timeout {
                let mut names: Vec<String> = peers.iter().map(|p| p.to_string()).collect();
                names.dedup();
                self.abort(&format!(
                    "the {what} with domain rank(s) {} did not complete within {:.1} s (a peer stalled, failed or is \
                     far slower; the limit is --collective-timeout)",
                    names.join(", "),
                    waited.as_secs_f64()
                ));
            }
            if waited < Duration::from_millis(1) {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    }
}

impl HaloExchange<f32> for MpiHalo {
    fn exchange_states(&self, states: &mut [f32], width: usize) {
        let plan = &self.plan;
        let inbox = self.swap(states, width, &plan.send, &plan.recv, TAG_STATES);
        for (from, got) in inbox.iter().enumerate() {
            plan.place_states(from, got, states, width);
        }
    }

    fn return_gradients(&self, grads: &mut [f32], width: usize) {
        // The halo's rows go to their owners; what the peers send is added into the owned rows
        // they hold, peer after peer.
        let plan = &self.plan;
        let inbox = self.swap(grads, width, &plan.recv, &plan.send, TAG_GRADIENTS);
        plan.zero_halo(grads, width);
        for (from, got) in inbox.iter().enumerate() {
            plan.add_returned(from, got, grads, width);
        }
    }
}
