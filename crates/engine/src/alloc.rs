//! Counting memory: a global allocator wrapper that counts live heap bytes and their peak.
//!
//! The `trackgnn` binary installs [`CountingAlloc`] as its global allocator, so memory figures
//! are counted from the allocations themselves, not estimated from shapes. Benchmarks reset the
//! peak before a step ([`reset_peak`]) and read it after ([`peak_bytes`]).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static INSTALLED: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting.
pub struct CountingAlloc;

// SAFETY: every call is forwarded to the system allocator unchanged; the counters are atomics.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count_up(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count_up(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
            count_up(new_size);
        }
        p
    }
}

#[inline]
fn count_up(n: usize) {
    INSTALLED.store(1, Ordering::Relaxed);
    let now = CURRENT.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

/// True once [`CountingAlloc`] has served an allocation (it is the global allocator).
pub fn installed() -> bool {
    INSTALLED.load(Ordering::Relaxed) == 1
}

/// Live heap bytes now.
pub fn current_bytes() -> usize {
    CURRENT.load(Ordering::Relaxed)
}

/// The peak of live heap bytes since the last [`reset_peak`].
pub fn peak_bytes() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// Starts a new peak from the current level.
pub fn reset_peak() {
    PEAK.store(CURRENT.load(Ordering::Relaxed), Ordering::Relaxed);
}

/// Peak resident set size of this process in bytes (`VmHWM` of `/proc/self/status`), or 0
/// where that is not available.
pub fn peak_rss_bytes() -> u64 {
    proc_status_bytes("VmHWM")
}

/// Current resident set size of this process in bytes (`VmRSS`), or 0 where not available.
pub fn current_rss_bytes() -> u64 {
    proc_status_bytes("VmRSS")
}

/// A `kB` entry of `/proc/self/status` in bytes, 0 if unavailable.
fn proc_status_bytes(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status").ok().and_then(|s| status_kib(&s, key)).map_or(0, |k| k * 1024)
}

/// Parses `key:   1234 kB` out of a `/proc/<pid>/status` text.
fn status_kib(status: &str, key: &str) -> Option<u64> {
    status.lines().find_map(|l| {
        let rest = l.strip_prefix(key)?.strip_prefix(':')?;
        rest.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_figures() {
        let status = "Name:\tx\nVmPeak:\t  20 kB\nVmHWM:\t    1234 kB\nVmRSS:\t  1000 kB\n";
        assert_eq!(status_kib(status, "VmHWM"), Some(1234));
        assert_eq!(status_kib(status, "VmRSS"), Some(1000));
        assert_eq!(status_kib(status, "VmSwap"), None);
        if cfg!(target_os = "linux") {
            let now = current_rss_bytes();
            let peak = peak_rss_bytes();
            assert!(now > 0 && peak >= now, "peak {peak}, current {now}");
        }
    }
}
