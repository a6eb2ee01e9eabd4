//! Detector geometry: planar modules, layers with a fast lookup, and the procedural TrackML
//! layout. Real geometries are read from `detectors.csv` by [`crate::csv`].

mod detector;
mod lookup;
mod module;
pub mod summary;
mod trackml_layout;

pub use detector::{Detector, Layer, LayerKind};
pub use lookup::LayerGrid;
pub use module::{Module, Technology};
pub use trackml_layout::trackml_modules;
