//! The field's edge metrics (the columns of the reference table): efficiency, the three
//! purities and the AUC of the edge classifier, per event and averaged over events, plus the
//! ROC curve for plots.
//!
//! These are the GNN's *edge* metrics. Graph-construction efficiency and purity, and track
//! efficiency, are other quantities with their own names.

use serde::{Deserialize, Serialize};
pub use trackgnn_engine::edge_metrics::{EdgeCounts, auc, roc_curve};

/// Edge metrics of one event, or their mean over events. Fractions in 0–1; NaN where
/// undefined (a zero denominator, or AUC without positives or negatives).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct EdgeMetrics {
    /// `TP_target / N_target_true`: the fraction of target edges that are kept.
    pub efficiency: f64,
    /// `TP_target / N_predicted`.
    pub target_purity: f64,
    /// `TP_any_true / N_predicted`: true edges of any particle count as right.
    pub total_purity: f64,
    /// `TP_target / (N_predicted − predicted true-but-not-target edges)`: true edges of
    /// non-target particles count neither as right nor as wrong.
    pub purity: f64,
    /// Area under the ROC curve, target edges as positives and all other edges as negatives.
    pub auc: f64,
    /// The loss, as passed in (per event; averaged like the rest by [`EdgeMetrics::mean`]).
    pub loss: f64,
}

/// `num / den`, NaN when `den` is 0.
fn ratio(num: u64, den: u64) -> f64 {
    if den == 0 { f64::NAN } else { num as f64 / den as f64 }
}

impl EdgeMetrics {
    /// The metrics of one event from its edge logits (score = sigmoid(logit)), truth `y`
    /// (1 = true edge of any particle), `target` (1 = true edge of a target particle), the
    /// score `threshold` (0.5 in the field) and the event's `loss`.
    ///
    /// # Panics
    /// If `logits`, `y` and `target` differ in length.
    #[track_caller]
    pub fn of_event(logits: &[f32], y: &[u8], target: &[u8], threshold: f64, loss: f64) -> Self {
        Self::of_counts(&EdgeCounts::of_event(logits, y, target, threshold), auc(logits, target), loss)
    }

    /// The metrics of one event from its edge counts at the threshold, its AUC and its loss
    /// (what a device's evaluation gives without the logits leaving it).
    pub fn of_counts(c: &EdgeCounts, auc: f64, loss: f64) -> Self {
        EdgeMetrics {
            efficiency: ratio(c.tp_target, c.target_true),
            target_purity: ratio(c.tp_target, c.predicted),
            total_purity: ratio(c.tp_any, c.predicted),
            purity: ratio(c.tp_target, c.predicted - c.predicted_true_non_target),
            auc,
            loss,
        }
    }

    /// The per-event average: each field is the mean over the events where it is finite
    /// (NaN if it is finite in none).
    pub fn mean(events: &[EdgeMetrics]) -> EdgeMetrics {
        let avg = |f: fn(&EdgeMetrics) -> f64| {
            let (sum, n) =
                events.iter().map(f).filter(|x| x.is_finite()).fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
            if n == 0 { f64::NAN } else { sum / n as f64 }
        };
        EdgeMetrics {
            efficiency: avg(|m| m.efficiency),
            target_purity: avg(|m| m.target_purity),
            total_purity: avg(|m| m.total_purity),
            purity: avg(|m| m.purity),
            auc: avg(|m| m.auc),
            loss: avg(|m| m.loss),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn perfect_classifier() {
        // Two target edges, one non-target true edge, two fakes; only the targets score high.
        let logits = [5.0, 3.0, -2.0, -4.0, -1.0];
        let y = [1, 1, 1, 0, 0];
        let target = [1, 1, 0, 0, 0];
        let m = EdgeMetrics::of_event(&logits, &y, &target, 0.5, 0.25);
        assert_eq!((m.efficiency, m.target_purity, m.total_purity, m.purity, m.auc), (1.0, 1.0, 1.0, 1.0, 1.0));
        assert_eq!(m.loss, 0.25);
    }

    #[test]
    fn non_target_true_edges_make_the_four_numbers_differ() {
        // 5 target edges (3 predicted), 2 non-target true edges (both predicted),
        // 4 fakes (1 predicted). N_pred = 6, TP_target = 3, TP_any = 5.
        let logits = [2.0, 1.5, 0.7, -0.3, -0.5, 1.0, 0.2, 0.9, -1.0, -2.0, -3.0];
        let y = [1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0];
        let target = [1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0];
        let c = EdgeCounts::of_event(&logits, &y, &target, 0.5);
        assert_eq!(
            c,
            EdgeCounts { predicted: 6, target_true: 5, tp_target: 3, tp_any: 5, predicted_true_non_target: 2 }
        );
        let m = EdgeMetrics::of_event(&logits, &y, &target, 0.5, 0.0);
        assert!(close(m.efficiency, 3.0 / 5.0));
        assert!(close(m.target_purity, 3.0 / 6.0));
        assert!(close(m.total_purity, 5.0 / 6.0));
        assert!(close(m.purity, 3.0 / 4.0));
        // AUC: positives are the 5 targets (2, 1.5, 0.7, −0.3, −0.5) against 6 others
        // (1.0, 0.2, 0.9, −1, −2, −3). Pairs won: 6 + 6 + 4 + 3 + 3 = 22 of 30.
        assert!(close(m.auc, 22.0 / 30.0), "{}", m.auc);
    }

    #[test]
    fn undefined_ratios_are_nan_and_mean_skips_them() {
        // No predictions, no targets.
        let m = EdgeMetrics::of_event(&[-5.0, -6.0], &[0, 0], &[0, 0], 0.5, 1.0);
        assert!(m.efficiency.is_nan() && m.target_purity.is_nan() && m.purity.is_nan());
        assert!(m.total_purity.is_nan() && m.auc.is_nan());
        let empty = EdgeMetrics::of_event(&[], &[], &[], 0.5, f64::NAN);
        assert!(empty.auc.is_nan());
        let good = EdgeMetrics::of_event(&[5.0, -5.0], &[1, 0], &[1, 0], 0.5, 3.0);
        let half = EdgeMetrics::of_event(&[5.0, 5.0, -5.0], &[1, 0, 1], &[1, 0, 1], 0.5, 2.0);
        let mean = EdgeMetrics::mean(&[m, good, half, empty]);
        assert!(close(mean.efficiency, (1.0 + 0.5) / 2.0));
        assert!(close(mean.target_purity, (1.0 + 0.5) / 2.0));
        // AUC of `half`: positives {5, −5} against {5}: ½ + 0 of 2 pairs.
        assert!(close(mean.auc, (1.0 + 0.25) / 2.0));
        assert!(close(mean.loss, (1.0 + 3.0 + 2.0) / 3.0));
        assert!(EdgeMetrics::mean(&[]).efficiency.is_nan());
    }
}
