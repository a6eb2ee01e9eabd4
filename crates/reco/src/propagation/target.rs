//! Propagation of a free state to a surface: a module's plane, a cylinder (the beam pipe) or
//! the beam line, with the transport Jacobian corrected for the path length that the surface
//! fixes.
//!
//! Steps of at most [`MAX_STEP`] go along the tangent's estimate of the distance to the
//! surface, the last one when that estimate is below [`TOLERANCE`]. The Jacobian of the whole propagation
//! is the product of the steps' Jacobians, then corrected for the end point staying on the
//! surface: with g(y) = 0 the surface and f = dy/ds, a change δy₀ of the start moves the end
//! along the trajectory by δs = −∇g·J δy₀ / (∇g·f), so J ← (I − f ∇gᵀ / (∇g·f)) J.

use nalgebra::{RowSVector, Vector3};
use trackgnn_trackml::SolenoidField;

use super::stepper::{FreeMatrix, FreeVector, QOP, step};
use crate::error::{Error, Result};

/// The longest single step \[mm\].
pub const MAX_STEP: f64 = 100.0;
/// The largest turn of the transverse direction in one step \[rad\].
const MAX_TURN: f64 = 0.2;
/// A propagation ends with the step along the tangent's estimate of the remaining path once
/// that is below this \[mm\] (what is left after it is of order κ·TOLERANCE², nothing).
pub const TOLERANCE: f64 = 1e-6;
/// No propagation takes more steps than this.
const MAX_STEPS: usize = 1000;

/// Where a propagation stops.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Target {
    /// The plane through `center` with unit normal `normal` (a module).
    Plane {
        /// A point of the plane \[mm\].
        center: Vector3<f64>,
        /// Its unit normal.
        normal: Vector3<f64>,
    },
    /// The cylinder of radius `r` \[mm\] around the beam line, crossed in the direction of
    /// motion (`forward`) or against it.
    Cylinder {
        /// Radius \[mm\].
        r: f64,
        /// Whether the crossing lies ahead (true) or behind (false) the start.
        forward: bool,
    },
    /// The point of closest approach to the beam line (the z axis) in the transverse plane:
    /// the perigee.
    BeamLine,
}

/// The end of a propagation.
#[derive(Clone, Copy, Debug)]
pub struct Propagated {
    /// The free state on the target.
    pub state: FreeVector,
    /// ∂(end state)/∂(start state), the end held on the target.
    pub jacobian: FreeMatrix,
    /// The path length travelled \[mm\] (negative: backward).
    pub path: f64,
}

impl Target {
    /// The tangent's estimate of the path length from `y` to the surface (`first`: the first
    /// estimate of a propagation, which for a cylinder takes the crossing in its direction;
    /// later ones the nearest). `None`: the tangent never reaches it.
    fn estimate(&self, y: &FreeVector, first: bool) -> Option<f64> {
        match *self {
            Target::Plane { center, normal } => {
                let pos = y.fixed_rows::<3>(0);
                let dn = normal.dot(&y.fixed_rows::<3>(3));
                (dn != 0.0).then(|| -normal.dot(&(pos - center)) / dn)
            }
            Target::Cylinder { r, forward } => {
                // |r_T + d t_T| = r.
                let a = y[3] * y[3] + y[4] * y[4];
                let b = y[0] * y[3] + y[1] * y[4];
                let c = y[0] * y[0] + y[1] * y[1] - r * r;
                let disc = b * b - a * c;
                if a == 0.0 || disc < 0.0 {
                    return None;
                }
                let roots = [(-b - disc.sqrt()) / a, (-b + disc.sqrt()) / a];
                if first {
                    let ahead = roots.into_iter().filter(|&d| (d > 0.0) == forward);
                    if forward { ahead.reduce(f64::min) } else { ahead.reduce(f64::max) }
                } else {
                    roots.into_iter().min_by(|p, q| p.abs().total_cmp(&q.abs()))
                }
            }
            Target::BeamLine => {
                let a = y[3] * y[3] + y[4] * y[4];
                (a != 0.0).then(|| -(y[0] * y[3] + y[1] * y[4]) / a)
            }
        }
    }

    /// ∇g of the surface's equation g(y) = 0 at `y`.
    fn gradient(&self, y: &FreeVector) -> RowSVector<f64, 7> {
        let mut g = RowSVector::<f64, 7>::zeros();
        match *self {
            Target::Plane { normal, .. } => {
                g[0] = normal[0];
                g[1] = normal[1];
                g[2] = normal[2];
            }
            Target::Cylinder { .. } => {
                let r = y[0].hypot(y[1]);
                g[0] = y[0] / r;
                g[1] = y[1] / r;
            }
            Target::BeamLine => {
                g[0] = y[3];
                g[1] = y[4];
                g[3] = y[0];
                g[4] = y[1];
            }
        }
        g
    }
}

/// dy/ds at `y` (the motion in `field`).
fn motion(field: &SolenoidField, y: &FreeVector) -> FreeVector {
    let k = y[QOP] * field.bz(y[2]);
    FreeVector::from_column_slice(&[y[3], y[4], y[5], k * y[4], -k * y[3], 0.0, 0.0])
}

/// Propagates `start` through `field` to `target`, at most `max_path` \[mm\] of path either way.
///
/// # Errors
/// [`Error::Fit`] if the trajectory does not reach the target (it turns away from it, or
/// would need more than `max_path`), or the state is not finite.
pub fn propagate(field: &SolenoidField, start: &FreeVector, target: &Target, max_path: f64) -> Result<Propagated> {
    if !start.iter().all(|v| v.is_finite()) {
        return Err(Error::Fit(format!("cannot propagate a state that is not finite: {start:?}")));
    }
    let mut y = *start;
    let mut jac = FreeMatrix::identity();
    let mut path = 0.0;
    // Whether the tangent has reached the surface yet (the first estimate that does picks the
    // crossing in the cylinder's direction; later ones the nearest).
    let mut located = false;
    for _ in 0..MAX_STEPS {
        let d = match (target.estimate(&y, !located), target) {
            (Some(d), _) => {
                located = true;
                d
            }
            // A curved track's tangent can pass by a cylinder it will cross: step towards it.
            (None, &Target::Cylinder { forward, .. }) if !located => {
                if forward {
                    MAX_STEP
                } else {
                    -MAX_STEP
                }
            }
            (None, _) => {
                let at = &y.as_slice()[..3];
                return Err(Error::Fit(format!("the trajectory does not reach {target:?} (at {at:?})")));
            }
        };
        let omega = (y[QOP] * field.bz(y[2])).abs() * y[3].hypot(y[4]).max(1e-3);
        let h_max = MAX_STEP.min(MAX_TURN / omega.max(1e-12));
        let mut h = d.clamp(-h_max, h_max);
        // A step ends at a knot of the field's profile: each Runge–Kutta step then integrates
        // one straight piece of it (across a kink its error would be of order h²).
        if let Some(zk) = field.knot_between(y[2], y[2] + y[5] * h) {
            h = (zk - y[2]) / y[5];
        }
        if (path + h).abs() > max_path {
            break;
        }
        let (next, j) = step(field, &y, h);
        y = next;
        jac = j * jac;
        path += h;
        if d.abs() < TOLERANCE && h == d {
            // The last step was the tangent's: what remains is of order κ d², nothing.
            let f = motion(field, &y);
            let g = target.gradient(&y);
            let gf = (g * f)[0];
            if gf == 0.0 || !y.iter().all(|v| v.is_finite()) {
                return Err(Error::Fit(format!("the trajectory grazes {target:?}")));
            }
            let correction = FreeMatrix::identity() - f * g / gf;
            return Ok(Propagated { state: y, jacobian: correction * jac, path });
        }
    }
    Err(Error::Fit(format!("the trajectory does not reach {target:?} within {max_path} mm")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start() -> FreeVector {
        let (theta, phi) = (1.1f64, 0.4f64);
        FreeVector::from_column_slice(&[
            0.02,
            -0.01,
            30.0,
            theta.sin() * phi.cos(),
            theta.sin() * phi.sin(),
            theta.cos(),
            -1.0 / 0.8,
        ])
    }

    fn plane() -> Target {
        // A plane at ~300 mm, tilted.
        let normal = Vector3::new(0.9, 0.3, 0.1).normalize();
        Target::Plane { center: normal * 300.0 + Vector3::new(0.0, 0.0, 5.0), normal }
    }

    /// The end state's finite-difference derivative in each start coordinate.
    fn numeric(field: &SolenoidField, y: &FreeVector, target: &Target) -> FreeMatrix {
        let mut j = FreeMatrix::zeros();
        for c in 0..7 {
            let eps = 1e-6;
            let (mut hi, mut lo) = (*y, *y);
            hi[c] += eps;
            lo[c] -= eps;
            let a = propagate(field, &hi, target, 5000.0).unwrap().state;
            let b = propagate(field, &lo, target, 5000.0).unwrap().state;
            j.set_column(c, &((a - b) / (2.0 * eps)));
        }
        j
    }

    #[test]
    fn propagation_ends_on_the_target_with_the_derivative_as_jacobian() {
        let field = SolenoidField::default();
        let y = start();
        for target in [plane(), Target::Cylinder { r: 19.0, forward: true }] {
            let end = propagate(&field, &y, &target, 5000.0).unwrap();
            assert!(end.path > 0.0);
            let pos = end.state.fixed_rows::<3>(0).into_owned();
            match target {
                Target::Plane { center, normal } => assert!(normal.dot(&(pos - center)).abs() < 1e-8),
                _ => assert!((pos[0].hypot(pos[1]) - 19.0).abs() < 1e-8),
            }
            let num = numeric(&field, &y, &target);
            assert!((end.jacobian - num).abs().max() < 1e-5, "{target:?}: {}", end.jacobian - num);
        }
        // And back to the beam line from the plane: the perigee, where r_T ⟂ t_T.
        let on_plane = propagate(&field, &y, &plane(), 5000.0).unwrap().state;
        let back = propagate(&field, &on_plane, &Target::BeamLine, 5000.0).unwrap();
        assert!(back.path < 0.0);
        let s = back.state;
        assert!((s[0] * s[3] + s[1] * s[4]).abs() < 1e-9);
        assert!((s[0] - y[0]).abs() < 0.05 && (s[1] - y[1]).abs() < 0.05, "{s}");
        let num = numeric(&field, &on_plane, &Target::BeamLine);
        assert!((back.jacobian - num).abs().max() < 1e-5, "{}", back.jacobian - num);
    }

    #[test]
    fn unreachable_targets_and_bad_states_are_errors() {
        let field = SolenoidField::default();
        let y = start();
        // A plane parallel to the motion's start and far away: a 0.8 GeV track turns before it.
        let far = Target::Plane { center: Vector3::new(0.0, 0.0, 1.0e5), normal: Vector3::new(0.0, 0.0, 1.0) };
        assert!(propagate(&field, &y, &far, 5000.0).is_err());
        let mut bad = y;
        bad[0] = f64::NAN;
        let err = propagate(&field, &bad, &plane(), 5000.0).unwrap_err().to_string();
        assert!(err.contains("not finite"), "{err}");
    }
}
