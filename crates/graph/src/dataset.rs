//! Building a graph directory: every event of a directory read, its graph built with a recipe
//! and written (whole, or cut into sectors), the recipe written beside them
//! ([`build_graphs`]); what the graphs hold, summed over the directory ([`BuildSummary`]); and
//! how a build is reported and compared with earlier ones ([`BuildReport`], [`Comparison`]).

use std::path::Path;

use rayon::prelude::*;
use serde::Serialize;
use trackgnn_trackml::Detector;
use trackgnn_trackml::csv::{EventFiles, FileKind, ReadOptions, read_event};

use crate::error::{Error, Result};
use crate::file::{graph_file_name, sector_graph_file_name, write_graph};
use crate::recipe::{BuildStats, GraphRecipe, RECIPE_FILE, Stages, build_graph_with};
use crate::sectors;

mod report;
pub use report::{BuildReport, Comparison, SUMMARY_FILE, SavedSummary, read_summary};

/// One event's graph (or sector graphs) as built and written.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BuiltEvent {
    /// The graph's figures.
    pub stats: BuildStats,
    /// Bytes written for it.
    pub bytes: u64,
}

/// Builds the graph of every event of `events` with `recipe` and the loaded `stages` into the
/// directory `out` (created if missing), events in parallel on the current rayon pool, and
/// writes the recipe as `recipe.toml` beside them. An event is read with whatever truth,
/// particles and cells it has; with `recipe.sectors` its graph is cut into sector graphs and
/// the share of its target edges they keep is recorded. `done()` is called after each event.
pub fn build_graphs(
    events: &[EventFiles],
    det: &Detector,
    recipe: &GraphRecipe,
    stages: Stages<'_>,
    out: &Path,
    done: &(dyn Fn() + Sync),
) -> Result<Vec<BuiltEvent>> {
    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
    let results: Vec<Result<BuiltEvent>> = events
        .par_iter()
        .map(|files| {
            let built = build_one(files, det, recipe, stages, out);
            done();
            built
        })
        .collect();
    let built = results.into_iter().collect::<Result<Vec<_>>>()?;
    let path = out.join(RECIPE_FILE);
    let text = toml::to_string(recipe).map_err(|e| Error::io(&path, std::io::Error::other(e)))?;
    trackgnn_trackml::atomic::write(&path, text.as_bytes()).map_err(|e| Error::io(&path, e))?;
    Ok(built)
}

fn build_one(
    files: &EventFiles,
    det: &Detector,
    recipe: &GraphRecipe,
    stages: Stages<'_>,
    out: &Path,
) -> Result<BuiltEvent> {
    let opts = ReadOptions {
        truth: files.has(FileKind::Truth),
        particles: files.has(FileKind::Particles),
        cells: files.has(FileKind::Cells),
    };
    let event = read_event(files, opts)?;
    let (graph, mut stats) = build_graph_with(&event, det, recipe, stages)
        .map_err(|e| Error::InEvent { event_id: files.event_id, source: Box::new(e) })?;
    let bytes = match &recipe.sectors {
        None => write_graph(&out.join(graph_file_name(event.event_id)), &graph)?,
        Some(cfg) => {
            let parts = sectors::split(&graph, cfg);
            let (covered, total) = sectors::target_coverage(&graph, &parts);
            stats.sector_coverage = Some(if total > 0 { covered as f64 / total as f64 } else { f64::NAN });
            let mut bytes = 0;
            for (k, part) in parts.iter().enumerate() {
                bytes += write_graph(&out.join(sector_graph_file_name(event.event_id, k as u32)), part)?;
            }
            bytes
        }
    };
    Ok(BuiltEvent { stats, bytes })
}

/// A graph directory's figures over all its events: means per event, and efficiencies and
/// purities over the edges of all events together (`_total`). Fractions 0–1, seconds, bytes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct BuildSummary {
    /// Events built.
    pub events: usize,
    /// Nodes per event.
    pub nodes_per_event: f64,
    /// Edges per event.
    pub edges_per_event: f64,
    /// True edges per event.
    pub true_edges_per_event: f64,
    /// Target edges per event.
    pub target_edges_per_event: f64,
    /// Mean over events of the graph efficiency.
    pub efficiency_mean: f64,
    /// Mean over events of the graph purity.
    pub purity_mean: f64,
    /// Target edges in the graphs over target edges of the events.
    pub efficiency_total: f64,
    /// True edges over edges.
    pub purity_total: f64,
    /// [`efficiency_total`](Self::efficiency_total) of prompt particles' target edges.
    pub efficiency_prompt_total: f64,
    /// [`efficiency_total`](Self::efficiency_total) of secondaries' target edges.
    pub efficiency_secondary_total: f64,
    /// Share of the events' target edges that are secondaries'.
    pub secondary_target_fraction: f64,
    /// Build seconds per event.
    pub build_seconds_per_event: f64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Wall seconds of the whole build.
    pub wall_seconds: f64,
    /// Mean share of the events' target edges found in at least one sector graph (sectors only).
    pub sector_coverage: Option<f64>,
}

impl BuildSummary {
    /// The figures of `built`, which took `wall_seconds`; `sectors` if the graphs are sector graphs.
    pub fn of(built: &[BuiltEvent], sectors: bool, wall_seconds: f64) -> BuildSummary {
        let n = built.len() as f64;
        let mean = |f: fn(&BuildStats) -> f64| built.iter().map(|b| f(&b.stats)).sum::<f64>() / n;
        let total = |f: fn(&BuildStats) -> u64| built.iter().map(|b| f(&b.stats)).sum::<u64>();
        let (target, event_target) = (total(|s| s.target_edges), total(|s| s.event_target_edges));
        let (prompt, event_prompt) = (total(|s| s.prompt_target_edges), total(|s| s.event_prompt_target_edges));
        BuildSummary {
            events: built.len(),
            nodes_per_event: mean(|s| s.nodes as f64),
            edges_per_event: mean(|s| s.edges as f64),
            true_edges_per_event: mean(|s| s.true_edges as f64),
            target_edges_per_event: mean(|s| s.target_edges as f64),
            efficiency_mean: mean(|s| s.efficiency),
            purity_mean: mean(|s| s.purity),
            efficiency_total: target as f64 / event_target.max(1) as f64,
            purity_total: total(|s| s.true_edges) as f64 / total(|s| s.edges).max(1) as f64,
            efficiency_prompt_total: prompt as f64 / event_prompt.max(1) as f64,
            efficiency_secondary_total: (target - prompt) as f64 / (event_target - event_prompt).max(1) as f64,
            secondary_target_fraction: 1.0 - event_prompt as f64 / event_target.max(1) as f64,
            build_seconds_per_event: mean(|s| s.build_seconds),
            bytes_written: built.iter().map(|b| b.bytes).sum(),
            wall_seconds,
            sector_coverage: sectors.then(|| mean(|s| s.sector_coverage.unwrap_or(f64::NAN))),
        }
    }

    /// True if the events had target edges (the prompt/secondary split means something).
    pub fn has_targets(built: &[BuiltEvent]) -> bool {
        built.iter().any(|b| b.stats.event_target_edges > 0)
    }
}

#[cfg(test)]
mod tests {
    use trackgnn_simulate::{Generator, SimConfig};
    use trackgnn_trackml::csv::{discover_events, write_event};

    use super::*;
    use crate::recipe::GraphMethod;

    #[test]
    fn a_directory_of_events_becomes_graphs_and_a_recipe() {
        let dir = tempfile::tempdir().unwrap();
        let (events, out) = (dir.path().join("events"), dir.path().join("graphs"));
        std::fs::create_dir_all(&events).unwrap();
        let generator = Generator::new(Detector::trackml(), SimConfig { pileup: 1.0, ..SimConfig::default() });
        for id in 1..=2 {
            write_event(&events, &generator.event(3, id).0, false).unwrap();
        }
        let files = discover_events(&events).unwrap();
        let recipe = GraphRecipe::new(GraphMethod::Geometric);
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let built = build_graphs(&files, generator.detector(), &recipe, Stages::default(), &out, &|| {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })
        .unwrap();
        assert_eq!((built.len(), calls.into_inner()), (2, 2));
        assert!(out.join(graph_file_name(1)).is_file() && out.join(graph_file_name(2)).is_file());
        let back: GraphRecipe = toml::from_str(&std::fs::read_to_string(out.join(RECIPE_FILE)).unwrap()).unwrap();
        assert_eq!(back, recipe);
        let s = BuildSummary::of(&built, false, 1.0);
        let target: u64 = built.iter().map(|b| b.stats.target_edges).sum();
        let event_target: u64 = built.iter().map(|b| b.stats.event_target_edges).sum();
        assert_eq!(s.efficiency_total, target as f64 / event_target as f64);
        assert_eq!(s.bytes_written, built.iter().map(|b| b.bytes).sum::<u64>());
        assert!(s.efficiency_total > 0.8 && s.sector_coverage.is_none() && BuildSummary::has_targets(&built));
    }
}
