//! The bf16 products on every kernel this CPU can run ([`force_path`]), each in turn: the
//! gradients within mixed precision's stated tolerance of the f64 engine's, and bit-identical
//! results at 1, 2 and 3 threads. Its own test binary, since forcing a kernel is process-wide.

mod common;

use common::{gradient_errors, random_graph, step, to_f32};
use trackgnn_engine::matmul_bf16::{Bf16Path, best_path, chosen_path, force_path};
use trackgnn_engine::{ForwardCache, InteractionGnn, ModelConfig, Precision, UpdateOrder};
use trackgnn_trackml::rng::Rng;

/// Every bf16 kernel this CPU runs, the rule's choice first; the others said skipped.
fn runnable_paths() -> Vec<Bf16Path> {
    let (chosen, why) = chosen_path();
    println!("this CPU's bf16 kernel: {} ({why})", chosen.name());
    let mut paths = vec![chosen];
    for p in [Bf16Path::Amx, Bf16Path::Avx512Bf16, Bf16Path::F32Fma, Bf16Path::Portable] {
        match p.unavailable() {
            Some(why) => eprintln!("skipped: {p:?} ({why})"),
            None if p != chosen => paths.push(p),
            None => {}
        }
    }
    paths
}

#[test]
fn every_bf16_kernel_is_within_tolerance_of_f64_and_bit_identical_at_any_thread_count() {
    for path in runnable_paths() {
        force_path(Some(path)).unwrap();
        assert_eq!(best_path(), path);
        bf16_gradients_are_within_tolerance_of_the_f64_reference(path);
        results_are_bit_identical_at_1_2_and_3_threads_in_both_precisions_and_orders(path);
    }
    force_path(None).unwrap();
}

/// Mixed precision's tolerance on `path`.
fn bf16_gradients_are_within_tolerance_of_the_f64_reference(path: Bf16Path) {
    // The stated tolerance of mixed precision: every tensor's gradient within 5% (relative
    // L2) of the f64 one with smooth activations, 15% with ReLU (rounding moves units across
    // the kink); f32 within 1e-4. bf16 is checked with the MLPs' activations saved in f32 and
    // in bf16 (its default): saving them rounded may cost at most 1.5× the error of the
    // products' rounding alone. Printed per tensor for the record (`--nocapture`).
    for (name, cfg, tol) in [
        ("default (SiLU)", ModelConfig { hidden: 32, iterations: 3, ..ModelConfig::default() }, 5e-2),
        ("bench-spec (ReLU)", ModelConfig { hidden: 32, ..ModelConfig::bench_spec() }, 1.5e-1),
        ("acorn (SiLU)", ModelConfig { hidden: 32, iterations: 3, ..ModelConfig::acorn() }, 5e-2),
    ] {
        let f32_err = gradient_errors(cfg.clone(), Precision::F32, Precision::F32, 31);
        let bf16_err = gradient_errors(cfg.clone(), Precision::Bf16, Precision::F32, 31);
        let saved_err = gradient_errors(cfg.clone(), Precision::Bf16, Precision::Bf16, 31);
        println!(
            "{name} on {}: relative gradient error per tensor against f64: f32; bf16 with activations saved in f32, in bf16",
            path.name()
        );
        for (((t, e32), (_, e16)), (_, s16)) in f32_err.iter().zip(&bf16_err).zip(&saved_err) {
            println!("  {t:<36} f32 {e32:9.2e}  bf16 {e16:9.2e}  bf16+saved {s16:9.2e}");
        }
        let max = |v: &[(String, f64)]| v.iter().map(|x| x.1).fold(0.0, f64::max);
        let (m32, m16, s16) = (max(&f32_err), max(&bf16_err), max(&saved_err));
        println!("  max over tensors: f32 {m32:.2e}  bf16 {m16:.2e}  bf16+saved {s16:.2e}");
        assert!(m32 < 1e-4, "{name}: f32 gradient off by {m32:e}");
        for (what, m) in [("bf16", m16), ("bf16 with bf16 activations", s16)] {
            assert!(m < tol, "{name} on {path:?}: {what} gradient off by {m:e} (tolerance {tol:e})");
            assert!(m > 10.0 * m32, "{name}: {what} ({m:e}) should be visibly coarser than f32 ({m32:e})");
        }
        assert!(s16 < 1.5 * m16, "{name}: bf16 activations cost {s16:e} against {m16:e}");
        assert_ne!(bf16_err, saved_err, "{name}: the activations were not saved in bf16");
    }
}

/// The same bits at 1, 2 and 3 threads, f32 and `path`'s bf16, both update orders.
fn results_are_bit_identical_at_1_2_and_3_threads_in_both_precisions_and_orders(path: Bf16Path) {
    let (g, y, w) = random_graph(3000, 30_000, 3, 0, 4);
    let (g32, w32) = to_f32(&g, &w);
    for (precision, update_order) in [
        (Precision::F32, UpdateOrder::EdgeFirst),
        (Precision::Bf16, UpdateOrder::EdgeFirst),
        (Precision::F32, UpdateOrder::NodeFirst),
        (Precision::Bf16, UpdateOrder::NodeFirst),
    ] {
        let mut base = InteractionGnn::<f32>::new(
            ModelConfig { hidden: 16, iterations: 2, update_order, ..ModelConfig::default() },
            3,
            0,
            &mut Rng::new(1),
        );
        base.set_precision(precision);
        let mut results = Vec::new();
        for threads in [1, 2, 3] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let mut model = base.clone();
            let (logits, grad) = pool.install(|| {
                let mut cache = ForwardCache::default();
                step(&mut model, &g32, &y, &w32, &mut cache);
                (cache.logits.clone(), model.params.grad.clone())
            });
            results.push((logits, grad));
        }
        for r in &results[1..] {
            assert!(
                r.0.iter().zip(&results[0].0).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{precision} on {path:?}, {update_order}: logits differ"
            );
            assert!(
                r.1.iter().zip(&results[0].1).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{precision} on {path:?}, {update_order}: gradients differ"
            );
        }
    }
}
