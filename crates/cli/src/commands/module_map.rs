//! `trackgnn module-map build`: learn a module map from training events.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use rayon::prelude::*;
use serde_json::json;
use trackgnn_graph::ModuleMap;
use trackgnn_graph::features::{HitTable, NodeCuts};
use trackgnn_graph::module_map::MapConfig;
use trackgnn_graph::truth::{TargetConfig, truth_edges};
use trackgnn_trackml::csv::{ReadOptions, discover_events, read_event};

use crate::cli::ModuleMapBuildArgs;
use crate::progress;
use crate::util::{load_detector, print_json, thread_pool};

pub fn build(a: ModuleMapBuildArgs) -> Result<ExitCode> {
    let det = load_detector(a.detector.detector.as_deref())?;
    let mut events = discover_events(&a.input)?;
    if let Some(n) = a.events {
        anyhow::ensure!(n > 0, "--events must be at least 1");
        events.truncate(n);
    }
    let target = TargetConfig { pt_min: a.pt_min, min_hits: a.min_hits };
    let config =
        MapConfig { target: target.clone(), max_vertex_r: if a.all_particles { None } else { Some(a.max_vertex_r) } };
    let cuts = NodeCuts { pt_min: Some(a.pt_min), remove_noise: true, eta_range: None };
    let pool = thread_pool(a.threads)?;
    let pb = progress::bar(events.len() as u64, "module map");
    let t = Instant::now();
    let map = pool.install(|| {
        events
            .par_iter()
            .try_fold(
                || ModuleMap::new(config.clone()),
                |mut map, files| -> Result<ModuleMap> {
                    let opts = ReadOptions { truth: true, particles: true, cells: false };
                    let event = read_event(files, opts)?;
                    let table = HitTable::build(&event, &det, &cuts)?;
                    map.add_event(&table, &truth_edges(&table, &target));
                    pb.inc(1);
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
    })?;
    pb.finish_and_clear();
    let seconds = t.elapsed().as_secs_f64();
    let bytes = map.save(&a.out).with_context(|| format!("writing {}", a.out.display()))?;
    if a.json {
        print_json(&json!({
            "out": a.out, "events": map.events, "module_pairs": map.len(), "bytes": bytes,
            "pt_min_gev": a.pt_min, "min_hits": a.min_hits, "max_vertex_r_mm": map.config.max_vertex_r, "seconds": seconds,
        }));
    } else {
        println!(
            "module map from {} events (particles with pT >= {} GeV, >= {} hits): {} module pairs, {} bytes, {:.1} s -> {}",
            map.events,
            a.pt_min,
            a.min_hits,
            map.len(),
            bytes,
            seconds,
            a.out.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
