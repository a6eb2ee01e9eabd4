//! The layer-pair adjacency of a detector, derived from its geometry.
//!
//! Straight rays in the (r, z) plane from points on the beam line (z0 ∈ {−z0_max, 0, +z0_max})
//! at pseudorapidities from −η_max to +η_max are intersected with every layer's envelope
//! (barrel layers at their mean radius within their z range, disks at their mean z within their
//! r range). The layers a ray crosses, in order, give the pairs (inner → outer) of consecutive
//! layers; with `skip` > 0, layers up to `skip` further out are paired too (for hits lost to
//! inefficiency or gaps between modules). Particles of pT ≥ 1 GeV travel nearly straight in
//! (r, z), so these pairs are the barrel → barrel, barrel → disk, disk → disk and pixel → strip
//! transitions a track can make. Derived from geometry, not from truth: no training events.

use std::collections::BTreeSet;

use trackgnn_trackml::geometry::{Detector, LayerKind};

/// Rays per unit of η in the scan.
const RAYS_PER_ETA: f64 = 400.0;

/// Ordered pairs of layer indices (inner, outer) a straight track from the beam line can join.
pub fn layer_pairs(det: &Detector, eta_max: f64, z0_max: f64, skip: usize) -> Vec<(u16, u16)> {
    let mut pairs = BTreeSet::new();
    let n = (2.0 * eta_max * RAYS_PER_ETA).ceil() as usize;
    for z0 in [-z0_max, 0.0, z0_max] {
        for k in 0..=n {
            let eta = -eta_max + 2.0 * eta_max * k as f64 / n as f64;
            let theta = 2.0 * (-eta).exp().atan();
            let (st, ct) = theta.sin_cos();
            // Ray: r = s·sinθ, z = z0 + s·cosθ; collect (s, layer) of the crossings.
            let mut hits: Vec<(f64, u16)> = Vec::new();
            for (li, l) in det.layers.iter().enumerate() {
                let s = match l.kind {
                    LayerKind::Barrel => {
                        let s = l.r_mean / st;
                        let z = z0 + s * ct;
                        (z >= l.z_min && z <= l.z_max).then_some(s)
                    }
                    LayerKind::Endcap => {
                        if ct.abs() < 1e-12 {
                            None
                        } else {
                            let s = (l.z_mean - z0) / ct;
                            let r = s * st;
                            (s > 0.0 && r >= l.r_min && r <= l.r_max).then_some(s)
                        }
                    }
                };
                if let Some(s) = s {
                    hits.push((s, li as u16));
                }
            }
            hits.sort_by(|a, b| a.0.total_cmp(&b.0));
            for i in 0..hits.len() {
                for j in i + 1..hits.len().min(i + 2 + skip) {
                    pairs.insert((hits[i].1, hits[j].1));
                }
            }
        }
    }
    pairs.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use trackgnn_trackml::ids::LayerId;

    #[test]
    fn trackml_adjacency_has_the_expected_transitions() {
        let det = Detector::trackml();
        let pairs = layer_pairs(&det, 4.0, 150.0, 0);
        let li = |v: u16, l: u16| det.layer_index(LayerId::new(v, l)).unwrap() as u16;
        let has = |a: (u16, u16), b: (u16, u16)| pairs.contains(&(li(a.0, a.1), li(b.0, b.1)));
        assert!(has((8, 2), (8, 4)), "barrel → barrel");
        assert!(has((8, 8), (13, 2)), "pixel → strip barrel");
        assert!(has((8, 2), (9, 2)), "barrel → first disk");
        assert!(has((9, 2), (9, 4)) && has((7, 14), (7, 12)), "disk → disk, both end-caps");
        let pixel_to_strip_disk = pairs
            .iter()
            .any(|&(a, b)| det.layers[a as usize].id.volume() == 9 && det.layers[b as usize].id.volume() == 14);
        assert!(pixel_to_strip_disk, "pixel disk → strip disk");
        assert!(has((13, 6), (14, 2)), "strip barrel → strip disk");
        assert!(has((13, 8), (17, 2)), "short → long strips");
        assert!(!has((8, 4), (8, 2)), "pairs point outward");
        assert!(!has((8, 2), (8, 6)), "no skipped layers without skip");
        assert!(!has((7, 2), (9, 2)), "no pairs across the two end-caps");
        let with_skip = layer_pairs(&det, 4.0, 150.0, 1);
        assert!(with_skip.contains(&(li(8, 2), li(8, 6))));
        assert!(with_skip.len() > pairs.len());
    }
}
