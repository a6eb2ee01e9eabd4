//! How failures reach the user: one line per error with each cause once, one wording for a
//! missing input, exit code 1 for a run-time failure and 2 for a usage error.

use std::fs;
use std::path::Path;
use std::process::Output;

use crate::util::{ok, trackgnn};

/// Stderr and exit code of a command that must fail.
fn failure(out: Output) -> (String, Option<i32>) {
    assert!(!out.status.success(), "expected a failure: {}", String::from_utf8_lossy(&out.stdout));
    (String::from_utf8(out.stderr).unwrap(), out.status.code())
}

/// The `error: …` line of a run-time failure, asserting exit code 1 and that it is the only
/// line.
fn runtime_error(d: &Path, args: &[&str]) -> String {
    let (err, code) = failure(trackgnn(d, args));
    assert_eq!(code, Some(1), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: one line expected:\n{err}");
    err.trim_end().to_string()
}

#[test]
fn a_missing_input_reads_the_same_in_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for args in [
        &["simulate", "--events", "1", "--out", "o", "--config", "nope"][..],
        &["inspect", "nope"],
        &["build-graphs", "--input", "nope", "--out", "o"],
        &["module-map", "build", "--input", "nope", "--out", "o.map"],
        &["train", "--graphs", "nope", "--out", "o"],
        &["eval", "--run", "nope", "--graphs", "g"],
        &["reconstruct", "--run", "nope", "--input", "ev", "--out", "o"],
    ] {
        assert_eq!(runtime_error(d, args), "error: nope: no such file or directory", "{args:?}");
        assert!(!d.join("o").exists(), "{args:?} wrote output");
    }
}

#[test]
fn usage_errors_exit_with_2_and_run_time_failures_with_1() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (err, code) = failure(trackgnn(d, &["train", "--graphs", "g", "--out", "o", "--bogus"]));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--bogus"), "{err}");
    let (err, code) = failure(trackgnn(d, &["train", "--graphs", "g", "--out", "o", "--device", "gpu"]));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("unknown device `gpu`: expected `cpu`, `cuda` or `cuda:N`"), "{err}");
    let (err, code) = failure(trackgnn(d, &["build-graphs", "--input", "ev"]));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--out"), "{err}");
    assert_eq!(
        runtime_error(d, &["simulate", "--events", "1", "--out", "o", "--threads", "0"]),
        "error: --threads must be at least 1"
    );
}

#[test]
fn corrupt_inputs_print_each_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(trackgnn(d, &["simulate", "--events", "6", "--pileup", "1", "--out", "ev"]));
    ok(trackgnn(d, &["simulate", "--events", "1", "--pileup", "1", "--out", "gz", "--gzip"]));
    // A truncated .csv.gz: the decompressor's reason once, after the file.
    let hits = d.join("gz/event000000001-hits.csv.gz");
    let bytes = fs::read(&hits).unwrap();
    fs::write(&hits, &bytes[..200]).unwrap();
    let err = runtime_error(d, &["inspect", "gz"]);
    assert_eq!(err, "error: gz/event000000001-hits.csv.gz: incomplete deflate stream");
    // A malformed row: file, line and column.
    fs::create_dir(d.join("bad")).unwrap();
    for f in fs::read_dir(d.join("ev")).unwrap().map(|e| e.unwrap().path()) {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("event000000001") {
            fs::copy(&f, d.join("bad").join(&name)).unwrap();
        }
    }
    let text = fs::read_to_string(d.join("bad/event000000001-hits.csv")).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let mut fields: Vec<&str> = lines[2].split(',').collect();
    fields[1] = "abc";
    lines[2] = fields.join(",");
    fs::write(d.join("bad/event000000001-hits.csv"), lines.join("\n") + "\n").unwrap();
    let err = runtime_error(d, &["inspect", "bad"]);
    assert_eq!(err, "error: bad/event000000001-hits.csv:3: column `x`: expected a number, got `abc`");
    // A truncated weights file: the safetensors reason once.
    ok(trackgnn(d, &["build-graphs", "--input", "ev", "--out", "g"]));
    ok(trackgnn(d, &["train", "--graphs", "g", "--out", "run", "--epochs", "1", "--hidden", "8", "--iterations", "1"]));
    let weights = d.join("run/best.safetensors");
    let bytes = fs::read(&weights).unwrap();
    fs::write(&weights, &bytes[..100]).unwrap();
    let err = runtime_error(d, &["eval", "--run", "run", "--graphs", "g", "--all"]);
    assert_eq!(err, "error: run/best.safetensors: invalid safetensors file: invalid header length");
}
