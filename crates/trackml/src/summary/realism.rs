//! The quantities of the generator's realism table (docs/references.md), measured on events.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::event::Event;
use crate::geometry::{Detector, LayerKind, Technology};
use crate::physics::wrap_phi;

/// Hit-minus-truth residuals of one group of modules \[mm\]: the RMS of the 98% smallest |Δ|.
///
/// Why trimmed: a few grazing tracks (loopers turning inside a module) make clusters
/// millimetres long whose centres land far from the crossing; 1% of such hits can double a
/// plain RMS and hide the resolution of the other 99%.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ResidualStats {
    /// Residual across the beam axis, r·Δφ, trimmed RMS \[mm\].
    pub rphi_rms_mm: f64,
    /// Residual along the second coordinate: z in barrels, r in disks \[mm\].
    pub second_rms_mm: f64,
    /// The lowest `second_rms_mm` that any cluster centroid on the cell grid can reach for
    /// these crossings, trimmed the same way \[mm\] (see [`CentroidLimit`]); NaN
    /// without a detector or truth momenta.
    pub second_centroid_limit_mm: f64,
    /// Number of hits.
    pub hits: u64,
}

/// Realism statistics over one or more events (fractions in 0–1, lengths in mm, pT in GeV).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct RealismStats {
    /// Number of events summarised.
    pub events: u64,
    /// Mean hits per event.
    pub hits_per_event: f64,
    /// Mean particles (rows of particles.csv) per event.
    pub particles_per_event: f64,
    /// Mean particles with at least one hit per event.
    pub particles_with_hits_per_event: f64,
    /// Noise hits / all hits.
    pub noise_fraction: f64,
    /// Hits per volume / all hits, keyed by volume_id.
    pub hits_per_volume: BTreeMap<u16, f64>,
    /// Median pT of particles with hits \[GeV\].
    pub median_pt_gev: f64,
    /// Fraction of particles with hits that have pT > 1 GeV.
    pub fraction_pt_above_1gev: f64,
    /// Fraction of particles with hits that have pT > 0.5 GeV.
    pub fraction_pt_above_0p5gev: f64,
    /// Mean hits per particle with hits.
    pub mean_hits_per_particle: f64,
    /// Mean hits per particle with pT > 1 GeV and |η| < 2.5.
    pub mean_hits_per_particle_pt1_eta2p5: f64,
    /// Median hits per particle with pT > 1 GeV and |η| < 2.5.
    pub median_hits_per_particle_pt1_eta2p5: f64,
    /// (particle, layer) pairs with more than one hit / all (particle, layer) pairs.
    pub multi_hit_layer_fraction: f64,
    /// Mean cells per particle hit, per group: pixel_endcap, pixel_barrel, short_strip_barrel,
    /// short_strip_endcap, long_strip_barrel, long_strip_endcap.
    pub cells_per_hit: BTreeMap<String, f64>,
    /// Fraction of particles with hits produced at r > 1 mm (secondaries).
    pub secondary_fraction: f64,
    /// Median |vz| of particles with hits \[mm\].
    pub median_abs_vz_mm: f64,
    /// Species fractions among particles with hits: pion, kaon, proton, electron, muon, other.
    pub species: BTreeMap<String, f64>,
    /// Hit-vs-truth residuals per group (as for `cells_per_hit`).
    pub residuals: BTreeMap<String, ResidualStats>,
}

/// Accumulates [`RealismStats`] event by event.
#[derive(Debug, Default)]
pub struct RealismAccumulator {
    events: u64,
    hits: u64,
    noise: u64,
    particles: u64,
    per_volume: BTreeMap<u16, u64>,
    pts: Vec<f64>,
    hits_per_particle: Vec<u32>,
    hits_hipt: Vec<u32>,
    layer_pairs: u64,
    layer_pairs_multi: u64,
    cells: BTreeMap<String, (u64, u64)>,
    secondaries: u64,
    abs_vz: Vec<f64>,
    species: BTreeMap<String, u64>,
    residuals: BTreeMap<String, (Vec<f32>, Vec<f32>)>,
    centroid_limit: BTreeMap<String, CentroidLimit>,
}

/// The group name of a module for cell and residual statistics.
fn group(det: Option<&Detector>, volume: u16, layer: u16) -> String {
    let (tech, kind) = match det.and_then(|d| d.layer_index(crate::ids::LayerId::new(volume, layer))) {
        Some(li) => {
            let l = &det.unwrap().layers[li];
            (l.technology, l.kind)
        }
        None => (
            Technology::of(volume, 0.0),
            if matches!(volume, 8 | 13 | 17) { LayerKind::Barrel } else { LayerKind::Endcap },
        ),
    };
    let t = match tech {
        Technology::Pixel => "pixel",
        Technology::ShortStrip => "short_strip",
        Technology::LongStrip => "long_strip",
    };
    let k = match kind {
        LayerKind::Barrel => "barrel",
        LayerKind::Endcap => "endcap",
    };
    format!("{t}_{k}")
}

fn species_name(pdg: i32) -> &'static str {
    match pdg.abs() {
        211 => "pion",
        321 => "kaon",
        2212 => "proton",
        11 => "electron",
        13 => "muon",
        _ => "other",
    }
}

/// Quantiles per hit of the centroid-limit residual distribution.
const LIMIT_SAMPLES: usize = 32;
/// Bins of |Δ|/pitch over [0, ½] in a [`CentroidLimit`] histogram.
const LIMIT_BINS: usize = 2000;

/// The residuals along v (the cells' long side) that the best possible cluster centre leaves,
/// over many crossings: the floor a digitiser's v resolution can reach at the crossing angles
/// an event has.
///
/// A straight crossing lights the cells along v over `extent` = t·|d_v/d_w| (at most one
/// pitch p). With probability extent/p it crosses a cell boundary; the centre of a multi-cell
/// cluster is taken as exact. Otherwise the crossing can sit anywhere in the p − extent its
/// single cell allows, so |Δ| is uniform on [0, (p − extent)/2]: RMS √((p − extent)³/(12p))
/// per hit. Without charge sharing across the v boundary no digitiser does better.
///
/// Kept as a histogram of |Δ|/p (bounded memory over any number of events); trimming walks it
/// in order of |Δ|, exact when the pitch is the same across the group, as in each TrackML
/// technology.
#[derive(Clone, Debug)]
pub struct CentroidLimit {
    weight: Vec<f64>,
    sum_sq: Vec<f64>,
}

impl Default for CentroidLimit {
    fn default() -> Self {
        CentroidLimit { weight: vec![0.0; LIMIT_BINS], sum_sq: vec![0.0; LIMIT_BINS] }
    }
}

impl CentroidLimit {
    /// Adds one crossing of cells `pitch` long whose path through the sensor spans `extent`
    /// along them \[mm\], as evenly spaced quantiles of its |Δ| distribution.
    pub fn add(&mut self, pitch: f64, extent: f64) {
        let extent = extent.clamp(0.0, pitch);
        let shared = extent / pitch;
        let half_free = 0.5 * (pitch - extent);
        for j in 0..LIMIT_SAMPLES {
            let q = (j as f64 + 0.5) / LIMIT_SAMPLES as f64;
            let d = if q < shared { 0.0 } else { (q - shared) / (1.0 - shared) * half_free };
            let bin = ((d / pitch * 2.0 * LIMIT_BINS as f64) as usize).min(LIMIT_BINS - 1);
            self.weight[bin] += 1.0 / LIMIT_SAMPLES as f64;
            self.sum_sq[bin] += d * d / LIMIT_SAMPLES as f64;
        }
    }

    /// RMS of the `keep` fraction with the smallest |Δ| \[mm\]; NaN when empty.
    pub fn trimmed_rms(&self, keep: f64) -> f64 {
        let total: f64 = self.weight.iter().sum();
        if total == 0.0 {
            return f64::NAN;
        }
        let want = total * keep;
        let (mut w, mut sq) = (0.0, 0.0);
        for (&bw, &bs) in self.weight.iter().zip(&self.sum_sq) {
            if w + bw >= want {
                let part = if bw > 0.0 { (want - w) / bw } else { 0.0 };
                return ((sq + part * bs) / want).sqrt();
            }
            w += bw;
            sq += bs;
        }
        (sq / w).sqrt()
    }
}

/// Fraction of residuals kept (smallest |Δ|) for the trimmed RMS.
const TRIM_KEEP: f64 = 0.98;

/// RMS of the `keep` fraction of values with the smallest magnitude.
fn trimmed_rms(v: &[f32], keep: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut sq: Vec<f64> = v.iter().map(|&x| (x as f64) * (x as f64)).collect();
    sq.sort_by(|a, b| a.total_cmp(b));
    let n = ((sq.len() as f64 * keep).ceil() as usize).clamp(1, sq.len());
    (sq[..n].iter().sum::<f64>() / n as f64).sqrt()
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { 0.5 * (v[n / 2 - 1] + v[n / 2]) }
}

impl RealismAccumulator {
    /// Adds one event. Truth-based quantities need truth and particles; cell counts need cells;
    /// the detector (optional) tells barrel from end-cap for non-TrackML volume ids.
    pub fn add(&mut self, ev: &Event, det: Option<&Detector>) {
        self.events += 1;
        let hits = &ev.hits;
        self.hits += hits.len() as u64;
        for m in &hits.module {
            *self.per_volume.entry(m.volume()).or_default() += 1;
        }
        let (Some(truth), Some(parts)) = (&ev.truth, &ev.particles) else {
            return;
        };
        self.noise += truth.particle_id.iter().filter(|p| p.is_noise()).count() as u64;
        // Hits per particle and (particle, layer) multiplicities.
        let mut per_particle: HashMap<u64, u32> = HashMap::new();
        let mut per_layer: HashMap<(u64, u32), u32> = HashMap::new();
        for (i, pid) in truth.particle_id.iter().enumerate() {
            if pid.is_noise() {
                continue;
            }
            *per_particle.entry(pid.0).or_default() += 1;
            let m = hits.module[i];
            *per_layer.entry((pid.0, ((m.volume() as u32) << 16) | m.layer() as u32)).or_default() += 1;
        }
        self.layer_pairs += per_layer.len() as u64;
        self.layer_pairs_multi += per_layer.values().filter(|&&c| c > 1).count() as u64;
        self.particles += parts.len() as u64;
        for i in 0..parts.len() {
            let n = per_particle.get(&parts.particle_id[i].0).copied().unwrap_or(0);
            if n == 0 {
                continue;
            }
            let pt = parts.pt(i);
            self.pts.push(pt);
            self.hits_per_particle.push(n);
            if pt > 1.0 && parts.eta(i).abs() < 2.5 {
                self.hits_hipt.push(n);
            }
            if (parts.vx[i] as f64).hypot(parts.vy[i] as f64) > 1.0 {
                self.secondaries += 1;
            }
            self.abs_vz.push((parts.vz[i] as f64).abs());
            let name = parts.particle_type.as_ref().map_or("other", |t| species_name(t[i]));
            *self.species.entry(name.to_string()).or_default() += 1;
        }
        // Residuals of particle hits.
        for i in 0..hits.len() {
            if truth.particle_id[i].is_noise() {
                continue;
            }
            let m = hits.module[i];
            let g = group(det, m.volume(), m.layer());
            let (x, y, z) = (hits.x[i] as f64, hits.y[i] as f64, hits.z[i] as f64);
            let (tx, ty, tz) = (truth.tx[i] as f64, truth.ty[i] as f64, truth.tz[i] as f64);
            let rt = tx.hypot(ty);
            let drphi = rt * wrap_phi(y.atan2(x) - ty.atan2(tx));
            let second = if g.ends_with("barrel") { z - tz } else { x.hypot(y) - rt };
            if let Some(module) = det.and_then(|d| d.module(m)) {
                let p = [truth.tpx[i] as f64, truth.tpy[i] as f64, truth.tpz[i] as f64];
                let local = module.dir_to_local(p);
                if local[2] != 0.0 {
                    let extent = module.thickness * (local[1] / local[2]).abs();
                    self.centroid_limit.entry(g.clone()).or_default().add(module.pitch_v, extent);
                }
            }
            let e = self.residuals.entry(g).or_default();
            e.0.push(drphi as f32);
            e.1.push(second as f32);
        }
        // Cells per particle hit.
        if let Some(cells) = &ev.cells {
            let index: HashMap<u64, usize> = hits.hit_id.iter().enumerate().map(|(i, &h)| (h, i)).collect();
            let mut count = vec![0u32; hits.len()];
            for h in &cells.hit_id {
                if let Some(&i) = index.get(h) {
                    count[i] += 1;
                }
            }
            for (i, &n) in count.iter().enumerate() {
                if truth.particle_id[i].is_noise() {
                    continue;
                }
                let m = hits.module[i];
                let e = self.cells.entry(group(det, m.volume(), m.layer())).or_default();
                e.0 += n as u64;
                e.1 += 1;
            }
        }
    }

    /// The statistics so far.
    pub fn finish(&self) -> RealismStats {
        let n_ev = self.events.max(1) as f64;
        let frac = |a: u64, b: u64| {
            if b == 0 { f64::NAN } else { a as f64 / b as f64 }
        };
        let np = self.pts.len();
        let mut pts = self.pts.clone();
        let mut vz = self.abs_vz.clone();
        let mut hipt: Vec<f64> = self.hits_hipt.iter().map(|&n| n as f64).collect();
        RealismStats {
            events: self.events,
            hits_per_event: self.hits as f64 / n_ev,
            particles_per_event: self.particles as f64 / n_ev,
            particles_with_hits_per_event: np as f64 / n_ev,
            noise_fraction: frac(self.noise, self.hits),
            hits_per_volume: self.per_volume.iter().map(|(&v, &c)| (v, frac(c, self.hits))).collect(),
            median_pt_gev: median(&mut pts),
            fraction_pt_above_1gev: frac(self.pts.iter().filter(|&&p| p > 1.0).count() as u64, np as u64),
            fraction_pt_above_0p5gev: frac(self.pts.iter().filter(|&&p| p > 0.5).count() as u64, np as u64),
            mean_hits_per_particle: frac(self.hits_per_particle.iter().map(|&n| n as u64).sum(), np as u64),
            mean_hits_per_particle_pt1_eta2p5: frac(
                self.hits_hipt.iter().map(|&n| n as u64).sum(),
                self.hits_hipt.len() as u64,
            ),
            median_hits_per_particle_pt1_eta2p5: median(&mut hipt),
            multi_hit_layer_fraction: frac(self.layer_pairs_multi, self.layer_pairs),
            cells_per_hit: self.cells.iter().map(|(k, &(c, n))| (k.clone(), frac(c, n))).collect(),
            secondary_fraction: frac(self.secondaries, np as u64),
            median_abs_vz_mm: median(&mut vz),
            species: self.species.iter().map(|(k, &c)| (k.clone(), frac(c, np as u64))).collect(),
            residuals: self
                .residuals
                .iter()
                .map(|(k, (a, b))| {
                    let stats = ResidualStats {
                        rphi_rms_mm: trimmed_rms(a, TRIM_KEEP),
                        second_rms_mm: trimmed_rms(b, TRIM_KEEP),
                        second_centroid_limit_mm: self
                            .centroid_limit
                            .get(k)
                            .map_or(f64::NAN, |c| c.trimmed_rms(TRIM_KEEP)),
                        hits: a.len() as u64,
                    };
                    (k.clone(), stats)
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(pitch: f64, extent: f64, keep: f64) -> f64 {
        let mut c = CentroidLimit::default();
        c.add(pitch, extent);
        c.trimmed_rms(keep)
    }

    #[test]
    fn centroid_limit_follows_the_single_cell_share() {
        let p = 1.2;
        // Normal incidence: one cell, the crossing anywhere in it, p/√12.
        let normal = limit(p, 0.0, 1.0);
        assert!((normal / (p / 12f64.sqrt()) - 1.0).abs() < 0.01, "{normal}");
        // An extent of a whole pitch always shares the charge: exact.
        assert_eq!(limit(p, p, 1.0), 0.0);
        assert_eq!(limit(p, 5.0, 1.0), 0.0);
        // In between: √((p − L)³ / (12 p)).
        for extent in [0.1, 0.3, 0.6, 0.9] {
            let want = ((p - extent).powi(3) / (12.0 * p)).sqrt();
            let got = limit(p, extent, 1.0);
            assert!((got / want - 1.0).abs() < 0.01, "extent {extent}: {got} vs {want}");
        }
        assert!(CentroidLimit::default().trimmed_rms(0.98).is_nan());
    }

    #[test]
    fn centroid_limit_trims_the_largest_residuals() {
        // Uniform |Δ| on [0, p/2]: keeping the smallest half leaves a quarter pitch, RMS of a
        // uniform on [0, p/4] = p/(4√3).
        let p = 1.2;
        let half = limit(p, 0.0, 0.5);
        assert!((half / (p / (4.0 * 3f64.sqrt())) - 1.0).abs() < 0.01, "{half}");
        // Mixed crossings: the trimmed RMS lies below the plain one.
        let mut c = CentroidLimit::default();
        for i in 0..100 {
            c.add(p, i as f64 * 0.01);
        }
        assert!(c.trimmed_rms(0.98) < c.trimmed_rms(1.0));
    }
}
