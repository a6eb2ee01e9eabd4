//! Greedy ambiguity resolution, as ACTS's `GreedyAmbiguityResolution` does it: while some
//! track shares more than [`CkfConfig::max_shared_hits`](super::CkfConfig::max_shared_hits)
//! hits with the others, the worst of them goes (the largest fraction of shared hits, then
//! the largest χ²/ndf); the hits of a removed track are then shared by one track fewer.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// What ambiguity resolution needs of a track: its hits and its χ²/ndf.
#[derive(Clone, Copy, Debug)]
pub struct Candidate<'a> {
    /// Its hits (indices in the event).
    pub hits: &'a [u32],
    /// Its χ²/ndf.
    pub chi2_per_ndf: f64,
}

/// A track's badness: shared hits over hits, then χ²/ndf.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Badness {
    shared: usize,
    hits: usize,
    chi2: f64,
    track: usize,
}

impl Eq for Badness {}

impl Ord for Badness {
    fn cmp(&self, o: &Self) -> Ordering {
        // shared/hits compared as shared·o.hits vs o.shared·hits.
        (self.shared * o.hits)
            .cmp(&(o.shared * self.hits))
            .then(self.chi2.total_cmp(&o.chi2))
            .then(o.track.cmp(&self.track))
    }
}

impl PartialOrd for Badness {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// The tracks kept (indices of `tracks`, in order) among tracks on an event of `n_hits` hits,
/// none sharing more than `max_shared` hits with the others at the end.
///
/// # Panics
/// If a track holds a hit index ≥ `n_hits`.
pub fn resolve(tracks: &[Candidate<'_>], n_hits: usize, max_shared: usize) -> Vec<usize> {
    let mut count = vec![0u32; n_hits];
    for t in tracks {
        for &h in t.hits {
            count[h as usize] += 1;
        }
    }
    let shared = |t: &Candidate<'_>, count: &[u32]| t.hits.iter().filter(|&&h| count[h as usize] > 1).count();
    let badness = |i: usize, count: &[u32]| Badness {
        shared: shared(&tracks[i], count),
        hits: tracks[i].hits.len().max(1),
        chi2: tracks[i].chi2_per_ndf,
        track: i,
    };
    let mut heap: BinaryHeap<Badness> = (0..tracks.len()).map(|i| badness(i, &count)).collect();
    let mut removed = vec![false; tracks.len()];
    // Removing a track only lowers the others' shared counts: a popped entry that is still
    // current is the worst track (every other entry overstates its own).
    while let Some(top) = heap.pop() {
        let now = badness(top.track, &count);
        if now != top {
            heap.push(now);
            continue;
        }
        if now.shared <= max_shared {
            break;
        }
        removed[top.track] = true;
        for &h in tracks[top.track].hits {
            count[h as usize] -= 1;
        }
    }
    (0..tracks.len()).filter(|&i| !removed[i]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worse_of_two_tracks_sharing_hits_goes() {
        const A: [u32; 6] = [0, 1, 2, 3, 4, 5];
        let (a, b, c) = (A, [0, 1, 2, 3, 6, 7], [8, 9, 10, 11, 12]);
        fn t(hits: &[u32], chi2: f64) -> Candidate<'_> {
            Candidate { hits, chi2_per_ndf: chi2 }
        }
        // a and b share 4 hits of 6: the one of larger χ²/ndf goes, c stays.
        assert_eq!(resolve(&[t(&a, 1.0), t(&b, 2.0), t(&c, 5.0)], 13, 1), [0, 2]);
        assert_eq!(resolve(&[t(&a, 3.0), t(&b, 2.0), t(&c, 5.0)], 13, 1), [1, 2]);
        // A shorter track with the same shared hits has the larger fraction: it goes.
        let d = [0, 1, 2, 3, 6];
        assert_eq!(resolve(&[t(&a, 3.0), t(&d, 0.5)], 13, 1), [0]);
        // One shared hit is allowed.
        let e = [5, 20, 21, 22, 23];
        assert_eq!(resolve(&[t(&a, 1.0), t(&e, 1.0)], 24, 1), [0, 1]);
        assert_eq!(resolve(&[t(&a, 1.0), t(&e, 1.0)], 24, 0), [0]);
        assert!(resolve(&[], 0, 1).is_empty());
    }
}
