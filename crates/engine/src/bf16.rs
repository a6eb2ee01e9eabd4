//! Saved states in bfloat16: round in place, pack to 16 bits, unpack.

use rayon::prelude::*;

use crate::real::Real;

const CHUNK: usize = 1 << 15;

/// Rounds `x` to bf16 in place (nearest, ties to even) and writes the bit patterns to `packed`.
/// After this call `x` holds exactly what [`unpack`] gives back.
pub fn round_and_pack<T: Real>(x: &mut [T], packed: &mut Vec<u16>) {
    packed.resize(x.len(), 0);
    x.par_chunks_mut(CHUNK).zip(packed.par_chunks_mut(CHUNK)).for_each(|(xs, ps)| round_and_pack_chunk(xs, ps));
}

/// Unpacks bf16 bit patterns into `out` (resized to fit).
pub fn unpack<T: Real>(packed: &[u16], out: &mut Vec<T>) {
    out.resize(packed.len(), T::ZERO);
    out.par_chunks_mut(CHUNK).zip(packed.par_chunks(CHUNK)).for_each(|(os, ps)| unpack_chunk(ps, os));
}

crate::dispatch! {
    /// `out[i]` = the bf16 bits of `x[i]` (nearest, ties to even); `x` is left as it is.
    pub fn pack_slice<T: Real>(x: &[T], out: &mut [u16]) {
        for (p, v) in out.iter_mut().zip(x) {
            *p = v.to_bf16_bits();
        }
    }
}

crate::dispatch! {
    /// `out[i]` = the value of the bf16 bits `packed[i]`.
    pub fn unpack_slice<T: Real>(packed: &[u16], out: &mut [T]) {
        for (o, &p) in out.iter_mut().zip(packed) {
            *o = T::from_bf16_bits(p);
        }
    }
}

crate::dispatch! {
    /// Rounds `x` to bf16 in place (nearest, ties to even): the values [`unpack_slice`] gives
    /// back from [`pack_slice`]'s bits.
    pub fn round_slice<T: Real>(x: &mut [T]) {
        for v in x.iter_mut() {
            *v = T::from_bf16_bits(v.to_bf16_bits());
        }
    }
}

crate::dispatch! {
    fn round_and_pack_chunk<T: Real>(xs: &mut [T], ps: &mut [u16]) {
        for (v, p) in xs.iter_mut().zip(ps) {
            let b = v.to_bf16_bits();
            *p = b;
            *v = T::from_bf16_bits(b);
        }
    }
}

crate::dispatch! {
    fn unpack_chunk<T: Real>(ps: &[u16], os: &mut [T]) {
        for (o, &p) in os.iter_mut().zip(ps) {
            *o = T::from_bf16_bits(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::real::f32_to_bf16_bits;
    use half::bf16;

    #[test]
    fn rounding_is_to_nearest_and_unpack_returns_the_rounded_values() {
        let mut x = vec![1.0f32, 1.0 + 1.0 / 256.0, 1.0 + 3.0 / 256.0, -2.5e-3, 3.0e38, 0.0];
        let orig = x.clone();
        let mut p = Vec::new();
        round_and_pack(&mut x, &mut p);
        // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: to even, 1. 1 + 3·2^-8 ties up to 1 + 2^-6.
        assert_eq!(&x[..3], &[1.0, 1.0, 1.0 + 1.0 / 64.0]);
        for (r, o) in x.iter().zip(&orig) {
            assert!((r - o).abs() <= o.abs() / 256.0, "{o} rounded to {r}");
        }
        let mut back: Vec<f32> = Vec::new();
        unpack(&p, &mut back);
        assert_eq!(back, x);
    }

    #[test]
    fn the_branchless_conversion_agrees_with_the_half_crate() {
        // Every 2^16 + 1-th bit pattern (all exponents, signs and rounding cases), and the
        // edges: zeros, subnormals, the largest finite values, infinities, NaNs.
        let special = [0u32, 0x8000_0000, 1, 0x007f_ffff, 0x7f7f_ffff, 0xff7f_ffff, 0x7f80_0000, 0xff80_0000];
        let nans = [0x7fc0_0000u32, 0x7f80_0001, 0xffff_ffff, 0x7fff_8000];
        for b in (0..=u32::MAX).step_by(65_537).chain(special).chain(nans) {
            let x = f32::from_bits(b);
            let (ours, theirs) = (f32_to_bf16_bits(x), bf16::from_f32(x).to_bits());
            if x.is_nan() {
                assert!(f32::from_bits((ours as u32) << 16).is_nan(), "{b:#x}: NaN became {ours:#x}");
            } else {
                assert_eq!(ours, theirs, "{b:#x} ({x:e})");
            }
        }
    }
}
