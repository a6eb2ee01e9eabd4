//! Digitisation: the charge a particle deposits along its path through the sensor, drifted
//! (Lorentz angle in barrel sensors) and diffused onto the cell grid, thresholded, and the hit
//! placed at the charge-weighted centre of the cluster.
//!
//! Charge units: a cell's value is the charge it collects as a fraction of what a minimum-
//! ionising particle leaves crossing the whole charge-collection depth at normal incidence (so
//! a normally incident particle gives clusters summing to ≈ 1, and thresholds are fractions of
//! that). The depth is the sensor's thickness times `DigiConfig::depth_over_thickness`.

use trackgnn_trackml::geometry::Module;
use trackgnn_trackml::rng::Rng;

use crate::config::DigiConfig;
use crate::kinematics::V3;

/// A cell of a cluster: (ch0, ch1, charge).
pub type Cell = (u32, u32, f32);

/// The result of digitising one crossing.
#[derive(Clone, Debug, Default)]
pub struct Cluster {
    /// The cells above threshold.
    pub cells: Vec<Cell>,
    /// Measured local u \[mm\] (charge-weighted, Lorentz shift corrected).
    pub u: f64,
    /// Measured local v \[mm\].
    pub v: f64,
}

/// Longest path along the sensor we sample for one crossing \[mm\]; grazing tracks are cut here.
const MAX_SEGMENT_MM: f64 = 12.0;

/// Where a particle crosses a module, in the module's frame.
#[derive(Clone, Copy, Debug)]
pub struct LocalCrossing {
    /// Local u of the mid-plane crossing \[mm\].
    pub u: f64,
    /// Local v of the mid-plane crossing \[mm\].
    pub v: f64,
    /// Unit direction in local (u, v, w) components.
    pub dir: V3,
}

/// Digitises a crossing `at` (mid-plane point and local direction).
/// `barrel` selects the Lorentz drift (field along v, so drift along u; none in disks, where
/// the field is along the drift direction).
pub fn digitize(
    rng: &mut Rng,
    m: &Module,
    cfg: &DigiConfig,
    barrel: bool,
    at: LocalCrossing,
    scratch: &mut Vec<(u32, u32, f64)>,
) -> Cluster {
    let (u0, v0, d) = (at.u, at.v, at.dir);
    // The depth the charge comes from: the sensor, or the twice-as-deep path of TrackML's
    // end-caps (`DigiConfig::depth_over_thickness`).
    let t = m.thickness * cfg.depth_over_thickness;
    let dw = if d[2].abs() < 1e-3 { 1e-3f64.copysign(d[2]) } else { d[2] };
    let (mut tu, mut tv) = (d[0] / dw, d[1] / dw);
    // Cap the in-plane length for grazing tracks.
    let len = (tu * tu + tv * tv).sqrt() * t;
    if len > MAX_SEGMENT_MM {
        tu *= MAX_SEGMENT_MM / len;
        tv *= MAX_SEGMENT_MM / len;
    }
    let tan_l = if barrel { cfg.tan_lorentz } else { 0.0 };
    let span_cells = ((tu * t).abs() / m.pitch_u).max((tv * t).abs() / m.pitch_v);
    let n = ((span_cells * 4.0).ceil() as usize + 6).min(400);
    // Charge per unit of w: the path length through silicon relative to normal incidence.
    let path_factor = (1.0 + tu * tu + tv * tv).sqrt();
    let per_sample = path_factor / n as f64;
    scratch.clear();
    // The cell grid, hoisted out of the sample loop (`Module::cell_of` in closed form).
    let hu = m.max_hu.max(m.min_hu);
    let (inv_pu, inv_pv) = (1.0 / m.pitch_u, 1.0 / m.pitch_v);
    let (max_c0, max_c1) = ((m.cells_u() - 1) as f64, (m.cells_v() - 1) as f64);
    let cell_of = |u: f64, v: f64| {
        (((u + hu) * inv_pu).floor().clamp(0.0, max_c0) as u32, ((v + m.hv) * inv_pv).floor().clamp(0.0, max_c1) as u32)
    };
    for i in 0..n {
        let w = -0.5 * t + (i as f64 + 0.5) * t / n as f64;
        let drift = 0.5 * t - w; // distance to the readout side at w = +t/2
        // Diffusion as a two-point Gaussian quadrature per axis (±σ, weight ¼ each): the charge
        // cloud's spread without sampling noise, which would otherwise jitter the centroid.
        let sigma = cfg.diffusion_mm * (drift / t).sqrt();
        let u = u0 + tu * w + tan_l * drift;
        let v = v0 + tv * w;
        for (du, dv) in [(-sigma, -sigma), (-sigma, sigma), (sigma, -sigma), (sigma, sigma)] {
            let (c0, c1) = cell_of(u + du, v + dv);
            match scratch.iter_mut().find(|c| c.0 == c0 && c.1 == c1) {
                Some(c) => c.2 += 0.25 * per_sample,
                None => scratch.push((c0, c1, 0.25 * per_sample)),
            }
        }
    }
    // Ionisation fluctuates from cell to cell (uniform, mean 1).
    for c in scratch.iter_mut() {
        c.2 *= 1.0 + cfg.fluctuation * (2.0 * rng.uniform() - 1.0);
    }
    let mut cells: Vec<Cell> =
        scratch.iter().filter(|c| c.2 >= cfg.threshold).map(|&(a, b, q)| (a, b, q as f32)).collect();
    if cells.is_empty() {
        let best = scratch.iter().max_by(|a, b| a.2.total_cmp(&b.2)).expect("n ≥ 8 samples");
        cells.push((best.0, best.1, best.2 as f32));
    }
    cells.sort_unstable_by_key(|c| (c.1, c.0));
    let (mut su, mut sv, mut sq) = (0.0, 0.0, 0.0);
    for &(c0, c1, q) in &cells {
        let (cu, cv) = m.cell_center(c0, c1);
        let w = if cfg.binary { 1.0 } else { q as f64 };
        su += cu * w;
        sv += cv * w;
        sq += w;
    }
    // The Lorentz shift reconstruction subtracts: the mean drift (tan θ_L · t/2) unless the
    // configuration says otherwise (TrackML's barrels: `DigiConfig::lorentz_correction`).
    let correction = cfg.lorentz_correction.map_or(0.5 * t, |k| k * m.thickness);
    Cluster { cells, u: su / sq - tan_l * correction, v: sv / sq }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trackgnn_trackml::ids::ModuleId;

    fn pixel() -> Module {
        Module {
            id: ModuleId::new(8, 2, 1),
            center: [32.0, 0.0, 0.0],
            rot: [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]],
            thickness: 0.15,
            min_hu: 8.4,
            max_hu: 8.4,
            hv: 36.0,
            pitch_u: 0.05,
            pitch_v: 0.05625,
        }
    }

    #[test]
    fn inclined_tracks_make_long_clusters_and_precise_centres() {
        let m = pixel();
        let cfg = DigiConfig {
            tan_lorentz: 0.0,
            diffusion_mm: 0.003,
            threshold: 0.1,
            fluctuation: 0.1,
            binary: false,
            depth_over_thickness: 1.0,
            lorentz_correction: None,
        };
        let mut rng = Rng::new(4);
        let mut scratch = Vec::new();
        // Normal incidence: one or two cells.
        let c =
            digitize(&mut rng, &m, &cfg, true, LocalCrossing { u: 0.01, v: 0.02, dir: [0.0, 0.0, 1.0] }, &mut scratch);
        assert!(c.cells.len() <= 2, "{:?}", c.cells);
        // Along v at cot θ = 4 (η ≈ 2.1): the path covers 0.6 mm = 10–11 cells of 56 µm.
        let d = [0.0, 4.0 / 17f64.sqrt(), 1.0 / 17f64.sqrt()];
        let mut res = Vec::new();
        for _ in 0..200 {
            let (u0, v0) = (rng.range(-1.0, 1.0), rng.range(-1.0, 1.0));
            let c = digitize(&mut rng, &m, &cfg, true, LocalCrossing { u: u0, v: v0, dir: d }, &mut scratch);
            let mut rows: Vec<u32> = c.cells.iter().map(|c| c.1).collect();
            rows.dedup();
            assert!((10..=12).contains(&rows.len()), "{} rows", rows.len());
            res.push(c.v - v0);
        }
        let rms = (res.iter().map(|x| x * x).sum::<f64>() / res.len() as f64).sqrt();
        assert!(rms < 0.05625 / 12f64.sqrt(), "long clusters beat pitch/sqrt(12): {rms}");
    }

    #[test]
    fn twice_the_depth_doubles_the_cells_an_inclined_track_crosses() {
        let m = pixel();
        let mut rng = Rng::new(6);
        let mut scratch = Vec::new();
        // Along v at cot θ = 4: 0.6 mm of path over the sensor, 1.2 mm over twice its depth.
        let d = [0.0, 4.0 / 17f64.sqrt(), 1.0 / 17f64.sqrt()];
        let rows = |depth: f64, rng: &mut Rng, scratch: &mut Vec<(u32, u32, f64)>| {
            let cfg = DigiConfig { depth_over_thickness: depth, ..DigiConfig::ACTS_2018_ENDCAP };
            let c = digitize(rng, &m, &cfg, false, LocalCrossing { u: 0.01, v: 0.013, dir: d }, scratch);
            let mut r: Vec<u32> = c.cells.iter().map(|c| c.1).collect();
            r.dedup();
            r.len()
        };
        let (one, two) = (rows(1.0, &mut rng, &mut scratch), rows(2.0, &mut rng, &mut scratch));
        assert!((11..=12).contains(&one), "{one} rows");
        assert!((22..=23).contains(&two), "{two} rows");
    }

    #[test]
    fn acts_2018_end_caps_weight_cell_centres_by_path_length() {
        // ACTS's rule: every crossed cell, its centre weighted by the path length in it. A track
        // along v whose path over 2 × 0.15 mm spans 0.03 mm across the boundary between two
        // rows of 56.25 µm puts the hit between the two centres in proportion to the pieces.
        let m = pixel();
        let cfg = DigiConfig::ACTS_2018_ENDCAP;
        let mut rng = Rng::new(7);
        let mut scratch = Vec::new();
        let tv: f64 = 0.1;
        let n = (1.0 + tv * tv).sqrt();
        let d = [0.0, tv / n, 1.0 / n];
        let boundary = -m.hv + 640.0 * m.pitch_v; // between rows 639 and 640
        let half = 0.5 * 0.3 * tv;
        for offset in [-0.01, -0.004, 0.0, 0.006, 0.012] {
            let v0 = boundary + offset;
            let c = digitize(&mut rng, &m, &cfg, false, LocalCrossing { u: 0.01, v: v0, dir: d }, &mut scratch);
            let below = (boundary - (v0 - half)) / (2.0 * half);
            let want = boundary - 0.5 * m.pitch_v * below + 0.5 * m.pitch_v * (1.0 - below);
            assert_eq!(c.cells.len(), 2, "{:?}", c.cells);
            assert!((c.v - want).abs() < 0.004, "offset {offset}: {} vs {want}", c.v);
        }
    }

    #[test]
    fn lorentz_shift_is_corrected() {
        let m = pixel();
        let cfg = DigiConfig {
            tan_lorentz: 0.2,
            diffusion_mm: 0.005,
            threshold: 0.05,
            fluctuation: 0.1,
            binary: false,
            depth_over_thickness: 1.0,
            lorentz_correction: None,
        };
        let mut rng = Rng::new(5);
        let mut scratch = Vec::new();
        let n = 2000;
        let mean: f64 = (0..n)
            .map(|_| {
                let u0 = rng.range(-2.0, 2.0);
                digitize(&mut rng, &m, &cfg, true, LocalCrossing { u: u0, v: 0.0, dir: [0.0, 0.0, 1.0] }, &mut scratch)
                    .u
                    - u0
            })
            .sum::<f64>()
            / n as f64;
        assert!(mean.abs() < 0.003, "bias {mean}");
    }

    #[test]
    fn a_correction_over_the_full_thickness_leaves_half_the_drift() {
        // TrackML's barrels: the charge drifts tan θ_L · t/2 on average, the reconstruction
        // subtracts tan θ_L · t, so hits sit tan θ_L · t/2 off on the other side.
        let m = pixel();
        let cfg = DigiConfig { tan_lorentz: 0.12, ..DigiConfig::ACTS_2018_BARREL };
        let mut rng = Rng::new(8);
        let mut scratch = Vec::new();
        let n = 2000;
        let mean: f64 = (0..n)
            .map(|_| {
                let u0 = rng.range(-2.0, 2.0);
                let at = LocalCrossing { u: u0, v: 0.0, dir: [0.0, 0.0, 1.0] };
                digitize(&mut rng, &m, &cfg, true, at, &mut scratch).u - u0
            })
            .sum::<f64>()
            / n as f64;
        let want = -0.12 * 0.5 * m.thickness;
        assert!((mean - want).abs() < 0.002, "bias {mean}, want {want}");
    }
}
