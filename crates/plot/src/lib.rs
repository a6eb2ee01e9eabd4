//! Plot files, shared by training and reconstruction: the chart they draw in ([`draw_chart`]),
//! text drawn with a TrueType font found at
//! run time ([`font_available`]), and each figure written as `<stem>.png` and `<stem>.svg`,
//! each through a temporary sibling file and a rename, so a reader never sees half a plot.
//!
//! # Fonts
//! plotters (built with `ab_glyph`, without system font discovery) draws text only with a
//! font registered at run time. The first plot looks for a TrueType font: the file named by
//! `TRACKGNN_FONT`, else DejaVu Sans or Liberation Sans at their usual paths, else any `.ttf`
//! under `/usr/share/fonts` or `/usr/local/share/fonts` (a regular sans face preferred). With
//! none, plots are drawn without any text rather than failing.
//!
//! ```
//! use plotters::prelude::*;
//! use trackgnn_plot::{Figure, write_figure};
//!
//! /// A red square on white.
//! struct Square;
//! impl Figure for Square {
//!     fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, plotters::coord::Shift>, _text: bool) -> Result<(), String> {
//!         root.fill(&WHITE).map_err(|e| e.to_string())?;
//!         root.draw(&Rectangle::new([(100, 100), (300, 300)], RED.filled())).map_err(|e| e.to_string())
//!     }
//! }
//! let dir = tempfile::tempdir()?;
//! write_figure(&dir.path().join("square"), &Square)?;
//! assert!(dir.path().join("square.png").is_file() && dir.path().join("square.svg").is_file());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Not for: what the plots show (the training curves are drawn in `trackgnn-train`, the track
//! efficiencies in `trackgnn-reco`), or interactive plotting.

use std::fs;
use std::ops::Range;
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

mod chart;
mod font;

pub use chart::{Frame, Series, draw_chart};
pub use font::{FAMILY, font_available};

/// Image size in pixels (PNG) or user units (SVG).
pub const SIZE: (u32, u32) = (960, 640);

/// Line and track colours: matplotlib's `tab10` palette.
pub const TAB10: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Why a plot file could not be written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Writing or renaming the file failed.
    #[error("{}", path.display())]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Drawing failed.
    #[error("{}: cannot draw plot: {message}", path.display())]
    Draw {
        /// The file being drawn.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// A figure that draws itself on any plotters backend, with or without text.
pub trait Figure {
    /// Draws onto `root`; with `text` off, draws no text at all.
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, text: bool) -> Result<(), String>;

    /// The image's size in pixels (PNG) or user units (SVG): [`SIZE`] unless a figure needs
    /// another (e.g. two square views side by side).
    fn size(&self) -> (u32, u32) {
        SIZE
    }
}

/// `<stem>.<ext>`, keeping any dots already in the stem.
pub fn with_ext(stem: &Path, ext: &str) -> PathBuf {
    let mut s = stem.as_os_str().to_owned();
    s.push(".");
    s.push(ext);
    PathBuf::from(s)
}

/// A tick label with at most `decimals` decimals: integers without a fraction, plain decimals
/// in 1e-3 … 1e5 without trailing zeros, else scientific notation.
pub fn tick_label(v: f64, decimals: usize) -> String {
    let a = v.abs();
    if v == v.round() && a < 1e5 {
        format!("{v:.0}")
    } else if (1e-3..1e5).contains(&a) {
        let s = format!("{v:.decimals$}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        format!("{v:.1e}")
    }
}

/// The ticks of a log axis over `range`: `(labelled, light)`. Labelled ticks sit at 1, 2 and 5
/// times each power of ten inside the range (at every integer multiple when fewer than two of
/// those fall inside), light ones at every integer multiple. plotters' own log ticks crowd
/// labels below each power of ten and can draw one twice. Empty unless 0 < start < end.
pub fn log_ticks(range: &Range<f64>) -> (Vec<f64>, Vec<f64>) {
    let (lo, hi) = (range.start, range.end);
    if !(lo > 0.0 && hi > lo && hi.is_finite()) {
        return (Vec::new(), Vec::new());
    }
    // m·10^e parsed from its decimal text, so 0.3 is the double nearest 0.3, not 3 × 0.1.
    let value = |m: u32, e: i32| format!("{m}e{e}").parse::<f64>().expect("a decimal literal");
    let inside = |mantissas: &[u32]| -> Vec<f64> {
        (lo.log10().floor() as i32..=hi.log10().ceil() as i32)
            .flat_map(|e| mantissas.iter().map(move |&m| value(m, e)))
            .filter(|v| (lo..=hi).contains(v))
            .collect()
    };
    let every: Vec<u32> = (1..=9).collect();
    let light = inside(&every);
    let labelled = inside(&[1, 2, 5]);
    if labelled.len() >= 2 { (labelled, light) } else { (light.clone(), light) }
}

/// Checks for the tests of crates that write figures (feature `testing`).
#[cfg(feature = "testing")]
pub mod testing {
    use std::fs;
    use std::path::Path;

    use super::with_ext;

    /// Asserts that `<stem>.png` is a PNG and `<stem>.svg` an SVG; returns the SVG's text.
    pub fn check_files(stem: &Path) -> String {
        let png = fs::read(with_ext(stem, "png")).unwrap();
        assert!(png.len() > 1000 && png.starts_with(b"\x89PNG\r\n\x1a\n"), "{}: not a PNG", stem.display());
        let svg = fs::read_to_string(with_ext(stem, "svg")).unwrap();
        assert!(svg.contains("<svg") && svg.contains("</svg>"), "{}: not an SVG", stem.display());
        svg
    }

    /// Asserts that no temporary plot file is left in `dir`.
    pub fn no_temporaries(dir: &Path) {
        let names: Vec<String> =
            fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert!(names.iter().all(|n| !n.contains(".tmp-")), "{names:?}");
    }
}

/// A temporary sibling of `path` ([`trackgnn_trackml::atomic::temp_path`]) ending in the same
/// extension (the PNG encoder goes by it).
fn temp_sibling(path: &Path, ext: &str) -> PathBuf {
    with_ext(&trackgnn_trackml::atomic::temp_path(path), ext)
}

/// Writes `<stem>.png` and `<stem>.svg` of a figure, with text if a font is available. If
/// drawing with text fails (e.g. a font without the needed glyphs), draws again without.
pub fn write_figure(stem: &Path, fig: &impl Figure) -> Result<(), Error> {
    write_figure_with(stem, fig, font_available())
}

/// [`write_figure`] with text on or off.
pub fn write_figure_with(stem: &Path, fig: &impl Figure, text: bool) -> Result<(), Error> {
    let png = with_ext(stem, "png");
    let tmp = temp_sibling(&png, "png");
    let drawn = render_png(&tmp, fig, text).or_else(|e| if text { render_png(&tmp, fig, false) } else { Err(e) });
    finish(drawn, &tmp, &png)?;

    let svg_path = with_ext(stem, "svg");
    let tmp = temp_sibling(&svg_path, "svg");
    let svg = render_svg(fig, text).or_else(|e| if text { render_svg(fig, false) } else { Err(e) });
    let written = svg.and_then(|s| fs::write(&tmp, s).map_err(|e| e.to_string()));
    finish(written, &tmp, &svg_path)
}

/// Renames `tmp` to `path` after a successful render; removes it after a failed one.
fn finish(drawn: Result<(), String>, tmp: &Path, path: &Path) -> Result<(), Error> {
    match drawn {
        Ok(()) => fs::rename(tmp, path).map_err(|source| Error::Io { path: path.to_owned(), source }),
        Err(message) => {
            let _ = fs::remove_file(tmp);
            Err(Error::Draw { path: path.to_owned(), message })
        }
    }
}

fn render_png(path: &Path, fig: &impl Figure, text: bool) -> Result<(), String> {
    let root = BitMapBackend::new(path, fig.size()).into_drawing_area();
    fig.draw(&root, text)?;
    root.present().map_err(|e| e.to_string())
}

fn render_svg(fig: &impl Figure, text: bool) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, fig.size()).into_drawing_area();
        fig.draw(&root, text)?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Square;

    impl Figure for Square {
        fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, _text: bool) -> Result<(), String> {
            root.fill(&WHITE).map_err(|e| e.to_string())?;
            root.draw(&Rectangle::new([(10, 10), (50, 50)], BLUE.filled())).map_err(|e| e.to_string())
        }
    }

    struct Broken;

    impl Figure for Broken {
        fn draw<DB: DrawingBackend>(&self, _root: &DrawingArea<DB, Shift>, _text: bool) -> Result<(), String> {
            Err("no data".into())
        }
    }

    #[test]
    fn both_files_are_written_and_no_temporary_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let stem = dir.path().join("a.b");
        write_figure(&stem, &Square).unwrap();
        assert_eq!(with_ext(&stem, "png"), dir.path().join("a.b.png"));
        assert!(fs::read(with_ext(&stem, "png")).unwrap().starts_with(b"\x89PNG"));
        assert!(fs::read_to_string(with_ext(&stem, "svg")).unwrap().contains("<svg"));
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn log_ticks_label_one_two_five_per_decade_and_light_every_multiple() {
        let (labelled, light) = log_ticks(&(0.004..0.25));
        assert_eq!(labelled, [0.005, 0.01, 0.02, 0.05, 0.1, 0.2]);
        assert_eq!(light.len(), 6 + 9 + 2, "{light:?}");
        assert_eq!((light[0], light[light.len() - 1]), (0.004, 0.2));
        assert!(light.windows(2).all(|w| w[0] < w[1]), "{light:?}");
        // Fewer than two of 1, 2, 5 inside: every multiple is labelled.
        assert_eq!(log_ticks(&(0.055..0.095)).0, [0.06, 0.07, 0.08, 0.09]);
        assert_eq!(log_ticks(&(1.0..100.0)).0, [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]);
        for bad in [0.0..1.0, 1.0..1.0, 2.0..1.0, 1.0..f64::INFINITY, f64::NAN..1.0] {
            assert_eq!(log_ticks(&bad), (vec![], vec![]), "{bad:?}");
        }
    }

    #[test]
    fn tick_labels() {
        let t: Vec<String> = [0.0, 2.0, -3.0, 0.25, 0.001, 1.0 / 3.0, 2e-4, 1e6].map(|v| tick_label(v, 4)).into();
        assert_eq!(t, ["0", "2", "-3", "0.25", "0.001", "0.3333", "2.0e-4", "1.0e6"]);
        assert_eq!(tick_label(1.0 / 3.0, 3), "0.333");
        assert_eq!(tick_label(0.5, 3), "0.5");
    }

    #[test]
    fn a_failed_drawing_names_the_file_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let e = write_figure_with(&dir.path().join("x"), &Broken, false).unwrap_err();
        assert!(e.to_string().contains("x.png") && e.to_string().contains("no data"), "{e}");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
