//! Training of edge classifiers (work in progress).
#![deny(missing_docs)]
