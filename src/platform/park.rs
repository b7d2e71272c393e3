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
/// A waker reaches the thread through the handle in the parker, after the
/// store that lets the thread go: it counts itself in `wakers` before that
/// store and out after its `Thread::unpark`, and the thread's `retire`
/// waits for the count to fall to zero before the node goes away. A waker
/// never holds a handle of its own, so it never drops the last one: that
/// would free the thread's handle inside a lock call (an allocator call
/// there, which a mutex guarding an allocator could not survive), had the
/// woken thread returned and exited meanwhile.
///
/// `LOSES_TOKENS` (tests only) is a deliberately broken parker that gives
/// no park token back (see `give_back_token`): the negative control of the
/// tests that a `Thread::unpark` aimed at a sleeping waiter is not lost.
/// `BROKEN` (tests only) breaks the count: [`RETIRES_EARLY`] or
/// [`COUNTS_LATE`], the negative controls of the test that no waker
/// touches a retired parker.
pub(crate) struct ThreadParker<const LOSES_TOKENS: bool = false, const BROKEN: u8 = SOUND> {
    word: AtomicU32,
    /// How many wakers may still touch the parker: an `unpark` from before
    /// its wake store to after its OS wake, a nudge from before its store
    /// to after its `wake_nudged`.
    wakers: AtomicU32,
    /// Set by the owning thread in `prepare` before the node's first
    /// publication, and only read after that (by wakers and by the thread).
    thread: UnsafeCell<Option<Thread>>,
}

/// The count of wakers as it is.
pub(crate) const SOUND: u8 = 0;
/// Broken on purpose: `retire` does not wait for the wakers.
pub(crate) const RETIRES_EARLY: u8 = 1;
/// Broken on purpose: a waker counts itself in only after its OS wake, so
/// the thread may retire while the waker reads the handle.
pub(crate) const COUNTS_LATE: u8 = 2;

impl<const LOSES_TOKENS: bool, const BROKEN: u8> Parker for ThreadParker<LOSES_TOKENS, BROKEN> {
    fn new() -> Self {
        ThreadParker {
            word: AtomicU32::new(AWAKE),
            wakers: AtomicU32::new(0),
            thread: UnsafeCell::new(None),
        }
    }

    fn prepare(&self) {
        // The handle is written at the first arming only, before the node's
        // first publication; a re-arming (after a wake, a nudge or a
        // timeout) only reads it, since the waker of the previous arming may
        // still be reading it too (`retire` has not run yet).
        // SAFETY: nobody writes `thread` but this first arming, and nobody
        // reads it before the publication that follows it.
        if unsafe { (*self.thread.get()).is_none() } {
            // SAFETY: as above.
            unsafe { *self.thread.get() = Some(thread::current()) };
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
        // SAFETY: the caller guarantees `this` is live until the wake swap;
        // counted among its wakers first, it stays live until our `done`
        // (`retire`). Relaxed: the swap's Release orders the count before
        // the thread's Acquire of AWAKE, and so before its `retire`.
        let was = unsafe {
            Self::count_in(this, BROKEN != COUNTS_LATE);
            (*this).word.swap(AWAKE, Release)
        };
        after_wake_store();
        // A thread still PARKED is not in `thread::park`: it sees AWAKE when
        // it next looks, and needs no token.
        if was != PARKED {
            // SAFETY: live, as above.
            wake(unsafe { (*this).handle() });
        }
        // SAFETY: counted in above (or, broken on purpose, now).
        unsafe {
            Self::count_in(this, BROKEN == COUNTS_LATE);
            Self::done(this);
        }
    }

    type Wake = Nudged<LOSES_TOKENS, BROKEN>;

    unsafe fn nudge(this: *const Self) -> Nudge<Self::Wake> {
        // SAFETY: the node is linked and we own the stack, so its thread
        // cannot return from `lock` (it would need the stack to leave it);
        // counted in, it stays live until our `done` (`retire`). Relaxed:
        // the thread's `retire` follows our release of the stack.
        // Release, failure Relaxed: as in the futex parker's `nudge`.
        let nudged = unsafe {
            Self::count_in(this, BROKEN != COUNTS_LATE);
            (*this).word.compare_exchange(SLEEPING, NUDGED, Release, Relaxed)
        };
        match nudged {
            Ok(_) => {
                after_wake_store();
                Nudge::Woken(Nudged(this))
            }
            Err(found) => {
                // SAFETY: counted in above (or, broken on purpose, now).
                unsafe {
                    Self::count_in(this, BROKEN == COUNTS_LATE);
                    Self::done(this);
                }
                if found == NUDGED { Nudge::Pending } else { Nudge::Running }
            }
        }
    }

    fn wake_nudged(nudged: Self::Wake) {
        // SAFETY: `nudge` counted us in, so the parker is live until `done`.
        unsafe {
            wake((*nudged.0).handle());
            Self::count_in(nudged.0, BROKEN == COUNTS_LATE);
            Self::done(nudged.0);
        }
    }

    fn retire(&self) {
        let mut waits = 0;
        // Acquire: pairs with each waker's Release in `done`, so its last
        // access comes before whatever reuses the node's memory. The wait
        // is a waker's few steps after its store (an OS wake), unless it was
        // preempted there; a thread handed the lock waits holding it.
        while BROKEN != RETIRES_EARLY && self.wakers.load(Acquire) != 0 {
            super::native::back_off(&mut waits, 4, None);
        }
    }
}

/// The wake a nudge of a [`ThreadParker`] owes: the parker, counted among
/// its wakers until the wake is made.
pub(crate) struct Nudged<const LOSES_TOKENS: bool, const BROKEN: u8>(
    *const ThreadParker<LOSES_TOKENS, BROKEN>,
);

/// Tests only: a pause right after a waker's store that lets the thread go
/// (`tests::AFTER_WAKE_STORE`), the start of the window the count covers.
#[inline(always)]
fn after_wake_store() {
    #[cfg(test)]
    if let Some(pause) = tests::AFTER_WAKE_STORE.get() {
        pause();
    }
}

impl<const LOSES_TOKENS: bool, const BROKEN: u8> ThreadParker<LOSES_TOKENS, BROKEN> {
    /// The handle of the parker's thread.
    ///
    /// # Safety
    /// Only after `prepare` published the parker (by the push of its node,
    /// or its listing); no `&mut` to the parker exists.
    unsafe fn handle(&self) -> &Thread {
        // SAFETY: only `prepare` writes `thread`, before the publication.
        unsafe { &*self.thread.get() }.as_ref().expect("wake of a parker that was never armed")
    }

    /// A waker counts itself in `wakers` (if `now`).
    ///
    /// # Safety
    /// `this` is live.
    #[inline(always)]
    unsafe fn count_in(this: *const Self, now: bool) {
        if now {
            // SAFETY: forwarded from the caller.
            unsafe { (*this).wakers.fetch_add(1, Relaxed) };
        }
    }

    /// A waker is done with the parker at `this`: its last access.
    ///
    /// # Safety
    /// The caller counted itself in `wakers` and has not been done since.
    unsafe fn done(this: *const Self) {
        // Release: see `retire`.
        // SAFETY: live until this decrement, by the caller's count.
        unsafe { (*this).wakers.fetch_sub(1, Release) };
    }

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
fn wake(thread: &Thread) {
    #[cfg(feature = "stats")]
    let start = crate::arch::ticks();
    thread.unpark();
    #[cfg(feature = "stats")]
    crate::stats::wake_call(start);
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use core::sync::atomic::AtomicBool;
    use std::time::Duration;

    std::thread_local! {
        /// Called by this thread's wakers right after the store that lets
        /// the thread go: a window that the tests widen at will.
        pub(super) static AFTER_WAKE_STORE: Cell<Option<fn()>> = const { Cell::new(None) };
        /// What the pause of `AFTER_WAKE_STORE` watches: set while it is.
        static WATCHED: Cell<*const Watched> = const { Cell::new(core::ptr::null()) };
    }

    /// A waiter's progress, seen from a paused waker.
    #[derive(Default)]
    struct Watched {
        /// The waiter returned from its park and calls `retire`.
        retiring: AtomicBool,
        /// The waiter's `retire` returned: its node could go away now.
        retired: AtomicBool,
        /// `retired` was seen while the waker was paused.
        retired_early: AtomicBool,
        /// How long the pause watches once the waiter is retiring.
        watch: Duration,
    }

    /// The pause: waits until the waiter is retiring, then watches for its
    /// `retire` to return, for up to `watch`.
    fn pause() {
        // SAFETY: set only while the test that owns it wakes the waiter
        // (`retired_before_the_waker_was_done`).
        let w = unsafe { WATCHED.get().as_ref() }.expect("a watched waiter");
        let start = Instant::now();
        while !w.retiring.load(Acquire) {
            assert!(start.elapsed() < Duration::from_secs(10), "the woken waiter never ran");
            thread::yield_now();
        }
        let start = Instant::now();
        while start.elapsed() < w.watch {
            if w.retired.load(Acquire) {
                w.retired_early.store(true, Relaxed);
                return;
            }
            thread::yield_now();
        }
    }

    /// A parker shared by its thread and a waker, as a node is.
    struct Shared<T>(T);

    impl<T> Shared<T> {
        fn get(&self) -> &T {
            &self.0
        }
    }

    // SAFETY: the parker's thread writes its handle only in `prepare`,
    // which the waker's reads follow (`armed`); the rest is atomic.
    unsafe impl<T> Sync for Shared<T> {}

    /// A thread sleeps on a `ThreadParker` in timed parks of 20 ms, one
    /// after another, until this thread wakes it (`unpark`) or nudges it
    /// (`nudge`, then `wake_nudged`). The waker pauses right after its
    /// store, before it reaches the handle; the sleeper's timed park then
    /// runs out and finds the store without the OS wake. Returns whether
    /// the sleeper's `retire` returned during the pause. The parker's
    /// memory outlives both threads, so a broken parker's early return is
    /// seen, not a use after free.
    fn retired_before_the_waker_was_done<const BROKEN: u8>(nudge: bool, watch: Duration) -> bool {
        let watched = Watched { watch, ..Watched::default() };
        let watched = &watched;
        let parker = Shared(ThreadParker::<false, BROKEN>::new());
        let armed = AtomicBool::new(false);
        thread::scope(|s| {
            let waiter = s.spawn(|| {
                let parker = parker.get();
                parker.prepare();
                // Release: publishes the armed parker (the push's part).
                armed.store(true, Release);
                let woke = loop {
                    match parker.park_until(Instant::now() + Duration::from_millis(20)) {
                        Woke::TimedOut => continue,
                        woke => break woke,
                    }
                };
                watched.retiring.store(true, Release);
                parker.retire();
                watched.retired.store(true, Release);
                woke
            });
            let parker = parker.get();
            let p: *const ThreadParker<false, BROKEN> = parker;
            WATCHED.set(watched);
            AFTER_WAKE_STORE.set(Some(pause));
            loop {
                while !armed.load(Acquire) || parker.word.load(Relaxed) != SLEEPING {
                    thread::yield_now();
                }
                if !nudge {
                    // SAFETY: armed, and its thread waits for this wake.
                    unsafe { ThreadParker::unpark(p) };
                    break;
                }
                // SAFETY: armed, and its thread waits for this nudge.
                match unsafe { ThreadParker::nudge(p) } {
                    Nudge::Woken(w) => {
                        ThreadParker::<false, BROKEN>::wake_nudged(w);
                        break;
                    }
                    // Between two timed parks: try again.
                    Nudge::Running => continue,
                    Nudge::Pending => panic!("nudged twice"),
                }
            }
            AFTER_WAKE_STORE.set(None);
            WATCHED.set(core::ptr::null());
            let woke = waiter.join().expect("the waiter panicked");
            assert_eq!(woke, if nudge { Woke::Nudged } else { Woke::Unparked });
        });
        assert!(watched.retired.load(Acquire));
        watched.retired_early.load(Relaxed)
    }

    /// A woken or nudged thread does not retire its parker (and let its node
    /// go) while its waker can still touch it. The waker pauses 50 ms once
    /// the woken thread is retiring.
    #[test]
    fn retire_waits_for_the_waker() {
        for nudge in [false, true] {
            assert!(
                !retired_before_the_waker_was_done::<SOUND>(nudge, Duration::from_millis(50)),
                "retired while the waker was not done (nudge: {nudge})"
            );
        }
    }

    /// The negative controls: a parker whose `retire` does not wait, and one
    /// whose wakers count themselves in only after the OS wake, must each be
    /// seen retiring early (the waker pauses until it does, 10 s at most).
    #[test]
    fn retire_waits_for_the_waker_control() {
        for nudge in [false, true] {
            assert!(
                retired_before_the_waker_was_done::<RETIRES_EARLY>(nudge, Duration::from_secs(10)),
                "a retire that does not wait was not seen (nudge: {nudge})"
            );
            assert!(
                retired_before_the_waker_was_done::<COUNTS_LATE>(nudge, Duration::from_secs(10)),
                "a waker that counts itself in late was not seen (nudge: {nudge})"
            );
        }
    }
}
