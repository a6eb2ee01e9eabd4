//! Metric-learning graph construction (the Exa.TrkX route): every hit is embedded by a learned
//! network ([`HitEmbedder`]), hits closer than a radius in the embedding space are joined (at
//! most `k_max` neighbours per hit, found with a k-d tree from the `kiddo` crate), and an edge
//! filter ([`EdgeScorer`]) may prune the candidates before the GNN.
//!
//! The networks live with training (`trackgnn-train`); this crate only sees them through the
//! two traits, so the dependency arrows stay graph → engine → train.

use std::num::NonZero;

use kiddo::SquaredEuclidean;
use kiddo::immutable::float::kdtree::ImmutableKdTree;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::features::HitTable;
use crate::truth::{key_pair, pair_key};

/// How a metric-learning graph is built: the runs of the two networks and their cuts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricLearningConfig {
    /// The embedding's training run directory.
    pub embedding_run: String,
    /// Content hash of its weights file (see [`crate::module_map::file_hash`]).
    #[serde(default)]
    pub embedding_hash: Option<String>,
    /// Hits closer than this in the embedding space are joined.
    pub radius: f64,
    /// At most this many neighbours per hit (the nearest).
    pub k_max: usize,
    /// The edge filter's training run directory, if the graph is filtered.
    #[serde(default)]
    pub filter_run: Option<String>,
    /// Content hash of the filter's weights file.
    #[serde(default)]
    pub filter_hash: Option<String>,
    /// Edges whose filter score is below this are dropped.
    #[serde(default = "default_filter_cut")]
    pub filter_cut: f64,
}

fn default_filter_cut() -> f64 {
    0.1
}

/// A learned map from hits to points of an embedding space.
pub trait HitEmbedder: Sync {
    /// Width of the embedding.
    fn dim(&self) -> usize;
    /// The embedding of every node of the table, row-major (nodes × [`HitEmbedder::dim`]).
    ///
    /// # Errors
    /// A feature the table cannot give (e.g. cell features without cells).
    fn embed(&self, table: &HitTable) -> Result<Vec<f32>>;
}

/// A learned score in \[0, 1\] for candidate edges (the edge filter).
pub trait EdgeScorer: Sync {
    /// One score per edge (src\[i\], dst\[i\]), given the table's hits and their
    /// `embedding` (nodes × `dim`, row-major: the [`HitEmbedder`]'s, whose distances a
    /// filter may use).
    ///
    /// # Errors
    /// A feature the table cannot give.
    fn score(&self, table: &HitTable, embedding: &[f32], dim: usize, src: &[u32], dst: &[u32]) -> Result<Vec<f32>>;
}

/// Unordered pairs (i < j) of rows of `emb` (rows × dim) with i among the `k_max` nearest rows
/// of j within `radius`, or j among those of i; sorted. Uses a k-d tree (dim 1 to 16), queried
/// in parallel on the current rayon pool; the pairs do not depend on the pool's size.
///
/// # Errors
/// A dimension outside 1..=16 or a `k_max` of 0.
pub fn radius_pairs(emb: &[f32], dim: usize, radius: f64, k_max: usize) -> Result<Vec<(u32, u32)>> {
    let k = NonZero::new(k_max).ok_or_else(|| Error::Config("metric learning: k_max must be at least 1".into()))?;
    macro_rules! dispatch {
        ($($d:literal)*) => {
            match dim {
                $($d => radius_pairs_k::<$d>(emb, radius as f32, k),)*
                _ => return Err(Error::Config(format!("metric learning: embedding dimension {dim} (supported: 1 to 16)"))),
            }
        };
    }
    let mut keys = dispatch!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
    keys.par_sort_unstable();
    keys.dedup();
    Ok(keys.par_iter().map(|&key| key_pair(key)).collect())
}

/// Query points per rayon task. Each task's pairs are kept in task order, so the result is the
/// same whatever the number of threads.
const QUERY_CHUNK: usize = 1024;

/// Up to this many neighbours, kiddo's sorted query collects them in a sorted vector; beyond,
/// in the same binary heap as its unsorted query (`MAX_VEC_RESULT_SIZE` in kiddo 5.3), so only
/// there the unsorted query finds the same neighbours, ties included.
const KIDDO_SORTED_MAX: usize = 20;

/// The k-d tree: kiddo's default leaf size (another one breaks ties between equally distant
/// neighbours otherwise), point indices as u32 (smaller query heaps than the default u64).
type Tree<const K: usize> = ImmutableKdTree<f32, u32, K, 32>;

/// The pairs of [`radius_pairs`] as [`pair_key`]s, unsorted, with repeats.
fn radius_pairs_k<const K: usize>(emb: &[f32], radius: f32, k: NonZero<usize>) -> Vec<u64> {
    let points: Vec<[f32; K]> = emb.chunks_exact(K).map(|c| std::array::from_fn(|i| c[i])).collect();
    if points.is_empty() {
        return Vec::new();
    }
    let tree: Tree<K> = ImmutableKdTree::new_from_slice(&points);
    let chunks: Vec<Vec<u64>> = points
        .par_chunks(QUERY_CHUNK)
        .enumerate()
        .map(|(c, chunk)| {
            let mut keys = Vec::with_capacity(chunk.len() * k.get());
            for (o, p) in chunk.iter().enumerate() {
                nearest_keys(&tree, p, c * QUERY_CHUNK + o, radius * radius, k, &mut keys);
            }
            keys
        })
        .collect();
    chunks.concat()
}

/// Appends the pairs of point `i` (at `p`) and its `k` nearest other points within squared
/// distance `r2`.
fn nearest_keys<const K: usize>(
    tree: &Tree<K>,
    p: &[f32; K],
    i: usize,
    r2: f32,
    k: NonZero<usize>,
    keys: &mut Vec<u64>,
) {
    let key = |j: u32| pair_key(i as u32, j);
    // One more than k: the query point itself is its own nearest neighbour.
    let k1 = k.saturating_add(1);
    if k1.get() > KIDDO_SORTED_MAX {
        // Unsorted: the order of the k + 1 found does not matter when the point is among them,
        // and sorting them costs a tenth of the query (k = 48, 8 dimensions).
        let found = tree.nearest_n_within::<SquaredEuclidean>(p, r2, k1, false);
        if found.iter().any(|nb| nb.item == i as u32) {
            keys.extend(found.iter().filter(|nb| nb.item != i as u32).map(|nb| key(nb.item)));
            return;
        }
        // The point is missing only when k + 1 others lie at distance 0 from it (duplicates) or
        // its embedding is not finite: then the sorted query below, ties as the tree breaks them.
    }
    // Up to KIDDO_SORTED_MAX, kiddo keeps the neighbours in a sorted vector (another tie order
    // than its heap): the k nearest in that order.
    let sorted = tree.nearest_n_within::<SquaredEuclidean>(p, r2, k1, true);
    keys.extend(sorted.iter().filter(|nb| nb.item != i as u32).take(k.get()).map(|nb| key(nb.item)));
}

/// The slow twin of [`radius_pairs`]: every pair's distance. For tests.
pub fn radius_pairs_brute(emb: &[f32], dim: usize, radius: f64, k_max: usize) -> Vec<(u32, u32)> {
    let n = emb.len() / dim;
    let r2 = (radius * radius) as f32;
    let mut pairs = Vec::new();
    for i in 0..n {
        let mut near: Vec<(f32, usize)> = (0..n)
            .filter(|&j| j != i)
            .map(|j| ((0..dim).map(|c| (emb[i * dim + c] - emb[j * dim + c]).powi(2)).sum::<f32>(), j))
            .filter(|&(d2, _)| d2 <= r2)
            .collect();
        near.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for &(_, j) in near.iter().take(k_max) {
            pairs.push(if i < j { (i as u32, j as u32) } else { (j as u32, i as u32) });
        }
    }
    pairs.sort_unstable();
    pairs.dedup();
    pairs
}

/// Directs each pair from the hit nearer the origin to the farther one (the order of the
/// other builders), ties by node index.
pub fn orient(t: &HitTable, pairs: &[(u32, u32)]) -> (Vec<u32>, Vec<u32>) {
    let d = |i: u32| {
        let i = i as usize;
        t.r[i] * t.r[i] + t.z[i] * t.z[i]
    };
    pairs.iter().map(|&(a, b)| if (d(a), a) <= (d(b), b) { (a, b) } else { (b, a) }).unzip()
}

/// The metric-learning edges of a table: embedding, radius graph, then the filter's cut when a
/// filter is given.
///
/// # Errors
/// Those of the embedder, the filter and [`radius_pairs`].
pub fn build(
    t: &HitTable,
    cfg: &MetricLearningConfig,
    embedder: &dyn HitEmbedder,
    filter: Option<&dyn EdgeScorer>,
) -> Result<(Vec<u32>, Vec<u32>)> {
    let emb = embedder.embed(t)?;
    let pairs = radius_pairs(&emb, embedder.dim(), cfg.radius, cfg.k_max)?;
    let (src, dst) = orient(t, &pairs);
    let Some(filter) = filter else {
        return Ok((src, dst));
    };
    let scores = filter.score(t, &emb, embedder.dim(), &src, &dst)?;
    let cut = cfg.filter_cut as f32;
    Ok(src.iter().zip(&dst).zip(&scores).filter(|&(_, &s)| s >= cut).map(|((&a, &b), _)| (a, b)).unzip())
}

#[cfg(test)]
mod tests {
    use super::*;
    use trackgnn_trackml::rng::Rng;

    /// A metric-learning stage of test embedder and filter (never read from disk).
    fn test_config(radius: f64, k_max: usize, filter_cut: f64) -> MetricLearningConfig {
        MetricLearningConfig {
            embedding_run: "unused".into(),
            embedding_hash: None,
            radius,
            k_max,
            filter_run: Some("unused".into()),
            filter_hash: None,
            filter_cut,
        }
    }

    #[test]
    fn the_kd_tree_radius_graph_equals_brute_force() {
        let mut rng = Rng::new(11);
        for (dim, n, radius, k_max) in
            [(3, 400, 0.3, 1000), (8, 500, 1.2, 1000), (8, 500, 1.2, 4), (1, 50, 0.05, 2), (6, 300, f64::INFINITY, 5)]
        {
            let emb: Vec<f32> = (0..n * dim).map(|_| rng.normal() as f32 * 0.7).collect();
            let fast = radius_pairs(&emb, dim, radius, k_max).unwrap();
            let slow = radius_pairs_brute(&emb, dim, radius, k_max);
            assert!(!slow.is_empty(), "dim {dim}: no pairs at all");
            assert_eq!(fast, slow, "dim {dim}, radius {radius}, k_max {k_max}");
        }
        assert!(radius_pairs(&[0.0; 17], 17, 1.0, 3).unwrap_err().to_string().contains("17"));
        assert!(radius_pairs(&[0.0; 4], 2, 1.0, 0).is_err());
        assert!(radius_pairs(&[], 4, 1.0, 3).unwrap().is_empty());
    }

    /// The k-d tree graph as built before the queries ran in parallel: one point after another,
    /// each point's neighbours sorted by the tree. Ties at the k-th distance are broken by the
    /// tree's order, which brute force cannot reproduce, so duplicated points are checked
    /// against this.
    fn radius_pairs_serial<const K: usize>(emb: &[f32], radius: f32, k: usize) -> Vec<(u32, u32)> {
        let points: Vec<[f32; K]> = emb.chunks_exact(K).map(|c| std::array::from_fn(|i| c[i])).collect();
        let tree: kiddo::ImmutableKdTree<f32, K> = kiddo::ImmutableKdTree::new_from_slice(&points);
        let mut pairs = Vec::new();
        for (i, p) in points.iter().enumerate() {
            let found =
                tree.nearest_n_within::<SquaredEuclidean>(p, radius * radius, NonZero::new(k + 1).unwrap(), true);
            for j in found.iter().map(|nb| nb.item as usize).filter(|&j| j != i).take(k) {
                pairs.push(if i < j { (i as u32, j as u32) } else { (j as u32, i as u32) });
            }
        }
        pairs.sort_unstable();
        pairs.dedup();
        pairs
    }

    #[test]
    fn the_parallel_queries_give_the_serial_graph_at_any_thread_count() {
        let mut rng = Rng::new(29);
        let pools: Vec<rayon::ThreadPool> =
            [1, 2, 3, 4].iter().map(|&n| rayon::ThreadPoolBuilder::new().num_threads(n).build().unwrap()).collect();
        // Several query chunks, with a ragged last one.
        let n = 3 * QUERY_CHUNK + 17;
        let emb: Vec<f32> = (0..n * 4).map(|_| rng.normal() as f32).collect();
        let slow = radius_pairs_brute(&emb, 4, 1.0, 7);
        // Most points have more than k neighbours within the radius: the cut at k matters.
        assert!(
            slow.len() > 3 * n && radius_pairs_brute(&emb, 4, 1.0, 1000).len() > 2 * slow.len(),
            "{} pairs",
            slow.len()
        );
        assert_eq!(radius_pairs_serial::<4>(&emb, 1.0, 7), slow);
        for pool in &pools {
            let fast = pool.install(|| radius_pairs(&emb, 4, 1.0, 7).unwrap());
            assert_eq!(fast, slow, "{} threads", pool.current_num_threads());
        }
        // Duplicated points: clusters of up to 40 copies at distance 0, more than k + 1, so the
        // tree breaks ties and some points are not among their own k + 1 nearest; k on both
        // sides of kiddo's sorted-vector size.
        let mut dup: Vec<f32> = Vec::new();
        for c in 0..(3 * QUERY_CHUNK / 20) {
            let centre = [rng.normal() as f32, rng.normal() as f32, rng.normal() as f32];
            for _ in 0..1 + c % 40 {
                dup.extend(centre);
            }
        }
        for k in [6, 30] {
            let serial = radius_pairs_serial::<3>(&dup, 0.5, k);
            assert!(serial.len() > dup.len() / 3);
            for pool in &pools {
                let fast = pool.install(|| radius_pairs(&dup, 3, 0.5, k).unwrap());
                assert!(fast == serial, "duplicates, k {k}, {} threads", pool.current_num_threads());
            }
        }
    }

    /// A fixed "embedding": the hit position in metres (learned ones behave the same here).
    struct Position;
    impl HitEmbedder for Position {
        fn dim(&self) -> usize {
            3
        }
        fn embed(&self, t: &HitTable) -> Result<Vec<f32>> {
            Ok((0..t.len()).flat_map(|i| [t.x[i] / 1000.0, t.y[i] / 1000.0, t.z[i] / 1000.0]).collect())
        }
    }
    /// A fixed "filter": short edges score high.
    struct Short;
    impl EdgeScorer for Short {
        fn score(&self, t: &HitTable, _: &[f32], _: usize, src: &[u32], dst: &[u32]) -> Result<Vec<f32>> {
            Ok(src
                .iter()
                .zip(dst)
                .map(|(&a, &b)| 1.0 / (1.0 + (t.r[b as usize] - t.r[a as usize]).abs() / 50.0))
                .collect())
        }
    }

    #[test]
    fn the_hybrid_graph_is_the_same_at_any_thread_count() {
        use crate::recipe::{GraphMethod, GraphRecipe, Stages, build_graph_with};
        use trackgnn_simulate::{Generator, SimConfig};
        use trackgnn_trackml::Detector;
        let generator = Generator::new(Detector::trackml(), SimConfig { pileup: 10.0, ..SimConfig::default() });
        let det = generator.detector();
        let mut map = crate::ModuleMap::new(Default::default());
        for id in 1..=3 {
            map.add_training_event(&generator.event(7, id).0, det).unwrap();
        }
        let (event, _) = generator.event(7, 4);
        let mut recipe = GraphRecipe::new(GraphMethod::Hybrid);
        recipe.map_margin.relative = 0.3;
        recipe.metric_learning = Some(test_config(0.1, 24, 0.3));
        let stages = Stages { map: Some(&map), embedder: Some(&Position), filter: Some(&Short) };
        let build = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| build_graph_with(&event, det, &recipe, stages).unwrap().0)
        };
        let one = build(1);
        // Enough nodes and edges for many parallel tasks of every stage.
        assert!(one.num_nodes() > 4 * QUERY_CHUNK && one.num_edges() > 5 * one.num_nodes());
        for threads in [2, 3, 4] {
            let many = build(threads);
            assert!(many.src == one.src && many.dst == one.dst, "{threads} threads: other edges");
            assert_eq!(many.edge_features, one.edge_features, "{threads} threads");
            assert_eq!(many.truth.as_ref().unwrap().y, one.truth.as_ref().unwrap().y);
        }
    }

    #[test]
    fn metric_and_hybrid_graphs_rebuild_without_truth_and_the_hybrid_is_the_union() {
        use crate::recipe::{GraphMethod, GraphRecipe, Stages, build_graph_with};
        use trackgnn_simulate::{Generator, SimConfig};
        use trackgnn_trackml::Detector;
        let generator = Generator::new(Detector::trackml(), SimConfig { pileup: 2.0, ..SimConfig::default() });
        let (event, _) = generator.event(5, 1);
        let det = generator.detector();
        let mut map = crate::ModuleMap::new(Default::default());
        map.add_training_event(&event, det).unwrap();
        let mut recipe = GraphRecipe::new(GraphMethod::MetricLearning);
        recipe.metric_learning = Some(test_config(0.12, 6, 0.5));
        let stages = Stages { map: Some(&map), embedder: Some(&Position), filter: Some(&Short) };
        let mut no_truth = event.clone();
        no_truth.truth = None;
        no_truth.particles = None;
        let edges = |recipe: &GraphRecipe| {
            let (with, stats) = build_graph_with(&event, det, recipe, stages).unwrap();
            let (without, _) = build_graph_with(&no_truth, det, &recipe.for_inference(), stages).unwrap();
            assert!(with.truth.is_some() && without.truth.is_none());
            assert_eq!(
                (&with.src, &with.dst),
                (&without.src, &without.dst),
                "{:?}: rebuilt without truth",
                recipe.method
            );
            assert_eq!(with.edge_features, without.edge_features);
            assert!(stats.edges > 0 && stats.target_edges > 0, "{stats:?}");
            let keys: std::collections::HashSet<u64> =
                with.src.iter().zip(&with.dst).map(|(&a, &b)| crate::truth::pair_key(a, b)).collect();
            assert_eq!(keys.len(), with.src.len(), "{:?}: deduplicated", recipe.method);
            keys
        };
        let metric = edges(&recipe);
        // The filter prunes: without it there are more edges.
        let mut unfiltered = recipe.clone();
        unfiltered.metric_learning.as_mut().unwrap().filter_cut = 0.0;
        assert!(edges(&unfiltered).len() > metric.len());
        recipe.method = GraphMethod::ModuleMap;
        let mapped = edges(&recipe);
        recipe.method = GraphMethod::Hybrid;
        let hybrid = edges(&recipe);
        let union: std::collections::HashSet<u64> = metric.union(&mapped).copied().collect();
        assert_eq!(hybrid, union);
        assert!(hybrid.len() > metric.len() && hybrid.len() > mapped.len());
        // A missing stage is an error, not an empty graph.
        let e = build_graph_with(&event, det, &recipe, Stages { map: Some(&map), ..Stages::default() }).unwrap_err();
        assert!(e.to_string().contains("embedding"), "{e}");
    }
}
