//! Reconstructions of the same events side by side (`trackgnn_reco::compare`): efficiency
//! against pT and η on one figure, pT resolution against pT, pulls; from the output
//! directories of `trackgnn reconstruct --fit` and the events' truth.
//!
//! ```sh
//! cargo run --release -p trackgnn-reco --example compare_reco -- \
//!   --input EVENTS [--detector detectors.csv] [--events N] [--min-hits 5] --out FIGURES \
//!   NAME=RECO_DIR NAME=RECO_DIR ...
//! ```
//! Prints each reconstruction's metrics, pulls (mean / standard deviation within ±5) and pT
//! resolution, and writes the figures into `FIGURES`.

use std::path::PathBuf;

use trackgnn_reco::MetricsConfig;
use trackgnn_reco::ckf::pt_edges_all;
use trackgnn_reco::compare::{PULL_NAMES, compare_reconstructions, mean_std, median, plot_comparison, pt_resolution};
use trackgnn_reco::metrics::log_edges;
use trackgnn_trackml::Detector;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (mut input, mut out, mut detector, mut events, mut min_hits) = (None, None, None, None, 5usize);
    let mut recos: Vec<(String, PathBuf)> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--input" => input = Some(PathBuf::from(value()?)),
            "--out" => out = Some(PathBuf::from(value()?)),
            "--detector" => detector = Some(PathBuf::from(value()?)),
            "--events" => events = Some(value()?.parse::<usize>()?),
            "--min-hits" => min_hits = value()?.parse()?,
            _ => match a.split_once('=') {
                Some((name, dir)) => recos.push((name.to_string(), PathBuf::from(dir))),
                None => {
                    return Err(format!(
                        "`{a}`: expected --input, --out, --detector, --events, --min-hits or NAME=DIR"
                    )
                    .into());
                }
            },
        }
    }
    let (Some(input), Some(out)) = (input, out) else { return Err("--input and --out are required".into()) };
    if recos.is_empty() {
        return Err("no reconstruction to compare: give NAME=DIR".into());
    }
    let det = match &detector {
        Some(p) => Detector::from_csv(p)?,
        None => Detector::trackml(),
    };
    let mut config = MetricsConfig::for_min_hits(min_hits, None);
    config.pt_edges_all = pt_edges_all();
    let pairs: Vec<(&str, &std::path::Path)> = recos.iter().map(|(n, d)| (n.as_str(), d.as_path())).collect();
    let compared = compare_reconstructions(&input, &pairs, &det, &config, events)?;
    let files = plot_comparison(&out, &compared)?;
    let edges = log_edges(0.5, 100.0, 10);
    for c in &compared {
        let m = &c.metrics;
        println!(
            "{} ({}): {} events; efficiency primary targets {:.4}, all targets {:.4}, all reconstructable {:.4}; fake rate {:.4}; duplicate rate {:.4}; TrackML score {:.4}",
            c.name,
            c.dir.display(),
            m.n_events,
            m.efficiency_primary,
            m.efficiency,
            m.efficiency_all,
            m.fake_rate,
            m.duplicate_rate,
            m.trackml_score
        );
        let bins = |b: &[trackgnn_reco::EfficiencyBin]| -> String {
            let shown: Vec<String> = b
                .iter()
                .filter(|b| b.2 > 0)
                .map(|&(lo, hi, n, k)| format!("{lo:.2}-{hi:.2}: {:.3} ({k}/{n})", k as f64 / n as f64))
                .collect();
            shown.join(", ")
        };
        println!("  efficiency vs pT, primary targets: {}", bins(&m.efficiency_primary_vs_pt));
        println!("  efficiency vs pT, all reconstructable: {}", bins(&m.efficiency_all_vs_pt));
        println!("  efficiency vs eta, primary targets: {}", bins(&m.efficiency_primary_vs_eta));
        println!("  efficiency vs eta, all targets: {}", bins(&m.efficiency_vs_eta));
        println!("  fitted tracks {}, matched to primary particles {}", c.fitted_tracks, c.matched.len());
        let pulls: Vec<String> = (0..5)
            .map(|k| {
                let (mean, std, _) = mean_std(c.matched.iter().map(|t| t.pulls[k]), 5.0);
                format!("{} {mean:+.3} / {std:.3}", PULL_NAMES[k])
            })
            .collect();
        println!("  pulls (mean / std within ±5): {}", pulls.join(", "));
        let chi2: Vec<f64> = c.matched.iter().map(|t| t.chi2_per_ndf).collect();
        let over = chi2.iter().filter(|&&x| x > 5.0).count();
        println!("  chi2/ndf: median {:.3}, {over} tracks above 5", median(chi2));
        let res: Vec<String> = pt_resolution(&c.matched, &edges)
            .iter()
            .map(|(lo, hi, n, s)| format!("{lo:.2}-{hi:.2} GeV: {:.4} ({n})", s))
            .collect();
        println!("  pT resolution (core sigma of pT fit/true - 1): {}", res.join("; "));
    }
    for f in files {
        println!("figure: {}", f.display());
    }
    Ok(())
}
