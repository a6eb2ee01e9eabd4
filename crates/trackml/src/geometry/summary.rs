//! A detector's layers summarised: what `trackgnn geometry` prints ([`DetectorSummary`]).

use std::collections::BTreeSet;
use std::fmt;

use serde::Serialize;

use super::{Detector, LayerKind};

/// One layer of a [`DetectorSummary`]. Millimetres.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LayerSummary {
    /// Volume id.
    pub volume_id: u16,
    /// Layer id within the volume.
    pub layer_id: u16,
    /// Modules on the layer.
    pub modules: usize,
    /// Barrel or end-cap.
    pub kind: LayerKind,
    /// The sensor technology's name.
    pub technology: &'static str,
    /// Smallest radius \[mm\].
    pub r_min_mm: f64,
    /// Largest radius \[mm\].
    pub r_max_mm: f64,
    /// Smallest z \[mm\].
    pub z_min_mm: f64,
    /// Largest z \[mm\].
    pub z_max_mm: f64,
}

/// A detector's module, layer and volume counts and its layers. Its `Display` is a table with a
/// row per layer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DetectorSummary {
    /// Modules.
    pub modules: usize,
    /// Layers.
    pub layers: usize,
    /// Volumes.
    pub volumes: usize,
    /// One entry per layer.
    pub per_layer: Vec<LayerSummary>,
}

impl DetectorSummary {
    /// The summary of `det`.
    pub fn of(det: &Detector) -> DetectorSummary {
        let per_layer = det
            .layers
            .iter()
            .map(|l| LayerSummary {
                volume_id: l.id.volume(),
                layer_id: l.id.layer(),
                modules: l.modules.len(),
                kind: l.kind,
                technology: l.technology.name(),
                r_min_mm: l.r_min,
                r_max_mm: l.r_max,
                z_min_mm: l.z_min,
                z_max_mm: l.z_max,
            })
            .collect();
        DetectorSummary {
            modules: det.modules.len(),
            layers: det.layers.len(),
            volumes: det.layers.iter().map(|l| l.id.volume()).collect::<BTreeSet<_>>().len(),
            per_layer,
        }
    }
}

impl fmt::Display for DetectorSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:>6} {:>5} {:>7}  {:>9} {:>9} {:>9} {:>9}  kind",
            "volume", "layer", "modules", "r_min", "r_max", "z_min", "z_max"
        )?;
        for l in &self.per_layer {
            writeln!(
                f,
                "{:>6} {:>5} {:>7}  {:>9.1} {:>9.1} {:>9.1} {:>9.1}  {:?} {}",
                l.volume_id,
                l.layer_id,
                l.modules,
                l.r_min_mm,
                l.r_max_mm,
                l.z_min_mm,
                l.z_max_mm,
                l.kind,
                l.technology
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trackml_detector_has_a_row_per_layer() {
        let s = DetectorSummary::of(&Detector::trackml());
        assert_eq!(s.per_layer.len(), s.layers);
        assert_eq!(s.per_layer.iter().map(|l| l.modules).sum::<usize>(), s.modules);
        assert!(s.volumes >= 3 && s.volumes < s.layers);
        assert_eq!(s.to_string().lines().count(), s.layers + 1);
    }
}
