//! The GEMM-only time of a step ([`replay`]): its recorded products run alone, same shapes,
//! layouts and kernels, for `bench engine`'s step / GEMM-only ratio.

use crate::matmul::{Accum, MatRef, matmul, stats};

/// Runs recorded products alone, in parallel on the current rayon pool (each on one thread, as
/// in a step), on buffers of their shapes and layouts: the step's GEMM-only time. Returns the
/// wall seconds. Not counted by [`stats`].
pub fn replay(products: &[stats::Product]) -> f64 {
    use rayon::prelude::*;

    use crate::matmul_bf16::{Bf16Path, PackedB, matmul_bf16_on, matmul_bf16_packed};
    let on = stats::pause();
    // Right operands the step packed beforehand (bf16 weights) are packed here beforehand too,
    // one per distinct shape and path, outside the timing.
    let bf16_path = |p: &stats::Product| match p.path {
        stats::GemmPath::Bf16Avx512 => Bf16Path::Avx512Bf16,
        stats::GemmPath::Bf16Amx => Bf16Path::Amx,
        stats::GemmPath::Bf16F32Fma => Bf16Path::F32Fma,
        _ => Bf16Path::Portable,
    };
    let mut packed: Vec<((usize, usize, stats::GemmPath), PackedB)> = Vec::new();
    for p in products.iter().filter(|p| p.b_packed) {
        if !packed.iter().any(|(key, _)| *key == (p.k, p.n, p.path)) {
            let b = vec![0.25f32; p.k * p.n];
            packed.push(((p.k, p.n, p.path), PackedB::on(bf16_path(p), MatRef::row_major(&b, p.k, p.n))));
        }
    }
    let t0 = std::time::Instant::now();
    products.par_iter().for_each_init(
        || (Vec::<f32>::new(), Vec::<f32>::new(), Vec::<f32>::new()),
        |(ab, bb, db), p| {
            for (buf, len) in [(&mut *ab, p.m * p.k), (&mut *bb, p.k * p.n), (&mut *db, p.m * p.n)] {
                buf.resize(len, 0.25);
            }
            let a = if p.a_row_major { MatRef::row_major(ab, p.m, p.k) } else { MatRef::row_major(ab, p.k, p.m).t() };
            let b = if p.b_row_major { MatRef::row_major(bb, p.k, p.n) } else { MatRef::row_major(bb, p.n, p.k).t() };
            let accum = if p.add { Accum::Add } else { Accum::Replace };
            if p.b_packed {
                let (_, pb) = packed.iter().find(|(key, _)| *key == (p.k, p.n, p.path)).expect("packed above");
                return matmul_bf16_packed(db, p.n, a, pb, accum);
            }
            match p.path {
                stats::GemmPath::F32Gemm => matmul(db, p.n, a, b, accum),
                stats::GemmPath::Bf16Avx512 => matmul_bf16_on(Bf16Path::Avx512Bf16, db, p.n, a, b, accum),
                stats::GemmPath::Bf16Amx => matmul_bf16_on(Bf16Path::Amx, db, p.n, a, b, accum),
                stats::GemmPath::Bf16F32Fma => matmul_bf16_on(Bf16Path::F32Fma, db, p.n, a, b, accum),
                stats::GemmPath::Bf16Portable => matmul_bf16_on(Bf16Path::Portable, db, p.n, a, b, accum),
            }
        },
    );
    let s = t0.elapsed().as_secs_f64();
    stats::resume(on);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_products_replay_with_their_shapes() {
        let (a, b) = (vec![1.0f32; 6 * 4], vec![1.0f32; 5 * 4]);
        let mut d = vec![0.0f32; 6 * 5];
        stats::record(true);
        matmul(&mut d, 5, MatRef::row_major(&a, 6, 4), MatRef::row_major(&b, 5, 4).t(), Accum::Add);
        stats::record(false);
        assert_eq!(d, vec![4.0; 30]);
        let want = stats::Product {
            path: stats::GemmPath::F32Gemm,
            m: 6,
            k: 4,
            n: 5,
            a_row_major: true,
            b_row_major: false,
            b_packed: false,
            add: true,
        };
        let rec = stats::recorded();
        assert!(rec.contains(&want), "{rec:?}");
        assert!(replay(&[want; 3]) > 0.0);
    }
}
