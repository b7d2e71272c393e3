//! Unit tests that need the crate's internals: slow-path counters, the
//! portable parker and the mixed wake policy under real threads, and a look
//! at the waiter stack through the stack lock.

use std::cell::{Cell, UnsafeCell};
use std::ptr;
use std::sync::atomic::AtomicPtr;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::thread;
use std::time::Duration;

use crate::lock::{FLAGS, LOCKED, Lock, STACK_LOCKED};
use crate::platform::native::{AllSpin, MixedWake, Native, NoSpin, ThreadPark};
use crate::platform::{Event, Parker, Platform};

thread_local! {
    static PARKED: Cell<u64> = const { Cell::new(0) };
    static SPUN: Cell<u64> = const { Cell::new(0) };
}

pub(crate) fn record(event: Event) {
    let c = match event {
        Event::Parked => &PARKED,
        Event::Spun => &SPUN,
        _ => return,
    };
    c.with(|c| c.set(c.get() + 1));
}

/// This thread's (parked, spun) counts.
fn counts() -> (u64, u64) {
    (PARKED.with(Cell::get), SPUN.with(Cell::get))
}

/// A lock over any native platform, with non-atomic data.
struct Guarded<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>> {
    lock: Lock<P>,
    data: UnsafeCell<u64>,
}

// SAFETY: `data` is only touched with `lock` held.
unsafe impl<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>> Sync for Guarded<P> {}

impl<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>> Guarded<P> {
    fn new() -> Self {
        Guarded { lock: Lock { state: AtomicPtr::new(ptr::null_mut()) }, data: UnsafeCell::new(0) }
    }

    fn increment(&self) {
        self.lock.lock();
        // SAFETY: locked; a plain read-modify-write that loses updates
        // without mutual exclusion.
        unsafe { *self.data.get() = std::hint::black_box(*self.data.get()) + 1 };
        // SAFETY: locked above.
        unsafe { self.lock.unlock() };
    }

    /// Counts the sleeping waiters, taking the stack lock as an unlocker
    /// would so that no node is removed meanwhile.
    fn sleepers(&self) -> usize {
        let mut s = self.lock.state.load(Relaxed);
        loop {
            if s.addr() & STACK_LOCKED != 0 {
                thread::yield_now();
                s = self.lock.state.load(Relaxed);
                continue;
            }
            match self.lock.state.compare_exchange(
                s,
                s.map_addr(|a| a | STACK_LOCKED),
                Acquire,
                Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => s = now,
            }
        }
        let mut n = 0;
        let mut node = s.map_addr(|a| a & !FLAGS);
        while !node.is_null() {
            n += 1;
            // SAFETY: we own the stack lock, so every linked node is live.
            node = unsafe { crate::lock::next_of(node) };
        }
        self.lock.state.fetch_and(!STACK_LOCKED, Release);
        n
    }
}

fn hammer<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>>(threads: usize, per_thread: u64) {
    let g = Guarded::<P>::new();
    thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| (0..per_thread).for_each(|_| g.increment()));
        }
    });
    assert_eq!(unsafe { *g.data.get() }, threads as u64 * per_thread);
    assert_eq!(g.lock.state.load(Relaxed).addr(), 0, "lock left dirty");
}

const ROUNDS: u64 = if cfg!(miri) { 50 } else { 100_000 };

#[test]
fn exclusion_with_the_portable_parker() {
    hammer::<ThreadPark>(8, ROUNDS);
}

#[test]
fn exclusion_with_mixed_lifo_fifo_wakes() {
    hammer::<MixedWake>(8, ROUNDS);
}

#[test]
fn exclusion_without_spinning() {
    hammer::<NoSpin>(8, ROUNDS);
}

#[test]
fn exclusion_when_every_waiter_spins() {
    hammer::<AllSpin>(8, ROUNDS);
}

/// A holder keeps the lock until every waiter sleeps on the stack; each
/// waiter must then have parked, and one of them must have spun first.
fn waiters_park_and_one_spins<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>>() {
    const WAITERS: usize = 4;
    let g = Guarded::<P>::new();
    g.lock.lock();
    let per_thread = thread::scope(|s| {
        let handles: Vec<_> = (0..WAITERS)
            .map(|_| {
                s.spawn(|| {
                    g.increment();
                    counts()
                })
            })
            .collect();
        while g.sleepers() < WAITERS {
            thread::sleep(Duration::from_millis(1));
        }
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        handles.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
    });
    assert_eq!(unsafe { *g.data.get() }, WAITERS as u64);
    assert!(per_thread.iter().all(|&(parked, _)| parked >= 1), "{per_thread:?}");
    assert!(per_thread.iter().any(|&(_, spun)| spun >= 1), "{per_thread:?}");
}

#[test]
fn waiters_really_park_and_one_spins() {
    waiters_park_and_one_spins::<Native>();
}

#[test]
fn waiters_really_park_with_the_portable_parker() {
    waiters_park_and_one_spins::<ThreadPark>();
}

#[test]
fn no_spin_ablation_never_spins() {
    let g = Guarded::<NoSpin>::new();
    g.lock.lock();
    let (parked, spun) = thread::scope(|s| {
        let h = s.spawn(|| {
            g.increment();
            counts()
        });
        while g.sleepers() < 1 {
            thread::sleep(Duration::from_millis(1));
        }
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        h.join().unwrap()
    });
    assert_eq!((parked >= 1, spun), (true, 0));
}

#[test]
fn a_held_lock_with_a_spinner_shows_the_spinning_bit() {
    // A waiter that arrives at a held lock with no spinner takes the bit.
    let g = Guarded::<Native>::new();
    g.lock.lock();
    thread::scope(|s| {
        s.spawn(|| g.increment());
        // It spins, then sleeps with the bit cleared; wait for that.
        while g.sleepers() < 1 {
            thread::yield_now();
        }
        let state = g.lock.state.load(Relaxed).addr();
        assert_eq!(state & FLAGS, LOCKED, "sleeping waiter must have dropped SPINNING");
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
    });
}

#[test]
fn parker_survives_an_early_unpark() {
    // The wake lands before the thread blocks: `park` must not sleep.
    let p = <Native as Platform>::Parker::new();
    p.prepare();
    // SAFETY: armed above and not parked yet.
    unsafe { <Native as Platform>::Parker::unpark(&p) };
    p.park();
}
