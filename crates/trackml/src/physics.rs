//! Physics formulas shared by the simulation and the analysis: kinematics, the helix radius
//! and multiple scattering. Units: mm, GeV, e, rad; fields in GeV/(e·mm) (see [`crate::units`]).
//! The detector's material that tracks cross: [`material`].

pub mod material;

/// Radiation length of silicon \[mm\] (PDG: 9.370 cm).
pub const X0_SILICON: f64 = 93.70;
/// Radiation length of beryllium \[mm\] (PDG: 35.28 cm), the beam pipe.
pub const X0_BERYLLIUM: f64 = 352.8;
/// Nuclear interaction length of silicon \[mm\] (PDG: 46.52 cm).
pub const LAMBDA_I_SILICON: f64 = 465.2;

/// Pseudorapidity η = −ln tan(θ/2) = asinh(pz / pt) of a direction or momentum.
pub fn eta_of(px: f64, py: f64, pz: f64) -> f64 {
    let pt = px.hypot(py);
    if pt == 0.0 {
        return if pz >= 0.0 { f64::INFINITY } else { f64::NEG_INFINITY };
    }
    (pz / pt).asinh()
}

/// Pseudorapidity of a point seen from the origin.
pub fn eta_of_point(x: f64, y: f64, z: f64) -> f64 {
    eta_of(x, y, z)
}

/// Wraps an angle into (−π, π], the one φ range of trackgnn: −π maps to π, and an angle
/// already in the range is returned unchanged (bit for bit), so a difference of two φ in
/// (−π, π] is wrapped exactly. For `f32` (graph features) and `f64`.
pub fn wrap_phi<T: Angle>(phi: T) -> T {
    wrap_period(phi, T::TAU)
}

/// Wraps `x` into (−period/2, period/2], as [`wrap_phi`] does angles (whose period is 2π):
/// for an angle in other units, e.g. a feature φ/π of period 2. A value already in the range
/// is returned unchanged (bit for bit).
pub fn wrap_period<T: Angle>(x: T, period: T) -> T {
    let half = period * T::HALF;
    if x > -half && x <= half {
        return x;
    }
    let mut p = x % period;
    if p <= -half {
        p = p + period;
    } else if p > half {
        p = p - period;
    }
    p
}

/// The float types [`wrap_phi`] and [`wrap_period`] work on.
pub trait Angle:
    Copy
    + PartialOrd
    + std::ops::Rem<Output = Self>
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Neg<Output = Self>
{
    /// ½.
    const HALF: Self;
    /// π.
    const PI: Self;
    /// 2π.
    const TAU: Self;
}

impl Angle for f32 {
    const HALF: f32 = 0.5;
    const PI: f32 = std::f32::consts::PI;
    const TAU: f32 = std::f32::consts::TAU;
}

impl Angle for f64 {
    const HALF: f64 = 0.5;
    const PI: f64 = std::f64::consts::PI;
    const TAU: f64 = std::f64::consts::TAU;
}

/// Transverse radius of a helix \[mm\]: R = pT / (|q| · B), with B in GeV/(e·mm).
///
/// In everyday units R\[m\] = pT\[GeV\] / (0.3 · |q| · B\[T\]). Returns infinity for B = 0 or q = 0.
pub fn helix_radius(pt: f64, q: f64, b: f64) -> f64 {
    let qb = (q * b).abs();
    if qb == 0.0 { f64::INFINITY } else { pt / qb }
}

/// Multiple-scattering width θ0 \[rad\] of the *projected* angle (Highland; PDG 2024, eq. 34.16):
///
/// θ0 = 13.6 MeV / (β c p) · |z| · sqrt(x/X0) · (1 + 0.038 ln(x z² / (X0 β²)))
///
/// `p` in GeV, `beta` = p/E, `charge` in e, `x_over_x0` the traversed thickness in radiation
/// lengths (along the path, not the normal thickness). The space angle has width √2 θ0. The
/// formula is accurate to 11% for 1e-3 < x/X0 < 100; below that range it is still used, as
/// every fast simulation does, and the logarithm term is clamped so θ0 stays positive.
pub fn highland_theta0(p: f64, beta: f64, charge: f64, x_over_x0: f64) -> f64 {
    if x_over_x0 <= 0.0 || p <= 0.0 {
        return 0.0;
    }
    let z = charge.abs();
    let log_term = (x_over_x0 * z * z / (beta * beta)).ln();
    let corr = (1.0 + 0.038 * log_term).max(0.1);
    0.0136 / (beta * p) * z * x_over_x0.sqrt() * corr
}

/// Relativistic β = p / E for momentum `p` and mass `m` \[GeV\].
pub fn beta(p: f64, mass: f64) -> f64 {
    p / (p * p + mass * mass).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::tesla_to_native;

    #[test]
    fn eta_and_phi() {
        assert!(eta_of(1.0, 0.0, 0.0).abs() < 1e-12);
        // θ = 45°: η = −ln tan(22.5°) = 0.8814
        assert!((eta_of(1.0, 0.0, 1.0) - 0.881_373_587).abs() < 1e-8);
        assert!((wrap_phi(3.0 * std::f64::consts::PI) - std::f64::consts::PI).abs() < 1e-12);
        assert!((wrap_phi(-0.5_f64) + 0.5).abs() < 1e-15);
    }

    #[test]
    fn wrap_phi_is_half_open_at_minus_pi() {
        use std::f64::consts::{PI, TAU};
        // The edges: −π is outside, π inside; values in range come back bit for bit.
        assert_eq!(wrap_phi(PI), PI);
        assert_eq!(wrap_phi(-PI), PI);
        assert_eq!(wrap_phi(std::f32::consts::PI), std::f32::consts::PI);
        assert_eq!(wrap_phi(-std::f32::consts::PI), std::f32::consts::PI);
        for x in [0.0, 1e-300, -1e-300, 0.1, -3.0, 3.1, -PI + 1e-15] {
            assert_eq!(wrap_phi(x).to_bits(), f64::to_bits(x), "{x}");
        }
        // A difference of two angles in (−π, π] lies in (−2π, 2π): one turn at most.
        assert!((wrap_phi(PI - 0.1 - (-PI + 0.1)) - (-0.2)).abs() < 1e-12);
        assert!((wrap_phi(-PI + 0.1 - PI) - 0.1).abs() < 1e-12);
        // Many turns away.
        assert!((wrap_phi(0.5 + 7.0 * TAU) - 0.5).abs() < 1e-12);
        assert!((wrap_phi(-0.5 - 7.0 * TAU) + 0.5).abs() < 1e-12);
        // Another period, as for φ/π (period 2): the same half-open range, in its units.
        assert_eq!(wrap_period(1.0f32, 2.0), 1.0);
        assert_eq!(wrap_period(-1.0f32, 2.0), 1.0);
        assert_eq!(wrap_period(-0.99f32 - 0.98, 2.0).to_bits(), (-0.99f32 - 0.98 + 2.0).to_bits());
        assert_eq!(wrap_period(0.98f32 + 0.99, 2.0).to_bits(), (0.98f32 + 0.99 - 2.0).to_bits());
        for k in -20..=20 {
            let p = wrap_phi(k as f64 * 0.77);
            assert!(p > -PI && p <= PI, "{k}: {p}");
        }
    }

    #[test]
    fn helix_radius_in_everyday_units() {
        // 1 GeV in 2 T: 1 / (0.29979 · 2) m
        let r = helix_radius(1.0, 1.0, tesla_to_native(2.0));
        assert!((r / 1000.0 - 1.0 / (0.299_792_458 * 2.0)).abs() < 1e-9);
        assert!(helix_radius(1.0, 0.0, 1.0).is_infinite());
    }

    #[test]
    fn highland_for_a_pixel_module() {
        // 1 GeV pion through 0.15 mm of silicon at normal incidence: x/X0 = 1.6e-3,
        // θ0 = 13.6 MeV/GeV · 0.04 · (1 + 0.038 ln 1.6e-3) ≈ 0.41 mrad.
        let b = beta(1.0, 0.13957);
        let t = highland_theta0(1.0, b, 1.0, 0.15 / X0_SILICON);
        assert!((t - 4.1e-4).abs() < 0.2e-4, "{t}");
        // It scales as 1/p at high momentum.
        let t10 = highland_theta0(10.0, beta(10.0, 0.13957), 1.0, 0.15 / X0_SILICON);
        assert!((t / t10 - 10.0).abs() < 0.2);
    }
}
