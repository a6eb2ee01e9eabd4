//! Train the edge classifier on a directory of graphs.
//!
//! ```text
//! cargo run -p trackgnn-examples --example train -- [DIR] [EPOCHS]
//! ```
//!
//! Trains a small InteractionGNN for EPOCHS (default 5) epochs on the graphs of DIR/graphs
//! (the `generate_graphs` example writes them) and writes the run into DIR/run: its
//! configuration, recipe, event split, metrics and weights, which the `reconstruct_event`
//! example opens. An existing DIR/run is not overwritten (remove it to train again).

use std::error::Error;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use trackgnn_examples::{dir_arg, graphs_dir, run_dir};
use trackgnn_train::dist::SingleProcess;
use trackgnn_train::{EpochRecord, Progress, TrainConfig, TrainOutcome, Trainer};

fn main() -> Result<(), Box<dyn Error>> {
    let epochs = std::env::args().nth(2).map_or(Ok(5), |n| n.parse())?;
    train(&dir_arg(), epochs)?;
    Ok(())
}

/// Prints a line per epoch.
struct EpochLines;

impl Progress for EpochLines {
    fn epoch_end(&self, r: &EpochRecord) {
        println!(
            "epoch {}: train loss {:.4}, val loss {:.4}, edge efficiency {:.3}, purity {:.3}, AUC {:.3}",
            r.epoch, r.train_loss, r.val_loss, r.efficiency, r.purity, r.auc
        );
    }
}

/// Trains on `dir/graphs` for `epochs` epochs into `dir/run`.
pub fn train(dir: &Path, epochs: usize) -> Result<TrainOutcome, Box<dyn Error>> {
    // A small model and a quick learning rate, so that a few epochs learn something.
    let mut config = TrainConfig { epochs, seed: 1, pos_weight: 2.0, ..TrainConfig::default() };
    (config.model.hidden, config.model.iterations, config.optimizer.lr) = (16, 2, 5e-3);
    let stop = AtomicBool::new(false); // a signal handler could set it to stop cleanly
    let mut comm = SingleProcess; // one process; an MPI communicator trains on several ranks
    let mut trainer = Trainer::new(config, &graphs_dir(dir), &run_dir(dir), false, &mut comm)?;
    let outcome = trainer.run(&EpochLines, &stop)?;
    println!(
        "{} epochs, {} steps; best epoch {}; run in {}",
        outcome.epochs_completed,
        outcome.global_step,
        outcome.best_epoch.map_or("none".to_string(), |e| e.to_string()),
        run_dir(dir).display()
    );
    Ok(outcome)
}
