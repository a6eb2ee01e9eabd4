//! `trackgnn build-graphs`: events → graph files, with the recipe recorded beside them.

use std::fs;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::json;
use trackgnn_graph::dataset::{BuildReport, BuildSummary, Comparison, SavedSummary, build_graphs, read_summary};
use trackgnn_graph::recipe::RecipeOverrides;
use trackgnn_graph::sectors::SectorConfig;
use trackgnn_graph::{GraphMethod, GraphRecipe, ModuleMap};
use trackgnn_train::metric_learning::{LearnedStages, embedding_run, filter_run};

use crate::progress;
use crate::util::{load_detector, print_json, thread_pool};

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

/// The recipe: the TOML file if given (else the method's defaults), then the flags.
fn resolve_recipe(a: &BuildGraphsArgs) -> Result<GraphRecipe> {
    let method = a.method;
    let base = match &a.config {
        Some(p) => GraphRecipe::read(p)?,
        None => GraphRecipe::new(method),
    };
    let flags = RecipeOverrides {
        method: Some(method),
        pt_min: a.pt_min,
        remove_noise: a.remove_noise,
        margin: a.margin,
        no_triplets: a.no_triplets,
        keep_shortcuts: a.keep_shortcuts,
        phi_slope_max: a.phi_slope_max,
        z0_max: a.z0_max,
        skip_layers: a.skip_layers,
        map: a.map.clone(),
        embedding: a.embedding.as_deref().map(embedding_run).transpose()?,
        filter: a.filter.as_deref().map(filter_run).transpose()?,
        radius: a.radius,
        k_max: a.k_max,
        filter_cut: a.filter_cut,
        sectors: a.sectors.as_deref().map(|s| SectorConfig::parse(s, a.sector_overlap.as_deref())).transpose()?,
    };
    Ok(flags.apply(base)?)
}

pub fn run(a: BuildGraphsArgs) -> Result<ExitCode> {
    let recipe = resolve_recipe(&a)?;
    let det = load_detector(a.detector.detector.as_deref())?;
    let map = match &recipe.map_file {
        Some(p) if recipe.needs_map() => Some(ModuleMap::load(p.as_ref())?),
        _ => None,
    };
    let learned = LearnedStages::load(&recipe)?;
    let stages = learned.stages(map.as_ref());
    let compared = a.compare.iter().map(|d| read_summary(d)).collect::<Result<Vec<_>, _>>()?;
    let events = a.events.discover(&a.input)?;
    fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let pool = thread_pool(a.threads.threads)?;
    let pb = progress::bar(events.len() as u64, "build graphs");
    let wall = Instant::now();
    let built = pool.install(|| build_graphs(&events, &det, &recipe, stages, &a.out, &|| pb.inc(1)))?;
    pb.finish_and_clear();
    let summary = BuildSummary::of(&built, recipe.sectors.is_some(), wall.elapsed().as_secs_f64());
    let saved = SavedSummary { out: &a.out, method: recipe.method, summary: &summary }.write()?;
    let methods: Vec<serde_json::Value> = compared.iter().cloned().chain([saved]).collect();
    if a.json.json {
        print_json(&json!({
            "out": a.out, "method": recipe.method, "recipe": recipe,
            "per_event": built.iter().map(|b| &b.stats).collect::<Vec<_>>(), "summary": summary,
            "compare": if compared.is_empty() { serde_json::Value::Null } else { json!(methods) },
        }));
    } else {
        print!("{}", BuildReport { out: &a.out, recipe: &recipe, built: &built, summary: &summary });
        if !compared.is_empty() {
            print!("{}", Comparison(&methods));
        }
    }
    Ok(ExitCode::SUCCESS)
}
