//! Which way an edge is stored: outward along the path of the particle that would cross its two
//! hits. A particle of pT ≥ 1 GeV moves outward in r until it leaves the detector, so two hits
//! on one end-cap disk are ordered by |z| (their measured r is no guide there: a strip hit's r
//! is known only to a strip's length) and every other pair by r, ties by node index. This is
//! the rule the track builders walk edges by (`trackgnn_reco::tracks::ScoredEdges::outward`),
//! so the GNN and the builders see every edge the same way.

use serde::{Deserialize, Serialize};
use trackgnn_trackml::geometry::{Detector, LayerKind};

use crate::features::HitTable;

/// How a recipe stores its edges' directions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EdgeDirection {
    /// As the builders emitted them, the first of two opposite edges kept: the graphs of
    /// recipes written before this key existed (inward edges on dense geometric graphs,
    /// barrel overlaps ordered by distance from the origin). Kept so that their runs rebuild
    /// the graphs they were trained on.
    #[default]
    AsBuilt,
    /// Outward along the particle's path ([`outward`]); new recipes use it.
    Outward,
}

/// Edge `(a, b)` as `(first, second)` in the order a particle from the beam line crosses the
/// two hits: by |z| on one end-cap disk, else by r; ties by node index.
#[inline]
pub fn outward(t: &HitTable, det: &Detector, a: u32, b: u32) -> (u32, u32) {
    let (i, j) = (a as usize, b as usize);
    let same_disk = t.layer[i] == t.layer[j] && det.layers[t.layer[i] as usize].kind == LayerKind::Endcap;
    let reverse = if same_disk { (t.z[j].abs(), b) < (t.z[i].abs(), a) } else { (t.r[j], b) < (t.r[i], a) };
    if reverse { (b, a) } else { (a, b) }
}

/// Turns every edge outward ([`outward`]), in place.
pub fn orient_outward(t: &HitTable, det: &Detector, src: &mut [u32], dst: &mut [u32]) {
    for (s, d) in src.iter_mut().zip(dst.iter_mut()) {
        (*s, *d) = outward(t, det, *s, *d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nodes on the detector's layers `layer`, at (r, z).
    fn table(det: &Detector, nodes: &[(usize, f32, f32)]) -> HitTable {
        let mut t = HitTable::default();
        for &(l, r, z) in nodes {
            assert!(l < det.layers.len());
            t.layer.push(l as u16);
            t.r.push(r);
            t.z.push(z);
        }
        t
    }

    #[test]
    fn outward_orders_by_z_on_one_disk_and_by_r_elsewhere() {
        let det = Detector::trackml();
        let disk = det.layers.iter().position(|l| l.kind == LayerKind::Endcap && l.z_mean < 0.0).unwrap();
        let barrel = det.layers.iter().position(|l| l.kind == LayerKind::Barrel).unwrap();
        let t = table(
            &det,
            &[
                // 0, 1: one negative disk, the outer |z| with the smaller r (a strip's r spread).
                (disk, 320.0, -1502.0),
                (disk, 321.0, -1500.0),
                // 2, 3: one barrel layer, an overlap where the farther-from-origin hit has the
                // smaller r (z0 far from 0).
                (barrel, 33.0, 150.0),
                (barrel, 32.0, 160.0),
                // 4: another layer, larger r.
                (barrel + 1, 72.0, 10.0),
            ],
        );
        assert_eq!((outward(&t, &det, 0, 1), outward(&t, &det, 1, 0)), ((1, 0), (1, 0)), "disk: by |z|");
        assert_eq!((outward(&t, &det, 2, 3), outward(&t, &det, 3, 2)), ((3, 2), (3, 2)), "barrel: by r");
        assert_eq!(outward(&t, &det, 4, 2), (2, 4));
        // Different layers are ordered by r even on disks.
        let t2 = table(&det, &[(disk, 300.0, -1500.0), (disk + 1, 290.0, -1300.0)]);
        assert_eq!(outward(&t2, &det, 0, 1), (1, 0));
        let (mut s, mut d) = (vec![1, 3, 4], vec![0, 2, 2]);
        orient_outward(&t, &det, &mut s, &mut d);
        assert_eq!((s, d), (vec![1, 3, 2], vec![0, 2, 4]));
    }
}
