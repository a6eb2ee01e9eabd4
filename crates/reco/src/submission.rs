//! TrackML submission files: `event_id,hit_id,track_id`, one row per hit.
//!
//! # Track ids in a submission
//! Track building gives [`NO_TRACK`] (0) to nodes in no track, and hits that never made it
//! into the graph (removed by cuts) have no node at all. The official scorer treats every
//! distinct track_id, 0 included, as one track, so writing 0 for all those hits would make
//! them one big (and useless) track. trackgnn therefore writes each such hit with a track
//! id of its own:
//!
//! 1. [`event_track_ids`]: graph-node track ids → one id per event hit, [`NO_TRACK`] for
//!    hits not in the graph;
//! 2. [`singleton_track_ids`]: every [`NO_TRACK`] → a fresh id above the largest track id;
//! 3. [`write_submission`].
//!
//! A submission written this way scores the same under the official scorer and under
//! [`evaluate`](crate::evaluate) (which reads [`NO_TRACK`] as "a track of its own"), and
//! reading it back ([`read_submission`], [`Submission::track_ids_for`]) gives metrics equal
//! to those of the in-memory ids (singletons are never candidates unless `min_track_hits`
//! is 1).
//!
//! With a track fit, each event's fitted parameters go beside its submission
//! ([`parameters_file_name`], [`write_parameters`]): `track_id,q_over_pt,phi,eta,d0,z0,`
//! their σ, `chi2,ndf`, one row per fitted track.
//!
//! Files are plain CSV (no gzip), written atomically: to a temporary sibling
//! `.{name}.tmp-{pid}-{n}` ([`trackgnn_trackml::atomic::temp_path`]), renamed into place once complete. The reader finds columns by
//! header name, accepts CRLF, blank lines, a UTF-8 BOM and several events in one file (the
//! Kaggle layout), and rejects a hit listed twice in one event. Track ids must fit a `u32`.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::kalman::candidate::FittedTrack;
use crate::tracks::NO_TRACK;

/// The header of a submission file.
pub const SUBMISSION_COLUMNS: [&str; 3] = ["event_id", "hit_id", "track_id"];

/// The file name trackgnn uses for an event's submission: `event000001000-submission.csv`.
pub fn submission_file_name(event_id: u64) -> String {
    format!("event{event_id:09}-submission.csv")
}

/// One track id per hit of the event: the track id of the graph node holding the hit,
/// [`NO_TRACK`] for hits that are not nodes of the graph.
///
/// A node hit id that is not a hit of the event is an [`Error::UnknownHit`]; a hit id that
/// appears twice among the event's hits or the nodes is an [`Error::DuplicateHit`].
///
/// # Panics
/// If `node_hit_ids` and `node_track_ids` differ in length.
#[track_caller]
pub fn event_track_ids(event_hit_ids: &[u64], node_hit_ids: &[u64], node_track_ids: &[u32]) -> Result<Vec<u32>> {
    assert_eq!(node_hit_ids.len(), node_track_ids.len(), "one track id per node");
    let index = hit_index(event_hit_ids, "event_track_ids (event hits)")?;
    let mut out = vec![NO_TRACK; event_hit_ids.len()];
    let mut seen = vec![false; event_hit_ids.len()];
    for (&hit_id, &track) in node_hit_ids.iter().zip(node_track_ids) {
        let context = || "event_track_ids (graph nodes)".to_owned();
        let &i = index.get(&hit_id).ok_or_else(|| Error::UnknownHit { hit_id, context: context() })?;
        if std::mem::replace(&mut seen[i], true) {
            return Err(Error::DuplicateHit { hit_id, context: context() });
        }
        out[i] = track;
    }
    Ok(out)
}

/// The same ids with every [`NO_TRACK`] replaced by a fresh id: `max + 1`, `max + 2`, … in
/// hit order, where `max` is the largest id given. An [`Error::TooManyTracks`] if the ids
/// would not fit a `u32`.
pub fn singleton_track_ids(track_ids: &[u32]) -> Result<Vec<u32>> {
    let max = track_ids.iter().copied().max().unwrap_or(NO_TRACK);
    let unassigned = track_ids.iter().filter(|&&t| t == NO_TRACK).count() as u64;
    let needed = u64::from(max) + unassigned;
    if needed > u64::from(u32::MAX) {
        return Err(Error::TooManyTracks { needed });
    }
    let mut next = max;
    Ok(track_ids
        .iter()
        .map(|&t| {
            if t == NO_TRACK {
                next += 1;
                next
            } else {
                t
            }
        })
        .collect())
}

/// Position of every hit id; a repeated id is an [`Error::DuplicateHit`].
fn hit_index(hit_ids: &[u64], context: &str) -> Result<HashMap<u64, usize>> {
    let mut index = HashMap::with_capacity(hit_ids.len());
    for (i, &hit_id) in hit_ids.iter().enumerate() {
        if index.insert(hit_id, i).is_some() {
            return Err(Error::DuplicateHit { hit_id, context: context.to_owned() });
        }
    }
    Ok(index)
}

/// Writes a reconstructed event's submission into the directory `out` under its standard name
/// ([`submission_file_name`]): the hits without a track ([`NO_TRACK`]) get singleton ids first
/// ([`singleton_track_ids`]), as a TrackML submission needs. What the GNN chain and the CKF
/// write for each event.
pub fn write_event_submission(out: &Path, event_id: u64, hit_ids: &[u64], hit_tracks: &[u32]) -> Result<()> {
    let ids = singleton_track_ids(hit_tracks)?;
    write_submission(&out.join(submission_file_name(event_id)), event_id, hit_ids, &ids)
}

/// Writes an event's submission: one `event_id,hit_id,track_id` row per hit, in the order
/// given. Every hit of the event must be listed once; a hit id given twice is an
/// [`Error::DuplicateHit`] and nothing is written. Ids are written as given (see the
/// [module docs](self) for [`NO_TRACK`]).
///
/// # Panics
/// If `hit_ids` and `track_ids` differ in length.
#[track_caller]
pub fn write_submission(path: &Path, event_id: u64, hit_ids: &[u64], track_ids: &[u32]) -> Result<()> {
    assert_eq!(hit_ids.len(), track_ids.len(), "one track id per hit");
    hit_index(hit_ids, &format!("write_submission {}", path.display()))?;
    write_atomically(path, |w| {
        writeln!(w, "{}", SUBMISSION_COLUMNS.join(","))?;
        for (&h, &t) in hit_ids.iter().zip(track_ids) {
            writeln!(w, "{event_id},{h},{t}")?;
        }
        Ok(())
    })
}

/// Writes `path` through `body` atomically: to a temporary sibling, renamed into place once
/// complete (removed on failure).
fn write_atomically(path: &Path, body: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>) -> Result<()> {
    if path.file_name().is_none() {
        return Err(Error::io(path, std::io::Error::other("not a file name")));
    }
    let tmp = trackgnn_trackml::atomic::temp_path(path);
    let written = (|| -> std::io::Result<()> {
        let mut w = BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
        body(&mut w)?;
        // No fsync, as in the TrackML CSV writer: the rename guards against a killed process.
        w.into_inner().map_err(|e| e.into_error())?;
        Ok(())
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(&tmp, e));
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io(path, e)
    })
}

/// The header of a track parameters file ([`write_parameters`]).
pub const PARAMETERS_COLUMNS: [&str; 13] = [
    "track_id",
    "q_over_pt",
    "phi",
    "eta",
    "d0",
    "z0",
    "sigma_q_over_pt",
    "sigma_phi",
    "sigma_eta",
    "sigma_d0",
    "sigma_z0",
    "chi2",
    "ndf",
];

/// The file name of an event's fitted track parameters, beside its submission:
/// `event000001000-parameters.csv`.
pub fn parameters_file_name(event_id: u64) -> String {
    format!("event{event_id:09}-parameters.csv")
}

/// Writes an event's fitted track parameters ([`PARAMETERS_COLUMNS`]), one row per track in
/// the order given: the track's id in the submission, the perigee's q/pT \[e/GeV\], φ
/// \[rad\], η, d0 and z0 \[mm\], their errors σ, the fit's χ² and its degrees of freedom.
/// Atomically, as submissions are.
pub fn write_parameters(path: &Path, tracks: &[FittedTrack]) -> Result<()> {
    write_atomically(path, |w| {
        writeln!(w, "{}", PARAMETERS_COLUMNS.join(","))?;
        for t in tracks {
            let row: Vec<String> = t.row().iter().map(f64::to_string).collect();
            writeln!(w, "{}", row.join(","))?;
        }
        Ok(())
    })
}

/// One row of a track parameters file ([`write_parameters`]), as read back.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TrackParameters {
    /// The track's id in the event's submission.
    pub track_id: u32,
    /// (q/pT \[e/GeV\], φ, η, d0 \[mm\], z0 \[mm\]) at the perigee.
    pub values: [f64; 5],
    /// Their errors σ, in the same order.
    pub sigmas: [f64; 5],
    /// The fit's χ².
    pub chi2: f64,
    /// Its degrees of freedom.
    pub ndf: u32,
}

impl TrackParameters {
    /// pT \[GeV\].
    pub fn pt(&self) -> f64 {
        1.0 / self.values[0].abs()
    }
}

/// Reads a track parameters file written by [`write_parameters`].
///
/// # Errors
/// [`Error::Io`] if it cannot be read; [`Error::Parse`] naming the file, line and column for
/// a header other than [`PARAMETERS_COLUMNS`] or a value that is not a number.
pub fn read_parameters(path: &Path) -> Result<Vec<TrackParameters>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let parse_err = |line: usize, column: &str, message: String| Error::Parse {
        path: path.to_owned(),
        line: line as u64,
        column: column.into(),
        message,
    };
    let mut lines = text.lines().enumerate();
    let header = lines.next().map(|(_, h)| h.trim()).unwrap_or_default();
    if header != PARAMETERS_COLUMNS.join(",") {
        return Err(parse_err(1, "header", format!("expected `{}`, found `{header}`", PARAMETERS_COLUMNS.join(","))));
    }
    let mut rows = Vec::new();
    for (i, line) in lines.filter(|(_, l)| !l.trim().is_empty()) {
        let cells: Vec<&str> = line.split(',').collect();
        if cells.len() != PARAMETERS_COLUMNS.len() {
            return Err(parse_err(
                i + 1,
                "row",
                format!("{} values, expected {}", cells.len(), PARAMETERS_COLUMNS.len()),
            ));
        }
        let mut v = [0.0f64; 13];
        for (k, cell) in cells.iter().enumerate() {
            v[k] = cell
                .trim()
                .parse()
                .map_err(|_| parse_err(i + 1, PARAMETERS_COLUMNS[k], format!("`{cell}` is not a number")))?;
        }
        rows.push(TrackParameters {
            track_id: v[0] as u32,
            values: [v[1], v[2], v[3], v[4], v[5]],
            sigmas: [v[6], v[7], v[8], v[9], v[10]],
            chi2: v[11],
            ndf: v[12] as u32,
        });
    }
    Ok(rows)
}

/// The rows of one event of a submission file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Submission {
    /// The event.
    pub event_id: u64,
    /// The hits, in file order.
    pub hit_id: Vec<u64>,
    /// The track id of each hit.
    pub track_id: Vec<u32>,
    /// The file it was read from, for error messages (empty if built in memory).
    pub path: PathBuf,
}

impl Submission {
    /// One track id per hit of the event, in the order of `event_hit_ids`. Every hit of the
    /// event must be in the submission ([`Error::MissingHit`]) and the submission must hold
    /// no other hit ([`Error::UnknownHit`]) and no hit twice ([`Error::DuplicateHit`]).
    ///
    /// # Panics
    /// If `hit_id` and `track_id` differ in length.
    #[track_caller]
    pub fn track_ids_for(&self, event_hit_ids: &[u64]) -> Result<Vec<u32>> {
        assert_eq!(self.hit_id.len(), self.track_id.len(), "one track id per hit");
        let context = format!("submission of event {} ({})", self.event_id, self.path.display());
        let index = hit_index(&self.hit_id, &context)?;
        let event = hit_index(event_hit_ids, "track_ids_for (event hits)")?;
        let mut out = Vec::with_capacity(event_hit_ids.len());
        for &hit_id in event_hit_ids {
            let &i = index.get(&hit_id).ok_or_else(|| Error::MissingHit { hit_id, context: context.clone() })?;
            out.push(self.track_id[i]);
        }
        // Every event hit is in the submission; anything more is a hit from elsewhere.
        if let Some(&hit_id) = self.hit_id.iter().find(|h| !event.contains_key(h)) {
            return Err(Error::UnknownHit { hit_id, context });
        }
        Ok(out)
    }
}

/// Reads a submission file: one [`Submission`] per event, in order of first appearance.
/// Errors name the file, the line and the column.
pub fn read_submission(path: &Path) -> Result<Vec<Submission>> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let text = String::from_utf8(bytes).map_err(|e| Error::Parse {
        path: path.to_owned(),
        line: 0,
        column: "header".into(),
        message: format!("not UTF-8: {e}"),
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let parse_err = |line: usize, column: &str, message: String| Error::Parse {
        path: path.to_owned(),
        line: line as u64 + 1,
        column: column.to_owned(),
        message,
    };

    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let Some((header_line, header)) = lines.next() else {
        return Err(parse_err(0, "header", "empty file".into()));
    };
    let names: Vec<&str> = header.split(',').map(|c| c.trim().trim_matches('"')).collect();
    let mut col = [0usize; 3];
    for (k, want) in SUBMISSION_COLUMNS.iter().enumerate() {
        col[k] = names
            .iter()
            .position(|n| n == want)
            .ok_or_else(|| parse_err(header_line, "header", format!("no `{want}` column (found {names:?})")))?;
    }

    let mut out: Vec<Submission> = Vec::new();
    let mut event_index: HashMap<u64, usize> = HashMap::new();
    let mut seen: Vec<HashSet<u64>> = Vec::new();
    for (n, line) in lines {
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if fields.len() != names.len() {
            return Err(parse_err(n, "row", format!("{} fields, the header has {}", fields.len(), names.len())));
        }
        let num = |k: usize| -> Result<u64> {
            fields[col[k]].parse::<u64>().map_err(|e| {
                parse_err(n, SUBMISSION_COLUMNS[k], format!("`{}` is not an unsigned integer: {e}", fields[col[k]]))
            })
        };
        let (event_id, hit_id, track) = (num(0)?, num(1)?, num(2)?);
        let track =
            u32::try_from(track).map_err(|_| parse_err(n, "track_id", format!("{track} does not fit a u32")))?;
        let e = *event_index.entry(event_id).or_insert_with(|| {
            out.push(Submission { event_id, path: path.to_owned(), ..Default::default() });
            seen.push(HashSet::new());
            out.len() - 1
        });
        if !seen[e].insert(hit_id) {
            return Err(Error::DuplicateHit { hit_id, context: format!("{}:{}", path.display(), n + 1) });
        }
        out[e].hit_id.push(hit_id);
        out[e].track_id.push(track);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_temporaries(dir: &Path) {
        let names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert!(names.iter().all(|n| !n.contains(".tmp-")), "{names:?}");
    }

    #[test]
    fn write_then_read_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(submission_file_name(1000));
        assert!(path.ends_with("event000001000-submission.csv"));
        let hits = [5u64, 1, 3, 2, 4, 1 << 40];
        let tracks = [1u32, 1, 2, 2, 7, u32::MAX];
        write_submission(&path, 1000, &hits, &tracks).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("event_id,hit_id,track_id\n1000,5,1\n"), "{text}");
        let subs = read_submission(&path).unwrap();
        assert_eq!(subs.len(), 1);
        assert_eq!((subs[0].event_id, &subs[0].hit_id[..], &subs[0].track_id[..]), (1000, &hits[..], &tracks[..]));
        // Aligned to the event's own hit order.
        let event_hits = [1u64, 2, 3, 4, 5, 1 << 40];
        assert_eq!(subs[0].track_ids_for(&event_hits).unwrap(), [1, 2, 2, 7, 1, u32::MAX]);
        // Overwriting replaces the file whole.
        write_submission(&path, 1000, &hits[..2], &tracks[..2]).unwrap();
        assert_eq!(read_submission(&path).unwrap()[0].hit_id, [5, 1]);
        no_temporaries(dir.path());
    }

    #[test]
    fn parameters_are_written_one_row_per_track_and_a_bad_path_is_named() {
        use crate::kalman::params::{BoundMatrix, BoundVector};
        use crate::kalman::perigee::Perigee;
        let dir = tempfile::tempdir().unwrap();
        let params = BoundVector::from_column_slice(&[0.05, -12.0, 1.0, 1.2, -0.4]);
        let cov = BoundMatrix::from_diagonal(&BoundVector::from_column_slice(&[1e-4, 4e-2, 1e-6, 1e-6, 1e-6]));
        let t =
            FittedTrack { track_id: 7, perigee: Perigee::from_bound(&params, &cov), chi2: 9.5, ndf: 11, outliers: 0 };
        let path = dir.path().join(parameters_file_name(1000));
        assert!(path.ends_with("event000001000-parameters.csv"));
        write_parameters(&path, &[t, FittedTrack { track_id: 9, ..t }]).unwrap();
        no_temporaries(dir.path());
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], PARAMETERS_COLUMNS.join(","));
        let row: Vec<f64> = lines[1].split(',').map(|v| v.parse().unwrap()).collect();
        let pt = 1.0 / row[1].abs();
        assert_eq!((row[0], row[11], row[12]), (7.0, 9.5, 11.0));
        assert!((pt - 2.5 * 1.2f64.sin()).abs() < 1e-12, "pT {pt}");
        assert_eq!((row[2], row[4], row[5]), (1.0, 0.05, -12.0));
        assert!((row[9] - 0.01).abs() < 1e-15 && (row[10] - 0.2).abs() < 1e-15, "{row:?}");
        assert!(lines[2].starts_with("9,"));
        // Read back as written.
        let back = read_parameters(&path).unwrap();
        assert_eq!((back.len(), back[1].track_id, back[0].ndf, back[0].chi2), (2, 9, 11, 9.5));
        assert_eq!((back[0].values[3], back[0].values[4], back[0].sigmas[4]), (0.05, -12.0, row[10]));
        assert!((back[0].pt() - pt).abs() < 1e-12);
        std::fs::write(&path, text.replace(",11\n", ",x\n")).unwrap();
        let err = read_parameters(&path).unwrap_err().to_string();
        assert!(err.contains("event000001000-parameters.csv") && err.contains("ndf"), "{err}");
        std::fs::write(&path, "track_id,q\n").unwrap();
        assert!(read_parameters(&path).unwrap_err().to_string().contains("header"));
        // A directory that does not exist: the error names the file.
        let bad = dir.path().join("nowhere").join(parameters_file_name(1));
        let err = write_parameters(&bad, &[t]).unwrap_err().to_string();
        assert!(err.contains("event000000001-parameters.csv"), "{err}");
    }

    #[test]
    fn a_missing_or_duplicated_hit_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.csv");
        let e = write_submission(&path, 1, &[1, 2, 1], &[1, 1, 1]).unwrap_err();
        assert!(matches!(e, Error::DuplicateHit { hit_id: 1, .. }), "{e}");
        assert!(!path.exists(), "nothing written");

        write_submission(&path, 1, &[1, 2, 3], &[1, 1, 1]).unwrap();
        let sub = &read_submission(&path).unwrap()[0];
        let e = sub.track_ids_for(&[1, 2, 3, 4]).unwrap_err();
        assert!(matches!(e, Error::MissingHit { hit_id: 4, .. }), "{e}");
        assert!(e.to_string().contains("s.csv"), "{e}");
        let e = sub.track_ids_for(&[1, 2]).unwrap_err();
        assert!(matches!(e, Error::UnknownHit { hit_id: 3, .. }), "{e}");
        let e = sub.track_ids_for(&[1, 2, 3, 3]).unwrap_err();
        assert!(matches!(e, Error::DuplicateHit { hit_id: 3, .. }), "{e}");

        std::fs::write(&path, "event_id,hit_id,track_id\n1,1,1\n1,2,1\n2,1,5\n1,2,3\n").unwrap();
        let e = read_submission(&path).unwrap_err();
        assert!(matches!(e, Error::DuplicateHit { hit_id: 2, .. }), "{e}");
        assert!(e.to_string().contains("s.csv:5"), "{e}");
    }

    #[test]
    fn reader_finds_columns_by_name_and_splits_events() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kaggle.csv");
        std::fs::write(&path, "\u{feff}hit_id, track_id ,event_id\r\n1,10,3\r\n\r\n2,11,3\r\n1,12,4").unwrap();
        let subs = read_submission(&path).unwrap();
        assert_eq!(subs.len(), 2);
        assert_eq!((subs[0].event_id, &subs[0].hit_id[..], &subs[0].track_id[..]), (3, &[1, 2][..], &[10, 11][..]));
        assert_eq!((subs[1].event_id, &subs[1].hit_id[..], &subs[1].track_id[..]), (4, &[1][..], &[12][..]));
    }

    #[test]
    fn parse_errors_name_file_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.csv");
        let cases = [
            ("event_id,hit_id\n1,2\n", "bad.csv:1: column `header`"),
            ("event_id,hit_id,track_id\n1,2,x\n", "bad.csv:2: column `track_id`"),
            ("event_id,hit_id,track_id\n1,2,3\n1,-5,3\n", "bad.csv:3: column `hit_id`"),
            ("event_id,hit_id,track_id\n1,2,4294967296\n", "bad.csv:2: column `track_id`"),
            ("event_id,hit_id,track_id\n1,2\n", "bad.csv:2: column `row`"),
            ("", "bad.csv:1: column `header`"),
        ];
        for (text, want) in cases {
            std::fs::write(&path, text).unwrap();
            let e = read_submission(&path).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        let e = read_submission(&dir.path().join("none.csv")).unwrap_err();
        assert!(matches!(e, Error::Io { .. }));
    }

    #[test]
    fn graph_ids_map_to_event_hits_and_unassigned_get_singletons() {
        let event_hits = [10u64, 11, 12, 13, 14, 15];
        // The graph holds hits 12, 10, 14, 15 (11 and 13 were cut).
        let ids = event_track_ids(&event_hits, &[12, 10, 14, 15], &[1, 1, 0, 2]).unwrap();
        assert_eq!(ids, [1, NO_TRACK, 1, NO_TRACK, NO_TRACK, 2]);
        assert_eq!(singleton_track_ids(&ids).unwrap(), [1, 3, 1, 4, 5, 2]);
        assert_eq!(singleton_track_ids(&[0, 0]).unwrap(), [1, 2]);
        assert_eq!(singleton_track_ids(&[]).unwrap(), Vec::<u32>::new());
        assert!(matches!(singleton_track_ids(&[u32::MAX, 0]), Err(Error::TooManyTracks { .. })));

        let e = event_track_ids(&event_hits, &[12, 99], &[1, 1]).unwrap_err();
        assert!(matches!(e, Error::UnknownHit { hit_id: 99, .. }), "{e}");
        let e = event_track_ids(&event_hits, &[12, 12], &[1, 1]).unwrap_err();
        assert!(matches!(e, Error::DuplicateHit { hit_id: 12, .. }), "{e}");
        let e = event_track_ids(&[1, 1], &[], &[]).unwrap_err();
        assert!(matches!(e, Error::DuplicateHit { hit_id: 1, .. }), "{e}");
    }
}
