//! Integration tests of the `trackgnn` binary, one module per subcommand family.

mod util;

mod bench;
mod ckf;
mod configs;
mod errors;
mod faults;
mod geometry;
mod graphs;
mod inspect;
mod metric_learning;
#[cfg(feature = "mpi")]
mod mpi;
mod parity;
mod plot_loss;
mod scaling;
mod simulate;
mod training;
