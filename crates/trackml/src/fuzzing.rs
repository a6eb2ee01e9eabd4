//! Fuzzing the readers of outside input on stable Rust (feature `fuzzing`, for tests).
//!
//! Property tests with the `proptest` crate: each target takes valid files (seeds), mutates them the
//! ways real files go wrong — truncation, byte flips, deleted or repeated spans, inserted
//! tokens such as `nan`, `1e39` or a 20-digit integer, and little-endian `u32`/`u64` fields
//! overwritten with huge values (declared lengths and counts) — or draws arbitrary bytes, and
//! checks that the reader returns (no panic), within [`DEADLINE`] (no hang), without one
//! allocation over the cap of a [`CappedAlloc`] (no unbounded allocation), and that an error
//! names the file.
//!
//! The number of inputs per target is the target's CI default, or `TRACKGNN_FUZZ_CASES`:
//!
//! ```text
//! TRACKGNN_FUZZ_CASES=100000 cargo test --release -p trackgnn-trackml --features fuzzing --test fuzz
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

pub use proptest;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// The longest one input may take to be read before it counts as a hang.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// A global allocator that aborts the process, saying so, on any single allocation larger
/// than its cap: a reader that trusts a declared size fails loudly instead of passing on a
/// machine that overcommits. Install it in a fuzz test binary:
/// `#[global_allocator] static A: CappedAlloc = CappedAlloc::new(1 << 30);`.
pub struct CappedAlloc {
    cap: usize,
}

impl CappedAlloc {
    /// An allocator refusing any allocation of more than `cap` bytes.
    pub const fn new(cap: usize) -> Self {
        CappedAlloc { cap }
    }

    #[cold]
    fn over_cap(&self, size: usize) -> ! {
        use std::io::Write;
        // Formatting into a stack buffer: allocating here would recurse.
        let mut buf = [0u8; 160];
        let mut w = &mut buf[..];
        let _ = writeln!(w, "fuzzing: an allocation of {size} bytes is over the cap of {} bytes", self.cap);
        let n = 160 - w.len();
        let _ = std::io::stderr().write_all(&buf[..n]);
        std::process::abort()
    }
}

// SAFETY: forwards to `System` unchanged, only refusing (by aborting) oversized requests.
unsafe impl GlobalAlloc for CappedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > self.cap {
            self.over_cap(layout.size());
        }
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() > self.cap {
            self.over_cap(layout.size());
        }
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > self.cap {
            self.over_cap(new_size);
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// The number of inputs per target: `TRACKGNN_FUZZ_CASES` if set, else `ci_default`.
pub fn cases(ci_default: u32) -> u32 {
    std::env::var("TRACKGNN_FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(ci_default)
}

/// A runner for `cases(ci_default)` inputs, from a fixed seed (so CI runs are repeatable)
/// unless `TRACKGNN_FUZZ_SEED` asks for a random one (`random`) or gives a number.
pub fn runner(ci_default: u32) -> TestRunner {
    let config =
        Config { cases: cases(ci_default), failure_persistence: None, max_shrink_iters: 2000, ..Config::default() };
    match std::env::var("TRACKGNN_FUZZ_SEED").ok().as_deref() {
        Some("random") => TestRunner::new(config),
        seed => {
            let n: u64 = seed.and_then(|s| s.parse().ok()).unwrap_or(0x0072_6163_6b67_6e6e);
            let mut bytes = [0u8; 32];
            for (i, b) in bytes.iter_mut().enumerate() {
                *b = (n.rotate_left(i as u32 * 8) as u8) ^ i as u8;
            }
            let rng = proptest::test_runner::TestRng::from_seed(proptest::test_runner::RngAlgorithm::ChaCha, &bytes);
            TestRunner::new_with_rng(config, rng)
        }
    }
}

/// Tokens that readers of numbers and text must refuse or accept gracefully.
const TOKENS: &[&str] = &[
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1e39",
    "-1e309",
    "1e-50",
    "-1",
    "-0",
    "0",
    "4294967296",
    "18446744073709551616",
    "99999999999999999999999999",
    "4611686018427387904",
    "1000000000000",
    ",",
    ",,",
    "\n",
    "\r\n",
    "\r",
    "\"",
    " ",
    "\0",
    "\u{feff}",
    "\u{fffd}",
    "=",
    "[",
    "]",
    "{",
    "}",
    "\"\"\"",
    "'",
];

/// Integers written over 4 or 8 bytes: sizes, counts and offsets at their limits.
const WORDS: &[u64] =
    &[0, 1, 7, 0xff, 0xffff, 0x7fff_ffff, 0x8000_0000, 0xffff_ffff, 1 << 40, i64::MAX as u64, u64::MAX];

/// One change to a file.
#[derive(Clone, Debug)]
enum Mutation {
    /// Cut the file at a point.
    Truncate(Index),
    /// XOR one byte with a non-zero mask.
    Flip(Index, u8),
    /// Delete up to `n` bytes.
    Delete(Index, u8),
    /// Repeat a span of up to `n` bytes in place.
    Repeat(Index, u8),
    /// Insert one of [`TOKENS`].
    Insert(Index, Index),
    /// Replace a span of up to `n` bytes with one of [`TOKENS`].
    Replace(Index, u8, Index),
    /// Overwrite 4 bytes with one of [`WORDS`] (little-endian u32).
    Word32(Index, Index),
    /// Overwrite 8 bytes with one of [`WORDS`] (little-endian u64).
    Word64(Index, Index),
    /// Replace a number written in text (a run of digits after `:`, `=`, `,`, a space or a
    /// line start, as in CSV rows and JSON or TOML headers) with one of [`NUMBERS`]: declared
    /// counts and sizes in text headers.
    Number(Index, Index),
}

/// Numbers at the limits of the integer types and of their products with small sizes.
const NUMBERS: &[&str] = &[
    "0",
    "4294967295",
    "4294967296",
    "329406144173384850",
    "1152921504606846976",
    "4611686018427387904",
    "9223372036854775807",
    "18446744073709551615",
    "18446744073709551616",
    "1e300",
    "-1",
];

/// The spans of the numbers that [`Mutation::Number`] may replace.
fn number_spans(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts = bytes[i].is_ascii_digit() && (i == 0 || matches!(bytes[i - 1], b':' | b'=' | b',' | b' ' | b'\n'));
        if starts {
            let end = i + bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
            spans.push((i, end));
            i = end;
        } else {
            i += 1;
        }
    }
    spans
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        1 => any::<Index>().prop_map(Mutation::Truncate),
        3 => (any::<Index>(), 1..=255u8).prop_map(|(i, m)| Mutation::Flip(i, m)),
        1 => (any::<Index>(), any::<u8>()).prop_map(|(i, n)| Mutation::Delete(i, n)),
        1 => (any::<Index>(), any::<u8>()).prop_map(|(i, n)| Mutation::Repeat(i, n)),
        3 => (any::<Index>(), any::<Index>()).prop_map(|(i, t)| Mutation::Insert(i, t)),
        3 => (any::<Index>(), 1..24u8, any::<Index>()).prop_map(|(i, n, t)| Mutation::Replace(i, n, t)),
        2 => (any::<Index>(), any::<Index>()).prop_map(|(i, w)| Mutation::Word32(i, w)),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(i, w)| Mutation::Word64(i, w)),
        2 => (any::<Index>(), any::<Index>()).prop_map(|(i, n)| Mutation::Number(i, n)),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let len = bytes.len();
    // A position in 0..=len (inserting at the end is allowed).
    let at = |i: &Index| i.index(len + 1);
    match m {
        Mutation::Truncate(i) => bytes.truncate(at(i)),
        Mutation::Flip(i, mask) if len > 0 => bytes[i.index(len)] ^= mask,
        Mutation::Delete(i, n) => {
            let s = at(i);
            bytes.drain(s..(s + *n as usize).min(len));
        }
        Mutation::Repeat(i, n) => {
            let s = at(i);
            let span = bytes[s..(s + *n as usize).min(len)].to_vec();
            bytes.splice(s..s, span);
        }
        Mutation::Insert(i, t) => {
            let s = at(i);
            bytes.splice(s..s, TOKENS[t.index(TOKENS.len())].bytes());
        }
        Mutation::Replace(i, n, t) => {
            let s = at(i);
            bytes.splice(s..(s + *n as usize).min(len), TOKENS[t.index(TOKENS.len())].bytes());
        }
        Mutation::Word32(i, w) if len >= 4 => {
            let s = i.index(len - 3);
            bytes[s..s + 4].copy_from_slice(&(WORDS[w.index(WORDS.len())] as u32).to_le_bytes());
        }
        Mutation::Word64(i, w) if len >= 8 => {
            let s = i.index(len - 7);
            bytes[s..s + 8].copy_from_slice(&WORDS[w.index(WORDS.len())].to_le_bytes());
        }
        Mutation::Number(i, n) => {
            let spans = number_spans(bytes);
            if !spans.is_empty() {
                let (s, e) = spans[i.index(spans.len())];
                bytes.splice(s..e, NUMBERS[n.index(NUMBERS.len())].bytes());
            }
        }
        _ => {}
    }
}

/// Inputs derived from `seeds` (valid files): mostly one of them with 1 to 8 mutations,
/// sometimes arbitrary bytes (up to 512), sometimes a seed cut short at a random point.
pub fn inputs(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    assert!(!seeds.is_empty(), "fuzzing needs at least one valid seed file");
    let mutated = {
        let seeds = seeds.clone();
        (any::<Index>(), prop::collection::vec(mutation(), 1..8)).prop_map(move |(s, ms)| {
            let mut bytes = seeds[s.index(seeds.len())].clone();
            for m in &ms {
                apply(&mut bytes, m);
            }
            bytes
        })
    };
    prop_oneof![
        8 => mutated,
        1 => prop::collection::vec(any::<u8>(), 0..512),
        1 => (any::<Index>(), any::<Index>()).prop_map(move |(s, cut)| {
            let seed = &seeds[s.index(seeds.len())];
            seed[..cut.index(seed.len() + 1)].to_vec()
        }),
    ]
}

/// Runs `read` on a thread and waits at most [`DEADLINE`] for it; a panic in `read` or a
/// timeout is a test failure naming `what`.
pub fn within<T: Send + 'static>(what: &str, read: impl FnOnce() -> T + Send + 'static) -> Result<T, TestCaseError> {
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::spawn(move || {
        let out = read();
        let _ = tx.send(());
        out
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(()) => handle.join().map_err(|_| TestCaseError::fail(format!("{what}: the reader panicked"))),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            let _ = handle.join();
            Err(TestCaseError::fail(format!("{what}: the reader panicked")))
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            Err(TestCaseError::fail(format!("{what}: the reader took more than {DEADLINE:?} (hang?)")))
        }
    }
}

/// Checks that error message `message` names the file `path` (by its file name).
pub fn names_file(message: &str, path: &Path) -> Result<(), TestCaseError> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if message.contains(&name) {
        Ok(())
    } else {
        Err(TestCaseError::fail(format!("the error does not name the file `{name}`: {message}")))
    }
}

/// Writes `bytes` to `path` and reads it back with `read` within the deadline ([`within`]):
/// no panic, no hang, and an error must name the file ([`names_file`]). `what` names the target.
pub fn read_written(
    what: &str,
    path: &Path,
    bytes: &[u8],
    read: fn(&Path) -> Result<(), String>,
) -> Result<(), TestCaseError> {
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    let p = path.to_path_buf();
    match within(what, move || read(&p))? {
        Ok(()) => Ok(()),
        Err(message) => names_file(&message, path),
    }
}

/// Gzip-compresses `bytes` (for the `.csv.gz` readers: mutating the text before compressing
/// reaches the parser, mutating the compressed bytes exercises the decoder).
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).expect("gzip into memory");
    e.finish().expect("gzip into memory")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_stay_in_bounds_and_change_files() {
        let mut runner = runner(500);
        let seed = b"hit_id,x\n1,2.5\n2,3.5\n".to_vec();
        let (changed, total) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
        runner
            .run(&inputs(vec![seed.clone()]), |bytes| {
                total.set(total.get() + 1);
                changed.set(changed.get() + (bytes != seed) as u32);
                Ok(())
            })
            .unwrap();
        let (changed, total) = (changed.get(), total.get());
        // The cut-short branch can give the seed back whole; mutations rarely do.
        assert!(changed * 10 > total * 8, "{changed} of {total} inputs differ from the seed");
    }

    #[test]
    fn numbers_in_text_headers_are_found() {
        let text = b"{\"entries\":329,\"x\":[1,22]}\nhit_id,x\n7,2.5\nab12";
        let spans: Vec<&[u8]> = number_spans(text).into_iter().map(|(s, e)| &text[s..e]).collect();
        assert_eq!(spans, [&b"329"[..], b"22", b"7", b"2"]);
    }

    #[test]
    fn within_reports_panics() {
        assert!(within("ok", || 3).is_ok());
        let e = within("boom", || panic!("x")).unwrap_err();
        assert!(e.to_string().contains("boom: the reader panicked"), "{e}");
    }
}
