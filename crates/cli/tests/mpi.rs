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

/// A copy of the fault tests' graphs (`faults::graphs`) in `d/g`, built once per test binary.
fn fault_graphs(d: &Path) {
    static SHARED: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let src = SHARED.get_or_init(|| {
        let t = tempfile::tempdir().unwrap();
        crate::faults::graphs(t.path());
        t
    });
    std::fs::create_dir(d.join("g")).unwrap();
    for e in std::fs::read_dir(src.path().join("g")).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, d.join("g").join(p.file_name().unwrap())).unwrap();
    }
}

/// Runs `mpirun -np 2 trackgnn <args>` in `d`, returning its output and how long it took.
fn mpirun_timed(d: &Path, args: &[&str]) -> (std::process::Output, f64) {
    let t0 = Instant::now();
    let out = mpirun().current_dir(d).args(args).output().unwrap();
    (out, t0.elapsed().as_secs_f64())
}

/// The rank processes of an `mpirun` child, with their ranks.
fn ranks_of(mpirun: &std::process::Child) -> Vec<(String, usize)> {
    let pids = String::from_utf8(
        Command::new("pgrep").args(["-P", &mpirun.id().to_string(), "trackgnn"]).output().unwrap().stdout,
    )
    .unwrap();
    pids.split_whitespace()
        .map(|pid| {
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
            let rank = env
                .split(|&b| b == 0)
                .filter_map(|kv| std::str::from_utf8(kv).ok())
                .find_map(|kv| kv.strip_prefix("OMPI_COMM_WORLD_RANK="))
                .and_then(|r| r.parse().ok())
                .expect("OMPI_COMM_WORLD_RANK");
            (pid.to_string(), rank)
        })
        .collect()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn train_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    crate::faults::TRAIN.iter().copied().chain(extra.iter().copied()).collect()
}

#[test]
fn mpi_a_stalled_rank_is_named_and_the_job_aborts_within_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fault_graphs(d);
    let child = mpirun()
        .current_dir(d)
        .args(train_args(&["--epochs", "400", "--collective-timeout", "2"]))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    crate::faults::wait_for_steps(d, 2);
    let ranks = ranks_of(&child);
    let (pid, rank) = ranks.iter().find(|r| r.1 == 1).expect("rank 1").clone();
    assert!(Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
    let stopped = Instant::now();
    let out = child.wait_with_output().unwrap();
    let took = stopped.elapsed().as_secs_f64();
    eprintln!("stalled rank detected, job ended {took:.2} s after SIGSTOP");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains(&format!("rank(s) {rank} did not reach")), "{err}");
    assert!(took < 15.0, "took {took} s");
}

#[test]
fn mpi_an_error_on_one_rank_ends_every_rank_with_its_message() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fault_graphs(d);
    let (out, _) = mpirun_timed(d, &train_args(&["--epochs", "1"]));
    assert!(out.status.success(), "{}", stderr(&out));
    // One training graph's data no longer matches its checksum: only the rank that trains on
    // it finds out.
    let bad = crate::faults::last_training_graph(d, "run");
    let mut bytes = std::fs::read(&bad).unwrap();
    let n = bytes.len();
    bytes[n - 8] ^= 0xff;
    std::fs::write(&bad, bytes).unwrap();
    let (out, took) = mpirun_timed(d, &train_args(&["--resume", "--epochs", "3"]));
    eprintln!("error on one rank: job ended after {took:.2} s");
    assert!(!out.status.success());
    let err = stderr(&out);
    let name = bad.file_name().unwrap().to_string_lossy().to_string();
    assert!(err.contains("error:") && err.contains(&name) && err.contains("aborting the MPI job"), "{err}");
}

#[test]
fn mpi_a_non_finite_loss_stops_every_rank_and_keeps_the_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fault_graphs(d);
    let (out, _) = mpirun_timed(d, &train_args(&["--epochs", "1"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let step0 = crate::faults::checkpoint_step(d, "run");
    let bad = crate::faults::last_training_graph(d, "run");
    crate::faults::poison(&bad);
    let (out, took) = mpirun_timed(d, &train_args(&["--resume", "--epochs", "2"]));
    eprintln!("NaN loss under 2 ranks: job ended after {took:.2} s");
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(
        err.contains("not finite") && err.contains(&bad.file_name().unwrap().to_string_lossy().to_string()),
        "{err}"
    );
    assert_eq!(crate::faults::checkpoint_step(d, "run"), step0);
}

#[test]
fn mpi_diverged_replicas_stop_the_job_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fault_graphs(d);
    let args = train_args(&["--epochs", "2", "--replica-check-every", "2", "--inject-divergence", "3:1"]);
    let (out, took) = mpirun_timed(d, &args);
    eprintln!("divergence at step 3: job ended after {took:.2} s");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("the model replicas diverged by step 4"), "{err}");
}

#[test]
fn mpi_sigusr1_to_one_rank_checkpoints_every_rank_and_requeues() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fault_graphs(d);
    let path = crate::faults::fake_scontrol(d);
    let child = mpirun()
        .current_dir(d)
        .env("PATH", &path)
        .env("SLURM_JOB_ID", "77")
        .args(train_args(&["--epochs", "400", "--resume", "auto", "--requeue"]))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    crate::faults::wait_for_steps(d, 2);
    let ranks = ranks_of(&child);
    let (pid, _) = ranks.iter().find(|r| r.1 == 1).expect("rank 1").clone();
    assert!(Command::new("kill").args(["-USR1", &pid]).status().unwrap().success());
    let signalled = Instant::now();
    let out = child.wait_with_output().unwrap();
    eprintln!("SIGUSR1: checkpointed and stopped {:.2} s after the signal", signalled.elapsed().as_secs_f64());
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(d.join("scontrol.log")).unwrap().trim(), "requeue 77");
    let stopped = crate::faults::checkpoint_step(d, "run");
    // The requeued job continues the run through the epoch after the interrupted one: the
    // signal may have landed on an epoch's last step, which leaves only its validation to do.
    let epochs = (crate::faults::checkpoint_state(d, "run")["epoch"].as_u64().unwrap() + 2).to_string();
    let (out, _) = mpirun_timed(d, &train_args(&["--epochs", &epochs, "--resume", "auto"]));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("--resume auto: continuing"), "{}", stderr(&out));
    assert!(crate::faults::checkpoint_step(d, "run") > stopped);
}

/// Global steps of `steps.jsonl`, and the epochs of `metrics.jsonl`, of the run in `d/run`.
fn curve(d: &Path) -> (Vec<u64>, Vec<(u64, f64)>) {
    let lines = |f: &str| -> Vec<serde_json::Value> {
        std::fs::read_to_string(d.join("run").join(f))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let steps = lines("steps.jsonl").iter().map(|s| s["global_step"].as_u64().unwrap()).collect();
    let epochs = lines("metrics.jsonl")
        .iter()
        .map(|m| (m["epoch"].as_u64().unwrap(), m["train_loss"].as_f64().unwrap()))
        .collect();
    (steps, epochs)
}

#[test]
fn mpi_elastic_resume_from_two_ranks_to_one_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fault_graphs(d);
    let base = ["--sampler", "random", "--lr-scaling", "linear"];
    // Two ranks, stopped by a signal in mid-run.
    let child = mpirun()
        .current_dir(d)
        .args(train_args(&["--epochs", "400"]))
        .args(base)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    crate::faults::wait_for_steps(d, 2);
    let ranks = ranks_of(&child);
    for (pid, _) in &ranks {
        Command::new("kill").args(["-TERM", pid]).status().unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let two = crate::faults::checkpoint_step(d, "run");
    // One rank (a lone process of this build is a world of one), then two again.
    ok(trackgnn(d, &train_args(&["--resume", "--epochs", "2"])));
    let (out, _) = mpirun_timed(d, &train_args(&["--resume", "--epochs", "3"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let changes: Vec<serde_json::Value> = std::fs::read_to_string(d.join("run/resumes.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert_eq!((changes[0]["previous_ranks"].as_u64(), changes[0]["ranks"].as_u64()), (Some(2), Some(1)));
    assert_eq!(changes[0]["global_step"].as_u64(), Some(two));
    // Linear scaling: the base learning rate halves with the ranks, and doubles back.
    let lr = |c: &serde_json::Value, k: &str| c[k].as_f64().unwrap();
    assert!((lr(&changes[0], "previous_lr") / lr(&changes[0], "lr") - 2.0).abs() < 1e-9, "{changes:?}");
    assert_eq!((changes[1]["previous_ranks"].as_u64(), changes[1]["ranks"].as_u64()), (Some(1), Some(2)));
    // The curve continues: every step once, in order; three epochs, the loss finite and not
    // thrown back to where it started.
    let (steps, epochs) = curve(d);
    assert_eq!(steps, (1..=steps.len() as u64).collect::<Vec<_>>());
    assert_eq!(epochs.iter().map(|e| e.0).collect::<Vec<_>>(), vec![0, 1, 2]);
    assert!(epochs.iter().all(|e| e.1.is_finite()) && epochs[2].1 < epochs[0].1 * 1.5, "{epochs:?}");
}
