//! TrackML CSV files (to be written).
