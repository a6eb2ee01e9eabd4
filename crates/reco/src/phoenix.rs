//! An event in the JSON event format of Phoenix, the HEP Software Foundation's web event
//! display (<https://github.com/HSF/phoenix>, `guides/developers/event_data_format.md`): one
//! top-level object keyed by the event's name, holding `event number`, `run number`, a `Hits`
//! object of collections (each a list of `[x, y, z]` in mm) and a `Tracks` object of
//! collections (each a list of tracks with `pos`, `dparams` and the cut values).
//!
//! Phoenix works in mm and MeV: `dparams` is `[d0, z0, φ, θ, q/p]` with q/p in e/MeV, and
//! `pT` is in MeV. How a track's shape is given is [`TrackPoints`]'s choice: by default only
//! its perigee (`dparams`, with an empty `pos`), which Phoenix extrapolates through its field
//! by Runge–Kutta, and which the format's own validator (phoenix-helpers'
//! `checkers/event_file_checker.py`) accepts; or its hits as `[x, y, z]` points, which Phoenix
//! draws through, but which that validator (2022) rejects, as it wants `pos` a flat list.
//!
//! ```
//! use trackgnn_reco::phoenix::{PhoenixEvent, TrackPoints};
//! use trackgnn_trackml::{Event, ModuleId};
//! let mut event = Event::default();
//! event.event_id = 7;
//! for (i, r) in [30.0f32, 70.0, 115.0].into_iter().enumerate() {
//!     event.hits.push(i as u64 + 1, [r, 0.1 * r, 0.5 * r], ModuleId::new(8, 2, 1));
//! }
//! let p = PhoenixEvent::new(&event, &[1, 1, 1], &[], "CKF", TrackPoints::Hits);
//! assert_eq!(p.tracks["CKF tracks"][0].pos.len(), 3);
//! assert_eq!(p.hits["hits on tracks"].len(), 3);
//! # Ok::<(), trackgnn_reco::Error>(())
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use trackgnn_trackml::Event;

use crate::NO_TRACK;
use crate::error::{Error, Result};
use crate::kalman::FittedTrack;

/// How a track's shape goes into the file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum TrackPoints {
    /// Only the fitted perigee (`dparams`, an empty `pos`): Phoenix extrapolates it; tracks
    /// without a fit are left out. The format's validator accepts it.
    #[default]
    Perigee,
    /// The track's hits as `[x, y, z]` points in path order (and `dparams` when fitted):
    /// Phoenix draws through them; phoenix-helpers' validator rejects the nested `pos`.
    Hits,
}

/// One event as Phoenix reads it (the value under the event's key).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhoenixEvent {
    /// The event's number.
    #[serde(rename = "event number")]
    pub event_number: u64,
    /// The run's number (0: generated events have none).
    #[serde(rename = "run number")]
    pub run_number: u64,
    /// Hit collections by name, each a list of `[x, y, z]` \[mm\].
    #[serde(rename = "Hits")]
    pub hits: BTreeMap<String, Vec<[f32; 3]>>,
    /// Track collections by name.
    #[serde(rename = "Tracks")]
    pub tracks: BTreeMap<String, Vec<PhoenixTrack>>,
}

/// One track as Phoenix reads it; the optional values are Phoenix's cut values.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhoenixTrack {
    /// Points along the track, `[x, y, z]` \[mm\] (empty with [`TrackPoints::Perigee`]).
    pub pos: Vec<[f64; 3]>,
    /// The fitted perigee `[d0 [mm], z0 [mm], φ, θ, q/p [e/MeV]]`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub dparams: Option<[f64; 5]>,
    /// d0 \[mm\].
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub d0: Option<f64>,
    /// z0 \[mm\].
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub z0: Option<f64>,
    /// φ at the perigee.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub phi: Option<f64>,
    /// η.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub eta: Option<f64>,
    /// pT \[MeV\], as Phoenix's cuts take it.
    #[serde(rename = "pT", skip_serializing_if = "Option::is_none", default)]
    pub pt: Option<f64>,
    /// The fit's χ².
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub chi2: Option<f64>,
    /// The fit's degrees of freedom.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub dof: Option<f64>,
    /// Colour, a hexadecimal RGB string (`1f77b4`).
    pub color: String,
    /// The track's id in the event's submission (a decoration Phoenix shows).
    pub track_id: u32,
    /// Its number of hits (a decoration).
    pub hits: usize,
}

/// Track colours: matplotlib's `tab10`, as hexadecimal strings.
const COLORS: [&str; 10] =
    ["1f77b4", "ff7f0e", "2ca02c", "d62728", "9467bd", "8c564b", "e377c2", "7f7f7f", "bcbd22", "17becf"];

impl PhoenixEvent {
    /// The event's hits (`hits on tracks` and `hits on no track`) and its tracks (collection
    /// `<method> tracks`): `hit_tracks` is a track id per hit of `event` ([`NO_TRACK`] for
    /// none), `fitted` the fits of some of the tracks (by track id), `points` how a track's
    /// shape is given.
    ///
    /// # Panics
    /// If `hit_tracks` has not one entry per hit.
    #[track_caller]
    pub fn new(
        event: &Event,
        hit_tracks: &[u32],
        fitted: &[FittedTrack],
        method: &str,
        points: TrackPoints,
    ) -> PhoenixEvent {
        PhoenixEvent::in_region(event, hit_tracks, fitted, method, points, |_| true)
    }

    /// [`new`](Self::new) with only the hits that `keep` (of a position in mm) accepts, and
    /// the tracks that have one of them.
    #[track_caller]
    pub fn in_region(
        event: &Event,
        hit_tracks: &[u32],
        fitted: &[FittedTrack],
        method: &str,
        points: TrackPoints,
        keep: impl Fn([f64; 3]) -> bool,
    ) -> PhoenixEvent {
        let h = &event.hits;
        assert_eq!(hit_tracks.len(), h.len(), "one track id per hit");
        let (mut on, mut off) = (Vec::new(), Vec::new());
        let mut track_hits: BTreeMap<u32, Vec<[f64; 3]>> = BTreeMap::new();
        for (i, &t) in hit_tracks.iter().enumerate() {
            let p = [h.x[i], h.y[i], h.z[i]];
            let p64 = p.map(f64::from);
            if !keep(p64) {
                continue;
            }
            if t == NO_TRACK {
                off.push(p);
            } else {
                on.push(p);
                track_hits.entry(t).or_default().push(p64);
            }
        }
        let fits: BTreeMap<u32, &FittedTrack> = fitted.iter().map(|f| (f.track_id, f)).collect();
        let tracks = track_hits
            .into_iter()
            .filter_map(|(id, mut pos)| {
                let fit = fits.get(&id).copied();
                if points == TrackPoints::Perigee && fit.is_none() {
                    return None;
                }
                pos.sort_by(|a, b| norm(a).total_cmp(&norm(b)));
                Some(track(id, pos, fit, points))
            })
            .collect();
        PhoenixEvent {
            event_number: event.event_id,
            run_number: 0,
            hits: BTreeMap::from([("hits on tracks".to_string(), on), ("hits on no track".to_string(), off)]),
            tracks: BTreeMap::from([(format!("{method} tracks"), tracks)]),
        }
    }

    /// The key of this event in a file: `event <number>`.
    pub fn key(&self) -> String {
        format!("event {}", self.event_number)
    }

    /// Writes a Phoenix file holding this event (under [`key`](Self::key)), through a
    /// temporary name and a rename.
    ///
    /// # Errors
    /// [`Error::Io`] naming `path`.
    pub fn write(&self, path: &Path) -> Result<()> {
        let file = BTreeMap::from([(self.key(), self)]);
        let text = serde_json::to_vec(&file).map_err(|e| Error::io(path, e.into()))?;
        trackgnn_trackml::atomic::write(path, &text).map_err(|e| Error::io(path, e))
    }

    /// Reads the events of a Phoenix file written by [`write`](Self::write), by key.
    ///
    /// # Errors
    /// [`Error::Io`] naming `path` if it cannot be read or is not such a file.
    pub fn read(path: &Path) -> Result<BTreeMap<String, PhoenixEvent>> {
        let text = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        serde_json::from_slice(&text).map_err(|e| Error::io(path, std::io::Error::other(e)))
    }
}

/// Distance from the origin.
fn norm(p: &[f64; 3]) -> f64 {
    (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]).sqrt()
}

/// Track `id` with its hits `pos` (in path order) and its fit, if any.
fn track(id: u32, pos: Vec<[f64; 3]>, fit: Option<&FittedTrack>, points: TrackPoints) -> PhoenixTrack {
    let mut t = PhoenixTrack {
        hits: pos.len(),
        pos: if points == TrackPoints::Hits { pos } else { Vec::new() },
        color: COLORS[id as usize % COLORS.len()].to_string(),
        track_id: id,
        ..Default::default()
    };
    if let Some(f) = fit {
        let p = &f.perigee;
        let theta = 2.0 * (-p.eta).exp().atan();
        // q/p [e/MeV] = q/pT · sin θ / 1000.
        let qop = p.q_over_pt * theta.sin() / 1000.0;
        t.dparams = Some([p.d0, p.z0, p.phi, theta, qop]);
        (t.d0, t.z0, t.phi, t.eta) = (Some(p.d0), Some(p.z0), Some(p.phi), Some(p.eta));
        t.pt = Some(1000.0 * p.pt());
        (t.chi2, t.dof) = (Some(f.chi2), Some(f.ndf as f64));
    }
    t
}

#[cfg(test)]
mod tests {
    use nalgebra::SMatrix;
    use trackgnn_trackml::ModuleId;

    use super::*;
    use crate::kalman::perigee::Perigee;

    /// Two tracks of 3 hits (ids 1 and 2) and 2 hits in none; track 1 fitted.
    fn event() -> (Event, Vec<u32>, Vec<FittedTrack>) {
        let mut e = Event { event_id: 1001, ..Default::default() };
        let m = ModuleId::new(8, 2, 1);
        for (i, r) in [115.0f32, 30.0, 70.0, 32.0, 72.0, 117.0, 50.0, -50.0].into_iter().enumerate() {
            e.hits.push(i as u64 + 1, [r, if i >= 3 { -r } else { r }, 10.0], m);
        }
        let perigee = Perigee {
            q_over_pt: -0.5,
            phi: 0.78,
            cot_theta: 0.0,
            eta: 0.0,
            d0: 0.01,
            z0: 10.0,
            cov: SMatrix::identity(),
            sigma_eta: 0.01,
        };
        let fit = FittedTrack { track_id: 1, perigee, chi2: 3.5, ndf: 2, outliers: 0 };
        (e, vec![1, 1, 1, 2, 2, 2, NO_TRACK, NO_TRACK], vec![fit])
    }

    #[test]
    fn export_round_trips_with_its_collections_and_counts() {
        let (e, tracks, fits) = event();
        let dir = tempfile::tempdir().unwrap();
        for points in [TrackPoints::Perigee, TrackPoints::Hits] {
            let p = PhoenixEvent::new(&e, &tracks, &fits, "GNN", points);
            let path = dir.path().join("e.json");
            p.write(&path).unwrap();
            let back = PhoenixEvent::read(&path).unwrap();
            assert_eq!(back.keys().collect::<Vec<_>>(), ["event 1001"]);
            let got = &back["event 1001"];
            assert_eq!(got, &p);
            assert_eq!(
                (got.event_number, got.hits["hits on tracks"].len(), got.hits["hits on no track"].len()),
                (1001, 6, 2)
            );
            let t = &got.tracks["GNN tracks"];
            let fitted = &t[0];
            let d = fitted.dparams.unwrap();
            assert_eq!((d[0], d[1], d[2]), (0.01, 10.0, 0.78));
            assert!((d[3] - std::f64::consts::FRAC_PI_2).abs() < 1e-12 && (d[4] + 0.5e-3).abs() < 1e-12, "{d:?}");
            assert_eq!((fitted.pt, fitted.dof, fitted.hits), (Some(2000.0), Some(2.0), 3));
            match points {
                // The unfitted track 2 has no shape without its points.
                TrackPoints::Perigee => assert!(t.len() == 1 && fitted.pos.is_empty()),
                TrackPoints::Hits => {
                    assert_eq!(t.len(), 2);
                    let r: Vec<f64> = fitted.pos.iter().map(|p| p[0]).collect();
                    assert_eq!(r, [30.0, 70.0, 115.0], "hits in path order");
                    assert_eq!((t[1].track_id, t[1].dparams, t[1].pos.len()), (2, None, 3));
                }
            }
        }
        // The validator's keys, spelled as Phoenix reads them.
        let text = std::fs::read_to_string(dir.path().join("e.json")).unwrap();
        for key in
            ["\"event number\":1001", "\"run number\":0", "\"Hits\":{", "\"Tracks\":{", "\"dparams\":[", "\"pT\":"]
        {
            assert!(text.contains(key), "{key} in {text}");
        }
    }

    #[test]
    fn a_region_keeps_its_hits_and_the_tracks_with_one() {
        let (e, tracks, fits) = event();
        let p = PhoenixEvent::in_region(&e, &tracks, &fits, "CKF", TrackPoints::Hits, |p| p[1] > 0.0);
        assert_eq!((p.hits["hits on tracks"].len(), p.hits["hits on no track"].len()), (3, 1));
        assert_eq!(p.tracks["CKF tracks"].iter().map(|t| t.track_id).collect::<Vec<_>>(), [1]);
    }

    #[test]
    fn unreadable_files_are_errors_naming_them() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, b"{\"event 1\": 3}").unwrap();
        let e = PhoenixEvent::read(&bad).unwrap_err().to_string();
        assert!(e.contains("bad.json"), "{e}");
        let (ev, tracks, fits) = event();
        let missing = dir.path().join("no/such/dir/e.json");
        let e = PhoenixEvent::new(&ev, &tracks, &fits, "x", TrackPoints::Hits).write(&missing).unwrap_err();
        assert!(e.to_string().contains("no/such/dir/e.json"), "{e}");
    }
}
