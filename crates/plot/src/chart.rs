//! The chart both crates draw their figures in: a white background, a title, a mesh with
//! labelled axes (linear or log on either), the figure's series, and a legend.

use std::ops::Range;

use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;

use crate::{FAMILY, log_ticks, tick_label};

/// The frame of a chart: everything but its series.
#[derive(Clone, Debug)]
pub struct Frame<'a> {
    /// The title.
    pub title: &'a str,
    /// The x axis' label.
    pub x_label: &'a str,
    /// The y axis' label.
    pub y_label: &'a str,
    /// The x range.
    pub x: Range<f64>,
    /// The y range.
    pub y: Range<f64>,
    /// A log x axis (ticks by [`log_ticks`]).
    pub log_x: bool,
    /// A log y axis (ticks by [`log_ticks`]).
    pub log_y: bool,
    /// Significant decimals of the tick labels ([`tick_label`]).
    pub decimals: usize,
    /// Where the legend goes; `None` draws none.
    pub legend: Option<SeriesLabelPosition>,
}

/// What a chart holds: series drawn into the built chart, on any axes.
pub trait Series {
    /// Draws the series (with their legend entries) into `chart`, whose mesh is drawn.
    fn draw<'a, DB, X, Y>(&self, chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>) -> Result<(), String>
    where
        DB: DrawingBackend + 'a,
        X: Ranged<ValueType = f64> + ValueFormatter<f64>,
        Y: Ranged<ValueType = f64> + ValueFormatter<f64>;
}

/// Draws a chart on `root`: white background, `frame`'s title (with `text`), axes, mesh and
/// labels, then `series`, then the legend (with `text`). A [`Figure`](crate::Figure)'s `draw`.
pub fn draw_chart<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    frame: &Frame<'_>,
    series: &impl Series,
    text: bool,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let mut b = ChartBuilder::on(root);
    b.margin(20);
    if text {
        b.caption(frame.title, (FAMILY, 24)).x_label_area_size(50).y_label_area_size(80);
    }
    let log = |r: &Range<f64>| {
        let (labelled, light) = log_ticks(r);
        r.clone().log_scale().with_key_points(labelled).with_light_points(light)
    };
    let (x, y) = (frame.x.clone(), frame.y.clone());
    match (frame.log_x, frame.log_y) {
        (false, false) => fill(b.build_cartesian_2d(x, y).map_err(err)?, frame, series, text),
        (true, false) => fill(b.build_cartesian_2d(log(&x), y).map_err(err)?, frame, series, text),
        (false, true) => fill(b.build_cartesian_2d(x, log(&y)).map_err(err)?, frame, series, text),
        (true, true) => fill(b.build_cartesian_2d(log(&x), log(&y)).map_err(err)?, frame, series, text),
    }
}

/// Draws mesh, series and legend into a built chart.
fn fill<'a, DB, X, Y>(
    mut chart: ChartContext<'a, DB, Cartesian2d<X, Y>>,
    frame: &Frame<'_>,
    series: &impl Series,
    text: bool,
) -> Result<(), String>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let mut mesh = chart.configure_mesh();
    mesh.light_line_style(BLACK.mix(0.05));
    let label = |v: &f64| tick_label(*v, frame.decimals);
    if text {
        mesh.x_desc(frame.x_label)
            .y_desc(frame.y_label)
            .label_style((FAMILY, 16))
            .axis_desc_style((FAMILY, 18))
            .x_label_formatter(&label)
            .y_label_formatter(&label);
    }
    mesh.draw().map_err(err)?;
    series.draw(&mut chart)?;
    if let (true, Some(pos)) = (text, frame.legend.clone()) {
        chart
            .configure_series_labels()
            .position(pos)
            .label_font((FAMILY, 16))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .draw()
            .map_err(err)?;
    }
    Ok(())
}
