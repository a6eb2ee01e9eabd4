//! The TrackML detector built procedurally from the published layout (docs/data.md, "The
//! detector").
//!
//! 9 volumes, 48 layers, 18,728 modules. Barrel layers are staves of modules at a radius,
//! tilted in phi (the normal within 7° of radial), alternating in radius between neighbouring
//! staves and neighbouring modules along z so that neighbours overlap without touching: this
//! overlap is why a particle often leaves two hits on one layer. Disks are rings of modules
//! (v radial, w along z), alternating in z by ±2.5 mm (pixel) or ±4.5 mm (strips).
//!
//! The published layout gives one trapezoid for several strip-disk rings (short strips: half-widths
//! 16.4–24.2 mm, the inner ring's); the outer rings take the shapes of the 2018 acts-framework's
//! TrackML detector (`GenericDetectorML.ipp`): short strips 24.2–32.2 and 32.2–40.0 mm, long
//! strips 66–72 mm, which cover each ring's circumference with a few percent to spare.

use std::f64::consts::TAU;

use super::detector::Detector;
use super::module::Module;
use crate::ids::ModuleId;

/// Sensor parameters shared by one technology.
#[derive(Clone, Copy, Debug)]
struct Sensor {
    thickness: f64,
    pitch_u: f64,
    pitch_v: f64,
}

const PIXEL: Sensor = Sensor { thickness: 0.15, pitch_u: 0.05, pitch_v: 0.05625 };
const SHORT_STRIP: Sensor = Sensor { thickness: 0.25, pitch_u: 0.08, pitch_v: 1.2 };
const LONG_STRIP: Sensor = Sensor { thickness: 0.35, pitch_u: 0.12, pitch_v: 10.4 };

/// One barrel layer: `n_phi` staves × `n_z` modules with centres from −z_max to +z_max.
#[derive(Clone, Copy, Debug)]
struct BarrelSpec {
    volume: u16,
    layer: u16,
    r: f64,
    n_phi: u32,
    n_z: u32,
    z_max: f64,
    half_u: f64,
    half_v: f64,
    /// Radial offset of odd staves / even staves (±) \[mm\].
    stagger: f64,
    /// Tilt of the normal away from radial \[rad\].
    tilt: f64,
    sensor: Sensor,
}

/// One ring of a disk.
#[derive(Clone, Copy, Debug)]
struct Ring {
    n: u32,
    r: f64,
    min_hu: f64,
    max_hu: f64,
    hv: f64,
}

const DEG: f64 = std::f64::consts::PI / 180.0;

fn barrel_specs() -> Vec<BarrelSpec> {
    let mut v = Vec::new();
    let pix = [(2, 32.0, 16), (4, 72.0, 32), (6, 116.0, 52), (8, 172.0, 78)];
    for (layer, r, n_phi) in pix {
        v.push(BarrelSpec {
            volume: 8,
            layer,
            r,
            n_phi,
            n_z: 14,
            z_max: 455.0,
            half_u: 8.4,
            half_v: 36.0,
            stagger: 0.5,
            tilt: 7.0 * DEG,
            sensor: PIXEL,
        });
    }
    let ss = [(2, 260.0, 40), (4, 360.0, 56), (6, 500.0, 78), (8, 660.0, 102)];
    for (layer, r, n_phi) in ss {
        v.push(BarrelSpec {
            volume: 13,
            layer,
            r,
            n_phi,
            n_z: 21,
            z_max: 1030.0,
            half_u: 24.0,
            half_v: 54.0,
            stagger: 1.5,
            tilt: 5.0 * DEG,
            sensor: SHORT_STRIP,
        });
    }
    for (layer, r, n_phi) in [(2, 820.0, 120), (4, 1020.0, 152)] {
        v.push(BarrelSpec {
            volume: 17,
            layer,
            r,
            n_phi,
            n_z: 21,
            z_max: 1030.0,
            half_u: 24.0,
            half_v: 54.0,
            stagger: 2.5,
            tilt: 5.0 * DEG,
            sensor: LONG_STRIP,
        });
    }
    v
}

fn barrel_modules(s: &BarrelSpec, out: &mut Vec<Module>) {
    let mut id = 1u32;
    let dz = if s.n_z > 1 { 2.0 * s.z_max / (s.n_z - 1) as f64 } else { 0.0 };
    for iz in 0..s.n_z {
        let z = -s.z_max + iz as f64 * dz;
        for ip in 0..s.n_phi {
            let phi = (ip as f64 + 0.5) * TAU / s.n_phi as f64 - std::f64::consts::PI;
            // Staves alternate in radius; along z the modules alternate by a fraction of that
            // so that the 2–5 mm overlaps in z do not put two sensors in one plane.
            let sign_phi = if ip % 2 == 0 { -1.0 } else { 1.0 };
            let sign_z = if iz % 2 == 0 { -1.0 } else { 1.0 };
            let r = s.r + sign_phi * s.stagger + sign_z * 0.2;
            let (c, sn) = (phi.cos(), phi.sin());
            let (ct, st) = (s.tilt.cos(), s.tilt.sin());
            // w = cos t · r̂ + sin t · φ̂ ; v = ẑ ; u = v × w = cos t · φ̂ − sin t · r̂
            let rhat = [c, sn, 0.0];
            let phat = [-sn, c, 0.0];
            let w = [ct * rhat[0] + st * phat[0], ct * rhat[1] + st * phat[1], 0.0];
            let u = [ct * phat[0] - st * rhat[0], ct * phat[1] - st * rhat[1], 0.0];
            out.push(Module {
                id: ModuleId::new(s.volume, s.layer, id),
                center: [r * c, r * sn, z],
                rot: [[u[0], 0.0, w[0]], [u[1], 0.0, w[1]], [0.0, 1.0, 0.0]],
                thickness: s.sensor.thickness,
                min_hu: s.half_u,
                max_hu: s.half_u,
                hv: s.half_v,
                pitch_u: s.sensor.pitch_u,
                pitch_v: s.sensor.pitch_v,
            });
            id += 1;
        }
    }
}

/// Adds the disks of one end-cap volume; `z_abs` are the |z| of the disks, nearest first.
fn endcap_modules(
    volume: u16,
    sign: f64,
    z_abs: &[f64],
    rings: &[Ring],
    dz: f64,
    sensor: Sensor,
    out: &mut Vec<Module>,
) {
    let n = z_abs.len();
    for (k, &za) in z_abs.iter().enumerate() {
        // TrackML numbers layers along +z: in the −z end-cap the farthest disk is layer 2.
        let layer = if sign < 0.0 { 2 * (n - k) as u16 } else { 2 * (k + 1) as u16 };
        let mut id = 1u32;
        for (ir, ring) in rings.iter().enumerate() {
            for ip in 0..ring.n {
                let phi = (ip as f64 + 0.5 + 0.25 * ir as f64) * TAU / ring.n as f64 - std::f64::consts::PI;
                let (c, sn) = (phi.cos(), phi.sin());
                let alt = if (ip as usize + ir).is_multiple_of(2) { -1.0 } else { 1.0 };
                let z = sign * za + alt * dz;
                // v = r̂, w = ẑ, u = v × w = −φ̂
                let v = [c, sn, 0.0];
                let u = [sn, -c, 0.0];
                out.push(Module {
                    id: ModuleId::new(volume, layer, id),
                    center: [ring.r * c, ring.r * sn, z],
                    rot: [[u[0], v[0], 0.0], [u[1], v[1], 0.0], [0.0, 0.0, 1.0]],
                    thickness: sensor.thickness,
                    min_hu: ring.min_hu,
                    max_hu: ring.max_hu,
                    hv: ring.hv,
                    pitch_u: sensor.pitch_u,
                    pitch_v: sensor.pitch_v,
                });
                id += 1;
            }
        }
    }
}

/// All 18,728 modules of the TrackML detector, unsorted.
pub fn trackml_modules() -> Vec<Module> {
    let mut out = Vec::with_capacity(18_728);
    for s in barrel_specs() {
        barrel_modules(&s, &mut out);
    }
    let pix_z = [600.0, 700.0, 820.0, 960.0, 1100.0, 1300.0, 1500.0];
    let pix_rings = [
        Ring { n: 40, r: 66.0, min_hu: 8.4, max_hu: 8.4, hv: 36.0 },
        Ring { n: 68, r: 140.0, min_hu: 8.4, max_hu: 8.4, hv: 36.0 },
    ];
    let strip_z = [1220.0, 1500.0, 1800.0, 2150.0, 2550.0, 2950.0];
    // Each strip-disk ring has its own trapezoid, as the 2018 acts-framework's TrackML detector
    // built them (`GenericDetectorML.ipp`, branch `FatrasAndNewDD4hepDetectors`, 1e11cf34:
    // `mrMinHx` / `mrMaxHx`, and readout bins × pitch = twice the wide half-width).
    let ss_rings = [
        Ring { n: 54, r: 318.0, min_hu: 16.4, max_hu: 24.2, hv: 78.0 },
        Ring { n: 56, r: 470.0, min_hu: 24.2, max_hu: 32.2, hv: 78.0 },
        Ring { n: 60, r: 622.0, min_hu: 32.2, max_hu: 40.0, hv: 78.0 },
    ];
    let ls_rings = [
        Ring { n: 48, r: 828.0, min_hu: 54.0, max_hu: 64.2, hv: 78.0 },
        Ring { n: 50, r: 942.0, min_hu: 66.0, max_hu: 72.0, hv: 78.0 },
    ];
    for (vol, sign) in [(7u16, -1.0), (9, 1.0)] {
        endcap_modules(vol, sign, &pix_z, &pix_rings, 2.5, PIXEL, &mut out);
    }
    for (vol, sign) in [(12u16, -1.0), (14, 1.0)] {
        endcap_modules(vol, sign, &strip_z, &ss_rings, 4.5, SHORT_STRIP, &mut out);
    }
    for (vol, sign) in [(16u16, -1.0), (18, 1.0)] {
        endcap_modules(vol, sign, &strip_z, &ls_rings, 4.5, LONG_STRIP, &mut out);
    }
    out
}

impl Detector {
    /// The TrackML detector, built procedurally (see the module docs of `trackml_layout`).
    pub fn trackml() -> Detector {
        Detector::from_modules(trackml_modules()).expect("the built-in TrackML layout is valid")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::LayerKind;
    use crate::ids::LayerId;

    #[test]
    fn module_counts_match_trackml() {
        let d = Detector::trackml();
        assert_eq!(d.modules.len(), 18_728);
        assert_eq!(d.layers.len(), 48);
        let count = |v: u16, l: u16| d.layers[d.layer_index(LayerId::new(v, l)).unwrap()].modules.len();
        for (l, n) in [(2, 224), (4, 448), (6, 728), (8, 1092)] {
            assert_eq!(count(8, l), n);
        }
        for (l, n) in [(2, 840), (4, 1176), (6, 1638), (8, 2142)] {
            assert_eq!(count(13, l), n);
        }
        assert_eq!((count(17, 2), count(17, 4)), (2520, 3192));
        for l in (2..=14).step_by(2) {
            assert_eq!((count(7, l), count(9, l)), (108, 108));
        }
        for l in (2..=12).step_by(2) {
            assert_eq!((count(12, l), count(14, l)), (170, 170));
            assert_eq!((count(16, l), count(18, l)), (98, 98));
        }
        let vols: std::collections::BTreeSet<u16> = d.layers.iter().map(|l| l.id.volume()).collect();
        assert_eq!(vols.into_iter().collect::<Vec<_>>(), vec![7, 8, 9, 12, 13, 14, 16, 17, 18]);
    }

    #[test]
    fn layers_have_the_published_positions() {
        let d = Detector::trackml();
        let layer = |v: u16, l: u16| &d.layers[d.layer_index(LayerId::new(v, l)).unwrap()];
        let b = layer(8, 2);
        assert_eq!(b.kind, LayerKind::Barrel);
        assert!((b.r_mean - 32.0).abs() < 0.5, "{}", b.r_mean);
        assert!(layer(17, 4).r_mean > 1019.0 && layer(17, 4).r_mean < 1021.0);
        let e = layer(7, 2);
        assert_eq!(e.kind, LayerKind::Endcap);
        assert!((e.z_mean + 1500.0).abs() < 1.0, "{}", e.z_mean);
        assert!((layer(9, 2).z_mean - 600.0).abs() < 1.0);
        assert!((layer(18, 12).z_mean - 2950.0).abs() < 1.0);
        // Barrel normals within 8° of radial, disk normals along z.
        for m in &d.modules {
            let n = m.normal();
            assert!(m.frame_is_orthonormal(1e-9));
            if matches!(m.id.volume(), 8 | 13 | 17) {
                let c = m.center;
                let cosang = (n[0] * c[0] + n[1] * c[1]) / c[0].hypot(c[1]);
                assert!(cosang > (8.0 * DEG).cos(), "{:?}", m.id);
                assert_eq!(m.axis_v(), [0.0, 0.0, 1.0]);
            } else {
                assert!(n[2].abs() > 0.999);
            }
        }
    }

    #[test]
    fn lookup_finds_the_module_under_every_point() {
        let d = Detector::trackml();
        let mut rng = crate::rng::Rng::new(5);
        for _ in 0..20_000 {
            let mi = rng.below(d.modules.len() as u64) as usize;
            let m = &d.modules[mi];
            let v = rng.range(-m.hv, m.hv);
            let hu = m.half_width_at(v);
            let g = m.to_global([rng.range(-hu, hu), v, rng.range(-0.5, 0.5) * m.thickness]);
            let layer = &d.layers[d.layer_of(mi)];
            assert!(layer.candidates(g[0], g[1], g[2]).contains(&(mi as u32)), "module {:?} not found at {g:?}", m.id);
        }
        for l in &d.layers {
            assert!(l.candidates(l.r_mean.max(1.0), 0.0, l.z_mean).len() < 16);
        }
    }
}
