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
/// runs again (two system calls and a trip through the scheduler), so
/// spinning only pays while the expected wait is shorter than that: 2 µs is
/// below that cost and above the 1 µs critical sections of the benchmark
/// matrix, so a spinner catches their release. A sweep of 1, 2 and 4 µs
/// (full profile, cells `contended/t2/cs1000/think0`, `t8/cs1000/think0`,
/// `t2/cs100/think0`, `t8/cs1000/think10000` and `handoff/cs1000`) found no
/// difference beyond run-to-run noise: 0.74/0.75/0.78, 0.85/0.86/0.87,
/// 6.6/6.5/7.3, 0.174/0.170/0.171 and 0.68/0.71/0.70 Mops/s (Intel Xeon VM).
/// Swept again over 1, 2 and 4 µs on the 2-core AMD EPYC VM (`benches/sweep.sh`,
/// the seven key inline cells, `benches/results/sweep-x86_64-amd-epyc.md`): flat, spinbit's
/// throughput within 5 % in six cells and within noise in the seventh; 2 µs
/// best or tied in all seven.
pub(crate) const SPIN_NS: u64 = 2_000;

/// A thread that took a lock by spinning less than this long ago does not
/// spin for it again: it sleeps at once.
///
/// With two threads that re-take the lock as soon as they release it, a
/// spinner catches every release, and the lock then changes hands on every
/// acquisition, each hand-over a cross-core transfer of the lock and the
/// data (~80 ns here, against ~16 ns for an uncontended lock+unlock): the
/// 1-2 thread regression of Go's spin-bit mutex. A thread that lost the lock
/// so soon after spinning for it sleeps instead, the other one runs its
/// acquisitions back to back, and the pair alternates in batches, one wake
/// per batch. Threads whose acquisitions are further apart (think time,
/// long critical sections) are not affected. 500 ns: with 2 µs (the spin
/// budget) the rule also caught legitimate hand-overs, e.g. two threads that
/// pass the lock back and forth around a 1 µs critical section
/// (`handoff/cs1000`: 0.11 Mops/s at 2 µs, 0.74 at 500 ns, parking_lot 0.69),
/// while `contended/t2/cs0/think0` keeps its gain (32.4 Mops/s at 500 ns).
/// Intel Xeon VM. Swept over 0, 250, 500 and 1000 ns on the 2-core AMD EPYC
/// VM (`benches/sweep.sh`, `benches/results/sweep-x86_64-amd-epyc.md`): flat within noise;
/// 500 best at t8/cs0, t8/cs1000 and t32/cs1000, 0 (the rule off) at the
/// others, and at `t2/cs0` 0 led in two runs (79 and 69 Mops/s against 59
/// and 63), inside that cell's run-to-run spread (52-70): the rule does not
/// measurably help on that CPU.
pub(crate) const PING_PONG_NS: u64 = 500;

/// A sleeper that has waited this long (since it first slept in its `lock`
/// call) is starving: the stack owner that judges it sets STARVING, and from
/// then on unlocks hand the lock directly to the oldest sleeper until the
/// oldest no longer starves.
///
/// 1 ms, as Go's `sync.Mutex`. A hand-off keeps the lock held while the
/// woken thread waits for a CPU, so a threshold near the time a futex wake
/// takes (a few µs) would turn every contended unlock into a hand-off and
/// convoy the lock; a much longer one lets the oldest waiter wait that much
/// longer. See the crate docs for the bound it gives. Swept over 250 µs,
/// 1 ms and 4 ms on the 2-core AMD EPYC VM (`benches/sweep.sh`,
/// `benches/results/sweep-x86_64-amd-epyc.md`): not flat below 1 ms, 250 µs collapses the
/// 32-thread cells (t32/cs0 15 against 127 Mops/s, t32/cs1000 0.11 against
/// 0.88: most unlocks become hand-offs); 4 ms is level or better
/// (t32/cs100/think1000 1.46 against 1.14, with worse fairness).
pub(crate) const STARVING_NS: u64 = 1_000_000;

/// How often one thread that takes locks by spinning looks at the oldest
/// sleeper (the look takes the stack while the thread holds the lock; two
/// CASes on a line the holder owns, plus a read of the tail node). A
/// quarter of [`STARVING_NS`], so a starving sleeper is noticed within
/// about a quarter of its threshold by any thread that keeps spinning.
/// Swept over 62.5 µs, 250 µs and 1 ms on the 2-core AMD EPYC VM
/// (`benches/sweep.sh`, `benches/results/sweep-x86_64-amd-epyc.md`): flat within noise
/// (1 ms 10 % lower at t32/cs1000 in one run); 250 µs best in five of the
/// seven key cells.
pub(crate) const LOOK_NS: u64 = 250_000;

/// A tuning constant that the `tuning` feature lets the environment
/// override (benchmarks only: `benches/sweep.sh` sweeps them).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Knob {
    /// [`SPIN_NS`].
    SpinNs,
    /// [`PING_PONG_NS`].
    PingPongNs,
    /// [`STARVING_NS`].
    StarvingNs,
    /// [`LOOK_NS`].
    LookNs,
    /// `MAX_BACKOFF` in `crate::lock`.
    MaxBackoff,
}

impl Knob {
    /// The constant's name; its environment variable is `SPINBIT_<name>`.
    #[cfg(feature = "tuning")]
    fn name(self) -> &'static str {
        match self {
            Knob::SpinNs => "SPIN_NS",
            Knob::PingPongNs => "PING_PONG_NS",
            Knob::StarvingNs => "STARVING_NS",
            Knob::LookNs => "LOOK_NS",
            Knob::MaxBackoff => "MAX_BACKOFF",
        }
    }

    /// The largest value the constant's type holds.
    #[cfg(feature = "tuning")]
    fn max(self) -> u64 {
        match self {
            Knob::MaxBackoff => u32::MAX.into(),
            _ => u64::MAX,
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
/// the constant's first use (a slow path), and cached; a value that is not a
/// non-negative integer in the constant's range panics, naming the variable.
#[cfg(feature = "tuning")]
#[inline]
pub(crate) fn tuned(knob: Knob, default: u64) -> u64 {
    use std::sync::OnceLock;
    static VALUES: [OnceLock<u64>; 5] = [const { OnceLock::new() }; 5];
    *VALUES[knob as usize].get_or_init(|| read_tuning(knob, default))
}

#[cfg(feature = "tuning")]
#[cold]
fn read_tuning(knob: Knob, default: u64) -> u64 {
    let var = format!("SPINBIT_{}", knob.name());
    match std::env::var(&var) {
        Err(std::env::VarError::NotPresent) => default,
        Err(e) => panic!("spinbit (feature `tuning`): {var}: {e}"),
        Ok(text) => match text.trim().replace('_', "").parse::<u64>() {
            Ok(v) if v <= knob.max() => v,
            Ok(v) => panic!("spinbit (feature `tuning`): {var}={v}: above {}", knob.max()),
            Err(e) => panic!(
                "spinbit (feature `tuning`): {var}={text:?} is not a non-negative integer: {e}"
            ),
        },
    }
}

/// `ns` nanoseconds in ticks of [`ticks`].
#[inline]
pub(crate) fn ns_to_ticks(ns: u64) -> u64 {
    ns.saturating_mul(ticks_per_us()) / 1_000
}

/// Returns the tick count at which a spin of `ns` nanoseconds that starts now
/// is over.
#[cfg(test)]
pub(crate) fn deadline_after_ns(ns: u64) -> u64 {
    ticks().wrapping_add(ns_to_ticks(ns))
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

    #[test]
    fn spin_for_ns_spins_at_least_that_long() {
        let t0 = std::time::Instant::now();
        spin_for_ns(200_000);
        // Lower bound only: a busy machine may stretch it, never shorten it
        // by more than the calibration error.
        assert!(t0.elapsed() >= std::time::Duration::from_micros(150));
    }
}
