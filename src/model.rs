//! Loom models of the lock algorithm. They instantiate `crate::lock::Lock`
//! with the loom platform (`crate::platform::loom`), so loom explores the
//! real code, and they run in plain `cargo test`.
//!
//! Bounds: loom explores every interleaving up to a preemption bound. Each
//! model has a default bound, which keeps the whole set to about two and a
//! half minutes of `cargo test` on two cores, and a deeper one, used when
//! `SPINBIT_LOOM_DEEP` is set (the README's deeper run, in release mode).
//! `LOOM_MAX_PREEMPTIONS`, if set, overrides both.
//!
//! Every model also checks that the interleaving it is named after happened
//! in at least one explored execution (the slow-path events the algorithm
//! reports through `Platform::record`), so a model that stops reaching its
//! scenario fails instead of passing vacuously.

use std::cell::RefCell;

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use loom::thread;

use crate::lock::Lock;
use crate::platform::Event;
use crate::platform::loom::{Loom, LoomState};

/// Per-test event counts, summed over all explored executions. Loom runs a
/// model's threads as coroutines on the test's own OS thread, so a std
/// thread-local is per test.
#[derive(Default, Debug, Clone, Copy)]
pub(crate) struct Seen {
    parked: usize,
    spun: usize,
    skipped_for_spinner: usize,
    stack_busy: usize,
    tail_wakes: usize,
    head_wakes: usize,
    starving_wakes: usize,
    fair_give_backs: usize,
    spurious: usize,
}

thread_local! {
    static SEEN: RefCell<Seen> = RefCell::new(Seen::default());
}

pub(crate) fn record(event: Event) {
    SEEN.with(|s| {
        let mut s = s.borrow_mut();
        match event {
            Event::Parked => s.parked += 1,
            Event::Spun => s.spun += 1,
            Event::WakeSkippedForSpinner => s.skipped_for_spinner += 1,
            Event::StackBusy => s.stack_busy += 1,
            Event::TailWake => s.tail_wakes += 1,
            Event::HeadWake => s.head_wakes += 1,
            Event::StarvingWake => s.starving_wakes += 1,
            Event::FairGiveBack => s.fair_give_backs += 1,
        }
    });
}

pub(crate) fn record_spurious() {
    SEEN.with(|s| s.borrow_mut().spurious += 1);
}

/// A lock and the data it guards. Loom reports any access to `data` that is
/// not ordered by the lock as a data race.
struct Guarded<const F: u8, const S: usize, const M: u32, const R: u8> {
    lock: Lock<Loom<F, S, M, R>>,
    data: UnsafeCell<usize>,
}

impl<const F: u8, const S: usize, const M: u32, const R: u8> Guarded<F, S, M, R> {
    /// Leaked on purpose: when loom reports a deadlock it unwinds the model,
    /// and loom objects dropped during that unwinding panic again (which
    /// aborts the test binary). One small leak per execution, tests only.
    fn new() -> &'static Self {
        Box::leak(Box::new(Guarded {
            lock: Lock { state: LoomState::new() },
            data: UnsafeCell::new(0),
        }))
    }

    fn increment(&self) {
        self.lock.lock();
        self.data.with_mut(|p| {
            // SAFETY: loom checks that the lock orders this access.
            unsafe { *p += 1 }
        });
        // SAFETY: locked just above.
        unsafe { self.lock.unlock() };
    }

    fn value(&self) -> usize {
        self.lock.lock();
        // SAFETY: as in `increment`.
        let v = self.data.with(|p| unsafe { *p });
        // SAFETY: locked just above.
        unsafe { self.lock.unlock() };
        v
    }
}

/// A model's preemption bounds: by default, and in the deeper run.
#[derive(Clone, Copy)]
struct Bound {
    default: usize,
    deep: usize,
}

const fn bound(default: usize, deep: usize) -> Bound {
    Bound { default, deep }
}

/// Runs `f` under loom with the model's bound (or `LOOM_MAX_PREEMPTIONS`)
/// and returns the events seen over all executions.
fn explore(bound: Bound, f: impl Fn() + Sync + Send + 'static) -> Seen {
    SEEN.with(|s| *s.borrow_mut() = Seen::default());
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        let deep = std::env::var_os("SPINBIT_LOOM_DEEP").is_some();
        builder.preemption_bound = Some(if deep { bound.deep } else { bound.default });
    }
    builder.check(f);
    SEEN.with(|s| *s.borrow())
}

/// `threads` threads (the model's main thread among them) each increment
/// `rounds` times; every call terminates and the count is exact.
fn exclusion<const F: u8, const S: usize, const M: u32, const R: u8>(
    threads: usize,
    rounds: usize,
    bound: Bound,
) -> Seen {
    explore(bound, move || {
        let g = Guarded::<F, S, M, R>::new();
        let handles: Vec<_> = (1..threads)
            .map(|_| thread::spawn(move || (0..rounds).for_each(|_| g.increment())))
            .collect();
        (0..rounds).for_each(|_| g.increment());
        handles.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(g.value(), threads * rounds);
    })
}

/// The main thread holds the lock while `waiters` threads queue up, then
/// releases it: waiters spin, sleep, get woken.
fn held_then_released<const F: u8, const S: usize, const M: u32, const R: u8>(
    waiters: usize,
    bound: Bound,
) -> Seen {
    explore(bound, move || {
        let g = Guarded::<F, S, M, R>::new();
        g.lock.lock();
        let handles: Vec<_> = (0..waiters).map(|_| thread::spawn(move || g.increment())).collect();
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        handles.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(g.value(), waiters);
    })
}

#[test]
fn two_threads_exclusion_and_termination() {
    let seen = exclusion::<0, 0, 0, 0>(2, 2, bound(3, 6));
    assert!(seen.parked > 0 && seen.spun > 0, "{seen:?}");
}

#[test]
fn three_threads_exclusion_and_termination() {
    let seen = exclusion::<0, 0, 0, 0>(3, 1, bound(2, 4));
    assert!(seen.parked > 0, "{seen:?}");
}

#[test]
fn try_lock_mixed_with_lock() {
    explore(bound(3, 4), || {
        let g = Guarded::<0, 0, 0, 0>::new();
        let won: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
        let t = {
            thread::spawn(move || {
                if g.lock.try_lock() {
                    g.data.with_mut(|p| {
                        // SAFETY: try_lock succeeded.
                        unsafe { *p += 1 }
                    });
                    won.fetch_add(1, Relaxed);
                    // SAFETY: try_lock succeeded.
                    unsafe { g.lock.unlock() };
                }
            })
        };
        let u = thread::spawn(move || g.increment());
        g.increment();
        t.join().unwrap();
        u.join().unwrap();
        assert_eq!(g.value(), 2 + won.load(Relaxed));
    });
}

#[test]
fn spinner_retires_while_unlocker_skips_wake() {
    // One waiter becomes the spinner, the other sleeps; the unlock that sees
    // the spinner wakes nobody, and the spinner either takes the lock or
    // retires onto the stack (clearing SPINNING) while the lock is held.
    let seen = held_then_released::<0, 0, 0, 0>(2, bound(3, 4));
    assert!(seen.skipped_for_spinner > 0 && seen.parked > 0 && seen.spun > 0, "{seen:?}");
}

#[test]
fn unlockers_race_for_the_stack_lock() {
    // Three threads, two rounds each: an unlock finds another unlocker owning
    // the stack and leaves the wake to it.
    let seen = exclusion::<0, 0, 0, 0>(3, 2, bound(2, 4));
    assert!(seen.stack_busy > 0, "{seen:?}");
}

#[test]
fn anti_starvation_wakes_the_tail() {
    // MAX_PASSES = 1: a wake takes the newest waiter once, then the oldest.
    let seen = held_then_released::<0, 0, 1, 0>(3, bound(3, 3));
    assert!(seen.head_wakes > 0 && seen.tail_wakes > 0, "{seen:?}");
}

#[test]
fn fifo_wakes_take_the_tail() {
    let seen = held_then_released::<0, 0, 0, 0>(3, bound(3, 3));
    assert!(seen.tail_wakes > 0 && seen.head_wakes == 0, "{seen:?}");
}

#[test]
fn spurious_futex_returns() {
    let seen = held_then_released::<0, 1, 0, 0>(2, bound(3, 4));
    assert!(seen.spurious > 0, "{seen:?}");
    let seen = exclusion::<0, 2, 1, 0>(3, 1, bound(2, 4));
    assert!(seen.spurious > 0, "{seen:?}");
}

#[test]
fn fair_look_wakes_a_starving_sleeper_beside_the_spinner() {
    // Every unlock that sees a spinner takes a fair look and finds the
    // oldest sleeper starving: it wakes it although a spinner exists.
    let seen = held_then_released::<0, 0, 0, 1>(2, bound(3, 4));
    assert!(seen.starving_wakes > 0, "{seen:?}");
    let seen = exclusion::<0, 0, 0, 1>(3, 1, bound(2, 3));
    assert!(seen.starving_wakes > 0, "{seen:?}");
}

#[test]
fn fair_look_gives_the_stack_back() {
    // Every fair look finds nobody starving and gives the stack back, while
    // other unlockers skip their wakes because the stack has an owner.
    let seen = held_then_released::<0, 0, 0, 2>(2, bound(3, 4));
    assert!(seen.fair_give_backs > 0 && seen.stack_busy > 0, "{seen:?}");
    let seen = exclusion::<0, 0, 0, 2>(3, 1, bound(2, 3));
    assert!(seen.fair_give_backs > 0, "{seen:?}");
}

// Negative controls: each broken protocol must make loom report a lost
// wakeup, which shows as a deadlock (a waiter blocked in the futex model
// forever).

#[test]
#[should_panic(expected = "deadlock")]
fn broken_spinner_keeps_spinning_bit_on_push() {
    held_then_released::<1, 0, 0, 0>(2, bound(3, 3));
}

#[test]
#[should_panic(expected = "deadlock")]
fn broken_unlock_never_wakes() {
    held_then_released::<2, 0, 0, 0>(1, bound(3, 3));
}

#[test]
#[should_panic(expected = "deadlock")]
fn broken_stack_owner_abandons_committed_wake() {
    exclusion::<3, 0, 0, 0>(3, 2, bound(3, 3));
}

#[test]
#[should_panic(expected = "deadlock")]
fn broken_futex_wait_without_compare() {
    held_then_released::<4, 0, 0, 0>(1, bound(3, 3));
}

#[test]
#[should_panic(expected = "Causality violation")]
fn broken_pop_retry_reads_new_nodes_unsynchronised() {
    held_then_released::<5, 0, 0, 0>(3, bound(3, 3));
}

#[test]
#[should_panic(expected = "deadlock")]
fn broken_woken_thread_ignores_handed_spinning_bit() {
    held_then_released::<6, 0, 0, 0>(2, bound(3, 3));
}

#[test]
#[should_panic(expected = "deadlock")]
fn broken_fair_look_gives_the_stack_back_without_a_recheck() {
    // The spinner takes the lock and unlocks while the fair look owns the
    // stack (so that unlock skips its wake); the look then gives the stack
    // back although no spinner or holder is left to wake the sleeper.
    held_then_released::<7, 0, 0, 2>(2, bound(3, 3));
}
