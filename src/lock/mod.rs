//! The spin-bit lock algorithm, generic over [`Platform`] (the native
//! platform ships; the loom platform model-checks this same code).
//!
//! # The word
//!
//! One `AtomicPtr` to the newest sleeping waiter's [`Node`], tagged in its
//! five low bits (nodes are aligned to 32):
//!
//! ```text
//!  head (newest sleeper, or null) | BACKLOG | STARVING | STACK_LOCKED | SPINNING | LOCKED
//! ```
//!
//! Only word-sized RMWs touch it. `LOCKED` is the mutex. `SPINNING` is one
//! waiter's right to spin: its holder alone clears it (taking the lock,
//! pushing itself, or, handed it by a nudge, owning the stack or the
//! lock). `STACK_LOCKED` gives one thread the right to remove nodes;
//! pushes never need it. `STARVING` makes unlocks hand the lock
//! over (or nudge a sleeping recipient); `BACKLOG` makes unlocks wake even
//! beside a spinner.
//!
//! # The transitions
//!
//! ```text
//! lock       fetch_or(LOCKED)                   free -> held           (this file)
//! spin       CAS +SPINNING, then CAS +LOCKED -SPINNING                  (wait.rs)
//! sleep      CAS head=me, -SPINNING, only while LOCKED                  (wait.rs)
//! unlock     CAS -LOCKED; +STACK_LOCKED if a wake is due                (this file)
//! wake       pop the oldest, CAS -STACK_LOCKED (+SPINNING for it), unpark;
//!            if the oldest's nudge is pending, CAS -STACK_LOCKED alone  (wake.rs)
//! hand-off   pop the oldest with LOCKED kept, unpark: it owns the lock  (wake.rs)
//! nudge      the oldest is asleep (its word says so): mark its word nudged,
//!            CAS -LOCKED -STACK_LOCKED -STARVING (+SPINNING for it and
//!            -BACKLOG, if nobody spins), wake it; it stays linked, and
//!            once it runs it starves again (below)                  (wake.rs)
//! starve     a sleeper past its deadline: CAS +STACK_LOCKED, move to the
//!            bottom, +STARVING, give the stack back                     (wait.rs, stack.rs)
//! leave      a timed waiter past its deadline: CAS +STACK_LOCKED,
//!            unlink itself, give the stack back                         (stack.rs)
//! census     a holder now and then, or a push beside a spinner:
//!            CAS +STACK_LOCKED, count (and judge the oldest), flip
//!            BACKLOG (+STARVING), give the stack back                   (wait.rs)
//! ```
//!
//! No wakeup is lost because a thread sleeps only after a CAS that saw
//! `LOCKED` set and published its node, so the holder's unlock sees it; an
//! unlock skips the wake only for a spinner, which leaves that role only by
//! taking the lock or by pushing itself while the lock is held (a nudged
//! spinner: while it owns the stack or the lock). The crate documentation
//! has the whole argument, the wake order and the bound on waiting; the
//! comments here point at the step each operation implements.
//!
//! The file layout: this file holds the word, the node and the fast paths;
//! `wait.rs` the waiting of `lock`, `wake.rs` the unlock's slow path and
//! the hand-off, `stack.rs` the stack's own operations.

use core::ptr;
use core::sync::atomic::Ordering;
use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use crate::platform::{
    Deadline, Event, Fault, NodeCell, Nudge, Parker, Platform, SpinPolicy, StateWord, Wait, Woke,
};

mod stack;
mod wait;
mod wake;

#[cfg(test)]
pub(crate) use stack::{next_of, requeued_of};

/// The mutex is held.
pub(crate) const LOCKED: usize = 1;
/// One waiter has the right to spin; other waiters must sleep.
pub(crate) const SPINNING: usize = 2;
/// One thread owns the waiter stack: only it may remove nodes.
pub(crate) const STACK_LOCKED: usize = 4;
/// Starvation mode: the oldest sleeper has waited too long, so every unlock
/// hands the lock directly to the oldest sleeper (LOCKED stays set), and
/// waiters neither spin nor barge from the slow path. Set only with a
/// non-empty stack, by a thread that owns the stack and saw the oldest
/// sleeper starving; cleared by the stack owner whose hand-off or wake
/// leaves no starving sleeper at the bottom.
pub(crate) const STARVING: usize = 8;
/// Sleepers are backed up: the last wake or hand-off left more sleepers on
/// the stack than [`Platform::backlog_sleepers`] (4 per CPU), or a census
/// (a holder's look or a push beside a spinner, `Lock::census`) found that
/// the next wake would. Set and cleared by stack owners. While it is set,
/// unlocks wake the oldest sleeper even though a thread holds SPINNING.
///
/// The spin bit saves those wakes because the spinner is about to take the
/// lock. With many more sleepers than CPUs that no longer holds: the thread
/// a wake handed SPINNING waits for a CPU, often for milliseconds, and an
/// unlock that skipped its wake meanwhile left the whole stack asleep until
/// the starvation hand-offs reached it (measured: docs/benchmarks.md,
/// "Measurements behind the algorithm's rules"). A thread woken past the
/// spinner is handed nothing: it competes like an arrival.
/// The flag is a hint read by unlocks; it guards no data, and a stale value
/// costs one wake too many or too few, never a lost one (a skipped wake
/// still leaves a spinner, as without the flag).
pub(crate) const BACKLOG: usize = 16;
/// The ordering of the unlock's release of LOCKED: Release, except in the
/// ThreadSanitizer run's negative control (`--cfg spinbit_tsan_negative_control`),
/// a deliberately broken build that the sanitizer must report.
const UNLOCK_ORDER: Ordering = if cfg!(spinbit_tsan_negative_control) { Relaxed } else { Release };

/// One release of a paused guess ([`Platform::release_guess`]): above
/// every flag, so a pause never holds LOCKED and is never guessed.
const GUESS_PAUSE_UNIT: usize = FLAGS + 1;

/// The guess an unlock leaves ([`Platform::release_guess`]) after it
/// guessed `guess` (wrongly if `missed`) and released from `found`, or
/// went to its slow path (`found` 0): a pause after a miss, the pause
/// counted down, or else the word found if it had no sleepers.
#[inline(always)]
fn next_guess<P: Platform>(guess: usize, missed: bool, found: *mut Node<P>) -> usize {
    if missed {
        crate::arch::GUESS_PAUSE * GUESS_PAUSE_UNIT
    } else if guess > GUESS_PAUSE_UNIT {
        guess - GUESS_PAUSE_UNIT
    } else if head(found).is_null() {
        found.addr()
    } else {
        0
    }
}

/// Aborts the process if dropped: armed around a call that must not unwind,
/// and forgotten after it.
struct AbortOnUnwind;

impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        abort_with("a panic inside a lock call (above) would unwind past a linked waiter node");
    }
}

/// Prints `what` straight to the standard error stream (no allocation, no
/// panic if that fails) and aborts the process.
#[cold]
pub(crate) fn abort_with(what: &str) -> ! {
    for part in [&b"spinbit: "[..], what.as_bytes(), &b"; aborting\n"[..]] {
        write_stderr(part);
    }
    std::process::abort()
}

/// Writes `bytes` to file descriptor 2 with `write(2)`, not through
/// `std::io::stderr()`, whose lock another thread may hold for good (a
/// logger blocked on this very mutex); errors are ignored.
#[cfg(unix)]
fn write_stderr(mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: writes from a live buffer of that length.
        let n = unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
        if n <= 0 {
            return;
        }
        bytes = &bytes[n as usize..];
    }
}

/// Writes `bytes` to the standard error stream; errors are ignored.
#[cfg(not(unix))]
fn write_stderr(bytes: &[u8]) {
    use std::io::Write;
    let _ = std::io::stderr().write_all(bytes);
}

/// Runs `f`, a lock call's slow path, aborting the process if it panics:
/// unwinding would leave a waiter node linked into the mutex from the
/// unwound stack, or the waiter stack owned for good. Nothing here panics
/// but the checks of [`Platform::CHECKS`] builds (which call
/// [`Platform::broken`], aborting at once) and overflow checks; this is the
/// backstop for whatever else might. Free in the release build's paths: a
/// landing pad, no instruction on the way through.
#[inline(always)]
pub(crate) fn no_unwind<P: Platform, R>(f: impl FnOnce() -> R) -> R {
    if !P::ABORT_ON_UNWIND || P::FAULT == Fault::UnwindPastNode {
        return f();
    }
    let abort = AbortOnUnwind;
    let r = f();
    core::mem::forget(abort);
    r
}

/// The tag bits; the rest of the word is the address of the top node.
pub(crate) const FLAGS: usize = LOCKED | SPINNING | STACK_LOCKED | STARVING | BACKLOG;

/// A sleeping waiter. It lives on its thread's stack for one `lock` call and
/// is linked into the stack only while that thread sleeps.
///
/// The alignment leaves the five low address bits free for the flags.
#[repr(C, align(32))]
pub(crate) struct Node<P: Platform> {
    /// The next older waiter (towards the tail), or null at the tail.
    next: P::Cell<*mut Node<P>>,
    /// The next younger waiter. Valid from the node that caches the tail
    /// down to the tail, once a stack owner has walked that far.
    prev: P::Cell<*mut Node<P>>,
    /// If non-null, the tail (oldest waiter) of the stack this node heads or
    /// headed. The walk in [`find_tail`](stack::find_tail) stops at the first such node.
    tail: P::Cell<*mut Node<P>>,
    /// How many nodes are linked from this one down to the tail. Valid in
    /// a node that caches the tail (`tail` non-null): [`find_tail`](stack::find_tail) adds the
    /// nodes it walks to the count of the node it stops at, and stack
    /// owners that unlink a node keep the top's count. Only a hint for
    /// [`BACKLOG`]: nothing else depends on it.
    count: P::Cell<u32>,
    /// Set by the waker: the SPINNING bit came with the wake, so this thread
    /// is the spinner when it runs.
    handed_spin: P::Cell<bool>,
    /// Set by the waker: the lock itself came with the wake (a hand-off), so
    /// this thread owns it when it runs.
    handed_lock: P::Cell<bool>,
    /// When this thread's starvation clock started in this `lock` call
    /// ([`Platform::now`] ticks): at its first yield or, if it did not
    /// yield or that push found sleepers backed up, its first push (see
    /// `start_clock`). It does not restart when the thread sleeps again, so
    /// it measures how long the thread has been kept waiting.
    ///
    /// Written by its own thread before a push, or, for a waiter that a
    /// condition variable moves onto the stack, by the notifier before that
    /// move (`push_chain`), which the waiter's return to `lock` is ordered
    /// after (`Condvar`'s wait: the wake's or nudge's Release, or the list's
    /// lock after a timeout); stack owners only read it. So no thread
    /// writes it while its waiter reads it.
    since: P::Cell<u64>,
    /// Set by the thread itself, owning the stack, when its timed sleep
    /// ended at [`Platform::starve_deadline`] (see `Lock::starve`): from
    /// then on it counts as starving.
    starved: P::Cell<bool>,
    /// Set by a condition variable that moved this node onto the stack
    /// (`Lock::push_chain`), whose thread sleeps on in the condition
    /// variable's wait with no starvation timer: stack owners judge it at
    /// the longer of a sleeper's two thresholds ([`starves`](wake::starves)),
    /// from `since`, the requeue. Cleared by its thread's next push of its own.
    requeued: P::Cell<bool>,
    /// When a wake unlinked this node from a stack, or a condition
    /// variable's notifier from its list ([`Platform::now`] ticks): its
    /// thread measures how long it waited (from its push, or its listing)
    /// and, if it slept in the OS, how long it took to run after the wake;
    /// the waiting policy learns from both ([`Platform::note_wake`]).
    woken_at: P::Cell<u64>,
    /// Set by a stack owner that nudged this sleeper (see
    /// `Lock::hand_off_or_nudge`): in this `lock` call it is not nudged
    /// again.
    nudged: P::Cell<bool>,
    /// Set by the thread itself, owning the stack, when it marked itself
    /// anew after its nudge (`Lock::starve`). Until then a nudged sleeper
    /// is on its way to do so, running or not, and is not handed the lock.
    renewed: P::Cell<bool>,
    /// Set by a stack owner whose nudge of this (linked) node released the
    /// lock with SPINNING clear (`Lock::release_after_nudge`): the bit is
    /// this thread's, as after a wake, so that unlocks skip their wakes
    /// until it runs. It gives the bit up when it next owns the stack
    /// (`Lock::starve`), or, popped before that by a fair unlock's hand-off
    /// (`Lock::after_wake`), with the lock; it clears the field then.
    nudge_spin: P::Cell<bool>,
    parker: P::Parker,
}

impl<P: Platform> Node<P> {
    fn new() -> Self {
        Node {
            next: NodeCell::new(ptr::null_mut()),
            prev: NodeCell::new(ptr::null_mut()),
            tail: NodeCell::new(ptr::null_mut()),
            count: NodeCell::new(0),
            handed_spin: NodeCell::new(false),
            handed_lock: NodeCell::new(false),
            since: NodeCell::new(0),
            starved: NodeCell::new(false),
            requeued: NodeCell::new(false),
            woken_at: NodeCell::new(0),
            nudged: NodeCell::new(false),
            renewed: NodeCell::new(false),
            nudge_spin: NodeCell::new(false),
            parker: Parker::new(),
        }
    }

    /// A node whose waiter is about to sleep on it before any push (a
    /// condition variable's wait): armed, as a push arms it.
    pub(crate) fn parked() -> Self {
        let node = Node::<P>::new();
        node.parker.prepare();
        node
    }

    /// The parker the node's waiter sleeps on.
    pub(crate) fn parker(&self) -> &P::Parker {
        &self.parker
    }

    /// Links the node to `older`, the next one of a chain for
    /// [`Lock::push_chain`].
    ///
    /// # Safety
    /// The node is on no stack, and no other thread accesses it.
    pub(crate) unsafe fn link_to(&self, older: *mut Node<P>) {
        // SAFETY: forwarded from the caller.
        unsafe { self.next.set(older) };
    }

    /// Records that a wake is on its way to the node's waiter, now (its
    /// waiter learns its waits and wake latencies from it, see
    /// [`Platform::note_wake`]).
    ///
    /// # Safety
    /// The caller is the node's waker, and the node is on no stack (a
    /// condition variable's notifier, which took it off its list): nobody
    /// else writes the field, and the waiter reads it only once the wake
    /// (a Release store) has landed.
    pub(crate) unsafe fn stamp_wake(&self) {
        // SAFETY: forwarded from the caller.
        unsafe { self.woken_at.set(P::now()) };
    }

    /// When [`Node::stamp_wake`] was called.
    ///
    /// # Safety
    /// The caller is the node's waiter, and its wake (stamped) has landed.
    pub(crate) unsafe fn woken_at(&self) -> u64 {
        // SAFETY: forwarded from the caller.
        unsafe { self.woken_at.get() }
    }
}

/// Retires a node's parker when dropped ([`Parker::retire`]): declared
/// after the node, it is dropped before it, on every way out of the wait.
pub(crate) struct Retire<'a, P: Platform>(pub(crate) &'a Node<P>);

impl<P: Platform> Drop for Retire<'_, P> {
    #[inline(always)]
    fn drop(&mut self) {
        self.0.parker.retire();
    }
}

/// The top node of a state word (its address without the flag bits).
#[inline(always)]
fn head<P: Platform>(state: *mut Node<P>) -> *mut Node<P> {
    state.map_addr(|a| a & !FLAGS)
}

#[inline(always)]
fn flags<P: Platform>(state: *mut Node<P>) -> usize {
    state.addr() & FLAGS
}

/// The word with the same head and the flags set to `f`.
#[inline(always)]
fn with_flags<P: Platform>(state: *mut Node<P>, f: usize) -> *mut Node<P> {
    state.map_addr(|a| (a & !FLAGS) | f)
}

/// Whether an unlock whose release returned `old` has more to do: wake a
/// sleeper (there is one, nobody owns the stack, and no spinner will take
/// the lock or sleepers are backed up), or hand the lock over (starvation
/// mode began after the unlock looked at the word).
///
/// STARVING implies sleepers, so both cases need a non-empty stack; what
/// else they need depends on the flags alone, so a table indexed by the
/// flags answers (on x86_64 a `bt` of a constant, after the compare that
/// finds the stack non-empty).
#[inline(always)]
fn unlock_needs_slow_path<P: Platform>(old: *mut Node<P>) -> bool {
    let a = old.addr();
    a > FLAGS && (SLOW_UNLOCKS >> (a & FLAGS)) & 1 != 0
}

/// [`unlock_needs_slow_path`]'s table: bit `f` is set if an unlock that
/// finds sleepers and the flags `f` has a wake or a hand-off to do.
const SLOW_UNLOCKS: u32 = {
    let mut table = 0;
    let mut f = 0;
    while f <= FLAGS {
        if (f & STACK_LOCKED == 0 && (f & SPINNING == 0 || f & BACKLOG != 0)) || f & STARVING != 0 {
            table |= 1 << f;
        }
        f += 1;
    }
    table
};

/// Records (test builds) why an unlock whose plain release replaced `s`
/// woke nobody although sleepers were on the stack: another thread owned
/// the stack (its owner decides on the word as it finds it when it gives
/// the stack back, see `serve`), or a spinner takes the wake.
#[inline(always)]
fn record_skipped_wake<P: Platform>(s: *mut Node<P>) {
    if !head(s).is_null() {
        if s.addr() & STACK_LOCKED != 0 && !spinner_takes_wake(s.addr()) {
            P::record(Event::StackBusy);
        } else if s.addr() & SPINNING != 0 {
            P::record(Event::WakeSkippedForSpinner);
        }
    }
}

/// Checks, in builds with [`Platform::CHECKS`], that a thread that thinks
/// it holds SPINNING (`spinner`) saw the bit in `s`, the value its
/// successful CAS replaced: exactly one thread holds the bit while it is
/// set, and only that thread clears it.
#[inline(always)]
fn check_spinner<P: Platform>(s: *mut Node<P>, spinner: bool) {
    if P::CHECKS && spinner && s.addr() & SPINNING == 0 {
        P::broken("a spinbit waiter held SPINNING that another cleared");
    }
}

/// Whether a wake is left to the spinner: a thread holds SPINNING, the lock
/// is not in starvation mode and sleepers are not backed up.
#[inline(always)]
fn spinner_takes_wake(a: usize) -> bool {
    a & (SPINNING | STARVING | BACKLOG) == SPINNING
}

/// The lock: one word.
pub(crate) struct Lock<P: Platform> {
    pub(crate) state: P::State,
}

impl<P: Platform> Lock<P> {
    /// The flag that `serve` sets when it finds the lock taken: STARVING,
    /// or nothing with the test builds' fault
    /// `ServeGivesBackWithoutStarving` (a constant, so that the release
    /// build's code is exactly as without the fault).
    const SERVE_STARVING: usize =
        if matches!(P::FAULT, Fault::ServeGivesBackWithoutStarving) { 0 } else { STARVING };

    /// Takes the lock if it is free. One RMW, whatever the other bits hold:
    /// a barging acquisition leaves waiters and spinner as they are. In
    /// starvation mode LOCKED is never clear, so it fails.
    #[inline]
    pub(crate) fn try_lock(&self) -> bool {
        // Acquire: pairs with the Release of the unlock that cleared LOCKED,
        // so the previous critical section happens before ours.
        let old = self.state.fetch_or(LOCKED, Acquire);
        old.addr() & LOCKED == 0
    }

    #[inline]
    pub(crate) fn lock(&self) {
        if !self.try_lock() {
            self.lock_slow();
        }
    }

    #[inline]
    pub(crate) fn is_locked(&self) -> bool {
        self.state.load(Relaxed).addr() & LOCKED != 0
    }

    /// Releases the lock. The release is a CAS from the value the unlock
    /// guessed (the word its thread's latest release found, if that had
    /// no sleepers, unless a miss paused the guessing) or, without a
    /// guess, loaded, or after a wrong guess the value the guess's CAS
    /// returned; so the unlock decides on the
    /// word as it was when the release took effect: if that shows a wake
    /// to do, the same CAS takes `STACK_LOCKED` (`unlock_slow`); in
    /// starvation mode the lock is handed over instead, never released.
    /// Either way the unlock touches the word
    /// only while it holds LOCKED or the stack, and never after a release
    /// that leaves it neither: a thread that takes the lock after that
    /// release, is its last user and frees it, frees nothing that this
    /// unlock still uses (`model::freed_by_its_last_user`). Against a
    /// release with a `fetch_sub` and a wake after it (`release_then_wake`),
    /// the CAS (then after a load) cost at most about 4 % at two threads
    /// (docs/benchmarks.md, "Measuring a build variant").
    ///
    /// # Safety
    /// The lock must be held by the caller's context.
    #[inline]
    pub(crate) unsafe fn unlock(&self) {
        if P::FAULT == Fault::ReleaseThenWake {
            // SAFETY: forwarded from the caller.
            return unsafe { self.release_then_wake() };
        }
        // The word this thread's latest plain release replaced, if that had
        // no sleepers: a CAS from it releases without a load first, which an
        // uncontended lock's unlock would wait for (`release_guess`). A
        // guess holds LOCKED and no head, so a CAS that succeeds replaced
        // a word with no wake to do, as a load would have shown; a pause
        // after a miss holds no LOCKED, and the word is loaded.
        let guess = P::release_guess();
        let mut missed = false;
        let s = if guess & LOCKED != 0 {
            let g: *mut Node<P> = ptr::without_provenance_mut(guess);
            // Release: publishes the critical section to the next acquirer.
            match self.state.compare_exchange(g, g.map_addr(|a| a - LOCKED), UNLOCK_ORDER, Relaxed)
            {
                Ok(_) => return,
                // Relaxed: as the load below.
                Err(now) => {
                    P::record(Event::GuessMissed);
                    missed = true;
                    now
                }
            }
        } else {
            // Relaxed: the release below is a CAS from this very value; the
            // CAS, not this load, orders the critical section before the
            // next acquirer.
            self.state.load(Relaxed)
        };
        // Before the release: on an unlocked word it would borrow from the
        // address bits.
        debug_assert!(s.addr() & LOCKED != 0, "unlock of an unlocked spinbit mutex");
        let s = if unlock_needs_slow_path(s) {
            s
        } else {
            // Release: publishes the critical section to the next acquirer.
            match self.state.compare_exchange(s, s.map_addr(|a| a - LOCKED), UNLOCK_ORDER, Relaxed)
            {
                Ok(_) => {
                    let next = next_guess(guess, missed, s);
                    if next != guess {
                        P::set_release_guess(next);
                    }
                    return record_skipped_wake(s);
                }
                // Relaxed: the slow path only decides again from it; what
                // it reads of the nodes it reads after an Acquire CAS.
                Err(now) => now,
            }
        };
        let next = next_guess::<P>(guess, missed, ptr::null_mut());
        if next != guess {
            P::set_release_guess(next);
        }
        // SAFETY: forwarded from the caller.
        unsafe { self.unlock_slow(s) }
    }

    /// The unlock of the negative control `Fault::ReleaseThenWake` (and of
    /// the measurement variant `benches/patches/release-then-wake.patch`):
    /// release with a `fetch_sub`, then, if its old value shows a wake to
    /// do, take the stack after the release, as `unlock` did before its
    /// release became a CAS. It stays a mutex, but the unlocker then
    /// touches the word after another thread may have taken the lock, used
    /// it last and freed it (`model::freed_by_its_last_user` catches it).
    ///
    /// # Safety
    /// The lock must be held by the caller's context.
    #[inline]
    unsafe fn release_then_wake(&self) {
        let s = self.state.load(Relaxed);
        debug_assert!(s.addr() & LOCKED != 0, "unlock of an unlocked spinbit mutex");
        if s.addr() & STARVING != 0 {
            // SAFETY: forwarded from the caller.
            return unsafe { self.unlock_slow(s) };
        }
        // Release: publishes the critical section to the next acquirer.
        let old = self.state.fetch_sub(LOCKED, UNLOCK_ORDER);
        if unlock_needs_slow_path(old) {
            // SAFETY: we just released the lock.
            unsafe { self.wake_after_release(old) };
        } else {
            record_skipped_wake(old);
        }
    }

    /// Hands the lock to the oldest sleeper, or unlocks normally if nobody
    /// sleeps. The lock is never free in between: nobody can take it first.
    /// After a hand-off, this thread's waits for this lock yield rather than
    /// sleep for a while (see `wait`).
    ///
    /// # Safety
    /// The lock must be held by the caller's context.
    #[inline]
    pub(crate) unsafe fn unlock_fair(&self) {
        let s = self.state.load(Relaxed);
        debug_assert!(s.addr() & LOCKED != 0, "unlock of an unlocked spinbit mutex");
        if head(s).is_null() {
            // Nobody to hand over to. A waiter that pushes itself after this
            // look is seen by the release in `unlock`.
            P::record(Event::FairUnlockEmpty);
            // SAFETY: forwarded from the caller.
            return unsafe { self.unlock() };
        }
        // SAFETY: forwarded from the caller.
        unsafe { self.unlock_fair_slow(s) }
    }

    /// `unlock_fair` with sleepers seen in `s`, out of line (the thread-local
    /// and tick-counter work of the hand-off would cost the call on an
    /// empty stack a frame).
    ///
    /// # Safety
    /// The lock must be held by the caller's context.
    #[cold]
    #[inline(never)]
    unsafe fn unlock_fair_slow(&self, s: *mut Node<P>) {
        // Aborts rather than unwind with the stack owned.
        no_unwind::<P, _>(|| {
            // Another thread may own the stack: an unlocker waking a
            // sleeper, a sleeper marking itself starving, a timed waiter
            // leaving. We wait for it, holding the lock.
            let Ok(s) = self.take_stack_unless(s, |s| head(s).is_null()) else {
                // Nobody to hand over to. A waiter that pushes itself after
                // this look is seen by the release in `unlock`.
                P::record(Event::FairUnlockEmpty);
                // SAFETY: forwarded from the caller.
                return unsafe { self.unlock() };
            };
            // Our next wait for this lock, if it comes soon, stays awake (see
            // `wait`).
            P::note_hand_off(ptr::from_ref(self).addr());
            // SAFETY: we hold LOCKED and STACK_LOCKED, and the stack is not empty.
            unsafe { self.hand_off(s) };
        })
    }

    /// If somebody sleeps, hands the lock to the oldest sleeper and takes it
    /// back (waiting behind it like any other waiter).
    ///
    /// # Safety
    /// The lock must be held by the caller's context.
    // With `stats`, `RawMutex::bump` does this itself, counting the lock.
    #[cfg_attr(all(feature = "stats", not(test)), expect(dead_code))]
    pub(crate) unsafe fn bump(&self) {
        if !head(self.state.load(Relaxed)).is_null() {
            // SAFETY: forwarded from the caller.
            unsafe { self.unlock_fair() };
            // `lock_api` lets `bump` unwind only with the lock held again:
            // the caller's guard would unlock it. `lock` panics only on a
            // broken invariant (checked builds), and then we abort.
            no_unwind::<P, _>(|| self.lock());
        }
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn lock_slow(&self) {
        no_unwind::<P, _>(|| self.wait(None));
    }

    /// Takes the lock, waiting until `deadline` at the latest: `true` if
    /// taken. Called after a failed `try_lock`.
    #[cold]
    #[inline(never)]
    pub(crate) fn lock_until_slow(&self, deadline: Deadline<P>) -> bool {
        no_unwind::<P, _>(|| self.wait(Some(deadline)))
    }
}
