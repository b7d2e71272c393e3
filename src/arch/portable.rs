//! Every other architecture (and Miri): the standard spin hint and the OS
//! monotonic clock in nanoseconds.

use std::sync::OnceLock;
use std::time::Instant;

/// The architecture's spin-loop hint, whatever the standard library maps it to.
#[inline(always)]
pub(crate) fn spin_hint() {
    core::hint::spin_loop();
}

/// Nanoseconds since the first call in this process.
#[inline]
pub(crate) fn ticks() -> u64 {
    static ANCHOR: OnceLock<Instant> = OnceLock::new();
    ANCHOR.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// One tick is one nanosecond.
#[inline(always)]
pub(crate) fn ticks_per_us() -> u64 {
    1_000
}
