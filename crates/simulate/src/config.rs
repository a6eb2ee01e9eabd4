//! Every setting of the generator, with its physical meaning, unit and the source of its default.

use serde::{Deserialize, Serialize};
use trackgnn_trackml::physics::material::MaterialModel;

use crate::single::SingleParticles;

/// Settings of the event generator. `Default` gives the TrackML-like configuration; only
/// `pileup` usually changes (small for quick runs, 200 for TrackML scale).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimConfig {
    /// Mean number of minimum-bias interactions per event (Poisson) on top of the hard scatter.
    pub pileup: f64,
    /// Generate a hard-scatter interaction in each event.
    pub hard_scatter: bool,
    /// Charged-particle density dN_ch/dη at η = 0 per inelastic interaction. ≈ 5 at 13–14 TeV
    /// (ALICE/ATLAS/CMS inelastic measurements; ≈ 6–7 for non-single-diffractive events).
    pub dndeta0: f64,
    /// Negative-binomial k of the multiplicity per interaction (KNO-like spread; UA5/ALICE fits
    /// give k ≈ 1–2 over wide η ranges).
    pub nbd_k: f64,
    /// Largest |η| generated; the detector ends near 4.
    pub eta_max: f64,
    /// |η| where the dN/dη plateau ends and the fall-off starts.
    pub eta_plateau: f64,
    /// Width of the Gaussian fall-off of dN/dη beyond the plateau.
    pub eta_falloff: f64,
    /// Tsallis temperature T \[GeV\] of the minimum-bias pT spectrum
    /// dN/dpT ∝ pT · (1 + (mT − m)/(n T))^(−n). CMS/ALICE 13 TeV fits of identified hadrons
    /// give T ≈ 0.09–0.13 GeV; the default 0.16 lies above them, chosen so the generated
    /// particles (secondaries included) reproduce the pT rows of the TrackML realism table
    /// (median 0.43 GeV, 40% above 0.5 GeV, 12% above 1 GeV).
    pub tsallis_t: f64,
    /// Tsallis exponent n of the minimum-bias spectrum (fits: n ≈ 6–8).
    pub tsallis_n: f64,
    /// Tsallis T of the hard scatter \[GeV\].
    pub hard_tsallis_t: f64,
    /// Tsallis n of the hard scatter (a harder, more power-law spectrum).
    pub hard_tsallis_n: f64,
    /// Multiplicity of the hard scatter relative to a minimum-bias interaction.
    pub hard_multiplicity_factor: f64,
    /// Lowest generated primary pT \[GeV\].
    pub pt_min: f64,
    /// Fractions of charged primaries: π±, K±, p/p̄, e±, μ± (normalised when used).
    pub charged_fractions: [f64; 5],
    /// Neutral primaries per charged pion: π0 (→ γγ, the source of conversions).
    pub pi0_per_pion: f64,
    /// K0_S per charged kaon.
    pub kshort_per_kaon: f64,
    /// Λ + Λ̄ per proton + antiproton.
    pub lambda_per_proton: f64,
    /// Beam-spot width in z \[mm\]: the LHC's σz ≈ 55 mm. With it the particles'
    /// median |vz| is 43 mm (real 47 mm; secondaries, produced farther out, raise it above the
    /// 37 mm of the primaries alone). An earlier 48 mm made up for the conversion electrons
    /// the default now leaves out (see `photon_conversions`); without them it gives 38 mm.
    pub beam_sigma_z: f64,
    /// Beam-spot width in x and y \[mm\] (LHC: σxy ≈ 15 µm).
    pub beam_sigma_xy: f64,
    /// Field at the centre \[T\]; the profile along z keeps the TrackML shape, scaled.
    pub field_tesla: f64,
    /// Propagation stops after the particle turned through this many full turns in the
    /// transverse plane (the "loop protection" of ACTS, whose default is half a turn: the path
    /// limit is `loopFraction` = 0.5 of a full helix turn). Letting loopers come back (1 turn
    /// at μ = 200) raises the short-strip barrel's share of hits by 0.01, but also raises
    /// long-strip barrel cells per hit from 3.3 to 3.6 (real 2.7–3.0; grazing crossings near
    /// the turning radius), mean hits per particle from 10.5 to 11.1 (real 10.0), overlaps from
    /// 0.28 to 0.31 (real 0.28) and hits per event by 8%: the real table is that of half-turn
    /// propagation.
    pub max_turns: f64,
    /// Propagation step \[mm\] (the helix is exact within a step; this sets how often the field
    /// is re-evaluated and the geometry queried).
    pub step_mm: f64,
    /// Probability that a particle crossing a module leaves no hit.
    pub hit_inefficiency: f64,
    /// Crossings whose direction makes |cos| below this with the module's normal leave no hit
    /// (grazing incidence). TrackML's digitisation dropped them: `cosThetaLocMin = 0.1` in
    /// `FW::DigitizationAlgorithm::Config` of the acts-framework branch the data set was made
    /// with (`FatrasAndNewDD4hepDetectors`, commit 1e11cf34, 2018-03-29, "dataset
    /// restructuring"; `Algorithms/Digitization`). In the pixel barrel that is 3.4% of the
    /// hits, the steep crossings near |η| = 3 with the longest clusters: without the cut the
    /// barrel's cells per hit come out 8.61 instead of 7.23 (real 7.0; 3 events, μ = 200,
    /// seed 77). Older configurations without the key read 0 (no cut).
    #[serde(default = "zero")]
    pub min_cos_incidence: f64,
    /// Fraction of all hits that are noise (real TrackML: 15%). Noise hits are spread uniformly
    /// over the modules (see `Generator`), not like the particle hits.
    pub noise_fraction: f64,
    /// Beam pipe radius \[mm\] and thickness \[mm\] of beryllium.
    pub beam_pipe: [f64; 2],
    /// Material of one module with its support, cooling and services, in radiation lengths
    /// (pixel, short strip, long strip), on top of the sensor's own silicon. Tuned with
    /// `support_lambda` so the fraction of secondaries matches the realism table
    /// (docs/references.md).
    pub support_x0: [f64; 3],
    /// The same material in nuclear interaction lengths (pixel, short strip, long strip).
    pub support_lambda: [f64; 3],
    /// Mean number of charged secondaries of a nuclear interaction (besides the leading one).
    pub nuclear_multiplicity: f64,
    /// Fraction of nuclear-interaction secondaries that are protons (spallation fragments).
    pub nuclear_proton_fraction: f64,
    /// Secondaries below this momentum \[GeV\] are not produced (a production cut).
    pub secondary_p_min: f64,
    /// Let photons convert into e+e− pairs in the material. Off by default: the TrackML events
    /// were made with the ACTS fast simulation of 2018 (acts-fatras: multiple scattering,
    /// Bethe–Bloch and Bethe–Heitler energy loss, parametrised nuclear interactions; photon
    /// conversions came to ActsFatras only later), so their particle list carries no conversion
    /// electrons: electrons + muons are 0.002 of the real particles with hits, the prompt
    /// leptons of the generator (`charged_fractions`). With conversions on, the default
    /// material makes them 0.045 of the particles with hits (μ = 200, seed 77) and pions 0.76
    /// instead of the real 0.79.
    pub photon_conversions: bool,
    /// Let charged pions and kaons decay in flight (π → μν, K → μν / ππ0). Off by default, as
    /// in the fast simulation that made the TrackML data set, whose particles are almost only
    /// hadrons (electrons + muons 0.002 of them: docs/references.md); K0_S and Λ decays are
    /// always on.
    pub charged_decays: bool,
    /// The single-particle mode: when set, every event is these particles alone (no hard
    /// scatter, no pile-up: `pileup`, `hard_scatter` and the spectra are not read). Default
    /// none. Noise hits follow `noise_fraction` as in every event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub single: Option<SingleParticles>,
    /// Digitisation of barrel modules per technology (pixel, short strip, long strip).
    ///
    /// The default is TrackML's barrel digitisation as the 2018 sources show it: the
    /// acts-framework branch the data set was made with (`FatrasAndNewDD4hepDetectors`, commit
    /// 1e11cf34, 2018-03-29: `Algorithms/Digitization/src/DigitizationAlgorithm.cpp`,
    /// `Detectors/GenericDetector/.../GenericDetectorML.ipp`) over the ACTS core of January 2018
    /// (f5ce83e7: `PlanarModuleStepper`, `CartesianSegmentation`):
    /// - the path is cut into steps at every cell boundary; each step's cell is where its centre
    ///   lands after the Lorentz drift; no threshold, no diffusion; each step's length is smeared
    ///   by a 10% Gaussian (`smearParameter` 0.1; here `fluctuation`, uniform with the same σ);
    /// - pixels (volumes below 10) place the hit at the path-length-weighted mean of the cells,
    ///   strips at their unweighted mean ("digital", `binary`);
    /// - the Lorentz angle is 0.12 rad in the pixel and short-strip barrels, 0.08 in the long
    ///   strips, none in the disks; the pixel staves are tilted by +0.14 rad, the strip staves
    ///   by −0.15. The drift moves the charge along the same local direction in both (the
    ///   readout side only moves its mean), so it adds to a radial track's slope across the
    ///   pixels and nearly cancels it across the strips. Our procedural staves all lean the
    ///   pixels' way (7° and 5°), so the strips' drift is entered with the opposite sign to
    ///   keep that relation: tan θ_L = +0.12, −0.12, −0.08;
    /// - the hit is shifted back by the drift over the *full* module thickness
    ///   (`lorentzShift = thickness · tan θ_L`, see [`DigiConfig::lorentz_correction`]).
    ///
    /// The charge is collected over the sensor's thickness (`depth_over_thickness` 1): with
    /// it the barrels give 7.23 / 2.44 / 3.19 cells per hit in the pixel / short-strip /
    /// long-strip barrel (real 7.0 / ≤ 2.6 / 2.7–3.0), with twice it 13.5 / 3.90 / 5.39
    /// and a pixel r-φ residual of 0.0038 mm (3 events, μ = 200, seed 77). The
    /// sources pass the same thickness as half-thickness in barrels and disks
    /// (`GenericLayerBuilder`), so they do not say why the barrels' clusters are those of the
    /// single thickness while the disks' are those of twice it (see `digi_endcap`).
    ///
    /// With the correction over the full thickness and the charge over the sensor, every hit
    /// lands tan θ_L · t/2 from the crossing along u: 9, 15 and 14 µm in the pixel, short-strip
    /// and long-strip barrels. That offset, added in quadrature to the cluster's own error, is
    /// why the real strip barrels' r-φ residuals lie near the binary pitch/√12 although most
    /// clusters have two strips (3 events, μ = 200, seed 77; real in brackets): r-φ 0.0105
    /// (0.0104), 0.0208 (0.0202), 0.0270 (0.0275) mm; corrected by the mean drift instead
    /// (`lorentz_correction` unset) 0.0060, 0.0151, 0.0234. The earlier setting (pixel drift against
    /// the tilt, thresholds and diffusion tuned, correction by the mean drift) left the short
    /// strips at 0.0150: no digitisation without the offset reaches 0.0172 at these crossing
    /// angles (path-length-weighted 0.009, binary 0.015–0.016, with either drift sign and
    /// either depth), because the tracks' bending at these radii spreads most clusters over
    /// two strips.
    pub digi_barrel: [DigiConfig; 3],
    /// Digitisation of end-cap modules per technology (pixel, short strip, long strip).
    ///
    /// The default is the geometric digitisation of the 2018 ACTS framework that made TrackML
    /// (`FW::DigitizationAlgorithm` with `Acts::PlanarModuleStepper`): every cell the path
    /// crosses is read out with the path length in it as its charge (no threshold, no
    /// diffusion: the algorithm's "@todo implement smearing"), the cluster position is the
    /// path-length-weighted mean of the cell centres (strips too), there is no Lorentz drift
    /// in the disks, and the path spans twice `module_t` (see
    /// [`DigiConfig::depth_over_thickness`]).
    pub digi_endcap: [DigiConfig; 3],
}

/// Digitisation settings of one sensor technology.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DigiConfig {
    /// tan of the Lorentz angle in barrel sensors (field along v, drift along u), signed: the
    /// charge of a crossing spreads along u over t·|d_u/d_w − tan θ_L|. A radial track crosses
    /// the procedural barrels at d_u/d_w ≈ −0.12 (pixels) and −0.09 (strips), so a positive
    /// value widens the clusters and a negative one narrows them.
    pub tan_lorentz: f64,
    /// Charge-cloud width from diffusion at the full drift length \[mm\], plus capacitive
    /// sharing between neighbouring strips folded in.
    pub diffusion_mm: f64,
    /// A cell is read out if it collects at least this fraction of a normally incident MIP's
    /// charge.
    pub threshold: f64,
    /// Relative spread of the ionisation of each charge sample (uniform, mean 1). The TrackML
    /// digitisation deposited charge in proportion to the path length in each cell; a small
    /// spread keeps thresholds from acting on a perfectly smooth deposit.
    pub fluctuation: f64,
    /// Binary readout: the cluster position is the unweighted mean of its cells (strip
    /// detectors such as the ATLAS SCT record only hit/no-hit), instead of charge-weighted.
    /// TrackML's barrel strips were read this way: `FW::DigitizationAlgorithm` of the branch
    /// that made the data set used the "digital" mean for volumes from 10 up (see
    /// [`SimConfig::digi_barrel`]).
    pub binary: bool,
    /// Depth over which the crossing deposits charge, in units of the module's thickness
    /// (`module_t`); 1 is the sensor itself. Older configurations without the key read 1.
    ///
    /// TrackML's end-caps were digitised over twice `module_t`: the generic detector of the
    /// 2018 ACTS framework that built the TrackML geometry (`GenericLayerBuilder`) passed the
    /// module thickness where `Acts::DigitizationModule` expects the *half* thickness, so the
    /// geometric digitiser (`PlanarModuleStepper`) stepped the path from −module_t to +module_t.
    /// acts-framework fixed it on 2019-06-21 (commit 534b7327, "framework-2-9 with hotfix":
    /// `0.5 * moduleThickness`), after the data set was made. With that depth and ACTS's
    /// cluster rule (see [`SimConfig::digi_endcap`]) the end-cap rows come out as measured on
    /// real TrackML (3 events, μ = 200, seed 77): pixel end-cap cells per hit 1.62 (real 1.7),
    /// residuals r-φ 0.0131 / r 0.0086 mm (real 0.0131 / 0.0085; the tuned diffusion and
    /// threshold before gave 0.0090 / 0.0100); short strips 0.0182 / 0.308 (real 0.0187 /
    /// 0.292); long strips 0.112 / 2.88 (real 0.115 / 2.77). With depth 1 and the same rule
    /// the pixel end-caps give 1.30 cells per hit and r 0.0119 mm.
    ///
    /// The barrels stay at 1: the same doubling there gives 15.5 / 4.2 / 5.8 cells per hit in
    /// the pixel / short-strip / long-strip barrel (real 7.0 / ≤ 2.6 / 2.7–3.0), so the real
    /// barrel clusters were not made over twice the thickness.
    #[serde(default = "one")]
    pub depth_over_thickness: f64,
    /// The Lorentz shift the reconstruction subtracts from u, as tan θ_L times this many module
    /// thicknesses; `None` (the default, and what older configurations read) subtracts the
    /// mean drift, tan θ_L · depth/2, so hits are unbiased.
    ///
    /// TrackML's barrels used 1: `FW::DigitizationAlgorithm` subtracted
    /// `thickness · tan(lorentzAngle)` with the detector element's full thickness (acts-framework
    /// branch `FatrasAndNewDD4hepDetectors`, 1e11cf34), while the charge drifted on average
    /// over half the collection depth; with the sensor's depth (see [`SimConfig::digi_barrel`])
    /// every hit is displaced by tan θ_L · t/2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lorentz_correction: Option<f64>,
}

fn one() -> f64 {
    1.0
}

fn zero() -> f64 {
    0.0
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            pileup: 10.0,
            hard_scatter: true,
            dndeta0: 4.7,
            nbd_k: 1.5,
            eta_max: 4.0,
            eta_plateau: 2.5,
            eta_falloff: 1.5,
            tsallis_t: 0.16,
            tsallis_n: 7.0,
            hard_tsallis_t: 0.16,
            hard_tsallis_n: 4.5,
            hard_multiplicity_factor: 3.0,
            pt_min: 0.15,
            charged_fractions: [0.835, 0.095, 0.065, 0.003, 0.001],
            pi0_per_pion: 0.5,
            kshort_per_kaon: 0.5,
            lambda_per_proton: 0.3,
            beam_sigma_z: 55.0,
            beam_sigma_xy: 0.015,
            field_tesla: 2.0,
            max_turns: 0.5,
            step_mm: 20.0,
            hit_inefficiency: 0.01,
            min_cos_incidence: 0.1,
            noise_fraction: 0.15,
            // The default detector's material (`trackgnn_trackml::physics::material`).
            beam_pipe: MaterialModel::default().beam_pipe,
            support_x0: MaterialModel::default().support_x0,
            support_lambda: MaterialModel::default().support_lambda,
            nuclear_multiplicity: 2.5,
            nuclear_proton_fraction: 0.45,
            secondary_p_min: 0.05,
            photon_conversions: false,
            charged_decays: false,
            single: None,
            // TrackML's barrel digitisation (see `digi_barrel`).
            digi_barrel: [
                DigiConfig { tan_lorentz: 0.1206, binary: false, ..DigiConfig::ACTS_2018_BARREL },
                DigiConfig { tan_lorentz: -0.1206, binary: true, ..DigiConfig::ACTS_2018_BARREL },
                DigiConfig { tan_lorentz: -0.0802, binary: true, ..DigiConfig::ACTS_2018_BARREL },
            ],
            // ACTS 2018's geometric digitisation over twice `module_t` (see `digi_endcap`).
            digi_endcap: [DigiConfig::ACTS_2018_ENDCAP; 3],
        }
    }
}

impl DigiConfig {
    /// The geometric digitisation TrackML's end-caps were made with (see
    /// [`SimConfig::digi_endcap`]): no drift, diffusion, threshold or fluctuation,
    /// path-length-weighted centres, charge collected over twice the module's thickness.
    pub const ACTS_2018_ENDCAP: DigiConfig = DigiConfig {
        tan_lorentz: 0.0,
        diffusion_mm: 0.0,
        threshold: 0.0,
        fluctuation: 0.0,
        binary: false,
        depth_over_thickness: 2.0,
        lorentz_correction: None,
    };

    /// TrackML's barrel digitisation without its drift and readout (see
    /// [`SimConfig::digi_barrel`]): no diffusion or threshold, each cell's charge spread by
    /// ±17% (uniform, σ 0.1 like ACTS's Gaussian step-length smearing), charge over the sensor,
    /// Lorentz shift corrected over the full thickness.
    pub const ACTS_2018_BARREL: DigiConfig = DigiConfig {
        tan_lorentz: 0.0,
        diffusion_mm: 0.0,
        threshold: 0.0,
        fluctuation: 0.17,
        binary: false,
        depth_over_thickness: 1.0,
        lorentz_correction: Some(1.0),
    };
}

/// A setting of [`SimConfig`] that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum ConfigError {
    /// A value is outside its allowed range.
    #[error("simulation config: `{key}` = {value} is out of range ({allowed})")]
    OutOfRange {
        /// The setting.
        key: &'static str,
        /// Its value.
        value: f64,
        /// The allowed range, in words.
        allowed: &'static str,
    },
}

impl SimConfig {
    /// The detector material of these settings (`beam_pipe`, `support_x0`, `support_lambda`),
    /// as the generator samples its effects and a track fit accounts for them.
    pub fn material(&self) -> MaterialModel {
        MaterialModel { support_x0: self.support_x0, support_lambda: self.support_lambda, beam_pipe: self.beam_pipe }
    }

    /// Checks every setting that could make the generator fail or loop.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let check = |key: &'static str, value: f64, ok: bool, allowed: &'static str| {
            if ok && value.is_finite() { Ok(()) } else { Err(ConfigError::OutOfRange { key, value, allowed }) }
        };
        check("pileup", self.pileup, self.pileup >= 0.0 && self.pileup <= 10_000.0, "0 to 10000")?;
        check("noise_fraction", self.noise_fraction, (0.0..0.9).contains(&self.noise_fraction), "0 to 0.9")?;
        check("hit_inefficiency", self.hit_inefficiency, (0.0..1.0).contains(&self.hit_inefficiency), "0 to 1")?;
        let cos = self.min_cos_incidence;
        check("min_cos_incidence", cos, (0.0..1.0).contains(&cos), "0 to 1")?;
        check("dndeta0", self.dndeta0, self.dndeta0 > 0.0, "> 0")?;
        check("nbd_k", self.nbd_k, self.nbd_k > 0.0, "> 0")?;
        check("eta_max", self.eta_max, self.eta_max > 0.0 && self.eta_max <= 6.0, "0 to 6")?;
        check("tsallis_t", self.tsallis_t, self.tsallis_t > 0.0, "> 0")?;
        check("tsallis_n", self.tsallis_n, self.tsallis_n > 2.0, "> 2")?;
        check("hard_tsallis_t", self.hard_tsallis_t, self.hard_tsallis_t > 0.0, "> 0")?;
        check("hard_tsallis_n", self.hard_tsallis_n, self.hard_tsallis_n > 2.0, "> 2")?;
        check("pt_min", self.pt_min, self.pt_min > 0.0, "> 0")?;
        check("field_tesla", self.field_tesla, self.field_tesla > 0.0, "> 0")?;
        check("max_turns", self.max_turns, self.max_turns > 0.0, "> 0")?;
        check("step_mm", self.step_mm, self.step_mm >= 0.1 && self.step_mm <= 200.0, "0.1 to 200")?;
        for d in self.digi_barrel.iter().chain(&self.digi_endcap) {
            let depth = d.depth_over_thickness;
            check("depth_over_thickness", depth, depth > 0.0 && depth <= 10.0, "> 0 and at most 10")?;
            if let Some(k) = d.lorentz_correction {
                check("lorentz_correction", k, (0.0..=10.0).contains(&k), "0 to 10")?;
            }
        }
        let fsum: f64 = self.charged_fractions.iter().sum();
        check(
            "charged_fractions",
            fsum,
            fsum > 0.0 && self.charged_fractions.iter().all(|&f| f >= 0.0),
            "non-negative, not all zero",
        )?;
        if let Some(single) = &self.single {
            single.validate()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid_and_bad_values_are_named() {
        assert_eq!(SimConfig::default().validate(), Ok(()));
        let bad = SimConfig { pileup: -1.0, ..SimConfig::default() };
        let err = bad.validate().unwrap_err().to_string();
        assert!(err.contains("`pileup` = -1"), "{err}");
        let bad = SimConfig { noise_fraction: f64::NAN, ..SimConfig::default() };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn toml_round_trip_and_unknown_keys_rejected() {
        let cfg = SimConfig { pileup: 42.0, ..SimConfig::default() };
        let text = toml::to_string(&cfg).unwrap();
        let back: SimConfig = toml::from_str(&text).unwrap();
        assert_eq!(back, cfg);
        let partial: SimConfig = toml::from_str("pileup = 3.0").unwrap();
        assert_eq!(partial.pileup, 3.0);
        assert!(toml::from_str::<SimConfig>("pilup = 3.0").is_err());
    }

    #[test]
    fn digitisation_written_before_the_depth_key_reads_the_sensor_depth() {
        let old = "tan_lorentz = 0.0\ndiffusion_mm = 0.01\nthreshold = 0.1\nfluctuation = 0.1\nbinary = false";
        let d: DigiConfig = toml::from_str(old).unwrap();
        assert_eq!(d.depth_over_thickness, 1.0);
        let cfg = SimConfig::default();
        assert!(cfg.digi_endcap.iter().all(|d| d.depth_over_thickness == 2.0 && d.threshold == 0.0));
        assert!(cfg.digi_barrel.iter().all(|d| d.depth_over_thickness == 1.0 && d.lorentz_correction == Some(1.0)));
        assert!(cfg.digi_endcap.iter().all(|d| d.lorentz_correction.is_none()));
        assert_eq!(d.lorentz_correction, None);
        // A configuration written before the grazing-incidence cut reproduces its events.
        let old_sim: SimConfig = toml::from_str("pileup = 3.0\nhit_inefficiency = 0.01").unwrap();
        assert_eq!(old_sim.min_cos_incidence, 0.0);
        assert_eq!(SimConfig::default().min_cos_incidence, 0.1);
        let text = toml::to_string(&SimConfig::default()).unwrap();
        assert_eq!(toml::from_str::<SimConfig>(&text).unwrap(), SimConfig::default());
        let mut bad = cfg;
        bad.digi_endcap[1].depth_over_thickness = 0.0;
        assert!(bad.validate().unwrap_err().to_string().contains("depth_over_thickness"));
    }
}
