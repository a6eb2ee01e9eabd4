//! The model's MLPs as the device code walks them: each layer's parameter offsets in the flat
//! buffer, its norm and activation, read from the host model's [`ParamStore`] names and its
//! [`ModelConfig`] (the rules of [`InteractionGnn::new`]).

use trackgnn_engine::ops::Activation;
use trackgnn_engine::{InteractionGnn, ModelConfig, Norm, ParamStore};

/// One Linear layer and what follows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerLayout {
    /// Offset of the weight (dout × din) in the flat parameter buffer.
    pub w: usize,
    /// Offset of the bias (dout).
    pub b: usize,
    /// Offsets of LayerNorm's γ and β, for an affine norm.
    pub affine: Option<(usize, usize)>,
    /// Whether a LayerNorm follows the Linear.
    pub norm: bool,
    /// The activation, numbered as the kernels' `act_f`.
    pub act: i32,
    /// Input width.
    pub din: usize,
    /// Output width.
    pub dout: usize,
}

/// The layers of one MLP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MlpLayout {
    /// The layers in order.
    pub layers: Vec<LayerLayout>,
}

impl MlpLayout {
    /// Output width.
    pub fn dout(&self) -> usize {
        self.layers.last().expect("an MLP has layers").dout
    }
}

/// Every MLP of an InteractionGNN.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelLayout {
    /// Node encoder.
    pub node_encoder: MlpLayout,
    /// Edge encoder (split first layer on h\[src\], h\[dst\], edge features).
    pub edge_encoder: MlpLayout,
    /// Edge networks: one, or one per iteration.
    pub edge_networks: Vec<MlpLayout>,
    /// Node networks: one, or one per iteration.
    pub node_networks: Vec<MlpLayout>,
    /// Edge classifier (split first layer on h\[src\], h\[dst\], e).
    pub classifier: MlpLayout,
    /// The auxiliary pT head, when the model has it.
    pub aux_head: Option<MlpLayout>,
}

/// The kernels' number of an activation.
pub fn act_code(a: Activation) -> i32 {
    match a {
        Activation::Relu => 0,
        Activation::Silu => 1,
        Activation::Tanh => 2,
        Activation::Identity => 3,
    }
}

impl ModelLayout {
    /// The layout of `model`.
    ///
    /// # Panics
    /// If a tensor the configuration implies is missing (a model not built by
    /// [`InteractionGnn::new`]).
    pub fn of(model: &InteractionGnn<f32>) -> Self {
        let cfg = &model.cfg;
        let ps = &model.params;
        let depth = cfg.mlp_depth;
        let net = |name: &str| {
            mlp(ps, cfg, name, depth, |l| {
                if l + 1 < depth { (true, cfg.activation) } else { (cfg.output_norm, cfg.output_activation) }
            })
        };
        let cd = cfg.classifier_depth;
        let cls = |name: &str| {
            mlp(ps, cfg, name, cd, |l| if l + 1 < cd { (true, cfg.activation) } else { (false, Activation::Identity) })
        };
        let n_nets = if cfg.recurrent { 1 } else { cfg.iterations };
        let suffix = |i: usize| if cfg.recurrent { String::new() } else { format!(".{i}") };
        ModelLayout {
            node_encoder: net("node_encoder"),
            edge_encoder: net("edge_encoder"),
            edge_networks: (0..n_nets).map(|i| net(&format!("edge_network{}", suffix(i)))).collect(),
            node_networks: (0..n_nets).map(|i| net(&format!("node_network{}", suffix(i)))).collect(),
            classifier: cls("edge_classifier"),
            aux_head: cfg.aux_pt.then(|| cls("aux_pt")),
        }
    }

    /// The edge and node networks of iteration `it`.
    pub fn nets(&self, cfg: &ModelConfig, it: usize) -> (&MlpLayout, &MlpLayout) {
        let i = if cfg.recurrent { 0 } else { it };
        (&self.edge_networks[i], &self.node_networks[i])
    }
}

/// The layout of MLP `name` of `layers` layers; `style(l)`: (whether the configuration's norm
/// applies after layer l, its activation).
fn mlp(
    ps: &ParamStore<f32>,
    cfg: &ModelConfig,
    name: &str,
    layers: usize,
    style: impl Fn(usize) -> (bool, Activation),
) -> MlpLayout {
    let offset = |t: &str| {
        let i = ps.find(t).unwrap_or_else(|| panic!("model has no tensor {t}"));
        ps.specs[i].offset
    };
    let shape = |t: &str| ps.specs[ps.find(t).unwrap_or_else(|| panic!("model has no tensor {t}"))].shape.clone();
    let layers = (0..layers)
        .map(|l| {
            let w = format!("{name}.{l}.weight");
            let s = shape(&w);
            let (normed, act) = style(l);
            let norm = normed && cfg.norm != Norm::None;
            let affine = (norm && cfg.norm == Norm::Affine)
                .then(|| (offset(&format!("{name}.{l}.norm.weight")), offset(&format!("{name}.{l}.norm.bias"))));
            LayerLayout {
                w: offset(&w),
                b: offset(&format!("{name}.{l}.bias")),
                affine,
                norm,
                act: act_code(act),
                din: s[1],
                dout: s[0],
            }
        })
        .collect();
    MlpLayout { layers }
}
