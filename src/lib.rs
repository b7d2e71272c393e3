//! A one-word mutex built like Go 1.24's "spin bit" runtime mutex.
//!
//! ```
//! static JOBS: spinbit::Mutex<Vec<u32>> = spinbit::Mutex::new(Vec::new());
//! JOBS.lock().push(1);
//! assert_eq!(*JOBS.lock(), [1]);
//! ```
//!
//! [`Mutex`] is [`lock_api::Mutex`] over [`RawMutex`], so it has the same API
//! as `parking_lot::Mutex`: no poisoning, `const fn new`, guards that can be
//! mapped, `try_lock`, `into_inner`, `get_mut`.
//!
//! # The algorithm
//!
//! A classic adaptive mutex lets every waiter spin before it sleeps. With many
//! threads they all spin at once: the lock's cache line bounces between cores,
//! the holder is slowed down and CPU time explodes. spinbit lets **at most one
//! waiter spin**; every other waiter yields the CPU once and sleeps, and an unlocker that sees
//! a spinner wakes nobody, because the spinner will take the lock.
//!
//! The whole mutex is one word: a pointer to the most recently pushed sleeping
//! waiter, tagged in its three low bits.
//!
//! | bit | name | meaning |
//! |---|---|---|
//! | 0 | `LOCKED` | the mutex is held |
//! | 1 | `SPINNING` | one waiter has the right to spin; other waiters sleep |
//! | 2 | `STACK_LOCKED` | one unlocker owns the waiter stack; only it removes nodes |
//! | 3.. | head | the top of the stack of sleeping waiters, or null |
//!
//! The waiter nodes live on the waiting threads' own stacks (no allocation, no
//! global table) and each holds the word its thread sleeps on: a futex word on
//! Linux, a `std::thread::park` handle elsewhere.
//!
//! **lock.** The fast path is one `fetch_or(LOCKED)`. If the lock was held,
//! the slow path loops: take the lock whenever `LOCKED` is clear (keeping the
//! other bits); else try to set `SPINNING` and, if that succeeds, spin for the
//! spin budget, yield the CPU once, and look again; if another thread spins,
//! yield the CPU once (on arrival only) and look again; else sleep: link a node to
//! the current head and, in one CAS that only succeeds while `LOCKED` is still
//! set, publish it as the new head and drop `SPINNING` if we held it. A woken
//! thread competes for the lock again (it may barge past no one: the lock is
//! free or held); if it was the oldest waiter it may spin once even beside the
//! spinner.
//!
//! **unlock.** The fast path is one `fetch_sub(LOCKED)`. If the old word shows
//! sleepers, no spinner and no stack owner, the slow path takes `STACK_LOCKED`
//! (leaving instead if the lock was re-taken, a spinner appeared or someone
//! else owns the stack), unlinks one waiter, releases `STACK_LOCKED` in the
//! same CAS that publishes the new head, and wakes the waiter. That CAS also
//! sets `SPINNING` if it was clear and hands it to the woken thread: until it
//! runs and either takes the lock or sleeps again, it is the spinner, so the
//! unlocks in between wake nobody else (without this, a holder that re-takes
//! the lock at once would wake the whole stack before the first woken thread
//! even runs).
//!
//! **Which waiter.** By default the oldest (the stack keeps an amortised O(1)
//! cached tail with back links): a sleeping waiter is never passed over by a
//! wake. The algorithm is written so the rule can be "newest first, but the
//! oldest after at most `N` passes" (`MAX_PASSES`, 0 in this release); either
//! way the bound is deterministic. A woken waiter competes with running
//! threads that arrive at the same moment, as with `parking_lot` and `std`.
//!
//! **Starvation.** Under oversubscription a spinner nearly always exists,
//! so unlocks would almost never wake anyone and the oldest sleepers would
//! sleep indefinitely. So now and then (every 250 µs per thread) an unlock
//! that skips a wake for a spinner takes a *fair look*: it takes
//! `STACK_LOCKED` and, if the oldest sleeper has been asleep for over 1 ms,
//! wakes it anyway; that thread then spins beside the spinner. If nobody is
//! starving it gives the stack back, or wakes one as an ordinary unlock
//! would if the spinner and holder are gone by then.
//!
//! # Why no wakeup is lost
//!
//! A thread sleeps only after a CAS that saw `LOCKED` set and published its
//! node, so some holder exists whose `unlock` will see a non-empty stack.
//! That unlock skips the wake in three cases, each covered by someone else:
//!
//! * `SPINNING` was set: the spinner leaves that role only by taking the lock
//!   (its own unlock then sees the stack) or by pushing itself, which clears
//!   `SPINNING` and succeeds only while the lock is held (that holder's unlock
//!   sees the stack). A woken thread that was handed the bit is a spinner
//!   like any other.
//! * `STACK_LOCKED` was set: its owner has already committed to waking one
//!   waiter, and the woken thread takes the lock or sleeps again while it is
//!   held; either way a later unlock looks at the stack. A fair look that
//!   finds nobody starving gives the stack back without a wake only in a CAS
//!   that sees `LOCKED` or `SPINNING` set, so that holder or spinner covers
//!   the skipped unlocks; otherwise it commits to a wake like any owner.
//! * `LOCKED` was set again by the time the slow path looked: the new holder's
//!   unlock looks at the stack.
//!
//! A wake that lands between a waiter's push and its sleep is not lost either:
//! the futex wait compares the node's word and does not sleep once it was
//! changed. The test suite model-checks exactly these interleavings with loom.
//!
//! # The spin budget
//!
//! The spinner busy-waits for 2 µs, measured with the CPU's own counter (the
//! TSC on x86_64, `CNTVCT_EL0` on aarch64), not in iterations: one `PAUSE`
//! costs 10 to 140 cycles depending on the core. A futex sleep and wake costs
//! the sleeper several microseconds before it runs again, so spinning longer
//! than that does not pay. Between two looks at the word the spinner backs
//! off (1, 2, 4, up to 16 spin hints), so its polling does not keep pulling
//! the cache line away from the holder. A waiter that finds another spinner
//! yields the CPU once before it sleeps: with more threads than cores, the
//! lock is often free by the time it runs again.
//!
//! One more rule keeps two busy threads from the 1-2 thread regression of
//! Go's version: a thread that took the lock by spinning less than 500 ns
//! ago does not spin when it finds the lock taken again, it sleeps.
//! Without it, two threads that re-take the lock as soon as they release it
//! hand it over on every acquisition (a cross-core transfer each time); with
//! it, they alternate in batches, one wake per batch.
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

#[cfg(feature = "bench-ablations")]
pub mod ablation;
mod arch;
mod lock;
#[cfg(all(test, not(miri)))]
mod model;
mod platform;
mod raw;
#[cfg(test)]
mod tests;

/// The README's examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub use raw::RawMutex;

/// A mutual exclusion primitive protecting a `T`, built on [`RawMutex`].
///
/// `Mutex::new` is a `const fn`, so a `Mutex` can be a `static`.
pub type Mutex<T> = lock_api::Mutex<RawMutex, T>;

/// An RAII guard for a [`Mutex`]; the mutex is unlocked when it is dropped.
pub type MutexGuard<'a, T> = lock_api::MutexGuard<'a, RawMutex, T>;

/// A [`MutexGuard`] mapped to a part of the protected data.
pub type MappedMutexGuard<'a, T> = lock_api::MappedMutexGuard<'a, RawMutex, T>;
