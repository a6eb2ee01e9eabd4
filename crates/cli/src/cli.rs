//! Command-line arguments (clap derive): one subcommand per stage of the pipeline.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

// Each command's arguments live beside the command.
use crate::commands::*;

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
    Demo(demo::DemoArgs),
    /// Generate TrackML-format events with the Monte Carlo generator.
    Simulate(simulate::SimulateArgs),
    /// Write the detector geometry as detectors.csv.
    Geometry(geometry::GeometryArgs),
    /// Summarise an event or a directory of events: realism statistics and consistency checks.
    Inspect(inspect::InspectArgs),
    /// Module maps: which module pairs real tracks join.
    #[command(subcommand, name = "module-map")]
    ModuleMap(ModuleMapCommand),
    /// Build graphs (nodes = hits, edges = candidate segments) from events.
    BuildGraphs(build_graphs::BuildGraphsArgs),
    /// Train the edge classifier on a graph directory.
    Train(train::TrainArgs),
    /// Train the hit embedding of metric-learning graphs on events with truth.
    TrainEmbedding(metric_learning::TrainEmbeddingArgs),
    /// Train the edge filter that prunes an embedding's radius graph.
    TrainFilter(metric_learning::TrainFilterArgs),
    /// Evaluate a run on graphs: the edge metrics of the reference table.
    Eval(train::EvalArgs),
    /// Build track candidates with a trained run (or, `--method ckf`, a combinatorial Kalman
    /// filter with no GNN): TrackML submissions, track metrics, plots.
    Reconstruct(reconstruct::ReconstructArgs),
    /// Fit the candidate-quality model (fake probability of a track candidate) for `reconstruct --quality`.
    TrainQuality(train_quality::TrainQualityArgs),
    /// Scaling study: train with 1, 2, … MPI ranks and compare, or predict more ranks.
    Scaling(scaling::ScalingArgs),
    /// Write a model's weights, a graph, the loss and all gradients for tools/parity.py.
    ExportParity(parity::ExportParityArgs),
    /// Export a trained run's model: ONNX for the ACTS GNN plugin, with its ACTS configuration.
    Export(export::ExportArgs),
    /// Several runs' training and validation loss per epoch in one figure, with their figures.
    PlotLoss(plot_loss::PlotLossArgs),
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

/// `--threads`: the size of the worker pool.
#[derive(Debug, Args, Clone, Copy, Default)]
pub struct ThreadsArg {
    /// Worker threads per process (default: all cores, or RAYON_NUM_THREADS).
    #[arg(long)]
    pub threads: Option<usize>,
}

/// `--json`: the output format.
#[derive(Debug, Args, Clone, Copy, Default)]
pub struct JsonArg {
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `--events`: a prefix of a directory of events.
#[derive(Debug, Args, Clone, Copy, Default)]
pub struct EventsArg {
    /// Use only the first N events of the directory.
    #[arg(long)]
    pub events: Option<usize>,
}

impl EventsArg {
    /// The events of `dir`, in order, the first N with `--events N`.
    pub fn discover(&self, dir: &std::path::Path) -> anyhow::Result<Vec<trackgnn_trackml::csv::EventFiles>> {
        let mut events = trackgnn_trackml::csv::discover_events(dir)?;
        events.truncate(self.events.unwrap_or(usize::MAX));
        Ok(events)
    }
}

/// The settings of track following (`--method follow`) that `reconstruct` and
/// `train-quality` share: a quality model judges candidates built with the same ones.
#[derive(Debug, Args, Clone, Copy, Default)]
pub struct FollowArgs {
    /// Follow only: no hit search beyond the graph's edges (paths end where their edges do).
    #[arg(long)]
    pub no_hit_search: bool,
    /// Follow only: no second pass for particles produced away from the beam line (whose
    /// paths the first pass's windows, drawn through the beam line, end at two hits).
    #[arg(long)]
    pub no_displaced_pass: bool,
    /// Follow only: try up to N of a start hit's seed edges, best first, until one leads to a
    /// track. Default 3.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub seed_tries: Option<u32>,
    /// Follow only: a path too short to be a track, extended by the hit search, becomes one at
    /// this many hits. Default 7.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub rescue_min_hits: Option<u32>,
}

impl FollowArgs {
    /// `follow` with these flags applied.
    pub fn apply(&self, follow: &mut trackgnn_reco::FollowConfig) {
        follow.search = !self.no_hit_search;
        follow.displaced = !self.no_displaced_pass;
        if let Some(n) = self.seed_tries {
            follow.seed_tries = n as usize;
        }
        if let Some(n) = self.rescue_min_hits {
            follow.rescue_min_hits = n as usize;
        }
    }
}

/// `trackgnn module-map …`.
#[derive(Debug, Subcommand)]
pub enum ModuleMapCommand {
    /// Learn a module map from training events.
    Build(module_map::ModuleMapBuildArgs),
    /// Merge module maps learned on different events into one (ranges widened to cover all).
    Merge(module_map::ModuleMapMergeArgs),
}

/// `--resume [auto]`.
#[derive(Debug, Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
pub enum ResumeArg {
    /// Continue from the run's checkpoint, which must exist (`--resume` alone).
    Always,
    /// Continue if the run has a checkpoint, else start it (a requeued Slurm job).
    Auto,
}

/// `trackgnn bench …`.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Event generation time and CSV write/read throughput.
    Io(bench_io::BenchIoArgs),
    /// The training step of the benchmark specification (and the default model, the unfused forward).
    Engine(bench_engine::BenchEngineArgs),
    /// Memory and step time against graph size, with and without activation checkpointing.
    Memory(bench_memory::BenchMemoryArgs),
    /// The gradient all-reduce's time against buffer size and its latency/bandwidth fit
    /// (run under `mpirun -np N`, N ≥ 2, with a trackgnn built with `--features mpi`).
    Allreduce(bench_allreduce::BenchAllreduceArgs),
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
        assert_eq!((a.events, a.pileup, a.seed, a.gzip, a.threads.threads), (3, Some(200.0), 8, true, Some(2)));
        assert!(Cli::try_parse_from(["trackgnn", "simulate", "--events", "x", "--out", "d"]).is_err());
        assert!(Cli::try_parse_from(["trackgnn", "simulate"]).is_err(), "--out is required");
    }

    #[test]
    fn inspect_and_bench_parse() {
        let cli = Cli::try_parse_from(["trackgnn", "inspect", "data", "--json"]).unwrap();
        assert!(matches!(cli.command, Command::Inspect(inspect::InspectArgs { json: JsonArg { json: true }, .. })));
        let cli = Cli::try_parse_from(["trackgnn", "bench", "io", "--events", "1"]).unwrap();
        assert!(matches!(cli.command, Command::Bench(BenchCommand::Io(bench_io::BenchIoArgs { events: 1, .. }))));
    }

    #[test]
    fn memory_flags_parse_with_units_and_bad_values_are_errors() {
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
        assert_eq!(a.settings.max_memory_bytes, Some(6 << 30));
        assert_eq!(a.settings.checkpointing, Some(trackgnn_engine::Checkpointing::every(2)));
        assert_eq!(a.settings.oversize, Some(trackgnn_train::config::Oversize::Skip));
        assert_eq!(a.settings.threshold, None, "not a flag of train");
        let e = Cli::try_parse_from(["trackgnn", "train", "--graphs", "g", "--out", "o", "--checkpointing", "every:0"])
            .unwrap_err();
        assert!(e.to_string().contains("every:K"), "{e}");
    }

    #[test]
    fn bench_engine_takes_the_checkpointing_modes_of_train() {
        use trackgnn_engine::Checkpointing;
        let parse = |extra: &[&str]| {
            let args = ["trackgnn", "bench", "engine", "--only", "defaults"].iter().chain(extra);
            Cli::try_parse_from(args).map(|cli| match cli.command {
                Command::Bench(BenchCommand::Engine(a)) => a.checkpoint,
                _ => panic!("not bench engine"),
            })
        };
        assert_eq!(parse(&[]).unwrap(), Checkpointing::NONE);
        assert_eq!(parse(&["--checkpoint", "per-iteration"]).unwrap(), Checkpointing::PER_ITERATION);
        assert_eq!(parse(&["--checkpoint", "every:3"]).unwrap(), Checkpointing::every(3));
        let bf16 = Checkpointing::PER_ITERATION.with_bf16_states();
        assert_eq!(parse(&["--checkpoint", "per-iteration+bf16"]).unwrap(), bf16);
        assert_eq!(parse(&["--checkpointing", "per-iteration+bf16"]).unwrap(), bf16, "train's spelling");
        for bad in ["every:0", "none+bf16", "sometimes"] {
            let e = parse(&["--checkpoint", bad]).unwrap_err().to_string();
            assert!(e.contains("every:K") && e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn bench_engine_only_takes_the_library_variants_by_their_names() {
        use clap::ValueEnum;
        use trackgnn_engine::bench::Variant;
        let only = |name: &str| {
            Cli::try_parse_from(["trackgnn", "bench", "engine", "--only", name]).map(|cli| match cli.command {
                Command::Bench(BenchCommand::Engine(a)) => a.only,
                _ => panic!("not bench engine"),
            })
        };
        assert_eq!(only("bench-spec").unwrap(), Some(Variant::BenchSpec));
        assert_eq!(only("defaults").unwrap(), Some(Variant::Defaults));
        assert_eq!(only("unfused").unwrap(), Some(Variant::Unfused));
        assert!(only("benchspec").is_err(), "the JSON's name is not a flag value");
        assert!(only("fused").is_err());
        // The parent passes each variant to its child process by this name.
        for v in Variant::value_variants() {
            let name = v.to_possible_value().unwrap().get_name().to_owned();
            assert_eq!(only(&name).unwrap(), Some(*v), "{name}");
        }
    }
}
