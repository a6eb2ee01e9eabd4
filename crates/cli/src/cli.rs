//! Command-line arguments (clap derive): one subcommand per stage of the pipeline.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

// Each command's arguments live beside the command; they are named here too.
pub use crate::commands::bench_engine::BenchEngineArgs;
pub use crate::commands::bench_io::BenchIoArgs;
pub use crate::commands::build_graphs::BuildGraphsArgs;
pub use crate::commands::geometry::GeometryArgs;
pub use crate::commands::inspect::InspectArgs;
pub use crate::commands::parity::ExportParityArgs;
pub use crate::commands::simulate::SimulateArgs;

/// trackgnn: graph neural networks for particle tracking, from one core to many MPI ranks.
#[derive(Debug, Parser)]
#[command(name = "trackgnn", version, about, long_about = None, args_override_self = true)]
pub struct Cli {
    /// The stage to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The whole pipeline on a small generated data set in a few minutes (start here).
    Demo(DemoArgs),
    /// Generate TrackML-format events with the Monte Carlo generator.
    Simulate(SimulateArgs),
    /// Write the detector geometry as detectors.csv.
    Geometry(GeometryArgs),
    /// Summarise an event or a directory of events: realism statistics and consistency checks.
    Inspect(InspectArgs),
    /// Module maps: which module pairs real tracks join.
    #[command(subcommand, name = "module-map")]
    ModuleMap(ModuleMapCommand),
    /// Build graphs (nodes = hits, edges = candidate segments) from events.
    BuildGraphs(BuildGraphsArgs),
    /// Train the edge classifier on a graph directory.
    Train(TrainArgs),
    /// Evaluate a run on graphs: the edge metrics of the reference table.
    Eval(EvalArgs),
    /// Build track candidates with a trained run: TrackML submissions, track metrics, plots.
    Reconstruct(ReconstructArgs),
    /// Scaling study: train with 1, 2, … MPI ranks and compare, or predict more ranks.
    Scaling(ScalingArgs),
    /// Write a model's weights, a graph, the loss and all gradients for tools/parity.py.
    ExportParity(ExportParityArgs),
    /// Benchmarks that print figures.
    #[command(subcommand)]
    Bench(BenchCommand),
}

/// Where the detector geometry comes from.
#[derive(Debug, Args, Clone, Default)]
pub struct DetectorArg {
    /// A detectors.csv to use instead of the built-in TrackML geometry.
    #[arg(long, value_name = "FILE")]
    pub detector: Option<PathBuf>,
}

/// `trackgnn demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Directory for everything the demo makes.
    #[arg(long, value_name = "DIR", default_value = "trackgnn-demo")]
    pub out: PathBuf,
    /// Threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
}

/// `trackgnn module-map …`.
#[derive(Debug, Subcommand)]
pub enum ModuleMapCommand {
    /// Learn a module map from training events.
    Build(ModuleMapBuildArgs),
    /// Merge module maps learned on different events into one (ranges widened to cover all).
    Merge(ModuleMapMergeArgs),
}

/// `trackgnn module-map merge`.
#[derive(Debug, Args)]
pub struct ModuleMapMergeArgs {
    /// The maps to merge (same target definition).
    #[arg(required = true, num_args = 2.., value_name = "MAP")]
    pub maps: Vec<PathBuf>,
    /// Where to write the merged map.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
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
    /// Use only the first N events of the directory.
    #[arg(long)]
    pub events: Option<usize>,
    /// Worker threads.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub detector: DetectorArg,
}

/// The edge builder of `build-graphs`.
#[derive(Debug, Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
pub enum GraphMethod {
    /// Layer pairs with phi-slope and z0 cuts, plus same-layer overlaps.
    Geometric,
    /// Module pairs of a module map (needs --map).
    ModuleMap,
}

/// `--lr-scaling`.
#[derive(Debug, Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
pub enum LrScalingArg {
    /// The same learning rate at any number of ranks.
    None,
    /// × ranks.
    Linear,
    /// × √ranks.
    Sqrt,
}

/// `--sampler`.
#[derive(Debug, Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
pub enum SamplerArg {
    /// A random permutation per epoch.
    Random,
    /// Steps draw their graphs from one size bin.
    Balanced,
}

/// `--oversize`.
#[derive(Debug, Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
pub enum OversizeArg {
    /// Cut the graph into overlapping φ sectors trained in one step.
    Split,
    /// Leave the graph out of training.
    Skip,
}

// The one place where the options that mirror library enums become them (as ripgrep's
// `HiArgs::from_low_args`): the libraries stay free of clap, and a command converts with `.into()`.

impl From<LrScalingArg> for trackgnn_train::config::LrScaling {
    fn from(a: LrScalingArg) -> Self {
        match a {
            LrScalingArg::None => Self::None,
            LrScalingArg::Linear => Self::Linear,
            LrScalingArg::Sqrt => Self::Sqrt,
        }
    }
}

impl From<SamplerArg> for trackgnn_train::config::Sampler {
    fn from(a: SamplerArg) -> Self {
        match a {
            SamplerArg::Random => Self::Random,
            SamplerArg::Balanced => Self::Balanced,
        }
    }
}

impl From<OversizeArg> for trackgnn_train::config::Oversize {
    fn from(a: OversizeArg) -> Self {
        match a {
            OversizeArg::Split => Self::Split,
            OversizeArg::Skip => Self::Skip,
        }
    }
}

impl From<TrackMethodArg> for trackgnn_reco::tracks::Method {
    fn from(a: TrackMethodArg) -> Self {
        match a {
            TrackMethodArg::Cc => Self::Cc,
            TrackMethodArg::Walkthrough => Self::Walkthrough,
            TrackMethodArg::Follow => Self::Follow,
        }
    }
}

fn parse_checkpointing(s: &str) -> Result<trackgnn_engine::Checkpointing, String> {
    s.parse()
}

/// A byte count: digits with an optional K, M, G or T suffix (powers of 1024; a trailing `B`
/// or `iB` is allowed).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let t = t.strip_suffix("iB").or_else(|| t.strip_suffix('B')).unwrap_or(t);
    let (num, shift) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 10),
        Some('M') => (&t[..t.len() - 1], 20),
        Some('G') => (&t[..t.len() - 1], 30),
        Some('T') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let v: f64 = num.trim().parse().map_err(|_| format!("`{s}` is not a byte count (e.g. 8G, 512M, 1000000)"))?;
    if !(v >= 0.0 && v.is_finite()) {
        return Err(format!("`{s}`: a byte count must be non-negative"));
    }
    Ok((v * (1u64 << shift) as f64).round() as u64)
}

/// `--regime` of `trackgnn scaling`.
#[derive(Debug, Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
pub enum RegimeArg {
    /// A fixed data set: speed-up t1 / tN, efficiency t1 / (N·tN).
    Strong,
    /// Every rank keeps the graphs per epoch of one rank (N × the graphs): throughput ratio.
    Weak,
    /// Both regimes.
    Both,
}

/// `trackgnn scaling`: measure mode (default), or `--simulate` / `--check`.
///
/// Measure: `trackgnn scaling --graphs DIR --ranks 1,2 --out DIR` launches
/// `mpirun -np N trackgnn train …` for every rank count, regime and repeat, then prints the
/// tables and writes `scaling.json` and `speedup.{png,svg}`. Simulate:
/// `trackgnn scaling --simulate --from RUN --ranks 1,2,4,…,64` predicts more ranks from a
/// measured run; `--check SCALING_JSON` also compares the predictions with measured runs.
#[derive(Debug, Args)]
pub struct ScalingArgs {
    /// Graph directory (measure mode; in simulate mode: where the run's graphs are now, if moved).
    #[arg(long, value_name = "DIR")]
    pub graphs: Option<PathBuf>,
    /// Rank counts, comma separated; must include 1 (default: 1,2 to measure,
    /// 1,2,4,8,16,32,64 to simulate).
    #[arg(long, value_name = "LIST")]
    pub ranks: Option<String>,
    /// Threads per rank (`train --threads`; default 1 to measure, the run's to simulate).
    #[arg(long)]
    pub threads_per_rank: Option<usize>,
    /// Epochs of every measured run (the first is not timed when there are several).
    #[arg(long, default_value_t = 2)]
    pub epochs: usize,
    /// Step sampler (default: balanced to measure, both to simulate).
    #[arg(long, value_enum)]
    pub sampler: Option<SamplerArg>,
    /// Runs per configuration; speed-ups use the fastest.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Graphs of one rank (`train --max-graphs`): the strong data set, and each rank's share in
    /// weak scaling (N ranks use N × it). Default: all graphs for strong, all / the largest
    /// rank count for weak.
    #[arg(long)]
    pub max_graphs: Option<usize>,
    /// Scaling regimes.
    #[arg(long, value_enum, default_value_t = RegimeArg::Both)]
    pub regime: RegimeArg,
    /// Output directory: runs/, logs, scaling.json, speed-up plots (simulate: simulation.json).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The MPI launcher.
    #[arg(long, default_value = "mpirun")]
    pub mpirun: String,
    /// Allow more ranks than cores (`mpirun --oversubscribe`).
    #[arg(long)]
    pub oversubscribe: bool,
    /// An extra argument for the launcher (repeatable), e.g. `--mpirun-arg=--bind-to=core`.
    #[arg(long = "mpirun-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub mpirun_args: Vec<String>,
    /// Training configuration for every run (`train --config`).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Predict rank counts beyond this machine from a measured run (see --from).
    #[arg(long)]
    pub simulate: bool,
    /// The measured run to simulate from: a `train` run directory with one graph per step, or
    /// a `scaling` output directory (its fastest 1-rank strong run).
    #[arg(long, value_name = "DIR")]
    pub from: Option<PathBuf>,
    /// Compare the predictions with a measured study (its scaling.json or directory); implies
    /// --simulate, and --from defaults to the study.
    #[arg(long, value_name = "FILE")]
    pub check: Option<PathBuf>,
    /// Interconnect of the simulation from `bench allreduce --out FILE` (its fit).
    #[arg(long, value_name = "FILE")]
    pub interconnect: Option<PathBuf>,
    /// All-reduce latency α of the simulation, seconds per message (default 2e-6: InfiniBand
    /// HDR-like); wins over --interconnect.
    #[arg(long, value_name = "SECONDS")]
    pub latency: Option<f64>,
    /// All-reduce link bandwidth β of the simulation, bytes/s (default 20e9: InfiniBand
    /// HDR-like); wins over --interconnect.
    #[arg(long, value_name = "BYTES_PER_S")]
    pub bandwidth: Option<f64>,
    /// Cores the simulated ranks share (slows compute by max(1, N·threads / cores)); default:
    /// unlimited, or the --check study's.
    #[arg(long)]
    pub cores: Option<usize>,
    /// Epochs whose step draws the simulation averages.
    #[arg(long, default_value_t = 4)]
    pub sim_epochs: u64,
    /// Print one JSON object instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Further `train` arguments for every run, after `--` (e.g. `-- --hidden 64`).
    #[arg(last = true, value_name = "TRAIN_ARGS")]
    pub train_args: Vec<String>,
}

/// `trackgnn train`.
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// Graph directory (from `build-graphs`).
    #[arg(long, value_name = "DIR")]
    pub graphs: PathBuf,
    /// Run directory.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Training configuration (TOML, the keys of `TrainConfig`); flags win over it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Continue the run in --out from its last checkpoint.
    #[arg(long)]
    pub resume: bool,
    /// Epochs.
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Learning rate.
    #[arg(long)]
    pub lr: Option<f64>,
    /// Hidden width.
    #[arg(long)]
    pub hidden: Option<usize>,
    /// Message-passing iterations.
    #[arg(long)]
    pub iterations: Option<usize>,
    /// Positive-class weight of the loss.
    #[arg(long)]
    pub pos_weight: Option<f64>,
    /// Start from the weights of an earlier run (its directory, for its best.safetensors, or a
    /// weights file) instead of random ones; optimiser and schedule start afresh.
    #[arg(long, value_name = "RUN_OR_FILE")]
    pub init_weights: Option<PathBuf>,
    /// Graphs per optimiser step (per rank).
    #[arg(long)]
    pub graphs_per_step: Option<usize>,
    /// Clip the gradient norm (0: off).
    #[arg(long)]
    pub clip_grad_norm: Option<f64>,
    /// Early-stopping patience in epochs (0: off).
    #[arg(long)]
    pub early_stopping: Option<usize>,
    /// Checkpoint every N steps too (0: per epoch only).
    #[arg(long)]
    pub checkpoint_every: Option<usize>,
    /// Use at most N graphs.
    #[arg(long)]
    pub max_graphs: Option<usize>,
    /// Linear warm-up of the learning rate over this many epochs.
    #[arg(long)]
    pub warmup_epochs: Option<f64>,
    /// Learning-rate scaling with the number of ranks.
    #[arg(long, value_enum)]
    pub lr_scaling: Option<LrScalingArg>,
    /// Step sampler.
    #[arg(long, value_enum)]
    pub sampler: Option<SamplerArg>,
    /// Threads (per rank).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Activation checkpointing: none, per-iteration or every:K (less memory, some recompute);
    /// append `+bf16` to keep the saved states in bf16 (half their bytes; e.g. every:2+bf16).
    #[arg(long, value_name = "MODE", value_parser = parse_checkpointing)]
    pub checkpointing: Option<trackgnn_engine::Checkpointing>,
    /// Arithmetic of the matrix products: f32, or bf16 (mixed precision: bf16 operands with
    /// f32 accumulation; weights, optimiser, norms, loss and scores in f32). Recorded in the run's config.toml.
    #[arg(long, value_name = "f32|bf16")]
    pub precision: Option<trackgnn_engine::Precision>,
    /// Memory budget of a training step, bytes (suffixes K, M, G, T: powers of 1024; 0: none).
    /// A graph over it is cut into φ sectors, or skipped with `--oversize skip`.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub max_memory: Option<u64>,
    /// What to do with a graph over `--max-memory`.
    #[arg(long, value_enum)]
    pub oversize: Option<OversizeArg>,
    /// Largest element count per MPI call (tests use a small one to exercise chunking).
    #[arg(long, hide = true)]
    pub mpi_chunk: Option<usize>,
    /// Print one JSON object at the end instead of text.
    #[arg(long)]
    pub json: bool,
}

/// One part of a run's train/validation/test split.
#[derive(Debug, Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
pub enum SplitArg {
    /// The training events.
    Train,
    /// The validation events.
    Val,
    /// The test events.
    Test,
}

/// `trackgnn eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Run directory.
    #[arg(long, value_name = "DIR")]
    pub run: PathBuf,
    /// Graph directory. The run's test events when it is the run's own directory, else all.
    #[arg(long, value_name = "DIR")]
    pub graphs: PathBuf,
    /// Evaluate every graph of the directory, even the run's training events.
    #[arg(long)]
    pub all: bool,
    /// Which of the run's events to evaluate on its own graph directory.
    #[arg(long, value_enum, default_value = "test")]
    pub split: SplitArg,
    /// Score threshold of the edge metrics (default: the run's).
    #[arg(long)]
    pub threshold: Option<f64>,
    /// `best`, `last` or a safetensors file.
    #[arg(long, default_value = "best")]
    pub weights: String,
    /// Arithmetic of the matrix products: f32, or bf16 (mixed precision: bf16 operands with
    /// f32 accumulation; weights, optimiser, norms, loss and scores in f32). Default: the run's.
    #[arg(long, value_name = "f32|bf16")]
    pub precision: Option<trackgnn_engine::Precision>,
    /// Threads.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Track building method.
#[derive(Debug, Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
pub enum TrackMethodArg {
    /// Connected components of the edges above the cut.
    Cc,
    /// Walk along the best-scoring edges, resolving branchings.
    Walkthrough,
    /// Follow the helix along the edges down to a low score cut (for dense events).
    Follow,
}

/// `trackgnn reconstruct`.
#[derive(Debug, Args)]
pub struct ReconstructArgs {
    /// A training run directory (its recipe, config and weights).
    #[arg(long, value_name = "DIR")]
    pub run: PathBuf,
    /// Directory of events (hits; truth files are used only to score the tracks afterwards).
    #[arg(long, value_name = "DIR")]
    pub input: PathBuf,
    /// Output directory for the submission files and plots.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Edge score cut. Default: 0.5 (cc, walkthrough), 0.02 (follow, whose windows on the
    /// helix do the rest of the selection).
    #[arg(long)]
    pub score_cut: Option<f64>,
    /// Track building method.
    #[arg(long, value_enum, default_value_t = TrackMethodArg::Cc)]
    pub method: TrackMethodArg,
    /// Smallest track candidate, in hits: shorter groups are left out (their hits become
    /// singletons in the submission). 5 is the field's usual track-quality cut (acorn's
    /// `min_track_length`); 3 keeps every candidate the metrics count.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub min_hits: u32,
    /// Walk-through only: branchings whose second edge scores at least this are explored
    /// (the longest path wins). Default: the larger of 0.8 and the score cut.
    #[arg(long)]
    pub branch_cut: Option<f64>,
    /// Follow only: no hit search beyond the graph's edges (paths end where their edges do).
    #[arg(long)]
    pub no_hit_search: bool,
    /// Diagnostic, not reconstruction: score each edge 1 if it joins consecutive hits of a
    /// target particle and 0 otherwise, from the truth files, instead of the GNN. The metrics
    /// are then the ceiling that the graph and the track builder allow a perfect classifier.
    #[arg(long)]
    pub truth_scores: bool,
    /// `best`, `last` or a safetensors file.
    #[arg(long, default_value = "best")]
    pub weights: String,
    /// Arithmetic of the matrix products: f32, or bf16 (mixed precision: bf16 operands with
    /// f32 accumulation; weights, optimiser, norms, loss and scores in f32). Default: the run's.
    #[arg(long, value_name = "f32|bf16")]
    pub precision: Option<trackgnn_engine::Precision>,
    /// Use only the first N events.
    #[arg(long)]
    pub events: Option<usize>,
    /// Threads.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub detector: DetectorArg,
}

/// `trackgnn bench …`.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Event generation time and CSV write/read throughput.
    Io(BenchIoArgs),
    /// The training step of BENCH_SPEC.md (and the default model, and the unfused forward).
    Engine(BenchEngineArgs),
    /// Memory and step time against graph size, with and without activation checkpointing.
    Memory(BenchMemoryArgs),
    /// The gradient all-reduce's time against buffer size and its latency/bandwidth fit
    /// (run under `mpirun -np N`, N ≥ 2, with a trackgnn built with `--features mpi`).
    Allreduce(BenchAllreduceArgs),
}

/// `trackgnn bench allreduce`.
#[derive(Debug, Args)]
pub struct BenchAllreduceArgs {
    /// Smallest buffer, bytes (sizes grow by × 4 from it).
    #[arg(long, default_value_t = 4096)]
    pub min_bytes: usize,
    /// Largest buffer, bytes.
    #[arg(long, default_value_t = 64 << 20)]
    pub max_bytes: usize,
    /// Timed all-reduces per size (fewer for large buffers: at most 1 GiB moved per size, at
    /// least 5).
    #[arg(long, default_value_t = 50)]
    pub iters: usize,
    /// Write the points and the fit as JSON (the input of `scaling --simulate --interconnect`).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `trackgnn bench memory`.
#[derive(Debug, Args)]
pub struct BenchMemoryArgs {
    /// Graph sizes in edges, comma separated.
    #[arg(long, default_value = "100000,400000,1000000,1600000")]
    pub edges: String,
    /// Hidden width.
    #[arg(long, default_value_t = 128)]
    pub hidden: usize,
    /// Message-passing iterations.
    #[arg(long, default_value_t = 8)]
    pub iters: usize,
    /// Checkpointing modes, comma separated (none, per-iteration, every:K; `+bf16` appended keeps
    /// the saved states in bf16).
    #[arg(long, default_value = "none,per-iteration,every:4,per-iteration+bf16")]
    pub modes: String,
    /// Edges per node of the synthetic graphs (full TrackML events: about 15).
    #[arg(long, default_value_t = 15.0)]
    pub edges_per_node: f64,
    /// Timed steps per row (after one warm-up step).
    #[arg(long, default_value_t = 2)]
    pub steps: usize,
    /// Threads.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Directory for the memory-vs-size plot.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Run one row `MODE@EDGES` in this process (used internally).
    #[arg(long, hide = true)]
    pub only: Option<String>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// A configuration of `bench engine`.
#[derive(Debug, Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
pub enum EngineVariant {
    /// BENCH_SPEC.md: H=64, 4 separate iterations, ReLU, LayerNorm, residual, sum, Adam.
    BenchSpec,
    /// trackgnn's default model (H=128, 8 recurrent iterations, SiLU, sum/mean/max/std).
    Defaults,
    /// BENCH_SPEC.md's forward without the split Linear and tiles (explicit concatenation).
    Unfused,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simulate_flags_parse_and_last_one_wins() {
        let cli = Cli::try_parse_from([
            "trackgnn",
            "simulate",
            "--events",
            "3",
            "--pileup",
            "200",
            "--seed",
            "7",
            "--out",
            "d",
            "--gzip",
            "--threads",
            "2",
            "--seed",
            "8",
        ])
        .unwrap();
        let Command::Simulate(a) = cli.command else { panic!() };
        assert_eq!((a.events, a.pileup, a.seed, a.gzip, a.threads), (3, Some(200.0), 8, true, Some(2)));
        assert!(Cli::try_parse_from(["trackgnn", "simulate", "--events", "x", "--out", "d"]).is_err());
        assert!(Cli::try_parse_from(["trackgnn", "simulate"]).is_err(), "--out is required");
    }

    #[test]
    fn inspect_and_bench_parse() {
        let cli = Cli::try_parse_from(["trackgnn", "inspect", "data", "--json"]).unwrap();
        assert!(matches!(cli.command, Command::Inspect(InspectArgs { json: true, .. })));
        let cli = Cli::try_parse_from(["trackgnn", "bench", "io", "--events", "1"]).unwrap();
        assert!(matches!(cli.command, Command::Bench(BenchCommand::Io(BenchIoArgs { events: 1, .. }))));
    }

    #[test]
    fn memory_flags_parse_with_units_and_bad_values_are_errors() {
        assert_eq!(parse_bytes("8G"), Ok(8 << 30));
        assert_eq!(parse_bytes("512MiB"), Ok(512 << 20));
        assert_eq!(parse_bytes("1.5k"), Ok(1536));
        assert_eq!(parse_bytes("1000"), Ok(1000));
        assert!(parse_bytes("eight").unwrap_err().contains("eight"));
        assert!(parse_bytes("-1G").is_err());
        let cli = Cli::try_parse_from([
            "trackgnn",
            "train",
            "--graphs",
            "g",
            "--out",
            "o",
            "--max-memory",
            "6G",
            "--checkpointing",
            "every:2",
            "--oversize",
            "skip",
        ])
        .unwrap();
        let Command::Train(a) = cli.command else { panic!() };
        assert_eq!(a.max_memory, Some(6 << 30));
        assert_eq!(a.checkpointing, Some(trackgnn_engine::Checkpointing::every(2)));
        assert_eq!(a.oversize, Some(OversizeArg::Skip));
        let e = Cli::try_parse_from(["trackgnn", "train", "--graphs", "g", "--out", "o", "--checkpointing", "every:0"])
            .unwrap_err();
        assert!(e.to_string().contains("every:K"), "{e}");
    }
}
