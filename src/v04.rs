//! The same mutex for code built on `lock_api` 0.4, such as code written
//! for `parking_lot` 0.12 (feature `lock_api_04`).
//!
//! [`RawMutex`] and [`RawFairMutex`] here implement lock_api 0.4's
//! `RawMutex`, `RawMutexFair` and `RawMutexTimed`. Each wraps the crate's
//! lock_api 0.5 type of the same name ([`crate::RawMutex`],
//! [`crate::RawFairMutex`]) and forwards every call to it: the same word,
//! the same algorithm, the same fair unlocks and timed locking, only the
//! trait signatures differ (lock_api 0.4 has no guard state; the 0.5 types'
//! state is the stateless `GuardSend`, so nothing is lost). The aliases are
//! those of `parking_lot` 0.12:
//!
//! ```
//! use spinbit::v04::{Mutex, ReentrantMutex};
//!
//! static JOBS: Mutex<Vec<u32>> = Mutex::new(Vec::new());
//! JOBS.lock().push(1);
//! assert_eq!(*JOBS.lock(), [1]);
//!
//! let m = ReentrantMutex::new(1);
//! let a = m.lock();
//! let b = m.lock(); // the same thread may lock it again
//! assert_eq!(*a + *b, 2);
//! ```
//!
//! [`Condvar`] (with [`Mutex`]) and [`FairCondvar`] (with [`FairMutex`])
//! are the crate root's condition variables for these guards, with
//! `parking_lot::Condvar` 0.12's methods (lock_api 0.4 has no condition
//! variable of its own):
//!
//! ```
//! use std::sync::Arc;
//! use spinbit::v04::{Condvar, Mutex};
//!
//! let pair = Arc::new((Mutex::new(false), Condvar::new()));
//! let pair2 = Arc::clone(&pair);
//! let t = std::thread::spawn(move || {
//!     let (ready, cv) = &*pair2;
//!     *ready.lock() = true;
//!     cv.notify_one();
//! });
//! let (ready, cv) = &*pair;
//! let mut g = ready.lock();
//! cv.wait_while(&mut g, |ready| !*ready);
//! assert!(*g);
//! drop(g);
//! t.join().unwrap();
//! ```
//!
//! The types are distinct from the crate root's: a `spinbit::v04::Mutex`
//! is a `lock_api` 0.4 `Mutex` and a `spinbit::Mutex` a 0.5 one.

use core::fmt;
use std::time::{Duration, Instant};

/// The `lock_api` version (0.4) that this module's types are built on.
pub use lock_api_04 as lock_api;

/// The guards that own an `Arc` of their mutex (`Mutex::lock_arc`,
/// `ReentrantMutex::lock_arc`, ...), as `parking_lot` 0.12 re-exports them.
#[cfg(feature = "arc_lock")]
#[cfg_attr(docsrs, doc(cfg(feature = "arc_lock")))]
pub use lock_api_04::{ArcMutexGuard, ArcReentrantMutexGuard};

/// The thread identity of [`ReentrantMutex`]: the crate root's
/// [`RawThreadId`], which implements both lock_api 0.4's and 0.5's
/// `GetThreadId`.
pub use crate::RawThreadId;

/// Defines a lock_api 0.4 raw mutex that forwards to a lock_api 0.5 one
/// whose guard state is `lock_api::GuardSend`.
macro_rules! raw_mutex_04 {
    ($(#[$m:meta])* $name:ident, $inner:ty) => {
        $(#[$m])*
        #[derive(Default)]
        pub struct $name($inner);

        const _: () = assert!(size_of::<$name>() == size_of::<usize>());
        const _: () = {
            const fn send_sync<T: Send + Sync>() {}
            send_sync::<$name>();
        };

        impl $name {
            /// A new, unlocked mutex (the same as `INIT`).
            pub const fn new() -> Self {
                $name(<$inner>::new())
            }

            /// The lock_api 0.5 guard state of a lock that this context
            /// holds: stateless, so it can be made again for each unlock.
            #[inline]
            fn held() -> ::lock_api::GuardSend {
                ::lock_api::GuardSend::new()
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("locked", &::lock_api::RawMutex::is_locked(&self.0))
                    .finish()
            }
        }

        // SAFETY: every method forwards to the wrapped lock_api 0.5 mutex,
        // which implements the same contract: `lock` returns only once this
        // context holds the lock and `try_lock` returns true only then;
        // `unlock` releases it. The 0.5 guard state is the zero-sized,
        // `Drop`-less `GuardSend`: dropping it does not unlock, and
        // `held()` makes an equal one for `unlock`. Its guards are `Send`
        // (any thread may unlock), so `GuardMarker` is `GuardSend` too.
        unsafe impl lock_api_04::RawMutex for $name {
            #[allow(clippy::declare_interior_mutable_const)]
            const INIT: Self = Self::new();

            type GuardMarker = lock_api_04::GuardSend;

            #[inline]
            fn lock(&self) {
                let _: ::lock_api::GuardSend = ::lock_api::RawMutex::lock(&self.0);
            }

            #[inline]
            fn try_lock(&self) -> bool {
                ::lock_api::RawMutex::try_lock(&self.0).is_some()
            }

            /// Unlocks the mutex, as the lock_api 0.5 type's `unlock`.
            ///
            /// # Safety
            ///
            /// The mutex must be locked, by the current context.
            #[inline]
            unsafe fn unlock(&self) {
                // SAFETY: forwarded from the caller; the guard state is
                // stateless.
                unsafe { ::lock_api::RawMutex::unlock(&self.0, Self::held()) }
            }

            #[inline]
            fn is_locked(&self) -> bool {
                ::lock_api::RawMutex::is_locked(&self.0)
            }
        }

        // SAFETY: forwarded to the wrapped mutex's `RawMutexFair`, which
        // releases the lock held by the caller's context exactly once
        // (handing it over counts as a release), and whose `bump` returns
        // only once this context holds the lock again.
        unsafe impl lock_api_04::RawMutexFair for $name {
            /// Unlocks the mutex fairly: hands it directly to the oldest
            /// sleeping waiter if there is one (see "Fair unlocking" in the
            /// `algorithm` docs).
            ///
            /// # Safety
            ///
            /// The mutex must be locked, by the current context.
            #[inline]
            unsafe fn unlock_fair(&self) {
                // SAFETY: forwarded from the caller.
                unsafe { ::lock_api::RawMutexFair::unlock_fair(&self.0, Self::held()) }
            }

            /// If a waiter sleeps, hands the lock to the oldest one and then
            /// locks again; otherwise does nothing.
            ///
            /// # Safety
            ///
            /// The mutex must be locked, by the current context.
            #[inline]
            unsafe fn bump(&self) {
                // SAFETY: forwarded from the caller.
                unsafe { ::lock_api::RawMutexFair::bump(&self.0, &mut Self::held()) }
            }
        }

        // SAFETY: forwarded to the wrapped mutex's `RawMutexTimed`, which
        // returns a guard only once this context holds the lock, as `lock`.
        unsafe impl lock_api_04::RawMutexTimed for $name {
            type Duration = std::time::Duration;
            type Instant = std::time::Instant;

            /// Takes the lock, waiting at most `timeout` (see "Timed
            /// locking" in the `algorithm` docs).
            #[inline]
            fn try_lock_for(&self, timeout: std::time::Duration) -> bool {
                ::lock_api::RawMutexTimed::try_lock_for(&self.0, timeout).is_some()
            }

            /// Takes the lock, waiting until `deadline` at the latest.
            #[inline]
            fn try_lock_until(&self, deadline: std::time::Instant) -> bool {
                ::lock_api::RawMutexTimed::try_lock_until(&self.0, deadline).is_some()
            }
        }
    };
}

raw_mutex_04!(
    /// The raw spin-bit mutex for lock_api 0.4: [`crate::RawMutex`] behind
    /// lock_api 0.4's traits. Use it through [`Mutex`].
    ///
    /// Its guard is `Send`: any thread may unlock it.
    RawMutex,
    crate::RawMutex
);

raw_mutex_04!(
    /// A raw mutex whose every unlock is fair, for lock_api 0.4:
    /// [`crate::RawFairMutex`] behind lock_api 0.4's traits. Use it through
    /// [`FairMutex`].
    RawFairMutex,
    crate::RawFairMutex
);

// SAFETY: as the crate root's lock_api 0.5 implementation (the same
// function): each live thread gets its own non-zero id, the same one every
// time.
unsafe impl lock_api_04::GetThreadId for RawThreadId {
    const INIT: Self = RawThreadId;

    #[inline]
    fn nonzero_thread_id(&self) -> core::num::NonZeroUsize {
        RawThreadId::current()
    }
}

/// A mutual exclusion primitive protecting a `T`, built on [`RawMutex`]:
/// lock_api 0.4's `Mutex`, as `parking_lot::Mutex` 0.12.
pub type Mutex<T> = lock_api_04::Mutex<RawMutex, T>;

/// An RAII guard for a [`Mutex`]; the mutex is unlocked when it is dropped.
pub type MutexGuard<'a, T> = lock_api_04::MutexGuard<'a, RawMutex, T>;

/// A [`MutexGuard`] mapped to a part of the protected data.
pub type MappedMutexGuard<'a, T> = lock_api_04::MappedMutexGuard<'a, RawMutex, T>;

/// A mutex whose every unlock is fair, built on [`RawFairMutex`], as
/// `parking_lot::FairMutex` 0.12.
pub type FairMutex<T> = lock_api_04::Mutex<RawFairMutex, T>;

/// An RAII guard for a [`FairMutex`]; dropping it unlocks fairly.
pub type FairMutexGuard<'a, T> = lock_api_04::MutexGuard<'a, RawFairMutex, T>;

/// A [`FairMutexGuard`] mapped to a part of the protected data.
pub type MappedFairMutexGuard<'a, T> = lock_api_04::MappedMutexGuard<'a, RawFairMutex, T>;

/// A mutex that the thread holding it may lock again, built on
/// [`RawMutex`] and [`RawThreadId`], as `parking_lot::ReentrantMutex` 0.12.
/// Its guards give shared access only (use a `Cell` or `RefCell` inside).
pub type ReentrantMutex<T> = lock_api_04::ReentrantMutex<RawMutex, RawThreadId, T>;

/// An RAII guard for a [`ReentrantMutex`].
pub type ReentrantMutexGuard<'a, T> =
    lock_api_04::ReentrantMutexGuard<'a, RawMutex, RawThreadId, T>;

/// A [`ReentrantMutexGuard`] mapped to a part of the protected data.
pub type MappedReentrantMutexGuard<'a, T> =
    lock_api_04::MappedReentrantMutexGuard<'a, RawMutex, RawThreadId, T>;

/// A new [`Mutex`], as `parking_lot::const_mutex` (`Mutex::new` is a
/// `const fn` too).
pub const fn const_mutex<T>(val: T) -> Mutex<T> {
    Mutex::new(val)
}

/// A new [`FairMutex`], as `parking_lot::const_fair_mutex`.
pub const fn const_fair_mutex<T>(val: T) -> FairMutex<T> {
    FairMutex::new(val)
}

/// A new [`ReentrantMutex`], as `parking_lot::const_reentrant_mutex`.
pub const fn const_reentrant_mutex<T>(val: T) -> ReentrantMutex<T> {
    ReentrantMutex::new(val)
}

/// Whether a timed wait on a [`Condvar`] or [`FairCondvar`] ended because
/// its deadline passed, as `parking_lot::WaitTimeoutResult` 0.12.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitTimeoutResult(bool);

impl WaitTimeoutResult {
    /// Whether the wait timed out: its deadline passed and no notification
    /// counted it (for the `wait_while` forms: one of its waits did).
    #[inline]
    pub fn timed_out(self) -> bool {
        self.0
    }
}

/// Defines a condition variable for the lock_api 0.4 guards of `$raw`,
/// over the crate's `RawCondvar` for the lock_api 0.5 mutex it wraps.
macro_rules! condvar_04 {
    ($(#[$m:meta])* $name:ident, $raw:ty, $inner:ty) => {
        $(#[$m])*
        pub struct $name(crate::RawCondvar<$inner>);

        const _: () = assert!(size_of::<$name>() == size_of::<usize>());

        impl $name {
            /// A new condition variable with no waiters.
            #[inline]
            pub const fn new() -> Self {
                $name(crate::RawCondvar::new())
            }

            /// The mutex that `guard` holds, as its lock_api 0.5 raw mutex.
            ///
            /// # Safety
            ///
            /// The caller unlocks it only inside a wait that returns
            /// holding it again (the guard stays borrowed meanwhile).
            #[inline]
            unsafe fn raw<'g, T: ?Sized>(
                guard: &'g mut lock_api_04::MutexGuard<'_, $raw, T>,
            ) -> &'g $inner {
                // SAFETY: `Mutex::raw` is unsafe because an unlock through
                // it would leave a live guard without its lock; forwarded
                // to our caller.
                unsafe { &lock_api_04::MutexGuard::mutex(guard).raw().0 }
            }

            /// Wakes the oldest waiter; returns whether there was one
            /// (exact: waits never return spuriously, and a timed wait that
            /// ran out is never counted).
            #[inline]
            pub fn notify_one(&self) -> bool {
                ::lock_api::RawCondvar::notify_one(&self.0)
            }

            /// Wakes every waiter (moving them onto the mutex's waiter
            /// stack while the mutex is held); returns how many, exactly.
            #[inline]
            pub fn notify_all(&self) -> usize {
                ::lock_api::RawCondvar::notify_all(&self.0)
            }

            /// Unlocks the guard's mutex, sleeps until a notification, and
            /// holds the mutex again. It never returns spuriously.
            ///
            /// # Panics
            ///
            /// If other threads wait on this condition variable with
            /// another mutex (the caller still holds its own then).
            #[inline]
            pub fn wait<T: ?Sized>(&self, guard: &mut lock_api_04::MutexGuard<'_, $raw, T>) {
                // SAFETY: the exclusively borrowed guard holds the mutex,
                // which `wait` unlocks and holds again before it returns
                // (as `raw` requires); the 0.5 guard state is the stateless
                // `GuardSend`.
                unsafe {
                    ::lock_api::RawCondvar::wait(
                        &self.0,
                        Self::raw(guard),
                        &mut ::lock_api::GuardSend::new(),
                    )
                }
            }

            /// Waits (as [`wait`](Self::wait)) while `condition` returns
            /// `true`; checks it first, and after each notification.
            ///
            /// # Panics
            ///
            /// As [`wait`](Self::wait).
            #[inline]
            pub fn wait_while<T, F>(
                &self,
                guard: &mut lock_api_04::MutexGuard<'_, $raw, T>,
                mut condition: F,
            ) where
                T: ?Sized,
                F: FnMut(&mut T) -> bool,
            {
                while condition(&mut **guard) {
                    self.wait(guard);
                }
            }

            /// As [`wait`](Self::wait), until `deadline` at the latest. A
            /// wait that times out returns holding the mutex again, never
            /// before `deadline`.
            ///
            /// # Panics
            ///
            /// As [`wait`](Self::wait).
            #[inline]
            pub fn wait_until<T: ?Sized>(
                &self,
                guard: &mut lock_api_04::MutexGuard<'_, $raw, T>,
                deadline: Instant,
            ) -> WaitTimeoutResult {
                // SAFETY: as in `wait`.
                WaitTimeoutResult(unsafe {
                    ::lock_api::RawCondvarTimed::wait_until(
                        &self.0,
                        Self::raw(guard),
                        &mut ::lock_api::GuardSend::new(),
                        &deadline,
                    )
                })
            }

            /// As [`wait_until`](Self::wait_until), for `timeout` from now
            /// (a timeout too long for an `Instant` waits without one).
            ///
            /// # Panics
            ///
            /// As [`wait`](Self::wait).
            #[inline]
            pub fn wait_for<T: ?Sized>(
                &self,
                guard: &mut lock_api_04::MutexGuard<'_, $raw, T>,
                timeout: Duration,
            ) -> WaitTimeoutResult {
                match Instant::now().checked_add(timeout) {
                    Some(deadline) => self.wait_until(guard, deadline),
                    None => {
                        self.wait(guard);
                        WaitTimeoutResult(false)
                    }
                }
            }

            /// As [`wait_while`](Self::wait_while), until `deadline` at the
            /// latest: timed out if a wait ended by the deadline, and then
            /// `condition` is not checked again (as in parking_lot 0.12; the
            /// crate root's lock_api 0.5 `Condvar` checks it once more).
            ///
            /// # Panics
            ///
            /// As [`wait`](Self::wait).
            #[inline]
            pub fn wait_while_until<T, F>(
                &self,
                guard: &mut lock_api_04::MutexGuard<'_, $raw, T>,
                mut condition: F,
                deadline: Instant,
            ) -> WaitTimeoutResult
            where
                T: ?Sized,
                F: FnMut(&mut T) -> bool,
            {
                // As parking_lot 0.12: a wait that timed out ends it, and
                // the condition is not checked again.
                let mut timed_out = false;
                while !timed_out && condition(&mut **guard) {
                    timed_out = self.wait_until(guard, deadline).timed_out();
                }
                WaitTimeoutResult(timed_out)
            }

            /// As [`wait_while_until`](Self::wait_while_until), for
            /// `timeout` from now (a timeout too long for an `Instant`
            /// waits without one).
            ///
            /// # Panics
            ///
            /// As [`wait`](Self::wait).
            #[inline]
            pub fn wait_while_for<T, F>(
                &self,
                guard: &mut lock_api_04::MutexGuard<'_, $raw, T>,
                condition: F,
                timeout: Duration,
            ) -> WaitTimeoutResult
            where
                T: ?Sized,
                F: FnMut(&mut T) -> bool,
            {
                match Instant::now().checked_add(timeout) {
                    Some(deadline) => self.wait_while_until(guard, condition, deadline),
                    None => {
                        self.wait_while(guard, condition);
                        WaitTimeoutResult(false)
                    }
                }
            }
        }

        impl Default for $name {
            #[inline]
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(concat!(stringify!($name), " { .. }"))
            }
        }
    };
}

condvar_04!(
    /// A condition variable for [`Mutex`], as `parking_lot::Condvar` 0.12:
    /// the crate root's [`crate::Condvar`] for lock_api 0.4 guards. Its
    /// waits never return spuriously, its notifications return exact
    /// counts, and `notify_all` moves the waiters onto the mutex's waiter
    /// stack instead of waking them all (see [`crate::RawCondvar`]).
    ///
    /// Waiting with one mutex while other threads wait on the same
    /// condition variable with another panics; one mutex after another is
    /// fine.
    Condvar,
    RawMutex,
    crate::RawMutex
);

condvar_04!(
    /// A condition variable for [`FairMutex`]: as [`Condvar`], the crate
    /// root's [`crate::FairCondvar`] for lock_api 0.4 guards.
    FairCondvar,
    RawFairMutex,
    crate::RawFairMutex
);
