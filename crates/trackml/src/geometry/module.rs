//! One detector module: a planar silicon sensor with its frame, bounds and cell grid.

use crate::ids::ModuleId;

/// The sensor technology of a module, which sets its cell pitch and thickness.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Technology {
    /// Pixels (TrackML volumes 7, 8, 9).
    Pixel,
    /// Short strips (volumes 12, 13, 14).
    ShortStrip,
    /// Long strips (volumes 16, 17, 18).
    LongStrip,
}

impl Technology {
    /// The technology of a TrackML volume, or from the cell pitch for other geometries.
    pub fn of(volume: u16, pitch_v: f64) -> Technology {
        match volume {
            7..=9 => Technology::Pixel,
            12..=14 => Technology::ShortStrip,
            16..=18 => Technology::LongStrip,
            _ if pitch_v < 0.5 => Technology::Pixel,
            _ if pitch_v < 5.0 => Technology::ShortStrip,
            _ => Technology::LongStrip,
        }
    }

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Technology::Pixel => "pixel",
            Technology::ShortStrip => "short strip",
            Technology::LongStrip => "long strip",
        }
    }
}

/// A planar module in the TrackML `detectors.csv` convention.
///
/// `global = center + rot · local` with local = (u, v, w); w is the sensor normal. The active
/// area is a trapezoid symmetric in u: at local v its half-width is interpolated linearly from
/// `min_hu` (at v = −hv) to `max_hu` (at v = +hv); rectangles have `min_hu == max_hu`. Cells
/// are counted from the corner (u = −max_hu, v = −hv): `ch0 = ⌊(u + max_hu)/pitch_u⌋`,
/// `ch1 = ⌊(v + hv)/pitch_v⌋`.
#[derive(Clone, Debug, PartialEq)]
pub struct Module {
    /// Which module this is.
    pub id: ModuleId,
    /// Origin of the local frame \[mm\].
    pub center: [f64; 3],
    /// Rotation local → global; its columns are the u, v, w axes in global coordinates.
    pub rot: [[f64; 3]; 3],
    /// Sensor thickness along w \[mm\].
    pub thickness: f64,
    /// Half-width along u at v = −hv \[mm\].
    pub min_hu: f64,
    /// Half-width along u at v = +hv \[mm\].
    pub max_hu: f64,
    /// Half-length along v \[mm\].
    pub hv: f64,
    /// Cell size along u \[mm\].
    pub pitch_u: f64,
    /// Cell size along v \[mm\].
    pub pitch_v: f64,
}

fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

impl Module {
    /// The local u axis in global coordinates.
    #[inline]
    pub fn axis_u(&self) -> [f64; 3] {
        [self.rot[0][0], self.rot[1][0], self.rot[2][0]]
    }
    /// The local v axis in global coordinates.
    #[inline]
    pub fn axis_v(&self) -> [f64; 3] {
        [self.rot[0][1], self.rot[1][1], self.rot[2][1]]
    }
    /// The sensor normal w in global coordinates.
    #[inline]
    pub fn normal(&self) -> [f64; 3] {
        [self.rot[0][2], self.rot[1][2], self.rot[2][2]]
    }

    /// Global point → local (u, v, w) \[mm\].
    #[inline]
    pub fn to_local(&self, g: [f64; 3]) -> [f64; 3] {
        let d = [g[0] - self.center[0], g[1] - self.center[1], g[2] - self.center[2]];
        [dot(self.axis_u(), d), dot(self.axis_v(), d), dot(self.normal(), d)]
    }

    /// Global direction → local components.
    #[inline]
    pub fn dir_to_local(&self, d: [f64; 3]) -> [f64; 3] {
        [dot(self.axis_u(), d), dot(self.axis_v(), d), dot(self.normal(), d)]
    }

    /// Local (u, v, w) → global point \[mm\].
    #[inline]
    pub fn to_global(&self, l: [f64; 3]) -> [f64; 3] {
        let r = &self.rot;
        [
            self.center[0] + r[0][0] * l[0] + r[0][1] * l[1] + r[0][2] * l[2],
            self.center[1] + r[1][0] * l[0] + r[1][1] * l[1] + r[1][2] * l[2],
            self.center[2] + r[2][0] * l[0] + r[2][1] * l[1] + r[2][2] * l[2],
        ]
    }

    /// Signed distance of a global point from the mid-plane, along w \[mm\].
    #[inline]
    pub fn plane_distance(&self, g: [f64; 3]) -> f64 {
        let d = [g[0] - self.center[0], g[1] - self.center[1], g[2] - self.center[2]];
        dot(self.normal(), d)
    }

    /// Half-width along u at local `v` \[mm\].
    #[inline]
    pub fn half_width_at(&self, v: f64) -> f64 {
        if self.hv <= 0.0 {
            return self.max_hu;
        }
        self.min_hu + (self.max_hu - self.min_hu) * (v + self.hv) / (2.0 * self.hv)
    }

    /// True if local (u, v) lies within the active area grown by `tol` \[mm\] on every side.
    #[inline]
    pub fn contains(&self, u: f64, v: f64, tol: f64) -> bool {
        v.abs() <= self.hv + tol && u.abs() <= self.half_width_at(v.clamp(-self.hv, self.hv)) + tol
    }

    /// Number of cells along u (the grid spans the wider edge).
    pub fn cells_u(&self) -> u32 {
        (2.0 * self.max_hu.max(self.min_hu) / self.pitch_u - 1e-9).ceil().max(1.0) as u32
    }
    /// Number of cells along v.
    pub fn cells_v(&self) -> u32 {
        (2.0 * self.hv / self.pitch_v - 1e-9).ceil().max(1.0) as u32
    }

    /// Cell indices (ch0, ch1) of local (u, v), clamped to the grid.
    pub fn cell_of(&self, u: f64, v: f64) -> (u32, u32) {
        let hu = self.max_hu.max(self.min_hu);
        let c0 = ((u + hu) / self.pitch_u).floor().clamp(0.0, (self.cells_u() - 1) as f64);
        let c1 = ((v + self.hv) / self.pitch_v).floor().clamp(0.0, (self.cells_v() - 1) as f64);
        (c0 as u32, c1 as u32)
    }

    /// Local (u, v) of the centre of cell (ch0, ch1) \[mm\].
    pub fn cell_center(&self, ch0: u32, ch1: u32) -> (f64, f64) {
        let hu = self.max_hu.max(self.min_hu);
        (-hu + (ch0 as f64 + 0.5) * self.pitch_u, -self.hv + (ch1 as f64 + 0.5) * self.pitch_v)
    }

    /// The four corners of the active area on the mid-plane, in global coordinates.
    pub fn corners(&self) -> [[f64; 3]; 4] {
        [
            self.to_global([-self.min_hu, -self.hv, 0.0]),
            self.to_global([self.min_hu, -self.hv, 0.0]),
            self.to_global([self.max_hu, self.hv, 0.0]),
            self.to_global([-self.max_hu, self.hv, 0.0]),
        ]
    }

    /// The technology, from the volume (TrackML) or the pitch.
    pub fn technology(&self) -> Technology {
        Technology::of(self.id.volume(), self.pitch_v)
    }

    /// True if the frame is orthonormal and right-handed (u × v = w) to `tol`.
    pub fn frame_is_orthonormal(&self, tol: f64) -> bool {
        let (u, v, w) = (self.axis_u(), self.axis_v(), self.normal());
        let cross = [u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]];
        (dot(u, u) - 1.0).abs() < tol
            && (dot(v, v) - 1.0).abs() < tol
            && (dot(w, w) - 1.0).abs() < tol
            && dot(u, v).abs() < tol
            && (0..3).all(|i| (cross[i] - w[i]).abs() < tol)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk_trapezoid() -> Module {
        // A disk module at phi = 0, z = 1000: v radial (+x), w along +z, u = v × w = −y.
        Module {
            id: ModuleId::new(14, 2, 1),
            center: [318.0, 0.0, 1000.0],
            rot: [[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 1.0]],
            thickness: 0.25,
            min_hu: 16.4,
            max_hu: 24.2,
            hv: 78.0,
            pitch_u: 0.08,
            pitch_v: 1.2,
        }
    }

    #[test]
    fn local_global_round_trip_and_frame() {
        let m = disk_trapezoid();
        assert!(m.frame_is_orthonormal(1e-12));
        let g = [330.0, -5.0, 1000.1];
        let l = m.to_local(g);
        assert!((l[0] - 5.0).abs() < 1e-12 && (l[1] - 12.0).abs() < 1e-12);
        assert!((l[2] - 0.1).abs() < 1e-12 && (m.plane_distance(g) - 0.1).abs() < 1e-12);
        let back = m.to_global(l);
        assert!((0..3).all(|i| (back[i] - g[i]).abs() < 1e-12));
    }

    #[test]
    fn trapezoid_bounds_and_cells() {
        let m = disk_trapezoid();
        assert!(m.contains(16.0, -78.0, 0.0));
        assert!(!m.contains(17.0, -78.0, 0.0));
        assert!(m.contains(24.0, 78.0, 0.0));
        assert!(!m.contains(0.0, 78.5, 0.0) && m.contains(0.0, 78.5, 1.0));
        assert_eq!((m.cells_u(), m.cells_v()), (605, 130));
        let (c0, c1) = m.cell_of(0.0, 0.0);
        let (u, v) = m.cell_center(c0, c1);
        assert!(u.abs() <= 0.04 && v.abs() <= 0.6);
        assert_eq!(m.technology(), Technology::ShortStrip);
    }
}
