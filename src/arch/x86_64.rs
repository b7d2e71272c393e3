//! x86_64: `PAUSE` and the time-stamp counter.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// `PAUSE`: tells the core this is a spin-wait loop (saves power, avoids the
/// memory-order mis-speculation penalty when the loop exits). Its cost
/// varies by core, which is why spins are timed with the counter below
/// and hint counts are calibrated (`hints_in_ns`): ~27 ns on the 2-core
/// AMD EPYC VM, 13 ns on the 2-core Intel Xeon VM (family 6, model 207),
/// where `RDTSC` took ~20 (11.5 in a second measurement,
/// `benches/results/sweep-x86_64-amd-epyc.md`) and 10 ns (best of seven
/// loops of 20 M).
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

/// The time-stamp counter read once every earlier instruction has executed
/// and every earlier load is globally visible (`RDTSCP`). A read after a
/// load waits for the load; `RDTSCP` does not hold back later instructions,
/// so a load may start before a read that precedes it, and two reads
/// around a load can undercount it (a miss may pass for a hit; an
/// interrupt between the reads makes a hit pass for a miss). Used only by
/// the measurement build `--cfg spinbit_timed_looks`
/// (see [`super::TIMED_LOOKS`]).
///
/// # Safety
/// The CPU must have `RDTSCP` (not every x86_64 CPU does, and some
/// hypervisors hide it): [`look_miss_ticks`] returns 0 where it has not.
#[inline(always)]
pub(crate) unsafe fn ticks_ordered() -> u64 {
    let mut aux = 0u32;
    // SAFETY: the caller checked that the CPU has RDTSCP; it reads the
    // counter and writes only `aux`.
    unsafe { core::arch::x86_64::__rdtscp(&mut aux) }
}

/// Runs `f` between two reads of [`ticks_ordered`]: its result, and the
/// ticks it took. The calibration below, the timed looks and their test
/// all time a load this way.
///
/// # Safety
/// As for [`ticks_ordered`].
#[inline(always)]
pub(crate) unsafe fn timed<T>(f: impl FnOnce() -> T) -> (T, u64) {
    // SAFETY: forwarded from the caller.
    let t0 = unsafe { ticks_ordered() };
    let value = f();
    // SAFETY: as above.
    (value, unsafe { ticks_ordered() }.wrapping_sub(t0))
}

/// A load timed with [`timed`] that took longer than this many
/// ticks missed in this core's cache: twice the fastest of 64 timed loads
/// of a word this thread owns (the hit and the two counter reads),
/// measured once per process. 0 if the CPU has no `RDTSCP`: then looks are
/// not timed. On the 2-core Intel Xeon VM a hit took 34-40 ticks and a
/// load of a line another core had just written 150-194
/// (`benches/results/ab-x86_64-intel-xeon-timed-looks.md`).
#[inline]
pub(crate) fn look_miss_ticks() -> u64 {
    // u64::MAX: not measured yet.
    static MISS: AtomicU64 = AtomicU64::new(u64::MAX);
    match MISS.load(Relaxed) {
        u64::MAX => {
            let miss = if has_rdtscp() {
                let word = AtomicU64::new(0);
                let best = (0..64)
                    // SAFETY: the CPU has RDTSCP (checked above).
                    .map(|_| unsafe { timed(|| core::hint::black_box(word.load(Relaxed))) }.1)
                    .min()
                    .unwrap_or(0);
                best.saturating_mul(2).clamp(1, u64::MAX - 1)
            } else {
                0
            };
            // Relaxed: the value is self-contained; racing measurements
            // store near-identical values.
            MISS.store(miss, Relaxed);
            miss
        }
        miss => miss,
    }
}

/// Whether the CPU has `RDTSCP` (CPUID leaf 0x8000_0001, EDX bit 27).
#[cold]
fn has_rdtscp() -> bool {
    use core::arch::x86_64::__cpuid;
    // CPUID is part of the x86_64 baseline and has no memory effects.
    #[allow(unused_unsafe)]
    // SAFETY: as above (the intrinsic is `unsafe` in older toolchains).
    let (max, edx) = unsafe { (__cpuid(0x8000_0000).eax, __cpuid(0x8000_0001).edx) };
    max >= 0x8000_0001 && edx & (1 << 27) != 0
}
