//! Writing a generated data set: events drawn in parallel and written as TrackML CSV, with
//! what each cost and contains ([`write_events`], summarised by [`DataSetFigures`]), the
//! settings recorded beside them ([`RunRecord`], `simulation.toml`) and what a run reports
//! ([`DataSetReport`]).

use std::fmt;
use std::path::Path;
use std::time::Instant;

use rayon::prelude::*;
use serde::Serialize;
use trackgnn_trackml::Result;
use trackgnn_trackml::csv::write_event;

use crate::{Generator, SimConfig};

/// The file, beside the events, that records how a data set was generated ([`RunRecord`]).
pub const RECORD_FILE: &str = "simulation.toml";

/// How a data set was generated: written as [`RECORD_FILE`] in its directory.
#[derive(Clone, Debug, Serialize)]
pub struct RunRecord<'a> {
    /// The seed of the data set.
    pub seed: u64,
    /// The first event's number.
    pub first_event: u64,
    /// The number of events.
    pub events: u64,
    /// Whether the files are gzipped.
    pub gzip: bool,
    /// The geometry: a detectors.csv, or "built-in TrackML".
    pub detector: String,
    /// The generator settings.
    pub config: &'a SimConfig,
}

impl RunRecord<'_> {
    /// The `detector` of a record: the geometry file's path, or the built-in geometry.
    pub fn detector_name(file: Option<&Path>) -> String {
        file.map_or("built-in TrackML".into(), |p| p.display().to_string())
    }

    /// Writes the record as [`RECORD_FILE`] into `out` (atomically).
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn write(&self, out: &Path) -> Result<()> {
        let path = out.join(RECORD_FILE);
        let text = toml::to_string(self).map_err(|e| trackgnn_trackml::Error::io(&path, std::io::Error::other(e)))?;
        trackgnn_trackml::atomic::write(&path, text.as_bytes()).map_err(|e| trackgnn_trackml::Error::io(&path, e))
    }
}

/// A generated data set as reported (one JSON object, or two lines of text).
#[derive(Clone, Debug, Serialize)]
pub struct DataSetReport<'a> {
    /// The directory of the events.
    pub out: &'a Path,
    /// Events written.
    pub events: usize,
    /// The seed of the data set.
    pub seed: u64,
    /// Worker threads.
    pub threads: usize,
    /// Whether the files are gzipped.
    pub gzip: bool,
    /// The figures per event.
    #[serde(flatten)]
    pub figures: DataSetFigures,
    /// Wall seconds of the whole run.
    pub wall_seconds: f64,
}

impl fmt::Display for DataSetReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = &self.figures;
        writeln!(
            f,
            "{} events in {} ({} threads, {:.2} s wall): {:.0} hits and {:.0} particles with hits per event",
            self.events,
            self.out.display(),
            self.threads,
            self.wall_seconds,
            d.hits_per_event,
            d.particles_with_hits_per_event
        )?;
        writeln!(
            f,
            "per event: generation {:.3} s, writing{} {:.3} s; {:.1} MB written",
            d.generate_seconds_per_event,
            if self.gzip { " (gzip)" } else { "" },
            d.write_seconds_per_event,
            d.bytes_written as f64 / 1e6
        )
    }
}

/// What one generated event cost and contains.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EventFigures {
    /// Hits.
    pub hits: usize,
    /// Particles.
    pub particles: usize,
    /// Particles with at least one hit.
    pub particles_with_hits: usize,
    /// Seconds to generate it.
    pub generate_seconds: f64,
    /// Seconds to write it.
    pub write_seconds: f64,
    /// Bytes written.
    pub bytes: u64,
}

/// Generates event `id` of data set `seed` and writes it into `out` (`.csv.gz` if `gzip`).
pub fn write_generated_event(g: &Generator, seed: u64, id: u64, out: &Path, gzip: bool) -> Result<EventFigures> {
    let t = Instant::now();
    let (event, _) = g.event(seed, id);
    let generate_seconds = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let stats = write_event(out, &event, gzip)?;
    let write_seconds = t.elapsed().as_secs_f64();
    let parts = event.particles.as_ref().expect("generated events have particles");
    Ok(EventFigures {
        hits: event.hits.len(),
        particles: parts.len(),
        particles_with_hits: parts.nhits.iter().filter(|&&n| n > 0).count(),
        generate_seconds,
        write_seconds,
        bytes: stats.bytes_written,
    })
}

/// Generates and writes the events `ids` of data set `seed` in parallel (in the current rayon
/// pool); `done()` is called after each event. The bytes do not depend on the thread count.
pub fn write_events(
    g: &Generator,
    seed: u64,
    ids: &[u64],
    out: &Path,
    gzip: bool,
    done: &(dyn Fn() + Sync),
) -> Result<Vec<EventFigures>> {
    let results: Vec<Result<EventFigures>> = ids
        .par_iter()
        .map(|&id| {
            let r = write_generated_event(g, seed, id, out, gzip);
            done();
            r
        })
        .collect();
    results.into_iter().collect()
}

/// Means per event over a data set written by [`write_events`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DataSetFigures {
    /// Hits per event.
    pub hits_per_event: f64,
    /// Particles per event.
    pub particles_per_event: f64,
    /// Particles with hits per event.
    pub particles_with_hits_per_event: f64,
    /// Generation seconds per event.
    pub generate_seconds_per_event: f64,
    /// Writing seconds per event.
    pub write_seconds_per_event: f64,
    /// Bytes written in all.
    pub bytes_written: u64,
}

impl DataSetFigures {
    /// The means of `events`.
    pub fn of(events: &[EventFigures]) -> DataSetFigures {
        let n = events.len() as f64;
        let mean = |g: fn(&EventFigures) -> f64| events.iter().map(g).sum::<f64>() / n;
        DataSetFigures {
            hits_per_event: mean(|e| e.hits as f64),
            particles_per_event: mean(|e| e.particles as f64),
            particles_with_hits_per_event: mean(|e| e.particles_with_hits as f64),
            generate_seconds_per_event: mean(|e| e.generate_seconds),
            write_seconds_per_event: mean(|e| e.write_seconds),
            bytes_written: events.iter().map(|e| e.bytes).sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use trackgnn_trackml::Detector;
    use trackgnn_trackml::csv::{EventFiles, ReadOptions, read_event};

    use super::*;
    use crate::SimConfig;

    #[test]
    fn writes_every_event_and_sums_the_figures() {
        let dir = tempfile::tempdir().unwrap();
        let g = Generator::new(Detector::trackml(), SimConfig { pileup: 2.0, ..SimConfig::default() });
        let count = std::sync::atomic::AtomicUsize::new(0);
        let done = || {
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        };
        let figures = write_events(&g, 5, &[3, 4], dir.path(), false, &done).unwrap();
        assert_eq!((figures.len(), count.into_inner()), (2, 2));
        let back = read_event(&EventFiles::new(dir.path(), 4), ReadOptions::default()).unwrap();
        assert_eq!(back.hits.len(), figures[1].hits);
        let d = DataSetFigures::of(&figures);
        assert_eq!(d.bytes_written, figures[0].bytes + figures[1].bytes);
        assert_eq!(d.hits_per_event, (figures[0].hits + figures[1].hits) as f64 / 2.0);
        assert!(figures[0].particles_with_hits <= figures[0].particles);
    }

    #[test]
    fn a_data_set_records_its_settings_and_reports_its_figures() {
        let dir = tempfile::tempdir().unwrap();
        let config = SimConfig::default();
        let record = RunRecord {
            seed: 3,
            first_event: 1,
            events: 2,
            gzip: true,
            detector: RunRecord::detector_name(None),
            config: &config,
        };
        record.write(dir.path()).unwrap();
        let text = std::fs::read_to_string(dir.path().join(RECORD_FILE)).unwrap();
        let back: toml::Value = toml::from_str(&text).unwrap();
        assert_eq!((back["seed"].as_integer(), back["detector"].as_str()), (Some(3), Some("built-in TrackML")));
        assert_eq!(back["config"]["pileup"].as_float(), Some(config.pileup));
        let figures = DataSetFigures { hits_per_event: 1000.4, bytes_written: 2_500_000, ..DataSetFigures::of(&[]) };
        let report = DataSetReport {
            out: Path::new("ev"),
            events: 2,
            seed: 3,
            threads: 2,
            gzip: true,
            figures,
            wall_seconds: 1.5,
        };
        let lines: Vec<String> = report.to_string().lines().map(str::to_owned).collect();
        assert!(lines[0].starts_with("2 events in ev (2 threads, 1.50 s wall): 1000 hits"), "{lines:?}");
        assert!(lines[1].starts_with("per event: generation NaN s, writing (gzip) NaN s; 2.5 MB"), "{lines:?}");
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!((json["bytes_written"].as_u64(), json["threads"].as_u64()), (Some(2_500_000), Some(2)));
    }
}
