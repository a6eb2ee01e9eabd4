//! Fuzz targets of the graph crate's readers: graph files (whole and header only), module-map
//! files, and the graph recipe TOML (see `trackgnn_trackml::fuzzing`). The binary targets also
//! run with the header length and the checksum repaired after mutating, so that inputs reach
//! the checks behind them.
//! `TRACKGNN_FUZZ_CASES=N` runs N inputs per target instead of the CI default.

use std::path::Path;

use trackgnn_graph::features::{HitTable, NodeCuts};
use trackgnn_graph::module_map::MapConfig;
use trackgnn_graph::truth::{TargetConfig, truth_edges};
use trackgnn_graph::{
    Graph, GraphMethod, GraphRecipe, GraphTruth, ModuleMap, read_graph, read_graph_header, write_graph,
};
use trackgnn_simulate::{Generator, SimConfig};
use trackgnn_trackml::Detector;
use trackgnn_trackml::fuzzing::proptest::prelude::*;
use trackgnn_trackml::fuzzing::{CappedAlloc, inputs, read_written, runner, within};

/// No reader may ask for more than 256 MiB at once for inputs of a few kB.
#[global_allocator]
static ALLOC: CappedAlloc = CappedAlloc::new(256 << 20);

/// Inputs per target in `cargo test`.
const CI_CASES: u32 = 1000;

fn sample_graph() -> Graph {
    let n = 6;
    Graph {
        event_id: 42,
        node_feature_names: vec!["r".into(), "phi".into(), "z".into()],
        node_features: (0..n * 3).map(|i| i as f32 * 0.5).collect(),
        edge_feature_names: vec!["dr".into()],
        edge_features: vec![0.5, 1.5, -2.0, 4.0, 0.25],
        src: vec![0, 1, 2, 3, 4],
        dst: vec![1, 2, 3, 4, 5],
        hit_id: (1..=n as u64).collect(),
        r: vec![30.0, 70.0, 115.0, 170.0, 260.0, 360.0],
        phi: vec![0.1; n],
        z: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        truth: Some(GraphTruth {
            particle_id: vec![7, 7, 7, 0, 9, 9],
            particle_pt: vec![1.5, 1.5, 1.5, 0.0, 0.7, 0.7],
            particle_eta: vec![0.2, 0.2, 0.2, 0.0, -1.0, -1.0],
            particle_vertex_r: vec![0.01, 0.01, 0.01, 0.0, 35.0, 35.0],
            y: vec![1, 1, 0, 0, 1],
            target: vec![1, 1, 0, 0, 0],
            n_true_edges_event: 4,
            n_target_edges_event: 2,
        }),
        edge_owned: Vec::new(),
    }
}

fn sample_map_bytes() -> Vec<u8> {
    let g = Generator::new(Detector::trackml(), SimConfig { pileup: 0.0, ..SimConfig::default() });
    let ev = g.event(3, 1).0;
    let cuts = NodeCuts { pt_min: Some(1.0), remove_noise: true, eta_range: None };
    let t = HitTable::build(&ev, g.detector(), &cuts).unwrap();
    let mut map = ModuleMap::new(MapConfig::default());
    map.add_event(&t, &truth_edges(&t, &TargetConfig::default()));
    assert!(!map.is_empty());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("map.bin");
    map.save(&path).unwrap();
    std::fs::read(path).unwrap()
}

/// Rewrites the CRC32 in the last 4 bytes over `bytes[start..len - 4]`, if that range exists.
fn repair_crc(bytes: &mut [u8], start: usize) {
    let len = bytes.len();
    if len >= 4 && start <= len - 4 {
        let crc = crc32fast::hash(&bytes[start..len - 4]);
        bytes[len - 4..].copy_from_slice(&crc.to_le_bytes());
    }
}

/// The JSON header length of a graph or module-map file (u32 LE at byte 12), if present.
fn header_len(bytes: &[u8]) -> Option<usize> {
    Some(u32::from_le_bytes(bytes.get(12..16)?.try_into().unwrap()) as usize)
}

/// Sets the header length (u32 LE at byte 12) to that of the JSON object starting at byte 16,
/// so that a mutation that made a header number longer or shorter still reaches the parser.
fn repair_header_len(bytes: &mut [u8]) {
    if bytes.get(16) != Some(&b'{') {
        return;
    }
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for i in 16..bytes.len() {
        let b = bytes[i];
        match (in_string, b) {
            (true, _) if escaped => escaped = false,
            (true, b'\\') => escaped = true,
            (true, b'"') => in_string = false,
            (true, _) => {}
            (false, b'"') => in_string = true,
            (false, b'{' | b'[') => depth += 1,
            (false, b'}' | b']') => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    bytes[12..16].copy_from_slice(&((i - 15) as u32).to_le_bytes());
                    return;
                }
            }
            _ => {}
        }
    }
}

/// Runs target `name`: inputs from `seeds`, half with `repair` applied after mutating, each
/// written as `name` and read with `read`, which must return within the deadline without
/// panicking; an error must name the file.
fn fuzz_file(name: &str, seeds: Vec<Vec<u8>>, repair: fn(&mut Vec<u8>), read: fn(&Path) -> Result<(), String>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    let strategy = (inputs(seeds), any::<bool>()).prop_map(move |(mut b, fix)| {
        if fix {
            repair(&mut b);
        }
        b
    });
    let result = runner(CI_CASES).run(&strategy, |bytes| read_written(name, &path, &bytes, read));
    if let Err(e) = result {
        panic!("fuzz target {name}: {e}");
    }
}

#[test]
fn fuzz_graph_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut seeds = Vec::new();
    for (i, g) in [sample_graph(), Graph { truth: None, edge_features: vec![], ..sample_graph() }].iter().enumerate() {
        let g = Graph {
            edge_feature_names: if g.edge_features.is_empty() { vec![] } else { g.edge_feature_names.clone() },
            ..g.clone()
        };
        let p = dir.path().join(format!("{i}.graph"));
        write_graph(&p, &g).unwrap();
        seeds.push(std::fs::read(p).unwrap());
    }
    let repair = |b: &mut Vec<u8>| {
        repair_header_len(b);
        if let Some(h) = header_len(b) {
            repair_crc(b, (16 + h).next_multiple_of(64));
        }
    };
    fuzz_file("event000000042.graph", seeds.clone(), repair, |p| {
        let header = read_graph_header(p).map_err(|e| e.to_string());
        let graph = read_graph(p).map_err(|e| e.to_string())?;
        // A file that reads whole also reads its header, and they agree.
        let header = header?;
        assert_eq!((header.num_nodes, header.num_edges), (graph.num_nodes(), graph.src.len()));
        Ok(())
    });
}

#[test]
fn fuzz_module_map() {
    let repair = |b: &mut Vec<u8>| {
        repair_header_len(b);
        if let Some(h) = header_len(b) {
            repair_crc(b, 16 + h);
        }
    };
    fuzz_file("modules.map", vec![sample_map_bytes()], repair, |p| {
        ModuleMap::load(p).map(drop).map_err(|e| e.to_string())
    });
}

/// The recipe TOML is parsed by the CLI, which names the file in the error; here: no input
/// panics or hangs the parser, and a recipe that parses round-trips.
#[test]
fn fuzz_graph_recipe_toml() {
    let seed = toml::to_string(&GraphRecipe::new(GraphMethod::ModuleMap)).unwrap().into_bytes();
    let result = runner(CI_CASES).run(&inputs(vec![seed]), |bytes| {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        within("graph recipe", move || {
            if let Ok(r) = toml::from_str::<GraphRecipe>(&text) {
                let back: GraphRecipe = toml::from_str(&toml::to_string(&r).unwrap()).unwrap();
                assert_eq!(back.method, r.method);
            }
        })
    });
    if let Err(e) = result {
        panic!("fuzz target graph recipe: {e}");
    }
}

/// Found by a probe of the module-map target (declared counts set to huge values in the JSON
/// header): `entries × 56 bytes` overflowed and panicked instead of being reported.
#[test]
fn module_map_with_huge_counts_is_an_error() {
    let bytes = sample_map_bytes();
    let h = header_len(&bytes).unwrap();
    let text = std::str::from_utf8(&bytes[16..16 + h]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.map");
    for (key, n) in
        [("entries", "329406144173384850"), ("triplets", "18446744073709551615"), ("entries", "4611686018427387904")]
    {
        let i = text.find(&format!("\"{key}\":")).unwrap() + key.len() + 3;
        let j = i + text[i..].find(|c: char| !c.is_ascii_digit()).unwrap();
        let header = format!("{}{n}{}", &text[..i], &text[j..]);
        let mut b = bytes[..12].to_vec();
        b.extend_from_slice(&(header.len() as u32).to_le_bytes());
        b.extend_from_slice(header.as_bytes());
        b.extend_from_slice(&bytes[16 + h..]);
        std::fs::write(&path, &b).unwrap();
        let e = ModuleMap::load(&path).unwrap_err().to_string();
        assert!(e.contains("huge.map") && e.contains("truncated or padded"), "{key}={n}: {e}");
    }
}
