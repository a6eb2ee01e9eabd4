//! Reconstructions of the same events side by side (e.g. the CKF and the GNN chain): their
//! efficiency against pT and η on one figure, the pT resolution against pT, and the pulls of
//! the fitted parameters, from what `reconstruct --fit` leaves in each output directory (the
//! submissions and `eventNNNNNNNNN-parameters.csv`) and the events' truth.
//!
//! [`compare_reconstructions`] scores every reconstruction on the same events with the same
//! [`MetricsConfig`] (so their histograms share bins) and matches each fitted track to a
//! particle by the double majority (more than half of the track's hits are the particle's,
//! and more than half of the particle's hits are on the track). Tracks matched to primary
//! particles (produced within `prompt_max_vertex_r` of the beam line) give the resolution and
//! the pulls (fit − truth)/σ of q/pT, φ, η, d0 and z0, the truth being the particle's perigee
//! at the beam line ([`true_perigee`]). [`plot_comparison`] draws them.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;
use serde::Serialize;
use trackgnn_plot::{Frame, Series, draw_chart, with_ext, write_figure};
use trackgnn_trackml::csv::{FileKind, ReadOptions, discover_events, read_event};
use trackgnn_trackml::physics::material::MaterialModel;
use trackgnn_trackml::physics::wrap_phi;
use trackgnn_trackml::{Detector, ParticleId, SolenoidField};

use crate::error::{Error, Result};
use crate::kalman::candidate::PION_MASS;
use crate::kalman::params::{PHI, QOVERP, THETA};
use crate::kalman::{FitContext, KalmanFitter, MeasurementModel, true_perigee};
use crate::metrics::{MetricsConfig, TrackMetrics, evaluate_event, log_edges};
use crate::plots::plot_efficiency;
use crate::submission::{parameters_file_name, read_parameters, read_submission, submission_file_name};

/// The names of the pulls, in order.
pub const PULL_NAMES: [&str; 5] = ["q/pT", "φ", "η", "d0", "z0"];

/// A fitted track matched to a primary particle.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MatchedTrack {
    /// The particle's pT \[GeV\].
    pub pt: f64,
    /// The particle's η.
    pub eta: f64,
    /// The fitted pT \[GeV\].
    pub pt_fit: f64,
    /// (fit − truth)/σ of q/pT, φ, η, d0 and z0 ([`PULL_NAMES`]).
    pub pulls: [f64; 5],
    /// The fit's χ²/ndf.
    pub chi2_per_ndf: f64,
}

/// One reconstruction, as compared.
#[derive(Clone, Debug, Serialize)]
pub struct Compared {
    /// Its name in the figures.
    pub name: String,
    /// Its output directory.
    pub dir: PathBuf,
    /// Its track metrics over the events compared.
    pub metrics: TrackMetrics,
    /// Fitted tracks (rows of the parameters files).
    pub fitted_tracks: usize,
    /// The fitted tracks matched to primary particles.
    pub matched: Vec<MatchedTrack>,
}

/// Scores the reconstructions `recos` (name, output directory written by `reconstruct --fit`)
/// on the events of `input` that have truth and particles files (the first `limit` of them),
/// with `config`, and matches their fitted tracks to particles (module docs). Fits use `det`
/// in the generator's default field and material.
///
/// # Errors
/// An event that cannot be read ([`Error::Event`]), a submission or parameters file missing
/// or malformed (naming it; the parameters need `reconstruct --fit`), or no event with truth
/// ([`Error::Config`] naming `input`).
pub fn compare_reconstructions(
    input: &Path,
    recos: &[(&str, &Path)],
    det: &Detector,
    config: &MetricsConfig,
    limit: Option<usize>,
) -> Result<Vec<Compared>> {
    let mut files = discover_events(input)?;
    files.retain(|f| f.has(FileKind::Truth) && f.has(FileKind::Particles));
    files.truncate(limit.unwrap_or(usize::MAX));
    if files.is_empty() {
        return Err(Error::config("input", format!("{}: no event with truth and particles files", input.display())));
    }
    let (field, material) = (SolenoidField::default(), MaterialModel::default());
    let fitter = KalmanFitter::new(FitContext::new(det, &field, material, PION_MASS), MeasurementModel::default());
    let mut out: Vec<Compared> = recos
        .iter()
        .map(|(name, dir)| Compared {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            metrics: TrackMetrics::default(),
            fitted_tracks: 0,
            matched: Vec::new(),
        })
        .collect();
    for (k, f) in files.iter().enumerate() {
        let event = read_event(f, ReadOptions { truth: true, particles: true, cells: false })?;
        let truth = event.truth.as_ref().ok_or(Error::config("input", "truth missing"))?;
        let particles = event.particles.as_ref().ok_or(Error::config("input", "particles missing"))?;
        let row: HashMap<ParticleId, usize> = particles.particle_id.iter().enumerate().map(|(i, &p)| (p, i)).collect();
        let mut particle_hits: HashMap<ParticleId, u32> = HashMap::new();
        for &p in &truth.particle_id {
            *particle_hits.entry(p).or_default() += 1;
        }
        for c in &mut out {
            let path = c.dir.join(submission_file_name(event.event_id));
            let sub = read_submission(&path)?;
            let sub = sub.iter().find(|s| s.event_id == event.event_id).ok_or_else(|| {
                Error::io(&path, std::io::Error::other(format!("no rows of event {}", event.event_id)))
            })?;
            let hit_tracks = sub.track_ids_for(&event.hits.hit_id)?;
            let m = evaluate_event(&event, &hit_tracks, config)?;
            if k == 0 {
                c.metrics = m
            } else {
                c.metrics.merge(&m)?
            }
            // Each track's hits per particle.
            let mut on_track: HashMap<u32, HashMap<ParticleId, u32>> = HashMap::new();
            for (&t, &p) in hit_tracks.iter().zip(&truth.particle_id) {
                *on_track.entry(t).or_default().entry(p).or_default() += 1;
            }
            let params = read_parameters(&c.dir.join(parameters_file_name(event.event_id)))?;
            c.fitted_tracks += params.len();
            for t in &params {
                let Some(counts) = on_track.get(&t.track_id) else { continue };
                let n: u32 = counts.values().sum();
                let Some((&p, &k)) = counts.iter().max_by_key(|&(p, k)| (*k, std::cmp::Reverse(p.0))) else { continue };
                if p.is_noise() || 2 * k <= n || 2 * k <= particle_hits[&p] {
                    continue;
                }
                let Some(&i) = row.get(&p) else { continue };
                let vertex = [particles.vx[i], particles.vy[i], particles.vz[i]].map(f64::from);
                if vertex[0].hypot(vertex[1]) > config.prompt_max_vertex_r {
                    continue;
                }
                let momentum = [particles.px[i], particles.py[i], particles.pz[i]].map(f64::from);
                let Ok(b) = true_perigee(&fitter, f64::from(particles.q[i]), vertex, momentum) else { continue };
                let (theta, qop) = (b[THETA], b[QOVERP]);
                let truth = [qop / theta.sin(), b[PHI], -(theta / 2.0).tan().ln(), b[0], b[1]];
                let pulls = std::array::from_fn(|j| {
                    let d = t.values[j] - truth[j];
                    (if j == 1 { wrap_phi(d) } else { d }) / t.sigmas[j]
                });
                let pt = momentum[0].hypot(momentum[1]);
                let eta = (momentum[2] / pt).asinh();
                let chi2_per_ndf = t.chi2 / f64::from(t.ndf.max(1));
                c.matched.push(MatchedTrack { pt, eta, pt_fit: t.pt(), pulls, chi2_per_ndf });
            }
        }
    }
    Ok(out)
}

/// Mean and standard deviation of the values in (−`clip`, `clip`), and how many.
pub fn mean_std(v: impl Iterator<Item = f64>, clip: f64) -> (f64, f64, usize) {
    let v: Vec<f64> = v.filter(|x| x.abs() < clip).collect();
    let n = v.len().max(1) as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt(), v.len())
}

/// The median of `v`; NaN for none.
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// σ of the central 68% of `v` (half the distance between its 16th and 84th percentiles);
/// NaN for none.
pub fn core_sigma(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let q = |f: f64| v[((v.len() - 1) as f64 * f).round() as usize];
    (q(0.8413) - q(0.1587)) / 2.0
}

/// One bin of [`pt_resolution`]: true pT from, to \[GeV\], tracks, core σ.
pub type ResolutionBin = (f64, f64, usize, f64);

/// The pT resolution of `matched` per bin of true pT (`edges` \[GeV\]): `(lo, hi, n, σ)` with σ
/// the core width of pT_fit/pT − 1 ([`core_sigma`]); bins of fewer than 10 tracks are left out.
pub fn pt_resolution(matched: &[MatchedTrack], edges: &[f64]) -> Vec<ResolutionBin> {
    edges
        .windows(2)
        .filter_map(|w| {
            let r: Vec<f64> =
                matched.iter().filter(|m| (w[0]..w[1]).contains(&m.pt)).map(|m| m.pt_fit / m.pt - 1.0).collect();
            (r.len() >= 10).then(|| (w[0], w[1], r.len(), core_sigma(r)))
        })
        .collect()
}

/// Writes the comparison's figures into `dir` (created if needed), each as PNG and SVG:
/// `efficiency_vs_pt` (all reconstructable particles and primary targets of each),
/// `efficiency_vs_eta` (primary targets and all targets), `pt_resolution_vs_pt` and `pulls`
/// (the five pulls with a unit Gaussian, their means and standard deviations within ±5, and
/// χ²/ndf with its median). Returns the paths.
///
/// # Errors
/// [`Error::Io`] naming what cannot be written.
pub fn plot_comparison(dir: &Path, compared: &[Compared]) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let mut stems = Vec::new();
    let labels = |what: &str| -> Vec<String> { compared.iter().map(|c| format!("{}: {what}", c.name)).collect() };
    let (all, primary, targets) = (labels("all reconstructable"), labels("primary targets"), labels("all targets"));
    let stem = dir.join("efficiency_vs_pt");
    let mut series: Vec<(&str, &[_])> = Vec::new();
    for (i, c) in compared.iter().enumerate() {
        series.push((&primary[i], &c.metrics.efficiency_primary_vs_pt));
        series.push((&all[i], &c.metrics.efficiency_all_vs_pt));
    }
    plot_efficiency(&stem, "Track efficiency vs pT", "pT [GeV]", &series, true)?;
    stems.push(stem);
    let stem = dir.join("efficiency_vs_eta");
    let mut series: Vec<(&str, &[_])> = Vec::new();
    for (i, c) in compared.iter().enumerate() {
        series.push((&primary[i], &c.metrics.efficiency_primary_vs_eta));
        series.push((&targets[i], &c.metrics.efficiency_vs_eta));
    }
    plot_efficiency(&stem, "Track efficiency vs η", "η", &series, false)?;
    stems.push(stem);

    let stem = dir.join("pt_resolution_vs_pt");
    let edges = log_edges(0.5, 100.0, 10);
    let res: Vec<(String, Vec<ResolutionBin>)> =
        compared.iter().map(|c| (c.name.clone(), pt_resolution(&c.matched, &edges))).collect();
    write_figure(&stem, &Resolution { series: res })?;
    stems.push(stem);

    let stem = dir.join("pulls");
    write_figure(&stem, &Pulls { compared })?;
    stems.push(stem);
    Ok(stems.iter().flat_map(|s| [with_ext(s, "png"), with_ext(s, "svg")]).collect())
}

/// Series colours: matplotlib's `tab10`.
const COLORS: [RGBColor; 10] = trackgnn_plot::TAB10;

/// The pT resolution per reconstruction: points at the bins' geometric centres, with a bar
/// over the bin and ± σ/√(2n).
struct Resolution {
    series: Vec<(String, Vec<ResolutionBin>)>,
}

impl trackgnn_plot::Figure for Resolution {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, text: bool) -> std::result::Result<(), String> {
        let ys = self.series.iter().flat_map(|(_, s)| s.iter().map(|b| b.3)).filter(|y| *y > 0.0);
        let (lo, hi) = ys.fold((f64::INFINITY, 0.0f64), |(l, h), y| (l.min(y), h.max(y)));
        let y = if lo < hi { lo * 0.7..hi * 1.4 } else { 1e-3..1.0 };
        let frame = Frame {
            title: "pT resolution of tracks matched to primary particles",
            x_label: "true pT [GeV]",
            y_label: "σ(pT fit / pT true − 1), core 68%",
            x: 0.5..100.0,
            y,
            log_x: true,
            log_y: true,
            decimals: 3,
            legend: Some(SeriesLabelPosition::UpperLeft),
        };
        draw_chart(root, &frame, self, text)
    }
}

impl Series for Resolution {
    fn draw<'a, DB, X, Y>(&self, chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>) -> std::result::Result<(), String>
    where
        DB: DrawingBackend + 'a,
        X: Ranged<ValueType = f64> + ValueFormatter<f64>,
        Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        for (i, (name, bins)) in self.series.iter().enumerate() {
            let c = COLORS[i % COLORS.len()];
            let style = c.stroke_width(2);
            let bars = bins.iter().flat_map(|&(lo, hi, n, s)| {
                let (x, e) = ((lo * hi).sqrt(), s / (2.0 * n as f64).sqrt());
                [PathElement::new(vec![(lo, s), (hi, s)], style), PathElement::new(vec![(x, s - e), (x, s + e)], style)]
            });
            chart.draw_series(bars).map_err(err)?;
            chart
                .draw_series(bins.iter().map(|&(lo, hi, _, s)| Circle::new(((lo * hi).sqrt(), s), 4, c.filled())))
                .map_err(err)?
                .label(name.as_str())
                .legend(move |(x, y)| Circle::new((x + 10, y), 4, c.filled()));
        }
        Ok(())
    }
}

/// Pull histograms (−5 to 5, 40 bins, unit area) of each reconstruction and χ²/ndf.
struct Pulls<'a> {
    compared: &'a [Compared],
}

/// One panel of [`Pulls`]: histogram `k` (0–4 the pulls, 5 χ²/ndf).
struct PullPanel<'a> {
    compared: &'a [Compared],
    k: usize,
    range: Range<f64>,
}

impl trackgnn_plot::Figure for Pulls<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, text: bool) -> std::result::Result<(), String> {
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let panels = root.split_evenly((2, 3));
        for (k, area) in panels.iter().enumerate() {
            let range = if k < 5 { -5.0..5.0 } else { 0.0..5.0 };
            let panel = PullPanel { compared: self.compared, k, range: range.clone() };
            let hists: Vec<Vec<f64>> = self.compared.iter().map(|c| panel.histogram(c)).collect();
            let top = hists.iter().flatten().fold(0.45f64, |m, &v| m.max(v)) * 1.15;
            let title = if k < 5 { format!("pull of {}", PULL_NAMES[k]) } else { "χ²/ndf".to_string() };
            let frame = Frame {
                title: &title,
                x_label: if k < 5 { "(fit − truth)/σ" } else { "χ²/ndf" },
                y_label: "density",
                x: range,
                y: 0.0..top,
                log_x: false,
                log_y: false,
                decimals: 2,
                legend: Some(SeriesLabelPosition::UpperRight),
            };
            draw_chart(area, &frame, &panel, text)?;
        }
        Ok(())
    }

    fn size(&self) -> (u32, u32) {
        (1800, 1000)
    }
}

impl PullPanel<'_> {
    const BINS: usize = 40;

    /// The values of this panel for `c`.
    fn values<'c>(&self, c: &'c Compared) -> impl Iterator<Item = f64> + 'c {
        let k = self.k;
        c.matched.iter().map(move |m| if k < 5 { m.pulls[k] } else { m.chi2_per_ndf })
    }

    /// Density per bin (unit area over all values, those outside the range included).
    fn histogram(&self, c: &Compared) -> Vec<f64> {
        let (lo, hi) = (self.range.start, self.range.end);
        let w = (hi - lo) / Self::BINS as f64;
        let mut h = vec![0.0; Self::BINS];
        let mut n = 0usize;
        for v in self.values(c) {
            n += 1;
            if (lo..hi).contains(&v) {
                h[((v - lo) / w) as usize] += 1.0;
            }
        }
        h.iter().map(|x| x / (n.max(1) as f64 * w)).collect()
    }
}

impl Series for PullPanel<'_> {
    fn draw<'a, DB, X, Y>(&self, chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>) -> std::result::Result<(), String>
    where
        DB: DrawingBackend + 'a,
        X: Ranged<ValueType = f64> + ValueFormatter<f64>,
        Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        let (lo, hi) = (self.range.start, self.range.end);
        let w = (hi - lo) / Self::BINS as f64;
        if self.k < 5 {
            let gauss = (0..=200).map(|i| {
                let x = lo + (hi - lo) * i as f64 / 200.0;
                (x, (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt())
            });
            chart
                .draw_series(LineSeries::new(gauss, BLACK.mix(0.5)))
                .map_err(err)?
                .label("unit Gaussian")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.5)));
        }
        for (i, c) in self.compared.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let h = self.histogram(c);
            let steps = h.iter().enumerate().flat_map(|(b, &v)| [(lo + b as f64 * w, v), (lo + (b + 1) as f64 * w, v)]);
            let label = if self.k < 5 {
                let (mean, std, n) = mean_std(self.values(c), 5.0);
                format!("{}: {mean:+.2} / {std:.2} ({n})", c.name)
            } else {
                // χ²/ndf has a long tail (candidates holding a wrong hit): its median.
                let v: Vec<f64> = self.values(c).collect();
                let over = v.iter().filter(|&&x| x > hi).count() as f64 / v.len().max(1) as f64;
                format!("{}: median {:.2}, {:.1}% > {hi}", c.name, median(v), 100.0 * over)
            };
            chart
                .draw_series(LineSeries::new(steps, color.stroke_width(2)))
                .map_err(err)?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use trackgnn_plot::testing::{check_files, no_temporaries};

    use super::*;

    fn compared(name: &str, shift: f64) -> Compared {
        let matched = (0..400)
            .map(|i| {
                let u = (i as f64 + 0.5) / 400.0;
                // A spread of pulls from a deterministic ramp.
                let p = 2.0 * (u - 0.5) * 1.7 + shift;
                MatchedTrack {
                    pt: 0.6 * 1.01f64.powi(i),
                    eta: 0.0,
                    pt_fit: 0.6 * 1.01f64.powi(i) * (1.0 + 0.01 * p),
                    pulls: [p; 5],
                    chi2_per_ndf: 1.0 + 0.5 * p,
                }
            })
            .collect();
        Compared {
            name: name.into(),
            dir: PathBuf::new(),
            metrics: TrackMetrics::default(),
            fitted_tracks: 400,
            matched,
        }
    }

    #[test]
    fn comparison_figures_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let c = [compared("CKF", 0.0), compared("GNN chain", 0.3)];
        let files = plot_comparison(dir.path(), &c).unwrap();
        assert_eq!(files.len(), 8);
        for stem in ["efficiency_vs_pt", "efficiency_vs_eta", "pt_resolution_vs_pt", "pulls"] {
            let svg = check_files(&dir.path().join(stem));
            if trackgnn_plot::font_available() && stem != "efficiency_vs_eta" {
                assert!(svg.contains("CKF") && svg.contains("GNN chain"), "{stem}: both in the legend");
            }
        }
        no_temporaries(dir.path());
    }

    #[test]
    fn resolution_and_summaries() {
        let c = compared("a", 0.0);
        let res = pt_resolution(&c.matched, &[0.5, 1.0, 100.0, 1000.0]);
        // pT 0.6 × 1.01^i: 52 tracks below 1 GeV, 348 from 1 to 32 GeV, none above 100.
        assert_eq!(res.iter().map(|r| r.2).collect::<Vec<_>>(), [52, 348]);
        assert!(res.iter().all(|r| r.3 > 0.0 && r.3 < 0.017), "{res:?}");
        // The ramp of pulls is uniform on ±1.7: σ = 1.7/√3, the core half-width 0.68 × 1.7.
        let (mean, std, n) = mean_std(c.matched.iter().map(|m| m.pulls[0]), 5.0);
        assert!(mean.abs() < 1e-9 && (std - 1.7 / 3f64.sqrt()).abs() < 0.01 && n == 400, "{mean} {std}");
        assert!((core_sigma(c.matched.iter().map(|m| m.pulls[0]).collect()) - 0.6826 * 1.7).abs() < 0.02);
        assert!(core_sigma(vec![]).is_nan() && median(vec![]).is_nan());
        assert_eq!(median(vec![3.0, 1.0, 2.0, 100.0, 0.5]), 2.0);
    }

    #[test]
    fn missing_inputs_are_errors_naming_them() {
        let dir = tempfile::tempdir().unwrap();
        let det = Detector::trackml();
        let e = compare_reconstructions(dir.path(), &[("a", dir.path())], &det, &MetricsConfig::default(), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains(&dir.path().display().to_string()), "{e}");
    }
}
