//! Weights in and out: parameter tensors and optimiser state in safetensors files, their
//! encoding, strict reading (every parameter present with its shape and dtype, nothing else),
//! and the weights-only export for PyTorch ([`save_weights`], [`load_weights`]). The trainer's
//! checkpoints are made of these files.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::io::Write;
use std::path::Path;

use safetensors::tensor::{TensorView, View};
use safetensors::{Dtype, SafeTensorError, SafeTensors};
use trackgnn_engine::optim::AdamWState;
use trackgnn_engine::{ParamSpec, ParamStore};

use crate::error::{Error, Result};

/// Writes the model weights alone to `path` (a `model.safetensors` for PyTorch), atomically:
/// a temporary sibling file, fsynced, renamed over `path`.
pub fn save_weights(path: &Path, params: &ParamStore<f32>) -> Result<()> {
    check_store(path, params)?;
    let bytes = encode_weights(path, params)?;
    trackgnn_trackml::atomic::write_synced(path, &bytes).map_err(|e| Error::io(path, e))
}

/// Reads model weights from `path` into `params.data`, strictly: every parameter present with
/// its shape and dtype F32, no other tensor. `params` is left untouched on error.
pub fn load_weights(path: &Path, params: &mut ParamStore<f32>) -> Result<()> {
    check_store(path, params)?;
    let weights = read_weights(path, params)?;
    params.data.copy_from_slice(&weights);
    Ok(())
}

/// Checks that the specs of `params` have unique names and lie inside the buffer.
pub fn check_store(path: &Path, params: &ParamStore<f32>) -> Result<()> {
    let mut seen = HashSet::new();
    for s in &params.specs {
        if !seen.insert(s.name.as_str()) {
            return Err(Error::Inconsistent {
                path: path.to_owned(),
                message: format!("two parameters are named `{}`", s.name),
            });
        }
        if s.range().end > params.data.len() {
            return Err(Error::Inconsistent {
                path: path.to_owned(),
                message: format!("parameter `{}` lies outside the parameter buffer", s.name),
            });
        }
    }
    Ok(())
}

/// Writes `bytes` to a new file at `path` and fsyncs it.
pub fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = fs::File::create(path).map_err(|e| Error::io(path, e))?;
    f.write_all(bytes).map_err(|e| Error::io(path, e))?;
    f.sync_all().map_err(|e| Error::io(path, e))
}

/// Fsyncs a directory, so that renames and new entries in it are durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    trackgnn_trackml::atomic::sync_dir(dir).map_err(|e| Error::io(dir, e))
}

/// Little-endian bytes of an f32 slice.
fn le_bytes(xs: &[f32]) -> Vec<u8> {
    xs.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Serialises named F32 tensors with metadata; `path` is only for the error.
fn encode(path: &Path, tensors: Vec<(String, Vec<usize>, Vec<u8>)>, meta: HashMap<String, String>) -> Result<Vec<u8>> {
    let wrap = |e| Error::Safetensors { path: path.to_owned(), source: e };
    let views = tensors
        .iter()
        .map(|(name, shape, bytes)| {
            Ok((name.as_str(), TensorView::new(Dtype::F32, shape.clone(), bytes).map_err(wrap)?))
        })
        .collect::<Result<Vec<_>>>()?;
    serialize_sorted(views, meta).map_err(wrap)
}

/// `safetensors::serialize` with the metadata's entries in key order, so that the same tensors
/// and metadata always give the same bytes: safetensors writes its `HashMap` in hash order,
/// which differs from one map to the next. The sorted object has the same length, and it
/// replaces the one safetensors writes first in the header only where that one holds the
/// same entries (else the bytes stay as written: still valid, only not canonical).
pub fn serialize_sorted<S, V, I>(
    data: I,
    meta: HashMap<String, String>,
) -> std::result::Result<Vec<u8>, SafeTensorError>
where
    S: AsRef<str> + Ord + std::fmt::Display,
    V: View,
    I: IntoIterator<Item = (S, V)>,
{
    const PREFIX: &[u8] = b"{\"__metadata__\":";
    let sorted = serde_json::to_vec(&meta.iter().collect::<BTreeMap<_, _>>()).expect("strings serialise");
    let expected = meta.clone();
    let mut bytes = safetensors::serialize(data, Some(meta))?;
    let start = size_of::<u64>() + PREFIX.len();
    let written = bytes.get(start..start + sorted.len()).filter(|_| bytes[size_of::<u64>()..].starts_with(PREFIX));
    if written.and_then(|w| serde_json::from_slice::<HashMap<String, String>>(w).ok()) == Some(expected) {
        bytes[start..start + sorted.len()].copy_from_slice(&sorted);
    }
    Ok(bytes)
}

/// The bytes of `model.safetensors` for `params`.
pub fn encode_weights(path: &Path, params: &ParamStore<f32>) -> Result<Vec<u8>> {
    let tensors =
        params.specs.iter().map(|s| (s.name.clone(), s.shape.clone(), le_bytes(&params.data[s.range()]))).collect();
    encode(path, tensors, HashMap::from([("format".to_owned(), "pt".to_owned())]))
}

/// The bytes of `optimizer.safetensors` for `opt` in the layout of `params`.
pub fn encode_optimizer(path: &Path, params: &ParamStore<f32>, opt: &AdamWState) -> Result<Vec<u8>> {
    let mut parts: Vec<(&str, &[f32])> = vec![("m", &opt.m), ("v", &opt.v)];
    if let Some(vm) = &opt.v_max {
        parts.push(("v_max", vm));
    }
    let tensors = parts
        .iter()
        .flat_map(|&(prefix, buf)| {
            params
                .specs
                .iter()
                .map(move |s| (format!("{prefix}.{}", s.name), s.shape.clone(), le_bytes(&buf[s.range()])))
        })
        .collect();
    let meta =
        HashMap::from([("format".to_owned(), "trackgnn-adamw".to_owned()), ("step".to_owned(), opt.step.to_string())]);
    encode(path, tensors, meta)
}

/// Reads a whole file.
fn read_file(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).map_err(|e| Error::io(path, e))
}

/// Parses the bytes of safetensors file `path`.
fn parse<'a>(path: &Path, bytes: &'a [u8]) -> Result<SafeTensors<'a>> {
    SafeTensors::deserialize(bytes).map_err(|e| Error::Safetensors { path: path.to_owned(), source: e })
}

/// Errors on a tensor of `st` whose name is not in `expected` (the first in name order).
fn check_no_extra(path: &Path, st: &SafeTensors<'_>, expected: &HashSet<String>) -> Result<()> {
    let mut names = st.names();
    names.sort_unstable();
    match names.into_iter().find(|n| !expected.contains(*n)) {
        Some(n) => Err(Error::UnexpectedTensor { path: path.to_owned(), name: n.to_owned() }),
        None => Ok(()),
    }
}

/// Copies tensor `name` of `st` into `out[spec.range()]`, checking its dtype and shape.
fn read_into(path: &Path, st: &SafeTensors<'_>, name: String, spec: &ParamSpec, out: &mut [f32]) -> Result<()> {
    let Ok(t) = st.tensor(&name) else {
        return Err(Error::MissingTensor { path: path.to_owned(), name });
    };
    if t.dtype() != Dtype::F32 {
        return Err(Error::WrongDtype {
            path: path.to_owned(),
            name,
            expected: Dtype::F32.to_string(),
            found: t.dtype().to_string(),
        });
    }
    if t.shape() != spec.shape.as_slice() {
        return Err(Error::ShapeMismatch {
            path: path.to_owned(),
            name,
            expected: spec.shape.clone(),
            found: t.shape().to_vec(),
        });
    }
    // The parser checked that the data hold exactly shape × 4 bytes.
    for (o, b) in out[spec.range()].iter_mut().zip(t.data().chunks_exact(4)) {
        *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
    Ok(())
}

/// Reads the weights of every spec of `params` from `path` into a new buffer.
pub fn read_weights(path: &Path, params: &ParamStore<f32>) -> Result<Vec<f32>> {
    let bytes = read_file(path)?;
    let st = parse(path, &bytes)?;
    check_no_extra(path, &st, &params.specs.iter().map(|s| s.name.clone()).collect())?;
    let mut out = vec![0.0; params.len()];
    for s in &params.specs {
        read_into(path, &st, s.name.clone(), s, &mut out)?;
    }
    Ok(out)
}

/// Reads the optimiser state for `params` from `path`.
pub fn read_optimizer(path: &Path, params: &ParamStore<f32>) -> Result<AdamWState> {
    let bytes = read_file(path)?;
    let st = parse(path, &bytes)?;
    let (_, meta) =
        SafeTensors::read_metadata(&bytes).map_err(|e| Error::Safetensors { path: path.to_owned(), source: e })?;
    let step = meta.metadata().as_ref().and_then(|m| m.get("step"));
    let step = step.and_then(|s| s.parse::<u64>().ok()).ok_or_else(|| Error::Corrupt {
        path: path.to_owned(),
        message: format!("metadata `step` is missing or not an integer ({step:?})"),
    })?;
    // AMSGrad state is all or nothing; the first parameter decides, and a partial set is
    // reported as a missing tensor below.
    let amsgrad = params.specs.first().is_some_and(|s| st.tensor(&format!("v_max.{}", s.name)).is_ok());
    let prefixes: &[&str] = if amsgrad { &["m", "v", "v_max"] } else { &["m", "v"] };
    let expected = prefixes.iter().flat_map(|p| params.specs.iter().map(move |s| format!("{p}.{}", s.name))).collect();
    check_no_extra(path, &st, &expected)?;
    let mut bufs = Vec::new();
    for p in prefixes {
        let mut out = vec![0.0; params.len()];
        for s in &params.specs {
            read_into(path, &st, format!("{p}.{}", s.name), s, &mut out)?;
        }
        bufs.push(out);
    }
    let v_max = if amsgrad { bufs.pop() } else { None };
    let v = bufs.pop().expect("v was read");
    let m = bufs.pop().expect("m was read");
    Ok(AdamWState { step, m, v, v_max })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{blank, opt_state, store};
    use serde_json::json;

    #[test]
    fn the_same_tensors_and_metadata_give_the_same_bytes() {
        let path = Path::new("same.safetensors");
        let meta = || (0..12).map(|i| (format!("key{i}"), format!("value {i}"))).collect::<HashMap<_, _>>();
        let tensors =
            || vec![("w".to_owned(), vec![2], le_bytes(&[1.0, -2.0])), ("b".to_owned(), vec![1], le_bytes(&[0.5]))];
        let first = encode(path, tensors(), meta()).unwrap();
        for _ in 0..4 {
            assert_eq!(encode(path, tensors(), meta()).unwrap(), first, "a new HashMap, the same file");
        }
        let (_, read) = SafeTensors::read_metadata(&first).unwrap();
        let back = read.metadata().clone().unwrap();
        assert_eq!(back, meta());
        let header = String::from_utf8_lossy(&first[8..200]);
        let at = |k: &str| header.find(&format!("\"{k}\"")).unwrap();
        assert!(at("key0") < at("key1") && at("key1") < at("key10") && at("key10") < at("key2"), "{header}");
        assert_eq!(read.tensors().len(), 2);
    }

    #[test]
    fn model_file_is_plain_safetensors_for_pytorch() {
        // Parse the header by hand, as any safetensors reader (safetensors.torch) does.
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("model.safetensors");
        let p = store();
        save_weights(&path, &p).unwrap();
        let bytes = fs::read(&path).unwrap();
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
        assert_eq!(header["__metadata__"]["format"], "pt");
        let w = &header["node_encoder.0.weight"];
        assert_eq!(w["dtype"], "F32");
        assert_eq!(w["shape"], json!([3, 2]));
        let (a, b) = (w["data_offsets"][0].as_u64().unwrap() as usize, w["data_offsets"][1].as_u64().unwrap() as usize);
        let data = &bytes[8 + n + a..8 + n + b];
        let first: Vec<f32> = data.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(first, p.value(0));
        let mut q = blank(&p);
        load_weights(&path, &mut q).unwrap();
        assert_eq!(q.data, p.data);
    }

    #[test]
    fn mismatched_model_is_an_error_naming_tensor_and_file() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("w.safetensors");
        save_weights(&path, &store()).unwrap();

        let mut other = ParamStore::<f32>::default();
        other.add("node_encoder.0.weight", &[2, 3]);
        other.add("node_encoder.0.bias", &[3]);
        other.add("edge_classifier.2.weight", &[1, 3]);
        let e = load_weights(&path, &mut other).unwrap_err();
        assert!(matches!(&e, Error::ShapeMismatch { name, .. } if name == "node_encoder.0.weight"), "{e}");
        assert!(e.to_string().contains("w.safetensors"), "{e}");
        assert!(other.data.iter().all(|&x| x == 0.0), "untouched on error");

        let mut more = store();
        more.add("edge_classifier.4.bias", &[1]);
        let e = load_weights(&path, &mut more).unwrap_err();
        assert!(matches!(&e, Error::MissingTensor { name, .. } if name == "edge_classifier.4.bias"), "{e}");

        let mut fewer = ParamStore::<f32>::default();
        fewer.add("node_encoder.0.weight", &[3, 2]);
        let e = load_weights(&path, &mut fewer).unwrap_err();
        assert!(matches!(&e, Error::UnexpectedTensor { name, .. } if name == "edge_classifier.2.weight"), "{e}");
    }

    #[test]
    fn wrong_dtype_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("f64.safetensors");
        let data = 1.0f64.to_le_bytes();
        let view = TensorView::new(Dtype::F64, vec![1], &data).unwrap();
        fs::write(&path, safetensors::serialize([("b", view)], None).unwrap()).unwrap();
        let mut p = ParamStore::<f32>::default();
        p.add("b", &[1]);
        let e = load_weights(&path, &mut p).unwrap_err();
        assert!(matches!(&e, Error::WrongDtype { found, .. } if found == "F64"), "{e}");
    }

    #[test]
    fn optimizer_file_without_step_is_corrupt() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("optimizer.safetensors");
        let p = store();
        fs::write(&path, encode_optimizer(&path, &p, &opt_state(p.len(), false)).unwrap()).unwrap();
        assert_eq!(read_optimizer(&path, &p).unwrap(), opt_state(p.len(), false));
        // Re-encode the optimiser tensors without metadata.
        let tensors = p
            .specs
            .iter()
            .flat_map(|s| ["m.", "v."].map(|pre| (format!("{pre}{}", s.name), s.shape.clone(), vec![0u8; 4 * s.len()])))
            .collect();
        fs::write(&path, encode(&path, tensors, HashMap::new()).unwrap()).unwrap();
        let e = read_optimizer(&path, &p).unwrap_err();
        assert!(matches!(e, Error::Corrupt { .. }) && e.to_string().contains("step"), "{e}");
    }
}
