//! `trackgnn build-graphs`: events → graph files, with the recipe recorded beside them.

use std::fs;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::json;
use trackgnn_graph::dataset::{BuildSummary, BuiltEvent, build_graphs};
use trackgnn_graph::metric::MetricLearningConfig;
use trackgnn_graph::module_map::file_hash;
use trackgnn_graph::sectors::SectorConfig;
use trackgnn_graph::{GraphRecipe, Method, ModuleMap};
use trackgnn_trackml::csv::discover_events;
use trackgnn_train::metric_learning::LearnedStages;
use trackgnn_train::metric_learning::embedding::EmbeddingModel;
use trackgnn_train::metric_learning::filter::FilterModel;

use crate::cli::GraphMethod;
use crate::progress;
use crate::util::{load_detector, print_json, thread_pool, write_atomic};

/// `trackgnn build-graphs`.
#[derive(Debug, clap::Args)]
pub struct BuildGraphsArgs {
    /// Directory of events.
    #[arg(long, value_name = "DIR")]
    pub input: std::path::PathBuf,
    /// Output directory for the graph files and recipe.toml.
    #[arg(long, value_name = "DIR")]
    pub out: std::path::PathBuf,
    /// Edge builder.
    #[arg(long, value_enum, default_value_t = GraphMethod::Geometric)]
    pub method: GraphMethod,
    /// Module map file (for --method module-map).
    #[arg(long, value_name = "FILE")]
    pub map: Option<std::path::PathBuf>,
    /// Truth hard cut: keep only hits of particles with pT at least this \[GeV\] (drops noise).
    #[arg(long)]
    pub pt_min: Option<f64>,
    /// Drop noise hits (truth-based).
    #[arg(long)]
    pub remove_noise: bool,
    /// Relative margin around the module map's ranges.
    #[arg(long)]
    pub margin: Option<f64>,
    /// Module map: keep doublets without the triplet stage (no triplet window, no shortcut
    /// removal).
    #[arg(long)]
    pub no_triplets: bool,
    /// Module map: keep edges a → c that skip a hit b of a consistent triplet a → b → c.
    #[arg(long)]
    pub keep_shortcuts: bool,
    /// Geometric builder: largest |dphi/dr| [rad/mm].
    #[arg(long)]
    pub phi_slope_max: Option<f64>,
    /// Geometric builder: largest |z0| \[mm\].
    #[arg(long)]
    pub z0_max: Option<f64>,
    /// Geometric builder: layers a pair may skip.
    #[arg(long)]
    pub skip_layers: Option<usize>,
    /// Write sector graphs instead of whole events: PHIxETA sectors, e.g. 8x2.
    #[arg(long, value_name = "PHIxETA")]
    pub sectors: Option<String>,
    /// Overlap of the sectors on each side: PHI_RAD,ETA (default 0.3,0.3).
    #[arg(long, value_name = "PHI,ETA")]
    pub sector_overlap: Option<String>,
    /// Metric-learning and hybrid methods: the embedding run (`trackgnn train-embedding`).
    #[arg(long, value_name = "RUN")]
    pub embedding: Option<std::path::PathBuf>,
    /// Metric-learning and hybrid methods: the edge filter run (`trackgnn train-filter`).
    #[arg(long, value_name = "RUN")]
    pub filter: Option<std::path::PathBuf>,
    /// Radius of the embedding graph (default: the embedding's margin).
    #[arg(long)]
    pub radius: Option<f64>,
    /// Neighbours per hit of the embedding graph (default: the embedding's k_max).
    #[arg(long)]
    pub k_max: Option<usize>,
    /// Edges with a filter score below this are dropped (default: the filter's cut).
    #[arg(long)]
    pub filter_cut: Option<f64>,
    /// Also print, side by side, the summaries of these earlier graph directories
    /// (their build-summary.json).
    #[arg(long, value_name = "DIR")]
    pub compare: Vec<std::path::PathBuf>,
    /// A graph recipe (TOML, the keys of `GraphRecipe`); flags win over it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub events: crate::cli::EventsArg,
    #[command(flatten)]
    pub threads: crate::cli::ThreadsArg,
    #[command(flatten)]
    pub json: crate::cli::JsonArg,
    #[command(flatten)]
    pub detector: crate::cli::DetectorArg,
}

/// The recipe: the TOML file if given, then the flags.
fn resolve_recipe(a: &BuildGraphsArgs) -> Result<GraphRecipe> {
    let method = a.method;
    let mut r = match &a.config {
        Some(p) => {
            let text = fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            toml::from_str(&text).with_context(|| format!("{}: invalid graph recipe", p.display()))?
        }
        None => GraphRecipe::new(method),
    };
    r.method = method;
    if let Some(pt) = a.pt_min {
        r.node_cuts.pt_min = Some(pt);
        r.node_cuts.remove_noise = true;
    }
    if a.remove_noise {
        r.node_cuts.remove_noise = true;
    }
    if let Some(m) = a.margin {
        r.map_margin.relative = m;
    }
    if a.no_triplets {
        r.map_margin.triplets = false;
        r.map_margin.drop_shortcuts = false;
    }
    if a.keep_shortcuts {
        r.map_margin.drop_shortcuts = false;
    }
    if let Some(v) = a.phi_slope_max {
        r.geometric.phi_slope_max = v;
    }
    if let Some(v) = a.z0_max {
        r.geometric.z0_max = v;
    }
    if let Some(v) = a.skip_layers {
        r.geometric.skip_layers = v;
    }
    if let Some(p) = &a.map {
        r.map_file = Some(fs::canonicalize(p).unwrap_or_else(|_| p.clone()).display().to_string());
        r.map_hash = Some(file_hash(p)?);
    }
    resolve_metric_learning(a, &mut r)?;
    anyhow::ensure!(
        !r.needs_map() || r.map_file.is_some(),
        "--method {} needs --map FILE (build one with `trackgnn module-map build`)",
        method_name(r.method)
    );
    anyhow::ensure!(
        !r.needs_embedding() || r.metric_learning.is_some(),
        "--method {} needs --embedding RUN (train one with `trackgnn train-embedding`)",
        method_name(r.method)
    );
    if let Some(spec) = &a.sectors {
        let (p, e) = spec.split_once('x').context("--sectors PHIxETA, e.g. 8x2")?;
        let (op, oe) = match &a.sector_overlap {
            Some(o) => {
                let (x, y) = o.split_once(',').context("--sector-overlap PHI_RAD,ETA, e.g. 0.3,0.3")?;
                (x.trim().parse().context("--sector-overlap φ")?, y.trim().parse().context("--sector-overlap η")?)
            }
            None => (0.3, 0.3),
        };
        let cfg = SectorConfig::new(
            p.trim().parse().context("--sectors φ")?,
            e.trim().parse().context("--sectors η")?,
            op,
            oe,
        );
        anyhow::ensure!(cfg.len() > 1, "--sectors must make more than one sector");
        r.sectors = Some(cfg);
    }
    r.truth_cuts_applied = r.node_cuts.uses_truth();
    Ok(r)
}

/// The method as written on the command line.
fn method_name(m: Method) -> String {
    serde_json::to_value(m).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

/// The `[metric_learning]` part of the recipe from --embedding, --filter and the cuts.
fn resolve_metric_learning(a: &BuildGraphsArgs, r: &mut GraphRecipe) -> Result<()> {
    let canonical = |p: &std::path::Path| fs::canonicalize(p).unwrap_or_else(|_| p.to_owned()).display().to_string();
    if let Some(run) = &a.embedding {
        let emb = EmbeddingModel::load(run)?;
        let ml = r.metric_learning.get_or_insert_with(|| MetricLearningConfig {
            embedding_run: String::new(),
            embedding_hash: None,
            radius: emb.config.margin,
            k_max: emb.config.k_max,
            filter_run: None,
            filter_hash: None,
            filter_cut: 0.1,
        });
        ml.embedding_run = canonical(run);
        ml.embedding_hash = Some(file_hash(&run.join(trackgnn_train::run_dir::BEST_FILE))?);
    }
    if let Some(run) = &a.filter {
        let filter = FilterModel::load(run)?;
        let ml = r.metric_learning.as_mut().context("--filter needs --embedding RUN")?;
        ml.filter_run = Some(canonical(run));
        ml.filter_hash = Some(file_hash(&run.join(trackgnn_train::run_dir::BEST_FILE))?);
        ml.filter_cut = filter.config.cut;
    }
    if let Some(ml) = r.metric_learning.as_mut() {
        if let Some(v) = a.radius {
            ml.radius = v;
        }
        if let Some(v) = a.k_max {
            ml.k_max = v;
        }
        if let Some(v) = a.filter_cut {
            ml.filter_cut = v;
        }
    } else {
        anyhow::ensure!(
            a.radius.is_none() && a.k_max.is_none() && a.filter_cut.is_none(),
            "--radius, --k-max and --filter-cut need --embedding RUN"
        );
    }
    Ok(())
}

/// The summary every build writes into its graph directory, for `--compare`.
pub const SUMMARY_FILE: &str = "build-summary.json";

pub fn run(a: BuildGraphsArgs) -> Result<ExitCode> {
    let recipe = resolve_recipe(&a)?;
    let det = load_detector(a.detector.detector.as_deref())?;
    let map = match &recipe.map_file {
        Some(p) if recipe.needs_map() => Some(ModuleMap::load(p.as_ref())?),
        _ => None,
    };
    let learned = LearnedStages::load(&recipe)?;
    let stages = learned.stages(map.as_ref());
    let compared: Vec<serde_json::Value> = a
        .compare
        .iter()
        .map(|d| {
            let p = d.join(SUMMARY_FILE);
            let text = fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
            serde_json::from_str(&text).with_context(|| format!("{}: invalid build summary", p.display()))
        })
        .collect::<Result<_>>()?;
    let mut events = discover_events(&a.input)?;
    if let Some(n) = a.events.events {
        events.truncate(n);
    }
    fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let pool = thread_pool(a.threads.threads)?;
    let pb = progress::bar(events.len() as u64, "build graphs");
    let wall = Instant::now();
    let built = pool.install(|| build_graphs(&events, &det, &recipe, stages, &a.out, &|| pb.inc(1)))?;
    pb.finish_and_clear();
    report(&a, &recipe, &built, wall.elapsed().as_secs_f64(), &compared)?;
    Ok(ExitCode::SUCCESS)
}

fn report(
    a: &BuildGraphsArgs,
    recipe: &GraphRecipe,
    built: &[BuiltEvent],
    wall_s: f64,
    compared: &[serde_json::Value],
) -> Result<()> {
    let summary = BuildSummary::of(built, recipe.sectors.is_some(), wall_s);
    let saved = json!({"out": a.out, "method": recipe.method, "summary": summary});
    write_atomic(&a.out.join(SUMMARY_FILE), serde_json::to_string_pretty(&saved)?.as_bytes())?;
    let mut methods: Vec<&serde_json::Value> = compared.iter().collect();
    methods.push(&saved);
    if a.json.json {
        print_json(&json!({
            "out": a.out, "method": recipe.method, "recipe": recipe,
            "per_event": built.iter().map(|b| &b.stats).collect::<Vec<_>>(), "summary": summary,
            "compare": if compared.is_empty() { serde_json::Value::Null } else { json!(methods) },
        }));
        return Ok(());
    }
    println!(
        "{:>9} {:>8} {:>9} {:>9} {:>9} {:>10} {:>8} {:>8}",
        "event", "nodes", "edges", "true", "target", "efficiency", "purity", "build s"
    );
    for s in built.iter().map(|b| &b.stats) {
        println!(
            "{:>9} {:>8} {:>9} {:>9} {:>9} {:>10.4} {:>8.4} {:>8.3}",
            s.event_id, s.nodes, s.edges, s.true_edges, s.target_edges, s.efficiency, s.purity, s.build_seconds
        );
    }
    if let (Some(c), Some(cfg)) = (summary.sector_coverage, &recipe.sectors) {
        println!(
            "{} φ × {} η sectors (overlap {} rad, {} in η): {:.4} of the target edges of the whole events are in a sector graph",
            cfg.n_phi, cfg.n_eta, cfg.overlap_phi, cfg.overlap_eta, c
        );
    }
    println!(
        "{} graphs ({:?}) in {}: per event {:.0} nodes, {:.0} edges; graph efficiency {:.4} (mean {:.4}), graph purity {:.4} (mean {:.4}); build {:.3} s per event, {:.1} MB written",
        built.len(),
        recipe.method,
        a.out.display(),
        summary.nodes_per_event,
        summary.edges_per_event,
        summary.efficiency_total,
        summary.efficiency_mean,
        summary.purity_total,
        summary.purity_mean,
        summary.build_seconds_per_event,
        summary.bytes_written as f64 / 1e6
    );
    if BuildSummary::has_targets(built) {
        println!(
            "graph efficiency over target edges of prompt particles (produced within {} mm of the beam line) {:.4}, of secondaries {:.4} ({:.3} of the target edges)",
            trackgnn_graph::recipe::PROMPT_R,
            summary.efficiency_prompt_total,
            summary.efficiency_secondary_total,
            summary.secondary_target_fraction
        );
    }
    if !compared.is_empty() {
        print_side_by_side(&methods);
    }
    Ok(())
}

/// One row per graph directory: edges per event, graph efficiency over prompt and secondary
/// target edges, purity, build seconds per event.
fn print_side_by_side(methods: &[&serde_json::Value]) {
    println!(
        "{:<16} {:>12} {:>11} {:>11} {:>11} {:>8} {:>9}  directory",
        "method", "edges/event", "eff prompt", "eff second", "eff all", "purity", "build s"
    );
    for m in methods {
        let s = &m["summary"];
        let f = |k: &str| s[k].as_f64().unwrap_or(f64::NAN);
        println!(
            "{:<16} {:>12.0} {:>11.4} {:>11.4} {:>11.4} {:>8.4} {:>9.3}  {}",
            m["method"].as_str().unwrap_or("?"),
            f("edges_per_event"),
            f("efficiency_prompt_total"),
            f("efficiency_secondary_total"),
            f("efficiency_total"),
            f("purity_total"),
            f("build_seconds_per_event"),
            m["out"].as_str().unwrap_or("?")
        );
    }
}
