//! The bytes a step's memory-bound passes read and write, counted from the tensors each pass
//! touches (for `bench engine`'s bandwidth bound; off, and free, unless a benchmark enables it).
//!
//! How the bytes are counted: every whole-graph tensor a pass reads or writes counts once at
//! its storage width (node and edge states, saved activations x̂ and 1/σ, gradients,
//! aggregation caches, edge lists); a row gathered per edge (h·W_a\[src\], a message row of
//! an aggregation) counts once per edge; an accumulation (`+=`) counts a read and a write.
//! Tile-sized intermediates (a tile's z, y and activations, its bf16 operands, its gradients
//! between layers) are not counted: a tile stays in the core's L2 while it passes through all
//! layers. So the count is the traffic the passes cannot avoid as written, the memory floor of
//! the step's memory-bound remainder at the machine's bandwidth.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A kind of memory-bound pass, as reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// MLP forwards over nodes or edges: input (gathered rows of a split first layer, the rest
    /// block or dense rows), the saved x̂ and 1/σ, the output.
    MlpForward,
    /// MLP backwards: saved x̂ and 1/σ (or the input again, recomputed), the input of the first
    /// layer's weight gradient, the output gradient, the input gradients.
    MlpBackward,
    /// The node side of a split first layer: h·W_aᵀ, h·W_bᵀ forward; dz_1 pulled onto nodes
    /// over both edge groupings and the node products backward.
    SplitNodes,
    /// Aggregation of edge states at nodes, forward and backward, with its caches.
    Aggregation,
    /// Residual additions, the node network's input copies and gradient copies.
    Elementwise,
    /// The loss and its gradient per edge.
    Loss,
    /// The optimiser's step and zeroing the gradients.
    Optimizer,
}

impl Pass {
    /// Every pass, in report order.
    pub const ALL: [Pass; 7] = [
        Pass::MlpForward,
        Pass::MlpBackward,
        Pass::SplitNodes,
        Pass::Aggregation,
        Pass::Elementwise,
        Pass::Loss,
        Pass::Optimizer,
    ];

    /// A snake_case name for benchmark output.
    pub fn name(self) -> &'static str {
        match self {
            Pass::MlpForward => "mlp_forward",
            Pass::MlpBackward => "mlp_backward",
            Pass::SplitNodes => "split_nodes",
            Pass::Aggregation => "aggregation",
            Pass::Elementwise => "elementwise",
            Pass::Loss => "loss",
            Pass::Optimizer => "optimizer",
        }
    }
}

static ENABLED: AtomicBool = AtomicBool::new(false);
static BYTES: [AtomicU64; Pass::ALL.len()] = [const { AtomicU64::new(0) }; Pass::ALL.len()];

/// Starts (`true`) or stops counting.
pub fn enable(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// Whether counting is on.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Adds `bytes` to `pass` while counting is on. Called once per pass over a whole tensor, not
/// per tile: the cost is one relaxed load when off.
#[inline]
pub fn add(pass: Pass, bytes: usize) {
    if enabled() {
        BYTES[pass as usize].fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

/// The bytes counted per pass since the last call, in [`Pass::ALL`]'s order; resets them.
pub fn take() -> [(Pass, u64); Pass::ALL.len()] {
    Pass::ALL.map(|p| (p, BYTES[p as usize].swap(0, Ordering::Relaxed)))
}

/// Bytes of `elems` elements of type `T`.
#[inline]
pub(crate) fn of<T>(elems: usize) -> usize {
    elems * std::mem::size_of::<T>()
}
