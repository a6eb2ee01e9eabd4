//! Binary cross-entropy with logits, per-edge weights and a positive-class weight
//! (`torch.nn.functional.binary_cross_entropy_with_logits(x, y, weight=w, pos_weight=p)`,
//! reduction mean over all edges).

use crate::real::Real;

/// ln(1 + eˣ), stable for any x: max(x, 0) + ln(1 + e^−|x|).
#[inline]
pub fn softplus<T: Real>(x: T) -> T {
    let m = if x > T::ZERO { x } else { T::ZERO };
    m + (T::ONE + (-x.abs()).exp()).ln()
}

/// σ(x) = 1 / (1 + e^−x), stable for any x: the one logistic function of the workspace (the
/// loss, the training metrics and inference's edge scores).
#[inline]
pub fn sigmoid<T: Real>(x: T) -> T {
    if x >= T::ZERO {
        T::ONE / (T::ONE + (-x).exp())
    } else {
        let e = x.exp();
        e / (T::ONE + e)
    }
}

/// L = (1/E) Σ w_e [p·y_e·softplus(−x_e) + (1 − y_e)·softplus(x_e)] and dL/dx into `dx`.
/// Labels are 0 or 1; `weight` `None` means 1 for every edge. Returns L (0 for no edges).
pub fn bce_with_logits<T: Real>(
    logits: &[T],
    labels: &[u8],
    weight: Option<&[T]>,
    pos_weight: f64,
    dx: &mut [T],
) -> f64 {
    bce_with_logits_over(logits, labels, weight, pos_weight, logits.len(), dx)
}

/// [`bce_with_logits`] as one rank's part of a loss over `edges` edges in all: the same sum
/// over these edges (give the edges counted elsewhere weight 0), divided by `edges`, so the
/// ranks' losses and gradients sum to those of the whole graph (see [`crate::halo`]).
pub fn bce_with_logits_over<T: Real>(
    logits: &[T],
    labels: &[u8],
    weight: Option<&[T]>,
    pos_weight: f64,
    edges: usize,
    dx: &mut [T],
) -> f64 {
    let e = logits.len();
    assert_eq!(labels.len(), e, "bce: labels shape");
    assert_eq!(dx.len(), e, "bce: dx shape");
    let weights = weight.map_or(0, <[T]>::len);
    crate::traffic::add(crate::traffic::Pass::Loss, crate::traffic::of::<T>(2 * e + weights) + e);
    if e == 0 || edges == 0 {
        dx.iter_mut().for_each(|v| *v = T::ZERO);
        return 0.0;
    }
    let p = T::from_f64(pos_weight);
    let inv = T::ONE / T::from_usize(edges);
    let mut total = 0.0f64;
    for i in 0..e {
        let x = logits[i];
        let w = weight.map_or(T::ONE, |w| w[i]);
        let (l, g) = if labels[i] != 0 {
            // d/dx p·softplus(−x) = p·(σ(x) − 1)
            (p * softplus(-x), p * (sigmoid(x) - T::ONE))
        } else {
            // d/dx softplus(x) = σ(x)
            (softplus(x), sigmoid(x))
        };
        total += (w * l).to_f64();
        dx[i] = w * g * inv;
    }
    total / edges as f64
}

/// The auxiliary regression loss (`torch.nn.functional.mse_loss` with per-row weights):
/// L = (1/`count`) Σ w_e (p_e − t_e)², and dL/dp into `dp`. Rows with w = 0 (false edges,
/// edges counted on another rank) add nothing; `count` is the number of counted rows of the
/// whole graph, so parts' losses and gradients sum to the whole graph's as in
/// [`bce_with_logits_over`]. Returns L (0 for `count` = 0).
///
/// # Panics
/// If the slices differ in length.
#[track_caller]
pub fn mse_over<T: Real>(pred: &[T], target: &[T], weight: &[T], count: usize, dp: &mut [T]) -> f64 {
    let e = pred.len();
    assert!(target.len() == e && weight.len() == e && dp.len() == e, "mse: shapes");
    if count == 0 {
        dp.iter_mut().for_each(|v| *v = T::ZERO);
        return 0.0;
    }
    let inv = T::ONE / T::from_usize(count);
    let two = T::from_f64(2.0);
    let mut total = 0.0f64;
    for i in 0..e {
        let r = pred[i] - target[i];
        total += (weight[i] * r * r).to_f64();
        // d/dp w·(p − t)² = 2·w·(p − t)
        dp[i] = two * weight[i] * r * inv;
    }
    total / count as f64
}

/// How a false pair is pushed beyond the margin m by the pair losses ([`hinge_pairs_with`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HingeForm {
    /// max(0, m² − d²), Exa.TrkX's `HingeEmbeddingLoss` on squared distances: its push,
    /// 2d, vanishes as a false pair comes together.
    #[default]
    SquaredDistance,
    /// max(0, m − d)², the contrastive loss (Hadsell et al.; acorn's metric learning): its
    /// push, 2(m − d), is largest on the pairs that sit closest.
    Distance,
}

/// Options of [`hinge_pairs_with`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HingeOptions {
    /// The margin m.
    pub margin: f64,
    /// The false pairs' term.
    pub form: HingeForm,
    /// Weight of a true pair's term (a false pair's is 1).
    pub pos_weight: f64,
}

/// The metric-learning hinge loss on pairs of embedded rows (Exa.TrkX's
/// `HingeEmbeddingLoss` on squared distances): with d² = |e_a − e_b|², a true pair costs d²
/// and a false pair max(0, m² − d²), averaged over the pairs. `emb` is rows × `dim`;
/// gradients are accumulated into `demb` (same shape). Returns L (0 for no pairs).
pub fn hinge_pairs<T: Real>(
    emb: &[T],
    dim: usize,
    a: &[u32],
    b: &[u32],
    truth: &[bool],
    margin: f64,
    demb: &mut [T],
) -> f64 {
    let opts = HingeOptions { margin, form: HingeForm::SquaredDistance, pos_weight: 1.0 };
    hinge_pairs_with(emb, dim, a, b, truth, &opts, demb)
}

/// The pair loss of [`hinge_pairs`] with its options: a true pair costs `pos_weight`·d², a
/// false pair the term of `form`, averaged over the pairs; gradients accumulated into `demb`.
pub fn hinge_pairs_with<T: Real>(
    emb: &[T],
    dim: usize,
    a: &[u32],
    b: &[u32],
    truth: &[bool],
    opts: &HingeOptions,
    demb: &mut [T],
) -> f64 {
    let n = a.len();
    assert!(b.len() == n && truth.len() == n, "hinge: pair shapes");
    assert_eq!(demb.len(), emb.len(), "hinge: demb shape");
    if n == 0 {
        return 0.0;
    }
    let m = opts.margin;
    let m2 = m * m;
    let inv = 1.0 / n as f64;
    let mut total = 0.0f64;
    for p in 0..n {
        let (ia, ib) = (a[p] as usize * dim, b[p] as usize * dim);
        let d2: f64 = (0..dim).map(|k| (emb[ia + k] - emb[ib + k]).to_f64().powi(2)).sum();
        // dL/d e_a = s·(e_a − e_b), dL/d e_b = −the same.
        let s = if truth[p] {
            total += opts.pos_weight * d2;
            2.0 * opts.pos_weight
        } else {
            match opts.form {
                HingeForm::SquaredDistance if d2 < m2 => {
                    total += m2 - d2;
                    -2.0
                }
                HingeForm::Distance if d2 < m2 => {
                    // d/d e_a (m − d)² = −2(m − d)·(e_a − e_b)/d; d kept off 0.
                    let d = (d2 + 1e-12).sqrt();
                    total += (m - d).powi(2);
                    -2.0 * (m - d) / d
                }
                _ => continue,
            }
        };
        let s = T::from_f64(s * inv);
        for k in 0..dim {
            let g = s * (emb[ia + k] - emb[ib + k]);
            demb[ia + k] += g;
            demb[ib + k] -= g;
        }
    }
    total / n as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_and_correct_gradient() {
        assert!((softplus(1000.0f64) - 1000.0).abs() < 1e-9);
        assert!(softplus(-1000.0f64) >= 0.0 && softplus(-1000.0f64) < 1e-300);
        let x = vec![-3.0f64, -0.2, 0.0, 0.7, 4.0];
        let y = vec![1u8, 0, 1, 0, 1];
        let w = vec![1.0, 0.5, 0.0, 2.0, 1.0];
        let mut dx = vec![0.0; 5];
        let l = bce_with_logits(&x, &y, Some(&w), 4.0, &mut dx);
        // Reference by the naive formula with σ.
        let naive: f64 = (0..5)
            .map(|i| {
                let s = 1.0 / (1.0 + (-x[i]).exp());
                let li = if y[i] == 1 { -4.0 * s.ln() } else { -(1.0 - s).ln() };
                w[i] * li
            })
            .sum::<f64>()
            / 5.0;
        assert!((l - naive).abs() < 1e-12, "{l} vs {naive}");
        for i in 0..5 {
            let mut xp = x.clone();
            let mut xm = x.clone();
            xp[i] += 1e-6;
            xm[i] -= 1e-6;
            let mut tmp = vec![0.0; 5];
            let fd = (bce_with_logits(&xp, &y, Some(&w), 4.0, &mut tmp)
                - bce_with_logits(&xm, &y, Some(&w), 4.0, &mut tmp))
                / 2e-6;
            assert!((fd - dx[i]).abs() < 1e-8, "dx[{i}] {fd} vs {}", dx[i]);
        }
    }

    #[test]
    fn mse_over_counts_weighted_rows_and_has_the_right_gradient() {
        let (p, t, w) = ([0.5f64, -1.0, 2.0, 0.3], [0.0f64, 1.0, 2.5, 9.0], [1.0f64, 1.0, 1.0, 0.0]);
        let mut dp = [0.0; 4];
        let l = mse_over(&p, &t, &w, 3, &mut dp);
        assert!((l - (0.25 + 4.0 + 0.25) / 3.0).abs() < 1e-15, "{l}");
        assert_eq!(dp[3], 0.0);
        for i in 0..4 {
            let (mut pp, mut pm, mut tmp) = (p, p, [0.0; 4]);
            pp[i] += 1e-6;
            pm[i] -= 1e-6;
            let fd = (mse_over(&pp, &t, &w, 3, &mut tmp) - mse_over(&pm, &t, &w, 3, &mut tmp)) / 2e-6;
            assert!((fd - dp[i]).abs() < 1e-8, "dp[{i}] {fd} vs {}", dp[i]);
        }
        assert_eq!(mse_over(&p, &t, &w, 0, &mut dp), 0.0);
        assert_eq!(dp, [0.0; 4]);
    }
}
