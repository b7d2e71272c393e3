//! Portable parker: std's `thread::park`/`unpark`, for every OS without
//! futexes (macOS, Windows, the BSDs), and tested on Linux too.

#[cfg(test)]
use core::cell::Cell;
use core::cell::UnsafeCell;
#[cfg(test)]
use core::sync::atomic::AtomicU64;
use core::sync::atomic::{AtomicU32, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};
use std::thread::{self, Thread};
use std::time::Instant;

use super::word::{AWAKE, NUDGED, PARKED, SLEEPING, give_up, settle};
use super::{Nudge, Parker, Woke};

#[cfg(test)]
std::thread_local! {
    /// Tests only: where this thread's parks count the park tokens they
    /// took that were not their wake, so that a test can wait for that to
    /// happen instead of sleeping a guessed time.
    pub(crate) static FOREIGN_TOKENS: Cell<Option<&'static AtomicU64>> = const { Cell::new(None) };
}

/// Notes that a park returned on a token that was not its wake (or
/// spuriously); a no-op outside tests.
fn took_a_foreign_token() {
    #[cfg(test)]
    if let Some(count) = FOREIGN_TOKENS.get() {
        count.fetch_add(1, Relaxed);
    }
}

/// A wait word (its states and transitions: `super::word`) plus the handle of the thread that waits on it.
///
/// `LOSES_TOKENS` (tests only) is a deliberately broken parker that gives
/// no park token back (see `give_back_token`): the negative control of the
/// tests that a `Thread::unpark` aimed at a sleeping waiter is not lost.
pub(crate) struct ThreadParker<const LOSES_TOKENS: bool = false> {
    word: AtomicU32,
    /// Set by the owning thread in `prepare`, read by the unparker before its
    /// wake store; never both at once (the node's publication orders them).
    thread: UnsafeCell<Option<Thread>>,
}

impl<const LOSES_TOKENS: bool> Parker for ThreadParker<LOSES_TOKENS> {
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

    fn park(&self) -> Woke {
        // `settle` acquires the swap in `unpark`. `park` may return
        // spuriously or on a token that was not ours; the loop looks again.
        let mut parked = false;
        let woke = loop {
            if let Some(woke) = settle(&self.word) {
                break woke;
            }
            thread::park();
            parked = true;
            if self.word.load(Relaxed) == SLEEPING {
                took_a_foreign_token();
            }
        };
        self.give_back_token(parked && !LOSES_TOKENS);
        woke
    }

    type Deadline = Instant;

    fn park_until(&self, deadline: Instant) -> Woke {
        // As in `park`. `park_timeout` may return early (spuriously or on
        // a token that was not ours); the loop looks at the word and the
        // clock again.
        let mut parked = false;
        let woke = loop {
            if let Some(woke) = settle(&self.word) {
                break woke;
            }
            let now = Instant::now();
            if now >= deadline {
                break give_up(&self.word);
            }
            thread::park_timeout(deadline - now);
            parked = true;
            if self.word.load(Relaxed) == SLEEPING {
                took_a_foreign_token();
            }
        };
        self.give_back_token(parked && !LOSES_TOKENS);
        woke
    }

    fn unparked(&self) -> bool {
        // Acquire: pairs with the Release swap in `unpark`, so everything
        // the unparker did before it is visible.
        self.word.load(Acquire) == AWAKE
    }

    unsafe fn unpark(this: *const Self) {
        // SAFETY: the caller guarantees `this` is live until the wake swap.
        // The handle is cloned out first (a reference-count increment) so
        // nothing reads the node after the swap.
        let thread = unsafe { (*(*this).thread.get()).clone() };
        // SAFETY: still live; after this swap the thread may return.
        let was = unsafe { (*this).word.swap(AWAKE, Release) };
        // A thread still PARKED is not in `thread::park`: it sees AWAKE
        // when it next looks, and needs no token.
        if was != PARKED {
            wake(thread.expect("unpark of a parker that was never armed"));
        }
    }

    type Wake = Thread;

    unsafe fn nudge(this: *const Self) -> Nudge<Thread> {
        // SAFETY: the node is linked and we own the stack, so its thread
        // cannot return from `lock` (it would need the stack to leave it).
        // Release, failure Relaxed: as in the futex parker's `nudge`.
        match unsafe { (*this).word.compare_exchange(SLEEPING, NUDGED, Release, Relaxed) } {
            // SAFETY: as above; `prepare` wrote the handle before the push.
            Ok(_) => Nudge::Woken(
                unsafe { (*(*this).thread.get()).clone() }
                    .expect("nudge of a parker that was never armed"),
            ),
            Err(NUDGED) => Nudge::Pending,
            Err(_) => Nudge::Running,
        }
    }

    fn wake_nudged(thread: Thread) {
        wake(thread);
    }
}

impl<const LOSES_TOKENS: bool> ThreadParker<LOSES_TOKENS> {
    /// Gives the calling thread back a park token if our wait called
    /// `thread::park` at all. A park may have taken a `Thread::unpark` meant
    /// for the thread's own `thread::park`, by code that knows nothing of the
    /// mutex (an executor's waker, a caller's "check, then park" loop): before
    /// our wake, or merged with our wake's token when both landed before the
    /// thread ran, so the word cannot tell. Losing it would leave that `park`
    /// asleep after the lock is taken (std's and parking_lot's mutexes never
    /// touch the token). A token given back when there was no foreign one is
    /// a spurious wake of the thread's next `park`, which `park` allows (and
    /// our own next wait re-checks its word).
    ///
    /// The handle is the one `prepare` stored, not `thread::current()`: a
    /// timed park that ran out returns with our node still on the stack,
    /// and `thread::current()` could panic there (in a thread-local
    /// destructor), unwinding past a linked node.
    fn give_back_token(&self, parked: bool) {
        if parked {
            // SAFETY: only `prepare` writes `thread`, before the node is
            // published; an unparker may read it meanwhile, as we do.
            if let Some(me) = unsafe { &*self.thread.get() } {
                me.unpark();
            }
        }
    }
}

/// Wakes `thread` (`Thread::unpark`), counting the call in a `stats` build
/// as the futex parker counts its `FUTEX_WAKE`.
#[inline]
fn wake(thread: Thread) {
    #[cfg(feature = "stats")]
    let start = crate::arch::ticks();
    thread.unpark();
    #[cfg(feature = "stats")]
    crate::stats::wake_call(start);
}
