//! In-memory events: struct-of-arrays per TrackML file, aligned where the data allow.
//!
//! These are the types the rest of trackgnn works with; the CSV layer (`crate::csv`)
//! converts between them and the files. Positions are in mm, momenta in GeV, charges in e.

use crate::ids::{ModuleId, ParticleId};

/// The hits of one event (`hits.csv`), one entry per hit.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hits {
    /// TrackML hit_id, unique within the event (1-based in generated events).
    pub hit_id: Vec<u64>,
    /// Global x \[mm\].
    pub x: Vec<f32>,
    /// Global y \[mm\].
    pub y: Vec<f32>,
    /// Global z \[mm\].
    pub z: Vec<f32>,
    /// The module the hit is on (volume_id, layer_id, module_id).
    pub module: Vec<ModuleId>,
}

impl Hits {
    /// The number of hits.
    pub fn len(&self) -> usize {
        self.hit_id.len()
    }
    /// True if there are no hits.
    pub fn is_empty(&self) -> bool {
        self.hit_id.is_empty()
    }
    /// Appends one hit.
    pub fn push(&mut self, hit_id: u64, pos: [f32; 3], module: ModuleId) {
        self.hit_id.push(hit_id);
        self.x.push(pos[0]);
        self.y.push(pos[1]);
        self.z.push(pos[2]);
        self.module.push(module);
    }
}

/// The truth of one event (`truth.csv`), aligned with [`Hits`]: entry `i` describes hit `i`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Truth {
    /// The particle that made the hit, [`ParticleId::NOISE`] for noise.
    pub particle_id: Vec<ParticleId>,
    /// True crossing point x \[mm\] (module mid-plane).
    pub tx: Vec<f32>,
    /// True crossing point y \[mm\].
    pub ty: Vec<f32>,
    /// True crossing point z \[mm\].
    pub tz: Vec<f32>,
    /// True momentum x at the crossing \[GeV\].
    pub tpx: Vec<f32>,
    /// True momentum y at the crossing \[GeV\].
    pub tpy: Vec<f32>,
    /// True momentum z at the crossing \[GeV\].
    pub tpz: Vec<f32>,
    /// TrackML scoring weight of the hit (sums to 1 over the event; 0 for noise).
    pub weight: Vec<f32>,
}

impl Truth {
    /// The number of rows.
    pub fn len(&self) -> usize {
        self.particle_id.len()
    }
    /// True if there are no rows.
    pub fn is_empty(&self) -> bool {
        self.particle_id.is_empty()
    }
    /// Appends one row.
    pub fn push(&mut self, particle: ParticleId, pos: [f32; 3], mom: [f32; 3], weight: f32) {
        self.particle_id.push(particle);
        self.tx.push(pos[0]);
        self.ty.push(pos[1]);
        self.tz.push(pos[2]);
        self.tpx.push(mom[0]);
        self.tpy.push(mom[1]);
        self.tpz.push(mom[2]);
        self.weight.push(weight);
    }
}

/// The particles of one event (`particles.csv`), one entry per particle.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Particles {
    /// Unique non-zero particle_id.
    pub particle_id: Vec<ParticleId>,
    /// PDG code, when the file has the optional `particle_type` column.
    pub particle_type: Option<Vec<i32>>,
    /// Production vertex x \[mm\].
    pub vx: Vec<f32>,
    /// Production vertex y \[mm\].
    pub vy: Vec<f32>,
    /// Production vertex z \[mm\].
    pub vz: Vec<f32>,
    /// Momentum x at production \[GeV\].
    pub px: Vec<f32>,
    /// Momentum y at production \[GeV\].
    pub py: Vec<f32>,
    /// Momentum z at production \[GeV\].
    pub pz: Vec<f32>,
    /// Charge \[e\].
    pub q: Vec<i8>,
    /// Number of hits the particle left.
    pub nhits: Vec<u32>,
}

/// One row of [`Particles`], for building them up.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ParticleRecord {
    /// Unique non-zero id.
    pub particle_id: ParticleId,
    /// PDG code.
    pub particle_type: i32,
    /// Production vertex \[mm\].
    pub vertex: [f32; 3],
    /// Momentum at production \[GeV\].
    pub momentum: [f32; 3],
    /// Charge \[e\].
    pub q: i8,
    /// Number of hits.
    pub nhits: u32,
}

impl Particles {
    /// The number of particles.
    pub fn len(&self) -> usize {
        self.particle_id.len()
    }
    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.particle_id.is_empty()
    }
    /// Appends one particle (the `particle_type` column is kept if present).
    pub fn push(&mut self, p: ParticleRecord) {
        self.particle_id.push(p.particle_id);
        if let Some(t) = self.particle_type.as_mut() {
            t.push(p.particle_type);
        }
        self.vx.push(p.vertex[0]);
        self.vy.push(p.vertex[1]);
        self.vz.push(p.vertex[2]);
        self.px.push(p.momentum[0]);
        self.py.push(p.momentum[1]);
        self.pz.push(p.momentum[2]);
        self.q.push(p.q);
        self.nhits.push(p.nhits);
    }
    /// Transverse momentum of particle `i` \[GeV\].
    pub fn pt(&self, i: usize) -> f64 {
        (self.px[i] as f64).hypot(self.py[i] as f64)
    }
    /// Transverse distance of particle `i`'s production vertex from the beam line \[mm\].
    pub fn vertex_r(&self, i: usize) -> f64 {
        (self.vx[i] as f64).hypot(self.vy[i] as f64)
    }
    /// Pseudorapidity of particle `i` at production.
    pub fn eta(&self, i: usize) -> f64 {
        crate::physics::eta_of(self.px[i] as f64, self.py[i] as f64, self.pz[i] as f64)
    }
}

/// The cells of one event (`cells.csv`): the pixels/strips of each hit's cluster.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cells {
    /// The hit the cell belongs to.
    pub hit_id: Vec<u64>,
    /// Cell index along the module's u axis.
    pub ch0: Vec<u32>,
    /// Cell index along the module's v axis.
    pub ch1: Vec<u32>,
    /// Deposited charge (arbitrary units; a normally incident MIP in pixel silicon gives ~0.15 in
    /// total, as in the TrackML files, which are in units of 1000 electrons / 100).
    pub value: Vec<f32>,
}

impl Cells {
    /// The number of cells.
    pub fn len(&self) -> usize {
        self.hit_id.len()
    }
    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.hit_id.is_empty()
    }
}

/// One TrackML event: hits always, the other files when present.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Event {
    /// The number in the `eventNNNNNNNNN-` prefix.
    pub event_id: u64,
    /// The hits.
    pub hits: Hits,
    /// The truth, aligned with the hits.
    pub truth: Option<Truth>,
    /// The particles.
    pub particles: Option<Particles>,
    /// The cells.
    pub cells: Option<Cells>,
}
