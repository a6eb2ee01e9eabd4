//! A small, value-stable random number generator and the distributions trackgnn samples.
//!
//! Why our own instead of `rand`/`rand_distr`: generated data sets, weight initialisation
//! and shuffles must be reproducible from a seed across releases of trackgnn, and
//! `rand_distr` does not promise value stability of its samplers between versions. The
//! generator is xoshiro256++ (Blackman & Vigna 2019) seeded through SplitMix64, and each
//! stream is derived by hashing its coordinates (seed, event, stage, …) with [`Rng::for_stream`],
//! so streams are independent of the order work is scheduled in, hence of the thread count.

/// xoshiro256++: 256 bits of state, period 2^256 − 1, passes BigCrush.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    /// A generator seeded from one `u64`.
    pub fn new(seed: u64) -> Self {
        let mut sm = seed;
        let s = [splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm)];
        Rng { s }
    }

    /// A generator for one stream, e.g. `Rng::for_stream(&[seed, event, STAGE_NOISE])`.
    ///
    /// Every coordinate is mixed in, so (seed, 1, 2) and (seed, 2, 1) give unrelated streams.
    pub fn for_stream(coords: &[u64]) -> Self {
        let mut h: u64 = 0x6A09_E667_F3BC_C908;
        for &c in coords {
            let mut st = h ^ c.wrapping_mul(0xD6E8_FEB8_6659_FD93);
            h = splitmix64(&mut st);
        }
        Rng::new(h)
    }

    /// Exports the full state (for checkpoints).
    pub fn state(&self) -> [u64; 4] {
        self.s
    }

    /// Restores a state from [`Rng::state`].
    pub fn from_state(s: [u64; 4]) -> Self {
        Rng { s }
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let result = (self.s[0].wrapping_add(self.s[3])).rotate_left(23).wrapping_add(self.s[0]);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 random bits.
    #[inline]
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in (0, 1]: safe to take the logarithm of.
    #[inline]
    pub fn uniform_open0(&mut self) -> f64 {
        1.0 - self.uniform()
    }

    /// Uniform in [lo, hi).
    #[inline]
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.uniform()
    }

    /// Uniform integer in [0, n); `n` must be positive. Lemire's nearly divisionless method.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "Rng::below(0)");
        let mut m = (self.next_u64() as u128) * (n as u128);
        if (m as u64) < n {
            let threshold = n.wrapping_neg() % n;
            while (m as u64) < threshold {
                m = (self.next_u64() as u128) * (n as u128);
            }
        }
        (m >> 64) as u64
    }

    /// True with probability `p`.
    #[inline]
    pub fn bernoulli(&mut self, p: f64) -> bool {
        self.uniform() < p
    }

    /// Standard normal N(0, 1) by the Marsaglia polar method (one value per call).
    pub fn normal(&mut self) -> f64 {
        loop {
            let u = 2.0 * self.uniform() - 1.0;
            let v = 2.0 * self.uniform() - 1.0;
            let s = u * u + v * v;
            if s > 0.0 && s < 1.0 {
                return u * (-2.0 * s.ln() / s).sqrt();
            }
        }
    }

    /// Two independent standard normals from one polar-method draw (half the cost per value).
    pub fn normal_pair(&mut self) -> (f64, f64) {
        loop {
            let u = 2.0 * self.uniform() - 1.0;
            let v = 2.0 * self.uniform() - 1.0;
            let s = u * u + v * v;
            if s > 0.0 && s < 1.0 {
                let f = (-2.0 * s.ln() / s).sqrt();
                return (u * f, v * f);
            }
        }
    }

    /// Normal with the given mean and standard deviation.
    #[inline]
    pub fn gauss(&mut self, mean: f64, sigma: f64) -> f64 {
        mean + sigma * self.normal()
    }

    /// Exponential with the given mean.
    #[inline]
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * self.uniform_open0().ln()
    }

    /// Gamma(shape, scale) by Marsaglia & Tsang (2000); shape < 1 via the boost u^(1/shape).
    pub fn gamma(&mut self, shape: f64, scale: f64) -> f64 {
        assert!(shape > 0.0 && scale > 0.0, "gamma({shape}, {scale})");
        if shape < 1.0 {
            let u = self.uniform_open0();
            return self.gamma(shape + 1.0, scale) * u.powf(1.0 / shape);
        }
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = (1.0 + c * x).powi(3);
            if v <= 0.0 {
                continue;
            }
            let u = self.uniform_open0();
            if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
                return d * v * scale;
            }
        }
    }

    /// Poisson with mean `lambda`: inversion below 30, PTRS (Hörmann 1993) above.
    pub fn poisson(&mut self, lambda: f64) -> u64 {
        assert!(lambda >= 0.0 && lambda.is_finite(), "poisson({lambda})");
        if lambda == 0.0 {
            return 0;
        }
        if lambda < 30.0 {
            let limit = (-lambda).exp();
            let mut k = 0u64;
            let mut p = self.uniform_open0();
            while p > limit {
                k += 1;
                p *= self.uniform_open0();
            }
            return k;
        }
        // PTRS: transformed rejection with squeeze.
        let slam = lambda.sqrt();
        let loglam = lambda.ln();
        let b = 0.931 + 2.53 * slam;
        let a = -0.059 + 0.02483 * b;
        let inv_alpha = 1.1239 + 1.1328 / (b - 3.4);
        let vr = 0.9277 - 3.6224 / (b - 2.0);
        loop {
            let u = self.uniform() - 0.5;
            let v = self.uniform_open0();
            let us = 0.5 - u.abs();
            let k = ((2.0 * a / us + b) * u + lambda + 0.43).floor();
            if us >= 0.07 && v <= vr {
                return k as u64;
            }
            if k < 0.0 || (us < 0.013 && v > us) {
                continue;
            }
            let lhs = v.ln() + inv_alpha.ln() - (a / (us * us) + b).ln();
            let rhs = -lambda + k * loglam - ln_factorial(k);
            if lhs <= rhs {
                return k as u64;
            }
        }
    }

    /// Shuffles a slice in place (Fisher–Yates).
    pub fn shuffle<T>(&mut self, xs: &mut [T]) {
        for i in (1..xs.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            xs.swap(i, j);
        }
    }

    /// An index drawn with probability proportional to `weights` (all ≥ 0, sum > 0).
    pub fn weighted_index(&mut self, weights: &[f64]) -> usize {
        let total: f64 = weights.iter().sum();
        let mut x = self.uniform() * total;
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        weights.len() - 1
    }
}

/// ln(k!) exactly for small k, Stirling's series above.
fn ln_factorial(k: f64) -> f64 {
    if k < 10.0 {
        let mut f = 1.0f64;
        let mut i = 2.0;
        while i <= k {
            f *= i;
            i += 1.0;
        }
        f.ln()
    } else {
        let k1 = k + 1.0;
        (k1 - 0.5) * k1.ln() - k1 + 0.5 * (2.0 * std::f64::consts::PI).ln() + 1.0 / (12.0 * k1)
            - 1.0 / (360.0 * k1 * k1 * k1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean_var(xs: &[f64]) -> (f64, f64) {
        let n = xs.len() as f64;
        let m = xs.iter().sum::<f64>() / n;
        let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0);
        (m, v)
    }

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let a: Vec<u64> = (0..4).map(|_| Rng::for_stream(&[1, 2]).next_u64()).collect();
        assert!(a.iter().all(|&x| x == a[0]));
        assert_ne!(Rng::for_stream(&[1, 2]).next_u64(), Rng::for_stream(&[2, 1]).next_u64());
        let mut r = Rng::new(7);
        let s = r.state();
        let x = r.next_u64();
        assert_eq!(Rng::from_state(s).next_u64(), x);
    }

    #[test]
    fn moments_of_distributions() {
        let mut r = Rng::new(12345);
        let n = 200_000;
        let (m, v) = mean_var(&(0..n).map(|_| r.normal()).collect::<Vec<_>>());
        assert!(m.abs() < 0.01 && (v - 1.0).abs() < 0.02, "normal {m} {v}");
        let pairs: Vec<(f64, f64)> = (0..n / 2).map(|_| r.normal_pair()).collect();
        let xs: Vec<f64> = pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
        let (m, v) = mean_var(&xs);
        assert!(m.abs() < 0.01 && (v - 1.0).abs() < 0.02, "normal pair {m} {v}");
        let cov = pairs.iter().map(|&(a, b)| a * b).sum::<f64>() / pairs.len() as f64;
        assert!(cov.abs() < 0.01, "pair correlation {cov}");
        let (m, v) = mean_var(&(0..n).map(|_| r.exponential(2.0)).collect::<Vec<_>>());
        assert!((m - 2.0).abs() < 0.03 && (v - 4.0).abs() < 0.15, "exp {m} {v}");
        let (m, v) = mean_var(&(0..n).map(|_| r.gamma(2.5, 0.4)).collect::<Vec<_>>());
        assert!((m - 1.0).abs() < 0.01 && (v - 0.4).abs() < 0.01, "gamma {m} {v}");
        let (m, v) = mean_var(&(0..n).map(|_| r.gamma(0.5, 1.0)).collect::<Vec<_>>());
        assert!((m - 0.5).abs() < 0.01 && (v - 0.5).abs() < 0.02, "gamma<1 {m} {v}");
        for lambda in [0.7, 12.0, 200.0] {
            let (m, v) = mean_var(&(0..n).map(|_| r.poisson(lambda) as f64).collect::<Vec<_>>());
            assert!(
                (m - lambda).abs() < 0.01 * lambda.max(1.0) && (v / lambda - 1.0).abs() < 0.03,
                "poisson({lambda}) mean {m} var {v}"
            );
        }
        let mut counts = [0u32; 7];
        for _ in 0..70_000 {
            counts[r.below(7) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (c as i64 - 10_000).abs() < 400), "{counts:?}");
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut xs: Vec<u32> = (0..100).collect();
        Rng::new(3).shuffle(&mut xs);
        assert_ne!(xs, (0..100).collect::<Vec<_>>());
        xs.sort();
        assert_eq!(xs, (0..100).collect::<Vec<_>>());
    }
}
