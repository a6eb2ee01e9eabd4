//! Plots of a run, as PNG and SVG: lines against epoch ([`plot_series`], the loss figure
//! [`plot_loss`]) and ROC curves ([`plot_roc`]). Each call writes `<stem>.png` and `<stem>.svg`, each through a temporary
//! sibling file and a rename, so a reader never sees half a plot.
//!
//! # Fonts
//! Text needs a TrueType font found at run time ([`font_available`], see `trackgnn-plot`);
//! without one, plots are drawn without any text rather than failing.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;

use serde::Serialize;

use crate::error::Result;
use crate::{EpochRecord, RunDir};

use trackgnn_plot::{Frame, Series, draw_chart, write_figure};
pub use trackgnn_plot::{font_available, with_ext};

/// Line colours: the matplotlib `tab10` palette.
const COLORS: [RGBColor; 10] = trackgnn_plot::TAB10;

/// Series with at most this many points also get a marker on every point.
const MARKERS_UP_TO: usize = 60;

/// One epoch's point of a loss figure: (epoch, training loss, validation loss).
pub type EpochLoss = (u64, f64, f64);

/// The figure of a run's training and validation loss per epoch, log y: `<dir>/loss.png` and
/// `.svg`, the same for the GNN and the learned graph stages. `epochs` holds (epoch, training
/// loss, validation loss).
pub fn plot_loss(dir: &Path, epochs: &[EpochLoss]) -> Result<()> {
    plot_losses(&dir.join(crate::run_dir::LOSS_PLOT), &[("", epochs)])
}

/// The loss figure of a GNN run ([`plot_loss`] from its epoch records), with the auxiliary
/// target's training and validation loss (mean squared error of log10 pT on true edges) drawn
/// on the same axes when the run has one (`aux_pt_weight` > 0).
pub fn plot_gnn_loss(dir: &Path, history: &[EpochRecord]) -> Result<()> {
    let points = |f: &dyn Fn(&EpochRecord) -> f64| history.iter().map(|r| (r.epoch as f64, f(r))).collect::<Vec<_>>();
    let mut series = vec![("train", points(&|r| r.train_loss)), ("validation", points(&|r| r.val_loss))];
    if history.iter().any(|r| r.train_aux_loss.is_some()) {
        let nan = |v: Option<f64>| v.unwrap_or(f64::NAN);
        series.push(("train aux (MSE log10 pT)", points(&|r| nan(r.train_aux_loss))));
        series.push(("validation aux (MSE log10 pT)", points(&|r| nan(r.val_aux_loss))));
    }
    plot_series(&dir.join(crate::run_dir::LOSS_PLOT), "Loss", "epoch", "loss", &series, true)
}

/// The loss figure of [`plot_loss`] with several runs overlaid: each `(label, epochs)` draws
/// `<label> train` and `<label> validation` (just `train` and `validation` for an empty label).
/// Writes `<path_stem>.png` and `<path_stem>.svg`.
pub fn plot_losses(path_stem: &Path, runs: &[(&str, &[EpochLoss])]) -> Result<()> {
    let named = |label: &str, what: &str| if label.is_empty() { what.to_string() } else { format!("{label} {what}") };
    let names: Vec<[String; 2]> =
        runs.iter().map(|&(label, _)| [named(label, "train"), named(label, "validation")]).collect();
    let mut series = Vec::with_capacity(2 * runs.len());
    for (&(_, epochs), [train, validation]) in runs.iter().zip(&names) {
        let points = |f: fn(&EpochLoss) -> f64| epochs.iter().map(|e| (e.0 as f64, f(e))).collect::<Vec<_>>();
        series.push((train.as_str(), points(|e| e.1)));
        series.push((validation.as_str(), points(|e| e.2)));
    }
    plot_series(path_stem, "Loss", "epoch", "loss", &series, true)
}

/// What `trackgnn plot-loss` prints of one run, from its `metrics.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunLossSummary {
    /// The run directory's name (the label of its lines).
    pub run: String,
    /// Epochs recorded.
    pub epochs: usize,
    /// The epoch of the highest validation efficiency (`None` if no epoch has a finite one).
    pub best_epoch: Option<u64>,
    /// That epoch's validation edge efficiency, 0–1.
    pub best_efficiency: Option<f64>,
    /// That epoch's validation total purity, 0–1.
    pub total_purity_at_best: Option<f64>,
    /// Wall seconds of the epochs, training and validation (`None` if an epoch did not record it).
    pub wall_seconds: Option<f64>,
    /// Of which validation.
    pub val_seconds: Option<f64>,
}

impl RunLossSummary {
    /// The summary of `records`, labelled `run`.
    pub fn of_records(run: &str, records: &[EpochRecord]) -> RunLossSummary {
        let best = records.iter().filter(|r| r.efficiency.is_finite()).fold(None::<&EpochRecord>, |b, r| match b {
            Some(b) if b.efficiency >= r.efficiency => Some(b),
            _ => Some(r),
        });
        let total = |f: fn(&EpochRecord) -> f64| {
            let v: f64 = records.iter().map(f).sum();
            (!records.is_empty() && v.is_finite()).then_some(v)
        };
        RunLossSummary {
            run: run.to_string(),
            epochs: records.len(),
            best_epoch: best.map(|r| r.epoch),
            best_efficiency: best.map(|r| r.efficiency),
            total_purity_at_best: best.map(|r| r.total_purity).filter(|p| p.is_finite()),
            wall_seconds: total(|r| r.epoch_seconds),
            val_seconds: total(|r| r.val_seconds),
        }
    }
}

/// One line of text: epochs, the best validation efficiency with its total purity, the wall time.
impl fmt::Display for RunLossSummary {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(out, "{:<24} {:>4} epochs  ", self.run, self.epochs)?;
        match (self.best_epoch, self.best_efficiency) {
            (Some(epoch), Some(eff)) => {
                let purity = self.total_purity_at_best.map_or("-".to_string(), |p| format!("{:.2}%", 100.0 * p));
                write!(out, "best validation efficiency {:.2}% (epoch {epoch}), total purity {purity}  ", 100.0 * eff)?
            }
            _ => write!(out, "no validation efficiency recorded  ")?,
        }
        match (self.wall_seconds, self.val_seconds) {
            (Some(w), Some(v)) => write!(out, "wall {w:.0} s (training {:.0} s, validation {v:.0} s)", w - v),
            (Some(w), None) => write!(out, "wall {w:.0} s"),
            _ => write!(out, "wall time not recorded"),
        }
    }
}

/// `trackgnn plot-loss`: the training and validation loss per epoch of each run directory in
/// `runs`, overlaid in one figure labelled by the directories' names (`<out_stem>.png` and
/// `.svg`, each written atomically), and each run's [`RunLossSummary`].
///
/// # Errors
/// A directory that is not a run (naming it), an unreadable `metrics.jsonl` (naming the file
/// and line), or a plot that cannot be written; nothing is written before every run is read.
pub fn plot_runs_loss(out_stem: &Path, runs: &[PathBuf]) -> Result<Vec<RunLossSummary>> {
    let mut read = Vec::new();
    for root in runs {
        let run = RunDir::open(root)?;
        let label = root
            .canonicalize()
            .ok()
            .as_deref()
            .and_then(Path::file_name)
            .map_or_else(|| root.display().to_string(), |n| n.to_string_lossy().into_owned());
        read.push((label, run.read_metrics()?));
    }
    let epochs: Vec<(String, Vec<EpochLoss>)> = read
        .iter()
        .map(|(label, recs)| (label.clone(), recs.iter().map(|r| (r.epoch, r.train_loss, r.val_loss)).collect()))
        .collect();
    let runs_epochs: Vec<(&str, &[EpochLoss])> = epochs.iter().map(|(l, e)| (l.as_str(), &e[..])).collect();
    plot_losses(out_stem, &runs_epochs)?;
    Ok(read.iter().map(|(label, recs)| RunLossSummary::of_records(label, recs)).collect())
}

/// Plots named lines, e.g. losses or metrics against epoch, with a legend. Points with a
/// non-finite coordinate (or, with `log_y`, a non-positive y) are skipped and break the
/// line; empty series are allowed. Writes `<path_stem>.png` and `<path_stem>.svg`.
pub fn plot_series(
    path_stem: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(&str, Vec<(f64, f64)>)],
    log_y: bool,
) -> Result<()> {
    let fig = Figure::new(title, x_label, y_label, series, log_y, false);
    Ok(write_figure(path_stem, &fig)?)
}

/// Plots ROC curves (`(false-positive rate, true-positive rate)` points, e.g. from
/// [`roc_curve`](crate::metrics::roc_curve)) on the unit square with the diagonal of a
/// random classifier. Writes `<path_stem>.png` and `<path_stem>.svg`.
pub fn plot_roc(path_stem: &Path, curves: &[(&str, Vec<(f64, f64)>)]) -> Result<()> {
    let mut fig = Figure::new("ROC curve", "False positive rate", "True positive rate", curves, false, true);
    fig.x = 0.0..1.0;
    fig.y = 0.0..1.0;
    Ok(write_figure(path_stem, &fig)?)
}

/// A run of drawable points of one series (a non-drawable point ends a run).
type Run = Vec<(f64, f64)>;

/// What to draw: the cleaned-up series and the axes.
struct Figure<'a> {
    title: &'a str,
    x_label: &'a str,
    y_label: &'a str,
    /// Name and the drawable runs of points of each series.
    series: Vec<(&'a str, Vec<Run>)>,
    x: Range<f64>,
    y: Range<f64>,
    log_y: bool,
    /// Draw the diagonal y = x (ROC).
    diagonal: bool,
}

impl<'a> Figure<'a> {
    fn new(
        title: &'a str,
        x_label: &'a str,
        y_label: &'a str,
        series: &'a [(&'a str, Vec<(f64, f64)>)],
        log_y: bool,
        diagonal: bool,
    ) -> Self {
        let ok = |&(x, y): &(f64, f64)| x.is_finite() && y.is_finite() && (!log_y || y > 0.0);
        let series: Vec<(&str, Vec<Run>)> = series
            .iter()
            .map(|(name, pts)| {
                let runs = pts.split(|p| !ok(p)).filter(|r| !r.is_empty()).map(<[_]>::to_vec).collect();
                (*name, runs)
            })
            .collect();
        let all = || series.iter().flat_map(|(_, runs)| runs.iter().flatten());
        let x = padded(all().map(|p| p.0), false);
        let y = padded(all().map(|p| p.1), log_y);
        Figure { title, x_label, y_label, series, x, y, log_y, diagonal }
    }
}

/// The range of `vals` with a margin: 5 % on a linear axis, a factor 1.5 on a log axis;
/// (0, 1) or (1e-3, 1) when empty, widened when all values are equal.
fn padded(vals: impl Iterator<Item = f64>, log: bool) -> Range<f64> {
    let (lo, hi) = vals.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| (l.min(v), h.max(v)));
    match (lo <= hi, log) {
        (false, false) => 0.0..1.0,
        (false, true) => 1e-3..1.0,
        (true, true) => lo / 1.5..hi * 1.5,
        (true, false) if lo == hi => lo - 0.5 * lo.abs().max(1.0)..hi + 0.5 * hi.abs().max(1.0),
        (true, false) => {
            let m = 0.05 * (hi - lo);
            lo - m..hi + m
        }
    }
}

impl trackgnn_plot::Figure for Figure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, text: bool) -> std::result::Result<(), String> {
        let frame = Frame {
            title: self.title,
            x_label: self.x_label,
            y_label: self.y_label,
            x: self.x.clone(),
            y: self.y.clone(),
            log_x: false,
            log_y: self.log_y,
            decimals: 4,
            legend: (!self.series.is_empty()).then(|| legend_corner(self)),
        };
        draw_chart(root, &frame, self, text)
    }
}

/// Lines and markers (and the diagonal of a ROC plot).
impl Series for Figure<'_> {
    fn draw<'a, DB, X, Y>(&self, chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>) -> std::result::Result<(), String>
    where
        DB: DrawingBackend + 'a,
        X: Ranged<ValueType = f64> + ValueFormatter<f64>,
        Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        if self.diagonal {
            chart.draw_series(LineSeries::new([(0.0, 0.0), (1.0, 1.0)], BLACK.mix(0.3))).map_err(err)?;
        }
        for (i, (name, runs)) in self.series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let style = color.stroke_width(2);
            // An empty labelled series carries the legend entry, so that a series without a
            // drawable point is still listed.
            chart
                .draw_series(LineSeries::new(std::iter::empty(), style))
                .map_err(err)?
                .label(*name)
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 24, y)], style));
            for run in runs {
                chart.draw_series(LineSeries::new(run.iter().copied(), style)).map_err(err)?;
            }
            if runs.iter().map(Vec::len).sum::<usize>() <= MARKERS_UP_TO {
                let dots = runs.iter().flatten().map(|&p| Circle::new(p, 3, color.filled()));
                chart.draw_series(dots).map_err(err)?;
            }
        }
        Ok(())
    }
}

/// The corner for the legend with the fewest line points (and midpoints) under it, in the
/// order upper right, lower right, upper left, lower left on ties.
fn legend_corner(fig: &Figure<'_>) -> SeriesLabelPosition {
    let norm = |v: f64, r: &Range<f64>, log: bool| {
        if log { (v.ln() - r.start.ln()) / (r.end.ln() - r.start.ln()) } else { (v - r.start) / (r.end - r.start) }
    };
    let mut pts: Vec<(f64, f64)> = Vec::new();
    for run in fig.series.iter().flat_map(|(_, runs)| runs) {
        let n: Vec<(f64, f64)> =
            run.iter().map(|&(x, y)| (norm(x, &fig.x, false), norm(y, &fig.y, fig.log_y))).collect();
        pts.extend(&n);
        pts.extend(n.windows(2).map(|w| ((w[0].0 + w[1].0) / 2.0, (w[0].1 + w[1].1) / 2.0)));
    }
    if fig.diagonal {
        pts.extend((0..=20).map(|i| (i as f64 / 20.0, i as f64 / 20.0)));
    }
    let corners = [
        (SeriesLabelPosition::UpperRight, true, true),
        (SeriesLabelPosition::LowerRight, true, false),
        (SeriesLabelPosition::UpperLeft, false, true),
        (SeriesLabelPosition::LowerLeft, false, false),
    ];
    let under = |right: bool, upper: bool| {
        let in_x = |x: f64| if right { x > 0.6 } else { x < 0.4 };
        let in_y = |y: f64| if upper { y > 0.7 } else { y < 0.3 };
        pts.iter().filter(|&&(x, y)| in_x(x) && in_y(y)).count()
    };
    let best = corners.iter().min_by_key(|&&(_, r, u)| under(r, u)).expect("four corners");
    best.0.clone()
}

#[cfg(test)]
mod tests {
    use trackgnn_plot::testing::{check_files, no_temporaries};

    use super::*;

    fn losses() -> Vec<(&'static str, Vec<(f64, f64)>)> {
        let train = (0..20).map(|e| (e as f64, 1.0 / (e as f64 + 1.0))).collect();
        let mut val: Vec<(f64, f64)> = (0..20).map(|e| (e as f64, 1.2 / (e as f64 + 1.0))).collect();
        val[5].1 = f64::NAN;
        val[9].1 = f64::INFINITY;
        val[12].1 = 0.0; // skipped on a log axis
        vec![("train", train), ("validation", val), ("empty", Vec::new())]
    }

    #[test]
    fn series_plots_are_written_with_text() {
        let dir = tempfile::tempdir().unwrap();
        let stem = dir.path().join("loss.v1");
        plot_series(&stem, "Loss", "epoch", "BCE loss", &losses(), true).unwrap();
        let svg = check_files(&stem);
        if font_available() {
            assert!(svg.contains("<text") && svg.contains("validation"), "title, labels and legend drawn");
        }
        plot_series(&dir.path().join("lin"), "Metrics", "epoch", "fraction", &losses(), false).unwrap();
        check_files(&dir.path().join("lin"));
        no_temporaries(dir.path());
    }

    #[test]
    fn a_log_axis_labels_one_two_five_per_decade_once_each() {
        if !font_available() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let stem = dir.path().join("loss");
        let falling = [("a", (0..26).map(|e| (e as f64, 0.17 * 0.88f64.powi(e))).collect())];
        plot_series(&stem, "Loss", "epoch", "loss", &falling, true).unwrap();
        let svg = check_files(&stem);
        let labels: Vec<&str> =
            svg.split("<text").skip(1).filter_map(|t| Some(t.split('>').nth(1)?.split('<').next()?.trim())).collect();
        for want in ["0.005", "0.01", "0.02", "0.05", "0.1", "0.2"] {
            assert_eq!(labels.iter().filter(|&&l| l == want).count(), 1, "{want} once in {labels:?}");
        }
        for crowded in ["0.09", "0.08", "0.07", "0.06", "0.04", "0.03"] {
            assert!(!labels.contains(&crowded), "{crowded} in {labels:?}");
        }
    }

    #[test]
    fn without_a_font_plots_are_written_without_text() {
        let dir = tempfile::tempdir().unwrap();
        let s = losses();
        for (name, log) in [("log", true), ("lin", false)] {
            let stem = dir.path().join(name);
            trackgnn_plot::write_figure_with(&stem, &Figure::new("t", "x", "y", &s, log, false), false).unwrap();
            let svg = check_files(&stem);
            assert!(!svg.contains("<text"), "no text without a font");
        }
        let roc = [("gnn", vec![(0.0, 0.0), (0.1, 0.9), (1.0, 1.0)])];
        let stem = dir.path().join("roc");
        trackgnn_plot::write_figure_with(&stem, &Figure::new("ROC", "fpr", "tpr", &roc, false, true), false).unwrap();
        check_files(&stem);
        no_temporaries(dir.path());
    }

    #[test]
    fn empty_and_degenerate_inputs_still_plot() {
        let dir = tempfile::tempdir().unwrap();
        plot_series(&dir.path().join("none"), "nothing", "x", "y", &[], false).unwrap();
        check_files(&dir.path().join("none"));
        let bad = [("nan", vec![(f64::NAN, 1.0), (1.0, f64::NEG_INFINITY)]), ("one", vec![(3.0, 2.0)])];
        plot_series(&dir.path().join("bad"), "bad", "x", "y", &bad, true).unwrap();
        check_files(&dir.path().join("bad"));
        plot_roc(&dir.path().join("roc"), &[("a", vec![(0.0, 0.0), (0.2, 0.8), (1.0, 1.0)]), ("b", vec![])]).unwrap();
        check_files(&dir.path().join("roc"));
    }

    #[test]
    fn ranges_skip_bad_points_and_widen_flat_data() {
        let s = [("a", vec![(0.0, 5.0), (f64::NAN, 100.0), (2.0, 5.0)])];
        let f = Figure::new("", "", "", &s, false, false);
        assert_eq!(f.series[0].1.len(), 2, "the NaN point breaks the line");
        assert!(f.x.start < 0.0 && f.x.end > 2.0 && f.x.end < 2.2);
        assert_eq!(f.y, 2.5..7.5);
        let g = Figure::new("", "", "", &s, true, false);
        assert!(g.y.start > 0.0);
        assert_eq!(padded(std::iter::empty(), true), 1e-3..1.0);
    }

    #[test]
    fn legend_avoids_the_lines() {
        let rising = [("a", (0..20).map(|e| (e as f64, 1.0 - 1.0 / (e as f64 + 1.0))).collect())];
        let f = Figure::new("", "", "", &rising, false, false);
        assert!(matches!(legend_corner(&f), SeriesLabelPosition::LowerRight));
        let falling = [("a", (0..20).map(|e| (e as f64, 1.0 / (e as f64 + 1.0))).collect())];
        let f = Figure::new("", "", "", &falling, true, false);
        assert!(matches!(legend_corner(&f), SeriesLabelPosition::UpperRight));
        let roc = [("a", vec![(0.0, 0.0), (0.0, 0.8), (0.2, 0.95), (1.0, 1.0)])];
        let mut f = Figure::new("", "", "", &roc, false, true);
        (f.x, f.y) = (0.0..1.0, 0.0..1.0);
        assert!(matches!(legend_corner(&f), SeriesLabelPosition::LowerRight));
    }

    #[test]
    fn missing_directory_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let stem = dir.path().join("no/such/dir/loss");
        let e = plot_series(&stem, "t", "x", "y", &losses(), false).unwrap_err();
        assert!(e.to_string().contains("loss.png"), "{e}");
    }

    /// A run directory `name` under `dir` whose metrics.jsonl holds `(train, val, eff, total
    /// purity, epoch seconds)` per epoch (and a config.toml, which makes it a run).
    fn tiny_run(dir: &Path, name: &str, epochs: &[(f64, f64, f64, f64, f64)]) -> PathBuf {
        let root = dir.join(name);
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("config.toml"), "").unwrap();
        let mut log = crate::MetricsLog::create(&root).unwrap();
        for (i, &(train_loss, val_loss, efficiency, total_purity, epoch_seconds)) in epochs.iter().enumerate() {
            let val_seconds = epoch_seconds / 4.0;
            let r = EpochRecord {
                epoch: i as u64,
                train_loss,
                val_loss,
                efficiency,
                total_purity,
                epoch_seconds,
                val_seconds,
                ..EpochRecord::default()
            };
            log.append(&r).unwrap();
        }
        root
    }

    #[test]
    fn two_runs_losses_overlay_with_a_summary_each() {
        let dir = tempfile::tempdir().unwrap();
        let f32_run = tiny_run(dir.path(), "ref_f32", &[(0.5, 0.6, 0.90, 0.80, 8.0), (0.3, 0.4, 0.97, 0.95, 8.0)]);
        let bf16_run = tiny_run(
            dir.path(),
            "ref_bf16",
            &[(0.5, 0.6, 0.91, 0.81, 6.0), (0.3, 0.4, 0.99, 0.93, 6.0), (0.2, 0.45, 0.98, 0.97, f64::NAN)],
        );
        std::fs::create_dir(dir.path().join("out")).unwrap();
        let stem = dir.path().join("out/losses");
        // The label is the directory's name, also when given with a trailing slash or `..`.
        let bf16_arg = PathBuf::from(format!("{}/../{}/", f32_run.display(), bf16_run.file_name().unwrap().display()));
        let s = plot_runs_loss(&stem, &[f32_run, bf16_arg]).unwrap();
        let svg = check_files(&stem);
        if font_available() {
            for label in ["ref_f32 train", "ref_f32 validation", "ref_bf16 train", "ref_bf16 validation"] {
                assert!(svg.contains(label), "legend names {label}");
            }
        }
        no_temporaries(&dir.path().join("out"));
        assert_eq!(s[0].run, "ref_f32");
        assert_eq!(
            (s[0].epochs, s[0].best_epoch, s[0].best_efficiency, s[0].total_purity_at_best),
            (2, Some(1), Some(0.97), Some(0.95))
        );
        assert_eq!((s[0].wall_seconds, s[0].val_seconds), (Some(16.0), Some(4.0)));
        // The best efficiency is epoch 1's, with its own purity (not the highest purity, epoch 2's).
        assert_eq!(s[1].run, "ref_bf16");
        assert_eq!((s[1].best_epoch, s[1].total_purity_at_best), (Some(1), Some(0.93)));
        assert_eq!(s[1].wall_seconds, None, "an epoch without its wall time");
        let text = format!("{}\n{}", s[0], s[1]);
        assert!(text.contains("best validation efficiency 97.00% (epoch 1), total purity 95.00%"), "{text}");
        assert!(
            text.contains("wall 16 s (training 12 s, validation 4 s)") && text.contains("wall time not recorded"),
            "{text}"
        );
    }

    #[test]
    fn a_missing_run_is_named_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let run = tiny_run(dir.path(), "a", &[(0.5, 0.6, 0.9, 0.8, 1.0)]);
        let missing = dir.path().join("no_such_run");
        let stem = dir.path().join("losses");
        let e = plot_runs_loss(&stem, &[run.clone(), missing]).unwrap_err().to_string();
        assert!(e.contains("no_such_run") && e.contains("no such run directory"), "{e}");
        assert!(!trackgnn_plot::with_ext(&stem, "png").exists() && !trackgnn_plot::with_ext(&stem, "svg").exists());
        std::fs::write(run.join("metrics.jsonl"), "{not json\n").unwrap();
        let e = plot_runs_loss(&stem, &[run]).unwrap_err().to_string();
        assert!(e.contains("metrics.jsonl:1"), "{e}");
        assert!(RunLossSummary::of_records("x", &[]).to_string().contains("no validation efficiency"));
    }
}
