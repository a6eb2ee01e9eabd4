//! The InteractionGNN: parameters, fused forward and hand-derived backward.

use rayon::prelude::*;
use trackgnn_trackml::rng::Rng;

use crate::bf16;
use crate::checkpointing::Checkpointing;
use crate::config::{ModelConfig, Norm, Precision, UpdateOrder};
use crate::graph_input::GraphInput;
use crate::mlp::{Acts, DInput, DOut, Input, LayerStyle, Mlp, MlpCache, SplitScratch};
use crate::ops::Activation;
use crate::ops::aggregate::{self, AggCache};
use crate::params::ParamStore;
use crate::real::Real;
use crate::traffic::{self, Pass};

mod passes;

/// The model: its configuration, parameters and the MLPs that index them.
#[derive(Clone, Debug)]
pub struct InteractionGnn<T> {
    /// The configuration.
    pub cfg: ModelConfig,
    /// All parameters and gradients, in one flat buffer.
    pub params: ParamStore<T>,
    /// Node feature width the model was built for.
    pub node_dim: usize,
    /// Edge feature width (0: none).
    pub edge_dim: usize,
    /// Which activations the forward keeps (a memory/time choice, not part of the model).
    pub checkpointing: Checkpointing,
    node_encoder: Mlp,
    edge_encoder: Mlp,
    edge_networks: Vec<Mlp>,
    node_networks: Vec<Mlp>,
    classifier: Mlp,
    /// The auxiliary pT head on e_L (`aux_pt.*`), when the configuration asks for it.
    aux_head: Option<Mlp>,
}

/// Activations the forward keeps for the backward.
#[derive(Clone, Debug, Default)]
pub struct ForwardCache<T> {
    /// Node states h_0 … h_L (each N × H).
    pub h: Vec<Vec<T>>,
    /// Edge states e_0 … e_L (each E × H).
    pub e: Vec<Vec<T>>,
    /// Node-network inputs per iteration (N × (1 + 2K)·H).
    pub node_in: Vec<Vec<T>>,
    /// Aggregation caches per iteration: incoming, outgoing.
    pub agg: Vec<(AggCache<T>, AggCache<T>)>,
    /// MLP caches: node encoder, edge encoder, per iteration edge and node networks, classifier.
    pub node_encoder: MlpCache<T>,
    /// Edge encoder cache.
    pub edge_encoder: MlpCache<T>,
    /// Edge network caches.
    pub edge_net: Vec<MlpCache<T>>,
    /// Node network caches.
    pub node_net: Vec<MlpCache<T>>,
    /// Classifier cache.
    pub classifier: MlpCache<T>,
    /// The logits (E).
    pub logits: Vec<T>,
    /// The auxiliary head's predictions of log10 pT (E; empty without the head).
    pub aux: Vec<T>,
    /// The auxiliary head's cache (empty with checkpointing: its backward recomputes).
    pub aux_head: MlpCache<T>,
    /// Scratch of the split Linear (h·W_aᵀ, h·W_bᵀ), reused.
    pub scratch_a: Vec<T>,
    /// See `scratch_a`.
    pub scratch_b: Vec<T>,
    /// Gradient buffers of the backward, reused.
    pub workspace: Workspace<T>,
    /// Scratch of the checkpointed path, reused.
    pub iter_scratch: IterScratch<T>,
    /// Saved node states in bf16 (checkpointing with `+bf16`; empty where not saved).
    pub packed_h: Vec<Vec<u16>>,
    /// Saved edge states in bf16, as `packed_h`.
    pub packed_e: Vec<Vec<u16>>,
}

/// Gradient buffers of the backward (reused between steps; not activations).
#[derive(Clone, Debug, Default)]
pub struct Workspace<T> {
    /// dL/dz of a split first layer (E × H).
    pub dz1: Vec<T>,
    /// dL/dh of the current iteration (N × H).
    pub dh: Vec<T>,
    /// dL/dh of the previous iteration (N × H).
    pub dh_prev: Vec<T>,
    /// dL/de of the current iteration (E × H), updated in place to the previous one.
    pub de: Vec<T>,
    /// dL/d(node-network input) (N × (1 + 2K)·H).
    pub dnode_in: Vec<T>,
    /// dA, dB of the split first layers' node-side backward.
    pub split: SplitScratch<T>,
}

impl<T> Workspace<T> {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        (self.dz1.len() + self.dh.len() + self.dh_prev.len() + self.de.len() + self.dnode_in.len())
            * std::mem::size_of::<T>()
            + self.split.bytes()
    }
}

impl<T: Default> ForwardCache<T> {
    /// Drops what an uncheckpointed forward kept (a checkpointed forward keeps none of it).
    fn drop_uncheckpointed(&mut self) {
        self.node_in.clear();
        self.agg.clear();
        self.edge_net.clear();
        self.node_net.clear();
        self.edge_encoder = MlpCache::default();
        self.classifier = MlpCache::default();
        self.aux_head = MlpCache::default();
    }
}

impl<T> ForwardCache<T> {
    /// Bytes of activations held.
    pub fn bytes(&self) -> usize {
        let v = |x: &Vec<Vec<T>>| x.iter().map(Vec::len).sum::<usize>();
        let s = std::mem::size_of::<T>();
        let agg: usize = self
            .agg
            .iter()
            .map(|(a, b)| {
                (a.mean.len() + a.std.len() + b.mean.len() + b.std.len()) * s + (a.argmax.len() + b.argmax.len()) * 4
            })
            .sum();
        let packed = |x: &Vec<Vec<u16>>| x.iter().map(|p| p.capacity()).sum::<usize>() * 2;
        (v(&self.h) + v(&self.e) + v(&self.node_in) + self.logits.len() + self.aux.len()) * s
            + packed(&self.packed_h)
            + packed(&self.packed_e)
            + agg
            + self.node_encoder.bytes()
            + self.edge_encoder.bytes()
            + self.edge_net.iter().map(MlpCache::bytes).sum::<usize>()
            + self.node_net.iter().map(MlpCache::bytes).sum::<usize>()
            + self.classifier.bytes()
            + self.aux_head.bytes()
    }
}

impl<T: Real> InteractionGnn<T> {
    /// A model for graphs with `node_dim` node features and `edge_dim` edge features (0 for
    /// none), initialised like PyTorch (Linear weights and biases U(−1/√fan_in, 1/√fan_in),
    /// LayerNorm γ = 1, β = 0) from `rng`.
    ///
    /// # Panics
    /// If the configuration is invalid (see [`ModelConfig::validate`]).
    #[track_caller]
    pub fn new(cfg: ModelConfig, node_dim: usize, edge_dim: usize, rng: &mut Rng) -> Self {
        cfg.validate().expect("valid model configuration");
        let h = cfg.hidden;
        let mut ps = ParamStore::default();
        let norm = match cfg.norm {
            Norm::None => None,
            Norm::Affine => Some(true),
            Norm::NoAffine => Some(false),
        };
        let depth = cfg.mlp_depth;
        let net_style = |l: usize| {
            if l + 1 < depth {
                LayerStyle { norm, act: cfg.activation }
            } else {
                LayerStyle { norm: if cfg.output_norm { norm } else { None }, act: cfg.output_activation }
            }
        };
        let dims = |din: usize| -> Vec<usize> { std::iter::once(din).chain(std::iter::repeat_n(h, depth)).collect() };
        let node_encoder = Mlp::register(&mut ps, "node_encoder", &dims(node_dim), net_style);
        let edge_encoder = Mlp::register(&mut ps, "edge_encoder", &dims(2 * h + edge_dim), net_style);
        let k = cfg.aggregation.len();
        let n_nets = if cfg.recurrent { 1 } else { cfg.iterations };
        let mut edge_networks = Vec::new();
        let mut node_networks = Vec::new();
        for i in 0..n_nets {
            let suffix = if cfg.recurrent { String::new() } else { format!(".{i}") };
            edge_networks.push(Mlp::register(&mut ps, &format!("edge_network{suffix}"), &dims(3 * h), net_style));
            node_networks.push(Mlp::register(
                &mut ps,
                &format!("node_network{suffix}"),
                &dims((1 + 2 * k) * h),
                net_style,
            ));
        }
        let cd = cfg.classifier_depth;
        let cls_dims: Vec<usize> =
            std::iter::once(3 * h).chain(std::iter::repeat_n(h, cd - 1)).chain(std::iter::once(1)).collect();
        let cls_style = |l: usize| {
            if l + 1 < cd {
                LayerStyle { norm, act: cfg.activation }
            } else {
                LayerStyle { norm: None, act: Activation::Identity }
            }
        };
        let classifier = Mlp::register(&mut ps, "edge_classifier", &cls_dims, cls_style);
        // Registered last, so a model without it has the same parameters in the same places.
        let aux_head = cfg.aux_pt.then(|| {
            let dims: Vec<usize> = std::iter::repeat_n(h, cd).chain(std::iter::once(1)).collect();
            Mlp::register(&mut ps, "aux_pt", &dims, cls_style)
        });
        let mut model = InteractionGnn {
            checkpointing: Checkpointing::NONE,
            cfg,
            params: ps,
            node_dim,
            edge_dim,
            node_encoder,
            edge_encoder,
            edge_networks,
            node_networks,
            classifier,
            aux_head,
        };
        model.init(rng);
        model
    }

    /// Re-initialises every parameter (PyTorch's defaults).
    pub fn init(&mut self, rng: &mut Rng) {
        let mlps: Vec<Mlp> = self.mlps().cloned().collect();
        for mlp in mlps {
            for layer in &mlp.layers {
                let bound = 1.0 / (layer.din as f64).sqrt();
                for i in [layer.w, layer.b] {
                    for v in self.params.value_mut(i) {
                        *v = T::from_f64(rng.range(-bound, bound));
                    }
                }
                if let Some((g, b)) = layer.norm {
                    if let Some(g) = g {
                        self.params.value_mut(g).iter_mut().for_each(|v| *v = T::ONE);
                    }
                    if let Some(b) = b {
                        self.params.value_mut(b).iter_mut().for_each(|v| *v = T::ZERO);
                    }
                }
            }
        }
    }

    /// Sets the arithmetic of every matrix product (f32 by default; see [`Precision`]) and the
    /// precision of the MLPs' saved activations with it: in bf16 they are saved rounded to bf16
    /// (see [`InteractionGnn::set_saved_activations`]).
    pub fn set_precision(&mut self, precision: Precision) {
        for mlp in self.mlps_mut() {
            mlp.precision = precision;
            mlp.saved = precision;
        }
    }

    /// Sets how the MLPs save each layer's x̂ (or z) for the backward: f32, or rounded to bf16,
    /// which halves the largest part of a step's memory. The forward's results are the same
    /// either way; the backward works from the rounded values, within the tolerance stated in
    /// docs/training.md ("Mixed precision"). [`InteractionGnn::set_precision`] sets it to the
    /// precision of the products.
    pub fn set_saved_activations(&mut self, saved: Precision) {
        for mlp in self.mlps_mut() {
            mlp.saved = saved;
        }
    }

    /// How the MLPs save their activations.
    pub fn saved_activations(&self) -> Precision {
        self.node_encoder.saved
    }

    fn mlps_mut(&mut self) -> impl Iterator<Item = &mut Mlp> {
        let nets = self.edge_networks.iter_mut().chain(self.node_networks.iter_mut());
        [&mut self.node_encoder, &mut self.edge_encoder, &mut self.classifier]
            .into_iter()
            .chain(nets)
            .chain(self.aux_head.as_mut())
    }

    /// The arithmetic of the matrix products.
    pub fn precision(&self) -> Precision {
        self.node_encoder.precision
    }

    fn mlps(&self) -> impl Iterator<Item = &Mlp> {
        std::iter::once(&self.node_encoder)
            .chain(std::iter::once(&self.edge_encoder))
            .chain(self.edge_networks.iter())
            .chain(self.node_networks.iter())
            .chain(std::iter::once(&self.classifier))
            .chain(self.aux_head.as_ref())
    }

    /// The auxiliary pT head's parameters are those whose names start with this (`aux_pt.`).
    pub const AUX_PREFIX: &'static str = "aux_pt.";

    /// Whether the model has the auxiliary pT head ([`ModelConfig::aux_pt`]).
    pub fn has_aux_head(&self) -> bool {
        self.aux_head.is_some()
    }

    fn nets(&self, it: usize) -> (&Mlp, &Mlp) {
        let i = if self.cfg.recurrent { 0 } else { it };
        (&self.edge_networks[i], &self.node_networks[i])
    }

    /// The model with its parameters converted to another scalar type (for gradient checks).
    pub fn cast<U: Real>(&self) -> InteractionGnn<U> {
        InteractionGnn {
            cfg: self.cfg.clone(),
            params: ParamStore {
                specs: self.params.specs.clone(),
                data: self.params.data.iter().map(|v| U::from_f64(v.to_f64())).collect(),
                grad: vec![U::ZERO; self.params.grad.len()],
            },
            node_dim: self.node_dim,
            edge_dim: self.edge_dim,
            node_encoder: self.node_encoder.clone(),
            edge_encoder: self.edge_encoder.clone(),
            edge_networks: self.edge_networks.clone(),
            node_networks: self.node_networks.clone(),
            classifier: self.classifier.clone(),
            aux_head: self.aux_head.clone(),
            checkpointing: self.checkpointing,
        }
    }

    /// Forward: fills `cache` (including `cache.logits`, one per edge). Buffers in the cache are
    /// reused from call to call.
    ///
    /// # Panics
    /// If the graph's feature widths differ from the model's.
    #[track_caller]
    pub fn forward(&self, g: &GraphInput<T>, cache: &mut ForwardCache<T>) {
        if self.checkpointing.is_on() {
            let seg = self.checkpointing.segment();
            if self.checkpointing.bf16_states() {
                return self.forward_rolling(g, cache, Some(seg), true);
            }
            return self.forward_checkpointed(g, cache, seg);
        }
        let (n, e, h) = self.checked_dims(g);
        let iters = self.cfg.iterations;
        let aggs = &self.cfg.aggregation;
        let k = aggs.len();
        let ld = (1 + 2 * k) * h;
        let ps = &self.params;
        cache.h.resize_with(iters + 1, Vec::new);
        cache.e.resize_with(iters + 1, Vec::new);
        cache.node_in.resize_with(iters, Vec::new);
        cache.agg.resize_with(iters, Default::default);
        cache.edge_net.resize_with(iters, Default::default);
        cache.node_net.resize_with(iters, Default::default);
        cache.h.iter_mut().for_each(|v| v.resize(n * h, T::ZERO));
        cache.e.iter_mut().for_each(|v| v.resize(e * h, T::ZERO));
        cache.node_in.iter_mut().for_each(|v| v.resize(n * ld, T::ZERO));
        let mut a = std::mem::take(&mut cache.scratch_a);
        let mut b = std::mem::take(&mut cache.scratch_b);
        // Encoders.
        let x = Input::Dense { x: &g.x, dim: g.node_dim };
        self.node_encoder.forward(ps, x, n, &mut cache.node_encoder, &mut cache.h[0]);
        g.exchange_states(&mut cache.h[0], h);
        self.edge_encoder.split_precompute(ps, &cache.h[0], h, &mut a, &mut b);
        let rest = (g.edge_dim > 0).then_some((&g.edge_attr[..], g.edge_dim));
        let input = Input::Split { a: &a, b: &b, src: &g.src, dst: &g.dst, h_dim: h, rest };
        self.edge_encoder.forward(ps, input, e, &mut cache.edge_encoder, &mut cache.e[0]);
        // Message passing.
        for it in 0..iters {
            let (edge_net, node_net) = self.nets(it);
            let (h_done, h_todo) = cache.h.split_at_mut(it + 1);
            let (e_done, e_todo) = cache.e.split_at_mut(it + 1);
            let (h_prev, h_next) = (&h_done[it], &mut h_todo[0]);
            let (e_prev, e_next) = (&e_done[it], &mut e_todo[0]);
            let (src, dst) = (&g.src, &g.dst);
            let node_first = self.cfg.update_order == UpdateOrder::NodeFirst;
            // Edge first: e_{it+1} from h_it, then h_{it+1} from e_{it+1}. Node first: h_{it+1}
            // from e_it, then e_{it+1} from h_{it+1}.
            if !node_first {
                edge_net.split_precompute(ps, h_prev, h, &mut a, &mut b);
                let input = Input::Split { a: &a, b: &b, src, dst, h_dim: h, rest: Some((e_prev, h)) };
                let residual = self.cfg.residual.then_some(&e_prev[..]);
                edge_net.forward_residual(ps, input, e, &mut cache.edge_net[it], e_next, residual);
            }
            let e_agg: &[T] = if node_first { e_prev } else { e_next };
            let node_in = &mut cache.node_in[it];
            copy_columns(h_prev, h, node_in, ld, 0);
            let (agg_in, agg_out) = &mut cache.agg[it];
            aggregate::forward(e_agg, h, &g.in_edges, aggs, node_in, ld, h, agg_in);
            aggregate::forward(e_agg, h, &g.out_edges, aggs, node_in, ld, (1 + k) * h, agg_out);
            let input = Input::Dense { x: node_in, dim: ld };
            let residual = self.cfg.residual.then_some(&h_prev[..]);
            node_net.forward_residual(ps, input, n, &mut cache.node_net[it], h_next, residual);
            g.exchange_states(h_next, h);
            if node_first {
                edge_net.split_precompute(ps, h_next, h, &mut a, &mut b);
                let input = Input::Split { a: &a, b: &b, src, dst, h_dim: h, rest: Some((e_prev, h)) };
                let residual = self.cfg.residual.then_some(&e_prev[..]);
                edge_net.forward_residual(ps, input, e, &mut cache.edge_net[it], e_next, residual);
            }
        }
        // Classifier.
        self.classifier.split_precompute(ps, &cache.h[iters], h, &mut a, &mut b);
        cache.logits.resize(e, T::ZERO);
        let rest = Some((&cache.e[iters][..], h));
        let input = Input::Split { a: &a, b: &b, src: &g.src, dst: &g.dst, h_dim: h, rest };
        self.classifier.forward(ps, input, e, &mut cache.classifier, &mut cache.logits);
        // The auxiliary head reads the same e_L.
        cache.aux.clear();
        if let Some(head) = &self.aux_head {
            cache.aux.resize(e, T::ZERO);
            let input = Input::Dense { x: &cache.e[iters], dim: h };
            head.forward(ps, input, e, &mut cache.aux_head, &mut cache.aux);
        }
        cache.scratch_a = a;
        cache.scratch_b = b;
    }

    /// The forward without the engine's tricks, for comparison: every edge MLP gets its input
    /// cat(h\[src\], h\[dst\], e) materialised (E × 3H) and one full Linear over all edges. Same
    /// results as [`InteractionGnn::forward`] up to rounding; returns the logits.
    pub fn forward_unfused(&self, g: &GraphInput<T>) -> Vec<T> {
        let (n, e, h) = (g.num_nodes, g.num_edges(), self.cfg.hidden);
        let ps = &self.params;
        let k = self.cfg.aggregation.len();
        let concat = |hs: &[T], rest: Option<(&[T], usize)>| -> (Vec<T>, usize) {
            let rd = rest.map_or(0, |r| r.1);
            let w = 2 * h + rd;
            let mut x = vec![T::ZERO; e * w];
            x.par_chunks_mut(w).enumerate().for_each(|(i, row)| {
                let (s, d) = (g.src[i] as usize, g.dst[i] as usize);
                row[..h].copy_from_slice(&hs[s * h..(s + 1) * h]);
                row[h..2 * h].copy_from_slice(&hs[d * h..(d + 1) * h]);
                if let Some((r, rd)) = rest {
                    row[2 * h..].copy_from_slice(&r[i * rd..(i + 1) * rd]);
                }
            });
            (x, w)
        };
        let mut c = MlpCache::default();
        let mut hs = vec![T::ZERO; n * h];
        self.node_encoder.forward(ps, Input::Dense { x: &g.x, dim: g.node_dim }, n, &mut c, &mut hs);
        let (x, w) = concat(&hs, (g.edge_dim > 0).then_some((&g.edge_attr[..], g.edge_dim)));
        let mut es = vec![T::ZERO; e * h];
        self.edge_encoder.forward(ps, Input::Dense { x: &x, dim: w }, e, &mut c, &mut es);
        let ld = (1 + 2 * k) * h;
        let edge_update = |edge_net: &Mlp, hs: &[T], es: &[T], c: &mut MlpCache<T>| {
            let (x, w) = concat(hs, Some((es, h)));
            let mut e_next = vec![T::ZERO; e * h];
            edge_net.forward(ps, Input::Dense { x: &x, dim: w }, e, c, &mut e_next);
            if self.cfg.residual {
                add_into(&mut e_next, es);
            }
            e_next
        };
        let node_update = |node_net: &Mlp, hs: &[T], es: &[T], c: &mut MlpCache<T>| {
            let mut node_in = vec![T::ZERO; n * ld];
            copy_columns(hs, h, &mut node_in, ld, 0);
            let mut ac = AggCache::default();
            aggregate::forward(es, h, &g.in_edges, &self.cfg.aggregation, &mut node_in, ld, h, &mut ac);
            aggregate::forward(es, h, &g.out_edges, &self.cfg.aggregation, &mut node_in, ld, (1 + k) * h, &mut ac);
            let mut h_next = vec![T::ZERO; n * h];
            node_net.forward(ps, Input::Dense { x: &node_in, dim: ld }, n, c, &mut h_next);
            if self.cfg.residual {
                add_into(&mut h_next, hs);
            }
            h_next
        };
        for it in 0..self.cfg.iterations {
            let (edge_net, node_net) = self.nets(it);
            match self.cfg.update_order {
                UpdateOrder::EdgeFirst => {
                    es = edge_update(edge_net, &hs, &es, &mut c);
                    hs = node_update(node_net, &hs, &es, &mut c);
                }
                UpdateOrder::NodeFirst => {
                    hs = node_update(node_net, &hs, &es, &mut c);
                    es = edge_update(edge_net, &hs, &es, &mut c);
                }
            }
        }
        let (x, w) = concat(&hs, Some((&es, h)));
        let mut logits = vec![T::ZERO; e];
        self.classifier.forward(ps, Input::Dense { x: &x, dim: w }, e, &mut c, &mut logits);
        logits
    }

    /// Backward from dL/dlogits; accumulates into `self.params.grad`. The gradient buffers live
    /// in the cache's workspace and are reused from call to call.
    pub fn backward(&mut self, g: &GraphInput<T>, cache: &mut ForwardCache<T>, dlogits: &[T]) {
        self.backward_aux(g, cache, dlogits, None);
    }

    /// [`InteractionGnn::backward`] with, for a model with the auxiliary head, dL/d(its
    /// predictions) in `daux` (one per edge): a second upstream gradient, which the head's
    /// backward adds to dL/de_L next to the classifier's. `None` leaves the head out of the
    /// backward (its gradients stay as they are).
    ///
    /// # Panics
    /// If `daux` is given to a model without the head, or its length is not the edge count.
    #[track_caller]
    pub fn backward_aux(&mut self, g: &GraphInput<T>, cache: &mut ForwardCache<T>, dlogits: &[T], daux: Option<&[T]>) {
        if let Some(d) = daux {
            assert!(self.aux_head.is_some(), "backward_aux: the model has no auxiliary head");
            assert_eq!(d.len(), g.num_edges(), "backward_aux: daux shape");
        }
        if self.checkpointing.is_on() {
            return self.backward_checkpointed(g, cache, dlogits, daux);
        }
        let (n, e, h) = (g.num_nodes, g.num_edges(), self.cfg.hidden);
        let iters = self.cfg.iterations;
        let k = self.cfg.aggregation.len();
        let ld = (1 + 2 * k) * h;
        let mut grad = std::mem::take(&mut self.params.grad);
        let mut ws = std::mem::take(&mut cache.workspace);
        let ps = &self.params;
        ws.dz1.resize(e * h, T::ZERO);
        ws.dnode_in.resize(n * ld, T::ZERO);
        for v in [&mut ws.dh, &mut ws.dh_prev] {
            v.clear();
            v.resize(n * h, T::ZERO);
        }
        ws.de.clear();
        ws.de.resize(e * h, T::ZERO);
        traffic::add(Pass::Elementwise, traffic::of::<T>(e * h + 2 * n * h));
        let (src, dst) = (&g.src[..], &g.dst[..]);
        let split = |rest| Input::Split { a: &[], b: &[], src, dst, h_dim: h, rest };
        // Classifier: inputs h_L (split) and e_L.
        // The classifier's first layer is H wide, or 1 wide when it is the only layer.
        let d1 = self.classifier.layers[0].dout;
        let input = split(Some((&cache.e[iters][..], h)));
        let din = DInput::Split { dz1: &mut ws.dz1[..e * d1], drest: Some(&mut ws.de) };
        self.classifier.backward(ps, input, Acts::Cached(&cache.classifier), DOut::Given(dlogits), &mut grad, din);
        if let (Some(head), Some(daux)) = (&self.aux_head, daux) {
            // The head's dL/de_L adds to the classifier's.
            let input = Input::Dense { x: &cache.e[iters], dim: h };
            let acts = Acts::Cached(&cache.aux_head);
            head.backward(ps, input, acts, DOut::Given(daux), &mut grad, DInput::Dense(&mut ws.de));
        }
        let (o, i) = (&g.out_edges, &g.in_edges);
        let (hl, dz1) = (&cache.h[iters], &ws.dz1[..e * d1]);
        self.classifier.split_backward_nodes(ps, dz1, hl, h, o, i, &mut grad, &mut ws.dh, &mut ws.split);
        let node_first = self.cfg.update_order == UpdateOrder::NodeFirst;
        for it in (0..iters).rev() {
            let (edge_net, node_net) = self.nets(it);
            let edges = Acts::Cached(&cache.edge_net[it]);
            let nodes = Acts::Cached(&cache.node_net[it]);
            let (agg_in, agg_out) = &cache.agg[it];
            let node_in = &cache.node_in[it];
            let e_it = &cache.e[it][..];
            if node_first {
                // e_{it+1} from h_{it+1} and e_it, after h_{it+1} from h_it and agg(e_it).
                let input = split(Some((e_it, h)));
                let Workspace { dz1, de, dh, split, .. } = &mut ws;
                self.edge_update_backward(g, edge_net, input, edges, &cache.h[it + 1], &mut grad, dz1, de, dh, split);
                g.return_gradients(&mut ws.dh, h);
                self.node_update_backward(g, node_net, node_in, nodes, e_it, (agg_in, agg_out), &mut grad, &mut ws);
            } else {
                // h_{it+1} from h_it and agg(e_{it+1}), after e_{it+1} from h_it and e_it.
                let e_next = &cache.e[it + 1];
                g.return_gradients(&mut ws.dh, h);
                self.node_update_backward(g, node_net, node_in, nodes, e_next, (agg_in, agg_out), &mut grad, &mut ws);
                let input = split(Some((e_it, h)));
                let Workspace { dz1, de, dh_prev, split, .. } = &mut ws;
                self.edge_update_backward(g, edge_net, input, edges, &cache.h[it], &mut grad, dz1, de, dh_prev, split);
            }
            std::mem::swap(&mut ws.dh, &mut ws.dh_prev);
        }
        // Edge encoder: inputs h_0 (split) and the edge features; ws.de holds dL/de_0.
        let input = split((g.edge_dim > 0).then_some((&g.edge_attr[..], g.edge_dim)));
        let acts = (Acts::Cached(&cache.edge_encoder), &cache.node_encoder);
        self.encoders_backward(g, input, acts, &cache.h[0], &mut grad, &mut ws);
        self.params.grad = grad;
        cache.workspace = ws;
    }
}

/// Scratch of one message-passing iteration (checkpointed path).
#[derive(Clone, Debug, Default)]
pub struct IterScratch<T> {
    /// h·W_aᵀ of a split Linear.
    pub a: Vec<T>,
    /// h·W_bᵀ of a split Linear.
    pub b: Vec<T>,
    /// The node-network input.
    pub node_in: Vec<T>,
    /// Aggregation cache, incoming edges.
    pub agg_in: AggCache<T>,
    /// Aggregation cache, outgoing edges.
    pub agg_out: AggCache<T>,
    /// Largest recomputed segment held by a backward, bytes.
    pub peak_segment_bytes: usize,
}

impl<T> IterScratch<T> {
    /// Bytes held (capacities).
    pub fn bytes(&self) -> usize {
        let s = std::mem::size_of::<T>();
        (self.a.capacity() + self.b.capacity() + self.node_in.capacity()) * s
            + [&self.agg_in, &self.agg_out]
                .iter()
                .map(|c| (c.mean.capacity() + c.std.capacity()) * s + c.argmax.capacity() * 4)
                .sum::<usize>()
    }
}

impl<T: Real> InteractionGnn<T> {
    /// Inference: the logits of a graph with the least memory. The states roll through two
    /// buffers and nothing is kept for a backward, so a whole event fits where its training
    /// step needed checkpointing or sectors.
    pub fn infer(&self, g: &GraphInput<T>, cache: &mut ForwardCache<T>) -> Vec<T> {
        self.forward_rolling(g, cache, None, false);
        std::mem::take(&mut cache.logits)
    }

    /// [`InteractionGnn::infer`] that also runs the auxiliary head: the logits and its
    /// predictions of log10 pT (empty without the head), for validation.
    pub fn infer_aux(&self, g: &GraphInput<T>, cache: &mut ForwardCache<T>) -> (Vec<T>, Vec<T>) {
        self.forward_rolling(g, cache, None, true);
        (std::mem::take(&mut cache.logits), std::mem::take(&mut cache.aux))
    }

    /// A prediction, before running it, of [`InteractionGnn::engine_bytes`] for a graph of `n`
    /// nodes and `e` edges (with `edge_dim` edge features) with the current checkpointing mode:
    /// the buffers the forward and backward allocate, counted by shape. Used to decide whether a
    /// graph fits a memory budget; tested against the measured figure.
    pub fn estimate_step_bytes(&self, n: usize, e: usize) -> usize {
        let c = &self.cfg;
        let (h, l, d, k) = (c.hidden, c.iterations, c.mlp_depth, c.aggregation.len());
        let normed = c.norm != Norm::None;
        let rstd = |layers: usize| if normed { layers } else { 0 };
        let node_in = (1 + 2 * k) * h;
        let has = |a: crate::ops::Aggr| c.aggregation.contains(&a) as usize;
        let agg_cache = 2 * (2 * has(crate::ops::Aggr::Std) + has(crate::ops::Aggr::Max)) * h;
        let cls_width: usize = (c.classifier_depth - 1) * h + 1;
        // Per edge and per node, in scalars.
        let (seg, packed_states) = (self.checkpointing.segment(), self.checkpointing.bf16_states());
        // States kept at segment boundaries: 0, K, 2K, … and the last (none without checkpointing).
        let stored = if seg == 0 { 0 } else { (0..=l).filter(|&k| self.stored(k, seg)).count() };
        let (per_edge, per_node) = match seg {
            0 => (
                (l + 1) * h
                    + l * (d * h + rstd(d))
                    + d * h
                    + rstd(d)
                    + cls_width
                    + rstd(c.classifier_depth - 1)
                    + 1
                    + 2 * h,
                (l + 1) * h + l * (node_in + d * h + rstd(d) + agg_cache) + d * h + 2 * h + 2 * h + node_in + 2 * h,
            ),
            seg => {
                let transient = (seg - 1).min(l.saturating_sub(1));
                // bf16: the saved states count as packed below, plus one unpacked state at a time.
                let full = if packed_states { transient + 1 } else { stored + transient };
                (full * h + 2 * h + 1, full * h + node_in + agg_cache + d * h + 2 * h + node_in + 4 * h)
            }
        };
        // The auxiliary head: its predictions, and without checkpointing its cache (the
        // classifier's widths).
        let aux = c.aux_pt as usize;
        let per_edge = per_edge + aux * (1 + if seg == 0 { cls_width + rstd(c.classifier_depth - 1) } else { 0 });
        let packed = if packed_states { stored * h * 2 * (e + n) } else { 0 };
        // The MLPs' saved x̂ (or z), counted above at the width of T: half as many bytes when
        // saved in bf16 (the encoders only with checkpointing: its networks recompute theirs).
        let (pre_edge, pre_node) = match seg {
            0 => (l * d * h + d * h + (1 + aux) * cls_width, l * d * h + d * h),
            _ => (0, d * h),
        };
        let t = std::mem::size_of::<T>();
        let saved_less = if self.saved_activations() == Precision::Bf16 { t.saturating_sub(2) } else { 0 };
        (per_edge * e + per_node * n) * t - (pre_edge * e + pre_node * n) * saved_less
            + packed
            + 2 * self.params.len() * t
    }

    /// Bytes the engine holds for a step: activations kept by the forward, gradient workspace,
    /// scratch, the largest recomputed segment, parameters and gradients — summed from the
    /// buffers' capacities (what was allocated), not from shapes.
    pub fn engine_bytes(&self, cache: &ForwardCache<T>) -> usize {
        let s = std::mem::size_of::<T>();
        cache.bytes()
            + cache.workspace.bytes()
            + cache.iter_scratch.bytes()
            + cache.iter_scratch.peak_segment_bytes
            + (cache.scratch_a.capacity() + cache.scratch_b.capacity()) * s
            + (self.params.data.capacity() + self.params.grad.capacity()) * s
    }
}

impl InteractionGnn<f64> {
    /// The slow twin of [`InteractionGnn::forward`] (see [`crate::naive`]); returns the logits.
    pub fn forward_naive(&self, g: &GraphInput<f64>) -> Vec<f64> {
        let nets = |it: usize| {
            let (a, b) = self.nets(it);
            (a.clone(), b.clone())
        };
        crate::naive::forward_naive(
            &self.cfg,
            &self.params,
            &self.node_encoder,
            &self.edge_encoder,
            &nets,
            &self.classifier,
            g,
        )
    }
}

/// dst = src (residual: the gradient passes through) or 0.
fn set_or_zero<T: Real>(dst: &mut [T], src: &[T], copy: bool) {
    traffic::add(Pass::Elementwise, traffic::of::<T>(dst.len() * (1 + usize::from(copy))));
    if copy {
        dst.copy_from_slice(src);
    } else {
        dst.iter_mut().for_each(|v| *v = T::ZERO);
    }
}

fn add_into<T: Real>(a: &mut [T], b: &[T]) {
    traffic::add(Pass::Elementwise, traffic::of::<T>(3 * a.len()));
    a.par_chunks_mut(1 << 14).zip(b.par_chunks(1 << 14)).for_each(|(a, b)| crate::mlp::add_rows(a, b));
}

/// Copies `src` (rows × w) into columns col0.. of `dst` (rows × ld).
fn copy_columns<T: Real>(src: &[T], w: usize, dst: &mut [T], ld: usize, col0: usize) {
    traffic::add(Pass::Elementwise, traffic::of::<T>(2 * src.len()));
    dst.par_chunks_mut(ld).zip(src.par_chunks(w)).for_each(|(d, s)| d[col0..col0 + w].copy_from_slice(s));
}

/// out (rows × w) += columns col0..col0+w of `src` (rows × ld).
fn add_columns<T: Real>(src: &[T], ld: usize, col0: usize, w: usize, out: &mut [T]) {
    traffic::add(Pass::Elementwise, traffic::of::<T>(3 * out.len()));
    out.par_chunks_mut(w)
        .zip(src.par_chunks(ld))
        .for_each(|(o, s)| o.iter_mut().zip(&s[col0..col0 + w]).for_each(|(o, &v)| *o += v));
}
