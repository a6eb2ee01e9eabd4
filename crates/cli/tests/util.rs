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

/// Checks the parameters files that `reconstruct --fit --json` wrote into `out` (below
/// `dir`) against its JSON `report`: one per event beside the submission, its header, one
/// row per fitted track (the event's `fitted_tracks`), every value finite, errors positive,
/// ndf = 2 × hits − 5 ≥ 1, and track ids that are the submission's. Returns the rows and
/// their q/pT.
pub fn check_parameters(dir: &Path, out: &str, report: &serde_json::Value) -> Vec<Vec<f64>> {
    let mut all = Vec::new();
    for e in report["events"].as_array().unwrap() {
        let id = e["event_id"].as_u64().unwrap();
        let read = |kind: &str| {
            let p = dir.join(out).join(format!("event{id:09}-{kind}.csv"));
            std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        };
        let submission: std::collections::HashMap<u64, usize> =
            read("submission").lines().skip(1).fold(Default::default(), |mut m, l| {
                *m.entry(l.rsplit(',').next().unwrap().parse().unwrap()).or_default() += 1;
                m
            });
        let text = read("parameters");
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some("track_id,q_over_pt,phi,eta,d0,z0,sigma_q_over_pt,sigma_phi,sigma_eta,sigma_d0,sigma_z0,chi2,ndf")
        );
        let rows: Vec<Vec<f64>> = lines.map(|l| l.split(',').map(|v| v.parse().unwrap()).collect()).collect();
        assert_eq!(rows.len() as u64, e["fitted_tracks"].as_u64().unwrap(), "event {id}: {text}");
        for r in &rows {
            assert_eq!(r.len(), 13, "{r:?}");
            assert!(r.iter().all(|v| v.is_finite()), "{r:?}");
            assert!(r[6..11].iter().all(|&s| s > 0.0), "errors {r:?}");
            assert!(r[11] >= 0.0 && r[12] >= 1.0 && r[12] as usize % 2 == 1, "χ², ndf {r:?}");
            let hits = submission.get(&(r[0] as u64)).copied().unwrap_or(0);
            assert!(hits >= 3, "track {} has {hits} hits in the submission", r[0]);
        }
        all.extend(rows);
    }
    all
}
