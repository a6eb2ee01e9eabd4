//! The epoch driver that every training runs: the GNN's [`crate::Trainer`] and the learned
//! stages of metric learning ([`crate::metric_learning::embedding`],
//! [`crate::metric_learning::filter`]). Epochs run until the configured number, a stop request
//! (the training checkpoints where it stands first, so a resumed run goes on exactly from
//! there) or early stopping; each epoch is trained, then validated and kept (metrics, best
//! weights, checkpoint, plots), then reported.

use std::sync::atomic::AtomicBool;

use crate::error::Result;
use crate::logs::EpochRecord;

/// Progress reports of a training (a progress bar in the CLI; nothing in tests). `R` is the
/// record of a finished epoch: [`EpochRecord`] for the GNN,
/// [`StageRecord`](crate::metric_learning::StageRecord) for the learned stages.
pub trait Progress<R = EpochRecord> {
    /// An epoch starts (or resumes) with `steps` optimiser steps left.
    fn epoch_start(&self, _epoch: u64, _steps: u64) {}
    /// A step finished.
    fn step(&self, _loss: f64) {}
    /// An epoch finished.
    fn epoch_end(&self, _rec: &R) {}
    /// Something a user should read.
    fn message(&self, _msg: &str) {}
}

/// No progress reports.
pub struct Silent;
impl<R> Progress<R> for Silent {}

/// One training as the driver sees it.
pub trait EpochTraining {
    /// The record of a finished epoch.
    type Record;
    /// The epoch to train next (the one in progress after a mid-epoch resume).
    fn next_epoch(&self) -> u64;
    /// The configured number of epochs.
    fn epochs(&self) -> u64;
    /// Trains the rest of the next epoch, reporting its steps to `progress`. True if `stop`
    /// turned true on the way: the training has then written a checkpoint where it stands.
    fn train_epoch(&mut self, progress: &dyn Progress<Self::Record>, stop: &AtomicBool) -> Result<bool>;
    /// Validates the epoch just trained and keeps it (metrics, best weights, checkpoint,
    /// plots); returns its record.
    fn end_epoch(&mut self) -> Result<Self::Record>;
    /// After an epoch is kept: why to stop now, if the training stops early.
    fn stop_early(&self) -> Option<String> {
        None
    }
}

/// How the epochs ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EpochsEnd {
    /// A stop request ended them (a checkpoint was written).
    pub interrupted: bool,
    /// Early stopping ended them.
    pub stopped_early: bool,
}

/// Runs `training`'s epochs from its next one until its configured number, a stop request or
/// early stopping.
///
/// # Errors
/// The training's errors, as they happen.
pub fn run_epochs<T: EpochTraining + ?Sized>(
    training: &mut T,
    progress: &dyn Progress<T::Record>,
    stop: &AtomicBool,
) -> Result<EpochsEnd> {
    while training.next_epoch() < training.epochs() {
        if training.train_epoch(progress, stop)? {
            return Ok(EpochsEnd { interrupted: true, stopped_early: false });
        }
        let record = training.end_epoch()?;
        progress.epoch_end(&record);
        if let Some(why) = training.stop_early() {
            progress.message(&why);
            return Ok(EpochsEnd { interrupted: false, stopped_early: true });
        }
    }
    Ok(EpochsEnd::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::sync::atomic::Ordering;

    /// Epochs of `steps` steps each; the stop turns true after `stop_at` steps in all; early
    /// stopping after epoch `early`.
    struct Counting<'s> {
        epoch: u64,
        epochs: u64,
        step: u64,
        steps: u64,
        stop_at: u64,
        early: Option<u64>,
        stop: &'s AtomicBool,
        kept: Vec<u64>,
    }

    impl EpochTraining for Counting<'_> {
        type Record = u64;
        fn next_epoch(&self) -> u64 {
            self.epoch
        }
        fn epochs(&self) -> u64 {
            self.epochs
        }
        fn train_epoch(&mut self, progress: &dyn Progress<u64>, stop: &AtomicBool) -> Result<bool> {
            progress.epoch_start(self.epoch, self.steps);
            for _ in 0..self.steps {
                self.step += 1;
                progress.step(self.step as f64);
                if self.step == self.stop_at {
                    self.stop.store(true, Ordering::Relaxed);
                }
                if stop.load(Ordering::Relaxed) {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        fn end_epoch(&mut self) -> Result<u64> {
            self.kept.push(self.epoch);
            self.epoch += 1;
            Ok(self.epoch - 1)
        }
        fn stop_early(&self) -> Option<String> {
            (self.early == Some(self.epoch - 1)).then(|| format!("early after {}", self.epoch - 1))
        }
    }

    #[derive(Default)]
    struct Log(RefCell<Vec<String>>);
    impl Progress<u64> for Log {
        fn epoch_start(&self, epoch: u64, steps: u64) {
            self.0.borrow_mut().push(format!("start {epoch} {steps}"));
        }
        fn epoch_end(&self, rec: &u64) {
            self.0.borrow_mut().push(format!("end {rec}"));
        }
        fn message(&self, msg: &str) {
            self.0.borrow_mut().push(msg.into());
        }
    }

    fn counting(stop: &AtomicBool, stop_at: u64, early: Option<u64>) -> Counting<'_> {
        Counting { epoch: 0, epochs: 3, step: 0, steps: 2, stop_at, early, stop, kept: Vec::new() }
    }

    #[test]
    fn epochs_run_to_the_end_to_a_stop_or_to_early_stopping() {
        let stop = AtomicBool::new(false);
        let (mut all, log) = (counting(&stop, u64::MAX, None), Log::default());
        assert_eq!(run_epochs(&mut all, &log, &stop).unwrap(), EpochsEnd::default());
        assert_eq!(all.kept, [0, 1, 2]);
        assert_eq!(log.0.borrow().join(", "), "start 0 2, end 0, start 1 2, end 1, start 2 2, end 2");

        // A stop in epoch 1's first step: epoch 1 is neither kept nor reported.
        let (mut stopped, log) = (counting(&stop, 3, None), Log::default());
        let end = run_epochs(&mut stopped, &log, &stop).unwrap();
        assert_eq!(end, EpochsEnd { interrupted: true, stopped_early: false });
        assert_eq!(stopped.kept, [0]);
        assert_eq!(log.0.borrow().join(", "), "start 0 2, end 0, start 1 2");

        // A finished run trains nothing; early stopping reports why after the epoch's record.
        let stop = AtomicBool::new(false);
        assert_eq!(run_epochs(&mut all, &Silent, &stop).unwrap(), EpochsEnd::default());
        assert_eq!(all.kept, [0, 1, 2]);
        let (mut early, log) = (counting(&stop, u64::MAX, Some(1)), Log::default());
        assert_eq!(run_epochs(&mut early, &log, &stop).unwrap(), EpochsEnd { interrupted: false, stopped_early: true });
        assert_eq!(early.kept, [0, 1]);
        assert_eq!(log.0.borrow().last().unwrap(), "early after 1");
    }
}
