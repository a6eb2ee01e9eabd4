//! Activation checkpointing: what the forward keeps, and the backward that recomputes the rest.
//!
//! Without checkpointing the forward keeps every layer's normalised activations for every edge
//! (about 3 × E × H numbers per message-passing iteration). With [`Checkpointing::PER_ITERATION`]
//! it keeps only the node and edge states h_k, e_k at iteration boundaries; with
//! [`Checkpointing::every`]`(K)` only every K-th. The backward then walks the iterations back,
//! recomputing a segment's states from its boundary and each edge MLP's activations tile by tile
//! inside its own backward ([`crate::mlp::Acts::Recompute`]), so one iteration's activations never
//! exist for all edges at once. The recomputed forward runs the same tile code on the same
//! tiles, so gradients are bit-identical to the uncheckpointed ones. With `+bf16` the saved states
//! take half the bytes; gradients then differ from the f32 ones by the rounding of the states.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Which activations the forward keeps, and in which precision.
///
/// Written `none`, `per-iteration` or `every:K`, with `+bf16` appended to keep the saved states
/// in bfloat16 (half the bytes). The forward then rounds each saved state in place and goes on
/// from the rounded value, so the backward recomputes from exactly what the forward used; the
/// rounding itself passes gradients through unchanged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Checkpointing {
    segment: usize,
    bf16: bool,
}

impl Checkpointing {
    /// Keep everything (fastest, most memory).
    pub const NONE: Checkpointing = Checkpointing { segment: 0, bf16: false };
    /// Keep node and edge states at every iteration boundary.
    pub const PER_ITERATION: Checkpointing = Checkpointing { segment: 1, bf16: false };

    /// Keep the states every K iterations (`every(1)` is per-iteration; K = 0 is taken as 1).
    pub fn every(k: usize) -> Checkpointing {
        Checkpointing { segment: k.max(1), bf16: false }
    }

    /// The same segments with the saved states in bf16 (no effect without checkpointing).
    pub fn with_bf16_states(self) -> Checkpointing {
        Checkpointing { bf16: self.segment > 0, ..self }
    }

    /// The segment length K (0 without checkpointing).
    pub fn segment(self) -> usize {
        self.segment
    }

    /// Whether any activations are recomputed.
    pub fn is_on(self) -> bool {
        self.segment > 0
    }

    /// Whether the saved states are kept in bf16.
    pub fn bf16_states(self) -> bool {
        self.bf16
    }
}

impl fmt::Display for Checkpointing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.segment {
            0 => write!(f, "none")?,
            1 => write!(f, "per-iteration")?,
            k => write!(f, "every:{k}")?,
        }
        if self.bf16 {
            write!(f, "+bf16")?;
        }
        Ok(())
    }
}

impl FromStr for Checkpointing {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let err =
            || format!("checkpointing `{s}`: expected none, per-iteration or every:K with K ≥ 1, optionally +bf16");
        let (base, bf16) = match s.strip_suffix("+bf16") {
            Some(b) => (b, true),
            None => (s, false),
        };
        let segment = match base {
            "none" if !bf16 => 0,
            "per-iteration" => 1,
            _ => match base.strip_prefix("every:").map(str::parse::<usize>) {
                Some(Ok(k)) if k >= 1 => k,
                _ => return Err(err()),
            },
        };
        Ok(Checkpointing { segment, bf16 })
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
        for s in ["none", "per-iteration", "every:3", "per-iteration+bf16", "every:2+bf16"] {
            assert_eq!(s.parse::<Checkpointing>().unwrap().to_string(), s);
        }
        for bad in ["every:0", "sometimes", "none+bf16", "bf16", "per-iteration+f16"] {
            assert!(bad.parse::<Checkpointing>().is_err(), "{bad}");
        }
        assert_eq!("every:1".parse::<Checkpointing>().unwrap(), Checkpointing::PER_ITERATION);
        assert_eq!(Checkpointing::every(2).segment(), 2);
        assert!("every:2+bf16".parse::<Checkpointing>().unwrap().bf16_states());
        assert!(!Checkpointing::NONE.with_bf16_states().bf16_states());
    }
}
