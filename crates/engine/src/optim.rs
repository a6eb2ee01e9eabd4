//! The optimiser and what goes around it: [`AdamW`] (exactly `torch.optim.AdamW`), gradient
//! clipping and norms ([`clip_grad_norm`], [`l2_norm`]) and the learning-rate schedule
//! ([`LrSchedule`]: linear warm-up, then `StepLR`-style decay).
//!
//! All of it works on the flat buffers of [`ParamStore`](crate::ParamStore): `data` is the
//! parameter slice, `grad` the gradient slice, and the optimiser state has the same layout.
//! Every function here is deterministic at any thread count.

mod adamw;
mod clip;
mod schedule;

pub use adamw::{AdamW, AdamWConfig, AdamWState, Scalars as AdamWScalars};
pub use clip::{clip_grad_norm, l2_norm};
pub use schedule::{LrSchedule, LrScheduleConfig};

/// Elements per chunk in the parallel paths. Fixed, so that sums are taken in the same order
/// whatever the number of threads.
const CHUNK: usize = 4096;
