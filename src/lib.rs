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
//! mapped, `try_lock`, `into_inner`, `get_mut`, the fair unlocks
//! `MutexGuard::unlock_fair`, `unlocked_fair` and `bump`, and timed locking,
//! `try_lock_for` and `try_lock_until` (with the `arc_lock` feature, the
//! `Arc` guards too: `lock_arc`, `try_lock_arc_for`, ..., and
//! `ArcMutexGuard`; with the `serde` feature, `Serialize` and
//! `Deserialize` for a `T` that has them). As in `parking_lot`,
//! [`FairMutex`] is the same mutex with every unlock fair (over
//! [`RawFairMutex`]), and the crate re-exports the [`lock_api`] it is
//! built on.
//!
//! [`Condvar`] (with [`Mutex`]) and [`FairCondvar`] (with [`FairMutex`])
//! are [`lock_api::Condvar`] over [`RawCondvar`]: one word, no spurious
//! wakeups (so notifications return exact counts), `notify_all` moves
//! the waiters onto the mutex's waiter stack instead of waking them all,
//! and a waiter whose notifications come sooner than a wake from the OS
//! polls for them briefly before it sleeps.
//!
//! [`ReentrantMutex`] is [`lock_api::ReentrantMutex`] over [`RawMutex`] and
//! [`RawThreadId`] (the address of a thread-local, as in `parking_lot`): the
//! thread that holds it may lock it again. With the `lock_api_04` feature,
//! the module `spinbit::v04` has the same mutex behind lock_api 0.4's
//! traits, with the type names of `parking_lot` 0.12 (`Mutex`, `FairMutex`,
//! `ReentrantMutex`, their guards and raw types), for code built on that
//! version, and condition variables for its guards with the methods of
//! `parking_lot::Condvar` 0.12 (`v04::Condvar`, `v04::FairCondvar`).
//!
//! With the `stats` feature, the module `spinbit::stats` counts what the
//! slow paths of every spinbit mutex in the process did (waits, spins,
//! sleeps, wakes, hand-offs, the longest waits and their call sites);
//! without it, the code is the same as if the module did not exist.
//!
//! # When to prefer it
//!
//! Many threads contending for one lock with short critical sections: at
//! most one waiter spins, so the lock word does not bounce between every
//! waiting core, and an unlock that sees the spinner wakes nobody. Under
//! moderate contention (think time about ten times the critical section)
//! and with many more contending threads than CPUs, `parking_lot` or `std`
//! may be faster today (the README has the measurements).
//!
//! How it works, the argument that no wakeup is lost and the bound on
//! waiting: the [`algorithm`] page.
//!
//! # Limits
//!
//! * Not process-shared: the waiter nodes are addresses on the waiters'
//!   stacks, so the mutex must not be placed in memory shared between
//!   processes.
//! * After `fork`, the child has only the forking thread. A mutex that at
//!   the fork was free, or held by the forking thread, with no other thread
//!   waiting for it, works as usual in the child. The child must not use
//!   any other mutex: one held by another thread stays locked for good (as
//!   every mutex does), and one that other threads waited for (sleeping,
//!   spinning, or woken and not yet running) keeps their traces in its
//!   word. A fair unlock, a `bump`, or any unlock in starvation mode then
//!   hands the lock to a thread that does not exist, and it stays locked
//!   (the next `lock` hangs; `unlock_fair` itself may wait for good for a
//!   waiter stack such a thread owned), and a `SPINNING` bit left by such a
//!   thread makes unlocks skip the wakes that threads the child starts
//!   would need. (The unit tests `a_mutex_uncontended_at_the_fork_works_in_the_child`
//!   and `a_mutex_contended_at_the_fork_stays_locked_in_the_child` show
//!   both.) Only async-signal-safe calls are allowed in the child of a
//!   multi-threaded process anyway, until it calls `exec`.
//! * Where a seccomp filter makes `futex` fail (ENOSYS, EPERM), a waiter
//!   still sleeps: a few yields, then sleeps of 1 µs doubling up to 1 ms
//!   between looks at its wait word, so a wake is seen within about a
//!   millisecond. It never spins on the failing call.
//! * Not async-signal-safe: a signal handler must not lock a mutex that its
//!   own thread may hold or be waiting for (its waiter node is in use).
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

#[cfg(feature = "bench-ablations")]
#[cfg_attr(docsrs, doc(cfg(feature = "bench-ablations")))]
pub mod ablation;
pub mod algorithm;
mod arch;
mod condvar;
mod lock;
#[cfg(all(test, not(miri)))]
mod model;
mod platform;
mod raw;
mod reentrant;
#[cfg(feature = "stats")]
#[cfg_attr(docsrs, doc(cfg(feature = "stats")))]
pub mod stats;
#[cfg(test)]
mod tests;
#[cfg(feature = "lock_api_04")]
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api_04")))]
pub mod v04;

/// The README's examples run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub use condvar::RawCondvar;
pub use raw::{RawFairMutex, RawMutex};
pub use reentrant::RawThreadId;

/// The `lock_api` version that spinbit's types are built on (0.5), for
/// naming its traits and generic guards without a direct dependency that
/// must match it.
pub use lock_api;

/// A guard that owns an `Arc` of its mutex (`Mutex::lock_arc`,
/// `try_lock_arc_for`, ...), as in `parking_lot`: e.g.
/// `ArcMutexGuard<spinbit::RawMutex, T>`.
#[cfg(feature = "arc_lock")]
#[cfg_attr(docsrs, doc(cfg(feature = "arc_lock")))]
pub use lock_api::ArcMutexGuard;

/// A guard that owns an `Arc` of its reentrant mutex
/// (`ReentrantMutex::lock_arc`, ...), as in `parking_lot`: e.g.
/// `ArcReentrantMutexGuard<spinbit::RawMutex, spinbit::RawThreadId, T>`.
#[cfg(feature = "arc_lock")]
#[cfg_attr(docsrs, doc(cfg(feature = "arc_lock")))]
pub use lock_api::ArcReentrantMutexGuard;

/// Whether a timed wait on a [`Condvar`] or [`FairCondvar`] timed out
/// (lock_api's, re-exported as `parking_lot` does).
///
/// ```
/// use std::time::Duration;
///
/// let (m, cv) = (spinbit::Mutex::new(()), spinbit::Condvar::new());
/// let r: spinbit::WaitTimeoutResult = cv.wait_for(&mut m.lock(), Duration::from_millis(1));
/// assert!(r.timed_out()); // nobody notified it
/// ```
pub use lock_api::WaitTimeoutResult;

/// A mutual exclusion primitive protecting a `T`, built on [`RawMutex`].
///
/// `Mutex::new` is a `const fn`, so a `Mutex` can be a `static`.
pub type Mutex<T> = lock_api::Mutex<RawMutex, T>;

/// An RAII guard for a [`Mutex`]; the mutex is unlocked when it is dropped.
pub type MutexGuard<'a, T> = lock_api::MutexGuard<'a, RawMutex, T>;

/// A [`MutexGuard`] mapped to a part of the protected data.
pub type MappedMutexGuard<'a, T> = lock_api::MappedMutexGuard<'a, RawMutex, T>;

/// A condition variable for [`Mutex`]: [`lock_api::Condvar`] over
/// [`RawCondvar`]. Its waits never return spuriously, its notifications
/// return exact counts, and `notify_all` moves the waiters onto the
/// mutex's waiter stack instead of waking them all (see [`RawCondvar`]).
///
/// ```
/// use std::sync::Arc;
///
/// let pair = Arc::new((spinbit::Mutex::new(false), spinbit::Condvar::new()));
/// let pair2 = Arc::clone(&pair);
/// let t = std::thread::spawn(move || {
///     let (ready, cv) = &*pair2;
///     *ready.lock() = true;
///     cv.notify_one();
/// });
/// let (ready, cv) = &*pair;
/// let mut g = ready.lock();
/// cv.wait_while(&mut g, |ready| !*ready);
/// assert!(*g);
/// drop(g);
/// t.join().unwrap();
/// ```
pub type Condvar = lock_api::Condvar<RawCondvar>;

/// A condition variable for [`FairMutex`]: as [`Condvar`], over
/// [`RawCondvar<RawFairMutex>`].
pub type FairCondvar = lock_api::Condvar<RawCondvar<RawFairMutex>>;

/// A mutex whose every unlock is fair: [`lock_api::Mutex`] over
/// [`RawFairMutex`], as `parking_lot::FairMutex` is over its raw fair mutex.
///
/// Dropping a guard hands the lock directly to the oldest sleeping waiter
/// if there is one (see [`RawFairMutex`]); everything else is [`Mutex`]'s.
///
/// ```
/// let m = spinbit::FairMutex::new(0);
/// *m.lock() += 1;
/// assert_eq!(m.into_inner(), 1);
/// ```
pub type FairMutex<T> = lock_api::Mutex<RawFairMutex, T>;

/// An RAII guard for a [`FairMutex`]; dropping it unlocks fairly.
pub type FairMutexGuard<'a, T> = lock_api::MutexGuard<'a, RawFairMutex, T>;

/// A [`FairMutexGuard`] mapped to a part of the protected data.
pub type MappedFairMutexGuard<'a, T> = lock_api::MappedMutexGuard<'a, RawFairMutex, T>;

/// A mutex that the thread holding it may lock again:
/// [`lock_api::ReentrantMutex`] over [`RawMutex`] and [`RawThreadId`], as
/// `parking_lot::ReentrantMutex`. Its guards give shared access only (use a
/// `Cell` or `RefCell` inside).
///
/// ```
/// use std::cell::Cell;
///
/// static DEPTH: spinbit::ReentrantMutex<Cell<u32>> = spinbit::ReentrantMutex::new(Cell::new(0));
/// let outer = DEPTH.lock();
/// let inner = DEPTH.lock(); // the same thread: no deadlock
/// inner.set(outer.get() + 1);
/// assert_eq!(outer.get(), 1);
/// ```
pub type ReentrantMutex<T> = lock_api::ReentrantMutex<RawMutex, RawThreadId, T>;

/// An RAII guard for a [`ReentrantMutex`]; the mutex is unlocked when the
/// last of its thread's guards is dropped.
pub type ReentrantMutexGuard<'a, T> = lock_api::ReentrantMutexGuard<'a, RawMutex, RawThreadId, T>;

/// A [`ReentrantMutexGuard`] mapped to a part of the protected data.
pub type MappedReentrantMutexGuard<'a, T> =
    lock_api::MappedReentrantMutexGuard<'a, RawMutex, RawThreadId, T>;
