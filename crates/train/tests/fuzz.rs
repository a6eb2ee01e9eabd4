//! Fuzz targets of the training crate's readers: safetensors weights (`load_weights`), a
//! checkpoint's optimiser state and `state.json` (`load_checkpoint`), and the training config
//! TOML (see `trackgnn_trackml::fuzzing`). `TRACKGNN_FUZZ_CASES=N` runs N inputs per target.

use std::path::Path;

use trackgnn_engine::ParamStore;
use trackgnn_engine::optim::AdamWState;
use trackgnn_trackml::fuzzing::proptest::prelude::*;
use trackgnn_trackml::fuzzing::{CappedAlloc, inputs, names_file, runner, within};
use trackgnn_train::TrainConfig;
use trackgnn_train::checkpoint::{
    MODEL_FILE, OPTIMIZER_FILE, STATE_FILE, load_checkpoint, load_weights, save_checkpoint,
};

/// No reader may ask for more than 256 MiB at once for inputs of a few kB.
#[global_allocator]
static ALLOC: CappedAlloc = CappedAlloc::new(256 << 20);

/// Inputs per target in `cargo test`.
const CI_CASES: u32 = 1000;

fn store() -> ParamStore<f32> {
    let mut p = ParamStore::default();
    p.add("node_encoder.0.weight", &[3, 2]);
    p.add("node_encoder.0.bias", &[3]);
    p.add("edge_classifier.2.weight", &[1, 3]);
    for (i, x) in p.data.iter_mut().enumerate() {
        *x = i as f32 * 0.25 - 1.0;
    }
    p
}

fn opt_state(n: usize) -> AdamWState {
    AdamWState { step: 12, m: vec![0.5; n], v: vec![0.25; n], v_max: Some(vec![1.0; n]) }
}

/// A saved checkpoint's three files, read back.
fn checkpoint_files() -> [Vec<u8>; 3] {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let p = store();
    save_checkpoint(&ck, &p, &opt_state(p.len()), &serde_json::json!({"epoch": 3, "step": 120})).unwrap();
    [MODEL_FILE, OPTIMIZER_FILE, STATE_FILE].map(|f| std::fs::read(ck.join(f)).unwrap())
}

/// Writes each input as `file` of a checkpoint in `dir` (the other files valid) and checks
/// `read` on it: no panic, no hang, an error names the file, `params` untouched on error.
fn fuzz_checkpoint_file(file: &str, seeds: Vec<Vec<u8>>, read: fn(&Path, &mut ParamStore<f32>) -> Result<(), String>) {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let p = store();
    save_checkpoint(&ck, &p, &opt_state(p.len()), &serde_json::json!({"epoch": 3})).unwrap();
    let result = runner(CI_CASES).run(&inputs(seeds), |bytes| {
        let path = ck.join(file);
        std::fs::write(&path, &bytes).unwrap();
        let ck = ck.clone();
        let (out, params) = within(file, move || {
            let mut params = store();
            for x in &mut params.data {
                *x = 7.0;
            }
            (read(&ck, &mut params), params)
        })?;
        match out {
            Ok(()) => Ok(()),
            Err(message) => {
                prop_assert!(params.data.iter().all(|&x| x == 7.0), "parameters changed on error");
                names_file(&message, &path)
            }
        }
    });
    if let Err(e) = result {
        panic!("fuzz target {file}: {e}");
    }
}

#[test]
fn fuzz_weights_safetensors() {
    let [model, optimizer, _] = checkpoint_files();
    fuzz_checkpoint_file(MODEL_FILE, vec![model, optimizer], |ck, p| {
        load_weights(&ck.join(MODEL_FILE), p).map_err(|e| e.to_string())
    });
}

#[test]
fn fuzz_checkpoint_optimizer_safetensors() {
    let [_, optimizer, _] = checkpoint_files();
    fuzz_checkpoint_file(OPTIMIZER_FILE, vec![optimizer], |ck, p| {
        load_checkpoint(ck, p).map(drop).map_err(|e| e.to_string())
    });
}

#[test]
fn fuzz_checkpoint_state_json() {
    let [_, _, state] = checkpoint_files();
    fuzz_checkpoint_file(STATE_FILE, vec![state], |ck, p| load_checkpoint(ck, p).map(drop).map_err(|e| e.to_string()));
}

/// The config TOML is read by the CLI, which names the file in the error; here: no input
/// panics or hangs the parser or `validate`, and `scaled_lr` of a valid config is finite.
#[test]
fn fuzz_train_config_toml() {
    let seed = toml::to_string(&TrainConfig::default()).unwrap().into_bytes();
    let result = runner(CI_CASES).run(&inputs(vec![seed]), |bytes| {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        within("train config", move || {
            if let Ok(c) = toml::from_str::<TrainConfig>(&text)
                && c.validate().is_ok()
            {
                for ranks in [1, 2, 64] {
                    let _ = c.scaled_lr(ranks);
                }
            }
        })
    });
    if let Err(e) = result {
        panic!("fuzz target train config: {e}");
    }
}
