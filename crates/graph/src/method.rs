//! The graph-construction method a recipe names: which edge builder makes the edges.

use serde::{Deserialize, Serialize};

/// The graph-construction method (a recipe's `method`): which edge builder makes the edges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum GraphMethod {
    /// Layer pairs with phi-slope and z0 cuts, plus same-layer overlaps.
    Geometric,
    /// Module pairs of a module map with the ranges it learned.
    #[cfg_attr(feature = "clap", value(help = "Module pairs of a module map (needs --map)"))]
    ModuleMap,
    /// Pairs of hits near in a learned embedding space, pruned by an edge filter
    /// ([`crate::metric`]).
    #[cfg_attr(
        feature = "clap",
        value(help = "Radius graph in a learned embedding (needs --embedding; --filter prunes it)")
    )]
    MetricLearning,
    /// The union of the module map's and the metric-learning edges, deduplicated.
    #[cfg_attr(
        feature = "clap",
        value(help = "Module map edges and metric-learning edges together (needs --map and --embedding)")
    )]
    Hybrid,
}

impl std::fmt::Display for GraphMethod {
    /// The name recipes and command lines use (`module-map`, …).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GraphMethod::Geometric => "geometric",
            GraphMethod::ModuleMap => "module-map",
            GraphMethod::MetricLearning => "metric-learning",
            GraphMethod::Hybrid => "hybrid",
        })
    }
}
