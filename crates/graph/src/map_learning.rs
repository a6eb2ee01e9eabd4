//! Learning a module map: the training events it reads or draws (drawn events propagate only
//! the particles [`MapConfig::keeps_primary`] can use), the events learned in parallel, and
//! the merge of maps learned apart, and what learning and merging report ([`MapReport`],
//! [`MergeReport`]).

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use trackgnn_simulate::Generator;
use trackgnn_simulate::primaries::Produced;
use trackgnn_trackml::csv::{EventFiles, ReadOptions, discover_events, read_event};
use trackgnn_trackml::{Detector, Event};

use crate::error::{Error, Result};
use crate::module_map::{MapConfig, ModuleMap};

mod report;
pub use report::{MapReport, MergeReport};

/// Where a module map's training events come from.
pub enum MapEvents {
    /// Event files (with truth and particles) found in a directory.
    Files(Vec<EventFiles>),
    /// Events `ids` drawn from `generator` with `seed`, keeping only the primaries the map can use.
    Generated {
        /// The generator (its detector and configuration).
        generator: Box<Generator>,
        /// The seed of the drawn events.
        seed: u64,
        /// The event ids drawn.
        ids: Vec<u64>,
    },
}

impl MapEvents {
    /// The events found in `dir` ([`discover_events`]: sorted by event id), the first `limit`
    /// of them if given.
    ///
    /// # Errors
    /// A directory that does not exist, holds no event or cannot be listed.
    pub fn in_dir(dir: &Path, limit: Option<usize>) -> Result<MapEvents> {
        let mut events = discover_events(dir)?;
        if let Some(n) = limit {
            events.truncate(n);
        }
        Ok(MapEvents::Files(events))
    }

    /// `count` events drawn by `generator` with `seed`, numbered from `first_event`, at most
    /// `limit` of them if given.
    pub fn drawn(generator: Generator, seed: u64, first_event: u64, count: u64, limit: Option<usize>) -> MapEvents {
        let count = limit.map_or(count, |l| count.min(l as u64));
        MapEvents::Generated { generator: Box::new(generator), seed, ids: (first_event..first_event + count).collect() }
    }

    /// Number of events.
    pub fn len(&self) -> usize {
        match self {
            MapEvents::Files(f) => f.len(),
            MapEvents::Generated { ids, .. } => ids.len(),
        }
    }

    /// True if there are no events.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Event `k`, with truth and particles: read, or drawn with only the primaries that can give
    /// `config`'s map an edge ([`MapConfig::keeps_primary`]).
    pub fn event(&self, k: usize, config: &MapConfig) -> Result<Event> {
        match self {
            MapEvents::Files(files) => {
                let opts = ReadOptions { truth: true, particles: true, cells: false };
                Ok(read_event(&files[k], opts)?)
            }
            MapEvents::Generated { generator, seed, ids } => {
                let keep =
                    |p: &Produced| config.keeps_primary(p.momentum[0].hypot(p.momentum[1]), p.species.is_charged());
                Ok(generator.event_of(*seed, ids[k], keep, false).0)
            }
        }
    }
}

/// The map `config` learns from every event of `events`, events in parallel (on the current
/// rayon pool); `on_event` is called after each event (progress).
pub fn learn(
    events: &MapEvents,
    config: &MapConfig,
    det: &Detector,
    on_event: &(dyn Fn() + Sync),
) -> Result<ModuleMap> {
    (0..events.len())
        .into_par_iter()
        .try_fold(
            || ModuleMap::new(config.clone()),
            |mut map, k| -> Result<ModuleMap> {
                map.add_training_event(&events.event(k, config)?, det)?;
                on_event();
                Ok(map)
            },
        )
        .try_reduce(
            || ModuleMap::new(config.clone()),
            |mut a, b| {
                a.merge(&b);
                Ok(a)
            },
        )
}

/// Merges maps learned on different events, `(file, map)` in order: the ranges widened to
/// cover all, the events added up. Their targets must agree (an [`Error::Inconsistent`] names
/// the first file that differs); the merged map holds secondaries if any map recorded them
/// (the widest vertex cut wins). `None` for no maps.
pub fn merge_maps(maps: impl IntoIterator<Item = (PathBuf, ModuleMap)>) -> Result<Option<ModuleMap>> {
    let mut merged: Option<(PathBuf, ModuleMap)> = None;
    for (path, map) in maps {
        let Some((first, m)) = &mut merged else {
            merged = Some((path, map));
            continue;
        };
        if m.config.target != map.config.target {
            return Err(Error::inconsistent(
                &path,
                format!(
                    "target {:?} differs from {}'s {:?}; maps of different targets cannot be merged",
                    map.config.target,
                    first.display(),
                    m.config.target
                ),
            ));
        }
        m.merge(&map);
        m.config.max_vertex_r = match (m.config.max_vertex_r, map.config.max_vertex_r) {
            (Some(x), Some(y)) => Some(x.max(y)),
            _ => None,
        };
    }
    Ok(merged.map(|(_, m)| m))
}

#[cfg(test)]
mod tests {
    use trackgnn_simulate::SimConfig;

    use super::*;
    use crate::truth::TargetConfig;

    fn drawn(ids: std::ops::Range<u64>) -> MapEvents {
        let generator = Generator::new(Detector::trackml(), SimConfig { pileup: 1.0, ..SimConfig::default() });
        MapEvents::Generated { generator: Box::new(generator), seed: 5, ids: ids.collect() }
    }

    #[test]
    fn drawn_events_are_numbered_from_the_first_and_capped_by_the_limit() {
        let generator = || Generator::new(Detector::trackml(), SimConfig::default());
        let ids = |e: MapEvents| match e {
            MapEvents::Generated { ids, seed: 9, .. } => ids,
            _ => panic!("not drawn with seed 9"),
        };
        assert_eq!(ids(MapEvents::drawn(generator(), 9, 5, 3, None)), [5, 6, 7]);
        assert_eq!(ids(MapEvents::drawn(generator(), 9, 5, 3, Some(2))), [5, 6]);
        assert_eq!(ids(MapEvents::drawn(generator(), 9, 5, 3, Some(10))), [5, 6, 7], "the limit is a cap");
    }

    #[test]
    fn events_in_a_directory_are_sorted_and_capped_by_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        for id in [12, 3, 7] {
            std::fs::write(dir.path().join(format!("event{id:09}-hits.csv")), "").unwrap();
        }
        let ids = |e: MapEvents| match e {
            MapEvents::Files(f) => f.iter().map(|f| f.event_id).collect::<Vec<_>>(),
            _ => panic!("not files"),
        };
        assert_eq!(ids(MapEvents::in_dir(dir.path(), None).unwrap()), [3, 7, 12]);
        assert_eq!(ids(MapEvents::in_dir(dir.path(), Some(2)).unwrap()), [3, 7]);
        let Err(e) = MapEvents::in_dir(&dir.path().join("nowhere"), None) else { panic!("a missing directory") };
        assert!(e.to_string().contains("nowhere"), "{e}");
    }

    #[test]
    fn learning_in_parallel_equals_learning_in_turn_and_merging() {
        let (config, det) = (MapConfig::default(), Detector::trackml());
        let all = learn(&drawn(1..4), &config, &det, &|| {}).unwrap();
        assert_eq!(all.events, 3);
        assert!(!all.is_empty());
        let mut one_by_one = ModuleMap::new(config.clone());
        for k in 0..3 {
            one_by_one.add_training_event(&drawn(1..4).event(k, &config).unwrap(), &det).unwrap();
        }
        assert_eq!(all, one_by_one);
        let parts = [(PathBuf::from("a"), learn(&drawn(1..2), &config, &det, &|| {}).unwrap())]
            .into_iter()
            .chain([(PathBuf::from("b"), learn(&drawn(2..4), &config, &det, &|| {}).unwrap())]);
        assert_eq!(merge_maps(parts).unwrap(), Some(all));
    }

    #[test]
    fn drawn_events_propagate_only_the_primaries_the_map_uses() {
        let config = MapConfig::default();
        let event = drawn(1..2).event(0, &config).unwrap();
        let p = event.particles.as_ref().unwrap();
        let prompt: Vec<usize> = (0..p.len()).filter(|&i| p.vertex_r(i) < 0.5).collect();
        assert!(!prompt.is_empty());
        assert!(prompt.iter().all(|&i| p.q[i] != 0 && p.pt(i) >= config.target.pt_min));
        let (full, _) =
            Generator::new(Detector::trackml(), SimConfig { pileup: 1.0, ..SimConfig::default() }).event(5, 1);
        assert!(full.particles.unwrap().len() > p.len());
    }

    #[test]
    fn merging_keeps_secondaries_and_refuses_other_targets() {
        let prompt = ModuleMap::new(MapConfig::default());
        let all = ModuleMap::new(MapConfig { max_vertex_r: None, ..MapConfig::default() });
        let m = merge_maps([("a".into(), prompt.clone()), ("b".into(), all)]).unwrap().unwrap();
        assert_eq!(m.config.max_vertex_r, None);
        let other =
            ModuleMap::new(MapConfig { target: TargetConfig { pt_min: 0.5, min_hits: 3 }, max_vertex_r: Some(1.0) });
        let e = merge_maps([("a".into(), prompt), ("b".into(), other)]).unwrap_err().to_string();
        assert!(e.starts_with("b: target") && e.contains("differs from a's"), "{e}");
        assert!(merge_maps(Vec::new()).unwrap().is_none());
    }

    #[test]
    fn learning_and_merging_report_the_maps() {
        let (config, det) = (MapConfig::default(), Detector::trackml());
        let events = drawn(1..3);
        let map = learn(&events, &config, &det, &|| {}).unwrap();
        let report = MapReport::new(std::path::Path::new("m.bin"), &map, &events, 1234, 0.31);
        assert_eq!((report.simulated, report.pileup, report.seed), (true, Some(1.0), Some(5)));
        let line = report.to_string();
        assert!(
            line.starts_with(
                "module map from 2 generated mu=1 events (seed 5) (particles with pT >= 1 GeV, >= 3 hits): "
            )
        );
        assert!(line.ends_with(" module triplets, 1234 bytes, 0.3 s -> m.bin\n"), "{line}");
        let files = MapReport::new(std::path::Path::new("m.bin"), &map, &MapEvents::Files(Vec::new()), 1, 0.0);
        assert!(files.to_string().starts_with("module map from 2 events (") && files.seed.is_none());
        let maps = [PathBuf::from("a"), PathBuf::from("b")];
        let merged = MergeReport::new(std::path::Path::new("ab.bin"), &maps, &map, 99).to_string();
        assert_eq!(
            merged,
            format!(
                "merged 2 maps (2 events): {} module pairs, {} module triplets, 99 bytes -> ab.bin\n",
                map.len(),
                map.triplet_count()
            )
        );
    }
}
