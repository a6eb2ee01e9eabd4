//! Preprocessing: the hits that become nodes (after cuts), their coordinates and features.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use trackgnn_trackml::Event;
use trackgnn_trackml::geometry::Detector;
use trackgnn_trackml::ids::ModuleId;
use trackgnn_trackml::physics::eta_of_point;

/// Which hits become nodes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeCuts {
    /// Truth "hard cut": keep only hits of particles with pT ≥ this \[GeV\] (needs truth; noise
    /// is dropped with it). `None` keeps every hit.
    pub pt_min: Option<f64>,
    /// Drop noise hits (needs truth).
    pub remove_noise: bool,
    /// Keep hits whose position has η in this range (truth-free).
    pub eta_range: Option<(f64, f64)>,
}

impl NodeCuts {
    /// True if any cut needs the truth.
    pub fn uses_truth(&self) -> bool {
        self.pt_min.is_some() || self.remove_noise
    }

    /// The same cuts without the truth-based ones (what inference can apply).
    pub fn without_truth(&self) -> NodeCuts {
        NodeCuts { pt_min: None, remove_noise: false, eta_range: self.eta_range }
    }
}

/// A per-hit quantity a node feature can be. In recipe files and graph headers it is written
/// by its name (`r`, `phi`, `z`, `eta`, `x`, `y`, `cluster_size`, `charge_sum`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Feature {
    /// Transverse radius \[mm\].
    R,
    /// Azimuth \[rad\], in (−π, π].
    Phi,
    /// z \[mm\].
    Z,
    /// Pseudorapidity of the hit seen from the origin.
    Eta,
    /// x \[mm\].
    X,
    /// y \[mm\].
    Y,
    /// Cells of the hit's cluster (needs the cells file).
    ClusterSize,
    /// Summed charge of the hit's cells (needs the cells file).
    ChargeSum,
}

impl Feature {
    /// Every feature, in the order of [`FEATURE_NAMES`].
    pub const ALL: [Feature; 8] = [
        Feature::R,
        Feature::Phi,
        Feature::Z,
        Feature::Eta,
        Feature::X,
        Feature::Y,
        Feature::ClusterSize,
        Feature::ChargeSum,
    ];

    /// The name in recipe files and graph headers.
    pub fn name(self) -> &'static str {
        FEATURE_NAMES[Feature::ALL.iter().position(|&f| f == self).expect("every feature is in ALL")]
    }

    /// Whether the feature is computed from the cells file.
    pub fn needs_cells(self) -> bool {
        matches!(self, Feature::ClusterSize | Feature::ChargeSum)
    }
}

impl std::fmt::Display for Feature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A node feature: a per-hit quantity divided by a scale.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeatureSpec {
    /// The quantity.
    pub name: Feature,
    /// The feature is `value / scale`.
    pub scale: f64,
}

/// The node features of a graph.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeatureConfig {
    /// Features in column order.
    pub features: Vec<FeatureSpec>,
}

impl Default for FeatureConfig {
    /// The field's default: r/1000, φ/π, z/1000 (Exa.TrkX / acorn).
    fn default() -> Self {
        let f = |name, scale| FeatureSpec { name, scale };
        FeatureConfig {
            features: vec![f(Feature::R, 1000.0), f(Feature::Phi, std::f64::consts::PI), f(Feature::Z, 1000.0)],
        }
    }
}

/// Names a feature may have, in the order of [`Feature::ALL`].
pub const FEATURE_NAMES: [&str; 8] = ["r", "phi", "z", "eta", "x", "y", "cluster_size", "charge_sum"];

/// The hits kept as nodes, with everything graph building needs, struct-of-arrays.
#[derive(Clone, Debug, Default)]
pub struct HitTable {
    /// Index of the hit in the event.
    pub hit_index: Vec<u32>,
    /// TrackML hit_id.
    pub hit_id: Vec<u64>,
    /// Global x, y, z \[mm\].
    pub x: Vec<f32>,
    /// Global y \[mm\].
    pub y: Vec<f32>,
    /// Global z \[mm\].
    pub z: Vec<f32>,
    /// Transverse radius \[mm\].
    pub r: Vec<f32>,
    /// Azimuth \[rad\].
    pub phi: Vec<f32>,
    /// Pseudorapidity of the position seen from the origin.
    pub eta: Vec<f32>,
    /// The module.
    pub module: Vec<ModuleId>,
    /// Index of the hit's layer in the detector.
    pub layer: Vec<u16>,
    /// Cells in the hit's cluster (0 without cells).
    pub cluster_size: Vec<f32>,
    /// Sum of the cluster's cell values (0 without cells).
    pub charge_sum: Vec<f32>,
    /// Truth per node, when the event has it.
    pub truth: Option<NodeTruth>,
}

/// Per-node truth.
#[derive(Clone, Debug, Default)]
pub struct NodeTruth {
    /// particle_id (0 for noise).
    pub particle_id: Vec<u64>,
    /// Particle pT \[GeV\] (0 for noise or unknown particles).
    pub particle_pt: Vec<f32>,
    /// Particle η at production.
    pub particle_eta: Vec<f32>,
    /// Distance of the hit from its particle's production vertex \[mm\] (the truth order).
    pub dist_from_vertex: Vec<f32>,
    /// Transverse distance of the particle's production vertex from the beam line \[mm\].
    pub vertex_r: Vec<f32>,
}

impl HitTable {
    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.hit_id.len()
    }
    /// True if no hit passed the cuts.
    pub fn is_empty(&self) -> bool {
        self.hit_id.is_empty()
    }

    /// Builds the node table of an event. Truth-based cuts need truth and particles; without
    /// them the table has no truth and only truth-free cuts may be asked for.
    ///
    /// # Errors
    /// A hit on a module the detector does not have, or a truth cut without truth.
    pub fn build(event: &Event, det: &Detector, cuts: &NodeCuts) -> crate::Result<HitTable> {
        let hits = &event.hits;
        let truth = event.truth.as_ref().zip(event.particles.as_ref());
        if cuts.uses_truth() && truth.is_none() {
            return Err(crate::Error::Config(format!(
                "event {}: the node cuts (pt_min / remove_noise) need truth and particles",
                event.event_id
            )));
        }
        // Particle properties by id.
        let pinfo: HashMap<u64, (f32, f32, [f32; 3])> = match truth {
            Some((_, p)) => (0..p.len())
                .map(|i| (p.particle_id[i].0, (p.pt(i) as f32, p.eta(i) as f32, [p.vx[i], p.vy[i], p.vz[i]])))
                .collect(),
            None => HashMap::new(),
        };
        // Cluster sizes and charges by hit.
        let mut cl: HashMap<u64, (f32, f32)> = HashMap::new();
        if let Some(c) = &event.cells {
            for i in 0..c.len() {
                let e = cl.entry(c.hit_id[i]).or_default();
                e.0 += 1.0;
                e.1 += c.value[i];
            }
        }
        let mut t = HitTable::default();
        let mut nt = truth.map(|_| NodeTruth::default());
        for i in 0..hits.len() {
            let (x, y, z) = (hits.x[i], hits.y[i], hits.z[i]);
            let eta = eta_of_point(x as f64, y as f64, z as f64) as f32;
            if let Some((lo, hi)) = cuts.eta_range
                && ((eta as f64) < lo || (eta as f64) > hi)
            {
                continue;
            }
            let mut node_truth = None;
            if let Some((tr, _)) = truth {
                let pid = tr.particle_id[i];
                if pid.is_noise() && (cuts.remove_noise || cuts.pt_min.is_some()) {
                    continue;
                }
                let (pt, peta, v) = pinfo.get(&pid.0).copied().unwrap_or((0.0, 0.0, [0.0; 3]));
                if cuts.pt_min.is_some_and(|m| (pt as f64) < m) {
                    continue;
                }
                let d = ((tr.tx[i] - v[0]).powi(2) + (tr.ty[i] - v[1]).powi(2) + (tr.tz[i] - v[2]).powi(2)).sqrt();
                node_truth = Some((pid.0, pt, peta, d, v[0].hypot(v[1])));
            }
            let module = hits.module[i];
            let layer = det.layer_index(module.layer_id()).ok_or_else(|| {
                crate::Error::Config(format!(
                    "event {}: hit {} is on {module}, which the detector does not have",
                    event.event_id, hits.hit_id[i]
                ))
            })?;
            t.hit_index.push(i as u32);
            t.hit_id.push(hits.hit_id[i]);
            t.x.push(x);
            t.y.push(y);
            t.z.push(z);
            t.r.push((x as f64).hypot(y as f64) as f32);
            t.phi.push((y as f64).atan2(x as f64) as f32);
            t.eta.push(eta);
            t.module.push(module);
            t.layer.push(layer as u16);
            let (cs, q) = cl.get(&hits.hit_id[i]).copied().unwrap_or((0.0, 0.0));
            t.cluster_size.push(cs);
            t.charge_sum.push(q);
            if let (Some(nt), Some((pid, pt, peta, d, vr))) = (nt.as_mut(), node_truth) {
                nt.particle_id.push(pid);
                nt.particle_pt.push(pt);
                nt.particle_eta.push(peta);
                nt.dist_from_vertex.push(d);
                nt.vertex_r.push(vr);
            }
        }
        t.truth = nt;
        Ok(t)
    }

    /// The value of a quantity for node `i`.
    fn quantity(&self, feature: Feature, i: usize) -> f64 {
        (match feature {
            Feature::R => self.r[i],
            Feature::Phi => self.phi[i],
            Feature::Z => self.z[i],
            Feature::Eta => self.eta[i],
            Feature::X => self.x[i],
            Feature::Y => self.y[i],
            Feature::ClusterSize => self.cluster_size[i],
            Feature::ChargeSum => self.charge_sum[i],
        }) as f64
    }

    /// The scaled node features, row-major (num_nodes, features).
    pub fn features(&self, cfg: &FeatureConfig) -> crate::Result<Vec<f32>> {
        for f in &cfg.features {
            if !(f.scale.is_finite() && f.scale != 0.0) {
                return Err(crate::Error::Config(format!(
                    "node feature `{}`: scale must be finite and non-zero",
                    f.name
                )));
            }
        }
        let mut out = Vec::with_capacity(self.len() * cfg.features.len());
        for i in 0..self.len() {
            for f in &cfg.features {
                out.push((self.quantity(f.name, i) / f.scale) as f32);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_keep_their_names_in_recipe_files() {
        for (f, name) in Feature::ALL.iter().zip(FEATURE_NAMES) {
            assert_eq!(f.name(), name);
            let spec: FeatureSpec = serde_json::from_str(&format!(r#"{{"name": "{name}", "scale": 2.0}}"#)).unwrap();
            assert_eq!(spec.name, *f);
            assert!(serde_json::to_string(&spec).unwrap().contains(&format!(r#""name":"{name}""#)));
        }
        let err = serde_json::from_str::<FeatureSpec>(r#"{"name": "rho", "scale": 1.0}"#).unwrap_err().to_string();
        assert!(err.contains("rho") && err.contains("cluster_size"), "{err}");
        assert!(Feature::ChargeSum.needs_cells() && !Feature::Phi.needs_cells());
    }
}
