//! The training of a learned stage as the shared epoch driver ([`crate::epochs`]) runs it:
//! each epoch takes the training events in a seeded order, a few optimiser steps on each,
//! then validates; a stop request checkpoints the epoch where it stands, between events.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use trackgnn_engine::DenseNet;
use trackgnn_trackml::rng::Rng;

use super::{StageRecord, StageRun, StageTraining};
use crate::epochs::{EpochTraining, Progress, run_epochs};
use crate::error::Result;

/// What one learned stage does in an epoch: optimiser steps on each training event, then
/// validation.
pub(crate) trait StageSteps {
    /// The number of training events.
    fn train_events(&self) -> usize;
    /// Prepares training event `e` for its steps with the current weights (the embedding's
    /// hard negatives); false if the event has nothing to train on.
    fn begin_event(&mut self, net: &DenseNet<f32>, e: usize) -> Result<bool>;
    /// The loss of one step on training event `e`, its gradients accumulated into `net`, its
    /// sample drawn from `rng`.
    fn step_loss(&mut self, net: &mut DenseNet<f32>, e: usize, rng: &mut Rng) -> f64;
    /// Epoch `epoch`'s record from the validation events with the current weights, given the
    /// mean training loss (its seconds are the trainer's to fill in).
    fn validate(&mut self, net: &mut DenseNet<f32>, epoch: u64, train_loss: f64) -> Result<StageRecord>;
}

/// How a learned stage's training ended.
#[derive(Clone, Debug, PartialEq)]
pub struct StageOutcome {
    /// Every epoch's record, the resumed run's earlier ones included.
    pub records: Vec<StageRecord>,
    /// A stop request ended it (a checkpoint was written where it stood).
    pub interrupted: bool,
}

/// A learned stage in training: its run directory, network, settings and steps.
pub(crate) struct StageTrainer<'a, S> {
    pub(crate) run: StageRun<'a>,
    pub(crate) net: DenseNet<f32>,
    pub(crate) training: &'a StageTraining,
    pub(crate) steps: S,
}

impl<S: StageSteps> StageTrainer<'_, S> {
    /// Runs the epochs left (see [`run_epochs`]).
    pub(crate) fn train(mut self, progress: &dyn Progress<StageRecord>, stop: &AtomicBool) -> Result<StageOutcome> {
        let end = run_epochs(&mut self, progress, stop)?;
        Ok(StageOutcome { records: self.run.records, interrupted: end.interrupted })
    }
}

impl<S: StageSteps> EpochTraining for StageTrainer<'_, S> {
    type Record = StageRecord;

    fn next_epoch(&self) -> u64 {
        self.run.epoch
    }

    fn epochs(&self) -> u64 {
        self.training.epochs
    }

    fn train_epoch(&mut self, progress: &dyn Progress<StageRecord>, stop: &AtomicBool) -> Result<bool> {
        let t0 = Instant::now();
        let (t, epoch) = (self.training, self.run.epoch);
        let n = self.steps.train_events();
        let mut order: Vec<usize> = (0..n).collect();
        Rng::for_stream(&[t.seed, epoch, 0]).shuffle(&mut order);
        let per_event = t.steps_per_event.max(1);
        let first = self.run.in_progress.next_event.min(n);
        progress.epoch_start(epoch, ((n - first) * per_event) as u64);
        for (k, &e) in order.iter().enumerate().skip(first) {
            if self.steps.begin_event(&self.net, e)? {
                let mut rng = Rng::for_stream(&[t.seed, epoch, 1 + k as u64]);
                for _ in 0..per_event {
                    self.net.params.zero_grad();
                    let loss = self.steps.step_loss(&mut self.net, e, &mut rng);
                    if t.clip_grad_norm > 0.0 {
                        trackgnn_engine::optim::clip_grad_norm(&mut self.net.params.grad, t.clip_grad_norm);
                    }
                    self.run.opt.step(&mut self.net.params.data, &self.net.params.grad, t.lr_at(epoch));
                    self.run.in_progress.loss_sum += loss;
                    self.run.in_progress.steps += 1;
                    progress.step(loss);
                }
            }
            self.run.in_progress.next_event = k + 1;
            if stop.load(Ordering::Relaxed) {
                self.run.in_progress.seconds += t0.elapsed().as_secs_f64();
                self.run.save_in_progress(&self.net)?;
                return Ok(true);
            }
        }
        self.run.in_progress.seconds += t0.elapsed().as_secs_f64();
        Ok(false)
    }

    fn end_epoch(&mut self) -> Result<StageRecord> {
        let t0 = Instant::now();
        let p = &self.run.in_progress;
        let (train_loss, seconds) = (p.loss_sum / p.steps.max(1) as f64, p.seconds);
        let mut record = self.steps.validate(&mut self.net, self.run.epoch, train_loss)?;
        record.seconds = seconds + t0.elapsed().as_secs_f64();
        self.run.finish_epoch(&self.net, record.clone())?;
        Ok(record)
    }
}
