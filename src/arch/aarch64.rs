//! aarch64: the spin-loop hint and the generic timer's virtual counter.

use core::arch::asm;

/// `core::hint::spin_loop` is `ISB` on aarch64 (a real delay of tens of
/// cycles, unlike `YIELD`, which is a no-op on most cores).
#[inline(always)]
pub(crate) fn spin_hint() {
    core::hint::spin_loop();
}

/// Reads `CNTVCT_EL0`, the virtual count of the generic timer (constant rate,
/// readable from EL0 on Linux).
///
/// The `ISB` first keeps the read from being executed speculatively ahead of
/// the loads that precede it in program order; without it a spin loop could
/// read a stale counter and overrun its deadline.
#[inline(always)]
pub(crate) fn ticks() -> u64 {
    let t: u64;
    // SAFETY: reading CNTVCT_EL0 is allowed at EL0 on Linux; ISB and MRS have
    // no memory effects.
    unsafe {
        asm!("isb", "mrs {t}, cntvct_el0", t = out(reg) t, options(nomem, nostack, preserves_flags))
    };
    t
}

/// Counter ticks per microsecond, from `CNTFRQ_EL0` (the firmware-programmed
/// frequency; Linux requires it to be set).
#[inline]
pub(crate) fn ticks_per_us() -> u64 {
    let hz: u64;
    // SAFETY: reading CNTFRQ_EL0 is allowed at EL0; no memory effects.
    unsafe {
        asm!("mrs {hz}, cntfrq_el0", hz = out(reg) hz, options(nomem, nostack, preserves_flags))
    };
    (hz / 1_000_000).max(1)
}
