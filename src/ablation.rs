//! Variants of [`RawMutex`](crate::RawMutex) that switch the spin bit off,
//! for benchmarks that isolate its effect. Enabled by the `bench-ablations`
//! feature; not for production use.

use crate::platform::native::{AllSpin, NoSpin};
use crate::raw::raw_mutex;

raw_mutex!(
    /// Spinning switched off: no waiter spins, and one that finds the lock
    /// held sleeps without yielding first. The rest is the real mutex's: a
    /// wake still hands the woken thread `SPINNING`, which it holds without
    /// spinning until it takes the lock or sleeps again, and unlocks skip
    /// their wakes meanwhile.
    NoSpinRawMutex,
    NoSpin
);
raw_mutex!(
    /// Every waiter spins before it sleeps, as in a classic adaptive mutex.
    AllSpinRawMutex,
    AllSpin
);

/// A mutex over [`NoSpinRawMutex`].
pub type NoSpinMutex<T> = lock_api::Mutex<NoSpinRawMutex, T>;
/// A mutex over [`AllSpinRawMutex`].
pub type AllSpinMutex<T> = lock_api::Mutex<AllSpinRawMutex, T>;
