//! What training a learned stage reports: a line per epoch (the [`Display`](fmt::Display) of
//! [`StageRecord`]) and the run's summary ([`StageReport`], also its JSON), and the stage's
//! configuration file ([`read_stage_config`]).

use std::fmt;
use std::path::Path;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{BestBy, StageRecord, best_record};
use crate::error::{Error, Result};
use trackgnn_model::Error as ModelError;

impl StageRecord {
    /// The fixed-budget figures, when the record has them (the embedding's): the `k_max`
    /// budget's, then the wide budget's.
    fn budget_text(&self) -> String {
        let mut text = match (self.efficiency_at_budget, self.edges_per_event_at_budget) {
            (Some(e), Some(n)) => format!("; at the k_max-neighbour budget ({n:.0} edges/event) efficiency {e:.4}"),
            _ => String::new(),
        };
        if let (Some(k), Some(e), Some(p), Some(s), Some(u), Some(n)) = (
            self.wide_k_max,
            self.efficiency_wide,
            self.efficiency_prompt_wide,
            self.efficiency_secondary_wide,
            self.purity_wide,
            self.edges_per_event_wide,
        ) {
            text += &format!(
                "; at {k} neighbours ({n:.0} edges/event) efficiency {e:.4} (prompt {p:.4}, secondary {s:.4}), purity {u:.4}"
            );
        }
        text
    }
}

impl fmt::Display for StageRecord {
    /// The epoch's line: losses, validation graph figures, seconds.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "epoch {:>3}: loss {:.5} (val {:.5}); graph efficiency {:.4} (prompt {:.4}, secondary {:.4}), purity {:.4}, {:.0} edges/event{}; {:.1} s",
            self.epoch,
            self.train_loss,
            self.val_loss,
            self.efficiency,
            self.efficiency_prompt,
            self.efficiency_secondary,
            self.purity,
            self.edges_per_event,
            self.budget_text(),
            self.seconds
        )
    }
}

/// A finished training of a learned stage: its epochs and the best one, as printed (one line,
/// nothing without epochs) and as JSON.
#[derive(Clone, Debug, Serialize)]
pub struct StageReport<'a> {
    /// The run directory.
    pub out: &'a Path,
    /// `embedding` or `filter`.
    pub stage: &'static str,
    /// Training events.
    pub train_events: usize,
    /// Validation events.
    pub val_events: usize,
    /// Every epoch's record.
    pub epochs: &'a [StageRecord],
    /// The best epoch's ([`best_record`]).
    pub best: Option<&'a StageRecord>,
    /// Wall seconds of the whole command.
    pub wall_seconds: f64,
    /// How the best epoch was chosen.
    #[serde(skip)]
    pub by: BestBy,
}

impl<'a> StageReport<'a> {
    /// The report of `stage`'s run in `out`, its best epoch chosen `by`.
    pub fn new(
        out: &'a Path,
        stage: &'static str,
        by: BestBy,
        epochs: &'a [StageRecord],
        (train_events, val_events): (usize, usize),
        wall_seconds: f64,
    ) -> Self {
        let best = best_record(epochs, by);
        StageReport { out, stage, train_events, val_events, epochs, best, wall_seconds, by }
    }
}

impl fmt::Display for StageReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(b) = self.best else { return Ok(()) };
        writeln!(
            f,
            "{} run {}: best epoch {} ({}: val loss {:.5}): graph efficiency {:.4}, purity {:.4}, {:.0} edges/event{}; {} training and {} validation events, {:.1} s",
            self.stage,
            self.out.display(),
            b.epoch,
            match self.by {
                BestBy::ValLoss => "lowest validation loss",
                BestBy::EfficiencyAtBudget => "highest efficiency at the edge budget",
            },
            b.val_loss,
            b.efficiency,
            b.purity,
            b.edges_per_event,
            b.budget_text(),
            self.train_events,
            self.val_events,
            self.wall_seconds
        )
    }
}

/// A stage's configuration: the TOML file if given (the keys of the stage's config), else the
/// defaults.
///
/// # Errors
/// The file cannot be read or is not a valid configuration.
pub fn read_stage_config<T: DeserializeOwned + Default>(path: Option<&Path>) -> Result<T> {
    let Some(p) = path else { return Ok(T::default()) };
    let text = std::fs::read_to_string(p).map_err(|e| Error::io(p, e))?;
    toml::from_str(&text).map_err(|e| {
        Error::Model(ModelError::Corrupt { path: p.to_path_buf(), message: format!("invalid configuration: {e}") })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(epoch: u64, val_loss: f64, budget: Option<f64>) -> StageRecord {
        StageRecord {
            epoch,
            train_loss: 0.5,
            val_loss,
            efficiency: 0.9,
            efficiency_prompt: 0.95,
            efficiency_secondary: 0.7,
            purity: 0.1,
            edges_per_event: 1234.4,
            seconds: 2.0,
            efficiency_at_budget: budget,
            edges_per_event_at_budget: budget.map(|_| 5000.0),
            wide_k_max: None,
            efficiency_wide: None,
            efficiency_prompt_wide: None,
            efficiency_secondary_wide: None,
            purity_wide: None,
            edges_per_event_wide: None,
        }
    }

    #[test]
    fn the_wide_budget_prints_beside_the_k_max_one_and_older_lines_read_without_it() {
        let g = super::super::GraphFigures {
            events: 2,
            edges: 30_000,
            true_edges: 600,
            targets: 100,
            targets_found: 90,
            prompt: 80,
            prompt_found: 76,
        };
        let r = record(4, 0.2, Some(0.8)).with_wide(48, &g);
        assert_eq!(
            (r.efficiency_wide, r.efficiency_prompt_wide, r.efficiency_secondary_wide),
            (Some(0.9), Some(0.95), Some(0.7))
        );
        assert_eq!((r.purity_wide, r.edges_per_event_wide, r.wide_k_max), (Some(0.02), Some(15_000.0), Some(48)));
        assert!(
            r.to_string().ends_with(
                "; at the k_max-neighbour budget (5000 edges/event) efficiency 0.8000; at 48 neighbours (15000 edges/event) efficiency 0.9000 (prompt 0.9500, secondary 0.7000), purity 0.0200; 2.0 s"
            ),
            "{r}"
        );
        let json = serde_json::to_string(&r).unwrap();
        assert!(json.contains("\"efficiency_secondary_wide\":0.7"), "{json}");
        let back: StageRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
        // A line written before the wide budget (the q22 run's epoch 15) reads without it.
        let old = r#"{"epoch":15,"train_loss":0.0104,"val_loss":0.001,"efficiency":0.79,"efficiency_prompt":0.81,"efficiency_secondary":0.48,"purity":0.05,"edges_per_event":1020000.0,"seconds":90.0,"efficiency_at_budget":0.7943,"edges_per_event_at_budget":1010000.0}"#;
        let back: StageRecord = serde_json::from_str(old).unwrap();
        assert_eq!((back.wide_k_max, back.efficiency_wide, back.purity_wide), (None, None, None));
        assert!(!back.to_string().contains("neighbours ("), "{back}");
    }

    #[test]
    fn an_epoch_and_the_best_one_print_their_figures() {
        let line = record(3, 0.25, Some(0.8)).to_string();
        assert_eq!(
            line,
            "epoch   3: loss 0.50000 (val 0.25000); graph efficiency 0.9000 (prompt 0.9500, secondary 0.7000), purity 0.1000, 1234 edges/event; at the k_max-neighbour budget (5000 edges/event) efficiency 0.8000; 2.0 s"
        );
        let records = [record(0, 0.4, None), record(1, 0.3, None), record(2, 0.35, None)];
        let report = StageReport::new(Path::new("filt"), "filter", BestBy::ValLoss, &records, (5, 1), 11.26);
        assert_eq!(report.best.map(|b| b.epoch), Some(1));
        assert!(
            report.to_string().starts_with("filter run filt: best epoch 1 (lowest validation loss: val loss 0.30000)")
        );
        assert!(report.to_string().ends_with("; 5 training and 1 validation events, 11.3 s\n"));
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!((json["stage"].as_str(), json["best"]["epoch"].as_u64()), (Some("filter"), Some(1)));
        assert!(json.get("by").is_none());
        assert_eq!(StageReport::new(Path::new("e"), "embedding", BestBy::ValLoss, &[], (0, 0), 0.0).to_string(), "");
    }

    #[test]
    fn a_configuration_file_is_read_or_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.toml");
        std::fs::write(&p, "epochs = \"x\"").unwrap();
        let err = read_stage_config::<super::super::StageTraining>(Some(&p)).unwrap_err().to_string();
        assert!(err.contains("c.toml") && err.contains("invalid configuration"), "{err}");
        assert_eq!(read_stage_config::<super::super::StageTraining>(None).unwrap(), Default::default());
    }
}
