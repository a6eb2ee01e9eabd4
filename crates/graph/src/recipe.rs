//! How a graph directory was built (the recipe written beside the graphs) and the function that
//! turns an event into a graph with it.

use std::collections::HashSet;
use std::time::Instant;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use trackgnn_trackml::Event;
use trackgnn_trackml::geometry::Detector;

use crate::direction::{EdgeDirection, orient_outward};
use crate::error::{Error, Result};
use crate::features::{FeatureConfig, HitTable, NodeCuts};
use crate::geometric::{self, GeometricConfig, dphi};
use crate::graph::{Graph, GraphTruth};
use crate::metric::{self, EdgeScorer, HitEmbedder, MetricLearningConfig};
use crate::module_map::{MapMargin, ModuleMap};
use crate::truth::{TargetConfig, key_pair, pair_key, truth_edges};

mod overrides;
pub use crate::error::OverrideError;
pub use crate::method::GraphMethod;
pub use overrides::{EmbeddingRun, FilterRun, LearnedRun, RecipeOverrides, absolute};

/// File name of a graph directory's recipe ([`GraphRecipe`], TOML), written beside its graphs
/// and copied into the training runs on them.
pub const RECIPE_FILE: &str = "recipe.toml";

/// Everything that decides how an event becomes a graph. Written as `recipe.toml` in a graph
/// directory, copied into training runs, and used by inference (without its truth cuts).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphRecipe {
    /// The edge builder.
    pub method: GraphMethod,
    /// Which hits become nodes.
    #[serde(default)]
    pub node_cuts: NodeCuts,
    /// Node features and their scaling.
    #[serde(default)]
    pub features: FeatureConfig,
    /// Which true edges are targets.
    #[serde(default)]
    pub target: TargetConfig,
    /// Cuts of the geometric builder.
    #[serde(default)]
    pub geometric: GeometricConfig,
    /// The module map file (module-map method).
    #[serde(default)]
    pub map_file: Option<String>,
    /// Content hash of the module map file, see [`crate::module_map::file_hash`].
    #[serde(default)]
    pub map_hash: Option<String>,
    /// Margin around the module map's ranges.
    #[serde(default)]
    pub map_margin: MapMargin,
    /// Store edge features (dr/1000, dphi/π, dz/1000, deta).
    #[serde(default = "default_true")]
    pub edge_features: bool,
    /// True if the node cuts used truth (so inference must drop them).
    #[serde(default)]
    pub truth_cuts_applied: bool,
    /// Sectors the graph files were cut into (training on parts of events); inference and
    /// evaluation build whole events.
    #[serde(default)]
    pub sectors: Option<crate::sectors::SectorConfig>,
    /// The embedding and filter runs and their cuts (metric-learning and hybrid methods).
    #[serde(default)]
    pub metric_learning: Option<MetricLearningConfig>,
    /// How edges are stored: `outward` along the particle's path (new recipes), or `as-built`
    /// (recipes written before the key existed, so their runs rebuild the same graphs).
    #[serde(default)]
    pub edge_direction: EdgeDirection,
}

fn default_true() -> bool {
    true
}

impl GraphRecipe {
    /// The recipe of a TOML file (the keys of [`GraphRecipe`]).
    ///
    /// # Errors
    /// The file cannot be read or is not a valid recipe.
    pub fn read(path: &std::path::Path) -> Result<GraphRecipe> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        toml::from_str(&text).map_err(|e| Error::corrupt(path, format!("invalid graph recipe: {e}")))
    }

    /// A recipe with default settings for a method.
    pub fn new(method: GraphMethod) -> Self {
        GraphRecipe {
            method,
            node_cuts: NodeCuts::default(),
            features: FeatureConfig::default(),
            target: TargetConfig::default(),
            geometric: GeometricConfig::default(),
            map_file: None,
            map_hash: None,
            map_margin: MapMargin::default(),
            edge_features: true,
            truth_cuts_applied: false,
            sectors: None,
            metric_learning: None,
            edge_direction: EdgeDirection::Outward,
        }
    }

    /// True if the method needs a module map.
    pub fn needs_map(&self) -> bool {
        matches!(self.method, GraphMethod::ModuleMap | GraphMethod::Hybrid)
    }

    /// True if the method needs the metric-learning stages.
    pub fn needs_embedding(&self) -> bool {
        matches!(self.method, GraphMethod::MetricLearning | GraphMethod::Hybrid)
    }

    /// The recipe inference uses: the same, without truth-based node cuts.
    pub fn for_inference(&self) -> GraphRecipe {
        GraphRecipe {
            node_cuts: self.node_cuts.without_truth(),
            truth_cuts_applied: false,
            sectors: None,
            ..self.clone()
        }
    }
}

/// Names of the edge features, when stored.
pub const EDGE_FEATURE_NAMES: [&str; 4] = ["dr", "dphi", "dz", "deta"];

/// Figures of one built graph (graph-construction figures, not GNN metrics).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BuildStats {
    /// Event number.
    pub event_id: u64,
    /// Nodes.
    pub nodes: u64,
    /// Edges.
    pub edges: u64,
    /// Edges joining consecutive hits of one particle.
    pub true_edges: u64,
    /// True edges of target particles in the graph.
    pub target_edges: u64,
    /// True edges of the event (after node cuts).
    pub event_true_edges: u64,
    /// Target edges of the event (after node cuts).
    pub event_target_edges: u64,
    /// Graph efficiency: target edges in the graph / target edges of the event.
    pub efficiency: f64,
    /// Graph purity: true edges / edges.
    pub purity: f64,
    /// Target edges of the event whose particle was produced within [`PROMPT_R`] of the beam
    /// line (prompt), and of those, how many the graph has.
    pub event_prompt_target_edges: u64,
    /// Prompt target edges in the graph.
    pub prompt_target_edges: u64,
    /// Graph efficiency over prompt target edges.
    pub efficiency_prompt: f64,
    /// Graph efficiency over target edges of secondaries (particles produced farther out).
    pub efficiency_secondary: f64,
    /// Seconds to build (preprocessing, edges, labels; not reading or writing).
    pub build_seconds: f64,
    /// With sectors: the fraction of the whole graph's target edges present in some sector.
    pub sector_coverage: Option<f64>,
}

/// Particles produced within this distance of the beam line \[mm\] are prompt (the beam spot is
/// 15 µm wide); the others are secondaries of decays and of interactions in the material.
pub const PROMPT_R: f32 = 1.0;

/// The loaded stages a recipe's method may need besides the event: the module map, the
/// embedding network and the edge filter.
#[derive(Clone, Copy, Default)]
pub struct Stages<'a> {
    /// The module map (module-map and hybrid methods).
    pub map: Option<&'a ModuleMap>,
    /// The hit embedding (metric-learning and hybrid methods).
    pub embedder: Option<&'a dyn HitEmbedder>,
    /// The edge filter of the metric-learning edges, if the recipe names one.
    pub filter: Option<&'a dyn EdgeScorer>,
}

/// Builds an event's graph with a recipe. Truth labels are attached when the event has truth.
/// For the methods that need no learned stage; see [`build_graph_with`].
///
/// # Errors
/// Truth cuts on an event without truth, an unknown feature, a missing module map, a hit on a
/// module the detector lacks.
pub fn build_graph(
    event: &Event,
    det: &Detector,
    recipe: &GraphRecipe,
    map: Option<&ModuleMap>,
) -> Result<(Graph, BuildStats)> {
    build_graph_with(event, det, recipe, Stages { map, ..Stages::default() })
}

/// [`build_graph`] with every stage a method may need.
///
/// # Errors
/// Those of [`build_graph`], a missing stage, and the errors of the learned stages.
pub fn build_graph_with(
    event: &Event,
    det: &Detector,
    recipe: &GraphRecipe,
    stages: Stages<'_>,
) -> Result<(Graph, BuildStats)> {
    let t0 = Instant::now();
    let table = HitTable::build(event, det, &recipe.node_cuts)?;
    let map_edges = |table: &HitTable| -> Result<(Vec<u32>, Vec<u32>)> {
        let map =
            stages.map.ok_or_else(|| Error::Config(format!("the {:?} method needs a module map", recipe.method)))?;
        Ok(map.build_edges(table, &recipe.map_margin))
    };
    let metric_edges = |table: &HitTable| -> Result<(Vec<u32>, Vec<u32>)> {
        let cfg = recipe.metric_learning.as_ref().ok_or_else(|| {
            Error::Config(format!("the {:?} method needs [metric_learning] in the recipe", recipe.method))
        })?;
        let embedder = stages
            .embedder
            .ok_or_else(|| Error::Config(format!("the {:?} method needs an embedding", recipe.method)))?;
        if cfg.filter_run.is_some() && stages.filter.is_none() {
            return Err(Error::Config("the recipe names an edge filter that was not loaded".into()));
        }
        metric::build(table, cfg, embedder, stages.filter)
    };
    let (src, dst) = match recipe.method {
        GraphMethod::Geometric => geometric::build(&table, det, &recipe.geometric),
        GraphMethod::ModuleMap => map_edges(&table)?,
        GraphMethod::MetricLearning => metric_edges(&table)?,
        GraphMethod::Hybrid => {
            // The two stages are independent: each runs on the pool's threads the other leaves.
            let (mapped, metric) = rayon::join(|| map_edges(&table), || metric_edges(&table));
            let ((mut src, mut dst), (s2, d2)) = (mapped?, metric?);
            src.extend(s2);
            dst.extend(d2);
            (src, dst)
        }
    };
    let (mut src, mut dst) = (src, dst);
    if recipe.edge_direction == EdgeDirection::Outward {
        orient_outward(&table, det, &mut src, &mut dst);
    }
    let (src, dst) = dedup_undirected(src, dst);
    let node_features = table.features(&recipe.features)?;
    let mut edge_features = vec![0.0; if recipe.edge_features { src.len() * EDGE_FEATURE_NAMES.len() } else { 0 }];
    edge_features.par_chunks_mut(EDGE_FEATURE_NAMES.len()).zip(src.par_iter().zip(&dst)).for_each(|(f, (&a, &b))| {
        let (a, b) = (a as usize, b as usize);
        f[0] = (table.r[b] - table.r[a]) / 1000.0;
        f[1] = dphi(table.phi[a], table.phi[b]) / std::f32::consts::PI;
        f[2] = (table.z[b] - table.z[a]) / 1000.0;
        f[3] = table.eta[b] - table.eta[a];
    });
    let mut stats = BuildStats {
        event_id: event.event_id,
        nodes: table.len() as u64,
        edges: src.len() as u64,
        ..Default::default()
    };
    let truth = table.truth.as_ref().map(|nt| {
        let te = truth_edges(&table, &recipe.target);
        let all: KeySet = (0..te.len()).map(|i| pair_key(te.src[i], te.dst[i])).collect();
        let targets: KeySet = (0..te.len()).filter(|&i| te.target[i]).map(|i| pair_key(te.src[i], te.dst[i])).collect();
        let y: Vec<u8> = src.par_iter().zip(&dst).map(|(&a, &b)| all.contains(&pair_key(a, b)) as u8).collect();
        let target: Vec<u8> =
            src.par_iter().zip(&dst).map(|(&a, &b)| targets.contains(&pair_key(a, b)) as u8).collect();
        stats.true_edges = y.iter().map(|&v| v as u64).sum();
        stats.target_edges = target.iter().map(|&v| v as u64).sum();
        stats.event_true_edges = all.len() as u64;
        stats.event_target_edges = targets.len() as u64;
        // Both ends of a target edge are hits of one particle, so either end's vertex tells.
        let prompt = |a: u32| nt.vertex_r[a as usize] <= PROMPT_R;
        stats.event_prompt_target_edges = targets.iter().filter(|&&k| prompt(key_pair(k).0)).count() as u64;
        stats.prompt_target_edges = src.iter().zip(&target).filter(|&(&a, &t)| t == 1 && prompt(a)).count() as u64;
        GraphTruth {
            particle_id: nt.particle_id.clone(),
            particle_pt: nt.particle_pt.clone(),
            particle_eta: nt.particle_eta.clone(),
            particle_vertex_r: nt.vertex_r.clone(),
            y,
            target,
            n_true_edges_event: all.len() as u64,
            n_target_edges_event: targets.len() as u64,
        }
    });
    stats.efficiency = if stats.event_target_edges > 0 {
        stats.target_edges as f64 / stats.event_target_edges as f64
    } else {
        f64::NAN
    };
    stats.purity = if stats.edges > 0 { stats.true_edges as f64 / stats.edges as f64 } else { f64::NAN };
    let ratio = |a: u64, b: u64| if b > 0 { a as f64 / b as f64 } else { f64::NAN };
    stats.efficiency_prompt = ratio(stats.prompt_target_edges, stats.event_prompt_target_edges);
    stats.efficiency_secondary = ratio(
        stats.target_edges - stats.prompt_target_edges,
        stats.event_target_edges - stats.event_prompt_target_edges,
    );
    let graph = Graph {
        event_id: event.event_id,
        node_feature_names: recipe.features.features.iter().map(|f| f.name.to_string()).collect(),
        node_features,
        edge_feature_names: if recipe.edge_features {
            EDGE_FEATURE_NAMES.iter().map(|s| s.to_string()).collect()
        } else {
            Vec::new()
        },
        edge_features,
        src,
        dst,
        hit_id: table.hit_id.clone(),
        r: table.r.clone(),
        phi: table.phi.clone(),
        z: table.z.clone(),
        truth,
        edge_owned: Vec::new(),
    };
    stats.build_seconds = t0.elapsed().as_secs_f64();
    Ok((graph, stats))
}

/// A set of [`pair_key`]s with a fast, fixed hash.
type KeySet = HashSet<u64, foldhash::fast::FixedState>;

/// Keeps one edge per unordered node pair (the first built), in a deterministic order: sorted by
/// (src, dst). Sorting rather than hashing: a full event has over a million edges. Which of two
/// opposite edges is first depends on the builders' order unless the edges were turned
/// outward before ([`EdgeDirection::Outward`]).
fn dedup_undirected(src: Vec<u32>, dst: Vec<u32>) -> (Vec<u32>, Vec<u32>) {
    let mut edges: Vec<(u32, u32)> = src.into_iter().zip(dst).collect();
    // Stable: among duplicates the first built comes first and is kept.
    edges.par_sort_by_key(|&(a, b)| pair_key(a, b));
    edges.dedup_by_key(|&mut (a, b)| pair_key(a, b));
    // The pairs are distinct now: any sort gives the one order.
    edges.par_sort_unstable();
    edges.into_iter().unzip()
}
