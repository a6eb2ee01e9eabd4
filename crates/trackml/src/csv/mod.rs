//! The TrackML CSV files: reading and writing, plain or gzip (`.csv.gz`).
//!
//! Per event, `eventNNNNNNNNN-{hits,truth,particles,cells}.csv`, and the detector description
//! `detectors.csv` (the columns: docs/data.md, "The TrackML files"). Readers find columns **by
//! header name**, so column order does not matter and unknown columns are ignored; they accept CRLF,
//! blank lines and a missing final newline, and recognise gzip by its magic bytes. Every error
//! names the file, the 1-based line and the column.
//!
//! Layers: `table` turns a file into field slices; the per-file modules mirror each file's
//! columns in a row struct (`HitRow`, …) and convert to the in-memory [`crate::event`] types.
//! The truth is aligned with the hits on reading (row `i` describes `hits.hit_id[i]`).
//!
//! Speed: a file is read (or decompressed) into memory at once and split in place, without
//! allocating per row; floats go through `fast-float2` on reading and `ryu` on writing (the
//! shortest text that reads back to the same bits, so write → read is lossless).
//!
//! ```no_run
//! use trackgnn_trackml::csv::{discover_events, read_event, ReadOptions};
//! # fn main() -> trackgnn_trackml::Result<()> {
//! for files in discover_events("data/train_100_events".as_ref())? {
//!     let event = read_event(&files, ReadOptions::default())?;
//!     println!("event {}: {} hits", event.event_id, event.hits.len());
//! }
//! # Ok(())
//! # }
//! ```

mod cells;
mod detectors;
mod discover;
mod event;
mod hits;
mod index;
mod particles;
mod table;
#[cfg(test)]
mod testutil;
mod truth;
mod write;

pub use cells::{read_cells, write_cells};
pub use detectors::{read_detectors, write_detectors};
pub use discover::{EventFiles, FileKind, discover_events, event_prefix};
pub use event::{ReadOptions, WriteStats, read_event, read_event_bytes, write_event};
pub use hits::{read_hits, write_hits};
pub use particles::{read_particles, write_particles};
pub use truth::{read_truth, write_truth};
