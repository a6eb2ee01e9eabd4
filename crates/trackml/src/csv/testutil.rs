//! Test helpers shared by the CSV tests: synthetic events and error assertions.

use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::event::{Cells, Event, Hits, ParticleRecord, Particles, Truth};
use crate::ids::{ModuleId, ParticleId};
use crate::rng::Rng;

/// A float with awkward decimals: random values, plus exact edge cases now and then.
fn awkward(rng: &mut Rng, scale: f64) -> f32 {
    match rng.below(50) {
        0 => -0.0,
        1 => f32::MIN_POSITIVE,
        2 => 1e-30,
        3 => -3.0e38,
        4 => f32::from_bits(rng.next_u64() as u32 & 0x7f7f_ffff), // any finite positive
        _ => rng.range(-scale, scale) as f32,
    }
}

/// A deterministic event of `n_hits` hits (ids 1..=n) with truth, particles (with
/// `particle_type`) and 1–3 cells per hit.
pub(crate) fn sample_event(n_hits: usize, seed: u64) -> Event {
    let mut rng = Rng::new(seed);
    let n_particles = n_hits / 10 + 1;
    let base = 4_503_668_346_847_232u64;
    let mut particles = Particles { particle_type: Some(Vec::new()), ..Particles::default() };
    for k in 0..n_particles as u64 {
        particles.push(ParticleRecord {
            particle_id: ParticleId(base + 7 * k + 1),
            particle_type: [211, -211, 321, 2212, 11, -13][rng.below(6) as usize],
            vertex: [awkward(&mut rng, 0.1), awkward(&mut rng, 0.1), awkward(&mut rng, 100.0)],
            momentum: [awkward(&mut rng, 2.0), awkward(&mut rng, 2.0), awkward(&mut rng, 10.0)],
            q: if rng.bernoulli(0.5) { 1 } else { -1 },
            nhits: rng.below(20) as u32,
        });
    }
    let mut hits = Hits::default();
    let mut truth = Truth::default();
    let mut cells = Cells::default();
    for i in 0..n_hits as u64 {
        let module = ModuleId::new(
            [7u16, 8, 9, 12, 13, 14, 16, 17, 18][rng.below(9) as usize],
            2 * (1 + rng.below(7) as u16),
            1 + rng.below(3192) as u32,
        );
        hits.push(i + 1, [awkward(&mut rng, 1000.0), awkward(&mut rng, 1000.0), awkward(&mut rng, 3000.0)], module);
        let particle = if rng.bernoulli(0.15) {
            ParticleId::NOISE
        } else {
            particles.particle_id[rng.below(n_particles as u64) as usize]
        };
        let pos = [awkward(&mut rng, 1000.0), awkward(&mut rng, 1000.0), awkward(&mut rng, 3000.0)];
        let mom = [awkward(&mut rng, 2.0), awkward(&mut rng, 2.0), awkward(&mut rng, 10.0)];
        truth.push(particle, pos, mom, rng.uniform() as f32 * 1e-5);
        for _ in 0..1 + rng.below(3) {
            cells.hit_id.push(i + 1);
            cells.ch0.push(rng.below(1200) as u32);
            cells.ch1.push(rng.below(1200) as u32);
            cells.value.push(rng.uniform() as f32);
        }
    }
    Event { event_id: 0, hits, truth: Some(truth), particles: Some(particles), cells: Some(cells) }
}

/// Writes `text` to `dir/name` and returns the path.
pub(crate) fn write_text(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Asserts the error's variant (by `is`) and that its message contains every needle.
#[track_caller]
pub(crate) fn assert_err(e: &Error, is: impl Fn(&Error) -> bool, needles: &[&str]) {
    let msg = e.to_string();
    assert!(is(e), "unexpected variant: {e:?}");
    for n in needles {
        assert!(msg.contains(n), "message {msg:?} lacks {n:?}");
    }
}
