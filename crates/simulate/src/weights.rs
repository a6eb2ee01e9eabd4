//! TrackML-style hit weights for the score.
//!
//! The TrackML score weights each hit by an *order* factor (hits at the ends of a track — the
//! first, which seed tracking, and the last, which fix the momentum — count more) times a *pT*
//! factor (high-pT particles matter more to physics), with zero weight for noise and for
//! particles of fewer than 4 hits, normalised to 1 per event (Amrouche et al., "The Tracking
//! Machine Learning challenge: Accuracy phase", 2019, sec. 2.3). The exact tables of the
//! challenge are not reproduced here; trackgnn uses:
//!
//! - order factor, with k = distance of the hit from the nearer end of its particle's hit
//!   sequence (0 for the first and last hits): w_order = 1 + 9 · 2^(−k) (10, 5.5, 3.25, … → 1);
//! - pT factor: 0.2 below 0.5 GeV, rising linearly to 1 at 3 GeV, 1 above.

/// Order factor of hit `i` (0-based) of a particle with `n` hits.
pub fn order_factor(i: usize, n: usize) -> f64 {
    let k = i.min(n - 1 - i);
    1.0 + 9.0 * 0.5f64.powi(k as i32)
}

/// pT factor of a particle of transverse momentum `pt` \[GeV\].
pub fn pt_factor(pt: f64) -> f64 {
    if pt < 0.5 {
        0.2
    } else if pt < 3.0 {
        0.2 + 0.8 * (pt - 0.5) / 2.5
    } else {
        1.0
    }
}

/// Fewest hits a particle needs for its hits to carry weight.
pub const MIN_HITS_FOR_WEIGHT: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_weigh_more_and_pt_saturates() {
        assert_eq!(order_factor(0, 10), 10.0);
        assert_eq!(order_factor(9, 10), 10.0);
        assert!(order_factor(4, 10) < order_factor(1, 10));
        assert_eq!(pt_factor(0.1), 0.2);
        assert!((pt_factor(1.75) - 0.6).abs() < 1e-12);
        assert_eq!(pt_factor(10.0), 1.0);
    }
}
