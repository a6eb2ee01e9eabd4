//! The settings of track following ([`follow`](super::follow())) and of its hit search.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Settings of [`follow`](super::follow()). `Default` gives values measured on full mu = 200 TrackML-like events
/// (the windows hold ~99.5% of true triplets of pT ≥ 1 GeV particles).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FollowConfig {
    /// A path starts only along an edge scoring at least this, in [0, 1]. Default 0.1.
    pub seed_cut: f64,
    /// How many of a start node's seed edges are tried, best first, until one gives a path
    /// of `min_hits` nodes (the longest path is kept), ≥ 1. Default 3: the best-scored first
    /// edge alone often leads to another particle's hit in a dense event (the first step has
    /// no helix to check against); on 8 mu = 200 events a second and third try found 14 more
    /// of 8,311 primary targets (0.9939 → 0.9953), a sixth none more.
    pub seed_tries: usize,
    /// Absolute curvature window [1/mm], > 0. Default 3e-4 (a 1 GeV track in 2 T has 6e-4).
    pub curvature_abs: f64,
    /// Curvature window relative to the candidate's curvature, ≥ 0. Default 0.1.
    pub curvature_rel: f64,
    /// Polar-angle window in units of its expected spread, > 0. Default 1.3.
    pub theta_window: f64,
    /// Weight of −ln(score) against the geometric χ², ≥ 0. Default 0.3.
    pub score_weight: f64,
    /// Shortest distance \[mm\] between the points of a curvature or angle estimate, > 0.
    /// Default 15 (closer hits, e.g. overlapping modules of one layer, give no lever arm).
    pub min_lever_arm: f64,
    /// Position error σ \[mm\] of a hit by radius: `[r_max, sigma]` pairs with increasing
    /// `r_max`; hits beyond the last `r_max` take the last σ. Default: the TrackML detector's
    /// pixels (r < 200 mm) 0.025, short strips (< 700 mm) 0.6, long strips (< 1100 mm, and
    /// beyond) 5. Finite: quality models record these settings in JSON.
    pub position_sigma: Vec<[f64; 2]>,
    /// Transverse position error σ \[mm\] of a hit, ≥ 0: the curvature window widens by
    /// twice the error of Δκ that it gives the two three-point estimates (a curvature through
    /// hits d₁ and d₂ apart moves by about 2σ/(d₁·d₂)), large where the hits are close in the
    /// transverse plane (forward tracks crossing end-cap disks). 0 leaves it out. Default
    /// 0.025: on 4 mu = 200 events, 0.0125 and 0.05 gave the same primary efficiency within
    /// 0.15 point, 0 (the fixed window) 0.2 point less and 1.6 times the duplicate rate.
    pub transverse_sigma: f64,
    /// Extend paths by the hit search beyond the graph's edges ([`search`](super::search))
    /// when the edges carry node layers ([`ScoredEdges::with_layers`](super::ScoredEdges::with_layers)). Default true.
    pub search: bool,
    /// Hit search: a path ends after more than this many layers in a row crossed without a
    /// compatible hit. Default 1.
    pub max_holes: usize,
    /// Hit search: a path of 3 to `min_hits − 1` nodes, too short to be a track, is extended
    /// too and becomes one if it reaches this many nodes (at least `min_hits`). Default 7:
    /// extended to just 5 or 6 hits, such paths were mostly fakes on mu = 200 events.
    pub rescue_min_hits: usize,
    /// Hit search: a path may continue onto the first hit of another track when that
    /// track's second hit continues the helix too; the two become one track. Default true.
    pub merge: bool,
    /// A second pass over the hits no track holds, for particles produced away from the beam
    /// line: the first pass lets the beam line stand in for a path's missing third point of a
    /// curvature estimate (a prompt track's third hit is chosen on the circle through the
    /// origin), which rejects the third hit of a displaced particle; the second pass leaves
    /// that estimate out. Default true.
    pub displaced: bool,
}

impl Default for FollowConfig {
    fn default() -> Self {
        FollowConfig {
            seed_cut: 0.1,
            seed_tries: 3,
            curvature_abs: 3e-4,
            curvature_rel: 0.1,
            theta_window: 1.3,
            score_weight: 0.3,
            min_lever_arm: 15.0,
            position_sigma: vec![[200.0, 0.025], [700.0, 0.6], [1100.0, 5.0]],
            transverse_sigma: 0.025,
            search: true,
            max_holes: 1,
            rescue_min_hits: 7,
            merge: true,
            displaced: true,
        }
    }
}

impl FollowConfig {
    /// Checks every field's range.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &'static str, msg: String| Err(Error::config(field, msg));
        if !(0.0..=1.0).contains(&self.seed_cut) {
            return bad("follow.seed_cut", format!("must be in [0, 1], got {}", self.seed_cut));
        }
        if self.seed_tries == 0 {
            return bad("follow.seed_tries", "must be at least 1, got 0".to_string());
        }
        for (field, v, min_inclusive) in [
            ("follow.curvature_abs", self.curvature_abs, false),
            ("follow.curvature_rel", self.curvature_rel, true),
            ("follow.theta_window", self.theta_window, false),
            ("follow.score_weight", self.score_weight, true),
            ("follow.min_lever_arm", self.min_lever_arm, false),
            ("follow.transverse_sigma", self.transverse_sigma, true),
        ] {
            let ok = v.is_finite() && if min_inclusive { v >= 0.0 } else { v > 0.0 };
            if !ok {
                let want = if min_inclusive { "finite and ≥ 0" } else { "finite and > 0" };
                return bad(field, format!("must be {want}, got {v}"));
            }
        }
        if self.position_sigma.is_empty()
            || self.position_sigma.iter().any(|p| !(p[1] > 0.0 && p[1].is_finite() && p[0].is_finite()))
            || self.position_sigma.windows(2).any(|w| w[0][0] >= w[1][0])
        {
            return bad(
                "follow.position_sigma",
                format!("must be finite [r_max, sigma > 0] pairs with increasing r_max, got {:?}", self.position_sigma),
            );
        }
        Ok(())
    }

    pub(super) fn sigma(&self, r: f64) -> f64 {
        let last = self.position_sigma.last().expect("validated: not empty")[1];
        self.position_sigma.iter().find(|p| r < p[0]).map_or(last, |p| p[1])
    }
}
