//! Score a new event with a trained run and print its tracks.
//!
//! ```text
//! cargo run -p trackgnn-examples --example reconstruct_event -- [DIR] [EVENT]
//! ```
//!
//! Opens the run DIR/run (the `train` example writes it), simulates event EVENT (default 1)
//! with another seed than the training events, builds its graph with the run's recipe, scores
//! the edges with the run's best weights, follows the tracks, and prints them, then how they
//! compare with the event's truth.

use std::error::Error;
use std::path::Path;

use trackgnn_examples::{PILEUP, dir_arg, run_dir};
use trackgnn_reco::inference::{EventReco, Reconstructor};
use trackgnn_reco::{MetricsConfig, NO_TRACK, TrackBuilderConfig, TrackMethod, evaluate_event};
use trackgnn_simulate::{Generator, SimConfig};
use trackgnn_trackml::Detector;
use trackgnn_train::run_dir::{RunDir, Weights};

fn main() -> Result<(), Box<dyn Error>> {
    let event_id = std::env::args().nth(2).map_or(Ok(1), |n| n.parse())?;
    reconstruct_event(&dir_arg(), event_id)?;
    Ok(())
}

/// Reconstructs event `event_id` of seed 2 with the run in `dir/run`.
pub fn reconstruct_event(dir: &Path, event_id: u64) -> Result<EventReco, Box<dyn Error>> {
    let det = Detector::trackml();
    let run = RunDir::open(run_dir(dir))?;
    let rec = Reconstructor::open(&run, &Weights::Best, det.clone())?
        .with_tracks(TrackBuilderConfig::for_method(TrackMethod::Follow, None))?;
    let generator = Generator::new(det, SimConfig { pileup: PILEUP, ..SimConfig::default() });
    let (event, _) = generator.event(2, event_id);
    let reco = rec.event(&event)?;
    println!(
        "event {event_id}: {} hits, {} edges scored, {} tracks",
        event.hits.len(),
        reco.scores.len(),
        reco.num_tracks()
    );
    // The hits of each track: `hit_tracks` has a track id per hit of the event.
    let mut tracks = vec![Vec::new(); reco.num_tracks() as usize];
    for (&hit_id, &track) in event.hits.hit_id.iter().zip(&reco.hit_tracks) {
        if track != NO_TRACK {
            tracks[track as usize - 1].push(hit_id);
        }
    }
    for (k, hits) in tracks.iter().enumerate().take(5) {
        println!("track {}: hits {hits:?}", k + 1);
    }
    if tracks.len() > 5 {
        println!("… and {} more", tracks.len() - 5);
    }
    let m = evaluate_event(&event, &reco.hit_tracks, &MetricsConfig::default())?;
    println!(
        "against the truth: track efficiency {:.3}, fake rate {:.3}, TrackML score {:.3}",
        m.efficiency, m.fake_rate, m.trackml_score
    );
    Ok(reco)
}
