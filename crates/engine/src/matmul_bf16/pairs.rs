//! [`Pairs`]: a growable buffer of packed bf16 pairs whose start is aligned to a cache line.
//! AMX loads a tile as 16 rows of 64 bytes: rows that straddle two cache lines cost two loads
//! each, and measured here (an Intel Xeon with AMX) a tile product from misaligned rows ran at
//! about a third of its speed from aligned ones.

use std::ops::{Deref, DerefMut};

/// One cache line of pairs.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct Line([u32; 16]);

/// A `Vec<u32>`-like buffer (resize, clear, slices) whose first element is 64-byte aligned.
#[derive(Clone, Debug, Default)]
pub(crate) struct Pairs {
    lines: Vec<Line>,
    len: usize,
}

impl Pairs {
    /// An empty buffer.
    pub(crate) const fn new() -> Pairs {
        Pairs { lines: Vec::new(), len: 0 }
    }

    /// Resizes to `len` elements; new elements are `value` (as `Vec::resize`).
    pub(crate) fn resize(&mut self, len: usize, value: u32) {
        let old = self.len;
        self.lines.resize(len.div_ceil(16), Line::default());
        self.len = len;
        if len > old {
            self[old..].fill(value);
        }
    }

    /// Empties the buffer (keeping its memory).
    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }

    /// Appends `s`.
    pub(crate) fn extend_from_slice(&mut self, s: &[u32]) {
        let old = self.len;
        self.resize(old + s.len(), 0);
        self[old..].copy_from_slice(s);
    }
}

impl Deref for Pairs {
    type Target = [u32];

    fn deref(&self) -> &[u32] {
        // SAFETY: `lines` holds at least `len` u32 (16 per line, plain data, no padding).
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast::<u32>(), self.len) }
    }
}

impl DerefMut for Pairs {
    fn deref_mut(&mut self) -> &mut [u32] {
        // SAFETY: as for `deref`, uniquely borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast::<u32>(), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_as_a_vec_and_stays_aligned() {
        let (mut p, mut v) = (Pairs::new(), Vec::<u32>::new());
        for (len, value) in [(5, 1), (40, 2), (17, 3), (33, 4), (0, 5), (3, 6)] {
            p.resize(len, value);
            v.resize(len, value);
            assert_eq!(&p[..], &v[..]);
            assert_eq!(p.as_ptr() as usize % 64, 0);
            p.extend_from_slice(&[7, 8]);
            v.extend_from_slice(&[7, 8]);
            assert_eq!(&p[..], &v[..]);
        }
        p.clear();
        assert!(p.is_empty());
    }
}
