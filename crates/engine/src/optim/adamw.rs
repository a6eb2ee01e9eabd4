//! AdamW, the update of `torch.optim.AdamW` (Loshchilov & Hutter, "Decoupled Weight Decay
//! Regularization", <https://arxiv.org/abs/1711.05101>).

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::CHUNK;

/// Settings of [`AdamW`]. `Default` gives PyTorch's defaults for `torch.optim.AdamW`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdamWConfig {
    /// Base learning rate γ (the schedule scales it; [`AdamW::step`] takes the value to use).
    pub lr: f64,
    /// Decay rates (β1, β2) of the first and second moment estimates.
    pub betas: (f64, f64),
    /// ε added to the denominator, after the square root, for numerical stability.
    pub eps: f64,
    /// Decoupled weight decay λ: every step multiplies the parameters by `1 − γλ`.
    pub weight_decay: f64,
    /// Use the running maximum of the second moment (AMSGrad, Reddi et al. 2018).
    pub amsgrad: bool,
}

impl Default for AdamWConfig {
    fn default() -> Self {
        AdamWConfig { lr: 1e-3, betas: (0.9, 0.999), eps: 1e-8, weight_decay: 0.01, amsgrad: false }
    }
}

/// The state of an [`AdamW`] optimiser, for checkpoints. The vectors have the layout of the
/// parameter buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct AdamWState {
    /// Number of steps taken (PyTorch's `state["step"]`).
    pub step: u64,
    /// First moment estimate (PyTorch's `exp_avg`).
    pub m: Vec<f32>,
    /// Second moment estimate (PyTorch's `exp_avg_sq`).
    pub v: Vec<f32>,
    /// Running maximum of `v` (PyTorch's `max_exp_avg_sq`); present with `amsgrad` only.
    pub v_max: Option<Vec<f32>>,
}

/// The AdamW optimiser over one flat parameter buffer.
///
/// Step `t` (counted from 1), with gradient `g`, learning rate γ, as in the algorithm box of
/// the PyTorch documentation of `torch.optim.AdamW`:
///
/// ```text
/// θ ← θ − γλθ                       (decoupled weight decay, computed as θ·(1 − γλ))
/// m ← β1·m + (1 − β1)·g
/// v ← β2·v + (1 − β2)·g²
/// m̂ = m / (1 − β1ᵗ)
/// if amsgrad: v_max ← max(v_max, v);  v̂ = v_max / (1 − β2ᵗ)
/// else:                               v̂ = v / (1 − β2ᵗ)
/// θ ← θ − γ·m̂ / (√v̂ + ε)
/// ```
///
/// The running maximum is taken over the raw `v`, before bias correction, and ε is added after
/// the square root, both as in PyTorch. Like PyTorch's single-tensor path, the elementwise
/// work is done in f32 in the same order of operations (`lerp` for `m`, `√v / √(1 − β2ᵗ) + ε`
/// for the denominator, `θ + (−γ/(1 − β1ᵗ))·m / denom` for the update); the bias corrections
/// and step scalars are computed in f64 and rounded to f32 once per step.
///
/// [`step`](Self::step) splits the buffer into fixed chunks processed by rayon;
/// [`step_seq`](Self::step_seq) is its sequential twin. The update is elementwise, so both give
/// identical bits.
#[derive(Clone, Debug)]
pub struct AdamW {
    cfg: AdamWConfig,
    m: Vec<f32>,
    v: Vec<f32>,
    v_max: Option<Vec<f32>>,
    step: u64,
}

/// The per-step scalars, rounded to f32 once: what the elementwise update reads (a device's
/// AdamW kernel takes the same ones, [`AdamWConfig::step_scalars`]).
#[derive(Clone, Copy, Debug)]
pub struct Scalars {
    /// 1 − γλ.
    pub decay: f32,
    /// 1 − β1, the `lerp` weight.
    pub w1: f32,
    /// β2.
    pub b2: f32,
    /// 1 − β2.
    pub w2: f32,
    /// γ / (1 − β1ᵗ).
    pub step_size: f32,
    /// √(1 − β2ᵗ).
    pub bc2_sqrt: f32,
    /// ε.
    pub eps: f32,
}

impl AdamWConfig {
    /// The scalars of step `step` (counted from 1) at learning rate `lr`: bias corrections and
    /// step sizes in f64, rounded to f32 once.
    pub fn step_scalars(&self, step: u64, lr: f64) -> Scalars {
        let (b1, b2) = self.betas;
        // β^t in f64; exponents beyond i32 only happen when β^t has long underflowed to 0.
        let t = i32::try_from(step).unwrap_or(i32::MAX);
        let bc1 = 1.0 - b1.powi(t);
        let bc2 = 1.0 - b2.powi(t);
        Scalars {
            decay: (1.0 - lr * self.weight_decay) as f32,
            w1: (1.0 - b1) as f32,
            b2: b2 as f32,
            w2: (1.0 - b2) as f32,
            step_size: (lr / bc1) as f32,
            bc2_sqrt: bc2.sqrt() as f32,
            eps: self.eps as f32,
        }
    }
}

impl AdamW {
    /// A fresh optimiser for `n_params` scalars: zero moments, step 0.
    pub fn new(n_params: usize, cfg: AdamWConfig) -> Self {
        AdamW {
            cfg,
            m: vec![0.0; n_params],
            v: vec![0.0; n_params],
            v_max: cfg.amsgrad.then(|| vec![0.0; n_params]),
            step: 0,
        }
    }

    /// Restores an optimiser from a checkpointed state.
    ///
    /// If `cfg.amsgrad` is set but the state has no `v_max` (the run was started without
    /// AMSGrad), the running maximum starts from zero, i.e. from the next `v`; if `amsgrad` is
    /// off, a stored `v_max` is dropped.
    ///
    /// # Panics
    /// If `m`, `v` and `v_max` differ in length.
    #[track_caller]
    pub fn from_state(cfg: AdamWConfig, state: AdamWState) -> Self {
        let AdamWState { step, m, v, v_max } = state;
        assert_eq!(m.len(), v.len(), "AdamW state: m and v differ in length");
        if let Some(vm) = &v_max {
            assert_eq!(vm.len(), v.len(), "AdamW state: v_max and v differ in length");
        }
        let n = m.len();
        let v_max = if cfg.amsgrad { Some(v_max.unwrap_or_else(|| vec![0.0; n])) } else { None };
        AdamW { cfg, m, v, v_max, step }
    }

    /// A copy of the state, for checkpoints.
    pub fn state(&self) -> AdamWState {
        AdamWState { step: self.step, m: self.m.clone(), v: self.v.clone(), v_max: self.v_max.clone() }
    }

    /// The settings.
    pub fn config(&self) -> &AdamWConfig {
        &self.cfg
    }

    /// Number of steps taken so far.
    pub fn num_steps(&self) -> u64 {
        self.step
    }

    /// Number of scalar parameters this optimiser updates.
    pub fn len(&self) -> usize {
        self.m.len()
    }

    /// True if there are no parameters.
    pub fn is_empty(&self) -> bool {
        self.m.is_empty()
    }

    /// One update of `params` from `grads` with learning rate `lr` (the scheduled value; the
    /// config's `lr` is not used here). Runs over fixed chunks in parallel on the current rayon
    /// pool; the result is identical to [`step_seq`](Self::step_seq).
    ///
    /// # Panics
    /// If `params` or `grads` does not have [`len`](Self::len) elements.
    #[track_caller]
    pub fn step(&mut self, params: &mut [f32], grads: &[f32], lr: f64) {
        let s = self.begin_step(params, grads, lr);
        let (m, v) = (&mut self.m, &mut self.v);
        match &mut self.v_max {
            Some(vm) => params
                .par_chunks_mut(CHUNK)
                .zip(grads.par_chunks(CHUNK))
                .zip(m.par_chunks_mut(CHUNK))
                .zip(v.par_chunks_mut(CHUNK))
                .zip(vm.par_chunks_mut(CHUNK))
                .for_each(|((((p, g), m), v), vm)| update(&s, p, g, m, v, Some(vm))),
            None => params
                .par_chunks_mut(CHUNK)
                .zip(grads.par_chunks(CHUNK))
                .zip(m.par_chunks_mut(CHUNK))
                .zip(v.par_chunks_mut(CHUNK))
                .for_each(|(((p, g), m), v)| update(&s, p, g, m, v, None)),
        }
    }

    /// The sequential twin of [`step`](Self::step).
    ///
    /// # Panics
    /// If `params` or `grads` does not have [`len`](Self::len) elements.
    #[track_caller]
    pub fn step_seq(&mut self, params: &mut [f32], grads: &[f32], lr: f64) {
        let s = self.begin_step(params, grads, lr);
        update(&s, params, grads, &mut self.m, &mut self.v, self.v_max.as_deref_mut());
    }

    /// Checks the shapes, advances the step counter and computes the step's scalars.
    #[track_caller]
    fn begin_step(&mut self, params: &[f32], grads: &[f32], lr: f64) -> Scalars {
        assert_eq!(params.len(), self.m.len(), "AdamW::step: params has the wrong length");
        assert_eq!(grads.len(), self.m.len(), "AdamW::step: grads has the wrong length");
        // Parameters, m and v read and written, the gradients (and AMSGrad's max) read.
        let tensors = 7 + 2 * usize::from(self.v_max.is_some());
        crate::traffic::add(crate::traffic::Pass::Optimizer, crate::traffic::of::<f32>(tensors * params.len()));
        self.step += 1;
        self.cfg.step_scalars(self.step, lr)
    }
}

/// The elementwise update of one chunk (see [`AdamW`] for the formula).
fn update(s: &Scalars, p: &mut [f32], g: &[f32], m: &mut [f32], v: &mut [f32], mut v_max: Option<&mut [f32]>) {
    for i in 0..p.len() {
        let gi = g[i];
        // θ ← θ·(1 − γλ)   (PyTorch: param.mul_(1 - lr * weight_decay))
        let pi = p[i] * s.decay;
        // m ← lerp(m, g, 1 − β1)   (PyTorch: exp_avg.lerp_(grad, 1 - beta1))
        let mi = lerp(m[i], gi, s.w1);
        // v ← β2·v + (1 − β2)·g·g   (PyTorch: exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2))
        let vi = v[i] * s.b2 + s.w2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        let vhat = match v_max.as_deref_mut() {
            Some(vm) => {
                // torch.maximum: NaN propagates.
                vm[i] = if vm[i].is_nan() || vi.is_nan() { f32::NAN } else { vm[i].max(vi) };
                vm[i]
            }
            None => vi,
        };
        // denom = √v / √(1 − β2ᵗ) + ε;  θ ← θ + (−γ/(1 − β1ᵗ))·m / denom
        let denom = vhat.sqrt() / s.bc2_sqrt + s.eps;
        p[i] = pi + (-s.step_size) * mi / denom;
    }
}

/// `a + w·(b − a)`, written as ATen's `lerp` does (two forms for accuracy near w = 1).
#[inline]
fn lerp(a: f32, b: f32, w: f32) -> f32 {
    if w.abs() < 0.5 { a + w * (b - a) } else { b - (b - a) * (1.0 - w) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gradients of the three steps of the hand-computed examples.
    const GRADS: [[f32; 2]; 3] = [[1.0, -2.0], [0.01, 0.5], [0.02, -0.1]];

    /// Runs three steps from θ = (1, −0.5) with lr 0.1 and returns θ after each step.
    fn three_steps(cfg: AdamWConfig) -> (Vec<[f32; 2]>, AdamW) {
        let mut p = [1.0f32, -0.5];
        let mut opt = AdamW::new(2, cfg);
        let mut out = Vec::new();
        for g in GRADS {
            opt.step_seq(&mut p, &g, 0.1);
            out.push(p);
        }
        (out, opt)
    }

    /// The expected values were computed in f64 by a literal transcription of the algorithm
    /// box of the PyTorch docs (θ ← θ − γλθ; m, v; bias corrections; amsgrad max over raw v).
    fn check(got: &[[f32; 2]], want: [[f64; 2]; 3]) {
        for (t, (g, w)) in got.iter().zip(want).enumerate() {
            for k in 0..2 {
                let d = (g[k] as f64 - w[k]).abs();
                assert!(d < 2e-7, "step {} element {k}: got {} want {} (|Δ| {d:e})", t + 1, g[k], w[k]);
            }
        }
    }

    #[test]
    fn defaults_are_pytorch_defaults() {
        let c = AdamWConfig::default();
        assert_eq!((c.lr, c.betas, c.eps, c.weight_decay, c.amsgrad), (1e-3, (0.9, 0.999), 1e-8, 0.01, false));
        let parsed: AdamWConfig = serde_json::from_str(r#"{"lr": 0.01}"#).unwrap();
        assert_eq!(parsed, AdamWConfig { lr: 0.01, ..AdamWConfig::default() });
        assert!(serde_json::from_str::<AdamWConfig>(r#"{"learning_rate": 0.01}"#).is_err());
    }

    #[test]
    fn adam_without_weight_decay_matches_hand_computed() {
        let cfg = AdamWConfig { weight_decay: 0.0, ..AdamWConfig::default() };
        let (got, opt) = three_steps(cfg);
        check(
            &got,
            [
                [0.900000001, -0.4000000005],
                [0.832253058026447, -0.35305318370133487],
                [0.77861637951456, -0.3137077981048514],
            ],
        );
        let st = opt.state();
        assert_eq!(st.step, 3);
        assert!((st.m[0] as f64 - 0.0839).abs() < 1e-7 && (st.m[1] as f64 + 0.127).abs() < 1e-7);
        assert!((st.v[1] as f64 - 0.004_251_754).abs() < 1e-9);
        assert!(st.v_max.is_none());
    }

    #[test]
    fn weight_decay_matches_hand_computed() {
        let cfg = AdamWConfig { weight_decay: 0.1, ..AdamWConfig::default() };
        let (got, _) = three_steps(cfg);
        check(
            &got,
            [
                [0.890000001, -0.3950000005],
                [0.813353058016447, -0.34410318369633486],
                [0.7515828489243954, -0.301316766262888],
            ],
        );
    }

    #[test]
    fn amsgrad_matches_hand_computed_and_differs_from_plain() {
        // β2 = 0.9 so that v shrinks after step 1 and the running maximum matters.
        let cfg = AdamWConfig { betas: (0.9, 0.9), weight_decay: 0.1, amsgrad: true, ..AdamWConfig::default() };
        let (got, opt) = three_steps(cfg);
        check(
            &got,
            [
                [0.890000001, -0.3950000005],
                [0.8150816631399889, -0.3438940445628492],
                [0.7559652269261259, -0.30188160149356574],
            ],
        );
        let vm = opt.state().v_max.unwrap();
        assert!((vm[0] as f64 - 0.1).abs() < 1e-8 && (vm[1] as f64 - 0.4).abs() < 1e-7);
        let (plain, _) = three_steps(AdamWConfig { amsgrad: false, ..cfg });
        check(
            &plain,
            [
                [0.890000001, -0.3950000005],
                [0.8115144284847445, -0.3429841995006375],
                [0.746787938696344, -0.29816948065329824],
            ],
        );
    }

    #[test]
    fn adam_minimises_a_quadratic() {
        // f(θ) = Σ a_i (θ_i − c_i)², ∇f = 2 a_i (θ_i − c_i); badly scaled on purpose.
        let a = [1.0f32, 100.0, 0.01];
        let c = [3.0f32, -2.0, 0.5];
        let mut p = [0.0f32; 3];
        let cfg = AdamWConfig { weight_decay: 0.0, ..AdamWConfig::default() };
        let mut opt = AdamW::new(3, cfg);
        let f = |p: &[f32; 3]| (0..3).map(|i| a[i] as f64 * ((p[i] - c[i]) as f64).powi(2)).sum::<f64>();
        let f0 = f(&p);
        for k in 0..4000 {
            let g: Vec<f32> = (0..3).map(|i| 2.0 * a[i] * (p[i] - c[i])).collect();
            let lr = if k < 3000 { 0.05 } else { 0.001 };
            opt.step_seq(&mut p, &g, lr);
        }
        for i in 0..3 {
            assert!((p[i] - c[i]).abs() < 5e-3, "θ{i} = {} (minimum at {})", p[i], c[i]);
        }
        assert!(f(&p) < 1e-4 * f0);
    }

    #[test]
    fn parallel_step_equals_sequential_step() {
        for &n in &[0usize, 1, 7, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 17] {
            for amsgrad in [false, true] {
                let cfg = AdamWConfig { amsgrad, ..AdamWConfig::default() };
                let mut rng = 0x9e37_79b9_7f4a_7c15u64;
                let mut next = || {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    (rng >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                };
                let p0: Vec<f32> = (0..n).map(|_| next()).collect();
                let grads: Vec<Vec<f32>> = (0..3).map(|_| (0..n).map(|_| next()).collect()).collect();
                let (mut pa, mut pb) = (p0.clone(), p0);
                let (mut a, mut b) = (AdamW::new(n, cfg), AdamW::new(n, cfg));
                for g in &grads {
                    a.step(&mut pa, g, 1e-2);
                    b.step_seq(&mut pb, g, 1e-2);
                }
                let same = pa.iter().zip(&pb).all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same, "n = {n}, amsgrad = {amsgrad}: parallel and sequential differ");
                assert_eq!(a.state(), b.state());
            }
        }
    }

    #[test]
    fn state_round_trip_continues_identically() {
        let cfg = AdamWConfig { amsgrad: true, ..AdamWConfig::default() };
        let mut p = vec![0.3f32, -0.7, 1.1];
        let g = [0.5f32, -0.25, 2.0];
        let mut a = AdamW::new(3, cfg);
        a.step_seq(&mut p, &g, 1e-2);
        let mut b = AdamW::from_state(cfg, a.state());
        let mut q = p.clone();
        a.step_seq(&mut p, &g, 1e-2);
        b.step_seq(&mut q, &g, 1e-2);
        assert_eq!(p, q);
        assert_eq!(b.num_steps(), 2);
        // Switching AMSGrad on at resume starts the running maximum from zero.
        let c = AdamW::from_state(cfg, AdamWState { v_max: None, ..a.state() });
        assert_eq!(c.state().v_max, Some(vec![0.0; 3]));
        let d = AdamW::from_state(AdamWConfig { amsgrad: false, ..cfg }, a.state());
        assert!(d.state().v_max.is_none());
    }

    #[test]
    #[should_panic(expected = "grads has the wrong length")]
    fn wrong_gradient_length_panics() {
        AdamW::new(2, AdamWConfig::default()).step(&mut [0.0; 2], &[0.0; 3], 1e-3);
    }
}
