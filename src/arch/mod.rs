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

/// How long the one spinning waiter busy-waits for the lock before it yields
/// once and then sleeps, in nanoseconds.
///
/// A futex sleep and wake costs the sleeper several microseconds before it
/// runs again, so spinning pays only while the expected wait is shorter than
/// that: 2 µs is below that cost and above a 1 µs critical section, so a
/// spinner catches its release.
/// Measurements: docs/benchmarks.md, "The constants".
pub(crate) const SPIN_NS: u64 = 2_000;

/// The narrowest ping-pong window, and each thread's first: a thread that
/// took the lock by spinning less than its window ago and finds it held
/// again spins lazily (see [`PING_PONG_PAUSE_NS`]); the window adapts per
/// thread up to [`PING_PONG_MAX_NS`]. Short enough that two threads passing
/// the lock back and forth around a 1 µs critical section are not taken for
/// a ping-pong, as they were at the 2 µs spin budget.
/// Measurements: docs/benchmarks.md, "The constants".
pub(crate) const PING_PONG_NS: u64 = 500;

/// The widest a thread's ping-pong window grows; [`PING_PONG_NS`] is the
/// narrowest. A pause that ends with the lock held (a holder running its
/// acquisitions back to back) doubles the window; one that finds it free for
/// a look gap ([`MAX_LOOK_GAP_NS`]: a hand-over the pause delayed) halves it.
/// 10 µs: the fixed window that served the ping-pong cells, which no fixed
/// window could do without delaying the hand-overs.
/// Measurements: docs/benchmarks.md, "The constants".
pub(crate) const PING_PONG_MAX_NS: u64 = 10_000;

/// How long a spinner in a ping-pong (see [`PING_PONG_NS`]) waits before its
/// first look at the lock word, inside the spin budget ([`SPIN_NS`]). Looking
/// at once, the pair trades the lock on nearly every acquisition, each trade a
/// cross-core transfer of the line; the pause lets the holder run a batch from
/// its own cache. 1.5 µs: inside the range where the pair's throughput is
/// flat, leaving a quarter of the budget for looks.
/// Measurements: docs/benchmarks.md, "The constants".
pub(crate) const PING_PONG_PAUSE_NS: u64 = 1_500;

/// The longest a spinner goes between two looks at the lock word: the spin
/// hints between looks double from one up to this long, counted in hints
/// whose cost is calibrated once per process ([`hints_in_ns`]), since it
/// varies tenfold between x86 cores. Each look pulls the cache line away from
/// the holder, and a long gap lets a release go unnoticed: 200 ns is a small
/// fraction of a 1 µs critical section.
/// Measurements: docs/benchmarks.md, "The constants".
pub(crate) const MAX_LOOK_GAP_NS: u64 = 200;

/// A sleeper that has waited this long (since its first yield or push, see
/// `lock::start_clock`; [`STARVING_FEW_NS`] if its latest push found few
/// sleepers) marks itself starving and is handed the lock (the `algorithm`
/// docs give the bound); looks and stack owners judge twice this long
/// starving too. Each hand-off holds the lock while its recipient gets a
/// CPU: milliseconds, far above a futex wake, keep hand-offs rare.
/// Measurements: docs/benchmarks.md, "The constants".
pub(crate) const STARVING_NS: u64 = 2_000_000;

/// The starvation threshold (see [`STARVING_NS`]) of a sleeper whose latest
/// push found sleepers not backed up ([`crate::lock::BACKLOG`] clear); the
/// longer [`STARVING_NS`] applies while they are. A shorter threshold buys
/// fairness at a few threads and costs throughput at many, where hand-offs to
/// sleeping threads set the pace; the flag, read for free in the word the
/// push replaced, tells the two apart.
/// Measurements: docs/benchmarks.md, "The constants".
pub(crate) const STARVING_FEW_NS: u64 = 1_000_000;

/// How long a sleeper that has just marked itself starving (or marked
/// itself anew after a nudge) spins (spin hints, no yield) for its hand-off
/// before it sleeps again. The holder's
/// unlock hands it the lock, often within a critical section or two, and a
/// recipient that is running spares the lock the wake latency; a yield could
/// send it to the back of the run queue for milliseconds. 10 µs covers a few
/// critical sections without burning much CPU when the hand-off is late.
/// Measurements: docs/benchmarks.md, "The constants".
pub(crate) const STARVED_AWAKE_NS: u64 = 10_000;

/// The most times a waiter that finds another thread spinning (or the lock
/// in starvation mode) yields before it sleeps, on arrival and after each
/// wake past the spinner that handed it nothing (see `Lock::wait`); after
/// the first, only while its yields run other threads ([`YIELD_BUSY_NS`])
/// and its starvation threshold has not passed. A runnable waiter gets the
/// lock when it next runs; under oversubscription a sleeper's wake comes late.
/// Measurements: docs/benchmarks.md, "The constants".
pub(crate) const ARRIVAL_YIELDS: u64 = 8;

/// The longest wake latency for which a waiter polls its own node for its
/// wake before it sleeps in the OS (the poll lasts as long as that
/// latency, see `Platform::wait_for_wake`): a longer one is a wait for a
/// CPU (the CPUs are oversubscribed), where a poll only takes a CPU from
/// others; it bounds the CPU one wait can burn.
/// Measurements: docs/benchmarks.md, "The constants".
pub(crate) const WAKE_POLL_MAX_NS: u64 = 50_000;

/// How many times a thread that waits for another thread to give the
/// waiter stack back yields before it sleeps instead (1 µs, doubling up to
/// 1 ms). Stack owners hold the stack for a few steps, so the yields end the
/// wait unless the owner lost its CPU to a thread that does not yield to it
/// (of higher real-time priority, such as the waiter itself under
/// `SCHED_FIFO`), for which only a sleep lets the owner run.
/// Measurements: docs/benchmarks.md, "The constants".
pub(crate) const STACK_WAIT_YIELDS: u32 = 16;

/// A waiter's yield that took at least this long ran other threads, so the
/// waiter may yield again (see [`ARRIVAL_YIELDS`]). A yield that finds nobody
/// else runnable is one system call (under a microsecond); one that runs
/// another thread costs two context switches and that thread's time on the
/// CPU. 5 µs: a lower value yields more often for little, a higher one lets
/// waiters sleep sooner and loses the fairness the yields buy.
/// Measurements: docs/benchmarks.md, "The constants".
pub(crate) const YIELD_BUSY_NS: u64 = 5_000;

/// How often one thread that takes locks by spinning looks at the oldest
/// sleeper (the look takes the stack while the thread holds the lock; two
/// CASes on a line the holder owns, plus a read of the tail node). A
/// quarter of [`STARVING_NS`], so a starving sleeper is noticed within
/// about a quarter of its threshold by any thread that keeps spinning.
/// Measurements: docs/benchmarks.md, "The constants".
pub(crate) const LOOK_NS: u64 = 250_000;

/// Sleepers are backed up ([`crate::lock::BACKLOG`]: unlocks wake past the
/// spinner) while pops, looks or pushes beside a spinner find more than this
/// many per CPU on the stack (the process's affinity mask on Linux). With
/// many more sleepers than CPUs, skipped wakes leave the stack to the
/// starvation hand-offs; with few, skipping the wake keeps the lock cheap.
/// 4: a margin over the 1-2 per CPU that cost the 8-16-thread cells.
/// Measurements: docs/benchmarks.md, "The constants".
pub(crate) const BACKLOG_PER_CPU: u64 = 4;

/// How long after its `unlock_fair` handed the lock to a sleeper a thread
/// that waits for the lock again yields instead of sleeping (its next `lock`,
/// or the one in `bump`). The lock stays held until the recipient runs; a
/// waiter that sleeps meanwhile joins the stack the next fair unlocks hand
/// from, and once all sleep, every acquisition waits for a wake. 200 µs covers
/// a hand-off's delay several times over and is a tenth of [`STARVING_NS`].
/// Measurements: docs/benchmarks.md, "The constants".
pub(crate) const HAND_OFF_AWAKE_NS: u64 = 200_000;

/// How many times an unlock in starvation mode yields its CPU right after
/// it handed the lock to a sleeper or nudged one (0 turns the rule off; see
/// `Lock::unlock_starving`). The recipient, or the nudged thread that is to
/// mark itself anew, must run to go on, and under oversubscription a woken
/// thread can wait a whole scheduler slice for a CPU while the unlocker runs
/// on; Go's `sync.Mutex` yields there too. Only 0 and 1 have been measured.
/// Measurements: docs/benchmarks.md, "The constants".
pub(crate) const STARVING_HAND_OFF_YIELDS: u64 = 1;

/// A tuning constant that the `tuning` feature lets the environment
/// override (benchmarks only: `benches/sweep.sh` sweeps them).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Knob {
    /// [`SPIN_NS`].
    Spin,
    /// [`PING_PONG_NS`].
    PingPong,
    /// [`STARVING_NS`].
    Starving,
    /// [`LOOK_NS`].
    Look,
    /// [`PING_PONG_PAUSE_NS`].
    PingPongPause,
    /// [`MAX_LOOK_GAP_NS`].
    MaxLookGap,
    /// [`STARVED_AWAKE_NS`].
    StarvedAwake,
    /// [`ARRIVAL_YIELDS`].
    ArrivalYields,
    /// [`YIELD_BUSY_NS`].
    YieldBusy,
    /// [`BACKLOG_PER_CPU`].
    BacklogPerCpu,
    /// [`STARVING_FEW_NS`].
    StarvingFew,
    /// [`HAND_OFF_AWAKE_NS`].
    HandOffAwake,
    /// [`STARVING_HAND_OFF_YIELDS`].
    StarvingHandOffYields,
    /// [`PING_PONG_MAX_NS`].
    PingPongMax,
}

impl Knob {
    /// The constant's name; its environment variable is `SPINBIT_<name>`.
    #[cfg(feature = "tuning")]
    fn name(self) -> &'static str {
        match self {
            Knob::Spin => "SPIN_NS",
            Knob::PingPong => "PING_PONG_NS",
            Knob::Starving => "STARVING_NS",
            Knob::Look => "LOOK_NS",
            Knob::PingPongPause => "PING_PONG_PAUSE_NS",
            Knob::MaxLookGap => "MAX_LOOK_GAP_NS",
            Knob::StarvedAwake => "STARVED_AWAKE_NS",
            Knob::ArrivalYields => "ARRIVAL_YIELDS",
            Knob::YieldBusy => "YIELD_BUSY_NS",
            Knob::BacklogPerCpu => "BACKLOG_PER_CPU",
            Knob::StarvingFew => "STARVING_FEW_NS",
            Knob::HandOffAwake => "HAND_OFF_AWAKE_NS",
            Knob::StarvingHandOffYields => "STARVING_HAND_OFF_YIELDS",
            Knob::PingPongMax => "PING_PONG_MAX_NS",
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
/// leave the stack owned for good.
#[cfg(feature = "tuning")]
#[inline]
pub(crate) fn tuned(knob: Knob, default: u64) -> u64 {
    use std::sync::OnceLock;
    static VALUES: [OnceLock<u64>; 14] = [const { OnceLock::new() }; 14];
    *VALUES[knob as usize].get_or_init(|| read_tuning(knob, default))
}

#[cfg(feature = "tuning")]
#[cold]
fn read_tuning(knob: Knob, default: u64) -> u64 {
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

    #[test]
    fn spin_for_ns_spins_at_least_that_long() {
        let t0 = std::time::Instant::now();
        spin_for_ns(200_000);
        // Lower bound only: a busy machine may stretch it, never shorten it
        // by more than the calibration error.
        assert!(t0.elapsed() >= std::time::Duration::from_micros(150));
    }
}
