//! The public raw mutex types.

use crate::platform::native::Native;

/// Defines a raw mutex type over `Lock<$platform>` and its `lock_api` impl.
macro_rules! raw_mutex {
    ($(#[$m:meta])* $name:ident, $platform:ty) => {
        $(#[$m])*
        pub struct $name {
            lock: $crate::lock::Lock<$platform>,
        }

        const _: () = assert!(size_of::<$name>() == size_of::<usize>());
        const _: () = {
            const fn send_sync<T: Send + Sync>() {}
            send_sync::<$name>();
        };

        // Unwind safe, as `parking_lot`'s raw mutexes are: a panic leaves
        // no broken state to observe (each change of the word is one atomic
        // step, waiter nodes never outlive their waits, and a guard dropped
        // by unwinding unlocks; no poisoning). Without these, the waiter
        // pointer in the word would make it `!UnwindSafe`, and with it
        // `Mutex<T>`, which a closure passed to `catch_unwind` by value needs.
        impl core::panic::UnwindSafe for $name {}
        impl core::panic::RefUnwindSafe for $name {}

        impl $name {
            /// A new, unlocked mutex (the same as [`lock_api::RawMutex::INIT`]).
            pub const fn new() -> Self {
                $name {
                    lock: $crate::lock::Lock {
                        state: core::sync::atomic::AtomicPtr::new(core::ptr::null_mut()),
                    },
                }
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl $name {
            /// The lock itself, for the condition variable.
            #[allow(dead_code)]
            pub(crate) fn raw_lock(&self) -> &$crate::lock::Lock<$platform> {
                &self.lock
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.debug_struct(stringify!($name)).field("locked", &self.lock.is_locked()).finish()
            }
        }

        // SAFETY: `lock` returns only once this context holds LOCKED,
        // `try_lock` only on success, and LOCKED is held by one context at a
        // time (set by an RMW that saw it clear, cleared only by `unlock`;
        // a hand-off, and a condition variable's notification that takes
        // the lock for its waiter, pass it on without clearing it).
        // The Acquire/Release pairs on the state word order the critical
        // sections.
        unsafe impl lock_api::RawMutex for $name {
            #[allow(clippy::declare_interior_mutable_const)]
            const INIT: Self = Self::new();

            type Guard = lock_api::GuardSend;

            #[inline]
            #[cfg_attr(feature = "stats", track_caller)]
            fn lock(&self) -> Self::Guard {
                #[cfg(not(feature = "stats"))]
                self.lock.lock();
                #[cfg(feature = "stats")]
                if !self.lock.try_lock() {
                    self.counted_lock_slow();
                }
                lock_api::GuardSend::new()
            }

            #[inline]
            fn try_lock(&self) -> Option<Self::Guard> {
                self.lock.try_lock().then(lock_api::GuardSend::new)
            }

            /// Unlocks the mutex.
            ///
            /// # Safety
            ///
            /// The mutex must be locked, by the context that passes its guard
            /// state. Unlocking a mutex that is not locked is undefined
            /// behaviour (debug builds panic, before the lock word changes).
            #[inline]
            unsafe fn unlock(&self, _guard: Self::Guard) {
                // SAFETY: forwarded from the caller.
                unsafe { self.lock.unlock() }
            }

            #[inline]
            fn is_locked(&self) -> bool {
                self.lock.is_locked()
            }
        }

        // SAFETY: `unlock_fair` and `bump` release the lock held by the
        // caller's context exactly once (handing it over counts as a
        // release), and `bump` returns only once this context holds it again.
        unsafe impl lock_api::RawMutexFair for $name {
            /// Unlocks the mutex, handing it directly to the oldest sleeping
            /// waiter if there is one: the lock is never free in between, so
            /// no other thread can take it first. With no sleeper, it is a
            /// normal unlock.
            ///
            /// # Safety
            ///
            /// As for [`lock_api::RawMutex::unlock`].
            #[inline]
            unsafe fn unlock_fair(&self, _guard: Self::Guard) {
                // SAFETY: forwarded from the caller.
                unsafe { self.lock.unlock_fair() }
            }

            /// If a waiter sleeps, hands the lock to the oldest one
            /// (as [`unlock_fair`](lock_api::RawMutexFair::unlock_fair))
            /// and then locks again; otherwise does nothing.
            ///
            /// # Safety
            ///
            /// As for [`lock_api::RawMutex::unlock`].
            #[inline]
            #[cfg_attr(feature = "stats", track_caller)]
            unsafe fn bump(&self, _guard: &mut Self::Guard) {
                // SAFETY: forwarded from the caller.
                #[cfg(not(feature = "stats"))]
                unsafe { self.lock.bump() }
                // `Lock::bump`, with the re-lock counted and charged to
                // the caller: if anybody sleeps, a fair unlock and a lock.
                // The lock cannot unwind (its slow path aborts instead), so
                // the lock is held again whenever this returns.
                #[cfg(feature = "stats")]
                if self.lock.state.load(core::sync::atomic::Ordering::Relaxed).addr()
                    & !$crate::lock::FLAGS
                    != 0
                {
                    // SAFETY: forwarded from the caller.
                    unsafe { self.lock.unlock_fair() };
                    <Self as lock_api::RawMutex>::lock(self);
                }
            }
        }

        // SAFETY: `try_lock_for` and `try_lock_until` return a guard only
        // once this context holds LOCKED (taken by its own RMW, or handed to
        // it by an unlock that kept it set), exactly as `lock` does.
        unsafe impl lock_api::RawMutexTimed for $name {
            type Duration = std::time::Duration;
            type Instant = std::time::Instant;

            /// Takes the lock, waiting at most `timeout`.
            ///
            /// `Duration::ZERO` is one attempt, as `try_lock`. A timeout too
            /// large for an `Instant` (e.g. `Duration::MAX`) waits as `lock`
            /// does. Returns `None` only once the deadline has passed; how
            /// long after it is in the `algorithm` docs ("Timed
            /// locking").
            #[inline]
            #[cfg_attr(feature = "stats", track_caller)]
            fn try_lock_for(&self, timeout: std::time::Duration) -> Option<Self::Guard> {
                (self.lock.try_lock() || self.try_lock_for_slow(timeout))
                    .then(lock_api::GuardSend::new)
            }

            /// Takes the lock, waiting until `deadline` at the latest. A
            /// deadline in the past is one attempt, as `try_lock`.
            #[inline]
            #[cfg_attr(feature = "stats", track_caller)]
            fn try_lock_until(&self, deadline: std::time::Instant) -> Option<Self::Guard> {
                (self.lock.try_lock() || self.try_lock_until_slow(deadline))
                    .then(lock_api::GuardSend::new)
            }
        }

        impl $name {
            /// `try_lock_for` once `try_lock` failed: out of line, so that
            /// the inlined fast path is `try_lock`'s.
            #[cold]
            #[inline(never)]
            #[cfg_attr(feature = "stats", track_caller)]
            fn try_lock_for_slow(&self, timeout: std::time::Duration) -> bool {
                if timeout.is_zero() {
                    return false;
                }
                match std::time::Instant::now().checked_add(timeout) {
                    Some(deadline) => Self::counted(|| self.lock.lock_until_slow(deadline)),
                    None => Self::counted(|| {
                        self.lock.lock();
                        true
                    }),
                }
            }

            /// `try_lock_until` once `try_lock` failed.
            #[cold]
            #[inline(never)]
            #[cfg_attr(feature = "stats", track_caller)]
            fn try_lock_until_slow(&self, deadline: std::time::Instant) -> bool {
                std::time::Instant::now() < deadline
                    && Self::counted(|| self.lock.lock_until_slow(deadline))
            }

            /// Runs `slow`, a lock call's slow path that returns whether it
            /// took the lock; with the `stats` feature, counts and times it
            /// and charges it to the caller's call site.
            #[inline(always)]
            #[cfg_attr(feature = "stats", track_caller)]
            fn counted(slow: impl FnOnce() -> bool) -> bool {
                #[cfg(feature = "stats")]
                return $crate::stats::slow_path(core::panic::Location::caller(), slow);
                #[cfg(not(feature = "stats"))]
                slow()
            }

            /// `lock` once `try_lock` failed, counted (feature `stats`).
            #[cfg(feature = "stats")]
            #[cold]
            #[inline(never)]
            #[track_caller]
            fn counted_lock_slow(&self) {
                Self::counted(|| {
                    self.lock.lock_slow();
                    true
                });
            }
        }
    };
}
#[cfg(feature = "bench-ablations")]
pub(crate) use raw_mutex;

raw_mutex!(
    /// The raw spin-bit mutex: one machine word. Use it through
    /// [`crate::Mutex`].
    ///
    /// Its guard is `Send`: any thread may unlock it.
    RawMutex,
    Native
);

/// A raw mutex whose every unlock is fair: [`RawMutex`] with
/// [`lock_api::RawMutex::unlock`] doing what
/// [`unlock_fair`](lock_api::RawMutexFair::unlock_fair) does. Use it through
/// [`crate::FairMutex`].
///
/// Each unlock hands the lock directly to the oldest sleeping waiter if
/// there is one, so no arriving thread, spinner or barging `try_lock` can
/// take it first; with no sleeper it is a normal unlock. It is the same
/// word and the same waiters as [`RawMutex`]: only the unlock differs, and
/// `lock`, `try_lock` and the timed locks are [`RawMutex`]'s. Its guard is
/// `Send`.
///
/// Every contended unlock that finds a sleeper then costs a wake on the
/// critical path (the lock waits, held, for the woken thread to run), so
/// it trades throughput for order, as `parking_lot::FairMutex` does. The
/// thread that handed the lock over does not sleep if it waits for it again
/// within 200 µs: see "Fair unlocking" in the `algorithm` docs for what
/// that means for waiters that are awake.
#[derive(Debug, Default)]
pub struct RawFairMutex(RawMutex);

impl RawFairMutex {
    /// A new, unlocked mutex (the same as [`lock_api::RawMutex::INIT`]).
    pub const fn new() -> Self {
        RawFairMutex(RawMutex::new())
    }

    /// The lock itself, for the condition variable.
    pub(crate) fn raw_lock(&self) -> &crate::lock::Lock<Native> {
        self.0.raw_lock()
    }
}

const _: () = assert!(size_of::<RawFairMutex>() == size_of::<usize>());

// SAFETY: the locks are `RawMutex`'s, and `unlock` is `RawMutex`'s
// `unlock_fair`, which releases the lock held by the caller's context
// exactly once (handing it over counts as a release).
unsafe impl lock_api::RawMutex for RawFairMutex {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self::new();

    type Guard = <RawMutex as lock_api::RawMutex>::Guard;

    #[inline]
    #[cfg_attr(feature = "stats", track_caller)]
    fn lock(&self) -> Self::Guard {
        lock_api::RawMutex::lock(&self.0)
    }

    #[inline]
    fn try_lock(&self) -> Option<Self::Guard> {
        lock_api::RawMutex::try_lock(&self.0)
    }

    /// Unlocks the mutex fairly: as
    /// [`unlock_fair`](lock_api::RawMutexFair::unlock_fair).
    ///
    /// # Safety
    ///
    /// As for [`RawMutex`]'s `unlock`: the mutex must be locked, by the
    /// context that passes its guard state.
    #[inline]
    unsafe fn unlock(&self, guard: Self::Guard) {
        // SAFETY: forwarded from the caller.
        unsafe { lock_api::RawMutexFair::unlock_fair(&self.0, guard) }
    }

    #[inline]
    fn is_locked(&self) -> bool {
        lock_api::RawMutex::is_locked(&self.0)
    }
}

// SAFETY: forwarded to `RawMutex`'s implementation.
unsafe impl lock_api::RawMutexFair for RawFairMutex {
    /// As [`RawMutex`]'s `unlock_fair`.
    ///
    /// # Safety
    ///
    /// As for [`lock_api::RawMutex::unlock`].
    #[inline]
    unsafe fn unlock_fair(&self, guard: Self::Guard) {
        // SAFETY: forwarded from the caller.
        unsafe { lock_api::RawMutexFair::unlock_fair(&self.0, guard) }
    }

    /// As [`RawMutex`]'s `bump`.
    ///
    /// # Safety
    ///
    /// As for [`lock_api::RawMutex::unlock`].
    #[inline]
    #[cfg_attr(feature = "stats", track_caller)]
    unsafe fn bump(&self, guard: &mut Self::Guard) {
        // SAFETY: forwarded from the caller.
        unsafe { lock_api::RawMutexFair::bump(&self.0, guard) }
    }
}

// SAFETY: forwarded to `RawMutex`'s implementation, whose guards are this
// type's.
unsafe impl lock_api::RawMutexTimed for RawFairMutex {
    type Duration = <RawMutex as lock_api::RawMutexTimed>::Duration;
    type Instant = <RawMutex as lock_api::RawMutexTimed>::Instant;

    #[inline]
    #[cfg_attr(feature = "stats", track_caller)]
    fn try_lock_for(&self, timeout: Self::Duration) -> Option<Self::Guard> {
        lock_api::RawMutexTimed::try_lock_for(&self.0, timeout)
    }

    #[inline]
    #[cfg_attr(feature = "stats", track_caller)]
    fn try_lock_until(&self, deadline: Self::Instant) -> Option<Self::Guard> {
        lock_api::RawMutexTimed::try_lock_until(&self.0, deadline)
    }
}
