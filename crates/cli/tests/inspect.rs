use std::fs;

use crate::util::{fails, json, ok, trackgnn};

fn simulate(dir: &std::path::Path) {
    ok(trackgnn(dir, &["simulate", "--events", "2", "--pileup", "10", "--seed", "5", "--out", "ev"]));
}

#[test]
fn inspect_json_puts_every_realism_row_beside_the_real_value() {
    let dir = tempfile::tempdir().unwrap();
    simulate(dir.path());
    let out = json(&ok(trackgnn(dir.path(), &["inspect", "ev", "--json"])));
    assert_eq!(out["events"], 2);
    assert_eq!(out["all_checks_passed"], true);
    let rows = out["realism"].as_array().unwrap();
    assert_eq!(rows.len(), out["realism_rows"].as_u64().unwrap() as usize);
    for key in ["noise_fraction", "hits_in_volume_8", "median_pt_gev", "secondary_fraction", "species_pion"] {
        let row = rows.iter().find(|r| r["key"] == key).unwrap_or_else(|| panic!("no row {key}"));
        assert!(row["value"].is_f64() && row["real_low"].is_f64(), "{row}");
    }
    let noise = out["stats"]["noise_fraction"].as_f64().unwrap();
    assert!((noise - 0.15).abs() < 0.01, "fractions are 0-1: {noise}");
    let checks = out["checks"].as_array().unwrap();
    assert!(checks.iter().any(|c| c["name"] == "truth_on_module_plane" && c["passed"] == true));
    // One event by its file name gives the same per-event figures for that event only.
    let one = json(&ok(trackgnn(dir.path(), &["inspect", "ev/event000000002-hits.csv", "--json"])));
    assert_eq!(one["events"], 1);
}

#[test]
fn malformed_event_files_name_the_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    simulate(dir.path());
    let hits = dir.path().join("ev/event000000001-hits.csv");
    let text = fs::read_to_string(&hits).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    lines[5] = lines[5].replacen(',', ",abc", 2).replacen(",abc", ",", 1); // y = "abc<digits>"
    fs::write(&hits, lines.join("\n")).unwrap();
    let err = fails(trackgnn(dir.path(), &["inspect", "ev"]));
    assert!(err.contains("event000000001-hits.csv:6") && err.contains("column `y`"), "{err}");

    fs::remove_file(dir.path().join("ev/event000000002-truth.csv")).unwrap();
    let err = fails(trackgnn(dir.path(), &["inspect", "ev/event000000002-hits.csv", "--detector", "nope.csv"]));
    assert!(err.contains("nope.csv"), "{err}");
    let err = fails(trackgnn(dir.path(), &["inspect", "missing_dir"]));
    assert!(err.contains("missing_dir"), "{err}");
}

#[test]
fn inconsistent_truth_fails_the_checks_with_exit_code_1() {
    let dir = tempfile::tempdir().unwrap();
    simulate(dir.path());
    // Move one particle hit's truth point 5 mm outward in r and in z: off its module's plane
    // whether the module is in a barrel (normal ~radial) or a disk (normal along z).
    let truth = dir.path().join("ev/event000000001-truth.csv");
    let text = fs::read_to_string(&truth).unwrap();
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|&c| c == name).unwrap();
    let (pid, tx, ty, tz) = (col("particle_id"), col("tx"), col("ty"), col("tz"));
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let i = lines.iter().skip(1).position(|l| l.split(',').nth(pid) != Some("0")).unwrap() + 1;
    let mut f: Vec<String> = lines[i].split(',').map(String::from).collect();
    let (x, y, z): (f64, f64, f64) = (f[tx].parse().unwrap(), f[ty].parse().unwrap(), f[tz].parse().unwrap());
    let r = x.hypot(y);
    f[tx] = (x + 5.0 * x / r).to_string();
    f[ty] = (y + 5.0 * y / r).to_string();
    f[tz] = (z + 5.0 * z.signum()).to_string();
    lines[i] = f.join(",");
    fs::write(&truth, lines.join("\n") + "\n").unwrap();
    let out = trackgnn(dir.path(), &["inspect", "ev", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let report = json(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(report["all_checks_passed"], false);
}

/// Rewrites one column of a CSV file with `f(old value)`.
fn edit_column(path: &std::path::Path, column: &str, f: impl Fn(f64) -> f64) {
    let text = fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let col = header.split(',').position(|c| c == column).unwrap();
    let mut out = vec![header.to_string()];
    for line in lines {
        let mut fields: Vec<String> = line.split(',').map(String::from).collect();
        fields[col] = f(fields[col].parse().unwrap()).to_string();
        out.push(fields.join(","));
    }
    fs::write(path, out.join("\n") + "\n").unwrap();
}

#[test]
fn against_puts_two_data_sets_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    simulate(dir.path());
    ok(trackgnn(dir.path(), &["simulate", "--events", "1", "--pileup", "10", "--seed", "6", "--out", "other"]));
    let out = json(&ok(trackgnn(dir.path(), &["inspect", "ev", "--against", "other", "--json"])));
    assert_eq!(out["against_events"], 1);
    assert_eq!(out["against_generated"], true);
    let rows = out["against_rows"].as_array().unwrap();
    assert_eq!(rows.len(), out["realism_rows"].as_u64().unwrap() as usize);
    let noise = rows.iter().find(|r| r["key"] == "noise_fraction").unwrap();
    let (v, o) = (noise["value"].as_f64().unwrap(), noise["other"].as_f64().unwrap());
    assert_eq!(v, out["stats"]["noise_fraction"].as_f64().unwrap());
    assert_eq!(o, out["against_stats"]["noise_fraction"].as_f64().unwrap());
    assert!((noise["difference"].as_f64().unwrap() - (v - o)).abs() < 1e-12 && noise["agrees"] == true, "{noise}");
    let agreeing = rows.iter().filter(|r| r["agrees"] == true).count() as u64;
    assert_eq!(out["against_rows_agreeing"].as_u64().unwrap(), agreeing);
    // A data set against itself agrees on every row it has (residual groups an event at mu = 10
    // may lack aside), with zero differences.
    let same = json(&ok(trackgnn(dir.path(), &["inspect", "ev", "--against", "ev", "--json"])));
    for r in same["against_rows"].as_array().unwrap() {
        if r["value"].is_f64() {
            assert_eq!(r["difference"].as_f64().unwrap(), 0.0, "{r}");
            assert_eq!(r["agrees"], true, "{r}");
        }
    }
    // Text: both columns and the count.
    let text = ok(trackgnn(dir.path(), &["inspect", "ev", "--against", "other"]));
    assert!(text.contains("difference") && text.contains("rows agree with the other data set"), "{text}");
    let err = fails(trackgnn(dir.path(), &["inspect", "ev", "--against", "nowhere"]));
    assert!(err.contains("nowhere"), "{err}");
}

#[test]
fn model_checks_decide_the_exit_code_only_on_generated_events() {
    let dir = tempfile::tempdir().unwrap();
    simulate(dir.path());
    // Momenta 10% too high: the hits' curvature no longer matches pT / 0.3B.
    for c in ["tpx", "tpy"] {
        edit_column(&dir.path().join("ev/event000000001-truth.csv"), c, |p| p * 1.1);
        edit_column(&dir.path().join("ev/event000000002-truth.csv"), c, |p| p * 1.1);
    }
    let out = trackgnn(dir.path(), &["inspect", "ev", "--json"]);
    assert_eq!(out.status.code(), Some(1), "generated events: the model check decides");
    let report = json(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(report["generated"], true);
    assert_eq!(report["generator_model_checks_passed"], false);
    assert_eq!(report["format_checks_passed"], true);
    // The same files without the generator's marker, reduced to weights summing to a half (as a
    // sample of a real event's particles): the format checks pass and decide.
    fs::remove_file(dir.path().join("ev/simulation.toml")).unwrap();
    for e in [1, 2] {
        edit_column(&dir.path().join(format!("ev/event00000000{e}-truth.csv")), "weight", |w| w * 0.5);
    }
    let out = json(&ok(trackgnn(dir.path(), &["inspect", "ev", "--json"])));
    assert_eq!(out["generated"], false);
    assert_eq!(out["generator_model_checks_passed"], false);
    assert_eq!(out["format_checks_passed"], true);
    assert_eq!(out["all_checks_passed"], false);
    let checks = out["checks"].as_array().unwrap();
    let helix = checks.iter().find(|c| c["name"] == "helix_radius_matches_pt_over_0p3b").unwrap();
    assert_eq!(helix["kind"], "generator_model");
    let weights = checks.iter().find(|c| c["name"] == "weights_zero_for_noise_sum_at_most_one").unwrap();
    assert!(weights["passed"] == true && weights["detail"].as_str().unwrap().contains("reduced event"), "{weights}");
    let text = ok(trackgnn(dir.path(), &["inspect", "ev"]));
    assert!(text.contains("info model  helix_radius"), "{text}");
}
