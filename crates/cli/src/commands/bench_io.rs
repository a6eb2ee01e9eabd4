//! `trackgnn bench io`: event generation time on one core, CSV writing (plain and gzip) and
//! reading throughput.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::json;
use trackgnn_simulate::{Generator, SimConfig};
use trackgnn_trackml::csv::{EventFiles, ReadOptions, read_event_bytes, write_event};
use trackgnn_trackml::{Detector, Event};

use crate::util::print_json;

/// `trackgnn bench io`.
#[derive(Debug, clap::Args)]
pub struct BenchIoArgs {
    /// Events to generate and time.
    #[arg(long, default_value_t = 3)]
    pub events: u64,
    /// Pile-up of the generated events.
    #[arg(long, default_value_t = 200.0)]
    pub pileup: f64,
    /// Directory for the files written (a temporary one by default).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub json: crate::cli::JsonArg,
}

fn stats(xs: &[f64]) -> (f64, f64) {
    (xs.iter().sum::<f64>() / xs.len() as f64, xs.iter().cloned().fold(f64::MAX, f64::min))
}

pub fn run(a: BenchIoArgs) -> Result<ExitCode> {
    anyhow::ensure!(a.events > 0, "--events must be at least 1");
    let tmp;
    let dir = match &a.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir().context("creating a temporary directory")?;
            tmp.path().to_path_buf()
        }
    };
    let (plain, gz) = (dir.join("plain"), dir.join("gzip"));
    std::fs::create_dir_all(&plain)?;
    std::fs::create_dir_all(&gz)?;
    let generator = Generator::new(Detector::trackml(), SimConfig { pileup: a.pileup, ..SimConfig::default() });
    // Generation runs on this thread only: the figure is per core.
    let mut gen_s = Vec::new();
    let mut events: Vec<Event> = Vec::new();
    for id in 1..=a.events {
        let t = Instant::now();
        let (ev, _) = generator.event(1, id);
        gen_s.push(t.elapsed().as_secs_f64());
        events.push(ev);
    }
    let (mut w_plain, mut w_gz, mut bytes_plain, mut bytes_gz) = (Vec::new(), Vec::new(), 0, 0);
    for ev in &events {
        let t = Instant::now();
        bytes_plain += write_event(&plain, ev, false)?.bytes_written;
        w_plain.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        bytes_gz += write_event(&gz, ev, true)?.bytes_written;
        w_gz.push(t.elapsed().as_secs_f64());
    }
    let read = |d: &std::path::Path| -> Result<(f64, u64)> {
        let t = Instant::now();
        let mut bytes = 0;
        for ev in &events {
            let (back, b) = read_event_bytes(&EventFiles::new(d, ev.event_id), ReadOptions::default())?;
            anyhow::ensure!(back == *ev, "event {} did not read back equal", ev.event_id);
            bytes += b;
        }
        Ok((t.elapsed().as_secs_f64(), bytes))
    };
    let (r_plain_s, csv_bytes) = read(&plain)?;
    let (r_gz_s, _) = read(&gz)?;
    let (gen_mean, gen_min) = stats(&gen_s);
    let hits = events.iter().map(|e| e.hits.len()).sum::<usize>() as f64 / events.len() as f64;
    if a.json.json {
        print_json(&json!({
            "events": a.events, "pileup": a.pileup, "hits_per_event": hits,
            "generate_seconds_per_event_mean": gen_mean, "generate_seconds_per_event_min": gen_min,
            "write_plain_seconds_per_event": stats(&w_plain).0, "write_gzip_seconds_per_event": stats(&w_gz).0,
            "bytes_plain": bytes_plain, "bytes_gzip": bytes_gz, "csv_bytes_read": csv_bytes,
            "read_plain_bytes_per_second": csv_bytes as f64 / r_plain_s,
            "read_gzip_bytes_per_second": csv_bytes as f64 / r_gz_s,
        }));
    } else {
        println!("{} events at pile-up {} ({:.0} hits per event)", a.events, a.pileup, hits);
        println!("generation (1 core):   mean {:.3} s, min {:.3} s per event", gen_mean, gen_min);
        println!(
            "writing:               plain {:.3} s, gzip {:.3} s per event ({:.1} MB plain, {:.1} MB gzip per event)",
            stats(&w_plain).0,
            stats(&w_gz).0,
            bytes_plain as f64 / 1e6 / a.events as f64,
            bytes_gz as f64 / 1e6 / a.events as f64
        );
        println!(
            "reading (CSV parsed):  plain {:.0} MB/s, gzip {:.0} MB/s of uncompressed CSV",
            csv_bytes as f64 / 1e6 / r_plain_s,
            csv_bytes as f64 / 1e6 / r_gz_s
        );
    }
    Ok(ExitCode::SUCCESS)
}
