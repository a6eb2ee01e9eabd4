//! Physics sanity of generated events: the statistics a physicist checks first, on a small
//! pile-up so the test runs in a second.

use trackgnn_simulate::{Generator, SimConfig};
use trackgnn_trackml::Detector;
use trackgnn_trackml::summary::{ConsistencyChecks, RealismAccumulator};

fn generator(mu: f64) -> Generator {
    Generator::new(Detector::trackml(), SimConfig { pileup: mu, ..SimConfig::default() })
}

#[test]
fn small_events_are_physically_sane_and_consistent() {
    let g = generator(20.0);
    let mut acc = RealismAccumulator::default();
    let mut checks = ConsistencyChecks::default();
    for id in 1..=3 {
        let (ev, stats) = g.event(7, id);
        assert_eq!(ev.hits.len(), stats.signal_hits + stats.noise_hits);
        acc.add(&ev, Some(g.detector()));
        checks.add(&ev, Some(g.detector()), Some(g.field()));
    }
    for c in checks.results() {
        assert!(c.passed, "{c:?}");
        assert!(c.checked > 0, "{c:?}");
    }
    let s = acc.finish();
    assert!((s.noise_fraction - 0.15).abs() < 0.005, "noise {}", s.noise_fraction);
    assert!(s.secondary_fraction > 0.15 && s.secondary_fraction < 0.4, "secondaries {}", s.secondary_fraction);
    assert!((0.2..0.36).contains(&s.multi_hit_layer_fraction), "overlaps {}", s.multi_hit_layer_fraction);
    assert!((0.3..0.55).contains(&s.median_pt_gev), "median pT {}", s.median_pt_gev);
    assert!((8.0..13.0).contains(&s.mean_hits_per_particle), "{}", s.mean_hits_per_particle);
    // Pixel hits are measured to ~10 µm, long strips only to ~3 mm along z.
    let pix = &s.residuals["pixel_barrel"];
    assert!(pix.rphi_rms_mm < 0.02 && pix.second_rms_mm < 0.02, "{pix:?}");
    let ls = &s.residuals["long_strip_barrel"];
    assert!(ls.second_rms_mm > 2.0 && ls.second_rms_mm < 3.5, "{ls:?}");
    // Short strips: mostly one 1.2 mm cell along z, so z is measured close to the floor that
    // the crossing angles allow any cluster centre.
    let ss = &s.residuals["short_strip_barrel"];
    let floor = ss.second_centroid_limit_mm;
    assert!(floor > 0.8 * ss.second_rms_mm && floor < 1.02 * ss.second_rms_mm, "{ss:?}");
    // Inclined tracks make long pixel clusters in the barrel, short ones in the disks.
    assert!(s.cells_per_hit["pixel_barrel"] > 2.0 * s.cells_per_hit["pixel_endcap"]);
    for (species, f) in [("pion", 0.6), ("proton", 0.05), ("kaon", 0.03)] {
        assert!(s.species[species] > f, "{species}: {:?}", s.species);
    }
}

#[test]
fn same_seed_same_event_other_seed_other_event() {
    let g = generator(5.0);
    let (a, _) = g.event(3, 11);
    let (b, _) = g.event(3, 11);
    assert_eq!(a, b);
    let (c, _) = g.event(4, 11);
    assert_ne!(a.hits, c.hits);
    let (d, _) = g.event(3, 12);
    assert_ne!(a.hits, d.hits);
}

#[test]
fn hits_are_sorted_by_module_with_ids_from_one() {
    let (ev, _) = generator(5.0).event(1, 1);
    assert!(ev.hits.module.windows(2).all(|w| w[0] <= w[1]));
    assert!(ev.hits.hit_id.iter().enumerate().all(|(i, &h)| h == i as u64 + 1));
    let parts = ev.particles.unwrap();
    assert!(parts.particle_id.iter().all(|p| !p.is_noise()));
    let types = parts.particle_type.unwrap();
    assert!(types.iter().all(|t| [11, 13, 211, 321, 2212].contains(&t.abs())), "only charged species are listed");
}

#[test]
fn pileup_200_makes_a_trackml_sized_event() {
    let (ev, stats) = generator(200.0).event(1, 1);
    let with_hits = ev.particles.unwrap().nhits.iter().filter(|&&n| n > 0).count();
    assert!((90_000..=130_000).contains(&ev.hits.len()), "{} hits", ev.hits.len());
    assert!((8_000..=12_000).contains(&with_hits), "{with_hits} particles with hits");
    assert!(stats.interactions > 150);
}

#[test]
fn noise_is_spread_uniformly_over_modules_not_like_the_signal() {
    // Noise is a property of each module's readout: every module is equally likely to carry a
    // noise hit, so a volume's share of the noise is its share of the modules, however few
    // particles reach it (the long-strip barrel: 5,712 of 18,728 modules, about 30%).
    let g = generator(20.0);
    let det = g.detector();
    let mut modules_per_volume: std::collections::BTreeMap<u16, f64> = Default::default();
    for m in &det.modules {
        *modules_per_volume.entry(m.id.volume()).or_default() += 1.0 / det.modules.len() as f64;
    }
    let (mut noise, mut signal): (std::collections::BTreeMap<u16, f64>, std::collections::BTreeMap<u16, f64>) =
        Default::default();
    let (mut n_noise, mut n_signal) = (0.0, 0.0);
    for id in 1..=3 {
        let (ev, _) = g.event(9, id);
        let truth = ev.truth.unwrap();
        for (m, p) in ev.hits.module.iter().zip(&truth.particle_id) {
            if p.is_noise() {
                *noise.entry(m.volume()).or_default() += 1.0;
                n_noise += 1.0;
            } else {
                *signal.entry(m.volume()).or_default() += 1.0;
                n_signal += 1.0;
            }
        }
    }
    assert!(n_noise > 3000.0, "{n_noise} noise hits");
    for (v, share) in &modules_per_volume {
        let got = noise.get(v).copied().unwrap_or(0.0) / n_noise;
        assert!((got - share).abs() < 0.02, "volume {v}: noise share {got:.3}, module share {share:.3}");
    }
    // The long-strip barrel has a larger share of the noise than of the particle hits, the
    // pixel barrel a smaller one.
    assert!(noise[&17] / n_noise > 2.0 * signal[&17] / n_signal);
    assert!(noise[&8] / n_noise < 0.7 * signal[&8] / n_signal);
}

/// Electrons and muons among the particles with hits, over `events` events.
fn lepton_fraction(cfg: SimConfig, events: u64) -> (f64, f64) {
    let g = Generator::new(Detector::trackml(), cfg);
    let mut acc = RealismAccumulator::default();
    for id in 1..=events {
        acc.add(&g.event(3, id).0, Some(g.detector()));
    }
    let s = acc.finish();
    let f = |k: &str| s.species.get(k).copied().unwrap_or(0.0);
    (f("electron") + f("muon"), s.secondary_fraction)
}

#[test]
fn without_conversions_the_leptons_are_the_prompt_ones_as_in_trackml() {
    let off = SimConfig { pileup: 20.0, ..SimConfig::default() };
    assert!(!off.photon_conversions, "TrackML's fast simulation had no photon conversions");
    let on = SimConfig { photon_conversions: true, ..off.clone() };
    let (leptons_off, secondaries_off) = lepton_fraction(off, 2);
    let (leptons_on, secondaries_on) = lepton_fraction(on, 2);
    // Real TrackML: 0.002; the prompt leptons of `charged_fractions` alone are ≈ 0.004 of the
    // primaries.
    assert!(leptons_off < 0.01, "{leptons_off}");
    // Conversions in the silicon and its services add electrons, all of them secondaries.
    assert!(leptons_on > leptons_off + 0.02, "{leptons_on} vs {leptons_off}");
    assert!(secondaries_on > secondaries_off, "{secondaries_on} vs {secondaries_off}");
}

#[test]
fn a_lower_pixel_threshold_keeps_the_end_cells_of_long_clusters() {
    // Long barrel pixel clusters measure z to a few µm when their partly crossed end cells pass
    // the threshold; a threshold of a quarter MIP cuts them and the z residual grows.
    let residual_z = |threshold: f64| {
        let mut cfg = SimConfig { pileup: 10.0, ..SimConfig::default() };
        cfg.digi_barrel[0].threshold = threshold;
        let g = Generator::new(Detector::trackml(), cfg);
        let mut acc = RealismAccumulator::default();
        acc.add(&g.event(4, 1).0, Some(g.detector()));
        acc.finish().residuals["pixel_barrel"].second_rms_mm
    };
    let (low, high) = (residual_z(SimConfig::default().digi_barrel[0].threshold), residual_z(0.25));
    assert!(low < 0.0065, "default (no threshold, as TrackML): {low} mm (real 0.0049)");
    assert!(high > 1.4 * low, "{high} vs {low}");
}

#[test]
fn end_caps_digitised_over_twice_the_thickness_share_charge_along_r_as_trackml() {
    // TrackML's pixel disks (ACTS 2018 geometric digitisation over twice `module_t`): r-φ
    // 0.0131 mm, about the single-cell 50 µm/√12, but r 0.0085 mm, well below 56.25 µm/√12,
    // because the doubled path shares the charge of inclined tracks between rows; 1.7 cells
    // per hit.
    let pixel_endcap = |depth: f64| {
        let mut cfg = SimConfig { pileup: 20.0, ..SimConfig::default() };
        for d in &mut cfg.digi_endcap {
            d.depth_over_thickness = depth;
        }
        let g = Generator::new(Detector::trackml(), cfg);
        let mut acc = RealismAccumulator::default();
        acc.add(&g.event(8, 1).0, Some(g.detector()));
        let s = acc.finish();
        (s.residuals["pixel_endcap"].clone(), s.cells_per_hit["pixel_endcap"])
    };
    let ((two, cells_two), (one, cells_one)) = (pixel_endcap(2.0), pixel_endcap(1.0));
    assert!((0.0115..0.015).contains(&two.rphi_rms_mm), "{two:?}");
    assert!(two.second_rms_mm < 0.0098, "{two:?}");
    assert!(one.second_rms_mm > 1.2 * two.second_rms_mm, "{one:?} vs {two:?}");
    assert!((1.45..1.95).contains(&cells_two) && cells_two > cells_one + 0.2, "{cells_two} vs {cells_one}");
}

#[test]
fn barrel_hits_corrected_over_the_full_thickness_sit_half_a_drift_off_as_trackml() {
    // TrackML subtracted the Lorentz shift over the full module thickness while the charge
    // drifted on average over half of it: every barrel hit lands tan θ_L · t/2 off along u
    // (15 µm in the short strips), which lifts the short-strip r-φ residual from the binary
    // cluster's ≈ 15 µm to the real 20 µm. Corrected by the mean drift, it stays near 15 µm.
    let barrel = |correction: Option<f64>| {
        let mut cfg = SimConfig { pileup: 20.0, ..SimConfig::default() };
        for d in &mut cfg.digi_barrel {
            d.lorentz_correction = correction;
        }
        let g = Generator::new(Detector::trackml(), cfg);
        let mut acc = RealismAccumulator::default();
        acc.add(&g.event(9, 1).0, Some(g.detector()));
        let s = acc.finish();
        (s.residuals["pixel_barrel"].rphi_rms_mm, s.residuals["short_strip_barrel"].rphi_rms_mm)
    };
    let ((pix_full, ss_full), (pix_mean, ss_mean)) = (barrel(Some(1.0)), barrel(None));
    assert!((0.0185..0.0235).contains(&ss_full), "short strips, full thickness: {ss_full} (real 0.0202)");
    assert!(ss_mean < 0.0172, "short strips, mean drift: {ss_mean}");
    assert!((0.009..0.012).contains(&pix_full), "pixels, full thickness: {pix_full} (real 0.0104)");
    assert!(pix_mean < 0.8 * pix_full, "pixels, mean drift: {pix_mean} vs {pix_full}");
}

#[test]
fn grazing_crossings_leave_no_hit_and_shorten_the_pixel_barrel_clusters() {
    // TrackML's digitisation dropped crossings at |cos| < 0.1 to the module normal: the steep
    // pixel-barrel crossings near |η| = 3, whose clusters are the longest.
    let pixel_barrel = |min_cos: f64| {
        let g = Generator::new(
            Detector::trackml(),
            SimConfig { pileup: 20.0, min_cos_incidence: min_cos, ..SimConfig::default() },
        );
        let ev = g.event(10, 1).0;
        let truth = ev.truth.as_ref().expect("generated events carry truth");
        // The smallest |cos| of a signal hit's momentum to its module's normal.
        let mut lowest = f64::MAX;
        for i in 0..ev.hits.len() {
            if truth.particle_id[i].0 == 0 {
                continue;
            }
            let m = g.detector().module(ev.hits.module[i]).expect("hit on a known module");
            let p = [truth.tpx[i] as f64, truth.tpy[i] as f64, truth.tpz[i] as f64];
            let n = m.normal();
            let cos =
                (p[0] * n[0] + p[1] * n[1] + p[2] * n[2]).abs() / (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]).sqrt();
            lowest = lowest.min(cos);
        }
        let mut acc = RealismAccumulator::default();
        acc.add(&ev, Some(g.detector()));
        (lowest, acc.finish().cells_per_hit["pixel_barrel"])
    };
    let ((lowest_cut, cells_cut), (lowest_all, cells_all)) = (pixel_barrel(0.1), pixel_barrel(0.0));
    assert!(lowest_cut >= 0.099 && lowest_all < 0.05, "lowest |cos| {lowest_cut} vs {lowest_all}");
    assert!(cells_cut < cells_all - 0.5, "cells per hit {cells_cut} vs {cells_all}");
    assert!((6.0..8.05).contains(&cells_cut), "{cells_cut} (real 7.0)");
}
