//! Writing a generated data set: events drawn in parallel and written as TrackML CSV, with
//! what each cost and contains ([`write_events`], summarised by [`DataSetFigures`]).

use std::path::Path;
use std::time::Instant;

use rayon::prelude::*;
use serde::Serialize;
use trackgnn_trackml::Result;
use trackgnn_trackml::csv::write_event;

use crate::Generator;

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
}
