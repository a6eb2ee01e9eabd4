//! Saved states in bfloat16: round in place, pack to 16 bits, unpack.

use half::bf16;
use rayon::prelude::*;

use crate::real::Real;

const CHUNK: usize = 1 << 15;

/// Rounds `x` to bf16 in place (nearest, ties to even) and writes the bit patterns to `packed`.
/// After this call `x` holds exactly what [`unpack`] gives back.
pub fn round_and_pack<T: Real>(x: &mut [T], packed: &mut Vec<u16>) {
    packed.resize(x.len(), 0);
    x.par_chunks_mut(CHUNK).zip(packed.par_chunks_mut(CHUNK)).for_each(|(xs, ps)| {
        for (v, p) in xs.iter_mut().zip(ps) {
            let b = bf16::from_f32(v.to_f64() as f32);
            *p = b.to_bits();
            *v = T::from_f64(b.to_f64());
        }
    });
}

/// Unpacks bf16 bit patterns into `out` (resized to fit).
pub fn unpack<T: Real>(packed: &[u16], out: &mut Vec<T>) {
    out.resize(packed.len(), T::ZERO);
    out.par_chunks_mut(CHUNK)
        .zip(packed.par_chunks(CHUNK))
        .for_each(|(os, ps)| os.iter_mut().zip(ps).for_each(|(o, &p)| *o = T::from_f64(bf16::from_bits(p).to_f64())));
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
