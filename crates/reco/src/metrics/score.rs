//! The TrackML score of one event.
//!
//! As defined by the challenge and computed by the official scorer (LAL/trackml-library,
//! `trackml/score.py`, `score_event`):
//!
//! 1. Every distinct track id of the submission is one track (0 included: the scorer gives
//!    it no special meaning).
//! 2. A track's *majority particle* is the particle with most hits on it.
//! 3. A track counts if its majority particle holds more than half of the track's hits
//!    (noise hits count in the track's size) **and** more than half of the particle's hits
//!    in the event (counted over the truth given).
//! 4. The score is the sum, over counted tracks, of the weights of the hits they share with
//!    their majority particle (the intersection), divided by the sum of all weights:
//!
//!    `score = Σ_counted-tracks Σ_{hits of the track from its majority particle} w / Σ_all-hits w`.
//!
//! So a perfect reconstruction scores 1. In the TrackML files the weights already sum to 1
//! per event, so the division changes nothing there.
//!
//! Where this differs: the noise particle (0) is never counted even when it is a track's
//! majority. The official code would add the noise hits' weights, but TrackML gives noise
//! hits weight 0, so on TrackML truth (and trackgnn's simulated truth) the results are equal.
//! An event whose weights sum to 0 scores 0.

use trackgnn_trackml::ParticleId;

use super::composition::{Composition, compose};

/// The TrackML score of one event: the hits' particles and weights (aligned) and a track id
/// per hit, every distinct id being one track as in a submission file.
///
/// To score track-building output, where [`NO_TRACK`](crate::NO_TRACK) means "in no track",
/// pass it through [`singleton_track_ids`](crate::singleton_track_ids) first (which
/// [`evaluate`](crate::evaluate) does implicitly).
///
/// # Panics
/// If the three slices differ in length.
#[track_caller]
pub fn trackml_score(particle_id: &[ParticleId], weight: &[f32], track_ids: &[u32]) -> f64 {
    assert_eq!(particle_id.len(), weight.len(), "one weight per hit");
    assert_eq!(particle_id.len(), track_ids.len(), "one track id per hit");
    score_of(&compose(particle_id, weight, |i| u64::from(track_ids[i])))
}

/// The score of composed tracks (step 3 and 4 of the module docs).
pub(crate) fn score_of(c: &Composition) -> f64 {
    if c.total_weight <= 0.0 {
        return 0.0;
    }
    let matched: f64 = c.tracks.iter().filter(|t| c.is_double_majority(t)).map(|t| t.majority_weight).sum();
    matched / c.total_weight
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// The slow twin: for every (track, particle) pair, count by brute force.
    fn score_slow(pid: &[ParticleId], w: &[f32], track: &[u32]) -> f64 {
        let total: f64 = w.iter().map(|&x| f64::from(x)).sum();
        let tracks: BTreeSet<u32> = track.iter().copied().collect();
        let particles: BTreeSet<ParticleId> = pid.iter().copied().filter(|p| !p.is_noise()).collect();
        let mut sum = 0.0;
        for &t in &tracks {
            let on: Vec<usize> = (0..pid.len()).filter(|&i| track[i] == t).collect();
            for &p in &particles {
                let common: Vec<usize> = on.iter().copied().filter(|&i| pid[i] == p).collect();
                let p_hits = pid.iter().filter(|&&q| q == p).count();
                if 2 * common.len() > on.len() && 2 * common.len() > p_hits {
                    sum += common.iter().map(|&i| f64::from(w[i])).sum::<f64>();
                }
            }
        }
        if total > 0.0 { sum / total } else { 0.0 }
    }

    fn ids(v: &[u64]) -> Vec<ParticleId> {
        v.iter().map(|&p| ParticleId(p)).collect()
    }

    #[test]
    fn perfect_reconstruction_scores_one() {
        let pid = ids(&[1, 1, 1, 2, 2, 2, 2, 0]);
        let w = [0.1, 0.2, 0.1, 0.15, 0.15, 0.15, 0.15, 0.0];
        let s = trackml_score(&pid, &w, &[7, 7, 7, 3, 3, 3, 3, 9]);
        assert!((s - 1.0).abs() < 1e-6, "{s}");
    }

    #[test]
    fn half_right_reconstruction_scores_the_hand_computed_weights() {
        // Particle 1: 4 hits (weights .1 .1 .1 .1); particle 2: 4 hits (.1 .1 .1 .1);
        // particle 3: 2 hits (.1 .1); noise: 2 hits (0). The weights sum to 1.
        let pid = ids(&[1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 0, 0]);
        let w = [0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.0, 0.0];
        // Track 10: 3 hits of 1 + 1 noise → 3/4 and 3/4 of particle 1: counts .3.
        // Track 20: 2 hits of 2 + 1 hit of 1 → 2/3 of the track but 2/4 of particle 2: no.
        // Track 30: 2 hits of 2 + 2 hits of 3 → tie 2/4: no.
        // Track 40: 1 noise hit alone.
        let track = [10, 10, 10, 20, 20, 20, 30, 30, 30, 30, 10, 40];
        let s = trackml_score(&pid, &w, &track);
        assert!((s - 0.3).abs() < 1e-6, "{s}");
        assert!((s - score_slow(&pid, &w, &track)).abs() < 1e-12);
    }

    #[test]
    fn weights_are_normalised_by_their_sum() {
        // Weights summing to 2: the same reconstruction scores the same fraction.
        let pid = ids(&[1, 1, 1, 2, 2, 2]);
        let s = trackml_score(&pid, &[0.4, 0.4, 0.2, 0.4, 0.4, 0.2], &[1, 1, 1, 2, 2, 5]);
        assert!((s - (1.0 + 0.8) / 2.0).abs() < 1e-6, "{s}");
        assert_eq!(trackml_score(&pid, &[0.0; 6], &[1; 6]), 0.0);
        assert_eq!(trackml_score(&[], &[], &[]), 0.0);
    }

    #[test]
    fn zero_is_an_ordinary_track_id() {
        // All of particle 1's hits under id 0: it counts, like any other id.
        let pid = ids(&[1, 1, 1, 2, 2, 2]);
        let s = trackml_score(&pid, &[1.0 / 6.0; 6], &[0, 0, 0, 1, 2, 3]);
        assert!((s - 0.5).abs() < 1e-6, "{s}");
    }

    #[test]
    fn matches_the_slow_twin_on_random_events() {
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut next = |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        };
        let mut max_diff = 0.0f64;
        for n in [0usize, 1, 2, 3, 7, 31, 64, 127, 400] {
            let pid: Vec<ParticleId> = (0..n).map(|_| ParticleId(next(12))).collect();
            let w: Vec<f32> =
                pid.iter().map(|p| if p.is_noise() { 0.0 } else { (next(100) + 1) as f32 / 1000.0 }).collect();
            // Tracks that mostly follow the particles, with some hits moved.
            let track: Vec<u32> = pid
                .iter()
                .map(|p| if next(4) == 0 { next(15) as u32 } else { p.0 as u32 + next(2) as u32 * 20 })
                .collect();
            let d = (trackml_score(&pid, &w, &track) - score_slow(&pid, &w, &track)).abs();
            max_diff = max_diff.max(d);
        }
        println!("max |Δ| fast vs slow: {max_diff:e}");
        assert!(max_diff < 1e-12);
    }
}
