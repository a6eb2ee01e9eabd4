//! Data-parallel training under `mpirun -np 2` (only in a build with the `mpi` feature; CI
//! installs OpenMPI and runs these: a missing `mpirun` is a failure, never a skip).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{json, ok, trackgnn};

/// `mpirun` with the environment of these tests (root allowed, one thread per rank), no
/// processes named yet.
fn launcher() -> Command {
    let found = Command::new("mpirun").arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    assert!(found, "mpirun is not installed: install OpenMPI (see docs/training.md) to run the MPI tests");
    let mut c = Command::new("mpirun");
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1").env("RAYON_NUM_THREADS", "1");
    c.arg("--oversubscribe");
    c
}

/// `mpirun -np 2 trackgnn`, the arguments to follow.
fn mpirun() -> Command {
    let mut c = launcher();
    c.args(["-np", "2", env!("CARGO_BIN_EXE_trackgnn")]);
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
    let mut job = mpirun();
    job.args(["train", "--graphs", "g", "--out", "run", "--epochs", "400", "--hidden", "16", "--iterations", "2"])
        .args(["--threads", "1", "--checkpoint-every", "3"]);
    // Four steps logged: the checkpoint of step 3 (or of an epoch's end) is on disk.
    let ended = signal_rank(d, job, 4, "KILL", To::Rank(1));
    eprintln!("job ended {:.2} s after kill -9", ended.seconds);
    assert_ne!(ended.code, Some(0), "the job must fail when a rank dies");
    assert!(ended.seconds < 10.0, "the job took {:.1} s to end after a rank was killed", ended.seconds);
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
fn ranks_of(mpirun: &Child) -> Vec<(String, usize)> {
    let pids = String::from_utf8(
        Command::new("pgrep").args(["-P", &mpirun.id().to_string(), "trackgnn"]).output().unwrap().stdout,
    )
    .unwrap();
    // A process that ended meanwhile is left out.
    pids.split_whitespace()
        .filter_map(|pid| {
            let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            let rank = env
                .split(|&b| b == 0)
                .filter_map(|kv| std::str::from_utf8(kv).ok())
                .find_map(|kv| kv.strip_prefix("OMPI_COMM_WORLD_RANK="))
                .and_then(|r| r.parse().ok())?;
            Some((pid.to_string(), rank))
        })
        .collect()
}

/// The rank processes a signal goes to.
#[derive(Clone, Copy, Debug)]
enum To {
    /// The process of this rank.
    Rank(usize),
    /// Every rank's process.
    All,
}

/// How a job that was sent a signal ended.
struct Ended {
    /// Its exit code (`None`: ended by a signal).
    code: Option<i32>,
    /// Its standard error.
    stderr: String,
    /// Seconds from the signal to its end.
    seconds: f64,
}

/// A running `mpirun`, killed with its ranks if the test fails before it ends.
struct Job(Child);

impl Drop for Job {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            for (pid, _) in ranks_of(&self.0) {
                let _ = Command::new("kill").args(["-KILL", &pid]).status();
            }
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Starts `job` (an `mpirun -np 2` of a training into `d/run`), waits until the run has logged
/// `after_steps` steps, sends `signal` (a `kill` name: USR1, TERM, STOP, KILL) to the rank
/// processes `to`, and waits for the job to end: within 60 s, else the test fails (a hang).
fn signal_rank(d: &Path, mut job: Command, after_steps: usize, signal: &str, to: To) -> Ended {
    let err_path = d.join("job.stderr");
    let child = job.current_dir(d).stdout(Stdio::null()).stderr(File::create(&err_path).unwrap()).spawn().unwrap();
    let mut job = Job(child);
    crate::faults::wait_for_steps(d, after_steps);
    let ranks = ranks_of(&job.0);
    assert_eq!(ranks.len(), 2, "rank processes {ranks:?}");
    let sent = Instant::now();
    for (pid, rank) in &ranks {
        if matches!(to, To::All) || matches!(to, To::Rank(r) if r == *rank) {
            assert!(Command::new("kill").args([&format!("-{signal}"), pid]).status().unwrap().success());
        }
    }
    let status = loop {
        if let Some(status) = job.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            sent.elapsed() < Duration::from_secs(60),
            "the job hangs 60 s after SIG{signal}: {}",
            std::fs::read_to_string(&err_path).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let seconds = sent.elapsed().as_secs_f64();
    Ended { code: status.code(), stderr: std::fs::read_to_string(&err_path).unwrap(), seconds }
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
    let mut job = mpirun();
    job.args(train_args(&["--epochs", "400", "--collective-timeout", "2"]));
    let ended = signal_rank(d, job, 2, "STOP", To::Rank(1));
    eprintln!("stalled rank detected, job ended {:.2} s after SIGSTOP", ended.seconds);
    assert_ne!(ended.code, Some(0));
    assert!(ended.stderr.contains("rank(s) 1 did not reach"), "{}", ended.stderr);
    assert!(ended.seconds < 15.0, "took {} s", ended.seconds);
}

#[test]
fn mpi_a_stalled_domain_rank_is_named_and_the_job_aborts_within_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fault_graphs(d);
    let mut job = mpirun();
    job.args(train_args(&["--epochs", "400", "--collective-timeout", "2", "--domain-ranks", "2"]));
    let ended = signal_rank(d, job, 2, "STOP", To::Rank(1));
    eprintln!("stalled domain rank detected, job ended {:.2} s after SIGSTOP", ended.seconds);
    assert_ne!(ended.code, Some(0));
    // Rank 0 waits in a halo exchange (most of a step) or in a collective: either names rank 1.
    let named = ended.stderr.contains("with domain rank(s) 1 did not complete")
        || ended.stderr.contains("rank(s) 1 did not reach");
    assert!(named, "{}", ended.stderr);
    assert!(ended.seconds < 15.0, "took {} s", ended.seconds);
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
    let mut job = mpirun();
    job.env("PATH", &path).env("SLURM_JOB_ID", "77").args(train_args(&[
        "--epochs",
        "400",
        "--resume",
        "auto",
        "--requeue",
    ]));
    let ended = signal_rank(d, job, 2, "USR1", To::Rank(1));
    eprintln!("SIGUSR1: checkpointed and stopped {:.2} s after the signal", ended.seconds);
    assert_eq!(ended.code, Some(3), "{}", ended.stderr);
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

/// The JSON lines of `d/run/<file>`.
fn run_log(d: &Path, file: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(d.join("run").join(file)).unwrap().lines().map(json).collect()
}

/// Asserts that the run in `d/run` is one curve through `epochs` epochs: every step logged
/// once, in order; every epoch once, its training loss finite, the last one not thrown back
/// above where the run started.
fn assert_curve_continues(d: &Path, epochs: u64) {
    let steps: Vec<u64> = run_log(d, "steps.jsonl").iter().map(|s| s["global_step"].as_u64().unwrap()).collect();
    assert_eq!(steps, (1..=steps.len() as u64).collect::<Vec<_>>());
    let losses: Vec<(u64, f64)> = run_log(d, "metrics.jsonl")
        .iter()
        .map(|m| (m["epoch"].as_u64().unwrap(), m["train_loss"].as_f64().unwrap()))
        .collect();
    assert_eq!(losses.iter().map(|e| e.0).collect::<Vec<_>>(), (0..epochs).collect::<Vec<_>>());
    let (first, last) = (losses[0].1, losses[losses.len() - 1].1);
    assert!(losses.iter().all(|e| e.1.is_finite()) && last < first * 1.5, "{losses:?}");
}

/// The global step and epoch of the checkpoint of the run in `d/run`.
fn checkpoint_position(d: &Path) -> (u64, u64) {
    let state = crate::faults::checkpoint_state(d, "run");
    (state["global_step"].as_u64().unwrap(), state["epoch"].as_u64().unwrap())
}

#[test]
fn mpi_elastic_resume_from_two_ranks_to_one_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fault_graphs(d);
    // Two ranks, stopped by a signal in mid-run.
    let mut job = mpirun();
    job.args(train_args(&["--epochs", "400", "--sampler", "random", "--lr-scaling", "linear"]));
    let ended = signal_rank(d, job, 2, "TERM", To::All);
    assert_eq!(ended.code, Some(3), "{}", ended.stderr);
    let (two, epoch) = checkpoint_position(d);
    // The signal may land in any epoch, even on its last step (which leaves only validation):
    // one rank trains through the epoch after it, then two ranks through one more.
    let (one_rank, two_ranks) = ((epoch + 2).to_string(), (epoch + 3).to_string());
    // One rank (a lone process of this build is a world of one), then two again.
    ok(trackgnn(d, &train_args(&["--resume", "--epochs", &one_rank])));
    let (out, _) = mpirun_timed(d, &train_args(&["--resume", "--epochs", &two_ranks]));
    assert!(out.status.success(), "{}", stderr(&out));
    let changes = run_log(d, "resumes.jsonl");
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert_eq!((changes[0]["previous_ranks"].as_u64(), changes[0]["ranks"].as_u64()), (Some(2), Some(1)));
    assert_eq!(changes[0]["global_step"].as_u64(), Some(two));
    // Linear scaling: the base learning rate halves with the ranks, and doubles back.
    let lr = |c: &serde_json::Value, k: &str| c[k].as_f64().unwrap();
    assert!((lr(&changes[0], "previous_lr") / lr(&changes[0], "lr") - 2.0).abs() < 1e-9, "{changes:?}");
    assert_eq!((changes[1]["previous_ranks"].as_u64(), changes[1]["ranks"].as_u64()), (Some(1), Some(2)));
    assert_eq!(changes[1]["epoch"].as_u64(), Some(epoch + 2), "{changes:?}");
    assert_curve_continues(d, epoch + 3);
}

/// The `trackgnn` of a build without the `mpi` feature, the same workspace's: the file
/// `TRACKGNN_PLAIN_BIN` names (`.ci/run` keeps a copy of the plain build there, since the MPI
/// build in the same target directory replaces it), else `target/debug/trackgnn`. Checked to
/// be one: launched as one of two ranks, it refuses to train; and not an older build: its
/// `train --help` is this build's.
fn plain_trackgnn() -> PathBuf {
    let path = std::env::var_os("TRACKGNN_PLAIN_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/trackgnn"));
    let rebuild = "build it with `cargo build -p trackgnn`, copy it aside (an MPI build in the same target directory \
                   replaces it) and name the copy in TRACKGNN_PLAIN_BIN";
    assert!(path.is_file(), "{}: no trackgnn built without MPI; {rebuild}", path.display());
    let out = Command::new(&path)
        .args(["train", "--graphs", "g", "--out", "run"])
        .current_dir(std::env::temp_dir())
        .env("OMPI_COMM_WORLD_SIZE", "2")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("built without MPI"),
        "{}: not a build without MPI: {err}",
        path.display()
    );
    // Without its usage line, which names the file.
    let help = |bin: &Path| {
        let out = String::from_utf8(Command::new(bin).args(["train", "--help"]).output().unwrap().stdout).unwrap();
        out.lines().filter(|l| !l.starts_with("Usage:")).collect::<Vec<_>>().join("\n")
    };
    assert!(
        help(&path) == help(Path::new(env!("CARGO_BIN_EXE_trackgnn"))),
        "{}: its `train --help` differs from this build's (an older build?); {rebuild}",
        path.display()
    );
    path
}

#[test]
fn mpi_a_run_of_two_ranks_continues_in_a_build_without_mpi() {
    let plain = plain_trackgnn();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fault_graphs(d);
    let mut job = mpirun();
    job.args(train_args(&["--epochs", "400", "--sampler", "random", "--lr-scaling", "linear"]));
    let ended = signal_rank(d, job, 2, "USR1", To::Rank(0));
    assert_eq!(ended.code, Some(3), "{}", ended.stderr);
    let (stopped, epoch) = checkpoint_position(d);
    // The plain build continues the run through the epoch after the interrupted one.
    let epochs = epoch + 2;
    let t0 = Instant::now();
    let out = Command::new(&plain)
        .args(train_args(&["--resume", "--epochs", &epochs.to_string(), "--json"]))
        .current_dir(d)
        .env("RAYON_NUM_THREADS", "1")
        .output()
        .unwrap();
    eprintln!("a 2-rank run resumed in a build without MPI: done in {:.2} s", t0.elapsed().as_secs_f64());
    let o = json(&ok(out));
    assert_eq!(o["outcome"]["epochs_completed"].as_u64(), Some(epochs), "{o}");
    // The change is recorded: two ranks to one where the checkpoint stood, the base learning
    // rate halved with linear scaling.
    let changes = run_log(d, "resumes.jsonl");
    assert_eq!(changes.len(), 1, "{changes:?}");
    let c = &changes[0];
    eprintln!("recorded rank change: {c}");
    let at = [&c["previous_ranks"], &c["ranks"], &c["global_step"], &c["epoch"]].map(|v| v.as_u64());
    assert_eq!(at, [Some(2), Some(1), Some(stopped), Some(epoch)], "{c}");
    assert!((c["previous_lr"].as_f64().unwrap() / c["lr"].as_f64().unwrap() - 2.0).abs() < 1e-9, "{c}");
    // The sampler is recomputed for one rank: steps of two ranks' graphs up to the checkpoint,
    // of one after it; no graph of the interrupted epoch trained twice, and every training
    // graph once in the epoch after it.
    let steps = run_log(d, "steps.jsonl");
    let ranks = |s: &serde_json::Value| s["events"].as_array().unwrap().len();
    let (before, after): (Vec<_>, Vec<_>) = steps.iter().partition(|s| s["global_step"].as_u64().unwrap() <= stopped);
    assert!(before.iter().all(|s| ranks(s) == 2) && after.iter().all(|s| ranks(s) == 1), "{steps:?}");
    let events_of = |e: u64| -> Vec<u64> {
        let mut ids: Vec<u64> = steps
            .iter()
            .filter(|s| s["epoch"].as_u64() == Some(e))
            .flat_map(|s| s["events"].as_array().unwrap().iter().flat_map(|r| r.as_array().unwrap().clone()))
            .map(|id| id.as_u64().unwrap())
            .collect();
        ids.sort_unstable();
        ids
    };
    let interrupted = events_of(epoch);
    assert!(interrupted.windows(2).all(|w| w[0] < w[1]), "a graph trained twice in epoch {epoch}: {interrupted:?}");
    let split: serde_json::Value = json(&std::fs::read_to_string(d.join("run/events.json")).unwrap());
    let mut train: Vec<u64> = split["train"].as_array().unwrap().iter().map(|id| id.as_u64().unwrap()).collect();
    train.sort_unstable();
    assert_eq!(events_of(epoch + 1), train);
    assert_curve_continues(d, epochs);
}

#[test]
fn mpi_a_failed_checkpoint_write_on_rank_0_ends_every_rank_and_keeps_the_previous_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fault_graphs(d);
    // A model large enough that its optimiser state is the largest file the run writes.
    let (out, _) = mpirun_timed(d, &train_args(&["--hidden", "48", "--epochs", "1"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let optimizer = d.join("run/checkpoint/optimizer.safetensors");
    let before = std::fs::read(&optimizer).unwrap();
    let step0 = crate::faults::checkpoint_step(d, "run");
    // Rank 0's next optimiser write fails (EFBIG, as on a full disk).
    let limit_blocks = crate::faults::optimizer_write_limit(d, before.len());
    // Rank 0 alone gets the limit (`sh` sets it, then becomes rank 0's trackgnn), and the ranks
    // talk over TCP on the loopback: OpenMPI's shared-memory transport sizes a file past it.
    // Three epochs: rank 1 is in the next epoch's collectives when rank 0's write fails.
    let args = train_args(&["--hidden", "48", "--resume", "--epochs", "3"]);
    let bin = env!("CARGO_BIN_EXE_trackgnn");
    let limited = format!("trap '' XFSZ; ulimit -f {limit_blocks}; exec \"$0\" \"$@\"");
    let t0 = Instant::now();
    let out = launcher()
        .current_dir(d)
        .args(["--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo"])
        .args(["-np", "1", "sh", "-c", &limited, bin])
        .args(&args)
        .args([":", "-np", "1", bin])
        .args(&args)
        .output()
        .unwrap();
    let ended = std::time::SystemTime::now();
    // The failed write follows the epoch's plots, the last files rank 0 wrote.
    let failed = crate::faults::walk(&d.join("run/plots"))
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().modified().unwrap())
        .max()
        .unwrap();
    eprintln!(
        "checkpoint write failed on rank 0 of 2: job ended {:.2} s after it, {:.2} s after it started",
        ended.duration_since(failed).unwrap_or_default().as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("rank 0 of 2: error:") && err.contains("aborting the MPI job"), "{err}");
    assert!(err.contains("writing the checkpoint of step") && err.contains("optimizer.safetensors"), "{err}");
    assert!(err.contains(&format!("the previous checkpoint there (step {step0}) is intact")), "{err}");
    // Rank 1 was ended by rank 0's abort, not by waiting out the collective timeout.
    assert!(!err.contains("did not reach"), "{err}");
    assert_eq!(std::fs::read(&optimizer).unwrap(), before);
    assert_eq!(crate::faults::checkpoint_step(d, "run"), step0);
    let names: Vec<String> =
        std::fs::read_dir(d.join("run")).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
    assert!(!names.iter().any(|n| n.contains(".tmp")), "{names:?}");
    // With room again the run resumes from the kept checkpoint.
    let (out, _) = mpirun_timed(d, &train_args(&["--hidden", "48", "--resume", "--epochs", "2"]));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(crate::faults::checkpoint_step(d, "run") > step0);
}

/// The largest relative difference, tensor by tensor, between two runs' final weights.
fn weight_difference(a: &Path, b: &Path) -> f64 {
    let (a, b) = (weights(&a.join("checkpoint/model.safetensors")), weights(&b.join("checkpoint/model.safetensors")));
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(&b)
        .map(|((na, wa), (nb, wb))| {
            assert_eq!(na, nb);
            let diff: f64 = wa.iter().zip(wb).map(|(x, y)| ((x - y) as f64).powi(2)).sum::<f64>().sqrt();
            diff / wa.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt().max(1e-12)
        })
        .fold(0.0, f64::max)
}

#[test]
fn mpi_two_domain_ranks_train_as_one_rank_on_the_whole_graphs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    graphs(d);
    // f32 without and with checkpointing, and bf16: one graph split across two ranks at every
    // step gives the weights of one rank training on the whole graphs.
    for (name, extra, tol) in [
        ("f32", &[][..], 1e-5),
        // States saved in bf16 round differently once the weights differ in the last bits.
        ("ckpt", &["--checkpointing", "every:1+bf16"][..], 1e-4),
        ("bf16", &["--precision", "bf16"][..], 1e-2),
    ] {
        let (one, two) = (format!("one-{name}"), format!("two-{name}"));
        ok(trackgnn(d, &[TRAIN, extra, &["--out", &one]].concat()));
        let out = mpirun()
            .current_dir(d)
            .args(TRAIN)
            .args(extra)
            .args(["--out", &two, "--domain-ranks", "2"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let diff = weight_difference(&d.join(&one), &d.join(&two));
        eprintln!("{name}: weights after 2 epochs differ by {diff:e}");
        assert!(diff < tol, "{name}: weights differ by {diff:e} (relative, worst tensor)");
    }
}

#[test]
fn mpi_a_domain_parallel_run_resumes_on_one_rank_with_the_same_weights() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    graphs(d);
    let epochs = |n: &'static str| [TRAIN, &["--epochs", n]].concat();
    // One epoch split across 2 ranks, the second on one rank (the checkpoint does not depend on P).
    let out = mpirun().current_dir(d).args(epochs("1")).args(["--out", "r", "--domain-ranks", "2"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    ok(trackgnn(d, &[epochs("2"), vec!["--out", "r", "--resume"]].concat()));
    ok(trackgnn(d, &[epochs("2"), vec!["--out", "straight"]].concat()));
    let diff = weight_difference(&d.join("r"), &d.join("straight"));
    assert!(diff < 1e-5, "resumed across P: weights differ by {diff:e}");
}

#[test]
fn mpi_two_data_groups_of_two_domain_ranks_train_as_one_rank_with_two_graphs_per_step() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    graphs(d);
    ok(trackgnn(d, &[TRAIN, &["--out", "one", "--graphs-per-step", "2"]].concat()));
    let mut four = launcher();
    four.args(["-np", "4", env!("CARGO_BIN_EXE_trackgnn")]);
    let out = four.current_dir(d).args(TRAIN).args(["--out", "four", "--domain-ranks", "2"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let diff = weight_difference(&d.join("one"), &d.join("four"));
    eprintln!("2 × 2 ranks: weights after 2 epochs differ by {diff:e}");
    assert!(diff < 1e-5, "2 × 2 ranks: weights differ by {diff:e} from 1 rank with 2 graphs per step");
    // A domain split that does not divide the ranks is refused before anything is written.
    let out = mpirun().current_dir(d).args(TRAIN).args(["--out", "bad", "--domain-ranks", "3"]).output().unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("3 domain ranks do not divide the 2 ranks"), "{}", stderr(&out));
    assert!(!d.join("bad").exists(), "a refused run wrote its directory");
}

#[test]
fn mpi_an_event_reconstructed_across_two_domain_ranks_gives_one_ranks_tracks() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    graphs(d);
    ok(trackgnn(d, &[TRAIN, &["--epochs", "3", "--out", "run"]].concat()));
    let reco = |out: &'static str| ["reconstruct", "--run", "run", "--input", "ev", "--events", "3", "--out", out];
    for (name, extra) in [("f32", &[][..]), ("bf16", &["--precision", "bf16"][..])] {
        let (one, two) = (format!("one-{name}"), format!("two-{name}"));
        let (one, two): (&'static str, &'static str) = (one.leak(), two.leak());
        let single = json(&ok(trackgnn(d, &[&reco(one)[..], extra, &["--json"]].concat())));
        let out = mpirun()
            .current_dir(d)
            .args(reco(two))
            .args(extra)
            .args(["--domain-ranks", "2", "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        // Rank 0 alone prints the report and writes the files.
        let split = json(&String::from_utf8_lossy(&out.stdout));
        assert_eq!(split["metrics"], single["metrics"], "{name}: the track metrics differ");
        let tracks: u64 = single["events"].as_array().unwrap().iter().map(|e| e["tracks"].as_u64().unwrap()).sum();
        assert!(tracks > 0, "{name}: no tracks to compare");
        eprintln!("{name}: {tracks} tracks in 3 events, the same on 1 rank and 2 domain ranks");
        let mut files: Vec<_> = std::fs::read_dir(d.join(one)).unwrap().map(|e| e.unwrap().file_name()).collect();
        files.retain(|f| f.to_string_lossy().ends_with("-submission.csv"));
        assert_eq!(files.len(), 3, "{name}: {files:?}");
        for f in files {
            let (a, b) = (std::fs::read(d.join(one).join(&f)).unwrap(), std::fs::read(d.join(two).join(&f)).unwrap());
            assert!(a == b, "{name}: {} differs between 1 rank and 2 domain ranks", f.to_string_lossy());
        }
    }
    // Two ranks without --domain-ranks would each write every file: refused.
    let out = mpirun().current_dir(d).args(reco("bad")).output().unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("splits each event across them with --domain-ranks 2"), "{}", stderr(&out));
    assert!(!d.join("bad").exists(), "a refused reconstruction wrote its directory");
    // A build without MPI says what it needs.
    let out = Command::new(plain_trackgnn()).current_dir(d).args(reco("bad")).args(["--domain-ranks", "2"]).output();
    let out = out.unwrap();
    assert!(!out.status.success() && stderr(&out).contains("needs an MPI build"), "{}", stderr(&out));
    assert!(!d.join("bad").exists(), "a refused reconstruction wrote its directory");
}
