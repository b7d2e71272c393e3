//! Waiting: the slow path of `lock` and of the timed locks. A waiter takes
//! the lock when it is free, spins if it holds `SPINNING`, yields while
//! another spins, and otherwise sleeps on a node on its own stack; a sleep
//! that reaches the starvation deadline marks the sleeper starving.

use super::stack::tail_if_linked;
use super::wake::*;
use super::*;

impl<P: Platform> Lock<P> {
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
    pub(super) fn wait(&self, deadline: Option<Deadline<P>>) -> bool {
        let node = Node::<P>::new();
        let _retire = Retire(&node);
        let mut w = Waiter::new::<P>();
        self.wait_with(&node, &mut w, self.state.load(Relaxed), deadline)
    }

    /// The rest of `lock` for a waiter whose node [`Lock::push_chain`]
    /// moved onto the stack while it slept on the node's parker (a
    /// condition variable's requeue); `woke` is how that sleep ended: a
    /// stack owner popped and woke it, nudged it, or its own deadline
    /// passed (which no longer counts: the wait is now for the lock).
    /// Returns once the lock is ours.
    /// `polled`: the wake came while the thread polled its node, before it
    /// slept (so it measured no wake from the OS).
    pub(crate) fn wait_requeued(&self, node: &Node<P>, woke: Woke, polled: bool) {
        no_unwind::<P, _>(|| {
            let me: *mut Node<P> = ptr::from_ref(node).cast_mut();
            let mut w = Waiter::new::<P>();
            // As after a push of our own, whose clock `push_chain` started.
            w.slept = true;
            w.clocked = true;
            // SAFETY: nobody writes `since` while we wait (see
            // `Node::since`: the notifier wrote it before the move).
            w.pushed_at = unsafe { node.since.get() };
            w.polled = polled;
            if woke != Woke::Unparked {
                // No deadline: the sleep ends with a wake.
                self.sleep(
                    node,
                    me,
                    None,
                    false,
                    (&mut w.marked, &mut w.popped_starving, &mut w.woken_awake),
                    woke == Woke::Nudged,
                );
            }
            let s = match self.after_wake(node, &mut w) {
                Step::Done(_) => return,
                Step::Again(s) => s,
                Step::Next => self.state.load(Relaxed),
            };
            self.wait_with(node, &mut w, s, None);
        });
    }

    /// `wait`'s loop, on our node, from `s`, a recent value of the word.
    #[inline(always)]
    fn wait_with(
        &self,
        node: &Node<P>,
        w: &mut Waiter,
        mut s: *mut Node<P>,
        deadline: Option<Deadline<P>>,
    ) -> bool {
        // A shared borrow is enough: every field the stack owner writes is a
        // cell.
        let me: *mut Node<P> = ptr::from_ref(node).cast_mut();
        loop {
            if s.addr() & LOCKED == 0 {
                // Also in starvation mode: LOCKED is clear there only for the
                // moment between an unlock's release and the STARVING it did
                // not see yet; our own unlock then hands the lock over.
                match self.acquire_from(s, w.spinner) {
                    Ok(()) => return true,
                    Err(now) => {
                        s = now;
                        continue;
                    }
                }
            }
            // Past the deadline: leave now, while we are on no stack.
            if deadline.is_some_and(|d| P::expired(d, w.slept)) {
                return self.give_up(s, w.spinner);
            }
            let mut step = self.spin_step(w, s);
            if let Step::Next = step {
                step = self.yield_step(node, w, s);
            }
            if let Step::Next = step {
                step = self.sleep_step(node, me, w, s, deadline);
            }
            s = match step {
                Step::Done(taken) => return taken,
                Step::Again(now) => now,
                // `sleep_step` always decides.
                Step::Next => self.state.load(Relaxed),
            };
        }
    }

    /// `wait`'s spin: takes SPINNING if nobody holds it, and spins once per
    /// arrival and per wake if it holds the bit (or was woken from the tail,
    /// or every waiter spins).
    #[inline(always)]
    fn spin_step(&self, w: &mut Waiter, s: *mut Node<P>) -> Step<P> {
        // In starvation mode the lock goes from hand to hand and is
        // never free: spinning for it is wasted. Yielding is not (below).
        let starving = s.addr() & STARVING != 0;
        if w.may_spin && !starving {
            if P::SPIN == SpinPolicy::One && !w.spinner && s.addr() & SPINNING == 0 {
                // Relaxed: the bit is a permission, it guards no data.
                match self.state.compare_exchange(s, s.map_addr(|a| a | SPINNING), Relaxed, Relaxed)
                {
                    Ok(_) => w.spinner = true,
                    Err(now) => return Step::Again(now),
                }
            }
            if w.spinner || w.from_tail || P::SPIN == SpinPolicy::All {
                w.may_spin = false;
                P::record(Event::Spun);
                let pause = w.ping_pong;
                w.ping_pong = false;
                match self.spin(w.spinner, pause) {
                    Ok(started) => {
                        P::note_spin_acquire();
                        if P::look_due(started) {
                            self.census(true);
                        }
                        return Step::Done(true);
                    }
                    Err(now) => return Step::Again(now),
                }
            }
        }
        Step::Next
    }

    /// `wait`'s yields before it sleeps: on arrival (and after a wake that
    /// handed nothing) while another thread spins or the lock is in
    /// starvation mode, and after this thread's own fair hand-off.
    #[inline(always)]
    fn yield_step(&self, node: &Node<P>, w: &mut Waiter, s: *mut Node<P>) -> Step<P> {
        let starving = s.addr() & STARVING != 0;
        // Someone else spins: yield the CPU before sleeping (Go's
        // passive spin). With more threads than cores the lock is often
        // free again by the time we run, and taking it then is far cheaper
        // than a sleep and a wake; a thread that sleeps at once instead
        // leaves cores idle while the wakes trickle in. We yield again
        // only while our yields run other threads
        // (`arch::ARRIVAL_YIELDS`): a thread that yields again and again
        // on a CPU nobody else wants is busy work. In starvation mode
        // too, where nobody spins: a waiter that stays runnable until
        // the marked sleepers are served does not join them on the
        // stack, where it would wait out the threshold and cost the lock
        // one more hand-off to a sleeping thread (measured:
        // docs/benchmarks.md, "Measurements behind the algorithm's
        // rules").
        if w.yields > 0 && !w.spinner && (starving || s.addr() & SPINNING != 0) {
            if P::FAULT != Fault::ClockStartsAtPush {
                // SAFETY: as for the push below.
                unsafe { start_clock(node, &mut w.clocked) };
            }
            // Our yields have outlasted the starvation threshold (one
            // yield can take milliseconds): sleep now, and the sleep,
            // whose deadline has passed, marks us starving at once. Not
            // while sleepers are backed up: see `start_clock`.
            // SAFETY: nobody writes `since` while we wait (see
            // `Node::since`).
            let since = unsafe { node.since.get() };
            if w.clocked && s.addr() & BACKLOG == 0 && P::starve_due(since, false) {
                P::record(Event::YieldsOutlastedThreshold);
                w.yields = 0;
            } else {
                P::record(if w.yields == P::max_arrival_yields() {
                    Event::Yielded
                } else {
                    Event::YieldedAgain
                });
                w.yields -= 1;
                if !P::arrival_yield() {
                    // Nobody else wanted the CPU: a further yield would
                    // be a busy wait.
                    w.yields = 0;
                }
                return Step::Again(self.state.load(Relaxed));
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
                unsafe { start_clock(node, &mut w.clocked) };
            }
            P::record(Event::AwakeAfterHandOff);
            P::yield_now();
            return Step::Again(self.state.load(Relaxed));
        }
        Step::Next
    }

    /// `wait`'s sleep: pushes our node, sleeps, and decides from what came
    /// with the wake (the lock, SPINNING, nothing) or the timeout.
    #[inline(always)]
    fn sleep_step(
        &self,
        node: &Node<P>,
        me: *mut Node<P>,
        w: &mut Waiter,
        s: *mut Node<P>,
        deadline: Option<Deadline<P>>,
    ) -> Step<P> {
        // Sleep: link to the current top and publish ourselves as the new
        // top in one CAS that also retires our SPINNING bit, and that
        // succeeds only if LOCKED is still set (s has it): the holder's
        // unlock is then bound to see us.
        // SAFETY: the node is not published (first round, a failed CAS,
        // or popped by the thread that woke us, which touches no field of
        // it after its wake store but the portable parker's handle and
        // count, read-only and atomic: see `Parker::retire`).
        unsafe {
            node.next.set(head(s));
            node.prev.set(ptr::null_mut());
            node.tail.set(ptr::null_mut());
            // Our own starvation timer judges us from now on.
            if P::FAULT != Fault::PushKeepsRequeued {
                node.requeued.set(false);
            }
            if !w.slept && s.addr() & BACKLOG != 0 {
                // Our first push finds sleepers backed up: the clock
                // starts now (see `start_clock`).
                node.since.set(P::clock());
                w.clocked = true;
            } else {
                start_clock(node, &mut w.clocked);
            }
        }
        node.parker.prepare();
        let mut f = flags(s);
        if w.spinner && P::FAULT != Fault::KeepSpinningOnPush {
            f &= !SPINNING;
        }
        // Release: publishes the node's fields to the stack owner that
        // will pop it. Failure Relaxed: we link to the fresh head next
        // round, storing its address without reading the node.
        match self.state.compare_exchange(s, with_flags(me, f), Release, Relaxed) {
            Ok(_) => {
                w.pushed_at = P::now();
                check_spinner::<P>(s, w.spinner);
                P::record(Event::Parked);
                // Beside a spinner, on other sleepers, with BACKLOG
                // clear: unlocks skip their wakes, so count.
                if !head(s).is_null() && spinner_takes_wake(f) {
                    self.census(false);
                }
                let backed_up = f & BACKLOG != 0;
                w.slept = true;
                // Wait for the wake on our own node first, where the
                // platform expects it soon (see `Platform::wait_for_wake`);
                // not once our starvation deadline has passed: only a
                // sleep (`sleep`) marks us starving, and a wake that kept
                // coming while we polled would keep us from ever marking.
                // SAFETY: nobody writes `since` while we wait (see
                // `Node::since`).
                let due = !w.marked && P::starve_due(unsafe { node.since.get() }, backed_up);
                w.polled =
                    !due && P::wait_for_wake(Wait::Stack, deadline, || node.parker.unparked());
                w.woken_awake = false;
                if w.polled {
                    P::record(Event::WokenWhilePolling);
                } else if !self.sleep(
                    node,
                    me,
                    deadline,
                    backed_up,
                    (&mut w.marked, &mut w.popped_starving, &mut w.woken_awake),
                    false,
                ) {
                    // SAFETY: our node is (or was) on this lock's stack.
                    if unsafe { self.leave(me) } {
                        P::record(Event::TimedOut);
                        if w.marked {
                            P::record(Event::LeftStarving);
                        }
                        return Step::Done(false);
                    }
                    // Popped before we took the stack: the popper's wake
                    // store is on its way (a stack owner never blocks
                    // between its pop and the wake), and our node must
                    // live until it lands.
                    P::record(Event::PoppedWhileLeaving);
                    await_popped_wake(node);
                    if P::FAULT == Fault::LeaveKeepsWake {
                        return Step::Done(false);
                    }
                }
                self.after_wake(node, w)
            }
            Err(now) => Step::Again(now),
        }
    }

    /// After our sleep ended with a wake (not a timeout): returns if the
    /// wake handed us the lock; otherwise takes over what came with it
    /// (SPINNING, or nothing) and looks again.
    #[inline(always)]
    fn after_wake(&self, node: &Node<P>, w: &mut Waiter) -> Step<P> {
        // SAFETY: we were popped; the waker's writes happened
        // before its wake store, which `park` acquired.
        let (handed_lock, handed_spin, next) =
            unsafe { (node.handed_lock.get(), node.handed_spin.get(), node.next.get()) };
        // SAFETY: as for `handed_lock` above.
        let woken_at = unsafe { node.woken_at.get() };
        // Saturating: two CPUs' tick counters may disagree slightly.
        let latency = P::now().saturating_sub(woken_at);
        // The latency of a wake from the OS: not of one that found us
        // polling or awake after our mark.
        let slept = !w.polled && !w.woken_awake;
        P::note_wake(Wait::Stack, woken_at.saturating_sub(w.pushed_at), slept.then_some(latency));
        #[cfg(feature = "stats")]
        P::record_woken(latency);
        if handed_lock && P::FAULT != Fault::IgnoreHandedLock {
            // A hand-off: LOCKED was never cleared, it is ours,
            // and the hand-over's futex store (Release, acquired
            // by `park`) carries the previous critical section.
            P::record(Event::HandedLock);
            // SAFETY: as for `handed_lock` above; popped, nobody else
            // writes it.
            if unsafe { node.nudge_spin.get() } {
                // A nudge handed us SPINNING before this hand-off popped
                // us: we give it up with the lock ours.
                // SAFETY: as above.
                unsafe { node.nudge_spin.set(false) };
                self.drop_nudge_spin();
            }
            return Step::Done(true);
        }
        // SAFETY: as for `handed_lock` above; popped, nobody else writes it.
        if P::CHECKS && unsafe { node.nudge_spin.get() } {
            // Only a hand-off pops a thread whose nudge is pending (`serve`
            // leaves it to its thread): a plain wake here would have left
            // us SPINNING to carry without knowing it.
            P::broken("a plain wake popped a spinbit sleeper whose nudge was pending");
        }
        w.from_tail = next.is_null();
        w.spinner = handed_spin && P::FAULT != Fault::IgnoreHandedSpin;
        // Woken past the spinner (sleepers were backed up),
        // handed neither the lock nor SPINNING: we may yield
        // again before we sleep, as on arrival. The wake
        // already cost a system call and a context switch; a
        // thread that sleeps again at once (its arrival yields
        // spent) leaves the stack as backed up as it was, one
        // that stays runnable takes the lock when it next
        // finds it free (measured: docs/benchmarks.md,
        // "Measurements behind the algorithm's rules").
        // The starvation clock keeps running: once it has
        // passed the threshold, the next sleep marks us at once.
        if !w.spinner && P::SPIN == SpinPolicy::One {
            P::record(Event::YieldsRenewed);
            w.yields = P::max_arrival_yields();
        }
        w.may_spin = P::SPIN != SpinPolicy::Never;
        // A woken thread looks at once: it was away too long for
        // a ping-pong.
        w.ping_pong = false;
        Step::Again(self.state.load(Relaxed))
    }

    /// Sleeps on our node (just pushed) until woken: returns `true`, or
    /// `false` if `deadline` came first.
    ///
    /// Unless we already did in this `lock` call, the sleep also ends at
    /// the platform's starvation deadline ([`Platform::starve_deadline`]):
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
    ///
    /// The timer is armed even when a woken thread sleeps again as the only
    /// sleeper with nobody spinning, although arming and cancelling it costs
    /// a VM a few µs of CPU per sleep: without it
    /// (`benches/patches/untimed-resleep.patch`), such sleeps would rest the
    /// bound on the others' backstop, and the 2-thread cells saved CPU but
    /// lost enough throughput to turn leads over the peers into losses
    /// (measured: docs/benchmarks.md, "Measuring a build variant").
    ///
    /// With `nudged_first`, the sleep began elsewhere and a nudge ended it
    /// (a condition variable's wait whose node was moved onto our stack,
    /// see `wait_requeued`): we act on the nudge before we park.
    #[inline(always)]
    pub(super) fn sleep(
        &self,
        node: &Node<P>,
        me: *mut Node<P>,
        deadline: Option<Deadline<P>>,
        backed_up: bool,
        (marked, popped, awake): (&mut bool, &mut bool, &mut bool),
        mut nudged_first: bool,
    ) -> bool {
        loop {
            let starve_at = if *marked {
                None
            } else {
                // SAFETY: nobody writes `since` while we wait (see
                // `Node::since`); stack owners only read it.
                P::starve_deadline(unsafe { node.since.get() }, backed_up)
            };
            // The earlier of the two deadlines, and whether it is the
            // starvation one.
            // A requeued waiter's sleep began on a condition variable, and a
            // nudge may have ended it (`wait_requeued`).
            let (woke, starving) = match (deadline, starve_at) {
                _ if core::mem::take(&mut nudged_first) => (Woke::Nudged, false),
                (None, None) => (node.parker.park(), false),
                (Some(d), None) => (node.parker.park_until(d), false),
                (None, Some(t)) => (node.parker.park_until(t), true),
                (Some(d), Some(t)) => {
                    if t < d {
                        (node.parker.park_until(t), true)
                    } else {
                        (node.parker.park_until(d), false)
                    }
                }
            };
            let nudged = woke == Woke::Nudged;
            match woke {
                Woke::Unparked => return true,
                Woke::TimedOut if !starving => return false,
                Woke::TimedOut => {}
                // A starving unlock found us asleep at the bottom and woke
                // us instead of handing us the lock, which it released
                // (`hand_off_or_nudge`): mark ourselves anew, below.
                Woke::Nudged => {
                    P::record(Event::Rejoined);
                    if P::FAULT == Fault::NudgedSleepsAgain {
                        continue;
                    }
                }
            }
            // SAFETY: our node is (or was) on this lock's stack.
            if !unsafe { self.starve(me, nudged) } {
                // Popped before we took the stack (after a nudge, only a
                // fair unlock's hand-off does that): the popper's wake store
                // is on its way, and our node must live until it lands.
                if nudged {
                    P::record(Event::PoppedAfterNudge);
                    await_popped_wake(node);
                    return true;
                }
                // We keep the deadline (see above); we are not marked.
                P::record(Event::PoppedWhileStarving);
                *popped = true;
                if P::FAULT == Fault::PoppedStarverKeepsNoDeadline {
                    *marked = true;
                }
                await_popped_wake(node);
                return true;
            }
            *marked = true;
            if *popped {
                P::record(Event::StarvedAfterPop);
            }
            if P::wait_awake(|| node.parker.unparked()) {
                P::record(Event::HandedWhileAwake);
                *awake = true;
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
    /// After a nudge (`nudged`), the same marks us anew: the node records
    /// it (`Node::renewed`), and from then on a stack owner may hand us the
    /// lock. We were the oldest sleeper when nudged; if we had marked
    /// ourselves, we still are the bottom one.
    ///
    /// # Safety
    /// `me` is the caller's node, pushed onto this lock's stack since it was
    /// last popped.
    #[cold]
    pub(super) unsafe fn starve(&self, me: *mut Node<P>, nudged: bool) -> bool {
        let mut s = self.take_stack();
        // SAFETY: we own the stack: nobody else writes the field meanwhile,
        // and its nudger wrote it before its give-back, which our take
        // acquired.
        if unsafe { (*me).nudge_spin.get() } {
            // SAFETY: as above.
            unsafe { (*me).nudge_spin.set(false) };
            s = self.drop_nudge_spin();
        }
        // SAFETY: only we write `starved`.
        let marked = unsafe { (*me).starved.get() };
        let linked = if marked {
            // Marked before, and nudged since: we are still the bottom
            // sleeper (nudges go to the bottom, and later marks move above
            // ours), unless a stack owner popped us meanwhile.
            // SAFETY: we own the stack.
            let tail = unsafe { (!head(s).is_null()).then(|| tail_if_linked(head(s), me)) };
            let linked = matches!(tail, Some(Some(_)));
            if P::CHECKS && linked && tail != Some(Some(me)) {
                P::broken("a nudged spinbit sleeper is not the bottom sleeper");
            }
            linked
        } else {
            // SAFETY: we own the stack.
            unsafe { self.move_to_bottom(&mut s, me) }
        };
        if linked {
            if nudged && P::FAULT != Fault::NudgedMarksWithoutRenewal {
                // SAFETY: we own the stack and our node is linked: stack
                // owners read `renewed`, and none runs while we own it.
                unsafe { (*me).renewed.set(true) };
            }
            if !marked {
                P::record(Event::Starved);
            }
            // SAFETY: we own the stack and our node is linked: stack owners
            // read `starved`, and none runs while we own it.
            unsafe { (*me).starved.set(true) };
            while s.addr() & STARVING == 0 {
                // Success Relaxed: we keep the stack, and give it back with
                // Release below. Failure Acquire: the word changed (a push,
                // the lock taken or released), and `release_after_leave`
                // may walk the nodes pushed meanwhile: with STARVING set,
                // `serve` walks to the tail for a pending nudge before its
                // retake (`model::a_push_lands_while_a_nudging_sleeper_marks_itself`).
                let failure = if P::FAULT == Fault::RelaxedStarveMark { Relaxed } else { Acquire };
                match self.state.compare_exchange(s, s.map_addr(|a| a | STARVING), Relaxed, failure)
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

    /// A timed waiter that is on no stack gives up at its deadline. If it
    /// holds SPINNING, unlocks have skipped their wakes for it, so it must
    /// not just vanish: it takes the lock if it is free (then it returns
    /// `true`, the lock taken), or clears SPINNING in a CAS that sees LOCKED
    /// set, so that the holder's unlock sees no spinner and wakes a sleeper.
    pub(super) fn give_up(&self, mut s: *mut Node<P>, spinner: bool) -> bool {
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

    /// Clears the SPINNING that a nudge handed us (`Node::nudge_spin`), as
    /// we own the stack or the lock: the lock's holder, or the stack's
    /// owner when it gives the stack back, then sees no spinner and serves
    /// the sleepers. Returns the word as the clear left it. Acquire: a
    /// stack owner's give-back after this may walk nodes pushed since it
    /// took the stack (as `starve`'s mark).
    pub(super) fn drop_nudge_spin(&self) -> *mut Node<P> {
        if P::FAULT == Fault::NudgedKeepsSpin {
            return self.state.load(Acquire);
        }
        let old = self.state.fetch_and(!SPINNING, Acquire);
        check_spinner::<P>(old, true);
        old.map_addr(|a| a & !SPINNING)
    }

    /// One CAS that takes the lock from `s` (which has LOCKED clear),
    /// keeping the other bits and dropping SPINNING if we hold it.
    #[inline(always)]
    pub(super) fn acquire_from(&self, s: *mut Node<P>, spinner: bool) -> Result<(), *mut Node<P>> {
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
    /// within its window: see `arch::ping_pong_ns` and
    /// `arch::PING_PONG_MAX_NS`), the episode starts with a pause without
    /// looks (`arch::ping_pong_pause_ns`): two threads that re-take the lock
    /// at once would otherwise trade it on every acquisition, each trade a
    /// cross-core transfer of the line, while the holder runs a batch of
    /// acquisitions from its own cache during the pause. What the pause
    /// finds at its end adapts the window ([`Platform::pause_ended`]).
    pub(super) fn spin(&self, spinner: bool, ping_pong: bool) -> Result<u64, *mut Node<P>> {
        let (started, deadline) = P::spin_deadline();
        if ping_pong {
            P::record(Event::PingPongPause);
            P::ping_pong_pause(started);
        }
        let mut s = self.state.load(Relaxed);
        // Spin hints between two looks at the word, doubling up to the
        // platform's cap (`arch::max_look_gap_ns`): each look pulls the cache
        // line away from the holder. Timing each look with `RDTSCP` and
        // halving the gap after one that hit in this core's cache
        // (`benches/patches/timed-looks.patch`) helped the hand-off cells
        // on one CPU only, and cost the short critical sections there
        // (measured: docs/benchmarks.md, "Measuring a build variant").
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
            backoff = (backoff * 2).min(max_backoff);
            s = self.state.load(Relaxed);
        }
        P::record(Event::SpinRanOut);
        P::yield_now();
        Err(self.state.load(Relaxed))
    }

    /// A census of the sleepers: if the stack is not empty, nobody owns it
    /// and the census is due (below), takes it, counts the sleepers and
    /// sets [`BACKLOG`] if the next wake would leave them backed up
    /// ([`backed_up_after_a_wake`]), clearing it otherwise; a holder
    /// (`holder`) also judges the oldest sleeper and, if it has waited too
    /// long, sets STARVING, so that its own unlock hands it the lock. It
    /// gives the stack back as `leave` does (`release_after_leave`).
    ///
    /// Two kinds of thread take it, each because unlocks that skip their
    /// wakes for a spinner would otherwise never see the stack:
    /// - A holder that took the lock by spinning, now and then
    ///   ([`Platform::look_due`]), unless starvation mode is on already:
    ///   under oversubscription a spinner nearly always exists, and without
    ///   this look nobody would see the sleepers at the bottom of the stack.
    ///   It holds LOCKED, so no unlock can happen (and skip a wake) while it
    ///   owns the stack, and its give-back never serves.
    /// - A waiter that pushed itself on other sleepers beside a spinner,
    ///   with BACKLOG clear: pops recount the flag, but while it is clear and
    ///   a thread spins, unlocks skip their wakes, so no pop comes to set
    ///   it, and pushes piled sleepers up (measured: docs/benchmarks.md,
    ///   "Measurements behind the algorithm's rules"). The pushes grow the
    ///   stack, so they count it. It does not hold LOCKED: unlocks that
    ///   found the stack owned left their wakes to it, and its give-back
    ///   serves the oldest sleeper if the lock is free and the flags no
    ///   longer leave the wake to a spinner.
    ///
    /// The walk is the amortised O(1) walk of every stack owner.
    #[cold]
    pub(super) fn census(&self, holder: bool) {
        let mut s = self.state.load(Relaxed);
        s = loop {
            let owned = s.addr() & STACK_LOCKED != 0 && P::FAULT != Fault::CensusOnOwnedStack;
            // A holder looks unless starvation mode is on already; a
            // pusher counts only while unlocks skip their wakes.
            let due = if holder { s.addr() & STARVING == 0 } else { spinner_takes_wake(s.addr()) };
            if head(s).is_null() || owned || !due {
                return;
            }
            // Acquire: the walk reads the nodes' fields. A pusher's own push
            // (Release only) acquired nothing: nodes pushed after its
            // `try_lock`'s Acquire, and the last stack owner's edits, are
            // ordered before the walk by this CAS alone
            // (`model::push_beside_spinner`); for a holder, the nodes
            // pushed since it took the lock, and the edits of stack owners
            // that do not take the lock (a leaving timed waiter).
            let order = if P::FAULT == Fault::RelaxedCensusTake { Relaxed } else { Acquire };
            match self.take_stack_from(s, order) {
                Ok(taken) => break taken,
                Err(now) => s = now,
            }
        };
        P::record(if holder { Event::Look } else { Event::CountedOnPush });
        // SAFETY: we own the stack and it is not empty.
        let (starving, backlog) = unsafe {
            let starving = holder && starves(oldest(head(s), Fault::LookJudgesTop));
            (starving, backed_up_after_a_wake(head(s)))
        };
        // STARVING if the oldest sleeper starves; BACKLOG as counted (a
        // pusher's census finds it clear, a holder's may find it stale).
        let want = (if starving { STARVING } else { 0 }) | if backlog { BACKLOG } else { 0 };
        let flip = (s.addr() ^ want) & (STARVING | BACKLOG);
        if flip != 0 {
            // Only stack owners write these two flags, and we own the
            // stack: they are as `s` shows them, and the xor changes
            // exactly those that differ. Acquire: the value shows the nodes
            // pushed since we took the stack, which a pusher's
            // `release_after_leave` walks if it serves the oldest sleeper
            // at once (`model::push_beside_spinner`); a holder never serves.
            let order = if P::FAULT == Fault::RelaxedCensusFlags { Relaxed } else { Acquire };
            let old = self.state.fetch_xor(flip, order);
            if P::CHECKS && (old.addr() ^ s.addr()) & (STARVING | BACKLOG) != 0 {
                P::broken("a spinbit flag that only stack owners write changed under a census");
            }
            s = old.map_addr(|a| a ^ flip);
        }
        // SAFETY: we own the stack; a holder's give-back never serves.
        unsafe { self.release_after_leave(s) };
        if starving {
            P::record(Event::StarvingSet);
        }
    }
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
/// at 32-64 threads (measured: docs/benchmarks.md, "Measurements behind
/// the algorithm's rules").
///
/// # Safety
/// The node is not published, if `clocked` is clear: the clock starts
/// before the first push, and only its owner writes `since`.
#[inline(always)]
pub(super) unsafe fn start_clock<P: Platform>(node: &Node<P>, clocked: &mut bool) {
    if !*clocked {
        *clocked = true;
        // SAFETY: forwarded from the caller.
        unsafe { node.since.set(P::clock()) };
    }
}

/// Waits for the wake that a stack owner which popped our node owes us.
/// Only a linked node is nudged, so the park ends with that wake.
fn await_popped_wake<P: Platform>(node: &Node<P>) {
    if node.parker.park() != Woke::Unparked {
        P::broken("a popped spinbit waiter was nudged");
    }
}

/// What one step of `Lock::wait`'s loop decided.
enum Step<P: Platform> {
    /// `wait` returns: whether the lock was taken.
    Done(bool),
    /// `wait` looks again, from this word.
    Again(*mut Node<P>),
    /// This step does not apply; the next one decides.
    Next,
}

/// A waiter's state across one `lock` call (`Lock::wait`).
struct Waiter {
    /// We own the SPINNING bit.
    spinner: bool,
    /// One spin episode per arrival and per wake.
    may_spin: bool,
    /// The arrival's episode starts with a pause if we took the lock by
    /// spinning moments ago (see `spin`).
    ping_pong: bool,
    /// We were just woken from the tail: spin even beside a spinner, so
    /// the oldest waiter is not beaten by the spinner every time.
    from_tail: bool,
    /// Yields left to this arrival while another thread holds SPINNING
    /// or the lock is in starvation mode.
    yields: u32,
    /// We have slept at least once.
    slept: bool,
    /// When we last pushed ourselves ([`Platform::now`] ticks).
    pushed_at: u64,
    /// The wake after our last push came while we waited for it on our
    /// own node, before we slept in the OS (`Platform::wait_for_wake`).
    polled: bool,
    /// The wake after our last push came while we waited awake for a
    /// hand-off after marking ourselves starving (`Platform::wait_awake`).
    woken_awake: bool,
    /// Our starvation clock runs (`node.since` is set): since our first
    /// yield or, if we did not yield or that push found sleepers backed
    /// up, our first push.
    clocked: bool,
    /// We marked ourselves starving (`node.starved` is set).
    marked: bool,
    /// A starvation deadline of ours found us popped (we did not mark
    /// ourselves then).
    popped_starving: bool,
}

impl Waiter {
    #[inline(always)]
    fn new<P: Platform>() -> Waiter {
        let may_spin = P::SPIN != SpinPolicy::Never;
        Waiter {
            spinner: false,
            may_spin,
            ping_pong: may_spin && P::spun_recently(),
            from_tail: false,
            yields: if P::SPIN == SpinPolicy::One && may_spin {
                P::max_arrival_yields()
            } else {
                0
            },
            slept: false,
            pushed_at: 0,
            polled: false,
            woken_awake: false,
            clocked: false,
            marked: false,
            popped_starving: false,
        }
    }
}
