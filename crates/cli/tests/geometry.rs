use crate::util::{json, ok, trackgnn};

#[test]
fn geometry_writes_18728_modules_with_the_published_counts() {
    let dir = tempfile::tempdir().unwrap();
    let out = json(&ok(trackgnn(dir.path(), &["geometry", "--out", "detectors.csv", "--json"])));
    assert_eq!(out["modules"], 18_728);
    assert_eq!(out["layers"], 48);
    assert_eq!(out["volumes"], 9);
    let count = |v: u64, l: u64| {
        out["per_layer"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["volume_id"] == v && x["layer_id"] == l)
            .unwrap()["modules"]
            .as_u64()
            .unwrap()
    };
    assert_eq!((count(8, 2), count(8, 8), count(13, 8), count(17, 4)), (224, 1092, 2142, 3192));
    assert_eq!((count(7, 14), count(12, 2), count(18, 12)), (108, 170, 98));
    // The file reads back as the same detector, also when given back with --detector.
    let again =
        json(&ok(trackgnn(dir.path(), &["geometry", "--detector", "detectors.csv", "--out", "copy.csv", "--json"])));
    assert_eq!(again["modules"], 18_728);
    assert_eq!(
        std::fs::read(dir.path().join("detectors.csv")).unwrap(),
        std::fs::read(dir.path().join("copy.csv")).unwrap()
    );
}
