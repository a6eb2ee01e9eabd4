//! Settings given on top of a generator configuration (a command line's flags): one place
//! where each flag meets the [`SimConfig`] key it replaces.

use std::path::{Path, PathBuf};

use crate::config::{ConfigError, SimConfig};
use crate::single::SingleParticles;

/// Settings that replace a [`SimConfig`]'s: each `Some` wins over the configuration's value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SimOverrides {
    /// [`SimConfig::pileup`].
    pub pileup: Option<f64>,
    /// [`SimConfig::single`]: the single-particle mode.
    pub single: Option<SingleParticles>,
}

/// Why a generator configuration could not be resolved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// The configuration file does not read.
    #[error("reading {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The reason.
        source: std::io::Error,
    },
    /// The configuration file is not a `SimConfig` in TOML.
    #[error("{}: invalid simulation config", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The reason.
        source: toml::de::Error,
    },
    /// A setting (of the file or of the overrides) is out of range.
    #[error(transparent)]
    Invalid(#[from] ConfigError),
}

impl SimOverrides {
    /// The generator configuration: the TOML file `file` if given (else the defaults), then
    /// these settings ([`apply`](Self::apply)).
    ///
    /// # Errors
    /// A file that does not read or is not a `SimConfig`, and the errors of [`apply`](Self::apply).
    pub fn resolve(&self, file: Option<&Path>) -> Result<SimConfig, ResolveError> {
        let config = match file {
            Some(p) => {
                let text =
                    std::fs::read_to_string(p).map_err(|source| ResolveError::Read { path: p.into(), source })?;
                toml::from_str(&text).map_err(|source| ResolveError::Parse { path: p.into(), source })?
            }
            None => SimConfig::default(),
        };
        Ok(self.apply(config)?)
    }

    /// `config` with every given setting replaced, validated.
    ///
    /// # Errors
    /// A setting out of range ([`SimConfig::validate`]).
    pub fn apply(&self, mut config: SimConfig) -> Result<SimConfig, ConfigError> {
        if let Some(mu) = self.pileup {
            config.pileup = mu;
        }
        if let Some(single) = self.single {
            config.single = Some(single);
        }
        config.validate()?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_over_the_file_and_the_file_over_the_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sim.toml");
        std::fs::write(&file, "pileup = 3.0\nnoise_fraction = 0.2\n").unwrap();
        let from_file = SimOverrides::default().resolve(Some(&file)).unwrap();
        assert_eq!((from_file.pileup, from_file.noise_fraction), (3.0, 0.2));
        let flagged = SimOverrides { pileup: Some(40.0), ..Default::default() }.resolve(Some(&file)).unwrap();
        assert_eq!((flagged.pileup, flagged.noise_fraction), (40.0, 0.2), "the flag wins, the rest stays");
        let no_file = SimOverrides { pileup: Some(40.0), ..Default::default() }.resolve(None).unwrap();
        assert_eq!(no_file, SimConfig { pileup: 40.0, ..SimConfig::default() });
        assert_eq!(SimOverrides::default().resolve(None).unwrap(), SimConfig::default());
    }

    #[test]
    fn bad_files_and_values_are_errors_naming_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nowhere.toml");
        let e = SimOverrides::default().resolve(Some(&missing)).unwrap_err();
        assert!(matches!(e, ResolveError::Read { .. }), "{e:?}");
        assert_eq!(e.to_string(), format!("reading {}", missing.display()));

        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, "pilup = 3.0\n").unwrap();
        let e = SimOverrides::default().resolve(Some(&bad)).unwrap_err();
        assert_eq!(e.to_string(), format!("{}: invalid simulation config", bad.display()));
        assert!(std::error::Error::source(&e).unwrap().to_string().contains("pilup"), "the reason names the key");

        let e = SimOverrides { pileup: Some(-1.0), ..Default::default() }.resolve(None).unwrap_err();
        assert!(matches!(e, ResolveError::Invalid(ConfigError::OutOfRange { key: "pileup", .. })), "{e:?}");
        let out_of_range = dir.path().join("range.toml");
        std::fs::write(&out_of_range, "pileup = -1.0\n").unwrap();
        assert!(SimOverrides::default().resolve(Some(&out_of_range)).is_err(), "the file's values are checked");
        assert!(
            SimOverrides { pileup: Some(5.0), ..Default::default() }.resolve(Some(&out_of_range)).is_ok(),
            "unless a flag replaces them"
        );
    }

    #[test]
    fn the_single_particle_mode_is_set_and_checked() {
        use crate::single::ChargedSpecies;
        let single = SingleParticles::new(ChargedSpecies::Muon, 3, [1.0, 2.0], [0.0, 1.0]);
        let cfg = SimOverrides { single: Some(single), ..Default::default() }.resolve(None).unwrap();
        assert_eq!(cfg.single, Some(single));
        let bad = SingleParticles { count: 0, ..single };
        let err = SimOverrides { single: Some(bad), ..Default::default() }.resolve(None).unwrap_err().to_string();
        assert!(err.contains("single.count"), "{err}");
    }
}
