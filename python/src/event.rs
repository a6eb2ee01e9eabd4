//! TrackML events as numpy arrays: [`PyEvent`] (`trackgnn.Event`), and reading, writing and
//! generating events with the `trackgnn-trackml` and `trackgnn-simulate` libraries.
//!
//! Columns are named and typed as in the TrackML CSV files (`hit_id`, `x`, …, `volume_id`,
//! `layer_id`, `module_id`; ids unsigned 64-bit, coordinates float32), one dict of columns per
//! file.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use numpy::{Element, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use trackgnn_simulate::{Generator, SimConfig};
use trackgnn_trackml::csv::{EventFiles, ReadOptions, read_event as read_files, write_event as write_files};
use trackgnn_trackml::event::{Cells, Hits, Particles, Truth};
use trackgnn_trackml::{Detector, Event, ModuleId, ParticleId};

use crate::errors::{config_error, to_py};

/// The built-in TrackML detector, built once.
pub fn trackml_detector() -> &'static Detector {
    static DET: OnceLock<Detector> = OnceLock::new();
    DET.get_or_init(Detector::trackml)
}

/// A detector: `detectors.csv` at `path`, or the built-in TrackML one.
pub fn detector(py: Python<'_>, path: Option<PathBuf>) -> PyResult<Detector> {
    match path {
        Some(p) => py.detach(|| Detector::from_csv(&p)).map_err(to_py),
        None => Ok(trackml_detector().clone()),
    }
}

/// One TrackML event (`trackgnn.Event`): hits always, truth, particles and cells when read or
/// generated. Each part comes out as a dict of numpy arrays (a copy), one per CSV column.
#[pyclass(name = "Event", module = "trackgnn", frozen)]
pub struct PyEvent {
    /// The event.
    pub event: Event,
}

/// `dict[name] = array` for each column.
fn columns<'py>(py: Python<'py>, cols: Vec<(&str, Bound<'py, PyAny>)>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, array) in cols {
        d.set_item(name, array)?;
    }
    Ok(d)
}

/// A numpy array copied from `v`.
fn arr<'py, T: Element + Copy>(py: Python<'py>, v: &[T]) -> Bound<'py, PyAny> {
    PyArray1::from_slice(py, v).into_any()
}

/// A numpy array of `f` applied to each element of `v`.
fn arr_map<'py, S, T: Element>(py: Python<'py>, v: &[S], f: impl Fn(&S) -> T) -> Bound<'py, PyAny> {
    PyArray1::from_vec(py, v.iter().map(f).collect()).into_any()
}

#[pymethods]
impl PyEvent {
    /// An event from columns: `hits` (and optionally `truth`, `particles`, `cells`) are
    /// mappings from column name to array (dicts of numpy arrays or pandas DataFrames), with
    /// the columns of the TrackML files. The truth must list the hits in the same order.
    #[staticmethod]
    #[pyo3(signature = (event_id, hits, truth=None, particles=None, cells=None))]
    fn from_columns(
        event_id: u64,
        hits: &Bound<'_, PyAny>,
        truth: Option<&Bound<'_, PyAny>>,
        particles: Option<&Bound<'_, PyAny>>,
        cells: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyEvent> {
        let hits = hits_of(hits)?;
        let truth = truth.map(|t| truth_of(t, &hits)).transpose()?;
        let particles = particles.map(particles_of).transpose()?;
        let cells = cells.map(cells_of).transpose()?;
        Ok(PyEvent { event: Event { event_id, hits, truth, particles, cells } })
    }

    /// The number in the file names' `eventNNNNNNNNN-` prefix.
    #[getter]
    fn event_id(&self) -> u64 {
        self.event.event_id
    }

    /// The number of hits.
    #[getter]
    fn num_hits(&self) -> usize {
        self.event.hits.len()
    }

    /// The parts present: `hits` and those of `truth`, `particles`, `cells` read or generated.
    #[getter]
    fn parts(&self) -> Vec<&'static str> {
        let e = &self.event;
        let mut p = vec!["hits"];
        for (name, has) in
            [("truth", e.truth.is_some()), ("particles", e.particles.is_some()), ("cells", e.cells.is_some())]
        {
            if has {
                p.push(name);
            }
        }
        p
    }

    /// The hits: `hit_id`, `x`, `y`, `z` (mm), `volume_id`, `layer_id`, `module_id`.
    fn hits<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let h = &self.event.hits;
        columns(
            py,
            vec![
                ("hit_id", arr(py, &h.hit_id)),
                ("x", arr(py, &h.x)),
                ("y", arr(py, &h.y)),
                ("z", arr(py, &h.z)),
                ("volume_id", arr_map(py, &h.module, |m| u32::from(m.volume()))),
                ("layer_id", arr_map(py, &h.module, |m| u32::from(m.layer()))),
                ("module_id", arr_map(py, &h.module, |m| m.module())),
            ],
        )
    }

    /// The truth, aligned with the hits: `hit_id`, `particle_id`, `tx`, `ty`, `tz` (mm),
    /// `tpx`, `tpy`, `tpz` (GeV), `weight`; `None` if the event has none.
    fn truth<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(t) = &self.event.truth else { return Ok(None) };
        let cols = vec![
            ("hit_id", arr(py, &self.event.hits.hit_id)),
            ("particle_id", arr_map(py, &t.particle_id, |p| p.0)),
            ("tx", arr(py, &t.tx)),
            ("ty", arr(py, &t.ty)),
            ("tz", arr(py, &t.tz)),
            ("tpx", arr(py, &t.tpx)),
            ("tpy", arr(py, &t.tpy)),
            ("tpz", arr(py, &t.tpz)),
            ("weight", arr(py, &t.weight)),
        ];
        columns(py, cols).map(Some)
    }

    /// The particles: `particle_id`, (`particle_type` when known), `vx`, `vy`, `vz` (mm),
    /// `px`, `py`, `pz` (GeV), `q` (e), `nhits`; `None` if the event has none.
    fn particles<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(p) = &self.event.particles else { return Ok(None) };
        let mut cols = vec![("particle_id", arr_map(py, &p.particle_id, |p| p.0))];
        if let Some(t) = &p.particle_type {
            cols.push(("particle_type", arr(py, t)));
        }
        cols.extend([
            ("vx", arr(py, &p.vx)),
            ("vy", arr(py, &p.vy)),
            ("vz", arr(py, &p.vz)),
            ("px", arr(py, &p.px)),
            ("py", arr(py, &p.py)),
            ("pz", arr(py, &p.pz)),
            ("q", arr(py, &p.q)),
            ("nhits", arr(py, &p.nhits)),
        ]);
        columns(py, cols).map(Some)
    }

    /// The cells: `hit_id`, `ch0`, `ch1`, `value`; `None` if the event has none.
    fn cells<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(c) = &self.event.cells else { return Ok(None) };
        let cols = vec![
            ("hit_id", arr(py, &c.hit_id)),
            ("ch0", arr(py, &c.ch0)),
            ("ch1", arr(py, &c.ch1)),
            ("value", arr(py, &c.value)),
        ];
        columns(py, cols).map(Some)
    }

    fn __eq__(&self, other: &PyEvent) -> bool {
        self.event == other.event
    }

    fn __repr__(&self) -> String {
        format!("Event(event_id={}, hits={}, parts={:?})", self.event.event_id, self.event.hits.len(), self.parts())
    }
}

/// Column `name` of `table` as a `Vec<T>`, converted by numpy (`numpy.ascontiguousarray(col,
/// dtype)`); a missing column is a `ConfigError` naming `part` and the column.
fn column<T: Element + Copy>(table: &Bound<'_, PyAny>, part: &str, name: &str, dtype: &str) -> PyResult<Vec<T>> {
    let py = table.py();
    let col = table.get_item(name).map_err(|_| config_error(format!("{part}: missing column `{name}`")))?;
    let np = py.import("numpy")?;
    let a = np.getattr("ascontiguousarray")?.call1((col, dtype)).and_then(|a| np.getattr("ravel")?.call1((a,)));
    let a = a.map_err(|e| config_error(format!("{part}: column `{name}`: {e}")))?;
    let a: PyReadonlyArray1<'_, T> = a.extract()?;
    Ok(a.as_slice()?.to_vec())
}

/// True if `table` has column `name`.
fn has_column(table: &Bound<'_, PyAny>, name: &str) -> bool {
    table.get_item(name).is_ok()
}

fn check_lengths(part: &str, lens: &[(&str, usize)]) -> PyResult<()> {
    if let Some((name, n)) = lens.iter().find(|(_, n)| *n != lens[0].1) {
        return Err(config_error(format!(
            "{part}: column `{name}` has {n} rows, column `{}` has {}",
            lens[0].0, lens[0].1
        )));
    }
    Ok(())
}

fn hits_of(t: &Bound<'_, PyAny>) -> PyResult<Hits> {
    let p = "hits";
    let hit_id = column::<u64>(t, p, "hit_id", "uint64")?;
    let (x, y, z) = (column(t, p, "x", "float32")?, column(t, p, "y", "float32")?, column(t, p, "z", "float32")?);
    let volume = column::<u16>(t, p, "volume_id", "uint16")?;
    let layer = column::<u16>(t, p, "layer_id", "uint16")?;
    let module = column::<u32>(t, p, "module_id", "uint32")?;
    check_lengths(
        p,
        &[
            ("hit_id", hit_id.len()),
            ("x", x.len()),
            ("y", y.len()),
            ("z", z.len()),
            ("volume_id", volume.len()),
            ("layer_id", layer.len()),
            ("module_id", module.len()),
        ],
    )?;
    let module = (0..hit_id.len()).map(|i| ModuleId::new(volume[i], layer[i], module[i])).collect();
    Ok(Hits { hit_id, x, y, z, module })
}

/// The truth rows in the order of `hits` (as the readers align them): rows are matched by
/// `hit_id`.
fn truth_of(t: &Bound<'_, PyAny>, hits: &Hits) -> PyResult<Truth> {
    let p = "truth";
    let hit_id = column::<u64>(t, p, "hit_id", "uint64")?;
    let pid = column::<u64>(t, p, "particle_id", "uint64")?;
    let f = |name| column::<f32>(t, p, name, "float32");
    let (tx, ty, tz, tpx, tpy, tpz, w) = (f("tx")?, f("ty")?, f("tz")?, f("tpx")?, f("tpy")?, f("tpz")?, f("weight")?);
    let lens = [("hit_id", hit_id.len()), ("particle_id", pid.len()), ("tx", tx.len()), ("ty", ty.len())];
    check_lengths(p, &lens)?;
    check_lengths(p, &[("hit_id", hit_id.len()), ("tz", tz.len()), ("tpx", tpx.len()), ("tpy", tpy.len())])?;
    check_lengths(p, &[("hit_id", hit_id.len()), ("tpz", tpz.len()), ("weight", w.len())])?;
    if hit_id.len() != hits.len() {
        return Err(config_error(format!("truth: {} rows for {} hits", hit_id.len(), hits.len())));
    }
    let row: std::collections::HashMap<u64, usize> = hit_id.iter().enumerate().map(|(i, &h)| (h, i)).collect();
    let mut truth = Truth::default();
    for &h in &hits.hit_id {
        let &i = row.get(&h).ok_or_else(|| config_error(format!("truth: no row for hit_id {h}")))?;
        truth.push(ParticleId(pid[i]), [tx[i], ty[i], tz[i]], [tpx[i], tpy[i], tpz[i]], w[i]);
    }
    Ok(truth)
}

fn particles_of(t: &Bound<'_, PyAny>) -> PyResult<Particles> {
    let p = "particles";
    let f = |name| column::<f32>(t, p, name, "float32");
    let particle_id: Vec<ParticleId> =
        column::<u64>(t, p, "particle_id", "uint64")?.into_iter().map(ParticleId).collect();
    let particle_type =
        if has_column(t, "particle_type") { Some(column::<i32>(t, p, "particle_type", "int32")?) } else { None };
    let out = Particles {
        particle_type,
        vx: f("vx")?,
        vy: f("vy")?,
        vz: f("vz")?,
        px: f("px")?,
        py: f("py")?,
        pz: f("pz")?,
        q: column::<i8>(t, p, "q", "int8")?,
        nhits: column::<u32>(t, p, "nhits", "uint32")?,
        particle_id,
    };
    let mut lens = vec![("particle_id", out.particle_id.len()), ("vx", out.vx.len()), ("vy", out.vy.len())];
    lens.extend([("vz", out.vz.len()), ("px", out.px.len()), ("py", out.py.len()), ("pz", out.pz.len())]);
    lens.extend([("q", out.q.len()), ("nhits", out.nhits.len())]);
    if let Some(t) = &out.particle_type {
        lens.push(("particle_type", t.len()));
    }
    check_lengths(p, &lens)?;
    Ok(out)
}

fn cells_of(t: &Bound<'_, PyAny>) -> PyResult<Cells> {
    let p = "cells";
    let out = Cells {
        hit_id: column(t, p, "hit_id", "uint64")?,
        ch0: column(t, p, "ch0", "uint32")?,
        ch1: column(t, p, "ch1", "uint32")?,
        value: column(t, p, "value", "float32")?,
    };
    let lens =
        [("hit_id", out.hit_id.len()), ("ch0", out.ch0.len()), ("ch1", out.ch1.len()), ("value", out.value.len())];
    check_lengths(p, &lens)?;
    Ok(out)
}

/// The event id in a file prefix such as `event000001000` (its trailing digits).
fn event_id_of(prefix: &str) -> Option<u64> {
    let digits = prefix.strip_prefix("event")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Reads the event at `prefix` (`DIR/eventNNNNNNNNN`, as the `trackml` library's
/// `load_event`): its hits, and the other `parts` asked for (default all four; a part asked
/// for that is absent is an error naming the file). Plain or gzipped CSV.
#[pyfunction]
#[pyo3(signature = (prefix, parts=None))]
pub fn read_event(py: Python<'_>, prefix: PathBuf, parts: Option<Vec<String>>) -> PyResult<PyEvent> {
    let name = prefix.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let event_id = event_id_of(name)
        .ok_or_else(|| config_error(format!("{}: not an event prefix (DIR/eventNNNNNNNNN)", prefix.display())))?;
    let parts = parts.unwrap_or_else(|| ["hits", "truth", "particles", "cells"].map(String::from).to_vec());
    let mut opts = ReadOptions::hits_only();
    for p in &parts {
        match p.as_str() {
            "hits" => {}
            "truth" => opts.truth = true,
            "particles" => opts.particles = true,
            "cells" => opts.cells = true,
            other => {
                return Err(config_error(format!("unknown part `{other}` (hits, truth, particles or cells)")));
            }
        }
    }
    let dir = prefix.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
    let files = EventFiles { event_id, dir, prefix: name.to_string() };
    let event = py.detach(|| read_files(&files, opts)).map_err(to_py)?;
    Ok(PyEvent { event })
}

/// Writes every part of `event` into `dir` (created if needed) as
/// `eventNNNNNNNNN-{hits,truth,particles,cells}.csv` (`.csv.gz` if `gzip`), each file
/// whole or not at all. Returns the bytes written.
#[pyfunction]
#[pyo3(signature = (dir, event, gzip=false))]
pub fn write_event(py: Python<'_>, dir: PathBuf, event: &PyEvent, gzip: bool) -> PyResult<u64> {
    let stats = py.detach(|| write_files(&dir, &event.event, gzip)).map_err(to_py)?;
    Ok(stats.bytes_written)
}

/// Generates event `event_id` of the data set `seed` with the trackgnn generator
/// (`trackgnn simulate --seed SEED` makes the same event), with `pileup` interactions on
/// average and the other settings of `config` (a dict of `SimConfig` keys, as in a
/// `trackgnn simulate --config` TOML), on the built-in TrackML detector or `detector`
/// (a `detectors.csv`).
#[pyfunction]
#[pyo3(signature = (seed, event_id, pileup=None, config=None, detector=None))]
pub fn generate_event(
    py: Python<'_>,
    seed: u64,
    event_id: u64,
    pileup: Option<f64>,
    config: Option<&Bound<'_, PyDict>>,
    detector: Option<PathBuf>,
) -> PyResult<PyEvent> {
    let mut cfg = match config {
        Some(d) => {
            let json: String = py.import("json")?.getattr("dumps")?.call1((d,))?.extract()?;
            serde_json::from_str::<SimConfig>(&json).map_err(|e| config_error(format!("generator config: {e}")))?
        }
        None => SimConfig::default(),
    };
    if let Some(p) = pileup {
        cfg.pileup = p;
    }
    cfg.validate().map_err(|e| config_error(format!("generator config: {}", trackgnn_trackml::error::report(&e))))?;
    let det = self::detector(py, detector)?;
    let event = py.detach(|| Generator::new(det, cfg).event(seed, event_id).0);
    Ok(PyEvent { event })
}

/// Adds the event class and functions to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyEvent>()?;
    m.add_function(wrap_pyfunction!(read_event, m)?)?;
    m.add_function(wrap_pyfunction!(write_event, m)?)?;
    m.add_function(wrap_pyfunction!(generate_event, m)?)?;
    Ok(())
}
