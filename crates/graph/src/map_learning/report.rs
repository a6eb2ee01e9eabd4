//! What learning or merging module maps reports: [`MapReport`] and [`MergeReport`], each a
//! line of text or one JSON object.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::MapEvents;
use crate::module_map::ModuleMap;

/// A module map learned and written, as reported.
#[derive(Clone, Debug, Serialize)]
pub struct MapReport<'a> {
    /// The map file.
    pub out: &'a Path,
    /// Training events.
    pub events: u64,
    /// Module pairs recorded.
    pub module_pairs: usize,
    /// Module triplets recorded.
    pub module_triplets: usize,
    /// Bytes of the file.
    pub bytes: u64,
    /// The target particles' smallest pT \[GeV\].
    pub pt_min_gev: f64,
    /// The target particles' fewest hits.
    pub min_hits: usize,
    /// The vertex cut \[mm\] (`None`: secondaries too).
    pub max_vertex_r_mm: Option<f64>,
    /// Seconds of learning.
    pub seconds: f64,
    /// True if the events were drawn from the generator.
    pub simulated: bool,
    /// The drawn events' pile-up.
    pub pileup: Option<f64>,
    /// The drawn events' seed.
    pub seed: Option<u64>,
}

impl<'a> MapReport<'a> {
    /// The report of `map`, learned from `events` in `seconds` and written to `out` (`bytes`).
    pub fn new(out: &'a Path, map: &ModuleMap, events: &MapEvents, bytes: u64, seconds: f64) -> Self {
        let (pileup, seed) = match events {
            MapEvents::Files(_) => (None, None),
            MapEvents::Generated { generator, seed, .. } => (Some(generator.config().pileup), Some(*seed)),
        };
        MapReport {
            out,
            events: map.events,
            module_pairs: map.len(),
            module_triplets: map.triplet_count(),
            bytes,
            pt_min_gev: map.config.target.pt_min,
            min_hits: map.config.target.min_hits,
            max_vertex_r_mm: map.config.max_vertex_r,
            seconds,
            simulated: matches!(events, MapEvents::Generated { .. }),
            pileup,
            seed,
        }
    }
}

impl fmt::Display for MapReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let from = match (self.pileup, self.seed) {
            (Some(mu), Some(seed)) => format!("{} generated mu={mu} events (seed {seed})", self.events),
            _ => format!("{} events", self.events),
        };
        writeln!(
            f,
            "module map from {from} (particles with pT >= {} GeV, >= {} hits): {} module pairs, {} module triplets, {} bytes, {:.1} s -> {}",
            self.pt_min_gev,
            self.min_hits,
            self.module_pairs,
            self.module_triplets,
            self.bytes,
            self.seconds,
            self.out.display()
        )
    }
}

/// Module maps merged and written, as reported.
#[derive(Clone, Debug, Serialize)]
pub struct MergeReport<'a> {
    /// The merged map's file.
    pub out: &'a Path,
    /// The maps merged.
    pub maps: &'a [PathBuf],
    /// Training events of all of them.
    pub events: u64,
    /// Module pairs of the merged map.
    pub module_pairs: usize,
    /// Module triplets of the merged map.
    pub module_triplets: usize,
    /// Bytes of the file.
    pub bytes: u64,
    /// The merged map's vertex cut \[mm\].
    pub max_vertex_r_mm: Option<f64>,
}

impl<'a> MergeReport<'a> {
    /// The report of `map`, merged from `maps` and written to `out` (`bytes`).
    pub fn new(out: &'a Path, maps: &'a [PathBuf], map: &ModuleMap, bytes: u64) -> Self {
        MergeReport {
            out,
            maps,
            events: map.events,
            module_pairs: map.len(),
            module_triplets: map.triplet_count(),
            bytes,
            max_vertex_r_mm: map.config.max_vertex_r,
        }
    }
}

impl fmt::Display for MergeReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "merged {} maps ({} events): {} module pairs, {} module triplets, {} bytes -> {}",
            self.maps.len(),
            self.events,
            self.module_pairs,
            self.module_triplets,
            self.bytes,
            self.out.display()
        )
    }
}
