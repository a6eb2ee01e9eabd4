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
    let e = logits.len();
    assert_eq!(labels.len(), e, "bce: labels shape");
    assert_eq!(dx.len(), e, "bce: dx shape");
    if e == 0 {
        return 0.0;
    }
    let p = T::from_f64(pos_weight);
    let inv = T::ONE / T::from_usize(e);
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
    total / e as f64
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
    let n = a.len();
    assert!(b.len() == n && truth.len() == n, "hinge: pair shapes");
    assert_eq!(demb.len(), emb.len(), "hinge: demb shape");
    if n == 0 {
        return 0.0;
    }
    let m2 = margin * margin;
    let inv = T::from_f64(1.0 / n as f64);
    let two = T::from_f64(2.0);
    let mut total = 0.0f64;
    for p in 0..n {
        let (ia, ib) = (a[p] as usize * dim, b[p] as usize * dim);
        let d2: f64 = (0..dim).map(|k| (emb[ia + k] - emb[ib + k]).to_f64().powi(2)).sum();
        // dL/d e_a = s·2(e_a − e_b), dL/d e_b = −the same.
        let s = if truth[p] {
            total += d2;
            T::ONE
        } else if d2 < m2 {
            total += m2 - d2;
            -T::ONE
        } else {
            continue;
        };
        for k in 0..dim {
            let g = s * two * (emb[ia + k] - emb[ib + k]) * inv;
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
}
