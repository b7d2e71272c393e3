//! The waiter stack: taking `STACK_LOCKED`, walking to the tail, moving a
//! starving sleeper to the bottom, and a timed waiter leaving the stack.

use super::wake::starves;
use super::*;

impl<P: Platform> Lock<P> {
    /// Takes STACK_LOCKED, waiting while another thread owns the stack.
    /// Returns the word, with STACK_LOCKED, as the successful CAS left it.
    pub(super) fn take_stack(&self) -> *mut Node<P> {
        match self.take_stack_unless(self.state.load(Relaxed), |_| false) {
            Ok(taken) | Err(taken) => taken,
        }
    }

    /// Takes STACK_LOCKED from `s`, a recent value of the word, waiting
    /// while another thread owns the stack, unless `done` finds, on the
    /// word as it is before each attempt, that the caller no longer needs
    /// it: then returns that word as `Err`. Returns the word, with
    /// STACK_LOCKED, as the successful CAS left it.
    ///
    /// The wait is bounded: stack owners never block, and each gives the
    /// stack back after a walk of the stack and a few CASes (one that does
    /// not hold LOCKED never waits for it). It spins first, for up to the
    /// spin budget: an owner running on another CPU gives the stack back
    /// within microseconds, and a yield at once lets the other runnable
    /// threads run first, while an unlocking caller keeps the lock held
    /// (measured: docs/benchmarks.md, "Measurements behind the algorithm's
    /// rules"). Then it waits as the platform says
    /// ([`Platform::wait_for_stack`]), and spins again.
    #[inline(always)]
    pub(super) fn take_stack_unless(
        &self,
        mut s: *mut Node<P>,
        done: impl Fn(*mut Node<P>) -> bool,
    ) -> Result<*mut Node<P>, *mut Node<P>> {
        let mut waits = 0;
        loop {
            if done(s) {
                return Err(s);
            }
            if s.addr() & STACK_LOCKED != 0 {
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
            // Acquire: every caller walks the nodes; pairs with the Release
            // of the pushes and of the previous stack owner, so their
            // fields are visible.
            match self.take_stack_from(s, Acquire) {
                Ok(taken) => return Ok(taken),
                Err(now) => s = now,
            }
        }
    }

    /// Moves `me` just above the sleepers at the bottom of the stack that
    /// starve before it, or to the very bottom if there are none; returns
    /// whether `me` was linked. `s` is a recent value of the word and is
    /// kept up to date. Those sleepers are the ones that marked themselves
    /// before `me` (oldest mark lowest), and requeued condition variable
    /// waiters that other threads judge starving ([`starves`]), which have
    /// no timer to mark themselves with.
    ///
    /// Hand-offs serve the bottom first and keep starvation mode while the
    /// next sleeper starves, so these are served in the order they came to
    /// starve: a later mark never passes an earlier one, or a requeued
    /// waiter judged starving, which is what the bound in the `algorithm`
    /// docs counts on. A mutex sleeper judged starving by age but not
    /// marked (its timer fired and its thread has not run yet) is passed,
    /// unless a requeued waiter judged starving sits above it: it marks
    /// itself once it runs, and served before the marks it would be nudged
    /// and hold up their hand-offs until then (docs/benchmarks.md, "The
    /// condition variable").
    ///
    /// # Safety
    /// We own the stack (`s` has STACK_LOCKED), and `me` is not marked.
    pub(super) unsafe fn move_to_bottom(&self, s: &mut *mut Node<P>, me: *mut Node<P>) -> bool {
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
                // The highest marked or requeued sleeper in the run of
                // starving sleepers at the bottom (null if there is none):
                // we go right above it. The run never includes `me`.
                let mut run = ptr::null_mut();
                if P::FAULT != Fault::MarkedBelowEarlierMarks {
                    let mut cur = tail;
                    while cur != me && starves(cur) {
                        if (*cur).starved.get()
                            || ((*cur).requeued.get() && P::FAULT != Fault::MarkPassesRequeued)
                            || P::FAULT == Fault::MarkStopsAboveJudged
                        {
                            run = cur;
                        }
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
                let Some(new_top) = self.unlink(s, me, top, tail, false) else {
                    continue;
                };
                P::record(if me == top { Event::MovedFromTop } else { Event::MovedFromMiddle });
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
                    // linked above it, and the walk stopped below us.
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

    /// A timed waiter whose sleep timed out takes its node off the stack.
    /// Returns `true` if the node was still linked (it is now unlinked and
    /// nobody will wake it), `false` if a stack owner popped it first (its
    /// wake is on its way: the caller must wait for it).
    ///
    /// It takes the stack like any stack owner. The wait for STACK_LOCKED is
    /// bounded by what its owners do with it: they never block while they
    /// own it, and each gives it back after a walk of the stack and a few
    /// CASes (a pop, a census, a hand-off, another leaving waiter). Since an
    /// unlock that finds the stack owned leaves its wake to the owner, we
    /// give the stack back as `release_after_leave` says.
    ///
    /// # Safety
    /// `me` is the caller's node, pushed onto this lock's stack since it was
    /// last popped.
    #[cold]
    pub(super) unsafe fn leave(&self, me: *mut Node<P>) -> bool {
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
                if self.unlink(&mut s, me, top, tail, true).is_some() {
                    break true;
                }
                P::record(Event::LeaveRetried);
            }
        };
        // SAFETY: we own the stack.
        unsafe { self.release_after_leave(s) };
        linked
    }

    /// Unlinks `me` from the stack whose top is `top` and whose tail is
    /// `tail` (as `tail_if_linked` found them), for good if `leaving`
    /// (then the count at the top drops by one), or to link it elsewhere
    /// (`move_to_bottom`). Returns the top after the unlink, or `None` if
    /// `me` was the top and the CAS that points the word past it failed:
    /// then `s` is the fresh word, and the caller walks again. `me`'s own
    /// links are left as they were.
    ///
    /// # Safety
    /// We own the stack, `*s` is the word as we last saw it, with `top` its
    /// head, and `me` is linked under `top`.
    unsafe fn unlink(
        &self,
        s: &mut *mut Node<P>,
        me: *mut Node<P>,
        top: *mut Node<P>,
        tail: *mut Node<P>,
        leaving: bool,
    ) -> Option<*mut Node<P>> {
        // SAFETY: as for this function: we own the stack, so its nodes stay
        // linked and their threads blocked (or, like us, waiting for the
        // stack) until a stack owner unlinks them, and we alone write links.
        unsafe {
            let count = (*top).count.get().saturating_sub(u32::from(leaving));
            let next = (*me).next.get();
            if me != top {
                let newer = (*me).prev.get();
                (*newer).next.set(next);
                if next.is_null() {
                    (*top).tail.set(newer);
                } else {
                    (*next).prev.set(newer);
                }
                (*top).count.set(count);
                return Some(top);
            }
            // We are the top: the word must point past us first.
            let mut f = flags(*s);
            if next.is_null() || (leaving && P::FAULT == Fault::LeaveFromTopEndsStarving) {
                // STARVING is only ever set with sleepers; with any left it
                // stays, for the marked ones among them
                // (`model::a_mark_leaves_from_above_another_mark`).
                f &= !STARVING;
            }
            let new = with_flags(next, f);
            // Success Relaxed: we keep the stack, and give it back with
            // Release. Failure Acquire: nodes were pushed on top of us, and
            // the retry walks them
            // (`model::a_timed_out_top_unlinks_itself_under_a_push`).
            let retry = if P::FAULT == Fault::RelaxedUnlinkRetry { Relaxed } else { Acquire };
            if let Err(now) = self.state.compare_exchange(*s, new, Relaxed, retry) {
                *s = now;
                return None;
            }
            *s = new;
            if !next.is_null() {
                // The new top takes over our cached tail: what it cached
                // itself when it was the top may have been popped since
                // (`model::a_timed_waiter_leaves_from_the_top_over_a_stale_tail`).
                if !leaving || P::FAULT != Fault::LeaveFromTopKeepsStaleTail {
                    (*next).tail.set(tail);
                }
                (*next).count.set(count);
            }
            Some(next)
        }
    }

    /// Gives back the stack that `leave`, a starving sleeper's mark
    /// (`starve`) or a census took. Unlocks that found it owned meanwhile
    /// left their wakes to us, so we decide as the unlock slow path would
    /// on the current word: with sleepers, the lock free and the wake not
    /// left to a spinner (SPINNING clear, or STARVING or BACKLOG set), we
    /// serve the oldest sleeper; otherwise the holder's unlock, or the
    /// spinner, will see the stack. A caller that holds LOCKED (a holder's
    /// census) never serves: every word it sees has LOCKED set.
    ///
    /// # Safety
    /// We own the stack, and `s` (with STACK_LOCKED) is a recent value of
    /// the word.
    pub(super) unsafe fn release_after_leave(&self, mut s: *mut Node<P>) {
        loop {
            if !head(s).is_null() && s.addr() & LOCKED == 0 && !spinner_takes_wake(s.addr()) {
                // SAFETY: as for this function, the stack is not empty, and
                // `s` shows LOCKED clear: we do not hold it.
                return unsafe { self.serve(s) };
            }
            let mut f = flags(s) & !STACK_LOCKED;
            if head(s).is_null() {
                f &= !STARVING;
            }
            // Release: our link edits (a census's walk caches the tail), for
            // the next stack owner, which may not take the lock first
            // (`model::a_timed_waiter_leaves_after_a_holders_look`).
            // Failure Acquire: the word changed (a push, an unlock), and the
            // next round may serve, walking nodes pushed meanwhile
            // (`model::pushes_while_a_push_counts`).
            let order = if P::FAULT == Fault::RelaxedGiveBack { Relaxed } else { Release };
            let retry = if P::FAULT == Fault::RelaxedGiveBackRetry { Relaxed } else { Acquire };
            match self.state.compare_exchange(s, with_flags(s, f), order, retry) {
                Ok(_) => return,
                Err(now) => s = now,
            }
        }
    }

    /// Pushes the nodes of parked waiters, linked through `next` from
    /// `newest` down to `oldest`, onto the stack in one CAS, as if each had
    /// pushed itself in that order, their starvation clocks starting now.
    /// Only while the lock is held, as a push of its own: its holder's
    /// unlock is then bound to see them. Returns `false`, pushing nothing,
    /// if the lock is free.
    ///
    /// # Safety
    /// Each node is armed ([`Node::parked`]) and linked to the next older
    /// one of the chain, is on no stack, and its thread sleeps on its
    /// parker and, however that sleep ends, goes on in
    /// [`Lock::wait_requeued`] once this returns `true`.
    pub(crate) unsafe fn push_chain(&self, newest: *mut Node<P>, oldest: *mut Node<P>) -> bool {
        // SAFETY: forwarded from the caller.
        unsafe { stamp_chain(newest, oldest) };
        let mut s = self.state.load(Relaxed);
        loop {
            if s.addr() & LOCKED == 0 {
                return false;
            }
            // SAFETY: as above.
            unsafe { (*oldest).next.set(head(s)) };
            // Release: publishes the nodes' fields to the stack owner that
            // will pop them, as a push does. Failure Relaxed: we link to the
            // fresh head next round, reading no node.
            match self.state.compare_exchange(s, with_flags(newest, flags(s)), Release, Relaxed) {
                Ok(_) => {
                    P::record(Event::Requeued);
                    return true;
                }
                Err(now) => {
                    if head(now) != head(s) {
                        // A waiter pushed itself first: our clocks start
                        // again, after its push, so that every sleeper
                        // below the chain is older than it.
                        // SAFETY: as above.
                        unsafe { stamp_chain(newest, oldest) };
                    }
                    s = now;
                }
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
    pub(super) fn take_stack_from(
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
}

/// Readies the chain of `push_chain` for the stack: its nodes are
/// requeued, and their starvation clocks start now.
///
/// # Safety
/// As for `push_chain`: the nodes are on no stack, and their threads read
/// none of these fields before a stack owner pops them.
unsafe fn stamp_chain<P: Platform>(newest: *mut Node<P>, oldest: *mut Node<P>) {
    let since = P::clock();
    let mut n = newest;
    loop {
        // SAFETY: forwarded from the caller.
        unsafe {
            (*n).prev.set(ptr::null_mut());
            (*n).tail.set(ptr::null_mut());
            (*n).since.set(since);
            (*n).requeued.set(true);
            if n == oldest {
                break;
            }
            n = (*n).next.get();
        }
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

/// Whether `node` was moved onto the stack by a condition variable and
/// has not been pushed by its own thread since.
///
/// # Safety
/// The caller owns the stack and `node` is linked.
#[cfg(test)]
pub(crate) unsafe fn requeued_of<P: Platform>(node: *mut Node<P>) -> bool {
    // SAFETY: forwarded from the caller.
    unsafe { (*node).requeued.get() }
}

/// The failure ordering of the CASes in `pop` whose retry walks new nodes:
/// Acquire, except in the deliberately broken model that shows loom catches
/// its absence.
#[inline(always)]
pub(super) fn retry_order<P: Platform>() -> Ordering {
    if P::FAULT == Fault::RelaxedPopRetry { Relaxed } else { Acquire }
}

/// The success ordering of the CAS that unlinks the oldest of several
/// waiters: Release, except in the deliberately broken model.
#[inline(always)]
pub(super) fn unlink_order<P: Platform>() -> Ordering {
    if P::FAULT == Fault::RelaxedUnlink { Relaxed } else { Release }
}

/// The tail below `top` if `me` is on the stack, else `None`. The walk
/// leaves `prev` valid from the top down to the tail and the tail cached in
/// the top (see [`find_tail`]), so the stack is a plain doubly linked list
/// from here on.
///
/// # Safety
/// The caller owns the stack and `top` is the non-null top of the stack.
pub(super) unsafe fn tail_if_linked<P: Platform>(
    top: *mut Node<P>,
    me: *mut Node<P>,
) -> Option<*mut Node<P>> {
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
pub(super) unsafe fn find_tail<P: Platform>(top: *mut Node<P>) -> *mut Node<P> {
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
