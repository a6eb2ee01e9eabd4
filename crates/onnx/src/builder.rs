//! A small ONNX graph builder: nodes with generated output names, constant initialisers.

use std::collections::HashSet;

use crate::proto::{AttributeProto, AttributeType, FLOAT, INT64, NodeProto, TensorProto};

/// Nodes and initialisers of a graph under construction, in topological order.
#[derive(Default)]
pub(crate) struct Builder {
    pub nodes: Vec<NodeProto>,
    pub initializers: Vec<TensorProto>,
    names: HashSet<String>,
    next: usize,
}

impl Builder {
    /// Adds a node `op(inputs)` with `attrs`; returns its (single) output's name.
    pub fn op(&mut self, op: &str, inputs: &[&str], attrs: Vec<AttributeProto>) -> String {
        self.next += 1;
        let out = format!("{}_{}", op.to_lowercase(), self.next);
        self.op_named(op, inputs, attrs, &out);
        out
    }

    /// Adds a node whose output is called `out`.
    pub fn op_named(&mut self, op: &str, inputs: &[&str], attrs: Vec<AttributeProto>, out: &str) {
        self.nodes.push(NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![out.to_string()],
            name: format!("n{}_{}", self.nodes.len(), op),
            op_type: op.to_string(),
            attribute: attrs,
        });
    }

    /// A float32 initialiser called `name` (row-major `data` of shape `dims`); a name already
    /// given keeps its first value (shared weights of recurrent networks are stored once).
    pub fn f32(&mut self, name: &str, dims: &[usize], data: &[f32]) -> String {
        debug_assert_eq!(dims.iter().product::<usize>(), data.len());
        if self.names.insert(name.to_string()) {
            self.initializers.push(f32_tensor(name, dims, data));
        }
        name.to_string()
    }

    /// An int64 initialiser called `name`.
    pub fn i64(&mut self, name: &str, dims: &[usize], data: &[i64]) -> String {
        debug_assert_eq!(dims.iter().product::<usize>(), data.len());
        assert!(self.names.insert(name.to_string()), "initialiser `{name}` given twice");
        self.initializers.push(TensorProto {
            dims: dims.iter().map(|&d| d as i64).collect(),
            data_type: INT64,
            name: name.to_string(),
            raw_data: data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        });
        name.to_string()
    }
}

/// A float32 tensor (initialiser or attribute value).
pub(crate) fn f32_tensor(name: &str, dims: &[usize], data: &[f32]) -> TensorProto {
    TensorProto {
        dims: dims.iter().map(|&d| d as i64).collect(),
        data_type: FLOAT,
        name: name.to_string(),
        raw_data: data.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }
}

/// An integer attribute.
pub(crate) fn attr_i(name: &str, i: i64) -> AttributeProto {
    AttributeProto { name: name.into(), i, r#type: AttributeType::Int as i32, ..Default::default() }
}

/// A float attribute.
pub(crate) fn attr_f(name: &str, f: f32) -> AttributeProto {
    AttributeProto { name: name.into(), f, r#type: AttributeType::Float as i32, ..Default::default() }
}

/// A string attribute.
pub(crate) fn attr_s(name: &str, s: &str) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        s: s.as_bytes().to_vec(),
        r#type: AttributeType::String as i32,
        ..Default::default()
    }
}

/// A tensor attribute (ConstantOfShape's fill value).
pub(crate) fn attr_t(name: &str, t: TensorProto) -> AttributeProto {
    AttributeProto { name: name.into(), t: Some(t), r#type: AttributeType::Tensor as i32, ..Default::default() }
}
