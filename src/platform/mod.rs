//! The platform layer the lock algorithm is generic over.
//!
//! [`crate::lock::Lock`] is written once against the traits here. The crate's
//! [`crate::RawMutex`] instantiates it with [`native::Native`]: std atomics,
//! the `arch` spin hint and tick counter, and a futex (Linux) or thread-park
//! parker. The test suite instantiates the *same* code with a loom platform
//! (`platform::loom`), so the model checker explores the real algorithm, not
//! a copy of it. Every method of the native implementation is
//! `#[inline(always)]` and the policy switches are associated constants, so
//! the indirection costs nothing in the compiled fast paths.

use core::sync::atomic::Ordering;

pub(crate) mod native;

// `--cfg spinbit_portable_parker` builds Linux with the portable parker,
// so that the integration tests can run it as macOS, Windows and the BSDs
// do (`.ci/run`).
#[cfg(target_os = "linux")]
#[cfg_attr(spinbit_portable_parker, allow(dead_code))]
pub(crate) mod futex;
#[cfg(any(test, not(target_os = "linux"), spinbit_portable_parker))]
pub(crate) mod park;

#[cfg(all(test, not(miri)))]
pub(crate) mod loom;
#[cfg(all(test, not(miri)))]
pub(crate) mod park_model;
mod word;

/// Which waiters may busy-wait before they sleep.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum SpinPolicy {
    /// The spin bit: at most one waiter (plus a waiter just woken from the
    /// tail of the stack) spins; every other waiter yields once and sleeps.
    One,
    /// Ablation: nobody spins.
    Never,
    /// Ablation: every waiter spins, as in a classic adaptive mutex.
    All,
}

/// Deliberate protocol bugs, compiled into the model-checking platforms only,
/// so that tests can show the model checker catches each of them. The native
/// platform's value is `None`, a constant, so every check folds away.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) enum Fault {
    None,
    /// A spinner that retires onto the stack keeps the SPINNING bit set.
    KeepSpinningOnPush,
    /// The unlock slow path never wakes anybody.
    SkipWake,
    /// The stack owner drops its wake when a stale look at the word shows
    /// the lock re-taken, although an unlocker that found the stack owned
    /// has already left it the decision.
    AbandonWakeWhenLocked,
    /// The futex wait blocks without comparing the word first.
    WaitWithoutCompare,
    /// The stack owner retries a failed pop with a Relaxed look at the new
    /// top, so the nodes pushed meanwhile are read without synchronisation.
    RelaxedPopRetry,
    /// A woken thread does not know it was handed SPINNING, so nobody
    /// clears the bit and every later unlock skips its wake.
    IgnoreHandedSpin,
    /// A hand-off clears LOCKED: the recipient and a barger both own the
    /// lock.
    HandOffClearsLocked,
    /// A woken thread does not know it was handed the lock: it sleeps again
    /// on a lock nobody will ever unlock.
    IgnoreHandedLock,
    /// The unlocker that takes LOCKED back for a starving sleeper does so
    /// with a Relaxed CAS, so nodes pushed and critical sections run since
    /// it released the lock are not acquired.
    RelaxedRetake,
    /// A sleeper that marks itself starving sets STARVING with a CAS whose
    /// failure is Relaxed, so when a push lands meanwhile, the walk to the
    /// tail that `serve` makes before its retake (a pending nudge) reads
    /// the pushed node unsynchronised.
    RelaxedStarveMark,
    /// The CAS that unlinks the oldest of several waiters is Relaxed, so the
    /// next stack owner reads the link edits unsynchronised.
    RelaxedUnlink,
    /// A timed-out waiter that finds it was popped while leaving takes the
    /// wake but returns without passing on what came with it (the lock or
    /// SPINNING).
    LeaveKeepsWake,
    /// A timed-out waiter unlinks its node without owning the stack.
    UnlinkWithoutStackLock,
    /// A sleeper that marks itself starving moves below the sleepers that
    /// marked themselves before it, so later marks are served first.
    MarkedBelowEarlierMarks,
    /// A sleeper that marks itself starving gives the stack back without
    /// the wake that unlocks which found the stack owned left to it.
    StarveDropsWake,
    /// A sleeper that marks itself starving moves below a requeued
    /// condition variable waiter that other threads judge starving: its
    /// mark passes a waiter that has no timer to mark itself with.
    MarkPassesRequeued,
    /// A sleeper that marks itself starving stops above every sleeper
    /// judged starving, a mutex sleeper that has not marked itself yet
    /// included.
    MarkStopsAboveJudged,
    /// A waiter at the top of the stack that unlinks itself (a timed waiter
    /// leaving, a starving sleeper moving to the bottom) retries its failed
    /// CAS with a Relaxed look, and walks the nodes pushed on top of it
    /// meanwhile unsynchronised.
    RelaxedUnlinkRetry,
    /// A timed waiter past its deadline gives up without passing on the
    /// SPINNING bit it holds.
    GiveUpKeepsSpinning,
    /// A wake past the spinner (sleepers backed up) hands SPINNING to the
    /// woken thread too, so two threads think they hold it.
    HandSpinPastSpinner,
    /// A census (`Lock::census`) changes BACKLOG or STARVING with a Relaxed
    /// RMW, so the wake a pusher's census may then make walks nodes pushed
    /// meanwhile unsynchronised.
    RelaxedCensusFlags,
    /// A census takes the stack with a Relaxed CAS, so a pusher's walk
    /// reads nodes pushed since its `try_lock` unsynchronised.
    RelaxedCensusTake,
    /// A census takes the stack even while another thread owns it.
    CensusOnOwnedStack,
    /// A stack owner that gives the stack back after a leave, a mark or a
    /// census reads the fresh word of a failed CAS with Relaxed, and may
    /// serve the oldest sleeper walking nodes pushed meanwhile
    /// unsynchronised.
    RelaxedGiveBackRetry,
    /// A sleeper whose starvation deadline passed but which a stack owner
    /// had popped (it did not mark itself) sleeps without a starvation
    /// deadline for the rest of its `lock` call, as if it had marked
    /// itself: if it loses the lock again, nothing bounds its wait.
    PoppedStarverKeepsNoDeadline,
    /// A waiter's starvation clock starts at its first push, not at its
    /// first yield: the time its arrival yields took counts towards no
    /// deadline (native test platform `SlowYieldClockAtPush` only).
    ClockStartsAtPush,
    /// A stack owner gives the stack back after a leave, a mark or a census
    /// with a Relaxed CAS: the next stack owner that does not take the lock
    /// first (a leaving timed waiter) reads the tail a holder's census
    /// cached unsynchronised.
    RelaxedGiveBack,
    /// An unlock in starvation mode that finds the stack owned by another
    /// thread releases LOCKED instead of waiting for the owner: barging
    /// acquisitions take the lock before the starving sleeper.
    StarvingUnlockReleasesWhenOwned,
    /// An unlock that saw STARVING and then found it cleared releases the
    /// lock with a Relaxed RMW.
    RelaxedStarvingRelease,
    /// `unlock` releases LOCKED first and takes the stack for its wake
    /// afterwards (`release_then_wake`): it touches the word after
    /// another thread may have taken the lock, used it last and freed it.
    ReleaseThenWake,
    /// Every hand-off ends starvation mode, even with marked sleepers left
    /// above the one it serves: the next of them can be overtaken.
    HandOffEndsStarving,
    /// A hand-off keeps starvation mode if the newest sleeper starves, not
    /// the next oldest: with an unmarked sleeper on top, it ends the mode
    /// over a marked one.
    HandOffJudgesTop,
    /// A timed waiter that leaves from the top of the stack ends starvation
    /// mode although marked sleepers remain below it.
    LeaveFromTopEndsStarving,
    /// An unlock in starvation mode that finds the mode ended releases the
    /// lock without the wake its release may owe.
    StarvingEndedReleasesWithoutWake,
    /// A holder's look judges the newest sleeper's age, not the oldest's.
    LookJudgesTop,
    /// A stack owner about to wake a sleeper judges the newest sleeper's
    /// age, not the oldest's: it wakes the oldest instead of handing it the
    /// lock.
    ServeJudgesTop,
    /// A stack owner that judged the oldest sleeper starving but found the
    /// lock taken gives the stack back without setting STARVING.
    ServeGivesBackWithoutStarving,
    /// A wake that unlinks the oldest of several sleepers retries its
    /// failed CAS with the flags it computed from the word of its first
    /// attempt, e.g. `LOCKED` clear after a barger took the lock.
    PopMergesStaleFlags,
    /// A timed waiter that leaves from the top of the stack does not hand
    /// its cached tail to the new top, which keeps the tail it cached when
    /// it was the top itself.
    LeaveFromTopKeepsStaleTail,
    /// A starving unlock that nudges the bottom sleeper gives the stack back
    /// but keeps the lock.
    NudgeKeepsLock,
    /// A starving unlock releases the lock as if it had nudged the bottom
    /// sleeper, which sleeps on (the model parker's `nudge` changes
    /// nothing).
    NudgeWithoutWake,
    /// A nudged sleeper sleeps again without marking itself anew, so nobody
    /// sets STARVING or takes the lock that the nudge released.
    NudgedSleepsAgain,
    /// A nudged sleeper keeps the SPINNING that its nudge handed it when it
    /// marks itself anew or is popped: unlocks skip their wakes for ever.
    NudgedKeepsSpin,
    /// A sleeper found asleep again after its nudge is nudged again instead
    /// of handed the lock: nothing bounds how often.
    NudgesAgain,
    /// A nudged sleeper marks itself anew without recording it
    /// (`Node::renewed`), so stack owners keep taking its nudge for pending.
    NudgedMarksWithoutRenewal,
    /// `serve` sees a pending nudge only in starvation mode or when it
    /// judges the oldest sleeper starving: otherwise its plain wake pops
    /// the nudged sleeper, whose node goes on looking nudged, so stack
    /// owners skip their wakes for it.
    ServeWakesPendingNudge,
    /// A condition variable's wait unlocks the mutex before it puts itself
    /// on the list: a notification in between misses it.
    CondUnlocksBeforeListing,
    /// `notify_all` moves every waiter but the newest onto the mutex's
    /// stack, and forgets that one.
    RequeueLosesNewest,
    /// A timed condition variable wait whose deadline passed reports a
    /// timeout even when a notification took it (and counted it) first.
    TimeoutAfterNotification,
    /// A condition variable waiter nudged on the mutex's stack while it
    /// sleeps on its condition variable parks again, as if the sleep had
    /// simply timed out.
    RequeuedIgnoresNudge,
    /// A requeued condition variable waiter's own push leaves its node
    /// flagged as requeued (native test platform `PushKeepsRequeued`
    /// only), so stack owners go on judging it as a waiter without a timer.
    PushKeepsRequeued,
    /// A panic inside a lock call unwinds out of it (native test platform
    /// `UnwindsPastNode` only), past a node still linked.
    UnwindPastNode,
}

/// The lock's state word: an atomic tagged pointer to the top waiter node.
///
/// Only word-sized read-modify-writes: no partial-word access ever touches
/// the state.
pub(crate) trait StateWord<N> {
    fn load(&self, order: Ordering) -> *mut N;
    fn compare_exchange(
        &self,
        current: *mut N,
        new: *mut N,
        success: Ordering,
        failure: Ordering,
    ) -> Result<*mut N, *mut N>;
    fn fetch_or(&self, bits: usize, order: Ordering) -> *mut N;
    fn fetch_and(&self, bits: usize, order: Ordering) -> *mut N;
    /// Flips `bits`; used by a stack owner to change flags that only
    /// stack owners write, which it knows.
    fn fetch_xor(&self, bits: usize, order: Ordering) -> *mut N;
    /// Subtracts `bits` from the address; used to clear LOCKED, which the
    /// caller knows is set (a single `lock xadd` on x86_64, where a
    /// `fetch_and` whose result is used becomes a CAS loop).
    fn fetch_sub(&self, bits: usize, order: Ordering) -> *mut N;
}

/// A field of a waiter node. Written by the waiter before it publishes the
/// node and by the holder of STACK_LOCKED afterwards; those two never overlap
/// (the publication and the stack lock order them), which the loom
/// implementation checks on every access.
pub(crate) trait NodeCell<T: Copy> {
    fn new(value: T) -> Self;
    /// # Safety
    /// No write to this cell may race with the read.
    unsafe fn get(&self) -> T;
    /// # Safety
    /// No other access to this cell may race with the write.
    unsafe fn set(&self, value: T);
}

/// What a thread waits for, for [`Platform::wait_for_wake`], which keeps
/// a memory of each: their waits differ (a turn on the mutex is about a
/// critical section; a notification is whenever another thread has news).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Its wake on a mutex's waiter stack.
    Stack,
    /// A notification on a condition variable.
    Notify,
}

/// How a park ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Woke {
    /// [`Parker::unpark`] was called for this arming (with the Acquire
    /// of [`Parker::unparked`]).
    Unparked,
    /// A stack owner nudged the sleeping thread ([`Parker::nudge`]): it runs
    /// again with its node still linked, and the parker is armed again.
    Nudged,
    /// The deadline came first ([`Parker::park_until`] only); the parker
    /// is still armed.
    TimedOut,
}

/// What [`Parker::nudge`] found.
pub(crate) enum Nudge<W> {
    /// The thread has not committed to an OS sleep: it is running (polling
    /// its node, or on its way to sleep), or was preempted on the way.
    Running,
    /// The thread was asleep and is nudged now; `W` is the wake still owed
    /// ([`Parker::wake_nudged`], made once the caller is done with the
    /// stack).
    Woken(W),
    /// Nudged before, and not running yet.
    Pending,
}

/// The per-node sleeping mechanism: one wait word per waiter.
///
/// The word says where the waiter is: armed and running (`prepare`, and
/// again after a nudge or a timeout), committed to an OS sleep (set by the
/// waiter itself just before it sleeps), nudged (set by a stack owner, see
/// [`Parker::nudge`]) or woken (`unpark`).
pub(crate) trait Parker {
    fn new() -> Self;
    /// Arms the parker. Called by its own thread before the node is
    /// published; the push's Release makes the armed state visible to the
    /// thread that will unpark it.
    fn prepare(&self);
    /// Blocks until [`Parker::unpark`] has been called for this arming
    /// ([`Woke::Unparked`], with Acquire ordering on the unparker's store,
    /// so everything the unparker did before is visible) or a stack owner
    /// nudged the thread ([`Woke::Nudged`]). Spurious OS returns are
    /// absorbed.
    fn park(&self) -> Woke;
    /// Wakes the thread parked (or about to park) on `this`. The OS wake
    /// is skipped if the thread is not asleep (it sees the store when it
    /// next looks).
    ///
    /// # Safety
    /// `this` must point to an armed parker whose thread has not returned
    /// from `park`. The pointee may be deallocated as soon as this function
    /// makes its wake store, so implementations must not touch it after that
    /// store, unless they make [`Parker::retire`] wait for them.
    unsafe fn unpark(this: *const Self);
    /// A point in time a timed wait gives up at.
    type Deadline: Copy + Ord;
    /// Like [`Parker::park`], but gives up at `deadline`
    /// ([`Woke::TimedOut`]). After a timeout the parker is still armed: an
    /// unparker that popped the node just before may still wake it, and
    /// the caller must find out (see `Lock::leave`) before its node goes
    /// away. Never times out before the deadline.
    fn park_until(&self, deadline: Self::Deadline) -> Woke;
    /// Whether [`Parker::unpark`] has been called for this arming, with
    /// the same Acquire as `park`. Does not block.
    fn unparked(&self) -> bool;
    /// The wake a nudge owes its thread.
    type Wake;
    /// Nudges the thread parked on `this` if it is asleep in the OS: it
    /// returns from `park` with [`Woke::Nudged`] once it runs, its node
    /// still linked. Unless the result is [`Nudge::Woken`], nothing
    /// changes.
    ///
    /// # Safety
    /// `this` is the parker of a linked node, and the caller owns the stack.
    unsafe fn nudge(this: *const Self) -> Nudge<Self::Wake>;
    /// Makes the wake a nudge owes. Touches no node, unless [`Parker::nudge`]
    /// made [`Parker::retire`] wait for this call: the nudged thread may
    /// have run, taken the lock and returned meanwhile.
    fn wake_nudged(wake: Self::Wake);
    /// Called by the parker's own thread once it is done with the parker,
    /// before the parker's memory goes away (`lock::Retire`): returns once
    /// no waker touches it any more. Only the portable parker's wakers do
    /// after their wake store; the futex parker passes the kernel an
    /// address, and the loom model's wakers pass their futex table one.
    fn retire(&self);
}

/// The deadline type of a platform's parker.
pub(crate) type Deadline<P> = <<P as Platform>::Parker as Parker>::Deadline;

/// Everything the algorithm needs from the machine, and the waiting policy
/// it follows there: the native platform (`native.rs`) for the release
/// builds and the tests, the loom platform (`loom.rs`) for the models.
pub(crate) trait Platform: Sized + 'static {
    // The machine: the lock word, the nodes' cells, the parker, the CPU's
    // hints and clock.
    type State: StateWord<crate::lock::Node<Self>>;
    type Cell<T: Copy>: NodeCell<T>;
    type Parker: Parker;
    fn spin_hint();
    fn yield_now();
    /// The current tick count.
    fn now() -> u64;
    /// The start of a waiter's starvation clock (`Node::since`): `now`,
    /// except in the loom platform, whose `now` is always 0 and whose
    /// clocks are numbered in the order they start, so that the models can
    /// judge sleepers by age.
    #[inline(always)]
    fn clock() -> u64 {
        Self::now()
    }
    /// Whether `deadline` has passed, for a waiter that has (`slept`) or
    /// has not yet slept in this `lock` call. The native platforms read the
    /// clock and ignore `slept`; the model lets every deadline fall during
    /// the waiter's first sleep, so the paths before it stay untimed.
    fn expired(deadline: Deadline<Self>, slept: bool) -> bool;

    // What is built: the spin policy, a deliberate fault
    // (negative controls), the checks and what a broken invariant does.
    /// Which waiters spin.
    const SPIN: SpinPolicy = SpinPolicy::One;
    /// A deliberately broken protocol, for negative-control tests.
    const FAULT: Fault = Fault::None;
    /// Whether the lock checks its invariants with assertions (the model
    /// always does, also in release builds).
    const CHECKS: bool = cfg!(debug_assertions);
    /// Whether a panic inside a lock call aborts the process instead of
    /// unwinding out of it, past a waiter node still linked on the unwound
    /// stack or a waiter stack still owned (see [`Platform::broken`]). The
    /// model checker's platform unwinds: loom reports a failed check, and a
    /// deadlock, by panicking in the model's threads.
    const ABORT_ON_UNWIND: bool = true;
    /// Whether a starving unlock that finds the bottom sleeper asleep in
    /// the OS nudges it and releases the lock, instead of handing the lock
    /// to a thread that is not running (see `Lock::hand_off_or_nudge`).
    /// Off only in the models that count the critical sections a marked
    /// sleeper waits, which hold where every hand-off goes through.
    const NUDGE: bool = true;
    /// Whether a nudge hands SPINNING to the nudged thread when nobody
    /// holds it (see `Lock::release_after_nudge`). Off only in the models
    /// that steer the case where another thread holds the bit at the nudge:
    /// an unlock then takes the stack, finds the nudge pending and gives
    /// the stack back.
    const NUDGE_HANDS_SPIN: bool = true;
    /// A broken internal invariant, found by a check of [`Platform::CHECKS`]
    /// builds: prints `what` and aborts (with [`Platform::ABORT_ON_UNWIND`];
    /// else panics, for loom).
    #[cold]
    fn broken(what: &str) -> ! {
        crate::lock::abort_with(what)
    }

    // The waiting policy: how long to spin, when to yield, poll or sleep,
    // when a sleeper starves. Natively `native.rs` with the constants of
    // `crate::arch`. The defaults are what the model runs where `loom.rs`
    // does not override them: they keep every step that writes and leave
    // out pure delays.
    /// The current tick count, and the one at which a spin that starts now
    /// must stop.
    fn spin_deadline() -> (u64, u64);
    /// The most spin hints between two looks at the word.
    #[inline(always)]
    fn max_backoff() -> u32 {
        8
    }
    /// The word this thread's latest plain release (`Lock::unlock`'s CAS
    /// from a word it judged needs no slow path) released from, if that
    /// word had no sleepers (its flags, LOCKED among them); 0 before the
    /// thread's first unlock and after a `Lock::unlock` that found
    /// sleepers or went to its slow path (an `unlock_fair` that hands the
    /// lock over leaves it as it was); or a pause. `Lock::unlock` releases
    /// with a CAS from a guess, without loading the word first. A wrong
    /// guess goes on from the word its CAS returns, as from a load, and
    /// leaves a pause instead of what it found: `arch::GUESS_PAUSE` times a
    /// unit above every flag (LOCKED clear, so never guessed), which each
    /// of the thread's next releases counts down while it loads the word;
    /// the last leaves what it found. Per thread, not per lock: a thread
    /// that alternates between locks in different states would otherwise
    /// miss again and again. A hint only: any value with LOCKED and no
    /// head is correct, and any value without LOCKED makes the unlock load.
    fn release_guess() -> usize;
    /// Sets [`Platform::release_guess`].
    fn set_release_guess(word: usize);
    /// Notes that this thread just took the lock by spinning.
    #[inline(always)]
    fn note_spin_acquire() {}
    /// Whether this thread took the lock by spinning so recently that
    /// looking at once would only start a ping-pong (see `Lock::spin`).
    #[inline(always)]
    fn spun_recently() -> bool {
        false
    }
    /// A spinner in a ping-pong waits here, before its first look, until a
    /// while after `started` (the spin's start tick). A pure delay: the
    /// model skips it.
    #[inline(always)]
    fn ping_pong_pause(_started: u64) {}
    /// A ping-pong pause just ended, and the lock was `held` (at the first
    /// look, or re-taken within one look gap after it) or stayed free: the
    /// platform adapts this thread's ping-pong window (see
    /// `arch::PING_PONG_MAX_NS`). The model keeps no window
    /// (`spun_recently` is always false there).
    #[inline(always)]
    fn pause_ended(_held: bool) {}
    /// Whether this thread, which just took the lock by spinning at tick
    /// `now`, should look at the oldest sleeper (rate-limited per thread, in
    /// time: the look takes the stack).
    #[inline(always)]
    fn look_due(_now: u64) -> bool {
        false
    }
    /// A waiter's yield before it sleeps (see `Lock::wait`): yields the
    /// CPU and returns whether the waiter may yield again, because the yield
    /// ran other threads (the CPU is oversubscribed). The model yields once:
    /// a further yield only reloads the word, a step the model already has.
    #[inline(always)]
    fn arrival_yield() -> bool {
        Self::yield_now();
        false
    }
    /// The most yields one waiter makes before it sleeps.
    #[inline(always)]
    fn max_arrival_yields() -> u32 {
        1
    }
    /// Notes that this thread's `unlock_fair` just handed the lock at
    /// address `lock` to a sleeper.
    #[inline(always)]
    fn note_hand_off(_lock: usize) {}
    /// Whether this thread's latest fair hand-off handed over the lock at
    /// address `lock`, so recently that a wait of its own for that lock
    /// should yield rather than sleep (see `Lock::wait`). The model: never.
    /// The step only yields and reads the word again, which the next pass
    /// of the loop does anyway, so leaving it out loses no interleaving of
    /// the protocol's writes.
    #[inline(always)]
    fn awake_after_hand_off(_lock: usize) -> bool {
        false
    }
    /// An unlock in starvation mode just handed the lock to a sleeping
    /// thread: yield the CPU so that the recipient, which holds the lock
    /// from now on, may run sooner. Returns whether it yielded. The model
    /// does not: a yield writes nothing, and the unlocking thread's next
    /// step is the return from `unlock`, which loom may schedule late
    /// anyway.
    #[inline(always)]
    fn yield_after_starving_hand_off() -> bool {
        false
    }
    /// Waits a moment for another thread to give the waiter stack back
    /// (stack owners never block, so the wait is short). `waits` counts
    /// this caller's waits so far in its current wait for the stack.
    fn wait_for_stack(waits: &mut u32);
    /// Sleepers are backed up when a stack owner leaves more than this many
    /// on the stack ([`crate::lock::BACKLOG`]). `u32::MAX`: never.
    #[inline(always)]
    fn backlog_sleepers() -> u32 {
        u32::MAX
    }
    /// Whether a sleeper, waiting since tick `since`, has waited so long
    /// that the lock is handed to it directly (starvation mode), judged by
    /// another thread. `requeued`: a condition variable's waiter moved onto
    /// the stack, which has no starvation timer of its own, so others judge
    /// it at the longer of a sleeper's two thresholds; else this is a
    /// backstop for a sleeper whose timer has fired but which has not run
    /// yet.
    #[inline(always)]
    fn starving(_since: u64, _requeued: bool) -> bool {
        false
    }
    /// When a sleeper whose starvation clock started at tick `since` (its
    /// first yield or first push, see `lock::start_clock`) starts starving: its
    /// sleep ends then, and it marks itself starving (`Lock::starve`).
    /// `backed_up`: its latest push saw sleepers backed up
    /// ([`crate::lock::BACKLOG`]). `None`: sleepers never judge themselves.
    #[inline(always)]
    fn starve_deadline(_since: u64, _backed_up: bool) -> Option<Deadline<Self>> {
        None
    }
    /// Whether a waiter whose starvation clock started at tick `since` has
    /// reached the deadline [`Platform::starve_deadline`] would give it
    /// (`backed_up` as there): it stops yielding then. `false`: never.
    #[inline(always)]
    fn starve_due(_since: u64, _backed_up: bool) -> bool {
        false
    }
    /// A sleeper that just marked itself starving may wait here, awake, for
    /// the hand-off (`woken` says whether it came) before it sleeps again:
    /// the holder's unlock may be moments away. Returns `woken()`.
    #[inline(always)]
    fn wait_awake(woken: impl Fn() -> bool) -> bool {
        woken()
    }
    /// A waiter that has just pushed itself onto a stack, or listed itself
    /// on a condition variable and unlocked, may wait here for its wake,
    /// polling its own node (`woken`, a load of its parker's word: no
    /// write, and no look at the lock word), before it sleeps in the OS.
    /// Returns whether the wake came. The model does not poll (`false`):
    /// a poll writes nothing, and the parker's own first check reads the
    /// same word with the same Acquire. A poll never outlasts `deadline`
    /// (the waiter's own, if timed): one that would does not start. It
    /// does not look at the starvation deadline: the caller polls only
    /// before it (a sleep marks it starving).
    #[inline(always)]
    fn wait_for_wake(
        _wait: Wait,
        _deadline: Option<Deadline<Self>>,
        _woken: impl Fn() -> bool,
    ) -> bool {
        false
    }
    /// A wake of this thread: it had waited `waited` ticks for it (from its
    /// push, or from listing itself on a condition variable), and, if it
    /// slept in the OS, it ran `latency` ticks after the wake. What
    /// [`Platform::wait_for_wake`] learns from.
    #[inline(always)]
    fn note_wake(_wait: Wait, _waited: u64, _latency: Option<u64>) {}

    // Instrumentation: the tests' event counts and the `stats` feature's.
    /// Test instrumentation: counts slow-path events per thread.
    #[inline(always)]
    fn record(_event: Event) {}
    /// Instrumentation (feature `stats`): a woken thread runs `ticks`
    /// ([`Platform::now`]) after the wake unlinked it.
    #[cfg(feature = "stats")]
    #[inline(always)]
    fn record_woken(_ticks: u64) {}
}

/// Slow-path events, counted per thread in test builds.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) enum Event {
    /// A waiter pushed itself onto the stack and slept.
    Parked,
    /// A waiter ran one spin episode.
    Spun,
    /// A spin episode ended without the lock: its budget ran out (or
    /// starvation mode began), and the spinner yielded.
    SpinRanOut,
    /// An unlock saw sleepers and a spinner, and woke nobody.
    WakeSkippedForSpinner,
    /// An unlock slow path left because another thread owned the stack.
    StackBusy,
    /// A wake took the oldest waiter.
    TailWake,
    /// A holder's census (its look at the oldest sleeper) took the stack.
    Look,
    /// A stack owner saw the oldest sleeper starving and set STARVING.
    StarvingSet,
    /// A hand-off left no starving sleeper and cleared STARVING.
    StarvingCleared,
    /// An unlocker took LOCKED back to hand it to a starving sleeper.
    Retake,
    /// ... after a failed attempt, with nodes pushed since it took the stack.
    RetakeRaced,
    /// The lock was handed directly to the oldest sleeper.
    HandOff,
    /// A woken thread found that it was handed the lock.
    HandedLock,
    /// `unlock_fair` found nobody to hand over to.
    FairUnlockEmpty,
    /// A timed waiter's deadline passed while it slept, and it unlinked its
    /// node from the stack.
    TimedOut,
    /// A timed waiter's deadline passed while it slept, but a stack owner
    /// had already popped it: it took the wake that was on its way.
    PoppedWhileLeaving,
    /// A timed waiter's deadline passed while it held SPINNING, and it
    /// gave the bit up (or took the lock, which was free).
    GaveUpSpinning,
    /// A spinner in a ping-pong paused before its first look.
    PingPongPause,
    /// A sleeper's sleep ran until its starvation deadline, and it marked
    /// itself starving and moved to the bottom of the stack.
    Starved,
    /// A sleeper's sleep ran until its starvation deadline, but a stack
    /// owner had already popped it: it took the wake that was on its way.
    PoppedWhileStarving,
    /// A sleeper that marked itself starving was the top of the stack (and
    /// not its bottom), and moved down.
    MovedFromTop,
    /// A sleeper that marked itself starving was neither the top nor the
    /// bottom of the stack, and moved down.
    MovedFromMiddle,
    /// A timed waiter that had marked itself starving reached its own
    /// deadline and unlinked its node (recorded with [`Event::TimedOut`]).
    LeftStarving,
    /// A sleeper that marked itself starving moved to just above the
    /// sleepers that had marked themselves before it (or a requeued
    /// condition variable waiter judged starving), not to the bottom.
    MovedAboveMarked,
    /// A waiter that found another thread spinning, or starvation mode,
    /// yielded the CPU (its first yield since it arrived).
    Yielded,
    /// ... and, since that yield ran other threads, yielded again instead
    /// of sleeping (once per further yield).
    YieldedAgain,
    /// A wake went past the spinner (sleepers were backed up): the woken
    /// thread was handed nothing.
    WokePastSpinner,
    /// A waiter that pushed itself beside a spinner, with `BACKLOG` clear,
    /// took the stack for a census.
    CountedOnPush,
    /// A waiter whose thread had just handed the lock to a sleeper
    /// (`unlock_fair`) yielded instead of sleeping (once per yield).
    AwakeAfterHandOff,
    /// An unlock in starvation mode yielded the CPU after its hand-off.
    YieldedAfterHandOff,
    /// A ping-pong pause ended with the lock held (the spinner's window
    /// widens).
    PauseEndedHeld,
    /// A ping-pong pause ended with the lock free (the spinner's window
    /// narrows).
    PauseEndedFree,
    /// A sleeper marked itself starving ([`Event::Starved`]) after an
    /// earlier starvation deadline of the same `lock` call had found it
    /// popped ([`Event::PoppedWhileStarving`]) and it lost the lock again.
    StarvedAfterPop,
    /// A sleeper that had just marked itself starving was handed the lock
    /// while it spun for its hand-off ([`Platform::wait_awake`]).
    HandedWhileAwake,
    /// A sleeper that had just marked itself starving spun for its
    /// hand-off until its wait ran out, and slept again.
    AwakeWaitRanOut,
    /// A waiter's arrival yields outlasted its starvation threshold, and
    /// it stopped yielding to sleep (and mark itself) at once.
    YieldsOutlastedThreshold,
    /// A thread woken with neither the lock nor SPINNING (past the
    /// spinner) renewed its arrival yields before sleeping again.
    YieldsRenewed,
    /// A waiter's wake came while it polled its own node, before it slept
    /// in the OS ([`Platform::wait_for_wake`]).
    WokenWhilePolling,
    /// A timed waiter past its deadline took the stack to unlink itself.
    Leaving,
    /// A timed waiter that unlinks itself from the top of the stack found
    /// nodes pushed on top of it (its CAS failed) and walks the stack again.
    LeaveRetried,
    /// An unlock that saw STARVING found it cleared (by a stack owner it
    /// may have waited for) and released the lock as a plain unlock.
    StarvingEndedAtUnlock,
    /// A starving unlock (or a stack owner's retake) found the oldest
    /// sleeper asleep in the OS, nudged it and released the lock.
    Nudged,
    /// A stack owner found the oldest sleeper's nudge pending (nudged, not
    /// marked anew yet) and gave the stack back as it was, releasing the
    /// lock if it held it in starvation mode.
    NudgePending,
    /// A nudged sleeper ran and marked itself anew.
    Rejoined,
    /// A nudged sleeper ran and found itself popped before it could mark
    /// itself anew: a fair unlock's hand-off (it takes the lock).
    PoppedAfterNudge,
    /// A condition variable moved parked waiters onto the stack
    /// (`Lock::push_chain`).
    Requeued,
    /// A condition variable's `notify_all` found the mutex free, took it
    /// for the oldest waiter and woke that one owning it.
    CondHanded,
    /// A condition variable's `notify_one` found the mutex free and woke
    /// the oldest waiter, which locks it itself.
    CondWoken,
    /// A condition variable's notification (or the mutex's wake, after a
    /// requeue) came while its waiter polled its own node, before it slept
    /// in the OS ([`Platform::wait_for_wake`]).
    CondPolled,
    /// A condition variable's timed wait ran out with the waiter still on
    /// the list: it took itself off.
    CondTimedOut,
    /// A condition variable's timed wait ran out after a notification had
    /// taken the waiter off the list: the notification counts.
    CondTimeoutOvertaken,
    /// An unlock released the lock and took the stack in one CAS, to serve
    /// the oldest sleeper (`unlock_slow`).
    ReleasedToServe,
    /// An unlock's guess of the word ([`Platform::release_guess`]) was
    /// wrong: its CAS failed, and the unlock went on from the word it found.
    GuessMissed,
}

/// How many [`Event`] variants there are.
#[cfg(test)]
pub(crate) const EVENTS: usize = Event::GuessMissed as usize + 1;
