//! What each reconstructed track is made of: its size and its majority particle.
//!
//! Hits are grouped by (track, particle) after sorting, the way the official TrackML
//! scorer (`trackml.score._analyze_tracks`) walks the merged truth and submission sorted by
//! `(track_id, particle_id)`. The majority particle of a track is the one with most hits on
//! it, ties going to the smallest particle_id, noise (0) included, exactly as there.

use std::collections::HashMap;

use trackgnn_trackml::ParticleId;

/// One reconstructed track.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct TrackSummary {
    /// Number of hits on the track, noise hits included.
    pub nhits: u32,
    /// False for an unassigned hit, which forms a track of its own (see `singleton_key`).
    pub assigned: bool,
    /// The particle with most hits on the track (ties: smallest id; may be noise).
    pub majority: ParticleId,
    /// Hits of the majority particle on the track.
    pub majority_hits: u32,
    /// Sum of the weights of those hits.
    pub majority_weight: f64,
}

/// The tracks of one event and the hit counts of its particles.
#[derive(Clone, Debug)]
pub(crate) struct Composition {
    /// The tracks, in order of their key.
    pub tracks: Vec<TrackSummary>,
    /// Hits per particle over all the hits given (noise included under id 0).
    pub particle_nhits: HashMap<ParticleId, u32>,
    /// Sum of the weights of all hits.
    pub total_weight: f64,
}

impl Composition {
    /// Hits of `p` in the event.
    pub fn nhits_of(&self, p: ParticleId) -> u32 {
        self.particle_nhits.get(&p).copied().unwrap_or(0)
    }

    /// True if `t`'s majority particle holds more than half of the track's hits (the track
    /// is "pure") and is not noise.
    pub fn is_pure(&self, t: &TrackSummary) -> bool {
        !t.majority.is_noise() && 2 * t.majority_hits > t.nhits
    }

    /// True if `t` and its majority particle pass the double-majority rule: more than half of
    /// the track's hits are the particle's, and more than half of the particle's hits are on
    /// the track. Noise is never matched.
    pub fn is_double_majority(&self, t: &TrackSummary) -> bool {
        self.is_pure(t) && 2 * t.majority_hits > self.nhits_of(t.majority)
    }
}

/// The key under which an unassigned hit forms a track of its own: above every `u32` id.
pub(crate) fn singleton_key(hit: usize) -> u64 {
    (1u64 << 32) + hit as u64
}

/// Groups the hits by track: hit `i` is on the track `key(i)`; `assigned(key)` says whether
/// a key is a real track.
pub(crate) fn compose(particle_id: &[ParticleId], weight: &[f32], key: impl Fn(usize) -> u64) -> Composition {
    debug_assert_eq!(particle_id.len(), weight.len());
    let mut particle_nhits: HashMap<ParticleId, u32> = HashMap::new();
    let mut total_weight = 0.0f64;
    for (&p, &w) in particle_id.iter().zip(weight) {
        *particle_nhits.entry(p).or_default() += 1;
        total_weight += f64::from(w);
    }
    // (track key, particle, hit): the hit index makes the order, hence every float sum, fixed.
    let mut rows: Vec<(u64, u64, u32)> = (0..particle_id.len()).map(|i| (key(i), particle_id[i].0, i as u32)).collect();
    rows.sort_unstable();

    let mut tracks = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        let k = rows[i].0;
        let mut t = TrackSummary {
            nhits: 0,
            assigned: k < 1 << 32,
            majority: ParticleId::NOISE,
            majority_hits: 0,
            majority_weight: 0.0,
        };
        while i < rows.len() && rows[i].0 == k {
            let p = rows[i].1;
            let (mut n, mut w) = (0u32, 0.0f64);
            while i < rows.len() && rows[i].0 == k && rows[i].1 == p {
                n += 1;
                w += f64::from(weight[rows[i].2 as usize]);
                i += 1;
            }
            t.nhits += n;
            // Strictly more: on ties the smaller particle_id (seen first) stays.
            if n > t.majority_hits {
                (t.majority, t.majority_hits, t.majority_weight) = (ParticleId(p), n, w);
            }
        }
        tracks.push(t);
    }
    Composition { tracks, particle_nhits, total_weight }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_get_their_majority_particle() {
        let pid: Vec<ParticleId> = [5, 5, 3, 0, 3, 5, 7, 7].into_iter().map(ParticleId).collect();
        let w = [0.1, 0.1, 0.2, 0.0, 0.2, 0.1, 0.05, 0.05];
        // Track 1: hits 0, 1, 2, 3 (5, 5, 3, noise); track 2: hits 4, 5 (3, 5: a tie);
        // hits 6, 7 unassigned.
        let track = [1u32, 1, 1, 1, 2, 2, 0, 0];
        let c = compose(&pid, &w.map(|x: f64| x as f32), |i| {
            if track[i] == 0 { singleton_key(i) } else { u64::from(track[i]) }
        });
        assert_eq!(c.tracks.len(), 4);
        let t1 = c.tracks[0];
        assert_eq!((t1.nhits, t1.majority, t1.majority_hits), (4, ParticleId(5), 2));
        assert!((t1.majority_weight - 0.2).abs() < 1e-7);
        assert!(!c.is_pure(&t1), "2 of 4 is not more than half");
        let t2 = c.tracks[1];
        assert_eq!((t2.nhits, t2.majority), (2, ParticleId(3)), "a tie goes to the smaller id");
        assert!(c.tracks[2..].iter().all(|t| !t.assigned && t.nhits == 1 && t.majority == ParticleId(7)));
        assert_eq!(c.nhits_of(ParticleId(5)), 3);
        assert_eq!(c.nhits_of(ParticleId::NOISE), 1);
        assert_eq!(c.nhits_of(ParticleId(99)), 0);
        assert!((c.total_weight - 0.8).abs() < 1e-6);
        // Particle 7 has 2 hits; one alone on a track is half of them: not double majority.
        assert!(c.is_pure(&c.tracks[2]) && !c.is_double_majority(&c.tracks[2]));
    }

    #[test]
    fn noise_is_never_pure() {
        let pid = [ParticleId::NOISE; 3];
        let c = compose(&pid, &[0.0; 3], |_| 1);
        assert_eq!(c.tracks[0].majority_hits, 3);
        assert!(!c.is_pure(&c.tracks[0]) && !c.is_double_majority(&c.tracks[0]));
    }
}
