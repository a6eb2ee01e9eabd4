//! The windows of track following: whether a hit continues a path's helix, and its χ².
//!
//! Step 3 of [track following](super::follow): the curvature of the circle through the path's
//! last hits and the candidate against that through earlier ones, and the polar angle of the
//! last step against the previous one, each within a window widened by the hits' position
//! errors. The hit search ([`search`](super::search)) uses the same χ².

use super::follow_config::FollowConfig;
use crate::propagation::circle::{curvature, curvature_sigma};

/// Node positions in Cartesian coordinates and the checks of step 3 of the module docs.
pub(super) struct Geometry<'a> {
    pub(super) xy: &'a [[f64; 2]],
    pub(super) z: &'a [f64],
    pub(super) r: &'a [f32],
    pub(super) cfg: &'a FollowConfig,
    /// Whether the beam line stands in for a missing third point of a curvature estimate
    /// (prompt paths); without it (the displaced pass) such an estimate is left out.
    pub(super) beam_line: bool,
}

impl Geometry<'_> {
    pub(super) fn r_of(&self, n: usize) -> f64 {
        f64::from(self.r[n])
    }

    pub(super) fn dxy(&self, p: usize, q: usize) -> f64 {
        (self.xy[q][0] - self.xy[p][0]).hypot(self.xy[q][1] - self.xy[p][1])
    }

    pub(super) fn d3(&self, p: usize, q: usize) -> f64 {
        self.dxy(p, q).hypot(self.z[q] - self.z[p])
    }

    fn theta(&self, p: usize, q: usize) -> f64 {
        self.dxy(p, q).atan2(self.z[q] - self.z[p])
    }

    /// The latest node of `path[..end]` at least the lever arm from `from` under `dist`, as
    /// (index in path, node).
    pub(super) fn anchor(
        &self,
        path: &[usize],
        end: usize,
        from: usize,
        dist: impl Fn(usize, usize) -> f64,
    ) -> Option<(usize, usize)> {
        (0..end).rev().map(|k| (k, path[k])).find(|&(_, q)| dist(q, from) >= self.cfg.min_lever_arm)
    }

    /// χ² of extending `path` by `c`, or `None` if `c` is outside the windows.
    pub(super) fn chi2(&self, path: &[usize], c: usize) -> Option<f64> {
        let cfg = self.cfg;
        let b = *path.last().expect("a path is never empty");
        let last = path.len() - 1;
        let mut chi2 = 0.0;
        if self.dxy(b, c) >= cfg.min_lever_arm
            && let Some((ia, a)) = self.anchor(path, last, b, |p, q| self.dxy(p, q))
        {
            let (xa, xb, xc) = (self.xy[a], self.xy[b], self.xy[c]);
            let k_new = curvature(xa, xb, xc);
            let s = cfg.transverse_sigma;
            let reference = match self.anchor(path, ia, a, |p, q| self.dxy(p, q)) {
                Some((_, p)) => Some((curvature(self.xy[p], xa, xb), 1.0, curvature_sigma(self.xy[p], xa, xb, [s; 3]))),
                None if self.beam_line => {
                    Some((curvature([0.0, 0.0], xa, xb), 3.0, curvature_sigma([0.0, 0.0], xa, xb, [0.0, s, s])))
                }
                None => None,
            };
            if let Some((k_ref, widen, sigma_ref)) = reference {
                let sigma_delta = curvature_sigma(xa, xb, xc, [s; 3]).hypot(sigma_ref);
                let allowed = widen * (cfg.curvature_abs + cfg.curvature_rel * k_new.abs()) + 2.0 * sigma_delta;
                chi2 += ((k_new - k_ref) / allowed).powi(2);
            }
        }
        if self.d3(b, c) >= cfg.min_lever_arm
            && let Some((_, a)) = self.anchor(path, last, b, |p, q| self.d3(p, q))
        {
            let sigma = |n: usize| cfg.sigma(f64::from(self.r[n]));
            let spread = 0.002 + 2.0 * sigma(c) / self.d3(b, c) + 2.0 * sigma(a) / self.d3(a, b);
            chi2 += ((self.theta(b, c) - self.theta(a, b)) / (cfg.theta_window * spread)).powi(2);
        }
        (chi2 < 1.0).then_some(chi2)
    }
}
