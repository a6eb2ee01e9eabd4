//! Propagation of every particle of an event through the detector: helix steps in the field,
//! crossings of module planes, hits, material effects, decays and the secondaries they make.

use std::f64::consts::TAU;

use trackgnn_trackml::SolenoidField;
use trackgnn_trackml::geometry::{Detector, LayerKind};
use trackgnn_trackml::physics::material::{MaterialModel, conversion_probability, nuclear_probability, tech_index};
use trackgnn_trackml::rng::Rng;

use crate::config::SimConfig;
use crate::digitize::{Cell, LocalCrossing, digitize};
use crate::helix::Helix;
use crate::kinematics::{V3, axpy, deflect, dot, isotropic, norm, scale, two_body_decay, unit};
use crate::material::scatter;
use crate::primaries::Produced;
use crate::species::Species;

/// Particles leaving this radius \[mm\] or |z| \[mm\] have left the tracker.
const WORLD_R: f64 = 1100.0;
const WORLD_Z: f64 = 3100.0;
/// Largest bending angle per step \[rad\]; keeps the (r, z) bounding of a step tight.
const MAX_TURN_PER_STEP: f64 = 0.2;
/// A guard against pathological trajectories: no particle takes more steps than this.
const MAX_STEPS: usize = 100_000;

/// A particle of the event (charged or neutral, primary or secondary).
#[derive(Clone, Copy, Debug)]
pub struct GenParticle {
    /// Species.
    pub species: Species,
    /// Charge \[e\].
    pub q: i8,
    /// Production vertex \[mm\].
    pub vertex: V3,
    /// Momentum at production \[GeV\].
    pub momentum: V3,
    /// Index of the parent particle, `u32::MAX` for primaries.
    pub parent: u32,
    /// Number of hits it left.
    pub nhits: u32,
}

/// A hit a particle left: where it truly crossed, what it measured.
#[derive(Clone, Copy, Debug)]
pub struct SimHit {
    /// Index of the module in the detector.
    pub module: u32,
    /// Index of the particle in the event, `u32::MAX` for noise.
    pub particle: u32,
    /// Order of the hit along its particle's path (0 = first).
    pub seq: u32,
    /// Measured local u, v \[mm\].
    pub local: [f64; 2],
    /// True crossing point \[mm\].
    pub truth_pos: V3,
    /// True momentum at the crossing, before the module's scattering \[GeV\].
    pub truth_mom: V3,
    /// First cell of the cluster in the event's cell list.
    pub cell_start: u32,
    /// Number of cells.
    pub cell_len: u32,
}

/// The propagation result of one event.
#[derive(Debug, Default)]
pub struct Propagated {
    /// All particles, primaries first, secondaries in the order they were made.
    pub particles: Vec<GenParticle>,
    /// All particle hits.
    pub hits: Vec<SimHit>,
    /// Cells of all clusters.
    pub cells: Vec<Cell>,
}

/// The (r, z) envelope of a layer, for the quick test of whether a step can reach it.
#[derive(Clone, Copy, Debug)]
struct Envelope {
    r_min: f64,
    r_max: f64,
    z_min: f64,
    z_max: f64,
}

impl Envelope {
    /// Distance in the (r, z) plane from a point to the envelope (0 inside).
    #[inline]
    fn distance(&self, r: f64, z: f64) -> f64 {
        let dr = (self.r_min - r).max(r - self.r_max).max(0.0);
        let dz = (self.z_min - z).max(z - self.z_max).max(0.0);
        dr.max(dz)
    }
}

/// Propagates particles through one detector with one configuration.
pub struct Propagator<'a> {
    det: &'a Detector,
    field: &'a SolenoidField,
    cfg: &'a SimConfig,
    material: MaterialModel,
    envelopes: Vec<Envelope>,
}

/// Per-event mutable state.
struct EventState<'r> {
    rng: &'r mut Rng,
    out: Propagated,
    queue_pos: usize,
    seen: Vec<u32>,
    scratch: Vec<(u32, u32, f64)>,
}

impl<'a> Propagator<'a> {
    /// A propagator for a detector, field and configuration.
    pub fn new(det: &'a Detector, field: &'a SolenoidField, cfg: &'a SimConfig) -> Self {
        let envelopes = det
            .layers
            .iter()
            .map(|l| Envelope { r_min: l.r_min, r_max: l.r_max, z_min: l.z_min, z_max: l.z_max })
            .collect();
        Propagator { det, field, cfg, material: cfg.material(), envelopes }
    }

    /// Propagates the primaries and every secondary they make.
    pub fn run(&self, primaries: &[Produced], rng: &mut Rng) -> Propagated {
        let mut st = EventState {
            rng,
            out: Propagated::default(),
            queue_pos: 0,
            seen: Vec::with_capacity(32),
            scratch: Vec::with_capacity(64),
        };
        for p in primaries {
            st.out.particles.push(GenParticle {
                species: p.species,
                q: p.q,
                vertex: p.vertex,
                momentum: p.momentum,
                parent: u32::MAX,
                nhits: 0,
            });
        }
        while st.queue_pos < st.out.particles.len() {
            let k = st.queue_pos;
            st.queue_pos += 1;
            let gp = st.out.particles[k];
            match gp.species {
                s if s.is_charged() => self.charged(&mut st, k),
                Species::Photon => self.photon(&mut st, k),
                Species::Pion0 => {
                    self.decay(&mut st, k, gp.vertex, gp.momentum);
                }
                Species::KShort | Species::Lambda => {
                    let p = norm(gp.momentum);
                    let path = st.rng.exponential(p / gp.species.mass() * gp.species.c_tau());
                    let at = axpy(gp.vertex, path, unit(gp.momentum));
                    if at[0].hypot(at[1]) < WORLD_R && at[2].abs() < WORLD_Z {
                        self.decay(&mut st, k, at, gp.momentum);
                    }
                }
                _ => {}
            }
        }
        st.out
    }

    fn spawn(&self, st: &mut EventState, parent: usize, species: Species, q: i8, vertex: V3, momentum: V3) {
        if norm(momentum) < self.cfg.secondary_p_min && species.is_charged() {
            return;
        }
        st.out.particles.push(GenParticle { species, q, vertex, momentum, parent: parent as u32, nhits: 0 });
    }

    /// Decays particle `k` at `at` with lab momentum `p`.
    fn decay(&self, st: &mut EventState, k: usize, at: V3, p: V3) {
        let gp = st.out.particles[k];
        let q = gp.q;
        use Species::*;
        let (a, b) = match gp.species {
            Pion0 => ((Photon, 0), (Photon, 0)),
            KShort if st.rng.bernoulli(0.692) => ((Pion, 1), (Pion, -1)),
            KShort => ((Pion0, 0), (Pion0, 0)),
            Lambda if st.rng.bernoulli(0.639) => ((Proton, q), (Pion, -q)),
            Lambda => ((Neutron, q), (Pion0, 0)),
            Kaon if st.rng.bernoulli(0.636) => ((Muon, q), (Photon, 0)), // ν: massless, unseen
            Kaon => ((Pion, q), (Pion0, 0)),
            Pion => ((Muon, q), (Photon, 0)),
            _ => return,
        };
        // A neutrino is modelled as a massless invisible "photon" we then drop.
        let invisible = matches!(gp.species, Kaon | Pion) && b.0 == Photon;
        let Some((pa, pb)) = two_body_decay(st.rng, gp.species.mass(), p, a.0.mass(), b.0.mass()) else {
            return;
        };
        self.spawn(st, k, a.0, a.1, at, pa);
        if !invisible {
            self.spawn(st, k, b.0, b.1, at, pb);
        }
    }

    /// A photon flies straight; at each layer it may convert into an e+e− pair (if
    /// `photon_conversions` is on).
    fn photon(&self, st: &mut EventState, k: usize) {
        if !self.cfg.photon_conversions {
            return;
        }
        let gp = st.out.particles[k];
        let e = norm(gp.momentum);
        let dir = unit(gp.momentum);
        let pos = gp.vertex;
        let mut crossings: Vec<(f64, f64)> = Vec::new(); // (path, x/X0)
        let dt = dir[0].hypot(dir[1]);
        let pipe_r = self.cfg.beam_pipe[0];
        let circle = |r: f64| -> Option<f64> {
            // |pos_T + s dir_T| = r, s > 0
            let a = dt * dt;
            if a < 1e-12 {
                return None;
            }
            let b = pos[0] * dir[0] + pos[1] * dir[1];
            let c = pos[0] * pos[0] + pos[1] * pos[1] - r * r;
            let disc = b * b - a * c;
            if disc < 0.0 {
                return None;
            }
            let s = (-b + disc.sqrt()) / a;
            (s > 0.0).then_some(s)
        };
        if let Some(s) = circle(pipe_r) {
            crossings.push((s, self.material.beam_pipe_x_over_x0(dt)));
        }
        for l in &self.det.layers {
            let x0 = self.material.module_x_over_x0(&self.det.modules[l.modules[0] as usize]);
            match l.kind {
                LayerKind::Barrel => {
                    if let Some(s) = circle(l.r_mean) {
                        let z = pos[2] + s * dir[2];
                        if z >= l.z_min && z <= l.z_max {
                            crossings.push((s, x0 / dt.max(0.1)));
                        }
                    }
                }
                LayerKind::Endcap => {
                    if dir[2].abs() > 1e-9 {
                        let s = (l.z_mean - pos[2]) / dir[2];
                        if s > 0.0 {
                            let r = (pos[0] + s * dir[0]).hypot(pos[1] + s * dir[1]);
                            if r >= l.r_min && r <= l.r_max {
                                crossings.push((s, x0 / dir[2].abs().max(0.1)));
                            }
                        }
                    }
                }
            }
        }
        crossings.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (s, x) in crossings {
            if st.rng.bernoulli(conversion_probability(x)) {
                let at = axpy(pos, s, dir);
                // Bethe–Heitler energy sharing, approximated as flat in the electron's fraction.
                let f = st.rng.range(0.02, 0.98);
                let q = if st.rng.bernoulli(0.5) { 1 } else { -1 };
                self.spawn(st, k, Species::Electron, q, at, scale(dir, f * e));
                self.spawn(st, k, Species::Electron, -q, at, scale(dir, (1.0 - f) * e));
                return;
            }
        }
    }

    /// A nuclear interaction of hadron `k` at `at`: the hadron is absorbed and a leading hadron
    /// plus soft pions and spallation protons come out.
    fn nuclear(&self, st: &mut EventState, k: usize, at: V3, dir: V3, p: f64) {
        let gp = st.out.particles[k];
        let c = self.cfg;
        if st.rng.bernoulli(0.6) {
            let frac = st.rng.range(0.3, 0.8);
            let d = deflect(dir, st.rng.exponential(0.15), st.rng.range(-3.2, 3.2));
            self.spawn(st, k, gp.species, gp.q, at, scale(d, frac * p));
        }
        let n = st.rng.poisson(c.nuclear_multiplicity * (1.0 + (p / 2.0).ln_1p()) / (1.0 + 0.5f64.ln_1p()));
        for _ in 0..n {
            let (species, q) = if st.rng.bernoulli(c.nuclear_proton_fraction) {
                (Species::Proton, 1)
            } else {
                (Species::Pion, if st.rng.bernoulli(0.5) { 1 } else { -1 })
            };
            let mom = 0.05 + st.rng.exponential(0.35);
            // Half go forward around the incoming direction, half isotropically.
            let d = if st.rng.bernoulli(0.5) {
                deflect(dir, st.rng.exponential(0.5), st.rng.range(-3.2, 3.2))
            } else {
                isotropic(st.rng)
            };
            self.spawn(st, k, species, q, at, scale(d, mom));
        }
    }

    fn charged(&self, st: &mut EventState, k: usize) {
        let gp = st.out.particles[k];
        let species = gp.species;
        let mass = species.mass();
        let q = gp.q as f64;
        // Ionisation loss is neglected: |p| is constant between interactions.
        let p = norm(gp.momentum);
        let mut pos = gp.vertex;
        let mut dir = unit(gp.momentum);
        let mut decay_left = if species.c_tau().is_finite() && self.cfg.charged_decays {
            st.rng.exponential(p / mass * species.c_tau())
        } else {
            f64::INFINITY
        };
        let max_turn = self.cfg.max_turns * TAU;
        let mut turned = 0.0;
        let mut last_module = u32::MAX;
        let mut seq = 0u32;
        let pipe_r = self.cfg.beam_pipe[0];
        for _ in 0..MAX_STEPS {
            let r0 = pos[0].hypot(pos[1]);
            if r0 > WORLD_R || pos[2].abs() > WORLD_Z || turned > max_turn {
                return;
            }
            // How far the nearest layer is: a step shorter than that cannot cross a module.
            let gap = self.envelopes.iter().map(|e| e.distance(r0, pos[2])).fold(f64::MAX, f64::min);
            let near = gap < self.cfg.step_mm;
            // Far from every layer, one step can go all the way to the nearest envelope.
            let mut h = if near { self.cfg.step_mm } else { gap };
            let b = self.field.bz(pos[2] + 0.5 * h * dir[2]);
            let omega = q * b / p;
            if omega.abs() * h > MAX_TURN_PER_STEP {
                h = MAX_TURN_PER_STEP / omega.abs();
            }
            let decays_here = decay_left <= h;
            if decays_here {
                h = decay_left;
            }
            let helix = Helix { pos, dir, omega };
            let (p1, d1) = helix.at(h);
            let best = if near { self.first_crossing(st, &helix, h, last_module) } else { None };
            if let Some((s, mi)) = best {
                let (x, t) = helix.at(s);
                turned += omega.abs() * s;
                decay_left -= s;
                pos = x;
                dir = t;
                let m = &self.det.modules[mi as usize];
                // Grazing crossings leave no hit (`SimConfig::min_cos_incidence`).
                let incidence = dot(dir, m.normal()).abs();
                if !st.rng.bernoulli(self.cfg.hit_inefficiency) && incidence >= self.cfg.min_cos_incidence {
                    self.record_hit(st, k, seq, mi, pos, dir, p);
                    seq += 1;
                }
                let slab = self.material.module_slab(m, dir);
                if species.is_hadron() && st.rng.bernoulli(nuclear_probability(slab)) {
                    self.nuclear(st, k, pos, dir, p);
                    return;
                }
                dir = scatter(st.rng, dir, p, mass, q, slab.x_over_x0);
                last_module = mi;
                continue;
            }
            let r1 = p1[0].hypot(p1[1]);
            if r0 < pipe_r && r1 >= pipe_r {
                let x = self.material.beam_pipe_x_over_x0((p1[0] * d1[0] + p1[1] * d1[1]) / r1);
                pos = p1;
                dir = scatter(st.rng, d1, p, mass, q, x);
            } else {
                pos = p1;
                dir = d1;
            }
            turned += omega.abs() * h;
            decay_left -= h;
            last_module = u32::MAX;
            if decays_here {
                self.decay(st, k, pos, scale(dir, p));
                return;
            }
        }
    }

    /// The first module plane crossed within the step, with its path length.
    fn first_crossing(&self, st: &mut EventState, helix: &Helix, h: f64, skip: u32) -> Option<(f64, u32)> {
        let (p1, _) = helix.at(h);
        let (pm, _) = helix.at(0.5 * h);
        let p0 = helix.pos;
        let rs = [p0[0].hypot(p0[1]), pm[0].hypot(pm[1]), p1[0].hypot(p1[1])];
        let sag = 0.125 * h * h * helix.omega.abs() + 0.5;
        let r_lo = rs.iter().cloned().fold(f64::MAX, f64::min) - sag;
        let r_hi = rs.iter().cloned().fold(0.0, f64::max) + sag;
        let (z_lo, z_hi) = (p0[2].min(p1[2]) - 0.5, p0[2].max(p1[2]) + 0.5);
        st.seen.clear();
        let mut best: Option<(f64, u32)> = None;
        for (li, e) in self.envelopes.iter().enumerate() {
            if e.r_max < r_lo || e.r_min > r_hi || e.z_max < z_lo || e.z_min > z_hi {
                continue;
            }
            let layer = &self.det.layers[li];
            for q in [p0, pm, p1] {
                for &mi in layer.candidates(q[0], q[1], q[2]) {
                    if mi == skip || st.seen.contains(&mi) {
                        continue;
                    }
                    st.seen.push(mi);
                    let m = &self.det.modules[mi as usize];
                    let f0 = m.plane_distance(p0);
                    let f1 = m.plane_distance(p1);
                    // A strict sign change: a particle that starts on a plane (it has just
                    // crossed it) is leaving it, not crossing it again.
                    if (f0 > 0.0) == (f1 > 0.0) || f0 == 0.0 {
                        continue;
                    }
                    let s = helix.plane_crossing(m.normal(), m.center, h, f0, f1);
                    if best.is_some_and(|b| b.0 <= s) {
                        continue;
                    }
                    let (x, _) = helix.at(s);
                    let l = m.to_local(x);
                    if m.contains(l[0], l[1], 0.0) {
                        best = Some((s, mi));
                    }
                }
            }
        }
        best
    }

    #[allow(clippy::too_many_arguments)]
    fn record_hit(&self, st: &mut EventState, k: usize, seq: u32, mi: u32, pos: V3, dir: V3, p: f64) {
        let m = &self.det.modules[mi as usize];
        let local = m.to_local(pos);
        let dloc = m.dir_to_local(dir);
        let layer = &self.det.layers[self.det.layer_of(mi as usize)];
        let barrel = layer.kind == LayerKind::Barrel;
        let table = if barrel { &self.cfg.digi_barrel } else { &self.cfg.digi_endcap };
        let digi = &table[tech_index(layer.technology)];
        let at = LocalCrossing { u: local[0], v: local[1], dir: dloc };
        let cl = digitize(st.rng, m, digi, barrel, at, &mut st.scratch);
        let cell_start = st.out.cells.len() as u32;
        st.out.cells.extend_from_slice(&cl.cells);
        st.out.hits.push(SimHit {
            module: mi,
            particle: k as u32,
            seq,
            local: [cl.u, cl.v],
            truth_pos: pos,
            truth_mom: scale(dir, p),
            cell_start,
            cell_len: cl.cells.len() as u32,
        });
        st.out.particles[k].nhits += 1;
        debug_assert!(dot(dir, dir) > 0.99);
    }
}
