//! Activation checkpointing: what the forward keeps, and the backward that recomputes the rest.
//!
//! Without checkpointing the forward keeps every layer's normalised activations for every edge
//! (about 3 × E × H numbers per message-passing iteration). With [`Checkpointing::PerIteration`]
//! it keeps only the node and edge states h_k, e_k at iteration boundaries; with
//! [`Checkpointing::Every`]`(K)` only every K-th. The backward then walks the iterations back,
//! recomputing a segment's states from its boundary and each edge MLP's activations tile by tile
//! inside its own backward ([`crate::mlp::Acts::Recompute`]), so one iteration's activations never
//! exist for all edges at once. The recomputed forward runs the same tile code on the same
//! tiles, so gradients are bit-identical to the uncheckpointed ones.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Which activations the forward keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Checkpointing {
    /// Keep everything (fastest, most memory).
    #[default]
    None,
    /// Keep node and edge states at every iteration boundary.
    PerIteration,
    /// Keep the states every K iterations (K ≥ 1; `every:1` is per-iteration).
    Every(usize),
}

impl Checkpointing {
    /// The segment length K (0 without checkpointing).
    pub fn segment(self) -> usize {
        match self {
            Checkpointing::None => 0,
            Checkpointing::PerIteration => 1,
            Checkpointing::Every(k) => k.max(1),
        }
    }
}

impl fmt::Display for Checkpointing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Checkpointing::None => write!(f, "none"),
            Checkpointing::PerIteration => write!(f, "per-iteration"),
            Checkpointing::Every(k) => write!(f, "every:{k}"),
        }
    }
}

impl FromStr for Checkpointing {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(Checkpointing::None),
            "per-iteration" => Ok(Checkpointing::PerIteration),
            _ => match s.strip_prefix("every:").map(str::parse::<usize>) {
                Some(Ok(k)) if k >= 1 => Ok(Checkpointing::Every(k)),
                _ => Err(format!("checkpointing `{s}`: expected none, per-iteration or every:K with K ≥ 1")),
            },
        }
    }
}

impl TryFrom<String> for Checkpointing {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<Checkpointing> for String {
    fn from(c: Checkpointing) -> String {
        c.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        for s in ["none", "per-iteration", "every:3"] {
            assert_eq!(s.parse::<Checkpointing>().unwrap().to_string(), s);
        }
        assert!("every:0".parse::<Checkpointing>().is_err());
        assert!("sometimes".parse::<Checkpointing>().is_err());
        assert_eq!(Checkpointing::Every(2).segment(), 2);
    }
}
