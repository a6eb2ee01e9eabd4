//! Grouping items by a small integer key with a counting sort: edges by node (the engine's
//! aggregation, the module map's triplet stage), hits by module. One O(n + keys) pass, stable,
//! no hashing.

/// Items grouped by key, in increasing item order within a key (compressed sparse rows).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Csr {
    /// `offsets[k]..offsets[k+1]` indexes `edges` for key k.
    pub offsets: Vec<u32>,
    /// Item ids (edge ids for a graph), grouped by key.
    pub edges: Vec<u32>,
}

impl Csr {
    /// Groups the items `0..key_of.len()` by `key_of[i]` (e.g. `dst` for a node's incoming
    /// edges); every key must be below `num_keys`.
    pub fn build(key_of: &[u32], num_keys: usize) -> Csr {
        let mut offsets = vec![0u32; num_keys + 1];
        for &k in key_of {
            offsets[k as usize + 1] += 1;
        }
        for i in 0..num_keys {
            offsets[i + 1] += offsets[i];
        }
        let mut fill = offsets.clone();
        let mut edges = vec![0u32; key_of.len()];
        for (e, &k) in key_of.iter().enumerate() {
            edges[fill[k as usize] as usize] = e as u32;
            fill[k as usize] += 1;
        }
        Csr { offsets, edges }
    }

    /// Number of keys (nodes).
    pub fn num_nodes(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The items of key `n`.
    #[inline]
    pub fn of(&self, n: usize) -> &[u32] {
        &self.edges[self.offsets[n] as usize..self.offsets[n + 1] as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_items_by_key_in_item_order() {
        let c = Csr::build(&[2, 0, 2, 1, 0], 4);
        assert_eq!(c.offsets, [0, 2, 3, 5, 5]);
        assert_eq!((c.of(0), c.of(1), c.of(2), c.of(3)), (&[1, 4][..], &[3][..], &[0, 2][..], &[][..]));
        assert_eq!(c.num_nodes(), 4);
        assert_eq!(Csr::build(&[], 0), Csr { offsets: vec![0], edges: vec![] });
    }
}
