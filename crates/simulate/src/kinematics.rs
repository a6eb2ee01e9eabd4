//! Small vector and relativistic kinematics helpers (mm, GeV).

use trackgnn_trackml::rng::Rng;

/// A 3-vector.
pub type V3 = [f64; 3];

/// a + s·b
#[inline]
pub fn axpy(a: V3, s: f64, b: V3) -> V3 {
    [a[0] + s * b[0], a[1] + s * b[1], a[2] + s * b[2]]
}

/// a · b
#[inline]
pub fn dot(a: V3, b: V3) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

/// |a|
#[inline]
pub fn norm(a: V3) -> f64 {
    dot(a, a).sqrt()
}

/// a / |a|
#[inline]
pub fn unit(a: V3) -> V3 {
    let n = norm(a);
    [a[0] / n, a[1] / n, a[2] / n]
}

/// s·a
#[inline]
pub fn scale(a: V3, s: f64) -> V3 {
    [a[0] * s, a[1] * s, a[2] * s]
}

/// a × b
#[inline]
pub fn cross(a: V3, b: V3) -> V3 {
    [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
}

/// The unit direction with pseudorapidity `eta` and azimuth `phi`.
pub fn direction_from_eta_phi(eta: f64, phi: f64) -> V3 {
    let theta = 2.0 * (-eta).exp().atan();
    [theta.sin() * phi.cos(), theta.sin() * phi.sin(), theta.cos()]
}

/// Two unit vectors orthogonal to the unit vector `t` and to each other.
pub fn orthonormal_basis(t: V3) -> (V3, V3) {
    let a = if t[2].abs() < 0.9 { [0.0, 0.0, 1.0] } else { [1.0, 0.0, 0.0] };
    let e1 = unit(cross(t, a));
    let e2 = cross(t, e1);
    (e1, e2)
}

/// Rotates the unit vector `t` by polar angle `theta` at azimuth `phi` around itself.
pub fn deflect(t: V3, theta: f64, phi: f64) -> V3 {
    let (e1, e2) = orthonormal_basis(t);
    let (st, ct) = theta.sin_cos();
    unit([
        ct * t[0] + st * (phi.cos() * e1[0] + phi.sin() * e2[0]),
        ct * t[1] + st * (phi.cos() * e1[1] + phi.sin() * e2[1]),
        ct * t[2] + st * (phi.cos() * e1[2] + phi.sin() * e2[2]),
    ])
}

/// An isotropic unit vector.
pub fn isotropic(rng: &mut Rng) -> V3 {
    let c = rng.range(-1.0, 1.0);
    let s = (1.0 - c * c).max(0.0).sqrt();
    let phi = rng.range(-std::f64::consts::PI, std::f64::consts::PI);
    [s * phi.cos(), s * phi.sin(), c]
}

/// Isotropic two-body decay of a parent of mass `m` and lab momentum `p_lab` into masses
/// `m1`, `m2`; returns the two lab momenta \[GeV\]. Returns `None` below threshold.
pub fn two_body_decay(rng: &mut Rng, m: f64, p_lab: V3, m1: f64, m2: f64) -> Option<(V3, V3)> {
    if m < m1 + m2 {
        return None;
    }
    // Momentum in the rest frame (PDG kinematics eq. 49.17).
    let pstar = ((m * m - (m1 + m2).powi(2)) * (m * m - (m1 - m2).powi(2))).sqrt() / (2.0 * m);
    let d = isotropic(rng);
    let q1 = scale(d, pstar);
    let q2 = scale(d, -pstar);
    let e1 = (pstar * pstar + m1 * m1).sqrt();
    let e2 = (pstar * pstar + m2 * m2).sqrt();
    Some((boost(q1, e1, p_lab, m), boost(q2, e2, p_lab, m)))
}

/// Boosts a rest-frame 4-momentum (q, e) into the frame where a parent of mass `m` has momentum
/// `p_parent`; returns the lab 3-momentum.
pub fn boost(q: V3, e: f64, p_parent: V3, m: f64) -> V3 {
    let pp = norm(p_parent);
    if pp == 0.0 {
        return q;
    }
    let ep = (pp * pp + m * m).sqrt();
    let n = scale(p_parent, 1.0 / pp);
    let gamma = ep / m;
    let bg = pp / m;
    let q_par = dot(q, n);
    let q_par_lab = gamma * q_par + bg * e;
    axpy(q, q_par_lab - q_par, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_body_conserves_momentum_and_mass() {
        let mut rng = Rng::new(9);
        let m = 0.497_611;
        let p = [0.3, -0.2, 1.1];
        for _ in 0..100 {
            let (a, b) = two_body_decay(&mut rng, m, p, 0.13957, 0.13957).unwrap();
            let s = axpy(a, 1.0, b);
            assert!((0..3).all(|i| (s[i] - p[i]).abs() < 1e-12));
            let e = |q: V3, mm: f64| (dot(q, q) + mm * mm).sqrt();
            let etot = e(a, 0.13957) + e(b, 0.13957);
            let minv = (etot * etot - dot(s, s)).sqrt();
            assert!((minv - m).abs() < 1e-9, "{minv}");
        }
        assert!(two_body_decay(&mut rng, 0.2, p, 0.14, 0.14).is_none());
    }

    #[test]
    fn deflection_angle_is_exact() {
        let t = unit([0.3, 0.4, 0.5]);
        let d = deflect(t, 0.01, 1.0);
        assert!((dot(t, d).acos() - 0.01).abs() < 1e-9);
        let eta_dir = direction_from_eta_phi(0.881_373_587, 0.0);
        assert!((eta_dir[0] - eta_dir[2]).abs() < 1e-9);
    }
}
