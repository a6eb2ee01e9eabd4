//! The combinatorial Kalman filter on generated events (issue 40): single muons found whole
//! with their parameters, a pile-up event's tracks with the metrics, and the refusals.

use std::collections::HashMap;

use trackgnn_reco::ckf::{Ckf, CkfConfig};
use trackgnn_reco::{MetricsConfig, evaluate_event};
use trackgnn_simulate::{ChargedSpecies, Generator, SimConfig, SingleParticles};
use trackgnn_trackml::csv::{discover_events, write_event};
use trackgnn_trackml::ids::{ModuleId, ParticleId};
use trackgnn_trackml::{Detector, Event};

fn muons(count: usize, pt: [f64; 2]) -> Generator {
    let single = SingleParticles::new(ChargedSpecies::Muon, count, pt, [-2.5, 2.5]);
    Generator::new(Detector::trackml(), SimConfig { single: Some(single), noise_fraction: 0.0, ..SimConfig::default() })
}

/// Each hit's particle, and each particle's hits.
fn hits_by_particle(event: &Event) -> HashMap<ParticleId, Vec<u32>> {
    let mut by: HashMap<ParticleId, Vec<u32>> = HashMap::new();
    for (i, p) in event.truth.as_ref().unwrap().particle_id.iter().enumerate() {
        by.entry(*p).or_default().push(i as u32);
    }
    by
}

#[test]
fn the_ckf_finds_single_muons_whole_with_their_parameters() {
    let g = muons(20, [1.0, 10.0]);
    let ckf = Ckf::new(g.detector().clone(), CkfConfig { fit: true, ..CkfConfig::default() }).unwrap();
    let (mut found, mut total) = (0, 0);
    for id in 1..=3 {
        let (event, _) = g.event(41, id);
        let by = hits_by_particle(&event);
        let particles = event.particles.as_ref().unwrap();
        let out = ckf.event(&event).unwrap();
        assert!(out.seconds.total() > 0.0);
        let truth = &event.truth.as_ref().unwrap().particle_id;
        for k in 0..particles.particle_id.len() {
            let pid = particles.particle_id[k];
            let Some(hits) = by.get(&pid).filter(|h| h.len() >= 8) else { continue };
            total += 1;
            // The track holding most of the particle's hits.
            let Some(track) = out.tracks.iter().max_by_key(|t| t.hits.iter().filter(|h| hits.contains(h)).count())
            else {
                continue;
            };
            let mine = track.hits.iter().filter(|h| hits.contains(h)).count();
            if 2 * mine <= hits.len() {
                continue;
            }
            found += 1;
            // Pure, and at least 80% of the particle's hits.
            assert!(track.hits.iter().all(|&h| truth[h as usize] == pid), "a foreign hit on {pid}'s track");
            assert!(mine * 5 >= hits.len() * 4, "{pid}: {mine} of {} hits", hits.len());
            let per = track.perigee().expect("fitted");
            let (px, py) = (f64::from(particles.px[k]), f64::from(particles.py[k]));
            let pt = px.hypot(py);
            assert!((per.pt() / pt - 1.0).abs() < 0.05, "{pid}: pT {} vs {pt}", per.pt());
            assert_eq!(per.q_over_pt.signum(), f64::from(particles.q[k]).signum(), "{pid}: charge");
            let eta = (f64::from(particles.pz[k]) / pt).asinh();
            assert!((per.eta - eta).abs() < 0.01, "{pid}: η {} vs {eta}", per.eta);
            assert!((per.z0 - f64::from(particles.vz[k])).abs() < 1.0, "{pid}: z0 {}", per.z0);
        }
        // No more tracks than particles: no fakes, no duplicates.
        assert!(out.tracks.len() <= particles.particle_id.len(), "{} tracks", out.tracks.len());
    }
    assert!(total >= 50, "{total} muons");
    assert!(found * 100 >= total * 98, "{found} of {total} muons found");
}

#[test]
fn a_pile_up_event_is_reconstructed_efficiently_and_purely() {
    let g = Generator::new(Detector::trackml(), SimConfig { pileup: 10.0, ..SimConfig::default() });
    let ckf = Ckf::new(g.detector().clone(), CkfConfig::default()).unwrap();
    let mut metrics = None;
    for id in 1..=2 {
        let (event, _) = g.event(42, id);
        let out = ckf.event(&event).unwrap();
        let m = evaluate_event(&event, &out.hit_tracks, &MetricsConfig::for_min_hits(5, None)).unwrap();
        match metrics.as_mut() {
            None => metrics = Some(m),
            Some(t) => t.merge(&m).unwrap(),
        }
    }
    let m = metrics.unwrap();
    assert!(m.n_prompt_target_particles > 50, "{m:?}");
    assert!(m.efficiency_primary > 0.95, "primary efficiency {}", m.efficiency_primary);
    assert!(m.fake_rate < 0.02, "fake rate {}", m.fake_rate);
    assert!(m.duplicate_rate < 0.05, "duplicate rate {}", m.duplicate_rate);
}

#[test]
fn an_empty_event_has_no_tracks_and_a_hit_off_the_detector_names_its_file() {
    let ckf = Ckf::new(Detector::trackml(), CkfConfig::default()).unwrap();
    let out = ckf.event(&Event::default()).unwrap();
    assert!(out.tracks.is_empty() && out.hit_tracks.is_empty() && out.seeds == 0);
    // An event with a hit on a module that the detector lacks.
    let g = muons(2, [2.0, 2.0]);
    let (mut event, _) = g.event(43, 1);
    event.hits.module[0] = ModuleId::new(99, 2, 7);
    let err = ckf.event(&event).unwrap_err().to_string();
    assert!(err.contains(&format!("hit {}", event.hits.hit_id[0])) && err.contains("99"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    write_event(dir.path(), &event, false).unwrap();
    let files = discover_events(dir.path()).unwrap();
    let err = ckf
        .reconstruct_events(&files, &dir.path().join("out"), &MetricsConfig::default(), 1, |_| ())
        .unwrap_err()
        .to_string();
    assert!(err.contains("event000000001-hits.csv") && err.contains("not in the detector"), "{err}");
}

#[test]
fn events_in_parallel_give_the_tracks_of_events_in_turn() {
    let g = Generator::new(Detector::trackml(), SimConfig { pileup: 3.0, ..SimConfig::default() });
    let dir = tempfile::tempdir().unwrap();
    for id in 1..=3 {
        write_event(dir.path(), &g.event(44, id).0, false).unwrap();
    }
    let files = discover_events(dir.path()).unwrap();
    let ckf = Ckf::new(Detector::trackml(), CkfConfig::default()).unwrap();
    let m = MetricsConfig::default();
    let one = ckf.reconstruct_events(&files, &dir.path().join("one"), &m, 1, |_| ()).unwrap();
    let two = ckf.reconstruct_events(&files, &dir.path().join("two"), &m, 2, |_| ()).unwrap();
    let tracks = |d: &trackgnn_reco::ckf::CkfDirReco| d.events.iter().map(|e| e.tracks).collect::<Vec<_>>();
    assert_eq!(tracks(&one), tracks(&two));
    assert_eq!(one.metrics.unwrap().trackml_score, two.metrics.unwrap().trackml_score);
    for f in ["event000000001-submission.csv", "event000000003-submission.csv"] {
        let a = std::fs::read(dir.path().join("one").join(f)).unwrap();
        assert_eq!(a, std::fs::read(dir.path().join("two").join(f)).unwrap(), "{f}");
    }
}
