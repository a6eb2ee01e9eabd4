//! The AVX512-BF16 kernel: `vdpbf16ps` on 6-row × 64-column register tiles.

use std::arch::x86_64::*;

/// Rows per micro-tile.
const MR: usize = 6;

use super::PairLayout;

/// out (m × np) = A · B with A packed as m × kp pairs laid out as `al` and B as kp × np
/// pairs (np a multiple of 16).
///
/// # Safety
/// The CPU must have AVX-512F and AVX512-BF16; `a`, `b`, `out` must hold m·kp, np·kp and m·np
/// elements.
#[target_feature(enable = "avx512f,avx512bf16")]
pub(super) unsafe fn gemm(a: &[u32], al: PairLayout, b: &[u32], out: &mut [f32], m: usize, kp: usize, np: usize) {
    assert!(a.len() >= m * kp && b.len() >= np * kp && out.len() >= m * np && np.is_multiple_of(16));
    // Every pair index is below m·kp in either layout.
    assert!(m == 0 || kp == 0 || (m - 1) * al.row + (kp - 1) * al.pair < m * kp);
    let mut j0 = 0;
    while j0 < np {
        let nv = ((np - j0) / 16).min(4);
        let mut i0 = 0;
        while i0 < m {
            let mr = (m - i0).min(MR);
            // SAFETY: rows i0..i0+mr < m and columns j0..j0+16·nv ≤ np are in the buffers.
            unsafe {
                match (mr, nv) {
                    (MR, 4) => tile::<MR, 4>(a, al, b, out, i0, j0, kp, np),
                    (MR, 3) => tile::<MR, 3>(a, al, b, out, i0, j0, kp, np),
                    (MR, 2) => tile::<MR, 2>(a, al, b, out, i0, j0, kp, np),
                    (MR, 1) => tile::<MR, 1>(a, al, b, out, i0, j0, kp, np),
                    (_, 4) => rows::<4>(a, al, b, out, i0, mr, j0, kp, np),
                    (_, 3) => rows::<3>(a, al, b, out, i0, mr, j0, kp, np),
                    (_, 2) => rows::<2>(a, al, b, out, i0, mr, j0, kp, np),
                    _ => rows::<1>(a, al, b, out, i0, mr, j0, kp, np),
                }
            }
            i0 += mr;
        }
        j0 += 16 * nv;
    }
}

/// Fewer than MR rows, one at a time.
#[target_feature(enable = "avx512f,avx512bf16")]
#[allow(clippy::too_many_arguments)]
unsafe fn rows<const NV: usize>(
    a: &[u32],
    al: PairLayout,
    bt: &[u32],
    out: &mut [f32],
    i0: usize,
    mr: usize,
    j0: usize,
    kp: usize,
    np: usize,
) {
    for i in i0..i0 + mr {
        // SAFETY: as for the caller.
        unsafe { tile::<1, NV>(a, al, bt, out, i, j0, kp, np) };
    }
}

/// out\[i0..i0+R\]\[j0..j0+16·NV\] = A rows · B columns, accumulators in registers.
#[target_feature(enable = "avx512f,avx512bf16")]
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn tile<const R: usize, const NV: usize>(
    a: &[u32],
    al: PairLayout,
    bt: &[u32],
    out: &mut [f32],
    i0: usize,
    j0: usize,
    kp: usize,
    np: usize,
) {
    let mut acc = [[_mm512_setzero_ps(); NV]; R];
    let (ap, bp) = (a.as_ptr(), bt.as_ptr());
    for q in 0..kp {
        let mut bv = [_mm512_setzero_si512(); NV];
        for (v, x) in bv.iter_mut().enumerate() {
            // SAFETY: q < kp and j0 + 16·(v + 1) ≤ np: inside bt (kp × np).
            *x = unsafe { _mm512_loadu_si512(bp.add(q * np + j0 + 16 * v) as *const __m512i) };
        }
        for (r, row) in acc.iter_mut().enumerate() {
            // SAFETY: row i0 + r < m, q < kp: inside a (m × kp, asserted for the layout).
            let pair = unsafe { *ap.add((i0 + r) * al.row + q * al.pair) };
            let av: __m512bh = bh(_mm512_set1_epi32(pair as i32));
            for (v, c) in row.iter_mut().enumerate() {
                *c = _mm512_dpbf16_ps(*c, av, bh(bv[v]));
            }
        }
    }
    for (r, row) in acc.iter().enumerate() {
        for (v, c) in row.iter().enumerate() {
            // SAFETY: row i0 + r < m, columns j0 + 16v .. + 16 ≤ np: inside out (m × np).
            unsafe { _mm512_storeu_ps(out.as_mut_ptr().add((i0 + r) * np + j0 + 16 * v), *c) };
        }
    }
}

#[inline(always)]
fn bh(x: __m512i) -> __m512bh {
    // SAFETY: both are 512-bit plain-data vector types.
    unsafe { std::mem::transmute::<__m512i, __m512bh>(x) }
}
