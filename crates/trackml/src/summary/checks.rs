//! Consistency checks of an event: truth against hits, particles and the geometry.

use std::collections::HashMap;

use serde::Serialize;

use crate::event::Event;
use crate::field::SolenoidField;
use crate::geometry::Detector;

/// What a check tests, which decides whether it applies to a data set.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CheckKind {
    /// A property of any valid TrackML event, real or generated, full or reduced.
    Format,
    /// A property of trackgnn's generator model (its idealised field and material): real
    /// events need not have it, so it only decides on events the generator wrote.
    GeneratorModel,
}

/// The outcome of one check.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CheckResult {
    /// Short snake_case name.
    pub name: String,
    /// What the check tests.
    pub kind: CheckKind,
    /// True if every item passed.
    pub passed: bool,
    /// Items checked.
    pub checked: u64,
    /// Items that failed.
    pub failed: u64,
    /// A human-readable detail (first failure, or the measured figure).
    pub detail: String,
}

/// Runs consistency checks over events and collects the results.
#[derive(Debug, Default)]
pub struct ConsistencyChecks {
    results: Vec<CheckResult>,
    /// |R_hits / R_pT − 1| of every hit pair of the helix check so far.
    helix_deviations: Vec<f64>,
}

/// The name of the helix-radius check.
const HELIX_CHECK: &str = "helix_radius_matches_pt_over_0p3b";

/// The name of the weight check.
const WEIGHT_CHECK: &str = "weights_zero_for_noise_sum_at_most_one";

/// Tolerance of a full event's weight sum (f32 weights over ~10⁵ hits).
const WEIGHT_SUM_TOL: f64 = 1e-3;

/// Tolerance for positions written as f32 \[mm\].
const POS_TOL: f64 = 2e-3;

impl ConsistencyChecks {
    fn record(&mut self, name: &str, checked: u64, failed: u64, detail: String) {
        self.record_tolerant(name, CheckKind::Format, checked, failed, detail, 0.0)
    }

    /// Records a check that passes while at most `allowed` of the items fail.
    fn record_tolerant(
        &mut self,
        name: &str,
        kind: CheckKind,
        checked: u64,
        failed: u64,
        detail: String,
        allowed: f64,
    ) {
        let ok = |c: u64, f: u64| f as f64 <= allowed * c as f64;
        match self.results.iter_mut().find(|r| r.name == name) {
            Some(r) => {
                r.checked += checked;
                r.failed += failed;
                r.passed = ok(r.checked, r.failed);
                if r.detail.is_empty() || (failed > 0 && r.failed == failed) || name == HELIX_CHECK {
                    r.detail = detail;
                }
            }
            None => self.results.push(CheckResult {
                name: name.to_string(),
                kind,
                passed: ok(checked, failed),
                checked,
                failed,
                detail,
            }),
        }
    }

    /// Checks one event. Checks that need files the event lacks are skipped.
    pub fn add(&mut self, ev: &Event, det: Option<&Detector>, field: Option<&SolenoidField>) {
        let hits = &ev.hits;
        let (Some(truth), Some(parts)) = (&ev.truth, &ev.particles) else {
            return;
        };
        // Particles: unique non-zero ids, nhits equal to the truth count.
        let mut index: HashMap<u64, usize> = HashMap::with_capacity(parts.len());
        let mut bad_ids = 0;
        for (i, p) in parts.particle_id.iter().enumerate() {
            if p.is_noise() || index.insert(p.0, i).is_some() {
                bad_ids += 1;
            }
        }
        self.record("particle_ids_unique_nonzero", parts.len() as u64, bad_ids, String::new());
        let mut counts = vec![0u32; parts.len()];
        let mut unknown = 0;
        let mut first_unknown = String::new();
        for p in &truth.particle_id {
            if p.is_noise() {
                continue;
            }
            match index.get(&p.0) {
                Some(&i) => counts[i] += 1,
                None => {
                    unknown += 1;
                    if first_unknown.is_empty() {
                        first_unknown = format!("event {}: truth particle_id {} not in particles", ev.event_id, p.0);
                    }
                }
            }
        }
        self.record("truth_particles_known", truth.len() as u64, unknown, first_unknown);
        let mismatched = (0..parts.len()).filter(|&i| parts.nhits[i] != counts[i]).count() as u64;
        let detail = (0..parts.len())
            .find(|&i| parts.nhits[i] != counts[i])
            .map(|i| {
                format!(
                    "event {}: particle {} has nhits {} but {} truth rows",
                    ev.event_id, parts.particle_id[i], parts.nhits[i], counts[i]
                )
            })
            .unwrap_or_default();
        self.record("nhits_match_truth", parts.len() as u64, mismatched, detail);
        // Weights: zero for noise, never negative, and summing to one over a full event. A reduced
        // event (a sample of whole particles with their hits) carries a share of that: its sum
        // lies below one, which is reported, not failed.
        let sum: f64 = truth.weight.iter().map(|&w| w as f64).sum();
        let bad_weight = |i: usize| {
            let w = truth.weight[i];
            w.is_nan() || w < 0.0 || (truth.particle_id[i].is_noise() && w != 0.0)
        };
        let bad = (0..truth.len()).filter(|&i| bad_weight(i)).count() as u64;
        let detail = match (0..truth.len()).find(|&i| bad_weight(i)) {
            Some(i) => format!(
                "event {}: hit {} (particle {}) has weight {}",
                ev.event_id, hits.hit_id[i], truth.particle_id[i].0, truth.weight[i]
            ),
            None if sum > 1.0 + WEIGHT_SUM_TOL => format!("event {}: weights sum to {sum:.6} > 1", ev.event_id),
            None if sum < 1.0 - WEIGHT_SUM_TOL => format!(
                "event {}: weights sum to {sum:.6}: a reduced event (a sample of its particles); a full event's sum to 1",
                ev.event_id
            ),
            None => format!("weights sum to {sum:.6}"),
        };
        self.record(WEIGHT_CHECK, truth.len() as u64, bad + u64::from(sum > 1.0 + WEIGHT_SUM_TOL), detail);
        if let Some(det) = det {
            self.geometry_checks(ev, det);
        }
        if let Some(field) = field {
            self.helix_check(ev, field);
        }
        let _ = hits;
    }

    fn geometry_checks(&mut self, ev: &Event, det: &Detector) {
        let hits = &ev.hits;
        let truth = ev.truth.as_ref().expect("checked by caller");
        let (mut unknown, mut off_plane, mut outside) = (0u64, 0u64, 0u64);
        let (mut d_unknown, mut d_plane, mut d_out) = (String::new(), String::new(), String::new());
        let mut max_w = 0.0f64;
        for i in 0..hits.len() {
            let Some(m) = det.module(hits.module[i]) else {
                unknown += 1;
                if d_unknown.is_empty() {
                    d_unknown = format!("hit {} on unknown {}", hits.hit_id[i], hits.module[i]);
                }
                continue;
            };
            let l = m.to_local([truth.tx[i] as f64, truth.ty[i] as f64, truth.tz[i] as f64]);
            max_w = max_w.max(l[2].abs());
            if l[2].abs() > 0.5 * m.thickness + POS_TOL {
                off_plane += 1;
                if d_plane.is_empty() {
                    d_plane = format!("hit {}: truth {:.4} mm from the plane of {}", hits.hit_id[i], l[2], m.id);
                }
            }
            // Noise has no true crossing: its "truth" is the measured cell centre.
            if !truth.particle_id[i].is_noise() && !m.contains(l[0], l[1], POS_TOL) {
                outside += 1;
                if d_out.is_empty() {
                    d_out = format!("hit {}: truth at u={:.3} v={:.3} outside {}", hits.hit_id[i], l[0], l[1], m.id);
                }
            }
        }
        let n = hits.len() as u64;
        self.record("hit_modules_in_geometry", n, unknown, d_unknown);
        if d_plane.is_empty() {
            d_plane = format!("largest |w| {max_w:.5} mm");
        }
        self.record("truth_on_module_plane", n, off_plane, d_plane);
        self.record("truth_inside_module_bounds", n, outside, d_out);
    }

    /// A check of the generator's model ([`CheckKind::GeneratorModel`]): real events, with
    /// their measured field map and energy loss, deviate by a few percent.
    ///
    /// For consecutive hits of a particle in the solenoid's uniform centre (|z| < 450 mm), the
    /// radius of the circle through both hits tangent to the second hit's true momentum must
    /// equal pT / (0.3 · B). Pairs closer than 20 mm are skipped (f32 positions).
    fn helix_check(&mut self, ev: &Event, field: &SolenoidField) {
        let hits = &ev.hits;
        let truth = ev.truth.as_ref().expect("checked by caller");
        let parts = ev.particles.as_ref().expect("checked by caller");
        let vertex: HashMap<u64, usize> = parts.particle_id.iter().enumerate().map(|(i, p)| (p.0, i)).collect();
        let mut by_particle: HashMap<u64, Vec<usize>> = HashMap::new();
        for i in 0..hits.len() {
            if !truth.particle_id[i].is_noise() {
                by_particle.entry(truth.particle_id[i].0).or_default().push(i);
            }
        }
        let (mut checked, mut failed) = (0u64, 0u64);
        let mut devs = std::mem::take(&mut self.helix_deviations);
        let mut keys: Vec<_> = by_particle.keys().copied().collect();
        keys.sort_unstable();
        for pid in keys {
            let idx = by_particle.get_mut(&pid).unwrap();
            let Some(&pi) = vertex.get(&pid) else {
                continue;
            };
            let q = parts.q[pi] as f64;
            if q == 0.0 {
                continue;
            }
            let v = [parts.vx[pi] as f64, parts.vy[pi] as f64, parts.vz[pi] as f64];
            let dist = |i: usize| {
                let d = [truth.tx[i] as f64 - v[0], truth.ty[i] as f64 - v[1], truth.tz[i] as f64 - v[2]];
                d[0] * d[0] + d[1] * d[1] + d[2] * d[2]
            };
            idx.sort_by(|&a, &b| dist(a).total_cmp(&dist(b)));
            for w in idx.windows(2) {
                let (a, b) = (w[0], w[1]);
                let (za, zb) = (truth.tz[a] as f64, truth.tz[b] as f64);
                if za.abs() > 450.0 || zb.abs() > 450.0 {
                    continue;
                }
                let chord = [truth.tx[b] as f64 - truth.tx[a] as f64, truth.ty[b] as f64 - truth.ty[a] as f64];
                let c = chord[0].hypot(chord[1]);
                let (px, py) = (truth.tpx[b] as f64, truth.tpy[b] as f64);
                let pt = px.hypot(py);
                if c < 20.0 || pt == 0.0 {
                    continue;
                }
                // The tangent at the end of an arc makes half the turning angle with the chord.
                let sin_half = ((px * chord[1] - py * chord[0]) / (pt * c)).abs();
                if sin_half < 1e-6 {
                    continue;
                }
                let r_geom = c / (2.0 * sin_half);
                let r_phys = crate::physics::helix_radius(pt, q, field.bz(0.5 * (za + zb)));
                let dev = r_geom / r_phys - 1.0;
                checked += 1;
                devs.push(dev.abs());
                // The sine of a small half-angle is poorly known from f32 positions: allow
                // the error of 0.5 µm position errors on the sagitta.
                let sagitta = c * c / (8.0 * r_phys);
                let tol = 0.01 + 2e-3 / sagitta.max(1e-9);
                if dev.abs() > tol {
                    failed += 1;
                }
            }
        }
        let mut sorted = devs.clone();
        self.helix_deviations = devs;
        sorted.sort_by(|a, b| a.total_cmp(b));
        let med = sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN);
        let total_failed = failed + self.results.iter().find(|r| r.name == HELIX_CHECK).map_or(0, |r| r.failed);
        // A module crossed without a hit (the 1% inefficiency) scatters the particle between
        // two recorded hits, so a small fraction of pairs may legitimately deviate.
        self.record_tolerant(
            HELIX_CHECK,
            CheckKind::GeneratorModel,
            checked,
            failed,
            format!(
                "median |R_hits / (pT/0.3B) − 1| = {med:.2e} over {} hit pairs, {total_failed} beyond tolerance",
                sorted.len()
            ),
            0.02,
        );
    }

    /// The results so far, in the order first recorded.
    pub fn results(&self) -> &[CheckResult] {
        &self.results
    }

    /// True if every check passed.
    pub fn all_passed(&self) -> bool {
        self.results.iter().all(|r| r.passed)
    }

    /// True if every check of `kind` passed.
    pub fn passed(&self, kind: CheckKind) -> bool {
        self.results.iter().filter(|r| r.kind == kind).all(|r| r.passed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Hits, ParticleRecord, Particles, Truth};
    use crate::ids::{ModuleId, ParticleId};

    /// Two particles with two hits each and one noise hit, with the given hit weights.
    fn event(weights: [f32; 5]) -> Event {
        let mut hits = Hits::default();
        let mut truth = Truth::default();
        let owners = [1, 1, 2, 2, 0];
        for (i, (&p, &w)) in owners.iter().zip(&weights).enumerate() {
            let pos = [30.0 + 30.0 * i as f32, 0.0, 0.0];
            hits.push(i as u64 + 1, pos, ModuleId::new(8, 2, 1));
            truth.push(ParticleId(p), pos, [1.0, 0.0, 0.0], w);
        }
        let mut parts = Particles { particle_type: Some(Vec::new()), ..Default::default() };
        for id in [1, 2] {
            parts.push(ParticleRecord {
                particle_id: ParticleId(id),
                particle_type: 211,
                vertex: [0.0; 3],
                momentum: [1.0, 0.0, 0.0],
                q: 1,
                nhits: 2,
            });
        }
        Event { event_id: 1, hits, truth: Some(truth), particles: Some(parts), cells: None }
    }

    fn weight_check(weights: [f32; 5]) -> CheckResult {
        let mut c = ConsistencyChecks::default();
        c.add(&event(weights), None, None);
        c.results().iter().find(|r| r.name == WEIGHT_CHECK).unwrap().clone()
    }

    #[test]
    fn a_reduced_events_weights_may_sum_below_one() {
        let full = weight_check([0.25, 0.25, 0.25, 0.25, 0.0]);
        assert!(full.passed && full.kind == CheckKind::Format, "{full:?}");
        let reduced = weight_check([0.05, 0.05, 0.1, 0.1, 0.0]);
        assert!(reduced.passed, "{reduced:?}");
        assert!(reduced.detail.contains("reduced event"), "{}", reduced.detail);
        let too_much = weight_check([0.5, 0.5, 0.25, 0.25, 0.0]);
        assert!(!too_much.passed && too_much.detail.contains("> 1"), "{too_much:?}");
        let weighted_noise = weight_check([0.25, 0.25, 0.25, 0.2, 0.05]);
        assert!(!weighted_noise.passed && weighted_noise.detail.contains("hit 5"), "{weighted_noise:?}");
        let negative = weight_check([0.5, -0.1, 0.3, 0.3, 0.0]);
        assert!(!negative.passed, "{negative:?}");
    }

    #[test]
    fn the_helix_check_is_labelled_a_generator_model_check() {
        // Hits on a straight line with a momentum across it: the helix check fails, the format
        // checks pass.
        let mut c = ConsistencyChecks::default();
        let mut ev = event([0.25, 0.25, 0.25, 0.25, 0.0]);
        let truth = ev.truth.as_mut().unwrap();
        truth.tpx.iter_mut().for_each(|p| *p = 0.0);
        truth.tpy.iter_mut().for_each(|p| *p = 0.5);
        c.add(&ev, None, Some(&SolenoidField::trackml(2.0)));
        let helix = c.results().iter().find(|r| r.name == HELIX_CHECK).unwrap();
        assert_eq!(helix.kind, CheckKind::GeneratorModel);
        assert!(!helix.passed, "{helix:?}");
        assert!(c.passed(CheckKind::Format) && !c.passed(CheckKind::GeneratorModel) && !c.all_passed());
    }
}
