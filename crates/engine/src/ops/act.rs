//! Activations, element-wise, with their derivatives.

use serde::{Deserialize, Serialize};

use crate::matmul_bf16::pair_of;
use crate::real::Real;

/// An activation function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    /// max(x, 0)
    Relu,
    /// x·σ(x) (a.k.a. swish), `torch.nn.SiLU`
    Silu,
    /// tanh x
    Tanh,
    /// x (no activation)
    Identity,
}

impl Activation {
    /// Op name for errors and benchmarks.
    pub const NAME: &'static str = "activation";

    /// f(x).
    #[inline(always)]
    pub fn f<T: Real>(self, x: T) -> T {
        match self {
            Activation::Relu => {
                if x > T::ZERO {
                    x
                } else {
                    T::ZERO
                }
            }
            Activation::Silu => x / (T::ONE + (-x).exp()),
            Activation::Tanh => x.tanh(),
            Activation::Identity => x,
        }
    }

    /// f'(x).
    #[inline(always)]
    pub fn df<T: Real>(self, x: T) -> T {
        match self {
            // d/dx relu = 1 for x > 0 (0 at the kink, as PyTorch)
            Activation::Relu => {
                if x > T::ZERO {
                    T::ONE
                } else {
                    T::ZERO
                }
            }
            // d/dx silu = s(x)·(1 + x·(1 − s(x))), s = sigmoid
            Activation::Silu => {
                let s = T::ONE / (T::ONE + (-x).exp());
                s * (T::ONE + x * (T::ONE - s))
            }
            // d/dx tanh = 1 − tanh²
            Activation::Tanh => {
                let t = x.tanh();
                T::ONE - t * t
            }
            Activation::Identity => T::ONE,
        }
    }
}

crate::dispatch! {
    /// y = f(x), element-wise.
    pub fn forward<T: Real>(act: Activation, x: &[T], y: &mut [T]) {
        assert_eq!(x.len(), y.len(), "activation forward: lengths");
        match act {
            Activation::Relu => y.iter_mut().zip(x).for_each(|(y, &x)| *y = if x > T::ZERO { x } else { T::ZERO }),
            Activation::Silu => y.iter_mut().zip(x).for_each(|(y, &x)| *y = x / (T::ONE + (-x).exp())),
            Activation::Tanh => y.iter_mut().zip(x).for_each(|(y, &x)| *y = x.tanh()),
            Activation::Identity => y.copy_from_slice(x),
        }
    }
}

crate::dispatch! {
    /// In place: g ← g · f'(x), element-wise (the backward of y = f(x) given dL/dy in `g`).
    pub fn backward_in_place<T: Real>(act: Activation, x: &[T], g: &mut [T]) {
        assert_eq!(x.len(), g.len(), "activation backward: lengths");
        match act {
            Activation::Relu => g.iter_mut().zip(x).for_each(|(g, &x)| if x <= T::ZERO { *g = T::ZERO }),
            Activation::Identity => {}
            // One loop per activation, as in `forward`, so each inlines and vectorises.
            Activation::Silu => g.iter_mut().zip(x).for_each(|(g, &x)| *g *= Activation::Silu.df(x)),
            Activation::Tanh => g.iter_mut().zip(x).for_each(|(g, &x)| *g *= Activation::Tanh.df(x)),
        }
    }
}

crate::dispatch! {
    /// g = dy · f'(x), element-wise: [`backward_in_place`] reading dL/dy from `dy` instead of
    /// from `g` (the same bits), so the caller's gradient needs no copy into scratch first.
    pub fn backward<T: Real>(act: Activation, x: &[T], dy: &[T], g: &mut [T]) {
        assert_eq!(x.len(), g.len(), "activation backward: lengths");
        assert_eq!(dy.len(), g.len(), "activation backward: lengths");
        let gs = g.iter_mut().zip(x).zip(dy);
        match act {
            Activation::Relu => gs.for_each(|((g, &x), &dy)| *g = if x <= T::ZERO { T::ZERO } else { dy }),
            Activation::Identity => g.copy_from_slice(dy),
            Activation::Silu => gs.for_each(|((g, &x), &dy)| *g = dy * Activation::Silu.df(x)),
            Activation::Tanh => gs.for_each(|((g, &x), &dy)| *g = dy * Activation::Tanh.df(x)),
        }
    }
}

/// f applied to rows × d values, rounded to bf16 and packed in pairs along each row (see
/// [`forward_bf16_rows`]).
#[inline(always)]
fn bf16_rows<T: Real>(f: impl Fn(T) -> T, x: &[T], d: usize, out: &mut [u32]) {
    let kp = d.div_ceil(2);
    for (xr, o) in x.chunks_exact(d).zip(out.chunks_exact_mut(kp)) {
        for (o, p) in o.iter_mut().zip(xr.chunks_exact(2)) {
            *o = pair_of(f(p[0]), f(p[1]));
        }
        if d % 2 == 1 {
            o[kp - 1] = pair_of(f(xr[d - 1]), T::ZERO);
        }
    }
}

/// f applied to rows × d values, rounded to bf16 and packed in pairs of rows (see
/// [`forward_bf16_row_pairs`]).
#[inline(always)]
fn bf16_row_pairs<T: Real>(f: impl Fn(T) -> T, x: &[T], d: usize, np: usize, out: &mut [u32]) {
    for (q, o) in out.chunks_exact_mut(np).enumerate() {
        let r0 = &x[2 * q * d..(2 * q + 1) * d];
        let o = &mut o[..d];
        // Index loops over slices of length d: they inline into the dispatched function and
        // vectorise, where a zipped `for_each` stayed a scalar out-of-line fold (SiLU's exp
        // one value at a time).
        match x.get((2 * q + 1) * d..(2 * q + 2) * d) {
            Some(r1) => {
                for j in 0..d {
                    o[j] = pair_of(f(r0[j]), f(r1[j]));
                }
            }
            None => {
                for j in 0..d {
                    o[j] = pair_of(f(r0[j]), T::ZERO);
                }
            }
        }
    }
}

crate::dispatch! {
    /// f(x) of rows × d values as the left operand of a bf16 product, rounded where it is
    /// computed ([`Bf16Rows::fill`](crate::matmul_bf16::Bf16Rows::fill)): `out[r·⌈d/2⌉ + q]` =
    /// the bf16 pair (f(x(r, 2q)), f(x(r, 2q + 1))), 0 past the row's end. The bits of
    /// [`forward`] then packing its output.
    pub fn forward_bf16_rows<T: Real>(act: Activation, x: &[T], d: usize, out: &mut [u32]) {
        if d == 0 {
            return;
        }
        assert!(x.len().is_multiple_of(d), "activation bf16 rows: lengths");
        assert_eq!(out.len(), x.len() / d * d.div_ceil(2), "activation bf16 rows: lengths");
        match act {
            Activation::Relu => bf16_rows(|x| Activation::Relu.f(x), x, d, out),
            Activation::Silu => bf16_rows(|x| Activation::Silu.f(x), x, d, out),
            Activation::Tanh => bf16_rows(|x| Activation::Tanh.f(x), x, d, out),
            Activation::Identity => bf16_rows(|x| x, x, d, out),
        }
    }
}

crate::dispatch! {
    /// f(x) of rows × d values as the right operand of a bf16 product (k = rows, n = d),
    /// rounded where it is computed ([`PackedB::fill`](crate::matmul_bf16::PackedB::fill)):
    /// `out[q·np + j]` = the bf16 pair (f(x(2q, j)), f(x(2q + 1, j))) for j < d, the second half
    /// 0 past the last row; columns d..np are left as they are. The bits of [`forward`] then
    /// packing its output.
    pub fn forward_bf16_row_pairs<T: Real>(act: Activation, x: &[T], d: usize, np: usize, out: &mut [u32]) {
        if d == 0 {
            return;
        }
        assert!(np >= d && x.len().is_multiple_of(d), "activation bf16 row pairs: lengths");
        assert_eq!(out.len(), (x.len() / d).div_ceil(2) * np, "activation bf16 row pairs: lengths");
        match act {
            Activation::Relu => bf16_row_pairs(|x| Activation::Relu.f(x), x, d, np, out),
            Activation::Silu => bf16_row_pairs(|x| Activation::Silu.f(x), x, d, np, out),
            Activation::Tanh => bf16_row_pairs(|x| Activation::Tanh.f(x), x, d, np, out),
            Activation::Identity => bf16_row_pairs(|x| x, x, d, np, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derivatives_match_central_differences() {
        for act in [Activation::Relu, Activation::Silu, Activation::Tanh, Activation::Identity] {
            for &x in &[-2.3f64, -0.4, 0.3, 1.7, 5.0] {
                let h = 1e-6;
                let fd = (act.f(x + h) - act.f(x - h)) / (2.0 * h);
                assert!((fd - act.df(x)).abs() < 1e-8, "{act:?} at {x}: {fd} vs {}", act.df(x));
            }
        }
    }

    #[test]
    fn backward_from_dy_has_the_bits_of_backward_in_place() {
        use crate::simd::{Level, force_level};
        // Includes 0 and −0 inputs (the ReLU kink) and a NaN.
        let mut x: Vec<f32> = (0..515).map(|i| (i as f32 - 257.0) / 31.0).collect();
        x[3] = -0.0;
        x[4] = f32::NAN;
        let dy: Vec<f32> = (0..x.len()).map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0).collect();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for level in [Level::Scalar, Level::Avx2, Level::Avx512] {
            force_level(Some(level));
            for act in [Activation::Relu, Activation::Silu, Activation::Tanh, Activation::Identity] {
                let mut in_place = dy.clone();
                backward_in_place(act, &x, &mut in_place);
                let mut g = vec![9.0f32; x.len()];
                backward(act, &x, &dy, &mut g);
                assert_eq!(bits(&g), bits(&in_place), "{act:?} {level:?}");
            }
        }
        force_level(None);
    }

    #[test]
    fn slice_kernels_agree_with_scalar_definition_on_every_level() {
        use crate::simd::{Level, force_level};
        let x: Vec<f32> = (0..1003).map(|i| (i as f32 - 500.0) / 97.0).collect();
        for level in [Level::Scalar, Level::Avx2, Level::Avx512] {
            force_level(Some(level));
            for act in [Activation::Relu, Activation::Silu, Activation::Tanh] {
                let mut y = vec![0.0f32; x.len()];
                forward(act, &x, &mut y);
                let mut g = vec![1.5f32; x.len()];
                backward_in_place(act, &x, &mut g);
                for i in 0..x.len() {
                    assert!((y[i] - act.f(x[i])).abs() <= 1e-6 * (1.0 + y[i].abs()), "{act:?} {level:?}");
                    assert!((g[i] - 1.5 * act.df(x[i])).abs() <= 1e-5, "{act:?} {level:?}");
                }
            }
        }
        force_level(None);
    }
}
