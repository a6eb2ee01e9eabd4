//! Module-wise truth: which pairs of nodes are consecutive hits of one particle, and which of
//! those are targets of training.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::features::HitTable;

/// Which true edges the GNN is trained to find.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TargetConfig {
    /// Smallest particle pT \[GeV\] of a target edge.
    pub pt_min: f64,
    /// Fewest hits (nodes) a target particle has.
    pub min_hits: usize,
}

impl Default for TargetConfig {
    /// The field's definition: pT ≥ 1 GeV and ≥ 3 hits.
    fn default() -> Self {
        TargetConfig { pt_min: 1.0, min_hits: 3 }
    }
}

/// True edges of an event's node table, directed along the particle.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TruthEdges {
    /// Source node (earlier hit).
    pub src: Vec<u32>,
    /// Destination node (later hit).
    pub dst: Vec<u32>,
    /// True if the edge's particle is a target.
    pub target: Vec<bool>,
}

impl TruthEdges {
    /// Number of true edges.
    pub fn len(&self) -> usize {
        self.src.len()
    }
    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.src.is_empty()
    }
    /// Number of target edges.
    pub fn n_target(&self) -> usize {
        self.target.iter().filter(|&&t| t).count()
    }
}

/// Module-wise true edges: each particle's nodes ordered by distance from its production vertex,
/// grouped by module (consecutive hits on one module form a group), and every hit of a group
/// joined to every hit of the next group. Returns no edges for a table without truth.
pub fn truth_edges(t: &HitTable, target: &TargetConfig) -> TruthEdges {
    let Some(truth) = &t.truth else {
        return TruthEdges::default();
    };
    let mut by_particle: HashMap<u64, Vec<u32>> = HashMap::new();
    for (i, &pid) in truth.particle_id.iter().enumerate() {
        if pid != 0 {
            by_particle.entry(pid).or_default().push(i as u32);
        }
    }
    let mut particles: Vec<(u64, Vec<u32>)> = by_particle.into_iter().collect();
    particles.sort_unstable_by_key(|p| p.0);
    let mut out = TruthEdges::default();
    for (_, mut nodes) in particles {
        let first = nodes[0] as usize;
        let is_target = truth.particle_pt[first] as f64 >= target.pt_min && nodes.len() >= target.min_hits;
        nodes.sort_by(|&a, &b| {
            truth.dist_from_vertex[a as usize].total_cmp(&truth.dist_from_vertex[b as usize]).then(a.cmp(&b))
        });
        // Groups of consecutive nodes on one module.
        let mut groups: Vec<&[u32]> = Vec::new();
        let mut start = 0;
        for k in 1..=nodes.len() {
            if k == nodes.len() || t.module[nodes[k] as usize] != t.module[nodes[start] as usize] {
                groups.push(&nodes[start..k]);
                start = k;
            }
        }
        for w in groups.windows(2) {
            for &a in w[0] {
                for &b in w[1] {
                    out.src.push(a);
                    out.dst.push(b);
                    out.target.push(is_target);
                }
            }
        }
    }
    out
}

/// An undirected key of a node pair.
#[inline]
pub fn pair_key(a: u32, b: u32) -> u64 {
    let (lo, hi) = if a < b { (a, b) } else { (b, a) };
    ((lo as u64) << 32) | hi as u64
}

/// The node pair (lower, higher) of a [`pair_key`].
pub fn key_pair(key: u64) -> (u32, u32) {
    ((key >> 32) as u32, key as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::NodeTruth;
    use trackgnn_trackml::ids::ModuleId;

    /// A hand-made table: particle 7 crosses modules A, A, B, C (two hits on A from an
    /// overlap-like double hit), particle 9 crosses B, C; node 6 is noise.
    fn table() -> HitTable {
        let a = ModuleId::new(8, 2, 1);
        let b = ModuleId::new(8, 4, 1);
        let c = ModuleId::new(8, 6, 1);
        let rows: [(u64, ModuleId, f32, f32); 7] = [
            (7, b, 72.0, 2.0), // node 0
            (7, a, 32.0, 1.0), // node 1
            (9, c, 116.0, 0.5),
            (7, a, 33.0, 1.0), // node 3: second hit on module A
            (9, b, 72.0, 0.5),
            (7, c, 116.0, 2.0),
            (0, b, 70.0, 0.0),
        ];
        let mut t = HitTable::default();
        let mut nt = NodeTruth::default();
        for (i, &(pid, m, d, pt)) in rows.iter().enumerate() {
            t.hit_id.push(i as u64 + 1);
            t.module.push(m);
            nt.particle_id.push(pid);
            nt.particle_pt.push(pt);
            nt.particle_eta.push(0.0);
            nt.dist_from_vertex.push(d);
            nt.vertex_r.push(0.0);
        }
        t.truth = Some(nt);
        t
    }

    #[test]
    fn module_wise_truth_on_a_hand_made_event() {
        let e = truth_edges(&table(), &TargetConfig::default());
        let mut got: Vec<(u32, u32, bool)> = (0..e.len()).map(|i| (e.src[i], e.dst[i], e.target[i])).collect();
        got.sort();
        // Particle 7: {1, 3} on A → 0 on B → 5 on C; both A hits join B. Target (pT 2 ≥ 1, 4 hits).
        // Particle 9: 4 on B → 2 on C; pT 0.5: not a target.
        assert_eq!(got, vec![(0, 5, true), (1, 0, true), (3, 0, true), (4, 2, false)]);
        assert_eq!(e.n_target(), 3);
        // With min_hits 5, particle 7 (4 hits) is no longer a target.
        let e = truth_edges(&table(), &TargetConfig { pt_min: 1.0, min_hits: 5 });
        assert_eq!(e.n_target(), 0);
        assert_eq!(pair_key(3, 9), pair_key(9, 3));
    }
}
