//! One module per subcommand.

mod bench_allreduce;
mod bench_engine;
mod bench_io;
mod bench_memory;
pub mod build_graphs;
mod demo;
mod geometry;
mod inspect;
mod module_map;
mod parity;
pub mod reconstruct;
pub mod scaling;
pub mod simulate;
pub mod train;

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::{BenchCommand, Cli, Command, ModuleMapCommand};

/// Runs the subcommand; the exit code says whether everything it checked was fine.
pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Demo(a) => demo::run(a),
        Command::Simulate(a) => simulate::run(a),
        Command::Geometry(a) => geometry::run(a),
        Command::Inspect(a) => inspect::run(a),
        Command::ModuleMap(ModuleMapCommand::Build(a)) => module_map::build(a),
        Command::ModuleMap(ModuleMapCommand::Merge(a)) => module_map::merge(a),
        Command::BuildGraphs(a) => build_graphs::run(a),
        Command::ExportParity(a) => parity::run(a),
        Command::Train(a) => train::run(a),
        Command::Reconstruct(a) => reconstruct::run(a),
        Command::Eval(a) => train::eval(a),
        Command::Scaling(a) => scaling::run(a),
        Command::Bench(BenchCommand::Io(a)) => bench_io::run(a),
        Command::Bench(BenchCommand::Engine(a)) => bench_engine::run(a),
        Command::Bench(BenchCommand::Memory(a)) => bench_memory::run(a),
        Command::Bench(BenchCommand::Allreduce(a)) => bench_allreduce::run(a),
    }
}
