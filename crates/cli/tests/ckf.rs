//! `reconstruct --method ckf`: tracks from the hits alone (no run), and its refusals.

use crate::util::{check_parameters, fails, json, ok, trackgnn};

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

#[test]
fn reconstruct_ckf_fit_writes_each_tracks_parameters_beside_the_submission() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(trackgnn(d, &["simulate", "--events", "2", "--pileup", "2", "--seed", "42", "--out", "ev"]));
    let args = ["reconstruct", "--method", "ckf", "--input", "ev", "--out", "tr", "--fit", "--json"];
    let out = json(&ok(trackgnn(d, &args)));
    let rows = check_parameters(d, "tr", &out);
    let tracks: u64 = out["events"].as_array().unwrap().iter().map(|e| e["tracks"].as_u64().unwrap()).sum();
    // Nearly every track is fitted, and their χ²/ndf is about 1.
    assert!(rows.len() as u64 * 100 >= tracks * 95, "{} of {tracks} tracks fitted", rows.len());
    let mut chi2_ndf: Vec<f64> = rows.iter().map(|r| r[11] / r[12]).collect();
    chi2_ndf.sort_by(f64::total_cmp);
    let median = chi2_ndf[chi2_ndf.len() / 2];
    assert!((0.5..2.0).contains(&median), "median χ²/ndf {median}");
    assert!(out["mean_stage_seconds"]["fit_seconds"].as_f64().unwrap() > 0.0);
    // Without --fit, no parameters file.
    ok(trackgnn(d, &["reconstruct", "--method", "ckf", "--input", "ev", "--out", "nofit", "--events", "1"]));
    assert!(d.join("nofit/event000000001-submission.csv").is_file());
    assert!(!d.join("nofit/event000000001-parameters.csv").exists());
}
