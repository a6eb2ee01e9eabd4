//! Stepping a charged particle's free state through the solenoid's field, with the transport
//! Jacobian of every step.
//!
//! The free state is (x, y, z \[mm\], tx, ty, tz, λ): position, unit direction and λ = q/p
//! \[e/GeV\]. In the field B = B_z(z) ê_z ([`SolenoidField`], in GeV/(e·mm)) the direction turns
//! as dt/ds = λ t × B, that is dtx/ds = λB_z ty, dty/ds = −λB_z tx, dtz/ds = 0 (the
//! generator's convention: a positive charge turns clockwise seen from +z). Where B_z is the
//! same over a whole step the motion is an exact helix ([`helix_step`]); where it varies
//! with z, a fourth-order Runge–Kutta step ([`rk4_step`]) integrates the motion and, with
//! the same stages, its variational equations, so that its Jacobian is the exact derivative
//! of the step it takes. [`step`] picks one of the two.

use nalgebra::{SMatrix, SVector};
use trackgnn_trackml::SolenoidField;

/// The free state (x, y, z, tx, ty, tz, q/p).
pub type FreeVector = SVector<f64, 7>;
/// A 7 × 7 matrix on free states (a transport Jacobian).
pub type FreeMatrix = SMatrix<f64, 7, 7>;

/// Index of q/p in a [`FreeVector`].
pub const QOP: usize = 6;

/// d(state)/ds at `y`: the equations of motion.
fn derivative(field: &SolenoidField, y: &FreeVector) -> FreeVector {
    let k = y[QOP] * field.bz(y[2]);
    FreeVector::from_column_slice(&[y[3], y[4], y[5], k * y[4], -k * y[3], 0.0, 0.0])
}

/// ∂(d state/ds)/∂state at `y`, with `db` = dB_z/dz: the variational equations' matrix.
fn derivative_jacobian(field: &SolenoidField, y: &FreeVector, db: f64) -> FreeMatrix {
    let b = field.bz(y[2]);
    let lam = y[QOP];
    let mut a = FreeMatrix::zeros();
    a[(0, 3)] = 1.0;
    a[(1, 4)] = 1.0;
    a[(2, 5)] = 1.0;
    // dtx/ds = λ B(z) ty
    a[(3, 2)] = lam * db * y[4];
    a[(3, 4)] = lam * b;
    a[(3, QOP)] = b * y[4];
    // dty/ds = −λ B(z) tx
    a[(4, 2)] = -lam * db * y[3];
    a[(4, 3)] = -lam * b;
    a[(4, QOP)] = -b * y[3];
    a
}

/// One classical Runge–Kutta step of path length `h` \[mm\] (negative: backward) from `y`:
/// the new state and the step's Jacobian ∂y(h)/∂y(0), integrated with the same stages. The
/// step should lie on one straight piece of the field's profile (the propagation ends steps at
/// its knots): dB_z/dz is taken at the step's middle, so a step that starts on a knot uses the
/// slope of the piece it goes into.
pub fn rk4_step(field: &SolenoidField, y: &FreeVector, h: f64) -> (FreeVector, FreeMatrix) {
    let id = FreeMatrix::identity();
    let db = field.dbz_dz(y[2] + 0.5 * y[5] * h);
    let k1 = derivative(field, y);
    let j1 = derivative_jacobian(field, y, db);
    let y2 = y + k1 * (h / 2.0);
    let k2 = derivative(field, &y2);
    let j2 = derivative_jacobian(field, &y2, db) * (id + j1 * (h / 2.0));
    let y3 = y + k2 * (h / 2.0);
    let k3 = derivative(field, &y3);
    let j3 = derivative_jacobian(field, &y3, db) * (id + j2 * (h / 2.0));
    let y4 = y + k3 * h;
    let k4 = derivative(field, &y4);
    let j4 = derivative_jacobian(field, &y4, db) * (id + j3 * h);
    let next = y + (k1 + k2 * 2.0 + k3 * 2.0 + k4) * (h / 6.0);
    let jac = id + (j1 + j2 * 2.0 + j3 * 2.0 + j4) * (h / 6.0);
    (next, jac)
}

/// Below this |ω h| the helix factors are taken from their series.
const SERIES_BELOW: f64 = 1e-3;

/// sin(a)/ω, (1 − cos a)/ω and their derivatives in ω, for a = ω h: from their series in a
/// (`series`, for small a, where the closed forms lose digits) or the closed forms.
fn helix_factors(omega: f64, h: f64, series: bool) -> (f64, f64, f64, f64) {
    let a = omega * h;
    if series {
        let a2 = a * a;
        (
            h * (1.0 - a2 / 6.0 + a2 * a2 / 120.0),
            h * a * (0.5 - a2 / 24.0 + a2 * a2 / 720.0),
            h * h * a * (-1.0 / 3.0 + a2 / 30.0),
            h * h * (0.5 - a2 / 8.0 + a2 * a2 / 144.0),
        )
    } else {
        let (sin_a, cos_a) = a.sin_cos();
        let (fs, fc) = (sin_a / omega, (1.0 - cos_a) / omega);
        (fs, fc, (h * cos_a - fs) / omega, (h * sin_a - fc) / omega)
    }
}

/// The exact helix step of path length `h` \[mm\] from `y` in the uniform field `bz`
/// \[GeV/(e·mm)\], and its Jacobian.
pub fn helix_step(bz: f64, y: &FreeVector, h: f64) -> (FreeVector, FreeMatrix) {
    let (tx, ty, tz, lam) = (y[3], y[4], y[5], y[QOP]);
    let omega = lam * bz;
    let a = omega * h;
    let (sin_a, cos_a) = a.sin_cos();
    let (fs, fc, dfs, dfc) = helix_factors(omega, h, a.abs() < SERIES_BELOW);
    let next = FreeVector::from_column_slice(&[
        y[0] + tx * fs + ty * fc,
        y[1] + ty * fs - tx * fc,
        y[2] + tz * h,
        tx * cos_a + ty * sin_a,
        ty * cos_a - tx * sin_a,
        tz,
        lam,
    ]);
    let mut j = FreeMatrix::identity();
    j[(0, 3)] = fs;
    j[(0, 4)] = fc;
    j[(1, 3)] = -fc;
    j[(1, 4)] = fs;
    j[(2, 5)] = h;
    j[(3, 3)] = cos_a;
    j[(3, 4)] = sin_a;
    j[(4, 3)] = -sin_a;
    j[(4, 4)] = cos_a;
    // Through ω = λ B.
    j[(0, QOP)] = bz * (tx * dfs + ty * dfc);
    j[(1, QOP)] = bz * (ty * dfs - tx * dfc);
    j[(3, QOP)] = bz * h * (-tx * sin_a + ty * cos_a);
    j[(4, QOP)] = bz * h * (-ty * sin_a - tx * cos_a);
    (next, j)
}

/// One step of path length `h`: the exact helix where B_z is the same over the whole step,
/// a Runge–Kutta step where it varies.
pub fn step(field: &SolenoidField, y: &FreeVector, h: f64) -> (FreeVector, FreeMatrix) {
    let z1 = y[2] + y[5] * h;
    if field.is_uniform_between(y[2], z1) { helix_step(field.bz(y[2]), y, h) } else { rk4_step(field, y, h) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trackgnn_trackml::units::tesla_to_native;

    /// A 1.2 GeV positive track leaving near the origin at 40° polar angle.
    fn start(z: f64) -> FreeVector {
        let (theta, phi) = (40f64.to_radians(), 0.3f64);
        FreeVector::from_column_slice(&[
            1.0,
            -2.0,
            z,
            theta.sin() * phi.cos(),
            theta.sin() * phi.sin(),
            theta.cos(),
            1.0 / 1.2,
        ])
    }

    /// Central finite differences of `f` at `y`, column by column.
    fn numeric(f: impl Fn(&FreeVector) -> FreeVector, y: &FreeVector) -> FreeMatrix {
        let mut j = FreeMatrix::zeros();
        for c in 0..7 {
            let eps = if c == QOP { 1e-6 } else { 1e-5 };
            let (mut hi, mut lo) = (*y, *y);
            hi[c] += eps;
            lo[c] -= eps;
            j.set_column(c, &((f(&hi) - f(&lo)) / (2.0 * eps)));
        }
        j
    }

    #[test]
    fn helix_and_runge_kutta_agree_in_a_uniform_field() {
        let field = SolenoidField::uniform(2.0);
        let (mut a, mut b) = (start(0.0), start(0.0));
        for _ in 0..40 {
            a = helix_step(field.bz(0.0), &a, 25.0).0;
            b = rk4_step(&field, &b, 25.0).0;
        }
        assert!((a - b).norm() < 1e-6, "{a} vs {b}");
        // A full turn of the transverse direction after 2πR / sin θ.
        let pt = 1.2 * 40f64.to_radians().sin();
        let big_r = pt / tesla_to_native(2.0);
        let s = std::f64::consts::TAU * big_r / 40f64.to_radians().sin();
        let y0 = start(0.0);
        let back = helix_step(field.bz(0.0), &y0, s).0;
        assert!((back.fixed_rows::<2>(3) - y0.fixed_rows::<2>(3)).norm() < 1e-12);
        assert!((back.fixed_rows::<2>(0) - y0.fixed_rows::<2>(0)).norm() < 1e-9);
    }

    #[test]
    fn the_transport_jacobians_are_the_derivatives_of_the_steps() {
        let field = SolenoidField::default();
        // In the varying field around |z| = 1200 mm and in the uniform centre; forward and back.
        for (z, h) in [(1200.0, 40.0), (-1300.0, -35.0), (100.0, 60.0), (100.0, 1e-3)] {
            let y = start(z);
            let (_, jac) = rk4_step(&field, &y, h);
            let num = numeric(|y| rk4_step(&field, y, h).0, &y);
            assert!((jac - num).abs().max() < 1e-6, "rk4 at {z}, {h}: {}", jac - num);
            let (_, jac) = helix_step(field.bz(z), &y, h);
            let num = numeric(|y| helix_step(field.bz(z), y, h).0, &y);
            assert!((jac - num).abs().max() < 1e-6, "helix at {z}, {h}: {}", jac - num);
        }
        // The series branch of the helix (a high-momentum track) and the exact branch meet.
        let mut y = start(0.0);
        y[QOP] = 1.0 / 500.0;
        let b = field.bz(0.0);
        let small = helix_step(b, &y, 20.0);
        let num = numeric(|y| helix_step(b, y, 20.0).0, &y);
        assert!((small.1 - num).abs().max() < 1e-6, "{}", small.1 - num);
        let omega = y[QOP] * b;
        let h = SERIES_BELOW / omega;
        let (series, exact) = (helix_factors(omega, h, true), helix_factors(omega, h, false));
        for (s, e) in [(series.0, exact.0), (series.1, exact.1), (series.2, exact.2), (series.3, exact.3)] {
            assert!((s - e).abs() <= 1e-9 * e.abs(), "{series:?} vs {exact:?}");
        }
    }

    #[test]
    fn step_takes_the_helix_only_where_the_field_is_flat() {
        let field = SolenoidField::default();
        let y = start(100.0);
        assert_eq!(step(&field, &y, 50.0).0, helix_step(field.bz(100.0), &y, 50.0).0);
        let y = start(480.0);
        assert_eq!(step(&field, &y, 50.0).0, rk4_step(&field, &y, 50.0).0);
    }
}
