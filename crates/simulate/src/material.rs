//! Material effects at a module crossing: the sampling of multiple scattering. The material
//! model (what a crossing traverses, the probabilities of nuclear interactions and photon
//! conversions) and the formulas live in `trackgnn_trackml::physics` (its
//! [`material`](trackgnn_trackml::physics::material) module, shared with track fitting);
//! this module only samples.

use trackgnn_trackml::physics::{beta, highland_theta0};
use trackgnn_trackml::rng::Rng;

use crate::kinematics::{V3, deflect};

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
}
