//! The whole stage on a hand-made event: graph scores → tracks → submission file → metrics
//! → plots, with the submission read back scoring exactly like the in-memory tracks.

use trackgnn_graph::Graph;
use trackgnn_reco::{
    MetricsConfig, NO_TRACK, ScoredEdges, TrackBuilder, TrackBuilderConfig, TrackMethod, evaluate_event,
    event_track_ids, plot_track_efficiency, read_submission, singleton_track_ids, submission_file_name, trackml_score,
    write_submission,
};
use trackgnn_trackml::event::{ParticleRecord, Truth};
use trackgnn_trackml::{Event, Hits, ModuleId, ParticleId, Particles};

const RADII: [f32; 5] = [32.0, 72.0, 116.0, 172.0, 260.0];

/// Four straight particles (5 hits each, in φ order) plus 2 noise hits. Particle 4 has
/// pT below 1 GeV. Weights: 0.05 per particle hit (sum 1), 0 for noise.
fn event() -> Event {
    let mut hits = Hits::default();
    let mut truth = Truth::default();
    let mut particles = Particles::default();
    let phis = [0.1f32, 0.12, 1.0, 2.0];
    let pts = [2.0f32, 5.0, 1.5, 0.8];
    for (k, (&phi, &pt)) in phis.iter().zip(&pts).enumerate() {
        let p = ParticleId(100 + k as u64);
        particles.push(ParticleRecord {
            particle_id: p,
            particle_type: 211,
            vertex: [0.0; 3],
            momentum: [pt * phi.cos(), pt * phi.sin(), 0.3 * pt],
            q: 1,
            nhits: 5,
        });
        for (layer, &r) in RADII.iter().enumerate() {
            let pos = [r * phi.cos(), r * phi.sin(), 0.3 * r];
            hits.push(hits.len() as u64 + 1, pos, ModuleId::new(8, 2 * layer as u16 + 2, k as u32));
            truth.push(p, pos, [0.0; 3], 0.05);
        }
    }
    for phi in [2.5f32, -1.0] {
        let pos = [100.0 * phi.cos(), 100.0 * phi.sin(), 0.0];
        hits.push(hits.len() as u64 + 1, pos, ModuleId::new(8, 4, 99));
        truth.push(ParticleId::NOISE, pos, [0.0; 3], 0.0);
    }
    Event { event_id: 21, hits, truth: Some(truth), particles: Some(particles), cells: None }
}

/// A graph over the event's hits without hit 20 (particle 103's last, "cut") and the
/// second noise hit, listed in reverse order; true edges score 0.9, a fake edge between the
/// two close particles 0.6 (survives the cut), one 0.2 fake.
fn graph(ev: &Event) -> (Graph, Vec<f32>) {
    let keep: Vec<usize> = (0..ev.hits.len()).rev().filter(|&i| i != 19 && i != 21).collect();
    let node_of = |hit: usize| keep.iter().position(|&h| h == hit).unwrap() as u32;
    let mut g = Graph { event_id: ev.event_id, ..Default::default() };
    for &i in &keep {
        g.hit_id.push(ev.hits.hit_id[i]);
        g.r.push(ev.hits.x[i].hypot(ev.hits.y[i]));
        g.phi.push(ev.hits.y[i].atan2(ev.hits.x[i]));
        g.z.push(ev.hits.z[i]);
    }
    let mut scores = Vec::new();
    let mut edge = |a: usize, b: usize, s: f32| {
        g.src.push(node_of(a));
        g.dst.push(node_of(b));
        scores.push(s);
    };
    for k in 0..4 {
        for l in 0..4 {
            let (a, b) = (5 * k + l, 5 * k + l + 1);
            if b != 19 {
                edge(a, b, 0.9);
            }
        }
    }
    edge(1, 7, 0.6); // particle 100's 2nd hit → particle 101's 3rd hit
    edge(11, 20, 0.2); // to the noise hit
    (g, scores)
}

#[test]
fn reconstruct_write_read_and_score() {
    let ev = event();
    let (g, scores) = graph(&ev);
    let edges = ScoredEdges::from_graph(&g, &scores);
    assert!(edges.r.is_some());
    let cfg = MetricsConfig::for_min_hits(3, None);
    let dir = tempfile::tempdir().unwrap();

    let mut results = Vec::new();
    for method in [TrackMethod::Cc, TrackMethod::Walkthrough, TrackMethod::Follow] {
        let builder = TrackBuilder::new(TrackBuilderConfig { method, min_hits: 3, ..Default::default() }).unwrap();
        let node_tracks = builder.build(&edges).unwrap();
        let per_hit = event_track_ids(&ev.hits.hit_id, &g.hit_id, &node_tracks).unwrap();
        assert_eq!(per_hit[19], NO_TRACK, "a hit outside the graph is in no track");
        let m = evaluate_event(&ev, &per_hit, &cfg).unwrap();

        let ids = singleton_track_ids(&per_hit).unwrap();
        let path = dir.path().join(format!("{method:?}-{}", submission_file_name(ev.event_id)));
        write_submission(&path, ev.event_id, &ev.hits.hit_id, &ids).unwrap();
        let subs = read_submission(&path).unwrap();
        assert_eq!(subs.len(), 1);
        let back = subs[0].track_ids_for(&ev.hits.hit_id).unwrap();
        assert_eq!(back, ids);
        let m_back = evaluate_event(&ev, &back, &cfg).unwrap();
        assert_eq!(m_back, m, "{method:?}: the file scores like the in-memory tracks");
        let truth = ev.truth.as_ref().unwrap();
        assert!((trackml_score(&truth.particle_id, &truth.weight, &back) - m.trackml_score).abs() < 1e-12);
        results.push(m);
    }
    let (cc, walk, follow) = (&results[0], &results[1], &results[2]);
    // Following the straight lines refuses the 0.6 edge's kink as the walk does.
    assert_eq!(follow, walk);

    // CC merges particles 100 and 101 through the 0.6 edge: a 10-hit track with 5 + 5 hits,
    // neither more than half: a fake. Particle 103 (4 hits in the graph) is found.
    assert_eq!((cc.n_candidates, cc.n_fake_candidates), (3, 1));
    assert_eq!((cc.n_target_particles, cc.n_target_matched), (3, 1));
    assert!((cc.trackml_score - 0.45).abs() < 1e-6, "{}", cc.trackml_score); // 102: 0.25, 103: 0.2

    // The walk keeps them apart: every particle found; 103 with 4 of its 5 hits.
    assert_eq!((walk.n_candidates, walk.n_fake_candidates, walk.duplicate_rate), (4, 0, 0.0));
    assert_eq!((walk.n_target_particles, walk.n_target_matched, walk.efficiency), (3, 3, 1.0));
    assert_eq!((walk.n_reconstructable_particles, walk.n_reconstructable_matched), (4, 4));
    assert!((walk.trackml_score - 0.95).abs() < 1e-6, "{}", walk.trackml_score);

    let mut total = walk.clone();
    total.merge(cc).unwrap();
    assert_eq!(total.n_events, 2);
    assert!((total.trackml_score - (0.95 + 0.45) / 2.0).abs() < 1e-6);
    let json = serde_json::to_string(&total).unwrap();
    assert!(json.contains("\"efficiency_vs_pt\":[[1.0,"), "{json}");

    let files = plot_track_efficiency(dir.path(), &total).unwrap();
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        match f.extension().unwrap().to_str().unwrap() {
            "png" => assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n")),
            _ => assert!(String::from_utf8(bytes).unwrap().contains("<svg")),
        }
    }
}
