//! Multiple scattering in the detector's material as noise on the track parameters: the
//! variance of the direction that a crossing adds, Highland's θ0² in each of two directions
//! perpendicular to the track (the generator deflects by exactly that, Gaussian in both).

use nalgebra::Matrix3;
use trackgnn_trackml::geometry::Module;
use trackgnn_trackml::physics::material::MaterialModel;
use trackgnn_trackml::physics::{beta, highland_theta0};

use super::params::{BoundMatrix, BoundVector, PHI, QOVERP, THETA, direction};
use crate::propagation::stepper::{FreeMatrix, FreeVector, QOP};

/// θ0 \[rad\] of a crossing of `x_over_x0` radiation lengths by a particle of mass `mass`
/// \[GeV\], unit charge and q/p `q_over_p` \[e/GeV\].
pub fn theta0(q_over_p: f64, mass: f64, x_over_x0: f64) -> f64 {
    let p = 1.0 / q_over_p.abs();
    highland_theta0(p, beta(p, mass), 1.0, x_over_x0)
}

/// The noise that crossing `module` adds to bound parameters `params` on it: θ0² to θ and
/// θ0²/sin²θ to φ (a deflection θ0 perpendicular to the track turns φ by θ0/sin θ).
pub fn module_noise(material: &MaterialModel, module: &Module, params: &BoundVector, mass: f64) -> BoundMatrix {
    let t = direction(params[PHI], params[THETA]);
    let slab = material.module_slab(module, [t[0], t[1], t[2]]);
    let t0 = theta0(params[QOVERP], mass, slab.x_over_x0);
    let sin_theta = params[THETA].sin();
    let mut q = BoundMatrix::zeros();
    q[(PHI, PHI)] = t0 * t0 / (sin_theta * sin_theta);
    q[(THETA, THETA)] = t0 * t0;
    q
}

/// The noise that crossing the beam pipe at the free state `y` (on the pipe) adds to the free
/// state: θ0² (I − t tᵀ) on the direction.
pub fn beam_pipe_noise(material: &MaterialModel, y: &FreeVector, mass: f64) -> FreeMatrix {
    let t = y.fixed_rows::<3>(3).into_owned();
    let x = material.beam_pipe_x_over_x0_at([y[0], y[1], y[2]], [t[0], t[1], t[2]]);
    let t0 = theta0(y[QOP], mass, x);
    let mut q = FreeMatrix::zeros();
    q.fixed_view_mut::<3, 3>(3, 3).copy_from(&((Matrix3::identity() - t * t.transpose()) * (t0 * t0)));
    q
}

#[cfg(test)]
mod tests {
    use super::*;
    use trackgnn_trackml::Detector;
    use trackgnn_trackml::physics::X0_SILICON;

    #[test]
    fn module_noise_is_highland_at_the_crossing() {
        let det = Detector::trackml();
        let material = MaterialModel::default();
        // A barrel module (its normal is transverse), crossed along its normal by a 1 GeV/c muon.
        let m = det.modules.iter().find(|m| m.normal()[2].abs() < 0.5).unwrap();
        let n = m.normal();
        let theta = n[0].hypot(n[1]).atan2(n[2]);
        let phi = n[1].atan2(n[0]);
        let p = BoundVector::from_column_slice(&[0.0, 0.0, phi, theta, 1.0]);
        let q = module_noise(&material, m, &p, 0.105_66);
        let x = 0.15 / X0_SILICON + material.support_x0[0];
        let want = highland_theta0(1.0, beta(1.0, 0.105_66), 1.0, x);
        assert!((q[(THETA, THETA)].sqrt() - want).abs() < 1e-12);
        assert!((q[(PHI, PHI)] * theta.sin().powi(2) - want * want).abs() < 1e-15);
    }
}
