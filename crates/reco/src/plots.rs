//! Efficiency plots as PNG and SVG: efficiency against pT and η with binomial error bars.
//!
//! Each call writes `<stem>.png` and `<stem>.svg`, each through a temporary sibling file and a
//! rename, so a reader never sees half a plot. A bin is drawn as a point at its centre (the
//! geometric centre on a log axis) with a horizontal bar over the bin's width and a vertical
//! bar of ± one binomial standard deviation `sqrt(ε (1 − ε) / n)` (clipped to [0, 1]; zero at
//! ε = 0 or 1, where a Clopper–Pearson interval would not be). Bins without particles are
//! not drawn.
//!
//! # Fonts
//! Text needs a TrueType font found at run time (see `font_available`); without one, plots
//! are drawn without any text (no title, axis labels, ticks or legend) rather than failing.

use std::ops::Range;
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;

use crate::error::{Error, Result};
use crate::metrics::{EfficiencyBin, TrackMetrics};

pub use trackgnn_plot::font_available;
use trackgnn_plot::{Frame, Series, draw_chart, with_ext, write_figure};

/// Series colours: matplotlib's `tab10`.
const COLORS: [RGBColor; 10] = trackgnn_plot::TAB10;

/// Legends of the track efficiency plots' series (double-majority matching throughout).
const PRIMARY: &str = "primary targets";
const TARGETS: &str = "all targets (with secondaries)";
const RECONSTRUCTABLE: &str = "all reconstructable";

/// One drawn bin: x centre, x range, efficiency, error bar range.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Point {
    x: f64,
    x_lo: f64,
    x_hi: f64,
    y: f64,
    y_lo: f64,
    y_hi: f64,
}

/// The drawable points of a histogram.
fn points(bins: &[EfficiencyBin], log_x: bool) -> Vec<Point> {
    bins.iter()
        .filter(|b| b.2 > 0)
        .map(|&(lo, hi, n, k)| {
            let y = k as f64 / n as f64;
            let err = (y * (1.0 - y) / n as f64).sqrt();
            let x = if log_x { (lo * hi).sqrt() } else { 0.5 * (lo + hi) };
            Point { x, x_lo: lo, x_hi: hi, y, y_lo: (y - err).max(0.0), y_hi: (y + err).min(1.0) }
        })
        .collect()
}

/// Plots efficiency histograms (e.g. [`TrackMetrics::efficiency_vs_pt`]), one series per
/// `(name, bins)`, on a log x axis if `log_x` (which needs all bin edges > 0; otherwise the
/// axis is linear). Writes `<path_stem>.png` and `<path_stem>.svg`.
pub fn plot_efficiency(
    path_stem: &Path,
    title: &str,
    x_label: &str,
    series: &[(&str, &[EfficiencyBin])],
    log_x: bool,
) -> Result<()> {
    let all = || series.iter().flat_map(|(_, b)| b.iter());
    let log_x = log_x && all().all(|b| b.0 > 0.0);
    let lo = all().map(|b| b.0).fold(f64::INFINITY, f64::min);
    let hi = all().map(|b| b.1).fold(f64::NEG_INFINITY, f64::max);
    let x = match (lo < hi, log_x) {
        (true, _) => lo..hi,
        (false, true) => 0.1..100.0,
        (false, false) => 0.0..1.0,
    };
    let fig = Figure {
        title,
        x_label,
        series: series.iter().map(|(name, bins)| (*name, points(bins, log_x))).collect(),
        x,
        log_x,
    };
    Ok(write_figure(path_stem, &fig)?)
}

/// Writes the two plots of a run's track metrics into `dir`: `efficiency_vs_pt` (log pT) and
/// `efficiency_vs_eta`, each as PNG and SVG, each with three series: primary targets (the
/// headline), all targets (secondaries included) and all reconstructable particles. Returns
/// the four paths.
pub fn plot_track_efficiency(dir: &Path, metrics: &TrackMetrics) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| Error::Io { path: dir.to_path_buf(), source: e })?;
    let pt = dir.join("efficiency_vs_pt");
    plot_efficiency(
        &pt,
        "Track efficiency vs pT",
        "pT [GeV]",
        &[
            (PRIMARY, &metrics.efficiency_primary_vs_pt),
            (TARGETS, &metrics.efficiency_vs_pt),
            (RECONSTRUCTABLE, &metrics.efficiency_all_vs_pt),
        ],
        true,
    )?;
    let eta = dir.join("efficiency_vs_eta");
    plot_efficiency(
        &eta,
        "Track efficiency vs η",
        "η",
        &[
            (PRIMARY, &metrics.efficiency_primary_vs_eta),
            (TARGETS, &metrics.efficiency_vs_eta),
            (RECONSTRUCTABLE, &metrics.efficiency_all_vs_eta),
        ],
        false,
    )?;
    Ok(vec![with_ext(&pt, "png"), with_ext(&pt, "svg"), with_ext(&eta, "png"), with_ext(&eta, "svg")])
}

/// What to draw.
struct Figure<'a> {
    title: &'a str,
    x_label: &'a str,
    series: Vec<(&'a str, Vec<Point>)>,
    x: Range<f64>,
    log_x: bool,
}

impl trackgnn_plot::Figure for Figure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, text: bool) -> std::result::Result<(), String> {
        let frame = Frame {
            title: self.title,
            x_label: self.x_label,
            y_label: "efficiency",
            x: self.x.clone(),
            y: 0.0..1.05,
            log_x: self.log_x,
            log_y: false,
            decimals: 3,
            // Mid-height: the curves sit near 1 (targets) and, over all pT, near 0.1.
            legend: (!self.series.is_empty()).then_some(SeriesLabelPosition::MiddleRight),
        };
        draw_chart(root, &frame, self, text)
    }
}

/// The ideal (efficiency 1), then each series' error bars and points.
impl Series for Figure<'_> {
    fn draw<'a, DB, X, Y>(&self, chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>) -> std::result::Result<(), String>
    where
        DB: DrawingBackend + 'a,
        X: Ranged<ValueType = f64> + ValueFormatter<f64>,
        Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        // The ideal: efficiency 1.
        chart.draw_series(LineSeries::new([(self.x.start, 1.0), (self.x.end, 1.0)], BLACK.mix(0.25))).map_err(err)?;
        for (i, (name, pts)) in self.series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let style = color.stroke_width(2);
            chart
                .draw_series(LineSeries::new(std::iter::empty(), style))
                .map_err(err)?
                .label(*name)
                .legend(move |(x, y)| marker((x + 12, y), i, color));
            let bars = pts.iter().flat_map(|p| {
                [
                    PathElement::new(vec![(p.x_lo, p.y), (p.x_hi, p.y)], style),
                    PathElement::new(vec![(p.x, p.y_lo), (p.x, p.y_hi)], style),
                ]
            });
            chart.draw_series(bars).map_err(err)?;
            chart.draw_series(pts.iter().map(|p| marker((p.x, p.y), i, color))).map_err(err)?;
        }
        Ok(())
    }
}

/// A point marker: filled dots for the first series, rings for the others, so that
/// coinciding points of two series both stay visible.
fn marker<C>(at: C, series: usize, color: RGBColor) -> Circle<C, i32> {
    if series == 0 { Circle::new(at, 4, color.filled()) } else { Circle::new(at, 6, color.stroke_width(2)) }
}

#[cfg(test)]
mod tests {
    use trackgnn_plot::testing::{check_files, no_temporaries};

    use super::*;
    use crate::metrics::{linear_edges, log_edges};

    fn metrics() -> TrackMetrics {
        let bins = |edges: &[f64]| -> Vec<EfficiencyBin> {
            edges.windows(2).enumerate().map(|(i, w)| (w[0], w[1], 10 + i as u64, 8 + (i as u64 % 3))).collect()
        };
        TrackMetrics {
            n_events: 1,
            efficiency_primary_vs_pt: bins(&log_edges(1.0, 100.0, 10)),
            efficiency_primary_vs_eta: bins(&linear_edges(-4.0, 4.0, 16)),
            efficiency_vs_pt: bins(&log_edges(1.0, 100.0, 10)),
            efficiency_all_vs_pt: bins(&log_edges(0.1, 100.0, 15)),
            efficiency_vs_eta: bins(&linear_edges(-4.0, 4.0, 16)),
            efficiency_all_vs_eta: bins(&linear_edges(-4.0, 4.0, 16)),
            ..Default::default()
        }
    }

    #[test]
    fn track_efficiency_plots_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let paths = plot_track_efficiency(dir.path(), &metrics()).unwrap();
        assert_eq!(paths.len(), 4);
        for stem in ["efficiency_vs_pt", "efficiency_vs_eta"] {
            let svg = check_files(&dir.path().join(stem));
            if font_available() {
                assert!(svg.contains("<text") && svg.contains("all reconstructable"), "labels and legend drawn");
                assert!(svg.contains("primary targets") && svg.contains("all targets"), "both efficiencies");
            }
        }
        assert!(paths.iter().all(|p| p.is_file()));
        no_temporaries(dir.path());
    }

    #[test]
    fn without_a_font_or_data_plots_are_still_written() {
        let dir = tempfile::tempdir().unwrap();
        let m = metrics();
        for (name, log) in [("log", true), ("lin", false)] {
            let stem = dir.path().join(name);
            let fig = Figure {
                title: "t",
                x_label: "x",
                series: vec![("a", points(&m.efficiency_vs_pt, log))],
                x: 1.0..100.0,
                log_x: log,
            };
            trackgnn_plot::write_figure_with(&stem, &fig, false).unwrap();
            assert!(!check_files(&stem).contains("<text"), "no text without a font");
        }
        plot_efficiency(&dir.path().join("empty"), "nothing", "x", &[], true).unwrap();
        check_files(&dir.path().join("empty"));
        let zeros = [(0.0, 1.0, 0, 0), (1.0, 2.0, 0, 0)];
        plot_efficiency(&dir.path().join("zeros"), "no particles", "pT", &[("a", &zeros[..])], true).unwrap();
        check_files(&dir.path().join("zeros"));
        no_temporaries(dir.path());
    }

    #[test]
    fn points_sit_at_bin_centres_with_binomial_errors() {
        let bins = [(1.0, 100.0, 4, 2), (-1.0, 1.0, 10, 10), (0.0, 1.0, 0, 0)];
        let p = points(&bins, true);
        assert_eq!(p.len(), 2, "empty bins are skipped");
        assert!((p[0].x - 10.0).abs() < 1e-12 && p[0].y == 0.5);
        assert!((p[0].y_hi - 0.75).abs() < 1e-12 && (p[0].y_lo - 0.25).abs() < 1e-12, "sqrt(0.25/4) = 0.25");
        assert_eq!((p[1].y, p[1].y_lo, p[1].y_hi), (1.0, 1.0, 1.0));
        assert_eq!(points(&bins[1..2], false)[0].x, 0.0);
    }

    #[test]
    fn uncreatable_directory_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("blocker"), b"a file, not a directory").unwrap();
        let target = dir.path().join("blocker/plots");
        let e = plot_track_efficiency(&target, &metrics()).unwrap_err();
        assert!(e.to_string().contains("blocker/plots"), "{e}");
        assert!(!target.exists());
    }
}
