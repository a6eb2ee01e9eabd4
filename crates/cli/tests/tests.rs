//! Integration tests of the `trackgnn` binary, one module per subcommand family.

mod util;

mod bench;
mod configs;
mod errors;
mod geometry;
mod graphs;
mod inspect;
#[cfg(feature = "mpi")]
mod mpi;
mod parity;
mod scaling;
mod simulate;
mod training;
