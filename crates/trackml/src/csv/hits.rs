//! `eventNNNNNNNNN-hits.csv`: hit_id, x, y, z, volume_id, layer_id, module_id.

use std::path::Path;

use super::index::find_duplicate;
use super::table::{Row, Table};
use super::write::{CsvWriter, check_lengths, write_rows};
use crate::error::{Error, Result};
use crate::event::Hits;
use crate::ids::ModuleId;

/// The columns of a hits file, in the order they are written.
pub(crate) const COLUMNS: [&str; 7] = ["hit_id", "x", "y", "z", "volume_id", "layer_id", "module_id"];

/// One row of a hits file, as the columns give it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct HitRow {
    /// hit_id.
    pub hit_id: u64,
    /// x, y, z \[mm\].
    pub pos: [f32; 3],
    /// volume_id.
    pub volume_id: u16,
    /// layer_id.
    pub layer_id: u16,
    /// module_id.
    pub module_id: u32,
}

impl HitRow {
    /// Parses a row; `c` are the header indices of [`COLUMNS`].
    #[inline]
    fn parse(r: &Row<'_>, c: &[usize; 7]) -> Result<HitRow> {
        Ok(HitRow {
            hit_id: r.uint(c[0])?,
            pos: [r.f32(c[1])?, r.f32(c[2])?, r.f32(c[3])?],
            volume_id: r.uint(c[4])?,
            layer_id: r.uint(c[5])?,
            module_id: r.uint(c[6])?,
        })
    }

    fn of(hits: &Hits, i: usize) -> HitRow {
        let m = hits.module[i];
        HitRow {
            hit_id: hits.hit_id[i],
            pos: [hits.x[i], hits.y[i], hits.z[i]],
            volume_id: m.volume(),
            layer_id: m.layer(),
            module_id: m.module(),
        }
    }

    fn write(&self, w: &mut CsvWriter) -> std::io::Result<()> {
        w.u64(self.hit_id)?;
        for v in self.pos {
            w.f32(v)?;
        }
        w.u64(self.volume_id.into())?;
        w.u64(self.layer_id.into())?;
        w.u64(self.module_id.into())
    }
}

/// Reads a hits file (plain or gzip).
///
/// Errors: [`Error::DuplicateHit`] if a hit_id repeats, [`Error::Inconsistent`] ("empty
/// event") if the file has a header but no rows, and the parse errors of every reader.
pub fn read_hits(path: &Path) -> Result<Hits> {
    parse_hits(&Table::open(path)?)
}

/// Parses the hits of an opened table.
pub(crate) fn parse_hits(t: &Table) -> Result<Hits> {
    let c = t.require(COLUMNS)?;
    let need = c.iter().max().unwrap() + 1;
    // ~35 bytes per row in TrackML files: reserve once instead of growing.
    let guess = (t.byte_len() / 32) as usize;
    let mut hits = Hits {
        hit_id: Vec::with_capacity(guess),
        x: Vec::with_capacity(guess),
        y: Vec::with_capacity(guess),
        z: Vec::with_capacity(guess),
        module: Vec::with_capacity(guess),
    };
    let mut rows = t.rows(need);
    while let Some(r) = rows.next()? {
        let h = HitRow::parse(&r, &c)?;
        hits.push(h.hit_id, h.pos, ModuleId::new(h.volume_id, h.layer_id, h.module_id));
    }
    if hits.is_empty() {
        return Err(Error::Inconsistent {
            path: t.path().to_path_buf(),
            message: "empty event: the hits file has a header but no hits".into(),
        });
    }
    if let Some((first, second)) = find_duplicate(&hits.hit_id) {
        return Err(Error::DuplicateHit {
            path: t.path().to_path_buf(),
            line: t.line_of_row(second),
            first_line: t.line_of_row(first),
            hit_id: hits.hit_id[second],
        });
    }
    Ok(hits)
}

/// Writes a hits file (gzip if `path` ends in `.gz`), atomically; returns its size in bytes.
pub fn write_hits(path: &Path, hits: &Hits) -> Result<u64> {
    let n = hits.len();
    check_lengths(
        path,
        "hits",
        n,
        &[("x", hits.x.len()), ("y", hits.y.len()), ("z", hits.z.len()), ("module", hits.module.len())],
    )?;
    write_rows(path, &COLUMNS, n, |w, i| HitRow::of(hits, i).write(w))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csv::testutil::{assert_err, sample_event, write_text};

    #[test]
    fn round_trip_plain_and_gz() {
        let ev = sample_event(1000, 1);
        let dir = tempfile::tempdir().unwrap();
        for name in ["h.csv", "h.csv.gz"] {
            let path = dir.path().join(name);
            let bytes = write_hits(&path, &ev.hits).unwrap();
            assert_eq!(bytes, std::fs::metadata(&path).unwrap().len());
            assert_eq!(read_hits(&path).unwrap(), ev.hits, "{name}");
        }
    }

    #[test]
    fn column_order_extras_crlf_and_blank_lines() {
        let dir = tempfile::tempdir().unwrap();
        let text = "module_id,extra,z,y,x,hit_id,layer_id,volume_id\r\n\
                    7,foo,-1502.5,-7.1637,-64.4099,1,2,7\r\n\r\n\
                    8,bar,1.5e2, 2 ,3,2,4,8";
        let path = write_text(dir.path(), "h.csv", text);
        let hits = read_hits(&path).unwrap();
        assert_eq!(hits.hit_id, [1, 2]);
        assert_eq!((hits.x[0], hits.y[0], hits.z[0]), (-64.4099, -7.1637, -1502.5));
        assert_eq!((hits.x[1], hits.y[1], hits.z[1]), (3.0, 2.0, 150.0));
        assert_eq!(hits.module, [ModuleId::new(7, 2, 7), ModuleId::new(8, 4, 8)]);
    }

    #[test]
    fn bad_inputs() {
        let dir = tempfile::tempdir().unwrap();
        let head = "hit_id,x,y,z,volume_id,layer_id,module_id\n";
        let case = |name: &str, body: &str| {
            let path = write_text(dir.path(), name, &format!("{head}{body}"));
            read_hits(&path).unwrap_err()
        };
        let e = case("abc.csv", "1,1,2,3,7,2,1\n2,abc,2,3,7,2,1\n");
        assert_err(&e, |e| matches!(e, Error::Parse { line: 3, .. }), &["abc.csv:3", "column `x`", "`abc`"]);
        let e = case("nan.csv", "1,1,2,NaN,7,2,1\n");
        assert_err(&e, |e| matches!(e, Error::Parse { line: 2, .. }), &["nan.csv:2", "column `z`", "finite"]);
        let e = case("inf.csv", "1,1,2,-inf,7,2,1\n");
        assert_err(&e, |e| matches!(e, Error::Parse { .. }), &["inf.csv:2", "column `z`"]);
        let e = case("few.csv", "1,1,2,3,7\n");
        assert_err(&e, |e| matches!(e, Error::Parse { .. }), &["few.csv:2", "column `layer_id`"]);
        let e = case("dup.csv", "5,1,2,3,7,2,1\n6,1,2,3,7,2,1\n\n5,1,2,3,7,2,1\n");
        assert_err(
            &e,
            |e| matches!(e, Error::DuplicateHit { line: 5, first_line: 2, hit_id: 5, .. }),
            &["dup.csv:5", "duplicate hit_id 5", "first on line 2"],
        );
        let e = case("range.csv", "1,1,2,3,70000,2,1\n");
        assert_err(&e, |e| matches!(e, Error::Parse { .. }), &["range.csv:2", "`volume_id`", "u16"]);
        let e = case("neg.csv", "-1,1,2,3,7,2,1\n");
        assert_err(&e, |e| matches!(e, Error::Parse { .. }), &["neg.csv:2", "`hit_id`"]);
        let e = case("empty_event.csv", "\n");
        assert_err(&e, |e| matches!(e, Error::Inconsistent { .. }), &["empty_event.csv", "empty event"]);

        let path = write_text(dir.path(), "nocol.csv", "hit_id,x,y,volume_id,layer_id,module_id\n1,2,3,4,5,6\n");
        let e = read_hits(&path).unwrap_err();
        assert_err(
            &e,
            |e| matches!(e, Error::MissingColumn { line: 1, .. }),
            &["nocol.csv:1", "`z`", "header has: hit_id,x,y,volume_id"],
        );
        let path = write_text(dir.path(), "zero.csv", "");
        assert_err(
            &read_hits(&path).unwrap_err(),
            |e| matches!(e, Error::EmptyFile { .. }),
            &["zero.csv", "empty file"],
        );
        let path = dir.path().join("absent.csv");
        assert_err(
            &read_hits(&path).unwrap_err(),
            |e| matches!(e, Error::MissingFile { .. }),
            &["absent.csv", "no such file or directory"],
        );
    }
}
