//! The scalar types the engine computes in: f32 for training, f64 for gradient checks.

use std::fmt::Debug;
use std::iter::Sum;
use std::ops::{Add, AddAssign, Div, Mul, MulAssign, Neg, Sub, SubAssign};

/// A floating-point scalar (f32 or f64) with what the kernels need.
pub trait Real:
    Copy
    + Send
    + Sync
    + Default
    + Debug
    + PartialOrd
    + Sum
    + 'static
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
{
    /// 0.
    const ZERO: Self;
    /// 1.
    const ONE: Self;
    /// Converts from f64 (rounding for f32).
    fn from_f64(x: f64) -> Self;
    /// Converts to f64.
    fn to_f64(self) -> f64;
    /// e^x.
    fn exp(self) -> Self;
    /// ln x.
    fn ln(self) -> Self;
    /// √x.
    fn sqrt(self) -> Self;
    /// tanh x.
    fn tanh(self) -> Self;
    /// |x|.
    fn abs(self) -> Self;
    /// max(self, o), NaN-propagating as `f32::max` is not: keeps `self` if `o` is NaN.
    fn max(self, o: Self) -> Self;
    /// True unless NaN or infinite.
    fn is_finite(self) -> bool;
    /// From a usize count.
    fn from_usize(n: usize) -> Self {
        Self::from_f64(n as f64)
    }
    /// The bfloat16 bit pattern nearest to this value (ties to even; NaN stays NaN).
    #[inline(always)]
    fn to_bf16_bits(self) -> u16 {
        f32_to_bf16_bits(self.to_f64() as f32)
    }
    /// The value of a bfloat16 bit pattern (exact).
    #[inline(always)]
    fn from_bf16_bits(b: u16) -> Self {
        Self::from_f64(f32::from_bits((b as u32) << 16) as f64)
    }
}

/// f32 → bf16 bits, rounding to nearest with ties to even, in integer arithmetic without
/// branches so that loops over it vectorise (the `half` crate's conversion is scalar).
#[inline(always)]
pub fn f32_to_bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let rounded = b.wrapping_add(0x7fff + ((b >> 16) & 1)) >> 16;
    // A NaN keeps its sign and top payload bits, made quiet, rather than rounding to infinity.
    let nan = (b >> 16) | 0x40;
    (if b & 0x7fff_ffff > 0x7f80_0000 { nan } else { rounded }) as u16
}

macro_rules! impl_real {
    ($t:ty, $exp:path, $tanh:path) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            #[inline(always)]
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn exp(self) -> Self {
                $exp(self)
            }
            #[inline(always)]
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn tanh(self) -> Self {
                $tanh(self)
            }
            #[inline(always)]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn max(self, o: Self) -> Self {
                if o > self { o } else { self }
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
        }
    };
}

impl_real!(f32, exp_f32, tanh_f32);
impl_real!(f64, f64::exp, f64::tanh);

// f32 exp and tanh in plain arithmetic, without a libm call, so that the element-wise loops
// (SiLU, tanh and their derivatives: half of a training step when they called libm) vectorise at
// every SIMD level. Cephes' single-precision polynomials, within 2 ulp of the exact result; no
// FMA contraction, so every level gives the same bits.

/// e^x for f32 (inputs clamped to [−87, 88], where it stays finite and normal).
#[inline(always)]
fn exp_f32(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const C1: f32 = 0.693_359_4;
    const C2: f32 = -2.121_944_4e-4;
    const ROUND: f32 = 12_582_912.0; // 1.5·2^23: adding and subtracting it rounds to an integer
    let x = x.clamp(-87.0, 88.0);
    let t = x * LOG2E + ROUND;
    let n = t - ROUND;
    // n as an integer from t's low mantissa bits (an `as i32` cast would not vectorise).
    let n_int = t.to_bits().wrapping_sub(ROUND.to_bits()) as i32;
    let r = x - n * C1 - n * C2;
    let p = 1.987_569_1e-4;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 5e-1;
    let y = p * (r * r) + r + 1.0;
    y * f32::from_bits(((n_int + 127) as u32) << 23)
}

/// tanh x for f32: an odd polynomial below |x| = 0.625, 1 − 2/(e^{2|x|} + 1) above.
#[inline(always)]
fn tanh_f32(x: f32) -> f32 {
    let a = x.abs();
    let z = x * x;
    let p = -5.704_988_7e-3;
    let p = p * z + 2.063_909e-2;
    let p = p * z - 5.373_971_6e-2;
    let p = p * z + 1.333_144_2e-1;
    let p = p * z - 3.333_328e-1;
    let small = p * z * x + x;
    let big = 1.0 - 2.0 / (exp_f32(2.0 * a) + 1.0);
    if a < 0.625 { small } else { big.copysign(x) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Largest error in units of the f32 spacing at the exact value.
    fn max_ulp(f: impl Fn(f32) -> f32, exact: impl Fn(f64) -> f64, lo: f32, hi: f32) -> f64 {
        let steps = 200_000;
        (0..=steps)
            .map(|i| {
                let x = lo + (hi - lo) * i as f32 / steps as f32;
                let e = exact(x as f64);
                let ulp = (e.abs() as f32).max(f32::MIN_POSITIVE);
                let ulp = (f32::from_bits(ulp.to_bits() + 1) - ulp) as f64;
                (f(x) as f64 - e).abs() / ulp
            })
            .fold(0.0, f64::max)
    }

    #[test]
    fn f32_exp_and_tanh_are_within_2_ulp() {
        let e = max_ulp(exp_f32, f64::exp, -87.0, 88.0);
        assert!(e <= 2.0, "exp: {e} ulp");
        let t = max_ulp(tanh_f32, f64::tanh, -12.0, 12.0);
        assert!(t <= 2.0, "tanh: {t} ulp");
        let t = max_ulp(tanh_f32, f64::tanh, -0.7, 0.7);
        assert!(t <= 2.0, "tanh near 0: {t} ulp");
        assert_eq!(tanh_f32(0.0), 0.0);
        assert_eq!(tanh_f32(50.0), 1.0);
        assert_eq!(tanh_f32(-50.0), -1.0);
        assert!(exp_f32(200.0).is_finite() && exp_f32(-200.0) > 0.0);
    }
}
