//! Track propagation: the helix arithmetic of track building and track fitting, in one place.
//!
//! - [`circle`]: the circle through three transverse points (its signed curvature and the
//!   error the points' positions give it, its centre) and least-squares fits of a circle in
//!   x–y and of a line in z against the transverse path length. Track following's windows
//!   and the candidate-quality features use them.
//! - [`helix`]: a helix through a path's last hits (a circle in x–y and a constant dz/ds)
//!   stepped along its path length and intersected with cylinders and planes, as the hit
//!   search predicts where a track crosses the next layers.
//! - [`stepper`]: a particle's free state (position, direction, q/p) stepped through the
//!   solenoid's field, B_z(z): the exact helix where the field is uniform, a Runge–Kutta step
//!   where it varies, each with its transport Jacobian.
//! - [`target`]: propagation of a free state to a module's plane, a cylinder or the beam
//!   line, with the Jacobian of the whole path (the Kalman filter's propagation).
//!
//! Coordinates are global Cartesian millimetres, as the detector's; z is along the beam (and
//! the solenoid's field).

pub mod circle;
pub mod helix;
pub mod stepper;
pub mod target;
