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
}

macro_rules! impl_real {
    ($t:ty) => {
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
                <$t>::exp(self)
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
                <$t>::tanh(self)
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

impl_real!(f32);
impl_real!(f64);
