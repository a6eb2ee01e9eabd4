//! Material effects at a module crossing: multiple scattering, nuclear interactions and photon
//! conversions. The formulas live in `trackgnn_trackml::physics`; this module only samples.

use trackgnn_trackml::geometry::{Module, Technology};
use trackgnn_trackml::physics::{LAMBDA_I_SILICON, X0_SILICON, beta, highland_theta0};
use trackgnn_trackml::rng::Rng;

use crate::config::SimConfig;
use crate::kinematics::{V3, deflect};

/// Largest path-length factor 1/|cos α| used for grazing crossings.
const MAX_OBLIQUITY: f64 = 10.0;

/// The material one crossing of `module` at direction `dir` traverses.
#[derive(Clone, Copy, Debug)]
pub struct Slab {
    /// Traversed thickness in radiation lengths (along the path).
    pub x_over_x0: f64,
    /// Traversed thickness in nuclear interaction lengths.
    pub x_over_lambda: f64,
}

/// Index of a technology in the per-technology config arrays.
pub fn tech_index(t: Technology) -> usize {
    match t {
        Technology::Pixel => 0,
        Technology::ShortStrip => 1,
        Technology::LongStrip => 2,
    }
}

/// The sensor plus its support material along the path through `module`.
pub fn module_slab(cfg: &SimConfig, module: &Module, dir: V3) -> Slab {
    let n = module.normal();
    let cos = (n[0] * dir[0] + n[1] * dir[1] + n[2] * dir[2]).abs();
    let obliquity = (1.0 / cos.max(1e-9)).min(MAX_OBLIQUITY);
    let k = tech_index(module.technology());
    Slab {
        x_over_x0: (module.thickness / X0_SILICON + cfg.support_x0[k]) * obliquity,
        x_over_lambda: (module.thickness / LAMBDA_I_SILICON + cfg.support_lambda[k]) * obliquity,
    }
}

/// Deflects `dir` by multiple scattering through `x_over_x0` (Highland θ0 per projected angle,
/// so the polar angle is Rayleigh-distributed with parameter θ0).
pub fn scatter(rng: &mut Rng, dir: V3, p: f64, mass: f64, charge: f64, x_over_x0: f64) -> V3 {
    let theta0 = highland_theta0(p, beta(p, mass), charge, x_over_x0);
    if theta0 == 0.0 {
        return dir;
    }
    let (a, b) = (rng.gauss(0.0, theta0), rng.gauss(0.0, theta0));
    let theta = a.hypot(b);
    let phi = b.atan2(a);
    deflect(dir, theta, phi)
}

/// Probability of a nuclear interaction in a slab.
pub fn nuclear_probability(slab: Slab) -> f64 {
    1.0 - (-slab.x_over_lambda).exp()
}

/// Probability that a photon converts in a slab: 1 − exp(−7/9 · x/X0) (PDG 2024, eq. 34.31).
pub fn conversion_probability(x_over_x0: f64) -> f64 {
    1.0 - (-7.0 / 9.0 * x_over_x0).exp()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinematics::dot;

    #[test]
    fn scattering_width_follows_highland() {
        let mut rng = Rng::new(11);
        let dir = [1.0, 0.0, 0.0];
        let (p, m, x) = (0.5, 0.13957, 0.02);
        let theta0 = highland_theta0(p, beta(p, m), 1.0, x);
        let n = 20_000;
        // The projected angle on one axis has RMS θ0.
        let rms = (0..n)
            .map(|_| {
                let d = scatter(&mut rng, dir, p, m, 1.0, x);
                d[1].atan2(d[0]).powi(2)
            })
            .sum::<f64>()
            / n as f64;
        assert!((rms.sqrt() / theta0 - 1.0).abs() < 0.03, "{} vs {theta0}", rms.sqrt());
        let d = scatter(&mut rng, dir, p, m, 1.0, x);
        assert!((dot(d, d) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn conversion_probability_for_one_radiation_length() {
        assert!((conversion_probability(1.0) - (1.0 - (-7.0f64 / 9.0).exp())).abs() < 1e-15);
        assert!(conversion_probability(0.01) < 0.008);
    }
}
