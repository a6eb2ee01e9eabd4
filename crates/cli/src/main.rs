//! The `trackgnn` binary: parse the command line, run one subcommand, report errors.
//!
//! Every stage of the pipeline is a subcommand in `commands/`; this file stays thin.

mod cli;
mod commands;
mod progress;
mod util;

use std::process::ExitCode;

/// Heap allocations are counted, so memory figures are measured, not estimated.
#[global_allocator]
static ALLOC: trackgnn_engine::alloc::CountingAlloc = trackgnn_engine::alloc::CountingAlloc;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    // `cuda:N` devices run on the GPU backend this build links.
    #[cfg(feature = "cuda")]
    trackgnn_cuda::register();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .without_time()
        // Colour codes only on a terminal: logs redirected to a file stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    // Exit codes: 0 success; 1 a run-time failure (or a check that failed); 2 a usage error,
    // which `Cli::parse` above reports and exits with, as clap does.
    match commands::run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {}", trackgnn_trackml::error::report(err.as_ref()));
            ExitCode::FAILURE
        }
    }
}
