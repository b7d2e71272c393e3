//! The spin-bit lock algorithm, generic over [`Platform`].
//!
//! See the crate documentation for the state table and the argument that no
//! wakeup is lost; the comments here point at the step of that argument each
//! operation implements.

use core::ptr;
use core::sync::atomic::Ordering;
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use crate::platform::{Event, Fault, NodeCell, Parker, Platform, SpinPolicy, StateWord};

/// The mutex is held.
pub(crate) const LOCKED: usize = 1;
/// One waiter has the right to spin; other waiters must sleep.
pub(crate) const SPINNING: usize = 2;
/// One unlocker owns the waiter stack: only it may remove nodes.
pub(crate) const STACK_LOCKED: usize = 4;
/// The most spin hints a spinner executes between two looks at the word.
///
/// Each look pulls the lock's cache line away from the holder, which then
/// pays a transfer to re-take it. Measured with the full profile, 4 against
/// 16: `handoff/cs1000` 0.72 and 0.85 Mops/s, `contended/t2/cs100/think0`
/// 6.38 and 6.81 (parking_lot 7.0), other two-thread and eight-thread cells
/// within noise. 64 lost `handoff/cs1000` again (0.63).
const MAX_BACKOFF: u32 = 16;

/// The ordering of the unlock's release of LOCKED: Release, except in the
/// ThreadSanitizer run's negative control (`--cfg spinbit_tsan_negative_control`),
/// a deliberately broken build that the sanitizer must report.
const UNLOCK_ORDER: Ordering =
    if cfg!(spinbit_tsan_negative_control) { Relaxed } else { Release };

/// The tag bits; the rest of the word is the address of the top node.
pub(crate) const FLAGS: usize = LOCKED | SPINNING | STACK_LOCKED;

/// A sleeping waiter. It lives on its thread's stack for one `lock` call and
/// is linked into the stack only while that thread sleeps.
///
/// The alignment leaves the three low address bits free for the flags.
#[repr(C, align(8))]
pub(crate) struct Node<P: Platform> {
    /// The next older waiter (towards the tail), or null at the tail.
    next: P::Cell<*mut Node<P>>,
    /// The next younger waiter. Valid from the node that caches the tail
    /// down to the tail, once a stack-lock holder has walked that far.
    prev: P::Cell<*mut Node<P>>,
    /// If non-null, the tail (oldest waiter) of the stack this node heads or
    /// headed. The walk in [`find_tail`] stops at the first such node.
    tail: P::Cell<*mut Node<P>>,
    /// How many wakes have passed this node over while it was the tail.
    passes: P::Cell<u32>,
    /// Set by the waker: the SPINNING bit came with the wake, so this thread
    /// is the spinner when it runs.
    handed_spin: P::Cell<bool>,
    /// When this thread first went to sleep in this `lock` call
    /// ([`Platform::now`] ticks); it does not restart when the thread sleeps
    /// again, so it measures how long the thread has been kept waiting.
    since: P::Cell<u64>,
    parker: P::Parker,
}

impl<P: Platform> Node<P> {
    fn new() -> Self {
        Node {
            next: NodeCell::new(ptr::null_mut()),
            prev: NodeCell::new(ptr::null_mut()),
            tail: NodeCell::new(ptr::null_mut()),
            passes: NodeCell::new(0),
            handed_spin: NodeCell::new(false),
            since: NodeCell::new(0),
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

/// The lock: one word.
pub(crate) struct Lock<P: Platform> {
    pub(crate) state: P::State,
}

impl<P: Platform> Lock<P> {
    /// Takes the lock if it is free. One RMW, whatever the other bits hold:
    /// a barging acquisition leaves waiters and spinner as they are.
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

    /// # Safety
    /// The lock must be held by the caller's context.
    #[inline]
    pub(crate) unsafe fn unlock(&self) {
        // Release: publishes the critical section to the next acquirer.
        let old = self.state.fetch_sub(LOCKED, UNLOCK_ORDER);
        debug_assert!(old.addr() & LOCKED != 0, "unlock of an unlocked spinbit mutex");
        // Wake only if someone sleeps, nobody spins (a spinner will take the
        // lock), and nobody owns the stack (its owner is committed to a wake).
        // Now and then (`Platform::fair_turn`), an unlock also looks at the
        // oldest sleeper despite a spinner, and wakes it if it has slept too
        // long: without that, a stream of spinners keeps every wake away and
        // the sleepers starve.
        if !head(old).is_null() && old.addr() & STACK_LOCKED == 0 {
            if old.addr() & SPINNING == 0 {
                // SAFETY: forwarded from the caller: we just released the lock.
                unsafe { self.unlock_slow(P::fair_turn()) };
            } else {
                P::record(Event::WakeSkippedForSpinner);
                if P::fair_turn() {
                    // SAFETY: as above.
                    unsafe { self.unlock_slow(true) };
                }
            }
        }
    }

    /// Hands the lock to the oldest sleeper, or unlocks normally if nobody
    /// sleeps.
    ///
    /// # Safety
    /// The lock must be held by the caller's context.
    pub(crate) unsafe fn unlock_fair(&self) {
        // Placeholder until the hand-off lands: a normal unlock.
        // SAFETY: forwarded from the caller.
        unsafe { self.unlock() }
    }

    /// If somebody sleeps, hands the lock over and takes it back.
    ///
    /// # Safety
    /// The lock must be held by the caller's context.
    pub(crate) unsafe fn bump(&self) {
        if !head(self.state.load(Relaxed)).is_null() {
            // SAFETY: forwarded from the caller.
            unsafe { self.unlock_fair() };
            self.lock();
        }
    }

    #[cold]
    #[inline(never)]
    fn lock_slow(&self) {
        let node = Node::<P>::new();
        // A shared borrow is enough: every field the stack-lock holder
        // writes is a cell.
        let me: *mut Node<P> = ptr::from_ref(&node).cast_mut();
        // We own the SPINNING bit.
        let mut spinner = false;
        // One spin episode per arrival and per wake, but none on arrival if
        // we took the lock by spinning moments ago (see `arch::PING_PONG_NS`).
        let mut may_spin = P::SPIN != SpinPolicy::Never && !P::spun_recently();
        // We were just woken from the tail: spin even beside a spinner, so
        // the oldest waiter is not beaten by the spinner every time.
        let mut from_tail = false;
        // One yield per arrival when another thread holds SPINNING.
        let mut may_yield = P::SPIN == SpinPolicy::One && may_spin;
        // We have slept at least once (`node.since` is set).
        let mut slept = false;
        let mut s = self.state.load(Relaxed);
        loop {
            if s.addr() & LOCKED == 0 {
                match self.acquire_from(s, spinner) {
                    Ok(()) => return,
                    Err(now) => {
                        s = now;
                        continue;
                    }
                }
            }
            if may_spin {
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
                    match self.spin(spinner) {
                        Ok(()) => {
                            P::note_spin_acquire();
                            return;
                        }
                        Err(now) => {
                            s = now;
                            continue;
                        }
                    }
                }
            }
            // Someone else spins: yield the CPU once before sleeping (Go's
            // passive spin). With more threads than cores the lock is often
            // free again by the time we run, and taking it then is far cheaper
            // than a sleep and a wake; a thread that sleeps at once instead
            // leaves cores idle while the wakes trickle in
            // (`contended/t32/cs100/think1000`: 0.99 Mops/s without the
            // yield, 1.66 with it; parking_lot 1.73). One yield only: a
            // thread that yields again and again is busy work when nobody
            // thinks (`contended/t32/cs0/think0`: 48 Mops/s with one yield,
            // 23 with four). Not after the ping-pong rule, which wants a sleep.
            if may_yield && !spinner && s.addr() & SPINNING != 0 {
                may_yield = false;
                P::yield_now();
                s = self.state.load(Relaxed);
                continue;
            }
            // Sleep: link to the current top and publish ourselves as the new
            // top in one CAS that also retires our SPINNING bit, and that
            // succeeds only if LOCKED is still set (s has it): the holder's
            // unlock is then bound to see us.
            // SAFETY: the node is not published (first round, a failed CAS,
            // or popped by the unlocker that woke us, which is done with it).
            unsafe {
                node.next.set(head(s));
                node.prev.set(ptr::null_mut());
                node.tail.set(ptr::null_mut());
                node.passes.set(0);
                if !slept {
                    node.since.set(P::now());
                }
            }
            node.parker.prepare();
            let mut f = flags(s);
            if spinner && P::FAULT != Fault::KeepSpinningOnPush {
                f &= !SPINNING;
            }
            // Release: publishes the node's fields to the stack-lock holder
            // that will pop it.
            match self.state.compare_exchange(s, with_flags(me, f), Release, Relaxed) {
                Ok(_) => {
                    P::record(Event::Parked);
                    slept = true;
                    node.parker.park();
                    // SAFETY: we were popped; the waker's writes happened
                    // before its wake store, which `park` acquired.
                    unsafe {
                        from_tail = node.next.get().is_null();
                        spinner = node.handed_spin.get() && P::FAULT != Fault::IgnoreHandedSpin;
                    }
                    may_spin = P::SPIN != SpinPolicy::Never;
                    s = self.state.load(Relaxed);
                }
                Err(now) => s = now,
            }
        }
    }

    /// One CAS that takes the lock from `s` (which has LOCKED clear),
    /// keeping the other bits and dropping SPINNING if we hold it.
    #[inline(always)]
    fn acquire_from(&self, s: *mut Node<P>, spinner: bool) -> Result<(), *mut Node<P>> {
        let f = flags(s) | LOCKED;
        let new = with_flags(s, if spinner { f & !SPINNING } else { f });
        // Acquire: as in `try_lock`.
        self.state.compare_exchange(s, new, Acquire, Relaxed).map(drop)
    }

    /// One spin episode: until the budget is spent, take the lock whenever it
    /// looks free (a lost race does not end the episode); then yield the CPU
    /// once. Returns a fresh look at the word if the lock was not taken.
    fn spin(&self, spinner: bool) -> Result<(), *mut Node<P>> {
        let deadline = P::spin_deadline();
        let mut s = self.state.load(Relaxed);
        // Spin hints between two looks at the word, doubling up to
        // MAX_BACKOFF: each look pulls the cache line away from the holder.
        let mut backoff = 1;
        loop {
            if s.addr() & LOCKED == 0 {
                match self.acquire_from(s, spinner) {
                    Ok(()) => return Ok(()),
                    Err(now) => {
                        s = now;
                        continue;
                    }
                }
            }
            if P::now() >= deadline {
                break;
            }
            for _ in 0..backoff {
                P::spin_hint();
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
            s = self.state.load(Relaxed);
        }
        P::yield_now();
        Err(self.state.load(Relaxed))
    }

    /// Wakes one sleeper, if the state still calls for it.
    ///
    /// With `fair`, a spinner does not make us leave: we look at the oldest
    /// sleeper, and if it has been asleep longer than
    /// [`Platform::starving`] allows, we wake it although a spinner exists
    /// (it then spins beside the spinner, see `from_tail` in `lock_slow`).
    ///
    /// # Safety
    /// Called by the unlocker right after it cleared LOCKED.
    #[cold]
    #[inline(never)]
    unsafe fn unlock_slow(&self, fair: bool) {
        let mut s = self.state.load(Relaxed);
        let leave = if fair { LOCKED | STACK_LOCKED } else { LOCKED | SPINNING | STACK_LOCKED };
        loop {
            // Leave when nobody sleeps, when the stack has an owner (it is
            // committed to a wake), when the lock was re-taken (its holder's
            // unlock will decide) or, unless `fair`, when a spinner exists
            // (it takes the lock, or retires onto the stack while the lock is
            // held).
            if head(s).is_null() || s.addr() & leave != 0 {
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
            match self.state.compare_exchange(s, s.map_addr(|a| a | STACK_LOCKED), Acquire, Relaxed)
            {
                Ok(_) => break,
                Err(now) => s = now,
            }
        }
        s = s.map_addr(|a| a | STACK_LOCKED);
        if P::FAULT == Fault::AbandonWakeWhenLocked {
            // Broken on purpose: a stale look, and a release that does not
            // re-check the word.
            if self.state.load(Relaxed).addr() & LOCKED != 0 {
                self.state.fetch_and(!STACK_LOCKED, Release);
                return;
            }
        }
        // SAFETY: we hold STACK_LOCKED and the stack is not empty.
        let starving = fair && P::starving(unsafe { (*find_tail(head(s))).since.get() });
        if fair && !starving {
            // Nobody starves: give the stack back without a wake if an unlock
            // would have left now (a spinner or a holder exists), so the
            // unlocks that skipped their wake because we held the stack are
            // covered by that spinner or holder. Otherwise we are committed.
            // A Fault::UnfairGiveBack model drops the re-check.
            while s.addr() & (LOCKED | SPINNING) != 0 || P::FAULT == Fault::UnfairGiveBack {
                // Release: our `prev`/`tail` edits, for the next owner.
                match self.state.compare_exchange(
                    s,
                    s.map_addr(|a| a & !STACK_LOCKED),
                    Release,
                    Relaxed,
                ) {
                    Ok(_) => {
                        P::record(Event::FairGiveBack);
                        return;
                    }
                    Err(now) => s = now,
                }
            }
        }
        if starving && s.addr() & SPINNING != 0 {
            P::record(Event::StarvingWake);
        }
        // We own the stack and have committed to waking one waiter. Its wake
        // is what keeps the rest of the stack from being forgotten: the woken
        // thread takes the lock (and its unlock looks at the stack) or sleeps
        // again while the lock is held.
        // SAFETY: we hold STACK_LOCKED and the stack is not empty.
        let woken = unsafe { self.pop(s) };
        // SAFETY: `woken` is unlinked and its thread is blocked (or about to
        // block) in `park` until this call's store; we touch it no more.
        unsafe { P::Parker::unpark(&raw const (*woken).parker) };
    }

    /// Unlinks one waiter and releases STACK_LOCKED. Returns the waiter,
    /// with its `handed_spin` set.
    ///
    /// The release also sets SPINNING if it was clear, and the woken thread
    /// owns it: until that thread runs, takes the lock or sleeps again, it is
    /// the spinner, so unlocks in the meantime wake nobody else. Without this,
    /// a holder that re-takes the lock at once would wake the whole stack,
    /// one waiter per unlock, before the first woken thread even runs.
    ///
    /// # Safety
    /// The caller holds STACK_LOCKED, `s` is a recent value of the word, and
    /// the stack is not empty.
    unsafe fn pop(&self, mut s: *mut Node<P>) -> *mut Node<P> {
        loop {
            let top = head(s);
            // SAFETY: we hold STACK_LOCKED: nodes stay linked (their threads
            // stay blocked) until we unlink them, and we alone write links.
            unsafe {
                let tail = find_tail(top);
                if tail == top {
                    // The only waiter: the stack becomes empty, unless a new
                    // node was pushed meanwhile (then retry with it on top).
                    let empty = ptr::without_provenance_mut(release(s));
                    // Failure Acquire: a failure means new nodes were pushed,
                    // and the retry walks them; their pushes' Release must be
                    // acquired first.
                    match self.state.compare_exchange(s, empty, Release, retry_order::<P>()) {
                        Ok(_) => return woken(top, s, Event::TailWake),
                        Err(now) => s = now,
                    }
                } else if (*tail).passes.get() >= P::MAX_PASSES {
                    // Wake the oldest. The top does not change, so new pushes
                    // cannot invalidate the unlink; the CAS loop only merges
                    // the flags.
                    let newer = (*tail).prev.get();
                    (*newer).next.set(ptr::null_mut());
                    (*top).tail.set(newer);
                    // Release: our link edits, for the next stack owner.
                    loop {
                        let new = with_flags(s, release(s));
                        match self.state.compare_exchange(s, new, Release, Relaxed) {
                            Ok(_) => return woken(tail, s, Event::TailWake),
                            Err(now) => s = now,
                        }
                    }
                } else {
                    // Wake the newest; the tail has been passed over once more.
                    let next = (*top).next.get();
                    (*next).tail.set(tail);
                    (*tail).passes.set((*tail).passes.get() + 1);
                    // Failure Acquire: as in the first branch.
                    let new = with_flags(next, release(s));
                    match self.state.compare_exchange(s, new, Release, retry_order::<P>()) {
                        Ok(_) => return woken(top, s, Event::HeadWake),
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

/// The flags after the release of STACK_LOCKED from `s`: SPINNING is set,
/// and is the woken thread's if `s` did not have it.
#[inline(always)]
fn release<P: Platform>(s: *mut Node<P>) -> usize {
    (flags(s) & !STACK_LOCKED) | SPINNING
}

/// Records the wake of `node`, which the CAS that replaced `s` unlinked,
/// and hands it SPINNING if `s` did not have it. Returns `node`.
///
/// # Safety
/// `node` is unlinked and its thread is still blocked.
#[inline(always)]
unsafe fn woken<P: Platform>(node: *mut Node<P>, s: *mut Node<P>, event: Event) -> *mut Node<P> {
    P::record(event);
    // SAFETY: forwarded from the caller.
    unsafe { (*node).handed_spin.set(flags(s) & SPINNING == 0) };
    node
}

/// The node below `node` on the stack.
///
/// # Safety
/// The caller holds STACK_LOCKED and `node` is linked.
#[cfg(test)]
pub(crate) unsafe fn next_of<P: Platform>(node: *mut Node<P>) -> *mut Node<P> {
    // SAFETY: forwarded from the caller.
    unsafe { (*node).next.get() }
}

/// The failure ordering of the CAS in `pop`: Acquire, except in the
/// deliberately broken model that shows loom catches its absence.
#[inline(always)]
fn retry_order<P: Platform>() -> Ordering {
    if P::FAULT == Fault::RelaxedPopRetry { Relaxed } else { Acquire }
}

/// Finds the tail (oldest node) below `top`, setting `prev` links on the way
/// down, and caches it in `top`. Amortised O(1): the walk stops at the first
/// node that already caches the tail, i.e. it only visits nodes pushed since
/// the last walk.
///
/// # Safety
/// The caller holds STACK_LOCKED and `top` is the non-null top of the stack.
unsafe fn find_tail<P: Platform>(top: *mut Node<P>) -> *mut Node<P> {
    let mut cur = top;
    // SAFETY: every node reachable from the top is linked and live while we
    // hold STACK_LOCKED; only we write the link fields.
    unsafe {
        let tail = loop {
            let t = (*cur).tail.get();
            if !t.is_null() {
                break t;
            }
            let next = (*cur).next.get();
            if next.is_null() {
                break cur;
            }
            (*next).prev.set(cur);
            cur = next;
        };
        (*top).tail.set(tail);
        tail
    }
}
