//! One event from end to end: primaries, propagation, noise, hit weights and the TrackML
//! [`Event`] with hits sorted by module (so hit order reveals nothing about particles).

use trackgnn_trackml::SolenoidField;
use trackgnn_trackml::event::{Cells, Event, Hits, ParticleRecord, Particles, Truth};
use trackgnn_trackml::geometry::Detector;
use trackgnn_trackml::ids::ParticleId;
use trackgnn_trackml::rng::Rng;

use crate::config::SimConfig;
use crate::digitize::Cell;
use crate::primaries::{PrimaryGenerator, Produced};
use crate::propagate::{Propagated, Propagator, SimHit};
use crate::weights::{MIN_HITS_FOR_WEIGHT, order_factor, pt_factor};

/// RNG stream ids: every stage of an event draws from its own stream.
const STREAM_PRIMARIES: u64 = 1;
const STREAM_PROPAGATION: u64 = 2;
const STREAM_NOISE: u64 = 3;

/// Counts that describe how an event was made (not in the TrackML files).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GenStats {
    /// Number of pp interactions (hard scatter included).
    pub interactions: usize,
    /// Primary particles produced (charged and neutral).
    pub primaries: usize,
    /// All particles, secondaries included (charged and neutral).
    pub particles_total: usize,
    /// Hits left by particles.
    pub signal_hits: usize,
    /// Noise hits added.
    pub noise_hits: usize,
}

/// The Monte Carlo event generator: a detector, a field and a configuration.
pub struct Generator {
    det: Detector,
    field: SolenoidField,
    cfg: SimConfig,
    primaries: PrimaryGenerator,
}

impl Generator {
    /// A generator for `det` with `cfg`; the field is the TrackML profile scaled to
    /// `cfg.field_tesla` at the centre.
    pub fn new(det: Detector, cfg: SimConfig) -> Self {
        let field = SolenoidField::trackml(cfg.field_tesla);
        let primaries = PrimaryGenerator::new(&cfg);
        Generator { det, field, cfg, primaries }
    }

    /// The detector events are generated in.
    pub fn detector(&self) -> &Detector {
        &self.det
    }

    /// The magnetic field.
    pub fn field(&self) -> &SolenoidField {
        &self.field
    }

    /// The configuration.
    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// Generates event `event_id` of the data set with `seed`. The result depends only on
    /// (seed, event_id, config, detector): never on the thread that runs it.
    pub fn event(&self, seed: u64, event_id: u64) -> (Event, GenStats) {
        self.event_of(seed, event_id, |_| true, true)
    }

    /// Event `event_id` of the data set with `seed` with only the primaries that `keep` accepts
    /// propagated (with the secondaries they make), and no noise when `noise` is false.
    ///
    /// Why: learning a module map needs only the hits of prompt high-pT particles, about a tenth
    /// of an event's; drawing just those costs a tenth of the time and no disk. The kept
    /// primaries are those of the full event with the same seed and id, with the same
    /// distributions, but their hits are not the same draws: propagation shares one random
    /// stream over the particles of an event.
    pub fn event_of(
        &self,
        seed: u64,
        event_id: u64,
        keep: impl Fn(&Produced) -> bool,
        noise: bool,
    ) -> (Event, GenStats) {
        let mut rng = Rng::for_stream(&[seed, event_id, STREAM_PRIMARIES]);
        let (mut produced, interactions) = self.primaries.event(&mut rng);
        produced.retain(|p| keep(p));
        let mut rng = Rng::for_stream(&[seed, event_id, STREAM_PROPAGATION]);
        let mut prop = Propagator::new(&self.det, &self.field, &self.cfg).run(&produced, &mut rng);
        let signal_hits = prop.hits.len();
        let mut rng = Rng::for_stream(&[seed, event_id, STREAM_NOISE]);
        let noise_hits = if noise { self.add_noise(&mut prop, &mut rng) } else { 0 };
        let stats = GenStats {
            interactions,
            primaries: produced.len(),
            particles_total: prop.particles.len(),
            signal_hits,
            noise_hits,
        };
        (self.assemble(event_id, prop), stats)
    }

    /// Adds noise hits so they make `noise_fraction` of all hits, spread uniformly over all
    /// modules (and over each module's area).
    ///
    /// Noise is a property of each module's readout (a random cluster above threshold), not of
    /// the particle flux, so every module is equally likely to have one, wherever it sits. With
    /// 5,712 of the 18,728 modules in the long-strip barrel, that puts about 30% of the noise
    /// there: the real table's share of volume 17 (0.084, counted with noise) is about half
    /// particle hits and half noise, and the busy pixel volumes carry less noise than signal.
    fn add_noise(&self, prop: &mut Propagated, rng: &mut Rng) -> usize {
        let f = self.cfg.noise_fraction;
        if f <= 0.0 || prop.hits.is_empty() {
            return 0;
        }
        let n_noise = (prop.hits.len() as f64 * f / (1.0 - f)).round() as usize;
        let n_modules = self.det.modules.len() as u64;
        for _ in 0..n_noise {
            let mi = rng.below(n_modules) as u32;
            let m = &self.det.modules[mi as usize];
            let (u, v) = loop {
                let v = rng.range(-m.hv, m.hv);
                let u = rng.range(-m.max_hu, m.max_hu);
                if m.contains(u, v, 0.0) {
                    break (u, v);
                }
            };
            let (c0, c1) = m.cell_of(u, v);
            let q0 = rng.range(0.1, 1.0) as f32;
            let cell_start = prop.cells.len() as u32;
            prop.cells.push((c0, c1, q0));
            let mut cells: Vec<Cell> = vec![(c0, c1, q0)];
            if rng.bernoulli(0.3) && c0 + 1 < m.cells_u() {
                let q1 = rng.range(0.1, 0.5) as f32;
                prop.cells.push((c0 + 1, c1, q1));
                cells.push((c0 + 1, c1, q1));
            }
            let (mut su, mut sv, mut sq) = (0.0, 0.0, 0.0);
            for &(a, b, q) in &cells {
                let (cu, cv) = m.cell_center(a, b);
                su += cu * q as f64;
                sv += cv * q as f64;
                sq += q as f64;
            }
            let local = [su / sq, sv / sq];
            prop.hits.push(SimHit {
                module: mi,
                particle: u32::MAX,
                seq: 0,
                local,
                truth_pos: m.to_global([local[0], local[1], 0.0]),
                truth_mom: [0.0; 3],
                cell_start,
                cell_len: cells.len() as u32,
            });
        }
        n_noise
    }

    fn assemble(&self, event_id: u64, prop: Propagated) -> Event {
        let Propagated { particles, mut hits, cells } = prop;
        // TrackML weights: per particle, by hit order and pT.
        let mut by_particle: Vec<Vec<u32>> = vec![Vec::new(); particles.len()];
        for (i, h) in hits.iter().enumerate() {
            if h.particle != u32::MAX {
                by_particle[h.particle as usize].push(i as u32);
            }
        }
        let mut weight = vec![0.0f64; hits.len()];
        for (k, idx) in by_particle.iter_mut().enumerate() {
            let n = idx.len();
            if n < MIN_HITS_FOR_WEIGHT {
                continue;
            }
            idx.sort_by_key(|&i| hits[i as usize].seq);
            let m = particles[k].momentum;
            let ptf = pt_factor(m[0].hypot(m[1]));
            for (j, &i) in idx.iter().enumerate() {
                weight[i as usize] = order_factor(j, n) * ptf;
            }
        }
        let total: f64 = weight.iter().sum();
        if total > 0.0 {
            weight.iter_mut().for_each(|w| *w /= total);
        }
        // Sort hits by module, then position on the module; ties broken by particle and order.
        let mut order: Vec<u32> = (0..hits.len() as u32).collect();
        order.sort_by(|&a, &b| {
            let (ha, hb) = (&hits[a as usize], &hits[b as usize]);
            let ma = self.det.modules[ha.module as usize].id;
            let mb = self.det.modules[hb.module as usize].id;
            ma.cmp(&mb)
                .then(ha.local[1].total_cmp(&hb.local[1]))
                .then(ha.local[0].total_cmp(&hb.local[0]))
                .then(ha.particle.cmp(&hb.particle))
                .then(ha.seq.cmp(&hb.seq))
        });
        let pid = |k: u32| {
            if k == u32::MAX { ParticleId::NOISE } else { ParticleId(k as u64 + 1) }
        };
        let mut out_hits = Hits::default();
        let mut truth = Truth::default();
        let mut out_cells = Cells::default();
        for (new_i, &old) in order.iter().enumerate() {
            let h = &hits[old as usize];
            let m = &self.det.modules[h.module as usize];
            let g = m.to_global([h.local[0], h.local[1], 0.0]);
            let hit_id = new_i as u64 + 1;
            out_hits.push(hit_id, [g[0] as f32, g[1] as f32, g[2] as f32], m.id);
            let tp = h.truth_pos;
            let tm = h.truth_mom;
            truth.push(
                pid(h.particle),
                [tp[0] as f32, tp[1] as f32, tp[2] as f32],
                [tm[0] as f32, tm[1] as f32, tm[2] as f32],
                weight[old as usize] as f32,
            );
            for &(c0, c1, v) in &cells[h.cell_start as usize..(h.cell_start + h.cell_len) as usize] {
                out_cells.hit_id.push(hit_id);
                out_cells.ch0.push(c0);
                out_cells.ch1.push(c1);
                out_cells.value.push(v);
            }
        }
        hits.clear();
        let mut out_particles = Particles { particle_type: Some(Vec::new()), ..Default::default() };
        for (k, p) in particles.iter().enumerate() {
            if !p.species.is_charged() {
                continue;
            }
            out_particles.push(ParticleRecord {
                particle_id: pid(k as u32),
                particle_type: p.species.pdg(p.q),
                vertex: [p.vertex[0] as f32, p.vertex[1] as f32, p.vertex[2] as f32],
                momentum: [p.momentum[0] as f32, p.momentum[1] as f32, p.momentum[2] as f32],
                q: p.q,
                nhits: p.nhits,
            });
        }
        Event { event_id, hits: out_hits, truth: Some(truth), particles: Some(out_particles), cells: Some(out_cells) }
    }
}
