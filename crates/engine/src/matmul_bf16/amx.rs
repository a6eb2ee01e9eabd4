//! The AMX-BF16 kernel: 16 × 16 f32 accumulator tiles, `tdpbf16ps` on 16 × 32 bf16 tiles of
//! the left operand and 16 pair rows × 16 columns of the right one (the packed layouts of
//! [`super`]: a right operand's pair rows are already the tile layout AMX reads).
//!
//! Inline `asm!` on stable Rust (the AMX intrinsics are unstable): the tile registers are named
//! in the instructions, and no code the compiler generates touches them, so a tile keeps its
//! value from one `asm!` block to the next within a call. Each call configures the tiles
//! (`ldtilecfg`) and releases them (`tilerelease`) before it returns.
//!
//! Register plan: tmm0–tmm3 accumulate a 32 × 32 block of the result (rows 0–15 and 16–31 ×
//! columns 0–15 and 16–31), tmm4–tmm5 hold the two 16-row blocks of A, tmm6–tmm7 the two
//! 16-column blocks of B. Blocks at the edges use fewer tiles; rows past m and pairs past kp are
//! zeros in a scratch panel, so every tile is whole.
//!
//! The sums: each `tdpbf16ps` adds, per element, 32 exact bf16 products (16 pairs) into the f32
//! accumulator, with bf16 denormals taken as zero and the result rounded to nearest-even. The
//! order of additions inside an instruction is the hardware's, so this path agrees with the
//! others within f32 rounding, not bit for bit (tested); it is fixed for a given shape, so a
//! product never depends on the thread count.

use std::arch::asm;
use std::cell::RefCell;
use std::sync::OnceLock;

use super::{PairLayout, Pairs};

/// Pairs (bf16 × 2) per tile row: 64 bytes.
const TK: usize = 16;
/// Rows per tile.
const TM: usize = 16;
/// f32 columns per accumulator tile and pair columns per right-operand tile.
const TN: usize = 16;

/// Why the AMX path is unusable on this machine, or `None` where it runs. Asked of the CPU and
/// the kernel once; the kernel's refusal is said once on standard error.
pub(crate) fn unavailable() -> Option<&'static str> {
    static WHY: OnceLock<Option<&'static str>> = OnceLock::new();
    *WHY.get_or_init(|| {
        let why = check();
        if let Some(w) = why
            && w.starts_with("the kernel")
        {
            eprintln!("trackgnn: AMX-BF16 is not used: {w}; bf16 products take the next path");
        }
        why
    })
}

/// The CPU's AMX-BF16 and AMX-TILE bits, the OS's tile state (XCR0 bits 17 and 18), then the
/// kernel's permission for the tile data (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`,
/// Linux 5.16 and later).
fn check() -> Option<&'static str> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::__cpuid_count;
        let (max_leaf, leaf7) = (__cpuid_count(0, 0).eax, __cpuid_count(7, 0));
        const AMX_BF16: u32 = 1 << 22;
        const AMX_TILE: u32 = 1 << 24;
        if max_leaf < 7 || leaf7.edx & (AMX_BF16 | AMX_TILE) != AMX_BF16 | AMX_TILE {
            return Some("the CPU has no AMX-BF16");
        }
        // Leaf 1, ECX bit 27 (OSXSAVE): XGETBV may be executed.
        let osxsave = __cpuid_count(1, 0).ecx & (1 << 27) != 0;
        // SAFETY: XGETBV with ECX = 0 is valid when OSXSAVE is set (checked first).
        if !osxsave || unsafe { xgetbv0() } & (0b11 << 17) != 0b11 << 17 {
            return Some("the operating system does not enable the AMX tile state");
        }
        #[cfg(target_os = "linux")]
        {
            const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
            const XFEATURE_XTILEDATA: libc::c_long = 18;
            // SAFETY: arch_prctl with these arguments only changes the process's permitted
            // XSAVE features; it reads and writes no memory of ours.
            let r = unsafe { libc::syscall(libc::SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) };
            if r != 0 {
                return Some("the kernel refused the tile-data permission (arch_prctl ARCH_REQ_XCOMP_PERM)");
            }
            None
        }
        #[cfg(not(target_os = "linux"))]
        {
            Some("the tile-data permission is requested on Linux only")
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        Some("not an x86-64 CPU")
    }
}

/// XCR0 (the OS-enabled XSAVE state components).
///
/// # Safety
/// The CPU must have XSAVE and the OS must have set CR4.OSXSAVE.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "xsave")]
unsafe fn xgetbv0() -> u64 {
    // SAFETY: the caller's guarantee.
    unsafe { std::arch::x86_64::_xgetbv(0) }
}

/// The 64-byte tile configuration (palette 1): every tile 16 rows of 64 bytes.
#[repr(C, align(64))]
struct TileConfig {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    colsb: [u16; 16],
    rows: [u8; 16],
}

const CONFIG: TileConfig = {
    let mut colsb = [0u16; 16];
    let mut rows = [0u8; 16];
    let mut t = 0;
    while t < 8 {
        colsb[t] = 64;
        rows[t] = 16;
        t += 1;
    }
    TileConfig { palette: 1, start_row: 0, reserved: [0; 14], colsb, rows }
};

/// A thread's scratch: the left operand's current 32-row panel (pairs zero-padded to whole
/// tiles), the right operand's last, partial block of pair rows (zero-padded to 16), and a
/// block of accumulators at the destination's edges.
struct Scratch {
    panel: Pairs,
    b_tail: Pairs,
    /// The accumulators of a block at the destination's edges (32 × 32).
    edge: [f32; 4 * TM * TN],
}

thread_local! {
    static SCRATCH: RefCell<Scratch> =
        const { RefCell::new(Scratch { panel: Pairs::new(), b_tail: Pairs::new(), edge: [0.0; 4 * TM * TN] }) };
}

/// Rows of `out` the kernel writes for m rows: whole tiles.
pub(super) fn padded_rows(m: usize) -> usize {
    m.next_multiple_of(TM)
}

/// Where a product's result goes.
pub(super) enum Dest<'d> {
    /// A scratch of ⌈m/16⌉·16 rows × np columns (row stride np), overwritten whole: rows past m
    /// hold zeros' products.
    Out(&'d mut [f32]),
    /// Straight into the product's f32 destination (m × n, row stride ld), replacing or adding
    /// to it: whole tiles are stored (or loaded, to add to) in place, tiles at the edges go
    /// through a 32 × 32 scratch and only their rows < m and columns < n are written.
    Direct {
        /// The destination.
        dst: &'d mut [f32],
        /// Its row stride.
        ld: usize,
        /// Its columns.
        n: usize,
        /// Add to it (else replace).
        add: bool,
    },
}

/// `dest` = (or +=) A · B, A packed as m × kp pairs laid out as `al`, B as kp × np pairs (np a
/// multiple of 16).
///
/// # Safety
/// [`unavailable`] must have returned `None` on this machine; `a` and `b` must hold m·kp and
/// kp·np elements; `Dest::Out` must hold ⌈m/16⌉·16·np elements; `Dest::Direct` must hold
/// (m − 1)·ld + n elements with n ≤ np and n ≤ ld.
pub(super) unsafe fn gemm(a: &[u32], al: PairLayout, b: &[u32], m: usize, kp: usize, np: usize, mut dest: Dest<'_>) {
    assert!(np.is_multiple_of(TN) && b.len() >= kp * np && a.len() >= m * kp);
    assert!(m == 0 || kp == 0 || (m - 1) * al.row + (kp - 1) * al.pair < m * kp);
    match &dest {
        Dest::Out(out) => assert!(out.len() >= padded_rows(m) * np),
        Dest::Direct { dst, ld, n, .. } => assert!(*n <= np && n <= ld && (m == 0 || dst.len() >= (m - 1) * ld + n)),
    }
    if m == 0 || np == 0 {
        return;
    }
    let kb = kp.div_ceil(TK);
    let kpp = kb * TK;
    SCRATCH.with_borrow_mut(|s| {
        // B's last block of pair rows, whole (zeros past kp), when kp is not a multiple of 16.
        let full_kb = kp / TK;
        let b_tail: Option<&[u32]> = if full_kb < kb {
            s.b_tail.clear();
            s.b_tail.extend_from_slice(&b[full_kb * TK * np..kp * np]);
            s.b_tail.resize(TK * np, 0);
            Some(&s.b_tail)
        } else {
            None
        };
        // A row-major left operand of whole pair blocks is read in place, 32 rows at a time.
        let direct = al.pair == 1 && al.row == kp && kp.is_multiple_of(TK);
        s.panel.resize(2 * TM * kpp.max(TK), 0);
        // SAFETY: the caller guarantees AMX is usable; the configuration is a valid palette 1.
        unsafe { asm!("ldtilecfg [{}]", in(reg) &CONFIG as *const TileConfig, options(nostack, readonly)) };
        let mut i0 = 0;
        while i0 < m {
            let rows = (m - i0).min(2 * TM);
            let na = rows.div_ceil(TM);
            let (a_base, a_stride) = if direct && rows == 2 * TM {
                // SAFETY: rows i0..i0+32 ≤ m of a row-major kp-pair matrix.
                (unsafe { a.as_ptr().add(i0 * kp) }, kp)
            } else {
                fill_panel(a, al, m, kp, kpp, i0, rows, &mut s.panel);
                (s.panel.as_ptr(), kpp)
            };
            let mut j0 = 0;
            while j0 < np {
                let nb = ((np - j0) / TN).min(2);
                // SAFETY (all below): A tiles: rows < 32 (na tiles of 16) of a_stride pairs,
                // pair blocks t·16..t·16+16 ≤ a_stride; B tiles: pair rows t·16..+16 of b
                // (t < full_kb) or the 16-row tail, columns j0..j0+16·nb ≤ np; C: as each
                // destination's bounds say.
                match &mut dest {
                    Dest::Out(out) => unsafe {
                        zero();
                        block(na, nb, kb, full_kb, a_base, a_stride, b.as_ptr(), b_tail, np, j0);
                        store(na, nb, out.as_mut_ptr().add(i0 * np + j0), np);
                    },
                    Dest::Direct { dst, ld, n, add } => {
                        let (ld, n, add) = (*ld, *n, *add);
                        if rows == TM * na && j0 + TN * nb <= n {
                            // Whole tiles inside the destination: rows i0..i0+16·na ≤ m,
                            // columns j0..j0+16·nb ≤ n.
                            let c = unsafe { dst.as_mut_ptr().add(i0 * ld + j0) };
                            unsafe {
                                if add {
                                    load(na, nb, c, ld);
                                } else {
                                    zero();
                                }
                                block(na, nb, kb, full_kb, a_base, a_stride, b.as_ptr(), b_tail, np, j0);
                                store(na, nb, c, ld);
                            }
                        } else {
                            let edge = &mut s.edge;
                            unsafe {
                                zero();
                                block(na, nb, kb, full_kb, a_base, a_stride, b.as_ptr(), b_tail, np, j0);
                                store(na, nb, edge.as_mut_ptr(), 2 * TN);
                            }
                            let cols = n.saturating_sub(j0).min(TN * nb);
                            for r in 0..rows {
                                let d = &mut dst[(i0 + r) * ld + j0..(i0 + r) * ld + j0 + cols];
                                let e = &edge[r * 2 * TN..r * 2 * TN + cols];
                                if add {
                                    d.iter_mut().zip(e).for_each(|(d, e)| *d += e);
                                } else {
                                    d.copy_from_slice(e);
                                }
                            }
                        }
                    }
                }
                j0 += TN * nb;
            }
            i0 += rows;
        }
        // SAFETY: releases the tile state this call configured.
        unsafe { asm!("tilerelease", options(nostack, nomem)) };
    });
}

/// Copies rows i0..i0+rows of A (any layout) into `panel` (32 × kpp pairs, row-major), zeros
/// past kp and, in the last 16-row tile, past the last row (tiles past it are not read).
#[allow(clippy::too_many_arguments)]
fn fill_panel(a: &[u32], al: PairLayout, m: usize, kp: usize, kpp: usize, i0: usize, rows: usize, panel: &mut [u32]) {
    debug_assert!(i0 + rows <= m && panel.len() >= 2 * TM * kpp);
    if kpp == 0 {
        return;
    }
    if al.pair == 1 {
        for (r, p) in panel.chunks_exact_mut(kpp).take(rows.next_multiple_of(TM)).enumerate() {
            if r < rows {
                p[..kp].copy_from_slice(&a[(i0 + r) * al.row..(i0 + r) * al.row + kp]);
                p[kp..].fill(0);
            } else {
                p.fill(0);
            }
        }
        return;
    }
    // Pair columns contiguous (al.row == 1): pair q holds consecutive rows' values at
    // a[q·al.pair + i]; each 16 × 16 block is transposed into the panel.
    for h in 0..rows.div_ceil(TM) {
        let rh = (rows - h * TM).min(TM);
        for q0 in (0..kpp).step_by(TK) {
            let out = &mut panel[h * TM * kpp + q0..];
            // SAFETY: AMX CPUs have AVX-512F (the caller checked AMX); the block's reads are
            // rows i0 + 16h .. + rh of pairs q0.. < kp, its writes 16 rows of 16 pairs at stride
            // kpp from `out`'s start (inside the 32 × kpp panel).
            unsafe { transpose_block(a, al.pair, i0 + h * TM, rh, q0, kp, out, kpp) };
        }
    }
}

/// `out[r·kpp + dq]` = `a[(q0 + dq)·stride + i + r]` for r < rh and q0 + dq < kp; 0 for the
/// other (r, dq) of the 16 × 16 block: a 16 × 16 transpose of 32-bit elements in AVX-512
/// registers.
///
/// # Safety
/// The CPU must have AVX-512F; the reads and `out[..15·kpp + 16]` must be in bounds.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn transpose_block(
    a: &[u32],
    stride: usize,
    i: usize,
    rh: usize,
    q0: usize,
    kp: usize,
    out: &mut [u32],
    kpp: usize,
) {
    use std::arch::x86_64::*;
    assert!(out.len() >= 15 * kpp + 16 && rh <= 16);
    let mask: __mmask16 = if rh == 16 { 0xffff } else { (1u16 << rh) - 1 };
    let mut r = [_mm512_setzero_si512(); 16];
    for (dq, v) in r.iter_mut().enumerate() {
        let q = q0 + dq;
        if q < kp {
            let start = q * stride + i;
            assert!(start + rh <= a.len());
            // SAFETY: the masked lanes r < rh are a[start..start + rh], checked above.
            *v = unsafe { _mm512_maskz_loadu_epi32(mask, a.as_ptr().add(start) as *const i32) };
        }
    }
    // Within 128-bit lanes: pairs of rows, then quadruples.
    let mut t = [_mm512_setzero_si512(); 16];
    for p in 0..8 {
        t[2 * p] = _mm512_unpacklo_epi32(r[2 * p], r[2 * p + 1]);
        t[2 * p + 1] = _mm512_unpackhi_epi32(r[2 * p], r[2 * p + 1]);
    }
    let mut u = [_mm512_setzero_si512(); 16];
    for g in 0..4 {
        let b = 4 * g;
        u[b] = _mm512_unpacklo_epi64(t[b], t[b + 2]);
        u[b + 1] = _mm512_unpackhi_epi64(t[b], t[b + 2]);
        u[b + 2] = _mm512_unpacklo_epi64(t[b + 1], t[b + 3]);
        u[b + 3] = _mm512_unpackhi_epi64(t[b + 1], t[b + 3]);
    }
    // u[4g + j], lane L: rows 4g..4g+4 of column 4L + j. Gather the four groups' lanes.
    for j in 0..4 {
        let v02 = _mm512_shuffle_i32x4::<0x88>(u[j], u[4 + j]);
        let v13 = _mm512_shuffle_i32x4::<0xdd>(u[j], u[4 + j]);
        let w02 = _mm512_shuffle_i32x4::<0x88>(u[8 + j], u[12 + j]);
        let w13 = _mm512_shuffle_i32x4::<0xdd>(u[8 + j], u[12 + j]);
        let cols = [
            (j, _mm512_shuffle_i32x4::<0x88>(v02, w02)),
            (4 + j, _mm512_shuffle_i32x4::<0x88>(v13, w13)),
            (8 + j, _mm512_shuffle_i32x4::<0xdd>(v02, w02)),
            (12 + j, _mm512_shuffle_i32x4::<0xdd>(v13, w13)),
        ];
        for (c, v) in cols {
            // SAFETY: row c < 16 of the block: out[c·kpp .. c·kpp + 16], checked above.
            unsafe { _mm512_storeu_si512(out.as_mut_ptr().add(c * kpp) as *mut __m512i, v) };
        }
    }
}

/// Sets the accumulator tiles to zero.
///
/// # Safety
/// The tiles must be configured.
#[inline(always)]
unsafe fn zero() {
    // SAFETY: the caller's guarantee.
    unsafe { asm!("tilezero tmm0", "tilezero tmm1", "tilezero tmm2", "tilezero tmm3", options(nostack, nomem)) };
}

/// Adds to the na × nb accumulator tiles, over all kb pair blocks, the products of A's and B's
/// tiles.
///
/// # Safety
/// As for [`gemm`]'s call of it; the tiles must be configured.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn block(
    na: usize,
    nb: usize,
    kb: usize,
    full_kb: usize,
    a: *const u32,
    a_stride: usize,
    b: *const u32,
    b_tail: Option<&[u32]>,
    np: usize,
    j0: usize,
) {
    let sa = a_stride * 4;
    let sb = np * 4;
    // SAFETY (every block below): the tiles are configured; each load reads 16 rows of 64
    // bytes at the given stride inside the buffers (the caller's bounds).
    unsafe {
        for t in 0..kb {
            let a0 = a.add(t * TK);
            // Not read when na or nb is 1: wrapping arithmetic keeps them mere addresses.
            let a1 = a.wrapping_add(TM * a_stride + t * TK);
            let brow = match b_tail {
                Some(tail) if t == full_kb => tail.as_ptr(),
                _ => b.add(t * TK * np),
            };
            let b0 = brow.add(j0);
            let b1 = brow.wrapping_add(j0 + TN);
            match (na, nb) {
                (2, 2) => asm!(
                    "tileloadd tmm4, [{a0} + {sa}*1]",
                    "tileloadd tmm5, [{a1} + {sa}*1]",
                    "tileloadd tmm6, [{b0} + {sb}*1]",
                    "tileloadd tmm7, [{b1} + {sb}*1]",
                    "tdpbf16ps tmm0, tmm4, tmm6",
                    "tdpbf16ps tmm1, tmm4, tmm7",
                    "tdpbf16ps tmm2, tmm5, tmm6",
                    "tdpbf16ps tmm3, tmm5, tmm7",
                    a0 = in(reg) a0, a1 = in(reg) a1, b0 = in(reg) b0, b1 = in(reg) b1,
                    sa = in(reg) sa, sb = in(reg) sb,
                    options(nostack, readonly),
                ),
                (2, _) => asm!(
                    "tileloadd tmm4, [{a0} + {sa}*1]",
                    "tileloadd tmm5, [{a1} + {sa}*1]",
                    "tileloadd tmm6, [{b0} + {sb}*1]",
                    "tdpbf16ps tmm0, tmm4, tmm6",
                    "tdpbf16ps tmm2, tmm5, tmm6",
                    a0 = in(reg) a0, a1 = in(reg) a1, b0 = in(reg) b0,
                    sa = in(reg) sa, sb = in(reg) sb,
                    options(nostack, readonly),
                ),
                (_, 2) => asm!(
                    "tileloadd tmm4, [{a0} + {sa}*1]",
                    "tileloadd tmm6, [{b0} + {sb}*1]",
                    "tileloadd tmm7, [{b1} + {sb}*1]",
                    "tdpbf16ps tmm0, tmm4, tmm6",
                    "tdpbf16ps tmm1, tmm4, tmm7",
                    a0 = in(reg) a0, b0 = in(reg) b0, b1 = in(reg) b1,
                    sa = in(reg) sa, sb = in(reg) sb,
                    options(nostack, readonly),
                ),
                _ => asm!(
                    "tileloadd tmm4, [{a0} + {sa}*1]",
                    "tileloadd tmm6, [{b0} + {sb}*1]",
                    "tdpbf16ps tmm0, tmm4, tmm6",
                    a0 = in(reg) a0, b0 = in(reg) b0,
                    sa = in(reg) sa, sb = in(reg) sb,
                    options(nostack, readonly),
                ),
            }
        }
    }
}

/// Loads the na × nb accumulator tiles from `c` (row stride ld f32), to add products to.
///
/// # Safety
/// `c` must have 16·na rows of 16·nb columns at stride ld; the tiles must be configured.
#[inline(always)]
unsafe fn load(na: usize, nb: usize, c: *const f32, ld: usize) {
    let s = ld * 4;
    // SAFETY: the caller's bounds; tiles 0–3 hold the block.
    unsafe {
        asm!("tileloadd tmm0, [{c} + {s}*1]", c = in(reg) c, s = in(reg) s, options(nostack, readonly));
        if nb == 2 {
            asm!("tileloadd tmm1, [{c} + {s}*1]", c = in(reg) c.wrapping_add(TN), s = in(reg) s, options(nostack, readonly));
        }
        if na == 2 {
            asm!("tileloadd tmm2, [{c} + {s}*1]", c = in(reg) c.wrapping_add(TM * ld), s = in(reg) s, options(nostack, readonly));
            if nb == 2 {
                let c3 = c.wrapping_add(TM * ld + TN);
                asm!("tileloadd tmm3, [{c} + {s}*1]", c = in(reg) c3, s = in(reg) s, options(nostack, readonly));
            }
        }
    }
}

/// Stores the na × nb accumulator tiles at `c` (row stride np f32).
///
/// # Safety
/// `c` must have 16·na rows of 16·nb columns at stride np; the tiles must be configured.
#[inline(always)]
unsafe fn store(na: usize, nb: usize, c: *mut f32, np: usize) {
    let s = np * 4;
    // SAFETY: the caller's bounds; tiles 0–3 hold the block.
    unsafe {
        let c1 = c.wrapping_add(TN);
        let c2 = c.wrapping_add(TM * np);
        let c3 = c.wrapping_add(TM * np + TN);
        asm!("tilestored [{c} + {s}*1], tmm0", c = in(reg) c, s = in(reg) s, options(nostack));
        if nb == 2 {
            asm!("tilestored [{c} + {s}*1], tmm1", c = in(reg) c1, s = in(reg) s, options(nostack));
        }
        if na == 2 {
            asm!("tilestored [{c} + {s}*1], tmm2", c = in(reg) c2, s = in(reg) s, options(nostack));
            if nb == 2 {
                asm!("tilestored [{c} + {s}*1], tmm3", c = in(reg) c3, s = in(reg) s, options(nostack));
            }
        }
    }
}
