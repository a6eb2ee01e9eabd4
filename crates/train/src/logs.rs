//! The per-epoch metrics log of a run: `metrics.csv` (a header, then one row per epoch) and
//! `metrics.jsonl` (one JSON object per epoch) in the run directory, plus the process memory
//! figures that go into it.
//!
//! `metrics.jsonl` is the source of truth: on resume it is cut back to the epochs before the
//! resumed one, and `metrics.csv` is rewritten from it with the current columns.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use trackgnn_model::Error as ModelError;

pub use trackgnn_model::run_dir::{EpochRecord, RankReport, read_records};
use trackgnn_model::run_dir::{JsonLine, METRICS_CSV_FILE as CSV_FILE, METRICS_JSONL_FILE as JSONL_FILE, parse_jsonl};

/// The metrics log of one run directory, open for appending.
#[derive(Debug)]
pub struct MetricsLog {
    csv_path: PathBuf,
    jsonl_path: PathBuf,
    csv: fs::File,
    jsonl: fs::File,
}

impl MetricsLog {
    /// Starts a fresh log in `run_dir` (which must exist), replacing any previous one.
    pub fn create(run_dir: &Path) -> Result<Self> {
        Self::start(run_dir, &[])
    }

    /// Reopens the log in `run_dir` to continue at epoch `first_epoch`: records of epochs
    /// `>= first_epoch` are dropped, so a re-run epoch is not logged twice. A missing log
    /// starts fresh; a last line cut short by a crash is dropped.
    pub fn resume(run_dir: &Path, first_epoch: u64) -> Result<Self> {
        let jsonl_path = run_dir.join(JSONL_FILE);
        let text = match fs::read_to_string(&jsonl_path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(Error::io(&jsonl_path, e)),
        };
        let mut kept = parse_jsonl(&jsonl_path, &text)?;
        kept.retain(|r| r.epoch < first_epoch);
        Self::start(run_dir, &kept)
    }

    /// Writes both files afresh holding `records` (JSON lines kept verbatim, CSV rows rebuilt
    /// with the current columns), then opens them for appending.
    fn start(run_dir: &Path, records: &[JsonLine]) -> Result<Self> {
        let csv_path = run_dir.join(CSV_FILE);
        let jsonl_path = run_dir.join(JSONL_FILE);
        let mut csv_text = EpochRecord::COLUMNS.join(",") + "\n";
        let mut jsonl_text = String::new();
        for r in records {
            csv_text += &csv_row(&r.obj);
            jsonl_text += r.raw;
            jsonl_text.push('\n');
        }
        write_replace(&csv_path, csv_text.as_bytes())?;
        write_replace(&jsonl_path, jsonl_text.as_bytes())?;
        let open = |p: &Path| fs::OpenOptions::new().append(true).open(p).map_err(|e| Error::io(p, e));
        Ok(MetricsLog { csv: open(&csv_path)?, jsonl: open(&jsonl_path)?, csv_path, jsonl_path })
    }

    /// Appends one epoch to both files (one write per line) and syncs them.
    pub fn append(&mut self, rec: &EpochRecord) -> Result<()> {
        let json = serde_json::to_string(rec)
            .map_err(|e| Error::Model(ModelError::Json { path: self.jsonl_path.clone(), source: e }))?;
        let obj: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&json)
            .map_err(|e| Error::Model(ModelError::Json { path: self.jsonl_path.clone(), source: e }))?;
        let row = csv_row(&obj);
        for (file, path, line) in
            [(&mut self.csv, &self.csv_path, row), (&mut self.jsonl, &self.jsonl_path, json + "\n")]
        {
            file.write_all(line.as_bytes()).map_err(|e| Error::io(path, e))?;
            file.sync_data().map_err(|e| Error::io(path, e))?;
        }
        Ok(())
    }

    /// Path of `metrics.csv`.
    pub fn csv_path(&self) -> &Path {
        &self.csv_path
    }

    /// Path of `metrics.jsonl`.
    pub fn jsonl_path(&self) -> &Path {
        &self.jsonl_path
    }
}

/// One CSV line of `obj` in [`EpochRecord::COLUMNS`] order: numbers as JSON writes them,
/// `null` (a non-finite number) as `NaN`, a missing field empty.
fn csv_row(obj: &serde_json::Map<String, serde_json::Value>) -> String {
    use serde_json::Value;
    let cells: Vec<String> = EpochRecord::COLUMNS
        .iter()
        .map(|c| match obj.get(*c) {
            None => String::new(),
            Some(Value::Null) => "NaN".to_owned(),
            Some(Value::String(s)) if s.contains([',', '"', '\n']) => {
                format!("\"{}\"", s.replace('"', "\"\""))
            }
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
        })
        .collect();
    cells.join(",") + "\n"
}

/// Replaces `path` with `bytes` through a temporary sibling and a rename.
fn write_replace(path: &Path, bytes: &[u8]) -> Result<()> {
    trackgnn_trackml::atomic::write_synced(path, bytes).map_err(|e| Error::io(path, e))
}

pub use trackgnn_engine::alloc::{current_rss_bytes, peak_rss_bytes};

/// What this process reports now, as rank `rank` of `ranks` with `threads` worker threads
/// (`rank{r}.json` in the run directory).
pub fn measure_rank(rank: usize, ranks: usize, threads: usize) -> RankReport {
    let times = ProcessTimes::now().unwrap_or_default();
    let host = fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_owned()).unwrap_or_default();
    RankReport {
        rank,
        ranks,
        threads,
        host,
        wall_seconds: times.wall_seconds,
        cpu_seconds: times.cpu_seconds,
        cpu_utilisation: times.cpu_seconds / (times.wall_seconds * threads.max(1) as f64).max(1e-9),
        peak_rss_bytes: peak_rss_bytes(),
    }
}

/// Linux reports process times in clock ticks of `USER_HZ`, which is 100 on every Linux
/// architecture (`sysconf(_SC_CLK_TCK)`; read without libc).
const USER_HZ: f64 = 100.0;

/// CPU and wall time of this process from `/proc/self/stat` (10 ms resolution).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProcessTimes {
    /// User + system CPU time of the process (all threads), seconds.
    pub cpu_seconds: f64,
    /// User + system CPU time of its waited-for children (`getrusage(RUSAGE_CHILDREN)`), seconds.
    pub children_cpu_seconds: f64,
    /// Wall time since the process started, seconds.
    pub wall_seconds: f64,
}

impl ProcessTimes {
    /// This process's times, `None` where `/proc` is unavailable.
    pub fn now() -> Option<ProcessTimes> {
        let stat = fs::read_to_string("/proc/self/stat").ok()?;
        let uptime = fs::read_to_string("/proc/uptime").ok()?;
        let uptime: f64 = uptime.split_whitespace().next()?.parse().ok()?;
        parse_stat(&stat, uptime)
    }
}

/// Parses `/proc/<pid>/stat` (`proc(5)`): utime, stime, cutime, cstime (fields 14–17) and
/// starttime (field 22), in clock ticks; `uptime` is the first number of `/proc/uptime`.
/// Fields are counted after the last `)`, since the command name may hold spaces.
fn parse_stat(stat: &str, uptime: f64) -> Option<ProcessTimes> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // `f[0]` is field 3 (state), so field k is f[k - 3].
    let tick = |k: usize| f.get(k - 3)?.parse::<u64>().ok();
    Some(ProcessTimes {
        cpu_seconds: (tick(14)? + tick(15)?) as f64 / USER_HZ,
        children_cpu_seconds: (tick(16)? + tick(17)?) as f64 / USER_HZ,
        wall_seconds: (uptime - tick(22)? as f64 / USER_HZ).max(0.0),
    })
}

/// The load average of the machine (1, 5 and 15 minutes, `/proc/loadavg`), `None` where
/// unavailable.
pub fn load_average() -> Option<[f64; 3]> {
    let text = fs::read_to_string("/proc/loadavg").ok()?;
    let v: Vec<f64> = text.split_whitespace().take(3).filter_map(|x| x.parse().ok()).collect();
    v.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(epoch: u64) -> EpochRecord {
        EpochRecord {
            epoch,
            step: 10 * (epoch + 1),
            train_loss: 0.5 / (epoch + 1) as f64,
            efficiency: 0.99,
            auc: f64::NAN,
            lr: 1e-7,
            peak_rss_bytes: 123_456_789,
            ..EpochRecord::default()
        }
    }

    #[test]
    fn columns_are_the_serialised_fields_in_order() {
        // With the optional columns (the auxiliary target's), which a run without it leaves out.
        let full = EpochRecord { train_aux_loss: Some(0.1), val_aux_loss: Some(0.2), ..EpochRecord::default() };
        let json = serde_json::to_string(&full).unwrap();
        let obj: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&json).unwrap();
        assert_eq!(obj.len(), EpochRecord::COLUMNS.len());
        let plain = serde_json::to_string(&EpochRecord::default()).unwrap();
        assert!(!plain.contains("aux"), "{plain}");
        let pos: Vec<usize> = EpochRecord::COLUMNS.iter().map(|c| json.find(&format!("\"{c}\":")).unwrap()).collect();
        assert!(pos.windows(2).all(|w| w[0] < w[1]), "COLUMNS out of field order");
    }

    #[test]
    fn an_epoch_prints_as_one_progress_line() {
        let r = EpochRecord { epoch: 3, train_loss: 0.5, auc: 0.9, epoch_seconds: 12.34, ..EpochRecord::default() };
        let line = r.to_string();
        assert!(line.starts_with("epoch   3: train loss 0.50000  val loss NaN  efficiency NaN"), "{line}");
        assert!(line.ends_with("AUC 0.9000  12.3 s (NaN s/batch)"), "{line}");
    }

    #[test]
    fn writes_header_once_and_one_row_per_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = MetricsLog::create(dir.path()).unwrap();
        for e in 0..3 {
            log.append(&rec(e)).unwrap();
        }
        let csv = fs::read_to_string(log.csv_path()).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[0].starts_with("epoch,step,train_loss,val_loss,efficiency,"));
        let cells: Vec<&str> = lines[2].split(',').collect();
        assert_eq!(cells.len(), EpochRecord::COLUMNS.len());
        assert_eq!(&cells[..5], ["1", "20", "0.25", "NaN", "0.99"]);
        assert_eq!(cells[9], "1e-7");
        // The auxiliary target's columns, last, are empty for a run without it.
        assert_eq!(cells[cells.len() - 3..], ["123456789", "", ""]);

        let back = read_records(log.jsonl_path()).unwrap();
        assert_eq!(back.len(), 3);
        assert_eq!(back[1].train_loss, 0.25);
        assert!(back[1].auc.is_nan() && back[1].val_loss.is_nan(), "null reads back as NaN");
        assert_eq!(back[2].peak_rss_bytes, 123_456_789);
    }

    #[test]
    fn resume_drops_the_resumed_epoch_and_later() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = MetricsLog::create(dir.path()).unwrap();
        for e in 0..4 {
            log.append(&rec(e)).unwrap();
        }
        drop(log);
        let before = fs::read_to_string(dir.path().join(JSONL_FILE)).unwrap();
        // A crash in the middle of writing the next line.
        let jsonl = dir.path().join(JSONL_FILE);
        let mut f = fs::OpenOptions::new().append(true).open(&jsonl).unwrap();
        f.write_all(b"{\"epoch\": 4, \"step\"").unwrap();
        drop(f);

        let mut log = MetricsLog::resume(dir.path(), 2).unwrap();
        let kept = fs::read_to_string(&jsonl).unwrap();
        assert_eq!(kept.lines().collect::<Vec<_>>(), before.lines().take(2).collect::<Vec<_>>(), "kept verbatim");
        log.append(&rec(2)).unwrap();
        let epochs: Vec<u64> = read_records(&jsonl).unwrap().iter().map(|r| r.epoch).collect();
        assert_eq!(epochs, [0, 1, 2]);
        let csv = fs::read_to_string(dir.path().join(CSV_FILE)).unwrap();
        let firsts: Vec<&str> = csv.lines().map(|l| l.split(',').next().unwrap()).collect();
        assert_eq!(firsts, ["epoch", "0", "1", "2"]);
        // Rows rewritten from the JSON log are the rows appended directly.
        let direct = csv_row(&serde_json::from_str(&serde_json::to_string(&rec(1)).unwrap()).unwrap());
        assert_eq!(csv.lines().nth(2).unwrap(), direct.trim_end());
    }

    #[test]
    fn resume_without_a_log_starts_fresh_and_bad_lines_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let log = MetricsLog::resume(dir.path(), 5).unwrap();
        assert_eq!(fs::read_to_string(log.csv_path()).unwrap().lines().count(), 1);
        fs::write(log.jsonl_path(), "{\"epoch\": 0}\nnot json\n{\"epoch\": 1}\n").unwrap();
        let e = MetricsLog::resume(dir.path(), 5).unwrap_err();
        assert!(e.to_string().contains("metrics.jsonl:2"), "{e}");
        fs::write(log.jsonl_path(), "{\"epoch\": 0}\n{\"step\": 3}\n").unwrap();
        let e = MetricsLog::resume(dir.path(), 5).unwrap_err();
        assert!(e.to_string().contains("metrics.jsonl:2") && e.to_string().contains("epoch"), "{e}");
    }

    #[test]
    fn process_times_from_proc_stat() {
        // A command name with spaces and a parenthesis; utime 250, stime 50, cutime 7, cstime 3,
        // starttime 1000 ticks; 30 s of uptime.
        let stat = "4242 (my (prog) x) R 1 2 3 4 5 6 7 8 9 10 250 50 7 3 20 0 9 0 1000 12345 678 rest";
        let t = parse_stat(stat, 30.0).unwrap();
        assert_eq!(t, ProcessTimes { cpu_seconds: 3.0, children_cpu_seconds: 0.1, wall_seconds: 20.0 });
        assert_eq!(parse_stat("4242 (x) R 1 2", 1.0), None);
        if cfg!(target_os = "linux") {
            let now = ProcessTimes::now().unwrap();
            assert!(now.wall_seconds >= 0.0 && now.cpu_seconds >= 0.0, "{now:?}");
            let r = measure_rank(0, 1, 2);
            assert!(r.peak_rss_bytes > 0 && r.cpu_utilisation >= 0.0, "{r:?}");
            assert!(load_average().is_some());
        }
    }
}
