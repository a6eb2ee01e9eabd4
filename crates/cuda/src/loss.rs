//! The loss and the validation figures on the device (kernels/loss.cu): the BCE and the
//! auxiliary MSE with their gradients, the edge counts at the score threshold and the AUC, from
//! logits that never leave the device. The host reads back one sum per tile of
//! [`TILE`] edges and adds them in order, so every figure is the same bits on every run; the
//! counts and the AUC are exactly the host's (`trackgnn_engine::edge_metrics`), the losses
//! within rounding of its f64 sums.

use std::sync::Arc;

use trackgnn_engine::edge_metrics::EdgeCounts;
use trackgnn_engine::loss::sigmoid;

use crate::backend::{Arg, BLOCK, Backend, BackendError, DevBuf, DevPtr, launch};

/// Edges per tile of the reductions and of the radix sort (the kernels' `TILE`).
pub const TILE: usize = 1024;
/// Digits of the radix sort (the kernels' `RADIX`).
pub(crate) const RADIX: usize = 256;

fn tiles(n: usize) -> usize {
    n.div_ceil(TILE)
}

/// The sum of the first `n` values of `terms`: tile sums on the device, added in order here.
fn sum_terms(dev: &Arc<dyn Backend>, terms: &DevBuf<f32>, n: usize) -> Result<f64, BackendError> {
    let partial = DevBuf::<f64>::zeros(dev, tiles(n))?;
    launch(dev.as_ref(), "tile_sums", tiles(n), &[terms.arg(), Arg::int(n), partial.arg()])?;
    Ok(partial.to_host()?.iter().sum())
}

/// Launches the per-edge loss `kernel` over `n` edges with the arguments `args` makes around the
/// terms buffer it writes; returns the terms' sum.
fn summed_terms(
    dev: &Arc<dyn Backend>,
    kernel: &str,
    n: usize,
    args: impl FnOnce(Arg) -> Vec<Arg>,
) -> Result<f64, BackendError> {
    let terms = DevBuf::<f32>::zeros(dev, n)?;
    launch(dev.as_ref(), kernel, n, &args(terms.arg()))?;
    sum_terms(dev, &terms, n)
}

/// Where a loss writes its gradient, and the factor it is scaled by.
pub type GradOut = Option<(DevPtr, f32)>;

/// The mean BCE over `n` edges of the logits at `logits`, `label` (1 = positive) and `weight`
/// per edge, positives weighted `pos_weight` (the host's `bce_with_logits`); where `grad` is
/// given, dL/dx × its scale is written there.
pub fn bce(
    dev: &Arc<dyn Backend>,
    logits: DevPtr,
    label: &DevBuf<u8>,
    weight: &DevBuf<f32>,
    pos_weight: f64,
    grad: GradOut,
    n: usize,
) -> Result<f64, BackendError> {
    if n == 0 {
        return Ok(0.0);
    }
    let (dx, scale) = grad.unwrap_or((0, 1.0));
    let inv = 1.0f32 / n as f32;
    let sum = summed_terms(dev, "bce_terms", n, |terms| {
        let (p, x) = (Arg::F32(pos_weight as f32), Arg::Ptr(logits));
        vec![x, label.arg(), weight.arg(), p, Arg::F32(inv), Arg::F32(scale), terms, Arg::Ptr(dx), Arg::int(n)]
    })?;
    Ok(sum / n as f64)
}

/// The weighted MSE of the `n` predictions at `pred` against `target` over `count` counted
/// edges (the host's `mse_over`); where `grad` is given, dL/dp × its scale is written there
/// (zeros when `count` is 0).
pub fn mse(
    dev: &Arc<dyn Backend>,
    pred: DevPtr,
    target: &DevBuf<f32>,
    weight: &DevBuf<f32>,
    count: usize,
    grad: GradOut,
    n: usize,
) -> Result<f64, BackendError> {
    let (dp, scale) = grad.unwrap_or((0, 1.0));
    if count == 0 || n == 0 {
        if dp != 0 {
            dev.zero(dp, n * size_of::<f32>())?;
        }
        return Ok(0.0);
    }
    let inv = 1.0f32 / count as f32;
    let sum = summed_terms(dev, "mse_terms", n, |terms| {
        let p = Arg::Ptr(pred);
        vec![p, target.arg(), weight.arg(), Arg::F32(inv), Arg::F32(scale), terms, Arg::Ptr(dp), Arg::int(n)]
    })?;
    Ok(sum / count as f64)
}

/// The least float whose score is above `threshold` (`sigmoid(x as f64) > threshold`, the host's
/// test), or NaN when none is: an edge is predicted exactly when its logit is ≥ it (NaN never).
/// A bisection over the floats in their order, the score being monotone in the logit.
pub fn logit_cut(threshold: f64) -> f32 {
    // The floats from −∞ to +∞ as ordered integers (−0 and +0 are one).
    let float_at = |k: i64| -> f32 { if k < 0 { -f32::from_bits((-k) as u32) } else { f32::from_bits(k as u32) } };
    let above = |k: i64| sigmoid(f64::from(float_at(k))) > threshold;
    let (mut lo, mut hi) = (-i64::from(f32::INFINITY.to_bits()), i64::from(f32::INFINITY.to_bits()));
    if !above(hi) {
        return f32::NAN;
    }
    if above(lo) {
        return f32::NEG_INFINITY;
    }
    // Invariant: not above at lo, above at hi.
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if above(mid) { hi = mid } else { lo = mid }
    }
    float_at(hi)
}

/// The edge counts of the `n` logits at `logits` at score threshold `threshold`, with `y` (1 =
/// true edge of any particle) and `target` (1 = target edge): the host's
/// [`EdgeCounts::of_event`], exactly.
pub fn counts(
    dev: &Arc<dyn Backend>,
    logits: DevPtr,
    y: &DevBuf<u8>,
    target: &DevBuf<u8>,
    threshold: f64,
    n: usize,
) -> Result<EdgeCounts, BackendError> {
    let per_tile = DevBuf::<u32>::zeros(dev, 5 * tiles(n))?;
    let args = [Arg::Ptr(logits), y.arg(), target.arg(), Arg::F32(logit_cut(threshold)), Arg::int(n), per_tile.arg()];
    launch(dev.as_ref(), "edge_counts", tiles(n), &args)?;
    let mut c = [0u64; 5];
    for tile in per_tile.to_host()?.chunks_exact(5) {
        c.iter_mut().zip(tile).for_each(|(s, &v)| *s += u64::from(v));
    }
    Ok(EdgeCounts {
        predicted: c[0],
        target_true: c[1],
        tp_target: c[2],
        tp_any: c[3],
        predicted_true_non_target: c[4],
    })
}

/// In-place exclusive prefix sums of `v` (one block).
fn exclusive_scan(dev: &Arc<dyn Backend>, v: &DevBuf<u32>) -> Result<(), BackendError> {
    launch(dev.as_ref(), "exclusive_scan", BLOCK, &[v.arg(), Arg::int(v.len())])
}

/// The AUC of the `n` logits at `logits` with `positive` (non-zero) against all other edges:
/// the host's [`auc`](trackgnn_engine::edge_metrics::auc), exactly (its rank sum and this
/// Mann–Whitney U are the same multiples of ½). NaN without positives or negatives
/// (`positives` is their count).
pub fn auc(
    dev: &Arc<dyn Backend>,
    logits: DevPtr,
    positive: &DevBuf<u8>,
    positives: u64,
    n: usize,
) -> Result<f64, BackendError> {
    let negatives = n as u64 - positives;
    if positives == 0 || negatives == 0 {
        return Ok(f64::NAN);
    }
    let t = tiles(n);
    let (keys, keys_tmp) = (DevBuf::<u32>::zeros(dev, n)?, DevBuf::<u32>::zeros(dev, n)?);
    let (labels, labels_tmp) = (DevBuf::<u8>::zeros(dev, n)?, DevBuf::<u8>::zeros(dev, n)?);
    launch(dev.as_ref(), "auc_keys", n, &[Arg::Ptr(logits), positive.arg(), Arg::int(n), keys.arg(), labels.arg()])?;
    let offsets = DevBuf::<u32>::zeros(dev, RADIX * t)?;
    // Four stable passes of 8 bits, least significant first; the fourth ends in `keys`.
    let (mut from, mut to) = ((&keys, &labels), (&keys_tmp, &labels_tmp));
    for shift in [0, 8, 16, 24] {
        launch(dev.as_ref(), "radix_counts", t, &[from.0.arg(), Arg::int(n), Arg::I32(shift), offsets.arg()])?;
        exclusive_scan(dev, &offsets)?;
        let args = [from.0.arg(), from.1.arg(), Arg::int(n), Arg::I32(shift), offsets.arg(), to.0.arg(), to.1.arg()];
        launch(dev.as_ref(), "radix_scatter", t, &args)?;
        std::mem::swap(&mut from, &mut to);
    }
    let neg_before = DevBuf::<u32>::zeros(dev, t)?;
    launch(dev.as_ref(), "tile_negatives", t, &[labels.arg(), Arg::int(n), neg_before.arg()])?;
    exclusive_scan(dev, &neg_before)?;
    let partial = DevBuf::<f64>::zeros(dev, t)?;
    launch(dev.as_ref(), "auc_partials", t, &[keys.arg(), labels.arg(), Arg::int(n), neg_before.arg(), partial.arg()])?;
    let u: f64 = partial.to_host()?.iter().sum();
    let (p, q) = (positives as f64, negatives as f64);
    Ok(u / (p * q))
}

#[cfg(test)]
mod tests {
    use trackgnn_engine::edge_metrics::{EdgeCounts, auc as host_auc};
    use trackgnn_engine::loss::{bce_with_logits, mse_over, sigmoid};
    use trackgnn_trackml::rng::Rng;

    use super::*;
    use crate::Emulator;

    fn emulator() -> Arc<dyn Backend> {
        Arc::new(Emulator::new())
    }

    /// Logits with ties, ±0, NaN, ±∞ and plain values; labels and weights of every kind.
    fn edges(n: usize, seed: u64) -> (Vec<f32>, Vec<u8>, Vec<u8>, Vec<f32>) {
        let mut rng = Rng::new(seed);
        let specials = [0.0, -0.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1.5, -1.5, 80.0, -80.0];
        let x: Vec<f32> = (0..n)
            .map(|i| match i % 7 {
                0 => specials[(rng.next_u64() % specials.len() as u64) as usize],
                1 => ((rng.next_u64() % 5) as f32 - 2.0) * 0.5,
                _ => (rng.uniform() as f32 - 0.5) * 12.0,
            })
            .collect();
        let target: Vec<u8> = (0..n).map(|_| u8::from(rng.uniform() < 0.3)).collect();
        let y: Vec<u8> = target.iter().map(|&t| t | u8::from(rng.uniform() < 0.1)).collect();
        let w: Vec<f32> = (0..n).map(|i| [1.0, 0.0, 0.5, 2.0][i % 4]).collect();
        (x, y, target, w)
    }

    #[test]
    fn the_cut_is_the_least_logit_above_the_threshold() {
        for t in [0.5, 0.9, 0.1, 0.999, 1e-9, 0.7310585786300049] {
            let cut = logit_cut(t);
            assert!(sigmoid(f64::from(cut)) > t, "{t}: {cut}");
            let below = f32::from_bits(if cut > 0.0 { cut.to_bits() - 1 } else { cut.to_bits() + 1 });
            assert!(sigmoid(f64::from(below)) <= t, "{t}: {below} is above too");
        }
        assert!(logit_cut(1.0).is_nan());
        assert_eq!(logit_cut(-0.5), f32::NEG_INFINITY);
        // σ(0) = ½ is not above ½; nor, in f64, is σ of the smallest floats.
        assert!(logit_cut(0.5) > 0.0 && sigmoid(f64::from(f32::from_bits(1))) == 0.5);
    }

    /// The BCE, the MSE and their gradients of the kernels against the host's loss, over
    /// several tiles; the counts and the AUC exactly the host's, ties, NaN and ±0 included.
    #[test]
    fn the_device_loss_and_figures_are_the_hosts() {
        let dev = emulator();
        for (n, seed) in [(1, 1), (7, 2), (TILE + 5, 3), (3 * TILE + 100, 4)] {
            let (x, y, target, w) = edges(n, seed);
            // The loss is finite only on finite logits.
            let xf: Vec<f32> = x.iter().map(|&v| if v.is_finite() { v } else { 3.0 }).collect();
            let xd = DevBuf::from_host(&dev, &xf).unwrap();
            let (yd, td, wd) = (
                DevBuf::from_host(&dev, &y).unwrap(),
                DevBuf::from_host(&dev, &target).unwrap(),
                DevBuf::from_host(&dev, &w).unwrap(),
            );
            let dx = DevBuf::<f32>::zeros(&dev, n).unwrap();
            let loss = bce(&dev, xd.ptr(), &td, &wd, 2.5, Some((dx.ptr(), 0.25)), n).unwrap();
            let mut want_dx = vec![0.0f32; n];
            let want = bce_with_logits(&xf, &target, Some(&w), 2.5, &mut want_dx);
            want_dx.iter_mut().for_each(|g| *g *= 0.25);
            assert!((loss - want).abs() <= 1e-6 * want.abs(), "{n}: bce {loss} vs {want}");
            for (a, b) in dx.to_host().unwrap().iter().zip(&want_dx) {
                assert!((a - b).abs() <= 1e-6 * b.abs().max(1e-6), "{n}: dx {a} vs {b}");
            }
            let pt: Vec<f32> = (0..n).map(|i| (i % 13) as f32 * 0.1).collect();
            let ptd = DevBuf::from_host(&dev, &pt).unwrap();
            let count = w.iter().filter(|&&v| v != 0.0).count();
            let dp = DevBuf::<f32>::zeros(&dev, n).unwrap();
            let m = mse(&dev, xd.ptr(), &ptd, &wd, count, Some((dp.ptr(), 0.5)), n).unwrap();
            let mut want_dp = vec![0.0f32; n];
            let want_m = mse_over(&xf, &pt, &w, count, &mut want_dp);
            assert!((m - want_m).abs() <= 1e-9 * want_m.abs().max(1.0), "{n}: mse {m} vs {want_m}");
            let got_dp = dp.to_host().unwrap();
            assert!(got_dp.iter().zip(&want_dp).all(|(a, b)| *a == b * 0.5), "{n}: dp");

            let xd = DevBuf::from_host(&dev, &x).unwrap();
            for threshold in [0.5, 0.8, 0.0, 1.0] {
                let c = counts(&dev, xd.ptr(), &yd, &td, threshold, n).unwrap();
                assert_eq!(c, EdgeCounts::of_event(&x, &y, &target, threshold), "{n}: counts at {threshold}");
            }
            let positives = target.iter().filter(|&&t| t != 0).count() as u64;
            let a = auc(&dev, xd.ptr(), &td, positives, n).unwrap();
            let want_auc = host_auc(&x, &target);
            assert!(
                a.to_bits() == want_auc.to_bits() || (a.is_nan() && want_auc.is_nan()),
                "{n}: auc {a} vs {want_auc}"
            );
        }
    }

    /// One giant tie group (an untrained model's equal logits) spans every tile.
    #[test]
    fn a_tie_group_across_tiles_shares_its_rank() {
        let dev = emulator();
        let n = 2 * TILE + 3;
        let mut x = vec![0.25f32; n];
        x[5] = -1.0;
        x[n - 1] = 2.0;
        let target: Vec<u8> = (0..n).map(|i| u8::from(i % 3 == 0)).collect();
        let (xd, td) = (DevBuf::from_host(&dev, &x).unwrap(), DevBuf::from_host(&dev, &target).unwrap());
        let positives = target.iter().filter(|&&t| t != 0).count() as u64;
        let a = auc(&dev, xd.ptr(), &td, positives, n).unwrap();
        assert_eq!(a.to_bits(), host_auc(&x, &target).to_bits(), "{a} vs {}", host_auc(&x, &target));
    }
}
