//! Files written whole or not at all: every trackgnn writer writes to a temporary name in the
//! destination's directory, `.{name}.tmp-{pid}-{n}`, and renames it into place once complete,
//! so a crash or a failed write never leaves a partial file under the real name. Readers that
//! list directories skip these names (they start with a dot).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Makes temporary names unique within the process (files may be written from many threads).
static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// The temporary name for writing `path`: `.{name}.tmp-{pid}-{n}` in the same directory (so the
/// rename stays on one file system), unique per process and call.
pub fn temp_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = format!(".{name}.tmp-{}-{n}", std::process::id());
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.join(tmp),
        _ => PathBuf::from(tmp),
    }
}

/// Writes `bytes` to [`temp_path`]`(path)` and renames it to `path`. On failure the temporary
/// file is removed and `path` is left as it was.
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = temp_path(path);
    let written = std::fs::File::create(&tmp).and_then(|mut f| f.write_all(bytes));
    // The file is closed before the rename (Windows cannot rename an open file).
    let result = written.and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// [`write()`], durable: the temporary file is fsynced before the rename and the directory
/// after it, so the new content survives a power loss (checkpoints, training logs).
pub fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = temp_path(path);
    let written = std::fs::File::create(&tmp).and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()));
    let result = written.and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return result;
    }
    sync_dir(path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")))
}

/// Fsyncs a directory, so that renames and new entries in it are durable (a no-op off Unix).
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    std::fs::File::open(dir)?.sync_all()?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_are_hidden_siblings_and_unique() {
        let a = temp_path(Path::new("run/best.safetensors"));
        let b = temp_path(Path::new("run/best.safetensors"));
        assert_ne!(a, b);
        assert_eq!(a.parent(), Some(Path::new("run")));
        let name = a.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with(&format!(".best.safetensors.tmp-{}-", std::process::id())), "{name}");
        assert_eq!(temp_path(Path::new("x.csv")).parent(), Some(Path::new("")));
    }

    #[test]
    fn write_replaces_the_file_whole_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        write(&path, b"first").unwrap();
        write_synced(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "{names:?}");
        // A destination that cannot be renamed onto (a directory) fails, and no temporary stays.
        std::fs::create_dir(dir.path().join("d")).unwrap();
        std::fs::write(dir.path().join("d/x"), b"").unwrap();
        assert!(write(&dir.path().join("d"), b"x").is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }
}
