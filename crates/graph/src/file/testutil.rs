//! Test helpers: seeded sample graphs, and taking a graph file apart and putting it back
//! together (to build files a reader must reject).

use std::path::Path;

use crate::graph::{Graph, GraphTruth};

/// A small seeded generator (splitmix64), enough for test data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    fn f32(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
    /// Uniform in [0, n).
    fn below(&mut self, n: usize) -> u32 {
        (self.next() % n as u64) as u32
    }
}

/// A consistent random graph of `n` nodes and `e` edges (`e` must be 0 if `n` is), with `nf`
/// node and `ef` edge feature columns, and truth if `truth`.
pub(crate) fn sample_graph(n: usize, e: usize, nf: usize, ef: usize, truth: bool, seed: u64) -> Graph {
    assert!(n > 0 || e == 0, "edges need nodes");
    let mut rng = Rng(seed);
    let names = |base: &[&str], k: usize| -> Vec<String> {
        (0..k).map(|i| base.get(i).map_or(format!("f{i}"), |s| s.to_string())).collect()
    };
    let mut floats = |k: usize, scale: f32| (0..k).map(|_| rng.f32() * scale).collect::<Vec<_>>();
    let node_features = floats(n * nf, 2.0);
    let edge_features = floats(e * ef, 1.0);
    let r = floats(n, 1000.0);
    let phi = floats(n, std::f32::consts::TAU);
    let z = floats(n, 3000.0);
    let pt = floats(n, 10.0);
    let eta = floats(n, 8.0);
    let particle_vertex_r = floats(n, 100.0);
    let src = (0..e).map(|_| rng.below(n)).collect();
    let dst = (0..e).map(|_| rng.below(n)).collect();
    let hit_id = (0..n as u64).map(|i| i + 1).collect();
    let particle_id: Vec<u64> = (0..n).map(|_| rng.next() >> 4).collect();
    let y: Vec<u8> = (0..e).map(|_| (rng.next() & 1) as u8).collect();
    let target = y.iter().map(|&b| b & (rng.next() & 1) as u8).collect();
    Graph {
        event_id: 1000 + seed,
        node_feature_names: names(&["r", "phi", "z"], nf),
        node_features,
        edge_feature_names: names(&["dr", "dphi", "dz", "deta"], ef),
        edge_features,
        src,
        dst,
        hit_id,
        r,
        phi,
        z,
        truth: truth.then(|| GraphTruth {
            particle_id,
            particle_pt: pt,
            particle_eta: eta,
            particle_vertex_r,
            n_true_edges_event: y.iter().map(|&b| b as u64).sum::<u64>() + 7,
            n_target_edges_event: 3,
            y,
            target,
        }),
        edge_owned: Vec::new(),
    }
}

/// The sorted names of the entries of `dir`.
pub(crate) fn file_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

/// A graph file taken apart: its JSON header and its data section.
pub(crate) fn split(bytes: &[u8]) -> (serde_json::Value, Vec<u8>) {
    let len = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    let header = serde_json::from_slice(&bytes[16..16 + len]).unwrap();
    let start = (16 + len).div_ceil(64) * 64;
    (header, bytes[start..bytes.len() - 4].to_vec())
}

/// A graph file put together from a (possibly edited) header and data section, with a valid
/// checksum. Written independently of the writer, as a check of the layout.
pub(crate) fn join(header: &serde_json::Value, data: &[u8]) -> Vec<u8> {
    let json = serde_json::to_vec(header).unwrap();
    let mut out = b"TGNNGRPH".to_vec();
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&json);
    out.resize(out.len().div_ceil(64) * 64, 0);
    out.extend_from_slice(data);
    out.extend_from_slice(&crc32fast::hash(data).to_le_bytes());
    out
}

mod tests {
    use super::*;
    use crate::file::write::{encode, graph_arrays};

    #[test]
    fn split_join_is_identity_on_written_files() {
        let g = sample_graph(10, 30, 3, 4, true, 1);
        let bytes = encode(&g, &graph_arrays(&g));
        let (h, data) = split(&bytes);
        // `serde_json::Value` sorts keys, so the header bytes differ; all else is identical.
        let joined = join(&h, &data);
        assert_eq!(joined.len(), bytes.len());
        assert!(joined[..16] == bytes[..16]);
        assert!(joined[joined.len() - data.len() - 4..] == bytes[bytes.len() - data.len() - 4..]);
        assert_eq!(split(&joined), (h, data));
    }
}
