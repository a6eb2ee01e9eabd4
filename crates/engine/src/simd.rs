//! Run-time CPU feature dispatch for the element-wise kernels.
//!
//! Why not `-C target-cpu=native`: one binary must run on any x86-64 cluster node. Each hot loop
//! is written once as a plain `#[inline(always)]` body; [`dispatch!`](crate::dispatch) compiles it
//! three times (AVX-512, AVX2+FMA, baseline) and picks the best the CPU has, once per call. The
//! compiler vectorises the same source for each target, so every SIMD path has its scalar twin by
//! construction, and the tests run both.

use std::sync::atomic::{AtomicU8, Ordering};

/// The instruction-set level kernels run at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// Baseline x86-64 (SSE2) or a non-x86 CPU.
    Scalar,
    /// AVX2 with FMA.
    Avx2,
    /// AVX-512 (F, BW, DQ, VL).
    Avx512,
}

static FORCED: AtomicU8 = AtomicU8::new(0);
/// The detected level's code (as [`FORCED`]'s), 0 before the first call: every dispatched
/// kernel asks, many once per row, so the CPU is asked only once.
static DETECTED: AtomicU8 = AtomicU8::new(0);

/// The best level this CPU supports (or the one forced by [`force_level`]).
#[inline]
pub fn level() -> Level {
    let code = match FORCED.load(Ordering::Relaxed) {
        0 => DETECTED.load(Ordering::Relaxed),
        f => f,
    };
    match code {
        1 => Level::Scalar,
        2 => Level::Avx2,
        3 => Level::Avx512,
        _ => {
            let l = detect();
            DETECTED.store(l as u8 + 1, Ordering::Relaxed);
            l
        }
    }
}

/// The best level this CPU supports.
fn detect() -> Level {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512dq")
            && is_x86_feature_detected!("avx512vl")
        {
            return Level::Avx512;
        }
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return Level::Avx2;
        }
    }
    Level::Scalar
}

/// Forces a level (tests and benchmarks compare paths); `None` restores detection. A forced
/// level above what the CPU has falls back to detection.
pub fn force_level(l: Option<Level>) {
    let v = match l {
        None => 0,
        Some(Level::Scalar) => 1,
        Some(Level::Avx2) if supports(Level::Avx2) => 2,
        Some(Level::Avx512) if supports(Level::Avx512) => 3,
        Some(_) => 0,
    };
    FORCED.store(v, Ordering::Relaxed);
}

fn supports(l: Level) -> bool {
    let best = detect();
    matches!(
        (l, best),
        (Level::Scalar, _) | (Level::Avx2, Level::Avx2 | Level::Avx512) | (Level::Avx512, Level::Avx512)
    )
}

/// Defines `pub fn $name(args) -> ret` that runs `$body` compiled for the best available level.
#[macro_export]
macro_rules! dispatch {
    ($(#[$m:meta])* $vis:vis fn $name:ident $(<$($g:ident : $bound:path),*>)? ($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$m])*
        #[allow(clippy::too_many_arguments)]
        $vis fn $name $(<$($g: $bound),*>)? ($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            #[allow(clippy::too_many_arguments)]
            fn body $(<$($g: $bound),*>)? ($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn avx512 $(<$($g: $bound),*>)? ($($arg: $ty),*) $(-> $ret)? { body($($arg),*) }
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn avx2 $(<$($g: $bound),*>)? ($($arg: $ty),*) $(-> $ret)? { body($($arg),*) }
                match $crate::simd::level() {
                    // SAFETY: `level()` reports only features the running CPU has.
                    $crate::simd::Level::Avx512 => return unsafe { avx512($($arg),*) },
                    $crate::simd::Level::Avx2 => return unsafe { avx2($($arg),*) },
                    $crate::simd::Level::Scalar => {}
                }
            }
            body($($arg),*)
        }
    };
}
