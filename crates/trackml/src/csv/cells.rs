//! `eventNNNNNNNNN-cells.csv`: hit_id, ch0, ch1, value. Rows keep the file's order.

use std::path::Path;

use super::index::HitIndex;
use super::table::{Row, Table};
use super::write::{CsvWriter, check_lengths, write_rows};
use crate::error::{Error, Result};
use crate::event::{Cells, Hits};

/// The columns of a cells file, in the order they are written.
pub(crate) const COLUMNS: [&str; 4] = ["hit_id", "ch0", "ch1", "value"];

/// One row of a cells file, as the columns give it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct CellRow {
    /// hit_id.
    pub hit_id: u64,
    /// ch0 (along u).
    pub ch0: u32,
    /// ch1 (along v).
    pub ch1: u32,
    /// value (deposited charge).
    pub value: f32,
}

impl CellRow {
    #[inline]
    fn parse(r: &Row<'_>, c: &[usize; 4]) -> Result<CellRow> {
        Ok(CellRow { hit_id: r.uint(c[0])?, ch0: r.uint(c[1])?, ch1: r.uint(c[2])?, value: r.f32(c[3])? })
    }

    fn write(&self, w: &mut CsvWriter) -> std::io::Result<()> {
        w.u64(self.hit_id)?;
        w.u64(self.ch0.into())?;
        w.u64(self.ch1.into())?;
        w.f32(self.value)
    }
}

/// Reads a cells file, checking every hit_id against `hits`; rows keep the file's order.
///
/// Errors: [`Error::UnknownHit`] and the parse errors of every reader. A header without rows
/// gives no cells.
pub fn read_cells(path: &Path, hits: &Hits) -> Result<Cells> {
    parse_cells(&Table::open(path)?, hits)
}

/// Parses the cells of an opened table.
pub(crate) fn parse_cells(t: &Table, hits: &Hits) -> Result<Cells> {
    let c = t.require(COLUMNS)?;
    let need = c.iter().max().unwrap() + 1;
    let index = HitIndex::new(&hits.hit_id);
    // ~20 bytes per row in TrackML files.
    let guess = (t.byte_len() / 20) as usize;
    let mut cells = Cells {
        hit_id: Vec::with_capacity(guess),
        ch0: Vec::with_capacity(guess),
        ch1: Vec::with_capacity(guess),
        value: Vec::with_capacity(guess),
    };
    let mut rows = t.rows(need);
    while let Some(r) = rows.next()? {
        let row = CellRow::parse(&r, &c)?;
        if index.get(row.hit_id).is_none() {
            return Err(Error::UnknownHit { path: t.path().to_path_buf(), line: r.line(), hit_id: row.hit_id });
        }
        cells.hit_id.push(row.hit_id);
        cells.ch0.push(row.ch0);
        cells.ch1.push(row.ch1);
        cells.value.push(row.value);
    }
    Ok(cells)
}

/// Writes a cells file in the order given (gzip if `path` ends in `.gz`), atomically; returns
/// its size in bytes.
pub fn write_cells(path: &Path, cells: &Cells) -> Result<u64> {
    let n = cells.len();
    check_lengths(
        path,
        "cells",
        n,
        &[("ch0", cells.ch0.len()), ("ch1", cells.ch1.len()), ("value", cells.value.len())],
    )?;
    write_rows(path, &COLUMNS, n, |w, i| {
        CellRow { hit_id: cells.hit_id[i], ch0: cells.ch0[i], ch1: cells.ch1[i], value: cells.value[i] }.write(w)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csv::testutil::{assert_err, sample_event, write_text};

    #[test]
    fn round_trip_plain_and_gz() {
        let ev = sample_event(1000, 5);
        let cells = ev.cells.as_ref().unwrap();
        let dir = tempfile::tempdir().unwrap();
        for name in ["c.csv", "c.csv.gz"] {
            let path = dir.path().join(name);
            write_cells(&path, cells).unwrap();
            assert_eq!(&read_cells(&path, &ev.hits).unwrap(), cells, "{name}");
        }
    }

    #[test]
    fn unknown_hit_and_header_only() {
        let ev = sample_event(3, 6);
        let dir = tempfile::tempdir().unwrap();
        let path = write_text(dir.path(), "c.csv", "value,hit_id,ch1,ch0\n0.1,3,5,6\n0.2,4,5,6\n");
        let e = read_cells(&path, &ev.hits).unwrap_err();
        assert_err(
            &e,
            |e| matches!(e, Error::UnknownHit { line: 3, hit_id: 4, .. }),
            &["c.csv:3", "hit_id 4 is not in the hits file"],
        );
        let path = write_text(dir.path(), "h.csv", "hit_id,ch0,ch1,value\n");
        assert!(read_cells(&path, &ev.hits).unwrap().is_empty());
    }
}
