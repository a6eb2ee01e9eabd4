//! Track building and track metrics (work in progress).
#![deny(missing_docs)]
