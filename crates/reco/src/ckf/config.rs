//! The settings of seeding, the combinatorial Kalman filter and ambiguity resolution.
//!
//! The defaults follow ACTS's seed finder and CKF where this detector allows (the TrackML
//! pixel detector, pile-up 200): they are the values the measurements in
//! `tools/recipes/results/ckf.md` were taken with.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Triplet seeding on the pixel layers (ACTS `SeedFinderConfig`'s cuts).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeedConfig {
    /// Smallest pT of a seed \[GeV\]: the circle's radius must be at least pT / B. Default 0.5.
    pub pt_min: f64,
    /// Smallest transverse distance between two hits of a seed \[mm\]. Default 5.
    pub delta_r_min: f64,
    /// Largest transverse distance between two consecutive hits of a seed \[mm\]. Default 130
    /// (one pixel layer may be skipped).
    pub delta_r_max: f64,
    /// Largest |cot θ| (|η| = 4: 27.3).
    pub cot_theta_max: f64,
    /// Half-length of the collision region along the beam \[mm\]: the r–z line of a seed must
    /// meet the beam line within it. Default 200 (3.6 σ of the beam spot's 55 mm).
    pub z_max: f64,
    /// Largest transverse impact parameter |d0| of the seed's circle \[mm\]. Default 2.
    pub impact_max: f64,
    /// How many standard deviations (multiple scattering at the seed's momentum and the hits'
    /// errors) the two halves' cot θ may differ by. Default 5 (ACTS's `sigmaScattering`).
    pub sigma_scattering: f64,
    /// The seeds kept per middle hit, best first (ACTS's `maxSeedsPerSpM` + 1). Default 3.
    pub max_seeds_per_middle: usize,
}

impl Default for SeedConfig {
    fn default() -> Self {
        SeedConfig {
            pt_min: 0.5,
            delta_r_min: 5.0,
            delta_r_max: 130.0,
            cot_theta_max: 27.3,
            z_max: 200.0,
            impact_max: 2.0,
            sigma_scattering: 5.0,
            max_seeds_per_middle: 3,
        }
    }
}

/// The combinatorial Kalman filter (ACTS `CombinatorialKalmanFilter` with its measurement
/// selector) and greedy ambiguity resolution (ACTS `GreedyAmbiguityResolution`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CkfConfig {
    /// Seeding.
    pub seeds: SeedConfig,
    /// A hit is compatible with a predicted state if the update's χ² (2 degrees of freedom)
    /// is at most this. Default 15.
    pub chi2_max: f64,
    /// At most this many compatible hits of one module branch a trajectory, best χ² first.
    /// Default 10.
    pub max_branches_per_surface: usize,
    /// At most this many trajectories of one seed are followed at once (the best, by hits then
    /// χ²). Default 10.
    pub max_branches: usize,
    /// A trajectory stops after more than this many layers in a row crossed without a hit
    /// (holes). Default 2.
    pub max_consecutive_holes: usize,
    /// A trajectory stops after more than this many holes in all. Default 3.
    pub max_holes: usize,
    /// The smallest track, in hits (seed included). Default 5 (`reconstruct`'s `--min-hits`).
    pub min_hits: usize,
    /// A seed is not followed if at least this many of its three hits are already on a track
    /// found from an earlier seed. Default 2.
    pub skip_seed_used_hits: usize,
    /// Ambiguity resolution: a track may share at most this many hits with the others.
    /// Default 1.
    pub max_shared_hits: usize,
    /// The mass hypothesis of the tracks \[GeV\] (Highland's β): the pion's, 0.1396.
    pub mass: f64,
    /// Refit every final track with the Kalman filter and smoother for its perigee parameters
    /// with errors ([`crate::kalman::KalmanFitter`]). Default false (the track finding's own
    /// filtered parameters are kept).
    pub fit: bool,
}

impl Default for CkfConfig {
    fn default() -> Self {
        CkfConfig {
            seeds: SeedConfig::default(),
            chi2_max: 15.0,
            max_branches_per_surface: 10,
            max_branches: 10,
            max_consecutive_holes: 2,
            max_holes: 3,
            min_hits: 5,
            skip_seed_used_hits: 2,
            max_shared_hits: 1,
            mass: 0.139_57,
            fit: false,
        }
    }
}

impl CkfConfig {
    /// Checks every value.
    ///
    /// # Errors
    /// [`Error::Config`] naming the first setting out of range.
    pub fn validate(&self) -> Result<()> {
        let s = &self.seeds;
        let positive = [
            ("seeds.pt_min", s.pt_min),
            ("seeds.delta_r_max", s.delta_r_max),
            ("seeds.cot_theta_max", s.cot_theta_max),
            ("seeds.z_max", s.z_max),
            ("seeds.impact_max", s.impact_max),
            ("seeds.sigma_scattering", s.sigma_scattering),
            ("chi2_max", self.chi2_max),
            ("mass", self.mass),
        ];
        for (field, v) in positive {
            if !(v.is_finite() && v > 0.0) {
                return Err(Error::Config { field, message: format!("must be a positive number, got {v}") });
            }
        }
        if !(s.delta_r_min >= 0.0 && s.delta_r_min < s.delta_r_max) {
            return Err(Error::Config {
                field: "seeds.delta_r_min",
                message: format!("must be in [0, delta_r_max), got {}", s.delta_r_min),
            });
        }
        let counts = [
            ("seeds.max_seeds_per_middle", s.max_seeds_per_middle),
            ("max_branches_per_surface", self.max_branches_per_surface),
            ("max_branches", self.max_branches),
            ("skip_seed_used_hits", self.skip_seed_used_hits),
        ];
        for (field, v) in counts {
            if v == 0 {
                return Err(Error::Config { field, message: "must be at least 1".into() });
            }
        }
        if self.min_hits < 3 {
            return Err(Error::Config {
                field: "min_hits",
                message: format!("must be at least 3, got {}", self.min_hits),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_values_name_their_setting() {
        CkfConfig::default().validate().unwrap();
        let mut c = CkfConfig::default();
        c.seeds.pt_min = 0.0;
        assert!(c.validate().unwrap_err().to_string().contains("seeds.pt_min"));
        let c = CkfConfig { min_hits: 2, ..CkfConfig::default() };
        assert!(c.validate().unwrap_err().to_string().contains("min_hits"));
        let c = CkfConfig { max_branches: 0, ..CkfConfig::default() };
        assert!(c.validate().unwrap_err().to_string().contains("max_branches"));
    }
}
