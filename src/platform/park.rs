//! Portable parker: std's `thread::park`/`unpark`, for every OS without
//! futexes (macOS, Windows, the BSDs), and tested on Linux too.
//!
//! The parker is generic over the threads it runs on ([`Threads`]): std's
//! ([`StdThreads`], the shipped parker) or loom's (its models, in
//! `park_model.rs`).

#[cfg(test)]
use core::cell::Cell;
use core::cell::UnsafeCell;
use core::sync::atomic::AtomicU32;
use core::sync::atomic::Ordering::{self, Acquire, Relaxed, Release};
#[cfg(test)]
use core::sync::atomic::{AtomicBool, AtomicU64};
use std::thread::{self, Thread};
use std::time::Instant;

use super::word::{AWAKE, NUDGED, PARKED, SLEEPING, Word, give_up, settle};
use super::{Nudge, Parker, Woke};

/// Tests only: what a thread's parks report about themselves, so that a
/// test can wait for a state instead of sleeping a guessed time.
#[cfg(test)]
pub(crate) struct ParkWatch {
    /// How many of the thread's parks returned with its word still asleep:
    /// on a park token that was not their wake, spuriously, or (timed) at
    /// their deadline.
    pub(crate) foreign: AtomicU64,
    /// Whether the thread is in `Threads::park` (or `park_until`, which
    /// returns at once if its deadline has passed), entered after a look
    /// at its word that found it still asleep.
    pub(crate) in_park: AtomicBool,
}

#[cfg(test)]
impl ParkWatch {
    pub(crate) const fn new() -> Self {
        ParkWatch { foreign: AtomicU64::new(0), in_park: AtomicBool::new(false) }
    }
}

#[cfg(test)]
std::thread_local! {
    /// Tests only: where this thread's parks report (see [`ParkWatch`]).
    pub(crate) static PARK_WATCH: Cell<Option<&'static ParkWatch>> = const { Cell::new(None) };
}

/// Notes that the thread is about to sleep in `Threads::park`, its word
/// last seen asleep; a no-op outside tests. Release: a test that acquires
/// the flag knows the look came before whatever it does next (a wake
/// after that must go through this park).
fn entering_park() {
    #[cfg(test)]
    if let Some(watch) = PARK_WATCH.get() {
        watch.in_park.store(true, Release);
    }
}

/// Notes that a park returned, and whether with its word still asleep (on
/// a token that was not its wake, spuriously, or at its deadline); a no-op
/// outside tests. Release on the count: a
/// test that acquires it sees the flag cleared, so a set flag it reads
/// after it is a later park.
fn left_park(foreign: bool) {
    #[cfg(test)]
    if let Some(watch) = PARK_WATCH.get() {
        watch.in_park.store(false, Relaxed);
        if foreign {
            watch.foreign.fetch_add(1, Release);
        }
    }
    #[cfg(not(test))]
    let _ = foreign;
}

/// What the portable parker needs from the threads it runs on.
pub(crate) trait Threads: 'static {
    /// A thread's handle, which wakes it.
    type Handle;
    /// An atomic `u32`.
    type U32: Word32;
    /// The parker's cell for its thread's handle.
    type Slot: Slot<Self::Handle>;
    /// A point in time a timed park gives up at.
    type Deadline: Copy + Ord;
    /// The calling thread's handle.
    fn current() -> Self::Handle;
    /// Sleeps until the thread's park token is available, and takes it (or
    /// returns spuriously).
    fn park();
    /// As `park`, but returns at `deadline` too; `false`, at once, if it
    /// has passed.
    fn park_until(deadline: Self::Deadline) -> bool;
    /// Makes the thread's park token available.
    fn unpark(handle: &Self::Handle);
    /// One wait of `retire` for its wakers (`waits` counts them).
    fn wait(waits: &mut u32);
    /// Between a waker's store to `word` that lets the thread go and its
    /// OS wake: nothing, but a pause where a unit test asks for one
    /// (`tests::AFTER_WAKE_STORE`), and in the models a point where loom
    /// may switch threads, as a preemption could.
    fn after_wake_store(word: &Self::U32);
}

/// The atomic operations the parker makes on its two words.
pub(crate) trait Word32: Word {
    fn new(value: u32) -> Self;
    fn store(&self, value: u32, order: Ordering);
    fn swap(&self, value: u32, order: Ordering) -> u32;
    fn fetch_add(&self, value: u32, order: Ordering) -> u32;
    fn fetch_sub(&self, value: u32, order: Ordering) -> u32;
}

impl Word32 for AtomicU32 {
    #[inline(always)]
    fn new(value: u32) -> Self {
        AtomicU32::new(value)
    }
    #[inline(always)]
    fn store(&self, value: u32, order: Ordering) {
        AtomicU32::store(self, value, order);
    }
    #[inline(always)]
    fn swap(&self, value: u32, order: Ordering) -> u32 {
        AtomicU32::swap(self, value, order)
    }
    #[inline(always)]
    fn fetch_add(&self, value: u32, order: Ordering) -> u32 {
        AtomicU32::fetch_add(self, value, order)
    }
    #[inline(always)]
    fn fetch_sub(&self, value: u32, order: Ordering) -> u32 {
        AtomicU32::fetch_sub(self, value, order)
    }
}

/// The cell that holds a parker's thread handle.
pub(crate) trait Slot<H> {
    fn empty() -> Self;
    /// Replaces the handle.
    ///
    /// # Safety
    /// Nobody else accesses the cell meanwhile.
    unsafe fn set(&self, handle: Option<H>);
    /// Calls `f` with the handle.
    ///
    /// # Safety
    /// Nobody writes the cell meanwhile.
    unsafe fn with<R>(&self, f: impl FnOnce(Option<&H>) -> R) -> R;
}

impl<H> Slot<H> for UnsafeCell<Option<H>> {
    #[inline(always)]
    fn empty() -> Self {
        UnsafeCell::new(None)
    }
    #[inline(always)]
    unsafe fn set(&self, handle: Option<H>) {
        // SAFETY: forwarded from the caller.
        unsafe { *self.get() = handle };
    }
    #[inline(always)]
    unsafe fn with<R>(&self, f: impl FnOnce(Option<&H>) -> R) -> R {
        // SAFETY: forwarded from the caller.
        f(unsafe { (*self.get()).as_ref() })
    }
}

/// std's threads: the parker that ships.
pub(crate) struct StdThreads;

impl Threads for StdThreads {
    type Handle = Thread;
    type U32 = AtomicU32;
    type Slot = UnsafeCell<Option<Thread>>;
    type Deadline = Instant;

    #[inline]
    fn current() -> Thread {
        thread::current()
    }

    #[inline]
    fn park() {
        thread::park();
    }

    #[inline]
    fn park_until(deadline: Instant) -> bool {
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        thread::park_timeout(deadline - now);
        true
    }

    #[inline]
    fn unpark(thread: &Thread) {
        thread.unpark();
    }

    /// The waker is a few steps from done (the return of its OS wake)
    /// unless it was preempted: spins a little first, then yields, and
    /// sleeps only after the yields (as a wait for a stack owner does: a
    /// yield runs no thread of lower priority). A sleep at once would cost
    /// the woken thread the kernel's timer slack on most wakes.
    #[inline]
    fn wait(waits: &mut u32) {
        /// The waits that spin, and the spin hints of each.
        const SPINS: u32 = 16;
        const HINTS: u32 = 64;
        if *waits < SPINS {
            *waits += 1;
            for _ in 0..HINTS {
                core::hint::spin_loop();
            }
            return;
        }
        super::native::back_off(waits, SPINS + crate::arch::STACK_WAIT_YIELDS, None);
    }

    #[inline(always)]
    fn after_wake_store(_: &AtomicU32) {
        #[cfg(test)]
        if let Some(pause) = tests::AFTER_WAKE_STORE.get() {
            pause();
        }
    }
}

/// A wait word (its states and transitions: `super::word`) plus the handle of the thread that waits on it.
///
/// A waker reaches the thread through the handle in the parker, after the
/// store that lets the thread go: it counts itself in `wakers` before that
/// store and out after its `Thread::unpark`, and the thread's `retire`
/// waits for the count to fall to zero before the node goes away (a wake
/// of a thread not yet committed to its sleep is one CAS that touches
/// nothing after it, and is not counted). A waker never holds a handle of
/// its own, so it never drops the last one: that would free the thread's
/// handle inside a lock call (an allocator call there, which a mutex
/// guarding an allocator could not survive), had the woken thread
/// returned and exited meanwhile.
///
/// `LOSES_TOKENS` (tests only) is a deliberately broken parker that gives
/// no park token back (see `give_back_token`): the negative control of the
/// tests that a `Thread::unpark` aimed at a sleeping waiter is not lost.
/// `BROKEN` (tests only) breaks the count: [`RETIRES_EARLY`] or
/// [`COUNTS_LATE`], the negative controls of the tests that no waker
/// touches a retired parker.
pub(crate) struct ThreadParker<
    T: Threads = StdThreads,
    const LOSES_TOKENS: bool = false,
    const BROKEN: u8 = SOUND,
> {
    word: T::U32,
    /// How many wakers may still touch the parker: an `unpark` from before
    /// its wake store to after its OS wake, a nudge from before its store
    /// to after its `wake_nudged`.
    wakers: T::U32,
    /// Set by the owning thread in `prepare` before the node's first
    /// publication, and only read after that (by wakers and by the thread).
    thread: T::Slot,
}

/// The count of wakers as it is.
pub(crate) const SOUND: u8 = 0;
/// Broken on purpose: `retire` does not wait for the wakers.
pub(crate) const RETIRES_EARLY: u8 = 1;
/// Broken on purpose: a waker counts itself in only after its OS wake, so
/// the thread may retire while the waker reads the handle.
pub(crate) const COUNTS_LATE: u8 = 2;

impl<T: Threads, const LOSES_TOKENS: bool, const BROKEN: u8> Parker
    for ThreadParker<T, LOSES_TOKENS, BROKEN>
{
    fn new() -> Self {
        ThreadParker { word: T::U32::new(AWAKE), wakers: T::U32::new(0), thread: T::Slot::empty() }
    }

    fn prepare(&self) {
        // The handle is written at the first arming only, before the node's
        // first publication; a re-arming (after a wake, a nudge or a
        // timeout) only reads it, since the waker of the previous arming may
        // still be reading it too (`retire` has not run yet).
        // SAFETY: nobody writes `thread` but this first arming, and nobody
        // reads it before the publication that follows it.
        if unsafe { self.thread.with(|h| h.is_none()) } {
            // SAFETY: as above.
            unsafe { self.thread.set(Some(T::current())) };
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
            entering_park();
            T::park();
            parked = true;
            left_park(self.word.load(Relaxed) == SLEEPING);
        };
        self.give_back_token(parked && !LOSES_TOKENS);
        woke
    }

    type Deadline = T::Deadline;

    fn park_until(&self, deadline: T::Deadline) -> Woke {
        // As in `park`. A timed park may return early (spuriously or on a
        // token that was not ours); the loop looks at the word and the clock
        // again.
        let mut parked = false;
        let woke = loop {
            if let Some(woke) = settle(&self.word) {
                break woke;
            }
            entering_park();
            if !T::park_until(deadline) {
                left_park(false);
                break give_up(&self.word);
            }
            parked = true;
            left_park(self.word.load(Relaxed) == SLEEPING);
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
        // A thread still PARKED (polling its node, or on its way to sleep)
        // needs no OS wake: one CAS, after which we touch nothing, so we
        // need not count ourselves (the common wake of a polling thread
        // stays one write to its node's line).
        // SAFETY: the caller guarantees `this` is live until the wake store.
        let word = unsafe { &(*this).word };
        // Release: publishes what we did before, as the swap below; the
        // thread's Acquire of AWAKE pairs with it. Failure Relaxed: we
        // decide from nothing but the value.
        if word.load(Relaxed) == PARKED
            && word.compare_exchange(PARKED, AWAKE, Release, Relaxed).is_ok()
        {
            return;
        }
        // Counted among its wakers before the swap, the parker stays live
        // until our `done` (`retire`). Relaxed: the swap's Release orders
        // the count before the thread's Acquire of AWAKE, and so before its
        // `retire`.
        // SAFETY: live until the swap, as above.
        unsafe { Self::count_in(this, BROKEN != COUNTS_LATE) };
        let was = word.swap(AWAKE, Release);
        T::after_wake_store(word);
        // A thread still PARKED is not in `thread::park`: it sees AWAKE when
        // it next looks, and needs no token.
        if was != PARKED {
            // SAFETY: live, as above.
            unsafe { (*this).wake() };
        }
        // SAFETY: counted in above (or, broken on purpose, now).
        unsafe {
            Self::count_in(this, BROKEN == COUNTS_LATE);
            Self::done(this);
        }
    }

    type Wake = Nudged<T, LOSES_TOKENS, BROKEN>;

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
                // SAFETY: live, as above.
                T::after_wake_store(unsafe { &(*this).word });
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
            (*nudged.0).wake();
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
            T::wait(&mut waits);
        }
    }
}

/// The wake a nudge of a [`ThreadParker`] owes: the parker, counted among
/// its wakers until the wake is made.
pub(crate) struct Nudged<T: Threads, const LOSES_TOKENS: bool, const BROKEN: u8>(
    *const ThreadParker<T, LOSES_TOKENS, BROKEN>,
);

impl<T: Threads, const LOSES_TOKENS: bool, const BROKEN: u8> ThreadParker<T, LOSES_TOKENS, BROKEN> {
    /// Models only: the parker's node goes away, which, as far as its
    /// handle goes, is a write to the handle's cell.
    ///
    /// # Safety
    /// The thread has retired the parker.
    #[cfg(all(test, not(miri)))]
    pub(crate) unsafe fn free_handle(&self) {
        // SAFETY: forwarded from the caller.
        unsafe { self.thread.set(None) };
    }

    /// Wakes the parker's thread (`Thread::unpark`), counting the call in a
    /// `stats` build as the futex parker counts its `FUTEX_WAKE`.
    ///
    /// # Safety
    /// Only after `prepare` published the parker (by the push of its node,
    /// or its listing), while the parker is live.
    unsafe fn wake(&self) {
        #[cfg(feature = "stats")]
        let start = crate::arch::ticks();
        // SAFETY: only `prepare` writes `thread`, before the publication.
        unsafe {
            self.thread.with(|h| T::unpark(h.expect("wake of a parker that was never armed")));
        }
        #[cfg(feature = "stats")]
        crate::stats::wake_call(start);
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
            unsafe {
                self.thread.with(|me| {
                    if let Some(me) = me {
                        T::unpark(me);
                    }
                });
            }
        }
    }
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
        let parker = Shared(ThreadParker::<StdThreads, false, BROKEN>::new());
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
            let p: *const ThreadParker<StdThreads, false, BROKEN> = parker;
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
                        ThreadParker::<StdThreads, false, BROKEN>::wake_nudged(w);
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
