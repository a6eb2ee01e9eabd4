//! Graph builders on small generated events: the windowed geometric builder equals the
//! all-pairs one, module maps survive a save/load round trip, graphs are labelled consistently.

use trackgnn_graph::direction::EdgeDirection;
use trackgnn_graph::features::{HitTable, NodeCuts};
use trackgnn_graph::file::{read_graph, write_graph};
use trackgnn_graph::geometric::{self, GeometricConfig};
use trackgnn_graph::module_map::{MapConfig, MapMargin, file_hash};
use trackgnn_graph::truth::{TargetConfig, truth_edges};
use trackgnn_graph::{GraphMethod, GraphRecipe, ModuleMap, build_graph};
use trackgnn_simulate::{Generator, SimConfig};
use trackgnn_trackml::{Detector, Event};

fn events(mu: f64, n: u64) -> (Detector, Vec<Event>) {
    let g = Generator::new(Detector::trackml(), SimConfig { pileup: mu, ..SimConfig::default() });
    let evs = (1..=n).map(|i| g.event(21, i).0).collect();
    (g.detector().clone(), evs)
}

fn sorted_edges(src: Vec<u32>, dst: Vec<u32>) -> Vec<(u32, u32)> {
    let mut e: Vec<(u32, u32)> = src.into_iter().zip(dst).collect();
    e.sort_unstable();
    e
}

#[test]
fn windowed_geometric_builder_equals_all_pairs() {
    let (det, evs) = events(2.0, 2);
    for cfg in [
        GeometricConfig::default(),
        GeometricConfig { phi_slope_max: 2e-3, z0_max: 400.0, skip_layers: 1, ..GeometricConfig::default() },
        GeometricConfig { same_layer: false, ..GeometricConfig::default() },
    ] {
        for ev in &evs {
            let t = HitTable::build(ev, &det, &NodeCuts::default()).unwrap();
            assert!(t.len() > 500, "{} nodes", t.len());
            let (s, d) = geometric::build(&t, &det, &cfg);
            let (s2, d2) = geometric::build_all_pairs(&t, &det, &cfg);
            let (fast, slow) = (sorted_edges(s, d), sorted_edges(s2, d2));
            assert!(!fast.is_empty());
            assert_eq!(fast, slow, "windowed and all-pairs builders differ for {cfg:?}");
        }
    }
}

#[test]
fn geometric_graphs_find_most_target_edges() {
    let (det, evs) = events(10.0, 2);
    let mut recipe = GraphRecipe::new(GraphMethod::Geometric);
    recipe.node_cuts = NodeCuts { pt_min: Some(1.0), remove_noise: true, eta_range: None };
    for ev in &evs {
        let (g, s) = build_graph(ev, &det, &recipe, None).unwrap();
        let truth = g.truth.as_ref().unwrap();
        assert_eq!(s.target_edges, truth.target.iter().map(|&v| v as u64).sum::<u64>());
        assert!(truth.y.iter().zip(&truth.target).all(|(&y, &t)| y >= t), "targets are true edges");
        assert!(s.efficiency > 0.93, "efficiency {}", s.efficiency);
        // The prompt / secondary split adds up to the whole.
        assert!(s.prompt_target_edges <= s.target_edges && s.event_prompt_target_edges <= s.event_target_edges);
        assert!(s.event_prompt_target_edges > 0 && s.efficiency_prompt > 0.9, "{s:?}");
        let found = s.efficiency_prompt * s.event_prompt_target_edges as f64
            + s.efficiency_secondary.max(0.0) * (s.event_target_edges - s.event_prompt_target_edges) as f64;
        assert!((found - s.target_edges as f64).abs() < 1e-6, "{s:?}");
        assert!(
            g.src
                .iter()
                .zip(&g.dst)
                .all(|(&a, &b)| a != b && (a as usize) < g.num_nodes() && (b as usize) < g.num_nodes())
        );
    }
}

#[test]
fn module_map_round_trip_and_self_consistency() {
    let (det, evs) = events(10.0, 4);
    let cuts = NodeCuts { pt_min: Some(1.0), remove_noise: true, eta_range: None };
    let mut map = ModuleMap::new(MapConfig { max_vertex_r: None, ..MapConfig::default() });
    let mut tables = Vec::new();
    for ev in &evs {
        let t = HitTable::build(ev, &det, &cuts).unwrap();
        map.add_event(&t, &truth_edges(&t, &TargetConfig::default()));
        tables.push(t);
    }
    assert_eq!(map.events, 4);
    assert!(map.len() > 100);
    // The one-call form learns the same map from the same events.
    let mut direct = ModuleMap::new(map.config.clone());
    for ev in &evs {
        direct.add_training_event(ev, &det).unwrap();
    }
    assert_eq!(direct, map);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("map.bin");
    map.save(&path).unwrap();
    let back = ModuleMap::load(&path).unwrap();
    assert_eq!(back, map);
    assert!(file_hash(&path).unwrap().starts_with("crc32:"));
    assert!(map.triplet_count() > 100);
    // A map applied to its own training events finds every target edge with no margin: with
    // the triplet stage, every edge of a particle crossing three modules or more.
    let exact = MapMargin {
        relative: 0.0,
        absolute: [0.0; 4],
        triplets: false,
        triplet_absolute: [0.0; 2],
        drop_shortcuts: false,
    };
    for t in &tables {
        let te = truth_edges(t, &TargetConfig::default());
        let (s, d) = map.build_edges(t, &exact);
        let doublets: std::collections::HashSet<(u32, u32)> = s.into_iter().zip(d).collect();
        let (s, d) = map.build_edges(t, &MapMargin { triplets: true, ..exact.clone() });
        let with_triplets: std::collections::HashSet<(u32, u32)> = s.into_iter().zip(d).collect();
        assert!(with_triplets.is_subset(&doublets));
        let targets: Vec<usize> = (0..te.len()).filter(|&i| te.target[i]).collect();
        let in_triplet = |i: usize| targets.iter().any(|&j| te.dst[j] == te.src[i] || te.src[j] == te.dst[i]);
        for &i in &targets {
            assert!(doublets.contains(&(te.src[i], te.dst[i])), "training edge {i} not rebuilt");
            if in_triplet(i) {
                assert!(with_triplets.contains(&(te.src[i], te.dst[i])), "training edge {i} lost to the triplets");
            }
        }
    }
    // Format 1 files (pairs only, before triplets) still load.
    let pairs_only = ModuleMap::new(map.config.clone());
    pairs_only.save(&path).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(ModuleMap::load(&path).unwrap(), pairs_only);
    map.save(&path).unwrap();
    // A corrupt map is a clear error naming the file.
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 10] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let err = ModuleMap::load(&path).unwrap_err().to_string();
    assert!(err.contains("map.bin") && err.contains("checksum"), "{err}");
    std::fs::write(&path, &bytes[..n / 2]).unwrap();
    let err = ModuleMap::load(&path).unwrap_err().to_string();
    assert!(err.contains("truncated"), "{err}");
}

#[test]
fn built_graphs_round_trip_through_files_and_inference_needs_no_truth() {
    let (det, evs) = events(3.0, 1);
    let recipe = GraphRecipe::new(GraphMethod::Geometric);
    let (g, _) = build_graph(&evs[0], &det, &recipe, None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("g.graph");
    write_graph(&p, &g).unwrap();
    assert_eq!(read_graph(&p).unwrap(), g);
    // Without truth files, the inference recipe gives the same edges and no labels.
    let mut bare = evs[0].clone();
    bare.truth = None;
    bare.particles = None;
    let mut with_cut = recipe.clone();
    with_cut.node_cuts.pt_min = Some(1.0);
    assert!(build_graph(&bare, &det, &with_cut, None).is_err(), "truth cuts need truth");
    let (gi, _) = build_graph(&bare, &det, &with_cut.for_inference(), None).unwrap();
    assert!(gi.truth.is_none());
    assert_eq!((gi.src.clone(), gi.dst.clone()), (g.src.clone(), g.dst.clone()));
}

/// A node table of straight tracks from the origin in the barrel: each track is (particle id,
/// φ \[rad\], the barrel layers (index into `RADII`) it has hits on).
fn barrel_tracks(tracks: &[(u64, f32, &[usize])]) -> HitTable {
    use trackgnn_graph::features::NodeTruth;
    use trackgnn_trackml::ids::ModuleId;
    const RADII: [f32; 4] = [32.0, 72.0, 116.0, 172.0];
    let (mut t, mut nt) = (HitTable::default(), NodeTruth::default());
    for &(pid, phi, layers) in tracks {
        for &l in layers {
            let r = RADII[l];
            let z = 0.5 * r;
            t.hit_index.push(t.hit_id.len() as u32);
            t.hit_id.push(t.hit_id.len() as u64 + 1);
            t.x.push(r * phi.cos());
            t.y.push(r * phi.sin());
            t.z.push(z);
            t.r.push(r);
            t.phi.push(phi);
            t.eta.push((z / r).asinh());
            // One module per layer: every track crosses the same four modules.
            t.module.push(ModuleId::new(8, 2 * (l as u16 + 1), 1));
            t.layer.push(l as u16);
            t.cluster_size.push(1.0);
            t.charge_sum.push(1.0);
            nt.particle_id.push(pid);
            nt.particle_pt.push(2.0);
            nt.particle_eta.push((z / r).asinh());
            nt.dist_from_vertex.push((r * r + z * z).sqrt());
            nt.vertex_r.push(0.0);
        }
    }
    t.truth = Some(nt);
    t
}

#[test]
fn the_triplet_stage_drops_edges_that_skip_a_hit_of_a_consistent_triplet() {
    // Training: tracks through all four layers, and one that misses layer 2, so the map learns
    // the pair (layer 1 → layer 3) as well as the consecutive ones.
    let train = barrel_tracks(&[(1, 0.10, &[0, 1, 2, 3]), (2, 0.12, &[0, 1, 2, 3]), (3, 0.11, &[0, 1, 3])]);
    let mut map = ModuleMap::new(MapConfig::default());
    map.add_event(&train, &truth_edges(&train, &TargetConfig::default()));
    // Evaluation: one track through all four layers.
    let eval = barrel_tracks(&[(7, 0.11, &[0, 1, 2, 3])]);
    let doublets_only = MapMargin { triplets: false, drop_shortcuts: false, ..MapMargin::default() };
    let (s, d) = map.build_edges(&eval, &doublets_only);
    // 0 → 1 → 2 → 3 plus the learned skip 1 → 3.
    assert_eq!(sorted_edges(s, d), vec![(0, 1), (1, 2), (1, 3), (2, 3)]);
    let (s, d) = map.build_edges(&eval, &MapMargin::default());
    assert_eq!(sorted_edges(s, d), vec![(0, 1), (1, 2), (2, 3)], "the skip 1 → 3 is explained by 1 → 2 → 3");
    let keep = MapMargin { drop_shortcuts: false, ..MapMargin::default() };
    let (s, d) = map.build_edges(&eval, &keep);
    assert_eq!(sorted_edges(s, d), vec![(0, 1), (1, 2), (1, 3), (2, 3)]);
    // A track that really misses layer 2 keeps its skip edge: nothing explains it.
    let gap = barrel_tracks(&[(8, 0.11, &[0, 1, 3])]);
    let (s, d) = map.build_edges(&gap, &MapMargin::default());
    assert_eq!(sorted_edges(s, d), vec![(0, 1), (1, 2)]);
    // A kinked continuation (a hit far off the track's direction) fails the triplet window,
    // so the doublet that only a kinked triplet supports is dropped.
    let mut kink = barrel_tracks(&[(9, 0.11, &[0, 1, 2])]);
    kink.z[2] += 1.5;
    let (s, d) = map.build_edges(&kink, &doublets_only);
    assert_eq!(sorted_edges(s, d).len(), 2);
    let (s, d) = map.build_edges(&kink, &MapMargin::default());
    assert!(s.is_empty() && d.is_empty(), "{s:?} {d:?}");
}

#[test]
fn which_primaries_a_map_is_drawn_from() {
    let prompt = MapConfig { target: TargetConfig { pt_min: 2.0, min_hits: 3 }, max_vertex_r: Some(1.0) };
    // A prompt map: charged primaries from the target pT up, the cut itself included.
    assert!(prompt.keeps_primary(2.0, true) && prompt.keeps_primary(5.0, true));
    assert!(!prompt.keeps_primary(1.999, true) && !prompt.keeps_primary(5.0, false));
    // With secondaries: neutral parents too, from half the cut.
    let all = MapConfig { max_vertex_r: None, ..prompt.clone() };
    assert!(all.keeps_primary(1.0, false) && all.keeps_primary(1.0, true));
    assert!(!all.keeps_primary(0.999, true));
    // The hits it learns from: the target pT as a truth cut, without noise.
    let cuts = prompt.node_cuts();
    assert_eq!((cuts.pt_min, cuts.remove_noise, cuts.eta_range), (Some(2.0), true, None));
}

/// Target edges of `g` stored against their particle's path (the truth order: distance from
/// the production vertex), and all target edges.
fn backward_targets(ev: &Event, det: &Detector, recipe: &GraphRecipe) -> (usize, usize) {
    let (g, _) = build_graph(ev, det, recipe, None).unwrap();
    let t = HitTable::build(ev, det, &recipe.node_cuts).unwrap();
    let dist = &t.truth.as_ref().unwrap().dist_from_vertex;
    let truth = g.truth.as_ref().unwrap();
    let targets: Vec<usize> = (0..g.src.len()).filter(|&i| truth.target[i] == 1).collect();
    let back = targets.iter().filter(|&&i| dist[g.src[i] as usize] > dist[g.dst[i] as usize]).count();
    (back, targets.len())
}

#[test]
fn outward_recipes_store_target_edges_along_the_particle_and_old_recipes_rebuild_as_before() {
    let (det, evs) = events(10.0, 2);
    // The dense graph of issue 22: layer pairs admitted in both orders in the end caps.
    let dense = GeometricConfig { z0_max: 1000.0, ..GeometricConfig::default() };
    let mut outward = GraphRecipe::new(GraphMethod::Geometric);
    outward.geometric = dense;
    let as_built = GraphRecipe { edge_direction: EdgeDirection::AsBuilt, ..outward.clone() };
    let (mut before, mut after, mut total) = (0, 0, 0);
    for ev in &evs {
        let (b, n) = backward_targets(ev, &det, &as_built);
        let (a, n2) = backward_targets(ev, &det, &outward);
        assert_eq!(n, n2, "the direction changes no edge set");
        (before, after, total) = (before + b, after + a, total + n);
        // Same edges, same order of the unordered pairs' set; only directions differ.
        let (g0, _) = build_graph(ev, &det, &as_built, None).unwrap();
        let (g1, _) = build_graph(ev, &det, &outward, None).unwrap();
        let key = |g: &trackgnn_graph::Graph| {
            let mut k: Vec<u64> =
                g.src.iter().zip(&g.dst).map(|(&a, &b)| trackgnn_graph::truth::pair_key(a, b)).collect();
            k.sort_unstable();
            k
        };
        assert_eq!(key(&g0), key(&g1));
    }
    eprintln!("target edges stored backwards: as-built {before}, outward {after} of {total}");
    assert!(before > 20, "the old order stores dense-graph targets inward: {before} of {total}");
    assert!(after * 50 < before, "outward: {after} backwards of {total} (as-built {before})");
    // A recipe written before the key existed reads as as-built, and a new one says outward.
    let text = toml::to_string(&outward).unwrap();
    assert!(text.contains("edge_direction = \"outward\""), "{text}");
    let old: GraphRecipe =
        toml::from_str(&text.lines().filter(|l| !l.starts_with("edge_direction")).collect::<Vec<_>>().join("\n"))
            .unwrap();
    assert_eq!(old.edge_direction, EdgeDirection::AsBuilt);
}
