//! Typed identifiers: detector modules and particles.

use std::fmt;

/// A detector module: TrackML's (volume_id, layer_id, module_id) packed in one `u64`.
///
/// The packing `volume << 48 | layer << 32 | module` makes the natural order of ids the
/// order of volumes, then layers, then modules, as TrackML lists them.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ModuleId(u64);

impl ModuleId {
    /// Packs a module id from its three TrackML parts.
    pub const fn new(volume: u16, layer: u16, module: u32) -> Self {
        ModuleId(((volume as u64) << 48) | ((layer as u64) << 32) | module as u64)
    }
    /// The TrackML volume_id.
    pub const fn volume(self) -> u16 {
        (self.0 >> 48) as u16
    }
    /// The TrackML layer_id (unique only within its volume).
    pub const fn layer(self) -> u16 {
        (self.0 >> 32) as u16
    }
    /// The TrackML module_id (unique only within its layer).
    pub const fn module(self) -> u32 {
        self.0 as u32
    }
    /// The id of the layer this module is on.
    pub const fn layer_id(self) -> LayerId {
        LayerId::new(self.volume(), self.layer())
    }
    /// The packed representation.
    pub const fn raw(self) -> u64 {
        self.0
    }
    /// Rebuilds an id from [`ModuleId::raw`].
    pub const fn from_raw(raw: u64) -> Self {
        ModuleId(raw)
    }
}

impl fmt::Debug for ModuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ModuleId({}/{}/{})", self.volume(), self.layer(), self.module())
    }
}

impl fmt::Display for ModuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "volume {} layer {} module {}", self.volume(), self.layer(), self.module())
    }
}

/// A detector layer: TrackML's (volume_id, layer_id) packed in one `u32`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct LayerId(u32);

impl LayerId {
    /// Packs a layer id.
    pub const fn new(volume: u16, layer: u16) -> Self {
        LayerId(((volume as u32) << 16) | layer as u32)
    }
    /// The TrackML volume_id.
    pub const fn volume(self) -> u16 {
        (self.0 >> 16) as u16
    }
    /// The TrackML layer_id.
    pub const fn layer(self) -> u16 {
        self.0 as u16
    }
}

impl fmt::Debug for LayerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LayerId({}/{})", self.volume(), self.layer())
    }
}

impl fmt::Display for LayerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "volume {} layer {}", self.volume(), self.layer())
    }
}

/// A TrackML particle_id; 0 marks noise hits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Debug)]
pub struct ParticleId(pub u64);

impl ParticleId {
    /// The id TrackML gives noise hits.
    pub const NOISE: ParticleId = ParticleId(0);
    /// True for the noise id 0.
    pub const fn is_noise(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Display for ParticleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_id_packs_and_orders() {
        let a = ModuleId::new(8, 2, 1);
        let b = ModuleId::new(8, 4, 0);
        let c = ModuleId::new(9, 2, 0);
        assert_eq!((a.volume(), a.layer(), a.module()), (8, 2, 1));
        assert!(a < b && b < c);
        assert_eq!(ModuleId::from_raw(a.raw()), a);
        assert_eq!(a.layer_id(), LayerId::new(8, 2));
        assert_eq!(ModuleId::new(18, 12, 98).module(), 98);
    }

    #[test]
    fn noise_particle() {
        assert!(ParticleId::NOISE.is_noise());
        assert!(!ParticleId(42).is_noise());
    }
}
