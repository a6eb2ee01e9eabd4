//! Progress bars on stderr (hidden automatically when stderr is not a terminal).

use indicatif::{ProgressBar, ProgressStyle};

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
