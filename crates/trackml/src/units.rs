//! Native units, converted once.
//!
//! trackgnn computes in millimetres (mm), GeV, elementary charges (e) and radians. The
//! magnetic field is stored in GeV/(e·mm), so the transverse radius of a helix is simply
//! `r = pt / (|q| · b)` with no factor. Tesla appears only at the edges (config files and
//! printed reports); [`TESLA`] is the one place its conversion factor lives.

/// One millimetre, the unit of length.
pub const MM: f64 = 1.0;
/// One metre in mm.
pub const M: f64 = 1000.0;
/// One GeV, the unit of energy and momentum.
pub const GEV: f64 = 1.0;
/// One MeV in GeV.
pub const MEV: f64 = 1.0e-3;
/// One tesla in GeV/(e·mm): c · 1 T = 0.299792458 GeV/(e·m).
pub const TESLA: f64 = 0.299_792_458e-3;

/// Converts a field in tesla to the native GeV/(e·mm).
pub fn tesla_to_native(b_tesla: f64) -> f64 {
    b_tesla * TESLA
}

/// Converts a field in the native GeV/(e·mm) to tesla.
pub fn native_to_tesla(b: f64) -> f64 {
    b / TESLA
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_gev_in_two_tesla_curls_with_1_668_m() {
        // R[m] = pT[GeV] / (0.29979 · B[T]) = 1 / 0.59958 = 1.6678 m
        let r = 1.0 / tesla_to_native(2.0);
        assert!((r - 1667.8).abs() < 0.1, "{r}");
        assert!((native_to_tesla(tesla_to_native(1.75)) - 1.75).abs() < 1e-12);
    }
}
