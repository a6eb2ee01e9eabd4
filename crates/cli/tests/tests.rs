//! Integration tests of the `trackgnn` binary, one module per subcommand family.

mod util;

mod geometry;
mod inspect;
mod simulate;
