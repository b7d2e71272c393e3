//! Waking: the unlock slow path, which wakes the oldest sleeper or, in
//! starvation mode, hands it the lock; and the pop that unlinks it.

use super::stack::*;
use super::*;

impl<P: Platform> Lock<P> {
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
    pub(super) unsafe fn unlock_slow(&self, mut s: *mut Node<P>) {
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

    /// The wake of `release_then_wake` (the negative control
    /// `Fault::ReleaseThenWake`, and the measurement variant
    /// `benches/patches/release-then-wake.patch`): we just released LOCKED,
    /// and `old`, the word before that, showed sleepers with no spinner and
    /// no stack owner, or STARVING (set after the unlock's look).
    ///
    /// # Safety
    /// Called by the unlocker right after it cleared LOCKED.
    #[cold]
    #[inline(never)]
    pub(super) unsafe fn wake_after_release(&self, old: *mut Node<P>) {
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
            // SAFETY: we own the stack, it is not empty, and we do not hold LOCKED.
            unsafe { self.serve(s) };
        })
    }

    /// Serves the oldest sleeper: wakes it, or, if it is starving, hands it
    /// the lock; if its nudge is pending, leaves that to its own thread.
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
    pub(super) unsafe fn serve(&self, mut s: *mut Node<P>) {
        // SAFETY: we own the stack and it is not empty; the tail is linked.
        let pending = P::NUDGE && unsafe { nudge_pending(find_tail(head(s))) };
        if pending && P::FAULT != Fault::ServeWakesPendingNudge {
            // The oldest sleeper was nudged and has not marked itself anew
            // yet: it does once it runs, taking the stack and serving as we
            // would, so the wake left to us is its (`hand_off_or_nudge`).
            // Taking the lock back only to release it again would cost
            // every unlock until then two more CASes. A plain wake, even
            // with starvation mode ended since the nudge, would pop a
            // thread that owes that mark: its node would go on looking
            // nudged, and stack owners would wait for a mark that never
            // comes (`model::a_nudge_pending_past_starvation_mode_is_not_overtaken`).
            P::record(Event::NudgePending);
            return self.give_back(s);
        }
        // SAFETY: we own the stack and it is not empty.
        if s.addr() & STARVING == 0 && !unsafe { starves(oldest(head(s), Fault::ServeJudgesTop)) } {
            // We have committed to waking one waiter. Its wake is what keeps
            // the rest of the stack from being forgotten: the woken thread
            // takes the lock (and its unlock looks at the stack) or sleeps
            // again while the lock is held.
            // SAFETY: as for this function.
            let woken = unsafe { self.pop(s, false) };
            // SAFETY: `woken` is unlinked, and its thread reads what the
            // wake wrote only after its parker sees this call's store (one
            // whose deadline fired may be running, but finds its node
            // unlinked and waits for this wake, `await_popped_wake`); we
            // touch it no more.
            unsafe { P::Parker::unpark(&raw const (*woken).parker) };
            return;
        }
        if pending {
            // Only with the fault, which sees the nudge pending only in
            // starvation mode or with the oldest sleeper judged starving.
            P::record(Event::NudgePending);
            return self.give_back(s);
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
                        unsafe { self.hand_off_or_nudge(s.map_addr(|a| a | LOCKED)) };
                        return;
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
    pub(super) unsafe fn unlock_starving(&self, mut s: *mut Node<P>) -> Option<*mut Node<P>> {
        // Another thread may own the stack: a sleeper marking itself, a
        // timed waiter leaving, an unlocker serving the oldest sleeper. We
        // wait for it, keeping LOCKED: released now, the lock would be
        // anybody's until that owner gives the stack back, and every
        // holder in between would release it too
        // (`model::a_starving_unlock_waits_for_the_stack_owner`). Stack
        // owners that find LOCKED held leave STARVING set for us.
        let ended = |s: *mut Node<P>| {
            s.addr() & STARVING == 0
                || (s.addr() & STACK_LOCKED != 0
                    && P::FAULT == Fault::StarvingUnlockReleasesWhenOwned)
        };
        s = match self.take_stack_unless(s, ended) {
            Ok(taken) => taken,
            Err(s) => {
                // Starvation mode ended: a plain unlock. (Broken on purpose
                // with the fault: releasing while another thread owns the
                // stack lets barging acquisitions in until that owner gives
                // the stack back.)
                P::record(Event::StarvingEndedAtUnlock);
                return Some(s);
            }
        };
        // SAFETY: we hold LOCKED and the stack; STARVING implies sleepers.
        // The lock is the recipient's from now on (or, after a nudge, the
        // nudged thread is to mark itself anew), but it may not run for a
        // scheduler slice while we hold a CPU: give ours up, once (Go's
        // `sync.Mutex` yields there too).
        if unsafe { self.hand_off_or_nudge(s) } && P::yield_after_starving_hand_off() {
            P::record(Event::YieldedAfterHandOff);
        }
        None
    }

    /// Hands the lock to the oldest sleeper (`hand_off`) unless its thread
    /// is asleep in the OS: then nudges it instead (it runs again, its node
    /// still linked) and releases the lock, the stack and STARVING in one
    /// CAS. Returns whether a sleeper was woken (handed the lock or
    /// nudged), which its thread must now run to use.
    ///
    /// The bounded price of fairness. A hand-off to a sleeping thread keeps
    /// the lock held, by nobody who runs, for a whole wake-up: milliseconds
    /// when every CPU is busy, while more sleepers reach their starvation
    /// deadline, so that starvation mode fed itself (a convoy, measured in
    /// docs/benchmarks.md, "The nudge (issue 45)"). A nudged
    /// thread, once it runs, marks itself anew (`Lock::sleep`): that sets
    /// STARVING again and, if the lock is free, hands it to the bottom
    /// sleeper (itself if it had marked itself; a sleeper judged by age
    /// that marks itself now moves above the earlier marks); then it waits
    /// awake for its hand-off, and the unlock that finds it not yet asleep
    /// hands it over. Until it has marked itself anew the lock is
    /// anybody's: unlocks skip their wakes for the nudged thread, handed
    /// SPINNING (`release_after_nudge`), and one that finds the nudge
    /// pending anyway releases the lock again (`nudge_pending`). So the
    /// lock does not wait for the wake-up a nudge causes; a sleeper found
    /// asleep again after its nudge (its awake wait saw the lock held
    /// throughout: critical sections longer than that wait) is handed the
    /// lock asleep, once per `lock` call. The bound on waiting keeps its
    /// order and, per turn of a marked sleeper ahead, adds at most one
    /// nudged wake-up and one awake wait.
    ///
    /// # Safety
    /// As for `hand_off`.
    pub(super) unsafe fn hand_off_or_nudge(&self, s: *mut Node<P>) -> bool {
        if P::NUDGE {
            // SAFETY: we own the stack, it is not empty, and its nodes stay
            // linked (their threads waiting) while we own it.
            let (oldest, nudge) = unsafe {
                let oldest = find_tail(head(s));
                let nudge = if !(*oldest).nudged.get()
                    || (P::FAULT == Fault::NudgesAgain && !nudge_pending(oldest))
                {
                    P::Parker::nudge(&raw const (*oldest).parker)
                } else if nudge_pending(oldest) {
                    Nudge::Pending
                } else {
                    // Marked anew after its nudge: running (its awake
                    // wait), or asleep again, the one hand-off to a
                    // sleeper that the bound allows.
                    Nudge::Running
                };
                (oldest, nudge)
            };
            let wake = match nudge {
                Nudge::Running => None,
                Nudge::Pending => {
                    P::record(Event::NudgePending);
                    Some(None)
                }
                Nudge::Woken(wake) => {
                    P::record(Event::Nudged);
                    // SAFETY: linked, and we own the stack.
                    unsafe { (*oldest).nudged.set(true) };
                    Some(Some(wake))
                }
            };
            if let Some(wake) = wake {
                // SAFETY: we own the stack and LOCKED, and `oldest` is linked.
                unsafe { self.release_after_nudge(s, oldest) };
                let Some(wake) = wake else { return false };
                P::Parker::wake_nudged(wake);
                return true;
            }
        }
        // SAFETY: forwarded from the caller.
        unsafe { self.hand_off(s) };
        true
    }

    /// Gives back the stack, taken as `s` (a recent value of the word),
    /// keeping every other bit.
    fn give_back(&self, mut s: *mut Node<P>) {
        loop {
            // Release: our walk's link edits, for the next stack owner.
            // Failure Relaxed: only pushes and other bits changed; the retry
            // keeps them, and reads no node.
            match self.state.compare_exchange(
                s,
                s.map_addr(|a| a & !STACK_LOCKED),
                Release,
                Relaxed,
            ) {
                Ok(_) => return,
                Err(now) => s = now,
            }
        }
    }

    /// The release of `hand_off_or_nudge` when it did not hand over: LOCKED,
    /// STACK_LOCKED and STARVING cleared in one CAS from `s`, a recent
    /// value of the word. STARVING ends: the nudged thread sets it again
    /// when it marks itself anew, and until then the lock is a plain one.
    ///
    /// Until then, too, a wake has nothing to do: `serve` finds the nudge
    /// pending and gives the stack back (a sleeper that marks itself below
    /// the nudged one sets STARVING, and starving unlocks serve it). So
    /// the release hands SPINNING to the nudged thread (`oldest`) if nobody
    /// holds it, as a wake hands it to the thread it runs, and then clears
    /// BACKLOG too, so that unlocks skip their wakes for it instead of
    /// each taking the stack to find nothing to do: a nudged thread that
    /// waits for a CPU (one CPU, or many more threads than CPUs) made every
    /// unlock of its wait take the slow path (measured: docs/benchmarks.md,
    /// "One CPU"). Beside another spinner BACKLOG stays as it was.
    ///
    /// # Safety
    /// We own the stack and LOCKED, and `oldest`, the nudged node, is linked.
    unsafe fn release_after_nudge(&self, mut s: *mut Node<P>, oldest: *mut Node<P>) {
        // SAFETY: as for this function: stack owners alone write the
        // field of a linked node.
        let held = unsafe { (*oldest).nudge_spin.get() };
        loop {
            let hand = P::NUDGE_HANDS_SPIN && s.addr() & SPINNING == 0;
            let mut new = s.map_addr(|a| {
                let a = a & !(LOCKED | STACK_LOCKED | STARVING);
                if hand { (a & !BACKLOG) | SPINNING } else { a }
            });
            if P::FAULT == Fault::NudgeKeepsLock {
                new = new.map_addr(|a| a | LOCKED);
            }
            // Before the CAS that gives the stack back: the nudged thread
            // reads the field once it owns the stack, or after the wake of
            // a stack owner that popped it, both ordered after this CAS.
            // A nudge found pending keeps what the first one handed.
            // SAFETY: as above.
            unsafe { (*oldest).nudge_spin.set(held || hand) };
            // Release: the critical section, as in `unlock`, and our node
            // edits (the walk's links, the nudge mark) for the next stack
            // owner. Failure Relaxed: we hold LOCKED and the stack, so only
            // pushes and the SPINNING bit change the word meanwhile, and the
            // retry keeps them.
            match self.state.compare_exchange(s, new, Release, Relaxed) {
                Ok(_) => return,
                Err(now) => s = now,
            }
        }
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
    pub(super) unsafe fn hand_off(&self, s: *mut Node<P>) {
        P::record(Event::HandOff);
        // SAFETY: as for this function.
        let woken = unsafe { self.pop(s, true) };
        // SAFETY: as in `serve`: `woken` is unlinked, its thread reads what
        // the wake wrote only after its parker sees this call's store, and
        // we touch it no more.
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
    pub(super) unsafe fn pop(&self, mut s: *mut Node<P>, hand_over: bool) -> *mut Node<P> {
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
                            return woken(tail, s, hand_over);
                        }
                        Err(now) => s = now,
                    }
                } else {
                    // Unlink the oldest. The top does not change, so new
                    // pushes cannot invalidate the unlink; the CAS loop only
                    // merges the flags.
                    let newer = (*tail).prev.get();
                    (*newer).next.set(ptr::null_mut());
                    (*top).tail.set(newer);
                    let left = (*top).count.get().saturating_sub(1);
                    (*top).count.set(left);
                    // A hand-off keeps starvation mode while the next
                    // oldest sleeper starves: the marked sleepers (and the
                    // requeued waiters judged starving that marks stopped
                    // above) form the bottom run, so that is the next of
                    // them, if any, and not the top (the models
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
                                return woken(tail, s, hand_over);
                            }
                            Err(now) => s = now,
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
pub(super) fn release<P: Platform>(
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
/// `node` is unlinked and its thread has not seen its wake: it reads the
/// fields written here only after its parker sees the wake (a thread whose
/// deadline fired, or that a nudge woke, may be running meanwhile, but
/// finds its node unlinked and waits for the wake, `await_popped_wake`).
#[inline(always)]
pub(super) unsafe fn woken<P: Platform>(
    node: *mut Node<P>,
    s: *mut Node<P>,
    hand_over: bool,
) -> *mut Node<P> {
    let past_spinner = !hand_over && flags(s) & SPINNING != 0;
    if !hand_over {
        P::record(Event::TailWake);
        if past_spinner {
            P::record(Event::WokePastSpinner);
        }
    }
    // SAFETY: forwarded from the caller.
    unsafe {
        (*node).handed_lock.set(hand_over);
        (*node).woken_at.set(P::now());
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
pub(super) unsafe fn backed_up_after_a_wake<P: Platform>(top: *mut Node<P>) -> bool {
    // SAFETY: forwarded from the caller.
    unsafe {
        find_tail(top);
        (*top).count.get().saturating_sub(1) > P::backlog_sleepers()
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
pub(super) unsafe fn oldest<P: Platform>(top: *mut Node<P>, broken: Fault) -> *mut Node<P> {
    // SAFETY: forwarded from the caller.
    let tail = unsafe { find_tail(top) };
    if P::FAULT == broken { top } else { tail }
}

/// Whether `node` was nudged and has not marked itself anew yet: its
/// thread has not run since (its word says nudged), or it runs on its way
/// to take the stack and mark itself, which serves the lock then. Such a
/// thread is not handed the lock: having left its word's nudged state, it
/// may still be off the CPU, e.g. backing off while it waits for the stack.
///
/// # Safety
/// The caller owns the stack and `node` is linked.
#[inline(always)]
pub(super) unsafe fn nudge_pending<P: Platform>(node: *mut Node<P>) -> bool {
    // SAFETY: forwarded from the caller.
    unsafe { (*node).nudged.get() && !(*node).renewed.get() }
}

/// Whether `node` starves: it marked itself so when its timed sleep ran
/// out (see `Lock::starve`), or the platform judges its wait too long.
///
/// # Safety
/// The caller owns the stack and `node` is linked.
#[inline(always)]
pub(super) unsafe fn starves<P: Platform>(node: *mut Node<P>) -> bool {
    // SAFETY: forwarded from the caller.
    unsafe { (*node).starved.get() || P::starving((*node).since.get(), (*node).requeued.get()) }
}
