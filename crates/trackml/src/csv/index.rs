//! Id lookups used while parsing: hit_id → row of the hits, and duplicate detection.
//!
//! Both have a fast path for the common case (ids 1..=n in order, as TrackML and our
//! generator write them) and fall back to sorting otherwise: no hashing, deterministic.

/// Maps a hit_id to its index in [`crate::event::Hits`].
pub(crate) enum HitIndex {
    /// The ids are `first, first + 1, …, first + len − 1` in order.
    Contiguous {
        /// The first id.
        first: u64,
        /// The number of hits.
        len: usize,
    },
    /// (id, index) pairs sorted by id.
    Sorted(Vec<(u64, u32)>),
}

impl HitIndex {
    /// Builds the index of `ids` (if an id repeats, one of its rows is returned).
    pub(crate) fn new(ids: &[u64]) -> HitIndex {
        let contiguous = ids.first().is_some_and(|&first| ids.iter().zip(first..).all(|(&id, want)| id == want));
        if contiguous || ids.is_empty() {
            return HitIndex::Contiguous { first: ids.first().copied().unwrap_or(0), len: ids.len() };
        }
        let mut pairs: Vec<(u64, u32)> = ids.iter().zip(0u32..).map(|(&id, i)| (id, i)).collect();
        pairs.sort_unstable();
        HitIndex::Sorted(pairs)
    }

    /// The index of hit `id`, if present.
    #[inline]
    pub(crate) fn get(&self, id: u64) -> Option<usize> {
        match self {
            HitIndex::Contiguous { first, len } => {
                let i = id.wrapping_sub(*first);
                (i < *len as u64).then_some(i as usize)
            }
            HitIndex::Sorted(pairs) => pairs.binary_search_by_key(&id, |p| p.0).ok().map(|k| pairs[k].1 as usize),
        }
    }
}

/// The first repeated key in file order: `(first, second)` row indices of the key whose
/// second occurrence comes earliest, or `None` if all keys are distinct.
pub(crate) fn find_duplicate<K: Ord + Copy>(keys: &[K]) -> Option<(usize, usize)> {
    if keys.windows(2).all(|w| w[0] < w[1]) {
        return None;
    }
    let mut order: Vec<u32> = (0..keys.len() as u32).collect();
    // Stable sort by key: equal keys stay in row order.
    order.sort_by_key(|&i| keys[i as usize]);
    order
        .windows(2)
        .filter(|w| keys[w[0] as usize] == keys[w[1] as usize])
        .map(|w| (w[0] as usize, w[1] as usize))
        .min_by_key(|&(_, second)| second)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hit_index_both_paths() {
        let c = HitIndex::new(&[5, 6, 7]);
        assert!(matches!(c, HitIndex::Contiguous { first: 5, len: 3 }));
        assert_eq!((c.get(5), c.get(7), c.get(8), c.get(4)), (Some(0), Some(2), None, None));
        let s = HitIndex::new(&[30, 10, 20]);
        assert!(matches!(s, HitIndex::Sorted(_)));
        assert_eq!((s.get(10), s.get(30), s.get(15)), (Some(1), Some(0), None));
        assert_eq!(HitIndex::new(&[]).get(0), None);
    }

    #[test]
    fn duplicates_in_file_order() {
        assert_eq!(find_duplicate(&[1, 2, 3]), None);
        assert_eq!(find_duplicate(&[3, 1, 2]), None);
        assert_eq!(find_duplicate::<u64>(&[]), None);
        // 9 repeats at rows 0/4, 5 at rows 1/2: the 5s are seen first.
        assert_eq!(find_duplicate(&[9, 5, 5, 7, 9]), Some((1, 2)));
        assert_eq!(find_duplicate(&[9, 5, 9, 5, 5]), Some((0, 2)));
    }
}
