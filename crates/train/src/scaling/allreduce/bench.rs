//! `bench allreduce`: the in-place mean all-reduce of a gradient buffer timed over a range of
//! sizes on every rank of a communicator, and the ring model fitted to the times
//! ([`fit_allreduce`]). Its JSON is the input of `scaling --simulate --interconnect`.

use std::fmt;
use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;

use super::{AllreduceCost, fit_allreduce};
use crate::Result;
use crate::dist::Comm;

/// The model the fit follows, as recorded in the bench's JSON.
pub const RING_MODEL: &str = "ring: T = 2(N-1)·latency + 2(N-1)/N · bytes / bandwidth";

/// Buffer sizes in bytes: `min`, 4·min, … up to `max` (multiples of 4 bytes, one f32 each).
pub fn sizes(min: usize, max: usize) -> Vec<usize> {
    let mut v = Vec::new();
    let mut b = min.max(4) / 4 * 4;
    while b <= max {
        v.push(b);
        b *= 4;
    }
    v
}

/// Timed calls at `bytes`: `iters`, but at most 1 GiB moved and at least 5 calls.
pub fn iterations(bytes: usize, iters: usize) -> usize {
    ((1usize << 30) / bytes.max(1)).min(iters).max(5)
}

/// The times of one buffer size.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct AllreducePoint {
    /// Buffer size, bytes.
    pub bytes: usize,
    /// Timed calls.
    pub iterations: usize,
    /// Median over calls of the slowest rank's time, seconds.
    pub seconds_median: f64,
    /// The fastest call (slowest rank), seconds.
    pub seconds_min: f64,
    /// `bytes / seconds_median`, bytes per second.
    pub algorithm_bandwidth_bytes_per_second: f64,
}

/// One point per size: every call is timed between barriers; the median over calls of the
/// slowest rank's time, and the fastest call. Every rank calls it; every rank gets the points.
pub fn measure(comm: &mut dyn Comm, sizes: &[usize], iters: usize) -> Result<Vec<AllreducePoint>> {
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
        points.push(AllreducePoint {
            bytes,
            iterations: n,
            seconds_median: median,
            seconds_min: slowest[0],
            algorithm_bandwidth_bytes_per_second: bytes as f64 / median,
        });
    }
    Ok(points)
}

/// The bench's result: the points and the ring model fitted to them. Its JSON is the file
/// `scaling --simulate --interconnect` reads; its `Display` is the bench's text.
#[derive(Clone, Debug, Serialize)]
pub struct AllreduceBench {
    /// Ranks of the communicator.
    pub ranks: usize,
    /// Host name of rank 0.
    pub host: String,
    /// The model fitted ([`RING_MODEL`]).
    pub model: &'static str,
    /// One point per buffer size.
    pub points: Vec<AllreducePoint>,
    /// The fitted latency and bandwidth; `None` if the times do not grow with the size.
    pub fit: Option<AllreduceCost>,
    /// The file the result is written to, named in the text's last line.
    #[serde(skip)]
    pub written_to: Option<PathBuf>,
}

impl AllreduceBench {
    /// The result of `points` measured on `ranks` ranks of `host`, with its fit.
    pub fn new(ranks: usize, host: String, points: Vec<AllreducePoint>) -> AllreduceBench {
        let xy: Vec<(f64, f64)> = points.iter().map(|p| (p.bytes as f64, p.seconds_median)).collect();
        let fit = fit_allreduce(ranks, &xy);
        AllreduceBench { ranks, host, model: RING_MODEL, points, fit, written_to: None }
    }
}

impl fmt::Display for AllreduceBench {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (ranks, host) = (self.ranks, &self.host);
        writeln!(
            f,
            "in-place mean all-reduce of f32 buffers, {ranks} ranks on {host} (median of the slowest rank per call)"
        )?;
        writeln!(f, "| Bytes | Calls | Median µs | Min µs | Algorithm GB/s | Model µs |")?;
        writeln!(f, "|---|---|---|---|---|---|")?;
        for p in &self.points {
            let model = self.fit.map_or(f64::NAN, |c| c.seconds(ranks, p.bytes as f64) * 1e6);
            writeln!(
                f,
                "| {} | {} | {:.1} | {:.1} | {:.3} | {:.1} |",
                p.bytes,
                p.iterations,
                p.seconds_median * 1e6,
                p.seconds_min * 1e6,
                p.algorithm_bandwidth_bytes_per_second / 1e9,
                model
            )?;
        }
        match self.fit {
            Some(c) => writeln!(
                f,
                "ring-model fit: latency {:.2} µs per message, bandwidth {:.3} GB/s{}",
                c.latency_seconds * 1e6,
                c.bandwidth_bytes_per_second / 1e9,
                self.written_to.as_ref().map_or(String::new(), |p| format!(
                    "; use it with `trackgnn scaling --simulate --interconnect {}`",
                    p.display()
                ))
            ),
            None => writeln!(f, "no fit: the times do not grow with the size"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::SingleProcess;

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
        assert_eq!((p[1].bytes, p[1].iterations), (64, 5));
        assert!(p[0].seconds_median >= 0.0);
    }

    #[test]
    fn the_report_fits_the_points_and_prints_a_row_each() {
        let truth = AllreduceCost::new(5e-6, 2e9);
        let points: Vec<AllreducePoint> = sizes(1024, 1 << 20)
            .into_iter()
            .map(|b| {
                let t = truth.seconds(2, b as f64);
                AllreducePoint {
                    bytes: b,
                    iterations: 5,
                    seconds_median: t,
                    seconds_min: t,
                    algorithm_bandwidth_bytes_per_second: b as f64 / t,
                }
            })
            .collect();
        let mut bench = AllreduceBench::new(2, "h".into(), points);
        let fit = bench.fit.unwrap();
        assert!((fit.latency_seconds / 5e-6 - 1.0).abs() < 1e-6, "{fit:?}");
        bench.written_to = Some("ar.json".into());
        let text = bench.to_string();
        assert_eq!(text.lines().count(), 3 + bench.points.len() + 1, "{text}");
        assert!(text.contains("latency 5.00 µs") && text.ends_with("--interconnect ar.json`\n"), "{text}");
        let json = serde_json::to_value(&bench).unwrap();
        assert_eq!(json["points"][0]["bytes"], 1024);
        assert!(json.get("written_to").is_none());
    }
}
