//! Circles in the transverse plane: through three points, and fitted to many.

/// The radius \[mm\] given to a circle fit of collinear points (a straight track).
pub const STRAIGHT_RADIUS: f64 = 1e6;

/// Signed curvature \[1/mm\] of the circle through three transverse points (0: collinear);
/// positive when `a → b → c` turns counter-clockwise.
pub fn curvature(a: [f64; 2], b: [f64; 2], c: [f64; 2]) -> f64 {
    let (ux, uy, vx, vy) = (b[0] - a[0], b[1] - a[1], c[0] - b[0], c[1] - b[1]);
    let d = ((ux * ux + uy * uy) * (vx * vx + vy * vy) * ((c[0] - a[0]).powi(2) + (c[1] - a[1]).powi(2))).sqrt();
    if d == 0.0 { 0.0 } else { 2.0 * (ux * vy - uy * vx) / d }
}

/// Standard deviation \[1/mm\] of [`curvature`]`(a, b, c)` when each point's position has the
/// transverse error `sigma` (0 for the beam line): the curvature is 2h/(|ab|·|bc|), h the
/// distance of `b` from the chord `ac`, which a shift δ of `b` changes by δ, of `a` by
/// δ·|bc|/|ac| and of `c` by δ·|ab|/|ac| (to first order). 0 when two points coincide.
pub fn curvature_sigma(a: [f64; 2], b: [f64; 2], c: [f64; 2], sigma: [f64; 3]) -> f64 {
    let dist = |p: [f64; 2], q: [f64; 2]| (q[0] - p[0]).hypot(q[1] - p[1]);
    let (ab, bc, ac) = (dist(a, b), dist(b, c), dist(a, c));
    if ab == 0.0 || bc == 0.0 || ac == 0.0 {
        return 0.0;
    }
    let h = (sigma[1]).hypot(sigma[0] * bc / ac).hypot(sigma[2] * ab / ac);
    2.0 * h / (ab * bc)
}

/// Centre of the circle through three transverse points (`None`: collinear).
pub fn circle_center(p: [f64; 2], a: [f64; 2], b: [f64; 2]) -> Option<[f64; 2]> {
    let d = 2.0 * (p[0] * (a[1] - b[1]) + a[0] * (b[1] - p[1]) + b[0] * (p[1] - a[1]));
    if d.abs() < 1e-9 {
        return None;
    }
    let (pp, aa, bb) = (p[0] * p[0] + p[1] * p[1], a[0] * a[0] + a[1] * a[1], b[0] * b[0] + b[1] * b[1]);
    Some([
        (pp * (a[1] - b[1]) + aa * (b[1] - p[1]) + bb * (p[1] - a[1])) / d,
        (pp * (b[0] - a[0]) + aa * (p[0] - b[0]) + bb * (a[0] - p[0])) / d,
    ])
}

/// A circle fitted to points in the transverse plane ([`fit_circle`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CircleFit {
    /// Radius \[mm\] ([`STRAIGHT_RADIUS`] for collinear points).
    pub radius: f64,
    /// Distance \[mm\] of the circle from the origin (the beam line).
    pub d0: f64,
    /// Largest distance \[mm\] of a point from the circle.
    pub max_residual: f64,
}

/// The algebraic (Kåsa) circle fit of `pos`'s (x, y): x² + y² + D x + E y + F = 0 in least
/// squares, about the points' mean. Collinear points give a straight track
/// ([`STRAIGHT_RADIUS`]) with the residuals and d0 of their least-squares line. `pos` must
/// not be empty (its mean is NaN otherwise).
pub fn fit_circle(pos: &[[f64; 3]]) -> CircleFit {
    let n = pos.len() as f64;
    let mx = pos.iter().map(|p| p[0]).sum::<f64>() / n;
    let my = pos.iter().map(|p| p[1]).sum::<f64>() / n;
    let mut a = [[0.0f64; 3]; 3];
    let mut b = [0.0f64; 3];
    for p in pos {
        let (x, y) = (p[0] - mx, p[1] - my);
        let row = [x, y, 1.0];
        for i in 0..3 {
            for j in 0..3 {
                a[i][j] += row[i] * row[j];
            }
            b[i] -= row[i] * (x * x + y * y);
        }
    }
    match solve3(a, b) {
        Some([d, e, f]) if (d * d + e * e) / 4.0 - f > 0.0 && ((d * d + e * e) / 4.0 - f).sqrt() < STRAIGHT_RADIUS => {
            let (cx, cy) = (-d / 2.0, -e / 2.0);
            let radius = (cx * cx + cy * cy - f).sqrt();
            let max_residual =
                pos.iter().map(|p| ((p[0] - mx - cx).hypot(p[1] - my - cy) - radius).abs()).fold(0.0, f64::max);
            CircleFit { radius, d0: ((cx + mx).hypot(cy + my) - radius).abs(), max_residual }
        }
        _ => {
            // The line through the mean along the points' principal direction.
            let (mut sxx, mut sxy, mut syy) = (0.0, 0.0, 0.0);
            for p in pos {
                let (x, y) = (p[0] - mx, p[1] - my);
                sxx += x * x;
                sxy += x * y;
                syy += y * y;
            }
            let angle = 0.5 * (2.0 * sxy).atan2(sxx - syy);
            let (nx, ny) = (-angle.sin(), angle.cos());
            let max_residual = pos.iter().map(|p| ((p[0] - mx) * nx + (p[1] - my) * ny).abs()).fold(0.0, f64::max);
            CircleFit { radius: STRAIGHT_RADIUS, d0: (mx * nx + my * ny).abs(), max_residual }
        }
    }
}

/// Solves the 3 × 3 system `a x = b` by Gaussian elimination with partial pivoting; `None`
/// when it is singular.
fn solve3(mut a: [[f64; 3]; 3], mut b: [f64; 3]) -> Option<[f64; 3]> {
    let scale = a.iter().flatten().fold(0.0f64, |m, v| m.max(v.abs()));
    for c in 0..3 {
        let p = (c..3).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))?;
        if a[p][c].abs() <= 1e-12 * scale {
            return None;
        }
        a.swap(c, p);
        b.swap(c, p);
        for row in 0..3 {
            if row != c {
                let (pivot, f) = (a[c], a[row][c] / a[c][c]);
                for (x, p) in a[row].iter_mut().zip(pivot) {
                    *x -= f * p;
                }
                b[row] -= f * b[c];
            }
        }
    }
    Some([b[0] / a[0][0], b[1] / a[1][1], b[2] / a[2][2]])
}

/// The largest distance \[mm\] of z from the least-squares line of z against the transverse
/// path length (the distance walked from point to point in x, y), for points in the order
/// crossed.
pub fn z_line_residual(pos: &[[f64; 3]]) -> f64 {
    let mut s = vec![0.0f64; pos.len()];
    for i in 1..pos.len() {
        s[i] = s[i - 1] + (pos[i][0] - pos[i - 1][0]).hypot(pos[i][1] - pos[i - 1][1]);
    }
    let n = pos.len() as f64;
    let ms = s.iter().sum::<f64>() / n;
    let mz = pos.iter().map(|p| p[2]).sum::<f64>() / n;
    let sxx: f64 = s.iter().map(|v| (v - ms).powi(2)).sum();
    let sxz: f64 = s.iter().zip(pos).map(|(v, p)| (v - ms) * (p[2] - mz)).sum();
    let slope = if sxx > 0.0 { sxz / sxx } else { 0.0 };
    s.iter().zip(pos).map(|(v, p)| (p[2] - mz - slope * (v - ms)).abs()).fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curvature_of_three_points_on_a_circle() {
        // Points on the circle of radius 500 around (0, 500), counter-clockwise: κ = +1/500.
        let p = |t: f64| [500.0 * t.sin(), 500.0 - 500.0 * t.cos()];
        let k = curvature(p(0.1), p(0.2), p(0.35));
        assert!((k - 1.0 / 500.0).abs() < 1e-9, "{k}");
        assert!((curvature(p(0.35), p(0.2), p(0.1)) + 1.0 / 500.0).abs() < 1e-9);
        assert_eq!(curvature([0.0, 0.0], [1.0, 1.0], [2.0, 2.0]), 0.0);
    }

    #[test]
    fn curvature_sigma_is_the_spread_of_shifted_points() {
        // A 1 GeV track in 2 T (R = 1667 mm) seen on three hits 16 and 40 mm apart.
        let p = |t: f64| [1667.0 * t.sin(), 1667.0 - 1667.0 * t.cos()];
        let pts = [p(0.03), p(0.03 + 16.0 / 1667.0), p(0.03 + 56.0 / 1667.0)];
        let sigma = [0.02, 0.03, 0.05];
        // Numerical gradient of the curvature in each coordinate of each point.
        let mut var = 0.0;
        for (i, s) in sigma.iter().enumerate() {
            for axis in 0..2 {
                let (mut hi, mut lo) = (pts, pts);
                hi[i][axis] += 1e-4;
                lo[i][axis] -= 1e-4;
                let d = (curvature(hi[0], hi[1], hi[2]) - curvature(lo[0], lo[1], lo[2])) / 2e-4;
                var += (d * s).powi(2);
            }
        }
        let got = curvature_sigma(pts[0], pts[1], pts[2], sigma);
        assert!((got / var.sqrt() - 1.0).abs() < 0.01, "{got} against {}", var.sqrt());
        assert_eq!(curvature_sigma(pts[0], pts[0], pts[2], sigma), 0.0);
    }

    #[test]
    fn circle_center_of_three_points() {
        let c = circle_center([1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]).unwrap();
        assert!(c[0].abs() < 1e-12 && c[1].abs() < 1e-12);
        assert!(circle_center([0.0, 0.0], [1.0, 1.0], [2.0, 2.0]).is_none());
    }

    #[test]
    fn circle_fit_finds_radius_and_impact_parameter() {
        // A circle of radius 800 whose nearest point to the origin is 3 mm away.
        let (cx, cy) = (0.0, 803.0);
        let pos: Vec<[f64; 3]> =
            (0..8).map(|k| 0.05 + 0.06 * k as f64).map(|t| [cx + 800.0 * t.sin(), cy - 800.0 * t.cos(), 0.0]).collect();
        let fit = fit_circle(&pos);
        assert!((fit.radius - 800.0).abs() < 1e-6, "{fit:?}");
        assert!((fit.d0 - 3.0).abs() < 1e-6, "{fit:?}");
        assert!(fit.max_residual < 1e-6, "{fit:?}");
        // Collinear points: a straight track with the line's distance from the origin.
        let line: Vec<[f64; 3]> = (0..5).map(|k| [10.0 * k as f64, 2.0, 0.0]).collect();
        let fit = fit_circle(&line);
        assert_eq!(fit.radius, STRAIGHT_RADIUS);
        assert!((fit.d0 - 2.0).abs() < 1e-9, "{fit:?}");
    }

    #[test]
    fn z_line_residual_is_zero_on_a_helix_and_sees_a_kink() {
        let helix: Vec<[f64; 3]> =
            (0..6).map(|k| k as f64 * 0.1).map(|t| [500.0 * t.sin(), 500.0 - 500.0 * t.cos(), 250.0 * t]).collect();
        assert!(z_line_residual(&helix) < 1e-9);
        let mut kinked = helix.clone();
        kinked[5][2] += 5.0;
        assert!(z_line_residual(&kinked) > 1.0);
    }
}
