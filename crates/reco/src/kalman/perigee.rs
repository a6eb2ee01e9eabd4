//! Fitted track parameters at the perigee as physicists quote them: q/pT, φ, cot θ (and η),
//! d0 and z0, with their covariance.

use nalgebra::SMatrix;

use super::params::{BoundMatrix, BoundVector, LOC0, LOC1, PHI, QOVERP, THETA};

/// Index of q/pT in [`Perigee::cov`].
pub const Q_OVER_PT: usize = 0;
/// Index of φ in [`Perigee::cov`].
pub const PERIGEE_PHI: usize = 1;
/// Index of cot θ in [`Perigee::cov`].
pub const COT_THETA: usize = 2;
/// Index of d0 in [`Perigee::cov`].
pub const D0: usize = 3;
/// Index of z0 in [`Perigee::cov`].
pub const Z0: usize = 4;
/// The names of [`Perigee::values`], in order.
pub const PERIGEE_NAMES: [&str; 5] = ["q/pT", "phi", "cot theta", "d0", "z0"];

/// Track parameters at the perigee (the point of closest approach to the beam line).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Perigee {
    /// q/pT \[e/GeV\].
    pub q_over_pt: f64,
    /// Azimuth of the direction \[rad\].
    pub phi: f64,
    /// cot θ = pz/pT.
    pub cot_theta: f64,
    /// Pseudorapidity −ln tan(θ/2).
    pub eta: f64,
    /// Signed transverse impact parameter \[mm\]: the perigee is (−d0 sin φ, d0 cos φ, z0).
    pub d0: f64,
    /// z of the perigee \[mm\].
    pub z0: f64,
    /// Covariance of (q/pT, φ, cot θ, d0, z0).
    pub cov: SMatrix<f64, 5, 5>,
    /// The error of η \[1\].
    pub sigma_eta: f64,
}

impl Perigee {
    /// From bound parameters (d0, z0, φ, θ, q/p) at the beam line and their covariance.
    pub fn from_bound(params: &BoundVector, cov: &BoundMatrix) -> Perigee {
        let (theta, qop) = (params[THETA], params[QOVERP]);
        let (st, ct) = theta.sin_cos();
        // ∂(q/pT, φ, cot θ, d0, z0)/∂(d0, z0, φ, θ, q/p).
        let mut j = SMatrix::<f64, 5, 5>::zeros();
        j[(Q_OVER_PT, QOVERP)] = 1.0 / st;
        j[(Q_OVER_PT, THETA)] = -qop * ct / (st * st);
        j[(PERIGEE_PHI, PHI)] = 1.0;
        j[(COT_THETA, THETA)] = -1.0 / (st * st);
        j[(D0, LOC0)] = 1.0;
        j[(Z0, LOC1)] = 1.0;
        let cov_p = j * cov * j.transpose();
        Perigee {
            q_over_pt: qop / st,
            phi: params[PHI],
            cot_theta: ct / st,
            eta: -(theta / 2.0).tan().ln(),
            d0: params[LOC0],
            z0: params[LOC1],
            cov: cov_p,
            // dη/dθ = −1/sin θ.
            sigma_eta: cov[(THETA, THETA)].sqrt() / st,
        }
    }

    /// (q/pT, φ, cot θ, d0, z0), in the order of [`PERIGEE_NAMES`].
    pub fn values(&self) -> [f64; 5] {
        [self.q_over_pt, self.phi, self.cot_theta, self.d0, self.z0]
    }

    /// The errors σ of [`values`](Perigee::values).
    pub fn sigmas(&self) -> [f64; 5] {
        std::array::from_fn(|i| self.cov[(i, i)].sqrt())
    }

    /// pT \[GeV\].
    pub fn pt(&self) -> f64 {
        1.0 / self.q_over_pt.abs()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perigee_covariance_is_the_transformed_bound_covariance() {
        let p = BoundVector::from_column_slice(&[0.02, -3.0, 1.0, 0.6, -0.25]);
        let cov = BoundMatrix::from_diagonal(&BoundVector::from_column_slice(&[1e-4, 4e-4, 1e-6, 2e-6, 1e-6]));
        let per = Perigee::from_bound(&p, &cov);
        assert!((per.pt() - 4.0 * 0.6f64.sin()).abs() < 1e-12);
        assert!((per.eta - (-(0.3f64).tan().ln())).abs() < 1e-12);
        // Numerically: the spread of cot θ from θ alone.
        let eps = 1e-7f64;
        let dcot = ((0.6 + eps).cos() / (0.6 + eps).sin() - (0.6 - eps).cos() / (0.6 - eps).sin()) / (2.0 * eps);
        assert!((per.cov[(COT_THETA, COT_THETA)] - dcot * dcot * 2e-6).abs() < 1e-12);
        let dq = |t: f64, q: f64| q / t.sin();
        let d_theta = (dq(0.6 + eps, -0.25) - dq(0.6 - eps, -0.25)) / (2.0 * eps);
        let d_qop = 1.0 / 0.6f64.sin();
        let want = d_theta * d_theta * 2e-6 + d_qop * d_qop * 1e-6;
        assert!((per.cov[(Q_OVER_PT, Q_OVER_PT)] - want).abs() < 1e-12);
        assert_eq!(per.sigmas()[D0], 1e-2);
    }
}
