//! The spin-bit lock algorithm, generic over [`Platform`].
//!
//! See the crate documentation for the state table, the argument that no
//! wakeup is lost and the bound on waiting; the comments here point at the
//! step of that argument each operation implements.

use core::ptr;
use core::sync::atomic::Ordering;
use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use crate::platform::{Deadline, Event, Fault, NodeCell, Parker, Platform, SpinPolicy, StateWord};

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
/// the stack than [`Platform::backlog_sleepers`] (4 per CPU), or a look or
/// a push beside a spinner (`Lock::count_on_push`) found that the next
/// wake would. Set and cleared by stack owners. While it is set, unlocks
/// wake the oldest sleeper even though a thread holds SPINNING.
///
/// The spin bit saves those wakes because the spinner is about to take the
/// lock. With many more sleepers than CPUs that no longer holds: the thread
/// a wake handed SPINNING waits for a CPU, often for milliseconds, and an
/// unlock that skipped its wake meanwhile left the whole stack asleep until
/// the starvation hand-offs reached it (sweep, eleventh section). A thread
/// woken past the spinner is handed nothing: it competes like an arrival.
/// The flag is a hint read by unlocks; it guards no data, and a stale value
/// costs one wake too many or too few, never a lost one (a skipped wake
/// still leaves a spinner, as without the flag).
pub(crate) const BACKLOG: usize = 16;
/// The ordering of the unlock's release of LOCKED: Release, except in the
/// ThreadSanitizer run's negative control (`--cfg spinbit_tsan_negative_control`),
/// a deliberately broken build that the sanitizer must report.
const UNLOCK_ORDER: Ordering = if cfg!(spinbit_tsan_negative_control) { Relaxed } else { Release };

/// The measurement build `spinbit_release_then_wake` (`benches/ab.sh`):
/// `unlock` releases LOCKED with a `fetch_sub` and, if the value it
/// replaced shows a wake to do, takes the stack afterwards, as `unlock` did
/// before its release became a CAS. It stays a mutex, but the unlocker then
/// touches the word after another thread may have taken the lock, used it
/// last and freed it (`model::freed_by_its_last_user` catches it: its
/// negative control, `Fault::ReleaseThenWake`, runs this code). It exists
/// only to measure what the release CAS costs.
const RELEASE_THEN_WAKE: bool = cfg!(spinbit_release_then_wake);

/// The measurement build `spinbit_untimed_resleep` (`benches/ab.sh`): a
/// thread that a wake popped in its `lock` call and that pushes itself back
/// as the only sleeper, with nobody spinning, sleeps without its
/// starvation timer until its deadline has passed (it checks its clock at
/// each wake, so it still marks itself then). Arming and cancelling a
/// futex wait's timer costs a few µs of CPU per sleep in a VM, and beside
/// a holder that re-takes the lock at once such a sleeper is woken again
/// within a critical section. It saves CPU and costs throughput: 2-core
/// Intel Xeon VM (model 167), two `ab.sh` sets of three rounds, CPU per
/// operation 0.81-0.88 of the default's at 2 threads with 100 ns-10 µs
/// critical sections, throughput 0.94-0.97 with 1-10 µs ones (runs apart
/// in three of those four), the other key cells within their spread
/// (`benches/results/ab-x86_64-intel-xeon-f6m167-untimed-resleep.md`).
/// Against the peers that turns
/// those cells' throughput from at or above the fastest peer's to below it,
/// without bringing their CPU per operation down to the cheapest peer's
/// (docs/benchmarks.md, "Why the 2-thread cells with critical sections cost more CPU
/// per operation"). Untimed sleeps there rest on the others' backstop
/// while spinners keep unlocks from waking them, which the crate docs'
/// bound does not cover; this build is for measurement only.
const UNTIMED_RESLEEP: bool = cfg!(spinbit_untimed_resleep);

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
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(b"spinbit: ");
    let _ = err.write_all(what.as_bytes());
    let _ = err.write_all(b"; aborting\n");
    std::process::abort()
}

/// Runs `f`, a lock call's slow path, aborting the process if it panics:
/// unwinding would leave a waiter node linked into the mutex from the
/// unwound stack, or the waiter stack owned for good. Nothing here panics
/// but the checks of [`Platform::CHECKS`] builds (which call
/// [`Platform::broken`], aborting at once) and overflow checks; this is the
/// backstop for whatever else might. Free in the release build's paths: a
/// landing pad, no instruction on the way through.
#[inline(always)]
fn no_unwind<P: Platform, R>(f: impl FnOnce() -> R) -> R {
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
    /// headed. The walk in [`find_tail`] stops at the first such node.
    tail: P::Cell<*mut Node<P>>,
    /// How many wakes have passed this node over while it was the tail.
    passes: P::Cell<u32>,
    /// How many nodes are linked from this one down to the tail. Valid in
    /// a node that caches the tail (`tail` non-null): [`find_tail`] adds the
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
    since: P::Cell<u64>,
    /// Set by the thread itself, owning the stack, when its timed sleep
    /// ended at [`Platform::starve_deadline`] (see `Lock::starve`): from
    /// then on it counts as starving.
    starved: P::Cell<bool>,
    /// When a hand-off unlinked this node ([`Platform::now`] ticks), for the
    /// test build's measurement of how long the lock waits for its
    /// recipient.
    #[cfg(test)]
    handed_at: P::Cell<u64>,
    parker: P::Parker,
}

impl<P: Platform> Node<P> {
    fn new() -> Self {
        Node {
            next: NodeCell::new(ptr::null_mut()),
            prev: NodeCell::new(ptr::null_mut()),
            tail: NodeCell::new(ptr::null_mut()),
            passes: NodeCell::new(0),
            count: NodeCell::new(0),
            handed_spin: NodeCell::new(false),
            handed_lock: NodeCell::new(false),
            since: NodeCell::new(0),
            starved: NodeCell::new(false),
            #[cfg(test)]
            handed_at: NodeCell::new(0),
            parker: Parker::new(),
        }
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

/// Starts `node`'s starvation clock (`Node::since`) unless `clocked` says
/// it runs already. The clock starts when the waiter first yields or, if it
/// did not yield, first pushes itself: on an oversubscribed CPU one yield
/// can take milliseconds, and a clock that started only at the first sleep
/// let a waiter spend them before its deadline began. While sleepers are
/// backed up (`BACKLOG`) the yields do not count: a first push that finds
/// the flag set restarts the clock, and yields do not end at the
/// threshold. There every waiter that marks itself costs the lock a
/// hand-off to a sleeping thread, and counting the yields cost throughput
/// with 64 threads and 100 ns of think time (0.97 → 0.72 of the fastest
/// peer's, two interleaved runs each on the 2-core AMD EPYC VM) and in
/// `queue-inline/t32` (0.94 → 0.81), which the flag kept (0.90, 1.04).
///
/// # Safety
/// The node is not published, if `clocked` is clear: the clock starts
/// before the first push, and only its owner writes `since`.
#[inline(always)]
unsafe fn start_clock<P: Platform>(node: &Node<P>, clocked: &mut bool) {
    if !*clocked {
        *clocked = true;
        // SAFETY: forwarded from the caller.
        unsafe { node.since.set(P::clock()) };
    }
}

/// The oldest sleeper of the stack whose top is `top` (`find_tail`), whose
/// age the looks and wakes judge; the newest (`top`) with the test builds'
/// `broken` fault, the negative control of the model that checks the
/// judgement (`model::a_look_judges_the_oldest_sleeper`,
/// `model::a_wake_judges_the_oldest_sleeper`).
///
/// # Safety
/// As for `find_tail`.
#[inline(always)]
unsafe fn oldest<P: Platform>(top: *mut Node<P>, broken: Fault) -> *mut Node<P> {
    // SAFETY: forwarded from the caller.
    let tail = unsafe { find_tail(top) };
    if P::FAULT == broken { top } else { tail }
}

/// Whether `node` starves: it marked itself so when its timed sleep ran
/// out (see `Lock::starve`), or the platform judges its wait too long.
///
/// # Safety
/// The caller owns the stack and `node` is linked.
#[inline(always)]
unsafe fn starves<P: Platform>(node: *mut Node<P>) -> bool {
    // SAFETY: forwarded from the caller.
    unsafe { (*node).starved.get() || P::starving((*node).since.get()) }
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
    /// looked at, so the unlock decides on the word as it was when the
    /// release took effect: if that shows a wake to do, the same CAS takes
    /// `STACK_LOCKED` (`unlock_slow`); in starvation mode the lock is handed
    /// over instead, never released. Either way the unlock touches the word
    /// only while it holds LOCKED or the stack, and never after a release
    /// that leaves it neither: a thread that takes the lock after that
    /// release, is its last user and frees it, frees nothing that this
    /// unlock still uses (`model::freed_by_its_last_user`).
    ///
    /// # Safety
    /// The lock must be held by the caller's context.
    #[inline]
    pub(crate) unsafe fn unlock(&self) {
        if RELEASE_THEN_WAKE || P::FAULT == Fault::ReleaseThenWake {
            // SAFETY: forwarded from the caller.
            return unsafe { self.release_then_wake() };
        }
        // Relaxed: the release below is a CAS from this very value; the CAS,
        // not this load, orders the critical section before the next
        // acquirer.
        let s = self.state.load(Relaxed);
        // Before the release: on an unlocked word it would borrow from the
        // address bits.
        debug_assert!(s.addr() & LOCKED != 0, "unlock of an unlocked spinbit mutex");
        let s = if unlock_needs_slow_path(s) {
            s
        } else {
            // Release: publishes the critical section to the next acquirer.
            match self.state.compare_exchange(s, s.map_addr(|a| a - LOCKED), UNLOCK_ORDER, Relaxed)
            {
                Ok(_) => return record_skipped_wake(s),
                // Relaxed: the slow path only decides again from it; what
                // it reads of the nodes it reads after an Acquire CAS.
                Err(now) => now,
            }
        };
        // SAFETY: forwarded from the caller.
        unsafe { self.unlock_slow(s) }
    }

    /// The unlock of the measurement build `spinbit_release_then_wake` and
    /// of the negative control `Fault::ReleaseThenWake`: release with a
    /// `fetch_sub`, then, if its old value shows a wake to do, take the
    /// stack after the release (see `RELEASE_THEN_WAKE`).
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
    unsafe fn unlock_fair_slow(&self, mut s: *mut Node<P>) {
        // Aborts rather than unwind with the stack owned.
        no_unwind::<P, _>(|| {
            let mut waits = 0;
            s = loop {
                if head(s).is_null() {
                    // Nobody to hand over to. A waiter that pushes itself after
                    // this look is seen by the release in `unlock`.
                    P::record(Event::FairUnlockEmpty);
                    // SAFETY: forwarded from the caller.
                    return unsafe { self.unlock() };
                }
                if s.addr() & STACK_LOCKED != 0 {
                    // Another thread owns the stack: an unlocker waking a
                    // sleeper, a sleeper marking itself starving, a timed
                    // waiter leaving. Stack owners never block and hold the
                    // stack for a bounded number of steps, so this wait is
                    // bounded. It yields at once: spinning first, as
                    // `unlock_starving` does, measured level in the six fair
                    // cells (0.93-1.00, every cell overlapping; benches/results/
                    // ab-x86_64-intel-xeon-fair-unlock-spin-first.md).
                    P::wait_for_stack(&mut waits);
                    s = self.state.load(Relaxed);
                    continue;
                }
                // Acquire: pairs with the Release of the pushes and of the
                // previous stack owner, so the nodes' fields are visible.
                match self.take_stack_from(s, Acquire) {
                    Ok(taken) => break taken,
                    Err(now) => s = now,
                }
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
            let abort = AbortOnUnwind;
            self.lock();
            core::mem::forget(abort);
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

    /// The slow path of `lock` and, with a deadline, of the timed locks.
    /// Returns whether the lock was taken (always, without a deadline).
    ///
    /// A timed waiter gives up only at points where it leaves no trace: before
    /// it pushes itself (passing on SPINNING if it holds it, see `give_up`),
    /// or after its sleep timed out and it unlinked its own node (`leave`). A
    /// waiter that finds it was popped while leaving takes the wake that is on
    /// its way and goes on as any woken waiter: it owns the lock if it was
    /// handed it, and it passes on a handed SPINNING by `give_up`.
    #[inline(always)]
    fn wait(&self, deadline: Option<Deadline<P>>) -> bool {
        let node = Node::<P>::new();
        // A shared borrow is enough: every field the stack owner writes is a
        // cell.
        let me: *mut Node<P> = ptr::from_ref(&node).cast_mut();
        // We own the SPINNING bit.
        let mut spinner = false;
        // One spin episode per arrival and per wake.
        let mut may_spin = P::SPIN != SpinPolicy::Never;
        // The arrival's episode starts with a pause if we took the lock by
        // spinning moments ago (see `spin`).
        let mut ping_pong = may_spin && P::spun_recently();
        // We were just woken from the tail: spin even beside a spinner, so
        // the oldest waiter is not beaten by the spinner every time.
        let mut from_tail = false;
        // Yields left to this arrival while another thread holds SPINNING
        // or the lock is in starvation mode.
        let mut yields =
            if P::SPIN == SpinPolicy::One && may_spin { P::max_arrival_yields() } else { 0 };
        // We have slept at least once.
        let mut slept = false;
        // Our starvation clock runs (`node.since` is set): since our first
        // yield or, if we did not yield or that push found sleepers backed
        // up, our first push.
        let mut clocked = false;
        // We marked ourselves starving (`node.starved` is set).
        let mut marked = false;
        // A starvation deadline of ours found us popped (we did not mark
        // ourselves then).
        let mut popped_starving = false;
        let mut s = self.state.load(Relaxed);
        loop {
            if s.addr() & LOCKED == 0 {
                // Also in starvation mode: LOCKED is clear there only for the
                // moment between an unlock's release and the STARVING it did
                // not see yet; our own unlock then hands the lock over.
                match self.acquire_from(s, spinner) {
                    Ok(()) => return true,
                    Err(now) => {
                        s = now;
                        continue;
                    }
                }
            }
            // Past the deadline: leave now, while we are on no stack.
            if deadline.is_some_and(|d| P::expired(d, slept)) {
                return self.give_up(s, spinner);
            }
            // In starvation mode the lock goes from hand to hand and is
            // never free: spinning for it is wasted. Yielding is not (below).
            let starving = s.addr() & STARVING != 0;
            if may_spin && !starving {
                if P::SPIN == SpinPolicy::One && !spinner && s.addr() & SPINNING == 0 {
                    // Relaxed: the bit is a permission, it guards no data.
                    match self.state.compare_exchange(
                        s,
                        s.map_addr(|a| a | SPINNING),
                        Relaxed,
                        Relaxed,
                    ) {
                        Ok(_) => spinner = true,
                        Err(now) => {
                            s = now;
                            continue;
                        }
                    }
                }
                if spinner || from_tail || P::SPIN == SpinPolicy::All {
                    may_spin = false;
                    P::record(Event::Spun);
                    let pause = ping_pong;
                    ping_pong = false;
                    match self.spin(spinner, pause) {
                        Ok(started) => {
                            P::note_spin_acquire();
                            if P::look_due(started) {
                                self.look();
                            }
                            return true;
                        }
                        Err(now) => {
                            s = now;
                            continue;
                        }
                    }
                }
            }
            // Someone else spins: yield the CPU before sleeping (Go's
            // passive spin). With more threads than cores the lock is often
            // free again by the time we run, and taking it then is far cheaper
            // than a sleep and a wake; a thread that sleeps at once instead
            // leaves cores idle while the wakes trickle in
            // (`contended/t32/cs100/think1000`: 0.99 Mops/s without the
            // yield, 1.66 with it; parking_lot 1.73; Intel Xeon VM). We
            // yield again only while our yields run other threads
            // (`arch::ARRIVAL_YIELDS`): a thread that yields again and again
            // on a CPU nobody else wants is busy work (`contended/t32/cs0/
            // think0`: 48 Mops/s with one yield, 23 with four unconditional
            // ones, on that VM). In starvation mode too, where nobody
            // spins: a waiter that stays runnable until the marked sleepers
            // are served does not join them on the stack, where it would
            // wait out the threshold and cost the lock one more hand-off to
            // a sleeping thread (sweep, seventh section: `t64/cs10000` 0.44
            // of the fastest peer without these yields, 0.72 with them).
            if yields > 0 && !spinner && (starving || s.addr() & SPINNING != 0) {
                if P::FAULT != Fault::ClockStartsAtPush {
                    // SAFETY: as for the push below.
                    unsafe { start_clock(&node, &mut clocked) };
                }
                // Our yields have outlasted the starvation threshold (one
                // yield can take milliseconds): sleep now, and the sleep,
                // whose deadline has passed, marks us starving at once. Not
                // while sleepers are backed up: see `start_clock`.
                // SAFETY: only we write `since`.
                let since = unsafe { node.since.get() };
                if clocked && s.addr() & BACKLOG == 0 && P::starve_due(since, false) {
                    P::record(Event::YieldsOutlastedThreshold);
                    yields = 0;
                } else {
                    P::record(if yields == P::max_arrival_yields() {
                        Event::Yielded
                    } else {
                        Event::YieldedAgain
                    });
                    yields -= 1;
                    if !P::arrival_yield() {
                        // Nobody else wanted the CPU: a further yield would
                        // be a busy wait.
                        yields = 0;
                    }
                    s = self.state.load(Relaxed);
                    continue;
                }
            }
            // We handed the lock to a sleeper moments ago (`unlock_fair`):
            // stay awake, yielding, until `arch::HAND_OFF_AWAKE_NS` after
            // that hand-off. The recipient holds the lock from its wake on,
            // and a thread that sleeps meanwhile joins the stack that the
            // next fair unlocks hand from: once every waiter sleeps, every
            // acquisition waits for a wake while the CPUs idle. Waiters that
            // stay awake let the stack drain, and fair unlocks on an empty
            // stack are plain unlocks. Like the arrival yields above: no
            // write, a fresh look at the word after each yield. A spinner
            // (whose spin just ended) keeps SPINNING while it yields, as a
            // woken spinner keeps it until it runs: unlocks leave the wake
            // to it, and it takes the lock when it next looks, or pushes
            // (retiring the bit) once the time is up. In starvation mode it
            // yields too, for the reason the arrival yields do.
            if P::awake_after_hand_off(ptr::from_ref(self).addr()) {
                if P::FAULT != Fault::ClockStartsAtPush {
                    // SAFETY: as for the push below.
                    unsafe { start_clock(&node, &mut clocked) };
                }
                P::record(Event::AwakeAfterHandOff);
                P::yield_now();
                s = self.state.load(Relaxed);
                continue;
            }
            // Sleep: link to the current top and publish ourselves as the new
            // top in one CAS that also retires our SPINNING bit, and that
            // succeeds only if LOCKED is still set (s has it): the holder's
            // unlock is then bound to see us.
            // SAFETY: the node is not published (first round, a failed CAS,
            // or popped by the thread that woke us, which is done with it).
            unsafe {
                node.next.set(head(s));
                node.prev.set(ptr::null_mut());
                node.tail.set(ptr::null_mut());
                node.passes.set(0);
                if !slept && s.addr() & BACKLOG != 0 {
                    // Our first push finds sleepers backed up: the clock
                    // starts now (see `start_clock`).
                    node.since.set(P::clock());
                    clocked = true;
                } else {
                    start_clock(&node, &mut clocked);
                }
            }
            node.parker.prepare();
            let mut f = flags(s);
            if spinner && P::FAULT != Fault::KeepSpinningOnPush {
                f &= !SPINNING;
            }
            // Release: publishes the node's fields to the stack owner that
            // will pop it. Failure Relaxed: we link to the fresh head next
            // round, storing its address without reading the node.
            match self.state.compare_exchange(s, with_flags(me, f), Release, Relaxed) {
                Ok(_) => {
                    check_spinner::<P>(s, spinner);
                    P::record(Event::Parked);
                    // Beside a spinner, on other sleepers, with BACKLOG
                    // clear: unlocks skip their wakes, so count.
                    if !head(s).is_null() && spinner_takes_wake(f) {
                        self.count_on_push();
                    }
                    let backed_up = f & BACKLOG != 0;
                    // Only in the measurement build `UNTIMED_RESLEEP`: a
                    // sleep without the starvation timer (a deadline that
                    // found us popped has passed).
                    let timer = !(UNTIMED_RESLEEP && slept && head(s).is_null() && f & SPINNING == 0)
                        || popped_starving
                        // SAFETY: only we write `since`.
                        || P::starve_due(unsafe { node.since.get() }, backed_up);
                    slept = true;
                    if !self.sleep(
                        &node,
                        me,
                        deadline,
                        backed_up,
                        timer,
                        (&mut marked, &mut popped_starving),
                    ) {
                        // SAFETY: our node is (or was) on this lock's stack.
                        if unsafe { self.leave(me) } {
                            P::record(Event::TimedOut);
                            if marked {
                                P::record(Event::LeftStarving);
                            }
                            return false;
                        }
                        // Popped before we took the stack: the popper's wake
                        // store is on its way (a stack owner never blocks
                        // between its pop and the wake), and our node must
                        // live until it lands.
                        P::record(Event::PoppedWhileLeaving);
                        node.parker.park();
                        if P::FAULT == Fault::LeaveKeepsWake {
                            return false;
                        }
                    }
                    // SAFETY: we were popped; the waker's writes happened
                    // before its wake store, which `park` acquired.
                    let (handed_lock, handed_spin, next) = unsafe {
                        (node.handed_lock.get(), node.handed_spin.get(), node.next.get())
                    };
                    if handed_lock && P::FAULT != Fault::IgnoreHandedLock {
                        // A hand-off: LOCKED was never cleared, it is ours,
                        // and the hand-over's futex store (Release, acquired
                        // by `park`) carries the previous critical section.
                        P::record(Event::HandedLock);
                        // SAFETY: as for `handed_lock` above. Saturating:
                        // two CPUs' tick counters may disagree slightly.
                        #[cfg(test)]
                        P::record_hand_off(
                            P::now().saturating_sub(unsafe { node.handed_at.get() }),
                        );
                        return true;
                    }
                    from_tail = next.is_null();
                    spinner = handed_spin && P::FAULT != Fault::IgnoreHandedSpin;
                    // Woken past the spinner (sleepers were backed up),
                    // handed neither the lock nor SPINNING: we may yield
                    // again before we sleep, as on arrival. The wake
                    // already cost a system call and a context switch; a
                    // thread that sleeps again at once (its arrival yields
                    // spent) leaves the stack as backed up as it was, one
                    // that stays runnable takes the lock when it next
                    // finds it free. 2-core Intel Xeon VM, builds without
                    // and with the renewal alternating, sweep profile:
                    // `t64/cs10000` 0.71-0.80 → 0.88-0.90 of the fastest
                    // peer's throughput (four runs each), the other key
                    // cells within their spread. The full runs before and
                    // after it (`benches/results/history-x86_64-intel-xeon.md`):
                    // `t32/cs10000` 0.85 → 0.88, `t64/cs10000` 0.87 in both.
                    // The starvation clock keeps running: once it has
                    // passed the threshold, the next sleep marks us at once.
                    if !spinner && P::SPIN == SpinPolicy::One {
                        P::record(Event::YieldsRenewed);
                        yields = P::max_arrival_yields();
                    }
                    may_spin = P::SPIN != SpinPolicy::Never;
                    // A woken thread looks at once: it was away too long for
                    // a ping-pong.
                    ping_pong = false;
                    s = self.state.load(Relaxed);
                }
                Err(now) => s = now,
            }
        }
    }

    /// Sleeps on our node (just pushed) until woken: returns `true`, or
    /// `false` if `deadline` came first.
    ///
    /// Unless we already did in this `lock` call (or `timer` is clear, in
    /// the measurement build `UNTIMED_RESLEEP` only), the sleep also ends
    /// at the platform's starvation deadline ([`Platform::starve_deadline`]):
    /// then we mark ourselves starving and move to the bottom of the stack
    /// (`starve`), so that unlocks hand the lock to us (or to a sleeper
    /// that marked itself before us), spin a moment for that hand-off, and
    /// sleep again. The bound on waiting rests on this step alone: it needs
    /// no other thread to notice us. A starvation deadline that finds us
    /// popped already marks nothing (`popped` records it): the deadline
    /// stays (it counts from our first yield or sleep in this `lock` call,
    /// see `start_clock`), and if
    /// we lose the lock again, our next sleep starts past it and marks us
    /// at once, unless a stack owner pops us first again.
    #[inline(always)]
    fn sleep(
        &self,
        node: &Node<P>,
        me: *mut Node<P>,
        deadline: Option<Deadline<P>>,
        backed_up: bool,
        timer: bool,
        (marked, popped): (&mut bool, &mut bool),
    ) -> bool {
        loop {
            let starve_at = if *marked || !timer {
                None
            } else {
                // SAFETY: only we write `since`, and we wrote it before the
                // push; stack owners only read it.
                P::starve_deadline(unsafe { node.since.get() }, backed_up)
            };
            // The earlier of the two deadlines, and whether it is the
            // starvation one.
            let (until, starving) = match (deadline, starve_at) {
                (None, None) => {
                    node.parker.park();
                    return true;
                }
                (Some(d), None) => (d, false),
                (None, Some(t)) => (t, true),
                (Some(d), Some(t)) => {
                    if t < d {
                        (t, true)
                    } else {
                        (d, false)
                    }
                }
            };
            if node.parker.park_until(until) {
                return true;
            }
            if !starving {
                return false;
            }
            // SAFETY: our node is (or was) on this lock's stack.
            if !unsafe { self.starve(me) } {
                // Popped before we took the stack: the popper's wake store
                // is on its way, and our node must live until it lands. We
                // are not marked, and keep the deadline (see above).
                P::record(Event::PoppedWhileStarving);
                *popped = true;
                if P::FAULT == Fault::PoppedStarverKeepsNoDeadline {
                    *marked = true;
                }
                node.parker.park();
                return true;
            }
            *marked = true;
            if *popped {
                P::record(Event::StarvedAfterPop);
            }
            if P::wait_awake(|| node.parker.unparked()) {
                P::record(Event::HandedWhileAwake);
                return true;
            }
            P::record(Event::AwakeWaitRanOut);
            // Marked: the next sleep has no starvation deadline.
        }
    }

    /// Our timed sleep ran until the starvation deadline: if our node is
    /// still on the stack, mark it starving, move it to the bottom (the end
    /// hand-offs serve first; sleepers that marked themselves earlier stay
    /// below it) and set STARVING, so that the holder's unlock hands the
    /// lock over. Returns `false` if a stack owner popped the node before
    /// we took the stack (its wake is on its way).
    ///
    /// We take the stack as `leave` does, and give it back as it does
    /// (`release_after_leave`): unlocks that found it owned left their
    /// wakes to us, and if the lock is free by then we hand it over
    /// ourselves, to the bottom sleeper (maybe us).
    ///
    /// # Safety
    /// `me` is the caller's node, pushed onto this lock's stack since it was
    /// last popped.
    #[cold]
    unsafe fn starve(&self, me: *mut Node<P>) -> bool {
        let mut s = self.take_stack();
        // SAFETY: we own the stack.
        let linked = unsafe { self.move_to_bottom(&mut s, me) };
        if linked {
            P::record(Event::Starved);
            // SAFETY: we own the stack and our node is linked: stack owners
            // read `starved`, and none runs while we own it.
            unsafe { (*me).starved.set(true) };
            while s.addr() & STARVING == 0 {
                // Success Relaxed: we keep the stack, and give it back with
                // Release below. Failure Acquire: the word changed (a push,
                // the lock taken or released), and `release_after_leave`
                // may walk the nodes pushed meanwhile. (With STARVING set it
                // walks them only after `serve`'s Acquire retake, which
                // covers them too, so no model can tell this Acquire from
                // Relaxed; it keeps the rule that a failure value that can
                // lead to a walk is acquired.)
                match self.state.compare_exchange(s, s.map_addr(|a| a | STARVING), Relaxed, Acquire)
                {
                    Ok(_) => s = s.map_addr(|a| a | STARVING),
                    Err(now) => s = now,
                }
            }
        }
        if P::FAULT == Fault::StarveDropsWake {
            // Broken on purpose: the stack is given back without the wake
            // that unlocks which found it owned left to us.
            self.state.fetch_and(!STACK_LOCKED, Release);
            return linked;
        }
        // SAFETY: we own the stack and do not hold LOCKED.
        unsafe { self.release_after_leave(s) };
        linked
    }

    /// Takes STACK_LOCKED without holding LOCKED, waiting while another
    /// thread owns the stack (stack owners never block and give it back
    /// after a bounded number of steps). Returns the word, with
    /// STACK_LOCKED, as the successful CAS left it.
    fn take_stack(&self) -> *mut Node<P> {
        let mut s = self.state.load(Relaxed);
        let mut waits = 0;
        loop {
            if s.addr() & STACK_LOCKED != 0 {
                P::wait_for_stack(&mut waits);
                s = self.state.load(Relaxed);
                continue;
            }
            // Acquire: the nodes' fields, as in `unlock_fair`.
            match self.take_stack_from(s, Acquire) {
                Ok(taken) => return taken,
                Err(now) => s = now,
            }
        }
    }

    /// Moves `me` just above the sleepers that marked themselves starving
    /// before it (they sit at the bottom of the stack, oldest mark lowest),
    /// or to the very bottom if there are none; returns whether `me` was
    /// linked. `s` is a recent value of the word and is kept up to date.
    ///
    /// Hand-offs serve the bottom first, so the marked sleepers are served
    /// in the order they marked themselves: a later mark never passes an
    /// earlier one, which is what the bound in the crate docs counts on.
    ///
    /// # Safety
    /// We own the stack (`s` has STACK_LOCKED), and `me` is not marked.
    unsafe fn move_to_bottom(&self, s: &mut *mut Node<P>, me: *mut Node<P>) -> bool {
        loop {
            let top = head(*s);
            if top.is_null() {
                return false;
            }
            // SAFETY: we own the stack: its nodes stay linked and their
            // threads blocked (or, like us, waiting for the stack) until a
            // stack owner unlinks them, and we alone write links. The walk
            // in `tail_if_linked` set the `prev` links from the top down.
            unsafe {
                let Some(tail) = tail_if_linked(top, me) else {
                    return false;
                };
                // The highest of the marked run at the bottom (null if the
                // tail is not marked): we go right above it. The run never
                // includes `me`, which is not marked yet.
                let mut run = ptr::null_mut();
                if P::FAULT != Fault::MarkedBelowEarlierMarks {
                    let mut cur = tail;
                    while cur != me && (*cur).starved.get() {
                        run = cur;
                        if cur == top {
                            break;
                        }
                        cur = (*cur).prev.get();
                    }
                }
                // Already in place: the tail, or right above the run.
                if me == tail || (!run.is_null() && (*run).prev.get() == me) {
                    return true;
                }
                let next = (*me).next.get();
                let new_top = if me == top {
                    // The word must point past us first.
                    let new = with_flags(next, flags(*s));
                    // Success Relaxed: we keep the stack. Failure Acquire:
                    // nodes were pushed on top of us, and the retry walks
                    // them.
                    let retry = if P::FAULT == Fault::RelaxedMoveRetry { Relaxed } else { Acquire };
                    match self.state.compare_exchange(*s, new, Relaxed, retry) {
                        Ok(_) => {
                            P::record(Event::MovedFromTop);
                            *s = new;
                        }
                        Err(now) => {
                            *s = now;
                            continue;
                        }
                    }
                    // The new top caches the tail, which does not change
                    // unless we become it (below), and the count, which
                    // does not change.
                    (*next).tail.set(tail);
                    (*next).count.set((*top).count.get());
                    next
                } else {
                    P::record(Event::MovedFromMiddle);
                    let newer = (*me).prev.get();
                    (*newer).next.set(next);
                    (*next).prev.set(newer);
                    top
                };
                // Walks stop at the first node that caches a tail: the top
                // does, and we cache nothing.
                (*me).tail.set(ptr::null_mut());
                if run.is_null() {
                    // Nobody marked: we become the tail.
                    (*tail).next.set(me);
                    (*me).prev.set(tail);
                    (*me).next.set(ptr::null_mut());
                    (*new_top).tail.set(me);
                } else {
                    // Right above the run. `run` is not the top: we were
                    // linked above it, and the top is never marked alone
                    // above us once we moved off it.
                    P::record(Event::MovedAboveMarked);
                    let newer = (*run).prev.get();
                    (*newer).next.set(me);
                    (*me).prev.set(newer);
                    (*me).next.set(run);
                    (*run).prev.set(me);
                }
                return true;
            }
        }
    }

    /// A timed waiter that is on no stack gives up at its deadline. If it
    /// holds SPINNING, unlocks have skipped their wakes for it, so it must
    /// not just vanish: it takes the lock if it is free (then it returns
    /// `true`, the lock taken), or clears SPINNING in a CAS that sees LOCKED
    /// set, so that the holder's unlock sees no spinner and wakes a sleeper.
    fn give_up(&self, mut s: *mut Node<P>, spinner: bool) -> bool {
        if !spinner {
            return false;
        }
        P::record(Event::GaveUpSpinning);
        if P::FAULT == Fault::GiveUpKeepsSpinning {
            return false;
        }
        loop {
            if s.addr() & LOCKED == 0 {
                match self.acquire_from(s, true) {
                    Ok(()) => return true,
                    Err(now) => s = now,
                }
                continue;
            }
            // Relaxed: the bit is a permission, it guards no data.
            match self.state.compare_exchange(s, s.map_addr(|a| a & !SPINNING), Relaxed, Relaxed) {
                Ok(_) => return false,
                Err(now) => s = now,
            }
        }
    }

    /// A timed waiter whose sleep timed out takes its node off the stack.
    /// Returns `true` if the node was still linked (it is now unlinked and
    /// nobody will wake it), `false` if a stack owner popped it first (its
    /// wake is on its way: the caller must wait for it).
    ///
    /// It takes the stack like any stack owner. The wait for STACK_LOCKED is
    /// bounded by what its owners do with it: they never block while they
    /// own it, and each gives it back after a walk of the stack and a few
    /// CASes (a pop, a look, a hand-off, another leaving waiter). Since an
    /// unlock that finds the stack owned leaves its wake to the owner, we
    /// give the stack back as `release_after_leave` says.
    ///
    /// # Safety
    /// `me` is the caller's node, pushed onto this lock's stack since it was
    /// last popped.
    #[cold]
    unsafe fn leave(&self, me: *mut Node<P>) -> bool {
        let mut s = if P::FAULT == Fault::UnlinkWithoutStackLock {
            self.state.load(Relaxed).map_addr(|a| a | STACK_LOCKED)
        } else {
            self.take_stack()
        };
        P::record(Event::Leaving);
        let linked = loop {
            let top = head(s);
            if top.is_null() {
                break false;
            }
            // SAFETY: we own the stack: its nodes stay linked and their
            // threads blocked (or, like us, waiting for the stack) until a
            // stack owner unlinks them, and we alone write links.
            unsafe {
                let Some(tail) = tail_if_linked(top, me) else {
                    break false;
                };
                let next = (*me).next.get();
                if me != top {
                    let newer = (*me).prev.get();
                    (*top).count.set((*top).count.get().saturating_sub(1));
                    (*newer).next.set(next);
                    if next.is_null() {
                        (*top).tail.set(newer);
                    } else {
                        (*next).prev.set(newer);
                    }
                    break true;
                }
                // We are the top: the word must point past us. The new top
                // takes over our cached tail: what it cached itself when it
                // was the top may have been popped since
                // (`model::a_timed_waiter_leaves_from_the_top_over_a_stale_tail`).
                if !next.is_null() {
                    if P::FAULT != Fault::LeaveFromTopKeepsStaleTail {
                        (*next).tail.set(tail);
                    }
                    (*next).count.set((*top).count.get().saturating_sub(1));
                }
                let mut f = flags(s);
                if next.is_null() || P::FAULT == Fault::LeaveFromTopEndsStarving {
                    // STARVING is only ever set with sleepers; with any
                    // left it stays, for the marked ones among them
                    // (`model::a_mark_leaves_from_above_another_mark`).
                    f &= !STARVING;
                }
                // Success Relaxed: we keep the stack, and give it back with
                // Release below. Failure Acquire: nodes were pushed on top of
                // us, and the retry walks them
                // (`model::a_timed_out_top_unlinks_itself_under_a_push`).
                let retry = if P::FAULT == Fault::RelaxedLeaveRetry { Relaxed } else { Acquire };
                match self.state.compare_exchange(s, with_flags(next, f), Relaxed, retry) {
                    Ok(_) => {
                        s = with_flags(next, f);
                        break true;
                    }
                    // `next` keeps the tail we gave it: walks stop at our
                    // node, which caches it too, and after our unlink at
                    // the top, which the retry's walk makes cache it.
                    Err(now) => {
                        P::record(Event::LeaveRetried);
                        s = now;
                    }
                }
            }
        };
        // SAFETY: we own the stack and do not hold LOCKED.
        unsafe { self.release_after_leave(s) };
        linked
    }

    /// Gives back the stack that `leave` took. Unlocks that found it owned
    /// meanwhile left their wakes to us, so we decide as the unlock slow
    /// path would on the current word: with sleepers, the lock free and
    /// nobody spinning (or STARVING), we serve the oldest sleeper;
    /// otherwise the holder's unlock, or the spinner, will see the stack.
    ///
    /// # Safety
    /// We own the stack, `s` (with STACK_LOCKED) is a recent value of the
    /// word, and we do not hold LOCKED.
    unsafe fn release_after_leave(&self, mut s: *mut Node<P>) {
        loop {
            if !head(s).is_null() && s.addr() & LOCKED == 0 && !spinner_takes_wake(s.addr()) {
                // SAFETY: as for this function, and the stack is not empty.
                return unsafe { self.serve(s) };
            }
            let mut f = flags(s) & !STACK_LOCKED;
            if head(s).is_null() {
                f &= !STARVING;
            }
            // Release: our link edits, for the next stack owner. Failure
            // Acquire: the word changed (a push, an unlock), and the next
            // round may serve, walking nodes pushed meanwhile
            // (`model::pushes_while_a_push_counts`).
            let retry = if P::FAULT == Fault::RelaxedGiveBackRetry { Relaxed } else { Acquire };
            match self.state.compare_exchange(s, with_flags(s, f), Release, retry) {
                Ok(_) => return,
                Err(now) => s = now,
            }
        }
    }

    /// One CAS that takes the stack from `s` (which has STACK_LOCKED
    /// clear), with `order` on success: each caller says why Acquire.
    /// Returns the word it wrote (`s` with STACK_LOCKED); on failure, the
    /// fresh word, read Relaxed: nodes are read only after a successful
    /// take. Builds with [`Platform::CHECKS`] check that `s` had
    /// the bit clear: one stack owner at a time (a CAS that sets the bit
    /// over itself succeeds without a change).
    #[inline(always)]
    fn take_stack_from(
        &self,
        s: *mut Node<P>,
        order: Ordering,
    ) -> Result<*mut Node<P>, *mut Node<P>> {
        let taken = s.map_addr(|a| a | STACK_LOCKED);
        self.state.compare_exchange(s, taken, order, Relaxed)?;
        if P::CHECKS && s.addr() & STACK_LOCKED != 0 {
            P::broken("a spinbit thread took the stack that another owns");
        }
        Ok(taken)
    }

    /// One CAS that takes the lock from `s` (which has LOCKED clear),
    /// keeping the other bits and dropping SPINNING if we hold it.
    #[inline(always)]
    fn acquire_from(&self, s: *mut Node<P>, spinner: bool) -> Result<(), *mut Node<P>> {
        let f = flags(s) | LOCKED;
        let new = with_flags(s, if spinner { f & !SPINNING } else { f });
        // Acquire: as in `try_lock`. Failure Relaxed: the caller only looks
        // at the flags of the fresh word; it reads no node.
        self.state.compare_exchange(s, new, Acquire, Relaxed)?;
        check_spinner::<P>(s, spinner);
        Ok(())
    }

    /// One spin episode: until the budget is spent, take the lock whenever it
    /// looks free (a lost race does not end the episode; after a ping-pong
    /// pause, a free lock is first watched for one look gap, see below);
    /// then yield the CPU once. Returns the tick count at the start if the
    /// lock was taken, else a fresh look at the word. Starvation mode ends
    /// the episode at once.
    ///
    /// With `ping_pong` (this thread took the lock by spinning moments ago,
    /// within its window: see `arch::PING_PONG_NS` and
    /// `arch::PING_PONG_MAX_NS`), the episode starts with a pause without
    /// looks (`arch::PING_PONG_PAUSE_NS`): two threads that re-take the lock
    /// at once would otherwise trade it on every acquisition, each trade a
    /// cross-core transfer of the line, while the holder runs a batch of
    /// acquisitions from its own cache during the pause. What the pause
    /// finds at its end adapts the window ([`Platform::pause_ended`]).
    fn spin(&self, spinner: bool, ping_pong: bool) -> Result<u64, *mut Node<P>> {
        let (started, deadline) = P::spin_deadline();
        if ping_pong {
            P::record(Event::PingPongPause);
            P::ping_pong_pause(started);
        }
        let mut s = self.state.load(Relaxed);
        // Spin hints between two looks at the word, doubling up to the
        // platform's cap (`arch::MAX_LOOK_GAP_NS`): each look pulls the cache
        // line away from the holder.
        let max_backoff = P::max_backoff();
        if ping_pong {
            // What the pause found sets how soon this thread pauses again.
            // A lock held now is usually in use by a holder that runs
            // acquisitions back to back (a ping-pong: the pause spared a
            // trade). A free
            // one may be the moment between two of them, so watch it for
            // one look gap, a look per hint: a holder in a batch re-takes
            // it within that, while a lock handed over stays free (and the
            // pause delayed the hand-over).
            let mut held = s.addr() & LOCKED != 0;
            for _ in 0..if held { 0 } else { max_backoff } {
                P::spin_hint();
                s = self.state.load(Relaxed);
                if s.addr() & LOCKED != 0 {
                    held = true;
                    break;
                }
            }
            P::record(if held { Event::PauseEndedHeld } else { Event::PauseEndedFree });
            P::pause_ended(held);
        }
        let mut backoff = 1;
        loop {
            if s.addr() & LOCKED == 0 {
                match self.acquire_from(s, spinner) {
                    Ok(()) => return Ok(started),
                    Err(now) => {
                        s = now;
                        continue;
                    }
                }
            }
            if s.addr() & STARVING != 0 || P::now() >= deadline {
                break;
            }
            for _ in 0..backoff {
                P::spin_hint();
            }
            // The measurement build `spinbit_timed_looks` times the look:
            // one that missed doubles the gap, one that hit halves it. Not
            // after a ping-pong pause: the holder runs its acquisitions back
            // to back there, every look would miss, and timing it would
            // only cost.
            if P::TIMED_LOOKS && !ping_pong {
                let missed;
                (s, missed) = P::timed_look(|| self.state.load(Relaxed));
                backoff =
                    if missed { (backoff * 2).min(max_backoff) } else { (backoff / 2).max(1) };
            } else {
                backoff = (backoff * 2).min(max_backoff);
                s = self.state.load(Relaxed);
            }
        }
        P::record(Event::SpinRanOut);
        P::yield_now();
        Err(self.state.load(Relaxed))
    }

    /// A holder's look at the oldest sleeper (now and then, see
    /// [`Platform::look_due`]): if it has waited too long, start starvation
    /// mode, so that our own unlock hands it the lock. The look also counts
    /// the sleepers and sets or clears [`BACKLOG`].
    ///
    /// Under oversubscription a spinner nearly always exists and unlocks
    /// wake nobody, so without this look nobody would ever see the sleepers
    /// at the bottom of the stack. We hold LOCKED, so no unlock can happen
    /// (and skip a wake) while we own the stack.
    #[cold]
    fn look(&self) {
        let mut s = self.state.load(Relaxed);
        s = loop {
            if head(s).is_null() || s.addr() & (STACK_LOCKED | STARVING) != 0 {
                return;
            }
            // Acquire: the nodes' fields, as in `unlock_fair`.
            match self.take_stack_from(s, Acquire) {
                Ok(taken) => break taken,
                Err(now) => s = now,
            }
        };
        P::record(Event::Look);
        // SAFETY: we own the stack and it is not empty.
        let (starving, backlog) = unsafe {
            (starves(oldest(head(s), Fault::LookJudgesTop)), backed_up_after_a_wake(head(s)))
        };
        loop {
            let f = (flags(s) & !(STACK_LOCKED | BACKLOG))
                | if starving { STARVING } else { 0 }
                | if backlog { BACKLOG } else { 0 };
            // Release: our `prev`/`tail` edits, for the next stack owner.
            // Our unlock's Release covers them too, but a stack owner that
            // does not take the lock first (a leaving timed waiter, a
            // starving sleeper) can come before it
            // (`model::a_timed_waiter_leaves_after_a_holders_look`).
            let order = if P::FAULT == Fault::RelaxedLookGiveBack { Relaxed } else { Release };
            match self.state.compare_exchange(s, with_flags(s, f), order, Relaxed) {
                Ok(_) => break,
                // Relaxed: a retry only merges the flags (pushes on top);
                // no node is read again.
                Err(now) => s = now,
            }
        }
        if starving {
            P::record(Event::StarvingSet);
        }
    }

    /// A waiter that pushed itself on other sleepers while another thread
    /// holds SPINNING and [`BACKLOG`] is clear counts the stack, and sets
    /// the flag if the next wake would leave sleepers backed up (as a
    /// holder's look does, see [`backed_up_after_a_wake`]).
    ///
    /// Pops and looks keep the flag, but while it is clear and a thread
    /// spins, unlocks skip their wakes, so no pop comes to set it again:
    /// only a holder's look (at most every 250 µs per thread) or the
    /// starvation hand-offs did, while pushes piled sleepers up (sweep,
    /// twelfth section: in a `t32/cs1000` run 497 k unlocks skipped their
    /// wake for a spinner, against 11 k wakes past it). The pushes grow the
    /// stack, so they count it.
    ///
    /// We take the stack only if nobody owns it (an owner decides on the
    /// word as it finds it when it gives the stack back) and unlocks still
    /// skip their wakes for a spinner; the walk is the amortised O(1) walk
    /// of every stack owner. We give the stack back as `leave` does
    /// (`release_after_leave`): unlocks that found it owned left their
    /// wakes to us.
    #[cold]
    fn count_on_push(&self) {
        let mut s = self.state.load(Relaxed);
        s = loop {
            let owned = s.addr() & STACK_LOCKED != 0 && P::FAULT != Fault::CountOnOwnedStack;
            if head(s).is_null() || owned || !spinner_takes_wake(s.addr()) {
                return;
            }
            // Acquire: the walk reads the nodes' fields, and our own push
            // (Release only) acquired nothing: nodes pushed after our
            // `try_lock`'s Acquire, and the last stack owner's edits, are
            // ordered before the walk by this CAS alone
            // (`model::push_beside_spinner`).
            let order = if P::FAULT == Fault::RelaxedTakeOnPush { Relaxed } else { Acquire };
            match self.take_stack_from(s, order) {
                Ok(taken) => break taken,
                Err(now) => s = now,
            }
        };
        P::record(Event::CountedOnPush);
        // SAFETY: we own the stack and it is not empty.
        let backlog = unsafe { backed_up_after_a_wake(head(s)) };
        if backlog {
            // We own the stack, so the flag is ours to set. Acquire: the
            // value shows the nodes pushed since we took the stack, which
            // `release_after_leave` walks if it serves the oldest sleeper
            // at once (`model::push_beside_spinner`).
            let order = if P::FAULT == Fault::RelaxedBacklogOnPush { Relaxed } else { Acquire };
            s = self.state.fetch_or(BACKLOG, order).map_addr(|a| a | BACKLOG);
        }
        // SAFETY: we own the stack and do not hold LOCKED.
        unsafe { self.release_after_leave(s) };
    }

    /// The unlock's slow path, out of line: `s`, a recent value of the
    /// word, shows a wake or a hand-off to do, or the release's CAS found
    /// the word changed since the look.
    ///
    /// In starvation mode the lock is handed over (`unlock_starving`).
    /// Otherwise one CAS releases LOCKED and, if the value it replaces
    /// shows a wake to do (sleepers, no stack owner, and no spinner that
    /// will take the lock, or sleepers backed up), takes `STACK_LOCKED`
    /// too, so that the unlocker owns the stack before anybody can take
    /// the lock: the waiters on the stack cannot return from `lock` until
    /// this unlock has served the oldest one and given the stack back,
    /// which is its last access to the word. The stack's owner decides on
    /// the word as it finds it then (`serve`): the lock may have been
    /// taken again meanwhile.
    ///
    /// # Safety
    /// The lock is held by the caller's context.
    #[cold]
    #[inline(never)]
    unsafe fn unlock_slow(&self, mut s: *mut Node<P>) {
        // Aborts rather than unwind with the stack owned.
        no_unwind::<P, _>(|| {
            // Whether `s` came from an unlock in starvation mode that found the
            // mode ended: then the release below is its plain release.
            let mut ended = false;
            let (wake, old, new) = loop {
                if s.addr() & STARVING != 0 && !ended {
                    // SAFETY: forwarded from the caller.
                    match unsafe { self.unlock_starving(s) } {
                        None => return,
                        Some(now) => {
                            s = now;
                            ended = true;
                            continue;
                        }
                    }
                }
                let mut wake = s.addr() & STARVING == 0 && unlock_needs_slow_path(s);
                // After starvation mode ended too: a waiter may have pushed
                // itself while we waited for a stack owner
                // (`model::a_starving_unlock_wakes_a_push_once_the_mark_has_left`).
                if P::FAULT == Fault::SkipWake
                    || (ended && P::FAULT == Fault::StarvingEndedReleasesWithoutWake)
                {
                    wake = false;
                }
                let (new, order) = if wake {
                    // Release: publishes the critical section, as in `unlock`.
                    // Acquire: pairs with the Release of the pushes and of the
                    // previous stack owner, so the nodes' fields are visible.
                    let order = if cfg!(spinbit_tsan_negative_control) { Acquire } else { AcqRel };
                    (s.map_addr(|a| (a - LOCKED) | STACK_LOCKED), order)
                } else if ended && P::FAULT == Fault::RelaxedStarvingRelease {
                    (s.map_addr(|a| a - LOCKED), Relaxed)
                } else {
                    // Release: as in `unlock`
                    // (`model::a_starving_unlock_releases_once_the_mark_has_left`
                    // after starvation mode ended).
                    (s.map_addr(|a| a - LOCKED), UNLOCK_ORDER)
                };
                match self.state.compare_exchange(s, new, order, Relaxed) {
                    Ok(_) => break (wake, s, new),
                    // Relaxed: we decide again from the new value; no node is
                    // read before the Acquire of a successful CAS.
                    Err(now) => {
                        s = now;
                        ended = false;
                    }
                }
            };
            if !wake {
                return record_skipped_wake(old);
            }
            P::record(Event::ReleasedToServe);
            if P::FAULT == Fault::AbandonWakeWhenLocked {
                // Broken on purpose: a stale look, and a release that does not
                // re-check the word.
                if self.state.load(Relaxed).addr() & LOCKED != 0 {
                    self.state.fetch_and(!STACK_LOCKED, Release);
                    return;
                }
            }
            // SAFETY: we own the stack, it is not empty, and we do not hold LOCKED.
            unsafe { self.serve(new) };
        })
    }

    /// The wake of `release_then_wake` (the measurement build and the
    /// negative control of `RELEASE_THEN_WAKE`): we just released LOCKED,
    /// and `old`, the word before that, showed sleepers with no spinner and
    /// no stack owner, or STARVING (set after the unlock's look).
    ///
    /// # Safety
    /// Called by the unlocker right after it cleared LOCKED.
    #[cold]
    #[inline(never)]
    unsafe fn wake_after_release(&self, old: *mut Node<P>) {
        // Aborts rather than unwind with the stack owned.
        no_unwind::<P, _>(|| {
            if old.addr() & STACK_LOCKED != 0 {
                // Its owner decides on the current state when it gives the
                // stack back (see `serve`).
                P::record(Event::StackBusy);
                return;
            }
            let mut s = self.state.load(Relaxed);
            s = loop {
                // Leave when nobody sleeps, when the stack has an owner (it
                // decides when it gives the stack back), when the lock was
                // re-taken (its holder's unlock decides, and hands over if
                // STARVING is set: it was set before that holder's acquisition),
                // or, outside starvation mode, when a spinner exists (it takes
                // the lock, or retires onto the stack while the lock is held)
                // and sleepers are not backed up.
                if head(s).is_null()
                    || s.addr() & (LOCKED | STACK_LOCKED) != 0
                    || spinner_takes_wake(s.addr())
                {
                    if s.addr() & STACK_LOCKED != 0 {
                        P::record(Event::StackBusy);
                    }
                    return;
                }
                if P::FAULT == Fault::SkipWake {
                    return;
                }
                // Acquire: pairs with the Release of the pushes and of the
                // previous stack owner, so the nodes' fields are visible.
                match self.take_stack_from(s, Acquire) {
                    Ok(taken) => break taken,
                    Err(now) => s = now,
                }
            };
            if P::FAULT == Fault::AbandonWakeWhenLocked {
                // Broken on purpose: a stale look, and a release that does not
                // re-check the word.
                if self.state.load(Relaxed).addr() & LOCKED != 0 {
                    self.state.fetch_and(!STACK_LOCKED, Release);
                    return;
                }
            }
            // SAFETY: we own the stack, it is not empty, and we do not hold LOCKED.
            unsafe { self.serve(s) };
        })
    }

    /// Serves the oldest sleeper: wakes it, or, if it is starving, hands it
    /// the lock.
    ///
    /// A starving sleeper is handed the lock: we take LOCKED back while it is
    /// free and hand it over; if somebody took it first, we give the stack
    /// back with STARVING set, and that holder's unlock hands over. Either
    /// way the wake that the unlocks which found the stack owned left to us
    /// is done: by us, or by the holder, which took the lock after they
    /// left it.
    ///
    /// # Safety
    /// We own the stack, `s` (with STACK_LOCKED) is a recent value of the
    /// word, the stack is not empty, and we do not hold LOCKED.
    unsafe fn serve(&self, mut s: *mut Node<P>) {
        // SAFETY: we own the stack and it is not empty.
        if s.addr() & STARVING == 0 && !unsafe { starves(oldest(head(s), Fault::ServeJudgesTop)) } {
            // We have committed to waking one waiter. Its wake is what keeps
            // the rest of the stack from being forgotten: the woken thread
            // takes the lock (and its unlock looks at the stack) or sleeps
            // again while the lock is held.
            // SAFETY: as for this function.
            let woken = unsafe { self.pop(s, false) };
            // SAFETY: `woken` is unlinked and its thread is blocked (or about
            // to block) in `park` until this call's store; we touch it no more.
            unsafe { P::Parker::unpark(&raw const (*woken).parker) };
            return;
        }
        let top = head(s);
        loop {
            if s.addr() & LOCKED == 0 {
                // Acquire: the critical sections of anybody who held the lock
                // since our release, which the recipient must see; and the
                // pushes since we took the stack, whose nodes the hand-off
                // walks.
                let order = if P::FAULT == Fault::RelaxedRetake { Relaxed } else { Acquire };
                match self.state.compare_exchange(s, s.map_addr(|a| a | LOCKED), order, Relaxed) {
                    Ok(_) => {
                        P::record(Event::Retake);
                        if head(s) != top {
                            P::record(Event::RetakeRaced);
                        }
                        // SAFETY: we hold LOCKED and the stack.
                        return unsafe { self.hand_off(s.map_addr(|a| a | LOCKED)) };
                    }
                    // Relaxed: a failure leads only to another CAS.
                    Err(now) => s = now,
                }
            } else {
                // Release: our `prev`/`tail` edits, for the next owner.
                // STARVING: the holder's unlock hands the lock over
                // (`model::a_wake_that_finds_the_lock_taken_sets_starvation_mode`).
                let new = s.map_addr(|a| (a | Self::SERVE_STARVING) & !STACK_LOCKED);
                match self.state.compare_exchange(s, new, Release, Relaxed) {
                    Ok(_) => {
                        P::record(Event::StarvingSet);
                        return;
                    }
                    // Relaxed: a failure leads only to another CAS (the
                    // holder may have unlocked: then we take LOCKED back).
                    Err(now) => s = now,
                }
            }
        }
    }

    /// An unlock in starvation mode: hand the lock to the oldest sleeper
    /// without ever clearing LOCKED. Returns the word if starvation mode has
    /// ended, for the caller's plain release (LOCKED still held).
    ///
    /// # Safety
    /// The lock is held by the caller's context.
    unsafe fn unlock_starving(&self, mut s: *mut Node<P>) -> Option<*mut Node<P>> {
        let mut waits = 0;
        s = loop {
            let owned = s.addr() & STACK_LOCKED != 0;
            if s.addr() & STARVING == 0
                || (owned && P::FAULT == Fault::StarvingUnlockReleasesWhenOwned)
            {
                // Starvation mode ended: a plain unlock. (Broken on purpose
                // with the fault: releasing while another thread owns the
                // stack lets barging acquisitions in until that owner gives
                // the stack back.)
                P::record(Event::StarvingEndedAtUnlock);
                return Some(s);
            }
            if owned {
                // Another thread owns the stack: a sleeper marking itself,
                // a timed waiter leaving, an unlocker serving the oldest
                // sleeper. Wait for it, keeping LOCKED: released now, the
                // lock would be anybody's until that owner gives the stack
                // back, and every holder in between would release it too
                // (`model::a_starving_unlock_waits_for_the_stack_owner`).
                // Stack owners that do not hold LOCKED never wait for it and
                // give the stack back after a bounded number of steps (one
                // that finds LOCKED held leaves STARVING set for us), so this
                // wait is bounded, as in `unlock_fair`. Spin first, for up
                // to the spin budget: an owner running on another CPU gives
                // the stack back within microseconds, and a yield at once
                // (as in `unlock_fair`) lets the other runnable threads run
                // first while the lock stays held (`contended-inline/t64/
                // cs100/think0`, Intel Xeon VM, three rounds each: 5.5-5.8
                // Mops/s yielding at once, 7.3-7.4 spinning first, 7.1-7.7
                // releasing as before; benches/results/
                // ab-x86_64-intel-xeon-starving-unlock-waits.md).
                let (_, deadline) = P::spin_deadline();
                loop {
                    P::spin_hint();
                    s = self.state.load(Relaxed);
                    if s.addr() & STACK_LOCKED == 0 || P::now() >= deadline {
                        break;
                    }
                }
                if s.addr() & STACK_LOCKED != 0 {
                    P::wait_for_stack(&mut waits);
                    s = self.state.load(Relaxed);
                }
                continue;
            }
            // Acquire: the nodes' fields, as in `unlock_fair`.
            match self.take_stack_from(s, Acquire) {
                Ok(taken) => break taken,
                Err(now) => s = now,
            }
        };
        // SAFETY: we hold LOCKED and the stack; STARVING implies sleepers.
        unsafe { self.hand_off(s) };
        // The lock is the recipient's from now on, but it may not run for
        // a scheduler slice while we hold a CPU: give ours up
        // (`arch::STARVING_HAND_OFF_YIELDS`).
        if P::yield_after_starving_hand_off() {
            P::record(Event::YieldedAfterHandOff);
        }
        None
    }

    /// Hands the lock to the oldest sleeper: unlinks it, releases the stack
    /// with LOCKED still set, and wakes it owning the lock.
    ///
    /// The recipient learns what it got from its node (`handed_lock`,
    /// written before the wake store), not from the word. That is what later
    /// users of the stack need: a timed waiter that leaves the stack on a
    /// timeout must check, under STACK_LOCKED, whether it was popped and
    /// handed the lock (then it owns it, or must pass it on), and a condition
    /// variable that requeues its waiters onto the stack can hand the lock
    /// to them the same way.
    ///
    /// # Safety
    /// We hold LOCKED and the stack, `s` (with both) is a recent value of
    /// the word, and the stack is not empty.
    unsafe fn hand_off(&self, s: *mut Node<P>) {
        P::record(Event::HandOff);
        // SAFETY: as for this function.
        let woken = unsafe { self.pop(s, true) };
        // SAFETY: `woken` is unlinked and its thread is blocked (or about to
        // block) in `park` until this call's store; we touch it no more.
        unsafe { P::Parker::unpark(&raw const (*woken).parker) };
    }

    /// Unlinks one waiter and releases the stack. Returns the waiter, told
    /// what came with its wake.
    ///
    /// A wake (`hand_over` false): the release sets SPINNING if it was clear,
    /// and the woken thread owns it: until that thread runs, takes the lock
    /// or sleeps again, it is the spinner, so unlocks in the meantime wake
    /// nobody else. Without this, a holder that re-takes the lock at once
    /// would wake the whole stack, one waiter per unlock, before the first
    /// woken thread even runs. The release clears STARVING: the caller saw
    /// the oldest sleeper not starving.
    ///
    /// A hand-off (`hand_over`): the oldest waiter is unlinked, LOCKED stays
    /// set and is the woken thread's, and the release sets STARVING again if
    /// the next oldest sleeper starves too.
    ///
    /// # Safety
    /// The caller owns the stack, `s` is a recent value of the word, and the
    /// stack is not empty; with `hand_over`, it also holds LOCKED.
    unsafe fn pop(&self, mut s: *mut Node<P>, hand_over: bool) -> *mut Node<P> {
        loop {
            let top = head(s);
            // SAFETY: we own the stack: nodes stay linked (their threads
            // stay blocked) until we unlink them, and we alone write links.
            unsafe {
                let tail = find_tail(top);
                if tail == top {
                    // The only waiter: the stack becomes empty, unless a new
                    // node was pushed meanwhile (then retry with it on top).
                    let empty =
                        ptr::without_provenance_mut(release::<P>(s, hand_over, false, false));
                    // Failure Acquire: a failure means new nodes were pushed,
                    // and the retry walks them; their pushes' Release must be
                    // acquired first. Success Release is more than needed (the
                    // stack is empty after it, so no later stack owner reads
                    // a node this thread wrote, and the popped thread reads
                    // its node after its parker's Acquire; no model tells it
                    // from Relaxed, see `tests/mutants.sh`), and costs nothing
                    // on x86_64.
                    match self.state.compare_exchange(s, empty, Release, retry_order::<P>()) {
                        Ok(_) => {
                            if hand_over && flags(s) & STARVING != 0 {
                                P::record(Event::StarvingCleared);
                            }
                            return woken(tail, s, hand_over, Event::TailWake);
                        }
                        Err(now) => s = now,
                    }
                } else if hand_over || (*tail).passes.get() >= P::MAX_PASSES {
                    // Wake the oldest. The top does not change, so new pushes
                    // cannot invalidate the unlink; the CAS loop only merges
                    // the flags.
                    let newer = (*tail).prev.get();
                    (*newer).next.set(ptr::null_mut());
                    (*top).tail.set(newer);
                    let left = (*top).count.get().saturating_sub(1);
                    (*top).count.set(left);
                    // A hand-off keeps starvation mode while the next
                    // oldest sleeper starves: the marked sleepers form the
                    // bottom run, so that is the next of them, if any, and
                    // not the top (the models
                    // `the_second_mark_is_not_overtaken_after_the_first_hand_off`
                    // and `the_second_mark_below_an_unmarked_sleeper_is_not_overtaken`).
                    let mut still = hand_over && starves(newer);
                    if P::FAULT == Fault::HandOffEndsStarving {
                        still = false;
                    } else if P::FAULT == Fault::HandOffJudgesTop {
                        still = hand_over && starves(top);
                    }
                    let backlog = left > P::backlog_sleepers();
                    let first = release::<P>(s, hand_over, still, backlog);
                    loop {
                        // The flags of the word as it is now: the CAS may
                        // have failed because a barger took the lock
                        // (`model::a_barger_takes_the_lock_while_a_wake_unlinks_the_oldest`).
                        let f = if P::FAULT == Fault::PopMergesStaleFlags {
                            first
                        } else {
                            release::<P>(s, hand_over, still, backlog)
                        };
                        let new = with_flags(s, f);
                        // Release: our link edits, for the next stack owner.
                        // Failure Relaxed: a retry only merges the flags.
                        match self.state.compare_exchange(s, new, unlink_order::<P>(), Relaxed) {
                            Ok(_) => {
                                if hand_over && !still && flags(s) & STARVING != 0 {
                                    P::record(Event::StarvingCleared);
                                }
                                return woken(tail, s, hand_over, Event::TailWake);
                            }
                            Err(now) => s = now,
                        }
                    }
                } else {
                    // Wake the newest; the tail has been passed over once more.
                    let next = (*top).next.get();
                    let left = (*top).count.get().saturating_sub(1);
                    (*next).tail.set(tail);
                    (*next).count.set(left);
                    (*tail).passes.set((*tail).passes.get() + 1);
                    // Release: the new top's cached tail and count and the
                    // tail's pass count, for the next stack owner
                    // (`model::wake_of_the_newest_then_a_third_thread_owns_the_stack`).
                    // Failure Acquire: as in the first branch.
                    let backlog = left > P::backlog_sleepers();
                    let new = with_flags(next, release::<P>(s, false, false, backlog));
                    let order = if P::FAULT == Fault::RelaxedHeadWake { Relaxed } else { Release };
                    match self.state.compare_exchange(s, new, order, retry_order::<P>()) {
                        Ok(_) => return woken(top, s, false, Event::HeadWake),
                        Err(now) => {
                            // New nodes on top: pop the new top instead.
                            (*tail).passes.set((*tail).passes.get() - 1);
                            s = now;
                        }
                    }
                }
            }
        }
    }
}

/// The flags with which the stack owner releases the stack after unlinking
/// a waiter from `s`: STACK_LOCKED cleared; BACKLOG set iff `backlog`; for
/// a wake, SPINNING set (the woken thread's if `s` did not have it) and
/// STARVING cleared; for a hand-off, LOCKED kept and STARVING set iff
/// `still_starving`.
#[inline(always)]
fn release<P: Platform>(
    s: *mut Node<P>,
    hand_over: bool,
    still_starving: bool,
    backlog: bool,
) -> usize {
    let f = (flags(s) & !(STACK_LOCKED | STARVING | BACKLOG)) | if backlog { BACKLOG } else { 0 };
    if hand_over {
        let f = if P::FAULT == Fault::HandOffClearsLocked { f & !LOCKED } else { f };
        f | if still_starving { STARVING } else { 0 }
    } else {
        f | SPINNING
    }
}

/// Records the wake of `node`, which the CAS that replaced `s` unlinked,
/// and tells it what came with the wake: the lock (a hand-off), or SPINNING
/// if `s` did not have it (with it, the wake went past the spinner, see
/// [`BACKLOG`], and the woken thread must not think it holds the bit).
/// Returns `node`.
///
/// # Safety
/// `node` is unlinked and its thread is still blocked.
#[inline(always)]
unsafe fn woken<P: Platform>(
    node: *mut Node<P>,
    s: *mut Node<P>,
    hand_over: bool,
    event: Event,
) -> *mut Node<P> {
    let past_spinner = !hand_over && flags(s) & SPINNING != 0;
    if !hand_over {
        P::record(event);
        if past_spinner {
            P::record(Event::WokePastSpinner);
        }
    }
    // SAFETY: forwarded from the caller.
    unsafe {
        (*node).handed_lock.set(hand_over);
        #[cfg(test)]
        if hand_over {
            (*node).handed_at.set(P::now());
        }
        let handed_spin = !hand_over && (!past_spinner || P::FAULT == Fault::HandSpinPastSpinner);
        (*node).handed_spin.set(handed_spin);
    }
    node
}

/// Whether the stack under `top` is backed up for [`BACKLOG`] as the next
/// wake would leave it: more than [`Platform::backlog_sleepers`] sleepers
/// once that wake has taken one (a pop sets the flag from what it leaves).
/// Walks the stack (`find_tail`, which counts it into the top; O(1) if it
/// was walked before).
///
/// # Safety
/// The caller owns the stack and `top` is the non-null top of the stack.
unsafe fn backed_up_after_a_wake<P: Platform>(top: *mut Node<P>) -> bool {
    // SAFETY: forwarded from the caller.
    unsafe {
        find_tail(top);
        (*top).count.get().saturating_sub(1) > P::backlog_sleepers()
    }
}

/// The node below `node` on the stack.
///
/// # Safety
/// The caller owns the stack and `node` is linked.
#[cfg(test)]
pub(crate) unsafe fn next_of<P: Platform>(node: *mut Node<P>) -> *mut Node<P> {
    // SAFETY: forwarded from the caller.
    unsafe { (*node).next.get() }
}

/// The failure ordering of the CASes in `pop` whose retry walks new nodes:
/// Acquire, except in the deliberately broken model that shows loom catches
/// its absence.
#[inline(always)]
fn retry_order<P: Platform>() -> Ordering {
    if P::FAULT == Fault::RelaxedPopRetry { Relaxed } else { Acquire }
}

/// The success ordering of the CAS that unlinks the oldest of several
/// waiters: Release, except in the deliberately broken model.
#[inline(always)]
fn unlink_order<P: Platform>() -> Ordering {
    if P::FAULT == Fault::RelaxedUnlink { Relaxed } else { Release }
}

/// The tail below `top` if `me` is on the stack, else `None`. The walk
/// leaves `prev` valid from the top down to the tail and the tail cached in
/// the top (see [`find_tail`]), so the stack is a plain doubly linked list
/// from here on.
///
/// # Safety
/// The caller owns the stack and `top` is the non-null top of the stack.
unsafe fn tail_if_linked<P: Platform>(top: *mut Node<P>, me: *mut Node<P>) -> Option<*mut Node<P>> {
    // SAFETY: forwarded from the caller; every node reachable from the top
    // is linked and live while we own the stack.
    unsafe {
        let tail = find_tail(top);
        let mut cur = top;
        while !cur.is_null() && cur != me {
            cur = (*cur).next.get();
        }
        (!cur.is_null()).then_some(tail)
    }
}

/// Finds the tail (oldest node) below `top`, setting `prev` links on the way
/// down, and caches it in `top` with the number of nodes (`count`).
/// Amortised O(1): the walk stops at the first node that already caches the
/// tail, i.e. it only visits nodes pushed since the last walk.
///
/// # Safety
/// The caller owns the stack and `top` is the non-null top of the stack.
unsafe fn find_tail<P: Platform>(top: *mut Node<P>) -> *mut Node<P> {
    let mut cur = top;
    let mut walked = 0u32;
    // SAFETY: every node reachable from the top is linked and live while we
    // own the stack; only we write the link fields.
    unsafe {
        let (tail, below) = loop {
            let t = (*cur).tail.get();
            if !t.is_null() {
                break (t, (*cur).count.get());
            }
            let next = (*cur).next.get();
            if next.is_null() {
                break (cur, 1);
            }
            (*next).prev.set(cur);
            cur = next;
            walked += 1;
        };
        (*top).tail.set(tail);
        (*top).count.set(below.saturating_add(walked));
        tail
    }
}
