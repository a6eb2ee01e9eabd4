//! The hits' measurement errors, per kind of module, and their calibration on generated
//! events.
//!
//! A hit measures the local position (u, v) of a particle's crossing of its module. Its error
//! depends on the module's technology (pixel, short or long strip: the cell pitch) and on
//! whether it sits in a barrel or an end-cap (the angle tracks cross it at, hence the
//! cluster size). As experiments calibrate their cluster errors, [`MeasurementModel::calibrate`]
//! measures them on simulated events: the RMS of hit − true crossing in each local
//! coordinate, per kind. These are smaller than pitch/√12 where clusters of several cells
//! interpolate (the realism table's residuals: docs/references.md).

use nalgebra::Matrix2;
use trackgnn_trackml::Event;
use trackgnn_trackml::geometry::{Detector, LayerKind, Module};
use trackgnn_trackml::physics::material::tech_index;

use crate::error::{Error, Result};

/// The kinds of module a hit error is calibrated for: (end-cap?, technology), in the order of
/// [`MeasurementModel::sigma`].
pub const KINDS: [&str; 6] = [
    "pixel barrel",
    "short-strip barrel",
    "long-strip barrel",
    "pixel end-cap",
    "short-strip end-cap",
    "long-strip end-cap",
];

/// The lower edges of the bins of a crossing's expected cluster width along one local axis, in
/// cells: thickness · |tan α| / pitch, α the angle of the track to the module's normal
/// projected on that axis. A cluster's precision depends on it: a track that crosses one cell
/// leaves a hit anywhere in it (pitch/√12), one that crosses several is interpolated.
pub const WIDTH_BINS: [f64; 5] = [0.0, 0.5, 1.0, 2.0, 4.0];

/// The depth a crossing's charge is collected over, in module thicknesses, in the barrels and
/// in the end-caps: the generator's default digitisation (`DigiConfig::ACTS_2018_BARREL`'s
/// sensor, `DigiConfig::ACTS_2018_ENDCAP`'s twice its thickness).
pub const CHARGE_DEPTH: [f64; 2] = [1.0, 2.0];

/// Calibration bins with fewer hits than this take the kind's σ over all widths.
pub const MIN_BIN_HITS: usize = 50;

/// The error σ \[mm\] of a hit's local (u, v) per kind of module ([`KINDS`]) and expected
/// cluster width ([`WIDTH_BINS`]), and its mean offset from the true crossing per kind (the
/// Lorentz shift that the barrels' clustering leaves, tan θ_L · t/2, which experiments
/// calibrate and subtract too).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeasurementModel {
    /// σ per kind, axis (u, v) and width bin: the standard deviation about the offset.
    pub sigma: [[[f64; 5]; 2]; 6],
    /// The mean of hit − true crossing (u, v) per kind, subtracted from every hit.
    pub offset: [[f64; 2]; 6],
}

/// The width bin of a crossing of `module` at local direction `dir` (u, v, w components) along
/// `axis` (0: u, 1: v).
pub fn width_bin(module: &Module, dir: [f64; 3], axis: usize) -> usize {
    let pitch = if axis == 0 { module.pitch_u } else { module.pitch_v };
    let width = module.thickness * (dir[axis] / dir[2]).abs() / pitch;
    WIDTH_BINS.iter().rposition(|&lo| width >= lo).unwrap_or(0)
}

impl Default for MeasurementModel {
    /// The errors and offsets measured by [`MeasurementModel::calibrate`] on the generator's
    /// default detector and settings, on 10,000 single muons of 1–100 GeV at |η| < 2.5 (the
    /// command and its output: `tools/recipes/results/kalman.md`). The barrels' u offsets are
    /// the Lorentz shift their clustering leaves (−9 µm in the pixels, +15 µm in the strips).
    /// The pixel end-caps' σ_v is from the same sample at |η| < 4 (issue 40's CKF: the forward
    /// tracks' hits, 9.7 µm, were four times the error the sample at |η| < 2.5 gave them).
    fn default() -> Self {
        MeasurementModel { sigma: DEFAULT_SIGMA, offset: DEFAULT_OFFSET }
    }
}

/// The kind of `det`'s module `module` (an index of [`KINDS`]).
///
/// # Panics
/// If the index is not one of `det`'s modules.
pub fn module_kind(det: &Detector, module: usize) -> usize {
    let layer = &det.layers[det.layer_of(module)];
    let endcap = usize::from(layer.kind == LayerKind::Endcap);
    3 * endcap + tech_index(layer.technology)
}

/// What [`MeasurementModel::calibrate`] measured: the model (per kind the mean and the
/// standard deviation of the residual hit − true crossing in u and v \[mm\]) and the hits per
/// kind.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibration {
    /// The model.
    pub model: MeasurementModel,
    /// Hits per kind.
    pub hits: [usize; 6],
}

impl MeasurementModel {
    /// A hit's local position on `det`'s module `module` with the kind's offset subtracted.
    ///
    /// # Panics
    /// If the index is not one of `det`'s modules.
    pub fn corrected(&self, det: &Detector, module: usize, local: [f64; 2]) -> [f64; 2] {
        let o = self.offset[module_kind(det, module)];
        [local[0] - o[0], local[1] - o[1]]
    }

    /// The 2 × 2 covariance of a hit on `det`'s module `module` crossed at the global unit
    /// direction `dir`.
    ///
    /// # Panics
    /// If the index is not one of `det`'s modules.
    pub fn covariance(&self, det: &Detector, module: usize, dir: [f64; 3]) -> Matrix2<f64> {
        let m = &det.modules[module];
        let local = m.dir_to_local(dir);
        let k = module_kind(det, module);
        let su = self.sigma[k][0][width_bin(m, local, 0)];
        let sv = self.sigma[k][1][width_bin(m, local, 1)];
        Matrix2::new(su * su, 0.0, 0.0, sv * sv)
    }

    /// The 2 × 2 covariance of a hit measured at local (u, v) `local` \[mm\] (its offset
    /// subtracted) on `det`'s module `module`, crossed at the global unit direction `dir`:
    /// [`covariance`](Self::covariance) with, along v, the bias of a cluster cut by the
    /// module's edge ([`edge_bias`]) added as an error.
    ///
    /// # Panics
    /// If the index is not one of `det`'s modules.
    pub fn hit_covariance(&self, det: &Detector, module: usize, dir: [f64; 3], local: [f64; 2]) -> Matrix2<f64> {
        let mut v = self.covariance(det, module, dir);
        let m = &det.modules[module];
        let depth = CHARGE_DEPTH[usize::from(module_kind(det, module) >= 3)] * m.thickness;
        let d = m.dir_to_local(dir);
        let b = edge_bias(m.hv, m.pitch_v, depth * (d[1] / d[2]).abs(), local[1]);
        v[(1, 1)] += b * b;
        v
    }

    /// Measures the hit errors on `events` (with truth): per kind of module, the mean of the
    /// local residual hit − true crossing over the hits of particles (noise left out), and its
    /// standard deviation per expected cluster width (from the true direction; a bin of fewer
    /// than [`MIN_BIN_HITS`] hits takes the kind's over all widths). A kind without hits keeps
    /// the default's.
    ///
    /// # Errors
    /// [`Error::MissingPart`] for an event without truth; [`Error::Fit`] for a hit whose
    /// module is not one of `det`'s.
    pub fn calibrate(det: &Detector, events: &[Event]) -> Result<Calibration> {
        // Per kind and axis: Σr, Σr², n over all widths and per width bin.
        let mut all = [[(0.0f64, 0.0f64, 0usize); 2]; 6];
        let mut bins = [[[(0.0f64, 0.0f64, 0usize); 5]; 2]; 6];
        let mut n = [0usize; 6];
        for event in events {
            let truth = event.truth.as_ref().ok_or(Error::MissingPart { event_id: event.event_id, part: "truth" })?;
            let h = &event.hits;
            for i in 0..h.len() {
                if truth.particle_id[i].0 == 0 {
                    continue;
                }
                let m = det.module_index(h.module[i]).ok_or_else(|| {
                    Error::Fit(format!(
                        "event {}: hit {}: module {} is not in the detector",
                        event.event_id, h.hit_id[i], h.module[i]
                    ))
                })?;
                let module = &det.modules[m];
                let hit = module.to_local([f64::from(h.x[i]), f64::from(h.y[i]), f64::from(h.z[i])]);
                let tru = module.to_local([f64::from(truth.tx[i]), f64::from(truth.ty[i]), f64::from(truth.tz[i])]);
                let dir =
                    module.dir_to_local([f64::from(truth.tpx[i]), f64::from(truth.tpy[i]), f64::from(truth.tpz[i])]);
                let k = module_kind(det, m);
                for a in 0..2 {
                    let r = hit[a] - tru[a];
                    let b = width_bin(module, dir, a);
                    for acc in [&mut all[k][a], &mut bins[k][a][b]] {
                        acc.0 += r;
                        acc.1 += r * r;
                        acc.2 += 1;
                    }
                }
                n[k] += 1;
            }
        }
        let mut model = MeasurementModel::default();
        let mean = |acc: (f64, f64, usize)| acc.0 / acc.2 as f64;
        let std = |acc: (f64, f64, usize)| (acc.1 / acc.2 as f64 - mean(acc).powi(2)).max(0.0).sqrt();
        for k in 0..6 {
            for a in 0..2 {
                if all[k][a].2 == 0 {
                    continue;
                }
                model.offset[k][a] = mean(all[k][a]);
                for (sigma, &acc) in model.sigma[k][a].iter_mut().zip(&bins[k][a]) {
                    *sigma = if acc.2 >= MIN_BIN_HITS { std(acc) } else { std(all[k][a]) };
                }
            }
        }
        Ok(Calibration { model, hits: n })
    }
}

/// The bias \[mm\] of the centre of a cluster measured at `c` \[mm\] along an axis of half-length
/// `half` \[mm\] and pitch `pitch` \[mm\], for a crossing whose charge spans `span` \[mm\] along
/// it (the collection depth times the tangent of the track's angle to the normal), when the
/// span runs over the module's edge (0 otherwise, and for spans of fewer than two cells).
///
/// The generator puts the charge beyond the edge into the edge cell (`digitize` clamps the
/// cell index), so a span of length L that overhangs the edge by o has its centre pulled
/// inward by o (o + pitch)/(2L), up to (L/2 + pitch)/4 when the crossing is at the edge
/// itself (~0.1 mm for the pixel barrels' long clusters at |η| ≈ 2.4, 20 times their σ). The
/// centre then lies d = L/2 − o + o (o + pitch)/(2L) from the edge; this inverts that for o.
pub fn edge_bias(half: f64, pitch: f64, span: f64, c: f64) -> f64 {
    let d = half - c.abs();
    if span < 2.0 * pitch || d >= 0.5 * span {
        return 0.0;
    }
    // o² + (pitch − 2L) o + L² − 2 L d = 0, the root in [0, L/2].
    let b = 2.0 * span - pitch;
    let disc = b * b - 4.0 * (span * span - 2.0 * span * d.max(0.0));
    let o = if disc > 0.0 { 0.5 * (b - disc.sqrt()) } else { 0.5 * span }.clamp(0.0, 0.5 * span);
    o * (o + pitch) / (2.0 * span)
}

/// [`MeasurementModel::default`]'s σ (printed by the `kalman_pulls` example's calibration).
const DEFAULT_SIGMA: [[[f64; 5]; 2]; 6] = [
    // pixel barrel: u; v
    [[0.006538, 0.001965, 0.003181, 0.005718, 0.005718], [0.01249, 0.005132, 0.003148, 0.003203, 0.005257]],
    // short-strip barrel: u; v
    [[0.01961, 0.01844, 0.01957, 0.01957, 0.01957], [0.2749, 0.1875, 0.2668, 0.2668, 0.2668]],
    // long-strip barrel: u; v
    [[0.0324, 0.01972, 0.03228, 0.03228, 0.03228], [2.949, 2.949, 2.949, 2.949, 2.949]],
    // pixel end-cap: u; v (v from 10,000 muons of 1-100 GeV at |η| < 4: at |η| < 2.5 the bins
    // of < 0.5 and ≥ 1 cells held too few hits and took the kind's 2.4 µm; tracks at |η| > 2.5
    // cross the disks in one cell along v and measure it to 9.7 µm)
    [[0.01394, 0.01394, 0.01394, 0.01394, 0.01394], [0.00971, 0.00256, 0.00938, 0.00938, 0.00938]],
    // short-strip end-cap: u; v
    [[0.02185, 0.02185, 0.02185, 0.02185, 0.02185], [0.3091, 0.3091, 0.3091, 0.3091, 0.3091]],
    // long-strip end-cap: u; v
    [[0.03119, 0.03118, 0.03118, 0.03118, 0.03118], [2.89, 2.89, 2.89, 2.89, 2.89]],
];

/// [`MeasurementModel::default`]'s offsets.
const DEFAULT_OFFSET: [[f64; 2]; 6] = [
    [-0.00907, -0.00001],
    [0.0152, -0.0023],
    [0.0141, 0.099],
    [0.00005, -0.00003],
    [-0.00002, -0.0021],
    [-0.00024, 0.0059],
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edge_bias_is_the_shift_of_a_cluster_clamped_at_the_edge() {
        // The generator's clustering along one axis: the charge of a span of length L around
        // the crossing v0, in many samples, each in the cell it falls in, beyond the edge in
        // the edge cell; the hit is the charge-weighted mean of the cells' centres.
        let (half, pitch): (f64, f64) = (36.0, 0.05625);
        let cells = (2.0 * half / pitch).round() as i64;
        let centre = |v0: f64, span: f64| {
            let n = 20_000;
            (0..n)
                .map(|i| {
                    let v = v0 - 0.5 * span + (i as f64 + 0.5) * span / n as f64;
                    let cell = ((v + half) / pitch).floor().clamp(0.0, (cells - 1) as f64);
                    -half + (cell + 0.5) * pitch
                })
                .sum::<f64>()
                / n as f64
        };
        for span in [0.3, 0.84] {
            for v0 in [half - 0.5 * span - 0.1, half - 0.3 * span, half - 0.1 * span, half - 0.001] {
                for sign in [1.0, -1.0] {
                    let c = centre(sign * v0, span);
                    let truth = (sign * v0 - c).abs();
                    let b = edge_bias(half, pitch, span, c);
                    // Within the cells' own quantisation of the centre.
                    assert!((b - truth).abs() < 0.006, "span {span}, v0 {}: bias {b}, clamp {truth}", sign * v0);
                }
            }
        }
        // Far from the edge, or a span of less than two cells: none.
        assert_eq!(edge_bias(half, pitch, 0.84, 30.0), 0.0);
        assert_eq!(edge_bias(half, pitch, 0.1, half - 0.01), 0.0);
        // At the edge itself the bias is ~0.1 mm for the pixel barrels' longest clusters.
        let b = edge_bias(half, pitch, 0.84, centre(half - 0.001, 0.84));
        assert!((0.09..0.13).contains(&b), "{b}");
    }
}
