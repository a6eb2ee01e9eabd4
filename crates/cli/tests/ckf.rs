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

#[test]
fn reconstruct_display_draws_one_event_and_exports_it_for_phoenix() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(trackgnn(d, &["simulate", "--events", "2", "--pileup", "2", "--seed", "43", "--out", "ev"]));
    let base = ["reconstruct", "--method", "ckf", "--input", "ev", "--json", "--display", "2"];
    let run = |out: &str, extra: &[&str]| json(&ok(trackgnn(d, &[&base[..], &["--out", out], extra].concat())));
    let all = run("all", &[]);
    let shown: Vec<&str> = all["display"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
    assert_eq!(shown.len(), 3, "{shown:?}");
    for name in ["event000000002-tracks.png", "event000000002-tracks.svg", "event000000002-phoenix.json"] {
        let path = d.join("all/display").join(name);
        assert!(std::fs::metadata(&path).unwrap().len() > 1000, "{name}");
        assert!(shown.iter().any(|p| p.ends_with(name)), "{name} reported");
    }
    // The Phoenix file: the event under its key, its hits in two collections, its tracks with
    // their fitted perigees (Phoenix's units: mm, MeV).
    let phoenix = |out: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(d.join(out).join("display/event000000002-phoenix.json")).unwrap())
            .unwrap()
    };
    let p = phoenix("all");
    let e = &p["event 2"];
    assert_eq!((e["event number"].as_u64(), e["run number"].as_u64()), (Some(2), Some(0)));
    let count = |e: &serde_json::Value, k: &str, c: &str| e[k][c].as_array().unwrap().len();
    let hits = count(e, "Hits", "hits on tracks") + count(e, "Hits", "hits on no track");
    let tracks = all["events"].as_array().unwrap()[1]["tracks"].as_u64().unwrap() as usize;
    let exported = count(e, "Tracks", "CKF tracks");
    assert!(exported > 0 && exported <= tracks && exported * 100 >= tracks * 90, "{exported} of {tracks}");
    let t = &e["Tracks"]["CKF tracks"][0];
    assert_eq!(t["dparams"].as_array().unwrap().len(), 5);
    assert!(t["pos"].as_array().unwrap().is_empty() && t["pT"].as_f64().unwrap() > 400.0, "{t}");
    // A region keeps fewer hits; `--phoenix-tracks hits` gives the tracks' points.
    let region = run("region", &["--display-region", "r=0:300,phi=0:1.5", "--phoenix-tracks", "hits"]);
    assert_eq!(region["display"].as_array().unwrap().len(), 3);
    let r = phoenix("region");
    let inside = count(&r["event 2"], "Hits", "hits on tracks") + count(&r["event 2"], "Hits", "hits on no track");
    assert!(inside > 0 && inside * 4 < hits, "{inside} of {hits} hits in the region");
    let t = &r["event 2"]["Tracks"]["CKF tracks"][0];
    assert!(t["pos"].as_array().unwrap().len() >= 2 && t["pos"][0].as_array().unwrap().len() == 3, "{t}");
    // An event that is not in the input, and a malformed region, are refused by name.
    let err = fails(trackgnn(d, &["reconstruct", "--method", "ckf", "--input", "ev", "--out", "x", "--display", "9"]));
    assert!(err.contains("event 9") && err.contains("ev") && err.contains("1-2"), "{err}");
    let err = fails(trackgnn(d, &[&base[..], &["--out", "y", "--display-region", "rho=0:1"]].concat()));
    assert!(err.contains("rho") && err.contains("--display-region"), "{err}");
}
