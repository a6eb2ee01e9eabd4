//! Every setting of a training run: the types are the run directory's (`trackgnn_model::config`,
//! re-exported here); the command line's overrides of them are this crate's.

pub use trackgnn_model::config::*;

mod overrides;
pub use overrides::{TrainOverrides, parse_bytes};
