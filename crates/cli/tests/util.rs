//! Running the binary in a temporary directory.

use std::path::Path;
use std::process::{Command, Output};

/// Runs `trackgnn` with `args` in `dir`.
pub fn trackgnn(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trackgnn"))
        .args(args)
        .current_dir(dir)
        .env("RAYON_NUM_THREADS", "2")
        .output()
        .expect("the binary runs")
}

/// Stdout as text, panicking with stderr if the command failed.
pub fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "failed with {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Stderr as text, asserting the command failed.
pub fn fails(out: Output) -> String {
    assert!(
        !out.status.success(),
        "expected a failure, got {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stderr).unwrap()
}

/// Parses a `--json` output.
pub fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not one JSON object ({e}): {text}"))
}
