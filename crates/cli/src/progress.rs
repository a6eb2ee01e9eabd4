//! Progress bars on stderr (hidden automatically when stderr is not a terminal), the
//! trainings' progress reports, and the signals that stop a training after a checkpoint.

use std::fmt::Display;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use trackgnn_train::Progress;

/// A bar over `n` items with a message.
pub fn bar(n: u64, msg: &str) -> ProgressBar {
    let pb = ProgressBar::new(n);
    pb.set_style(
        ProgressStyle::with_template("{msg:>12} [{bar:30}] {pos}/{len} {per_sec} eta {eta}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    pb.set_message(msg.to_string());
    pb
}

/// A training's progress: a bar per epoch, then the epoch's line (on stderr, or on stdout
/// with `lines_to_stdout`), and its messages on stderr; nothing when `quiet`.
pub struct EpochBars {
    bar: Mutex<Option<ProgressBar>>,
    quiet: bool,
    lines_to_stdout: bool,
}

impl EpochBars {
    /// Reports that print (unless `quiet`) each epoch's line on stderr, or on stdout with
    /// `lines_to_stdout`.
    pub fn new(quiet: bool, lines_to_stdout: bool) -> EpochBars {
        EpochBars { bar: Mutex::new(None), quiet, lines_to_stdout }
    }
}

impl<R: Display> Progress<R> for EpochBars {
    fn epoch_start(&self, epoch: u64, steps: u64) {
        if !self.quiet {
            *self.bar.lock().expect("bar") = Some(bar(steps, &format!("epoch {epoch}")));
        }
    }
    fn step(&self, loss: f64) {
        if let Some(b) = self.bar.lock().expect("bar").as_ref() {
            b.set_message(format!("loss {loss:.4}"));
            b.inc(1);
        }
    }
    fn epoch_end(&self, r: &R) {
        if let Some(b) = self.bar.lock().expect("bar").take() {
            b.finish_and_clear();
        }
        match (self.quiet, self.lines_to_stdout) {
            (true, _) => {}
            (false, true) => println!("{r}"),
            (false, false) => eprintln!("{r}"),
        }
    }
    fn message(&self, msg: &str) {
        if !self.quiet {
            eprintln!("{msg}");
        }
    }
}

/// A flag that SIGUSR1 (Slurm's `--signal=USR1@120`, Lightning's convention), SIGTERM
/// (preemption, time limit) and SIGINT turn true: the trainings then checkpoint where they
/// stand and return.
pub fn stop_on_signals() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGUSR1, signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(&stop)).context("installing the signal handler")?;
    }
    Ok(stop)
}
