//! Fixtures of the weights and checkpoint tests, here and in the train crate (feature
//! `testing`).

use trackgnn_engine::ParamStore;
use trackgnn_engine::optim::AdamWState;

/// Three small named tensors with distinct values.
pub fn store() -> ParamStore<f32> {
    let mut p = ParamStore::default();
    p.add("node_encoder.0.weight", &[3, 2]);
    p.add("node_encoder.0.bias", &[3]);
    p.add("edge_classifier.2.weight", &[1, 3]);
    for (i, x) in p.data.iter_mut().enumerate() {
        *x = i as f32 * 0.25 - 1.0;
    }
    p
}

/// An optimiser state of `n` elements with distinct values.
pub fn opt_state(n: usize, amsgrad: bool) -> AdamWState {
    AdamWState {
        step: 1234,
        m: (0..n).map(|i| i as f32 * 0.5).collect(),
        v: (0..n).map(|i| i as f32 * 0.125 + 1.0).collect(),
        v_max: amsgrad.then(|| (0..n).map(|i| i as f32 + 2.0).collect()),
    }
}

/// Same specs, zero values.
pub fn blank(p: &ParamStore<f32>) -> ParamStore<f32> {
    ParamStore { data: vec![0.0; p.len()], ..p.clone() }
}
