//! Plugging the backend into the engine's seam: after [`register`], `executor_on(cuda:N, …)`
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
    ordinal: usize,
    model: InteractionGnn<f32>,
    optimizer: AdamWConfig,
) -> Result<Box<dyn GnnExecutor>, DeviceError> {
    let device = Device::Cuda(ordinal);
    let dev = gpu(ordinal).map_err(|e| DeviceError::Failed { device, message: e.to_string() })?;
    Ok(Box::new(DeviceExecutor::new(dev, device, model, optimizer)?))
}

fn on_emulator(
    ordinal: usize,
    model: InteractionGnn<f32>,
    optimizer: AdamWConfig,
) -> Result<Box<dyn GnnExecutor>, DeviceError> {
    let dev: Arc<dyn Backend> = Arc::new(Emulator::new());
    Ok(Box::new(DeviceExecutor::new(dev, Device::Cuda(ordinal), model, optimizer)?))
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
