//! Settings given on top of a graph recipe (a command line's flags): one place where each flag
//! meets the recipe key it replaces, and the checks that the result can be built.

use std::path::{Path, PathBuf};

use super::{GraphMethod, GraphRecipe};
use crate::error::{OverrideError, Result};
use crate::metric::MetricLearningConfig;
use crate::module_map::file_hash;
use crate::sectors::SectorConfig;

/// A learned stage's training run as a recipe records it: its directory and the content hash
/// of its weights file (see [`file_hash`]).
#[derive(Clone, Debug, PartialEq)]
pub struct LearnedRun {
    /// The run directory (made absolute when it exists).
    pub dir: String,
    /// Content hash of the weights the graphs are built with.
    pub weights_hash: String,
}

/// The embedding run of a metric-learning recipe and the cuts it brings: hits within its
/// training margin, at most its `k_max` neighbours.
#[derive(Clone, Debug, PartialEq)]
pub struct EmbeddingRun {
    /// The run.
    pub run: LearnedRun,
    /// Its training margin (the default radius).
    pub radius: f64,
    /// Its neighbours per hit (the default `k_max`).
    pub k_max: usize,
}

/// The edge-filter run of a metric-learning recipe and the score cut it was trained for.
#[derive(Clone, Debug, PartialEq)]
pub struct FilterRun {
    /// The run.
    pub run: LearnedRun,
    /// Its score cut (the default `filter_cut`).
    pub cut: f64,
}

/// Settings that replace a [`GraphRecipe`]'s: each `Some` (or `true`) wins over the recipe.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecipeOverrides {
    /// The edge builder.
    pub method: Option<GraphMethod>,
    /// Keep only hits of particles with pT at least this \[GeV\] (drops noise too).
    pub pt_min: Option<f64>,
    /// Drop noise hits.
    pub remove_noise: bool,
    /// Relative margin around the module map's ranges.
    pub margin: Option<f64>,
    /// Module map: doublets only (no triplet window, no shortcut removal).
    pub no_triplets: bool,
    /// Module map: keep edges that skip a hit of a consistent triplet.
    pub keep_shortcuts: bool,
    /// Geometric builder: largest |dphi/dr| \[rad/mm\].
    pub phi_slope_max: Option<f64>,
    /// Geometric builder: largest |z0| \[mm\].
    pub z0_max: Option<f64>,
    /// Geometric builder: layers a pair may skip.
    pub skip_layers: Option<usize>,
    /// The module map file (its absolute path and content hash are recorded).
    pub map: Option<PathBuf>,
    /// The embedding run (metric-learning and hybrid methods).
    pub embedding: Option<EmbeddingRun>,
    /// The edge-filter run.
    pub filter: Option<FilterRun>,
    /// Radius of the embedding graph.
    pub radius: Option<f64>,
    /// Neighbours per hit of the embedding graph.
    pub k_max: Option<usize>,
    /// Filter score cut.
    pub filter_cut: Option<f64>,
    /// Cut the graphs into these sectors.
    pub sectors: Option<SectorConfig>,
}

impl RecipeOverrides {
    /// `recipe` with every given setting replaced and checked: the method has the map or
    /// embedding it needs, and `truth_cuts_applied` says whether the node cuts use truth.
    /// A new `[metric_learning]` section takes its radius and `k_max` from the embedding run
    /// and its cut from the filter run (0.1 without one); the explicit cuts win over both.
    ///
    /// # Errors
    /// A module map that cannot be read (for its hash), an [`OverrideError`].
    pub fn apply(&self, mut r: GraphRecipe) -> Result<GraphRecipe> {
        if let Some(m) = self.method {
            r.method = m;
        }
        if let Some(pt) = self.pt_min {
            r.node_cuts.pt_min = Some(pt);
            r.node_cuts.remove_noise = true;
        }
        r.node_cuts.remove_noise |= self.remove_noise;
        if let Some(m) = self.margin {
            r.map_margin.relative = m;
        }
        if self.no_triplets {
            r.map_margin.triplets = false;
            r.map_margin.drop_shortcuts = false;
        }
        if self.keep_shortcuts {
            r.map_margin.drop_shortcuts = false;
        }
        set(self.phi_slope_max, &mut r.geometric.phi_slope_max);
        set(self.z0_max, &mut r.geometric.z0_max);
        set(self.skip_layers, &mut r.geometric.skip_layers);
        if let Some(p) = &self.map {
            r.map_file = Some(absolute(p));
            r.map_hash = Some(file_hash(p)?);
        }
        self.apply_metric_learning(&mut r)?;
        if r.needs_map() && r.map_file.is_none() {
            return Err(OverrideError::NeedsMap(r.method).into());
        }
        if r.needs_embedding() && r.metric_learning.is_none() {
            return Err(OverrideError::NeedsEmbedding(r.method).into());
        }
        if let Some(cfg) = &self.sectors {
            if cfg.len() <= 1 {
                return Err(OverrideError::OneSector.into());
            }
            r.sectors = Some(cfg.clone());
        }
        r.truth_cuts_applied = r.node_cuts.uses_truth();
        Ok(r)
    }

    /// The `[metric_learning]` section from the embedding and filter runs and the cuts.
    fn apply_metric_learning(&self, r: &mut GraphRecipe) -> std::result::Result<(), OverrideError> {
        if let Some(emb) = &self.embedding {
            let ml = r.metric_learning.get_or_insert_with(|| MetricLearningConfig {
                embedding_run: String::new(),
                embedding_hash: None,
                radius: emb.radius,
                k_max: emb.k_max,
                filter_run: None,
                filter_hash: None,
                filter_cut: 0.1,
            });
            ml.embedding_run = emb.run.dir.clone();
            ml.embedding_hash = Some(emb.run.weights_hash.clone());
        }
        if let Some(filter) = &self.filter {
            let ml = r.metric_learning.as_mut().ok_or(OverrideError::FilterWithoutEmbedding)?;
            ml.filter_run = Some(filter.run.dir.clone());
            ml.filter_hash = Some(filter.run.weights_hash.clone());
            ml.filter_cut = filter.cut;
        }
        match r.metric_learning.as_mut() {
            Some(ml) => {
                set(self.radius, &mut ml.radius);
                set(self.k_max, &mut ml.k_max);
                set(self.filter_cut, &mut ml.filter_cut);
            }
            None if self.radius.is_some() || self.k_max.is_some() || self.filter_cut.is_some() => {
                return Err(OverrideError::CutsWithoutEmbedding);
            }
            None => {}
        }
        Ok(())
    }
}

fn set<T>(value: Option<T>, field: &mut T) {
    if let Some(v) = value {
        *field = v;
    }
}

/// The absolute path of `p` as text (`p` itself when it cannot be resolved).
pub fn absolute(p: &Path) -> String {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned()).display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(dir: &str) -> LearnedRun {
        LearnedRun { dir: dir.into(), weights_hash: format!("crc32:{dir}") }
    }

    #[test]
    fn flags_win_over_the_recipe_and_the_rest_stays() {
        let mut base = GraphRecipe::new(GraphMethod::Geometric);
        base.geometric.z0_max = 123.0;
        assert_eq!(RecipeOverrides::default().apply(base.clone()).unwrap(), base);
        let flags = RecipeOverrides { pt_min: Some(1.0), skip_layers: Some(2), ..Default::default() };
        let r = flags.apply(base.clone()).unwrap();
        assert_eq!((r.geometric.z0_max, r.geometric.skip_layers), (123.0, 2));
        assert!(r.node_cuts.remove_noise && r.truth_cuts_applied);
        let no_triplets = RecipeOverrides { no_triplets: true, ..Default::default() }.apply(base).unwrap();
        assert!(!no_triplets.map_margin.triplets && !no_triplets.map_margin.drop_shortcuts);
    }

    #[test]
    fn a_method_without_its_stage_or_a_single_sector_is_refused() {
        let base = GraphRecipe::new(GraphMethod::Geometric);
        let with = |o: RecipeOverrides| o.apply(base.clone()).unwrap_err().to_string();
        let map = RecipeOverrides { method: Some(GraphMethod::ModuleMap), ..Default::default() };
        assert_eq!(with(map), "--method module-map needs --map FILE (build one with `trackgnn module-map build`)");
        let ml = RecipeOverrides { method: Some(GraphMethod::MetricLearning), ..Default::default() };
        assert!(with(ml).starts_with("--method metric-learning needs --embedding RUN"));
        assert!(with(RecipeOverrides { radius: Some(0.1), ..Default::default() }).contains("need --embedding"));
        let filter = FilterRun { run: run("f"), cut: 0.3 };
        assert_eq!(
            with(RecipeOverrides { filter: Some(filter), ..Default::default() }),
            "--filter needs --embedding RUN"
        );
        let one = RecipeOverrides { sectors: Some(SectorConfig::new(1, 1, 0.3, 0.3)), ..Default::default() };
        assert_eq!(with(one), "--sectors must make more than one sector");
    }

    #[test]
    fn the_stages_bring_their_cuts_and_explicit_cuts_win() {
        let embedding = Some(EmbeddingRun { run: run("e"), radius: 0.2, k_max: 30 });
        let flags = RecipeOverrides {
            method: Some(GraphMethod::MetricLearning),
            embedding: embedding.clone(),
            filter: Some(FilterRun { run: run("f"), cut: 0.3 }),
            k_max: Some(12),
            ..Default::default()
        };
        let ml = flags.apply(GraphRecipe::new(GraphMethod::Geometric)).unwrap().metric_learning.unwrap();
        assert_eq!((ml.radius, ml.k_max, ml.filter_cut), (0.2, 12, 0.3));
        assert_eq!((ml.embedding_hash.as_deref(), ml.filter_run.as_deref()), (Some("crc32:e"), Some("f")));
        // A recipe file's section keeps its cuts; only the run is replaced.
        let mut base = GraphRecipe::new(GraphMethod::MetricLearning);
        base.metric_learning = Some(MetricLearningConfig { radius: 0.5, ..ml });
        let again = RecipeOverrides { embedding, ..Default::default() }.apply(base).unwrap();
        assert_eq!(again.metric_learning.unwrap().radius, 0.5);
    }
}
