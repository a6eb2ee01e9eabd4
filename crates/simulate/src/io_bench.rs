//! `bench io`: event generation time on one core, and the throughput of writing (plain and
//! gzip) and reading back the TrackML CSV files ([`IoBench`]).

use std::fmt;
use std::path::Path;
use std::time::Instant;

use serde::Serialize;
use trackgnn_trackml::csv::{EventFiles, ReadOptions, read_event_bytes, write_event};
use trackgnn_trackml::{Detector, Error, Event, Result};

use crate::{Generator, SimConfig};

/// The figures of `bench io`. Seconds per event, bytes, bytes per second.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct IoBench {
    /// Events generated.
    pub events: u64,
    /// Their pile-up.
    pub pileup: f64,
    /// Hits per event.
    pub hits_per_event: f64,
    /// Mean generation time (one core).
    pub generate_seconds_per_event_mean: f64,
    /// Fastest generation time.
    pub generate_seconds_per_event_min: f64,
    /// Mean time to write an event as plain CSV.
    pub write_plain_seconds_per_event: f64,
    /// Mean time to write an event as gzipped CSV.
    pub write_gzip_seconds_per_event: f64,
    /// Bytes of the plain files.
    pub bytes_plain: u64,
    /// Bytes of the gzipped files.
    pub bytes_gzip: u64,
    /// Uncompressed CSV bytes read back.
    pub csv_bytes_read: u64,
    /// Reading the plain files, uncompressed CSV bytes per second.
    pub read_plain_bytes_per_second: f64,
    /// Reading the gzipped files, uncompressed CSV bytes per second.
    pub read_gzip_bytes_per_second: f64,
}

fn mean_min(xs: &[f64]) -> (f64, f64) {
    (xs.iter().sum::<f64>() / xs.len() as f64, xs.iter().cloned().fold(f64::MAX, f64::min))
}

impl IoBench {
    /// Generates `events` events at `pileup` on this thread, writes them plain and gzipped under
    /// `dir` (`plain/`, `gzip/`) and reads them back, checking that they read back equal.
    pub fn run(events: u64, pileup: f64, dir: &Path) -> Result<IoBench> {
        let (plain, gz) = (dir.join("plain"), dir.join("gzip"));
        std::fs::create_dir_all(&plain).map_err(|e| Error::io(&plain, e))?;
        std::fs::create_dir_all(&gz).map_err(|e| Error::io(&gz, e))?;
        let generator = Generator::new(Detector::trackml(), SimConfig { pileup, ..SimConfig::default() });
        // Generation runs on this thread only: the figure is per core.
        let mut gen_s = Vec::new();
        let mut generated: Vec<Event> = Vec::new();
        for id in 1..=events {
            let t = Instant::now();
            let (ev, _) = generator.event(1, id);
            gen_s.push(t.elapsed().as_secs_f64());
            generated.push(ev);
        }
        let (mut w_plain, mut w_gz, mut bytes_plain, mut bytes_gzip) = (Vec::new(), Vec::new(), 0, 0);
        for ev in &generated {
            let t = Instant::now();
            bytes_plain += write_event(&plain, ev, false)?.bytes_written;
            w_plain.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            bytes_gzip += write_event(&gz, ev, true)?.bytes_written;
            w_gz.push(t.elapsed().as_secs_f64());
        }
        let read = |d: &Path| -> Result<(f64, u64)> {
            let t = Instant::now();
            let mut bytes = 0;
            for ev in &generated {
                let (back, b) = read_event_bytes(&EventFiles::new(d, ev.event_id), ReadOptions::default())?;
                if back != *ev {
                    let message = format!("event {} did not read back equal", ev.event_id);
                    return Err(Error::Inconsistent { path: d.to_path_buf(), message });
                }
                bytes += b;
            }
            Ok((t.elapsed().as_secs_f64(), bytes))
        };
        let (r_plain_s, csv_bytes_read) = read(&plain)?;
        let (r_gz_s, _) = read(&gz)?;
        let (gen_mean, gen_min) = mean_min(&gen_s);
        Ok(IoBench {
            events,
            pileup,
            hits_per_event: generated.iter().map(|e| e.hits.len()).sum::<usize>() as f64 / generated.len() as f64,
            generate_seconds_per_event_mean: gen_mean,
            generate_seconds_per_event_min: gen_min,
            write_plain_seconds_per_event: mean_min(&w_plain).0,
            write_gzip_seconds_per_event: mean_min(&w_gz).0,
            bytes_plain,
            bytes_gzip,
            csv_bytes_read,
            read_plain_bytes_per_second: csv_bytes_read as f64 / r_plain_s,
            read_gzip_bytes_per_second: csv_bytes_read as f64 / r_gz_s,
        })
    }
}

impl fmt::Display for IoBench {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} events at pile-up {} ({:.0} hits per event)", self.events, self.pileup, self.hits_per_event)?;
        writeln!(
            f,
            "generation (1 core):   mean {:.3} s, min {:.3} s per event",
            self.generate_seconds_per_event_mean, self.generate_seconds_per_event_min
        )?;
        writeln!(
            f,
            "writing:               plain {:.3} s, gzip {:.3} s per event ({:.1} MB plain, {:.1} MB gzip per event)",
            self.write_plain_seconds_per_event,
            self.write_gzip_seconds_per_event,
            self.bytes_plain as f64 / 1e6 / self.events as f64,
            self.bytes_gzip as f64 / 1e6 / self.events as f64
        )?;
        writeln!(
            f,
            "reading (CSV parsed):  plain {:.0} MB/s, gzip {:.0} MB/s of uncompressed CSV",
            self.read_plain_bytes_per_second / 1e6,
            self.read_gzip_bytes_per_second / 1e6
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_small_event_is_written_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let b = IoBench::run(1, 1.0, dir.path()).unwrap();
        assert!(b.hits_per_event > 0.0 && b.bytes_gzip < b.bytes_plain && b.csv_bytes_read > 0);
        assert!(dir.path().join("gzip").read_dir().unwrap().count() > 0);
        assert_eq!(b.to_string().lines().count(), 4);
    }
}
