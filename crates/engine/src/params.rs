//! Parameters in one flat buffer: every tensor is a named slice of `data`, its gradient the same
//! slice of `grad`. One buffer makes the optimiser a loop, checkpoints a copy and the
//! data-parallel all-reduce a single call.

use serde::{Deserialize, Serialize};

/// Name and shape of one parameter tensor, and where it lives in the flat buffer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamSpec {
    /// Dotted name, as in the PyTorch reference (`node_encoder.0.weight`).
    pub name: String,
    /// Shape, row-major; Linear weights are (out, in) as in `torch.nn.Linear`.
    pub shape: Vec<usize>,
    /// Offset of the first element in the flat buffer.
    pub offset: usize,
}

impl ParamSpec {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }
    /// True for an empty tensor.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The element range in the flat buffer.
    pub fn range(&self) -> std::ops::Range<usize> {
        self.offset..self.offset + self.len()
    }
}

/// All parameters of a model and their gradients.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamStore<T> {
    /// The tensors, in registration order.
    pub specs: Vec<ParamSpec>,
    /// Parameter values.
    pub data: Vec<T>,
    /// Gradients (same layout as `data`).
    pub grad: Vec<T>,
}

impl<T: Copy + Default> Default for ParamStore<T> {
    fn default() -> Self {
        ParamStore { specs: Vec::new(), data: Vec::new(), grad: Vec::new() }
    }
}

impl<T: Copy + Default> ParamStore<T> {
    /// Registers a tensor of `shape` filled with zeros; returns its index.
    pub fn add(&mut self, name: impl Into<String>, shape: &[usize]) -> usize {
        let offset = self.data.len();
        let spec = ParamSpec { name: name.into(), shape: shape.to_vec(), offset };
        self.data.resize(offset + spec.len(), T::default());
        self.grad.resize(offset + spec.len(), T::default());
        self.specs.push(spec);
        self.specs.len() - 1
    }

    /// Total number of scalar parameters.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True if there are no parameters.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The values of tensor `i`.
    pub fn value(&self, i: usize) -> &[T] {
        &self.data[self.specs[i].range()]
    }

    /// The values of tensor `i`, mutable.
    pub fn value_mut(&mut self, i: usize) -> &mut [T] {
        let r = self.specs[i].range();
        &mut self.data[r]
    }

    /// Sets every gradient to zero.
    pub fn zero_grad(&mut self) {
        crate::traffic::add(crate::traffic::Pass::Optimizer, crate::traffic::of::<T>(self.grad.len()));
        self.grad.iter_mut().for_each(|g| *g = T::default());
    }

    /// The index of the tensor named `name`.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.specs.iter().position(|s| s.name == name)
    }
}
