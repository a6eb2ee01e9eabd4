//! Bound parameters carried from one reference surface to another: the propagation, its
//! Jacobian in bound parameters and the noise of the beam pipe when the path crosses it.

use trackgnn_trackml::SolenoidField;
use trackgnn_trackml::geometry::Detector;
use trackgnn_trackml::physics::material::MaterialModel;

use super::params::{BoundMatrix, BoundVector, ReferenceSurface};
use super::scattering::beam_pipe_noise;
use crate::error::Result;
use crate::propagation::target::{Target, propagate};

/// The longest propagation between two surfaces \[mm\] (more than the detector's size).
pub const MAX_PATH: f64 = 10_000.0;

/// What a fit propagates in: the detector, its field and material, and the particle's mass.
#[derive(Clone, Copy, Debug)]
pub struct FitContext<'a> {
    /// The detector (its modules are the surfaces).
    pub det: &'a Detector,
    /// The solenoid's field.
    pub field: &'a trackgnn_trackml::SolenoidField,
    /// The material the track crosses.
    pub material: MaterialModel,
    /// The mass hypothesis \[GeV\] (Highland's β).
    pub mass: f64,
}

/// Parameters transported to a surface: the new parameters, ∂(new)/∂(old) and the noise
/// of the material crossed on the way (the beam pipe), so that the covariance becomes
/// F C Fᵀ + Q.
#[derive(Clone, Copy, Debug)]
pub struct Transported {
    /// The parameters on the target surface.
    pub params: BoundVector,
    /// ∂(params)/∂(start params): F.
    pub jacobian: BoundMatrix,
    /// Q: the noise of the material crossed between the two surfaces.
    pub noise: BoundMatrix,
}

impl FitContext<'_> {
    /// A context for `det` in `field`.
    pub fn new<'a>(det: &'a Detector, field: &'a SolenoidField, material: MaterialModel, mass: f64) -> FitContext<'a> {
        FitContext { det, field, material, mass }
    }

    /// The transverse radius of a surface (the beam line's: 0).
    fn radius(&self, surface: ReferenceSurface) -> f64 {
        match surface {
            ReferenceSurface::Module(i) => self.det.modules[i].center[0].hypot(self.det.modules[i].center[1]),
            ReferenceSurface::BeamLine => 0.0,
        }
    }

    /// Transports `params` on `from` to `to`, with the beam pipe's noise when the path crosses
    /// it (one surface inside the pipe's radius and the other outside).
    ///
    /// # Errors
    /// [`Error::Fit`](crate::Error::Fit) if the trajectory does not reach `to`.
    pub fn transport(&self, from: ReferenceSurface, params: &BoundVector, to: ReferenceSurface) -> Result<Transported> {
        let (free, b2f) = from.to_free(self.det, params);
        let r_pipe = self.material.beam_pipe[0];
        let (r0, r1) = (free[0].hypot(free[1]), self.radius(to));
        let target = to.target(self.det);
        let (free_end, jac, q_free) = if (r0 - r_pipe) * (r1 - r_pipe) < 0.0 {
            let pipe = Target::Cylinder { r: r_pipe, forward: r1 > r0 };
            let at_pipe = propagate(self.field, &free, &pipe, MAX_PATH)?;
            let q = beam_pipe_noise(&self.material, &at_pipe.state, self.mass);
            let end = propagate(self.field, &at_pipe.state, &target, MAX_PATH)?;
            (end.state, end.jacobian * at_pipe.jacobian, end.jacobian * q * end.jacobian.transpose())
        } else {
            let end = propagate(self.field, &free, &target, MAX_PATH)?;
            (end.state, end.jacobian, nalgebra::SMatrix::<f64, 7, 7>::zeros())
        };
        let (bound, f2b) = to.to_bound(self.det, &free_end);
        Ok(Transported { params: bound, jacobian: f2b * jac * b2f, noise: f2b * q_free * f2b.transpose() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kalman::params::{LOC0, LOC1, PHI, QOVERP, THETA};

    #[test]
    fn transport_jacobian_is_the_derivative_of_the_transport() {
        let det = Detector::trackml();
        let field = SolenoidField::default();
        let ctx = FitContext::new(&det, &field, MaterialModel::default(), 0.105_66);
        // From a perigee to the pixel module that this track crosses first, then on to a
        // strip module in the varying field, and back to the beam line.
        let start = BoundVector::from_column_slice(&[0.01, 20.0, 0.5, 0.45, 1.0 / 3.0]);
        let (free, _) = ReferenceSurface::BeamLine.to_free(&det, &start);
        let crossing = |r: f64| {
            // The module whose centre is nearest the helix at radius r (straight-line guess).
            let t = free.fixed_rows::<3>(3);
            let s = r / t[0].hypot(t[1]);
            let p = [free[0] + s * t[0], free[1] + s * t[1], free[2] + s * t[2]];
            let (i, _) = det
                .modules
                .iter()
                .enumerate()
                .map(|(i, m)| (i, (m.center[0] - p[0]).hypot(m.center[1] - p[1]).hypot(m.center[2] - p[2])))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .unwrap();
            ReferenceSurface::Module(i)
        };
        let (pixel, strip) = (crossing(72.0), crossing(660.0));
        let legs = [
            (ReferenceSurface::BeamLine, start, pixel),
            (pixel, ctx.transport(ReferenceSurface::BeamLine, &start, pixel).unwrap().params, strip),
        ];
        for (from, p, to) in legs {
            let t = ctx.transport(from, &p, to).unwrap();
            for c in [LOC0, LOC1, PHI, THETA, QOVERP] {
                let eps = if c == QOVERP { 1e-7 } else { 1e-6 };
                let (mut hi, mut lo) = (p, p);
                hi[c] += eps;
                lo[c] -= eps;
                let d = (ctx.transport(from, &hi, to).unwrap().params - ctx.transport(from, &lo, to).unwrap().params)
                    / (2.0 * eps);
                let tol = 1e-5 * d.norm().max(1.0);
                assert!(
                    (d - t.jacobian.column(c)).norm() < tol,
                    "{from:?} → {to:?}, column {c}: {d} vs {}",
                    t.jacobian.column(c)
                );
            }
        }
        // Out of the beam pipe: noise on the angles; between two modules outside it: none.
        let out = ctx.transport(ReferenceSurface::BeamLine, &start, pixel).unwrap();
        assert!(out.noise[(PHI, PHI)] > 0.0 && out.noise[(THETA, THETA)] > 0.0);
        let on = ctx.transport(pixel, &out.params, strip).unwrap();
        assert_eq!(on.noise, BoundMatrix::zeros());
        // Back to the beam line: the start again.
        let back = ctx.transport(strip, &on.params, ReferenceSurface::BeamLine).unwrap();
        assert!((back.params - start).norm() < 1e-6, "{}", back.params - start);
    }
}
