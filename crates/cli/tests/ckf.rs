//! `reconstruct --method ckf`: tracks from the hits alone (no run), and its refusals.

use crate::util::{fails, json, ok, trackgnn};

#[test]
fn reconstruct_ckf_needs_no_run_and_reports_metrics_and_seconds_per_stage() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(trackgnn(d, &["simulate", "--events", "2", "--pileup", "3", "--seed", "40", "--out", "ev"]));
    let out = json(&ok(trackgnn(
        d,
        &["reconstruct", "--method", "ckf", "--input", "ev", "--out", "tr", "--threads", "2", "--json"],
    )));
    assert_eq!(out["method"], "ckf");
    assert_eq!(out["threads"], 2);
    assert_eq!(out["events"].as_array().unwrap().len(), 2);
    let m = &out["metrics"];
    assert!(m["efficiency_primary"].as_f64().unwrap() > 0.9, "{m}");
    assert!(m["fake_rate"].as_f64().unwrap() < 0.05, "{m}");
    assert!(m["trackml_score"].as_f64().unwrap() > 0.5, "{m}");
    assert!(out["seconds_per_event"].as_f64().unwrap() > 0.0);
    assert!(out["mean_stage_seconds"]["seeding_seconds"].as_f64().unwrap() > 0.0);
    assert!(out["mean_stage_seconds"]["finding_seconds"].as_f64().unwrap() > 0.0);
    assert_eq!(out["efficiency_low_pt"]["pt_min"], 0.5);
    assert!(d.join("tr/event000000001-submission.csv").is_file());
    // The text names the method and the figures.
    let text = ok(trackgnn(d, &["reconstruct", "--method", "ckf", "--input", "ev", "--out", "tr2"]));
    assert!(text.contains("combinatorial Kalman filter") && text.contains("TrackML score"), "{text}");
}

#[test]
fn reconstruct_ckf_refusals_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(trackgnn(d, &["simulate", "--events", "1", "--pileup", "1", "--seed", "41", "--out", "ev"]));
    // Other methods still need a run.
    let err = fails(trackgnn(d, &["reconstruct", "--input", "ev", "--out", "o"]));
    assert!(err.contains("--run"), "{err}");
    // A missing detector file.
    let err = fails(trackgnn(
        d,
        &["reconstruct", "--method", "ckf", "--input", "ev", "--out", "o", "--detector", "nope.csv"],
    ));
    assert!(err.contains("nope.csv"), "{err}");
    // A detector without the pixel barrel (volume 8): the hits there lie on no module of it.
    ok(trackgnn(d, &["geometry", "--out", "full.csv"]));
    let full = std::fs::read_to_string(d.join("full.csv")).unwrap();
    let cut: String = full.lines().filter(|l| !l.starts_with("8,")).map(|l| format!("{l}\n")).collect();
    assert!(cut.len() < full.len());
    std::fs::write(d.join("cut.csv"), cut).unwrap();
    let err =
        fails(trackgnn(d, &["reconstruct", "--method", "ckf", "--input", "ev", "--out", "o", "--detector", "cut.csv"]));
    assert!(
        err.contains("cut.csv") && err.contains("event000000001-hits.csv") && err.contains("not in the detector"),
        "{err}"
    );
    // A hits file without hits: the reader refuses it, naming it (the library's `Ckf::event`
    // gives an event without hits no tracks).
    std::fs::create_dir(d.join("empty")).unwrap();
    std::fs::write(d.join("empty/event000000005-hits.csv"), "hit_id,x,y,z,volume_id,layer_id,module_id\n").unwrap();
    let err = fails(trackgnn(d, &["reconstruct", "--method", "ckf", "--input", "empty", "--out", "o2"]));
    assert!(err.contains("event000000005-hits.csv") && err.contains("no hits"), "{err}");
}
