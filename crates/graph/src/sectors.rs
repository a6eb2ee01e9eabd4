//! Sector splitting ("naive domain parallelism"): an event's graph cut into overlapping regions
//! in φ and η, each a graph of its own, so training can work on parts of full events.
//!
//! A sector keeps the nodes whose φ lies within its φ range grown by `overlap_phi` on each side
//! (wrapping at ±π) and whose η (of the hit position) lies within its η range grown by
//! `overlap_eta`, and the edges whose two ends it keeps. Each edge is *owned* by the one sector
//! whose core (the ranges without overlap) holds its source node, so a loss summed over sectors
//! counts every edge once ([`crate::Graph::edge_owned`]).

use std::collections::HashSet;
use std::f64::consts::PI;

use serde::{Deserialize, Serialize};

use crate::graph::{Graph, GraphTruth};

/// How to cut graphs into sectors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SectorConfig {
    /// Sectors in φ.
    pub n_phi: usize,
    /// Sectors in η.
    pub n_eta: usize,
    /// φ overlap on each side \[rad\].
    pub overlap_phi: f64,
    /// η overlap on each side.
    pub overlap_eta: f64,
    /// The η range divided into `n_eta` sectors (hits outside go to the end sectors).
    pub eta_range: (f64, f64),
}

impl SectorConfig {
    /// `n_phi × n_eta` sectors with the given overlaps over η ∈ [−4, 4].
    pub fn new(n_phi: usize, n_eta: usize, overlap_phi: f64, overlap_eta: f64) -> Self {
        SectorConfig { n_phi: n_phi.max(1), n_eta: n_eta.max(1), overlap_phi, overlap_eta, eta_range: (-4.0, 4.0) }
    }

    /// Parses `PHIxETA` (e.g. `8x2`) with an overlap `PHI_RAD,ETA` (default `0.3,0.3`): the
    /// spelling of `build-graphs --sectors` and `--sector-overlap`.
    pub fn parse(spec: &str, overlap: Option<&str>) -> crate::Result<Self> {
        let bad = |what: &str, example: &str| crate::Error::Config(format!("sectors: `{what}` is not {example}"));
        let pair = |s: &str, sep: char| s.split_once(sep).map(|(a, b)| (a.trim().to_string(), b.trim().to_string()));
        let (p, e) = pair(spec, 'x').ok_or_else(|| bad(spec, "PHIxETA, e.g. 8x2"))?;
        let (n_phi, n_eta) = p.parse().ok().zip(e.parse().ok()).ok_or_else(|| bad(spec, "PHIxETA, e.g. 8x2"))?;
        let (op, oe) = match overlap {
            Some(o) => pair(o, ',')
                .and_then(|(x, y)| x.parse().ok().zip(y.parse().ok()))
                .ok_or_else(|| bad(o, "an overlap PHI_RAD,ETA, e.g. 0.3,0.3"))?,
            None => (0.3, 0.3),
        };
        Ok(SectorConfig::new(n_phi, n_eta, op, oe))
    }

    /// Number of sectors.
    pub fn len(&self) -> usize {
        self.n_phi * self.n_eta
    }

    /// True if there are no sectors (never: at least 1 × 1).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn node_eta(g: &Graph, i: usize) -> f64 {
    let (r, z) = (g.r[i] as f64, g.z[i] as f64);
    if r > 0.0 { (z / r).asinh() } else { z.signum() * 10.0 }
}

/// φ distance from `phi` to the interval [lo, hi] (0 inside), wrapping.
fn phi_outside(phi: f64, lo: f64, hi: f64) -> f64 {
    let wrap = trackgnn_trackml::physics::wrap_phi::<f64>;
    let centre = 0.5 * (lo + hi);
    let half = 0.5 * (hi - lo);
    (wrap(phi - centre).abs() - half).max(0.0)
}

/// Splits a graph into `cfg.len()` sector graphs (sector k = iφ · n_eta + iη).
pub fn split(g: &Graph, cfg: &SectorConfig) -> Vec<Graph> {
    let n = g.num_nodes();
    let (elo, ehi) = cfg.eta_range;
    let eta: Vec<f64> = (0..n).map(|i| node_eta(g, i)).collect();
    let eta_bin =
        |x: f64| ((((x - elo) / (ehi - elo)) * cfg.n_eta as f64).floor().max(0.0) as usize).min(cfg.n_eta - 1);
    let phi_bin = |p: f64| ((((p + PI) / (2.0 * PI)) * cfg.n_phi as f64).floor().max(0.0) as usize).min(cfg.n_phi - 1);
    let core: Vec<usize> = (0..n).map(|i| phi_bin(g.phi[i] as f64) * cfg.n_eta + eta_bin(eta[i])).collect();
    let mut out = Vec::with_capacity(cfg.len());
    for ip in 0..cfg.n_phi {
        let (plo, phi_hi) =
            (-PI + 2.0 * PI * ip as f64 / cfg.n_phi as f64, -PI + 2.0 * PI * (ip + 1) as f64 / cfg.n_phi as f64);
        for ie in 0..cfg.n_eta {
            // End sectors extend to ±∞ in η so no hit is lost.
            let lo = if ie == 0 { f64::NEG_INFINITY } else { elo + (ehi - elo) * ie as f64 / cfg.n_eta as f64 };
            let hi = if ie + 1 == cfg.n_eta {
                f64::INFINITY
            } else {
                elo + (ehi - elo) * (ie + 1) as f64 / cfg.n_eta as f64
            };
            let k = ip * cfg.n_eta + ie;
            let keep: Vec<bool> = (0..n)
                .map(|i| {
                    core[i] == k
                        || (phi_outside(g.phi[i] as f64, plo, phi_hi) <= cfg.overlap_phi
                            && eta[i] >= lo - cfg.overlap_eta
                            && eta[i] <= hi + cfg.overlap_eta)
                })
                .collect();
            out.push(subgraph(g, &keep, |e| core[g.src[e] as usize] == k));
        }
    }
    out
}

/// The subgraph on the kept nodes (renumbered in order) and the edges between them.
fn subgraph(g: &Graph, keep: &[bool], owned: impl Fn(usize) -> bool) -> Graph {
    let mut new_index = vec![u32::MAX; keep.len()];
    let mut nodes = Vec::new();
    for (i, &k) in keep.iter().enumerate() {
        if k {
            new_index[i] = nodes.len() as u32;
            nodes.push(i);
        }
    }
    let edges: Vec<usize> =
        (0..g.num_edges()).filter(|&e| keep[g.src[e] as usize] && keep[g.dst[e] as usize]).collect();
    let nf = g.num_node_features();
    let ef = g.num_edge_features();
    let pick_nodes = |v: &[f32]| nodes.iter().map(|&i| v[i]).collect::<Vec<f32>>();
    Graph {
        event_id: g.event_id,
        node_feature_names: g.node_feature_names.clone(),
        node_features: nodes.iter().flat_map(|&i| g.node_features[i * nf..(i + 1) * nf].iter().copied()).collect(),
        edge_feature_names: g.edge_feature_names.clone(),
        edge_features: edges.iter().flat_map(|&e| g.edge_features[e * ef..(e + 1) * ef].iter().copied()).collect(),
        src: edges.iter().map(|&e| new_index[g.src[e] as usize]).collect(),
        dst: edges.iter().map(|&e| new_index[g.dst[e] as usize]).collect(),
        hit_id: nodes.iter().map(|&i| g.hit_id[i]).collect(),
        r: pick_nodes(&g.r),
        phi: pick_nodes(&g.phi),
        z: pick_nodes(&g.z),
        truth: g.truth.as_ref().map(|t| GraphTruth {
            particle_id: nodes.iter().map(|&i| t.particle_id[i]).collect(),
            particle_pt: pick_nodes(&t.particle_pt),
            particle_eta: pick_nodes(&t.particle_eta),
            particle_vertex_r: match t.particle_vertex_r.is_empty() {
                true => Vec::new(),
                false => pick_nodes(&t.particle_vertex_r),
            },
            y: edges.iter().map(|&e| t.y[e]).collect(),
            target: edges.iter().map(|&e| t.target[e]).collect(),
            n_true_edges_event: t.n_true_edges_event,
            n_target_edges_event: t.n_target_edges_event,
        }),
        edge_owned: edges.iter().map(|&e| owned(e) as u8).collect(),
    }
}

/// How many target edges of the whole-event graph appear in at least one sector, of how many.
pub fn target_coverage(whole: &Graph, sectors: &[Graph]) -> (u64, u64) {
    let Some(t) = &whole.truth else { return (0, 0) };
    let key = |g: &Graph, e: usize| (g.hit_id[g.src[e] as usize], g.hit_id[g.dst[e] as usize]);
    let present: HashSet<(u64, u64)> =
        sectors.iter().flat_map(|s| (0..s.num_edges()).map(move |e| key(s, e))).collect();
    let targets: Vec<usize> = (0..whole.num_edges()).filter(|&e| t.target[e] == 1).collect();
    let covered = targets.iter().filter(|&&e| present.contains(&key(whole, e))).count();
    (covered as u64, targets.len() as u64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn parse_reads_the_flags_spelling_and_refuses_others() {
        let c = super::SectorConfig::parse("8x2", Some("0.2, 0.1")).unwrap();
        assert_eq!((c.n_phi, c.n_eta, c.overlap_phi, c.overlap_eta), (8, 2, 0.2, 0.1));
        assert_eq!(super::SectorConfig::parse(" 4 x 1 ", None).unwrap().overlap_eta, 0.3);
        let e = super::SectorConfig::parse("8y2", None).unwrap_err().to_string();
        assert!(e.contains("`8y2` is not PHIxETA"), "{e}");
        let e = super::SectorConfig::parse("8x2", Some("0.3")).unwrap_err().to_string();
        assert!(e.contains("`0.3` is not an overlap"), "{e}");
    }

    use super::*;

    /// A ring of nodes around φ with edges between neighbours; all edges targets.
    fn ring(n: usize) -> Graph {
        let phi: Vec<f32> = (0..n).map(|i| (-PI + 2.0 * PI * (i as f64 + 0.5) / n as f64) as f32).collect();
        let src: Vec<u32> = (0..n as u32).collect();
        let dst: Vec<u32> = (0..n as u32).map(|i| (i + 1) % n as u32).collect();
        Graph {
            event_id: 1,
            node_feature_names: vec!["phi".into()],
            node_features: phi.clone(),
            src,
            dst,
            hit_id: (1..=n as u64).collect(),
            r: vec![100.0; n],
            phi,
            z: vec![0.0; n],
            truth: Some(GraphTruth {
                particle_id: vec![1; n],
                particle_pt: vec![2.0; n],
                particle_eta: vec![0.0; n],
                particle_vertex_r: vec![0.0; n],
                y: vec![1; n],
                target: vec![1; n],
                n_true_edges_event: n as u64,
                n_target_edges_event: n as u64,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn sectors_cover_and_own_every_edge_once() {
        let g = ring(100);
        let cfg = SectorConfig::new(4, 2, 0.1, 0.2);
        let s = split(&g, &cfg);
        assert_eq!(s.len(), 8);
        // Overlaps make edges across sector borders present; ownership counts each once.
        let (covered, total) = target_coverage(&g, &s);
        assert_eq!((covered, total), (100, 100));
        let owned: u64 = s.iter().map(|x| x.edge_owned.iter().map(|&o| o as u64).sum::<u64>()).sum();
        assert_eq!(owned, 100, "each edge owned by one sector");
        // Without overlap, the 4 edges crossing φ borders are lost.
        let (covered, _) = target_coverage(&g, &split(&g, &SectorConfig::new(4, 1, 0.0, 0.0)));
        assert_eq!(covered, 96);
        // Sector graphs are valid graphs: indices in range, arrays aligned.
        for x in &s {
            assert!(x.src.iter().chain(&x.dst).all(|&i| (i as usize) < x.num_nodes()));
            assert_eq!(x.edge_owned.len(), x.num_edges());
        }
    }
}
