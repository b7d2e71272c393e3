//! x86_64: `PAUSE` and the time-stamp counter.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// `PAUSE`: tells the core this is a spin-wait loop (saves power, avoids the
/// memory-order mis-speculation penalty when the loop exits). Its cost
/// varies by core, which is why spins are timed with the counter below
/// and hint counts are calibrated (`hints_in_ns`): ~27 ns on the 2-core
/// AMD EPYC VM, 13 ns on the 2-core Intel Xeon VM (family 6, model 207),
/// where `RDTSC` took ~20 (11.5 in a second measurement,
/// `benches/results/sweep-x86_64-amd-epyc.md`, in git at 2dde755) and
/// 10 ns (best of seven loops of 20 M).
#[inline(always)]
pub(crate) fn spin_hint() {
    core::hint::spin_loop();
}

/// Reads the time-stamp counter. Every x86_64 CPU of the last fifteen years
/// has an invariant TSC (constant rate, synchronised across cores), and a
/// spin deadline tolerates the rare machine that does not: an early or late
/// deadline only shortens or lengthens one spin.
///
/// No fence: an `RDTSC` executed a few instructions early or late moves a
/// deadline by nanoseconds, which does not matter here.
#[inline(always)]
pub(crate) fn ticks() -> u64 {
    // SAFETY: RDTSC is part of the x86_64 baseline and has no memory effects.
    unsafe { core::arch::x86_64::_rdtsc() }
}

static TICKS_PER_US: AtomicU64 = AtomicU64::new(0);

/// TSC ticks per microsecond, measured once per process.
#[inline]
pub(crate) fn ticks_per_us() -> u64 {
    match TICKS_PER_US.load(Relaxed) {
        0 => {
            let rate = super::calibrate(ticks);
            // Relaxed: the value is self-contained; racing calibrations store
            // near-identical values.
            TICKS_PER_US.store(rate, Relaxed);
            rate
        }
        rate => rate,
    }
}
