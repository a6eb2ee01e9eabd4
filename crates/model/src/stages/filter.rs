//! The edge filter, ready for graph building: its run's configuration ([`FilterConfig`]) and
//! network, a score per candidate edge of the embedding's graph ([`EdgeScorer`]).

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use trackgnn_engine::loss::sigmoid;
use trackgnn_engine::{DenseNet, DenseNetConfig};
use trackgnn_graph::features::{Feature, FeatureConfig, HitTable};
use trackgnn_graph::metric::EdgeScorer;
use trackgnn_trackml::physics::wrap_period;

use super::embedding::EmbeddingConfig;
use super::{StageConfig, StageModel, StageTraining};

/// Everything that decides a filter run (its `config.toml`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FilterConfig {
    /// Features of each of the edge's two hits (the input is both, source first).
    pub features: FeatureConfig,
    /// The network (its `out` must be 1, the logit).
    pub net: DenseNetConfig,
    /// Radius of the embedding's graph the filter trains on (`None`: the embedding's margin).
    pub radius: Option<f64>,
    /// Neighbours per hit of that graph (`None`: the embedding's `k_max`).
    pub k_max: Option<usize>,
    /// Edges scoring below this are dropped (recorded in the graph recipe).
    pub cut: f64,
    /// Weight of the true edges in the loss.
    pub pos_weight: f64,
    /// Edges per step (sampled).
    pub edges_per_step: usize,
    /// When positive, the input also holds the differences b − a of the two hits' features
    /// (φ wrapped into (−π, π]) times this. Neighbouring hits of a track differ by a few
    /// hundredths of the features' ranges, which a small network on the two hits alone
    /// resolves only after many steps (at 48 neighbours per hit it stayed at the constant
    /// predictor's loss). 0, the default, leaves them out, as before the key.
    pub difference_scale: f64,
    /// When positive, the input also holds the two hits' Euclidean distance in the embedding
    /// times this (the embedding pulls a track's neighbouring hits within its margin, so
    /// 1 / margin puts the margin at 1). 0, the default, leaves it out, as before the key.
    pub distance_scale: f64,
    /// Weight of the true edges of secondaries (particles produced beyond 1 mm of the beam
    /// line) relative to the other true edges, whose weight is `pos_weight`: > 1 keeps more of
    /// the displaced tracks' edges, which a prompt-dominated sample otherwise sacrifices. 1,
    /// the default, weighs them alike, as before the key.
    pub secondary_weight: f64,
    /// Optimisation.
    pub training: StageTraining,
}

impl Default for FilterConfig {
    fn default() -> Self {
        FilterConfig {
            features: EmbeddingConfig::default().features,
            net: DenseNetConfig { hidden: 64, hidden_layers: 3, out: 1 },
            radius: None,
            k_max: None,
            cut: 0.1,
            pos_weight: 2.0,
            edges_per_step: 50_000,
            difference_scale: 0.0,
            distance_scale: 0.0,
            secondary_weight: 1.0,
            training: StageTraining::default(),
        }
    }
}

/// How an edge's input row is made from its two hits' feature rows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EdgeInput {
    /// Features per hit.
    dim: usize,
    /// [`FilterConfig::difference_scale`] (0: no differences).
    difference_scale: f32,
    /// The φ feature's column and its period in feature units (2π / scale).
    phi: Option<(usize, f32)>,
    /// [`FilterConfig::distance_scale`] (0: no distance).
    distance_scale: f32,
}

/// The hits' embedding, rows × `dim` (for the distance input).
#[derive(Clone, Copy, Debug)]
pub struct Embedded<'a> {
    /// The rows, `dim` values each.
    pub rows: &'a [f32],
    /// Values per row.
    pub dim: usize,
}

impl Embedded<'_> {
    /// The Euclidean distance of rows `a` and `b`.
    pub fn distance(&self, a: u32, b: u32) -> f32 {
        let (a, b) = (a as usize * self.dim, b as usize * self.dim);
        let (ea, eb) = (&self.rows[a..a + self.dim], &self.rows[b..b + self.dim]);
        ea.iter().zip(eb).map(|(u, v)| (u - v) * (u - v)).sum::<f32>().sqrt()
    }
}

impl EdgeInput {
    /// The rows of the filter of `cfg`.
    pub fn new(cfg: &FilterConfig) -> EdgeInput {
        let f = &cfg.features.features;
        let phi =
            f.iter().position(|s| s.name == Feature::Phi).map(|i| (i, (std::f64::consts::TAU / f[i].scale) as f32));
        EdgeInput {
            dim: f.len(),
            difference_scale: cfg.difference_scale as f32,
            phi,
            distance_scale: cfg.distance_scale as f32,
        }
    }

    /// Width of a row.
    pub fn width(&self) -> usize {
        let hits = if self.difference_scale > 0.0 { 3 * self.dim } else { 2 * self.dim };
        hits + (self.distance_scale > 0.0) as usize
    }

    /// The rows of edges `src → dst`: the two hits' features, source first, then (with a
    /// difference scale) their differences, then (with a distance scale) their scaled distance
    /// in `emb`.
    pub fn rows(&self, x: &[f32], emb: Embedded<'_>, src: &[u32], dst: &[u32]) -> Vec<f32> {
        let dim = self.dim;
        let mut out = Vec::with_capacity(src.len() * self.width());
        for (&a, &b) in src.iter().zip(dst) {
            let (xa, xb) = (&x[a as usize * dim..(a as usize + 1) * dim], &x[b as usize * dim..(b as usize + 1) * dim]);
            out.extend_from_slice(xa);
            out.extend_from_slice(xb);
            if self.difference_scale > 0.0 {
                for (k, (va, vb)) in xa.iter().zip(xb).enumerate() {
                    let d = match self.phi {
                        Some((col, period)) if col == k => wrap_period(vb - va, period),
                        _ => vb - va,
                    };
                    out.push(d * self.difference_scale);
                }
            }
            if self.distance_scale > 0.0 {
                out.push(emb.distance(a, b) * self.distance_scale);
            }
        }
        out
    }
}

/// A trained filter, ready for graph building.
pub type FilterModel = StageModel<FilterConfig>;

impl StageConfig for FilterConfig {
    fn net(&self) -> &DenseNetConfig {
        &self.net
    }

    /// The two hits' features.
    fn input_width(&self) -> usize {
        EdgeInput::new(self).width()
    }
}

/// The logits of edges `src → dst` by `net` over node features `x`, in slices of 2^14 edges
/// on the current rayon pool's threads, so the input rows and activations of millions of
/// edges never exist at once.
pub fn edge_logits(
    net: &DenseNet<f32>,
    input: &EdgeInput,
    x: &[f32],
    emb: Embedded<'_>,
    src: &[u32],
    dst: &[u32],
) -> Vec<f32> {
    const SLICE: usize = 1 << 14;
    let slices: Vec<Vec<f32>> =
        src.par_chunks(SLICE).zip(dst.par_chunks(SLICE)).map(|(s, d)| net.infer(&input.rows(x, emb, s, d))).collect();
    slices.concat()
}

impl EdgeScorer for FilterModel {
    fn score(
        &self,
        table: &HitTable,
        embedding: &[f32],
        dim: usize,
        src: &[u32],
        dst: &[u32],
    ) -> trackgnn_graph::Result<Vec<f32>> {
        let x = table.features(&self.config.features)?;
        let emb = Embedded { rows: embedding, dim };
        Ok(edge_logits(&self.net, &EdgeInput::new(&self.config), &x, emb, src, dst).into_iter().map(sigmoid).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows hold both hits, then their scaled differences with φ wrapped across ±π; without a
    /// scale (runs before the key) only the two hits.
    #[test]
    fn edge_rows_hold_the_wrapped_differences_when_asked() {
        let pi = std::f32::consts::PI;
        // Features r/1000, φ/π, z/1000, x/1000, y/1000, η/3: hit 0 just below +π, hit 1 just above −π.
        let x = [0.1, 0.98, 0.2, 0.0, 0.0, 0.3, 0.15, -0.99, 0.25, 0.0, 0.0, 0.33];
        let plain = FilterConfig::default();
        let input = EdgeInput::new(&plain);
        assert_eq!((input.width(), plain.input_width()), (12, 12));
        let none = Embedded { rows: &[], dim: 0 };
        assert_eq!(input.rows(&x, none, &[0], &[1]), x.to_vec());
        let cfg = FilterConfig { difference_scale: 10.0, ..FilterConfig::default() };
        let input = EdgeInput::new(&cfg);
        assert_eq!((input.width(), cfg.input_width()), (18, 18));
        let row = input.rows(&x, none, &[0, 1], &[1, 0]);
        assert_eq!(row.len(), 36);
        let expect = [0.5, 0.3, 0.5, 0.0, 0.0, 0.3];
        for (k, e) in expect.iter().enumerate() {
            assert!((row[12 + k] - e).abs() < 1e-5, "column {k}: {} vs {e}", row[12 + k]);
            assert!((row[18 + 12 + k] + e).abs() < 1e-5, "reversed, column {k}");
        }
        // The φ difference is 0.03 of π (rad / π), not −1.97.
        assert!((row[13] / 10.0 * pi - 0.03 * pi).abs() < 1e-5);
        // With a distance scale, one more column: the scaled distance in the embedding.
        let cfg = FilterConfig { distance_scale: 5.0, ..cfg };
        let input = EdgeInput::new(&cfg);
        assert_eq!((input.width(), cfg.input_width()), (19, 19));
        let emb = Embedded { rows: &[0.0, 0.0, 0.03, 0.04], dim: 2 };
        let row = input.rows(&x, emb, &[0, 1], &[1, 0]);
        assert_eq!(row.len(), 38);
        assert!((row[18] - 0.25).abs() < 1e-6 && (row[37] - 0.25).abs() < 1e-6, "{row:?}");
        assert_eq!(&row[..18], &input.rows(&x, emb, &[0], &[1])[..18]);
    }
}
