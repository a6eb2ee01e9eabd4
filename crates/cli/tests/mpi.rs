//! Data-parallel training under `mpirun -np 2` (only in a build with the `mpi` feature; CI
//! installs OpenMPI and runs these: a missing `mpirun` is a failure, never a skip).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{ok, trackgnn};

fn mpirun() -> Command {
    let found = Command::new("mpirun").arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    assert!(found, "mpirun is not installed: install OpenMPI (see README) to run the MPI tests");
    let mut c = Command::new("mpirun");
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1").env("RAYON_NUM_THREADS", "1");
    c.args(["-np", "2", "--oversubscribe", env!("CARGO_BIN_EXE_trackgnn")]);
    c
}

fn graphs(d: &Path) {
    ok(trackgnn(d, &["simulate", "--events", "12", "--pileup", "8", "--seed", "4", "--out", "ev"]));
    ok(trackgnn(d, &["build-graphs", "--input", "ev", "--out", "g", "--pt-min", "1"]));
}

fn weights(path: &Path) -> Vec<(String, Vec<f32>)> {
    let bytes = std::fs::read(path).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut v: Vec<(String, Vec<f32>)> = st
        .tensors()
        .into_iter()
        .map(|(n, t)| (n, t.data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

const TRAIN: &[&str] =
    &["train", "--graphs", "g", "--epochs", "2", "--hidden", "16", "--iterations", "2", "--threads", "1"];

#[test]
fn two_ranks_equal_one_rank_averaging_the_same_two_graphs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    graphs(d);
    let mut one: Vec<&str> = TRAIN.to_vec();
    one.extend(["--out", "one", "--graphs-per-step", "2"]);
    ok(trackgnn(d, &one));
    // Two ranks, one graph each, all-reduce in chunks of 1000 elements.
    let out = mpirun().current_dir(d).args(TRAIN).args(["--out", "two", "--mpi-chunk", "1000"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (a, b) =
        (weights(&d.join("one/checkpoint/model.safetensors")), weights(&d.join("two/checkpoint/model.safetensors")));
    assert_eq!(a.len(), b.len());
    for ((na, wa), (nb, wb)) in a.iter().zip(&b) {
        assert_eq!(na, nb);
        let diff: f64 = wa.iter().zip(wb).map(|(x, y)| ((x - y) as f64).powi(2)).sum::<f64>().sqrt();
        let norm: f64 = wa.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt().max(1e-12);
        assert!(diff / norm < 1e-6, "{na}: relative difference {}", diff / norm);
    }
    // Both ranks took the same steps; only rank 0 wrote the logs.
    let steps = std::fs::read_to_string(d.join("two/steps.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(steps.lines().next().unwrap()).unwrap();
    assert_eq!(first["compute_seconds"].as_array().unwrap().len(), 2, "per-rank timings");
}

#[test]
fn killing_one_rank_ends_the_job_and_the_run_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    graphs(d);
    let mut child = mpirun()
        .current_dir(d)
        .args(["train", "--graphs", "g", "--out", "run", "--epochs", "400", "--hidden", "16", "--iterations", "2"])
        .args(["--threads", "1", "--checkpoint-every", "3"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait for the first checkpoint, then kill -9 one of the two trackgnn processes.
    let t0 = Instant::now();
    while !d.join("run/checkpoint/model.safetensors").exists() {
        assert!(t0.elapsed() < Duration::from_secs(60), "no checkpoint written");
        std::thread::sleep(Duration::from_millis(100));
    }
    let pids = String::from_utf8(
        Command::new("pgrep").args(["-P", &child.id().to_string(), "trackgnn"]).output().unwrap().stdout,
    )
    .unwrap();
    let victim = pids.split_whitespace().last().expect("rank processes");
    assert!(Command::new("kill").args(["-9", victim]).status().unwrap().success());
    let killed = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(!status.success(), "the job must fail when a rank dies");
            break;
        }
        assert!(killed.elapsed() < Duration::from_secs(10), "the job hangs after a rank was killed");
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("job ended {:.2} s after kill -9", killed.elapsed().as_secs_f64());
    // Resume from the last checkpoint with the same number of ranks, fewer epochs to finish.
    let out = mpirun()
        .current_dir(d)
        .args(["train", "--graphs", "g", "--out", "run", "--resume", "--epochs", "2", "--threads", "1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
