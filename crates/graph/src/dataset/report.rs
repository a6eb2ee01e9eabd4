//! What a graph-directory build reports: the per-event table and the summary lines
//! ([`BuildReport`]), the `build-summary.json` every build leaves in its directory
//! ([`SUMMARY_FILE`]), and several directories' summaries side by side ([`Comparison`]).

use std::fmt;
use std::path::Path;

use serde::Serialize;

use super::{BuildSummary, BuiltEvent};
use crate::error::{Error, Result};
use crate::recipe::{GraphMethod, GraphRecipe, PROMPT_R};

/// The summary every build writes into its graph directory, for later comparisons.
pub const SUMMARY_FILE: &str = "build-summary.json";

/// What [`SUMMARY_FILE`] holds: where the graphs are, their method and their summary.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct SavedSummary<'a> {
    /// The graph directory.
    pub out: &'a Path,
    /// The edge builder.
    pub method: GraphMethod,
    /// The figures.
    pub summary: &'a BuildSummary,
}

impl SavedSummary<'_> {
    /// Writes [`SUMMARY_FILE`] into the graph directory (atomically) and returns what it holds,
    /// as read back by [`read_summary`].
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn write(&self) -> Result<serde_json::Value> {
        let value = serde_json::to_value(self).map_err(|e| Error::Config(format!("build summary: {e}")))?;
        let text = serde_json::to_string_pretty(&value).expect("JSON values serialise");
        let path = self.out.join(SUMMARY_FILE);
        trackgnn_trackml::atomic::write(&path, text.as_bytes()).map_err(|e| Error::io(&path, e))?;
        Ok(value)
    }
}

/// The [`SUMMARY_FILE`] of graph directory `dir`, as written (any version's keys).
///
/// # Errors
/// The file is missing, unreadable, or not JSON.
pub fn read_summary(dir: &Path) -> Result<serde_json::Value> {
    let path = dir.join(SUMMARY_FILE);
    trackgnn_trackml::error::require_exists(&path)?;
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    serde_json::from_str(&text).map_err(|e| Error::corrupt(&path, format!("invalid build summary: {e}")))
}

/// A build as printed: one line per event, the sector coverage, the directory's figures and
/// the prompt/secondary split of its graph efficiency.
pub struct BuildReport<'a> {
    /// The graph directory.
    pub out: &'a Path,
    /// The recipe the graphs were built with.
    pub recipe: &'a GraphRecipe,
    /// The events built.
    pub built: &'a [BuiltEvent],
    /// Their summary.
    pub summary: &'a BuildSummary,
}

impl fmt::Display for BuildReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (s, built) = (self.summary, self.built);
        writeln!(
            f,
            "{:>9} {:>8} {:>9} {:>9} {:>9} {:>10} {:>8} {:>8}",
            "event", "nodes", "edges", "true", "target", "efficiency", "purity", "build s"
        )?;
        for e in built.iter().map(|b| &b.stats) {
            writeln!(
                f,
                "{:>9} {:>8} {:>9} {:>9} {:>9} {:>10.4} {:>8.4} {:>8.3}",
                e.event_id, e.nodes, e.edges, e.true_edges, e.target_edges, e.efficiency, e.purity, e.build_seconds
            )?;
        }
        if let (Some(c), Some(cfg)) = (s.sector_coverage, &self.recipe.sectors) {
            writeln!(
                f,
                "{} φ × {} η sectors (overlap {} rad, {} in η): {:.4} of the target edges of the whole events are in a sector graph",
                cfg.n_phi, cfg.n_eta, cfg.overlap_phi, cfg.overlap_eta, c
            )?;
        }
        writeln!(
            f,
            "{} graphs ({:?}) in {}: per event {:.0} nodes, {:.0} edges; graph efficiency {:.4} (mean {:.4}), graph purity {:.4} (mean {:.4}); build {:.3} s per event, {:.1} MB written",
            built.len(),
            self.recipe.method,
            self.out.display(),
            s.nodes_per_event,
            s.edges_per_event,
            s.efficiency_total,
            s.efficiency_mean,
            s.purity_total,
            s.purity_mean,
            s.build_seconds_per_event,
            s.bytes_written as f64 / 1e6
        )?;
        if BuildSummary::has_targets(built) {
            writeln!(
                f,
                "graph efficiency over target edges of prompt particles (produced within {} mm of the beam line) {:.4}, of secondaries {:.4} ({:.3} of the target edges)",
                PROMPT_R, s.efficiency_prompt_total, s.efficiency_secondary_total, s.secondary_target_fraction
            )?;
        }
        Ok(())
    }
}

/// Graph directories side by side, one row each from its [`SUMMARY_FILE`] (as JSON, so older
/// files print too: a missing figure prints as NaN): edges per event, graph efficiency over
/// prompt and secondary target edges and over all, purity, build seconds per event.
pub struct Comparison<'a>(pub &'a [serde_json::Value]);

impl fmt::Display for Comparison<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<16} {:>12} {:>11} {:>11} {:>11} {:>8} {:>9}  directory",
            "method", "edges/event", "eff prompt", "eff second", "eff all", "purity", "build s"
        )?;
        for m in self.0 {
            let s = &m["summary"];
            let v = |k: &str| s[k].as_f64().unwrap_or(f64::NAN);
            writeln!(
                f,
                "{:<16} {:>12.0} {:>11.4} {:>11.4} {:>11.4} {:>8.4} {:>9.3}  {}",
                m["method"].as_str().unwrap_or("?"),
                v("edges_per_event"),
                v("efficiency_prompt_total"),
                v("efficiency_secondary_total"),
                v("efficiency_total"),
                v("purity_total"),
                v("build_seconds_per_event"),
                m["out"].as_str().unwrap_or("?")
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::BuildStats;

    fn built() -> Vec<BuiltEvent> {
        let stats = |event_id, target_edges| BuildStats {
            event_id,
            nodes: 10,
            edges: 20,
            true_edges: 8,
            target_edges,
            event_target_edges: 8,
            event_prompt_target_edges: 6,
            prompt_target_edges: 6,
            efficiency: target_edges as f64 / 8.0,
            purity: 0.4,
            ..BuildStats::default()
        };
        vec![BuiltEvent { stats: stats(1, 8), bytes: 1000 }, BuiltEvent { stats: stats(2, 6), bytes: 1000 }]
    }

    #[test]
    fn a_build_prints_a_line_per_event_and_its_figures() {
        let (built, recipe) = (built(), GraphRecipe::new(GraphMethod::Geometric));
        let summary = BuildSummary::of(&built, false, 1.0);
        let text = BuildReport { out: Path::new("g"), recipe: &recipe, built: &built, summary: &summary }.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5, "{text}");
        assert!(lines[1].trim_start().starts_with("1 ") && lines[1].ends_with("1.0000   0.4000    0.000"));
        assert!(
            lines[3].starts_with("2 graphs (Geometric) in g: per event 10 nodes, 20 edges; graph efficiency 0.8750")
        );
        assert!(
            lines[4].contains("prompt particles (produced within 1 mm of the beam line) 1.0000, of secondaries 0.5000")
        );
    }

    #[test]
    fn the_saved_summary_reads_back_and_compares_with_older_files() {
        let dir = tempfile::tempdir().unwrap();
        let summary = BuildSummary::of(&built(), false, 1.0);
        let saved =
            SavedSummary { out: dir.path(), method: GraphMethod::ModuleMap, summary: &summary }.write().unwrap();
        assert_eq!(read_summary(dir.path()).unwrap(), saved);
        assert_eq!(saved["method"], "module-map");
        let old = serde_json::json!({"method": "geometric", "out": "old", "summary": {"edges_per_event": 5.0}});
        let table = Comparison(&[old, saved]).to_string();
        let rows: Vec<&str> = table.lines().collect();
        assert!(rows[1].starts_with("geometric") && rows[1].contains("NaN") && rows[1].ends_with("  old"));
        assert!(rows[2].starts_with("module-map") && rows[2].contains(" 0.8750 "), "{table}");
        let missing = read_summary(&dir.path().join("nowhere")).unwrap_err().to_string();
        assert!(missing.contains("nowhere") && missing.contains(SUMMARY_FILE), "{missing}");
    }
}
