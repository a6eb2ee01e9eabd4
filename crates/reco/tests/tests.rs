//! Integration tests of trackgnn-reco, built as one binary.

mod inference;
mod pipeline;
