//! Contention statistics: process-wide counters of what the slow paths of
//! every spinbit mutex did (feature `stats`, off by default).
//!
//! ```
//! # #[cfg(feature = "stats")] {
//! let before = spinbit::stats::snapshot();
//! // ... run the workload ...
//! let s = spinbit::stats::snapshot();
//! println!("{} slow paths, {} sleeps, longest wait {:?}",
//!     s.slow_paths - before.slow_paths, s.sleeps - before.sleeps, s.wait_max);
//! for site in s.longest_waits.iter().flatten() {
//!     println!("{}: {:?}", site.location, site.longest_wait);
//! }
//! # }
//! ```
//!
//! Only slow paths pay: a lock whose first attempt succeeds, an unlock
//! that finds no sleeper (but for one whose guess of the word missed:
//! one shared atomic addition after the failed CAS) and every `try_lock`
//! count nothing and run the same instructions as in a build without the
//! feature (but for the address of the call site, loaded on the way to
//! the slow path). A slow
//! path pays two readings of the CPU's tick counter (a wake's own readings,
//! the waker's and the woken thread's, are made in every build: the wake
//! poll learns from them) and a few relaxed
//! atomic additions on counters shared by every thread of the process (so
//! under heavy contention these cache lines move between cores with the
//! slow paths). Its bookkeeping runs once it holds the lock, so it
//! lengthens that critical section: by those additions, and, when its wait
//! is among the longest so far, by an update of the call-site table. A
//! wake that makes a system call (an unlock's, a hand-off's, a nudge's or a
//! condition variable's notification's) reads the tick counter before and
//! after it and adds to three counters; an unlock pays it after its
//! release.
//! Nothing here allocates, blocks or panics in a lock call.
//!
//! The counters cover every mutex of the crate in the process ([`Mutex`],
//! [`FairMutex`], [`ReentrantMutex`], the raw types, and `spinbit::v04`'s,
//! which are the same). Each is read on its own: a [`snapshot`] taken
//! while threads wait is not one instant's state (e.g. a sleep may be
//! counted and its wake not yet), and [`reset`] zeroes them one after the
//! other. Once every lock call has returned, the relations documented on
//! [`Stats`]'s fields hold exactly.
//!
//! **Call sites.** `lock_api` 0.5 marks `Mutex::lock`, `try_lock_for`,
//! `try_lock_until`, the `Arc` variants, `MutexGuard::bump`, `unlocked` and
//! `unlocked_fair` `#[track_caller]`, and with this feature spinbit's raw
//! lock calls are too, so a wait is charged to the line of the user's call
//! (the compiler passes the location as a constant: no cost on the fast
//! path). [`Stats::longest_waits`] keeps the [`SITES`] call sites with the
//! longest single waits, in a fixed table (no allocation, no hashing). Two
//! kinds of wait are not charged to the user's line: those of
//! [`ReentrantMutex`] (lock_api's reentrant mutex locks its raw mutex from
//! a closure that is not `#[track_caller]`, so its waits are charged to a
//! line of lock_api's `remutex.rs`) and those of `spinbit::v04`'s types
//! (lock_api 0.4 does not track callers: the line is in spinbit's
//! `v04.rs`).
//!
//! [`Mutex`]: crate::Mutex
//! [`FairMutex`]: crate::FairMutex
//! [`ReentrantMutex`]: crate::ReentrantMutex

use core::cell::UnsafeCell;
use core::panic::Location;
use core::sync::atomic::AtomicBool;
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::time::Duration;

use crate::arch;
use crate::platform::Event;

/// How many call sites [`Stats::longest_waits`] keeps.
pub const SITES: usize = 8;

/// The counters, as [`snapshot`] read them. All counts are since the
/// process started or the latest [`reset`].
///
/// A *slow path* is what a lock call does once its first attempt at the
/// lock failed: `lock`, `try_lock_for` and `try_lock_until` (and their
/// `Arc` and reentrant variants, and the re-lock of a guard's `bump`,
/// `unlocked` and `unlocked_fair`) after the lock was found held.
/// `try_lock` has none, nor has a timed lock whose timeout is zero or
/// whose deadline has passed.
#[derive(Clone, Copy, Debug, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Slow paths entered (counted on entry): lock calls that found the
    /// lock held and waited for it. Once they have all returned, at least
    /// `spins_won + hand_offs`: a slow path takes the lock by spinning,
    /// by a hand-off, or by finding it free at one of its looks (or times
    /// out, `timeouts`).
    pub slow_paths: u64,
    /// Spin episodes: a waiter, holding the right to spin (at most one at a
    /// time, the spin bit) or just woken as the oldest sleeper, busy-waited
    /// for the lock for up to the spin budget. At least `spins_won`.
    pub spins: u64,
    /// Spin episodes that took the lock.
    pub spins_won: u64,
    /// Sleeps: a waiter pushed itself onto the mutex's waiter stack and
    /// blocked (a futex wait, or `thread::park`). One slow path may sleep
    /// several times (woken, it may lose the lock and sleep again).
    pub sleeps: u64,
    /// Wakes: unlocks (or other threads owning the waiter stack) that woke a
    /// sleeper, hand-offs included. Once every lock call has returned,
    /// `sleeps - wakes` is the number of sleeps that a timed lock's
    /// deadline ended instead (so with no timed lock calls, `wakes ==
    /// sleeps`).
    pub wakes: u64,
    /// Hand-offs: wakes that handed the lock itself to the sleeper, which
    /// then returned without competing for it: `unlock_fair` (and every
    /// unlock of a `FairMutex`) finding a sleeper, unlocks in starvation
    /// mode, and a waker that took the lock back for a starving sleeper.
    /// Counted by the thread that hands the lock over; at most `wakes`.
    pub hand_offs: u64,
    /// Sleepers that waited past their starvation threshold (about 1-2 ms)
    /// and marked themselves starving, so that unlocks hand the lock to
    /// them.
    pub starved: u64,
    /// Nudges: unlocks in starvation mode (or wakers taking the lock back
    /// for a starving sleeper) that found the oldest sleeper asleep in the
    /// OS and, instead of handing it the lock, woke it with its node still
    /// on the stack and released the lock; once it runs it marks itself
    /// anew and waits for a hand-off. Not counted as wakes.
    pub nudges: u64,
    /// Slow paths of `try_lock_for` and `try_lock_until` that returned
    /// without the lock because the deadline passed.
    pub timeouts: u64,
    /// The time spent in slow paths, summed over all of them: from the
    /// entry to the return, with the lock or (timed locks) without.
    pub wait_total: Duration,
    /// Wakes past the spinner: wakes that found a thread holding the right
    /// to spin, made because sleepers were backed up (more than 4 per CPU).
    /// The other wakes with a spinner about are skipped (not counted here).
    pub wakes_past_spinner: u64,
    /// Wakes skipped for the spinner: unlocks that found sleepers and a
    /// thread holding the right to spin (sleepers not backed up), and woke
    /// nobody, leaving the lock to the spinner.
    pub wakes_skipped: u64,
    /// Unlocks whose guess of the word missed: the thread's latest unlock
    /// that needed no slow path (of any lock) found a word without
    /// sleepers, and no miss since paused its guessing, so this unlock
    /// released with a CAS from that word's flags, without a load first,
    /// and the CAS failed: the word differed (a flag come or gone,
    /// sleepers, another lock's state); the unlock went on from the word
    /// the CAS returned, and the thread's next 8 unlocks load the word
    /// first. Each cost one failed CAS.
    pub guesses_missed: u64,
    /// Sleeps whose wake came while the waiter still polled its own node,
    /// before it slept in the OS (a waiter polls for as long as its
    /// wakes from the OS take, when its recent waits were shorter than
    /// that). At most `sleeps`.
    pub polled_wakes: u64,
    /// Wake-to-run latency, summed over every wake: from the moment a wake
    /// unlinked a sleeper to the moment that thread ran again (a hand-off's
    /// lock waits for its recipient all that time).
    pub wake_latency_total: Duration,
    /// The longest single wake-to-run latency. At most `wake_latency_total`
    /// (kept like `wait_max` on targets without 64-bit atomics).
    pub wake_latency_max: Duration,
    /// System calls made to wake a thread that had committed to sleeping in
    /// the OS (`FUTEX_WAKE` on Linux, `Thread::unpark` elsewhere; it may be
    /// running again already, e.g. after its timeout), made by a wake or a
    /// hand-off of a mutex's sleeper, a nudge, or a condition variable's
    /// notification. A wake that finds its thread still polling or on its
    /// way to that commitment makes none. Once every lock call has
    /// returned and with no condition variable in use, at most `wakes +
    /// nudges`.
    pub wake_calls: u64,
    /// The time the waking threads spent in those calls, summed: the
    /// waker's share of a wake (an unlock pays it after its release, with
    /// the lock free). Where an idle CPU halts at once, e.g. in some
    /// virtual machines, waking a thread on it takes the waker an
    /// interrupt the hypervisor handles here (docs/benchmarks.md, "What a
    /// wake costs on these VMs").
    pub wake_call_total: Duration,
    /// The longest single such call. At most `wake_call_total` (kept like
    /// `wait_max` on targets without 64-bit atomics).
    pub wake_call_max: Duration,
    /// The longest single slow path (as `wait_total` measures it). At most
    /// `wait_total`. (On targets without 64-bit atomics, e.g. 32-bit
    /// PowerPC, it is kept in units of 1024 ticks of the tick counter,
    /// nanoseconds there, and rounded down to one.)
    pub wait_max: Duration,
    /// The call sites with the longest single waits, longest first: at
    /// most [`SITES`], each with its longest wait; `None` past the last.
    /// A site's wait is kept only while it is among the [`SITES`] longest,
    /// so the table is exact (each site's longest wait, the [`SITES`]
    /// longest sites) unless `sites_missed` is not 0. See the module
    /// documentation for which waits are charged to the user's line.
    pub longest_waits: [Option<SiteWait>; SITES],
    /// Waits that could have entered `longest_waits` but were not recorded
    /// there because another thread was updating the table at that moment
    /// (a lock path never waits for the table).
    pub sites_missed: u64,
}

/// A call site and the longest single wait of its lock calls
/// ([`Stats::longest_waits`]).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct SiteWait {
    /// Where the lock call was made.
    pub location: &'static Location<'static>,
    /// Its longest slow path, measured as [`Stats::wait_max`].
    pub longest_wait: Duration,
}

/// A counter of 64 bits: one `AtomicU64` where the target has 64-bit
/// atomics.
#[cfg(target_has_atomic = "64")]
struct Counter(core::sync::atomic::AtomicU64);

#[cfg(target_has_atomic = "64")]
impl Counter {
    const fn new() -> Counter {
        Counter(core::sync::atomic::AtomicU64::new(0))
    }
    #[inline(always)]
    fn add(&self, n: u64) {
        self.0.fetch_add(n, Relaxed);
    }
    /// Raises a maximum to `n`, writing only if it is larger (most slow
    /// paths then only read the shared line).
    #[inline(always)]
    fn raise(&self, n: u64) {
        if n > self.0.load(Relaxed) {
            self.0.fetch_max(n, Relaxed);
        }
    }
    fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
    fn clear(&self) {
        self.0.store(0, Relaxed);
    }
}

/// A counter of 64 bits on a target without 64-bit atomics (e.g. 32-bit
/// PowerPC): two `AtomicU32` halves, the high one bumped by the addition
/// that carried out of the low one. A reading taken between that carry
/// and its bump is short by 2^32 for that moment.
#[cfg(not(target_has_atomic = "64"))]
struct Counter {
    high: core::sync::atomic::AtomicU32,
    low: core::sync::atomic::AtomicU32,
}

#[cfg(not(target_has_atomic = "64"))]
impl Counter {
    const fn new() -> Counter {
        Counter {
            high: core::sync::atomic::AtomicU32::new(0),
            low: core::sync::atomic::AtomicU32::new(0),
        }
    }
    #[inline(always)]
    fn add(&self, n: u64) {
        let (high, low) = ((n >> 32) as u32, n as u32);
        let old = self.low.fetch_add(low, Relaxed);
        let carry = u32::from(old.checked_add(low).is_none());
        if high.wrapping_add(carry) != 0 {
            self.high.fetch_add(high.wrapping_add(carry), Relaxed);
        }
    }
    /// A maximum kept in units of 1024 ticks in the low half alone (so
    /// exact to about a microsecond, and saturating at 2^42 ticks): no
    /// two-word maximum is atomic.
    #[inline(always)]
    fn raise(&self, n: u64) {
        let units = u32::try_from(n >> 10).unwrap_or(u32::MAX);
        if units > self.low.load(Relaxed) {
            self.low.fetch_max(units, Relaxed);
        }
    }
    fn get(&self) -> u64 {
        // The high half again after the low one: retry once if a carry
        // landed in between.
        let high = self.high.load(Relaxed);
        let low = self.low.load(Relaxed);
        if self.high.load(Relaxed) != high {
            return (u64::from(self.high.load(Relaxed)) << 32) | u64::from(self.low.load(Relaxed));
        }
        (u64::from(high) << 32) | u64::from(low)
    }
    /// The value of a counter used with [`Counter::raise`] only.
    fn max(&self) -> u64 {
        u64::from(self.low.load(Relaxed)) << 10
    }
    /// Sets a counter used with [`Counter::raise`] only.
    fn set_max(&self, n: u64) {
        self.low.store(u32::try_from(n >> 10).unwrap_or(u32::MAX), Relaxed);
    }
    fn clear(&self) {
        self.low.store(0, Relaxed);
        self.high.store(0, Relaxed);
    }
}

#[cfg(target_has_atomic = "64")]
impl Counter {
    /// The value of a counter used with [`Counter::raise`] only.
    fn max(&self) -> u64 {
        self.get()
    }
    /// Sets a counter used with [`Counter::raise`] only.
    fn set_max(&self, n: u64) {
        self.0.store(n, Relaxed);
    }
}

static SLOW_PATHS: Counter = Counter::new();
static SPINS: Counter = Counter::new();
static SPINS_WON: Counter = Counter::new();
static SLEEPS: Counter = Counter::new();
static WAKES: Counter = Counter::new();
static HAND_OFFS: Counter = Counter::new();
static STARVED: Counter = Counter::new();
static NUDGES: Counter = Counter::new();
static TIMEOUTS: Counter = Counter::new();
/// In ticks of `arch::ticks`, converted when read.
static WAIT_TOTAL: Counter = Counter::new();
/// In ticks (see [`Counter::raise`]).
static WAIT_MAX: Counter = Counter::new();
static SITES_MISSED: Counter = Counter::new();
static WAKES_PAST_SPINNER: Counter = Counter::new();
static POLLED_WAKES: Counter = Counter::new();
static WAKES_SKIPPED: Counter = Counter::new();
static GUESSES_MISSED: Counter = Counter::new();
/// In ticks.
static WAKE_LATENCY_TOTAL: Counter = Counter::new();
/// In ticks (see [`Counter::raise`]).
static WAKE_LATENCY_MAX: Counter = Counter::new();
static WAKE_CALLS: Counter = Counter::new();
/// In ticks.
static WAKE_CALL_TOTAL: Counter = Counter::new();
/// In ticks (see [`Counter::raise`]).
static WAKE_CALL_MAX: Counter = Counter::new();

/// One entry of the call-site table.
#[derive(Clone, Copy)]
struct Slot {
    site: Option<&'static Location<'static>>,
    /// The site's longest wait, in ticks.
    longest: u64,
}

/// The call sites with the longest waits: a table of [`SITES`] slots that
/// a thread updates only while it holds `busy` (taken with a try, never
/// waited for in a lock path). `floor` is the shortest wait in the table
/// once it is full (0 before): a wait no longer than that can neither enter
/// the table nor lengthen a site's wait in it, so the slow paths that find
/// it so pay one load.
struct Table {
    busy: AtomicBool,
    floor: Counter,
    slots: UnsafeCell<[Slot; SITES]>,
}

// SAFETY: `slots` is accessed only by the thread that holds `busy` (taken
// with Acquire, released with Release).
unsafe impl Sync for Table {}

static TABLE: Table = Table {
    busy: AtomicBool::new(false),
    floor: Counter::new(),
    slots: UnsafeCell::new([Slot { site: None, longest: 0 }; SITES]),
};

impl Table {
    /// Charges a wait of `ticks` to `site`, unless the table is busy.
    fn record(&self, site: &'static Location<'static>, ticks: u64) {
        if ticks <= self.floor.max() {
            return;
        }
        if self.busy.swap(true, Acquire) {
            SITES_MISSED.add(1);
            return;
        }
        // SAFETY: we hold `busy`.
        let slots = unsafe { &mut *self.slots.get() };
        if let Some(slot) = slots.iter_mut().find(|s| s.site.is_some_and(|l| *l == *site)) {
            slot.longest = slot.longest.max(ticks);
        } else if let Some(slot) = slots.iter_mut().min_by_key(|s| (s.site.is_some(), s.longest))
            && (slot.site.is_none() || slot.longest < ticks)
        {
            // A free slot, or the shortest wait's, which this one beats:
            // the site that leaves had its longest wait shorter than this
            // one, so if it comes back with a longer one, that is its
            // longest.
            *slot = Slot { site: Some(site), longest: ticks };
        }
        if slots.iter().all(|s| s.site.is_some()) {
            let floor = slots.iter().map(|s| s.longest).min().unwrap_or(0);
            self.floor.set_max(floor);
        }
        self.busy.store(false, Release);
    }

    /// Runs `f` on the table, waiting for it (outside lock paths only).
    fn with<R>(&self, f: impl FnOnce(&mut [Slot; SITES]) -> R) -> R {
        while self.busy.swap(true, Acquire) {
            std::thread::yield_now();
        }
        // SAFETY: we hold `busy`.
        let r = f(unsafe { &mut *self.slots.get() });
        self.busy.store(false, Release);
        r
    }
}

/// Counts a slow-path event of the native platform
/// ([`crate::platform::Platform::record`]). Only the events counted here
/// cost anything: the match folds away at each call site.
#[inline(always)]
pub(crate) fn record(event: Event) {
    match event {
        Event::Spun => SPINS.add(1),
        Event::Parked => SLEEPS.add(1),
        // The pops of a wake; a hand-off is a wake too (`Lock::hand_off`
        // records `HandOff` and pops with `hand_over`, which records no
        // other event).
        Event::TailWake => WAKES.add(1),
        Event::HandOff => {
            WAKES.add(1);
            HAND_OFFS.add(1);
        }
        Event::Starved => STARVED.add(1),
        Event::Nudged => NUDGES.add(1),
        Event::WokePastSpinner => WAKES_PAST_SPINNER.add(1),
        Event::WokenWhilePolling => POLLED_WAKES.add(1),
        Event::WakeSkippedForSpinner => WAKES_SKIPPED.add(1),
        Event::GuessMissed => GUESSES_MISSED.add(1),
        _ => {}
    }
}

/// Records a woken thread's wake-to-run latency, in ticks
/// ([`crate::platform::Platform::record_woken`]).
#[inline(always)]
pub(crate) fn woken(ticks: u64) {
    WAKE_LATENCY_TOTAL.add(ticks);
    WAKE_LATENCY_MAX.raise(ticks);
}

/// Counts a system call made to wake a sleeping thread, which started at
/// tick `start` (the parkers' wake).
#[inline(always)]
pub(crate) fn wake_call(start: u64) {
    let ticks = arch::ticks_since(start);
    WAKE_CALLS.add(1);
    WAKE_CALL_TOTAL.add(ticks);
    WAKE_CALL_MAX.raise(ticks);
}

/// Counts a spin episode that took the lock
/// ([`crate::platform::Platform::note_spin_acquire`]).
#[inline(always)]
pub(crate) fn spin_won() {
    SPINS_WON.add(1);
}

/// Runs `slow`, a lock call's slow path that returns whether it took the
/// lock, counting and timing it, and charges the wait to `site`.
#[inline(always)]
pub(crate) fn slow_path(site: &'static Location<'static>, slow: impl FnOnce() -> bool) -> bool {
    SLOW_PATHS.add(1);
    let start = arch::ticks();
    let taken = slow();
    let ticks = arch::ticks_since(start);
    WAIT_TOTAL.add(ticks);
    WAIT_MAX.raise(ticks);
    if !taken {
        TIMEOUTS.add(1);
    }
    TABLE.record(site, ticks);
    taken
}

/// Ticks to a `Duration` (outside lock paths: the first conversion in a
/// process may calibrate the tick counter).
fn duration(ticks: u64) -> Duration {
    let per_us = arch::ticks_per_us().max(1);
    let nanos = u128::from(ticks) * 1_000 / u128::from(per_us);
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// Reads the counters (each on its own: see the module documentation).
pub fn snapshot() -> Stats {
    let mut longest_waits = [None; SITES];
    let mut slots = TABLE.with(|slots| *slots);
    slots.sort_by_key(|s| core::cmp::Reverse((s.site.is_some(), s.longest)));
    for (out, slot) in longest_waits.iter_mut().zip(slots) {
        *out =
            slot.site.map(|location| SiteWait { location, longest_wait: duration(slot.longest) });
    }
    Stats {
        slow_paths: SLOW_PATHS.get(),
        spins: SPINS.get(),
        spins_won: SPINS_WON.get(),
        sleeps: SLEEPS.get(),
        wakes: WAKES.get(),
        hand_offs: HAND_OFFS.get(),
        starved: STARVED.get(),
        nudges: NUDGES.get(),
        timeouts: TIMEOUTS.get(),
        wakes_past_spinner: WAKES_PAST_SPINNER.get(),
        polled_wakes: POLLED_WAKES.get(),
        wakes_skipped: WAKES_SKIPPED.get(),
        guesses_missed: GUESSES_MISSED.get(),
        wake_latency_total: duration(WAKE_LATENCY_TOTAL.get()),
        wake_latency_max: duration(WAKE_LATENCY_MAX.max()),
        wake_calls: WAKE_CALLS.get(),
        wake_call_total: duration(WAKE_CALL_TOTAL.get()),
        wake_call_max: duration(WAKE_CALL_MAX.max()),
        wait_total: duration(WAIT_TOTAL.get()),
        wait_max: duration(WAIT_MAX.max()),
        longest_waits,
        sites_missed: SITES_MISSED.get(),
    }
}

/// Sets every counter to zero and empties the call-site table. Slow paths
/// running meanwhile may be counted partly before and partly after it.
pub fn reset() {
    for counter in [
        &SLOW_PATHS,
        &SPINS,
        &SPINS_WON,
        &SLEEPS,
        &WAKES,
        &HAND_OFFS,
        &STARVED,
        &NUDGES,
        &TIMEOUTS,
        &WAIT_TOTAL,
        &WAIT_MAX,
        &SITES_MISSED,
        &WAKES_PAST_SPINNER,
        &POLLED_WAKES,
        &WAKES_SKIPPED,
        &GUESSES_MISSED,
        &WAKE_LATENCY_TOTAL,
        &WAKE_LATENCY_MAX,
        &WAKE_CALLS,
        &WAKE_CALL_TOTAL,
        &WAKE_CALL_MAX,
    ] {
        counter.clear();
    }
    TABLE.with(|slots| {
        *slots = [Slot { site: None, longest: 0 }; SITES];
        TABLE.floor.clear();
    });
}
