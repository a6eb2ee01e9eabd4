//! A helix through a track's last hits, stepped along its path length and intersected with
//! the cylinders and planes of the detector's layers.

use std::f64::consts::{FRAC_PI_2, TAU};

use super::circle::{circle_center, curvature};

/// Crossings closer than this \[mm\] to the helix's start are the surface it starts on.
pub const MIN_STEP: f64 = 1.0;

/// A helix in a uniform solenoid field: a circle in the transverse plane (or a straight
/// line) and a constant dz per transverse path length, starting at the point `b`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Helix {
    /// The transverse start point \[mm\].
    pub b: [f64; 2],
    /// z at the start \[mm\].
    pub zb: f64,
    /// Centre and radius \[mm\] of the circle; `None` for a straight line.
    pub circle: Option<([f64; 2], f64)>,
    /// +1 counter-clockwise, −1 clockwise.
    pub sense: f64,
    /// Unit transverse direction of motion at `b`.
    pub dir: [f64; 2],
    /// dz per transverse path length.
    pub tan_lambda: f64,
}

impl Helix {
    /// The helix through the transverse points `p` (optional), `a` and `b` (in the order
    /// crossed), starting at `b` with z `zb` and no slope in z (set
    /// [`tan_lambda`](Helix::tan_lambda), e.g. from [`arc_length`](Helix::arc_length)).
    /// Without `p`, or when the three are (nearly) collinear, the helix is the straight line
    /// from `a` through `b`. `a` and `b` must differ.
    pub fn through(p: Option<[f64; 2]>, a: [f64; 2], b: [f64; 2], zb: f64) -> Helix {
        let chord = [b[0] - a[0], b[1] - a[1]];
        let len = chord[0].hypot(chord[1]);
        let k = p.map_or(0.0, |p| curvature(p, a, b));
        let mut helix =
            Helix { b, zb, circle: None, sense: 1.0, dir: [chord[0] / len, chord[1] / len], tan_lambda: 0.0 };
        if k.abs() > 1e-7
            && let Some(c) = p.and_then(|p| circle_center(p, a, b))
        {
            let rho = (b[0] - c[0]).hypot(b[1] - c[1]);
            let sense = k.signum();
            let u = [(b[0] - c[0]) / rho, (b[1] - c[1]) / rho];
            helix.circle = Some((c, rho));
            helix.sense = sense;
            helix.dir = [-sense * u[1], sense * u[0]];
        }
        helix
    }

    /// The transverse path length along the helix's circle of a chord of length `chord`
    /// \[mm\] (the chord itself for a straight line; at most half a turn).
    pub fn arc_length(&self, chord: f64) -> f64 {
        match self.circle {
            Some((_, rho)) => 2.0 * rho * (chord / (2.0 * rho)).min(1.0).asin(),
            None => chord,
        }
    }

    /// The transverse point after path length `s` from `b`.
    pub fn at(&self, s: f64) -> [f64; 2] {
        match self.circle {
            None => [self.b[0] + s * self.dir[0], self.b[1] + s * self.dir[1]],
            Some((c, rho)) => {
                let t = self.sense * s / rho;
                let (u0, u1) = ((self.b[0] - c[0]) / rho, (self.b[1] - c[1]) / rho);
                let (sn, cs) = t.sin_cos();
                [c[0] + rho * (u0 * cs - u1 * sn), c[1] + rho * (u0 * sn + u1 * cs)]
            }
        }
    }

    /// z after transverse path length `s` from `b`.
    pub fn z_at(&self, s: f64) -> f64 {
        self.zb + self.tan_lambda * s
    }

    /// The largest path length searched: a quarter turn (a few metres for a straight line).
    pub fn s_max(&self) -> f64 {
        self.circle.map_or(5000.0, |(_, rho)| FRAC_PI_2 * rho)
    }

    /// Transverse path length from `b` to the first crossing of the cylinder of radius `r`
    /// ahead, beyond [`MIN_STEP`] and within [`s_max`](Helix::s_max).
    pub fn to_cylinder(&self, r: f64) -> Option<f64> {
        let s = match self.circle {
            None => {
                let bd = self.b[0] * self.dir[0] + self.b[1] * self.dir[1];
                let disc = bd * bd - (self.b[0] * self.b[0] + self.b[1] * self.b[1]) + r * r;
                (disc >= 0.0).then(|| -bd + disc.sqrt())?
            }
            Some((c, rho)) => {
                // |C + ρ·u(t)| = r with u(t) the unit vector from C turned by sense·t:
                // A cos t + B sin t = k.
                let u0 = [(self.b[0] - c[0]) / rho, (self.b[1] - c[1]) / rho];
                let v0 = [-self.sense * u0[1], self.sense * u0[0]];
                let (a, bb) = (c[0] * u0[0] + c[1] * u0[1], c[0] * v0[0] + c[1] * v0[1]);
                let k = (r * r - c[0] * c[0] - c[1] * c[1] - rho * rho) / (2.0 * rho);
                let m = a.hypot(bb);
                if m == 0.0 || k.abs() > m {
                    return None;
                }
                let (phi0, w) = (bb.atan2(a), (k / m).acos());
                let t = [phi0 - w, phi0 + w]
                    .into_iter()
                    .map(|t| t.rem_euclid(TAU))
                    .filter(|&t| t * rho > MIN_STEP)
                    .min_by(f64::total_cmp)?;
                t * rho
            }
        };
        (s > MIN_STEP && s <= self.s_max()).then_some(s)
    }

    /// Transverse path length from `b` to the plane z = `z` ahead, beyond [`MIN_STEP`] and
    /// within [`s_max`](Helix::s_max).
    pub fn to_plane(&self, z: f64) -> Option<f64> {
        if self.tan_lambda == 0.0 {
            return None;
        }
        let s = (z - self.zb) / self.tan_lambda;
        (s > MIN_STEP && s <= self.s_max()).then_some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn circle_crossings_lie_on_the_cylinder_and_the_circle() {
        // A circle of radius 1000 through the origin (centre (0, 1000)), moving
        // counter-clockwise from b at radius ~100.
        let c = [0.0, 1000.0];
        let at = |t: f64| [1000.0 * t.sin(), 1000.0 - 1000.0 * t.cos()];
        let b = at(0.1);
        let h = Helix {
            b,
            zb: 10.0,
            circle: Some((c, 1000.0)),
            sense: 1.0,
            dir: [0.1f64.cos(), 0.1f64.sin()],
            tan_lambda: 0.5,
        };
        let s = h.to_cylinder(500.0).unwrap();
        let p = h.at(s);
        assert!((p[0].hypot(p[1]) - 500.0).abs() < 1e-6, "{p:?}");
        assert!(((p[0] - c[0]).hypot(p[1] - c[1]) - 1000.0).abs() < 1e-6);
        // Chord 500 from the origin on a circle of radius 1000: turning angle 2·asin(0.25).
        assert!((s - 1000.0 * (2.0 * 0.25f64.asin() - 0.1)).abs() < 1e-6, "{s}");
        // Behind b (radius 50) there is no crossing ahead, and beyond the diameter none at all.
        assert!(h.to_cylinder(50.0).is_none());
        assert!(h.to_cylinder(2100.0).is_none());
        let s = h.to_plane(110.0).unwrap();
        assert!((s - 200.0).abs() < 1e-9);
        assert!((h.z_at(s) - 110.0).abs() < 1e-9);
        assert!(h.to_plane(0.0).is_none());
    }

    #[test]
    fn straight_line_crossing() {
        let h = Helix { b: [30.0, 0.0], zb: 0.0, circle: None, sense: 1.0, dir: [1.0, 0.0], tan_lambda: 0.0 };
        assert!((h.to_cylinder(100.0).unwrap() - 70.0).abs() < 1e-9);
        assert!(h.to_plane(100.0).is_none());
    }

    #[test]
    fn helix_through_three_points_runs_along_their_circle() {
        // Clockwise on the circle of radius 600 around (0, -600) from the origin.
        let at = |t: f64| [600.0 * t.sin(), -600.0 + 600.0 * t.cos()];
        let h = Helix::through(Some(at(0.0)), at(0.1), at(0.2), 0.0);
        let (c, rho) = h.circle.unwrap();
        assert!((rho - 600.0).abs() < 1e-6 && c[0].abs() < 1e-6 && (c[1] + 600.0).abs() < 1e-6, "{h:?}");
        assert_eq!(h.sense, -1.0);
        let p = h.at(600.0 * 0.1);
        assert!((p[0] - at(0.3)[0]).abs() < 1e-6 && (p[1] - at(0.3)[1]).abs() < 1e-6, "{p:?}");
        // The arc of a chord spanning 0.1 rad.
        let chord = 2.0 * 600.0 * 0.05f64.sin();
        assert!((h.arc_length(chord) - 60.0).abs() < 1e-9);
        // No third point: the straight line from a through b.
        let line = Helix::through(None, [0.0, 0.0], [3.0, 4.0], 1.0);
        assert!(line.circle.is_none());
        assert_eq!(line.dir, [0.6, 0.8]);
        assert_eq!(line.arc_length(7.0), 7.0);
    }
}
