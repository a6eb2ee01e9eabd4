//! Track propagation: the helix arithmetic of track building and track fitting, in one place.
//!
//! - [`circle`]: the circle through three transverse points (its signed curvature and the
//!   error the points' positions give it, its centre) and least-squares fits of a circle in
//!   x–y and of a line in z against the transverse path length. Track following's windows
//!   and the candidate-quality features use them.
//! - [`helix`]: a helix through a path's last hits (a circle in x–y and a constant dz/ds)
//!   stepped along its path length and intersected with cylinders and planes, as the hit
//!   search predicts where a track crosses the next layers.
//!
//! Coordinates are global Cartesian millimetres, as the detector's; z is along the beam (and
//! the solenoid's field).

pub mod circle;
pub mod helix;
