//! Portable parker: std's `thread::park`/`unpark`, for every OS without
//! futexes (macOS, Windows, the BSDs), and tested on Linux too.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU32, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};
use std::thread::{self, Thread};
use std::time::Instant;

use super::Parker;

const AWAKE: u32 = 0;
const PARKED: u32 = 1;

/// A wait word plus the handle of the thread that waits on it.
pub(crate) struct ThreadParker {
    word: AtomicU32,
    /// Set by the owning thread in `prepare`, read by the unparker before its
    /// wake store; never both at once (the node's publication orders them).
    thread: UnsafeCell<Option<Thread>>,
}

impl Parker for ThreadParker {
    fn new() -> Self {
        ThreadParker { word: AtomicU32::new(AWAKE), thread: UnsafeCell::new(None) }
    }

    fn prepare(&self) {
        // SAFETY: the node is not published yet (or was popped and its
        // unparker is done with it), so nobody else reads `thread`.
        let slot = unsafe { &mut *self.thread.get() };
        if slot.is_none() {
            *slot = Some(thread::current());
        }
        // Relaxed: published by the Release CAS that pushes the node.
        self.word.store(PARKED, Relaxed);
    }

    fn park(&self) {
        // `unparked` acquires the store in `unpark`. `park` may
        // return spuriously or consume a stale token; the loop re-checks.
        while !self.unparked() {
            thread::park();
        }
    }

    type Deadline = Instant;

    fn park_until(&self, deadline: Instant) -> bool {
        // As in `park`. `park_timeout` may return early (spuriously
        // or on a stale token); the loop re-checks the word and the clock.
        while !self.unparked() {
            let now = Instant::now();
            if now >= deadline {
                return self.unparked();
            }
            thread::park_timeout(deadline - now);
        }
        true
    }

    fn unparked(&self) -> bool {
        // Acquire: pairs with the Release store in `unpark`, so everything
        // the unparker did before it is visible.
        self.word.load(Acquire) != PARKED
    }

    unsafe fn unpark(this: *const Self) {
        // SAFETY: the caller guarantees `this` is live until the wake store.
        // The handle is cloned out first (a reference-count increment) so
        // nothing reads the node after the store.
        let thread = unsafe { (*(*this).thread.get()).clone() };
        // SAFETY: still live; after this store the thread may return.
        unsafe { (*this).word.store(AWAKE, Release) };
        thread.expect("unpark of a parker that was never armed").unpark();
    }
}
