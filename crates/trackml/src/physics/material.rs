//! The material a track crosses in the TrackML-like detector, as both the generator (which
//! samples its effects) and a track fit (which adds their variance to its covariance) need it.
//!
//! Each module is its silicon (`module.thickness` over [`X0_SILICON`]) plus the support,
//! cooling and services of its technology, in radiation and nuclear interaction lengths per
//! normal crossing; a crossing at an angle traverses more, by the obliquity 1/|cos α| (α the
//! angle to the module's normal), capped at [`MAX_OBLIQUITY`]. The beam pipe is a beryllium
//! cylinder. The multiple-scattering width of a crossing is
//! [`highland_theta0`](super::highland_theta0) of its x/X0.

use super::{LAMBDA_I_SILICON, X0_BERYLLIUM, X0_SILICON};
use crate::geometry::{Module, Technology};

/// Largest path-length factor 1/|cos α| used for grazing crossings of a module.
pub const MAX_OBLIQUITY: f64 = 10.0;

/// Smallest |cos α| used for the beam pipe's path-length factor (a crossing at a grazing angle
/// counts as one at cos α = 0.1).
pub const MIN_BEAM_PIPE_COS: f64 = 0.1;

/// The material one crossing of a module traverses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slab {
    /// Traversed thickness in radiation lengths (along the path).
    pub x_over_x0: f64,
    /// Traversed thickness in nuclear interaction lengths.
    pub x_over_lambda: f64,
}

/// Index of a technology in per-technology arrays (pixel, short strip, long strip).
pub fn tech_index(t: Technology) -> usize {
    match t {
        Technology::Pixel => 0,
        Technology::ShortStrip => 1,
        Technology::LongStrip => 2,
    }
}

/// The detector's material: per technology the support added to each module's silicon, and
/// the beam pipe. `Default` is the generator's default detector.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MaterialModel {
    /// Support, cooling and services of one module per normal crossing, in radiation lengths,
    /// by technology ([`tech_index`]).
    pub support_x0: [f64; 3],
    /// The same in nuclear interaction lengths.
    pub support_lambda: [f64; 3],
    /// The beam pipe: radius and wall thickness \[mm\] (beryllium).
    pub beam_pipe: [f64; 2],
}

impl Default for MaterialModel {
    fn default() -> Self {
        MaterialModel {
            support_x0: [0.0005, 0.0008, 0.001],
            support_lambda: [0.002, 0.003, 0.004],
            beam_pipe: [19.0, 0.8],
        }
    }
}

impl MaterialModel {
    /// A module's material per normal crossing, in radiation lengths: its silicon and support.
    pub fn module_x_over_x0(&self, module: &Module) -> f64 {
        module.thickness / X0_SILICON + self.support_x0[tech_index(module.technology())]
    }

    /// The sensor plus its support material along the path through `module` at unit
    /// direction `dir`.
    pub fn module_slab(&self, module: &Module, dir: [f64; 3]) -> Slab {
        let n = module.normal();
        let cos = (n[0] * dir[0] + n[1] * dir[1] + n[2] * dir[2]).abs();
        let obliquity = (1.0 / cos.max(1e-9)).min(MAX_OBLIQUITY);
        let k = tech_index(module.technology());
        Slab {
            x_over_x0: (module.thickness / X0_SILICON + self.support_x0[k]) * obliquity,
            x_over_lambda: (module.thickness / LAMBDA_I_SILICON + self.support_lambda[k]) * obliquity,
        }
    }

    /// Radiation lengths of the beam pipe's wall crossed at `cos` = the cosine of the angle
    /// between the direction and the pipe's radial normal (at least [`MIN_BEAM_PIPE_COS`]).
    pub fn beam_pipe_x_over_x0(&self, cos: f64) -> f64 {
        self.beam_pipe[1] / X0_BERYLLIUM / cos.abs().max(MIN_BEAM_PIPE_COS)
    }

    /// Radiation lengths of the beam pipe's wall crossed at the point `pos` on it with unit
    /// direction `dir`.
    pub fn beam_pipe_x_over_x0_at(&self, pos: [f64; 3], dir: [f64; 3]) -> f64 {
        let r = pos[0].hypot(pos[1]);
        self.beam_pipe_x_over_x0((pos[0] * dir[0] + pos[1] * dir[1]) / r)
    }
}

/// Probability of a nuclear interaction in a slab.
pub fn nuclear_probability(slab: Slab) -> f64 {
    1.0 - (-slab.x_over_lambda).exp()
}

/// Probability that a photon converts in a slab: 1 − exp(−7/9 · x/X0) (PDG 2024, eq. 34.31).
pub fn conversion_probability(x_over_x0: f64) -> f64 {
    1.0 - (-7.0 / 9.0 * x_over_x0).exp()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Detector;

    #[test]
    fn conversion_probability_for_one_radiation_length() {
        assert!((conversion_probability(1.0) - (1.0 - (-7.0f64 / 9.0).exp())).abs() < 1e-15);
        assert!(conversion_probability(0.01) < 0.008);
    }

    #[test]
    fn module_slab_grows_with_obliquity_up_to_its_cap() {
        let det = Detector::trackml();
        let model = MaterialModel::default();
        let m = &det.modules[0];
        let n = m.normal();
        let normal = model.module_slab(m, n);
        assert!((normal.x_over_x0 - model.module_x_over_x0(m)).abs() < 1e-15);
        assert!((normal.x_over_x0 - (0.15 / X0_SILICON + 0.0005)).abs() < 1e-12, "{normal:?}");
        // At 60° to the normal the path is twice as long.
        let t = {
            let u = m.rot.map(|row| row[0]);
            let (c, s) = (0.5f64, 0.75f64.sqrt());
            [c * n[0] + s * u[0], c * n[1] + s * u[1], c * n[2] + s * u[2]]
        };
        assert!((model.module_slab(m, t).x_over_x0 / normal.x_over_x0 - 2.0).abs() < 1e-9);
        // Along the module: capped.
        let along = m.rot.map(|row| row[0]);
        assert!((model.module_slab(m, along).x_over_x0 / normal.x_over_x0 - MAX_OBLIQUITY).abs() < 1e-9);
        assert!(nuclear_probability(normal) > 0.0 && nuclear_probability(normal) < 0.01);
    }

    #[test]
    fn beam_pipe_crossing() {
        let model = MaterialModel::default();
        let radial = model.beam_pipe_x_over_x0_at([19.0, 0.0, 0.0], [1.0, 0.0, 0.0]);
        assert!((radial - 0.8 / X0_BERYLLIUM).abs() < 1e-15);
        let steep = model.beam_pipe_x_over_x0_at([0.0, 19.0, 5.0], [0.0, 0.05, (1.0f64 - 0.0025).sqrt()]);
        assert!((steep / radial - 10.0).abs() < 1e-12);
    }
}
