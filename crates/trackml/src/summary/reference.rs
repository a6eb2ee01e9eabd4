//! The generator's realism table (docs/references.md) as data: every row with its real TrackML
//! value, where its figure comes from in [`RealismStats`], and the comparison rule.
//!
//! Fractions agree within ±0.03 (absolute); other figures within ±15% (relative) of the value
//! or of the quoted range.

use serde::Serialize;

use super::realism::RealismStats;

/// How a row is compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tolerance {
    /// A fraction: |value − reference| ≤ 0.03 (from the ends of a range).
    Fraction,
    /// Any other figure: within ±15% of the reference (of its range's ends).
    Relative,
}

/// Largest absolute difference of a [`Tolerance::Fraction`] row.
pub const FRACTION_TOLERANCE: f64 = 0.03;
/// Largest relative difference of a [`Tolerance::Relative`] row.
pub const RELATIVE_TOLERANCE: f64 = 0.15;

impl Tolerance {
    /// True if `value` agrees with the reference range [`low`, `high`] under this rule.
    pub fn agrees(self, value: f64, low: f64, high: f64) -> bool {
        match self {
            Tolerance::Fraction => value >= low - FRACTION_TOLERANCE && value <= high + FRACTION_TOLERANCE,
            Tolerance::Relative => {
                value >= low * (1.0 - RELATIVE_TOLERANCE) && value <= high * (1.0 + RELATIVE_TOLERANCE)
            }
        }
    }
}

/// Where a row's figure is found in [`RealismStats`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Figure {
    /// `noise_fraction`.
    NoiseFraction,
    /// `hits_per_volume[volume]` (0 when the volume has no hits).
    HitsInVolume(u16),
    /// `median_pt_gev`.
    MedianPt,
    /// `fraction_pt_above_1gev`.
    PtAbove1,
    /// `fraction_pt_above_0p5gev`.
    PtAbove0p5,
    /// `mean_hits_per_particle`.
    MeanHits,
    /// `mean_hits_per_particle_pt1_eta2p5`.
    MeanHitsHighPt,
    /// `median_hits_per_particle_pt1_eta2p5`.
    MedianHitsHighPt,
    /// `multi_hit_layer_fraction`.
    MultiHitLayers,
    /// `cells_per_hit[group]`.
    CellsPerHit(&'static str),
    /// `secondary_fraction`.
    Secondaries,
    /// `median_abs_vz_mm`.
    MedianAbsVz,
    /// The sum of `species[name]` over the names (0 for names absent).
    Species(&'static [&'static str]),
    /// `residuals[group].rphi_rms_mm`.
    ResidualRphi(&'static str),
    /// `residuals[group].second_rms_mm` (z in barrels, r in end-caps).
    ResidualSecond(&'static str),
}

impl Figure {
    /// The figure's value in `s`; NaN when `s` lacks the group it needs (no cells, no truth).
    pub fn of(self, s: &RealismStats) -> f64 {
        let residual = |g: &str| s.residuals.get(g);
        match self {
            Figure::NoiseFraction => s.noise_fraction,
            Figure::HitsInVolume(v) => s.hits_per_volume.get(&v).copied().unwrap_or(0.0),
            Figure::MedianPt => s.median_pt_gev,
            Figure::PtAbove1 => s.fraction_pt_above_1gev,
            Figure::PtAbove0p5 => s.fraction_pt_above_0p5gev,
            Figure::MeanHits => s.mean_hits_per_particle,
            Figure::MeanHitsHighPt => s.mean_hits_per_particle_pt1_eta2p5,
            Figure::MedianHitsHighPt => s.median_hits_per_particle_pt1_eta2p5,
            Figure::MultiHitLayers => s.multi_hit_layer_fraction,
            Figure::CellsPerHit(g) => s.cells_per_hit.get(g).copied().unwrap_or(f64::NAN),
            Figure::Secondaries => s.secondary_fraction,
            Figure::MedianAbsVz => s.median_abs_vz_mm,
            Figure::Species(names) => {
                if s.species.is_empty() {
                    f64::NAN
                } else {
                    names.iter().map(|n| s.species.get(*n).copied().unwrap_or(0.0)).sum()
                }
            }
            Figure::ResidualRphi(g) => residual(g).map_or(f64::NAN, |r| r.rphi_rms_mm),
            Figure::ResidualSecond(g) => residual(g).map_or(f64::NAN, |r| r.second_rms_mm),
        }
    }
}

/// One row of the realism table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reference {
    /// Snake-case key (also the JSON key of the row).
    pub key: &'static str,
    /// Human label.
    pub label: &'static str,
    /// What is measured.
    pub figure: Figure,
    /// Real TrackML: lower end of the value (equal to `high` for single values).
    pub low: f64,
    /// Real TrackML: upper end.
    pub high: f64,
    /// The comparison rule.
    pub tolerance: Tolerance,
}

const fn fraction(key: &'static str, label: &'static str, figure: Figure, value: f64) -> Reference {
    Reference { key, label, figure, low: value, high: value, tolerance: Tolerance::Fraction }
}

const fn relative(key: &'static str, label: &'static str, figure: Figure, low: f64, high: f64) -> Reference {
    Reference { key, label, figure, low, high, tolerance: Tolerance::Relative }
}

use Figure::*;

/// The realism table of docs/references.md, row by row, in its order: measured on a reduced
/// real TrackML event with the statistics of [`super::RealismAccumulator`].
#[rustfmt::skip]
pub const TRACKML_REFERENCE: &[Reference] = &[
    fraction("noise_fraction", "noise hits / all hits", NoiseFraction, 0.15),
    fraction("hits_in_volume_7", "hits in volume 7 / all hits", HitsInVolume(7), 0.132),
    fraction("hits_in_volume_8", "hits in volume 8 / all hits", HitsInVolume(8), 0.242),
    fraction("hits_in_volume_9", "hits in volume 9 / all hits", HitsInVolume(9), 0.130),
    fraction("hits_in_volume_12", "hits in volume 12 / all hits", HitsInVolume(12), 0.068),
    fraction("hits_in_volume_13", "hits in volume 13 / all hits", HitsInVolume(13), 0.229),
    fraction("hits_in_volume_14", "hits in volume 14 / all hits", HitsInVolume(14), 0.063),
    fraction("hits_in_volume_16", "hits in volume 16 / all hits", HitsInVolume(16), 0.026),
    fraction("hits_in_volume_17", "hits in volume 17 / all hits", HitsInVolume(17), 0.084),
    fraction("hits_in_volume_18", "hits in volume 18 / all hits", HitsInVolume(18), 0.027),
    relative("median_pt_gev", "median particle pT [GeV]", MedianPt, 0.43, 0.43),
    fraction("fraction_pt_above_1gev", "particles with pT > 1 GeV", PtAbove1, 0.12),
    fraction("fraction_pt_above_0p5gev", "particles with pT > 0.5 GeV", PtAbove0p5, 0.40),
    relative("mean_hits_per_particle", "mean hits per particle", MeanHits, 10.0, 10.0),
    relative("mean_hits_per_particle_pt1_eta2p5", "mean hits per particle, pT > 1 GeV, |eta| < 2.5", MeanHitsHighPt, 11.0, 11.0),
    relative("median_hits_per_particle_pt1_eta2p5", "median hits per particle, pT > 1 GeV, |eta| < 2.5", MedianHitsHighPt, 12.0, 12.0),
    fraction("multi_hit_layer_fraction", "(particle, layer) pairs with > 1 hit", MultiHitLayers, 0.28),
    relative("cells_per_hit_pixel_endcap", "cells per hit, pixel end-caps", CellsPerHit("pixel_endcap"), 1.7, 1.7),
    relative("cells_per_hit_pixel_barrel", "cells per hit, pixel barrel", CellsPerHit("pixel_barrel"), 7.0, 7.0),
    relative("cells_per_hit_short_strip_barrel", "cells per hit, short-strip barrel", CellsPerHit("short_strip_barrel"), 1.7, 2.6),
    relative("cells_per_hit_short_strip_endcap", "cells per hit, short-strip end-caps", CellsPerHit("short_strip_endcap"), 1.7, 2.6),
    relative("cells_per_hit_long_strip_barrel", "cells per hit, long-strip barrel", CellsPerHit("long_strip_barrel"), 2.7, 3.0),
    relative("cells_per_hit_long_strip_endcap", "cells per hit, long-strip end-caps", CellsPerHit("long_strip_endcap"), 2.7, 3.0),
    fraction("secondary_fraction", "particles produced at r > 1 mm", Secondaries, 0.24),
    relative("median_abs_vz_mm", "median |vz| of particles [mm]", MedianAbsVz, 47.0, 47.0),
    fraction("species_pion", "pi+- among particles", Species(&["pion"]), 0.79),
    fraction("species_proton", "protons among particles", Species(&["proton"]), 0.13),
    fraction("species_kaon", "K+- among particles", Species(&["kaon"]), 0.077),
    fraction("species_electron_muon", "electrons + muons among particles", Species(&["electron", "muon"]), 0.002),
    relative("residual_pixel_barrel_rphi_mm", "residual pixel barrel r-phi [mm]", ResidualRphi("pixel_barrel"), 0.0104, 0.0104),
    relative("residual_pixel_barrel_z_mm", "residual pixel barrel z [mm]", ResidualSecond("pixel_barrel"), 0.0049, 0.0049),
    relative("residual_pixel_endcap_rphi_mm", "residual pixel end-cap r-phi [mm]", ResidualRphi("pixel_endcap"), 0.0131, 0.0131),
    relative("residual_pixel_endcap_r_mm", "residual pixel end-cap r [mm]", ResidualSecond("pixel_endcap"), 0.0085, 0.0085),
    relative("residual_short_strip_barrel_rphi_mm", "residual short-strip barrel r-phi [mm]", ResidualRphi("short_strip_barrel"), 0.0202, 0.0202),
    relative("residual_short_strip_barrel_z_mm", "residual short-strip barrel z [mm]", ResidualSecond("short_strip_barrel"), 0.251, 0.251),
    relative("residual_short_strip_endcap_rphi_mm", "residual short-strip end-cap r-phi [mm]", ResidualRphi("short_strip_endcap"), 0.0187, 0.0187),
    relative("residual_short_strip_endcap_r_mm", "residual short-strip end-cap r [mm]", ResidualSecond("short_strip_endcap"), 0.292, 0.292),
    relative("residual_long_strip_barrel_rphi_mm", "residual long-strip barrel r-phi [mm]", ResidualRphi("long_strip_barrel"), 0.0275, 0.0275),
    relative("residual_long_strip_barrel_z_mm", "residual long-strip barrel z [mm]", ResidualSecond("long_strip_barrel"), 3.02, 3.02),
    relative("residual_long_strip_endcap_rphi_mm", "residual long-strip end-cap r-phi [mm]", ResidualRphi("long_strip_endcap"), 0.115, 0.115),
    relative("residual_long_strip_endcap_r_mm", "residual long-strip end-cap r [mm]", ResidualSecond("long_strip_endcap"), 2.77, 2.77),
];

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

/// Compares statistics with the real TrackML values of the realism table, one row per row of
/// [`TRACKML_REFERENCE`].
pub fn compare_with_trackml(s: &RealismStats) -> Vec<ReferenceRow> {
    TRACKML_REFERENCE
        .iter()
        .map(|r| {
            let value = r.figure.of(s);
            ReferenceRow {
                key: r.key.into(),
                label: r.label.into(),
                value,
                real_low: r.low,
                real_high: r.high,
                tolerance: r.tolerance,
                agrees: r.tolerance.agrees(value, r.low, r.high),
            }
        })
        .collect()
}

/// One row of two data sets compared with each other (`inspect A --against B`).
#[derive(Clone, Debug, Serialize)]
pub struct AgainstRow {
    /// Snake-case key (as in [`TRACKML_REFERENCE`]).
    pub key: String,
    /// Human label.
    pub label: String,
    /// The figure of the inspected data set.
    pub value: f64,
    /// The figure of the other data set.
    pub other: f64,
    /// `value − other`.
    pub difference: f64,
    /// The comparison rule of the row.
    pub tolerance: Tolerance,
    /// True if `value` agrees with `other` under the rule.
    pub agrees: bool,
}

/// Compares the statistics of two data sets row by row (the rows of [`TRACKML_REFERENCE`]),
/// `other` taking the place of the real TrackML values.
pub fn compare_with(s: &RealismStats, other: &RealismStats) -> Vec<AgainstRow> {
    TRACKML_REFERENCE
        .iter()
        .map(|r| {
            let (value, o) = (r.figure.of(s), r.figure.of(other));
            AgainstRow {
                key: r.key.into(),
                label: r.label.into(),
                value,
                other: o,
                difference: value - o,
                tolerance: r.tolerance,
                agrees: r.tolerance.agrees(value, o, o),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::realism::ResidualStats;
    use super::*;

    /// Statistics equal to the reference values (the low end of each range).
    fn at_reference() -> RealismStats {
        let mut s = RealismStats::default();
        for r in TRACKML_REFERENCE {
            let v = r.low;
            match r.figure {
                NoiseFraction => s.noise_fraction = v,
                HitsInVolume(vol) => {
                    s.hits_per_volume.insert(vol, v);
                }
                MedianPt => s.median_pt_gev = v,
                PtAbove1 => s.fraction_pt_above_1gev = v,
                PtAbove0p5 => s.fraction_pt_above_0p5gev = v,
                MeanHits => s.mean_hits_per_particle = v,
                MeanHitsHighPt => s.mean_hits_per_particle_pt1_eta2p5 = v,
                MedianHitsHighPt => s.median_hits_per_particle_pt1_eta2p5 = v,
                MultiHitLayers => s.multi_hit_layer_fraction = v,
                CellsPerHit(g) => {
                    s.cells_per_hit.insert(g.into(), v);
                }
                Secondaries => s.secondary_fraction = v,
                MedianAbsVz => s.median_abs_vz_mm = v,
                Species(names) => {
                    s.species.insert(names[0].into(), v);
                }
                ResidualRphi(g) => s.residuals.entry(g.into()).or_insert_with(ResidualStats::default).rphi_rms_mm = v,
                ResidualSecond(g) => {
                    s.residuals.entry(g.into()).or_insert_with(ResidualStats::default).second_rms_mm = v
                }
            }
        }
        s
    }

    #[test]
    fn the_table_has_every_row_of_mission_md_once() {
        // 1 noise + 9 volumes + 3 pT + 3 hits per particle + overlaps + 6 cells + secondaries
        // + vz + 4 species + 12 residuals (6 groups × 2 coordinates).
        assert_eq!(TRACKML_REFERENCE.len(), 41);
        let mut keys: Vec<_> = TRACKML_REFERENCE.iter().map(|r| r.key).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), TRACKML_REFERENCE.len(), "duplicate keys");
        for g in ["pixel", "short_strip", "long_strip"] {
            for (kind, second) in [("barrel", "z"), ("endcap", "r")] {
                for coord in ["rphi", second] {
                    let key = format!("residual_{g}_{kind}_{coord}_mm");
                    assert!(TRACKML_REFERENCE.iter().any(|r| r.key == key), "no row {key}");
                }
            }
        }
        let get = |k: &str| TRACKML_REFERENCE.iter().find(|r| r.key == k).unwrap();
        assert_eq!(get("secondary_fraction").low, 0.24);
        assert_eq!(get("species_electron_muon").low, 0.002);
        assert_eq!(get("residual_pixel_barrel_z_mm").low, 0.0049);
        assert_eq!(get("residual_long_strip_endcap_rphi_mm").low, 0.115);
    }

    #[test]
    fn reference_values_agree_and_the_bands_are_tight() {
        let s = at_reference();
        let rows = compare_with_trackml(&s);
        assert!(rows.iter().all(|r| r.agrees), "{:?}", rows.iter().find(|r| !r.agrees));
        // Electrons and muons add up.
        let mut s2 = s.clone();
        s2.species.insert("electron".into(), 0.02);
        s2.species.insert("muon".into(), 0.02);
        let row = compare_with_trackml(&s2).into_iter().find(|r| r.key == "species_electron_muon").unwrap();
        assert!((row.value - 0.04).abs() < 1e-12 && !row.agrees, "{row:?}");
        // A residual 16% off its reference misses; 14% agrees.
        for (factor, agrees) in [(1.16, false), (0.84, false), (1.14, true), (0.86, true)] {
            let mut s3 = s.clone();
            s3.residuals.get_mut("pixel_barrel").unwrap().second_rms_mm = 0.0049 * factor;
            let row = compare_with_trackml(&s3).into_iter().find(|r| r.key == "residual_pixel_barrel_z_mm").unwrap();
            assert_eq!(row.agrees, agrees, "{factor}");
        }
        // A range row: inside it, and within 15% beyond its ends.
        assert!(Tolerance::Relative.agrees(3.4, 2.7, 3.0) && !Tolerance::Relative.agrees(3.5, 2.7, 3.0));
        assert!(Tolerance::Fraction.agrees(0.258, 0.229, 0.229) && !Tolerance::Fraction.agrees(0.26, 0.229, 0.229));
    }

    #[test]
    fn against_puts_both_values_and_their_difference_side_by_side() {
        let a = at_reference();
        let mut b = a.clone();
        b.noise_fraction = 0.10;
        b.median_pt_gev = 0.43 * 1.2;
        let rows = compare_with(&a, &b);
        assert_eq!(rows.len(), TRACKML_REFERENCE.len());
        let noise = rows.iter().find(|r| r.key == "noise_fraction").unwrap();
        assert!((noise.difference - 0.05).abs() < 1e-12 && !noise.agrees && noise.other == 0.10);
        let pt = rows.iter().find(|r| r.key == "median_pt_gev").unwrap();
        assert!(!pt.agrees, "0.43 is 17% below 0.516");
        assert_eq!(rows.iter().filter(|r| r.agrees).count(), rows.len() - 2);
        // A figure the other data set lacks (no cells) never agrees.
        b.cells_per_hit.clear();
        assert!(compare_with(&a, &b).iter().filter(|r| r.key.starts_with("cells_")).all(|r| !r.agrees));
    }
}
