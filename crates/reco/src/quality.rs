//! Track-candidate quality: a learned selection that drops fake candidates.
//!
//! Track following leaves two kinds of short candidates in a dense event: the real short
//! tracks (forward particles crossing few disks) and fakes that chain hits of several
//! particles. A cut on the GNN's scores alone ([`select_candidates`](crate::select_candidates))
//! separates them poorly: a fake is often made of well-scored pieces. What gives a fake away
//! is its geometry as a whole: too few layers for its polar angle, hits off one helix, an
//! impact parameter far from the beam line. [`QualityModel`] is a logistic regression on
//! [`FEATURES`] of each candidate (its length, its GNN scores and a helix fit) that predicts
//! the probability that a candidate is fake (not more than half of its hits from one
//! particle), trained on events with truth ([`QualitySamples`]); [`select_by_quality`] drops
//! the candidates above a probability. It plays the part of ACTS's ML ambiguity resolution
//! (an MLP on track features) on candidates before any fit.
//!
//! A model is a small JSON file ([`QualityModel::save`], [`QualityModel::load`]): the feature
//! names, their standardisation and the weights.

use std::path::Path;

use serde::{Deserialize, Serialize};
use trackgnn_trackml::Event;

use crate::error::{Error, Result};
use crate::kalman::EventFits;
use crate::metrics::composition::{compose, singleton_key};
use crate::propagation::circle::{STRAIGHT_RADIUS, fit_circle, z_line_residual};
use crate::submission::event_track_ids;
use crate::tracks::selection::{best_links, keep_candidates};
use crate::tracks::{
    CandidateScore, FollowConfig, NO_TRACK, ScoredEdges, TrackBuilderConfig, TrackMethod, candidate_scores,
};

mod report;
pub use report::QualityFitReport;

/// The features of a candidate, in the order [`candidate_features`] computes them, then the
/// features of its fit ([`FIT_FEATURES`], which [`add_fit_features`] fills). Hits are taken
/// in order of radius; a hit's *link* is the best GNN score of an edge reaching it from
/// another hit of the candidate further in (as for [`CandidateScore::WeakestLink`]).
pub const FEATURES: [&str; 18] = [
    "n_hits",
    "n_layers",
    "weakest_link",
    "second_weakest_link",
    "mean_best_edge",
    "mean_link",
    "unlinked_hits",
    "log10_xy_residual",
    "log10_z_residual",
    "ln_radius",
    "log10_d0",
    "log10_abs_z0",
    "abs_eta",
    "r_min",
    "r_max",
    "log10_chi2_ndf",
    "fit_outliers",
    "fit_failed",
];

/// The features of a candidate's Kalman fit, the last of [`FEATURES`]: log10(χ²/ndf + 0.01)
/// after the outliers are dropped, the hits dropped, and 1 when the fit failed (then the
/// other two are 0).
pub const FIT_FEATURES: [&str; 3] = ["log10_chi2_ndf", "fit_outliers", "fit_failed"];

/// The number of features, those of the fit included.
pub const NUM_FEATURES: usize = FEATURES.len();

/// The number of features without those of the fit: what a model that does not use the fit
/// reads.
pub const NUM_BASE_FEATURES: usize = NUM_FEATURES - FIT_FEATURES.len();

/// One candidate's features, in the order of [`FEATURES`].
pub type Features = [f64; NUM_FEATURES];

/// The features of each candidate of `track_ids` (one id per node, [`NO_TRACK`] for none), at
/// index `id − 1` (those of the fit 0: [`add_fit_features`] fills them):
///
/// - `n_hits`, `n_layers`: hits and distinct layers;
/// - `weakest_link`, `second_weakest_link`, `mean_link`: the lowest, second lowest and mean
///   link of its hits (1 when there are none), `mean_best_edge`: [`CandidateScore::MeanBestEdge`];
///   `unlinked_hits`: hits beyond the innermost without a link (the hit search's);
/// - `log10_xy_residual`: the largest distance \[mm\] of a hit from a circle fitted in the
///   transverse plane (+ 10⁻⁴); `ln_radius`: that circle's radius \[mm\] (proportional to pT);
///   `log10_d0`: the circle's distance from the beam line \[mm\] (+ 10⁻³);
/// - `log10_z_residual`: the largest distance \[mm\] of z from a line in the transverse path
///   length (+ 10⁻³); `log10_abs_z0`: |z| \[mm\] at r = 0 of the line through the innermost
///   and outermost hits (+ 10⁻²); `abs_eta`: their |η|;
/// - `r_min`, `r_max`: the innermost and outermost radius \[mm\].
///
/// # Panics
/// If `edges` lacks positions or layers ([`ScoredEdges::with_positions`],
/// [`ScoredEdges::with_layers`]) or `track_ids.len() != edges.num_nodes`.
#[track_caller]
pub fn candidate_features(edges: &ScoredEdges<'_>, track_ids: &[u32]) -> Vec<Features> {
    assert_eq!(track_ids.len(), edges.num_nodes, "one track id per node");
    let (Some(r), Some(phi), Some(z), Some(layers)) = (edges.r, edges.phi, edges.z, edges.layers) else {
        panic!("candidate features need the nodes' positions and layers");
    };
    let num = track_ids.iter().copied().max().unwrap_or(NO_TRACK) as usize;
    let link = best_links(edges, track_ids, CandidateScore::WeakestLink);
    let mean_best = candidate_scores(edges, track_ids, CandidateScore::MeanBestEdge);
    let mut nodes: Vec<Vec<usize>> = vec![Vec::new(); num];
    for (i, &id) in track_ids.iter().enumerate() {
        if id != NO_TRACK {
            nodes[id as usize - 1].push(i);
        }
    }
    nodes
        .iter_mut()
        .zip(&mean_best)
        .map(|(v, &mean_best)| {
            v.sort_by(|&a, &b| r[a].total_cmp(&r[b]).then(a.cmp(&b)));
            let mut layer: Vec<u16> = v.iter().map(|&i| layers.layer[i]).collect();
            layer.sort_unstable();
            layer.dedup();
            let mut links: Vec<f64> = v.iter().skip(1).map(|&i| f64::from(link[i])).collect();
            let unlinked = links.iter().filter(|&&l| l < 0.0).count();
            links.retain(|&l| l >= 0.0);
            links.sort_by(f64::total_cmp);
            let weakest = links.first().copied().unwrap_or(1.0);
            let second = links.get(1).copied().unwrap_or(1.0);
            let mean_link = if links.is_empty() { 1.0 } else { links.iter().sum::<f64>() / links.len() as f64 };
            let pos: Vec<[f64; 3]> = v
                .iter()
                .map(|&i| {
                    let (ri, pi) = (f64::from(r[i]), f64::from(phi[i]));
                    [ri * pi.cos(), ri * pi.sin(), f64::from(z[i])]
                })
                .collect();
            let circle = fit_circle(&pos);
            let z_residual = z_line_residual(&pos);
            let (first, last) = (pos[0], pos[pos.len() - 1]);
            let (r0, r1) = (first[0].hypot(first[1]), last[0].hypot(last[1]));
            let (dr, dz) = (r1 - r0, last[2] - first[2]);
            let z0 = if dr > 1e-3 { first[2] - dz / dr * r0 } else { first[2] };
            let theta = dr.atan2(dz);
            let eta = -(theta / 2.0).tan().ln();
            [
                v.len() as f64,
                layer.len() as f64,
                weakest,
                second,
                mean_best,
                mean_link,
                unlinked as f64,
                (circle.max_residual + 1e-4).log10(),
                (z_residual + 1e-3).log10(),
                circle.radius.clamp(1.0, STRAIGHT_RADIUS).ln(),
                (circle.d0 + 1e-3).log10(),
                (z0.abs() + 1e-2).log10(),
                if eta.is_finite() { eta.abs() } else { 10.0 },
                r0,
                r1,
                0.0,
                0.0,
                0.0,
            ]
        })
        .collect()
}

/// Fills the [`FIT_FEATURES`] of `features` (a row per candidate, candidate `id` at index
/// `id − 1`) from the candidates' fits (`fits.tracks` by track id = candidate id); a candidate
/// without a fit gets `fit_failed` 1.
pub fn add_fit_features(features: &mut [Features], fits: &EventFits) {
    for f in features.iter_mut() {
        f[NUM_BASE_FEATURES..].copy_from_slice(&[0.0, 0.0, 1.0]);
    }
    for t in &fits.tracks {
        if let Some(f) = features.get_mut(t.track_id as usize - 1) {
            f[NUM_BASE_FEATURES..].copy_from_slice(&[(t.chi2_per_ndf() + 0.01).log10(), t.outliers as f64, 0.0]);
        }
    }
}

/// Whether each candidate of `track_ids` (one id per node of a graph whose node `i` is hit
/// `node_hit_id[i]` of `event`, numbered `1, 2, …` as every builder numbers them), at index
/// `id − 1`, is fake: not pure by the metrics' own composition of tracks, so by exactly
/// their definition ([`TrackMetrics::fake_rate`](crate::TrackMetrics::fake_rate)).
///
/// # Errors
/// If the event has no truth, or a node's hit is not a hit of the event or appears twice
/// ([`event_track_ids`]).
pub fn fake_candidates(event: &Event, node_hit_id: &[u64], track_ids: &[u32]) -> Result<Vec<bool>> {
    let truth = event.truth.as_ref().ok_or(Error::MissingPart { event_id: event.event_id, part: "truth" })?;
    let ids = event_track_ids(&event.hits.hit_id, node_hit_id, track_ids)?;
    let comp = compose(&truth.particle_id, &truth.weight, |i| {
        if ids[i] == NO_TRACK { singleton_key(i) } else { u64::from(ids[i]) }
    });
    Ok(comp.tracks.iter().filter(|t| t.assigned).map(|t| !comp.is_pure(t)).collect())
}

/// Candidates' features and whether each is fake: what a [`QualityModel`] is fitted to.
#[derive(Clone, Debug, Default)]
pub struct QualitySamples {
    /// One row per candidate.
    pub features: Vec<Features>,
    /// Whether each candidate is fake ([`fake_candidates`]).
    pub fake: Vec<bool>,
    /// The events the candidates came from.
    pub events: usize,
}

impl QualitySamples {
    /// Appends another event's candidates.
    pub fn extend(&mut self, features: Vec<Features>, fake: Vec<bool>) {
        assert_eq!(features.len(), fake.len(), "one label per candidate");
        self.features.extend(features);
        self.fake.extend(fake);
        self.events += 1;
    }

    /// The number of fake candidates.
    pub fn num_fakes(&self) -> usize {
        self.fake.iter().filter(|&&f| f).count()
    }
}

/// How the candidates a model is fitted to were built: a model judges candidates built the
/// same way ([`Reconstructor::with_quality`](crate::inference::Reconstructor::with_quality)
/// checks it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CandidateSource {
    /// The track builder.
    pub method: TrackMethod,
    /// Its edge score cut.
    pub score_cut: f64,
    /// Its smallest candidate, in hits.
    pub min_hits: usize,
    /// Track following's settings (its method only); models written before they were
    /// recorded read without them, and judge no candidates of track following.
    #[serde(default)]
    pub follow: Option<FollowConfig>,
}

impl CandidateSource {
    /// The source of the candidates `config` builds.
    pub fn of(config: &TrackBuilderConfig) -> CandidateSource {
        CandidateSource {
            method: config.method,
            score_cut: config.score_cut,
            min_hits: config.min_hits,
            follow: config.follow_settings().cloned(),
        }
    }
}

impl std::fmt::Display for CandidateSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let method = format!("{:?}", self.method).to_lowercase();
        write!(f, "{method} candidates (score cut {}, >= {} hits", self.score_cut, self.min_hits)?;
        if self.method == TrackMethod::Follow {
            match &self.follow {
                // The settings that differ from the defaults, by name.
                Some(follow) => {
                    let (ours, default) = (fields_of(follow), fields_of(&FollowConfig::default()));
                    for (key, value) in ours.iter().filter(|(k, v)| default.get(*k) != Some(*v)) {
                        write!(f, ", {key} {value}")?;
                    }
                }
                None => write!(f, ", follow settings not recorded")?,
            }
        }
        write!(f, ")")
    }
}

/// A serialisable value's fields and their values as JSON text, by name.
fn fields_of(value: &impl Serialize) -> std::collections::BTreeMap<String, String> {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::Object(map)) => map.into_iter().map(|(k, v)| (k, v.to_string())).collect(),
        _ => Default::default(),
    }
}

/// The file format name a model file carries.
const FORMAT: &str = "trackgnn-candidate-quality-1";

/// A logistic regression predicting the probability that a candidate is fake from its
/// [`FEATURES`] (the first [`NUM_BASE_FEATURES`], or all of them when it uses the fit's), each
/// standardised by the training set's mean and spread.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QualityModel {
    /// The file format ([`QualityModel::load`] checks it).
    pub format: String,
    /// The feature names: the first [`NUM_BASE_FEATURES`] of [`FEATURES`], or all of them.
    pub features: Vec<String>,
    /// Each feature's mean over the training candidates.
    pub mean: Vec<f64>,
    /// Each feature's standard deviation over the training candidates (1 where it is 0).
    pub scale: Vec<f64>,
    /// The weight of each standardised feature.
    pub weights: Vec<f64>,
    /// The intercept (the log-odds of a candidate at the means).
    pub bias: f64,
    /// The L2 penalty the weights were fitted with.
    pub l2: f64,
    /// Training candidates.
    pub train_candidates: usize,
    /// Training candidates that were fake.
    pub train_fakes: usize,
    /// Events the training candidates came from.
    pub train_events: usize,
    /// How the training candidates were built (`None`: not recorded, not checked).
    #[serde(default)]
    pub candidates: Option<CandidateSource>,
}

impl QualityModel {
    /// Fits the model to `samples` by Newton's method (iteratively reweighted least squares)
    /// on the mean log-loss plus `l2/2 · |w|²` (the intercept unpenalised), on all
    /// [`FEATURES`] when `use_fit`, else on the first [`NUM_BASE_FEATURES`].
    ///
    /// # Errors
    /// If there are no samples, only one class, a feature that is not finite, or `l2` is not
    /// finite and ≥ 0.
    pub fn fit(samples: &QualitySamples, l2: f64, use_fit: bool) -> Result<QualityModel> {
        if !(l2.is_finite() && l2 >= 0.0) {
            return Err(Error::config("l2", format!("must be finite and ≥ 0, got {l2}")));
        }
        let n = samples.features.len();
        let fakes = samples.num_fakes();
        if fakes == 0 || fakes == n {
            return Err(Error::config(
                "quality samples",
                format!("need fake and real candidates, got {fakes} fakes of {n} candidates"),
            ));
        }
        let k = if use_fit { NUM_FEATURES } else { NUM_BASE_FEATURES };
        if let Some((row, col)) = samples
            .features
            .iter()
            .enumerate()
            .find_map(|(i, f)| f[..k].iter().position(|v| !v.is_finite()).map(|c| (i, c)))
        {
            return Err(Error::config(
                "quality samples",
                format!("candidate {row}: feature `{}` is not finite", FEATURES[col]),
            ));
        }
        let mut mean = vec![0.0; k];
        for f in &samples.features {
            for (m, v) in mean.iter_mut().zip(f) {
                *m += v / n as f64;
            }
        }
        let mut scale = vec![0.0; k];
        for f in &samples.features {
            for ((s, v), m) in scale.iter_mut().zip(f).zip(&mean) {
                *s += (v - m).powi(2) / n as f64;
            }
        }
        let scale: Vec<f64> = scale.iter().map(|&v| if v > 0.0 { v.sqrt() } else { 1.0 }).collect();
        // Rows of the standardised features and a last column of ones for the intercept.
        let p = k + 1;
        let x: Vec<Vec<f64>> = samples
            .features
            .iter()
            .map(|f| (0..k).map(|j| (f[j] - mean[j]) / scale[j]).chain([1.0]).collect())
            .collect();
        let mut w = vec![0.0f64; p];
        let prior = fakes as f64 / n as f64;
        w[k] = (prior / (1.0 - prior)).ln();
        // The objective: mean log-loss plus the penalty (softplus(z) − y·z, stable in z).
        let objective = |w: &[f64]| {
            let data = x
                .iter()
                .zip(&samples.fake)
                .map(|(row, &y)| {
                    let z = dot(row, w);
                    z.max(0.0) + (-z.abs()).exp().ln_1p() - if y { z } else { 0.0 }
                })
                .sum::<f64>();
            data / n as f64 + 0.5 * l2 * w[..k].iter().map(|v| v * v).sum::<f64>()
        };
        let mut current = objective(&w);
        // Newton steps, halved until the objective falls enough (Armijo): a full step can
        // overshoot far when the classes are nearly separable.
        for _ in 0..100 {
            let mut grad = vec![0.0f64; p];
            let mut hess = vec![vec![0.0f64; p]; p];
            for (row, &y) in x.iter().zip(&samples.fake) {
                let prob = sigmoid(dot(row, &w));
                let g = prob - f64::from(u8::from(y));
                let h = (prob * (1.0 - prob)).max(1e-12);
                for i in 0..p {
                    grad[i] += g * row[i] / n as f64;
                    for (hij, rj) in hess[i].iter_mut().zip(row) {
                        *hij += h * row[i] * rj / n as f64;
                    }
                }
            }
            for i in 0..p {
                if i < k {
                    grad[i] += l2 * w[i];
                    hess[i][i] += l2;
                }
                hess[i][i] += 1e-10;
            }
            let step = cholesky_solve(hess, &grad)
                .ok_or_else(|| Error::config("quality samples", "the fit's Hessian is singular".to_string()))?;
            let slope = dot(&grad, &step);
            let mut t = 1.0;
            let (trial, value) = loop {
                let trial: Vec<f64> = w.iter().zip(&step).map(|(wi, si)| wi - t * si).collect();
                let value = objective(&trial);
                if value <= current - 1e-4 * t * slope || t < 1e-10 {
                    break (trial, value);
                }
                t *= 0.5;
            };
            let decrease = current - value;
            if decrease <= 0.0 {
                break;
            }
            (w, current) = (trial, value);
            if decrease < 1e-13 {
                break;
            }
        }
        Ok(QualityModel {
            format: FORMAT.to_string(),
            features: FEATURES[..k].iter().map(|s| s.to_string()).collect(),
            mean,
            scale,
            weights: w[..k].to_vec(),
            bias: w[k],
            l2,
            train_candidates: n,
            train_fakes: fakes,
            train_events: samples.events,
            candidates: None,
        })
    }

    /// Whether the model reads the features of the candidates' fits ([`FIT_FEATURES`]).
    pub fn uses_fit(&self) -> bool {
        self.features.len() == NUM_FEATURES
    }

    /// The probability that a candidate of these features is fake.
    pub fn fake_probability(&self, features: &Features) -> f64 {
        let z = features
            .iter()
            .zip(&self.mean)
            .zip(&self.scale)
            .zip(&self.weights)
            .map(|(((v, m), s), w)| (v - m) / s * w)
            .sum::<f64>();
        sigmoid(z + self.bias)
    }

    /// Writes the model to `path` as JSON (to a temporary name, then renamed).
    ///
    /// # Errors
    /// If the file cannot be written.
    pub fn save(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).expect("a model serialises");
        let tmp = path.with_extension("json.tmp");
        let io = |source| Error::Io { path: path.to_path_buf(), source };
        std::fs::write(&tmp, text + "\n").map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// Reads a model written by [`save`](Self::save).
    ///
    /// # Errors
    /// If the file cannot be read, is not such a model, was made for other features, or
    /// holds a value that is not finite.
    pub fn load(path: &Path) -> Result<QualityModel> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
        let bad = |message: String| Error::BadModel { path: path.to_path_buf(), message };
        let m: QualityModel = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        if m.format != FORMAT {
            return Err(bad(format!("format `{}`, expected `{FORMAT}`", m.format)));
        }
        if m.features != FEATURES[..NUM_BASE_FEATURES] && m.features != FEATURES {
            return Err(bad(format!(
                "features {:?}, expected {:?}, without or with those of the fit",
                m.features, FEATURES
            )));
        }
        let k = m.features.len();
        for (name, v) in [("mean", &m.mean), ("scale", &m.scale), ("weights", &m.weights)] {
            if v.len() != k {
                return Err(bad(format!("`{name}` has {} values, expected {k}", v.len())));
            }
            if let Some(x) = v.iter().find(|x| !x.is_finite()) {
                return Err(bad(format!("`{name}` holds {x}")));
            }
        }
        if m.scale.iter().any(|&s| s <= 0.0) || !m.bias.is_finite() {
            return Err(bad("`scale` must be positive and `bias` finite".to_string()));
        }
        Ok(m)
    }
}

fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Solves `a x = b` for a symmetric positive definite `a`; `None` if it is not.
fn cholesky_solve(a: Vec<Vec<f64>>, b: &[f64]) -> Option<Vec<f64>> {
    let p = b.len();
    let mut l = vec![vec![0.0f64; p]; p];
    for i in 0..p {
        for j in 0..=i {
            let s = a[i][j] - (0..j).map(|k| l[i][k] * l[j][k]).sum::<f64>();
            if i == j {
                if s <= 0.0 {
                    return None;
                }
                l[i][i] = s.sqrt();
            } else {
                l[i][j] = s / l[j][j];
            }
        }
    }
    let mut y = vec![0.0f64; p];
    for i in 0..p {
        y[i] = (b[i] - (0..i).map(|k| l[i][k] * y[k]).sum::<f64>()) / l[i][i];
    }
    let mut x = vec![0.0f64; p];
    for i in (0..p).rev() {
        x[i] = (y[i] - (i + 1..p).map(|k| l[k][i] * x[k]).sum::<f64>()) / l[i][i];
    }
    Some(x)
}

/// `track_ids` without the candidates whose fake probability by `model` ([`candidate_features`]
/// of `edges`, with the features of `fits` when given: [`add_fit_features`]) exceeds
/// `max_fake_probability` (their nodes get [`NO_TRACK`]), the others renumbered `1, 2, …` in
/// the order of their smallest node. Returns the ids and the number of candidates dropped.
///
/// # Panics
/// As [`candidate_features`], and if the model uses the fit's features but no `fits` are given.
#[track_caller]
pub fn select_by_quality(
    edges: &ScoredEdges<'_>,
    track_ids: &[u32],
    model: &QualityModel,
    max_fake_probability: f64,
    fits: Option<&EventFits>,
) -> (Vec<u32>, usize) {
    assert!(fits.is_some() || !model.uses_fit(), "the quality model needs the candidates' fits");
    let mut features = candidate_features(edges, track_ids);
    if let Some(fits) = fits {
        add_fit_features(&mut features, fits);
    }
    let keep: Vec<bool> = features.iter().map(|f| model.fake_probability(f) <= max_fake_probability).collect();
    let dropped = keep.iter().filter(|&&k| !k).count();
    (keep_candidates(track_ids, |c| keep[c]), dropped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracks::search::{NodeLayers, Surface};
    use trackgnn_trackml::{Detector, ModuleId, ParticleId, Truth};

    /// Hits at radii `rs` of a particle from the origin on a helix of transverse radius
    /// `big_r` \[mm\] at pseudorapidity `eta` (z grows with the arc length), as (r, φ, z).
    fn helix(rs: &[f64], big_r: f64, eta: f64) -> Vec<(f32, f32, f32)> {
        let cot = (-(-eta).exp().atan() * 2.0 + std::f64::consts::FRAC_PI_2).tan();
        rs.iter()
            .map(|&r| {
                let t = 2.0 * (r / (2.0 * big_r)).acos();
                let (x, y) = (big_r + big_r * t.cos(), big_r * t.sin());
                let arc = 2.0 * big_r * (r / (2.0 * big_r)).asin();
                (x.hypot(y) as f32, y.atan2(x) as f32, (arc * cot) as f32)
            })
            .collect()
    }

    const RADII: [f64; 7] = [32.0, 72.0, 116.0, 172.0, 260.0, 360.0, 500.0];

    #[test]
    fn a_helix_from_the_beam_line_has_its_radius_eta_and_no_residuals() {
        let mut pos = helix(&RADII, 2000.0, 0.5);
        // A second candidate: the same helix turned by 1 rad, its fourth hit moved 2 mm off it
        // in φ, and an eighth hit on no edge.
        let mut bent = helix(&RADII, 2000.0, 0.5);
        for p in &mut bent {
            p.1 += 1.0;
        }
        bent[3].1 += 2.0 / bent[3].0;
        bent.push((620.0, bent[6].1 + 0.05, bent[6].2 + 120.0 * 0.521));
        pos.extend(bent);
        let (r, phi, z): (Vec<f32>, Vec<f32>, Vec<f32>) =
            (pos.iter().map(|p| p.0).collect(), pos.iter().map(|p| p.1).collect(), pos.iter().map(|p| p.2).collect());
        let layer: Vec<u16> = (0..7).chain(0..8).collect();
        let module: Vec<u32> = (0..15).collect();
        let surfaces = Surface::of_detector(&Detector::trackml());
        // Chains 0→…→6 and 7→…→13 (node 14 on no edge); a weaker skip edge 0→2 too.
        let (mut src, mut dst, mut scores) = (vec![0u32], vec![2u32], vec![0.3f32]);
        let links = [0.9f32, 0.8, 0.95, 0.99, 0.97, 0.96];
        for (base, s) in [(0u32, &links), (7, &links)] {
            for (k, &score) in s.iter().enumerate() {
                src.push(base + k as u32);
                dst.push(base + k as u32 + 1);
                scores.push(score);
            }
        }
        let edges = ScoredEdges::new(15, &src, &dst, &scores).with_positions(&r, &phi, &z).with_layers(NodeLayers {
            layer: &layer,
            module: &module,
            surfaces: &surfaces,
        });
        let ids: Vec<u32> = [1u32; 7].into_iter().chain([2u32; 8]).collect();
        let f = candidate_features(&edges, &ids);
        let at = |c: usize, name: &str| f[c][FEATURES.iter().position(|&n| n == name).unwrap()];
        assert_eq!((at(0, "n_hits"), at(0, "n_layers"), at(1, "n_hits"), at(1, "n_layers")), (7.0, 7.0, 8.0, 8.0));
        assert_eq!((at(0, "weakest_link"), at(0, "second_weakest_link")), (0.800000011920929, 0.8999999761581421));
        let mean = links.iter().map(|&l| f64::from(l)).sum::<f64>() / 6.0;
        assert!((at(0, "mean_link") - mean).abs() < 1e-12 && at(0, "unlinked_hits") == 0.0);
        assert_eq!(at(1, "unlinked_hits"), 1.0);
        // The helix: its radius, |η|, a d0 and z0 of ~0 and residuals at the f32 rounding.
        assert!((at(0, "ln_radius") - 2000f64.ln()).abs() < 0.01, "{}", at(0, "ln_radius").exp());
        assert!((at(0, "abs_eta") - 0.5).abs() < 0.01, "{}", at(0, "abs_eta"));
        assert!(at(0, "log10_d0") < -2.0 && at(0, "log10_abs_z0") < -1.0, "{:?}", f[0]);
        assert!(at(0, "log10_xy_residual") < -3.0 && at(0, "log10_z_residual") < -2.0, "{:?}", f[0]);
        assert_eq!((at(0, "r_min"), at(0, "r_max")), (32.0, 500.0));
        // The bent one: a residual of the order of the 2 mm kink.
        assert!(at(1, "log10_xy_residual") > -0.5, "{:?}", f[1]);

        // A model that reads the residual alone drops the bent candidate and renumbers.
        let mut weights = vec![0.0; NUM_BASE_FEATURES];
        weights[FEATURES.iter().position(|&n| n == "log10_xy_residual").unwrap()] = 1.0;
        let mut mean = vec![0.0; NUM_BASE_FEATURES];
        mean[7] = -2.0;
        let model = QualityModel {
            format: FORMAT.to_string(),
            features: FEATURES[..NUM_BASE_FEATURES].iter().map(|s| s.to_string()).collect(),
            mean,
            scale: vec![1.0; NUM_BASE_FEATURES],
            weights,
            bias: 0.0,
            l2: 0.0,
            train_candidates: 0,
            train_fakes: 0,
            train_events: 0,
            candidates: None,
        };
        let swapped: Vec<u32> = ids.iter().map(|&i| 3 - i).collect();
        let (kept, dropped) = select_by_quality(&edges, &swapped, &model, 0.5, None);
        assert_eq!((kept, dropped), ([1u32; 7].into_iter().chain([0; 8]).collect::<Vec<_>>(), 1));
        assert_eq!(select_by_quality(&edges, &ids, &model, 1.0, None), (ids.clone(), 0));
    }

    #[test]
    fn collinear_hits_fit_a_straight_line() {
        let pos: Vec<[f64; 3]> = (0..5).map(|k| [10.0 + 100.0 * k as f64, 5.0, 0.0]).collect();
        let c = fit_circle(&pos);
        assert_eq!(c.radius, STRAIGHT_RADIUS);
        assert!((c.d0 - 5.0).abs() < 1e-9 && c.max_residual < 1e-9, "d0 {} residual {}", c.d0, c.max_residual);
    }

    /// Candidates: fake when short, real when long, with an uninformative second feature.
    fn samples(n: usize) -> QualitySamples {
        let mut s = QualitySamples::default();
        let mut x = 0.5f64;
        let (mut features, mut fake) = (Vec::new(), Vec::new());
        for i in 0..n {
            x = (x * 3.7 * (1.0 - x)).clamp(0.01, 0.99);
            let hits = 5.0 + (i % 8) as f64;
            let mut f = [0.0; NUM_FEATURES];
            f[0] = hits + x;
            f[1] = x * 10.0;
            features.push(f);
            fake.push(hits + x < 8.0);
        }
        s.extend(features, fake);
        s
    }

    #[test]
    fn the_fit_learns_what_separates_fakes() {
        let s = samples(400);
        let m = QualityModel::fit(&s, 1e-3, false).unwrap();
        assert_eq!((m.train_candidates, m.train_fakes, m.train_events), (400, s.num_fakes(), 1));
        let wrong = s.features.iter().zip(&s.fake).filter(|(f, y)| (m.fake_probability(f) > 0.5) != **y).count();
        assert_eq!(wrong, 0, "separable classes");
        assert!(m.weights[0] < 0.0 && m.weights[0].abs() > 10.0 * m.weights[1].abs(), "{:?}", m.weights);
        // A stronger penalty shrinks the weights.
        let shrunk = QualityModel::fit(&s, 1.0, false).unwrap();
        assert!(shrunk.weights[0].abs() < m.weights[0].abs());
        // What cannot be fitted is refused and said.
        let one_class = QualitySamples { fake: vec![false; 400], ..s.clone() };
        let err = QualityModel::fit(&one_class, 1e-3, false).unwrap_err().to_string();
        assert!(err.contains("0 fakes of 400"), "{err}");
        let mut nan = s.clone();
        nan.features[7][3] = f64::NAN;
        let err = QualityModel::fit(&nan, 1e-3, false).unwrap_err().to_string();
        assert!(err.contains("candidate 7") && err.contains(FEATURES[3]), "{err}");
        assert!(QualityModel::fit(&s, -1.0, false).unwrap_err().to_string().contains("l2"));
    }

    #[test]
    fn the_fit_reaches_the_optimum_with_rare_fakes() {
        // 1.5% fakes, mostly told apart by two of 15 features, and a few outliers: a Newton
        // step without a line search overshot on such candidates (57 fakes of 4394 on 6
        // pile-up-20 events: weights of several hundred, nothing dropped).
        let mut state = 7u64;
        let mut uniform = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut s = QualitySamples::default();
        let (mut features, mut fake) = (Vec::new(), Vec::new());
        for i in 0..3000 {
            let mut f = [0.0; NUM_FEATURES];
            for v in &mut f {
                *v = (0..4).map(|_| uniform()).sum::<f64>() - 2.0;
            }
            f[9] *= 300.0;
            if i % 500 == 0 {
                f[6] = 40.0;
            }
            fake.push(f[0] + 0.5 * f[1] + 0.5 * (uniform() - 0.5) > 1.4);
            features.push(f);
        }
        s.extend(features, fake);
        let fakes = s.num_fakes();
        assert!((20..80).contains(&fakes), "{fakes} fakes");
        let l2 = 1e-4;
        // On every feature, those of the fit included.
        let m = QualityModel::fit(&s, l2, true).unwrap();
        assert!(m.uses_fit() && m.weights.len() == NUM_FEATURES);
        // The objective is convex: at its minimum its gradient vanishes.
        let n = s.fake.len() as f64;
        let mut grad = vec![0.0; NUM_FEATURES + 1];
        for (f, &y) in s.features.iter().zip(&s.fake) {
            let g = m.fake_probability(f) - f64::from(u8::from(y));
            for k in 0..NUM_FEATURES {
                grad[k] += g * (f[k] - m.mean[k]) / m.scale[k] / n;
            }
            grad[NUM_FEATURES] += g / n;
        }
        for (g, w) in grad.iter_mut().zip(&m.weights) {
            *g += l2 * w;
        }
        assert!(grad.iter().all(|g| g.abs() < 1e-7), "gradient at the fit {grad:?}");
        let log_loss = |p: &dyn Fn(&Features) -> f64| {
            s.features
                .iter()
                .zip(&s.fake)
                .map(|(f, &y)| -(if y { p(f) } else { 1.0 - p(f) }).max(1e-300).ln())
                .sum::<f64>()
                / n
        };
        let prior = fakes as f64 / n;
        let (fitted, constant) = (log_loss(&|f| m.fake_probability(f)), log_loss(&|_| prior));
        assert!(fitted < 0.5 * constant, "log-loss {fitted} against {constant} for the prior alone");
    }

    #[test]
    fn a_model_file_round_trips_and_a_bad_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.json");
        let m = QualityModel::fit(&samples(200), 1e-3, false).unwrap();
        m.save(&path).unwrap();
        assert_eq!(QualityModel::load(&path).unwrap(), m);
        assert!(!dir.path().join("q.json.tmp").exists());
        let text = std::fs::read_to_string(&path).unwrap();
        for (what, bad) in [
            ("not JSON", "{".to_string()),
            ("other features", text.replace("\"n_hits\"", "\"hits\"")),
            ("other format", text.replace(FORMAT, "something-else")),
            ("a short mean", {
                let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
                v["mean"].as_array_mut().unwrap().pop();
                v.to_string()
            }),
        ] {
            std::fs::write(&path, bad).unwrap();
            let err = QualityModel::load(&path).unwrap_err().to_string();
            assert!(err.starts_with(&path.display().to_string()), "{what}: {err}");
        }
        let err = QualityModel::load(&dir.path().join("missing.json")).unwrap_err().to_string();
        assert!(err.contains("missing.json"), "{err}");
    }

    #[test]
    fn fakes_are_candidates_without_a_majority_particle() {
        let mut event = Event { event_id: 3, ..Default::default() };
        let mut truth = Truth::default();
        // Hits 1-4 of particle 5, 5-6 of particle 6, 7-8 noise.
        for (h, p) in [(1u64, 5u64), (2, 5), (3, 5), (4, 5), (5, 6), (6, 6), (7, 0), (8, 0)] {
            event.hits.push(h, [h as f32, 0.0, 0.0], ModuleId::new(8, 2, 1));
            truth.push(ParticleId(p), [0.0; 3], [0.0; 3], 0.1);
        }
        // Nodes are hits 8, 7, …, 1 (reversed). Candidate 1: hits 1, 2, 3, 5 (3 of 4 from
        // particle 5: real); 2: hits 4, 6 (half and half: fake); 3: 7, 8 (noise: fake).
        let node_hit_id: Vec<u64> = (1..=8).rev().collect();
        let ids = [3, 3, 2, 1, 2, 1, 1, 1];
        assert!(matches!(
            fake_candidates(&event, &node_hit_id, &ids),
            Err(Error::MissingPart { event_id: 3, part: "truth" })
        ));
        event.truth = Some(truth);
        assert_eq!(fake_candidates(&event, &node_hit_id, &ids).unwrap(), [false, true, true]);
        let err = fake_candidates(&event, &[9, 1, 2, 3, 4, 5, 6, 7], &ids).unwrap_err().to_string();
        assert!(err.contains("hit 9"), "{err}");
    }
}
