//! Monte Carlo generator (in progress).
