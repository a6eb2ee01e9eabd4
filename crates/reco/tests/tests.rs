//! Integration tests of trackgnn-reco, built as one binary.

mod ckf;
mod inference;
mod pipeline;
