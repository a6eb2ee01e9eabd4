//! `detectors.csv`: one row per module (volume_id, layer_id, module_id, cx, cy, cz, rot_xu …
//! rot_zw, module_t, module_minhu, module_maxhu, module_hv, pitch_u, pitch_v).
//!
//! `rot` rows are x, y, z and columns u, v, w: `rot[0] = [rot_xu, rot_xv, rot_xw]`. Copies
//! saved through pandas carry an unnamed index column first (header `,volume_id,…`); it is
//! ignored like any other unknown column.

use std::path::Path;

use super::index::find_duplicate;
use super::table::{Row, Table};
use super::write::{CsvWriter, write_rows};
use crate::error::{Error, Result};
use crate::geometry::{Detector, Module};
use crate::ids::ModuleId;

/// The columns of a detectors file, in the order they are written.
pub(crate) const COLUMNS: [&str; 21] = [
    "volume_id",
    "layer_id",
    "module_id",
    "cx",
    "cy",
    "cz",
    "rot_xu",
    "rot_xv",
    "rot_xw",
    "rot_yu",
    "rot_yv",
    "rot_yw",
    "rot_zu",
    "rot_zv",
    "rot_zw",
    "module_t",
    "module_minhu",
    "module_maxhu",
    "module_hv",
    "pitch_u",
    "pitch_v",
];

/// One row of a detectors file, as the columns give it (in [`COLUMNS`] order).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ModuleRow {
    /// volume_id, layer_id, module_id.
    pub ids: (u16, u16, u32),
    /// cx … pitch_v \[mm\], the 18 float columns in order.
    pub values: [f64; 18],
}

impl ModuleRow {
    #[inline]
    fn parse(r: &Row<'_>, c: &[usize; 21]) -> Result<ModuleRow> {
        let mut values = [0.0; 18];
        for (v, &col) in values.iter_mut().zip(&c[3..]) {
            *v = r.f64(col)?;
        }
        Ok(ModuleRow { ids: (r.uint(c[0])?, r.uint(c[1])?, r.uint(c[2])?), values })
    }

    fn into_module(self) -> Module {
        let v = self.values;
        Module {
            id: ModuleId::new(self.ids.0, self.ids.1, self.ids.2),
            center: [v[0], v[1], v[2]],
            rot: [[v[3], v[4], v[5]], [v[6], v[7], v[8]], [v[9], v[10], v[11]]],
            thickness: v[12],
            min_hu: v[13],
            max_hu: v[14],
            hv: v[15],
            pitch_u: v[16],
            pitch_v: v[17],
        }
    }

    fn of(m: &Module) -> ModuleRow {
        let mut values = [0.0; 18];
        values[..3].copy_from_slice(&m.center);
        for (k, row) in m.rot.iter().enumerate() {
            values[3 + 3 * k..6 + 3 * k].copy_from_slice(row);
        }
        values[12..].copy_from_slice(&[m.thickness, m.min_hu, m.max_hu, m.hv, m.pitch_u, m.pitch_v]);
        ModuleRow { ids: (m.id.volume(), m.id.layer(), m.id.module()), values }
    }

    fn write(&self, w: &mut CsvWriter) -> std::io::Result<()> {
        w.u64(self.ids.0.into())?;
        w.u64(self.ids.1.into())?;
        w.u64(self.ids.2.into())?;
        for v in self.values {
            w.f64(v)?;
        }
        Ok(())
    }
}

/// Reads the modules of a `detectors.csv` (plain or gzip), in file order.
///
/// Errors: a parse error on column `module_id` if a (volume, layer, module) repeats, and the
/// parse errors of every reader.
pub fn read_detectors(path: &Path) -> Result<Vec<Module>> {
    let t = Table::open(path)?;
    let c = t.require(COLUMNS)?;
    let need = c.iter().max().unwrap() + 1;
    let mut modules = Vec::new();
    let mut rows = t.rows(need);
    while let Some(r) = rows.next()? {
        modules.push(ModuleRow::parse(&r, &c)?.into_module());
    }
    let ids: Vec<ModuleId> = modules.iter().map(|m| m.id).collect();
    if let Some((first, second)) = find_duplicate(&ids) {
        return Err(t.error(
            t.line_of_row(second),
            c[2],
            format!("duplicate module ({}), first on line {}", ids[second], t.line_of_row(first)),
        ));
    }
    Ok(modules)
}

/// Writes `modules` as a `detectors.csv` (gzip if `path` ends in `.gz`), atomically, with
/// exact (shortest round-trip) `f64` values; returns its size in bytes.
pub fn write_detectors(path: &Path, modules: &[Module]) -> Result<u64> {
    write_rows(path, &COLUMNS, modules.len(), |w, i| ModuleRow::of(&modules[i]).write(w))
}

impl Detector {
    /// Reads a detector from a TrackML `detectors.csv` (see [`read_detectors`]) and builds
    /// its layers and lookup ([`Detector::from_modules`]); a geometry that cannot be used is
    /// an [`Error::Inconsistent`] naming the file.
    pub fn from_csv(path: &Path) -> Result<Detector> {
        Detector::from_modules(read_detectors(path)?).map_err(|e| match e {
            Error::Geometry(message) => Error::Inconsistent { path: path.to_path_buf(), message },
            e => e,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csv::testutil::{assert_err, write_text};
    use crate::geometry::trackml_modules;

    #[test]
    fn round_trip_trackml_geometry() {
        let modules = trackml_modules();
        assert_eq!(modules.len(), 18_728);
        let dir = tempfile::tempdir().unwrap();
        for name in ["detectors.csv", "detectors.csv.gz"] {
            let path = dir.path().join(name);
            write_detectors(&path, &modules).unwrap();
            assert_eq!(read_detectors(&path).unwrap(), modules, "{name}");
            let det = Detector::from_csv(&path).unwrap();
            assert_eq!((det.layers.len(), det.modules.len()), (48, 18_728));
        }
    }

    #[test]
    fn leading_index_column_and_other_order() {
        let dir = tempfile::tempdir().unwrap();
        let text = ",volume_id,layer_id,module_id,cx,cy,cz,rot_xu,rot_xv,rot_xw,rot_yu,rot_yv,rot_yw,\
                    rot_zu,rot_zv,rot_zw,module_t,module_minhu,module_maxhu,module_hv,pitch_u,pitch_v\r\n\
                    0,7,2,1,-65.7965,-5.9,-1502.5,0.0,1.0,0.0,-1.0,0.0,0.0,0.0,0.0,1.0,0.15,8.4,8.4,36,0.05,0.05625\r\n";
        let path = write_text(dir.path(), "d.csv", text);
        let m = &read_detectors(&path).unwrap()[0];
        assert_eq!(m.id, ModuleId::new(7, 2, 1));
        assert_eq!(m.center, [-65.7965, -5.9, -1502.5]);
        assert_eq!(m.rot, [[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]);
        assert_eq!((m.thickness, m.min_hu, m.hv, m.pitch_v), (0.15, 8.4, 36.0, 0.05625));

        // Reordered columns give the same module.
        let mut order: Vec<usize> = (0..21).rev().collect();
        order.swap(0, 7);
        let fields: Vec<&str> = text.lines().nth(1).unwrap().split(',').skip(1).collect();
        let head: Vec<&str> = order.iter().map(|&i| COLUMNS[i]).collect();
        let row: Vec<&str> = order.iter().map(|&i| fields[i]).collect();
        let path = write_text(dir.path(), "e.csv", &format!("{}\n{}\n", head.join(","), row.join(",")));
        assert_eq!(&read_detectors(&path).unwrap()[0], m);

        // The same module twice.
        let dup = format!("{text}1{}", &text.lines().nth(1).unwrap()[1..]);
        let path = write_text(dir.path(), "dup.csv", &dup);
        assert_err(
            &read_detectors(&path).unwrap_err(),
            |e| matches!(e, Error::Parse { line: 3, .. }),
            &["dup.csv:3", "column `module_id`", "first on line 2"],
        );
    }

    /// Found by the fuzz target `fuzz_detectors`: a module with a zero pitch parsed, but the
    /// geometry's refusal did not say which file it came from.
    #[test]
    fn unusable_geometry_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let text = "volume_id,layer_id,module_id,cx,cy,cz,rot_xu,rot_xv,rot_xw,rot_yu,rot_yv,rot_yw,\
                    rot_zu,rot_zv,rot_zw,module_t,module_minhu,module_maxhu,module_hv,pitch_u,pitch_v\n\
                    7,2,1,-65.7965,-5.9,-1502.5,0.0,1.0,0.0,-1.0,0.0,0.0,0.0,0.0,1.0,0.15,8.4,8.4,36,0.05,0\n";
        let path = write_text(dir.path(), "zero_pitch.csv", text);
        assert_err(
            &Detector::from_csv(&path).unwrap_err(),
            |e| matches!(e, Error::Inconsistent { .. }),
            &["zero_pitch.csv", "non-positive size or pitch"],
        );
    }
}
