//! Writing graph files: the whole file is built in one buffer, written to a temporary name in
//! the same directory and renamed into place.
//!
//! There is no `fsync`: the rename guards against a killed process (no partial file ever
//! appears under the real name), not against power loss, which would cost a disk flush per
//! file when graphs are written in bulk. A temporary left by a failed write is removed.

use std::path::Path;

use super::format::{
    ArrayEntry, CRC_LEN, Dtype, Element, FORMAT_VERSION, HeaderJson, MAGIC, PREFIX_LEN, align_up, check_graph,
    data_start,
};
use crate::error::{Error, Result};
use crate::graph::Graph;

/// A borrowed array to store.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ArrayRef<'a> {
    F32(&'a [f32]),
    U32(&'a [u32]),
    U64(&'a [u64]),
    U8(&'a [u8]),
}

impl ArrayRef<'_> {
    fn dtype(self) -> Dtype {
        match self {
            ArrayRef::F32(_) => Dtype::F32,
            ArrayRef::U32(_) => Dtype::U32,
            ArrayRef::U64(_) => Dtype::U64,
            ArrayRef::U8(_) => Dtype::U8,
        }
    }

    fn len(self) -> usize {
        match self {
            ArrayRef::F32(v) => v.len(),
            ArrayRef::U32(v) => v.len(),
            ArrayRef::U64(v) => v.len(),
            ArrayRef::U8(v) => v.len(),
        }
    }

    fn encode(self, out: &mut [u8]) {
        match self {
            ArrayRef::F32(v) => f32::encode(v, out),
            ArrayRef::U32(v) => u32::encode(v, out),
            ArrayRef::U64(v) => u64::encode(v, out),
            ArrayRef::U8(v) => u8::encode(v, out),
        }
    }
}

/// The arrays of `g` in file order: the graph, then the truth if any.
pub(crate) fn graph_arrays(g: &Graph) -> Vec<(&'static str, ArrayRef<'_>)> {
    let mut a = vec![
        ("node_features", ArrayRef::F32(&g.node_features)),
        ("edge_features", ArrayRef::F32(&g.edge_features)),
        ("src", ArrayRef::U32(&g.src)),
        ("dst", ArrayRef::U32(&g.dst)),
        ("hit_id", ArrayRef::U64(&g.hit_id)),
        ("r", ArrayRef::F32(&g.r)),
        ("phi", ArrayRef::F32(&g.phi)),
        ("z", ArrayRef::F32(&g.z)),
    ];
    if !g.edge_owned.is_empty() {
        a.push(("edge_owned", ArrayRef::U8(&g.edge_owned)));
    }
    if let Some(t) = &g.truth {
        a.extend([
            ("particle_id", ArrayRef::U64(&t.particle_id)),
            ("particle_pt", ArrayRef::F32(&t.particle_pt)),
            ("particle_eta", ArrayRef::F32(&t.particle_eta)),
            ("y", ArrayRef::U8(&t.y)),
            ("target", ArrayRef::U8(&t.target)),
        ]);
        if !t.particle_vertex_r.is_empty() {
            a.push(("particle_vertex_r", ArrayRef::F32(&t.particle_vertex_r)));
        }
    }
    a
}

/// The complete file for `g`, whose arrays are `arrays` (normally [`graph_arrays`]). Does not
/// check `g`, so tests can build files a reader must reject.
pub(crate) fn encode(g: &Graph, arrays: &[(&str, ArrayRef<'_>)]) -> Vec<u8> {
    let mut entries = Vec::with_capacity(arrays.len());
    let mut offset = 0u64;
    for &(name, a) in arrays {
        entries.push(ArrayEntry {
            name: name.to_owned(),
            dtype: a.dtype().name().to_owned(),
            len: a.len() as u64,
            offset,
        });
        offset = align_up(offset + a.len() as u64 * a.dtype().size());
    }
    let truth = g.truth.as_ref();
    let header = HeaderJson {
        event_id: g.event_id,
        num_nodes: g.num_nodes() as u64,
        num_edges: g.num_edges() as u64,
        node_feature_names: g.node_feature_names.clone(),
        edge_feature_names: g.edge_feature_names.clone(),
        has_truth: truth.is_some(),
        n_true_edges_event: truth.map_or(0, |t| t.n_true_edges_event),
        n_target_edges_event: truth.map_or(0, |t| t.n_target_edges_event),
        data_len: offset,
        arrays: entries,
    };
    let json = serde_json::to_vec(&header).expect("the header serialises");
    let json_len = u32::try_from(json.len()).expect("a JSON header under 4 GiB");
    let start = data_start(json.len() as u64) as usize;
    let data_len = header.data_len as usize;
    // Zero-filled, so padding needs no separate writes.
    let mut buf = vec![0u8; start + data_len + CRC_LEN as usize];
    buf[..8].copy_from_slice(MAGIC);
    buf[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    buf[12..16].copy_from_slice(&json_len.to_le_bytes());
    buf[PREFIX_LEN..PREFIX_LEN + json.len()].copy_from_slice(&json);
    let (data, crc) = buf[start..].split_at_mut(data_len);
    for (&(_, a), e) in arrays.iter().zip(&header.arrays) {
        let bytes = a.len() * a.dtype().size() as usize;
        a.encode(&mut data[e.offset as usize..][..bytes]);
    }
    crc.copy_from_slice(&crc32fast::hash(data).to_le_bytes());
    buf
}

/// Writes `g` to `path` in the graph file format (see [`crate::file`]); returns the file size
/// in bytes.
///
/// Atomic: the file is written under a temporary name in the same directory, then renamed, so
/// `path` is either absent, its previous content, or the complete new file.
///
/// Errors: [`Error::Inconsistent`] if the arrays of `g` disagree in length or an edge refers
/// to a missing node (nothing is written); [`Error::Io`] naming the file otherwise.
pub fn write_graph(path: &Path, g: &Graph) -> Result<u64> {
    check_graph(g).map_err(|m| Error::inconsistent(path, format!("graph not written: {m}")))?;
    let bytes = encode(g, &graph_arrays(g));
    write_atomic(path, &bytes)?;
    Ok(bytes.len() as u64)
}

/// Writes `bytes` to a temporary next to `path` and renames it over `path`
/// ([`trackgnn_trackml::atomic::write`]).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    trackgnn_trackml::atomic::write(path, bytes).map_err(|e| Error::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::testutil::{file_names, sample_graph};

    #[test]
    fn layout_is_aligned_and_sized() {
        let g = sample_graph(13, 29, 3, 4, true, 7);
        let bytes = encode(&g, &graph_arrays(&g));
        assert_eq!(&bytes[..8], MAGIC);
        assert_eq!(u32::from_le_bytes(bytes[8..12].try_into().unwrap()), 1);
        let json_len = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
        let h: HeaderJson = serde_json::from_slice(&bytes[16..16 + json_len]).unwrap();
        let start = data_start(json_len as u64) as usize;
        assert_eq!(start % 64, 0);
        assert_eq!(h.data_len % 64, 0);
        assert_eq!(bytes.len(), start + h.data_len as usize + 4);
        assert_eq!(h.arrays.len(), 14);
        for e in &h.arrays {
            assert_eq!(e.offset % 64, 0, "{}", e.name);
        }
        let src = h.arrays.iter().find(|e| e.name == "src").unwrap();
        assert_eq!((src.dtype.as_str(), src.len), ("u32", 29));
        let at = start + src.offset as usize;
        assert_eq!(bytes[at..at + 4], g.src[0].to_le_bytes());
    }

    #[test]
    fn write_leaves_only_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("event000000001.graph");
        let g = sample_graph(20, 40, 3, 0, false, 2);
        let n = write_graph(&path, &g).unwrap();
        assert_eq!(n, std::fs::metadata(&path).unwrap().len());
        // Overwriting works and still leaves no temporary.
        write_graph(&path, &g).unwrap();
        assert_eq!(file_names(dir.path()), ["event000000001.graph"]);
    }

    #[test]
    fn inconsistent_graph_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.graph");
        let mut g = sample_graph(20, 40, 3, 4, true, 3);
        g.edge_features.truncate(10);
        let err = write_graph(&path, &g).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::Inconsistent { .. }), "{msg}");
        assert!(msg.contains("bad.graph") && msg.contains("`edge_features`"), "{msg}");
        assert!(file_names(dir.path()).is_empty());
    }

    #[test]
    fn failed_rename_removes_the_temporary() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the file should go: the rename fails.
        let path = dir.path().join("event000000002.graph");
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("keep"), b"x").unwrap();
        let g = sample_graph(5, 5, 1, 0, false, 4);
        let msg = write_graph(&path, &g).unwrap_err().to_string();
        assert!(msg.contains("event000000002.graph"), "{msg}");
        assert_eq!(file_names(dir.path()), ["event000000002.graph"]);
    }

    #[test]
    fn missing_directory_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no/such/dir/g.graph");
        let err = write_graph(&path, &sample_graph(3, 2, 1, 0, false, 5)).unwrap_err();
        assert!(matches!(err, Error::Io { .. }));
        assert!(err.to_string().contains("no/such/dir"), "{err}");
    }
}
