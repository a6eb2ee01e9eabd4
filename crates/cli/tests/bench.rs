//! `bench memory` on tiny graphs: rows per mode and size, fits, and the memory plot.

use trackgnn_plot::testing::{check_files, no_temporaries};

use crate::util::{json, ok, trackgnn};

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
