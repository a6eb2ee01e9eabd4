//! Kinematic spectra of produced particles: Tsallis pT, the dN/dη plateau, NBD multiplicities.

use trackgnn_trackml::rng::Rng;

/// Samples pT from the Tsallis / Hagedorn form dN/dpT ∝ pT · (1 + (mT − m)/(n T))^(−n)
/// (CMS, JHEP 02 (2010) 041; ALICE, EPJC 73 (2013) 2662) by inverting a tabulated CDF.
#[derive(Clone, Debug)]
pub struct TsallisPt {
    pt: Vec<f64>,
    cdf: Vec<f64>,
}

impl TsallisPt {
    /// A sampler for particles of mass `mass` \[GeV\] with pT in [pt_min, 100 GeV].
    pub fn new(t: f64, n: f64, mass: f64, pt_min: f64) -> Self {
        const N: usize = 4096;
        let pt_max: f64 = 100.0;
        // Points dense at low pT: pT = pt_min + (pt_max − pt_min) · s^4.
        let pt: Vec<f64> = (0..N)
            .map(|i| {
                let s = i as f64 / (N - 1) as f64;
                pt_min + (pt_max - pt_min) * s.powi(4)
            })
            .collect();
        let dens = |p: f64| {
            let mt = (p * p + mass * mass).sqrt();
            p * (1.0 + (mt - mass) / (n * t)).powf(-n)
        };
        let mut cdf = vec![0.0; N];
        for i in 1..N {
            cdf[i] = cdf[i - 1] + 0.5 * (dens(pt[i]) + dens(pt[i - 1])) * (pt[i] - pt[i - 1]);
        }
        let total = cdf[N - 1];
        cdf.iter_mut().for_each(|c| *c /= total);
        TsallisPt { pt, cdf }
    }

    /// One pT \[GeV\].
    pub fn sample(&self, rng: &mut Rng) -> f64 {
        let u = rng.uniform();
        let i = self.cdf.partition_point(|&c| c < u).clamp(1, self.cdf.len() - 1);
        let (c0, c1) = (self.cdf[i - 1], self.cdf[i]);
        let f = if c1 > c0 { (u - c0) / (c1 - c0) } else { 0.0 };
        self.pt[i - 1] + f * (self.pt[i] - self.pt[i - 1])
    }

    /// The median of the distribution \[GeV\] (for documentation and tests).
    pub fn median(&self) -> f64 {
        let i = self.cdf.partition_point(|&c| c < 0.5);
        self.pt[i]
    }
}

/// The pseudorapidity distribution of one interaction: a plateau for |η| < `plateau` with the
/// shallow central dip of the measured dN/dη (≈ 10%, CMS/ALICE 13 TeV), then a Gaussian fall-off
/// of width `falloff`, cut at |η| = `eta_max`.
#[derive(Clone, Copy, Debug)]
pub struct EtaShape {
    /// End of the plateau.
    pub plateau: f64,
    /// Width of the fall-off.
    pub falloff: f64,
    /// Cut.
    pub eta_max: f64,
}

impl EtaShape {
    /// Relative density at `eta` (1 on the plateau's shoulders).
    pub fn density(&self, eta: f64) -> f64 {
        let a = eta.abs();
        if a > self.eta_max {
            return 0.0;
        }
        let dip = 1.0 - 0.1 * (-0.5 * (a / 1.2).powi(2)).exp();
        if a <= self.plateau { dip } else { dip * (-0.5 * ((a - self.plateau) / self.falloff).powi(2)).exp() }
    }

    /// ∫ density dη over |η| < eta_max: the number of particles per unit of dN/dη at the plateau.
    pub fn integral(&self) -> f64 {
        let n = 4000;
        let h = 2.0 * self.eta_max / n as f64;
        (0..n).map(|i| self.density(-self.eta_max + (i as f64 + 0.5) * h) * h).sum()
    }

    /// One η by rejection against the flat envelope.
    pub fn sample(&self, rng: &mut Rng) -> f64 {
        loop {
            let eta = rng.range(-self.eta_max, self.eta_max);
            if rng.uniform() < self.density(eta) {
                return eta;
            }
        }
    }
}

/// A negative-binomial count with mean `mean` and shape `k` (a Gamma-mixed Poisson).
pub fn negative_binomial(rng: &mut Rng, mean: f64, k: f64) -> u64 {
    if mean <= 0.0 {
        return 0;
    }
    let lambda = rng.gamma(k, mean / k);
    rng.poisson(lambda)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsallis_has_a_falling_tail_and_sensible_mean() {
        let s = TsallisPt::new(0.16, 7.0, 0.13957, 0.15);
        let mut rng = Rng::new(1);
        let xs: Vec<f64> = (0..100_000).map(|_| s.sample(&mut rng)).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let above1 = xs.iter().filter(|&&p| p > 1.0).count() as f64 / xs.len() as f64;
        let above3 = xs.iter().filter(|&&p| p > 3.0).count() as f64 / xs.len() as f64;
        assert!((0.4..0.7).contains(&mean), "mean pT {mean}");
        assert!(above1 > 0.05 && above1 < 0.25 && above3 < above1 / 5.0, "{above1} {above3}");
        assert!(xs.iter().all(|&p| p >= 0.15));
        assert!((s.median() - 0.45).abs() < 0.05, "median {}", s.median());
    }

    #[test]
    fn eta_plateau_and_cut() {
        let e = EtaShape { plateau: 2.5, falloff: 1.5, eta_max: 4.0 };
        let mut rng = Rng::new(2);
        let xs: Vec<f64> = (0..50_000).map(|_| e.sample(&mut rng)).collect();
        assert!(xs.iter().all(|x| x.abs() <= 4.0));
        // Counts in |η| < 1 and 3 < |η| < 4 follow the integrals of the density.
        let integral = |a: f64, b: f64| {
            (0..1000).map(|i| e.density(a + (i as f64 + 0.5) * (b - a) / 1000.0)).sum::<f64>() * (b - a) / 1000.0
        };
        let central = xs.iter().filter(|x| x.abs() < 1.0).count() as f64;
        let forward = xs.iter().filter(|x| x.abs() > 3.0).count() as f64;
        let expect = integral(0.0, 1.0) / integral(3.0, 4.0);
        assert!((central / forward / expect - 1.0).abs() < 0.05, "{central} {forward} {expect}");
        assert!(e.density(3.5) < e.density(2.0) && e.density(4.5) == 0.0);
        assert!(e.integral() > 5.0 && e.integral() < 8.0);
    }

    #[test]
    fn nbd_mean() {
        let mut rng = Rng::new(3);
        let n = 20_000;
        let m = (0..n).map(|_| negative_binomial(&mut rng, 40.0, 1.5) as f64).sum::<f64>() / n as f64;
        assert!((m - 40.0).abs() < 1.5, "{m}");
    }
}
