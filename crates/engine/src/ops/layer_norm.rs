//! Layer normalisation over the last dimension (`torch.nn.LayerNorm(d, eps=1e-5)`):
//! y = (x − μ)/√(σ² + ε) · γ + β, with μ and σ² (biased) over each row.

use crate::real::Real;

/// The 16 partial sums of Σ x that [`sum16`] adds up: element i goes to partial i mod 16.
#[inline(always)]
fn partials16<T: Real>(x: &[T]) -> [T; 16] {
    let mut acc = [T::ZERO; 16];
    let mut chunks = x.chunks_exact(16);
    for c in &mut chunks {
        for j in 0..16 {
            acc[j] += c[j];
        }
    }
    for (j, &v) in chunks.remainder().iter().enumerate() {
        acc[j] += v;
    }
    acc
}

/// The 16 partial sums of Σ x·y that [`dot16`] adds up.
#[inline(always)]
fn dot_partials16<T: Real>(x: &[T], y: &[T]) -> [T; 16] {
    let mut acc = [T::ZERO; 16];
    let mut cx = x.chunks_exact(16);
    let mut cy = y.chunks_exact(16);
    for (a, b) in (&mut cx).zip(&mut cy) {
        for j in 0..16 {
            acc[j] += a[j] * b[j];
        }
    }
    for (j, (&a, &b)) in cx.remainder().iter().zip(cy.remainder()).enumerate() {
        acc[j] += a * b;
    }
    acc
}

/// Σ x with 16 independent partial sums (a fixed order the compiler can vectorise; a plain
/// left-to-right float sum cannot be reordered and runs one add at a time).
#[inline(always)]
pub fn sum16<T: Real>(x: &[T]) -> T {
    partials16(x).iter().copied().sum()
}

/// Σ x·y with 16 independent partial sums (see [`sum16`]).
#[inline(always)]
pub fn dot16<T: Real>(x: &[T], y: &[T]) -> T {
    dot_partials16(x, y).iter().copied().sum()
}

/// Rows reduced together: their final sums of 16 partials run as independent chains.
const ROW_BLOCK: usize = 16;

/// The totals of the first `n` rows' partials, each added in the order of [`sum16`]
/// (the empty sum, then partial 0, 1, …, 15), so the bits are those of one row at a time. One
/// row's 15 dependent additions are latency-bound; rows interleaved here keep the adder busy.
#[inline(always)]
// j outermost on purpose: the rows' chains advance together.
#[allow(clippy::needless_range_loop)]
fn totals<T: Real>(partials: &[[T; 16]; ROW_BLOCK], n: usize) -> [T; ROW_BLOCK] {
    let empty: T = std::iter::empty::<T>().sum();
    let mut tot = [empty; ROW_BLOCK];
    for j in 0..16 {
        for r in 0..n {
            tot[r] += partials[r][j];
        }
    }
    tot
}

/// PyTorch's default ε.
pub const EPS: f64 = 1e-5;

crate::dispatch! {
    /// Normalises each row of `x` (`rows × d`) in place into x̂ = (x − μ)·rstd, writes rstd per
    /// row, and writes y = x̂·γ + β (x̂ itself for the non-affine LayerNorm, `None` γ and β) into
    /// `y` in the same row pass, while the row is in registers: x̂ stays in `x` for the backward.
    /// y has the bits of [`affine`] applied to x̂.
    pub fn normalize<T: Real>(x: &mut [T], d: usize, rstd: &mut [T], gamma: Option<&[T]>, beta: Option<&[T]>, y: &mut [T]) {
        assert_eq!(x.len(), rstd.len() * d, "layer_norm: shapes");
        assert_eq!(x.len(), y.len(), "layer_norm: output shape");
        let gb = match (gamma, beta) {
            (Some(g), Some(b)) => Some((&g[..d], &b[..d])),
            _ => None,
        };
        let inv_d = T::ONE / T::from_usize(d);
        let eps = T::from_f64(EPS);
        let mut parts = [[T::ZERO; 16]; ROW_BLOCK];
        let blocks = x.chunks_mut(ROW_BLOCK * d).zip(rstd.chunks_mut(ROW_BLOCK)).zip(y.chunks_mut(ROW_BLOCK * d));
        for ((rows, rs), ys) in blocks {
            let n = rs.len();
            for (p, row) in parts.iter_mut().zip(rows.chunks_exact(d)) {
                *p = partials16(row);
            }
            let sums = totals(&parts, n);
            for ((p, row), &s) in parts.iter_mut().zip(rows.chunks_exact_mut(d)).zip(&sums) {
                let mean = s * inv_d;
                row.iter_mut().for_each(|v| *v -= mean);
                *p = dot_partials16(row, row);
            }
            let vars = totals(&parts, n);
            let rows = rows.chunks_exact_mut(d).zip(ys.chunks_exact_mut(d));
            for ((r, (row, yr)), &v) in rs.iter_mut().zip(rows).zip(&vars) {
                let rstd = T::ONE / (v * inv_d + eps).sqrt();
                match gb {
                    Some((g, b)) => {
                        for (((x, y), &g), &b) in row.iter_mut().zip(yr.iter_mut()).zip(g).zip(b) {
                            let xh = *x * rstd;
                            *x = xh;
                            *y = xh * g + b;
                        }
                    }
                    None => {
                        for (x, y) in row.iter_mut().zip(yr.iter_mut()) {
                            let xh = *x * rstd;
                            *x = xh;
                            *y = xh;
                        }
                    }
                }
                *r = rstd;
            }
        }
    }
}

crate::dispatch! {
    /// y = x̂·γ + β row by row (γ, β of length d; `None` for the non-affine LayerNorm): the
    /// backward's recompute of y from the saved x̂ ([`normalize`] writes the forward's).
    pub fn affine<T: Real>(xhat: &[T], d: usize, gamma: Option<&[T]>, beta: Option<&[T]>, y: &mut [T]) {
        assert_eq!(xhat.len(), y.len(), "layer_norm affine: shapes");
        match (gamma, beta) {
            (Some(g), Some(b)) => {
                let (g, b) = (&g[..d], &b[..d]);
                for (yr, xr) in y.chunks_exact_mut(d).zip(xhat.chunks_exact(d)) {
                    for (((y, &x), &g), &b) in yr.iter_mut().zip(xr).zip(g).zip(b) {
                        *y = x * g + b;
                    }
                }
            }
            _ => y.copy_from_slice(xhat),
        }
    }
}

crate::dispatch! {
    /// Backward. Given dy (`rows × d`) in `g`, replaces it with dx, and accumulates dγ, dβ.
    ///
    /// dx̂ = dy·γ; dx = rstd · (dx̂ − mean(dx̂) − x̂·mean(dx̂ ⊙ x̂)); dγ += Σ dy ⊙ x̂; dβ += Σ dy.
    /// One pass over the rows: each row adds its dy to dγ, dβ as it turns into dx̂, while it is
    /// in cache. dγ, dβ still sum the rows in order, so the bits are those of a separate pass.
    pub fn backward<T: Real>(
        xhat: &[T],
        rstd: &[T],
        d: usize,
        gamma: Option<&[T]>,
        g: &mut [T],
        dgamma: Option<&mut [T]>,
        dbeta: Option<&mut [T]>,
    ) {
        assert_eq!(xhat.len(), g.len(), "layer_norm backward: shapes");
        let mut dparams = match (dgamma, dbeta) {
            (Some(dg), Some(db)) => Some((&mut dg[..d], &mut db[..d])),
            _ => None,
        };
        let inv_d = T::ONE / T::from_usize(d);
        let (mut pg, mut pgx) = ([[T::ZERO; 16]; ROW_BLOCK], [[T::ZERO; 16]; ROW_BLOCK]);
        let blocks = g.chunks_mut(ROW_BLOCK * d).zip(xhat.chunks(ROW_BLOCK * d)).zip(rstd.chunks(ROW_BLOCK));
        for ((gb, xb), rsb) in blocks {
            let n = rsb.len();
            for ((gr, xr), (pg, pgx)) in gb.chunks_exact_mut(d).zip(xb.chunks_exact(d)).zip(pg.iter_mut().zip(&mut pgx)) {
                backward_dparams(gr, xr, gamma, &mut dparams);
                *pg = partials16(gr);
                *pgx = dot_partials16(gr, xr);
            }
            let (sg, sgx) = (totals(&pg, n), totals(&pgx, n));
            for (((gr, xr), &rs), (&sg, &sgx)) in gb.chunks_exact_mut(d).zip(xb.chunks_exact(d)).zip(rsb).zip(sg.iter().zip(&sgx)) {
                let mean_g = sg * inv_d;
                let mean_gx = sgx * inv_d;
                for (g, &x) in gr.iter_mut().zip(xr) {
                    *g = rs * (*g - mean_g - x * mean_gx);
                }
            }
        }
    }
}

/// One row of the backward before its reductions: dγ += dy ⊙ x̂, dβ += dy, then dy → dx̂ = dy·γ.
#[inline(always)]
fn backward_dparams<T: Real>(gr: &mut [T], xr: &[T], gamma: Option<&[T]>, dparams: &mut Option<(&mut [T], &mut [T])>) {
    match (dparams, gamma) {
        (Some((dg, db)), Some(gm)) => {
            let rows = dg.iter_mut().zip(db.iter_mut()).zip(gr.iter_mut()).zip(xr).zip(gm);
            for ((((dg, db), g), &x), &m) in rows {
                *dg += *g * x;
                *db += *g;
                *g *= m;
            }
        }
        (Some((dg, db)), None) => {
            for (((dg, db), &g), &x) in dg.iter_mut().zip(db.iter_mut()).zip(gr.iter()).zip(xr) {
                *dg += g * x;
                *db += g;
            }
        }
        (None, Some(gm)) => gr.iter_mut().zip(gm).for_each(|(g, &m)| *g *= m),
        (None, None) => {}
    }
}

/// The slow twin: per row, in f64, with explicit formulas.
pub fn layer_norm_slow(x: &[f64], d: usize, gamma: &[f64], beta: &[f64]) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks_exact(d) {
        let mean = row.iter().sum::<f64>() / d as f64;
        let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / d as f64;
        for j in 0..d {
            out.push((row[j] - mean) / (var + EPS).sqrt() * gamma[j] + beta[j]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use trackgnn_trackml::rng::Rng;

    fn forward(x: &[f64], d: usize, g: &[f64], b: &[f64]) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let mut xh = x.to_vec();
        let mut rstd = vec![0.0; x.len() / d];
        let mut y = vec![0.0; x.len()];
        normalize(&mut xh, d, &mut rstd, Some(g), Some(b), &mut y);
        (y, xh, rstd)
    }

    #[test]
    fn forward_matches_slow_twin_and_backward_matches_finite_differences() {
        let mut rng = Rng::new(3);
        for &(rows, d) in &[(1usize, 1usize), (3, 5), (7, 64), (2, 129)] {
            let x: Vec<f64> = (0..rows * d).map(|_| rng.normal() * 2.0 + 0.5).collect();
            let g: Vec<f64> = (0..d).map(|_| rng.normal()).collect();
            let b: Vec<f64> = (0..d).map(|_| rng.normal()).collect();
            let (y, xh, rstd) = forward(&x, d, &g, &b);
            let slow = layer_norm_slow(&x, d, &g, &b);
            let diff = y.iter().zip(&slow).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
            assert!(diff < 1e-12, "max |Δ| {diff}");
            // Loss L = Σ w ⊙ y with random w: dL/dy = w.
            let w: Vec<f64> = (0..rows * d).map(|_| rng.normal()).collect();
            let mut gx = w.clone();
            let (mut dg, mut db) = (vec![0.0; d], vec![0.0; d]);
            backward(&xh, &rstd, d, Some(&g), &mut gx, Some(&mut dg), Some(&mut db));
            let loss =
                |x: &[f64], g: &[f64], b: &[f64]| forward(x, d, g, b).0.iter().zip(&w).map(|(a, b)| a * b).sum::<f64>();
            let h = 1e-6;
            for i in 0..x.len() {
                let (mut xp, mut xm) = (x.clone(), x.clone());
                xp[i] += h;
                xm[i] -= h;
                let fd = (loss(&xp, &g, &b) - loss(&xm, &g, &b)) / (2.0 * h);
                assert!((fd - gx[i]).abs() < 1e-6 * (1.0 + fd.abs()), "dx[{i}] {fd} vs {}", gx[i]);
            }
            for j in 0..d {
                let (mut gp, mut gm) = (g.clone(), g.clone());
                gp[j] += h;
                gm[j] -= h;
                let fd = (loss(&x, &gp, &b) - loss(&x, &gm, &b)) / (2.0 * h);
                assert!((fd - dg[j]).abs() < 1e-6 * (1.0 + fd.abs()), "dγ[{j}]");
                let (mut bp, mut bm) = (b.clone(), b.clone());
                bp[j] += h;
                bm[j] -= h;
                let fd = (loss(&x, &g, &bp) - loss(&x, &g, &bm)) / (2.0 * h);
                assert!((fd - db[j]).abs() < 1e-6 * (1.0 + fd.abs()), "dβ[{j}]");
            }
        }
    }

    #[test]
    fn dgamma_dbeta_in_the_row_loop_have_the_bits_of_a_separate_pass() {
        let mut rng = Rng::new(21);
        let (rows, d) = (37, 72);
        let xh: Vec<f32> = (0..rows * d).map(|_| rng.normal() as f32).collect();
        let rstd: Vec<f32> = (0..rows).map(|_| 0.5 + rng.uniform() as f32).collect();
        let dy: Vec<f32> = (0..rows * d).map(|_| rng.normal() as f32).collect();
        let gamma: Vec<f32> = (0..d).map(|_| rng.normal() as f32).collect();
        let start: Vec<f32> = (0..d).map(|_| rng.normal() as f32).collect();
        // The separate pass: dγ, dβ summed over the rows in order, then dx with γ.
        let (mut dg_ref, mut db_ref) = (start.clone(), start.clone());
        for (gr, xr) in dy.chunks_exact(d).zip(xh.chunks_exact(d)) {
            for j in 0..d {
                dg_ref[j] += gr[j] * xr[j];
                db_ref[j] += gr[j];
            }
        }
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for gm in [Some(&gamma[..]), None] {
            let mut dx_only = dy.clone();
            backward(&xh, &rstd, d, gm, &mut dx_only, None, None);
            let (mut dx, mut dg, mut db) = (dy.clone(), start.clone(), start.clone());
            backward(&xh, &rstd, d, gm, &mut dx, Some(&mut dg), Some(&mut db));
            assert_eq!(bits(&dg), bits(&dg_ref), "dγ");
            assert_eq!(bits(&db), bits(&db_ref), "dβ");
            // Not compared bit for bit: another test may force another SIMD level meanwhile.
            let diff = dx.iter().zip(&dx_only).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
            assert!(diff < 1e-6, "dx does not depend on dγ, dβ being asked for: max |Δ| {diff}");
        }
    }

    #[test]
    fn rows_reduced_in_blocks_have_the_bits_of_one_row_at_a_time() {
        let mut rng = Rng::new(34);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        // 37 rows: two full blocks and a partial one; widths below, at and off 16.
        for d in [5, 24, 64] {
            let rows = 37;
            let x: Vec<f32> = (0..rows * d).map(|_| rng.normal() as f32 * 3.0 + 1.0).collect();
            let (mut xh, mut rstd) = (x.clone(), vec![0.0f32; rows]);
            let (gamma, beta): (Vec<f32>, Vec<f32>) =
                (0..d).map(|_| (rng.normal() as f32, rng.normal() as f32)).unzip();
            let mut y = vec![0.0f32; rows * d];
            normalize(&mut xh, d, &mut rstd, Some(&gamma), Some(&beta), &mut y);
            // The affine folded into the row pass: the bits of the separate pass over x̂.
            let mut y_sep = vec![0.0f32; rows * d];
            affine(&xh, d, Some(&gamma), Some(&beta), &mut y_sep);
            assert_eq!(bits(&y), bits(&y_sep), "y, d = {d}");
            let (mut xh_na, mut y_na) = (x.clone(), vec![0.0f32; rows * d]);
            normalize(&mut xh_na, d, &mut vec![0.0f32; rows], None, None, &mut y_na);
            assert_eq!(bits(&xh_na), bits(&xh), "x̂ without affine, d = {d}");
            assert_eq!(bits(&y_na), bits(&xh), "y without affine is x̂, d = {d}");
            // One row at a time with the row reductions [`sum16`] and [`dot16`].
            let (mut xh1, mut rstd1) = (x.clone(), vec![0.0f32; rows]);
            let inv_d = 1.0 / d as f32;
            for (row, r) in xh1.chunks_exact_mut(d).zip(rstd1.iter_mut()) {
                let mean = sum16(row) * inv_d;
                row.iter_mut().for_each(|v| *v -= mean);
                *r = 1.0 / (dot16(row, row) * inv_d + EPS as f32).sqrt();
                row.iter_mut().for_each(|v| *v *= *r);
            }
            assert_eq!(bits(&xh), bits(&xh1), "x̂, d = {d}");
            assert_eq!(bits(&rstd), bits(&rstd1), "rstd, d = {d}");
            let dy: Vec<f32> = (0..rows * d).map(|_| rng.normal() as f32).collect();
            let gamma: Vec<f32> = (0..d).map(|_| rng.normal() as f32).collect();
            let (mut dx, mut dg, mut db) = (dy.clone(), vec![0.0f32; d], vec![0.0f32; d]);
            backward(&xh, &rstd, d, Some(&gamma), &mut dx, Some(&mut dg), Some(&mut db));
            let (mut dx1, mut dg1, mut db1) = (dy.clone(), vec![0.0f32; d], vec![0.0f32; d]);
            for ((g, xr), r) in dx1.chunks_exact_mut(d).zip(xh.chunks_exact(d)).zip(rstd.chunks_exact(1)) {
                backward(xr, r, d, Some(&gamma), g, Some(&mut dg1), Some(&mut db1));
            }
            assert_eq!(bits(&dx), bits(&dx1), "dx, d = {d}");
            assert_eq!(bits(&dg), bits(&dg1), "dγ, d = {d}");
            assert_eq!(bits(&db), bits(&db1), "dβ, d = {d}");
        }
    }

    #[test]
    fn simd_levels_agree_with_scalar() {
        use crate::simd::{Level, force_level};
        let mut rng = Rng::new(8);
        let d = 128;
        let x: Vec<f32> = (0..d * 33).map(|_| rng.normal() as f32).collect();
        let mut outs = Vec::new();
        for level in [Level::Scalar, Level::Avx2, Level::Avx512] {
            force_level(Some(level));
            let mut xh = x.clone();
            let (mut rstd, mut y) = (vec![0.0f32; 33], vec![0.0f32; d * 33]);
            normalize(&mut xh, d, &mut rstd, None, None, &mut y);
            outs.push(xh);
        }
        force_level(None);
        for o in &outs[1..] {
            let diff = o.iter().zip(&outs[0]).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
            eprintln!("layer norm SIMD vs scalar: max |Δ| = {diff:e}");
            assert!(diff < 1e-5);
        }
    }
}
