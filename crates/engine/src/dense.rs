//! A stand-alone MLP on rows (one row per hit, or per candidate edge) with its own parameters:
//! the network of the metric-learning embedding and of the edge filter that prunes its graph.
//! Forward and hand-derived backward are those of [`Mlp`] on a dense input.

use serde::{Deserialize, Serialize};
use trackgnn_trackml::rng::Rng;

use crate::mlp::{Acts, DInput, DOut, Input, LayerStyle, Mlp, MlpCache};
use crate::ops::Activation;
use crate::params::ParamStore;
use crate::real::Real;

/// The shape of a [`DenseNet`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DenseNetConfig {
    /// Width of the hidden layers.
    pub hidden: usize,
    /// Number of hidden layers (each Linear, LayerNorm, Tanh).
    pub hidden_layers: usize,
    /// Output width (the embedding dimension; 1 for a classifier's logit).
    pub out: usize,
}

impl Default for DenseNetConfig {
    fn default() -> Self {
        DenseNetConfig { hidden: 64, hidden_layers: 3, out: 8 }
    }
}

/// An MLP `input → hidden × hidden_layers → out`, the last layer linear.
#[derive(Clone, Debug)]
pub struct DenseNet<T> {
    /// Its parameters (tensors `net.{l}.weight`, `net.{l}.bias`, `net.{l}.norm.*`).
    pub params: ParamStore<T>,
    /// The layers.
    pub mlp: Mlp,
    /// Input width.
    pub input: usize,
}

impl<T: Real> DenseNet<T> {
    /// A network with PyTorch's default initialisation (uniform ±1/√fan_in).
    pub fn new(cfg: &DenseNetConfig, input: usize, rng: &mut Rng) -> Self {
        let mut dims = vec![input];
        dims.extend(std::iter::repeat_n(cfg.hidden, cfg.hidden_layers));
        dims.push(cfg.out);
        let last = dims.len() - 2;
        let mut params = ParamStore::default();
        let mlp = Mlp::register(&mut params, "net", &dims, |l| {
            if l == last {
                LayerStyle { norm: None, act: Activation::Identity }
            } else {
                LayerStyle { norm: Some(true), act: Activation::Tanh }
            }
        });
        for layer in &mlp.layers {
            let bound = 1.0 / (layer.din as f64).sqrt();
            for i in [layer.w, layer.b] {
                for v in params.value_mut(i) {
                    *v = T::from_f64(rng.range(-bound, bound));
                }
            }
            if let Some((Some(g), _)) = layer.norm {
                params.value_mut(g).iter_mut().for_each(|v| *v = T::ONE);
            }
        }
        DenseNet { params, mlp, input }
    }

    /// Output width.
    pub fn out(&self) -> usize {
        self.mlp.dout()
    }

    /// The outputs (rows × out) of rows `x` (rows × input), keeping nothing for a backward.
    pub fn infer(&self, x: &[T]) -> Vec<T> {
        let rows = x.len() / self.input;
        let mut out = vec![T::ZERO; rows * self.out()];
        if rows > 0 {
            self.mlp.forward_nocache(&self.params, Input::Dense { x, dim: self.input }, rows, &mut out);
        }
        out
    }

    /// The outputs of rows `x`, filling `cache` for [`DenseNet::backward`].
    pub fn forward(&self, x: &[T], cache: &mut MlpCache<T>) -> Vec<T> {
        let rows = x.len() / self.input;
        let mut out = vec![T::ZERO; rows * self.out()];
        self.mlp.forward(&self.params, Input::Dense { x, dim: self.input }, rows, cache, &mut out);
        out
    }

    /// Accumulates the parameter gradients into `params.grad` given dL/d(output).
    pub fn backward(&mut self, x: &[T], cache: &MlpCache<T>, dout: &[T]) {
        if cache.rows == 0 {
            return;
        }
        let DenseNet { params, mlp, input } = self;
        let mut grad = std::mem::take(&mut params.grad);
        mlp.backward(
            params,
            Input::Dense { x, dim: *input },
            Acts::Cached(cache),
            DOut::Given(dout),
            &mut grad,
            DInput::None,
        );
        params.grad = grad;
    }
}
