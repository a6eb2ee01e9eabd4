//! `trackgnn bench allreduce`: times the in-place mean all-reduce of the gradient buffer for a
//! range of sizes under `mpirun -np N`, and fits the ring model's latency and bandwidth
//! ([`fit_allreduce`]). `--out FILE` writes the points and the fit for
//! `trackgnn scaling --simulate --interconnect FILE`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Result, bail};
use serde_json::{Value, json};
use trackgnn_train::dist::Comm;
use trackgnn_train::scaling::allreduce::fit_allreduce;

use crate::util::{print_json, write_atomic};
use clap::Args;

/// `trackgnn bench allreduce`.
#[derive(Debug, Args)]
pub struct BenchAllreduceArgs {
    /// Smallest buffer, bytes (sizes grow by × 4 from it).
    #[arg(long, default_value_t = 4096)]
    pub min_bytes: usize,
    /// Largest buffer, bytes.
    #[arg(long, default_value_t = 64 << 20)]
    pub max_bytes: usize,
    /// Timed all-reduces per size (fewer for large buffers: at most 1 GiB moved per size, at
    /// least 5).
    #[arg(long, default_value_t = 50)]
    pub iters: usize,
    /// Write the points and the fit as JSON (the input of `scaling --simulate --interconnect`).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub json: crate::cli::JsonArg,
}

/// Buffer sizes in bytes: `min`, 4·min, … up to `max` (multiples of 4 bytes, one f32 each).
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
fn sizes(min: usize, max: usize) -> Vec<usize> {
    let mut v = Vec::new();
    let mut b = min.max(4) / 4 * 4;
    while b <= max {
        v.push(b);
        b *= 4;
    }
    v
}

/// Timed calls at `bytes`: `iters`, but at most 1 GiB moved and at least 5 calls.
fn iterations(bytes: usize, iters: usize) -> usize {
    ((1usize << 30) / bytes.max(1)).min(iters).max(5)
}

/// One point per size: every call is timed between barriers; the median over calls of the
/// slowest rank's time, and the fastest call.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
fn measure(comm: &mut dyn Comm, sizes: &[usize], iters: usize) -> Result<Vec<Value>> {
    let mut points = Vec::new();
    for &bytes in sizes {
        let mut buf = vec![1.0f32; bytes / 4];
        let n = iterations(bytes, iters);
        for _ in 0..2 {
            comm.allreduce_mean(&mut buf)?;
        }
        let mut times = Vec::with_capacity(n);
        for _ in 0..n {
            comm.barrier()?;
            let t = Instant::now();
            comm.allreduce_mean(&mut buf)?;
            times.push(t.elapsed().as_secs_f64());
        }
        // The slowest rank's time of every call.
        let all = comm.allgather_f64(&times)?;
        let mut slowest: Vec<f64> =
            (0..n).map(|i| all.iter().skip(i).step_by(n).copied().fold(0.0, f64::max)).collect();
        slowest.sort_by(f64::total_cmp);
        let median = slowest[n / 2];
        points.push(json!({
            "bytes": bytes, "iterations": n, "seconds_median": median, "seconds_min": slowest[0],
            "algorithm_bandwidth_bytes_per_second": bytes as f64 / median,
        }));
    }
    Ok(points)
}

/// `trackgnn bench allreduce`.
pub fn run(a: BenchAllreduceArgs) -> Result<ExitCode> {
    if a.min_bytes < 4 || a.max_bytes < a.min_bytes {
        bail!("--min-bytes must be at least 4 and at most --max-bytes");
    }
    if a.iters == 0 {
        bail!("--iters must be at least 1");
    }
    #[cfg(not(feature = "mpi"))]
    {
        bail!(
            "bench allreduce measures MPI: build with `cargo build --release -p trackgnn --features mpi` and run it \
             as `mpirun -np 2 trackgnn bench allreduce` (this trackgnn was built without MPI)"
        );
    }
    #[cfg(feature = "mpi")]
    {
        let mut comm = trackgnn_train::dist::MpiComm::init(trackgnn_train::dist::MAX_CHUNK)?;
        if comm.size() < 2 {
            bail!("bench allreduce needs at least 2 ranks: run it as `mpirun -np 2 trackgnn bench allreduce`");
        }
        let points = measure(&mut comm, &sizes(a.min_bytes, a.max_bytes), a.iters)?;
        if comm.is_root() {
            report(&a, comm.size(), &points)?;
        }
        comm.barrier()?;
        Ok(ExitCode::SUCCESS)
    }
}

/// Fits, prints and writes the result (rank 0).
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
fn report(a: &BenchAllreduceArgs, ranks: usize, points: &[Value]) -> Result<()> {
    let xy: Vec<(f64, f64)> =
        points.iter().filter_map(|p| Some((p["bytes"].as_f64()?, p["seconds_median"].as_f64()?))).collect();
    let fit = fit_allreduce(ranks, &xy);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_owned()).unwrap_or_default();
    let out = json!({
        "ranks": ranks, "host": host, "model": "ring: T = 2(N-1)·latency + 2(N-1)/N · bytes / bandwidth",
        "points": points, "fit": fit,
    });
    if let Some(path) = &a.out {
        write_atomic(path, serde_json::to_string_pretty(&out)?.as_bytes())?;
    }
    if a.json.json {
        print_json(&out);
        return Ok(());
    }
    println!("in-place mean all-reduce of f32 buffers, {ranks} ranks on {host} (median of the slowest rank per call)");
    println!("| Bytes | Calls | Median µs | Min µs | Algorithm GB/s | Model µs |");
    println!("|---|---|---|---|---|---|");
    for p in points {
        let b = p["bytes"].as_f64().unwrap_or(0.0);
        let model = fit.map_or(f64::NAN, |f| f.seconds(ranks, b) * 1e6);
        println!(
            "| {} | {} | {:.1} | {:.1} | {:.3} | {:.1} |",
            p["bytes"],
            p["iterations"],
            p["seconds_median"].as_f64().unwrap_or(f64::NAN) * 1e6,
            p["seconds_min"].as_f64().unwrap_or(f64::NAN) * 1e6,
            p["algorithm_bandwidth_bytes_per_second"].as_f64().unwrap_or(f64::NAN) / 1e9,
            model
        );
    }
    match fit {
        Some(f) => println!(
            "ring-model fit: latency {:.2} µs per message, bandwidth {:.3} GB/s{}",
            f.latency_seconds * 1e6,
            f.bandwidth_bytes_per_second / 1e9,
            a.out.as_ref().map_or(String::new(), |p| format!(
                "; use it with `trackgnn scaling --simulate --interconnect {}`",
                p.display()
            ))
        ),
        None => println!("no fit: the times do not grow with the size"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use trackgnn_train::dist::SingleProcess;

    use super::*;

    #[test]
    fn sizes_and_iterations() {
        assert_eq!(sizes(4096, 64 << 20), [4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20]);
        assert_eq!(sizes(6, 100), [4, 16, 64], "rounded down to whole f32s");
        assert_eq!(iterations(4096, 50), 50);
        assert_eq!(iterations(64 << 20, 50), 16);
        assert_eq!(iterations(1 << 30, 50), 5);
    }

    #[test]
    fn one_process_measures_a_point_per_size() {
        let p = measure(&mut SingleProcess, &[16, 64], 3).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!((p[1]["bytes"].as_u64(), p[1]["iterations"].as_u64()), (Some(64), Some(5)));
        assert!(p[0]["seconds_median"].as_f64().unwrap() >= 0.0);
    }
}
