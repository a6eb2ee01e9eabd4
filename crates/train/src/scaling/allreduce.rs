//! The cost of the gradient all-reduce: the ring model and its fit to measured times.
//!
//! A ring all-reduce of `B` bytes over `N` ranks is a reduce-scatter then an all-gather, each
//! `N − 1` steps that move `B / N` bytes per rank (Patarasuk & Yuan 2009; Thakur, Rabenseifner
//! & Gropp 2005, the algorithm NCCL and MPI libraries use for large buffers):
//!
//! `T(N, B) = 2(N − 1)·α + 2(N − 1)/N · B / β`
//!
//! with α the per-message latency \[s\] and β the link bandwidth [bytes/s]. One rank needs no
//! communication: `T(1, B) = 0`. [`mod@bench`] measures the times on a communicator and fits them.

use serde::{Deserialize, Serialize};

pub mod bench;

/// Latency and bandwidth of the interconnect in the ring all-reduce model.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct AllreduceCost {
    /// Per-message latency α, seconds.
    pub latency_seconds: f64,
    /// Link bandwidth β, bytes per second.
    pub bandwidth_bytes_per_second: f64,
}

impl AllreduceCost {
    /// Latency α \[s\] and bandwidth β [bytes/s].
    pub fn new(latency_seconds: f64, bandwidth_bytes_per_second: f64) -> AllreduceCost {
        AllreduceCost { latency_seconds, bandwidth_bytes_per_second }
    }

    /// Free communication (for tests and bounds).
    #[cfg(test)]
    pub fn zero() -> AllreduceCost {
        AllreduceCost { latency_seconds: 0.0, bandwidth_bytes_per_second: f64::INFINITY }
    }

    /// Seconds of one all-reduce of `bytes` over `ranks` ranks:
    /// `2(N − 1)·α + 2(N − 1)/N · bytes / β`.
    pub fn seconds(&self, ranks: usize, bytes: f64) -> f64 {
        if ranks <= 1 {
            return 0.0;
        }
        let n = ranks as f64;
        2.0 * (n - 1.0) * self.latency_seconds + 2.0 * (n - 1.0) / n * bytes / self.bandwidth_bytes_per_second
    }

    /// The same interconnect with latency × `lat` and bandwidth × `bw` (sensitivity studies).
    pub fn scaled(&self, lat: f64, bw: f64) -> AllreduceCost {
        AllreduceCost {
            latency_seconds: self.latency_seconds * lat,
            bandwidth_bytes_per_second: self.bandwidth_bytes_per_second * bw,
        }
    }
}

/// Fits the ring model to all-reduce times measured on `ranks` ranks: `(bytes, seconds)`
/// points. A straight line `t = a + b·bytes` is fitted by least squares with weights 1/t², so
/// every size counts by its relative error (plain least squares would let the largest buffers
/// set the intercept); then α = a / (2(N − 1)) and β = 2(N − 1)/N / b. A negative intercept is
/// clamped to 0. `None` with fewer than two distinct sizes, one rank, or a non-positive slope.
pub fn fit_allreduce(ranks: usize, points: &[(f64, f64)]) -> Option<AllreduceCost> {
    if ranks < 2 {
        return None;
    }
    let pts: Vec<&(f64, f64)> = points.iter().filter(|p| p.1 > 0.0 && p.0.is_finite()).collect();
    let w: Vec<f64> = pts.iter().map(|p| 1.0 / (p.1 * p.1)).collect();
    let sw: f64 = w.iter().sum();
    if pts.len() < 2 || sw <= 0.0 {
        return None;
    }
    let mx = pts.iter().zip(&w).map(|(p, w)| w * p.0).sum::<f64>() / sw;
    let my = pts.iter().zip(&w).map(|(p, w)| w * p.1).sum::<f64>() / sw;
    let sxx: f64 = pts.iter().zip(&w).map(|(p, w)| w * (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().zip(&w).map(|(p, w)| w * (p.0 - mx) * (p.1 - my)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    let intercept = (my - slope * mx).max(0.0);
    if slope <= 0.0 {
        return None;
    }
    let n = ranks as f64;
    Some(AllreduceCost {
        latency_seconds: intercept / (2.0 * (n - 1.0)),
        bandwidth_bytes_per_second: 2.0 * (n - 1.0) / n / slope,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_model_on_known_inputs() {
        // 2 µs, 100 Gb/s = 12.5 GB/s.
        let c = AllreduceCost::new(2e-6, 12.5e9);
        assert_eq!(c.bandwidth_bytes_per_second, 12.5e9);
        assert_eq!(c.seconds(1, 1e9), 0.0, "one rank: no communication");
        // N = 2: 2·2 µs + 1 · 1.25e9 B / 12.5e9 B/s = 4 µs + 0.1 s.
        assert!((c.seconds(2, 1.25e9) - (4e-6 + 0.1)).abs() < 1e-12);
        // N = 8: 14 latencies + 1.75 × 1 MB / 12.5 GB/s.
        let t = c.seconds(8, 1e6);
        assert!((t - (14.0 * 2e-6 + 1.75 * 1e6 / 12.5e9)).abs() < 1e-15, "{t}");
        // The bandwidth term tends to 2·B/β as N grows.
        let big = c.seconds(1_000_000, 1e9) - 2.0 * 999_999.0 * 2e-6;
        assert!((big / (2.0 * 1e9 / 12.5e9) - 1.0).abs() < 1e-5);
        assert_eq!(AllreduceCost::zero().seconds(64, 1e9), 0.0);
        let s = c.scaled(10.0, 0.1);
        assert!((s.latency_seconds - 2e-5).abs() < 1e-18 && (s.bandwidth_bytes_per_second - 1.25e9).abs() < 1e-3);
    }

    #[test]
    fn fit_recovers_the_parameters_it_was_made_with() {
        for ranks in [2, 3, 8] {
            let truth = AllreduceCost { latency_seconds: 7e-6, bandwidth_bytes_per_second: 3e9 };
            let pts: Vec<(f64, f64)> = (0..9)
                .map(|k| {
                    let b = 1024.0 * 4f64.powi(k);
                    (b, truth.seconds(ranks, b))
                })
                .collect();
            let f = fit_allreduce(ranks, &pts).unwrap();
            assert!((f.latency_seconds / truth.latency_seconds - 1.0).abs() < 1e-9, "{ranks}: {f:?}");
            assert!((f.bandwidth_bytes_per_second / truth.bandwidth_bytes_per_second - 1.0).abs() < 1e-9);
        }
        // Noise of ±10% alternating: the latency stays within 25%, the bandwidth within 15%.
        let truth = AllreduceCost { latency_seconds: 5e-6, bandwidth_bytes_per_second: 5e9 };
        let pts: Vec<(f64, f64)> = (0..9)
            .map(|k| {
                let b = 1024.0 * 4f64.powi(k);
                (b, truth.seconds(2, b) * if k % 2 == 0 { 1.1 } else { 0.9 })
            })
            .collect();
        let f = fit_allreduce(2, &pts).unwrap();
        assert!((f.latency_seconds / 5e-6 - 1.0).abs() < 0.25, "{f:?}");
        assert!((f.bandwidth_bytes_per_second / 5e9 - 1.0).abs() < 0.15, "{f:?}");
    }

    #[test]
    fn fit_refuses_what_it_cannot_fit() {
        assert_eq!(fit_allreduce(1, &[(1.0, 1.0), (2.0, 2.0)]), None, "one rank");
        assert_eq!(fit_allreduce(2, &[(1.0, 1.0)]), None, "one point");
        assert_eq!(fit_allreduce(2, &[(1.0, 1.0), (1.0, 2.0)]), None, "one size");
        assert_eq!(fit_allreduce(2, &[(1.0, 2.0), (2.0, 1.0)]), None, "time falls with size");
        // A negative intercept is clamped to zero latency.
        let f = fit_allreduce(2, &[(1000.0, 0.5e-6), (2000.0, 1.5e-6)]).unwrap();
        assert_eq!(f.latency_seconds, 0.0);
    }
}
