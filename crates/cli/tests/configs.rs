//! Corrupt TOML configs (training config, graph recipe): each is refused with an error naming
//! the file, and nothing is written.

use crate::util::{fails, trackgnn};

/// Broken variants of a valid TOML text: cut short, a wrong type, an unknown enum value,
/// binary garbage, invalid UTF-8.
fn broken(valid: &str) -> Vec<(&'static str, Vec<u8>)> {
    let cut = valid.len() / 2;
    let first_key = valid.lines().find(|l| l.contains(" = ")).unwrap();
    let wrong_type = valid.replacen(first_key, &format!("{} = [[\"x\"]]", first_key.split(" = ").next().unwrap()), 1);
    vec![
        ("cut.toml", format!("{}\n[[[", &valid[..cut]).into_bytes()),
        ("wrong_type.toml", wrong_type.into_bytes()),
        ("garbage.toml", vec![0x1f, 0x8b, 0, 0xff, b'=', b'[', 0x80]),
        ("not_utf8.toml", [valid.as_bytes(), b"\n# \xff\xfe\n"].concat()),
    ]
}

#[test]
fn corrupt_training_configs_and_recipes_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let train_valid = "epochs = 2\nseed = 1\nlr_scaling = \"sqrt\"\n\n[optimizer]\nlr = 0.001\n";
    let mut cases: Vec<_> = broken(train_valid).into_iter().map(|(n, b)| ("train", n, b)).collect();
    cases.push(("train", "bad_enum.toml", train_valid.replace("sqrt", "cubic").into_bytes()));
    let recipe_valid = "method = \"geometric\"\nedge_features = true\n\n[node_cuts]\npt_min = 1.0\n";
    cases.extend(broken(recipe_valid).into_iter().map(|(n, b)| ("build-graphs", n, b)));
    // Inputs exist but are empty (inputs are checked before the config is read): the valid
    // texts pass the config stage and fail later, on the empty input.
    std::fs::create_dir_all(d.join("g")).unwrap();
    std::fs::create_dir_all(d.join("ev")).unwrap();
    for (command, valid) in [("train", train_valid), ("build-graphs", recipe_valid)] {
        let file = format!("{command}-valid.toml");
        std::fs::write(d.join(&file), valid).unwrap();
        let args: Vec<&str> = match command {
            "train" => vec!["train", "--graphs", "g", "--out", "run", "--config", &file],
            _ => vec!["build-graphs", "--input", "ev", "--out", "graphs", "--config", &file],
        };
        let e = fails(trackgnn(d, &args));
        assert!(!e.contains(&file) && !e.contains("invalid"), "{file} was refused: {e}");
    }
    for (command, name, bytes) in cases {
        let file = format!("{command}-{name}");
        std::fs::write(d.join(&file), bytes).unwrap();
        let args: Vec<&str> = match command {
            "train" => vec!["train", "--graphs", "g", "--out", "run", "--config", &file],
            _ => vec!["build-graphs", "--input", "ev", "--out", "graphs", "--config", &file],
        };
        let e = fails(trackgnn(d, &args));
        assert!(e.contains(&file), "{file}: the error does not name the file: {e}");
        assert!(!d.join("run").exists() && !d.join("graphs").exists(), "{file}: output was written");
    }
}
