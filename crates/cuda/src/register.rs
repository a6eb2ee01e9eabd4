//! Plugging the backend into the engine's seam: after `register` (feature `cuda`), `executor_on(cuda:N, …)`
//! (and so `train --device cuda:N`, `eval`, `reconstruct`) runs on GPU N.

use std::sync::Arc;

use trackgnn_engine::optim::AdamWConfig;
use trackgnn_engine::{Device, DeviceError, GnnExecutor, InteractionGnn, register_cuda_backend};

use crate::backend::Backend;
use crate::emu::Emulator;
use crate::executor::DeviceExecutor;

/// Makes `cuda:N` run on the real GPU N (feature `cuda`).
#[cfg(feature = "cuda")]
pub fn register() {
    register_cuda_backend(on_gpu);
}

/// Makes `cuda:N` run on the kernel emulator instead of a GPU: the whole device path on a
/// machine without one (tests; a GPU-less check of a run's configuration). Slow: small graphs.
pub fn register_emulator() {
    register_cuda_backend(on_emulator);
}

#[cfg(feature = "cuda")]
fn on_gpu(
    device: Device,
    model: InteractionGnn<f32>,
    optimizer: AdamWConfig,
) -> Result<Box<dyn GnnExecutor>, DeviceError> {
    let (device, dev) = open(device)?;
    Ok(Box::new(DeviceExecutor::new(dev, device, model, optimizer)?))
}

/// The GPU `device` names (`cuda` resolved to this process's), opened.
#[cfg(feature = "cuda")]
pub fn open(device: Device) -> Result<(Device, Arc<dyn Backend>), DeviceError> {
    let failed = |e: crate::BackendError| DeviceError::Failed { device, message: e.to_string() };
    let ordinal = match device {
        Device::Cuda(i) => i,
        Device::CudaLocal => {
            local_ordinal(local_rank(|k| std::env::var(k).ok()), crate::cuda::device_count().map_err(failed)?)
        }
        Device::Cpu => return Err(DeviceError::Failed { device, message: "not a GPU".into() }),
    };
    Ok((Device::Cuda(ordinal), gpu(ordinal).map_err(failed)?))
}

fn on_emulator(
    device: Device,
    model: InteractionGnn<f32>,
    optimizer: AdamWConfig,
) -> Result<Box<dyn GnnExecutor>, DeviceError> {
    let dev: Arc<dyn Backend> = Arc::new(Emulator::new());
    // The emulator is one device: every rank's `cuda` is its GPU 0.
    let device = if device == Device::CudaLocal { Device::Cuda(0) } else { device };
    Ok(Box::new(DeviceExecutor::new(dev, device, model, optimizer)?))
}

/// This process's rank among the ranks on its node, from the variables the MPI launchers and
/// Slurm set (OpenMPI, MPICH and Intel MPI, MVAPICH, Slurm), `env` reading one; 0 outside MPI.
pub fn local_rank(env: impl Fn(&str) -> Option<String>) -> usize {
    const VARS: [&str; 5] = [
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "MPI_LOCALRANKID",
        "MV2_COMM_WORLD_LOCAL_RANK",
        "PMI_LOCAL_RANK",
        "SLURM_LOCALID",
    ];
    VARS.iter().find_map(|v| env(v).and_then(|s| s.trim().parse().ok())).unwrap_or(0)
}

/// The GPU of local rank `rank` on a node of `gpus` GPUs: ranks beyond the GPUs share them in
/// turn.
pub fn local_ordinal(rank: usize, gpus: usize) -> usize {
    rank % gpus.max(1)
}

/// GPU `ordinal`, opened once per process (its context, kernels and cuBLAS handle shared by
/// every model on it).
#[cfg(feature = "cuda")]
pub fn gpu(ordinal: usize) -> Result<Arc<dyn Backend>, crate::BackendError> {
    use std::collections::HashMap;
    use std::sync::Mutex;
    static OPEN: Mutex<Option<HashMap<usize, Arc<crate::CudaBackend>>>> = Mutex::new(None);
    let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
    let map = open.get_or_insert_with(HashMap::new);
    if let Some(b) = map.get(&ordinal) {
        return Ok(b.clone());
    }
    let b = Arc::new(crate::CudaBackend::new(ordinal)?);
    map.insert(ordinal, b.clone());
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rank_takes_the_gpu_of_its_local_rank_and_shares_beyond_the_gpus() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        assert_eq!(local_rank(env(&[])), 0);
        assert_eq!(local_rank(env(&[("OMPI_COMM_WORLD_LOCAL_RANK", "3")])), 3);
        assert_eq!(local_rank(env(&[("SLURM_LOCALID", "2"), ("MPI_LOCALRANKID", "1")])), 1);
        assert_eq!(local_rank(env(&[("PMI_LOCAL_RANK", "x")])), 0);
        assert_eq!((0..6).map(|r| local_ordinal(r, 4)).collect::<Vec<_>>(), [0, 1, 2, 3, 0, 1]);
        assert_eq!(local_ordinal(5, 1), 0);
        assert_eq!(local_ordinal(5, 0), 0);
    }

    #[test]
    fn cuda_n_runs_on_the_emulator_once_registered() {
        register_emulator();
        let cfg = trackgnn_engine::ModelConfig { hidden: 8, iterations: 1, ..Default::default() };
        let model = InteractionGnn::<f32>::new(cfg, 3, 0, &mut trackgnn_trackml::rng::Rng::new(1));
        let ex = trackgnn_engine::executor_on(Device::Cuda(2), model.clone(), AdamWConfig::default()).unwrap();
        assert_eq!(ex.device(), Device::Cuda(2));
        let ex = trackgnn_engine::executor_on(Device::CudaLocal, model, AdamWConfig::default()).unwrap();
        assert_eq!(ex.device(), Device::Cuda(0));
    }
}
