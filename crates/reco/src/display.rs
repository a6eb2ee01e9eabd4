//! An event display: one event's hits, the GNN's edges coloured by score and the tracks of
//! either method (GNN chain or CKF), each in the x–y and r–z views side by side, as PNG and
//! SVG; and the same event in Phoenix's JSON format ([`crate::phoenix`]).
//!
//! [`write_display`] writes into a directory, for event `N` (nine digits):
//! - `eventN-tracks.{png,svg}`: every hit (grey), and each track as a line through its hits
//!   in path order, a colour per track;
//! - `eventN-edges.{png,svg}` (methods with a graph): the graph's edges scoring at least
//!   [`DisplayConfig::min_edge_score`], coloured by score (dark blue 0 → yellow 1), the
//!   best drawn last;
//! - `eventN-phoenix.json`: [`PhoenixEvent`] of the same hits and tracks.
//!
//! A [`Region`] (ranges of x, y, z, r, φ, η) selects the hits shown in all three; an edge is
//! drawn when both its hits are in the region, a track through its hits in the region.
//!
//! ```
//! use trackgnn_reco::display::{DisplayConfig, DisplayEvent, Region, write_display};
//! use trackgnn_trackml::{Event, ModuleId};
//! let mut event = Event { event_id: 3, ..Default::default() };
//! for (i, r) in [30.0f32, 70.0, 115.0, 172.0].into_iter().enumerate() {
//!     event.hits.push(i as u64 + 1, [r, 0.2 * r, r], ModuleId::new(8, 2, 1));
//! }
//! let region: Region = "r=0:120".parse()?;
//! let config = DisplayConfig { region, ..DisplayConfig::new(3) };
//! let shown = DisplayEvent { event: &event, hit_tracks: &[1, 1, 1, 1], edges: None, fitted: &[], method: "CKF" };
//! let dir = tempfile::tempdir()?;
//! let files = write_display(dir.path(), &shown, &config)?;
//! assert_eq!(files.len(), 3); // tracks PNG and SVG, Phoenix JSON
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;
use serde::Serialize;
use trackgnn_graph::Graph;
use trackgnn_plot::{Frame, Series, draw_chart, with_ext, write_figure};
use trackgnn_trackml::Event;
use trackgnn_trackml::csv::EventFiles;

use crate::NO_TRACK;
use crate::error::{Error, Result};
use crate::kalman::FittedTrack;
use crate::phoenix::{PhoenixEvent, TrackPoints};

/// A part of the detector: a range per coordinate, `None` for all of it. Ranges include
/// their ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Region {
    /// x \[mm\].
    pub x: Option<[f64; 2]>,
    /// y \[mm\].
    pub y: Option<[f64; 2]>,
    /// z \[mm\].
    pub z: Option<[f64; 2]>,
    /// r = √(x² + y²) \[mm\].
    pub r: Option<[f64; 2]>,
    /// φ = atan2(y, x) \[rad\], in (−π, π].
    pub phi: Option<[f64; 2]>,
    /// η of the hit's position seen from the origin.
    pub eta: Option<[f64; 2]>,
}

impl Region {
    /// Whether position `p` \[mm\] is inside.
    pub fn contains(&self, p: [f64; 3]) -> bool {
        let r = p[0].hypot(p[1]);
        let inside = |range: Option<[f64; 2]>, v: f64| range.is_none_or(|[lo, hi]| (lo..=hi).contains(&v));
        inside(self.x, p[0])
            && inside(self.y, p[1])
            && inside(self.z, p[2])
            && inside(self.r, r)
            && inside(self.phi, p[1].atan2(p[0]))
            && inside(self.eta, (p[2] / r).asinh())
    }
}

/// `key=lo:hi` pairs separated by commas, keys `x`, `y`, `z`, `r`, `phi`, `eta`: e.g.
/// `phi=0:0.6,r=0:400`.
impl FromStr for Region {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Region, String> {
        let mut region = Region::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, range) = part.split_once('=').ok_or(format!("`{part}`: expected key=lo:hi"))?;
            let (lo, hi) = range.split_once(':').ok_or(format!("`{part}`: expected a range lo:hi"))?;
            let num = |v: &str| v.trim().parse::<f64>().map_err(|_| format!("`{part}`: `{v}` is not a number"));
            let (lo, hi) = (num(lo)?, num(hi)?);
            if lo.partial_cmp(&hi) != Some(std::cmp::Ordering::Less) {
                return Err(format!("`{part}`: the range is empty"));
            }
            let slot = match key.trim() {
                "x" => &mut region.x,
                "y" => &mut region.y,
                "z" => &mut region.z,
                "r" => &mut region.r,
                "phi" => &mut region.phi,
                "eta" => &mut region.eta,
                k => return Err(format!("`{k}`: not one of x, y, z, r, phi, eta")),
            };
            *slot = Some([lo, hi]);
        }
        Ok(region)
    }
}

/// What to display.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DisplayConfig {
    /// The event shown.
    pub event_id: u64,
    /// The part of the detector shown.
    pub region: Region,
    /// Edges scoring below this are not drawn.
    pub min_edge_score: f32,
    /// How the Phoenix file gives a track's shape.
    pub phoenix_tracks: TrackPoints,
}

impl DisplayConfig {
    /// Event `event_id`, all of it, edges scoring at least 0.1, Phoenix tracks by perigee.
    pub fn new(event_id: u64) -> DisplayConfig {
        DisplayConfig { event_id, region: Region::default(), min_edge_score: 0.1, phoenix_tracks: TrackPoints::Perigee }
    }

    /// Checks that the event is among `files`.
    ///
    /// # Errors
    /// [`Error::Config`] naming the event, the input's directory and its event ids.
    pub fn check_listed(&self, files: &[EventFiles]) -> Result<()> {
        if files.iter().any(|f| f.event_id == self.event_id) {
            return Ok(());
        }
        let dir = files.first().map(|f| f.dir.display().to_string()).unwrap_or_else(|| "the input".into());
        let ids = match (files.first(), files.last()) {
            (Some(a), Some(b)) => format!("ids {}-{}", a.event_id, b.event_id),
            _ => "none".to_string(),
        };
        Err(Error::config(
            "display",
            format!("event {} is not among the {} events of {dir} ({ids})", self.event_id, files.len()),
        ))
    }
}

/// The display's command-line flags (`reconstruct --display EVENT_ID ...`).
#[cfg(feature = "clap")]
#[derive(Clone, Debug, Default, clap::Args)]
pub struct DisplayArgs {
    /// Draw this event (its id): hits, edges coloured by score (GNN methods) and tracks, x–y
    /// and r–z, as PNG and SVG, and export it for Phoenix, into `OUT/display`.
    #[arg(long, value_name = "EVENT_ID")]
    pub display: Option<u64>,
    /// With `--display`: only this part of the detector, `key=lo:hi` pairs separated by
    /// commas, keys x, y, z, r (mm), phi (rad), eta; e.g. `phi=0:0.6,r=0:400`.
    #[arg(long, value_name = "REGION", requires = "display")]
    pub display_region: Option<Region>,
    /// With `--display`: edges scoring below this are not drawn.
    #[arg(long, value_name = "S", default_value_t = 0.1, requires = "display")]
    pub display_min_score: f32,
    /// With `--display`: tracks in the Phoenix file by their fitted perigee (Phoenix
    /// extrapolates it; the format's validator accepts it) or by their hits.
    #[arg(long, value_enum, default_value = "perigee", requires = "display")]
    pub phoenix_tracks: TrackPoints,
}

#[cfg(feature = "clap")]
impl DisplayArgs {
    /// The display asked for, if any.
    pub fn config(&self) -> Option<DisplayConfig> {
        self.display.map(|id| DisplayConfig {
            region: self.display_region.unwrap_or_default(),
            min_edge_score: self.display_min_score,
            phoenix_tracks: self.phoenix_tracks,
            ..DisplayConfig::new(id)
        })
    }
}

/// One reconstructed event, as shown.
#[derive(Clone, Copy, Debug)]
pub struct DisplayEvent<'a> {
    /// The event (its hits).
    pub event: &'a Event,
    /// A track id per hit of `event`, [`NO_TRACK`] for none.
    pub hit_tracks: &'a [u32],
    /// The graph and its edges' scores, for the methods that have one.
    pub edges: Option<(&'a Graph, &'a [f32])>,
    /// Fits of the tracks (by track id), for the Phoenix file's perigees.
    pub fitted: &'a [FittedTrack],
    /// The method's name in titles and the Phoenix collection (`GNN chain`, `CKF`).
    pub method: &'a str,
}

/// Writes the display of `shown` into `dir` (created if needed): the tracks' figure, the
/// edges' figure (with a graph) and the Phoenix file (module docs). Returns the paths.
///
/// # Errors
/// [`Error::Io`] naming the file or directory that cannot be written; [`Error::Config`] if
/// `hit_tracks` or the scores do not match the event or graph.
pub fn write_display(dir: &Path, shown: &DisplayEvent<'_>, config: &DisplayConfig) -> Result<Vec<PathBuf>> {
    let h = &shown.event.hits;
    if shown.hit_tracks.len() != h.len() {
        return Err(Error::config("display", format!("{} track ids for {} hits", shown.hit_tracks.len(), h.len())));
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let pos = |i: usize| [h.x[i], h.y[i], h.z[i]].map(f64::from);
    let shown_hits: Vec<usize> = (0..h.len()).filter(|&i| config.region.contains(pos(i))).collect();
    let mut tracks: BTreeMap<u32, Vec<[f64; 3]>> = BTreeMap::new();
    for &i in &shown_hits {
        if shown.hit_tracks[i] != NO_TRACK {
            tracks.entry(shown.hit_tracks[i]).or_default().push(pos(i));
        }
    }
    for t in tracks.values_mut() {
        t.sort_by(|a, b| norm(a).total_cmp(&norm(b)));
    }
    let hits: Vec<[f64; 3]> = shown_hits.iter().map(|&i| pos(i)).collect();
    let ranges = Ranges::of(&hits);
    let name = format!("event{:09}", shown.event.event_id);
    let mut files = Vec::new();

    let title = format!("{}, event {}: {} tracks", shown.method, shown.event.event_id, tracks.len());
    let stem = dir.join(format!("{name}-tracks"));
    let fig = ViewFigure { title, hits: &hits, ranges: ranges.clone(), content: Content::Tracks(tracks) };
    write_figure(&stem, &fig)?;
    files.extend([with_ext(&stem, "png"), with_ext(&stem, "svg")]);

    if let Some((graph, scores)) = shown.edges {
        let edges = shown_edges(shown.event, graph, scores, config)?;
        let title = format!(
            "{}, event {}: {} edges scoring ≥ {}",
            shown.method,
            shown.event.event_id,
            edges.len(),
            config.min_edge_score
        );
        let stem = dir.join(format!("{name}-edges"));
        let fig = ViewFigure { title, hits: &hits, ranges, content: Content::Edges(edges) };
        write_figure(&stem, &fig)?;
        files.extend([with_ext(&stem, "png"), with_ext(&stem, "svg")]);
    }

    let phoenix = PhoenixEvent::in_region(
        shown.event,
        shown.hit_tracks,
        shown.fitted,
        shown.method,
        config.phoenix_tracks,
        |p| config.region.contains(p),
    );
    let path = dir.join(format!("{name}-phoenix.json"));
    phoenix.write(&path)?;
    files.push(path);
    Ok(files)
}

/// The edges of `graph` to draw: both ends in the region, scoring at least the minimum, by
/// ascending score (the best drawn last, on top).
fn shown_edges(event: &Event, graph: &Graph, scores: &[f32], config: &DisplayConfig) -> Result<Vec<Edge>> {
    if scores.len() != graph.num_edges() {
        return Err(Error::config("display", format!("{} scores for {} edges", scores.len(), graph.num_edges())));
    }
    let h = &event.hits;
    let row: HashMap<u64, usize> = h.hit_id.iter().enumerate().map(|(i, &id)| (id, i)).collect();
    let node_pos = |n: u32| -> Option<[f64; 3]> {
        let &i = row.get(graph.hit_id.get(n as usize)?)?;
        Some([h.x[i], h.y[i], h.z[i]].map(f64::from))
    };
    let mut edges: Vec<Edge> = graph
        .src
        .iter()
        .zip(&graph.dst)
        .zip(scores)
        .filter(|&(_, &s)| s >= config.min_edge_score)
        .filter_map(|((&a, &b), &s)| Some((node_pos(a)?, node_pos(b)?, s)))
        .filter(|(a, b, _)| config.region.contains(*a) && config.region.contains(*b))
        .collect();
    edges.sort_by(|a, b| a.2.total_cmp(&b.2));
    Ok(edges)
}

/// Distance from the origin.
fn norm(p: &[f64; 3]) -> f64 {
    (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]).sqrt()
}

/// An edge: its two ends \[mm\] and score.
type Edge = ([f64; 3], [f64; 3], f32);

/// The axes of both views.
#[derive(Clone, Debug)]
struct Ranges {
    /// x and y (one span, so that circles stay round).
    x: Range<f64>,
    y: Range<f64>,
    /// z (the r–z view's horizontal axis).
    z: Range<f64>,
    /// r.
    r: Range<f64>,
}

impl Ranges {
    /// Around `hits`, with a margin; the whole TrackML detector without hits.
    fn of(hits: &[[f64; 3]]) -> Ranges {
        if hits.is_empty() {
            return Ranges { x: -1100.0..1100.0, y: -1100.0..1100.0, z: -3100.0..3100.0, r: 0.0..1100.0 };
        }
        let span = |v: &mut dyn Iterator<Item = f64>| {
            let (lo, hi) = v.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), x| (l.min(x), h.max(x)));
            let pad = 0.04 * (hi - lo).max(10.0);
            (lo - pad)..(hi + pad)
        };
        let x = span(&mut hits.iter().map(|p| p[0]));
        let y = span(&mut hits.iter().map(|p| p[1]));
        let half = 0.5 * (x.end - x.start).max(y.end - y.start);
        let centred = |r: Range<f64>| {
            let c = 0.5 * (r.start + r.end);
            (c - half)..(c + half)
        };
        let r = span(&mut hits.iter().map(|p| p[0].hypot(p[1])));
        Ranges { x: centred(x), y: centred(y), z: span(&mut hits.iter().map(|p| p[2])), r: r.start.max(0.0)..r.end }
    }
}

/// What a figure draws over the hits.
enum Content {
    /// Tracks by id, their hits in path order.
    Tracks(BTreeMap<u32, Vec<[f64; 3]>>),
    /// Edges by ascending score.
    Edges(Vec<Edge>),
}

/// Two views of one event: x–y (left) and r–z (right).
struct ViewFigure<'a> {
    title: String,
    hits: &'a [[f64; 3]],
    ranges: Ranges,
    content: Content,
}

/// One view's projection of a position.
#[derive(Clone, Copy)]
enum View {
    Xy,
    Rz,
}

impl View {
    fn project(self, p: &[f64; 3]) -> (f64, f64) {
        match self {
            View::Xy => (p[0], p[1]),
            View::Rz => (p[2], p[0].hypot(p[1])),
        }
    }
}

/// Track colours: matplotlib's `tab10`.
const TRACK_COLORS: [RGBColor; 10] = trackgnn_plot::TAB10;

/// The colour of an edge score in [0, 1]: viridis at 0, 0.25, 0.5, 0.75 and 1, linearly
/// between.
pub fn score_color(score: f32) -> RGBColor {
    const STOPS: [(f64, f64, f64); 5] =
        [(68.0, 1.0, 84.0), (59.0, 82.0, 139.0), (33.0, 145.0, 140.0), (94.0, 201.0, 98.0), (253.0, 231.0, 37.0)];
    let s = f64::from(score).clamp(0.0, 1.0) * 4.0;
    let i = (s.floor() as usize).min(3);
    let f = s - i as f64;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    let mix = |u: f64, v: f64| (u + f * (v - u)).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

impl trackgnn_plot::Figure for ViewFigure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, text: bool) -> std::result::Result<(), String> {
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (w, _) = root.dim_in_pixel();
        let (left, right) = root.split_horizontally(w / 2);
        let r = &self.ranges;
        let xy = Frame {
            title: &self.title,
            x_label: "x [mm]",
            y_label: "y [mm]",
            x: r.x.clone(),
            y: r.y.clone(),
            log_x: false,
            log_y: false,
            decimals: 1,
            legend: Some(SeriesLabelPosition::UpperLeft),
        };
        draw_chart(&left, &xy, &ViewSeries { fig: self, view: View::Xy }, text)?;
        let rz = Frame {
            title: "r–z",
            x_label: "z [mm]",
            y_label: "r [mm]",
            x: r.z.clone(),
            y: r.r.clone(),
            legend: None,
            ..xy
        };
        draw_chart(&right, &rz, &ViewSeries { fig: self, view: View::Rz }, text)
    }

    fn size(&self) -> (u32, u32) {
        (1800, 860)
    }
}

/// One view's series.
struct ViewSeries<'a> {
    fig: &'a ViewFigure<'a>,
    view: View,
}

impl Series for ViewSeries<'_> {
    fn draw<'a, DB, X, Y>(&self, chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>) -> std::result::Result<(), String>
    where
        DB: DrawingBackend + 'a,
        X: Ranged<ValueType = f64> + ValueFormatter<f64>,
        Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        let v = self.view;
        let grey = RGBColor(150, 150, 150);
        chart
            .draw_series(self.fig.hits.iter().map(|p| Circle::new(v.project(p), 1, grey.filled())))
            .map_err(err)?
            .label(format!("{} hits", self.fig.hits.len()))
            .legend(move |(x, y)| Circle::new((x + 10, y), 3, grey.filled()));
        match &self.fig.content {
            Content::Tracks(tracks) => {
                for (&id, hits) in tracks {
                    let c = TRACK_COLORS[id as usize % TRACK_COLORS.len()];
                    let line = hits.iter().map(|p| v.project(p));
                    chart.draw_series(LineSeries::new(line, c.stroke_width(1))).map_err(err)?;
                    chart.draw_series(hits.iter().map(|p| Circle::new(v.project(p), 2, c.filled()))).map_err(err)?;
                }
                let c = TRACK_COLORS[0];
                chart
                    .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
                    .map_err(err)?
                    .label(format!("{} tracks, a colour each", tracks.len()))
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
            }
            Content::Edges(edges) => {
                let lines =
                    edges.iter().map(|(a, b, s)| PathElement::new(vec![v.project(a), v.project(b)], score_color(*s)));
                chart.draw_series(lines).map_err(err)?;
                for s in [0.1f32, 0.5, 0.9, 1.0] {
                    let c = score_color(s);
                    chart
                        .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
                        .map_err(err)?
                        .label(format!("edge score {s}"))
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3)));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use trackgnn_plot::testing::{check_files, no_temporaries};
    use trackgnn_trackml::ModuleId;

    use super::*;

    /// 40 hits on two straight tracks (φ 0.3 and 2.5) and 10 noise hits at φ −2; a graph of
    /// consecutive hits on each track and 5 fake edges, scored 0.9 and 0.05.
    fn event() -> (Event, Vec<u32>, Graph, Vec<f32>) {
        let mut e = Event { event_id: 1004, ..Default::default() };
        let mut tracks = Vec::new();
        for (t, phi) in [(1u32, 0.3f64), (2, 2.5), (NO_TRACK, -2.0)] {
            let n = if t == NO_TRACK { 10 } else { 15 };
            for k in 0..n {
                let r = 30.0 + 60.0 * k as f64;
                let id = e.hits.len() as u64 + 1;
                e.hits.push(id, [r * phi.cos(), r * phi.sin(), 0.4 * r].map(|v| v as f32), ModuleId::new(8, 2, 1));
                tracks.push(t);
            }
        }
        let mut g = Graph { event_id: 1004, hit_id: e.hits.hit_id.clone(), ..Default::default() };
        let mut scores = Vec::new();
        for (a, b, s) in (0..14).chain(15..29).map(|i| (i, i + 1, 0.9)).chain((0..5).map(|i| (i, 30 + i, 0.05))) {
            g.src.push(a);
            g.dst.push(b);
            scores.push(s);
        }
        (e, tracks, g, scores)
    }

    #[test]
    fn the_display_writes_both_figures_and_the_phoenix_file() {
        let (e, tracks, g, scores) = event();
        let dir = tempfile::tempdir().unwrap();
        let shown =
            DisplayEvent { event: &e, hit_tracks: &tracks, edges: Some((&g, &scores)), fitted: &[], method: "GNN" };
        let config = DisplayConfig { phoenix_tracks: TrackPoints::Hits, ..DisplayConfig::new(1004) };
        let files = write_display(dir.path(), &shown, &config).unwrap();
        assert_eq!(files.len(), 5);
        assert!(files.iter().all(|f| f.is_file()), "{files:?}");
        let tracks_svg = check_files(&dir.path().join("event000001004-tracks"));
        let edges_svg = check_files(&dir.path().join("event000001004-edges"));
        // Fake edges (0.05) fall below the cut: 28 edges drawn, each a polyline in both views,
        // where the tracks' figure draws 2 tracks in both (the meshes are the same; with text,
        // 4 legend lines against 1).
        let lines = |svg: &str| svg.matches("<polyline").count() as i64;
        let legend = if trackgnn_plot::font_available() { 4 - 1 } else { 0 };
        assert_eq!(lines(&edges_svg) - lines(&tracks_svg), 2 * 28 - 2 * 2 + legend);
        if trackgnn_plot::font_available() {
            assert!(tracks_svg.contains("40 hits") && tracks_svg.contains("2 tracks"), "legend");
            assert!(edges_svg.contains("28 edges"), "title");
        }
        let p = PhoenixEvent::read(&dir.path().join("event000001004-phoenix.json")).unwrap();
        assert_eq!(p["event 1004"].tracks["GNN tracks"].len(), 2);
        no_temporaries(dir.path());
    }

    #[test]
    fn a_region_removes_the_hits_edges_and_tracks_outside_it() {
        let (e, tracks, g, scores) = event();
        let dir = tempfile::tempdir().unwrap();
        let region: Region = "phi=0:1, r=0:500".parse().unwrap();
        let shown =
            DisplayEvent { event: &e, hit_tracks: &tracks, edges: Some((&g, &scores)), fitted: &[], method: "GNN" };
        let config = DisplayConfig { region, phoenix_tracks: TrackPoints::Hits, ..DisplayConfig::new(1004) };
        write_display(dir.path(), &shown, &config).unwrap();
        // Track 1's hits at r ≤ 500: 30, 90, …, 450 (8 hits, 7 edges).
        let edges = shown_edges(&e, &g, &scores, &config).unwrap();
        assert_eq!(edges.len(), 7);
        let p = &PhoenixEvent::read(&dir.path().join("event000001004-phoenix.json")).unwrap()["event 1004"];
        assert_eq!((p.hits["hits on tracks"].len(), p.hits["hits on no track"].len()), (8, 0));
        assert_eq!(p.tracks["GNN tracks"].iter().map(|t| t.track_id).collect::<Vec<_>>(), [1]);
        if trackgnn_plot::font_available() {
            let svg = check_files(&dir.path().join("event000001004-tracks"));
            assert!(svg.contains("8 hits") && svg.contains("1 tracks"), "only the region's hits and tracks");
        }
    }

    #[test]
    fn regions_parse_and_refuse_bad_text() {
        let r: Region = "x=-10:10,eta=0.5:1.5".parse().unwrap();
        assert_eq!((r.x, r.eta, r.y), (Some([-10.0, 10.0]), Some([0.5, 1.5]), None));
        assert!(
            r.contains([0.0, 100.0, 100.0]) && !r.contains([0.0, 100.0, -100.0]) && !r.contains([20.0, 100.0, 100.0])
        );
        assert_eq!("".parse::<Region>().unwrap(), Region::default());
        for (bad, why) in [
            ("w=0:1", "not one of"),
            ("r=1:0", "empty"),
            ("r=a:2", "not a number"),
            ("r=nan:1", "empty"),
            ("r", "key=lo:hi"),
            ("r=1", "lo:hi"),
        ] {
            let e = bad.parse::<Region>().unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn an_unknown_event_or_mismatched_input_is_an_error() {
        let files: Vec<EventFiles> = (1001..1004).map(|id| EventFiles::new("/data/heldout", id)).collect();
        DisplayConfig::new(1002).check_listed(&files).unwrap();
        let e = DisplayConfig::new(5).check_listed(&files).unwrap_err().to_string();
        assert!(e.contains("event 5") && e.contains("/data/heldout") && e.contains("1001-1003"), "{e}");
        let (ev, tracks, g, scores) = event();
        let dir = tempfile::tempdir().unwrap();
        let short = DisplayEvent { event: &ev, hit_tracks: &tracks[1..], edges: None, fitted: &[], method: "CKF" };
        assert!(write_display(dir.path(), &short, &DisplayConfig::new(1004)).is_err());
        let bad = DisplayEvent {
            event: &ev,
            hit_tracks: &tracks,
            edges: Some((&g, &scores[1..])),
            fitted: &[],
            method: "GNN",
        };
        assert!(write_display(dir.path(), &bad, &DisplayConfig::new(1004)).unwrap_err().to_string().contains("scores"));
    }

    #[test]
    fn score_colours_run_from_viridis_dark_to_yellow() {
        assert_eq!(score_color(0.0), RGBColor(68, 1, 84));
        assert_eq!(score_color(1.0), RGBColor(253, 231, 37));
        assert_eq!(score_color(0.5), RGBColor(33, 145, 140));
        assert_eq!(score_color(-1.0), score_color(0.0));
    }
}
