//! Reading graph files: the whole graph, or only its header.
//!
//! Why `std::fs::read` and not a memory map: the file is read with one system call into one
//! buffer (a kernel copy at memory speed), and each array is then decoded by one bulk copy. A
//! map would save the first copy but pay a page fault per 4 KiB page instead, which is no
//! faster for files of tens of MB, and a file truncated under a live map raises SIGBUS rather
//! than an error.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use super::format::{
    CRC_LEN, Dtype, Element, FORMAT_VERSION, GraphHeader, HeaderJson, MAGIC, PREFIX_LEN, check_indices, data_start,
    to_usize,
};
use crate::error::{Error, Result};
use crate::graph::{Graph, GraphTruth};

/// Reads the graph in `path` (see [`crate::file`] for the format).
///
/// Arrays are found by name and unknown ones are ignored, so files of a later writer that only
/// adds arrays or header fields still read.
///
/// Errors, each naming the file: [`Error::Io`]; [`Error::Truncated`] with the expected and
/// actual sizes; [`Error::UnsupportedVersion`] for a newer format; [`Error::ChecksumMismatch`]
/// if the data section does not match its CRC32; [`Error::Corrupt`] for a bad magic, an
/// unparsable header, a missing array, an array of the wrong dtype or length or out of bounds,
/// or an edge whose node index is out of range.
pub fn read_graph(path: &Path) -> Result<Graph> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let file_len = bytes.len() as u64;
    let header_len = parse_prefix(path, &bytes[..bytes.len().min(PREFIX_LEN)], file_len)?;
    let h = parse_header(path, &bytes[PREFIX_LEN..][..header_len], file_len)?;
    let start = data_start(header_len as u64) as usize;
    let data = &bytes[start..][..h.data_len as usize];
    let stored = u32::from_le_bytes(*bytes.last_chunk::<4>().expect("size checked"));
    let computed = crc32fast::hash(data);
    if stored != computed {
        return Err(Error::ChecksumMismatch { path: path.to_path_buf(), stored, computed });
    }
    let head = public_header(path, &h)?;
    let a = Arrays { path, data, h: &h };
    let (n, e) = (head.num_nodes, head.num_edges);
    let nf = a.product(n, head.node_feature_names.len(), "num_nodes × node features")?;
    let ef = a.product(e, head.edge_feature_names.len(), "num_edges × edge features")?;
    let nodes = "num_nodes";
    let edges = "num_edges";
    let g = Graph {
        event_id: h.event_id,
        node_features: a.get("node_features", nf, "num_nodes × node features")?,
        edge_features: a.get("edge_features", ef, "num_edges × edge features")?,
        src: a.get("src", e, edges)?,
        dst: a.get("dst", e, edges)?,
        hit_id: a.get("hit_id", n, nodes)?,
        r: a.get("r", n, nodes)?,
        phi: a.get("phi", n, nodes)?,
        z: a.get("z", n, nodes)?,
        truth: match h.has_truth {
            false => None,
            true => Some(GraphTruth {
                particle_id: a.get("particle_id", n, nodes)?,
                particle_pt: a.get("particle_pt", n, nodes)?,
                particle_eta: a.get("particle_eta", n, nodes)?,
                particle_vertex_r: a.get_optional("particle_vertex_r", n, nodes)?,
                y: a.get("y", e, edges)?,
                target: a.get("target", e, edges)?,
                n_true_edges_event: h.n_true_edges_event,
                n_target_edges_event: h.n_target_edges_event,
            }),
        },
        node_feature_names: head.node_feature_names,
        edge_feature_names: head.edge_feature_names,
        edge_owned: a.get_optional("edge_owned", e, edges)?,
    };
    check_indices("src", &g.src, n).map_err(|m| Error::corrupt(path, m))?;
    check_indices("dst", &g.dst, n).map_err(|m| Error::corrupt(path, m))?;
    Ok(g)
}

/// Reads only the header of the graph file `path`: event, sizes, feature names and whether it
/// has truth. Reads a few hundred bytes whatever the graph size, so a directory of graphs can
/// be binned by size before any is loaded.
///
/// Checks the magic, the version, the header and the file size (a truncated file is reported),
/// but not the data section or its checksum: [`read_graph`] does that.
pub fn read_graph_header(path: &Path) -> Result<GraphHeader> {
    let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
    let file_len = f.metadata().map_err(|e| Error::io(path, e))?.len();
    let mut prefix = [0u8; PREFIX_LEN];
    let got = (file_len as usize).min(PREFIX_LEN);
    f.read_exact(&mut prefix[..got]).map_err(|e| Error::io(path, e))?;
    let header_len = parse_prefix(path, &prefix[..got], file_len)?;
    let mut json = vec![0u8; header_len];
    f.read_exact(&mut json).map_err(|e| Error::io(path, e))?;
    let h = parse_header(path, &json, file_len)?;
    public_header(path, &h)
}

/// Checks the fixed header (`prefix`, the first up to 16 bytes of a file of `file_len` bytes)
/// and that the file holds the whole JSON header; returns the JSON header's length.
fn parse_prefix(path: &Path, prefix: &[u8], file_len: u64) -> Result<usize> {
    let m = prefix.len().min(MAGIC.len());
    if prefix[..m] != MAGIC[..m] {
        return Err(Error::corrupt(
            path,
            format!(
                "not a graph file: bad magic {:?} (expected {:?})",
                String::from_utf8_lossy(&prefix[..m]),
                String::from_utf8_lossy(MAGIC)
            ),
        ));
    }
    let truncated = |expected, part| Error::Truncated { path: path.to_path_buf(), expected, actual: file_len, part };
    if prefix.len() < PREFIX_LEN {
        return Err(truncated(PREFIX_LEN as u64, "fixed header"));
    }
    let version = u32::from_le_bytes(prefix[8..12].try_into().expect("4 bytes"));
    if version == 0 || version > FORMAT_VERSION {
        return Err(Error::UnsupportedVersion { path: path.to_path_buf(), found: version, supported: FORMAT_VERSION });
    }
    let header_len = u32::from_le_bytes(prefix[12..16].try_into().expect("4 bytes")) as u64;
    let needed = PREFIX_LEN as u64 + header_len;
    if file_len < needed {
        return Err(truncated(needed, "JSON header"));
    }
    Ok(header_len as usize)
}

/// Parses the JSON header of a file of `file_len` bytes and checks it against the file: size,
/// and every array (of a known dtype) within the data section, no name twice.
fn parse_header(path: &Path, json: &[u8], file_len: u64) -> Result<HeaderJson> {
    let h: HeaderJson =
        serde_json::from_slice(json).map_err(|e| Error::corrupt(path, format!("bad JSON header: {e}")))?;
    let start = data_start(json.len() as u64);
    let expected = start
        .checked_add(h.data_len)
        .and_then(|x| x.checked_add(CRC_LEN))
        .ok_or_else(|| Error::corrupt(path, format!("data_len {} overflows", h.data_len)))?;
    if file_len < expected {
        let part = if file_len < start + h.data_len { "data section" } else { "checksum" };
        return Err(Error::Truncated { path: path.to_path_buf(), expected, actual: file_len, part });
    }
    if file_len > expected {
        return Err(Error::corrupt(
            path,
            format!(
                "{} unexpected bytes after the checksum (expected {expected} bytes, found {file_len})",
                file_len - expected
            ),
        ));
    }
    for (i, e) in h.arrays.iter().enumerate() {
        if h.arrays[..i].iter().any(|p| p.name == e.name) {
            return Err(Error::corrupt(path, format!("array `{}` appears twice", e.name)));
        }
        // An unknown dtype is only an error for an array this reader needs (see `get`).
        let Some(dtype) = Dtype::parse(&e.dtype) else {
            continue;
        };
        let end = e.len.checked_mul(dtype.size()).and_then(|b| b.checked_add(e.offset));
        if end.is_none_or(|end| end > h.data_len) {
            return Err(Error::corrupt(
                path,
                format!(
                    "array `{}` ({} × {}, at offset {}) extends past the data section ({} bytes)",
                    e.name, e.len, e.dtype, e.offset, h.data_len
                ),
            ));
        }
    }
    Ok(h)
}

/// The public part of a parsed header.
fn public_header(path: &Path, h: &HeaderJson) -> Result<GraphHeader> {
    Ok(GraphHeader {
        event_id: h.event_id,
        num_nodes: to_usize(path, "num_nodes", h.num_nodes)?,
        num_edges: to_usize(path, "num_edges", h.num_edges)?,
        node_feature_names: h.node_feature_names.clone(),
        edge_feature_names: h.edge_feature_names.clone(),
        has_truth: h.has_truth,
    })
}

/// The arrays of a checked data section, found by name.
struct Arrays<'a> {
    path: &'a Path,
    data: &'a [u8],
    h: &'a HeaderJson,
}

impl Arrays<'_> {
    /// `rows × cols`, or an error naming `what` if it overflows.
    fn product(&self, rows: usize, cols: usize, what: &str) -> Result<usize> {
        rows.checked_mul(cols).ok_or_else(|| Error::corrupt(self.path, format!("{what} = {rows} × {cols} overflows")))
    }

    /// The array `name`, which must have dtype `T` and `len` elements (`why` says where `len`
    /// comes from).
    /// True if the file has an array named `name` (optional arrays).
    /// The array `name` as [`Arrays::get`] reads it, or empty if the file has none (arrays that
    /// a writer adds only when it has them).
    fn get_optional<T: Element>(&self, name: &str, len: usize, why: &str) -> Result<Vec<T>> {
        match self.h.arrays.iter().any(|e| e.name == name) {
            true => self.get(name, len, why),
            false => Ok(Vec::new()),
        }
    }

    fn get<T: Element>(&self, name: &str, len: usize, why: &str) -> Result<Vec<T>> {
        let e = self
            .h
            .arrays
            .iter()
            .find(|e| e.name == name)
            .ok_or_else(|| Error::corrupt(self.path, format!("missing required array `{name}`")))?;
        if e.dtype != T::DTYPE.name() {
            return Err(Error::corrupt(
                self.path,
                format!("array `{name}` has dtype `{}`, expected `{}`", e.dtype, T::DTYPE.name()),
            ));
        }
        if e.len != len as u64 {
            return Err(Error::corrupt(
                self.path,
                format!("array `{name}` has {} values, expected {len} ({why})", e.len),
            ));
        }
        // In bounds: checked by `parse_header` for every array of a known dtype.
        let bytes = len * T::DTYPE.size() as usize;
        Ok(T::decode(&self.data[e.offset as usize..][..bytes]))
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Instant;

    use super::*;
    use crate::file::testutil::{join, sample_graph, split};
    use crate::file::write::{ArrayRef, encode, graph_arrays};
    use crate::file::write_graph;

    /// Writes `bytes` as `name` in `dir`; returns the path.
    fn put(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    /// The error of reading `path`, which must name the file.
    fn read_err(path: &Path) -> Error {
        let err = read_graph(path).expect_err("read must fail");
        assert!(err.to_string().contains(&*path.to_string_lossy()), "error does not name the file: {err}");
        err
    }

    #[test]
    fn round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            // (nodes, edges, node features, edge features, truth)
            (100, 400, 3, 4, true),
            (100, 400, 3, 4, false),
            (100, 400, 3, 0, true),
            (37, 0, 3, 4, true),
            (37, 0, 2, 0, false),
            (0, 0, 3, 0, false),
            (1, 1, 1, 1, true),
        ];
        for (i, &(n, e, nf, ef, truth)) in cases.iter().enumerate() {
            let g = sample_graph(n, e, nf, ef, truth, i as u64);
            let path = dir.path().join(format!("g{i}.graph"));
            let size = write_graph(&path, &g).unwrap();
            assert_eq!(size % 64, 4, "data aligned, then the CRC");
            let back = read_graph(&path).unwrap();
            assert_eq!(back, g, "case {i}");
            let head = read_graph_header(&path).unwrap();
            assert_eq!(head, GraphHeader::from(&g), "case {i}");
        }
    }

    #[test]
    fn a_file_without_vertex_radii_reads_with_none() {
        let dir = tempfile::tempdir().unwrap();
        let mut g = sample_graph(20, 40, 3, 4, true, 12);
        g.truth.as_mut().unwrap().particle_vertex_r.clear();
        let path = dir.path().join("old.graph");
        write_graph(&path, &g).unwrap();
        let back = read_graph(&path).unwrap();
        assert!(back.truth.as_ref().unwrap().particle_vertex_r.is_empty());
        assert_eq!(back, g);
        g.truth.as_mut().unwrap().particle_vertex_r = vec![1.0; 19];
        let err = write_graph(&dir.path().join("bad.graph"), &g).unwrap_err().to_string();
        assert!(err.contains("particle_vertex_r"), "{err}");
    }

    #[test]
    fn special_floats_round_trip_bit_exact() {
        let dir = tempfile::tempdir().unwrap();
        let mut g = sample_graph(4, 3, 1, 1, false, 9);
        g.r = vec![f32::NAN, -0.0, f32::INFINITY, f32::MIN_POSITIVE / 2.0];
        let path = dir.path().join("f.graph");
        write_graph(&path, &g).unwrap();
        let back = read_graph(&path).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back.r), bits(&g.r));
    }

    #[test]
    fn unknown_arrays_and_fields_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let g = sample_graph(30, 60, 3, 4, true, 11);
        let extra = vec![1.5f64.to_bits(); 30];
        let mut arrays = graph_arrays(&g);
        arrays.insert(2, ("future_array", ArrayRef::U64(&extra)));
        let (mut h, data) = split(&encode(&g, &arrays));
        h["future_field"] = serde_json::json!({"x": 1});
        // An array of a dtype this reader does not know is skipped too.
        h["arrays"].as_array_mut().unwrap().push(serde_json::json!(
            {"name": "halfs", "dtype": "f16", "len": 3, "offset": 0}
        ));
        let path = put(dir.path(), "x.graph", &join(&h, &data));
        assert_eq!(read_graph(&path).unwrap(), g);
        assert_eq!(read_graph_header(&path).unwrap(), GraphHeader::from(&g));
    }

    #[test]
    fn bad_magic() {
        let dir = tempfile::tempdir().unwrap();
        let g = sample_graph(10, 20, 3, 4, true, 1);
        let mut bytes = encode(&g, &graph_arrays(&g));
        bytes[3] = b'X';
        let path = put(dir.path(), "magic.graph", &bytes);
        let msg = read_err(&path).to_string();
        assert!(msg.contains("bad magic"), "{msg}");
        assert!(read_graph_header(&path).unwrap_err().to_string().contains("bad magic"));
        // A short file that is not a graph file is reported as such, not as truncated.
        let path = put(dir.path(), "text.graph", b"hello");
        assert!(read_err(&path).to_string().contains("bad magic"));
    }

    #[test]
    fn newer_version() {
        let dir = tempfile::tempdir().unwrap();
        let g = sample_graph(10, 20, 3, 4, true, 1);
        let mut bytes = encode(&g, &graph_arrays(&g));
        bytes[8..12].copy_from_slice(&2u32.to_le_bytes());
        let path = put(dir.path(), "v2.graph", &bytes);
        let err = read_err(&path);
        assert!(matches!(err, Error::UnsupportedVersion { found: 2, supported: 1, .. }), "{err}");
        assert!(matches!(read_graph_header(&path), Err(Error::UnsupportedVersion { found: 2, .. })));
    }

    #[test]
    fn truncated_everywhere() {
        let dir = tempfile::tempdir().unwrap();
        let g = sample_graph(50, 120, 3, 4, true, 2);
        let bytes = encode(&g, &graph_arrays(&g));
        let full = bytes.len() as u64;
        let json_len = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as u64;
        let start = data_start(json_len);
        let cuts = [
            (0, 16, "fixed header"),
            (12, 16, "fixed header"),
            (16 + json_len / 2, 16 + json_len, "JSON header"),
            (16 + json_len, full, "data section"), // in the padding before the data
            (start + 100, full, "data section"),
            (full - 4, full, "checksum"),
            (full - 1, full, "checksum"),
        ];
        for (cut, expected, part) in cuts {
            let path = put(dir.path(), &format!("cut{cut}.graph"), &bytes[..cut as usize]);
            let err = read_err(&path);
            let msg = err.to_string();
            assert!(msg.contains("truncated"), "{msg}");
            assert!(msg.contains(&format!("{cut} bytes, expected {expected}")), "{msg}");
            match &err {
                Error::Truncated { expected: x, actual, part: p, .. } => {
                    assert_eq!((*x, *actual, *p), (expected, cut, part))
                }
                other => panic!("cut at {cut}: {other}"),
            }
            let head = read_graph_header(&path).unwrap_err().to_string();
            assert_eq!(head, msg, "header-only read reports the same");
        }
        // A longer file is no truncation, but corrupt all the same.
        let mut longer = bytes.clone();
        longer.extend_from_slice(&[0; 3]);
        let path = put(dir.path(), "long.graph", &longer);
        assert!(read_err(&path).to_string().contains("3 unexpected bytes"));
    }

    #[test]
    fn flipped_data_byte() {
        let dir = tempfile::tempdir().unwrap();
        let g = sample_graph(50, 120, 3, 4, true, 3);
        let bytes = encode(&g, &graph_arrays(&g));
        let json_len = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as u64;
        for at in [data_start(json_len) as usize + 5, bytes.len() - 70] {
            let mut bad = bytes.clone();
            bad[at] ^= 0x10;
            let path = put(dir.path(), &format!("flip{at}.graph"), &bad);
            let err = read_err(&path);
            assert!(matches!(err, Error::ChecksumMismatch { .. }), "{err}");
            assert!(err.to_string().contains("checksum mismatch (corrupt file)"));
            // The header alone is still readable.
            assert_eq!(read_graph_header(&path).unwrap(), GraphHeader::from(&g));
        }
    }

    #[test]
    fn node_index_out_of_range() {
        let dir = tempfile::tempdir().unwrap();
        for (field, bad) in [("src", 50u32), ("dst", 51)] {
            let mut g = sample_graph(50, 120, 3, 4, false, 4);
            match field {
                "src" => g.src[7] = bad,
                _ => g.dst[7] = bad,
            }
            // `encode` does not check, so the file is valid but for the index.
            let path = put(dir.path(), "idx.graph", &encode(&g, &graph_arrays(&g)));
            let msg = read_err(&path).to_string();
            assert!(msg.contains(&format!("`{field}`: edge 7 refers to node {bad}")), "{msg}");
        }
    }

    #[test]
    fn header_problems() {
        let dir = tempfile::tempdir().unwrap();
        let g = sample_graph(20, 30, 3, 4, true, 5);
        let (h, data) = split(&encode(&g, &graph_arrays(&g)));
        type Edit = fn(&mut serde_json::Value);
        let cases: [(&str, Edit, &str); 8] = [
            (
                "missing",
                |h| h["arrays"].as_array_mut().unwrap().retain(|a| a["name"] != "z"),
                "missing required array `z`",
            ),
            (
                "missing_truth",
                |h| h["arrays"].as_array_mut().unwrap().retain(|a| a["name"] != "y"),
                "missing required array `y`",
            ),
            ("dtype", |h| h["arrays"][2]["dtype"] = "u64".into(), "array `src` has dtype `u64`, expected `u32`"),
            ("len", |h| h["arrays"][3]["len"] = 29.into(), "array `dst` has 29 values, expected 30 (num_edges)"),
            ("num_nodes", |h| h["num_nodes"] = 21.into(), "array `node_features` has 60 values, expected 63"),
            (
                "bounds",
                |h| h["arrays"][4]["offset"] = 1_000_000.into(),
                "array `hit_id` (20 × u64, at offset 1000000) extends past",
            ),
            (
                "twice",
                |h| {
                    let a = h["arrays"][0].clone();
                    h["arrays"].as_array_mut().unwrap().push(a);
                },
                "array `node_features` appears twice",
            ),
            ("json", |h| *h = serde_json::json!({"event_id": 1}), "bad JSON header"),
        ];
        assert_eq!(h["arrays"].as_array().unwrap().len(), 14);
        for (name, edit, want) in cases {
            let mut h = h.clone();
            edit(&mut h);
            let path = put(dir.path(), &format!("{name}.graph"), &join(&h, &data));
            let err = read_err(&path);
            assert!(matches!(err, Error::Corrupt { .. }), "{name}: {err}");
            assert!(err.to_string().contains(want), "{name}: {err}");
        }
    }

    #[test]
    fn missing_file_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent.graph");
        assert!(matches!(read_err(&path), Error::Io { .. }));
        let msg = read_graph_header(&path).unwrap_err().to_string();
        assert!(msg.contains("absent.graph"), "{msg}");
    }

    /// Load throughput on a TrackML-sized graph. Run with
    /// `cargo test -p trackgnn-graph --release -- --ignored --nocapture`.
    #[test]
    #[ignore = "benchmark"]
    fn load_throughput() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("event000000001.graph");
        let g = sample_graph(100_000, 1_000_000, 3, 4, true, 42);
        let best = |f: &mut dyn FnMut()| {
            (0..5)
                .map(|_| {
                    let t = Instant::now();
                    f();
                    t.elapsed().as_secs_f64()
                })
                .fold(f64::INFINITY, f64::min)
        };
        let mut size = 0;
        let write = best(&mut || size = write_graph(&path, &g).unwrap());
        assert_eq!(read_graph(&path).unwrap(), g);
        let read = best(&mut || drop(std::hint::black_box(read_graph(&path).unwrap())));
        let raw = best(&mut || drop(std::hint::black_box(std::fs::read(&path).unwrap())));
        let head = best(&mut || drop(std::hint::black_box(read_graph_header(&path).unwrap())));
        let gb = size as f64 / 1e9;
        println!(
            "graph file: {} nodes, {} edges, {:.1} MB; best of 5:\n  \
             read_graph  {:7.2} ms  {:5.2} GB/s\n  \
             fs::read    {:7.2} ms  {:5.2} GB/s (the raw read alone)\n  \
             write_graph {:7.2} ms  {:5.2} GB/s\n  \
             read_graph_header {:.1} µs",
            g.num_nodes(),
            g.num_edges(),
            size as f64 / 1e6,
            read * 1e3,
            gb / read,
            raw * 1e3,
            gb / raw,
            write * 1e3,
            gb / write,
            head * 1e6,
        );
    }
}
