use super::*;
use trackgnn_trackml::rng::Rng;

// Odd shapes for every kernel's edges; (70, 100, 40): AMX's 32-row panels and their tail,
// whole and partial 16-pair blocks, and an odd number of 16-column tiles.
const SIZES: [(usize, usize, usize); 10] = [
    (70, 100, 40),
    (1, 1, 1),
    (3, 5, 7),
    (17, 31, 13),
    (64, 64, 64),
    (129, 3, 65),
    (7, 512, 192),
    (13, 64, 1),
    (0, 4, 3),
    (5, 0, 3),
];

/// Runs `f(path)` on every path the CPU has, saying which were skipped.
fn on_every_path(mut f: impl FnMut(Bf16Path)) {
    for path in ALL_PATHS {
        match path.unavailable() {
            None => f(path),
            Some(why) => eprintln!("skipped: {path:?} ({why})"),
        }
    }
}

#[test]
fn every_path_matches_the_f64_reference_on_awkward_sizes_and_views() {
    on_every_path(|path| {
        let mut rng = Rng::new(3);
        for &(m, k, n) in &SIZES {
            let a: Vec<f32> = (0..m * (k + 3)).map(|_| rng.normal() as f32).collect();
            let b: Vec<f32> = (0..n * (k + 1)).map(|_| rng.normal() as f32).collect();
            // Every layout the packers distinguish: rows contiguous, columns contiguous.
            let layouts = [
                (MatRef::row_major(&a, m, k + 3).cols(2, 2 + k), MatRef::row_major(&b, n, k).t()),
                (MatRef::row_major(&a, k + 3, m).rows(1, 1 + k).t(), MatRef::row_major(&b, k + 1, n).rows(0, k)),
            ];
            for ((av, bv), accum) in layouts.into_iter().flat_map(|l| [(l, Accum::Replace), (l, Accum::Add)]) {
                let init: Vec<f32> = (0..m * (n + 2)).map(|_| rng.normal() as f32).collect();
                let (mut fast, mut slow) = (init.clone(), init.clone());
                matmul_bf16_on(path, &mut fast, n + 2, av, bv, accum);
                matmul_bf16_slow(&mut slow, n + 2, av, bv, accum);
                for i in 0..m {
                    for j in 0..n {
                        // f32 sums of k exact products: within k·2^-24 of Σ|a||b| (plus the
                        // rounding of the result and of an added destination).
                        let mag: f64 = (0..k).map(|p| (av.at(i, p) as f64 * bv.at(p, j) as f64).abs()).sum();
                        let (f, s) = (fast[i * (n + 2) + j] as f64, slow[i * (n + 2) + j] as f64);
                        let tol = (k as f64 + 2.0) * 6e-8 * (mag + init[i * (n + 2) + j].abs() as f64 + s.abs());
                        assert!((f - s).abs() <= tol, "{path:?} ({m},{k},{n}) {accum:?} [{i},{j}]: {f} vs {s}");
                    }
                    let pad = i * (n + 2) + n..i * (n + 2) + n + 2;
                    assert_eq!(fast[pad.clone()], init[pad], "padding untouched");
                }
            }
        }
    });
}

#[test]
fn an_operand_packed_once_gives_the_bits_of_packing_it_in_each_product() {
    // gz (rows × cols) feeds dW += gzᵀ·a and dx = gz·W: odd and even rows and columns.
    let mut rng = Rng::new(21);
    let mut gz16 = Bf16Rows::default();
    for (rows, cols, n) in [(512, 64, 192), (7, 5, 3), (6, 1, 33), (1, 8, 16), (33, 17, 2)] {
        let gz: Vec<f32> = (0..rows * cols).map(|_| rng.normal() as f32).collect();
        let a: Vec<f32> = (0..rows * n).map(|_| rng.normal() as f32).collect();
        let w: Vec<f32> = (0..cols * n).map(|_| rng.normal() as f32).collect();
        let (gzv, av, wv) =
            (MatRef::row_major(&gz, rows, cols), MatRef::row_major(&a, rows, n), MatRef::row_major(&w, cols, n));
        gz16.pack(&gz, rows, cols);
        let init: Vec<f32> = (0..cols * n).map(|_| rng.normal() as f32).collect();
        let (mut once, mut each) = (init.clone(), init);
        matmul_bf16_rows_t(&mut once, n, &gz16, av, Accum::Add);
        matmul_bf16(&mut each, n, gzv.t(), av, Accum::Add);
        assert!(once.iter().zip(&each).all(|(x, y)| x.to_bits() == y.to_bits()), "gzᵀ·a {rows}×{cols}×{n}");
        let packed = PackedB::new(wv);
        let (mut once, mut each) = (vec![0.0f32; rows * n], vec![0.0f32; rows * n]);
        matmul_bf16_rows_packed(&mut once, n, &gz16, &packed, Accum::Replace);
        matmul_bf16_packed(&mut each, n, gzv, &packed, Accum::Replace);
        assert!(once.iter().zip(&each).all(|(x, y)| x.to_bits() == y.to_bits()), "gz·W {rows}×{cols}×{n}");
    }
}

#[test]
fn operands_filled_by_the_pass_that_computes_them_give_the_bits_of_packing_them() {
    use crate::ops::{Activation, act};
    let mut rng = Rng::new(22);
    let (mut gz16, mut a16, mut b16) = (Bf16Rows::default(), Bf16Rows::default(), PackedB::default());
    // Odd and even rows and widths, widths off 16 (padded columns).
    for (rows, d, n) in [(512, 64, 64), (7, 5, 3), (6, 1, 33), (1, 8, 16), (33, 17, 2)] {
        let y: Vec<f32> = (0..rows * d).map(|_| rng.normal() as f32).collect();
        let gz: Vec<f32> = (0..rows * n).map(|_| rng.normal() as f32).collect();
        let w: Vec<f32> = (0..d * n).map(|_| rng.normal() as f32).collect();
        let packed = PackedB::new(MatRef::row_major(&w, d, n));
        gz16.pack(&gz, rows, n);
        for f in [Activation::Relu, Activation::Silu, Activation::Identity] {
            let mut a = vec![0.0f32; rows * d];
            act::forward(f, &y, &mut a);
            let av = MatRef::row_major(&a, rows, d);
            // The forward's left operand: a·W.
            a16.fill(rows, d, |o| act::forward_bf16_rows(f, &y, d, o));
            let (mut filled, mut each) = (vec![0.0f32; rows * n], vec![0.0f32; rows * n]);
            matmul_bf16_rows_packed(&mut filled, n, &a16, &packed, Accum::Replace);
            matmul_bf16_packed(&mut each, n, av, &packed, Accum::Replace);
            assert!(filled.iter().zip(&each).all(|(x, y)| x.to_bits() == y.to_bits()), "a·W {f:?} {rows}×{d}×{n}");
            // The backward's right operand: dW += gzᵀ·a.
            b16.fill(rows, d, |o, np| act::forward_bf16_row_pairs(f, &y, d, np, o));
            let init: Vec<f32> = (0..n * d).map(|_| rng.normal() as f32).collect();
            let (mut filled, mut each) = (init.clone(), init);
            matmul_bf16_rows_t_packed(&mut filled, d, &gz16, &b16, Accum::Add);
            matmul_bf16_rows_t(&mut each, d, &gz16, av, Accum::Add);
            assert!(filled.iter().zip(&each).all(|(x, y)| x.to_bits() == y.to_bits()), "gzᵀ·a {f:?} {rows}×{d}×{n}");
        }
    }
}

#[test]
fn bf16_products_are_within_bf16_rounding_of_the_exact_f64_ones() {
    // The error of bf16 operands themselves: each is within 2^-9 relative, so a product of
    // k terms is within about 2·2^-9·Σ|a||b| of the exact one.
    let mut rng = Rng::new(8);
    let (m, k, n) = (40, 192, 64);
    let a: Vec<f64> = (0..m * k).map(|_| rng.normal()).collect();
    let b: Vec<f64> = (0..k * n).map(|_| rng.normal()).collect();
    let (av, bv) = (MatRef::row_major(&a, m, k), MatRef::row_major(&b, k, n));
    let mut exact = vec![0.0f64; m * n];
    crate::matmul::matmul_slow(&mut exact, n, av, bv, Accum::Replace);
    on_every_path(|path| {
        let mut got = vec![0.0f64; m * n];
        matmul_bf16_on(path, &mut got, n, av, bv, Accum::Replace);
        let (mut err2, mut ref2) = (0.0, 0.0);
        for i in 0..m {
            for j in 0..n {
                let mag: f64 = (0..k).map(|p| (av.at(i, p) * bv.at(p, j)).abs()).sum();
                let e = (got[i * n + j] - exact[i * n + j]).abs();
                assert!(e <= 2.0 * mag / 512.0, "{path:?} [{i},{j}]: off by {e} of Σ|ab| {mag}");
                err2 += e * e;
                ref2 += exact[i * n + j].powi(2);
            }
        }
        let rel = (err2 / ref2).sqrt();
        // Random-sign rounding errors add in quadrature: far below the worst case.
        assert!(rel > 1e-5 && rel < 1e-2, "{path:?}: relative error {rel:e}");
    });
}

#[test]
fn the_avx512_bf16_kernel_and_the_portable_one_agree_bit_for_bit() {
    if !Bf16Path::Avx512Bf16.available() {
        eprintln!("skipped: no AVX512-BF16 on this CPU");
        return;
    }
    let mut rng = Rng::new(11);
    for &(m, k, n) in &SIZES {
        let a: Vec<f32> = (0..m * k).map(|_| rng.normal() as f32).collect();
        let b: Vec<f32> = (0..k * n).map(|_| (rng.normal() * 3.0) as f32).collect();
        let bv = MatRef::row_major(&b, k, n);
        // A packed by rows, and a transposed A packed by pair columns.
        for av in [MatRef::row_major(&a, m, k), MatRef::row_major(&a, k, m).t()] {
            let (mut x, mut y) = (vec![0.0f32; m * n], vec![0.0f32; m * n]);
            matmul_bf16_on(Bf16Path::Avx512Bf16, &mut x, n, av, bv, Accum::Replace);
            matmul_bf16_on(Bf16Path::Portable, &mut y, n, av, bv, Accum::Replace);
            let same = x.iter().zip(&y).all(|(p, q)| p.to_bits() == q.to_bits());
            assert!(same, "({m},{k},{n}) A row-major {}: the kernels differ", av.is_row_major());
        }
    }
}

#[test]
fn a_product_on_a_packed_weight_equals_the_unpacked_product_bit_for_bit() {
    on_every_path(|path| {
        let mut rng = Rng::new(17);
        for &(m, k, n) in &SIZES {
            let a: Vec<f32> = (0..m * k).map(|_| rng.normal() as f32).collect();
            let w: Vec<f32> = (0..n * (k + 2)).map(|_| rng.normal() as f32).collect();
            let av = MatRef::row_major(&a, m, k);
            // Both layouts a weight is read in: Wᵀ (forward) and a column block of W (backward).
            for bv in
                [MatRef::row_major(&w, n, k + 2).cols(1, 1 + k).t(), MatRef::row_major(&w, k + 2, n).rows(2, 2 + k)]
            {
                let packed = PackedB::on(path, bv);
                assert_eq!((packed.nrows(), packed.ncols()), (k, n));
                for accum in [Accum::Replace, Accum::Add] {
                    let init: Vec<f32> = (0..m * (n + 1)).map(|_| rng.normal() as f32).collect();
                    let (mut x, mut y) = (init.clone(), init.clone());
                    matmul_bf16_on(path, &mut x, n + 1, av, bv, accum);
                    matmul_bf16_packed(&mut y, n + 1, av, &packed, accum);
                    let same = x.iter().zip(&y).all(|(p, q)| p.to_bits() == q.to_bits());
                    assert!(same, "{path:?} ({m},{k},{n}) {accum:?}: packed and unpacked differ");
                }
            }
        }
    });
}

#[test]
fn both_packed_products_check_shapes_under_their_own_names() {
    let panic_text = |f: &mut dyn FnMut()| {
        let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).expect_err("should panic");
        e.downcast_ref::<String>().cloned().unwrap_or_default()
    };
    let w = vec![1.0f32; 4 * 3];
    let packed = PackedB::new(MatRef::row_major(&w, 4, 3));
    let a = vec![1.0f32; 2 * 5];
    let mut rows = Bf16Rows::default();
    rows.pack(&a, 2, 5);
    let mut dst = vec![0.0f32; 2 * 3];
    let e = panic_text(&mut || matmul_bf16_packed(&mut dst, 3, MatRef::row_major(&a, 2, 5), &packed, Accum::Add));
    assert!(e.contains("matmul_bf16_packed: inner dimensions 5 and 4"), "{e}");
    let e = panic_text(&mut || matmul_bf16_rows_packed(&mut dst, 3, &rows, &packed, Accum::Add));
    assert!(e.contains("matmul_bf16_rows_packed: inner dimensions 5 and 4"), "{e}");
    rows.pack(&a[..8], 2, 4);
    let e = panic_text(&mut || matmul_bf16_rows_packed(&mut dst, 2, &rows, &packed, Accum::Add));
    assert!(e.contains("matmul_bf16_rows_packed: ld 2 < n 3"), "{e}");
    let e = panic_text(&mut || matmul_bf16_rows_packed(&mut dst[..5], 3, &rows, &packed, Accum::Add));
    assert!(e.contains("matmul_bf16_rows_packed: dst too short"), "{e}");
    let e =
        panic_text(&mut || matmul_bf16_packed(&mut dst[..5], 3, MatRef::row_major(&a[..8], 2, 4), &packed, Accum::Add));
    assert!(e.contains("matmul_bf16_packed: dst too short"), "{e}");
    // An empty product returns before the length check.
    let mut empty = Bf16Rows::default();
    empty.pack::<f32>(&[], 0, 4);
    matmul_bf16_rows_packed::<f32>(&mut [], 3, &empty, &packed, Accum::Add);
    matmul_bf16_rows_packed(&mut dst, 3, &rows, &packed, Accum::Replace);
    assert_eq!(dst, vec![4.0; 6], "2 × 4 ones times 4 × 3 ones");
}

#[test]
fn amx_is_chosen_where_usable_and_agrees_with_the_portable_kernel_to_f32_rounding() {
    if let Some(why) = Bf16Path::Amx.unavailable() {
        eprintln!("skipped: AMX-BF16 ({why})");
        return;
    }
    assert_eq!(best_path(), Bf16Path::Amx, "the rule puts AMX first");
    // An edge tile's shapes (512 rows, H = 64 and 3H) in both left layouts, then the same
    // call again: the same bits.
    let mut rng = Rng::new(5);
    for (m, k, n) in [(512, 64, 64), (512, 192, 64), (64, 512, 64), (33, 64, 17)] {
        let a: Vec<f32> = (0..m * k).map(|_| rng.normal() as f32).collect();
        let b: Vec<f32> = (0..k * n).map(|_| rng.normal() as f32).collect();
        let bv = MatRef::row_major(&b, k, n);
        for av in [MatRef::row_major(&a, m, k), MatRef::row_major(&a, k, m).t()] {
            let (mut x, mut y, mut again) = (vec![0.0f32; m * n], vec![0.0f32; m * n], vec![0.0f32; m * n]);
            matmul_bf16_on(Bf16Path::Amx, &mut x, n, av, bv, Accum::Replace);
            matmul_bf16_on(Bf16Path::Portable, &mut y, n, av, bv, Accum::Replace);
            matmul_bf16_on(Bf16Path::Amx, &mut again, n, av, bv, Accum::Replace);
            assert!(x.iter().zip(&again).all(|(p, q)| p.to_bits() == q.to_bits()), "AMX is deterministic");
            for i in 0..m {
                for j in 0..n {
                    let mag: f32 = (0..k).map(|p| (av.at(i, p) * bv.at(p, j)).abs()).sum();
                    let e = (x[i * n + j] - y[i * n + j]).abs();
                    assert!(
                        e <= k as f32 * 1.2e-7 * mag,
                        "({m},{k},{n}) [{i},{j}]: {} vs {}",
                        x[i * n + j],
                        y[i * n + j]
                    );
                }
            }
        }
    }
}
