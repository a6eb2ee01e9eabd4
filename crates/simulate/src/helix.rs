//! The exact helix of a charged particle in a uniform axial field B_z, parametrised by path
//! length s \[mm\]. Propagation re-evaluates B_z(z) at every step, so the trajectory is a chain
//! of helix arcs.

use crate::kinematics::V3;

/// A helix arc starting at `pos` with unit direction `dir`.
///
/// With ω = q·B_z/p [1/mm] the transverse direction turns clockwise (seen from +z for ω > 0):
/// t_x(s) = t_x cos ωs + t_y sin ωs, t_y(s) = t_y cos ωs − t_x sin ωs, t_z constant, and the
/// position is the integral of t(s). For |ω s| ≪ 1 a series avoids the 1/ω cancellation.
#[derive(Clone, Copy, Debug)]
pub struct Helix {
    /// Start point \[mm\].
    pub pos: V3,
    /// Unit direction at the start.
    pub dir: V3,
    /// Signed curvature rate ω = qB/p [1/mm].
    pub omega: f64,
}

impl Helix {
    /// Position and unit direction after path length `s`.
    #[inline]
    pub fn at(&self, s: f64) -> (V3, V3) {
        let [tx, ty, tz] = self.dir;
        let a = self.omega * s;
        let (sin_a, cos_a) = a.sin_cos();
        // sin(a)/ω and (1 − cos a)/ω, with series for small a.
        let (f_sin, f_cos) = if a.abs() < 1e-4 {
            (s * (1.0 - a * a / 6.0), s * a * (0.5 - a * a / 24.0))
        } else {
            (sin_a / self.omega, (1.0 - cos_a) / self.omega)
        };
        let pos = [self.pos[0] + tx * f_sin + ty * f_cos, self.pos[1] + ty * f_sin - tx * f_cos, self.pos[2] + tz * s];
        let dir = [tx * cos_a + ty * sin_a, ty * cos_a - tx * sin_a, tz];
        (pos, dir)
    }

    /// The path length in [0, h] where the signed distance n·(x(s) − c) to a plane crosses
    /// zero, given its values `f0` at s = 0 and `f1` at s = h of opposite signs (Newton steps
    /// started from the chord, bracketed by bisection).
    pub fn plane_crossing(&self, n: V3, c: V3, h: f64, f0: f64, f1: f64) -> f64 {
        let dist = |s: f64| {
            let (p, t) = self.at(s);
            (
                n[0] * (p[0] - c[0]) + n[1] * (p[1] - c[1]) + n[2] * (p[2] - c[2]),
                n[0] * t[0] + n[1] * t[1] + n[2] * t[2],
            )
        };
        let (mut lo, mut hi) = (0.0, h);
        let mut s = if f0 != f1 { h * f0 / (f0 - f1) } else { 0.5 * h };
        let lo_sign = f0.signum();
        for _ in 0..30 {
            let (f, df) = dist(s);
            if f.abs() < 1e-9 {
                return s;
            }
            if f.signum() == lo_sign {
                lo = s;
            } else {
                hi = s;
            }
            let newton = if df != 0.0 { s - f / df } else { f64::NAN };
            s = if newton > lo && newton < hi { newton } else { 0.5 * (lo + hi) };
            if hi - lo < 1e-9 {
                break;
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trackgnn_trackml::physics::helix_radius;
    use trackgnn_trackml::units::tesla_to_native;

    #[test]
    fn stepped_helix_matches_the_analytic_circle() {
        // pT = 1 GeV, q = +1, B = 2 T, starting along x with a 30° dip.
        let b = tesla_to_native(2.0);
        let (pt, pz) = (1.0, 1.0 / 3f64.sqrt());
        let p = (pt * pt + pz * pz).sqrt();
        let dir = [pt / p, 0.0, pz / p];
        let h = Helix { pos: [0.0; 3], dir, omega: b / p };
        let r = helix_radius(pt, 1.0, b);
        // Positive charge in +z field turns clockwise: the centre is at (0, −R).
        let center = [0.0, -r];
        let mut step = h;
        for _ in 0..200 {
            let (pos, d) = step.at(10.0);
            step = Helix { pos, dir: d, omega: h.omega };
        }
        let (pos, _) = h.at(2000.0);
        let dist = (pos[0] - center[0]).hypot(pos[1] - center[1]);
        assert!((dist - r).abs() < 1e-6, "analytic {dist} vs R {r}");
        for i in 0..3 {
            assert!((step.pos[i] - pos[i]).abs() < 1e-3, "stepped vs analytic {:?} {:?}", step.pos, pos);
        }
        assert!((pos[2] - 2000.0 * pz / p).abs() < 1e-9);
        // Forward then back: ω → −ω with reversed direction returns to the start.
        let (p1, d1) = h.at(500.0);
        let back = Helix { pos: p1, dir: [-d1[0], -d1[1], -d1[2]], omega: -h.omega };
        let (p0, _) = back.at(500.0);
        assert!(p0.iter().all(|x| x.abs() < 1e-9), "{p0:?}");
    }

    #[test]
    fn plane_crossing_is_on_the_plane() {
        let h = Helix { pos: [30.0, 0.0, 0.0], dir: [0.8, 0.6, 0.0], omega: 0.002 };
        let n = [1.0, 0.0, 0.0];
        let c = [40.0, 0.0, 0.0];
        let step = 20.0;
        let f0 = -10.0;
        let (p1, _) = h.at(step);
        let f1 = p1[0] - 40.0;
        let s = h.plane_crossing(n, c, step, f0, f1);
        let (p, _) = h.at(s);
        assert!((p[0] - 40.0).abs() < 1e-8, "{p:?}");
    }
}
