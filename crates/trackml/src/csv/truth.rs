//! `eventNNNNNNNNN-truth.csv`: hit_id, particle_id, tx, ty, tz, tpx, tpy, tpz, weight.
//!
//! In memory the truth is aligned with the hits (entry `i` describes `hits.hit_id[i]`), so
//! reading needs the hits, and rows may come in any order in the file.

use std::path::Path;

use super::index::HitIndex;
use super::table::{Row, Table};
use super::write::{CsvWriter, check_lengths, write_rows};
use crate::error::{Error, Result};
use crate::event::{Hits, Truth};
use crate::ids::ParticleId;

/// The columns of a truth file, in the order they are written.
pub(crate) const COLUMNS: [&str; 9] = ["hit_id", "particle_id", "tx", "ty", "tz", "tpx", "tpy", "tpz", "weight"];

/// One row of a truth file, as the columns give it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct TruthRow {
    /// hit_id.
    pub hit_id: u64,
    /// particle_id (0: noise).
    pub particle_id: u64,
    /// tx, ty, tz \[mm\].
    pub pos: [f32; 3],
    /// tpx, tpy, tpz \[GeV\].
    pub mom: [f32; 3],
    /// weight.
    pub weight: f32,
}

impl TruthRow {
    #[inline]
    fn parse(r: &Row<'_>, c: &[usize; 9]) -> Result<TruthRow> {
        Ok(TruthRow {
            hit_id: r.uint(c[0])?,
            particle_id: r.uint(c[1])?,
            pos: [r.f32(c[2])?, r.f32(c[3])?, r.f32(c[4])?],
            mom: [r.f32(c[5])?, r.f32(c[6])?, r.f32(c[7])?],
            weight: r.f32(c[8])?,
        })
    }

    fn of(truth: &Truth, hits: &Hits, i: usize) -> TruthRow {
        TruthRow {
            hit_id: hits.hit_id[i],
            particle_id: truth.particle_id[i].0,
            pos: [truth.tx[i], truth.ty[i], truth.tz[i]],
            mom: [truth.tpx[i], truth.tpy[i], truth.tpz[i]],
            weight: truth.weight[i],
        }
    }

    fn write(&self, w: &mut CsvWriter) -> std::io::Result<()> {
        w.u64(self.hit_id)?;
        w.u64(self.particle_id)?;
        for v in self.pos.into_iter().chain(self.mom) {
            w.f32(v)?;
        }
        w.f32(self.weight)
    }
}

/// Reads a truth file, aligned with `hits`: entry `i` describes `hits.hit_id[i]`.
///
/// Errors: [`Error::UnknownHit`] for a row whose hit_id is not in `hits`,
/// [`Error::DuplicateHit`] for a hit_id given twice, [`Error::Inconsistent`] naming the first
/// hit that has no truth row, and the parse errors of every reader.
pub fn read_truth(path: &Path, hits: &Hits) -> Result<Truth> {
    parse_truth(&Table::open(path)?, hits)
}

/// Parses the truth of an opened table, aligned with `hits`.
pub(crate) fn parse_truth(t: &Table, hits: &Hits) -> Result<Truth> {
    let c = t.require(COLUMNS)?;
    let need = c.iter().max().unwrap() + 1;
    let n = hits.len();
    let index = HitIndex::new(&hits.hit_id);
    let mut truth = Truth {
        particle_id: vec![ParticleId::NOISE; n],
        tx: vec![0.0; n],
        ty: vec![0.0; n],
        tz: vec![0.0; n],
        tpx: vec![0.0; n],
        tpy: vec![0.0; n],
        tpz: vec![0.0; n],
        weight: vec![0.0; n],
    };
    // The line that filled each entry (0: none yet), for duplicate and missing-row errors.
    let mut filled_by = vec![0u64; n];
    let mut rows = t.rows(need);
    while let Some(r) = rows.next()? {
        let row = TruthRow::parse(&r, &c)?;
        let i = index.get(row.hit_id).ok_or_else(|| Error::UnknownHit {
            path: t.path().to_path_buf(),
            line: r.line(),
            hit_id: row.hit_id,
        })?;
        if filled_by[i] != 0 {
            return Err(Error::DuplicateHit {
                path: t.path().to_path_buf(),
                line: r.line(),
                first_line: filled_by[i],
                hit_id: row.hit_id,
            });
        }
        filled_by[i] = r.line();
        truth.particle_id[i] = ParticleId(row.particle_id);
        truth.tx[i] = row.pos[0];
        truth.ty[i] = row.pos[1];
        truth.tz[i] = row.pos[2];
        truth.tpx[i] = row.mom[0];
        truth.tpy[i] = row.mom[1];
        truth.tpz[i] = row.mom[2];
        truth.weight[i] = row.weight;
    }
    if let Some(i) = filled_by.iter().position(|&l| l == 0) {
        let missing = filled_by.iter().filter(|&&l| l == 0).count();
        return Err(Error::Inconsistent {
            path: t.path().to_path_buf(),
            message: format!("hit_id {} has no truth row ({missing} of {n} hits have none)", hits.hit_id[i]),
        });
    }
    Ok(truth)
}

/// Writes a truth file in hits order, each row with the hit_id of its hit (gzip if `path`
/// ends in `.gz`), atomically; returns its size in bytes.
pub fn write_truth(path: &Path, truth: &Truth, hits: &Hits) -> Result<u64> {
    let n = hits.len();
    check_lengths(
        path,
        "truth",
        n,
        &[
            ("particle_id", truth.particle_id.len()),
            ("tx", truth.tx.len()),
            ("ty", truth.ty.len()),
            ("tz", truth.tz.len()),
            ("tpx", truth.tpx.len()),
            ("tpy", truth.tpy.len()),
            ("tpz", truth.tpz.len()),
            ("weight", truth.weight.len()),
        ],
    )?;
    write_rows(path, &COLUMNS, n, |w, i| TruthRow::of(truth, hits, i).write(w))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csv::testutil::{assert_err, sample_event, write_text};

    #[test]
    fn round_trip_plain_and_gz() {
        let ev = sample_event(1000, 2);
        let truth = ev.truth.as_ref().unwrap();
        let dir = tempfile::tempdir().unwrap();
        for name in ["t.csv", "t.csv.gz"] {
            let path = dir.path().join(name);
            write_truth(&path, truth, &ev.hits).unwrap();
            assert_eq!(&read_truth(&path, &ev.hits).unwrap(), truth, "{name}");
        }
    }

    #[test]
    fn rows_in_any_order_align_with_hits() {
        let dir = tempfile::tempdir().unwrap();
        let hits_path = write_text(
            dir.path(),
            "h.csv",
            "hit_id,x,y,z,volume_id,layer_id,module_id\n20,1,1,1,8,2,1\n10,2,2,2,8,2,1\n",
        );
        let hits = crate::csv::read_hits(&hits_path).unwrap();
        let path = write_text(
            dir.path(),
            "t.csv",
            "weight,hit_id,particle_id,tx,ty,tz,tpx,tpy,tpz\n\
             0.5,10,4503668346847232,1,2,3,4,5,6\n0,20,0,1,1,1,0,0,0\n",
        );
        let truth = read_truth(&path, &hits).unwrap();
        assert_eq!(truth.particle_id, [ParticleId(0), ParticleId(4503668346847232)]);
        assert_eq!((truth.weight[1], truth.tpz[1]), (0.5, 6.0));
        // Written back in hits order.
        let out = dir.path().join("t2.csv");
        write_truth(&out, &truth, &hits).unwrap();
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(text.lines().nth(1).unwrap().starts_with("20,0,"), "{text}");
    }

    #[test]
    fn bad_inputs() {
        let ev = sample_event(3, 3);
        let hits = &ev.hits; // hit_ids 1, 2, 3
        let dir = tempfile::tempdir().unwrap();
        let head = "hit_id,particle_id,tx,ty,tz,tpx,tpy,tpz,weight\n";
        let case = |name: &str, body: &str| {
            let path = write_text(dir.path(), name, &format!("{head}{body}"));
            read_truth(&path, hits).unwrap_err()
        };
        let row = |id: u64| format!("{id},7,1,2,3,4,5,6,0.1\n");
        let e = case("unknown.csv", &(row(1) + &row(99)));
        assert_err(
            &e,
            |e| matches!(e, Error::UnknownHit { line: 3, hit_id: 99, .. }),
            &["unknown.csv:3", "hit_id 99 is not in the hits file"],
        );
        let e = case("missing.csv", &(row(3) + &row(1)));
        assert_err(&e, |e| matches!(e, Error::Inconsistent { .. }), &["missing.csv", "hit_id 2 has no truth row"]);
        let e = case("dup.csv", &(row(2) + &row(1) + &row(2)));
        assert_err(
            &e,
            |e| matches!(e, Error::DuplicateHit { line: 4, first_line: 2, hit_id: 2, .. }),
            &["dup.csv:4", "first on line 2"],
        );
        let e = case("neg.csv", "1,-5,1,2,3,4,5,6,0.1\n");
        assert_err(&e, |e| matches!(e, Error::Parse { line: 2, .. }), &["neg.csv:2", "column `particle_id`", "`-5`"]);
        let e = case("nan.csv", "1,5,1,2,3,4,5,6,nan\n");
        assert_err(&e, |e| matches!(e, Error::Parse { .. }), &["nan.csv:2", "column `weight`"]);
        // Header only: allowed by the parser, but then every hit lacks truth.
        let e = case("header_only.csv", "");
        assert_err(
            &e,
            |e| matches!(e, Error::Inconsistent { .. }),
            &["header_only.csv", "hit_id 1 has no truth row (3 of 3"],
        );
    }
}
