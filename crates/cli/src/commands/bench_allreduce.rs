//! `trackgnn bench allreduce`: times the in-place mean all-reduce of the gradient buffer for a
//! range of sizes under `mpirun -np N`, and fits the ring model's latency and bandwidth
//! ([`trackgnn_train::scaling::allreduce::bench`] measures and fits). `--out FILE` writes the
//! points and the fit for `trackgnn scaling --simulate --interconnect FILE`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
#[cfg(feature = "mpi")]
use trackgnn_train::dist::Comm;
use trackgnn_train::scaling::allreduce::bench::{AllreduceBench, AllreducePoint};
#[cfg(feature = "mpi")]
use trackgnn_train::scaling::allreduce::bench::{measure, sizes};

use crate::util::{print_json, write_atomic};
use clap::Args;

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
    #[command(flatten)]
    pub json: crate::cli::JsonArg,
}

/// `trackgnn bench allreduce`.
pub fn run(a: BenchAllreduceArgs) -> Result<ExitCode> {
    if a.min_bytes < 4 || a.max_bytes < a.min_bytes {
        bail!("--min-bytes must be at least 4 and at most --max-bytes");
    }
    if a.iters == 0 {
        bail!("--iters must be at least 1");
    }
    #[cfg(not(feature = "mpi"))]
    {
        bail!(
            "bench allreduce measures MPI: build with `cargo build --release -p trackgnn --features mpi` and run it \
             as `mpirun -np 2 trackgnn bench allreduce` (this trackgnn was built without MPI)"
        );
    }
    #[cfg(feature = "mpi")]
    {
        let mut comm = trackgnn_train::dist::MpiComm::init(trackgnn_train::dist::MAX_CHUNK)?;
        if comm.size() < 2 {
            bail!("bench allreduce needs at least 2 ranks: run it as `mpirun -np 2 trackgnn bench allreduce`");
        }
        let points = measure(&mut comm, &sizes(a.min_bytes, a.max_bytes), a.iters)?;
        if comm.is_root() {
            report(&a, comm.size(), points)?;
        }
        comm.barrier()?;
        Ok(ExitCode::SUCCESS)
    }
}

/// Prints and writes the result (rank 0).
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
fn report(a: &BenchAllreduceArgs, ranks: usize, points: Vec<AllreducePoint>) -> Result<()> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_owned()).unwrap_or_default();
    let mut bench = AllreduceBench::new(ranks, host, points);
    bench.written_to = a.out.clone();
    let json = serde_json::to_value(&bench)?;
    if let Some(path) = &a.out {
        write_atomic(path, serde_json::to_string_pretty(&json)?.as_bytes())?;
    }
    if a.json.json {
        print_json(&json);
    } else {
        print!("{bench}");
    }
    Ok(())
}
