//! Bound track parameters on a reference surface, and their conversion to and from the free
//! state of propagation, with Jacobians.
//!
//! On a module ([`ReferenceSurface::Module`]): (u, v, φ, θ, q/p), the local position on the
//! module's plane \[mm\] (along its u and v axes, about its centre), the direction's azimuth
//! and polar angle \[rad\] and q/p \[e/GeV\]. On the beam line ([`ReferenceSurface::BeamLine`],
//! the perigee): (d0, z0, φ, θ, q/p), with the perigee point at (−d0 sin φ, d0 cos φ, z0)
//! (the ACTS convention for d0's sign).

use nalgebra::{SMatrix, SVector, Vector3};
use trackgnn_trackml::geometry::{Detector, Module};

use crate::propagation::stepper::{FreeVector, QOP};
use crate::propagation::target::Target;

/// Bound parameters (loc0, loc1, φ, θ, q/p).
pub type BoundVector = SVector<f64, 5>;
/// A 5 × 5 matrix on bound parameters (a covariance, a Jacobian).
pub type BoundMatrix = SMatrix<f64, 5, 5>;
/// ∂(free state)/∂(bound parameters).
pub type BoundToFree = SMatrix<f64, 7, 5>;
/// ∂(bound parameters)/∂(free state).
pub type FreeToBound = SMatrix<f64, 5, 7>;

/// Index of the first local coordinate (u, or d0) in a [`BoundVector`].
pub const LOC0: usize = 0;
/// Index of the second local coordinate (v, or z0).
pub const LOC1: usize = 1;
/// Index of φ.
pub const PHI: usize = 2;
/// Index of θ.
pub const THETA: usize = 3;
/// Index of q/p.
pub const QOVERP: usize = 4;

/// The surface bound parameters are given on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReferenceSurface {
    /// The plane of module `i` of the detector (its index in `Detector::modules`).
    Module(usize),
    /// The beam line: parameters at the perigee.
    BeamLine,
}

/// The unit direction of azimuth `phi` and polar angle `theta`.
pub fn direction(phi: f64, theta: f64) -> Vector3<f64> {
    let (sp, cp) = phi.sin_cos();
    let (st, ct) = theta.sin_cos();
    Vector3::new(st * cp, st * sp, ct)
}

fn module(det: &Detector, i: usize) -> &Module {
    &det.modules[i]
}

impl ReferenceSurface {
    /// The surface as a propagation target.
    ///
    /// # Panics
    /// If a module index is not one of `det`'s.
    pub fn target(&self, det: &Detector) -> Target {
        match *self {
            ReferenceSurface::Module(i) => {
                let m = module(det, i);
                Target::Plane { center: Vector3::from(m.center), normal: Vector3::from(m.normal()) }
            }
            ReferenceSurface::BeamLine => Target::BeamLine,
        }
    }

    /// The free state of `params` on this surface and ∂(free)/∂(bound).
    ///
    /// # Panics
    /// If a module index is not one of `det`'s.
    pub fn to_free(&self, det: &Detector, params: &BoundVector) -> (FreeVector, BoundToFree) {
        let (phi, theta) = (params[PHI], params[THETA]);
        let (sp, cp) = phi.sin_cos();
        let (st, ct) = theta.sin_cos();
        let mut jac = BoundToFree::zeros();
        let pos = match *self {
            ReferenceSurface::Module(i) => {
                let m = module(det, i);
                let (u, v) = (m.axis_u(), m.axis_v());
                for k in 0..3 {
                    jac[(k, LOC0)] = u[k];
                    jac[(k, LOC1)] = v[k];
                }
                Vector3::from(m.center) + Vector3::from(u) * params[LOC0] + Vector3::from(v) * params[LOC1]
            }
            ReferenceSurface::BeamLine => {
                let d0 = params[LOC0];
                jac[(0, LOC0)] = -sp;
                jac[(1, LOC0)] = cp;
                jac[(2, LOC1)] = 1.0;
                jac[(0, PHI)] = -d0 * cp;
                jac[(1, PHI)] = -d0 * sp;
                Vector3::new(-d0 * sp, d0 * cp, params[LOC1])
            }
        };
        jac[(3, PHI)] = -st * sp;
        jac[(4, PHI)] = st * cp;
        jac[(3, THETA)] = ct * cp;
        jac[(4, THETA)] = ct * sp;
        jac[(5, THETA)] = -st;
        jac[(QOP, QOVERP)] = 1.0;
        let t = direction(phi, theta);
        let free = FreeVector::from_column_slice(&[pos[0], pos[1], pos[2], t[0], t[1], t[2], params[QOVERP]]);
        (free, jac)
    }

    /// The bound parameters on this surface of the free state `y` (which must lie on it) and
    /// ∂(bound)/∂(free).
    ///
    /// # Panics
    /// If a module index is not one of `det`'s.
    pub fn to_bound(&self, det: &Detector, y: &FreeVector) -> (BoundVector, FreeToBound) {
        let (tx, ty, tz) = (y[3], y[4], y[5]);
        let rho2 = tx * tx + ty * ty;
        let rho = rho2.sqrt();
        let t2 = rho2 + tz * tz;
        let phi = ty.atan2(tx);
        let theta = rho.atan2(tz);
        let mut jac = FreeToBound::zeros();
        // φ = atan2(ty, tx), θ = atan2(ρ, tz).
        let dphi = [-ty / rho2, tx / rho2];
        jac[(PHI, 3)] = dphi[0];
        jac[(PHI, 4)] = dphi[1];
        jac[(THETA, 3)] = tx * tz / (rho * t2);
        jac[(THETA, 4)] = ty * tz / (rho * t2);
        jac[(THETA, 5)] = -rho / t2;
        jac[(QOVERP, QOP)] = 1.0;
        let (loc0, loc1) = match *self {
            ReferenceSurface::Module(i) => {
                let m = module(det, i);
                let (u, v) = (m.axis_u(), m.axis_v());
                let d = [y[0] - m.center[0], y[1] - m.center[1], y[2] - m.center[2]];
                for k in 0..3 {
                    jac[(LOC0, k)] = u[k];
                    jac[(LOC1, k)] = v[k];
                }
                (u[0] * d[0] + u[1] * d[1] + u[2] * d[2], v[0] * d[0] + v[1] * d[1] + v[2] * d[2])
            }
            ReferenceSurface::BeamLine => {
                let (sp, cp) = phi.sin_cos();
                let d0 = -y[0] * sp + y[1] * cp;
                // d0 = −x sin φ + y cos φ, through φ too.
                let dd0_dphi = -y[0] * cp - y[1] * sp;
                jac[(LOC0, 0)] = -sp;
                jac[(LOC0, 1)] = cp;
                jac[(LOC0, 3)] = dd0_dphi * dphi[0];
                jac[(LOC0, 4)] = dd0_dphi * dphi[1];
                jac[(LOC1, 2)] = 1.0;
                (d0, y[2])
            }
        };
        (BoundVector::from_column_slice(&[loc0, loc1, phi, theta, y[QOP]]), jac)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_to_free_and_back_is_the_identity_with_inverse_jacobians() {
        let det = Detector::trackml();
        let i = det.modules.len() / 3;
        for surface in [ReferenceSurface::Module(i), ReferenceSurface::BeamLine] {
            let p = BoundVector::from_column_slice(&[1.5, -7.0, 2.5, 0.7, -0.8]);
            let (free, b2f) = surface.to_free(&det, &p);
            let (back, f2b) = surface.to_bound(&det, &free);
            assert!((back - p).norm() < 1e-12, "{surface:?}: {back} vs {p}");
            // On the surface, bound → free → bound is the identity.
            let id = f2b * b2f;
            assert!((id - BoundMatrix::identity()).abs().max() < 1e-12, "{surface:?}: {id}");
            // The free → bound Jacobian is the derivative of to_bound.
            for c in 0..7 {
                let eps = 1e-6;
                let (mut hi, mut lo) = (free, free);
                hi[c] += eps;
                lo[c] -= eps;
                let d = (surface.to_bound(&det, &hi).0 - surface.to_bound(&det, &lo).0) / (2.0 * eps);
                assert!((d - f2b.column(c)).norm() < 1e-7, "{surface:?} column {c}: {d} vs {}", f2b.column(c));
            }
        }
    }
}
