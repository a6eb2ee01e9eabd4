//! Global L2 norms and gradient clipping by norm (`torch.nn.utils.clip_grad_norm_`).

use rayon::prelude::*;

use super::CHUNK;

/// The L2 norm `√Σ xᵢ²` of a buffer, summed in f64 in a fixed order: each chunk of 4096
/// elements is summed in order, then the chunk sums are added in order. Chunks run in parallel
/// on the current rayon pool; the order, and so the result, does not depend on the number of
/// threads. Used for the gradient norm and for weight-norm diagnostics.
pub fn l2_norm(xs: &[f32]) -> f64 {
    let partials: Vec<f64> = xs.par_chunks(CHUNK).map(sum_sq).collect();
    partials.iter().sum::<f64>().sqrt()
}

/// The sequential twin of [`l2_norm`], for tests.
#[cfg(test)]
fn l2_norm_seq(xs: &[f32]) -> f64 {
    let partials: Vec<f64> = xs.chunks(CHUNK).map(sum_sq).collect();
    partials.iter().sum::<f64>().sqrt()
}

/// `Σ xᵢ²` of one chunk in f64, in order.
fn sum_sq(chunk: &[f32]) -> f64 {
    chunk.iter().map(|&x| f64::from(x) * f64::from(x)).sum()
}

/// Clips gradients by their global L2 norm, like `torch.nn.utils.clip_grad_norm_`: computes
/// the norm with [`l2_norm`] and, if it exceeds `max_norm`, scales every gradient by
/// `max_norm / (norm + 1e-6)`. Returns the norm before clipping (log it as the gradient norm).
///
/// `max_norm <= 0` or non-finite disables clipping (the norm is still returned). Where we
/// differ from PyTorch: if the norm itself is not finite the gradients are left untouched
/// (PyTorch would multiply them by NaN or 0); the caller sees the non-finite norm and can skip
/// the step.
pub fn clip_grad_norm(grads: &mut [f32], max_norm: f64) -> f64 {
    let norm = l2_norm(grads);
    let enabled = max_norm > 0.0 && max_norm.is_finite();
    if enabled && norm.is_finite() && norm > max_norm {
        let coef = (max_norm / (norm + 1e-6)) as f32;
        grads.par_chunks_mut(CHUNK).for_each(|c| c.iter_mut().for_each(|g| *g *= coef));
    }
    norm
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seeded(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect()
    }

    #[test]
    fn norm_of_known_vectors() {
        assert_eq!(l2_norm(&[]), 0.0);
        assert_eq!(l2_norm(&[3.0, -4.0]), 5.0);
        // 10,000 ones: crosses chunk boundaries.
        assert_eq!(l2_norm(&vec![1.0; 10_000]), 100.0);
    }

    #[test]
    fn parallel_norm_is_bitwise_the_sequential_norm() {
        for &n in &[1usize, 5, CHUNK - 1, CHUNK, CHUNK + 1, 7 * CHUNK + 3] {
            let xs = seeded(n, n as u64);
            let (a, b) = (l2_norm(&xs), l2_norm_seq(&xs));
            assert_eq!(a.to_bits(), b.to_bits(), "n = {n}: |Δ| = {:e}", (a - b).abs());
            let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
            assert_eq!(one.install(|| l2_norm(&xs)).to_bits(), a.to_bits());
        }
    }

    #[test]
    fn clipping_scales_to_max_norm() {
        let mut g = seeded(3 * CHUNK + 5, 7);
        g.iter_mut().for_each(|x| *x *= 10.0);
        let before = g.clone();
        let norm = clip_grad_norm(&mut g, 1.0);
        assert!(norm > 1.0);
        assert_eq!(norm, l2_norm(&before));
        let after = l2_norm(&g);
        assert!((after - 1.0).abs() < 1e-5, "norm after clipping {after}");
        // Direction kept: every element scaled by the same factor.
        let k = g[0] / before[0];
        assert!(g.iter().zip(&before).all(|(a, b)| (a - k * b).abs() <= 1e-6 * b.abs().max(1e-3)));
    }

    #[test]
    fn small_gradients_and_disabled_clipping_are_left_alone() {
        let mut g = vec![0.375f32, -0.5];
        assert_eq!(clip_grad_norm(&mut g, 1.0), 0.625);
        assert_eq!(g, [0.375, -0.5]);
        let mut big = vec![30.0f32, -40.0];
        for off in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(clip_grad_norm(&mut big, off), 50.0);
            assert_eq!(big, [30.0, -40.0]);
        }
        let mut bad = vec![f32::NAN, 1.0];
        assert!(clip_grad_norm(&mut bad, 1.0).is_nan());
        assert_eq!(bad[1], 1.0);
    }
}
