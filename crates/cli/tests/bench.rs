//! `bench memory` on tiny graphs (rows per mode and size, fits, the memory plot) and `bench
//! engine` on one BENCH_SPEC step.

use trackgnn_plot::testing::{check_files, no_temporaries};

use crate::util::{fails, json, ok, trackgnn};

#[test]
fn bench_memory_measures_fits_and_plots_tiny_graphs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let args = [
        "bench",
        "memory",
        "--edges",
        "3000,6000",
        "--hidden",
        "8",
        "--iters",
        "1",
        "--modes",
        "none,per-iteration",
        "--threads",
        "1",
        "--plot",
        "plots",
        "--json",
    ];
    let out = json(&ok(trackgnn(d, &args)));
    let rows = out["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "{out}");
    for mode in ["none", "per-iteration"] {
        let of_mode: Vec<_> = rows.iter().filter(|r| r["checkpointing"] == mode).collect();
        assert_eq!(of_mode.len(), 2, "{mode}: {out}");
        let edges: Vec<u64> = of_mode.iter().map(|r| r["edges"].as_u64().unwrap()).collect();
        assert_eq!(edges, [3000, 6000], "{mode}");
        for r in &of_mode {
            assert_eq!(r["skipped"], false, "{r}");
            assert!(r["step_seconds"].as_f64().unwrap() > 0.0, "{r}");
            assert!(r["nodes"].as_u64().unwrap() > 0, "{r}");
            assert!(r["peak_rss_bytes"].as_u64().unwrap() > 0, "{r}");
        }
        // Twice the edges cost more memory, and the fit says how much per edge.
        let peak = |i: usize| of_mode[i]["counted_peak_bytes"].as_f64().unwrap();
        assert!(peak(1) > peak(0), "{mode}: {} then {}", peak(0), peak(1));
        let bpe = out["fits"][mode]["bytes_per_edge"].as_f64().unwrap();
        assert!(bpe > 0.0 && bpe.is_finite(), "{mode}: {bpe}");
    }
    // Checkpointing per iteration keeps fewer activations than keeping them all.
    let ratio = out["ratios_to_none"]["per-iteration"]["bytes_per_edge_ratio"].as_f64().unwrap();
    assert!(ratio > 0.0 && ratio < 1.0, "per-iteration / none bytes per edge = {ratio}");
    check_files(&d.join("plots/memory_vs_edges"));
    no_temporaries(&d.join("plots"));
}

/// `bench engine --only`: one BENCH_SPEC step, its figures in the JSON, and the text form.
#[test]
fn bench_engine_measures_one_step_and_its_gemm_only_replay() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
        let mut a = vec!["bench", "engine", "--only", "bench-spec", "--steps", "1", "--warmup", "0", "--threads", "1"];
        a.extend_from_slice(extra);
        a
    }
    let out = json(&ok(trackgnn(d, &args(&["--precision", "bf16", "--checkpoint", "per-iteration", "--json"]))));
    assert_eq!((out["variant"].as_str(), out["precision"].as_str()), (Some("benchspec"), Some("bf16")), "{out}");
    assert_eq!(out["checkpointing"], "per-iteration", "{out}");
    let counts = ["nodes", "edges", "steps"].map(|k| out[k].as_u64());
    assert_eq!(counts, [Some(20_000), Some(160_000), Some(1)], "{out}");
    let step = out["step_seconds_mean"].as_f64().unwrap();
    let gemm_only = out["gemm_only_seconds"].as_f64().unwrap();
    assert!(step > 0.0 && gemm_only > 0.0, "{out}");
    let ratio = out["step_over_gemm_only"].as_f64().unwrap();
    assert!((ratio - step / gemm_only).abs() <= 1e-9 * ratio, "{ratio} against {step} / {gemm_only}");
    let loss = out["loss_first"].as_f64().unwrap();
    assert!(loss.is_finite() && loss > 0.0, "{out}");
    // Every product ran on a named kernel path, and the paths add up to the step's GFLOP.
    let paths = out["gemm_paths"].as_array().unwrap();
    assert!(!paths.is_empty() && paths.iter().all(|p| !p["path"].as_str().unwrap().is_empty()), "{out}");
    let gflop: f64 = paths.iter().map(|p| p["gflop_per_step"].as_f64().unwrap()).sum();
    let total = out["gemm_gflop_per_step"].as_f64().unwrap();
    assert!((gflop - total).abs() <= 1e-6 * total, "{gflop} against {total}");
    assert!(out["peak_rss_bytes"].as_u64().unwrap() > 0, "{out}");
    // With checkpointing the traffic is not counted; the bandwidth is measured all the same.
    assert!(out["memory_bytes_per_step"].is_null() && out["memory_bound_seconds"].is_null(), "{out}");
    assert!(out["memory_bandwidth_bytes_per_second"].as_f64().unwrap() > 1e8, "{out}");

    // Without: the bytes per pass add up, and the bound is the bytes at the bandwidth.
    let out = json(&ok(trackgnn(d, &args(&["--json"]))));
    let passes = out["memory_passes"].as_array().unwrap();
    assert_eq!(passes.len(), 7, "{out}");
    let bytes: f64 = passes.iter().map(|p| p["bytes_per_step"].as_f64().unwrap()).sum();
    let total = out["memory_bytes_per_step"].as_f64().unwrap();
    // At least one E x H state in f32 read and written per iteration.
    assert!(total > 5.0 * 2.0 * 160_000.0 * 64.0 * 4.0 && (bytes - total).abs() <= 1e-9 * total, "{out}");
    let bandwidth = out["memory_bandwidth_bytes_per_second"].as_f64().unwrap();
    let bound = out["memory_bound_seconds"].as_f64().unwrap();
    assert!((bound - total / bandwidth).abs() <= 1e-9 * bound, "{out}");
    let remainder = out["remainder_seconds"].as_f64().unwrap();
    let step = out["step_seconds_mean"].as_f64().unwrap();
    assert!((remainder - (step - out["gemm_only_seconds"].as_f64().unwrap())).abs() <= 1e-9 * step, "{out}");

    let text = ok(trackgnn(d, &args(&[])));
    assert!(text.contains("f32") && text.contains("GEMM-only"), "{text}");
    assert!(text.contains("memory-bound remainder") && text.contains("aggregation"), "{text}");
    // A mode that does not parse is named.
    let bad = trackgnn(d, &args(&["--checkpoint", "sometimes"]));
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("sometimes"), "{}", String::from_utf8_lossy(&bad.stderr));
}

/// `bench engine --bf16-kernel`: the products run on the kernel asked for where the CPU has it,
/// and a kernel it lacks is refused with the reason, before anything runs.
#[test]
fn bench_engine_runs_the_bf16_kernel_asked_for_or_says_why_not() {
    let dir = tempfile::tempdir().unwrap();
    let base = ["bench", "engine", "--only", "bench-spec", "--steps", "1", "--warmup", "0", "--threads", "1"];
    for (kernel, name, lacks) in [
        ("f32-fma", "bf16 operands on f32 FMA (gemm crate)", ""),
        ("amx", "bf16 amx (tdpbf16ps)", "the CPU has no AMX-BF16"),
        ("avx512-bf16", "bf16 avx512-bf16 (vdpbf16ps)", "the CPU has no AVX512-BF16"),
    ] {
        let mut args = base.to_vec();
        args.extend(["--precision", "bf16", "--bf16-kernel", kernel, "--json"]);
        let out = trackgnn(dir.path(), &args);
        if out.status.success() {
            let out = json(&String::from_utf8_lossy(&out.stdout));
            let paths: Vec<&str> =
                out["gemm_paths"].as_array().unwrap().iter().map(|p| p["path"].as_str().unwrap()).collect();
            assert_eq!(paths, [name], "--bf16-kernel {kernel}: {out}");
        } else {
            let err = fails(out);
            assert!(!lacks.is_empty() && err.contains(&format!("--bf16-kernel {kernel}: ")), "{err}");
            eprintln!("skipped: --bf16-kernel {kernel} ({})", err.trim());
        }
    }
}
