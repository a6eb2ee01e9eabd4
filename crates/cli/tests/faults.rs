//! Faults during training, single process: a non-finite loss, a checkpoint that cannot be
//! written, preemption signals with a Slurm requeue, `--resume auto`. (Under `mpirun`: `mpi.rs`.)

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{fails, json, ok, trackgnn};

/// Events and graphs shared by the fault tests: 12 small events.
pub fn graphs(d: &Path) {
    ok(trackgnn(d, &["simulate", "--events", "12", "--pileup", "8", "--seed", "4", "--out", "ev"]));
    ok(trackgnn(d, &["build-graphs", "--input", "ev", "--out", "g", "--pt-min", "1"]));
}

/// The `train` arguments of a small model on `g` into `run`.
pub const TRAIN: &[&str] =
    &["train", "--graphs", "g", "--out", "run", "--hidden", "16", "--iterations", "2", "--threads", "1"];

/// The path of the last training event's graph of the run in `run` (never the first, which
/// every rank reads at start-up).
pub fn last_training_graph(d: &Path, run: &str) -> std::path::PathBuf {
    let events: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join(run).join("events.json")).unwrap()).unwrap();
    let id = events["train"].as_array().unwrap().last().unwrap().as_u64().unwrap();
    d.join("g").join(trackgnn_graph::graph_file_name(id))
}

/// Rewrites the graph file `path` with a NaN node feature: a corrupt input that reads fine.
pub fn poison(path: &Path) {
    let mut g = trackgnn_graph::read_graph(path).unwrap();
    g.node_features[0] = f32::NAN;
    trackgnn_graph::write_graph(path, &g).unwrap();
}

/// The global step of the run's checkpoint.
pub fn checkpoint_step(d: &Path, run: &str) -> u64 {
    checkpoint_state(d, run)["global_step"].as_u64().unwrap()
}

/// The trainer's state in the run's checkpoint.
pub fn checkpoint_state(d: &Path, run: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(d.join(run).join("checkpoint/state.json")).unwrap()).unwrap()
}

/// A file-size limit (`ulimit -f` blocks of 512 bytes) at ¾ of the run's optimiser state of
/// `optimizer_len` bytes (twice the weights): its next write fails (EFBIG, as on a full disk)
/// while the weights and every smaller file of `d/run` are written.
pub fn optimizer_write_limit(d: &Path, optimizer_len: usize) -> usize {
    let limit_blocks = optimizer_len * 3 / 4 / 512;
    let largest_other = walk(&d.join("run"))
        .into_iter()
        .filter(|p| !p.ends_with("optimizer.safetensors"))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .max()
        .unwrap();
    assert!(largest_other < limit_blocks as u64 * 512, "{largest_other} vs {limit_blocks} blocks");
    limit_blocks
}

fn with(base: &[&str], extra: &[&str]) -> Vec<String> {
    base.iter().chain(extra).map(|s| s.to_string()).collect()
}

fn run(d: &Path, args: &[String]) -> std::process::Output {
    trackgnn(d, &args.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn a_non_finite_loss_stops_naming_the_step_and_graph_or_is_skipped_by_option() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    graphs(d);
    ok(run(d, &with(TRAIN, &["--epochs", "1"])));
    let kept = std::fs::read(d.join("run/checkpoint/model.safetensors")).unwrap();
    let step0 = checkpoint_step(d, "run");
    let bad = last_training_graph(d, "run");
    poison(&bad);
    let err = fails(run(d, &with(TRAIN, &["--resume", "--epochs", "2"])));
    let name = bad.file_name().unwrap().to_string_lossy().to_string();
    assert!(err.contains("epoch 1 step") && err.contains("not finite") && err.contains(&name), "{err}");
    assert!(err.contains(&format!("step {step0}) is kept")), "{err}");
    // The last good checkpoint is untouched.
    assert_eq!(std::fs::read(d.join("run/checkpoint/model.safetensors")).unwrap(), kept);
    assert_eq!(checkpoint_step(d, "run"), step0);
    // By option the step is skipped and counted, in the outcome and in steps.jsonl.
    let out = json(&ok(run(d, &with(TRAIN, &["--resume", "--epochs", "2", "--non-finite", "skip", "--json"]))));
    assert_eq!(out["outcome"]["skipped_steps"], 1, "{out}");
    assert_eq!(out["outcome"]["epochs_completed"], 2);
    let steps = std::fs::read_to_string(d.join("run/steps.jsonl")).unwrap();
    assert_eq!(steps.matches("\"skipped\":true").count(), 1, "{steps}");
}

#[test]
fn a_failed_checkpoint_write_keeps_the_previous_checkpoint_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    graphs(d);
    // A model large enough that its optimiser state is the largest file the run writes.
    let big = ["--hidden", "48", "--epochs", "1"];
    ok(run(d, &with(TRAIN, &big)));
    let before = std::fs::read(d.join("run/checkpoint/optimizer.safetensors")).unwrap();
    let step0 = checkpoint_step(d, "run");
    let limit_blocks = optimizer_write_limit(d, before.len());
    let args = with(TRAIN, &["--hidden", "48", "--resume", "--epochs", "2"]);
    let script = format!("trap '' XFSZ; ulimit -f {limit_blocks}; exec \"$0\" \"$@\"");
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_trackgnn"))
        .args(&args)
        .current_dir(d)
        .env("RAYON_NUM_THREADS", "1")
        .output()
        .unwrap();
    let err = fails(out);
    assert!(err.contains("writing the checkpoint of step") && err.contains("optimizer.safetensors"), "{err}");
    assert!(err.contains(&format!("the previous checkpoint there (step {step0}) is intact")), "{err}");
    assert_eq!(std::fs::read(d.join("run/checkpoint/optimizer.safetensors")).unwrap(), before);
    // No partial copy is left behind, and the run resumes from the kept checkpoint.
    let names: Vec<String> =
        std::fs::read_dir(d.join("run")).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
    assert!(!names.iter().any(|n| n.contains(".tmp")), "{names:?}");
    ok(run(d, &args));
}

/// Every file under `dir`, recursively.
pub fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() { out.extend(walk(&p)) } else { out.push(p) }
    }
    out
}

/// A fake `scontrol` in `d/bin` that logs its arguments to `d/scontrol.log`.
pub fn fake_scontrol(d: &Path) -> String {
    let bin = d.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("scontrol");
    std::fs::write(&script, format!("#!/bin/sh\necho \"$@\" >> '{}'\n", d.join("scontrol.log").display())).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default())
}

/// Waits until the run in `d/run` has logged `n` steps.
pub fn wait_for_steps(d: &Path, n: usize) {
    let t0 = Instant::now();
    while std::fs::read_to_string(d.join("run/steps.jsonl")).map(|s| s.lines().count()).unwrap_or(0) < n {
        assert!(t0.elapsed() < Duration::from_secs(120), "training did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigusr1_checkpoints_requeues_the_slurm_job_and_resume_auto_continues() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    graphs(d);
    let path = fake_scontrol(d);
    let args = with(TRAIN, &["--epochs", "400", "--resume", "auto", "--requeue", "--json"]);
    let child = Command::new(env!("CARGO_BIN_EXE_trackgnn"))
        .args(&args)
        .current_dir(d)
        .env("PATH", &path)
        .env("SLURM_JOB_ID", "4242")
        .env("RAYON_NUM_THREADS", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_steps(d, 3);
    assert!(Command::new("kill").args(["-USR1", &child.id().to_string()]).status().unwrap().success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let o = json(&String::from_utf8(out.stdout).unwrap());
    assert_eq!((o["outcome"]["interrupted"].as_bool(), o["requeued"].as_bool()), (Some(true), Some(true)), "{o}");
    assert_eq!(std::fs::read_to_string(d.join("scontrol.log")).unwrap().trim(), "requeue 4242");
    let stopped = o["outcome"]["global_step"].as_u64().unwrap();
    assert_eq!(checkpoint_step(d, "run"), stopped);
    // The requeued job runs the same command: it continues the run (here, to the end of the
    // interrupted epoch), no step lost.
    let epochs = (checkpoint_state(d, "run")["epoch"].as_u64().unwrap() + 1).to_string();
    let o = json(&ok(run(d, &with(TRAIN, &["--epochs", &epochs, "--resume", "auto", "--json"]))));
    assert_eq!(o["outcome"]["epochs_completed"].to_string(), epochs, "{o}");
    let steps: Vec<u64> = std::fs::read_to_string(d.join("run/steps.jsonl"))
        .unwrap()
        .lines()
        .map(|l| json(l)["global_step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, (1..=steps.len() as u64).collect::<Vec<_>>());
    assert!(steps.len() as u64 > stopped);
}
