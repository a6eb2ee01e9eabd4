//! The bytes a step moves through device memory, counted from each kernel launch's and each
//! matrix product's arguments: the "bytes moved" that `bench engine --device` sets beside the
//! device's copy bandwidth (how close a step is to the memory's limit).
//!
//! The rule, the CPU engine's ([`trackgnn_engine::traffic`]): every array a kernel reads or
//! writes counts once at its size (a row read twice by one warp is cached, not counted twice);
//! a gathered row (`ga[src[e]]`, an aggregation's node gradient per edge) counts once per edge
//! that gathers it, so gathers are a generous bound; a product counts its operands once and its
//! result once (twice when it accumulates), and a bf16 product also its operands' rounding into
//! packed copies (read f32, write bf16).

use crate::backend::{Arg, Gemm};
use crate::kernels::KernelSignature;

/// Rows per partial of the column sums (the kernels' `COLUMN_CHUNK`).
const COLUMN_CHUNK: u64 = crate::backward::COLUMN_CHUNK as u64;
/// Digits of the AUC's radix sort.
const RADIX: u64 = crate::loss::RADIX as u64;

/// Tiles of the loss kernels' reductions over `n` edges.
fn tiles(n: u64) -> u64 {
    n.div_ceil(crate::loss::TILE as u64)
}

/// The bytes one launch of `kernel` with `args` moves, on a graph of `edges` edges (the CSR
/// kernels read every edge of a grouping); `None` for a kernel this table does not know.
pub fn kernel_bytes(kernel: &KernelSignature, args: &[Arg], edges: usize) -> Option<u64> {
    let at = |name: &str| kernel.names.iter().position(|&n| n == name).and_then(|i| args.get(i));
    let int = |name: &str| match at(name) {
        Some(Arg::I32(v)) => u64::try_from(*v).unwrap_or(0),
        Some(Arg::U32(v)) => u64::from(*v),
        _ => 0,
    };
    let set = |name: &str| matches!(at(name), Some(Arg::Ptr(p)) if *p != 0);
    let saved = |flag: &str| if int(flag) != 0 { 2 } else { 4 };
    // The aggregations' kernels: the kinds (the kernels' `AGG_*`) in `kinds`, 4 bits each.
    let aggregations = || -> Vec<u64> { (0..int("count").min(8)).map(|k| (int("kinds") >> (4 * k)) & 15).collect() };
    let e = edges as u64;
    let bytes = match kernel.name {
        "mlp_layer_post" => {
            let (rd, r, split) = (int("rows") * int("d"), int("rows"), int("split"));
            let z_read = if split == 2 { 0 } else { 4 * rd };
            let gathers = if split != 0 { 8 * rd + 8 * r } else { 0 };
            let kept = if set("saved16") { 2 * rd } else { 4 * rd };
            let residual = if set("residual") { 4 * rd } else { 0 };
            let rstd = if int("norm") != 0 { 4 * r } else { 0 };
            z_read + gathers + kept + residual + 4 * rd + rstd
        }
        "aggregate_forward" => {
            let (n, h, count, kinds) = (int("n"), int("h"), int("count"), aggregations());
            // The edge rows once for every kind (twice with std), each node's output columns,
            // max's arg-max and std's μ and σ.
            let (max, std) = (kinds.contains(&2), kinds.contains(&3));
            let passes = if std { 2 } else { 1 };
            passes * 4 * e * h
                + 4 * e
                + 4 * n
                + count * 4 * n * h
                + u64::from(max) * 4 * n * h
                + u64::from(std) * 8 * n * h
        }
        "copy_columns" => 8 * int("rows") * int("d"),
        "to_bf16" => 6 * int("rows") * int("cols"),
        "round_and_pack_bf16" => 10 * int("n"),
        "unpack_bf16" => 6 * int("n"),
        "layer_backward" => {
            let (rd, r) = (int("rows") * int("d"), int("rows"));
            8 * rd + saved("pre_bf16") * rd + if int("norm") != 0 { 4 * r } else { 0 }
        }
        "recompute_act" => (4 + saved("pre_bf16")) * int("rows") * int("d"),
        "column_partials" => {
            let (rows, d) = (int("rows"), int("d"));
            let operands = if set("b") { 8 } else { 4 };
            operands * rows * d + 4 * rows.div_ceil(COLUMN_CHUNK) * d
        }
        "norm_param_partials" => {
            let (rows, d) = (int("rows"), int("d"));
            (4 + saved("pre_bf16")) * rows * d + 8 * rows.div_ceil(COLUMN_CHUNK) * d
        }
        "column_total" => 4 * int("chunks") * int("d") + 8 * int("d"),
        "csr_pull" => 4 * e * int("d") + 4 * e + 4 * int("n") + 4 * int("n") * int("d"),
        "aggregate_backward" => {
            let (e, h, count) = (int("e"), int("h"), int("count"));
            let kinds = aggregations();
            // dx read and written, each edge's node, the node gradient rows it gathers, and
            // what max (the arg-max) and std (x, μ, σ) read per edge.
            let max = if kinds.contains(&2) { 4 * e * h } else { 0 };
            let std = if kinds.contains(&3) { 12 * e * h } else { 0 };
            8 * e * h + 4 * e + 4 * count * e * h + max + std
        }
        // θ, m, v read and written, g read (AMSGrad's max read and written too).
        "adamw_update" => (28 + if set("vmax") { 8 } else { 0 }) * int("n"),
        "node_state_grad" => {
            let rh = int("rows") * int("h");
            8 * rh + if int("residual") != 0 { 4 * rh } else { 0 }
        }
        // The loss and the validation figures (loss.rs), n edges in tiles of TILE.
        "bce_terms" => (13 + if set("dx") { 4 } else { 0 }) * int("n"),
        "mse_terms" => (16 + if set("dp") { 4 } else { 0 }) * int("n"),
        "tile_sums" => 4 * int("n") + 8 * tiles(int("n")),
        "edge_counts" => 6 * int("n") + 20 * tiles(int("n")),
        "auc_keys" => 10 * int("n"),
        "radix_counts" => 4 * int("n") + 4 * RADIX * tiles(int("n")),
        // Read twice (the chunk sums, then the prefixes), written once.
        "exclusive_scan" => 12 * int("m"),
        "radix_scatter" => 10 * int("n") + 4 * RADIX * tiles(int("n")),
        "tile_negatives" => int("n") + 4 * tiles(int("n")),
        "auc_partials" => 5 * int("n") + 12 * tiles(int("n")),
        _ => return None,
    };
    Some(bytes)
}

/// The bytes one matrix product moves: its operands once (with their rounding into packed
/// copies in bf16), its result written (read too when it accumulates).
pub fn gemm_bytes(g: &Gemm) -> u64 {
    if g.is_empty() {
        return 0;
    }
    let ((ar, ac), (br, bc)) = g.operand_shapes();
    let operands = (ar * ac + br * bc) as u64;
    let result = (g.m * g.n) as u64 * if g.beta == 0.0 { 4 } else { 8 };
    // bf16: rounded (read 4, write 2), then read packed (2).
    result + operands * if g.bf16 { 8 } else { 4 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::KERNELS;
    use crate::kernels::ParamKind;

    #[test]
    fn every_kernel_has_a_byte_count() {
        for k in KERNELS {
            let args: Vec<Arg> = k
                .kinds
                .iter()
                .map(|kind| match kind {
                    ParamKind::Ptr => Arg::Ptr(1 << 20),
                    ParamKind::I32 => Arg::I32(64),
                    ParamKind::U32 => Arg::U32(64),
                    ParamKind::F32 => Arg::F32(1.0),
                })
                .collect();
            let b = kernel_bytes(k, &args, 1000).unwrap_or_else(|| panic!("{}: no byte count", k.name));
            assert!(b > 0, "{}", k.name);
        }
    }

    #[test]
    fn a_layer_epilogue_counts_its_arrays() {
        let k = &KERNELS[crate::kernels::index_of("mlp_layer_post").unwrap()];
        let mut args: Vec<Arg> = k.kinds.iter().map(|_| Arg::Ptr(0)).collect();
        let put = |args: &mut Vec<Arg>, name: &str, a: Arg| args[k.names.iter().position(|&n| n == name).unwrap()] = a;
        for (name, v) in [("split", 0), ("norm", 1), ("act", 0), ("rows", 100), ("d", 8)] {
            put(&mut args, name, Arg::I32(v));
        }
        // z read, x̂ kept in z (f32), y written, 1/σ: 3 × 3200 + 400.
        assert_eq!(kernel_bytes(k, &args, 0), Some(3 * 3200 + 400));
        put(&mut args, "saved16", Arg::Ptr(1 << 20));
        assert_eq!(kernel_bytes(k, &args, 0), Some(2 * 3200 + 1600 + 400));
        put(&mut args, "split", Arg::I32(1));
        // Plus both gathered node rows per edge and the two indices.
        assert_eq!(kernel_bytes(k, &args, 0), Some(2 * 3200 + 1600 + 400 + 2 * 3200 + 800));
    }

    #[test]
    fn a_product_counts_operands_and_result() {
        let g = Gemm {
            m: 10,
            n: 4,
            k: 6,
            a: 1,
            lda: 6,
            trans_a: false,
            b: 2,
            ldb: 6,
            trans_b: true,
            c: 3,
            ldc: 4,
            alpha: 1.0,
            beta: 0.0,
            bf16: false,
        };
        assert_eq!(gemm_bytes(&g), 4 * (60 + 24) + 4 * 40);
        assert_eq!(gemm_bytes(&Gemm { beta: 1.0, bf16: true, ..g }), 8 * (60 + 24) + 8 * 40);
    }
}
