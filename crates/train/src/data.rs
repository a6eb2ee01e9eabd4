//! The graphs of a run: the split into training, validation and test events, the order steps
//! draw them in (random or size-balanced), and loading the next graph while the current trains.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, sync_channel};
use std::thread::JoinHandle;

use serde::{Deserialize, Serialize};
use trackgnn_engine::GraphInput;
use trackgnn_engine::halo::{HaloPlan, Partition};
use trackgnn_graph::partition::phi_owners;
use trackgnn_graph::recipe::PROMPT_R;
use trackgnn_graph::sectors::{SectorConfig, split};
use trackgnn_graph::{Graph, discover_graphs, read_graph, read_graph_header};
use trackgnn_model::graph_input;
use trackgnn_trackml::rng::Rng;

use crate::config::{Sampler, TrainConfig};
use crate::error::{Error, Result};
use trackgnn_model::Error as ModelError;

/// RNG stream ids.
const STREAM_SPLIT: u64 = 11;
const STREAM_EPOCH: u64 = 12;

/// The graph files of a run and their sizes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GraphSet {
    /// (event id, path) of every graph, sorted by event id.
    pub files: Vec<(u64, PathBuf)>,
    /// Edges of each graph.
    pub edges: Vec<u64>,
    /// Nodes of each graph.
    pub nodes: Vec<u64>,
}

impl GraphSet {
    /// Finds the graphs of a directory (the first `max` if non-zero) and reads their headers.
    pub fn open(dir: &Path, max: usize) -> Result<GraphSet> {
        let mut files = discover_graphs(dir)?;
        if max > 0 {
            files.truncate(max);
        }
        let mut edges = Vec::with_capacity(files.len());
        let mut nodes = Vec::with_capacity(files.len());
        for (_, p) in &files {
            let h = read_graph_header(p)?;
            edges.push(h.num_edges as u64);
            nodes.push(h.num_nodes as u64);
        }
        Ok(GraphSet { files, edges, nodes })
    }

    /// Number of graphs.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

/// Indices (into a [`GraphSet`]) of the training, validation and test graphs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Split {
    /// Training graphs.
    pub train: Vec<usize>,
    /// Validation graphs.
    pub val: Vec<usize>,
    /// Test graphs.
    pub test: Vec<usize>,
}

impl Split {
    /// A split of a graph set by event: all graphs of an event (its sectors) land in the same
    /// part, so sectors of a validation event never leak into training.
    pub fn by_event(set: &GraphSet, fractions: [f64; 3], seed: u64) -> Split {
        let mut ids: Vec<u64> = set.files.iter().map(|f| f.0).collect();
        ids.dedup();
        let parts = Split::new(ids.len(), fractions, seed);
        let expand = |idx: &[usize]| -> Vec<usize> {
            let wanted: std::collections::HashSet<u64> = idx.iter().map(|&i| ids[i]).collect();
            (0..set.len()).filter(|&i| wanted.contains(&set.files[i].0)).collect()
        };
        Split { train: expand(&parts.train), val: expand(&parts.val), test: expand(&parts.test) }
    }

    /// A split by `fractions` of a seeded permutation of `n` items; every part is sorted.
    pub fn new(n: usize, fractions: [f64; 3], seed: u64) -> Split {
        let mut order: Vec<usize> = (0..n).collect();
        Rng::for_stream(&[seed, STREAM_SPLIT]).shuffle(&mut order);
        let (n_train, n_val) = Split::sizes(n, fractions);
        let mut train = order[..n_train].to_vec();
        let mut val = order[n_train..n_train + n_val].to_vec();
        let mut test = order[n_train + n_val..].to_vec();
        train.sort_unstable();
        val.sort_unstable();
        test.sort_unstable();
        Split { train, val, test }
    }

    /// How many of `n` items `fractions` give training and validation (the rest is test):
    /// rounded, at least one for training.
    pub fn sizes(n: usize, fractions: [f64; 3]) -> (usize, usize) {
        let n_train = ((n as f64 * fractions[0]).round() as usize).clamp(1.min(n), n);
        let n_val = ((n as f64 * fractions[1]).round() as usize).min(n - n_train);
        (n_train, n_val)
    }

    /// The fewest events whose split by `fractions` holds a validation event; `None` if the
    /// validation fraction is zero.
    pub fn events_for_validation(fractions: [f64; 3]) -> Option<usize> {
        if fractions[1] <= 0.0 {
            return None;
        }
        // round(n·f) ≥ 1 from n = ⌈0.5 / f⌉ on; the training part's rounding may take one more.
        let from = (0.5 / fractions[1]).floor().max(1.0) as usize;
        (from..).find(|&n| Split::sizes(n, fractions).1 > 0)
    }
}

/// The groups of an epoch: each group holds the graphs of one optimiser step for all ranks
/// (`ranks × graphs_per_step` of them); rank r takes positions r·gps .. (r+1)·gps. Every rank
/// derives the same groups from the shared seed, so all take the same number of steps.
pub fn epoch_groups(cfg: &TrainConfig, set: &GraphSet, train: &[usize], ranks: usize, epoch: u64) -> Vec<Vec<usize>> {
    let per = ranks * cfg.graphs_per_step;
    let mut rng = Rng::for_stream(&[cfg.seed, STREAM_EPOCH, epoch]);
    match cfg.sampler {
        Sampler::Random => {
            let mut order = train.to_vec();
            rng.shuffle(&mut order);
            order.chunks_exact(per).map(<[usize]>::to_vec).collect()
        }
        Sampler::Balanced => {
            // Bins of (nearly) equal counts by edge count; shuffled within bins; groups drawn
            // from one bin; the groups shuffled.
            let mut by_size = train.to_vec();
            by_size.sort_by_key(|&i| (set.edges[i], i));
            let bins = cfg.sampler_bins.min(by_size.len().max(1));
            let mut groups = Vec::new();
            for b in 0..bins {
                let lo = b * by_size.len() / bins;
                let hi = (b + 1) * by_size.len() / bins;
                let mut bin = by_size[lo..hi].to_vec();
                rng.shuffle(&mut bin);
                groups.extend(bin.chunks_exact(per).map(<[usize]>::to_vec));
            }
            rng.shuffle(&mut groups);
            groups
        }
    }
}

/// One graph ready for training: engine input, labels and loss weights.
#[derive(Clone, Debug)]
pub struct Sample {
    /// Event number.
    pub event_id: u64,
    /// The engine's input.
    pub input: GraphInput<f32>,
    /// 1 for target edges (the loss label).
    pub target: Vec<u8>,
    /// 1 for true edges of any particle.
    pub y: Vec<u8>,
    /// Loss weight per edge ([`LossWeights`]): `non_target` on true non-target edges,
    /// `secondary` on target edges of secondaries, 0 on edges a sector holds but does not own
    /// (so overlapping sectors count each edge once), else 1.
    pub weight: Vec<f32>,
    /// Edges of this part / edges of its whole graph (1 for a whole graph): the factor that
    /// makes the parts' mean losses sum to the whole graph's.
    pub loss_scale: f64,
    /// For one partition of a graph split across a domain group's ranks: the rows its halo
    /// exchange carries (the trainer connects it to the ranks); `None` otherwise.
    pub halo: Option<HaloPlan>,
    /// The auxiliary target per edge: log10 pT \[GeV\] of the particle of its source node (0
    /// where it has none).
    pub log_pt: Vec<f32>,
    /// Weight of each edge in the auxiliary loss: 1 for the true edges this part counts (with
    /// a particle of positive pT), else 0.
    pub aux_weight: Vec<f32>,
    /// Edges weighing 1 in the auxiliary loss in the whole graph: its mean's denominator, so
    /// the parts' auxiliary losses sum to the whole graph's.
    pub aux_edges: usize,
}

/// Loss weights of the edge classes other than target edges of prompt particles and false
/// edges, which both weigh 1 (`pos_weight` scales the positives in the loss itself).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossWeights {
    /// True edges of particles that are not targets (the field's default: 0).
    pub non_target: f64,
    /// Target edges of secondaries: particles produced more than
    /// [`trackgnn_graph::recipe::PROMPT_R`] from the beam line (1: as prompt ones).
    pub secondary: f64,
}

impl LossWeights {
    /// The weights of a training configuration.
    pub fn of(cfg: &TrainConfig) -> LossWeights {
        LossWeights { non_target: cfg.non_target_weight, secondary: cfg.secondary_weight }
    }
}

/// Reads a graph file into a [`Sample`].
pub fn load_sample(path: &Path, weights: LossWeights) -> Result<Sample> {
    let mut parts = load_parts(path, weights, 1, 0.0)?;
    Ok(parts.remove(0))
}

/// Reads a graph file as `parts` overlapping φ sectors (the whole graph if `parts` ≤ 1), each
/// edge owned by one sector ([`trackgnn_graph::sectors`]).
///
/// A secondary weight other than 1 needs the graph's production-vertex radii
/// (`particle_vertex_r`, written by `build-graphs` since 2026-11-27); an older graph is a
/// [`ModelError::Corrupt`] naming the file.
pub fn load_parts(path: &Path, weights: LossWeights, parts: usize, overlap_phi: f64) -> Result<Vec<Sample>> {
    let g = read_training_graph(path, weights)?;
    if parts <= 1 {
        return Ok(vec![sample_of(&g, weights, 1.0)]);
    }
    let whole = g.num_edges().max(1) as f64;
    let cfg = SectorConfig::new(parts, 1, overlap_phi, 0.0);
    // The auxiliary loss's mean is over the whole graph's true edges, as the BCE's over its edges.
    let aux_edges = aux_targets(&g).1.iter().filter(|&&w| w > 0.0).count();
    let sector = |s: &Graph| Sample { aux_edges, ..sample_of(s, weights, s.num_edges() as f64 / whole) };
    Ok(split(&g, &cfg).iter().map(sector).collect())
}

/// Reads a graph file for training: it must have truth labels, and the production-vertex radii
/// when `weights` need them.
fn read_training_graph(path: &Path, weights: LossWeights) -> Result<Graph> {
    let g = read_graph(path)?;
    let Some(t) = &g.truth else {
        return Err(Error::Model(ModelError::Corrupt {
            path: path.to_path_buf(),
            message: "graph has no truth labels".into(),
        }));
    };
    if weights.secondary != 1.0 && t.particle_vertex_r.is_empty() {
        return Err(Error::Model(ModelError::Corrupt {
            path: path.to_path_buf(),
            message: "graph has no production-vertex radii (particle_vertex_r), which secondary_weight needs: \
                      rebuild it with build-graphs"
                .into(),
        }));
    }
    Ok(g)
}

fn sample_of(g: &Graph, weights: LossWeights, loss_scale: f64) -> Sample {
    let t = g.truth.as_ref().expect("checked by the caller");
    let owned = |e: usize| g.edge_owned.get(e).is_none_or(|&o| o != 0);
    let secondary = |e: usize| t.particle_vertex_r.get(g.src[e] as usize).is_some_and(|&r| r > PROMPT_R);
    let weight = (0..g.num_edges())
        .map(|e| match (owned(e), t.y[e] == 1, t.target[e] == 1) {
            (false, _, _) => 0.0,
            (true, true, false) => weights.non_target as f32,
            (true, true, true) if secondary(e) => weights.secondary as f32,
            (true, _, _) => 1.0,
        })
        .collect();
    let input = graph_input(g);
    let (log_pt, aux_weight) = aux_targets(g);
    let aux_edges = aux_weight.iter().filter(|&&w| w > 0.0).count();
    let (target, y) = (t.target.clone(), t.y.clone());
    Sample { event_id: g.event_id, input, target, y, weight, loss_scale, halo: None, log_pt, aux_weight, aux_edges }
}

/// The auxiliary target of each edge of `g` (log10 pT \[GeV\] of its source node's particle, 0
/// where it has none) and its weight (1 for the true edges the graph owns whose particle has a
/// positive pT, else 0). `g` must have truth.
fn aux_targets(g: &Graph) -> (Vec<f32>, Vec<f32>) {
    let t = g.truth.as_ref().expect("checked by the caller");
    let owned = |e: usize| g.edge_owned.get(e).is_none_or(|&o| o != 0);
    let pt = |e: usize| t.particle_pt.get(g.src[e] as usize).copied().unwrap_or(0.0);
    let log_pt = (0..g.num_edges()).map(|e| if pt(e) > 0.0 { pt(e).log10() } else { 0.0 }).collect();
    let weight = (0..g.num_edges()).map(|e| (owned(e) && t.y[e] == 1 && pt(e) > 0.0) as u8 as f32).collect();
    (log_pt, weight)
}

/// Reads a graph file as partition `rank` of `parts` (domain parallelism: φ sectors that
/// balance the edges, [`phi_owners`]): its owned nodes, their edges and its halo, the edges it
/// does not count weighing 0 in the loss and `loss_scale` making the partitions' mean losses
/// sum to the whole graph's.
pub fn load_partition(path: &Path, weights: LossWeights, rank: usize, parts: usize) -> Result<Sample> {
    let g = read_training_graph(path, weights)?;
    let whole = sample_of(&g, weights, 1.0);
    let owner = phi_owners(&g, parts);
    let partitions = Partition::split(g.num_nodes(), &g.src, &g.dst, &owner, parts).map_err(|e| {
        Error::Model(ModelError::Corrupt { path: path.to_path_buf(), message: format!("cannot split it: {e}") })
    })?;
    let p = &partitions[rank];
    let counted = |v: &[f32]| -> Vec<f32> {
        p.edge_values(v).iter().zip(&p.edge_counted).map(|(&w, &c)| if c { w } else { 0.0 }).collect()
    };
    let weight = counted(&whole.weight);
    Ok(Sample {
        event_id: whole.event_id,
        input: p.local_input(&whole.input),
        target: p.edge_values(&whole.target),
        y: p.edge_values(&whole.y),
        weight,
        loss_scale: p.edges.len() as f64 / whole.input.num_edges().max(1) as f64,
        halo: Some(p.plan.clone()),
        log_pt: p.edge_values(&whole.log_pt),
        aux_weight: counted(&whole.aux_weight),
        aux_edges: whole.aux_edges,
    })
}

/// Loads graphs on a background thread, one ahead of the consumer.
pub struct Prefetcher {
    rx: Receiver<Result<Vec<Sample>>>,
    handle: Option<JoinHandle<()>>,
}

impl Prefetcher {
    /// Starts loading `paths` in order, each whole.
    pub fn new(paths: Vec<PathBuf>, weights: LossWeights) -> Prefetcher {
        Prefetcher::with_parts(paths.into_iter().map(|p| (p, 1)).collect(), weights, 0.0)
    }

    /// Starts loading `(path, parts)` in order, each cut into `parts` φ sectors.
    pub fn with_parts(paths: Vec<(PathBuf, usize)>, weights: LossWeights, overlap_phi: f64) -> Prefetcher {
        Prefetcher::spawn(paths, move |(p, k)| load_parts(&p, weights, k, overlap_phi))
    }

    /// Starts loading `paths` in order, each as partition `rank` of `parts`
    /// ([`load_partition`]).
    pub fn domain(paths: Vec<PathBuf>, weights: LossWeights, rank: usize, parts: usize) -> Prefetcher {
        Prefetcher::spawn(paths, move |p| load_partition(&p, weights, rank, parts).map(|s| vec![s]))
    }

    /// Loads each item with `load` on a background thread, one ahead of the consumer.
    fn spawn<I: Send + 'static>(items: Vec<I>, load: impl Fn(I) -> Result<Vec<Sample>> + Send + 'static) -> Prefetcher {
        let (tx, rx) = sync_channel(1);
        let handle = std::thread::Builder::new()
            .name("graph-loader".into())
            .spawn(move || {
                for item in items {
                    if tx.send(load(item)).is_err() {
                        return;
                    }
                }
            })
            .expect("spawning the loader thread");
        Prefetcher { rx, handle: Some(handle) }
    }

    /// The next graph (`None` when all are delivered).
    pub fn next_sample(&mut self) -> Option<Result<Sample>> {
        self.next_parts().map(|r| r.map(|mut v| v.remove(0)))
    }

    /// The parts of the next graph (`None` when all are delivered).
    pub fn next_parts(&mut self) -> Option<Result<Vec<Sample>>> {
        self.rx.recv().ok()
    }
}

impl Drop for Prefetcher {
    fn drop(&mut self) {
        // Dropping the receiver first makes the loader's next send fail, so it stops.
        let (_tx, rx) = sync_channel(0);
        drop(std::mem::replace(&mut self.rx, rx));
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_a_seeded_partition() {
        let s = Split::new(100, [0.8, 0.1, 0.1], 3);
        assert_eq!((s.train.len(), s.val.len(), s.test.len()), (80, 10, 10));
        let mut all: Vec<usize> = s.train.iter().chain(&s.val).chain(&s.test).copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..100).collect::<Vec<_>>());
        assert_eq!(s, Split::new(100, [0.8, 0.1, 0.1], 3));
        assert_ne!(s.train, Split::new(100, [0.8, 0.1, 0.1], 4).train);
    }

    #[test]
    fn fewest_events_for_a_validation_event() {
        assert_eq!(Split::events_for_validation([0.8, 0.1, 0.1]), Some(5));
        assert_eq!(Split::sizes(4, [0.8, 0.1, 0.1]), (3, 0));
        assert_eq!(Split::sizes(5, [0.8, 0.1, 0.1]), (4, 1));
        assert_eq!(Split::events_for_validation([0.5, 0.5, 0.0]), Some(2));
        // Training's rounding takes every event up to 5: round(0.9 × 5) = 5.
        assert_eq!(Split::events_for_validation([0.9, 0.1, 0.0]), Some(6));
        assert_eq!(Split::events_for_validation([0.9, 0.0, 0.1]), None);
        for f in [[0.8, 0.1, 0.1], [0.7, 0.15, 0.15], [0.98, 0.01, 0.01], [0.6, 0.4, 0.0]] {
            let n = Split::events_for_validation(f).unwrap();
            assert!(Split::sizes(n, f).1 > 0 && (1..n).all(|m| Split::sizes(m, f).1 == 0), "{f:?}: {n}");
        }
    }

    fn set(edges: Vec<u64>) -> GraphSet {
        let n = edges.len();
        GraphSet { files: (0..n).map(|i| (i as u64, PathBuf::new())).collect(), edges, nodes: vec![1; n] }
    }

    #[test]
    fn random_groups_are_disjoint_equal_and_reshuffled() {
        let cfg = TrainConfig { graphs_per_step: 2, ..TrainConfig::default() };
        let s = set(vec![10; 21]);
        let train: Vec<usize> = (0..21).collect();
        let g0 = epoch_groups(&cfg, &s, &train, 2, 0);
        assert_eq!(g0.len(), 5, "21 graphs, 4 per step");
        assert!(g0.iter().all(|g| g.len() == 4));
        let mut seen: Vec<usize> = g0.concat();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 20, "disjoint");
        assert_ne!(g0, epoch_groups(&cfg, &s, &train, 2, 1), "reshuffled each epoch");
        assert_eq!(g0, epoch_groups(&cfg, &s, &train, 2, 0), "same seed, same order");
    }

    #[test]
    fn balanced_groups_draw_from_one_size_bin() {
        let cfg = TrainConfig { sampler: Sampler::Balanced, sampler_bins: 4, ..TrainConfig::default() };
        let edges: Vec<u64> = (0..40).map(|i| 1000 + 100 * i).collect();
        let s = set(edges.clone());
        let train: Vec<usize> = (0..40).collect();
        let groups = epoch_groups(&cfg, &s, &train, 2, 0);
        assert_eq!(groups.len(), 20);
        for g in &groups {
            // Bins of 10 consecutive sizes: both graphs of a step from the same bin.
            assert_eq!(g[0] / 10, g[1] / 10, "{g:?}");
        }
    }
}
