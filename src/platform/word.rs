//! The parkers' wait word: its four states and the two transitions a
//! waiting thread makes on it, shared by the futex parker, the portable
//! parker and the loom model.

use core::sync::atomic::Ordering::{self, Acquire, Relaxed};

use super::Woke;

/// Woken: `unpark` was called.
pub(crate) const AWAKE: u32 = 0;
/// Armed, its thread not committed to a sleep: polling its node, on its
/// way to sleep, or back from a nudge or a timeout.
pub(crate) const PARKED: u32 = 1;
/// Its thread is asleep in the OS, or committed to it.
pub(crate) const SLEEPING: u32 = 2;
/// Nudged by a stack owner while asleep; not running yet.
pub(crate) const NUDGED: u32 = 3;

/// The atomic operations the transitions need: a std or a loom `AtomicU32`.
pub(crate) trait Word {
    fn load(&self, order: Ordering) -> u32;
    fn compare_exchange(
        &self,
        current: u32,
        new: u32,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u32, u32>;
}

impl Word for core::sync::atomic::AtomicU32 {
    #[inline(always)]
    fn load(&self, order: Ordering) -> u32 {
        core::sync::atomic::AtomicU32::load(self, order)
    }
    #[inline(always)]
    fn compare_exchange(
        &self,
        current: u32,
        new: u32,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u32, u32> {
        core::sync::atomic::AtomicU32::compare_exchange(self, current, new, success, failure)
    }
}

/// The step before a sleep: `Some` if the park ends (a wake or a nudge
/// came), `None` once the word is SLEEPING (the thread may sleep).
#[inline]
pub(crate) fn settle(word: &impl Word) -> Option<Woke> {
    // Acquire: pairs with the Release swap in `unpark` (and the Release
    // nudge).
    let mut w = word.load(Acquire);
    loop {
        let (to, ends) = match w {
            AWAKE => return Some(Woke::Unparked),
            SLEEPING => return None,
            // Committing to the sleep is what lets a stack owner tell a
            // sleeping waiter from a running one (`nudge`).
            PARKED => (SLEEPING, None),
            // Nudged: armed again, and running.
            _ => (PARKED, Some(Woke::Nudged)),
        };
        // Relaxed: nothing is published by these transitions; the failure
        // may read AWAKE or NUDGED, hence Acquire.
        match word.compare_exchange(w, to, Relaxed, Acquire) {
            Ok(_) => return ends,
            Err(now) => w = now,
        }
    }
}

/// A timed park's deadline passed: armed again (running) unless a wake or
/// a nudge came first.
#[inline]
pub(crate) fn give_up(word: &impl Word) -> Woke {
    let mut w = word.load(Acquire);
    loop {
        let (to, ends) = match w {
            AWAKE => return Woke::Unparked,
            PARKED => return Woke::TimedOut,
            SLEEPING => (PARKED, Woke::TimedOut),
            _ => (PARKED, Woke::Nudged),
        };
        // As in `settle`.
        match word.compare_exchange(w, to, Relaxed, Acquire) {
            Ok(_) => return ends,
            Err(now) => w = now,
        }
    }
}
