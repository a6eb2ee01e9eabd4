//! The learned stages (hit embedding, edge filter) run on the epoch driver that the GNN's
//! trainer shares: a stop in the middle of an epoch checkpoints where it stands, and the
//! resumed run ends with the weights, optimiser and records of an uninterrupted one.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use trackgnn_engine::DenseNetConfig;
use trackgnn_simulate::{Generator, SimConfig};
use trackgnn_trackml::Detector;
use trackgnn_train::metric_learning::embedding::{EmbeddingConfig, EmbeddingModel, train_embedding};
use trackgnn_train::metric_learning::filter::{FilterConfig, train_filter};
use trackgnn_train::metric_learning::{PreparedEvent, StageOutcome, StageRecord};
use trackgnn_train::run_dir::{BEST_FILE, CHECKPOINT_DIR, MODEL_FILE, OPTIMIZER_FILE};
use trackgnn_train::{Progress, Silent};

/// Four small events with truth: three to train on, one to validate.
fn events() -> (Vec<PreparedEvent>, Vec<PreparedEvent>) {
    let g = Generator::new(Detector::trackml(), SimConfig { pileup: 3.0, ..SimConfig::default() });
    let cfg = EmbeddingConfig::default();
    let mut all: Vec<PreparedEvent> = (1..=4)
        .map(|id| PreparedEvent::new(&g.event(23, id).0, g.detector(), &cfg.features, cfg.train_pt_min).unwrap())
        .collect();
    let val = all.split_off(3);
    (all, val)
}

fn embedding_config() -> EmbeddingConfig {
    let mut c = EmbeddingConfig { net: DenseNetConfig { hidden: 16, hidden_layers: 2, out: 4 }, ..Default::default() };
    c.training.epochs = 3;
    c.training.steps_per_event = 2;
    c.pairs_per_step = 500;
    c
}

/// Raises the stop flag after a number of steps, like a SIGTERM in the middle of an epoch,
/// and counts the epochs reported.
struct StopAfter<'a> {
    steps: AtomicU64,
    at: u64,
    flag: &'a AtomicBool,
    epochs_reported: AtomicU64,
}

impl<'a> StopAfter<'a> {
    fn new(at: u64, flag: &'a AtomicBool) -> StopAfter<'a> {
        StopAfter { steps: AtomicU64::new(0), at, flag, epochs_reported: AtomicU64::new(0) }
    }
}

impl Progress<StageRecord> for StopAfter<'_> {
    fn step(&self, _loss: f64) {
        if self.steps.fetch_add(1, Ordering::Relaxed) + 1 == self.at {
            self.flag.store(true, Ordering::Relaxed);
        }
    }
    fn epoch_end(&self, _rec: &StageRecord) {
        self.epochs_reported.fetch_add(1, Ordering::Relaxed);
    }
}

fn bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The records without their seconds, which differ from run to run, as JSON (a figure
/// without a denominator is NaN, which equals nothing). Those of epochs before `read_back`
/// as a resumed run has them: read back from its `metrics.jsonl` (serde_json's parser may be
/// one unit in the last place off).
fn figures(o: &StageOutcome, read_back: u64) -> String {
    let records: Vec<StageRecord> = o
        .records
        .iter()
        .map(|r| {
            let r = StageRecord { seconds: 0.0, ..r.clone() };
            if r.epoch < read_back { serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap() } else { r }
        })
        .collect();
    serde_json::to_string(&records).unwrap()
}

/// The run's weights and optimiser state: equal bytes, or the resumed run went elsewhere.
fn assert_same_state(a: &Path, b: &Path) {
    let ckpt = Path::new(CHECKPOINT_DIR);
    for f in [Path::new(BEST_FILE), &ckpt.join(MODEL_FILE), &ckpt.join(OPTIMIZER_FILE)] {
        let same = bytes(&a.join(f)) == bytes(&b.join(f));
        assert!(same, "{} differs between the uninterrupted and resumed runs", f.display());
    }
}

#[test]
fn an_embedding_and_a_filter_stopped_mid_epoch_resume_to_the_uninterrupted_runs() {
    let (train, val) = events();
    let tmp = tempfile::tempdir().unwrap();
    let cfg = embedding_config();
    let never = AtomicBool::new(false);

    let (a, b) = (tmp.path().join("emb_a"), tmp.path().join("emb_b"));
    let whole = train_embedding(&a, &cfg, &train, &val, false, &Silent, &never).unwrap();
    assert!(!whole.interrupted);
    assert_eq!(whole.records.iter().map(|r| r.epoch).collect::<Vec<_>>(), [0, 1, 2]);
    // 3 events × 2 steps per epoch: step 9 is epoch 1's second event's first step, so the stop
    // takes effect after that event.
    let stop = AtomicBool::new(false);
    let progress = StopAfter::new(9, &stop);
    let cut = train_embedding(&b, &cfg, &train, &val, false, &progress, &stop).unwrap();
    assert!(cut.interrupted);
    assert_eq!(progress.steps.load(Ordering::Relaxed), 10, "the event in hand finishes its steps");
    assert_eq!(cut.records.len(), 1, "epoch 1 is neither validated nor kept");
    assert_eq!(progress.epochs_reported.load(Ordering::Relaxed), 1);
    // Starting it afresh is refused; resumed, it ends where the uninterrupted run did.
    let err = train_embedding(&b, &cfg, &train, &val, false, &Silent, &never).unwrap_err();
    assert!(err.to_string().contains("already holds a run"), "{err}");
    let resumed = train_embedding(&b, &cfg, &train, &val, true, &Silent, &never).unwrap();
    assert_eq!(figures(&resumed, 0), figures(&whole, 1));
    assert_same_state(&a, &b);

    // The filter on that embedding, stopped in its first epoch.
    let embedding = EmbeddingModel::load(&a).unwrap();
    let mut fcfg = FilterConfig { net: DenseNetConfig { hidden: 8, hidden_layers: 1, out: 1 }, ..Default::default() };
    fcfg.training.epochs = 2;
    fcfg.edges_per_step = 300;
    let (fa, fb) = (tmp.path().join("filt_a"), tmp.path().join("filt_b"));
    let whole = train_filter(&fa, &fcfg, &embedding, &train, &val, false, &Silent, &never).unwrap();
    let stop = AtomicBool::new(false);
    let cut = train_filter(&fb, &fcfg, &embedding, &train, &val, false, &StopAfter::new(1, &stop), &stop).unwrap();
    assert!(cut.interrupted && cut.records.is_empty());
    let resumed = train_filter(&fb, &fcfg, &embedding, &train, &val, true, &Silent, &never).unwrap();
    assert_eq!(figures(&resumed, 0), figures(&whole, 0));
    assert_same_state(&fa, &fb);
}
