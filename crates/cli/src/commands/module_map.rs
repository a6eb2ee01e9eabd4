//! `trackgnn module-map build` and `merge`: learn a module map from training events, merge
//! maps ([`trackgnn_graph::map_learning`] learns and merges; this command parses and prints).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use trackgnn_graph::ModuleMap;
use trackgnn_graph::map_learning::{MapEvents, MapReport, MergeReport, learn, merge_maps};
use trackgnn_graph::module_map::MapConfig;
use trackgnn_graph::truth::TargetConfig;
use trackgnn_simulate::{Generator, SimConfig, SimOverrides};
use trackgnn_trackml::Detector;

use crate::cli::DetectorArg;
use crate::progress;
use crate::util::{load_detector, print_report, thread_pool};
use clap::Args;

/// `trackgnn module-map merge`.
#[derive(Debug, Args)]
pub struct ModuleMapMergeArgs {
    /// The maps to merge (same target definition).
    #[arg(required = true, num_args = 2.., value_name = "MAP")]
    pub maps: Vec<PathBuf>,
    /// Where to write the merged map.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    #[command(flatten)]
    pub json: crate::cli::JsonArg,
}

/// `trackgnn module-map build`.
#[derive(Debug, Args)]
pub struct ModuleMapBuildArgs {
    /// Directory of training events (with truth).
    #[arg(long, value_name = "DIR", required_unless_present = "simulate", conflicts_with = "simulate")]
    pub input: Option<PathBuf>,
    /// Instead of reading events, draw this many from the generator in memory: only the prompt
    /// charged particles above --pt-min are propagated, so no event is written.
    #[arg(long, value_name = "N")]
    pub simulate: Option<u64>,
    /// With --simulate: pile-up of the drawn events.
    #[arg(long, default_value_t = 200.0, requires = "simulate")]
    pub pileup: f64,
    /// With --simulate: seed of the drawn events (use another than the evaluation events').
    #[arg(long, default_value_t = 1, requires = "simulate")]
    pub seed: u64,
    /// With --simulate: id of the first drawn event.
    #[arg(long, default_value_t = 1, requires = "simulate")]
    pub first_event: u64,
    /// Where to write the map.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Record true edges of particles with pT at least this \[GeV\].
    #[arg(long, default_value_t = 1.0)]
    pub pt_min: f64,
    /// Record true edges of particles with at least this many hits.
    #[arg(long, default_value_t = 3)]
    pub min_hits: usize,
    /// Record only particles produced within this distance of the beam line \[mm\].
    #[arg(long, default_value_t = 1.0)]
    pub max_vertex_r: f64,
    /// Record secondaries too (no vertex cut).
    #[arg(long)]
    pub all_particles: bool,
    #[command(flatten)]
    pub events: crate::cli::EventsArg,
    #[command(flatten)]
    pub threads: crate::cli::ThreadsArg,
    #[command(flatten)]
    pub json: crate::cli::JsonArg,
    #[command(flatten)]
    pub detector: DetectorArg,
}

/// The events of `--input DIR` or `--simulate N` (at most `--events`).
fn events_of_args(a: &ModuleMapBuildArgs, det: &Detector) -> Result<MapEvents> {
    if let Some(n) = a.events.events {
        anyhow::ensure!(n > 0, "--events must be at least 1");
    }
    Ok(match (&a.input, a.simulate) {
        (Some(dir), _) => MapEvents::in_dir(dir, a.events.events)?,
        (None, Some(n)) => {
            anyhow::ensure!(n > 0, "--simulate must be at least 1");
            let cfg = SimOverrides { pileup: Some(a.pileup), ..Default::default() }.apply(SimConfig::default())?;
            MapEvents::drawn(Generator::new(det.clone(), cfg), a.seed, a.first_event, n, a.events.events)
        }
        (None, None) => anyhow::bail!("give --input DIR or --simulate N"),
    })
}

pub fn build(a: ModuleMapBuildArgs) -> Result<ExitCode> {
    let det = load_detector(a.detector.detector.as_deref())?;
    let source = events_of_args(&a, &det)?;
    let target = TargetConfig { pt_min: a.pt_min, min_hits: a.min_hits };
    let config = MapConfig { target, max_vertex_r: if a.all_particles { None } else { Some(a.max_vertex_r) } };
    let pool = thread_pool(a.threads.threads)?;
    let t = Instant::now();
    let pb = progress::bar(source.len() as u64, "module map");
    let map = pool.install(|| learn(&source, &config, &det, &|| pb.inc(1)))?;
    pb.finish_and_clear();
    let seconds = t.elapsed().as_secs_f64();
    let bytes = map.save(&a.out).with_context(|| format!("writing {}", a.out.display()))?;
    let report = MapReport::new(&a.out, &map, &source, bytes, seconds);
    print_report(&report, a.json.json)?;
    Ok(ExitCode::SUCCESS)
}

pub fn merge(a: ModuleMapMergeArgs) -> Result<ExitCode> {
    let maps = a.maps.iter().map(|p| Ok((p.clone(), ModuleMap::load(p)?))).collect::<Result<Vec<_>>>()?;
    let map = merge_maps(maps)?.expect("clap requires two maps or more");
    let bytes = map.save(&a.out).with_context(|| format!("writing {}", a.out.display()))?;
    let report = MergeReport::new(&a.out, &a.maps, &map, bytes);
    print_report(&report, a.json.json)?;
    Ok(ExitCode::SUCCESS)
}
