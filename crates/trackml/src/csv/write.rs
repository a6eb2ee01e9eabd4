//! Writing CSV files atomically, plain or gzip, with exact float formatting.
//!
//! A file is written to a temporary name in the same directory ([`crate::atomic::temp_path`]) and
//! renamed over the real name only once complete, so a crash or an error never leaves a partial
//! file under the real name (a leftover temporary is removed when the writer is dropped). There
//! is no `fsync`: the rename guards against a killed process, not against power loss, which
//! would cost a disk flush per file when events are written in bulk.
//!
//! Floats are written with `ryu`: the shortest decimal that parses back to the same `f32`
//! (or `f64`), so write → read is lossless. Output is byte-identical for identical input: the
//! gzip header carries no timestamp (mtime 0) and no file name.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use flate2::write::GzEncoder;
use flate2::{Compression, GzBuilder};

use crate::error::{Error, Result};

/// The write buffer: large enough that the kernel sees few, big writes.
const WRITE_BUFFER: usize = 1 << 20;

/// True if `path` names a gzip file (`.gz` extension).
pub(crate) fn is_gzip_path(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("gz"))
}

enum Sink {
    Plain(File),
    Gzip(Box<GzEncoder<File>>),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Plain(f) => f.write(buf),
            Sink::Gzip(g) => g.write(buf),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Sink::Plain(f) => f.write_all(buf),
            Sink::Gzip(g) => g.write_all(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Plain(f) => f.flush(),
            Sink::Gzip(g) => g.flush(),
        }
    }
}

/// A CSV file being written: fields are appended row by row, then [`CsvWriter::finish`]
/// renames the completed temporary into place.
pub(crate) struct CsvWriter {
    out: Option<BufWriter<Sink>>,
    path: PathBuf,
    tmp: PathBuf,
    columns: &'static [&'static str],
    /// Index of the next field in the current row (0 at a row start).
    field: usize,
    /// Data rows completed so far.
    rows: u64,
    /// The first non-finite float seen: (data row, field index). Such a file could not be read
    /// back, so `finish` refuses it.
    non_finite: Option<(u64, usize)>,
}

impl CsvWriter {
    /// Starts writing `path` (gzip if it ends in `.gz`) with the header `columns`.
    pub(crate) fn create(path: &Path, columns: &'static [&'static str]) -> Result<CsvWriter> {
        if path.file_name().is_none() {
            return Err(Error::Inconsistent { path: path.to_path_buf(), message: "not a file name".into() });
        }
        let tmp = crate::atomic::temp_path(path);
        let file = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        let sink = if is_gzip_path(path) {
            // Fast compression: event files are written in bulk and re-read many times, so
            // writing speed matters more than the last percent of size (on a TrackML-like
            // hits file, zlib level 1 vs the default 6: ~6x faster, ~12% larger).
            Sink::Gzip(Box::new(GzBuilder::new().mtime(0).write(file, Compression::fast())))
        } else {
            Sink::Plain(file)
        };
        let mut w = CsvWriter {
            out: Some(BufWriter::with_capacity(WRITE_BUFFER, sink)),
            path: path.to_path_buf(),
            tmp,
            columns,
            field: 0,
            rows: 0,
            non_finite: None,
        };
        w.header().map_err(|e| w.io_error(e))?;
        Ok(w)
    }

    fn header(&mut self) -> io::Result<()> {
        let cols = self.columns;
        for (i, c) in cols.iter().enumerate() {
            if i > 0 {
                self.raw(b",")?;
            }
            self.raw(c.as_bytes())?;
        }
        self.raw(b"\n")
    }

    /// Wraps an I/O error with the temporary file's path.
    pub(crate) fn io_error(&self, e: io::Error) -> Error {
        Error::io(&self.tmp, e)
    }

    #[inline]
    fn raw(&mut self, b: &[u8]) -> io::Result<()> {
        self.out.as_mut().expect("writer used after finish").write_all(b)
    }

    #[inline]
    fn sep(&mut self) -> io::Result<()> {
        self.field += 1;
        if self.field > 1 {
            self.raw(b",")?;
        }
        Ok(())
    }

    /// Appends an unsigned integer field.
    #[inline]
    pub(crate) fn u64(&mut self, v: u64) -> io::Result<()> {
        self.sep()?;
        let mut buf = [0u8; 20];
        let s = format_u64(v, &mut buf);
        self.raw(s)
    }

    /// Appends a signed integer field.
    #[inline]
    pub(crate) fn i64(&mut self, v: i64) -> io::Result<()> {
        if v < 0 {
            self.sep()?;
            self.raw(b"-")?;
            let mut buf = [0u8; 20];
            let s = format_u64(v.unsigned_abs(), &mut buf);
            self.raw(s)
        } else {
            self.u64(v as u64)
        }
    }

    /// Appends an `f32` field in its shortest exact form.
    #[inline]
    pub(crate) fn f32(&mut self, v: f32) -> io::Result<()> {
        self.sep()?;
        if !v.is_finite() {
            self.note_non_finite();
        }
        let mut buf = ryu::Buffer::new();
        self.raw(buf.format_finite(v).as_bytes())
    }

    /// Appends an `f64` field in its shortest exact form.
    #[inline]
    pub(crate) fn f64(&mut self, v: f64) -> io::Result<()> {
        self.sep()?;
        if !v.is_finite() {
            self.note_non_finite();
        }
        let mut buf = ryu::Buffer::new();
        self.raw(buf.format_finite(v).as_bytes())
    }

    #[cold]
    fn note_non_finite(&mut self) {
        if self.non_finite.is_none() {
            self.non_finite = Some((self.rows, self.field - 1));
        }
    }

    /// Ends the current row.
    #[inline]
    pub(crate) fn end_row(&mut self) -> io::Result<()> {
        debug_assert_eq!(self.field, self.columns.len(), "row with a wrong field count");
        self.field = 0;
        self.rows += 1;
        self.raw(b"\n")
    }

    /// Completes the file and renames it into place; returns its size on disk in bytes.
    pub(crate) fn finish(mut self) -> Result<u64> {
        if let Some((row, field)) = self.non_finite {
            return Err(Error::Inconsistent {
                path: self.path.clone(),
                message: format!(
                    "data row {} column `{}` is not a finite number; nothing written",
                    row + 1,
                    self.columns[field]
                ),
            });
        }
        let out = self.out.take().expect("finish called once");
        let sink = out.into_inner().map_err(|e| Error::io(&self.tmp, e.into_error()))?;
        let file = match sink {
            Sink::Plain(f) => f,
            Sink::Gzip(g) => g.finish().map_err(|e| Error::io(&self.tmp, e))?,
        };
        let bytes = file.metadata().map_err(|e| Error::io(&self.tmp, e))?.len();
        drop(file);
        std::fs::rename(&self.tmp, &self.path).map_err(|e| Error::io(&self.path, e))?;
        // Renamed: nothing left for Drop to clean up.
        self.tmp = PathBuf::new();
        Ok(bytes)
    }
}

impl Drop for CsvWriter {
    fn drop(&mut self) {
        // Close the temporary before removing it (Windows cannot remove an open file).
        drop(self.out.take());
        if !self.tmp.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Writes `v` in decimal into the end of `buf`; returns the digits.
#[inline]
fn format_u64(mut v: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return &buf[i..];
        }
    }
}

/// Writes a whole file: the header, then `rows` rows produced by `row(writer, i)`.
pub(crate) fn write_rows(
    path: &Path,
    columns: &'static [&'static str],
    rows: usize,
    mut row: impl FnMut(&mut CsvWriter, usize) -> io::Result<()>,
) -> Result<u64> {
    let mut w = CsvWriter::create(path, columns)?;
    for i in 0..rows {
        row(&mut w, i).map_err(|e| w.io_error(e))?;
        w.end_row().map_err(|e| w.io_error(e))?;
    }
    w.finish()
}

/// Checks that every column of a struct-of-arrays has `len` entries.
pub(crate) fn check_lengths(path: &Path, what: &str, len: usize, cols: &[(&str, usize)]) -> Result<()> {
    match cols.iter().find(|c| c.1 != len) {
        None => Ok(()),
        Some((name, n)) => Err(Error::Inconsistent {
            path: path.to_path_buf(),
            message: format!("{what}: column `{name}` has {n} entries, expected {len}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_format() {
        let mut b = [0u8; 20];
        assert_eq!(format_u64(0, &mut b), b"0");
        assert_eq!(format_u64(4503668346847232, &mut b), b"4503668346847232");
        assert_eq!(format_u64(u64::MAX, &mut b), b"18446744073709551615");
    }

    #[test]
    fn atomic_and_deterministic() {
        let dir = tempfile::tempdir().unwrap();
        const COLS: &[&str] = &["a", "b", "c"];
        let write = |name: &str| {
            let path = dir.path().join(name);
            write_rows(&path, COLS, 3, |w, i| {
                w.i64(-(i as i64))?;
                w.f32(0.1 * i as f32)?;
                w.f64(1e-300 * i as f64)
            })
            .unwrap();
            std::fs::read(path).unwrap()
        };
        let plain = write("x.csv");
        assert_eq!(std::str::from_utf8(&plain).unwrap(), "a,b,c\n0,0.0,0.0\n-1,0.1,1e-300\n-2,0.2,2e-300\n");
        let gz1 = write("x.csv.gz");
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let gz2 = write("y.csv.gz");
        assert_eq!(gz1, gz2, "gzip output depends on the time");
        assert_eq!(crate::csv::table::read_bytes(&dir.path().join("x.csv.gz")).unwrap(), plain);

        // A non-finite value: error, no file, no temporary.
        let path = dir.path().join("bad.csv");
        let e = write_rows(&path, COLS, 2, |w, i| {
            w.i64(0)?;
            w.f32(if i == 1 { f32::NAN } else { 0.0 })?;
            w.f64(0.0)
        })
        .unwrap_err();
        assert!(e.to_string().contains("data row 2 column `b`"), "{e}");
        let mut names: Vec<_> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        assert_eq!(names, ["x.csv", "x.csv.gz", "y.csv.gz"]);
    }
}
