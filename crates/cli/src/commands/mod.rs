//! One module per subcommand.

pub(crate) mod bench_allreduce;
pub(crate) mod bench_engine;
pub(crate) mod bench_io;
pub(crate) mod bench_memory;
pub mod build_graphs;
pub(crate) mod demo;
pub(crate) mod export;
pub(crate) mod geometry;
pub(crate) mod inspect;
pub mod metric_learning;
pub(crate) mod module_map;
pub(crate) mod parity;
pub(crate) mod plot_loss;
pub mod reconstruct;
pub mod scaling;
pub mod simulate;
pub mod train;
pub mod train_quality;

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;

use crate::cli::{BenchCommand, Cli, Command, ModuleMapCommand};

/// Runs the subcommand; the exit code says whether everything it checked was fine.
pub fn run(cli: Cli) -> Result<ExitCode> {
    require_inputs(&input_paths(&cli.command))?;
    match cli.command {
        Command::Demo(a) => demo::run(a),
        Command::Simulate(a) => simulate::run(a),
        Command::Geometry(a) => geometry::run(a),
        Command::Inspect(a) => inspect::run(a),
        Command::ModuleMap(ModuleMapCommand::Build(a)) => module_map::build(a),
        Command::ModuleMap(ModuleMapCommand::Merge(a)) => module_map::merge(a),
        Command::BuildGraphs(a) => build_graphs::run(a),
        Command::ExportParity(a) => parity::run(a),
        Command::Export(a) => export::run(a),
        Command::PlotLoss(a) => plot_loss::run(a),
        Command::Train(a) => train::run(a),
        Command::TrainEmbedding(a) => metric_learning::train_embedding_cmd(a),
        Command::TrainFilter(a) => metric_learning::train_filter_cmd(a),
        Command::Reconstruct(a) => reconstruct::run(a),
        Command::TrainQuality(a) => train_quality::run(a),
        Command::Eval(a) => train::eval(a),
        Command::Scaling(a) => scaling::run(a),
        Command::Bench(BenchCommand::Io(a)) => bench_io::run(a),
        Command::Bench(BenchCommand::Engine(a)) => bench_engine::run(a),
        Command::Bench(BenchCommand::Memory(a)) => bench_memory::run(a),
        Command::Bench(BenchCommand::Allreduce(a)) => bench_allreduce::run(a),
    }
}

/// `Ok` if every path exists, else `<path>: no such file or directory` for the first missing
/// one: the one wording of a missing input in every command.
pub(crate) fn require_inputs(paths: &[Option<&Path>]) -> Result<()> {
    for path in paths.iter().flatten() {
        trackgnn_trackml::error::require_exists(path)?;
    }
    Ok(())
}

/// The files and directories a command reads, checked before it starts so that a missing one
/// reads `<path>: no such file or directory` whatever the command. (`inspect` also takes an
/// event's `eventNNNNNNNNN` prefix, which is not a path, and checks its argument itself;
/// `train` checks its inputs once it knows it is not one of several ranks of a build without
/// MPI; `scaling` checks its arguments' consistency first and names a missing path itself.)
fn input_paths(command: &Command) -> Vec<Option<&Path>> {
    fn detector(d: &crate::cli::DetectorArg) -> Option<&Path> {
        d.detector.as_deref()
    }
    match command {
        Command::Demo(_)
        | Command::Geometry(_)
        | Command::Inspect(_)
        | Command::Train(_)
        | Command::Scaling(_)
        | Command::PlotLoss(_) => {
            vec![]
        }
        Command::Simulate(a) => vec![a.config.as_deref(), detector(&a.detector)],
        Command::ModuleMap(ModuleMapCommand::Build(a)) => vec![a.input.as_deref(), detector(&a.detector)],
        Command::ModuleMap(ModuleMapCommand::Merge(a)) => a.maps.iter().map(|p| Some(p.as_path())).collect(),
        Command::BuildGraphs(a) => {
            vec![
                Some(&a.input),
                a.map.as_deref(),
                a.config.as_deref(),
                detector(&a.detector),
                a.embedding.as_deref(),
                a.filter.as_deref(),
            ]
        }
        Command::TrainEmbedding(a) => metric_learning::inputs(&a.stage),
        Command::TrainFilter(a) => {
            let mut v = metric_learning::inputs(&a.stage);
            v.push(Some(&a.embedding));
            v
        }
        Command::Eval(a) => vec![Some(&a.run), Some(&a.graphs)],
        Command::Reconstruct(a) => vec![a.run.as_deref(), Some(&a.input), a.quality.as_deref(), detector(&a.detector)],
        Command::TrainQuality(a) => vec![Some(&a.run), Some(&a.input), detector(&a.detector)],
        Command::ExportParity(a) => vec![a.model_config.as_deref(), a.graph.as_deref(), a.weights.as_deref()],
        Command::Export(a) => vec![Some(&a.run), a.reference.as_deref(), detector(&a.detector)],
        Command::Bench(_) => vec![],
    }
}
