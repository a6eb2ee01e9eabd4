//! The device seam: what the trainer, evaluation and inference ask of a model, whatever runs it.
//!
//! A model is defined by its [`ModelConfig`], its input widths and its parameters in one flat
//! buffer ([`ParamStore`], laid out by [`InteractionGnn::new`]); none of that depends on where
//! it runs. A [`GnnExecutor`] runs such a model on one [`Device`]: forward, backward, the AdamW
//! step and inference, with the parameters and gradients readable in host memory (for the
//! data-parallel all-reduce, clipping, checkpoints and weight files). [`CpuExecutor`] is the CPU
//! engine behind it; [`executor_on`] picks the implementation for a device, so a GPU backend
//! plugs in here without the trainer or the reconstruction changing.

use std::fmt;
use std::str::FromStr;
use std::sync::{Mutex, OnceLock};

use serde::{Deserialize, Serialize};

use crate::graph_loss::{EdgeTargets, GraphFigures, GraphLoss};
use crate::optim::{AdamW, AdamWConfig, AdamWState};
use crate::{ForwardCache, GraphInput, InteractionGnn, ModelConfig, ParamStore, Precision};

/// Where a model runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Device {
    /// The CPU engine: every core rayon is given.
    #[default]
    Cpu,
    /// An NVIDIA GPU, by its CUDA ordinal (`cuda:N`).
    Cuda(usize),
    /// This process's NVIDIA GPU (`cuda`): under MPI the GPU of its local rank (the local rank
    /// modulo the node's GPUs, so that ranks share GPUs where there are more ranks than GPUs),
    /// else GPU 0.
    CudaLocal,
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
            Device::CudaLocal => f.write_str("cuda"),
        }
    }
}

impl FromStr for Device {
    type Err = DeviceError;

    /// `cpu`, `cuda` (the local rank's GPU) or `cuda:N`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || DeviceError::Unknown(s.to_owned());
        match s {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::CudaLocal),
            _ => {
                let ordinal = s.strip_prefix("cuda:").ok_or_else(bad)?;
                ordinal.parse().map(Device::Cuda).map_err(|_| bad())
            }
        }
    }
}

impl TryFrom<String> for Device {
    type Error = DeviceError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Device> for String {
    fn from(d: Device) -> String {
        d.to_string()
    }
}

/// Why a model cannot run on a device.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    /// A device name that is not `cpu`, `cuda` or `cuda:N`.
    #[error("unknown device `{0}`: expected `cpu`, `cuda` or `cuda:N`")]
    Unknown(String),
    /// This binary has no backend for the device.
    #[error(
        "{device}: this build of trackgnn has no backend for it (only the CPU engine); use `cpu`, or build with the `cuda` feature"
    )]
    NotBuilt {
        /// The device asked for.
        device: Device,
    },
    /// The device's backend failed: a missing library, an unsupported GPU, out of memory.
    #[error("{device}: {message}")]
    Failed {
        /// The device.
        device: Device,
        /// What failed, as the backend says it.
        message: String,
    },
}

/// Runs one InteractionGNN on one device: the forward and backward of a training step, the
/// AdamW step, and inference. Parameters and gradients are exchanged with the host through
/// [`params`](Self::params) and [`params_mut`](Self::params_mut), in the layout of the model's
/// [`ParamStore`] whatever the device keeps; a device backend copies them across as needed.
///
/// A training step is: [`zero_grad`](Self::zero_grad), then for each graph
/// [`loss_backward`](Self::loss_backward) (or [`forward`](Self::forward) and
/// [`backward`](Self::backward) with a loss's gradient of the logits computed elsewhere), then
/// (the all-reduce and clipping through `params_mut().grad`)
/// [`optimizer_step`](Self::optimizer_step).
pub trait GnnExecutor: Send + Sync {
    /// The device it runs on.
    fn device(&self) -> Device;

    /// The model's configuration.
    fn config(&self) -> &ModelConfig;

    /// The node and edge feature widths the model takes.
    fn input_widths(&self) -> (usize, usize);

    /// The model with its current parameters and precision, in host memory (for export, a
    /// reference computation, or moving it to another device).
    fn host_model(&self) -> InteractionGnn<f32>;

    /// Sets the arithmetic of the matrix products from the next call on (see
    /// [`InteractionGnn::set_precision`]).
    fn set_precision(&mut self, precision: Precision);

    /// The parameters and the gradients accumulated since the last
    /// [`zero_grad`](Self::zero_grad), in host memory.
    fn params(&self) -> &ParamStore<f32>;

    /// The parameters and gradients in host memory, for changes (loading weights, the
    /// all-reduce of the gradients, clipping): what the next device call uses.
    fn params_mut(&mut self) -> &mut ParamStore<f32>;

    /// The logits of `graph`'s edges, keeping what [`backward`](Self::backward) needs.
    ///
    /// # Panics
    /// If the graph's feature widths differ from the model's.
    fn forward(&mut self, graph: &GraphInput<f32>) -> Result<&[f32], DeviceError>;

    /// Adds the gradients of the parameters, given the gradient of the loss with respect to the
    /// logits of the last [`forward`](Self::forward), which must have been on `graph`.
    fn backward(&mut self, graph: &GraphInput<f32>, dlogits: &[f32]) -> Result<(), DeviceError>;

    /// The auxiliary pT head's predictions of log10 pT of the last
    /// [`forward`](Self::forward), one per edge (empty for a model without the head).
    fn aux(&self) -> &[f32];

    /// [`backward`](Self::backward) with the gradient of the loss with respect to the
    /// auxiliary head's predictions too (see [`InteractionGnn::backward_aux`]).
    fn backward_aux(&mut self, graph: &GraphInput<f32>, dlogits: &[f32], daux: &[f32]) -> Result<(), DeviceError>;

    /// The forward, the loss and the backward of one graph of a training step: adds `scale` ×
    /// the BCE's gradients (and `aux_scale` × the auxiliary MSE's, where `targets` has its
    /// targets) to the parameters' gradients and returns both losses. The default computes the
    /// loss on the host from [`forward`](Self::forward)'s logits
    /// ([`host_loss_backward`](crate::graph_loss::host_loss_backward)); a GPU keeps it on the
    /// device.
    fn loss_backward(
        &mut self,
        graph: &GraphInput<f32>,
        targets: &EdgeTargets<'_>,
        scale: f32,
        aux_scale: f32,
    ) -> Result<GraphLoss, DeviceError> {
        crate::graph_loss::host_loss_backward(self, graph, targets, scale, aux_scale)
    }

    /// One graph's validation figures from inference: the losses, the edge counts at the score
    /// `threshold` (`y`: 1 for true edges of any particle) and the AUC, with the logits where
    /// `keep_logits`. The default computes them on the host
    /// ([`host_validate_graph`](crate::graph_loss::host_validate_graph)); a GPU keeps the
    /// logits on the device.
    fn validate_graph(
        &self,
        graph: &GraphInput<f32>,
        targets: &EdgeTargets<'_>,
        y: &[u8],
        threshold: f64,
        keep_logits: bool,
    ) -> Result<GraphFigures, DeviceError> {
        crate::graph_loss::host_validate_graph(self, graph, targets, y, threshold, keep_logits)
    }

    /// Sets the gradients to zero.
    fn zero_grad(&mut self);

    /// One AdamW update of the parameters from the gradients, at learning rate `lr`.
    fn optimizer_step(&mut self, lr: f64) -> Result<(), DeviceError>;

    /// The optimiser's state, for a checkpoint (a GPU's moments are read back from it).
    fn optimizer_state(&self) -> Result<AdamWState, DeviceError>;

    /// Restores the optimiser from a checkpoint's state.
    fn restore_optimizer(&mut self, state: AdamWState);

    /// The logits of `graph`'s edges with the least memory, nothing kept for a backward.
    /// Callers on several threads each get buffers of their own.
    fn infer(&self, graph: &GraphInput<f32>) -> Result<Vec<f32>, DeviceError>;

    /// [`infer`](Self::infer) with the auxiliary head's predictions (empty without the head):
    /// (logits, predicted log10 pT).
    fn infer_aux(&self, graph: &GraphInput<f32>) -> Result<(Vec<f32>, Vec<f32>), DeviceError>;

    /// Bytes of the buffers a training step holds now (activations, gradient workspace).
    fn buffer_bytes(&self) -> usize;

    /// A prediction, before running it, of the bytes a training step on a graph of `nodes` and
    /// `edges` holds on the device, parameters and gradients included.
    fn estimate_step_bytes(&self, nodes: usize, edges: usize) -> usize;

    /// Frees the buffers a training step keeps between calls (they are allocated again by the
    /// next forward).
    fn release_buffers(&mut self);

    /// The most bytes the device's allocator held at once since the last call (or since the
    /// executor was made), then starts a new count; `None` where the device has no allocator of
    /// its own (the CPU: its buffers are the process heap's, counted by [`crate::alloc`]).
    fn take_peak_bytes(&mut self) -> Option<usize> {
        None
    }
}

/// A GPU backend's constructor: `model` on `device` (a `cuda` one) with an AdamW of these
/// settings.
pub type GpuExecutorFactory =
    fn(device: Device, model: InteractionGnn<f32>, optimizer: AdamWConfig) -> Result<Box<dyn GnnExecutor>, DeviceError>;

/// The CUDA backend, once a crate that provides it registered it ([`register_cuda_backend`]).
static CUDA_BACKEND: OnceLock<GpuExecutorFactory> = OnceLock::new();

/// Makes `cuda:N` devices available to [`executor_on`]: called once by the program that links
/// the CUDA backend (`trackgnn_cuda::register`), since the engine cannot depend on it. The first
/// registration stays for the life of the process: a later one (a test registering the kernel
/// emulator after the real GPU, say) is ignored.
pub fn register_cuda_backend(factory: GpuExecutorFactory) {
    let _ = CUDA_BACKEND.set(factory);
}

/// `model` (its configuration, parameters, precision and checkpointing mode) on `device`, with
/// an AdamW optimiser of `optimizer`'s settings and zero moments.
pub fn executor_on(
    device: Device,
    model: InteractionGnn<f32>,
    optimizer: AdamWConfig,
) -> Result<Box<dyn GnnExecutor>, DeviceError> {
    match device {
        Device::Cpu => Ok(Box::new(CpuExecutor::new(model, optimizer))),
        Device::Cuda(_) | Device::CudaLocal => match CUDA_BACKEND.get() {
            Some(factory) => factory(device, model, optimizer),
            None => Err(DeviceError::NotBuilt { device }),
        },
    }
}

/// The CPU engine behind [`GnnExecutor`]: [`InteractionGnn`]'s fused forward and backward on
/// rayon's threads, and [`AdamW`] on the host buffers (which are the parameters themselves).
pub struct CpuExecutor {
    model: InteractionGnn<f32>,
    /// The optimiser's settings, and its state from the first step or restore on: a model
    /// that only infers never allocates AdamW's two moments.
    adam: AdamWConfig,
    opt: Option<AdamW>,
    /// The training step's buffers, reused from step to step.
    cache: ForwardCache<f32>,
    /// Inference buffers, reused by one caller at a time (others get fresh ones).
    infer_cache: Mutex<ForwardCache<f32>>,
}

impl CpuExecutor {
    /// `model` on the CPU with a fresh AdamW of `optimizer`'s settings (allocated at the first
    /// step).
    pub fn new(model: InteractionGnn<f32>, optimizer: AdamWConfig) -> Self {
        CpuExecutor {
            model,
            adam: optimizer,
            opt: None,
            cache: ForwardCache::default(),
            infer_cache: Mutex::new(ForwardCache::default()),
        }
    }

    /// The model it runs.
    pub fn model(&self) -> &InteractionGnn<f32> {
        &self.model
    }

    /// The buffers of the training step (the last forward's activations).
    pub fn cache(&self) -> &ForwardCache<f32> {
        &self.cache
    }
}

impl GnnExecutor for CpuExecutor {
    fn device(&self) -> Device {
        Device::Cpu
    }

    fn config(&self) -> &ModelConfig {
        &self.model.cfg
    }

    fn input_widths(&self) -> (usize, usize) {
        (self.model.node_dim, self.model.edge_dim)
    }

    fn host_model(&self) -> InteractionGnn<f32> {
        self.model.clone()
    }

    fn set_precision(&mut self, precision: Precision) {
        self.model.set_precision(precision);
    }

    fn params(&self) -> &ParamStore<f32> {
        &self.model.params
    }

    fn params_mut(&mut self) -> &mut ParamStore<f32> {
        &mut self.model.params
    }

    fn forward(&mut self, graph: &GraphInput<f32>) -> Result<&[f32], DeviceError> {
        self.model.forward(graph, &mut self.cache);
        Ok(&self.cache.logits)
    }

    fn backward(&mut self, graph: &GraphInput<f32>, dlogits: &[f32]) -> Result<(), DeviceError> {
        self.model.backward(graph, &mut self.cache, dlogits);
        Ok(())
    }

    fn aux(&self) -> &[f32] {
        &self.cache.aux
    }

    fn backward_aux(&mut self, graph: &GraphInput<f32>, dlogits: &[f32], daux: &[f32]) -> Result<(), DeviceError> {
        self.model.backward_aux(graph, &mut self.cache, dlogits, Some(daux));
        Ok(())
    }

    fn zero_grad(&mut self) {
        self.model.params.zero_grad();
    }

    fn optimizer_step(&mut self, lr: f64) -> Result<(), DeviceError> {
        let params = &mut self.model.params;
        let opt = self.opt.get_or_insert_with(|| AdamW::new(params.len(), self.adam));
        opt.step(&mut params.data, &params.grad, lr);
        Ok(())
    }

    fn optimizer_state(&self) -> Result<AdamWState, DeviceError> {
        Ok(match &self.opt {
            Some(opt) => opt.state(),
            None => AdamW::new(self.model.params.len(), self.adam).state(),
        })
    }

    fn restore_optimizer(&mut self, state: AdamWState) {
        self.opt = Some(AdamW::from_state(self.adam, state));
    }

    fn infer(&self, graph: &GraphInput<f32>) -> Result<Vec<f32>, DeviceError> {
        // A second caller (or a rayon task stolen while the first waits) gets fresh buffers
        // instead of waiting for the lock.
        let mut guard = self.infer_cache.try_lock();
        Ok(match guard.as_deref_mut() {
            Ok(cache) => self.model.infer(graph, cache),
            Err(_) => self.model.infer(graph, &mut ForwardCache::default()),
        })
    }

    fn infer_aux(&self, graph: &GraphInput<f32>) -> Result<(Vec<f32>, Vec<f32>), DeviceError> {
        let mut guard = self.infer_cache.try_lock();
        Ok(match guard.as_deref_mut() {
            Ok(cache) => self.model.infer_aux(graph, cache),
            Err(_) => self.model.infer_aux(graph, &mut ForwardCache::default()),
        })
    }

    fn buffer_bytes(&self) -> usize {
        self.cache.bytes() + self.cache.workspace.bytes()
    }

    fn estimate_step_bytes(&self, nodes: usize, edges: usize) -> usize {
        self.model.estimate_step_bytes(nodes, edges)
    }

    fn release_buffers(&mut self) {
        self.cache = ForwardCache::default();
        *self.infer_cache.get_mut().unwrap_or_else(|e| e.into_inner()) = ForwardCache::default();
    }
}

#[cfg(test)]
mod tests {
    use trackgnn_trackml::rng::Rng;

    use super::*;
    use crate::loss::bce_with_logits;

    fn chain() -> (Vec<f32>, Vec<u32>, Vec<u32>, Vec<u8>) {
        let x: Vec<f32> = (0..12).map(|i| (i as f32 * 0.37).sin()).collect();
        (x, vec![0, 1, 2, 3, 4, 0], vec![1, 2, 3, 4, 5, 2], vec![1, 1, 0, 1, 1, 0])
    }

    fn model() -> InteractionGnn<f32> {
        let cfg = ModelConfig { hidden: 8, iterations: 2, ..ModelConfig::default() };
        InteractionGnn::new(cfg, 2, 0, &mut Rng::new(7))
    }

    #[test]
    fn device_names_round_trip_and_bad_ones_are_refused() {
        for d in [Device::Cpu, Device::Cuda(0), Device::Cuda(3), Device::CudaLocal] {
            assert_eq!(d.to_string().parse::<Device>(), Ok(d));
        }
        assert_eq!("cuda".parse::<Device>(), Ok(Device::CudaLocal));
        assert_eq!(Device::CudaLocal.to_string(), "cuda");
        for bad in ["gpu", "cuda:", "cuda:x", "CPU", ""] {
            let e = bad.parse::<Device>().unwrap_err();
            assert_eq!(e.to_string(), format!("unknown device `{bad}`: expected `cpu`, `cuda` or `cuda:N`"));
        }
    }

    #[test]
    fn a_device_without_a_backend_is_refused_by_name() {
        let e = executor_on(Device::Cuda(1), model(), AdamWConfig::default()).err().unwrap();
        assert!(e.to_string().starts_with("cuda:1: this build of trackgnn has no backend"), "{e}");
    }

    /// Three steps through the seam give the bits of the same three steps on the engine itself.
    #[test]
    fn cpu_executor_steps_are_the_engines_own() {
        let (x, src, dst, y) = chain();
        let g = GraphInput::<f32>::new(6, &x, 2, &[], 0, &src, &dst);
        let (mut direct, opt_cfg) = (model(), AdamWConfig::default());
        let mut exec = executor_on(Device::Cpu, direct.clone(), opt_cfg).unwrap();
        let (mut opt, mut cache, mut dl) =
            (AdamW::new(direct.params.len(), opt_cfg), ForwardCache::default(), vec![0.0; 6]);
        for _ in 0..3 {
            direct.params.zero_grad();
            direct.forward(&g, &mut cache);
            bce_with_logits(&cache.logits, &y, None, 1.0, &mut dl);
            direct.backward(&g, &mut cache, &dl);
            opt.step(&mut direct.params.data, &direct.params.grad, 1e-2);

            exec.zero_grad();
            let logits = exec.forward(&g).unwrap().to_vec();
            assert_eq!(logits, cache.logits);
            let mut dl2 = vec![0.0; 6];
            bce_with_logits(&logits, &y, None, 1.0, &mut dl2);
            exec.backward(&g, &dl2).unwrap();
            assert_eq!(exec.params().grad, direct.params.grad);
            exec.optimizer_step(1e-2).unwrap();
            assert_eq!(exec.params().data, direct.params.data);
        }
        assert_eq!(exec.infer(&g).unwrap(), direct.infer(&g, &mut ForwardCache::default()));
        assert_eq!(exec.optimizer_state().unwrap().step, 3);
        assert!(exec.buffer_bytes() > 0);
        exec.release_buffers();
        assert_eq!(exec.buffer_bytes(), 0);
    }
}
