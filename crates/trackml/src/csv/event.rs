//! Reading and writing all the files of one event.

use std::path::Path;

use super::discover::{EventFiles, FileKind};
use super::table::Table;
use super::{cells, hits, particles, truth};
use crate::error::{Error, Result};
use crate::event::Event;

/// Which optional files [`read_event`] reads (the hits are always read). A requested file
/// that is absent is an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadOptions {
    /// Read `-truth.csv`.
    pub truth: bool,
    /// Read `-particles.csv`.
    pub particles: bool,
    /// Read `-cells.csv`.
    pub cells: bool,
}

impl Default for ReadOptions {
    /// Every file.
    fn default() -> Self {
        ReadOptions { truth: true, particles: true, cells: true }
    }
}

impl ReadOptions {
    /// The hits alone.
    pub fn hits_only() -> Self {
        ReadOptions { truth: false, particles: false, cells: false }
    }
}

/// Reads the files of one event that `opts` asks for.
pub fn read_event(files: &EventFiles, opts: ReadOptions) -> Result<Event> {
    read_event_bytes(files, opts).map(|(event, _)| event)
}

/// Like [`read_event`], also returning the number of bytes of CSV parsed (uncompressed), for
/// throughput measurements.
pub fn read_event_bytes(files: &EventFiles, opts: ReadOptions) -> Result<(Event, u64)> {
    let mut bytes = 0;
    let mut open = |kind| -> Result<Table> {
        let t = Table::open(&files.path(kind)?)?;
        bytes += t.byte_len();
        Ok(t)
    };
    let hits = hits::parse_hits(&open(FileKind::Hits)?)?;
    let truth = match opts.truth {
        true => Some(truth::parse_truth(&open(FileKind::Truth)?, &hits)?),
        false => None,
    };
    let particles = match opts.particles {
        true => Some(particles::parse_particles(&open(FileKind::Particles)?)?),
        false => None,
    };
    let cells = match opts.cells {
        true => Some(cells::parse_cells(&open(FileKind::Cells)?, &hits)?),
        false => None,
    };
    let event = Event { event_id: files.event_id, hits, truth, particles, cells };
    Ok((event, bytes))
}

/// What [`write_event`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Total size of the files on disk, in bytes (compressed size if gzip).
    pub bytes_written: u64,
    /// The number of files written.
    pub files: usize,
}

/// Writes every part of `event` that is present to `dir` (created if needed) as
/// `event{:09}-{kind}.csv`, or `.csv.gz` if `gzip`. Each file is written atomically.
///
/// Errors: [`Error::Inconsistent`] if the truth is not aligned with the hits or a column has
/// the wrong length, and I/O errors.
pub fn write_event(dir: &Path, event: &Event, gzip: bool) -> Result<WriteStats> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let files = EventFiles::new(dir, event.event_id);
    let path = |kind: FileKind| dir.join(kind.file_name(&files.prefix, gzip));
    let mut stats = WriteStats::default();
    let mut add = |bytes: u64| {
        stats.bytes_written += bytes;
        stats.files += 1;
    };
    add(hits::write_hits(&path(FileKind::Hits), &event.hits)?);
    if let Some(t) = &event.truth {
        add(truth::write_truth(&path(FileKind::Truth), t, &event.hits)?);
    }
    if let Some(p) = &event.particles {
        add(particles::write_particles(&path(FileKind::Particles), p)?);
    }
    if let Some(c) = &event.cells {
        add(cells::write_cells(&path(FileKind::Cells), c)?);
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csv::discover_events;
    use crate::csv::testutil::{assert_err, sample_event};

    #[test]
    fn event_round_trip_plain_and_gz() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = sample_event(2000, 7);
        a.event_id = 1000;
        let mut b = sample_event(50, 8);
        b.event_id = 3;
        b.cells = None;
        let sa = write_event(dir.path(), &a, false).unwrap();
        let sb = write_event(dir.path(), &b, true).unwrap();
        assert_eq!((sa.files, sb.files), (4, 3));
        let on_disk: u64 = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
        assert_eq!(sa.bytes_written + sb.bytes_written, on_disk);

        let events = discover_events(dir.path()).unwrap();
        assert_eq!(events.len(), 2);
        let (rb, nb) = read_event_bytes(&events[0], ReadOptions { cells: false, ..ReadOptions::default() }).unwrap();
        assert_eq!(rb, b);
        assert!(nb > sb.bytes_written, "uncompressed bytes {nb}");
        let (ra, na) = read_event_bytes(&events[1], ReadOptions::default()).unwrap();
        assert_eq!(ra, a);
        assert_eq!(na, sa.bytes_written);
        let hits_only = read_event(&events[1], ReadOptions::hits_only()).unwrap();
        assert_eq!((hits_only.hits, hits_only.truth), (a.hits, None));

        // Asking for a file the event lacks.
        let e = read_event(&events[0], ReadOptions::default()).unwrap_err();
        assert_err(&e, |e| matches!(e, Error::MissingFile { .. }), &["event000000003-cells.csv.gz"]);

        // Rewriting gives the same bytes.
        let first = std::fs::read(dir.path().join("event000000003-truth.csv.gz")).unwrap();
        write_event(dir.path(), &b, true).unwrap();
        let second = std::fs::read(dir.path().join("event000000003-truth.csv.gz")).unwrap();
        assert_eq!(first, second);
    }

    #[test]
    fn misaligned_truth_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut ev = sample_event(10, 9);
        ev.truth.as_mut().unwrap().weight.pop();
        let e = write_event(dir.path(), &ev, false).unwrap_err();
        assert_err(
            &e,
            |e| matches!(e, Error::Inconsistent { .. }),
            &["-truth.csv", "`weight` has 9 entries, expected 10"],
        );
        // The hits were written before the truth failed; the truth left nothing behind.
        let names: Vec<String> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        assert_eq!(names, ["event000000000-hits.csv"]);
    }

    /// Read throughput on a synthetic event of 100k hits (with truth and cells), plain and
    /// gzip, best of 5. Run with
    /// `cargo test -p trackgnn-trackml --release --lib -- --ignored --nocapture read_throughput`.
    #[test]
    #[ignore]
    fn read_throughput() {
        let mut ev = sample_event(100_000, 10);
        ev.particles = None;
        let opts = ReadOptions { particles: false, ..ReadOptions::default() };
        for gzip in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let t = std::time::Instant::now();
            let stats = write_event(dir.path(), &ev, gzip).unwrap();
            let write_s = t.elapsed().as_secs_f64();
            let files = &discover_events(dir.path()).unwrap()[0];
            let mut best = f64::MAX;
            let mut bytes = 0;
            for _ in 0..5 {
                let t = std::time::Instant::now();
                let (read, n) = read_event_bytes(files, opts).unwrap();
                best = best.min(t.elapsed().as_secs_f64());
                bytes = n;
                assert_eq!(read, ev);
            }
            println!(
                "gzip={gzip}: wrote {:.1} MB on disk in {:.0} ms; read {:.1} MB of CSV in {:.1} ms: {:.0} MB/s",
                stats.bytes_written as f64 / 1e6,
                write_s * 1e3,
                bytes as f64 / 1e6,
                best * 1e3,
                bytes as f64 / 1e6 / best
            );
        }
    }
}
