//! The solenoid field of the TrackML detector.

use crate::units::{native_to_tesla, tesla_to_native};

/// An axial field B_z(z) [GeV/(e·mm)] that depends on z only.
///
/// The TrackML solenoid is ≈ 2.0 T for |z| < 0.5 m, ≈ 1.75 T at 1–1.5 m and falls to ≈ 0.5 T
/// beyond 2 m (docs/data.md). We interpolate linearly in |z| through a table of (|z| \[mm\], B \[T\])
/// knots. Only B_z is modelled: the radial component of a real solenoid's fringe field bends
/// tracks by far less than the silicon scatters them at these momenta, and leaving it out keeps
/// the transverse motion an exact helix within each propagation step.
#[derive(Clone, Debug, PartialEq)]
pub struct SolenoidField {
    knots: Vec<(f64, f64)>,
}

impl Default for SolenoidField {
    fn default() -> Self {
        Self::from_tesla_knots(&[
            (0.0, 2.0),
            (500.0, 2.0),
            (1000.0, 1.80),
            (1500.0, 1.72),
            (2000.0, 0.80),
            (2500.0, 0.55),
            (3200.0, 0.50),
        ])
    }
}

impl SolenoidField {
    /// The TrackML profile scaled so that the centre field is `b_center_tesla`.
    pub fn trackml(b_center_tesla: f64) -> Self {
        let f = b_center_tesla / 2.0;
        SolenoidField { knots: Self::default().knots.iter().map(|&(z, b)| (z, b * f)).collect() }
    }

    /// A field from knots (|z| \[mm\], B \[T\]) in increasing |z|; constant beyond the last knot.
    ///
    /// # Panics
    /// If the knots are empty or not increasing in |z|.
    #[track_caller]
    pub fn from_tesla_knots(knots: &[(f64, f64)]) -> Self {
        assert!(!knots.is_empty(), "SolenoidField needs at least one knot");
        assert!(knots.windows(2).all(|w| w[0].0 < w[1].0), "SolenoidField knots must increase in |z|");
        SolenoidField { knots: knots.iter().map(|&(z, b)| (z, tesla_to_native(b))).collect() }
    }

    /// A uniform field of `b_tesla` everywhere.
    pub fn uniform(b_tesla: f64) -> Self {
        Self::from_tesla_knots(&[(0.0, b_tesla)])
    }

    /// B_z at longitudinal position `z` \[mm\], in GeV/(e·mm).
    #[inline]
    pub fn bz(&self, z: f64) -> f64 {
        let az = z.abs();
        let k = &self.knots;
        if az <= k[0].0 {
            return k[0].1;
        }
        for w in k.windows(2) {
            if az <= w[1].0 {
                let t = (az - w[0].0) / (w[1].0 - w[0].0);
                return w[0].1 + t * (w[1].1 - w[0].1);
            }
        }
        k[k.len() - 1].1
    }

    /// dB_z/dz at `z` \[mm\], in GeV/(e·mm²): the slope of the knot interval `z` lies in
    /// (0 where the field is flat, inside the first knot and beyond the last). At a knot the
    /// slope of the interval below it in |z|, as [`bz`](Self::bz) interpolates there.
    pub fn dbz_dz(&self, z: f64) -> f64 {
        let az = z.abs();
        let k = &self.knots;
        if az <= k[0].0 {
            return 0.0;
        }
        for w in k.windows(2) {
            if az <= w[1].0 {
                let slope = (w[1].1 - w[0].1) / (w[1].0 - w[0].0);
                return if z < 0.0 { -slope } else { slope };
            }
        }
        0.0
    }

    /// Whether B_z is the same everywhere between `z0` and `z1` \[mm\] (no knot interval of
    /// another slope than 0 in between): there the motion is an exact helix.
    pub fn is_uniform_between(&self, z0: f64, z1: f64) -> bool {
        let (a0, a1) = (z0.abs(), z1.abs());
        let (lo, hi) = if (z0 < 0.0) != (z1 < 0.0) { (0.0, a0.max(a1)) } else { (a0.min(a1), a0.max(a1)) };
        self.knots.windows(2).all(|w| w[1].0 <= lo || w[0].0 >= hi || w[0].1 == w[1].1)
    }

    /// The first knot (a z \[mm\] where the profile's slope changes, on either side of 0)
    /// strictly between `z0` and `z1`, in the order from `z0` to `z1`; `None` if there is none.
    /// A step that ends there keeps a Runge–Kutta step on one straight piece of the profile.
    pub fn knot_between(&self, z0: f64, z1: f64) -> Option<f64> {
        let (lo, hi) = (z0.min(z1), z0.max(z1));
        let inside = |z: f64| z > lo && z < hi;
        let knots = self.knots.iter().flat_map(|&(k, _)| [k, -k]).filter(|&z| inside(z));
        if z1 >= z0 { knots.reduce(f64::min) } else { knots.reduce(f64::max) }
    }

    /// B_z at `z` \[mm\] in tesla (for reports).
    pub fn bz_tesla(&self, z: f64) -> f64 {
        native_to_tesla(self.bz(z))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trackml_field_profile() {
        let f = SolenoidField::default();
        assert!((f.bz_tesla(0.0) - 2.0).abs() < 1e-12);
        assert!((f.bz_tesla(-450.0) - 2.0).abs() < 1e-12);
        let mid = f.bz_tesla(1250.0);
        assert!((1.7..=1.8).contains(&mid), "{mid}");
        assert!(f.bz_tesla(2600.0) <= 0.55 && f.bz_tesla(5000.0) > 0.45);
        assert_eq!(f.bz(700.0), f.bz(-700.0));
    }

    #[test]
    fn field_slope_is_the_derivative_of_the_profile() {
        let f = SolenoidField::default();
        for z in [-2600.0, -1250.0, -700.0, -100.0, 0.0, 300.0, 700.0, 1250.0, 1700.0, 2600.0, 4000.0] {
            let h = 1e-3;
            let numeric = (f.bz(z + h) - f.bz(z - h)) / (2.0 * h);
            assert!((f.dbz_dz(z) - numeric).abs() <= 1e-9 * f.bz(0.0), "{z}: {} vs {numeric}", f.dbz_dz(z));
        }
        assert!(f.is_uniform_between(-400.0, 450.0));
        assert!(!f.is_uniform_between(400.0, 600.0));
        assert!(f.is_uniform_between(3300.0, 4000.0));
        assert!(SolenoidField::uniform(2.0).is_uniform_between(-3000.0, 3000.0));
        assert_eq!(f.knot_between(400.0, 1200.0), Some(500.0));
        assert_eq!(f.knot_between(1200.0, 400.0), Some(1000.0));
        assert_eq!(f.knot_between(-600.0, 100.0), Some(-500.0));
        assert_eq!(f.knot_between(500.0, 900.0), None);
    }
}
