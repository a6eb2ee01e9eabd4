//! The single-process communicator: one rank, nothing to exchange.

use super::Comm;

/// One process, one rank.
#[derive(Clone, Copy, Debug, Default)]
pub struct SingleProcess;

impl Comm for SingleProcess {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn allreduce_mean(&mut self, _buf: &mut [f32]) -> crate::Result<()> {
        Ok(())
    }
    fn allreduce_sum_f64(&mut self, _buf: &mut [f64]) -> crate::Result<()> {
        Ok(())
    }
    fn broadcast(&mut self, _buf: &mut [f32], _root: usize) -> crate::Result<()> {
        Ok(())
    }
    fn barrier(&mut self) -> crate::Result<()> {
        Ok(())
    }
    fn allgather_f64(&mut self, values: &[f64]) -> crate::Result<Vec<f64>> {
        Ok(values.to_vec())
    }
}
