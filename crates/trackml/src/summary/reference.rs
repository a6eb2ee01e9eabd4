//! MISSION.md's generator realism table: the real TrackML values and the comparison rule.
//!
//! Fractions agree within ±0.03 (absolute); other quantities within ±15% (relative), of the
//! value or of the quoted range. "A few electrons/muons" is read as at most 0.05 together.

use serde::Serialize;

use super::realism::RealismStats;

/// How a row is compared.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tolerance {
    /// |generated − real| ≤ 0.03.
    Fraction,
    /// Within ±15% of the range [low, high].
    Relative,
    /// generated ≤ high.
    AtMost,
}

/// One row of the realism comparison.
#[derive(Clone, Debug, Serialize)]
pub struct ReferenceRow {
    /// Snake-case key.
    pub key: String,
    /// Human label.
    pub label: String,
    /// The generated (or read) value.
    pub value: f64,
    /// Real TrackML: lower end (equal to `real_high` for single values).
    pub real_low: f64,
    /// Real TrackML: upper end.
    pub real_high: f64,
    /// The comparison rule.
    pub tolerance: Tolerance,
    /// True if the value agrees with the real one under the rule.
    pub agrees: bool,
}

fn row(key: &str, label: &str, value: f64, low: f64, high: f64, tolerance: Tolerance) -> ReferenceRow {
    let agrees = match tolerance {
        Tolerance::Fraction => value >= low - 0.03 && value <= high + 0.03,
        Tolerance::Relative => value >= low * 0.85 && value <= high * 1.15,
        Tolerance::AtMost => value <= high,
    };
    ReferenceRow { key: key.into(), label: label.into(), value, real_low: low, real_high: high, tolerance, agrees }
}

/// Compares statistics with the real TrackML values of MISSION.md.
pub fn compare_with_trackml(s: &RealismStats) -> Vec<ReferenceRow> {
    use Tolerance::*;
    let get = |m: &std::collections::BTreeMap<String, f64>, k: &str| m.get(k).copied().unwrap_or(f64::NAN);
    let vol = |v: u16| s.hits_per_volume.get(&v).copied().unwrap_or(0.0);
    let res = |g: &str| s.residuals.get(g).cloned().unwrap_or_default();
    let mut rows = vec![row("noise_fraction", "noise hits / all hits", s.noise_fraction, 0.15, 0.15, Fraction)];
    let real_vol = [
        (7, 0.132),
        (8, 0.242),
        (9, 0.130),
        (12, 0.068),
        (13, 0.229),
        (14, 0.063),
        (16, 0.026),
        (17, 0.084),
        (18, 0.027),
    ];
    for (v, r) in real_vol {
        rows.push(row(
            &format!("hits_in_volume_{v}"),
            &format!("hits in volume {v} / all hits"),
            vol(v),
            r,
            r,
            Fraction,
        ));
    }
    rows.extend([
        row("median_pt_gev", "median particle pT [GeV]", s.median_pt_gev, 0.43, 0.43, Relative),
        row("fraction_pt_above_1gev", "particles with pT > 1 GeV", s.fraction_pt_above_1gev, 0.12, 0.12, Fraction),
        row(
            "fraction_pt_above_0p5gev",
            "particles with pT > 0.5 GeV",
            s.fraction_pt_above_0p5gev,
            0.40,
            0.40,
            Fraction,
        ),
        row("mean_hits_per_particle", "mean hits per particle", s.mean_hits_per_particle, 10.0, 10.0, Relative),
        row(
            "mean_hits_per_particle_pt1_eta2p5",
            "mean hits per particle, pT > 1 GeV, |eta| < 2.5",
            s.mean_hits_per_particle_pt1_eta2p5,
            11.0,
            11.0,
            Relative,
        ),
        row(
            "median_hits_per_particle_pt1_eta2p5",
            "median hits per particle, pT > 1 GeV, |eta| < 2.5",
            s.median_hits_per_particle_pt1_eta2p5,
            12.0,
            12.0,
            Relative,
        ),
        row(
            "multi_hit_layer_fraction",
            "(particle, layer) pairs with > 1 hit",
            s.multi_hit_layer_fraction,
            0.28,
            0.28,
            Fraction,
        ),
        row(
            "cells_per_hit_pixel_endcap",
            "cells per hit, pixel end-caps",
            get(&s.cells_per_hit, "pixel_endcap"),
            1.7,
            1.7,
            Relative,
        ),
        row(
            "cells_per_hit_pixel_barrel",
            "cells per hit, pixel barrel",
            get(&s.cells_per_hit, "pixel_barrel"),
            7.0,
            7.0,
            Relative,
        ),
        row(
            "cells_per_hit_short_strip_barrel",
            "cells per hit, short-strip barrel",
            get(&s.cells_per_hit, "short_strip_barrel"),
            1.7,
            2.6,
            Relative,
        ),
        row(
            "cells_per_hit_short_strip_endcap",
            "cells per hit, short-strip end-caps",
            get(&s.cells_per_hit, "short_strip_endcap"),
            1.7,
            2.6,
            Relative,
        ),
        row(
            "cells_per_hit_long_strip_barrel",
            "cells per hit, long-strip barrel",
            get(&s.cells_per_hit, "long_strip_barrel"),
            2.7,
            3.0,
            Relative,
        ),
        row(
            "cells_per_hit_long_strip_endcap",
            "cells per hit, long-strip end-caps",
            get(&s.cells_per_hit, "long_strip_endcap"),
            2.7,
            3.0,
            Relative,
        ),
        row("secondary_fraction", "particles produced at r > 1 mm", s.secondary_fraction, 0.28, 0.28, Fraction),
        row("median_abs_vz_mm", "median |vz| of particles [mm]", s.median_abs_vz_mm, 47.0, 47.0, Relative),
        row("species_pion", "pi+- among particles", get(&s.species, "pion"), 0.78, 0.78, Fraction),
        row("species_proton", "protons among particles", get(&s.species, "proton"), 0.14, 0.14, Fraction),
        row("species_kaon", "K+- among particles", get(&s.species, "kaon"), 0.07, 0.07, Fraction),
        row(
            "species_electron_muon",
            "electrons + muons among particles",
            get(&s.species, "electron").max(0.0) + s.species.get("muon").copied().unwrap_or(0.0),
            0.0,
            0.05,
            AtMost,
        ),
        row(
            "residual_pixel_barrel_rphi_mm",
            "residual pixel barrel r-phi [mm]",
            res("pixel_barrel").rphi_rms_mm,
            0.010,
            0.015,
            Relative,
        ),
        row(
            "residual_pixel_barrel_z_mm",
            "residual pixel barrel z [mm]",
            res("pixel_barrel").second_rms_mm,
            0.010,
            0.015,
            Relative,
        ),
        row(
            "residual_pixel_endcap_rphi_mm",
            "residual pixel end-cap r-phi [mm]",
            res("pixel_endcap").rphi_rms_mm,
            0.010,
            0.015,
            Relative,
        ),
        row(
            "residual_pixel_endcap_r_mm",
            "residual pixel end-cap r [mm]",
            res("pixel_endcap").second_rms_mm,
            0.010,
            0.015,
            Relative,
        ),
        row(
            "residual_short_strip_barrel_rphi_mm",
            "residual short-strip barrel r-phi [mm]",
            res("short_strip_barrel").rphi_rms_mm,
            0.016,
            0.016,
            Relative,
        ),
        row(
            "residual_short_strip_barrel_z_mm",
            "residual short-strip barrel z [mm]",
            res("short_strip_barrel").second_rms_mm,
            0.19,
            0.19,
            Relative,
        ),
        row(
            "residual_long_strip_barrel_z_mm",
            "residual long-strip barrel z [mm]",
            res("long_strip_barrel").second_rms_mm,
            2.8,
            2.8,
            Relative,
        ),
    ]);
    rows
}
