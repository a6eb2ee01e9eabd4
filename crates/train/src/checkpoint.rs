//! Checkpoints: the model weights, the optimiser state and the trainer's state, saved
//! atomically so that a crash never leaves a run without a complete checkpoint.
//!
//! A checkpoint is a directory:
//!
//! - `model.safetensors`: every parameter tensor by its [`ParamSpec`](trackgnn_engine::ParamSpec) name and shape, F32,
//!   with metadata `format = pt`. Loads in PyTorch with `safetensors.torch.load_file` and
//!   then `model.load_state_dict`.
//! - `optimizer.safetensors`: tensors `m.<name>`, `v.<name>` and, with AMSGrad, `v_max.<name>`
//!   in the shape of the parameter; metadata `step`.
//! - `state.json`: whatever the trainer passes (epoch, step, RNG state, config, best metric…).
//!
//! # Why the save is safe
//! [`save_checkpoint`] writes into a sibling temporary directory and fsyncs every file and the
//! directory. It then renames the old checkpoint to its *aside* name (`<dir>.old`), renames
//! the new one into place, fsyncs the parent, and only then removes the aside copy. At every
//! moment a complete checkpoint exists under the final name or the aside name, and
//! [`load_checkpoint`] falls back to the aside name when the final one is missing.
//!
//! The safetensors encoding and strict reading live in `trackgnn_model::weights`, which also
//! gives the weights-only export ([`save_weights`], [`load_weights`]); the file names are the
//! run directory's (`trackgnn_model::run_dir`).

use std::fs;
use std::path::{Path, PathBuf};

use trackgnn_engine::ParamStore;
use trackgnn_engine::optim::AdamWState;

use crate::error::{Error, Result};
use trackgnn_model::Error as ModelError;

pub use trackgnn_model::run_dir::{MODEL_FILE, OPTIMIZER_FILE, STATE_FILE, aside_path};
use trackgnn_model::weights::{
    check_store, encode_optimizer, encode_weights, read_optimizer, read_weights, sync_dir, write_synced,
};
pub use trackgnn_model::weights::{load_weights, save_weights};

/// Saves a checkpoint into directory `dir`, atomically (see the module doc), creating its
/// parent if needed. An existing `dir` is replaced only if it is a checkpoint (holds
/// `model.safetensors`) or is empty; the temporary directories of saves that did not finish
/// (`.<name>.tmp-<pid>`) are removed.
///
/// Errors if the optimiser state does not have the length of the parameters, if two
/// parameters share a name, or on any I/O error (naming the file).
pub fn save_checkpoint(
    dir: &Path,
    params: &ParamStore<f32>,
    opt: &AdamWState,
    state: &serde_json::Value,
) -> Result<()> {
    let (parent, name) = split(dir)?;
    check_store(dir, params)?;
    for (what, len) in
        [("m", opt.m.len()), ("v", opt.v.len())].into_iter().chain(opt.v_max.as_ref().map(|vm| ("v_max", vm.len())))
    {
        if len != params.len() {
            return Err(Error::Model(ModelError::Inconsistent {
                path: dir.to_owned(),
                message: format!("optimiser state `{what}` has {len} elements, the model {}", params.len()),
            }));
        }
    }
    let aside = aside_path(dir);
    for p in [dir, aside.as_path()] {
        if p.exists() && !replaceable(p)? {
            return Err(Error::Model(ModelError::Inconsistent {
                path: p.to_owned(),
                message: "exists and is not a checkpoint directory; refusing to replace it".into(),
            }));
        }
    }
    fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
    remove_stale_temps(&parent, &name)?;

    // 1. Everything into a temporary sibling, synced.
    let tmp = trackgnn_trackml::atomic::temp_path(&parent.join(&name));
    if tmp.exists() {
        fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    }
    fs::create_dir(&tmp).map_err(|e| Error::io(&tmp, e))?;
    let written = (|| -> Result<()> {
        let model = encode_weights(&tmp.join(MODEL_FILE), params)?;
        write_synced(&tmp.join(MODEL_FILE), &model)?;
        let optim = encode_optimizer(&tmp.join(OPTIMIZER_FILE), params, opt)?;
        write_synced(&tmp.join(OPTIMIZER_FILE), &optim)?;
        let state_path = tmp.join(STATE_FILE);
        let json = serde_json::to_vec_pretty(state)
            .map_err(|e| Error::Model(ModelError::Json { path: state_path.clone(), source: e }))?;
        write_synced(&state_path, &json)?;
        Ok(sync_dir(&tmp)?)
    })();
    if let Err(e) = written {
        // A full disk: free what the partial copy took; the checkpoint in place is untouched.
        let _ = fs::remove_dir_all(&tmp);
        return Err(e);
    }

    // 2. Old checkpoint aside, new one in place, old one removed.
    if dir.exists() {
        if aside.exists() {
            fs::remove_dir_all(&aside).map_err(|e| Error::io(&aside, e))?;
        }
        fs::rename(dir, &aside).map_err(|e| Error::io(dir, e))?;
    }
    fs::rename(&tmp, dir).map_err(|e| Error::io(dir, e))?;
    sync_dir(&parent)?;
    if aside.exists() {
        fs::remove_dir_all(&aside).map_err(|e| Error::io(&aside, e))?;
        sync_dir(&parent)?;
    }
    Ok(())
}

/// Loads the checkpoint in `dir` (or, if `dir` is missing, at its [aside name](aside_path)):
/// fills `params.data` and returns the optimiser state and the trainer's state.
///
/// Every parameter of `params` must be in both files with its shape, and the files must hold
/// nothing else; errors name the tensor and the file. `params` is left untouched on error.
pub fn load_checkpoint(dir: &Path, params: &mut ParamStore<f32>) -> Result<(AdamWState, serde_json::Value)> {
    let dir = existing(dir)?;
    check_store(&dir, params)?;
    let weights = read_weights(&dir.join(MODEL_FILE), params)?;
    let opt = read_optimizer(&dir.join(OPTIMIZER_FILE), params)?;
    let state = read_state(&dir)?;
    params.data.copy_from_slice(&weights);
    Ok((opt, state))
}

/// The trainer's state of the checkpoint in `dir` (or at its [aside name](aside_path)), without
/// reading the weights: enough to tell how far a run got.
pub fn load_checkpoint_state(dir: &Path) -> Result<serde_json::Value> {
    read_state(&existing(dir)?)
}

/// `dir` if it is a directory, else its aside name if that is.
fn existing(dir: &Path) -> Result<PathBuf> {
    if dir.is_dir() {
        return Ok(dir.to_owned());
    }
    let aside = aside_path(dir);
    if !aside.is_dir() {
        return Err(Error::NoCheckpoint { path: dir.to_owned(), aside });
    }
    Ok(aside)
}

/// The parsed `state.json` of checkpoint directory `dir`.
fn read_state(dir: &Path) -> Result<serde_json::Value> {
    let state_path = dir.join(STATE_FILE);
    let bytes = fs::read(&state_path).map_err(|e| Error::io(&state_path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| Error::Model(ModelError::Json { path: state_path, source: e }))
}

/// The parent directory and the file name of `path`.
fn split(path: &Path) -> Result<(PathBuf, String)> {
    let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
        Error::Model(ModelError::Inconsistent {
            path: path.to_owned(),
            message: "a checkpoint path must end in a UTF-8 file name".into(),
        })
    })?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    Ok((parent, name.to_owned()))
}

/// True if `dir` may be replaced by a save: a directory holding a model file, or empty.
fn replaceable(dir: &Path) -> Result<bool> {
    if !dir.is_dir() {
        return Ok(false);
    }
    if dir.join(MODEL_FILE).is_file() {
        return Ok(true);
    }
    let mut entries = fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    Ok(entries.next().is_none())
}

/// Removes temporary directories of earlier saves of checkpoint `name` that did not finish.
fn remove_stale_temps(parent: &Path, name: &str) -> Result<()> {
    let prefix = format!(".{name}.tmp-");
    for entry in fs::read_dir(parent).map_err(|e| Error::io(parent, e))? {
        let entry = entry.map_err(|e| Error::io(parent, e))?;
        if entry.file_name().to_str().is_some_and(|n| n.starts_with(&prefix)) {
            let p = entry.path();
            let r = if p.is_dir() { fs::remove_dir_all(&p) } else { fs::remove_file(&p) };
            r.map_err(|e| Error::io(&p, e))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use trackgnn_model::testing::{blank, opt_state, store};

    #[test]
    fn round_trip_with_and_without_amsgrad() {
        let tmp = tempfile::tempdir().unwrap();
        let p = store();
        for amsgrad in [false, true] {
            let dir = tmp.path().join("run/last"); // the parent is created
            let opt = opt_state(p.len(), amsgrad);
            let state = json!({"epoch": 3, "rng": [1, 2, 3], "best": {"auc": 0.97}});
            save_checkpoint(&dir, &p, &opt, &state).unwrap();
            let mut q = blank(&p);
            let (opt2, state2) = load_checkpoint(&dir, &mut q).unwrap();
            assert_eq!(q.data, p.data);
            assert_eq!(opt2, opt);
            assert_eq!(state2, state);
            assert!(!aside_path(&dir).exists(), "aside copy removed after a save");
        }
        let names: Vec<_> = fs::read_dir(tmp.path().join("run")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["last"], "no temporary left behind");
    }

    #[test]
    fn truncated_and_corrupt_files_name_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ck");
        let p = store();
        save_checkpoint(&dir, &p, &opt_state(p.len(), false), &json!({})).unwrap();

        let model = dir.join(MODEL_FILE);
        let full = fs::read(&model).unwrap();
        for cut in [0, 5, 40, full.len() - 1] {
            fs::write(&model, &full[..cut]).unwrap();
            let e = load_checkpoint(&dir, &mut blank(&p)).unwrap_err();
            assert!(matches!(e, Error::Model(ModelError::Safetensors { .. })), "cut at {cut}: {e}");
            assert!(e.to_string().contains("model.safetensors"), "{e}");
        }
        fs::write(&model, &full).unwrap();

        fs::write(dir.join(STATE_FILE), b"{\"epoch\": 3,").unwrap();
        let e = load_checkpoint(&dir, &mut blank(&p)).unwrap_err();
        assert!(matches!(e, Error::Model(ModelError::Json { .. })) && e.to_string().contains("state.json"), "{e}");

        let mut q = blank(&p);
        fs::remove_file(dir.join(OPTIMIZER_FILE)).unwrap();
        let e = load_checkpoint(&dir, &mut q).unwrap_err();
        assert!(
            matches!(e, Error::Model(ModelError::Io { .. })) && e.to_string().contains("optimizer.safetensors"),
            "{e}"
        );
        assert!(q.data.iter().all(|&x| x == 0.0), "untouched on error");
    }

    #[test]
    fn crash_states_leave_a_loadable_checkpoint() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("last");
        let p = store();
        let old = opt_state(p.len(), false);
        save_checkpoint(&dir, &p, &old, &json!({"epoch": 1})).unwrap();

        // Crash after the old checkpoint was moved aside, before the new one was renamed in.
        fs::rename(&dir, aside_path(&dir)).unwrap();
        fs::create_dir(tmp.path().join(".last.tmp-99999")).unwrap();
        let (_, state) = load_checkpoint(&dir, &mut blank(&p)).unwrap();
        assert_eq!(state["epoch"], 1, "falls back to the aside copy");

        // The next save cleans up and replaces both.
        save_checkpoint(&dir, &p, &old, &json!({"epoch": 2})).unwrap();
        assert!(!aside_path(&dir).exists() && !tmp.path().join(".last.tmp-99999").exists());
        assert_eq!(load_checkpoint(&dir, &mut blank(&p)).unwrap().1["epoch"], 2);

        // Crash after the new one was renamed in, before the aside copy was removed.
        fs::create_dir(aside_path(&dir)).unwrap();
        fs::write(aside_path(&dir).join(MODEL_FILE), b"old").unwrap();
        save_checkpoint(&dir, &p, &old, &json!({"epoch": 3})).unwrap();
        assert!(!aside_path(&dir).exists());
        assert_eq!(load_checkpoint(&dir, &mut blank(&p)).unwrap().1["epoch"], 3);

        let e = load_checkpoint(&tmp.path().join("nothing"), &mut blank(&p)).unwrap_err();
        assert!(matches!(e, Error::NoCheckpoint { .. }) && e.to_string().contains("nothing.old"), "{e}");
    }

    #[test]
    fn refuses_to_replace_a_directory_that_is_not_a_checkpoint() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().join("run");
        fs::create_dir(&run).unwrap();
        fs::write(run.join("metrics.csv"), b"epoch\n").unwrap();
        let p = store();
        let e = save_checkpoint(&run, &p, &opt_state(p.len(), false), &json!({})).unwrap_err();
        assert!(matches!(e, Error::Model(ModelError::Inconsistent { .. })), "{e}");
        assert!(run.join("metrics.csv").exists());
        // An empty directory is fine.
        let empty = tmp.path().join("empty");
        fs::create_dir(&empty).unwrap();
        save_checkpoint(&empty, &p, &opt_state(p.len(), false), &json!({})).unwrap();
    }

    #[test]
    fn inconsistent_inputs_are_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let p = store();
        let short = AdamWState { m: vec![0.0; 2], ..opt_state(p.len(), false) };
        let e = save_checkpoint(&tmp.path().join("a"), &p, &short, &json!({})).unwrap_err();
        assert!(e.to_string().contains("`m` has 2 elements"), "{e}");
        let mut dup = store();
        dup.add("node_encoder.0.bias", &[3]);
        let e = save_weights(&tmp.path().join("w.safetensors"), &dup).unwrap_err();
        assert!(e.to_string().contains("two parameters are named `node_encoder.0.bias`"), "{e}");
    }
}
