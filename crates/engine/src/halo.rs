//! One graph split across ranks (proper domain parallelism): each rank holds the nodes it owns,
//! every edge that touches one of them, and a halo, the remote nodes those edges reach.
//!
//! The engine runs each rank's part as a graph of its own ([`Partition::local_input`]), with
//! one difference: after every node update (the node encoder's included) the halo's rows of
//! the node states are replaced by their owners' ([`HaloExchange::exchange_states`]), and in
//! the backward, once a level's node gradients are complete, the halo's rows are sent back and
//! summed into their owners' ([`HaloExchange::return_gradients`]). An edge between two ranks
//! is held, and computed, by both: its inputs are the same on both (its endpoints' states after
//! the exchange, its previous state by induction), so both compute the same values, and each
//! copy back-propagates only the gradient of its own consumers (its owned endpoint's
//! aggregation), which sum to the whole graph's by linearity. The loss counts each edge once,
//! on the rank that owns its source ([`Partition::edge_counted`]); the parameter gradients are
//! then summed over the ranks. The sums come in another order than the whole graph's, so the
//! results equal it to rounding.
//!
//! [`HaloPlan`] says which rows go to and come from which rank; [`ThreadHalo`] carries them
//! between threads of one process (tests, and the check of a partitioning without MPI); the
//! MPI implementation lives with the trainer's cluster code.

use std::fmt::Debug;
use std::sync::{Arc, Barrier, Mutex};

use crate::graph_input::GraphInput;
use crate::real::Real;

/// How a rank's halo rows arrive from their owners and their gradients go back. Every rank of
/// the split graph makes the same calls in the same order (the engine's passes do: they run
/// the same model on every rank); an implementation may block until its peers have called.
pub trait HaloExchange<T>: Send + Sync + Debug {
    /// Replaces the halo rows of `states` (local nodes × `width`, row-major) with their owners'
    /// rows.
    fn exchange_states(&self, states: &mut [T], width: usize);

    /// Adds the halo rows of `grads` (local nodes × `width`) into their owners' rows, on the
    /// owning ranks, and sets them to zero here. Contributions are added in rank order.
    fn return_gradients(&self, grads: &mut [T], width: usize);
}

/// Which local rows a rank sends to each peer and receives from it (peers by rank; empty
/// lists for itself and for ranks it shares no edge with).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HaloPlan {
    /// `send[p]`: the local rows of owned nodes that rank p holds in its halo, in ascending
    /// global order (the order of p's `recv[self]`).
    pub send: Vec<Vec<u32>>,
    /// `recv[p]`: the local rows of halo nodes owned by rank p, in ascending global order.
    pub recv: Vec<Vec<u32>>,
}

impl HaloPlan {
    /// Halo rows received per exchange (the rank's halo size).
    pub fn halo_rows(&self) -> usize {
        self.recv.iter().map(Vec::len).sum()
    }

    /// Rows sent per exchange.
    pub fn sent_rows(&self) -> usize {
        self.send.iter().map(Vec::len).sum()
    }

    /// The rows `rows` of `data` (rows × `width`), one after another: one peer's message.
    pub fn pack<T: Copy>(rows: &[u32], data: &[T], width: usize) -> Vec<T> {
        rows.iter().flat_map(|&r| &data[r as usize * width..(r as usize + 1) * width]).copied().collect()
    }

    /// Puts the node states received from peer `from` (packed as `recv[from]` lists them)
    /// into their halo rows.
    pub fn place_states<T: Copy>(&self, from: usize, got: &[T], states: &mut [T], width: usize) {
        for (k, &r) in self.recv[from].iter().enumerate() {
            states[r as usize * width..(r as usize + 1) * width].copy_from_slice(&got[k * width..(k + 1) * width]);
        }
    }

    /// Adds the gradients returned by peer `from` (packed as `send[from]` lists them) into the
    /// owned rows they belong to.
    pub fn add_returned<T: Real>(&self, from: usize, got: &[T], grads: &mut [T], width: usize) {
        for (k, &r) in self.send[from].iter().enumerate() {
            let row = &mut grads[r as usize * width..(r as usize + 1) * width];
            row.iter_mut().zip(&got[k * width..(k + 1) * width]).for_each(|(g, &v)| *g += v);
        }
    }

    /// Sets the halo rows of `grads` (local nodes × `width`) to zero.
    pub fn zero_halo<T: Real>(&self, grads: &mut [T], width: usize) {
        for &r in self.recv.iter().flatten() {
            grads[r as usize * width..(r as usize + 1) * width].iter_mut().for_each(|v| *v = T::ZERO);
        }
    }
}

/// One rank's part of a graph split by node owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    /// This partition's rank.
    pub rank: usize,
    /// Number of partitions.
    pub parts: usize,
    /// Global ids of the local nodes: the owned ones first, then the halo, each ascending.
    pub nodes: Vec<u32>,
    /// How many of `nodes` are owned.
    pub owned_nodes: usize,
    /// Global ids of the local edges (every edge with an owned endpoint), ascending.
    pub edges: Vec<u32>,
    /// Whether each local edge is counted here (in the loss, the metrics): its source is
    /// owned. Every edge of the graph is counted on exactly one rank.
    pub edge_counted: Vec<bool>,
    /// The exchange's rows.
    pub plan: HaloPlan,
}

/// Why a graph cannot be split as asked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PartitionError {
    /// The owner list does not cover the nodes.
    #[error("{owners} owners for {nodes} nodes")]
    OwnerCount {
        /// Entries of the owner list.
        owners: usize,
        /// Nodes of the graph.
        nodes: usize,
    },
    /// A node's owner is not one of the partitions.
    #[error("node {node} is owned by partition {owner}, but there are {parts}")]
    OwnerOutOfRange {
        /// The node.
        node: usize,
        /// Its owner.
        owner: u32,
        /// Number of partitions.
        parts: usize,
    },
    /// A partition owns no node.
    #[error("partition {rank} of {parts} owns no node (a graph of {nodes} nodes)")]
    EmptyPartition {
        /// The partition.
        rank: usize,
        /// Number of partitions.
        parts: usize,
        /// Nodes of the graph.
        nodes: usize,
    },
}

impl Partition {
    /// Splits a graph of `num_nodes` nodes and edges `src` → `dst` into `parts` partitions,
    /// node i going to partition `owner[i]`. Every partition must own a node.
    pub fn split(
        num_nodes: usize,
        src: &[u32],
        dst: &[u32],
        owner: &[u32],
        parts: usize,
    ) -> Result<Vec<Partition>, PartitionError> {
        if owner.len() != num_nodes {
            return Err(PartitionError::OwnerCount { owners: owner.len(), nodes: num_nodes });
        }
        if let Some((node, &o)) = owner.iter().enumerate().find(|(_, o)| **o as usize >= parts) {
            return Err(PartitionError::OwnerOutOfRange { node, owner: o, parts });
        }
        let mut owned: Vec<Vec<u32>> = vec![Vec::new(); parts];
        for (i, &o) in owner.iter().enumerate() {
            owned[o as usize].push(i as u32);
        }
        if let Some(rank) = owned.iter().position(Vec::is_empty) {
            return Err(PartitionError::EmptyPartition { rank, parts, nodes: num_nodes });
        }
        let mut out: Vec<Partition> = owned
            .into_iter()
            .enumerate()
            .map(|(rank, nodes)| Partition {
                rank,
                parts,
                owned_nodes: nodes.len(),
                nodes,
                edges: Vec::new(),
                edge_counted: Vec::new(),
                plan: HaloPlan { send: vec![Vec::new(); parts], recv: vec![Vec::new(); parts] },
            })
            .collect();
        let mut halo: Vec<Vec<u32>> = vec![Vec::new(); parts];
        for (e, (&s, &d)) in src.iter().zip(dst).enumerate() {
            let (os, od) = (owner[s as usize] as usize, owner[d as usize] as usize);
            out[os].edges.push(e as u32);
            out[os].edge_counted.push(true);
            if od != os {
                out[od].edges.push(e as u32);
                out[od].edge_counted.push(false);
                halo[os].push(d);
                halo[od].push(s);
            }
        }
        // Halo nodes ascending by global id, after the owned ones; the plan's lists follow.
        let mut local_row = vec![u32::MAX; num_nodes];
        for (p, mut h) in out.iter_mut().zip(halo) {
            h.sort_unstable();
            h.dedup();
            for (row, &v) in p.nodes.iter().enumerate() {
                local_row[v as usize] = row as u32;
            }
            for (row, &v) in (p.owned_nodes..).zip(&h) {
                p.plan.recv[owner[v as usize] as usize].push(row as u32);
            }
            p.nodes.extend(h);
        }
        for rank in 0..parts {
            for peer in 0..parts {
                let send: Vec<u32> = out[peer].plan.recv[rank]
                    .iter()
                    .map(|&r| local_row[out[peer].nodes[r as usize] as usize])
                    .collect();
                out[rank].plan.send[peer] = send;
            }
        }
        Ok(out)
    }

    /// The local graph of this partition: its nodes' features, its edges (renumbered to local
    /// rows) and their features, without a halo exchange (see [`GraphInput::with_halo`]).
    pub fn local_input<T: Real>(&self, g: &GraphInput<T>) -> GraphInput<T> {
        let mut row = std::collections::HashMap::with_capacity(self.nodes.len());
        for (r, &v) in self.nodes.iter().enumerate() {
            row.insert(v, r as u32);
        }
        let nd = g.node_dim;
        let x: Vec<f32> = self
            .nodes
            .iter()
            .flat_map(|&v| g.x[v as usize * nd..(v as usize + 1) * nd].iter().map(|t| t.to_f64() as f32))
            .collect();
        let ed = g.edge_dim;
        let ea: Vec<f32> = self
            .edges
            .iter()
            .flat_map(|&e| g.edge_attr[e as usize * ed..(e as usize + 1) * ed].iter().map(|t| t.to_f64() as f32))
            .collect();
        let src: Vec<u32> = self.edges.iter().map(|&e| row[&g.src[e as usize]]).collect();
        let dst: Vec<u32> = self.edges.iter().map(|&e| row[&g.dst[e as usize]]).collect();
        let mut local = GraphInput::new(self.nodes.len(), &x, nd, &ea, ed, &src, &dst);
        // Features that are not f32 values (an f64 graph) are copied, not rounded.
        local.x =
            self.nodes.iter().flat_map(|&v| g.x[v as usize * nd..(v as usize + 1) * nd].iter().copied()).collect();
        local.edge_attr = self
            .edges
            .iter()
            .flat_map(|&e| g.edge_attr[e as usize * ed..(e as usize + 1) * ed].iter().copied())
            .collect();
        local
    }

    /// The values of the local edges, taken from one value per edge of the whole graph.
    pub fn edge_values<V: Copy>(&self, all: &[V]) -> Vec<V> {
        self.edges.iter().map(|&e| all[e as usize]).collect()
    }

    /// Local nodes in the halo.
    pub fn halo_nodes(&self) -> usize {
        self.nodes.len() - self.owned_nodes
    }
}

/// The exchange between the partitions of one graph run on threads of one process: a rank's
/// rows travel through a mailbox per pair of ranks, with a barrier between writing and reading.
#[derive(Debug)]
pub struct ThreadHalo<T> {
    rank: usize,
    plan: HaloPlan,
    shared: Arc<Mailboxes<T>>,
}

#[derive(Debug)]
struct Mailboxes<T> {
    parts: usize,
    /// `boxes[from * parts + to]`.
    boxes: Vec<Mutex<Vec<T>>>,
    barrier: Barrier,
}

impl<T: Real> ThreadHalo<T> {
    /// One exchange per partition, connected to each other; partition r's is element r.
    pub fn group(partitions: &[Partition]) -> Vec<ThreadHalo<T>> {
        let parts = partitions.len();
        let shared = Arc::new(Mailboxes {
            parts,
            boxes: (0..parts * parts).map(|_| Mutex::new(Vec::new())).collect(),
            barrier: Barrier::new(parts),
        });
        partitions.iter().map(|p| ThreadHalo { rank: p.rank, plan: p.plan.clone(), shared: shared.clone() }).collect()
    }

    fn post(&self, to: usize, rows: &[u32], data: &[T], width: usize) {
        *self.shared.boxes[self.rank * self.shared.parts + to].lock().expect("halo mailbox") =
            HaloPlan::pack(rows, data, width);
    }

    /// The message peer `from` posted to this rank.
    fn mail(&self, from: usize) -> std::sync::MutexGuard<'_, Vec<T>> {
        self.shared.boxes[from * self.shared.parts + self.rank].lock().expect("halo mailbox")
    }
}

impl<T: Real + 'static> HaloExchange<T> for ThreadHalo<T> {
    fn exchange_states(&self, states: &mut [T], width: usize) {
        let parts = self.shared.parts;
        for to in 0..parts {
            self.post(to, &self.plan.send[to], states, width);
        }
        self.shared.barrier.wait();
        for from in 0..parts {
            self.plan.place_states(from, &self.mail(from), states, width);
        }
        self.shared.barrier.wait();
    }

    fn return_gradients(&self, grads: &mut [T], width: usize) {
        let parts = self.shared.parts;
        for to in 0..parts {
            self.post(to, &self.plan.recv[to], grads, width);
        }
        self.plan.zero_halo(grads, width);
        self.shared.barrier.wait();
        for from in 0..parts {
            self.plan.add_returned(from, &self.mail(from), grads, width);
        }
        self.shared.barrier.wait();
    }
}
