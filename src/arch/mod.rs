//! Per-architecture spin-wait hint, tick counter and timed spinning.
//!
//! Each architecture module provides the same three things:
//!
//! * `spin_hint()`: the CPU's "I am busy-waiting" instruction;
//! * `ticks()`: a cheap, monotonic, constant-rate counter;
//! * `ticks_per_us()`: that counter's rate, so that a budget given in
//!   nanoseconds can be turned into ticks.
//!
//! Spin budgets are expressed in time, never in iterations: the cost of one
//! `PAUSE` ranges from ~10 to ~140 cycles across x86_64 cores and the cost of
//! aarch64's `ISB` varies as much, so an iteration count means a different
//! time on every machine.

#[cfg(all(target_arch = "aarch64", not(miri)))]
mod aarch64;
#[cfg(all(target_arch = "aarch64", not(miri)))]
pub(crate) use aarch64::{spin_hint, ticks, ticks_per_us};

#[cfg(all(target_arch = "x86_64", not(miri)))]
mod x86_64;
#[cfg(all(target_arch = "x86_64", not(miri)))]
pub(crate) use x86_64::{spin_hint, ticks, ticks_per_us};

#[cfg(any(miri, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
mod portable;
#[cfg(any(miri, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
pub(crate) use portable::{spin_hint, ticks, ticks_per_us};

// The policy's constants: twelve chosen values, then four timings derived
// from the value that sets their scale. Why each value is what it is:
// docs/benchmarks.md, "The constants".

/// The one spinner's busy-wait for the lock before it yields and sleeps:
/// above a 1 µs critical section, below a futex sleep and wake.
pub(crate) const SPIN_NS: u64 = 2_000;

/// The widest ping-pong window (see [`ping_pong_ns`]): a pause that ends
/// with the lock held doubles it; one that finds the lock free halves it.
pub(crate) const PING_PONG_MAX_NS: u64 = 10_000;

/// A sleeper that has waited this long (`lock::start_clock`) and whose latest
/// push found sleepers backed up ([`crate::lock::BACKLOG`]) marks itself
/// starving and is served first; other threads judge a sleeper starving at
/// twice this (a requeued condition variable waiter at once).
pub(crate) const STARVING_NS: u64 = 2_000_000;

/// The starvation threshold of a sleeper whose latest push found no backlog.
pub(crate) const STARVING_FEW_NS: u64 = 1_000_000;

/// How long a sleeper that has just marked itself starving (or anew, after
/// a nudge) spins for its hand-off before it sleeps again.
pub(crate) const STARVED_AWAKE_NS: u64 = 10_000;

/// The most yields of a waiter that finds a spinner (or the lock starving)
/// before it sleeps, renewed after a wake past the spinner; after the
/// first, only while they run other threads and, unless sleepers are
/// backed up, its starvation threshold has not passed.
pub(crate) const ARRIVAL_YIELDS: u64 = 8;

/// A yield that took this long ran other threads (one that finds nobody
/// runnable is one system call), so the waiter may yield again.
pub(crate) const YIELD_BUSY_NS: u64 = 5_000;

/// The longest wake latency for which a waiter polls its node for its wake
/// (`Platform::wait_for_wake`); a longer one is a wait for a CPU.
pub(crate) const WAKE_POLL_MAX_NS: u64 = 50_000;

/// Sleepers are backed up ([`crate::lock::BACKLOG`]: unlocks wake past the
/// spinner) while the stack holds more than this many per CPU.
pub(crate) const BACKLOG_PER_CPU: u64 = 4;

/// How long after its `unlock_fair` handed the lock to a sleeper a thread
/// that waits for the lock again yields instead of joining the sleepers.
pub(crate) const HAND_OFF_AWAKE_NS: u64 = 200_000;

/// How many times a wait for a stack owner (or a condition variable's
/// list) yields before it sleeps instead (1 µs doubling to 1 ms), so that
/// an owner preempted by a real-time thread runs.
pub(crate) const STACK_WAIT_YIELDS: u32 = 16;

/// After an unlock's guess of the word missed, its thread's next this many
/// unlocks load the word first: a miss costs a cache-line round trip
/// with the waiter polling the line, a hit saves one cached load.
pub(crate) const GUESS_PAUSE: usize = 8;

/// A thread that took the lock by spinning less than its ping-pong window
/// ago and finds it held again pauses; this is the first and narrowest.
pub(crate) const fn ping_pong_ns(spin_ns: u64) -> u64 {
    spin_ns / 4
}

/// A ping-pong's pause before its first look: the holder runs a batch from
/// its own cache instead of trading the line on every acquisition.
pub(crate) const fn ping_pong_pause_ns(spin_ns: u64) -> u64 {
    spin_ns - spin_ns / 4
}

/// The longest a spinner goes between looks at the lock word (see
/// [`hints_in_ns`]): each look pulls the line from the holder.
pub(crate) const fn max_look_gap_ns(spin_ns: u64) -> u64 {
    spin_ns / 10
}

/// How often a thread that takes locks by spinning looks at the oldest
/// sleeper: one judged starving (at twice `starving_ns`) is noticed within
/// a sixteenth of that age.
pub(crate) const fn look_ns(starving_ns: u64) -> u64 {
    starving_ns / 8
}

/// A tuning constant that the `tuning` feature lets the environment
/// override (benchmarks only: `benches/sweep.sh` sweeps them). The derived
/// timings follow the constant they are derived from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Knob {
    /// [`SPIN_NS`].
    Spin,
    /// [`PING_PONG_MAX_NS`].
    PingPongMax,
    /// [`STARVING_NS`].
    Starving,
    /// [`STARVING_FEW_NS`].
    StarvingFew,
    /// [`STARVED_AWAKE_NS`].
    StarvedAwake,
    /// [`ARRIVAL_YIELDS`].
    ArrivalYields,
    /// [`YIELD_BUSY_NS`].
    YieldBusy,
    /// [`WAKE_POLL_MAX_NS`].
    WakePollMax,
    /// [`BACKLOG_PER_CPU`].
    BacklogPerCpu,
    /// [`HAND_OFF_AWAKE_NS`].
    HandOffAwake,
}

/// How many knobs there are: the last variant's index plus one (a new knob
/// goes last, or this must name the new last one).
#[cfg(feature = "tuning")]
const KNOBS: usize = Knob::HandOffAwake as usize + 1;

impl Knob {
    /// The constant's name; its environment variable is `SPINBIT_<name>`.
    #[cfg(feature = "tuning")]
    fn name(self) -> &'static str {
        match self {
            Knob::Spin => "SPIN_NS",
            Knob::PingPongMax => "PING_PONG_MAX_NS",
            Knob::Starving => "STARVING_NS",
            Knob::StarvingFew => "STARVING_FEW_NS",
            Knob::StarvedAwake => "STARVED_AWAKE_NS",
            Knob::ArrivalYields => "ARRIVAL_YIELDS",
            Knob::YieldBusy => "YIELD_BUSY_NS",
            Knob::WakePollMax => "WAKE_POLL_MAX_NS",
            Knob::BacklogPerCpu => "BACKLOG_PER_CPU",
            Knob::HandOffAwake => "HAND_OFF_AWAKE_NS",
        }
    }
}

/// The value of a tuning constant: `default`, folded at compile time.
#[cfg(not(feature = "tuning"))]
#[inline(always)]
pub(crate) const fn tuned(_knob: Knob, default: u64) -> u64 {
    default
}

/// The value of a tuning constant: the environment variable
/// `SPINBIT_<name>` if it is set, else `default`. Read once per process, at
/// the constant's first use (a slow path), and cached. A value that is not a
/// non-negative integer that fits a `u64` aborts the process with a message
/// naming the variable: the first use can come while the thread's waiter
/// node is on the lock's stack or while it owns the stack, and a panic
/// there would unwind past the node (which lives in the unwound frame) or
/// leave the stack owned for good. So does the variable of a knob that
/// has gone (now derived, or part of a rule; docs/benchmarks.md, "Fewer
/// constants"): a run that sets one would measure the defaults unawares.
#[cfg(feature = "tuning")]
#[inline]
pub(crate) fn tuned(knob: Knob, default: u64) -> u64 {
    use std::sync::OnceLock;
    static VALUES: [OnceLock<u64>; KNOBS] = [const { OnceLock::new() }; KNOBS];
    *VALUES[knob as usize].get_or_init(|| read_tuning(knob, default))
}

#[cfg(feature = "tuning")]
#[cold]
fn read_tuning(knob: Knob, default: u64) -> u64 {
    const GONE: [&str; 5] = [
        "PING_PONG_NS",
        "PING_PONG_PAUSE_NS",
        "MAX_LOOK_GAP_NS",
        "LOOK_NS",
        "STARVING_HAND_OFF_YIELDS",
    ];
    for gone in GONE {
        if std::env::var_os(format!("SPINBIT_{gone}")).is_some() {
            eprintln!(
                "spinbit (feature `tuning`): SPINBIT_{gone} is no longer a tuning constant \
                 (docs/benchmarks.md, \"Fewer constants\"); aborting"
            );
            std::process::abort()
        }
    }
    let var = format!("SPINBIT_{}", knob.name());
    let bad = |why: String| -> ! {
        eprintln!("spinbit (feature `tuning`): {var}{why}; aborting");
        std::process::abort()
    };
    match std::env::var(&var) {
        Err(std::env::VarError::NotPresent) => default,
        Err(e) => bad(format!(": {e}")),
        Ok(text) => match text.trim().replace('_', "").parse::<u64>() {
            Ok(v) => v,
            Err(e) => bad(format!("={text:?} is not a non-negative integer: {e}")),
        },
    }
}

/// Ticks of [`ticks`] since `since`, a reading that may have been taken on
/// another CPU (a stack owner reads a sleeper's starvation clock, and a
/// thread may migrate between its own readings). A reading ahead of ours,
/// which counters that are not perfectly in step can give, counts as no
/// time at all, not as the huge unsigned difference that would put the
/// lock into starvation mode for nothing.
#[inline]
pub(crate) fn ticks_since(since: u64) -> u64 {
    let d = ticks().wrapping_sub(since);
    if (d as i64) < 0 { 0 } else { d }
}

/// `ns` nanoseconds in ticks of [`ticks`].
#[inline]
pub(crate) fn ns_to_ticks(ns: u64) -> u64 {
    ns.saturating_mul(ticks_per_us()) / 1_000
}

/// How many spin hints take about `ns` nanoseconds on this CPU (at least
/// one). The hint's cost is measured once per process, the first time a
/// spinner needs it: the best of four runs of 256 hints, timed with
/// [`ticks`] (an interrupt can only lengthen a run).
#[inline]
pub(crate) fn hints_in_ns(ns: u64) -> u32 {
    // 32 bits: every target with std has 32-bit atomics, not every one
    // 64-bit ones (32-bit PowerPC and MIPS); 2^32 hints per millisecond is
    // far beyond any CPU.
    use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
    // Hints per millisecond; 0 until measured.
    static HINTS_PER_MS: AtomicU32 = AtomicU32::new(0);
    let per_ms = match HINTS_PER_MS.load(Relaxed) {
        0 => {
            let rate = u32::try_from(measure_hints_per_ms()).unwrap_or(u32::MAX);
            // Relaxed: the value is self-contained; racing measurements
            // store near-identical values.
            HINTS_PER_MS.store(rate, Relaxed);
            rate
        }
        rate => rate,
    };
    u32::try_from(ns.saturating_mul(u64::from(per_ms)) / 1_000_000).unwrap_or(u32::MAX).max(1)
}

#[cold]
fn measure_hints_per_ms() -> u64 {
    const HINTS: u64 = 256;
    let best = (0..4)
        .map(|_| {
            let t0 = ticks();
            for _ in 0..HINTS {
                spin_hint();
            }
            ticks().wrapping_sub(t0)
        })
        .min()
        .unwrap_or(1)
        .max(1);
    // HINTS hints in `best` ticks; ticks_per_us() * 1000 ticks per ms.
    (HINTS.saturating_mul(ticks_per_us()).saturating_mul(1_000) / best).max(1)
}

/// Returns the tick count at which a spin of `ns` nanoseconds that starts now
/// is over.
#[cfg(test)]
pub(crate) fn deadline_after_ns(ns: u64) -> u64 {
    // The duration first: the first conversion in a process calibrates the
    // counter (about 200 µs of busy waiting).
    let span = ns_to_ticks(ns);
    ticks().wrapping_add(span)
}

/// Busy-waits for about `ns` nanoseconds.
#[cfg(test)]
pub(crate) fn spin_for_ns(ns: u64) {
    let deadline = deadline_after_ns(ns);
    while ticks() < deadline {
        spin_hint();
    }
}

/// Measures the rate of a counter whose frequency the hardware does not
/// report, against the OS monotonic clock, over about 200 µs. Runs once per
/// process, the first time a thread has to wait for a lock.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[cold]
fn calibrate(ticks: fn() -> u64) -> u64 {
    use std::time::{Duration, Instant};
    let t0 = Instant::now();
    let c0 = ticks();
    let mut elapsed;
    loop {
        spin_hint();
        elapsed = t0.elapsed();
        if elapsed >= Duration::from_micros(200) {
            break;
        }
    }
    let c1 = ticks();
    let ns = elapsed.as_nanos().max(1) as u64;
    (c1.wrapping_sub(c0).saturating_mul(1_000) / ns).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_monotonic_and_rate_is_sane() {
        let a = ticks();
        let b = ticks();
        assert!(b >= a);
        let rate = ticks_per_us();
        // From a 1 MHz counter to a 10 GHz one.
        assert!((1..=10_000).contains(&rate), "ticks per µs = {rate}");
    }

    // x86_64 only: the aarch64 tests run under qemu, whose loops speed up
    // once translated and whose counter is not the hardware's (it failed
    // there with a factor of 2-4); and not under Miri, which interprets
    // every hint.
    #[test]
    #[cfg(target_arch = "x86_64")]
    #[cfg_attr(miri, ignore = "timing on an interpreter")]
    fn hints_in_ns_take_about_that_long() {
        assert_eq!(hints_in_ns(0), 1, "at least one hint");
        let n = hints_in_ns(200_000);
        let t0 = std::time::Instant::now();
        for _ in 0..n {
            spin_hint();
        }
        // Lower bound only (the calibration keeps the fastest of its runs,
        // so the count is not too small): a busy machine may stretch it.
        assert!(t0.elapsed() >= std::time::Duration::from_micros(100), "{n} hints");
    }

    // The derived timings keep the values their sweeps measured (the
    // docs and docs/benchmarks.md give them).
    #[test]
    fn derived_timings_are_the_measured_values() {
        assert_eq!(ping_pong_pause_ns(SPIN_NS), 1_500);
        assert_eq!(ping_pong_ns(SPIN_NS), 500);
        assert_eq!(max_look_gap_ns(SPIN_NS), 200);
        assert_eq!(look_ns(STARVING_NS), 250_000);
        // Within the spin budget, as the pause's doc says.
        assert!(ping_pong_pause_ns(SPIN_NS) < SPIN_NS);
    }

    #[test]
    fn spin_for_ns_spins_at_least_that_long() {
        let t0 = std::time::Instant::now();
        spin_for_ns(200_000);
        // Lower bound only: a busy machine may stretch it, never shorten it
        // by more than the calibration error.
        assert!(t0.elapsed() >= std::time::Duration::from_micros(150));
    }
}
