//! Fuzz targets of the TrackML CSV readers (hits, truth, particles, cells, `detectors.csv`),
//! plain and gzip: valid files mutated, and arbitrary bytes (see `trackgnn_trackml::fuzzing`).
//! `TRACKGNN_FUZZ_CASES=N` runs N inputs per target instead of the CI default.

use std::path::{Path, PathBuf};

use trackgnn_trackml::csv::{
    read_cells, read_detectors, read_hits, read_particles, read_truth, write_cells, write_detectors, write_hits,
    write_particles, write_truth,
};
use trackgnn_trackml::event::ParticleRecord;
use trackgnn_trackml::fuzzing::proptest::prelude::*;
use trackgnn_trackml::fuzzing::{CappedAlloc, gzip, inputs, read_written, runner};
use trackgnn_trackml::geometry::trackml_modules;
use trackgnn_trackml::{Cells, Detector, Hits, ModuleId, ParticleId, Particles, Truth};

/// No reader may ask for more than 256 MiB at once for inputs of a few kB.
#[global_allocator]
static ALLOC: CappedAlloc = CappedAlloc::new(256 << 20);

/// Inputs per target in `cargo test` (each target takes well under two seconds in the dev
/// profile on one core).
const CI_CASES: u32 = 1000;

fn sample_hits(n: u64) -> Hits {
    let mut h = Hits::default();
    for i in 0..n {
        let f = i as f32;
        h.push(i + 1, [30.0 + f, -12.5 * f, 100.0 - f * 3.25], ModuleId::new(8, 2 + 2 * (i as u16 % 3), 1 + i as u32));
    }
    h
}

fn sample_truth(hits: &Hits) -> Truth {
    let mut t = Truth::default();
    for i in 0..hits.len() {
        let pid = if i % 4 == 0 { 0 } else { 4503668346847232 + (i as u64 % 3) };
        t.push(ParticleId(pid), [hits.x[i], hits.y[i], hits.z[i]], [0.5, -0.25, 1.0e-3], 1.0e-5 * i as f32);
    }
    t
}

fn sample_particles() -> Particles {
    let mut p = Particles::default();
    for i in 0..6u64 {
        p.push(ParticleRecord {
            particle_id: ParticleId(4503668346847232 + i),
            particle_type: if i % 2 == 0 { 11 } else { -211 },
            vertex: [0.01, -0.02, 3.5],
            momentum: [1.5, -0.5 * i as f32, 2.0],
            q: if i % 2 == 0 { -1 } else { 1 },
            nhits: 10 + i as u32,
        });
    }
    p
}

fn sample_cells(hits: &Hits) -> Cells {
    let mut c = Cells::default();
    for (i, &id) in hits.hit_id.iter().enumerate() {
        for k in 0..=(i % 3) as u32 {
            c.hit_id.push(id);
            c.ch0.push(100 + k);
            c.ch1.push(200 + 2 * k);
            c.value.push(0.25 + k as f32 * 0.01);
        }
    }
    c
}

/// The bytes of a file written by `write` into a temporary directory.
fn written<T>(name: &str, write: impl FnOnce(&Path) -> T) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    let _ = write(&path);
    std::fs::read(path).unwrap()
}

/// Runs target `name`: each input is written as `name` (plain text, gzip of the text, or the
/// mutated gzip of the seed text) and read with `read`, which must return within the
/// deadline without panicking; an error must name the file.
fn fuzz_csv(name: &str, seeds: Vec<Vec<u8>>, read: fn(&Path) -> Result<(), String>) {
    let dir = tempfile::tempdir().unwrap();
    let gz_seeds: Vec<Vec<u8>> = seeds.iter().map(|s| gzip(s)).collect();
    let strategy = prop_oneof![
        6 => inputs(seeds.clone()).prop_map(|b| (false, b)),
        3 => inputs(seeds).prop_map(|b| (true, gzip(&b))),
        1 => inputs(gz_seeds).prop_map(|b| (true, b)),
    ];
    let mut runner = runner(CI_CASES);
    let result = runner.run(&strategy, |(gz, bytes)| {
        let path: PathBuf = dir.path().join(if gz { format!("{name}.gz") } else { name.to_owned() });
        read_written(name, &path, &bytes, read)
    });
    if let Err(e) = result {
        panic!("fuzz target {name}: {e}");
    }
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

#[test]
fn fuzz_hits() {
    let seeds = vec![
        written("h.csv", |p| write_hits(p, &sample_hits(12)).unwrap()),
        b"module_id,hit_id,x,y,z,layer_id,volume_id\r\n1,7,1.5,-2,3e2,2,8\r\n2,8,0,0,0,4,8".to_vec(),
    ];
    fuzz_csv("event000000001-hits.csv", seeds, |p| read_hits(p).map(drop).map_err(err));
}

#[test]
fn fuzz_truth() {
    let hits = sample_hits(12);
    let seeds = vec![written("t.csv", |p| write_truth(p, &sample_truth(&hits), &hits).unwrap())];
    fuzz_csv("event000000001-truth.csv", seeds, |p| read_truth(p, &sample_hits(12)).map(drop).map_err(err));
}

#[test]
fn fuzz_particles() {
    let seeds = vec![written("p.csv", |p| write_particles(p, &sample_particles()).unwrap())];
    fuzz_csv("event000000001-particles.csv", seeds, |p| read_particles(p).map(drop).map_err(err));
}

#[test]
fn fuzz_cells() {
    let hits = sample_hits(12);
    let seeds = vec![written("c.csv", |p| write_cells(p, &sample_cells(&hits)).unwrap())];
    fuzz_csv("event000000001-cells.csv", seeds, |p| read_cells(p, &sample_hits(12)).map(drop).map_err(err));
}

#[test]
fn fuzz_detectors() {
    let modules = trackml_modules();
    // A few modules of two layers, so that the detector builds from the valid seed.
    let some: Vec<_> = modules.iter().take(8).chain(modules.iter().rev().take(4)).cloned().collect();
    let seeds = vec![written("d.csv", |p| write_detectors(p, &some).unwrap())];
    fuzz_csv("detectors.csv", seeds, |p| {
        read_detectors(p).map_err(err)?;
        Detector::from_csv(p).map(drop).map_err(err)
    });
}
