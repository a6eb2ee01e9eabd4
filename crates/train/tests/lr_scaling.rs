//! Learning-rate scaling with the number of ranks (`lr_scaling` of the training config).

use trackgnn_train::TrainConfig;
use trackgnn_train::config::LrScaling;

fn config(scaling: LrScaling, lr: f64) -> TrainConfig {
    let mut c = TrainConfig { lr_scaling: scaling, ..TrainConfig::default() };
    c.optimizer.lr = lr;
    c
}

#[test]
fn none_keeps_the_rate_at_any_rank_count() {
    let c = config(LrScaling::None, 2e-3);
    for ranks in [1, 2, 3, 8, 64] {
        assert_eq!(c.scaled_lr(ranks), 2e-3, "{ranks} ranks");
    }
}

#[test]
fn linear_multiplies_by_the_ranks_and_sqrt_by_their_root() {
    let lin = config(LrScaling::Linear, 1e-3);
    let sqrt = config(LrScaling::Sqrt, 1e-3);
    for ranks in [1usize, 2, 4, 9, 16] {
        let r = ranks as f64;
        assert!((lin.scaled_lr(ranks) - 1e-3 * r).abs() < 1e-15, "linear at {ranks}");
        assert!((sqrt.scaled_lr(ranks) - 1e-3 * r.sqrt()).abs() < 1e-15, "sqrt at {ranks}");
    }
    // One rank is the configured rate whatever the rule; more ranks order the rules.
    assert_eq!((lin.scaled_lr(1), sqrt.scaled_lr(1)), (1e-3, 1e-3));
    assert!(lin.scaled_lr(4) > sqrt.scaled_lr(4) && sqrt.scaled_lr(4) > config(LrScaling::None, 1e-3).scaled_lr(4));
}

#[test]
fn the_rule_is_read_from_the_toml_config() {
    for (text, rule) in [("linear", LrScaling::Linear), ("sqrt", LrScaling::Sqrt), ("none", LrScaling::None)] {
        let base = toml::to_string(&TrainConfig::default()).unwrap();
        let edited: String = base
            .lines()
            .map(|l| if l.starts_with("lr_scaling") { format!("lr_scaling = \"{text}\"") } else { l.to_owned() })
            .collect::<Vec<_>>()
            .join("\n");
        let c: TrainConfig = toml::from_str(&edited).unwrap();
        assert_eq!(c.lr_scaling, rule, "{text}");
    }
    let base =
        toml::to_string(&TrainConfig::default()).unwrap().replace("lr_scaling = \"none\"", "lr_scaling = \"cubic\"");
    assert!(toml::from_str::<TrainConfig>(&base).is_err());
}
