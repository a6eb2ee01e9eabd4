//! Histogram bins for efficiency against pT and η.
//!
//! A bin `i` covers `[edges[i], edges[i + 1])`; the last bin also holds its upper edge.
//! Values outside `[edges[0], edges[last]]` (and NaN) fall in no bin: they still count in the
//! totals, only not in the histogram.

use crate::error::{Error, Result};

/// One bin of an efficiency histogram: `(lo, hi, n_target, n_matched)`, with the bin's range
/// in the quantity's unit (GeV for pT), the particles in it and those of them matched.
pub type EfficiencyBin = (f64, f64, u64, u64);

/// `n` bins evenly spaced in log between `lo` and `hi` (both > 0): `n + 1` edges, the first
/// and last exactly `lo` and `hi`.
///
/// # Panics
/// If `n == 0` or `!(0 < lo < hi)`.
#[track_caller]
pub fn log_edges(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    assert!(n > 0 && lo > 0.0 && lo < hi, "log_edges needs n > 0 and 0 < lo < hi");
    let ratio = (hi / lo).ln();
    (0..=n).map(|i| if i == n { hi } else { lo * (ratio * i as f64 / n as f64).exp() }).collect()
}

/// `n` equal bins between `lo` and `hi`: `n + 1` edges, the first and last exactly `lo`, `hi`.
///
/// # Panics
/// If `n == 0` or `!(lo < hi)`.
#[track_caller]
pub fn linear_edges(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    assert!(n > 0 && lo < hi, "linear_edges needs n > 0 and lo < hi");
    (0..=n).map(|i| if i == n { hi } else { lo + (hi - lo) * i as f64 / n as f64 }).collect()
}

/// Checks that `edges` are at least two finite, strictly increasing values.
pub(crate) fn validate_edges(field: &'static str, edges: &[f64]) -> Result<()> {
    if edges.len() < 2 {
        return Err(Error::config(field, format!("needs at least 2 edges, got {}", edges.len())));
    }
    if let Some(w) = edges.windows(2).find(|w| !(w[0].is_finite() && w[1].is_finite() && w[0] < w[1])) {
        return Err(Error::config(field, format!("edges must be finite and increasing, got {} then {}", w[0], w[1])));
    }
    Ok(())
}

/// Empty bins over `edges`.
pub(crate) fn empty_bins(edges: &[f64]) -> Vec<EfficiencyBin> {
    edges.windows(2).map(|w| (w[0], w[1], 0, 0)).collect()
}

/// The bin holding `v`, if any.
pub(crate) fn bin_of(bins: &[EfficiencyBin], v: f64) -> Option<usize> {
    let (first, last) = (bins.first()?, bins.last()?);
    if !(v >= first.0 && v <= last.1) {
        return None;
    }
    // The first bin whose upper edge is above v; the last bin when v is its upper edge.
    Some(bins.partition_point(|b| b.1 <= v).min(bins.len() - 1))
}

/// Counts one particle at `v` in `bins`.
pub(crate) fn fill(bins: &mut [EfficiencyBin], v: f64, matched: bool) {
    if let Some(i) = bin_of(bins, v) {
        bins[i].2 += 1;
        bins[i].3 += u64::from(matched);
    }
}

/// Adds the counts of `other` to `bins`; an error if their edges differ.
pub(crate) fn add(histogram: &'static str, bins: &mut [EfficiencyBin], other: &[EfficiencyBin]) -> Result<()> {
    if bins.len() != other.len() || bins.iter().zip(other).any(|(a, b)| a.0 != b.0 || a.1 != b.1) {
        return Err(Error::BinMismatch { histogram });
    }
    for (a, b) in bins.iter_mut().zip(other) {
        a.2 += b.2;
        a.3 += b.3;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_hit_their_ends_and_spacing() {
        let e = log_edges(1.0, 100.0, 10);
        assert_eq!((e.len(), e[0], e[10]), (11, 1.0, 100.0));
        assert!((e[5] - 10.0).abs() < 1e-12, "{}", e[5]);
        assert!(e.windows(2).all(|w| (w[1] / w[0] - 10f64.powf(0.2)).abs() < 1e-12));
        let l = linear_edges(-4.0, 4.0, 16);
        assert_eq!(l, (0..=16).map(|i| -4.0 + 0.5 * i as f64).collect::<Vec<_>>());
    }

    #[test]
    fn values_land_in_half_open_bins_with_a_closed_last_bin() {
        let bins = empty_bins(&[0.0, 1.0, 2.0, 4.0]);
        let got: Vec<Option<usize>> =
            [-0.1, 0.0, 0.5, 1.0, 1.99, 2.0, 4.0, 4.01, f64::NAN].iter().map(|&v| bin_of(&bins, v)).collect();
        assert_eq!(got, [None, Some(0), Some(0), Some(1), Some(1), Some(2), Some(2), None, None]);
        assert_eq!(bin_of(&[], 1.0), None);
    }

    #[test]
    fn fill_and_add_count_and_refuse_other_edges() {
        let mut a = empty_bins(&[0.0, 1.0, 2.0]);
        fill(&mut a, 0.5, true);
        fill(&mut a, 0.7, false);
        fill(&mut a, 9.0, true);
        assert_eq!(a, [(0.0, 1.0, 2, 1), (1.0, 2.0, 0, 0)]);
        let b = a.clone();
        add("x", &mut a, &b).unwrap();
        assert_eq!(a[0], (0.0, 1.0, 4, 2));
        assert!(matches!(add("x", &mut a, &empty_bins(&[0.0, 1.0, 3.0])), Err(Error::BinMismatch { histogram: "x" })));
        assert!(add("x", &mut a, &empty_bins(&[0.0, 1.0])).is_err());
    }

    #[test]
    fn bad_edges_are_config_errors() {
        validate_edges("e", &[0.0, 1.0]).unwrap();
        for bad in [&[0.0][..], &[1.0, 1.0], &[2.0, 1.0], &[0.0, f64::NAN], &[0.0, f64::INFINITY]] {
            assert!(matches!(validate_edges("e", bad), Err(Error::Config { field: "e", .. })), "{bad:?}");
        }
    }
}
