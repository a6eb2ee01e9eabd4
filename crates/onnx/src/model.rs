//! The InteractionGNN as an ONNX graph: the same computation as the engine's forward
//! (`trackgnn_engine::naive` spells it out), written with standard ONNX operators.
//!
//! | piece                          | ONNX operators                                  | opset |
//! |--------------------------------|-------------------------------------------------|-------|
//! | Linear                         | Gemm (transB = 1, weights stored `[out, in]`)   | 13    |
//! | LayerNorm (affine or not)      | LayerNormalization (ε = 1e-5, last axis)        | 17    |
//! | ReLU / SiLU / Tanh             | Relu / Sigmoid·Mul / Tanh                       | 14    |
//! | h\[src\], h\[dst\]             | Gather (axis 0)                                 | 13    |
//! | sum, mean, std aggregation     | ScatterElements reduction `add`                 | 16    |
//! | max aggregation                | ScatterElements reduction `max`                 | 18    |
//!
//! The file's opset is the smallest that holds every operator the model needs: 16 for sum /
//! mean / std without norms, 17 with LayerNorm, 18 with the max aggregation.
//!
//! Nodes without edges get what the engine gives them: 0 for sum, mean and max (the max
//! scatter starts from the lowest float and a `Where` on the edge count puts 0 back), √ε for
//! std.

use trackgnn_engine::config::Norm;
use trackgnn_engine::ops::aggregate::STD_EPS;
use trackgnn_engine::ops::layer_norm::EPS as LN_EPS;
use trackgnn_engine::ops::{Activation, Aggr};
use trackgnn_engine::{InteractionGnn, ModelConfig, UpdateOrder};

use crate::builder::{Builder, attr_f, attr_i, attr_s, attr_t, f32_tensor};
use crate::error::{Error, Result};
use crate::proto::{
    Dimension, DimensionValue, FLOAT, GraphProto, INT64, ModelProto, OperatorSetIdProto, StringStringEntryProto,
    TensorShapeProto, TypeProto, TypeProtoTensor, ValueInfoProto,
};

/// The node feature input's name (the names the ACTS TensorRT backend looks up).
pub const INPUT_X: &str = "x";
/// The edge index input's name.
pub const INPUT_EDGE_INDEX: &str = "edge_index";
/// The edge feature input's name.
pub const INPUT_EDGE_ATTR: &str = "edge_attr";
/// The output's name: one logit per edge.
pub const OUTPUT: &str = "output";
/// ONNX IR version written (opsets 16–18 belong to IR 8).
pub const IR_VERSION: i64 = 8;

/// Name, element type and shape of a graph input or output (symbolic dimensions by name).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TensorInfo {
    /// The tensor's name.
    pub name: String,
    /// `float32` or `int64`.
    pub dtype: String,
    /// Dimensions: a number, or a symbol (`N`, `E`, `F_e`) that varies from call to call.
    pub shape: Vec<String>,
}

/// An exported model: the serialised ONNX file and what it holds.
#[derive(Clone, Debug)]
pub struct OnnxModel {
    /// The `.onnx` file's bytes.
    pub bytes: Vec<u8>,
    /// The opset (default domain) the file declares.
    pub opset: i64,
    /// The inputs, in the order the ACTS plugin fills them.
    pub inputs: Vec<TensorInfo>,
    /// The output (logits, shape `[E]`).
    pub output: TensorInfo,
    /// ONNX nodes in the graph.
    pub nodes: usize,
}

/// The opset a model needs: 16 (ScatterElements `add`), 17 with LayerNorm, 18 with max.
pub fn required_opset(norm: Norm, aggregation: &[Aggr]) -> i64 {
    if aggregation.contains(&Aggr::Max) {
        18
    } else if norm != Norm::None {
        17
    } else {
        16
    }
}

/// Writes `model` (its f32 weights) as an ONNX graph with inputs `x [N, node_dim]`,
/// `edge_index [2, E]` and, when the model has edge features, `edge_attr [E, F_e]` (its first
/// `edge_dim` columns are used, so a wider tensor such as the ACTS module map's six columns
/// fits), and the output `output [E]`: the logits.
///
/// # Errors
/// A weight tensor missing or of the wrong size (a model not built by
/// [`InteractionGnn::new`]).
pub fn export_model(model: &InteractionGnn<f32>, doc: &str) -> Result<OnnxModel> {
    let cfg = &model.cfg;
    cfg.validate().map_err(|e| Error::Unsupported(e.message))?;
    let hd = cfg.hidden;
    let mut b = Builder::default();
    let w = Weights { model };

    let zero = b.i64("c_zero", &[], &[0]);
    let one = b.i64("c_one", &[], &[1]);
    let src = b.op("Gather", &[INPUT_EDGE_INDEX, &zero], vec![attr_i("axis", 0)]);
    let dst = b.op("Gather", &[INPUT_EDGE_INDEX, &one], vec![attr_i("axis", 0)]);

    let mlp = |b: &mut Builder, x: &str, name: &str, kind: MlpKind| -> Result<String> {
        w.mlp(b, MlpInput::Dense(x), name, kind)
    };
    // An MLP on cat(h[src], h[dst], rest) per edge, without building the concatenation.
    let edge_mlp = |b: &mut Builder, h: &str, rest: Option<&str>, name: &str, kind: MlpKind| -> Result<String> {
        w.mlp(b, MlpInput::Edges { h, src: &src, dst: &dst, rest }, name, kind)
    };

    let mut h = mlp(&mut b, INPUT_X, "node_encoder", MlpKind::Network)?;
    let ea = (model.edge_dim > 0).then(|| {
        let starts = b.i64("c_ea_start", &[1], &[0]);
        let ends = b.i64("c_ea_end", &[1], &[model.edge_dim as i64]);
        let axes = b.i64("c_axis1", &[1], &[1]);
        b.op("Slice", &[INPUT_EDGE_ATTR, &starts, &ends, &axes], vec![])
    });
    let mut e = edge_mlp(&mut b, &h, ea.as_deref(), "edge_encoder", MlpKind::Network)?;

    // The graph's structure is the same in every iteration: edge counts, scatter indices.
    let aggs = &cfg.aggregation;
    let needs_denom = aggs.iter().any(|a| matches!(a, Aggr::Mean | Aggr::Std));
    let needs_max = aggs.contains(&Aggr::Max);
    let axes1 = b.i64("c_unsq_axes", &[1], &[1]);
    let s0 = b.i64("c_s0", &[1], &[0]);
    let s1 = b.i64("c_s1", &[1], &[1]);
    let s2 = b.i64("c_s2", &[1], &[2]);
    let shape_x = b.op("Shape", &[INPUT_X], vec![]);
    let n = b.op("Slice", &[&shape_x, &s0, &s1], vec![]);
    let shape_ei = b.op("Shape", &[INPUT_EDGE_INDEX], vec![]);
    let num_e = b.op("Slice", &[&shape_ei, &s1, &s2], vec![]);
    let width_h = b.i64("c_hidden", &[1], &[hd as i64]);
    let n1_shape = b.op("Concat", &[&n, &s1], vec![attr_i("axis", 0)]);
    let nh_shape = b.op("Concat", &[&n, &width_h], vec![attr_i("axis", 0)]);
    let eh_shape = b.op("Concat", &[&num_e, &width_h], vec![attr_i("axis", 0)]);
    let zeros_n1 = b.op("ConstantOfShape", &[&n1_shape], vec![attr_t("value", f32_tensor("", &[1], &[0.0]))]);
    let zeros_nh = b.op("ConstantOfShape", &[&nh_shape], vec![attr_t("value", f32_tensor("", &[1], &[0.0]))]);
    let lowest_nh = needs_max
        .then(|| b.op("ConstantOfShape", &[&nh_shape], vec![attr_t("value", f32_tensor("", &[1], &[f32::MIN]))]));
    let c_one_f = b.f32("c_one_f", &[], &[1.0]);
    let c_zero_f = b.f32("c_zero_f", &[], &[0.0]);
    let c_std_eps = b.f32("c_std_eps", &[], &[STD_EPS as f32]);
    let directions: Vec<Direction> = [&dst, &src]
        .into_iter()
        .map(|end| {
            let col = b.op("Unsqueeze", &[end, &axes1], vec![]);
            let e1_shape = b.op("Shape", &[&col], vec![]);
            let ones_e1 = b.op("ConstantOfShape", &[&e1_shape], vec![attr_t("value", f32_tensor("", &[1], &[1.0]))]);
            let count = b.op("ScatterElements", &[&zeros_n1, &col, &ones_e1], scatter_attrs("add"));
            let denom = needs_denom.then(|| b.op("Max", &[&count, &c_one_f], vec![]));
            let has_edges = needs_max.then(|| b.op("Greater", &[&count, &c_zero_f], vec![]));
            let index = b.op("Expand", &[&col, &eh_shape], vec![]);
            Direction { end: end.to_string(), index, denom, has_edges }
        })
        .collect();

    // The node update: the node network on cat(h, aggregations of e by dst, by src).
    let node_update = |b: &mut Builder, h: &str, e: &str, name: &str| -> Result<String> {
        let mut node_in = vec![h.to_string()];
        for d in &directions {
            let mut sum = None;
            let mut sum_of = |b: &mut Builder| -> String {
                sum.get_or_insert_with(|| b.op("ScatterElements", &[&zeros_nh, &d.index, e], scatter_attrs("add")))
                    .clone()
            };
            for a in aggs {
                let out = match a {
                    Aggr::Sum => sum_of(b),
                    Aggr::Mean => {
                        let s = sum_of(b);
                        b.op("Div", &[&s, d.denom.as_deref().expect("denominator")], vec![])
                    }
                    Aggr::Max => {
                        let lowest = lowest_nh.as_deref().expect("max start");
                        let m = b.op("ScatterElements", &[lowest, &d.index, e], scatter_attrs("max"));
                        let has = d.has_edges.as_deref().expect("edge counts");
                        b.op("Where", &[has, &m, &zeros_nh], vec![])
                    }
                    Aggr::Std => {
                        let s = sum_of(b);
                        let denom = d.denom.as_deref().expect("denominator");
                        let mean = b.op("Div", &[&s, denom], vec![]);
                        let mean_e = b.op("Gather", &[&mean, &d.end], vec![attr_i("axis", 0)]);
                        let dev = b.op("Sub", &[e, &mean_e], vec![]);
                        let sq = b.op("Mul", &[&dev, &dev], vec![]);
                        let ss = b.op("ScatterElements", &[&zeros_nh, &d.index, &sq], scatter_attrs("add"));
                        let var = b.op("Div", &[&ss, denom], vec![]);
                        let var_eps = b.op("Add", &[&var, &c_std_eps], vec![]);
                        b.op("Sqrt", &[&var_eps], vec![])
                    }
                };
                node_in.push(out);
            }
        }
        let refs: Vec<&str> = node_in.iter().map(String::as_str).collect();
        let x = b.op("Concat", &refs, vec![attr_i("axis", 1)]);
        let mut h_new = mlp(b, &x, name, MlpKind::Network)?;
        if cfg.residual {
            h_new = b.op("Add", &[&h_new, h], vec![]);
        }
        Ok(h_new)
    };
    // The edge update: the edge network on cat(h[src], h[dst], e).
    let edge_update = |b: &mut Builder, h: &str, e: &str, name: &str| -> Result<String> {
        let mut e_new = edge_mlp(b, h, Some(e), name, MlpKind::Network)?;
        if cfg.residual {
            e_new = b.op("Add", &[&e_new, e], vec![]);
        }
        Ok(e_new)
    };
    for it in 0..cfg.iterations {
        let suffix = if cfg.recurrent { String::new() } else { format!(".{it}") };
        let (edge_net, node_net) = (format!("edge_network{suffix}"), format!("node_network{suffix}"));
        match cfg.update_order {
            UpdateOrder::EdgeFirst => {
                e = edge_update(&mut b, &h, &e, &edge_net)?;
                h = node_update(&mut b, &h, &e, &node_net)?;
            }
            UpdateOrder::NodeFirst => {
                h = node_update(&mut b, &h, &e, &node_net)?;
                e = edge_update(&mut b, &h, &e, &edge_net)?;
            }
        }
    }
    let logits = edge_mlp(&mut b, &h, Some(&e), "edge_classifier", MlpKind::Classifier)?;
    let flat = b.i64("c_flat", &[1], &[-1]);
    b.op_named("Reshape", &[&logits, &flat], vec![], OUTPUT);

    let mut inputs = vec![
        info(INPUT_X, "float32", &["N".into(), model.node_dim.to_string()]),
        info(INPUT_EDGE_INDEX, "int64", &["2".into(), "E".into()]),
    ];
    if model.edge_dim > 0 {
        inputs.push(info(INPUT_EDGE_ATTR, "float32", &["E".into(), "F_e".into()]));
    }
    let output = info(OUTPUT, "float32", &["E".into()]);
    let opset = required_opset(cfg.norm, aggs);
    let nodes = b.nodes.len();
    let graph = GraphProto {
        node: b.nodes,
        name: "interaction_gnn".into(),
        initializer: b.initializers,
        doc_string: doc.into(),
        input: inputs.iter().map(value_info).collect(),
        output: vec![value_info(&output)],
    };
    let proto = ModelProto {
        ir_version: IR_VERSION,
        producer_name: "trackgnn".into(),
        producer_version: env!("CARGO_PKG_VERSION").into(),
        domain: String::new(),
        model_version: 1,
        doc_string: doc.into(),
        graph: Some(graph),
        opset_import: vec![OperatorSetIdProto { domain: String::new(), version: opset }],
        metadata_props: vec![StringStringEntryProto {
            key: "model_config".into(),
            // The auxiliary pT head is training-only: the exported graph has none.
            value: serde_json::to_string(&ModelConfig { aux_pt: false, ..cfg.clone() })
                .expect("a ModelConfig serialises"),
        }],
    };
    Ok(OnnxModel { bytes: prost::Message::encode_to_vec(&proto), opset, inputs, output, nodes })
}

/// Per aggregation direction (incoming: by dst; outgoing: by src): the edge end, the scatter
/// index `[E, H]`, max(edge count, 1) `[N, 1]` and edge count > 0 `[N, 1]` when needed.
struct Direction {
    end: String,
    index: String,
    denom: Option<String>,
    has_edges: Option<String>,
}

fn scatter_attrs(reduction: &str) -> Vec<crate::proto::AttributeProto> {
    vec![attr_i("axis", 0), attr_s("reduction", reduction)]
}

/// Encoders and message-passing networks, or the edge classifier: how each layer ends.
#[derive(Clone, Copy)]
enum MlpKind {
    Network,
    Classifier,
}

/// What an MLP reads.
enum MlpInput<'a> {
    /// A tensor.
    Dense(&'a str),
    /// cat(h\[src\], h\[dst\], rest) per edge. The first Linear is split by input columns, as
    /// the engine does it: W_src·h and W_dst·h per node (N rows), gathered to the edges, plus
    /// W_rest·rest — the same sum without an E × (2H + r) tensor.
    Edges { h: &'a str, src: &'a str, dst: &'a str, rest: Option<&'a str> },
}

/// The model's weights, looked up by the engine's tensor names.
struct Weights<'a> {
    model: &'a InteractionGnn<f32>,
}

impl Weights<'_> {
    fn tensor(&self, name: &str) -> Result<(&[f32], &[usize])> {
        let ps = &self.model.params;
        let i = ps.find(name).ok_or_else(|| Error::Weights(format!("the model has no tensor `{name}`")))?;
        Ok((ps.value(i), &ps.specs[i].shape))
    }

    /// MLP `name` applied to `input`: layers `name.0` to `name.{depth-1}`, each ending as
    /// `InteractionGnn::new` made it.
    fn mlp(&self, b: &mut Builder, input: MlpInput<'_>, name: &str, kind: MlpKind) -> Result<String> {
        let cfg = &self.model.cfg;
        let depth = match kind {
            MlpKind::Network => cfg.mlp_depth,
            MlpKind::Classifier => cfg.classifier_depth,
        };
        let mut cur = String::new();
        for l in 0..depth {
            let last = l + 1 == depth;
            let (norm, act) = match (kind, last) {
                (_, false) => (cfg.norm, cfg.activation),
                (MlpKind::Network, true) => {
                    (if cfg.output_norm { cfg.norm } else { Norm::None }, cfg.output_activation)
                }
                (MlpKind::Classifier, true) => (Norm::None, Activation::Identity),
            };
            let (wv, ws) = self.tensor(&format!("{name}.{l}.weight"))?;
            let (bv, _) = self.tensor(&format!("{name}.{l}.bias"))?;
            let bn = b.f32(&format!("{name}.{l}.bias"), &[bv.len()], bv);
            let (dout, din) = (ws[0], ws[1]);
            cur = match (l, &input) {
                (0, MlpInput::Dense(x)) => {
                    let wn = b.f32(&format!("{name}.{l}.weight"), ws, wv);
                    b.op("Gemm", &[x, &wn, &bn], vec![attr_i("transB", 1)])
                }
                (0, MlpInput::Edges { h, src, dst, rest }) => {
                    let hd = self.model.cfg.hidden;
                    if din < 2 * hd {
                        return Err(Error::Weights(format!(
                            "`{name}.0.weight` has {din} inputs, fewer than 2 × hidden"
                        )));
                    }
                    let cols = |c0: usize, c1: usize| -> Vec<f32> {
                        (0..dout).flat_map(|o| wv[o * din + c0..o * din + c1].iter().copied()).collect()
                    };
                    let ws_ = b.f32(&format!("{name}.{l}.weight.src"), &[dout, hd], &cols(0, hd));
                    let wd_ = b.f32(&format!("{name}.{l}.weight.dst"), &[dout, hd], &cols(hd, 2 * hd));
                    let a_src = b.op("Gemm", &[h, &ws_, &bn], vec![attr_i("transB", 1)]);
                    let a_dst = b.op("Gemm", &[h, &wd_], vec![attr_i("transB", 1)]);
                    let g_src = b.op("Gather", &[&a_src, src], vec![attr_i("axis", 0)]);
                    let g_dst = b.op("Gather", &[&a_dst, dst], vec![attr_i("axis", 0)]);
                    let mut z = b.op("Add", &[&g_src, &g_dst], vec![]);
                    if din > 2 * hd {
                        let rest =
                            rest.ok_or_else(|| Error::Weights(format!("`{name}` reads more than [h_src, h_dst]")))?;
                        let wr = b.f32(&format!("{name}.{l}.weight.rest"), &[dout, din - 2 * hd], &cols(2 * hd, din));
                        let r = b.op("Gemm", &[rest, &wr], vec![attr_i("transB", 1)]);
                        z = b.op("Add", &[&z, &r], vec![]);
                    }
                    z
                }
                _ => {
                    let wn = b.f32(&format!("{name}.{l}.weight"), ws, wv);
                    b.op("Gemm", &[&cur, &wn, &bn], vec![attr_i("transB", 1)])
                }
            };
            match norm {
                Norm::None => {}
                Norm::Affine => {
                    let (g, _) = self.tensor(&format!("{name}.{l}.norm.weight"))?;
                    let (beta, _) = self.tensor(&format!("{name}.{l}.norm.bias"))?;
                    let gn = b.f32(&format!("{name}.{l}.norm.weight"), &[dout], g);
                    let betan = b.f32(&format!("{name}.{l}.norm.bias"), &[dout], beta);
                    cur = layer_norm(b, &cur, &gn, &betan);
                }
                Norm::NoAffine => {
                    let (gn, betan) = (format!("c_ln_ones_{dout}"), format!("c_ln_zeros_{dout}"));
                    b.f32(&gn, &[dout], &vec![1.0; dout]);
                    b.f32(&betan, &[dout], &vec![0.0; dout]);
                    cur = layer_norm(b, &cur, &gn, &betan);
                }
            }
            cur = match act {
                Activation::Identity => cur,
                Activation::Relu => b.op("Relu", &[&cur], vec![]),
                Activation::Tanh => b.op("Tanh", &[&cur], vec![]),
                Activation::Silu => {
                    let s = b.op("Sigmoid", &[&cur], vec![]);
                    b.op("Mul", &[&cur, &s], vec![])
                }
            };
        }
        if self.model.params.find(&format!("{name}.{depth}.weight")).is_some() {
            return Err(Error::Weights(format!("`{name}` has more layers than the configuration says ({depth})")));
        }
        Ok(cur)
    }
}

fn layer_norm(b: &mut Builder, x: &str, scale: &str, bias: &str) -> String {
    b.op("LayerNormalization", &[x, scale, bias], vec![attr_i("axis", -1), attr_f("epsilon", LN_EPS as f32)])
}

fn info(name: &str, dtype: &str, shape: &[String]) -> TensorInfo {
    TensorInfo { name: name.into(), dtype: dtype.into(), shape: shape.to_vec() }
}

fn value_info(t: &TensorInfo) -> ValueInfoProto {
    let dim = t
        .shape
        .iter()
        .map(|d| Dimension {
            value: Some(match d.parse::<i64>() {
                Ok(v) => DimensionValue::DimValue(v),
                Err(_) => DimensionValue::DimParam(d.clone()),
            }),
        })
        .collect();
    let elem_type = if t.dtype == "int64" { INT64 } else { FLOAT };
    ValueInfoProto {
        name: t.name.clone(),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor { elem_type, shape: Some(TensorShapeProto { dim }) }),
        }),
        doc_string: String::new(),
    }
}
