//! The edge classifier's figures of one event that every device computes the same way: the
//! edge counts at a score threshold, the AUC (an exact rank sum, ties shared) and the ROC
//! curve. The field's metrics built from them live in `trackgnn_model::metrics`.

use crate::loss::sigmoid;

/// Edge counts of one event at one threshold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EdgeCounts {
    /// Edges with score above the threshold.
    pub predicted: u64,
    /// Target edges.
    pub target_true: u64,
    /// Predicted target edges.
    pub tp_target: u64,
    /// Predicted true edges (of any particle).
    pub tp_any: u64,
    /// Predicted edges that are true but not target.
    pub predicted_true_non_target: u64,
}

impl EdgeCounts {
    /// Counts the edges of one event. An edge is predicted when `sigmoid(logit) > threshold`
    /// (so a NaN logit is never predicted); `y` and `target` are true when non-zero.
    ///
    /// # Panics
    /// If `logits`, `y` and `target` differ in length.
    #[track_caller]
    pub fn of_event(logits: &[f32], y: &[u8], target: &[u8], threshold: f64) -> Self {
        assert_eq!(logits.len(), y.len(), "EdgeCounts: logits and y differ in length");
        assert_eq!(logits.len(), target.len(), "EdgeCounts: logits and target differ in length");
        let mut c = EdgeCounts::default();
        for ((&l, &yi), &ti) in logits.iter().zip(y).zip(target) {
            let pred = sigmoid(f64::from(l)) > threshold;
            let (yi, ti) = (yi != 0, ti != 0);
            c.predicted += u64::from(pred);
            c.target_true += u64::from(ti);
            c.tp_target += u64::from(pred && ti);
            c.tp_any += u64::from(pred && yi);
            c.predicted_true_non_target += u64::from(pred && yi && !ti);
        }
        c
    }
}

/// Sort key of a logit: NaN counts as −∞ (it is never predicted either).
fn key(l: f32) -> f32 {
    if l.is_nan() { f32::NEG_INFINITY } else { l }
}

/// Edge indices sorted by logit, ascending (NaN as −∞).
fn order(logits: &[f32]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..logits.len()).collect();
    idx.sort_unstable_by(|&a, &b| key(logits[a]).total_cmp(&key(logits[b])));
    idx
}

/// Equality of sort keys (so that −0 and +0 tie, as they do in a ranking by score).
fn tie(a: f32, b: f32) -> bool {
    key(a) == key(b)
}

/// Area under the ROC curve with `positives` (non-zero) against all other edges, by the rank
/// sum (Mann–Whitney U): `(Σ rank(positive) − P(P+1)/2) / (P·N)`, ranks from 1 and tied logits
/// sharing their average rank, which equals the trapezoidal area of the ROC curve. O(E log E).
/// NaN if there are no positives or no negatives.
///
/// # Panics
/// If `logits` and `positives` differ in length.
#[track_caller]
pub fn auc(logits: &[f32], positives: &[u8]) -> f64 {
    assert_eq!(logits.len(), positives.len(), "auc: logits and positives differ in length");
    let n_pos = positives.iter().filter(|&&p| p != 0).count();
    let n_neg = logits.len() - n_pos;
    if n_pos == 0 || n_neg == 0 {
        return f64::NAN;
    }
    let idx = order(logits);
    let mut rank_sum = 0.0f64;
    let mut i = 0;
    while i < idx.len() {
        let mut j = i + 1;
        while j < idx.len() && tie(logits[idx[j]], logits[idx[i]]) {
            j += 1;
        }
        // Ranks i+1 ..= j share their mean.
        let mean_rank = (i + 1 + j) as f64 / 2.0;
        let pos_in_group = idx[i..j].iter().filter(|&&e| positives[e] != 0).count();
        rank_sum += mean_rank * pos_in_group as f64;
        i = j;
    }
    let (p, n) = (n_pos as f64, n_neg as f64);
    (rank_sum - p * (p + 1.0) / 2.0) / (p * n)
}

/// The ROC curve as `(false-positive rate, true-positive rate)` points from (0, 0) to (1, 1),
/// one vertex per distinct logit (tied logits move diagonally), thinned to at most `points`
/// points (at least 2): a vertex is kept when it is at least `2/(points − 2)` away, in
/// `|Δfpr| + |Δtpr|`, from the last kept one, so steep and flat parts are sampled alike.
/// Empty if there are no positives or no negatives.
///
/// # Panics
/// If `logits` and `positives` differ in length.
#[track_caller]
pub fn roc_curve(logits: &[f32], positives: &[u8], points: usize) -> Vec<(f64, f64)> {
    assert_eq!(logits.len(), positives.len(), "roc_curve: logits and positives differ in length");
    let n_pos = positives.iter().filter(|&&p| p != 0).count();
    let n_neg = logits.len() - n_pos;
    if n_pos == 0 || n_neg == 0 {
        return Vec::new();
    }
    let (p, n) = (n_pos as f64, n_neg as f64);
    let idx = order(logits);
    // Walk from the highest logit down: lowering the threshold past each group.
    let mut full = vec![(0.0, 0.0)];
    let (mut tp, mut fp) = (0usize, 0usize);
    let mut j = idx.len();
    while j > 0 {
        let mut i = j - 1;
        while i > 0 && tie(logits[idx[i - 1]], logits[idx[j - 1]]) {
            i -= 1;
        }
        for &e in &idx[i..j] {
            if positives[e] != 0 { tp += 1 } else { fp += 1 }
        }
        full.push((fp as f64 / n, tp as f64 / p));
        j = i;
    }
    let points = points.max(2);
    if full.len() <= points {
        return full;
    }
    // The staircase has L1 length 2; with spacing 2/(points − 2) at most points − 2 interior
    // vertices are kept, plus both ends.
    let min_step = 2.0 / (points - 2).max(1) as f64;
    let last = *full.last().expect("curve has both ends");
    let mut out = vec![full[0]];
    for &pt in &full[1..full.len() - 1] {
        let prev = *out.last().expect("out starts non-empty");
        if (pt.0 - prev.0).abs() + (pt.1 - prev.1).abs() >= min_step && out.len() < points - 1 {
            out.push(pt);
        }
    }
    out.push(last);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn threshold_is_strict_and_applies_to_the_sigmoid() {
        let logits = [0.0, 0.01, f32::NAN];
        let ones = [1, 1, 1];
        let c = EdgeCounts::of_event(&logits, &ones, &ones, 0.5);
        assert_eq!(c.predicted, 1, "sigmoid(0) = 0.5 is not above 0.5; NaN never predicted");
        // Threshold 0.9 ⇔ logit > ln 9 ≈ 2.197.
        let c = EdgeCounts::of_event(&[2.19, 2.2], &[1, 1], &[1, 1], 0.9);
        assert_eq!(c.predicted, 1);
    }

    #[test]
    fn auc_with_ties_uses_average_ranks() {
        // All equal: every pair is a tie, AUC = 1/2.
        assert!(close(auc(&[0.3; 6], &[1, 0, 1, 0, 0, 1]), 0.5));
        // pos {1, 1, 3}, neg {0, 1, 2}: pairs (pos > neg) + ½ (ties):
        // 1 vs {0,1,2}: 1 + ½ + 0 = 1.5, twice; 3 vs all: 3. Total 6 / 9.
        let a = auc(&[1.0, 1.0, 3.0, 0.0, 1.0, 2.0], &[1, 1, 1, 0, 0, 0]);
        assert!(close(a, 6.0 / 9.0), "{a}");
        // −0 and +0 tie.
        assert!(close(auc(&[-0.0, 0.0], &[1, 0]), 0.5));
        assert!(close(auc(&[-1.0, 1.0], &[1, 0]), 0.0));
    }

    #[test]
    fn roc_curve_ends_and_area() {
        let logits = [1.0, 1.0, 3.0, 0.0, 1.0, 2.0, -1.0, 0.5];
        let pos = [1, 1, 1, 0, 0, 0, 1, 0];
        let roc = roc_curve(&logits, &pos, 100);
        assert_eq!(roc.first(), Some(&(0.0, 0.0)));
        assert_eq!(roc.last(), Some(&(1.0, 1.0)));
        assert!(roc.windows(2).all(|w| w[1].0 >= w[0].0 && w[1].1 >= w[0].1), "monotone");
        // The trapezoidal area of the unthinned curve is the rank AUC (ties as diagonals).
        let area: f64 = roc.windows(2).map(|w| (w[1].0 - w[0].0) * (w[1].1 + w[0].1) / 2.0).sum();
        assert!(close(area, auc(&logits, &pos)), "{area} vs {}", auc(&logits, &pos));
        assert!(roc_curve(&logits, &[0; 8], 10).is_empty());
    }

    #[test]
    fn roc_curve_is_thinned_to_the_requested_size() {
        let n = 10_000;
        let logits: Vec<f32> = (0..n).map(|i| ((i * 7919) % n) as f32).collect();
        let pos: Vec<u8> = (0..n).map(|i| u8::from(i % 3 == 0)).collect();
        for points in [0, 1, 2, 3, 10, 101] {
            let roc = roc_curve(&logits, &pos, points);
            assert!(roc.len() <= points.max(2), "{points}: {} points", roc.len());
            assert_eq!((roc[0], *roc.last().unwrap()), ((0.0, 0.0), (1.0, 1.0)));
        }
        assert!(roc_curve(&logits, &pos, 101).len() > 50, "thinning keeps most of the budget");
    }
}
