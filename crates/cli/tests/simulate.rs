use std::fs;

use crate::util::{fails, json, ok, trackgnn};

fn files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("event"))
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), fs::read(&p).unwrap()))
        .collect();
    v.sort();
    v
}

#[test]
fn same_seed_gives_byte_identical_files_at_any_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    for (threads, out) in [("1", "t1"), ("2", "t2"), ("3", "t3")] {
        ok(trackgnn(
            dir.path(),
            &[
                "simulate",
                "--events",
                "3",
                "--pileup",
                "4",
                "--seed",
                "9",
                "--out",
                out,
                "--threads",
                threads,
                "--gzip",
            ],
        ));
    }
    let t1 = files(&dir.path().join("t1"));
    assert_eq!(t1.len(), 12, "4 files per event");
    assert!(t1.iter().all(|(n, _)| n.ends_with(".csv.gz")));
    assert_eq!(t1, files(&dir.path().join("t2")));
    assert_eq!(t1, files(&dir.path().join("t3")));
    ok(trackgnn(
        dir.path(),
        &["simulate", "--events", "3", "--pileup", "4", "--seed", "10", "--out", "other", "--gzip"],
    ));
    assert_ne!(t1, files(&dir.path().join("other")));
}

#[test]
fn simulate_json_reports_figures_and_records_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = json(&ok(trackgnn(dir.path(), &["simulate", "--events", "2", "--pileup", "3", "--out", "d", "--json"])));
    assert_eq!(out["events"], 2);
    assert!(out["hits_per_event"].as_f64().unwrap() > 500.0);
    assert!(out["generate_seconds_per_event"].as_f64().unwrap() > 0.0);
    let record = fs::read_to_string(dir.path().join("d/simulation.toml")).unwrap();
    assert!(record.contains("seed = 1") && record.contains("pileup = 3.0"), "{record}");
    assert!(dir.path().join("d/detectors.csv").exists());
}

#[test]
fn bad_simulation_settings_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let err = fails(trackgnn(dir.path(), &["simulate", "--events", "1", "--pileup=-3", "--out", "d"]));
    assert!(err.contains("`pileup` = -3"), "{err}");
    fs::write(dir.path().join("sim.toml"), "pilup = 3\n").unwrap();
    let err = fails(trackgnn(dir.path(), &["simulate", "--events", "1", "--config", "sim.toml", "--out", "d"]));
    assert!(err.contains("sim.toml") && err.contains("pilup"), "{err}");
}

#[test]
fn single_particle_mode_writes_those_particles_alone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let args = [
        "simulate",
        "--events",
        "1",
        "--out",
        "mu",
        "--single",
        "muon",
        "--single-count",
        "4",
        "--single-pt",
        "5,20",
        "--single-eta",
        "-1,1",
        "--single-charge",
        "-1",
        "--json",
    ];
    ok(trackgnn(d, &args));
    let particles = fs::read_to_string(d.join("mu/event000000001-particles.csv")).unwrap();
    let rows: Vec<&str> = particles.lines().skip(1).collect();
    assert_eq!(rows.len(), 4, "{particles}");
    // μ− is PDG 13.
    assert!(rows.iter().all(|r| r.split(',').nth(1) == Some("13")), "{particles}");
    let record = fs::read_to_string(d.join("mu/simulation.toml")).unwrap();
    assert!(record.contains("species = \"muon\"") && record.contains("count = 4"), "{record}");
    let err = fails(trackgnn(d, &["simulate", "--events", "1", "--out", "x", "--single", "gluon"]));
    assert!(err.contains("gluon") && err.contains("muon"), "{err}");
    let err =
        fails(trackgnn(d, &["simulate", "--events", "1", "--out", "x", "--single", "pion", "--single-pt", "3,1"]));
    assert!(err.contains("single.pt"), "{err}");
    let err = fails(trackgnn(d, &["simulate", "--events", "1", "--out", "x", "--single-count", "3"]));
    assert!(err.contains("--single"), "{err}");
    let err =
        fails(trackgnn(d, &["simulate", "--events", "1", "--out", "x", "--single", "pion", "--single-eta", "a,b"]));
    assert!(err.contains("'a,b' for '--single-eta") && err.contains("expected LOW,HIGH or one number"), "{err}");
}
