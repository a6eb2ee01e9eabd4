//! What fitting a quality model reports (`trackgnn train-quality`): the training candidates,
//! the effect of a fake-probability cut on them (in-sample), and the fitted weights.

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

use super::{FEATURES, QualityModel, QualitySamples};

/// A fitted quality model's report; its JSON is `train-quality --json`'s object.
#[derive(Debug, Serialize)]
pub struct QualityFitReport {
    /// The model file written.
    pub out: PathBuf,
    /// Events the candidates came from.
    pub events: usize,
    /// Training candidates.
    pub candidates: usize,
    /// Fake training candidates.
    pub fakes: usize,
    /// Fakes / candidates before the selection.
    pub fake_rate: f64,
    /// The cut whose effect follows.
    pub max_fake_probability: f64,
    /// On the training candidates (in-sample), after dropping those above the cut.
    pub kept_candidates: usize,
    /// Fakes among them.
    pub kept_fakes: usize,
    /// Their fake rate.
    pub kept_fake_rate: f64,
    /// Real (not fake) training candidates that the cut drops, as a fraction of them.
    pub real_dropped_fraction: f64,
    /// The L2 penalty of the fit.
    pub l2: f64,
    /// The weight of each standardised feature, by name.
    pub weights: serde_json::Map<String, serde_json::Value>,
    /// Seconds of the whole command.
    pub seconds: f64,
}

impl QualityFitReport {
    /// The report of `model`, fitted with penalty `l2` to `samples` and written to `out`, with
    /// the effect of `max_fake_probability` on its training candidates.
    pub fn new(
        out: PathBuf,
        samples: &QualitySamples,
        model: &QualityModel,
        max_fake_probability: f64,
        l2: f64,
        seconds: f64,
    ) -> QualityFitReport {
        let (mut kept, mut kept_fakes, mut real_dropped) = (0usize, 0usize, 0usize);
        for (f, &fake) in samples.features.iter().zip(&samples.fake) {
            let keep = model.fake_probability(f) <= max_fake_probability;
            kept += usize::from(keep);
            kept_fakes += usize::from(keep && fake);
            real_dropped += usize::from(!keep && !fake);
        }
        let (n, fakes) = (samples.features.len(), samples.num_fakes());
        let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        QualityFitReport {
            out,
            events: samples.events,
            candidates: n,
            fakes,
            fake_rate: ratio(fakes, n),
            max_fake_probability,
            kept_candidates: kept,
            kept_fakes,
            kept_fake_rate: ratio(kept_fakes, kept),
            real_dropped_fraction: ratio(real_dropped, n - fakes),
            l2,
            weights: model.features.iter().zip(&model.weights).map(|(k, &w)| (k.to_string(), w.into())).collect(),
            seconds,
        }
    }
}

impl fmt::Display for QualityFitReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "quality model written to {}: {} candidates of {} events, {} fake (fake rate {:.4})",
            self.out.display(),
            self.candidates,
            self.events,
            self.fakes,
            self.fake_rate
        )?;
        writeln!(
            f,
            "on these candidates, fake probability <= {}: {} kept, fake rate {:.4}, {:.4} of the real candidates dropped",
            self.max_fake_probability, self.kept_candidates, self.kept_fake_rate, self.real_dropped_fraction
        )?;
        let weight = |k: &str| self.weights.get(k).and_then(|w| w.as_f64()).unwrap_or(f64::NAN);
        let w: Vec<String> = FEATURES
            .iter()
            .filter(|k| self.weights.contains_key(**k))
            .map(|k| format!("{k} {:+.2}", weight(k)))
            .collect();
        writeln!(f, "weights of the standardised features: {}", w.join(", "))?;
        writeln!(f, "{:.1} s", self.seconds)
    }
}
