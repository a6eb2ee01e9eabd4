use std::fs;

use crate::util::{fails, json, ok, trackgnn};

#[test]
fn module_map_and_graphs_from_generated_events() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(trackgnn(d, &["simulate", "--events", "4", "--pileup", "5", "--seed", "3", "--out", "train"]));
    ok(trackgnn(
        d,
        &["simulate", "--events", "2", "--pileup", "5", "--seed", "4", "--first-event", "100", "--out", "test"],
    ));
    let map = json(&ok(trackgnn(d, &["module-map", "build", "--input", "train", "--out", "map.bin", "--json"])));
    assert_eq!(map["events"], 4);
    assert!(map["module_pairs"].as_u64().unwrap() > 50);
    // A module map learned from 4 small events covers its own events, not new ones.
    for (method, input, extra, min_eff) in
        [("geometric", "test", vec![], 0.8), ("module-map", "train", vec!["--map", "map.bin"], 0.9)]
    {
        let out = format!("g_{method}");
        let mut args = vec![
            "build-graphs",
            "--input",
            input,
            "--out",
            out.as_str(),
            "--method",
            method,
            "--pt-min",
            "1",
            "--json",
        ];
        args.extend(extra);
        let r = json(&ok(trackgnn(d, &args)));
        let s = &r["summary"];
        let eff = s["efficiency_total"].as_f64().unwrap();
        assert!(eff > min_eff && eff <= 1.0, "{method}: efficiency {eff}");
        assert!(r["per_event"][0]["build_seconds"].as_f64().unwrap() > 0.0);
        let recipe = fs::read_to_string(d.join(&out).join("recipe.toml")).unwrap();
        assert!(recipe.contains("truth_cuts_applied = true"), "{recipe}");
        assert!(
            d.join(&out).join(if input == "test" { "event000000100.graph" } else { "event000000001.graph" }).exists()
        );
    }
    let recipe = fs::read_to_string(d.join("g_module-map/recipe.toml")).unwrap();
    assert!(recipe.contains("map_hash = \"crc32:"), "{recipe}");
    // Maps drawn from the generator in memory, one with secondaries, merged into one.
    let drawn = json(&ok(trackgnn(
        d,
        &["module-map", "build", "--simulate", "3", "--pileup", "5", "--seed", "9", "--out", "m1.bin", "--json"],
    )));
    assert_eq!((drawn["events"].as_u64(), drawn["simulated"].as_bool()), (Some(3), Some(true)));
    assert!(drawn["module_triplets"].as_u64().unwrap() > 50);
    assert!(!d.join("event000000001-hits.csv").exists(), "--simulate writes no event");
    let all = json(&ok(trackgnn(
        d,
        &[
            "module-map",
            "build",
            "--simulate",
            "2",
            "--all-particles",
            "--seed",
            "9",
            "--first-event",
            "4",
            "--pileup",
            "5",
            "--out",
            "m2.bin",
            "--json",
        ],
    )));
    assert!(all["max_vertex_r_mm"].is_null());
    let merged = json(&ok(trackgnn(d, &["module-map", "merge", "m1.bin", "m2.bin", "--out", "m12.bin", "--json"])));
    assert_eq!(merged["events"], 5);
    assert!(merged["max_vertex_r_mm"].is_null(), "the merge keeps the secondaries of m2");
    assert!(merged["module_pairs"].as_u64() >= drawn["module_pairs"].as_u64());
    let err = fails(trackgnn(d, &["module-map", "build", "--input", "train", "--simulate", "3", "--out", "x.bin"]));
    assert!(err.contains("--simulate") || err.contains("cannot be used"), "{err}");
    ok(trackgnn(d, &["module-map", "build", "--simulate", "1", "--pileup", "5", "--pt-min", "2", "--out", "m3.bin"]));
    let err = fails(trackgnn(d, &["module-map", "merge", "m1.bin", "m3.bin", "--out", "x.bin"]));
    assert!(err.contains("m3.bin") && err.contains("target"), "{err}");
    // The module-map method without a map is a clear error.
    let err = fails(trackgnn(d, &["build-graphs", "--input", "test", "--out", "x", "--method", "module-map"]));
    assert!(err.contains("--map"), "{err}");
    // A truncated module map is named in the error.
    let bytes = fs::read(d.join("map.bin")).unwrap();
    fs::write(d.join("bad.bin"), &bytes[..bytes.len() / 3]).unwrap();
    let err = fails(trackgnn(
        d,
        &["build-graphs", "--input", "test", "--out", "y", "--method", "module-map", "--map", "bad.bin"],
    ));
    assert!(err.contains("bad.bin") && err.contains("truncated"), "{err}");
}
