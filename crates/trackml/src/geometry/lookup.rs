//! A fast module lookup per layer: a (phi × z) grid for barrel layers, (phi × r) for disks.
//!
//! Each module is entered into every bin its footprint (grown by a margin) touches, so a query
//! at a point returns, from one bin, every module the point may lie on. The grid is stored as
//! compressed rows (offsets + indices): no allocation per query.

use std::f64::consts::{PI, TAU};

/// A binned index of the modules of one layer.
#[derive(Clone, Debug, Default)]
pub struct LayerGrid {
    n_phi: usize,
    n_x: usize,
    x_min: f64,
    x_max: f64,
    offsets: Vec<u32>,
    items: Vec<u32>,
}

/// The footprint of one module in (phi, x) where x is z (barrel) or r (disk).
#[derive(Clone, Copy, Debug)]
pub struct Footprint {
    /// Module index in the detector.
    pub module: u32,
    /// Centre phi \[rad\].
    pub phi_center: f64,
    /// Half-extent in phi \[rad\], margin included.
    pub phi_half: f64,
    /// Lower edge in x \[mm\], margin included.
    pub x_lo: f64,
    /// Upper edge in x \[mm\], margin included.
    pub x_hi: f64,
}

impl LayerGrid {
    /// Builds a grid of `n_phi × n_x` bins over x ∈ [x_min, x_max] from module footprints.
    pub fn build(n_phi: usize, n_x: usize, x_min: f64, x_max: f64, footprints: &[Footprint]) -> Self {
        let n_phi = n_phi.max(1);
        let n_x = n_x.max(1);
        let mut bins: Vec<Vec<u32>> = vec![Vec::new(); n_phi * n_x];
        let mut grid = LayerGrid { n_phi, n_x, x_min, x_max, offsets: Vec::new(), items: Vec::new() };
        for f in footprints {
            let (x0, x1) = (grid.x_bin(f.x_lo), grid.x_bin(f.x_hi));
            let half = f.phi_half.min(PI);
            let lo = f.phi_center - half;
            let width = 2.0 * half;
            let span = ((width / TAU) * n_phi as f64).ceil() as usize + 1;
            let first = grid.phi_bin(lo);
            for k in 0..span.min(n_phi) {
                let p = (first + k) % n_phi;
                for x in x0..=x1 {
                    bins[p * n_x + x].push(f.module);
                }
            }
        }
        grid.offsets.push(0);
        for b in &mut bins {
            b.sort_unstable();
            b.dedup();
            grid.items.extend_from_slice(b);
            grid.offsets.push(grid.items.len() as u32);
        }
        grid
    }

    #[inline]
    fn phi_bin(&self, phi: f64) -> usize {
        let t = (phi + PI).rem_euclid(TAU) / TAU;
        ((t * self.n_phi as f64) as usize).min(self.n_phi - 1)
    }

    #[inline]
    fn x_bin(&self, x: f64) -> usize {
        let t = (x - self.x_min) / (self.x_max - self.x_min).max(1e-9);
        ((t * self.n_x as f64).floor().max(0.0) as usize).min(self.n_x - 1)
    }

    /// Modules whose footprint contains (phi, x), plus neighbours within the build margin.
    #[inline]
    pub fn query(&self, phi: f64, x: f64) -> &[u32] {
        let b = self.phi_bin(phi) * self.n_x + self.x_bin(x);
        &self.items[self.offsets[b] as usize..self.offsets[b + 1] as usize]
    }

    /// The largest number of modules in one bin (for diagnostics).
    pub fn max_occupancy(&self) -> usize {
        self.offsets.windows(2).map(|w| (w[1] - w[0]) as usize).max().unwrap_or(0)
    }
}
