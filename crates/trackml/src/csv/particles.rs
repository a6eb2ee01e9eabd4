//! `eventNNNNNNNNN-particles.csv`: particle_id, [particle_type,] vx, vy, vz, px, py, pz, q,
//! nhits. The `particle_type` (PDG code) column is optional.

use std::path::Path;

use super::index::find_duplicate;
use super::table::{Row, Table};
use super::write::{CsvWriter, check_lengths, write_rows};
use crate::error::{Error, Result};
use crate::event::Particles;
use crate::ids::ParticleId;

/// The required columns of a particles file, in the order they are written.
pub(crate) const COLUMNS: [&str; 9] = ["particle_id", "vx", "vy", "vz", "px", "py", "pz", "q", "nhits"];

/// The optional PDG-code column.
const PARTICLE_TYPE: &str = "particle_type";

/// The columns written when the particles have a `particle_type`.
const COLUMNS_WITH_TYPE: [&str; 10] = ["particle_id", PARTICLE_TYPE, "vx", "vy", "vz", "px", "py", "pz", "q", "nhits"];

/// One row of a particles file, as the columns give it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ParticleRow {
    /// particle_id (non-zero).
    pub particle_id: u64,
    /// particle_type, when the file has the column.
    pub particle_type: Option<i32>,
    /// vx, vy, vz \[mm\].
    pub vertex: [f32; 3],
    /// px, py, pz \[GeV\].
    pub momentum: [f32; 3],
    /// q \[e\].
    pub q: i8,
    /// nhits.
    pub nhits: u32,
}

impl ParticleRow {
    #[inline]
    fn parse(r: &Row<'_>, c: &[usize; 9], type_col: Option<usize>) -> Result<ParticleRow> {
        let row = ParticleRow {
            particle_id: r.uint(c[0])?,
            particle_type: type_col.map(|col| r.int(col)).transpose()?,
            vertex: [r.f32(c[1])?, r.f32(c[2])?, r.f32(c[3])?],
            momentum: [r.f32(c[4])?, r.f32(c[5])?, r.f32(c[6])?],
            q: r.int(c[7])?,
            nhits: r.uint(c[8])?,
        };
        if row.particle_id == 0 {
            return Err(r.error(c[0], "particle_id 0 is reserved for noise hits and cannot be a particle".into()));
        }
        Ok(row)
    }

    fn of(p: &Particles, i: usize) -> ParticleRow {
        ParticleRow {
            particle_id: p.particle_id[i].0,
            particle_type: p.particle_type.as_ref().map(|t| t[i]),
            vertex: [p.vx[i], p.vy[i], p.vz[i]],
            momentum: [p.px[i], p.py[i], p.pz[i]],
            q: p.q[i],
            nhits: p.nhits[i],
        }
    }

    fn write(&self, w: &mut CsvWriter) -> std::io::Result<()> {
        w.u64(self.particle_id)?;
        if let Some(t) = self.particle_type {
            w.i64(t.into())?;
        }
        for v in self.vertex.into_iter().chain(self.momentum) {
            w.f32(v)?;
        }
        w.i64(self.q.into())?;
        w.u64(self.nhits.into())
    }
}

/// Reads a particles file; `particle_type` is `None` if the file lacks that column.
///
/// Errors: [`Error::DuplicateParticle`], a parse error for particle_id 0 (the noise id), and
/// the parse errors of every reader. A header without rows gives no particles.
pub fn read_particles(path: &Path) -> Result<Particles> {
    parse_particles(&Table::open(path)?)
}

/// Parses the particles of an opened table.
pub(crate) fn parse_particles(t: &Table) -> Result<Particles> {
    let c = t.require(COLUMNS)?;
    let type_col = t.find(PARTICLE_TYPE);
    let need = c.iter().chain(&type_col).max().unwrap() + 1;
    let mut p = Particles { particle_type: type_col.map(|_| Vec::new()), ..Particles::default() };
    let mut rows = t.rows(need);
    while let Some(r) = rows.next()? {
        let row = ParticleRow::parse(&r, &c, type_col)?;
        p.particle_id.push(ParticleId(row.particle_id));
        if let (Some(types), Some(v)) = (p.particle_type.as_mut(), row.particle_type) {
            types.push(v);
        }
        p.vx.push(row.vertex[0]);
        p.vy.push(row.vertex[1]);
        p.vz.push(row.vertex[2]);
        p.px.push(row.momentum[0]);
        p.py.push(row.momentum[1]);
        p.pz.push(row.momentum[2]);
        p.q.push(row.q);
        p.nhits.push(row.nhits);
    }
    if let Some((first, second)) = find_duplicate(&p.particle_id) {
        return Err(Error::DuplicateParticle {
            path: t.path().to_path_buf(),
            line: t.line_of_row(second),
            first_line: t.line_of_row(first),
            particle_id: p.particle_id[second].0,
        });
    }
    Ok(p)
}

/// Writes a particles file, with the `particle_type` column if the particles have it (gzip if
/// `path` ends in `.gz`), atomically; returns its size in bytes.
pub fn write_particles(path: &Path, p: &Particles) -> Result<u64> {
    let n = p.len();
    let mut lens = vec![
        ("vx", p.vx.len()),
        ("vy", p.vy.len()),
        ("vz", p.vz.len()),
        ("px", p.px.len()),
        ("py", p.py.len()),
        ("pz", p.pz.len()),
        ("q", p.q.len()),
        ("nhits", p.nhits.len()),
    ];
    if let Some(t) = &p.particle_type {
        lens.push((PARTICLE_TYPE, t.len()));
    }
    check_lengths(path, "particles", n, &lens)?;
    let columns: &'static [&'static str] = if p.particle_type.is_some() { &COLUMNS_WITH_TYPE } else { &COLUMNS };
    write_rows(path, columns, n, |w, i| ParticleRow::of(p, i).write(w))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csv::testutil::{assert_err, sample_event, write_text};

    #[test]
    fn round_trip_with_and_without_type() {
        let ev = sample_event(500, 4);
        let with = ev.particles.clone().unwrap();
        assert!(with.particle_type.is_some() && with.len() > 10);
        let without = Particles { particle_type: None, ..with.clone() };
        let dir = tempfile::tempdir().unwrap();
        for (p, name) in [(&with, "p.csv"), (&with, "p.csv.gz"), (&without, "q.csv"), (&without, "q.csv.gz")] {
            let path = dir.path().join(name);
            write_particles(&path, p).unwrap();
            assert_eq!(&read_particles(&path).unwrap(), p, "{name}");
        }
        let header = std::fs::read_to_string(dir.path().join("q.csv")).unwrap();
        assert!(header.starts_with("particle_id,vx,"), "{header}");
    }

    #[test]
    fn header_only_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_text(dir.path(), "p.csv", "particle_id,vx,vy,vz,px,py,pz,q,nhits\r\n");
        let p = read_particles(&path).unwrap();
        assert!(p.is_empty() && p.particle_type.is_none());
    }

    #[test]
    fn bad_inputs() {
        let dir = tempfile::tempdir().unwrap();
        let head = "particle_id,particle_type,vx,vy,vz,px,py,pz,q,nhits\n";
        let case = |name: &str, body: &str| {
            let path = write_text(dir.path(), name, &format!("{head}{body}"));
            read_particles(&path).unwrap_err()
        };
        let row = |id: u64| format!("{id},-211,0,0,1,0.5,0.1,2,-1,11\n");
        let e = case("dup.csv", &(row(4503668346847232) + &row(7) + &row(4503668346847232)));
        assert_err(
            &e,
            |e| matches!(e, Error::DuplicateParticle { line: 4, first_line: 2, particle_id: 4503668346847232, .. }),
            &["dup.csv:4", "duplicate particle_id 4503668346847232", "first on line 2"],
        );
        let e = case("zero.csv", &(row(3) + &row(0)));
        assert_err(&e, |e| matches!(e, Error::Parse { line: 3, .. }), &["zero.csv:3", "column `particle_id`", "noise"]);
        let e = case("neg.csv", "-3,-211,0,0,1,0.5,0.1,2,-1,11\n");
        assert_err(&e, |e| matches!(e, Error::Parse { .. }), &["neg.csv:2", "column `particle_id`"]);
        let e = case("q.csv", "3,-211,0,0,1,0.5,0.1,2,-300,11\n");
        assert_err(&e, |e| matches!(e, Error::Parse { .. }), &["q.csv:2", "column `q`", "i8"]);
    }
}
