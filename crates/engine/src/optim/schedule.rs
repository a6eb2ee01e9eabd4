//! The learning-rate schedule: linear warm-up, then step decay (`torch.optim.lr_scheduler.StepLR`).

use serde::{Deserialize, Serialize};

/// Settings of [`LrSchedule`]. `Default` is a constant learning rate (no warm-up, no decay).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LrScheduleConfig {
    /// Length of the linear warm-up from 0 to the base learning rate, in epochs (fractions
    /// allowed; applied per step). 0 (or negative, or NaN) disables warm-up.
    pub warmup_epochs: f64,
    /// Multiply the learning rate by `gamma` every `step_size` epochs; 0 means no decay.
    pub step_size: usize,
    /// Decay factor per `step_size` epochs.
    pub gamma: f64,
}

impl Default for LrScheduleConfig {
    fn default() -> Self {
        LrScheduleConfig { warmup_epochs: 0.0, step_size: 0, gamma: 0.5 }
    }
}

/// Learning rate as a function of the position in training:
///
/// ```text
/// lr = base_lr · warmup · gamma^⌊epoch / step_size⌋
/// warmup = min(1, (epoch + (step_in_epoch + 1) / steps_per_epoch) / warmup_epochs)
/// ```
///
/// The warm-up counts the step being taken as done, so the first step uses
/// `base_lr / warmup_steps` rather than a wasted zero, and the last warm-up step reaches
/// `base_lr` (the per-step form of the `(epoch + 1) / warmup` scaling of the Exa.TrkX code).
/// The decay is PyTorch's `StepLR` with its epoch counter starting at 0. The two factors
/// multiply, so a warm-up longer than `step_size` ramps to an already decayed value.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LrSchedule {
    cfg: LrScheduleConfig,
}

impl LrSchedule {
    /// A schedule with these settings.
    pub fn new(cfg: LrScheduleConfig) -> Self {
        LrSchedule { cfg }
    }

    /// The settings.
    pub fn config(&self) -> &LrScheduleConfig {
        &self.cfg
    }

    /// The learning rate for step `step_in_epoch` (from 0) of epoch `epoch` (from 0), with
    /// `steps_per_epoch` steps per epoch (0 is treated as 1).
    pub fn lr(&self, base_lr: f64, epoch: usize, step_in_epoch: usize, steps_per_epoch: usize) -> f64 {
        base_lr * self.warmup_factor(epoch, step_in_epoch, steps_per_epoch) * self.decay_factor(epoch)
    }

    /// The warm-up factor in (0, 1].
    pub fn warmup_factor(&self, epoch: usize, step_in_epoch: usize, steps_per_epoch: usize) -> f64 {
        let w = self.cfg.warmup_epochs;
        if w.is_nan() || w <= 0.0 {
            return 1.0;
        }
        let done = epoch as f64 + (step_in_epoch as f64 + 1.0) / steps_per_epoch.max(1) as f64;
        (done / w).min(1.0)
    }

    /// The step-decay factor `gamma^⌊epoch / step_size⌋` (1 when `step_size` is 0).
    pub fn decay_factor(&self, epoch: usize) -> f64 {
        match self.cfg.step_size {
            0 => 1.0,
            s => self.cfg.gamma.powi(i32::try_from(epoch / s).unwrap_or(i32::MAX)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * b.abs().max(1.0)
    }

    #[test]
    fn default_is_constant() {
        let s = LrSchedule::default();
        for (e, k) in [(0, 0), (0, 9), (5, 3), (1000, 0)] {
            assert_eq!(s.lr(1e-3, e, k, 10), 1e-3);
        }
    }

    #[test]
    fn warmup_start_middle_end() {
        // Two epochs of 10 steps: 20 warm-up steps.
        let s = LrSchedule::new(LrScheduleConfig { warmup_epochs: 2.0, ..Default::default() });
        assert!(close(s.lr(1.0, 0, 0, 10), 1.0 / 20.0), "first step");
        assert!(close(s.lr(1.0, 0, 9, 10), 10.0 / 20.0), "middle");
        assert!(close(s.lr(1.0, 1, 4, 10), 15.0 / 20.0));
        assert!(close(s.lr(1.0, 1, 9, 10), 1.0), "end of warm-up");
        assert!(close(s.lr(1.0, 2, 0, 10), 1.0), "after warm-up");
        // Fractional warm-up: half an epoch of 8 steps = 4 steps.
        let h = LrSchedule::new(LrScheduleConfig { warmup_epochs: 0.5, ..Default::default() });
        let got: Vec<f64> = (0..6).map(|k| h.lr(2.0, 0, k, 8)).collect();
        for (g, w) in got.iter().zip([0.5, 1.0, 1.5, 2.0, 2.0, 2.0]) {
            assert!(close(*g, w), "{got:?}");
        }
    }

    #[test]
    fn step_decay_like_step_lr() {
        let s = LrSchedule::new(LrScheduleConfig { step_size: 3, gamma: 0.1, ..Default::default() });
        let per_epoch: Vec<f64> = (0..8).map(|e| s.lr(1.0, e, 0, 5)).collect();
        let want = [1.0, 1.0, 1.0, 0.1, 0.1, 0.1, 0.01, 0.01];
        for (g, w) in per_epoch.iter().zip(want) {
            assert!(close(*g, w), "{per_epoch:?}");
        }
    }

    #[test]
    fn warmup_and_decay_multiply() {
        let s = LrSchedule::new(LrScheduleConfig { warmup_epochs: 1.0, step_size: 1, gamma: 0.5 });
        assert!(close(s.lr(1.0, 0, 1, 4), 0.5));
        assert!(close(s.lr(1.0, 2, 0, 4), 0.25));
        assert_eq!(s.lr(1.0, 0, 0, 0), 1.0, "0 steps per epoch counts as 1");
    }
}
