//! The device model behind the engine's seam ([`GnnExecutor`]): what the trainer, evaluation and
//! the reconstruction call, on a GPU (or on the emulator, in tests).
//!
//! The parameters and gradients have a host copy in the model's [`ParamStore`] layout: the
//! backward's gradients are copied back after each call (the trainer all-reduces and clips them
//! there), whatever changed on the host goes to the device before the next device call, and
//! AdamW runs on the device (its moments live there; the updated parameters are copied back to
//! the host copy, which checkpoints read).

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use trackgnn_engine::optim::{AdamW, AdamWConfig, AdamWState};
use trackgnn_engine::{
    AuxTargets, Device, DeviceError, EdgeTargets, GnnExecutor, GraphFigures, GraphInput, GraphLoss, InteractionGnn,
    ModelConfig, ParamStore, Precision,
};

use crate::backend::{Arg, Backend, BackendError, DevBuf, DevPtr, launch};
use crate::backward::Workspace;
use crate::graph::{DeviceGraph, GraphError};
use crate::loss;
use crate::model::{DeviceCache, DeviceModel, EDGE_TILE};

/// A model on one device behind [`GnnExecutor`].
pub struct DeviceExecutor {
    device: Device,
    dev: Arc<dyn Backend>,
    /// The model with its parameters and gradients in host memory.
    host: InteractionGnn<f32>,
    model: DeviceModel,
    /// Gradients on the device (the flat layout).
    grad: DevBuf<f32>,
    cache: DeviceCache,
    ws: Workspace,
    /// The last forward's graph, which the backward reads.
    graph: Option<DeviceGraph>,
    logits: Vec<f32>,
    aux: Vec<f32>,
    adam: AdamWConfig,
    /// AdamW's moments on the device, from the first step.
    opt: Option<DeviceAdamW>,
    /// A checkpoint's optimiser state, uploaded by the next step.
    restored: Option<AdamWState>,
    /// The host parameters or gradients changed since they were uploaded.
    dirty: AtomicBool,
    /// Inference's buffers, one caller at a time.
    infer_cache: Mutex<DeviceCache>,
    /// The planned step's bytes as a + b·nodes + c·edges, fitted on first use.
    plan: std::sync::OnceLock<[f64; 3]>,
}

/// AdamW's state on the device: the step count and the moments (and AMSGrad's running max).
struct DeviceAdamW {
    step: u64,
    m: DevBuf<f32>,
    v: DevBuf<f32>,
    v_max: Option<DevBuf<f32>>,
}

impl DeviceAdamW {
    /// `state` on `dev` (normalised by the engine's AdamW for `cfg`'s AMSGrad setting).
    fn upload(dev: &Arc<dyn Backend>, cfg: AdamWConfig, state: AdamWState) -> Result<Self, BackendError> {
        let AdamWState { step, m, v, v_max } = AdamW::from_state(cfg, state).state();
        let v_max = v_max.map(|vm| DevBuf::from_host(dev, &vm)).transpose()?;
        Ok(DeviceAdamW { step, m: DevBuf::from_host(dev, &m)?, v: DevBuf::from_host(dev, &v)?, v_max })
    }

    /// The state on the host, for checkpoints.
    fn download(&self) -> Result<AdamWState, BackendError> {
        let v_max = self.v_max.as_ref().map(DevBuf::to_host).transpose()?;
        Ok(AdamWState { step: self.step, m: self.m.to_host()?, v: self.v.to_host()?, v_max })
    }
}

fn failed(device: Device) -> impl Fn(BackendError) -> DeviceError {
    move |e| DeviceError::Failed { device, message: e.to_string() }
}

fn graph_failed(device: Device) -> impl Fn(GraphError) -> DeviceError {
    move |e| DeviceError::Failed { device, message: e.to_string() }
}

impl DeviceExecutor {
    /// `model` on `dev` (named `device` in messages and [`GnnExecutor::device`]), with an AdamW
    /// of `optimizer`'s settings.
    pub fn new(
        dev: Arc<dyn Backend>,
        device: Device,
        model: InteractionGnn<f32>,
        optimizer: AdamWConfig,
    ) -> Result<Self, DeviceError> {
        let dm = DeviceModel::upload(&dev, &model).map_err(failed(device))?;
        let grad = DevBuf::zeros(&dev, model.params.len()).map_err(failed(device))?;
        Ok(DeviceExecutor {
            device,
            dev,
            host: model,
            model: dm,
            grad,
            cache: DeviceCache::default(),
            ws: Workspace::default(),
            graph: None,
            logits: Vec::new(),
            aux: Vec::new(),
            adam: optimizer,
            opt: None,
            restored: None,
            dirty: AtomicBool::new(false),
            infer_cache: Mutex::new(DeviceCache::default()),
            plan: std::sync::OnceLock::new(),
        })
    }

    /// The backend it runs on.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.dev
    }

    /// Edges per tile where split MLPs run tile by tile ([`crate::model::EDGE_TILE`] unless
    /// set; the tests set small ones to run several tiles on small graphs).
    pub fn set_edge_tile(&mut self, rows: usize) {
        self.model.edge_tile = rows.max(1);
    }

    /// Uploads the host parameters and gradients if they changed.
    fn sync(&self) -> Result<(), DeviceError> {
        if self.dirty.swap(false, Ordering::AcqRel) {
            let upload = || -> Result<(), BackendError> {
                self.model.params.upload(&self.host.params.data)?;
                self.grad.upload(&self.host.params.grad)
            };
            upload().inspect_err(|_| self.dirty.store(true, Ordering::Release)).map_err(failed(self.device))?;
        }
        Ok(())
    }

    #[track_caller]
    fn upload_graph(&self, graph: &GraphInput<f32>) -> Result<DeviceGraph, DeviceError> {
        assert_eq!(graph.node_dim, self.host.node_dim, "node feature width");
        assert_eq!(graph.edge_dim, self.host.edge_dim, "edge feature width");
        DeviceGraph::upload(&self.dev, graph, self.model.widest_row()).map_err(graph_failed(self.device))
    }

    /// The forward of a training step on `graph`, its logits left on the device.
    fn forward_on_device(&mut self, graph: &GraphInput<f32>) -> Result<(), DeviceError> {
        self.sync()?;
        self.graph = None;
        let g = self.upload_graph(graph)?;
        let ckpt = self.host.checkpointing;
        match ckpt.is_on() {
            true => self.model.forward_checkpointed(&g, &mut self.cache, ckpt),
            false => self.model.forward(&g, &mut self.cache),
        }
        .map_err(failed(self.device))?;
        self.graph = Some(g);
        Ok(())
    }

    /// The backward of the last forward from dL/dlogits (and dL/daux) on the device; the
    /// gradients come to the host copy.
    fn backward_on_device(&mut self, dl: DevPtr, da: Option<DevPtr>) -> Result<(), DeviceError> {
        self.sync()?;
        let g = self.graph.as_ref().expect("backward after a forward");
        let ckpt = self.host.checkpointing;
        let grad = self.grad.ptr();
        match ckpt.is_on() {
            true => self.model.backward_checkpointed(g, &self.cache, ckpt, dl, da, grad, &mut self.ws),
            false => self.model.backward(g, &self.cache, dl, da, grad, &mut self.ws),
        }
        .map_err(failed(self.device))?;
        self.host.params.grad = self.grad.to_host().map_err(failed(self.device))?;
        Ok(())
    }

    fn backward_inner(
        &mut self,
        graph: &GraphInput<f32>,
        dlogits: &[f32],
        daux: Option<&[f32]>,
    ) -> Result<(), DeviceError> {
        let device = self.device;
        let e = self.graph.as_ref().expect("backward after a forward").num_edges;
        assert_eq!(e, graph.num_edges(), "backward: not the forward's graph");
        assert_eq!(dlogits.len(), e, "backward: dlogits shape");
        let dl = self.ws.upstream[0].get(&self.dev, e).map_err(failed(device))?;
        dl.upload(dlogits).map_err(failed(device))?;
        let dl = dl.ptr();
        let da = match daux {
            Some(d) => {
                assert_eq!(d.len(), e, "backward_aux: daux shape");
                let b = self.ws.upstream[1].get(&self.dev, e).map_err(failed(device))?;
                b.upload(d).map_err(failed(device))?;
                Some(b.ptr())
            }
            None => None,
        };
        self.backward_on_device(dl, da)
    }

    /// Inference on `graph` into the inference buffers (fresh ones if another caller holds
    /// them), then `then` on them.
    fn infer_then<R>(
        &self,
        graph: &GraphInput<f32>,
        then: impl FnOnce(&DeviceCache) -> Result<R, BackendError>,
    ) -> Result<R, DeviceError> {
        self.sync()?;
        let g = self.upload_graph(graph)?;
        let mut fresh = DeviceCache::default();
        let mut guard = self.infer_cache.try_lock();
        let cache = match guard.as_deref_mut() {
            Ok(c) => c,
            Err(_) => &mut fresh,
        };
        let run = || -> Result<R, BackendError> {
            self.model.infer(&g, cache)?;
            then(cache)
        };
        run().map_err(failed(self.device))
    }

    fn infer_inner(&self, graph: &GraphInput<f32>, aux: bool) -> Result<(Vec<f32>, Vec<f32>), DeviceError> {
        self.infer_then(graph, |cache| {
            let logits = cache.logits.buf().map_or(Ok(Vec::new()), DevBuf::to_host)?;
            let aux = match (aux, cache.aux.buf()) {
                (true, Some(b)) => b.to_host()?,
                _ => Vec::new(),
            };
            Ok((logits, aux))
        })
    }
}

/// One graph's loss targets on the device.
struct DeviceTargets {
    label: DevBuf<u8>,
    weight: DevBuf<f32>,
}

impl DeviceTargets {
    #[track_caller]
    fn upload(dev: &Arc<dyn Backend>, t: &EdgeTargets<'_>, edges: usize) -> Result<Self, BackendError> {
        assert!(t.target.len() == edges && t.weight.len() == edges, "loss targets: one per edge");
        Ok(DeviceTargets { label: DevBuf::from_host(dev, t.target)?, weight: DevBuf::from_host(dev, t.weight)? })
    }
}

/// The auxiliary head's MSE of the predictions at `pred` (its gradient, scaled, into `grad`
/// where given).
fn aux_loss(
    dev: &Arc<dyn Backend>,
    pred: DevPtr,
    aux: &AuxTargets<'_>,
    grad: loss::GradOut,
    edges: usize,
) -> Result<f64, BackendError> {
    assert!(aux.log_pt.len() == edges && aux.weight.len() == edges, "auxiliary targets: one per edge");
    let (t, w) = (DevBuf::from_host(dev, aux.log_pt)?, DevBuf::from_host(dev, aux.weight)?);
    loss::mse(dev, pred, &t, &w, aux.count, grad, edges)
}

impl GnnExecutor for DeviceExecutor {
    fn device(&self) -> Device {
        self.device
    }

    fn config(&self) -> &ModelConfig {
        &self.host.cfg
    }

    fn input_widths(&self) -> (usize, usize) {
        (self.host.node_dim, self.host.edge_dim)
    }

    fn host_model(&self) -> InteractionGnn<f32> {
        self.host.clone()
    }

    fn set_precision(&mut self, precision: Precision) {
        self.host.set_precision(precision);
        self.model.precision = precision;
        self.model.saved = self.host.saved_activations();
    }

    fn params(&self) -> &ParamStore<f32> {
        &self.host.params
    }

    fn params_mut(&mut self) -> &mut ParamStore<f32> {
        self.dirty.store(true, Ordering::Release);
        &mut self.host.params
    }

    fn forward(&mut self, graph: &GraphInput<f32>) -> Result<&[f32], DeviceError> {
        self.forward_on_device(graph)?;
        let device = self.device;
        self.logits = self.cache.logits.buf().map_or(Ok(Vec::new()), DevBuf::to_host).map_err(failed(device))?;
        self.aux = match self.cache.aux.buf() {
            Some(b) if self.host.has_aux_head() => b.to_host().map_err(failed(device))?,
            _ => Vec::new(),
        };
        Ok(&self.logits)
    }

    fn loss_backward(
        &mut self,
        graph: &GraphInput<f32>,
        targets: &EdgeTargets<'_>,
        scale: f32,
        aux_scale: f32,
    ) -> Result<GraphLoss, DeviceError> {
        // The logits and dL/dlogits stay on the device: only the loss's tile sums come back.
        self.forward_on_device(graph)?;
        let fail = failed(self.device);
        let e = graph.num_edges();
        let dl = self.ws.upstream[0].get(&self.dev, e).map_err(&fail)?.ptr();
        let t = DeviceTargets::upload(&self.dev, targets, e).map_err(&fail)?;
        let logits = self.cache.logits.ptr();
        let loss = loss::bce(&self.dev, logits, &t.label, &t.weight, targets.pos_weight, Some((dl, scale)), e);
        let loss = loss.map_err(&fail)?;
        drop(t);
        let (aux_loss, da) = match &targets.aux {
            None => (0.0, None),
            Some(aux) => {
                assert!(self.host.has_aux_head(), "loss_backward: auxiliary targets for a model without the head");
                let da = self.ws.upstream[1].get(&self.dev, e).map_err(&fail)?.ptr();
                (aux_loss(&self.dev, self.cache.aux.ptr(), aux, Some((da, aux_scale)), e).map_err(&fail)?, Some(da))
            }
        };
        self.backward_on_device(dl, da)?;
        Ok(GraphLoss { loss, aux_loss })
    }

    fn validate_graph(
        &self,
        graph: &GraphInput<f32>,
        targets: &EdgeTargets<'_>,
        y: &[u8],
        threshold: f64,
        keep_logits: bool,
    ) -> Result<GraphFigures, DeviceError> {
        let e = graph.num_edges();
        assert_eq!(y.len(), e, "validate_graph: y, one per edge");
        self.infer_then(graph, |cache| {
            let dev = &self.dev;
            let t = DeviceTargets::upload(dev, targets, e)?;
            let logits = cache.logits.ptr();
            let loss = loss::bce(dev, logits, &t.label, &t.weight, targets.pos_weight, None, e)?;
            let aux_loss = match &targets.aux {
                Some(aux) => aux_loss(dev, cache.aux.ptr(), aux, None, e)?,
                None => 0.0,
            };
            let counts = loss::counts(dev, logits, &DevBuf::from_host(dev, y)?, &t.label, threshold, e)?;
            let auc = loss::auc(dev, logits, &t.label, counts.target_true, e)?;
            let logits = match (keep_logits, cache.logits.buf()) {
                (true, Some(b)) => b.to_host()?,
                _ => Vec::new(),
            };
            Ok(GraphFigures { loss: GraphLoss { loss, aux_loss }, counts, auc, logits })
        })
    }

    fn backward(&mut self, graph: &GraphInput<f32>, dlogits: &[f32]) -> Result<(), DeviceError> {
        self.backward_inner(graph, dlogits, None)
    }

    fn aux(&self) -> &[f32] {
        &self.aux
    }

    fn backward_aux(&mut self, graph: &GraphInput<f32>, dlogits: &[f32], daux: &[f32]) -> Result<(), DeviceError> {
        assert!(self.host.has_aux_head(), "backward_aux: the model has no auxiliary head");
        self.backward_inner(graph, dlogits, Some(daux))
    }

    fn zero_grad(&mut self) {
        self.host.params.zero_grad();
        // The device's copy follows at the next call.
        self.dirty.store(true, Ordering::Release);
    }

    fn optimizer_step(&mut self, lr: f64) -> Result<(), DeviceError> {
        // The host's gradients (all-reduced, clipped) on the device first.
        self.sync()?;
        let fail = failed(self.device);
        let n = self.host.params.len();
        if self.opt.is_none() {
            let state = self.restored.take().unwrap_or_else(|| AdamW::new(n, self.adam).state());
            self.opt = Some(DeviceAdamW::upload(&self.dev, self.adam, state).map_err(&fail)?);
        }
        let opt = self.opt.as_mut().expect("just set");
        opt.step += 1;
        let s = self.adam.step_scalars(opt.step, lr);
        let args = [
            self.model.params.arg(),
            self.grad.arg(),
            opt.m.arg(),
            opt.v.arg(),
            Arg::Ptr(opt.v_max.as_ref().map_or(0, DevBuf::ptr)),
            Arg::int(n),
            Arg::F32(s.decay),
            Arg::F32(s.w1),
            Arg::F32(s.b2),
            Arg::F32(s.w2),
            Arg::F32(s.step_size),
            Arg::F32(s.bc2_sqrt),
            Arg::F32(s.eps),
        ];
        launch(self.dev.as_ref(), "adamw_update", n, &args).map_err(&fail)?;
        // The host copy follows (checkpoints and the all-reduce read it).
        let updated = self.model.params.to_host().map_err(&fail)?;
        self.host.params.data.copy_from_slice(&updated);
        Ok(())
    }

    fn optimizer_state(&self) -> Result<AdamWState, DeviceError> {
        match (&self.opt, &self.restored) {
            (Some(opt), _) => opt.download().map_err(failed(self.device)),
            (None, Some(state)) => Ok(state.clone()),
            (None, None) => Ok(AdamW::new(self.host.params.len(), self.adam).state()),
        }
    }

    fn restore_optimizer(&mut self, state: AdamWState) {
        // Uploaded by the next step (where a device failure is an error, not a panic).
        self.opt = None;
        self.restored = Some(state);
    }

    fn infer(&self, graph: &GraphInput<f32>) -> Result<Vec<f32>, DeviceError> {
        Ok(self.infer_inner(graph, false)?.0)
    }

    fn infer_aux(&self, graph: &GraphInput<f32>) -> Result<(Vec<f32>, Vec<f32>), DeviceError> {
        self.infer_inner(graph, true)
    }

    fn buffer_bytes(&self) -> usize {
        self.cache.bytes() + self.ws.bytes()
    }

    fn estimate_step_bytes(&self, nodes: usize, edges: usize) -> usize {
        // The device's own plan: a step on the planning backend allocates what the real one
        // does (milliseconds up to a few tiles of edges). Beyond two tiles of edges (the split
        // MLPs' recomputation runs tile by tile) the peak is nearly affine in the node and edge
        // counts: three planned steps there fit it, 1% added for what the fit misses (at most
        // 0.3% below the plan, up to 6% above, over acorn's, BENCH_SPEC's and the default
        // model in every checkpointing mode up to 1.6M edges).
        if edges < 2 * EDGE_TILE {
            return planned_step_bytes(&self.host, nodes, edges);
        }
        let [a, b, c] = *self.plan.get_or_init(|| {
            let at = |n, e| planned_step_bytes(&self.host, n, e) as f64;
            let (n0, e0) = (EDGE_TILE / 4, 2 * EDGE_TILE);
            let base = at(n0, e0);
            let (dn, de) = (at(2 * n0, e0) - base, at(n0, 2 * e0) - base);
            [base - dn - de, dn / n0 as f64, de / e0 as f64]
        });
        (1.01 * (a + b * nodes as f64 + c * edges as f64)).max(0.0) as usize
    }

    fn take_peak_bytes(&mut self) -> Option<usize> {
        let peak = self.dev.memory().peak;
        self.dev.reset_peak();
        Some(peak)
    }

    fn release_buffers(&mut self) {
        self.cache = DeviceCache::default();
        self.ws = Workspace::default();
        self.graph = None;
        *self.infer_cache.get_mut().unwrap_or_else(|e| e.into_inner()) = DeviceCache::default();
    }
}

/// The peak device bytes of one training step of `model` (its configuration, precision and
/// checkpointing) on a graph of `nodes` and `edges`, planned on [`crate::Planner`]: parameters,
/// gradients, the graph, activations and workspace.
pub fn planned_step_bytes(model: &InteractionGnn<f32>, nodes: usize, edges: usize) -> usize {
    let plan = Arc::new(crate::Planner::new());
    let n = nodes.max(1) as u32;
    let src: Vec<u32> = (0..edges as u32).map(|i| i % n).collect();
    let dst: Vec<u32> = (0..edges as u32).map(|i| (i.wrapping_mul(7) + 1) % n).collect();
    let x = vec![0.0f32; nodes.max(1) * model.node_dim];
    let ea = vec![0.0f32; edges * model.edge_dim];
    let g = GraphInput::new(nodes.max(1), &x, model.node_dim, &ea, model.edge_dim, &src, &dst);
    let backend: Arc<dyn Backend> = plan.clone();
    // Two steps: from the second on, AdamW's moments are on the device during the whole step.
    let step = || -> Result<(), DeviceError> {
        let mut ex = DeviceExecutor::new(backend, Device::Cuda(0), model.clone(), AdamWConfig::default())?;
        let (label, weight) = (vec![0u8; edges], vec![1.0f32; edges]);
        let targets = EdgeTargets { target: &label, weight: &weight, pos_weight: 1.0, aux: None };
        for _ in 0..2 {
            ex.loss_backward(&g, &targets, 1.0, 0.0)?;
            ex.optimizer_step(0.0)?;
        }
        Ok(())
    };
    step().expect("the planning backend does not fail");
    plan.memory().peak
}
