//! Loom models of the lock algorithm. They instantiate `crate::lock::Lock`
//! with the loom platform (`crate::platform::loom`), so loom explores the
//! real code, and they run in plain `cargo test`.
//!
//! Bounds: loom explores every interleaving up to a preemption bound. Each
//! model has a default bound, which keeps the whole set to about four
//! minutes of `cargo test` on two cores (the models run one at a time: see
//! `ONE_MODEL_AT_A_TIME`; the crate is optimised in the test profile, see
//! `Cargo.toml`), and a deeper one, used when
//! `SPINBIT_LOOM_DEEP` is set (the deeper run of docs/verification.md, in release mode).
//! `LOOM_MAX_PREEMPTIONS`, if set, overrides both.
//!
//! Every model also checks that the interleaving it is named after happened
//! in at least one explored execution (the slow-path events the algorithm
//! reports through `Platform::record`), so a model that stops reaching its
//! scenario fails instead of passing vacuously.

use std::cell::{Cell, RefCell};

use loom::cell::UnsafeCell;
use loom::sync::Notify;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use loom::thread;

use crate::lock::{FLAGS, LOCKED, Lock, Node, SPINNING, STACK_LOCKED, STARVING};
use crate::platform::loom::fair::{
    BY_AGE, BY_AGE_NUDGED, LOOKS_NOBODY_STARVES, NOBODY_STARVES, OLDEST_STARVES,
    OLDEST_STARVES_FIRST_PAUSES, SELF_JUDGED, SELF_JUDGED_BY_AGE, SELF_JUDGED_NUDGED,
    SELF_JUDGED_NUDGED_BESIDE_SPINNER, STARVES_ONCE,
};
use crate::platform::loom::faults::*;
use crate::platform::loom::{Loom, LoomState, ModelDeadline, blocked_waiters};
use crate::platform::park_model::PortableModel;
use crate::platform::{EVENTS, Event, Parker, Platform, StateWord};

/// The platforms the models run on: [`Loom`] with no spurious futex returns
/// and the starvation rule named
/// (`crate::platform::loom::fair`); `F`, a fault (`crate::platform::loom::faults`),
/// none by default.
type Fifo<const F: u8 = NO_FAULT> = Loom<F, 0, NOBODY_STARVES>;
/// Every oldest sleeper starves.
type OldestStarves<const F: u8 = NO_FAULT> = Loom<F, 0, OLDEST_STARVES>;
/// Every spin acquisition looks, and nobody starves.
type LooksNobodyStarves<const F: u8 = NO_FAULT> = Loom<F, 0, LOOKS_NOBODY_STARVES>;
/// Only the first judgement of an execution finds the oldest sleeper starving.
type StarvesOnce<const F: u8 = NO_FAULT> = Loom<F, 0, STARVES_ONCE>;
/// Every oldest sleeper starves, and the first judgement pauses
/// (`pause_first_judgement_until`).
type OldestStarvesFirstPauses<const F: u8 = NO_FAULT> = Loom<F, 0, OLDEST_STARVES_FIRST_PAUSES>;
/// Sleepers judge themselves, at their starvation deadline.
type SelfJudged<const F: u8 = NO_FAULT> = Loom<F, 0, SELF_JUDGED>;
/// Sleepers judge themselves, and starving unlocks nudge a sleeping bottom
/// sleeper instead of handing it the lock.
type Nudging<const F: u8 = NO_FAULT> = Loom<F, 0, SELF_JUDGED_NUDGED>;
/// `Nudging`, but nudges hand the nudged thread no SPINNING, as beside
/// another spinner.
type NudgingBesideSpinner<const F: u8 = NO_FAULT> = Loom<F, 0, SELF_JUDGED_NUDGED_BESIDE_SPINNER>;
/// `ByAge`, with nudges.
type ByAgeNudged<const F: u8 = NO_FAULT> = Loom<F, 0, BY_AGE_NUDGED>;
/// Only the waiter whose starvation clock started first starves.
type ByAge<const F: u8 = NO_FAULT> = Loom<F, 0, BY_AGE>;
/// Sleepers judge themselves, and the waiter whose starvation clock started
/// first starves by age too.
type SelfJudgedByAge<const F: u8 = NO_FAULT> = Loom<F, 0, SELF_JUDGED_BY_AGE>;
/// No fault, and the first `N` futex waits of an execution that would block
/// return at once instead; starvation rule `R`.
type Spurious<const N: usize, const R: u8 = NOBODY_STARVES> = Loom<NO_FAULT, N, R>;

/// A loom platform, whatever its parameters: what `Guarded` needs.
trait Model: Platform<State = LoomState, Parker: Parker<Deadline = ModelDeadline>> {}

impl<const F: u8, const S: usize, const R: u8, K> Model for Loom<F, S, R, K> where
    K: Parker<Deadline = ModelDeadline> + 'static
{
}

/// [`Fifo`] on the portable parker of macOS, Windows and the BSDs, over
/// loom's threads (`crate::platform::park_model`).
type PortableFifo = Loom<NO_FAULT, 0, NOBODY_STARVES, PortableModel>;

/// Per-test event counts, summed over all explored executions, indexed by
/// `Event as usize`. Loom runs a model's threads as coroutines on the test's
/// own OS thread, so a std thread-local is per test.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seen {
    events: [usize; EVENTS],
    spurious: usize,
}

impl Default for Seen {
    fn default() -> Self {
        Seen { events: [0; EVENTS], spurious: 0 }
    }
}

impl Seen {
    fn of(&self, e: Event) -> usize {
        self.events[e as usize]
    }

    /// The events seen so far in this model.
    fn now() -> Seen {
        SEEN.with(|s| *s.borrow())
    }

    /// The events seen since `before`: of this execution, if `before` was
    /// taken at its start.
    fn since(&self, before: &Seen) -> Seen {
        let mut d = *self;
        for (e, b) in d.events.iter_mut().zip(before.events) {
            *e -= b;
        }
        d.spurious -= before.spurious;
        d
    }
}

/// A gate that one thread waits at until the model opens it. Blocking, not
/// yielding, for the reason given in `starving`; loom's `Notify` may return
/// spuriously, so the wait loops on the flag.
pub(crate) struct Gate {
    go: Notify,
    open: AtomicBool,
}

impl Gate {
    fn new() -> &'static Gate {
        Box::leak(Box::new(Gate { go: Notify::new(), open: AtomicBool::new(false) }))
    }

    fn open(&self) {
        self.open.store(true, Relaxed);
        self.go.notify();
    }

    fn pass(&self) {
        while !self.open.load(Relaxed) {
            self.go.wait();
        }
    }
}

/// A counter that the execution's threads share (leaked, as every value a
/// model's threads borrow for `'static`).
fn counter() -> &'static AtomicUsize {
    Box::leak(Box::new(AtomicUsize::new(0)))
}

/// A flag that the execution's threads share, initially clear.
fn flag() -> &'static AtomicBool {
    Box::leak(Box::new(AtomicBool::new(false)))
}

/// Steering of one execution: how many starvation judgements were made, and
/// the thread (by loom id) whose first judgement pauses until `go` is set.
#[derive(Default)]
struct Steer {
    judgements: usize,
    pauser: Option<(thread::ThreadId, &'static Notify)>,
    /// How many more timed futex waits time out instead of blocking.
    timeouts: usize,
    /// If set, only this thread's timed waits may time out (and those of
    /// `more_timeout_threads`).
    timeout_thread: Option<thread::ThreadId>,
    more_timeout_threads: Vec<thread::ThreadId>,
    /// If set, counts the sleepers that marked themselves starving.
    marks: Option<&'static AtomicUsize>,
    /// If set, counts the pushes (`Event::Parked`).
    parks: Option<&'static AtomicUsize>,
    /// If set, this thread waits at the gate when its next untimed sleep
    /// ends (`hold_after_wake`).
    wake_hold: Option<(thread::ThreadId, &'static Gate)>,
    /// If set, the timeout thread's first starvation deadline waits for it.
    starve_gate: Option<&'static Gate>,
    /// If set, the timeout thread waits for the gate when it records the
    /// event, once.
    event_gate: Option<(Event, &'static Gate)>,
    /// If set, this thread waits for the gate when it records the event,
    /// once (`hold_thread_at_event`).
    thread_gate: Option<(thread::ThreadId, Event, &'static Gate)>,
    /// If set, sleepers are backed up (`Platform::backlog_sleepers`) when a
    /// stack owner leaves more than this many; if not, never.
    backlog: Option<u32>,
    /// The timeout thread's way through a starvation deadline that found
    /// it popped (`popped_starver_state`).
    popped_starver: PoppedStarver,
    /// How many starvation clocks started in this execution (the last
    /// `Platform::clock` value handed out).
    clocks: u64,
    /// The thread whose looks are counted (`count_my_looks`), and whether
    /// its last event was a look (`Event::Look`).
    looker: Option<thread::ThreadId>,
    in_look: bool,
    /// Its looks, and those that set STARVING (`Event::StarvingSet` right
    /// after the look's `Event::Look`).
    looks: usize,
    looks_that_starved: usize,
}

/// Where the timeout thread is after a starvation deadline that found it
/// popped ([`Event::PoppedWhileStarving`]).
#[derive(Default, Clone, Copy, PartialEq, Eq, Debug)]
enum PoppedStarver {
    /// No such deadline yet.
    #[default]
    NotPopped,
    /// Popped at its deadline; it has not pushed itself again.
    Popped,
    /// ... and it pushed itself again: its next sleep must have a
    /// deadline.
    PushedAgain,
    /// ... and it had one (a timed park).
    Timed,
    /// ... and it had none (an untimed park): nothing bounds its wait.
    Untimed,
}

thread_local! {
    static SEEN: RefCell<Seen> = RefCell::new(Seen::default());
    static STEER: RefCell<Steer> = RefCell::new(Steer::default());
    static PAUSED: Cell<bool> = const { Cell::new(false) };
}

pub(crate) fn record(event: Event) {
    SEEN.with(|s| s.borrow_mut().events[event as usize] += 1);
    STEER.with(|s| {
        let mut s = s.borrow_mut();
        if s.looker == Some(thread::current().id()) {
            let look = event as usize == Event::Look as usize;
            let starved = event as usize == Event::StarvingSet as usize;
            s.looks_that_starved += usize::from(s.in_look && starved);
            s.looks += usize::from(look);
            s.in_look = look;
        }
        if s.timeout_thread == Some(thread::current().id()) {
            use PoppedStarver::*;
            s.popped_starver = match (s.popped_starver, event) {
                (NotPopped, Event::PoppedWhileStarving) => Popped,
                (Popped, Event::Parked) => PushedAgain,
                (state, _) => state,
            };
        }
    });
    if event as usize == Event::Starved as usize
        && let Some(marks) = STEER.with(|s| s.borrow().marks)
    {
        marks.fetch_add(1, Relaxed);
    }
    if event as usize == Event::Parked as usize
        && let Some(parks) = STEER.with(|s| s.borrow().parks)
    {
        parks.fetch_add(1, Relaxed);
    }
    let gate = STEER.with(|s| {
        let mut s = s.borrow_mut();
        match s.event_gate {
            Some((e, go))
                if e as usize == event as usize
                    && s.timeout_thread == Some(thread::current().id()) =>
            {
                s.event_gate = None;
                Some(go)
            }
            _ => None,
        }
    });
    if let Some(gate) = gate {
        gate.pass();
    }
    let gate = STEER.with(|s| {
        let mut s = s.borrow_mut();
        match s.thread_gate {
            Some((id, e, go)) if e as usize == event as usize && id == thread::current().id() => {
                s.thread_gate = None;
                Some(go)
            }
            _ => None,
        }
    });
    if let Some(gate) = gate {
        gate.pass();
    }
}

/// Called by the loom parker before each sleep (`timed`: with a
/// deadline): follows the timeout thread's first sleep after it pushed
/// itself again, having been popped at its starvation deadline.
pub(crate) fn note_sleep(timed: bool) {
    STEER.with(|s| {
        let mut s = s.borrow_mut();
        if s.timeout_thread == Some(thread::current().id())
            && s.popped_starver == PoppedStarver::PushedAgain
        {
            s.popped_starver = if timed { PoppedStarver::Timed } else { PoppedStarver::Untimed };
        }
    });
}

/// The loom platform's `clock`: 1 for the first starvation clock started
/// in the execution, 2 for the next, and so on.
pub(crate) fn next_clock() -> u64 {
    STEER.with(|s| {
        let mut s = s.borrow_mut();
        s.clocks += 1;
        s.clocks
    })
}

/// Counts the current thread's looks in this execution (`my_looks`).
fn count_my_looks() {
    STEER.with(|s| s.borrow_mut().looker = Some(thread::current().id()));
}

/// The looks of the thread that `count_my_looks`, and how many of them set
/// STARVING.
fn my_looks() -> (usize, usize) {
    STEER.with(|s| {
        let s = s.borrow();
        (s.looks, s.looks_that_starved)
    })
}

pub(crate) fn record_spurious() {
    SEEN.with(|s| s.borrow_mut().spurious += 1);
}

/// The loom platform's starvation judgement under rule `rule` (one of
/// `platform::loom::fair`) of a sleeper whose clock started at `since`
/// (`Platform::clock`).
pub(crate) fn starving(rule: u8, since: u64) -> bool {
    let first = STEER.with(|s| {
        let mut s = s.borrow_mut();
        s.judgements += 1;
        s.judgements == 1
    });
    match rule {
        OLDEST_STARVES => true,
        STARVES_ONCE => first,
        OLDEST_STARVES_FIRST_PAUSES => {
            let pause = STEER.with(|s| match s.borrow().pauser {
                Some((id, go)) if id == thread::current().id() && !PAUSED.get() => Some(go),
                _ => None,
            });
            if let Some(go) = pause {
                PAUSED.set(true);
                // Blocks: a thread that yield-waits while another one does
                // too lets loom alternate between them forever. The wait
                // orders only what the notifier did before it (see the model
                // that uses it).
                go.wait();
            }
            true
        }
        BY_AGE | BY_AGE_NUDGED | SELF_JUDGED_BY_AGE => since == 1,
        _ => false,
    }
}

/// Whether a timed futex wait that would block times out instead: yes
/// while the execution's budget (`allow_timeouts`) lasts. Where in the
/// schedule that happens is loom's choice, like any other step: the
/// timeout can land before, during or after a wake aimed at the waiter.
pub(crate) fn take_timeout() -> bool {
    STEER.with(|s| {
        let mut s = s.borrow_mut();
        let me = thread::current().id();
        let mine =
            s.timeout_thread.is_none_or(|id| id == me) || s.more_timeout_threads.contains(&me);
        let take = s.timeouts > 0 && mine;
        s.timeouts -= usize::from(take);
        take
    })
}

/// Lets `n` timed waits of this execution time out (see `take_timeout`).
fn allow_timeouts(n: usize) {
    STEER.with(|s| s.borrow_mut().timeouts = n);
}

/// Lets `n` timed waits of the current thread time out, and no other
/// thread's; if `gate` is given, the thread first waits for it when it
/// asks for its starvation deadline (after its push, before its sleep).
fn allow_my_timeouts(n: usize, gate: Option<&'static Gate>) {
    STEER.with(|s| {
        let mut s = s.borrow_mut();
        s.timeouts = n;
        s.timeout_thread = Some(thread::current().id());
        s.starve_gate = gate;
    });
}

/// Lets one more timed wait time out: the current thread's, in addition
/// to those that `allow_my_timeouts` allowed.
fn allow_one_more_of_my_timeouts() {
    STEER.with(|s| {
        let mut s = s.borrow_mut();
        s.timeouts += 1;
        s.more_timeout_threads.push(thread::current().id());
    });
}

/// Lets one more timed wait time out: the next of thread `id`'s.
fn allow_a_timeout_of(id: thread::ThreadId) {
    STEER.with(|s| {
        let mut s = s.borrow_mut();
        s.timeouts += 1;
        s.more_timeout_threads.push(id);
    });
}

/// Called by the loom platform's `starve_deadline`: the gated thread
/// waits at its gate, once.
pub(crate) fn before_starve_deadline() {
    let gate = STEER.with(|s| {
        let mut s = s.borrow_mut();
        if s.timeout_thread == Some(thread::current().id()) { s.starve_gate.take() } else { None }
    });
    if let Some(gate) = gate {
        gate.pass();
    }
}

/// The loom platform's `backlog_sleepers`: never, unless the model said
/// otherwise (`back_up_above`).
pub(crate) fn backlog_sleepers() -> u32 {
    STEER.with(|s| s.borrow().backlog.unwrap_or(u32::MAX))
}

/// Sleepers are backed up in this execution when a stack owner leaves more
/// than `n` of them.
fn back_up_above(n: u32) {
    STEER.with(|s| s.borrow_mut().backlog = Some(n));
}

/// Counts this execution's pushes from now on.
fn count_parks() -> &'static AtomicUsize {
    let parks = counter();
    STEER.with(|s| s.borrow_mut().parks = Some(parks));
    parks
}

/// Makes the current thread wait at `gate` when its first untimed sleep
/// ends: a woken thread that the model holds back, runnable but not
/// running, as a woken thread waiting for a CPU is.
fn hold_after_wake(gate: &'static Gate) {
    STEER.with(|s| s.borrow_mut().wake_hold = Some((thread::current().id(), gate)));
}

/// Makes the current thread wait at `gate` when it records `event`, once.
/// It reuses the timeout thread's gate (`Steer::event_gate`), so it also
/// makes the current thread the execution's timeout thread: call it only
/// in models that allow no timeouts.
fn hold_at_event(event: Event, gate: &'static Gate) {
    STEER.with(|s| {
        let mut s = s.borrow_mut();
        s.timeout_thread = Some(thread::current().id());
        s.event_gate = Some((event, gate));
    });
}

/// Makes the current thread wait at `gate` when it records `event`, once;
/// unlike `hold_at_event`, for any thread, the timeout thread's settings
/// untouched.
fn hold_thread_at_event(event: Event, gate: &'static Gate) {
    STEER.with(|s| s.borrow_mut().thread_gate = Some((thread::current().id(), event, gate)));
}

/// Called by the loom parker when an untimed sleep ends.
pub(crate) fn after_wake() {
    let gate = STEER.with(|s| {
        let mut s = s.borrow_mut();
        match s.wake_hold {
            Some((id, gate)) if id == thread::current().id() => {
                s.wake_hold = None;
                Some(gate)
            }
            _ => None,
        }
    });
    if let Some(gate) = gate {
        gate.pass();
    }
}

/// Makes the current thread's first starvation judgement wait for `go`.
fn pause_first_judgement_until(go: &'static Notify) {
    STEER.with(|s| s.borrow_mut().pauser = Some((thread::current().id(), go)));
}

/// A lock and the data it guards. Loom reports any access to `data` that is
/// not ordered by the lock as a data race.
struct Guarded<P: Model> {
    lock: Lock<P>,
    data: UnsafeCell<usize>,
}

impl<P: Model> Guarded<P> {
    /// Leaked on purpose: when loom reports a deadlock it unwinds the model,
    /// and loom objects dropped during that unwinding panic again (which
    /// aborts the test binary). One small leak per execution, tests only.
    fn new() -> &'static Self {
        STEER.with(|s| *s.borrow_mut() = Steer::default());
        PAUSED.set(false);
        Box::leak(Box::new(Guarded {
            lock: Lock { state: LoomState::new() },
            data: UnsafeCell::new(0),
        }))
    }

    fn increment(&self) {
        self.increment_then(false);
    }

    /// Increments, then unlocks with `unlock_fair` if `fair`.
    fn increment_then(&self, fair: bool) {
        self.lock.lock();
        self.data.with_mut(|p| {
            // SAFETY: loom checks that the lock orders this access.
            unsafe { *p += 1 }
        });
        // SAFETY: locked just above.
        unsafe {
            if fair {
                self.lock.unlock_fair();
            } else {
                self.lock.unlock();
            }
        }
    }

    /// Increments if it gets the lock by its deadline (in the model, its
    /// first sleep), and then counts the win in `won`.
    fn increment_timed(&self, won: &AtomicUsize) {
        if !(self.lock.try_lock() || self.lock.lock_until_slow(ModelDeadline::Timed)) {
            return;
        }
        self.add_one_locked();
        // SAFETY: locked just above.
        unsafe { self.lock.unlock() };
        won.fetch_add(1, Relaxed);
    }

    /// Adds one to the data; the caller holds the lock.
    fn add_one_locked(&self) {
        self.data.with_mut(|p| {
            // SAFETY: the caller holds the lock.
            unsafe { *p += 1 }
        });
    }

    /// Appends `digit` to the data, read as the order in which the threads
    /// held the lock; the caller holds the lock.
    fn append_locked(&self, digit: usize) {
        self.data.with_mut(|p| {
            // SAFETY: the caller holds the lock.
            unsafe { *p = *p * 10 + digit }
        });
    }

    /// Locks, appends `digit` and unlocks.
    fn turn(&self, digit: usize) {
        self.lock.lock();
        self.append_locked(digit);
        // SAFETY: locked just above.
        unsafe { self.lock.unlock() };
    }

    /// A barging acquisition: if `try_lock` takes the lock, appends 9 and
    /// unlocks. Returns whether it took the lock.
    fn barge(&self) -> bool {
        let took = self.lock.try_lock();
        if took {
            self.append_locked(9);
            // SAFETY: try_lock succeeded.
            unsafe { self.lock.unlock() };
        }
        took
    }

    /// Locks, and lets two waiters go to sleep one after the other: `a`
    /// (turn 1, the oldest: its starvation clock started first), then `b`
    /// (turn 2) on top of it; `a` waits at `woken`, if given, once woken.
    /// Returns `[a, b]`; the lock stays held.
    fn lock_with_two_sleepers(
        &'static self,
        woken: Option<&'static Gate>,
    ) -> [thread::JoinHandle<()>; 2] {
        self.lock.lock();
        let a = thread::spawn(move || {
            if let Some(gate) = woken {
                hold_after_wake(gate);
            }
            self.turn(1);
        });
        self.wait_for(|w| w & !FLAGS != 0);
        let oldest = self.word() & !FLAGS;
        let b = thread::spawn(move || self.turn(2));
        self.wait_for(|w| w & !FLAGS != 0 && w & !FLAGS != oldest);
        [a, b]
    }

    /// Unlocks while a barger takes the lock: the unlock is held at a gate
    /// once its release has taken the stack to serve a sleeper, and
    /// another thread takes the lock with `try_lock` (appending 9), opens
    /// the gate, and, once the stack is given back, runs `check` and
    /// unlocks. Returns the barger.
    ///
    /// # Safety
    /// The caller holds the lock, and sleepers are on the stack.
    unsafe fn unlock_beside_a_barger(
        &'static self,
        check: impl FnOnce() + 'static,
    ) -> thread::JoinHandle<()> {
        let gate = Gate::new();
        let barger = thread::spawn(move || {
            self.wait_for(|w| w & LOCKED == 0 && w & STACK_LOCKED != 0);
            assert!(self.lock.try_lock(), "the lock was not free for the barger");
            self.append_locked(9);
            gate.open();
            self.wait_for(|w| w & STACK_LOCKED == 0);
            check();
            // SAFETY: try_lock succeeded.
            unsafe { self.lock.unlock() };
        });
        hold_thread_at_event(Event::ReleasedToServe, gate);
        // SAFETY: forwarded from the caller.
        unsafe { self.lock.unlock() };
        barger
    }

    /// The state word, as an address with the flags.
    fn word(&self) -> usize {
        let w: *mut Node<P> = self.lock.state.load(Relaxed);
        w.addr()
    }

    /// Yields until the state word satisfies `cond`: steers the schedule to
    /// a state without spending preemptions on getting there (loom does not
    /// count the switch away from a yielding thread as one).
    fn wait_for(&self, cond: impl Fn(usize) -> bool) {
        while !cond(self.word()) {
            thread::yield_now();
        }
    }

    /// Yields until `n` sleepers have marked themselves starving (counted
    /// in `marks`, the execution's `Steer::marks`) and the stack is given
    /// back.
    fn wait_for_marks(&self, marks: &AtomicUsize, n: usize) {
        while marks.load(Relaxed) < n || self.word() & STACK_LOCKED != 0 {
            thread::yield_now();
        }
    }

    fn value(&self) -> usize {
        self.lock.lock();
        // SAFETY: as in `increment`.
        let v = self.data.with(|p| unsafe { *p });
        // SAFETY: locked just above.
        unsafe { self.lock.unlock() };
        v
    }
}

/// A model's preemption bounds: by default, and in the deeper run.
///
/// The default keeps `cargo test` to about 3 minutes on 2 cores: a model
/// whose scenario its gates reach without preemptions, or with fewer than
/// the deep bound, runs at that lower bound by default (its assertion that
/// the scenario happened still checks it), and `.ci/run`'s deeper run
/// (`SPINBIT_LOOM_DEEP=1`; a third of the models per CI run there) explores
/// the rest. A negative control runs at a bound where its fault is caught.
#[derive(Clone, Copy)]
struct Bound {
    default: usize,
    deep: usize,
}

const fn bound(default: usize, deep: usize) -> Bound {
    Bound { default, deep }
}

/// Held by the model being explored: the models of one test binary run one
/// at a time, whatever the test harness's thread count.
///
/// Two explorations in one process slow each other down: run two at a time,
/// the models took 270-287 s of `cargo test` on the 2-core AMD EPYC VM, one
/// at a time 208-218 s, and the longest model 118 s beside the others against
/// 46 s alone (also 46-47 s for each of two copies run at once as separate
/// processes). Two models at once made 266,269 TLB shootdowns in 15 s
/// (`/proc/interrupts`), one model 3: memory that one thread of a process
/// unmaps (presumably loom's coroutine stacks, made anew for every
/// execution) interrupts the other CPU while it runs the same process.
/// The real-thread unit tests still run beside the models.
static ONE_MODEL_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// This is the deeper run (`SPINBIT_LOOM_DEEP` is set).
fn deep_run() -> bool {
    std::env::var_os("SPINBIT_LOOM_DEEP").is_some()
}

/// Runs `f` under loom with the model's bound (or `LOOM_MAX_PREEMPTIONS`)
/// and returns the events seen over all executions.
fn explore(bound: Bound, f: impl Fn() + Sync + Send + 'static) -> Seen {
    // A model that panics (the negative controls must) poisons the mutex;
    // the next one takes it all the same, as it guards no data.
    let _alone = ONE_MODEL_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    SEEN.with(|s| *s.borrow_mut() = Seen::default());
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(if deep_run() { bound.deep } else { bound.default });
    }
    builder.check(f);
    SEEN.with(|s| *s.borrow())
}

/// `threads` threads (the model's main thread among them) each increment
/// `rounds` times; every call terminates and the count is exact.
fn exclusion<P: Model>(threads: usize, rounds: usize, bound: Bound) -> Seen {
    explore(bound, move || {
        let g = Guarded::<P>::new();
        let handles: Vec<_> = (1..threads)
            .map(|_| thread::spawn(move || (0..rounds).for_each(|_| g.increment())))
            .collect();
        (0..rounds).for_each(|_| g.increment());
        handles.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(g.value(), threads * rounds);
    })
}

/// The main thread holds the lock while `waiters` threads queue up, then
/// releases it: waiters spin, sleep, get woken.
fn held_then_released<P: Model>(waiters: usize, bound: Bound) -> Seen {
    explore(bound, move || {
        let g = Guarded::<P>::new();
        g.lock.lock();
        let handles: Vec<_> = (0..waiters).map(|_| thread::spawn(move || g.increment())).collect();
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        handles.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(g.value(), waiters);
    })
}

#[test]
fn two_threads_exclusion_and_termination() {
    let seen = exclusion::<Fifo>(2, 2, bound(3, 5));
    assert!(seen.of(Event::Parked) > 0 && seen.of(Event::Spun) > 0, "{seen:?}");
    // A second unlock guesses the word its thread's first one found
    // (`Platform::release_guess`); where the other thread arrived between
    // them, the guess is wrong.
    assert!(seen.of(Event::GuessMissed) > 0, "{seen:?}");
}

#[test]
fn three_threads_exclusion_and_termination() {
    let seen = exclusion::<Fifo>(3, 1, bound(2, 3));
    assert!(seen.of(Event::Parked) > 0, "{seen:?}");
}

// The lock on the portable parker (macOS, Windows, the BSDs) over loom's
// threads, whose timed parks give up at once unless their wake has landed
// (`crate::platform::park_model`): exclusion, termination, no lost wakeup,
// and a timeout racing a wake, as above on the futex model.

#[test]
fn two_threads_exclusion_on_the_portable_parker() {
    let seen = exclusion::<PortableFifo>(2, 2, bound(3, 4));
    assert!(seen.of(Event::Parked) > 0 && seen.of(Event::Spun) > 0, "{seen:?}");
}

#[test]
fn two_waiters_woken_on_the_portable_parker() {
    // Three waiters took 40 s at bound 2 in release.
    let seen = held_then_released::<PortableFifo>(2, bound(3, 3));
    assert!(seen.of(Event::Parked) > 0, "{seen:?}");
}

#[test]
fn timeout_races_a_wake_on_the_portable_parker() {
    let seen = timeout_races_a_wake::<PortableFifo>(bound(3, 4));
    assert!(seen.of(Event::TimedOut) > 0 && seen.of(Event::PoppedWhileLeaving) > 0, "{seen:?}");
}

#[test]
fn try_lock_mixed_with_lock() {
    explore(bound(3, 4), || {
        let g = Guarded::<Fifo>::new();
        let won = counter();
        let t = {
            thread::spawn(move || {
                if g.lock.try_lock() {
                    g.data.with_mut(|p| {
                        // SAFETY: try_lock succeeded.
                        unsafe { *p += 1 }
                    });
                    won.fetch_add(1, Relaxed);
                    // SAFETY: try_lock succeeded.
                    unsafe { g.lock.unlock() };
                }
            })
        };
        let u = thread::spawn(move || g.increment());
        g.increment();
        t.join().unwrap();
        u.join().unwrap();
        assert_eq!(g.value(), 2 + won.load(Relaxed));
    });
}

#[test]
fn spinner_retires_while_unlocker_skips_wake() {
    // One waiter becomes the spinner, the other sleeps; the unlock that sees
    // the spinner wakes nobody, and the spinner either takes the lock or
    // retires onto the stack (clearing SPINNING) while the lock is held.
    let seen = held_then_released::<Fifo>(2, bound(3, 3));
    assert!(
        seen.of(Event::WakeSkippedForSpinner) > 0
            && seen.of(Event::Parked) > 0
            && seen.of(Event::Spun) > 0,
        "{seen:?}"
    );
}

#[test]
fn unlockers_race_for_the_stack_lock() {
    // Three threads, two rounds each: an unlock finds another unlocker owning
    // the stack and leaves the wake to it.
    let seen = exclusion::<Fifo>(3, 2, bound(2, 3));
    assert!(seen.of(Event::StackBusy) > 0, "{seen:?}");
}

#[test]
fn fifo_wakes_take_the_tail() {
    // Deep bound 3: 185-222 s alone (release, 2-core AMD EPYC VM), by hand:
    // `.ci/run`'s deeper run skips it (`deep_by_hand`).
    let seen = held_then_released::<Fifo>(3, bound(2, 3));
    assert!(seen.of(Event::TailWake) > 0, "{seen:?}");
}

#[test]
fn exclusion_and_termination_with_spurious_futex_returns() {
    let seen = held_then_released::<Spurious<1>>(2, bound(3, 3));
    assert!(seen.spurious > 0, "{seen:?}");
    let seen = exclusion::<Spurious<2>>(3, 1, bound(2, 3));
    assert!(seen.spurious > 0, "{seen:?}");
}

#[test]
fn a_starving_sleeper_is_handed_the_lock() {
    // Every oldest sleeper starves: unlocks take the lock back and hand it
    // over, or set STARVING for the holder that took it first; spin
    // acquisitions look and set STARVING too.
    let seen = held_then_released::<OldestStarves>(2, bound(3, 3));
    assert!(seen.of(Event::HandOff) > 0 && seen.of(Event::HandedLock) > 0, "{seen:?}");
    let seen = exclusion::<OldestStarves>(3, 1, bound(2, 2));
    assert!(seen.of(Event::StarvingSet) > 0 && seen.of(Event::Retake) > 0, "{seen:?}");
}

#[test]
fn starvation_mode_entered_and_left() {
    // Only the first judgement finds the oldest sleeper starving: STARVING
    // is set, the hand-off finds the next sleeper fine and clears it, and
    // normal wakes resume.
    let seen = exclusion::<StarvesOnce>(3, 1, bound(2, 3));
    assert!(seen.of(Event::StarvingSet) > 0 && seen.of(Event::StarvingCleared) > 0, "{seen:?}");
    assert!(seen.of(Event::Look) > 0 && seen.of(Event::TailWake) > 0, "{seen:?}");
}

/// `ByAge` (the sleepers judged by age, only the oldest starving): the main
/// thread holds the lock while two waiters go to sleep one after the
/// other (`Guarded::lock_with_two_sleepers`). Returns the lock, still
/// held, and the sleepers.
fn two_sleepers_by_age<const F: u8>() -> (&'static Guarded<ByAge<F>>, [thread::JoinHandle<()>; 2]) {
    let g = Guarded::<ByAge<F>>::new();
    (g, g.lock_with_two_sleepers(None))
}

/// Two sleepers by age (`two_sleepers_by_age`); a third thread takes
/// SPINNING and waits at a gate before its spin, the main thread unlocks
/// (no wake: the spinner takes it) and opens the gate. If the spinner then
/// takes the lock by spinning (its one look at the word may be stale: the
/// gate orders nothing), its look must judge the oldest sleeper, starving,
/// not the newest, and set STARVING.
fn look_by_age<const F: u8>(bound: Bound) -> Seen {
    SPINNER_LOOKED.set(false);
    let seen = explore(bound, || {
        let before = Seen::now();
        let (g, sleepers) = two_sleepers_by_age::<F>();
        let gate = Gate::new();
        let spinner = thread::spawn(move || {
            count_my_looks();
            hold_thread_at_event(Event::Spun, gate);
            g.turn(3);
        });
        g.wait_for(|w| w & SPINNING != 0);
        // SAFETY: locked in `two_sleepers_by_age`.
        unsafe { g.lock.unlock() };
        gate.open();
        spinner.join().unwrap();
        sleepers.into_iter().for_each(|h| h.join().unwrap());
        let seen = Seen::now().since(&before);
        let (looks, starved) = my_looks();
        assert_eq!(looks, starved, "the look did not find the oldest sleeper starving: {seen:?}");
        if looks > 0 {
            SPINNER_LOOKED.set(true);
            assert_eq!(g.value(), 312);
        }
    });
    assert!(SPINNER_LOOKED.get(), "the spinner never took the lock by spinning: {seen:?}");
    seen
}

thread_local! {
    /// Whether the spinner of `look_by_age` looked in any execution.
    static SPINNER_LOOKED: Cell<bool> = const { Cell::new(false) };
}

#[test]
fn a_look_judges_the_oldest_sleeper() {
    // Bound 3: 189 s (release); the deeper run keeps bound 2 (14 s).
    let seen = look_by_age::<NO_FAULT>(bound(1, 2));
    assert!(seen.of(Event::Look) > 0 && seen.of(Event::HandOff) > 0, "{seen:?}");
}

#[test]
#[should_panic(expected = "the look did not find the oldest sleeper starving")]
fn broken_look_judges_the_newest_sleeper() {
    look_by_age::<LOOK_JUDGES_TOP>(bound(1, 1));
}

/// Two sleepers by age (`two_sleepers_by_age`), and the main thread
/// unlocks: its wake must judge the oldest sleeper, starving, and take the
/// lock back to hand it over, not wake it to compete.
fn wake_by_age<const F: u8>(bound: Bound) -> Seen {
    explore(bound, || {
        let before = Seen::now();
        let (g, sleepers) = two_sleepers_by_age::<F>();
        // SAFETY: locked in `two_sleepers_by_age`.
        unsafe { g.lock.unlock() };
        sleepers.into_iter().for_each(|h| h.join().unwrap());
        let seen = Seen::now().since(&before);
        assert_eq!(
            seen.of(Event::Retake),
            1,
            "the wake did not take the lock back for the oldest sleeper: {seen:?}"
        );
        assert_eq!(g.value(), 12);
    })
}

#[test]
fn a_wake_judges_the_oldest_sleeper() {
    let seen = wake_by_age::<NO_FAULT>(bound(2, 3));
    assert!(seen.of(Event::ReleasedToServe) > 0 && seen.of(Event::HandOff) > 0, "{seen:?}");
}

#[test]
#[should_panic(expected = "the wake did not take the lock back for the oldest sleeper")]
fn broken_wake_judges_the_newest_sleeper() {
    wake_by_age::<SERVE_JUDGES_TOP>(bound(1, 1));
}

/// `ByAge`, one sleeper (the oldest, so starving). The main thread unlocks
/// and waits at a gate once its release has taken the stack; another
/// thread takes the lock with `try_lock`, opens the gate, and unlocks once
/// the stack is given back. The wake, finding the lock taken, must set
/// STARVING, so that the barger's unlock hands the lock over, without
/// another wake that takes it back.
fn wake_finds_the_lock_taken<const F: u8>(bound: Bound) -> Seen {
    explore(bound, || {
        let before = Seen::now();
        let g = Guarded::<ByAge<F>>::new();
        g.lock.lock();
        let sleeper = thread::spawn(move || g.turn(1));
        g.wait_for(|w| w & !FLAGS != 0);
        // SAFETY: locked above.
        let barger = unsafe { g.unlock_beside_a_barger(|| ()) };
        barger.join().unwrap();
        sleeper.join().unwrap();
        let seen = Seen::now().since(&before);
        assert_eq!(
            seen.of(Event::Retake),
            0,
            "the barger's unlock did not hand the lock over: {seen:?}"
        );
        assert_eq!(g.value(), 91);
    })
}

#[test]
fn a_wake_that_finds_the_lock_taken_sets_starvation_mode() {
    let seen = wake_finds_the_lock_taken::<NO_FAULT>(bound(2, 3));
    assert!(seen.of(Event::StarvingSet) > 0 && seen.of(Event::HandOff) > 0, "{seen:?}");
}

#[test]
#[should_panic(expected = "the barger's unlock did not hand the lock over")]
fn broken_wake_that_finds_the_lock_taken_gives_the_stack_back_without_starvation_mode() {
    wake_finds_the_lock_taken::<SERVE_GIVES_BACK_WITHOUT_STARVING>(bound(1, 1));
}

/// Two sleepers, `a` (turn 1) below `b` (turn 2), FIFO wakes, nobody
/// starving. The main thread unlocks and waits at a gate once its release
/// has taken the stack to wake `a`; another thread takes the lock with
/// `try_lock` (turn 9), opens the gate, and unlocks once the stack is given
/// back (`a`, woken, is held until then). The wake's CAS that unlinks `a`
/// then fails (the word has `LOCKED` now), and its retry must merge the
/// flags of the word as it is: with those of its first attempt, it would
/// clear the barger's `LOCKED`.
fn barge_during_a_wake<const F: u8>(bound: Bound) -> Seen {
    explore(bound, || {
        let g = Guarded::<Fifo<F>>::new();
        let woken = Gate::new();
        let [a, b] = g.lock_with_two_sleepers(Some(woken));
        // SAFETY: locked above.
        let barger = unsafe {
            g.unlock_beside_a_barger(move || {
                assert!(g.word() & LOCKED != 0, "the barger's lock was released under it");
                woken.open();
            })
        };
        barger.join().unwrap();
        a.join().unwrap();
        b.join().unwrap();
        // `a` may lose its wake's spin to the barger and push itself again
        // on top of `b`, which is then the oldest.
        let v = g.value();
        assert!(v == 912 || v == 921, "{v}");
    })
}

#[test]
fn a_barger_takes_the_lock_while_a_wake_unlinks_the_oldest() {
    // Bound 2: 233 s (release); bound 1: 5 s.
    let seen = barge_during_a_wake::<NO_FAULT>(bound(0, 1));
    assert!(seen.of(Event::ReleasedToServe) > 0 && seen.of(Event::TailWake) > 0, "{seen:?}");
}

#[test]
#[should_panic(expected = "the barger's lock was released under it")]
fn broken_wake_merges_the_flags_of_its_first_attempt() {
    barge_during_a_wake::<POP_MERGES_STALE_FLAGS>(bound(0, 0));
}

/// A stale cached tail (`LooksNobodyStarves`: spin acquisitions look, nobody starves;
/// FIFO wakes). The main thread holds the lock while `t` (turn 1) and then
/// `x` (turn 2) go to sleep. A third thread takes `SPINNING` and is held
/// before its spin while the main thread unlocks; if it takes the lock by
/// spinning, its look caches `t` as the tail in `x`, the top. Holding the
/// lock (turn 3), it waits for a timed waiter `y` to push itself on top,
/// then unlocks, which wakes `t` (held once woken: its node stays live)
/// and leaves `x` with a tail that was popped. `y` then times out and
/// leaves from the top: `x` must take over `y`'s cached tail. The main
/// thread then takes the lock and unlocks with `unlock_fair`, which must
/// hand it to `x`; with the stale tail it would hand it to `t` again and
/// `x` would sleep for good.
fn leave_over_a_stale_tail<const F: u8>(bound: Bound) -> Seen {
    explore(bound, || {
        let g = Guarded::<LooksNobodyStarves<F>>::new();
        let (spin, pushed, woken) = (Gate::new(), Gate::new(), Gate::new());
        let [t, x] = g.lock_with_two_sleepers(Some(woken));
        let x_node = g.word() & !FLAGS;
        let spinner = thread::spawn(move || {
            hold_thread_at_event(Event::Spun, spin);
            g.lock.lock();
            let top = g.word() & !FLAGS;
            // Until the timed waiter has pushed itself.
            g.wait_for(|w| w & !FLAGS != top);
            g.append_locked(3);
            // SAFETY: locked above.
            unsafe { g.lock.unlock() };
            pushed.open();
        });
        g.wait_for(|w| w & SPINNING != 0);
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        spin.open();
        g.wait_for(|w| w & LOCKED != 0);
        let won = counter();
        let timed = thread::spawn(move || {
            allow_my_timeouts(1, None);
            hold_at_event(Event::Parked, pushed);
            g.increment_timed(won);
        });
        // Until the timed waiter has left: `x` is the top again.
        timed.join().unwrap();
        assert_eq!(g.word() & !FLAGS, x_node, "the timed waiter did not leave from the top");
        g.lock.lock();
        // SAFETY: locked just above.
        unsafe { g.lock.unlock_fair() };
        woken.open();
        spinner.join().unwrap();
        t.join().unwrap();
        x.join().unwrap();
        assert_eq!(won.load(Relaxed), 0, "the timed waiter took the lock");
        assert_eq!(g.value(), 321);
    })
}

#[test]
fn a_timed_waiter_leaves_from_the_top_over_a_stale_tail() {
    // Bound 1 exceeds loom's branch limit (the yield loops of `wait_for`);
    // the gates steer the execution to the stale tail at bound 0.
    let seen = leave_over_a_stale_tail::<NO_FAULT>(bound(0, 0));
    assert!(
        seen.of(Event::Look) > 0 && seen.of(Event::TimedOut) > 0 && seen.of(Event::HandOff) > 0,
        "{seen:?}"
    );
}

#[test]
#[should_panic(expected = "deadlock")]
fn broken_leave_from_the_top_keeps_the_new_tops_stale_tail() {
    leave_over_a_stale_tail::<LEAVE_FROM_TOP_KEEPS_STALE_TAIL>(bound(0, 0));
}

/// Sleepers that judge themselves (`SelfJudged`): the main thread holds the lock
/// while `early` waiters go to sleep one after the other, then lets one
/// more (`late`) arrive. One sleep runs until its starvation deadline:
/// waiter `starver`'s (so that the starving sleeper can be above others),
/// at whatever point loom schedules it: before, during or after the later
/// pushes and the main thread's unlock; with `gated`, only once every
/// early waiter sleeps. The sleeper that
/// starves marks itself, moves to the bottom and sets STARVING, and the
/// unlock hands the lock to it. At the end the word must be clear.
fn self_starving<const F: u8>(
    early: usize,
    starver: usize,
    gated: bool,
    late: bool,
    bound: Bound,
) -> Seen {
    explore(bound, move || {
        let g = Guarded::<SelfJudged<F>>::new();
        let gate = Gate::new();
        g.lock.lock();
        let mut handles = Vec::new();
        for i in 0..early {
            let top = g.word() & !FLAGS;
            handles.push(thread::spawn(move || {
                if i == starver {
                    allow_my_timeouts(1, gated.then_some(gate));
                }
                g.increment();
            }));
            // Until it sleeps on top of the others, or has starved and
            // moved below them.
            g.wait_for(|w| w & !FLAGS != 0 && (w & !FLAGS != top || w & STARVING != 0));
        }
        if gated {
            gate.open();
        }
        if late {
            handles.push(thread::spawn(move || g.increment()));
        }
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        let n = handles.len();
        handles.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(g.value(), n);
        assert_eq!(g.word(), 0, "the word keeps a trace of a starving sleeper");
    })
}

#[test]
fn a_sleeper_that_starves_is_handed_the_lock() {
    // One sleeper: its starvation deadline races the unlock's wake (it may
    // find itself popped already) and the unlock's hand-off.
    let seen = self_starving::<NO_FAULT>(1, 0, false, false, bound(3, 4));
    assert!(
        seen.of(Event::Starved) > 0
            && seen.of(Event::HandedLock) > 0
            && seen.of(Event::PoppedWhileStarving) > 0,
        "{seen:?}"
    );
}

/// A sleeper whose starvation deadline finds it popped already (the
/// unlock's wake won the race to the stack) and which then loses the lock
/// again (the main thread takes it back before the woken sleeper looks)
/// did not mark itself, and keeps its deadline: its next sleep starts past
/// it, and it marks itself and is handed the lock. Every execution checks
/// that a sleeper popped at its deadline that pushes itself again sleeps
/// with a deadline. With `PoppedStarverKeepsNoDeadline` it sleeps without
/// one instead (and is woken by the main thread's second unlock, so the
/// model ends), which that check reports.
fn popped_starver_loses_again<const F: u8>(bound: Bound) -> Seen {
    explore(bound, || {
        let g = Guarded::<SelfJudged<F>>::new();
        g.lock.lock();
        let sleeper = thread::spawn(move || {
            allow_my_timeouts(2, None);
            g.increment();
        });
        // Until it sleeps.
        g.wait_for(|w| w & !FLAGS != 0);
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        g.increment();
        sleeper.join().unwrap();
        assert_eq!(g.value(), 2);
        assert_eq!(g.word(), 0, "the word keeps a trace of a starving sleeper");
        // In this execution: a sleeper popped at its deadline that pushed
        // itself again slept with its deadline (past, so the sleep times
        // out and it marks itself), not without one.
        assert_ne!(
            STEER.with(|s| s.borrow().popped_starver),
            PoppedStarver::Untimed,
            "a sleeper popped at its starvation deadline slept again without one"
        );
    })
}

#[test]
fn a_popped_starver_keeps_its_deadline() {
    let seen = popped_starver_loses_again::<NO_FAULT>(bound(2, 3));
    assert!(
        seen.of(Event::PoppedWhileStarving) > 0
            && seen.of(Event::StarvedAfterPop) > 0
            && seen.of(Event::HandedLock) > 0,
        "no sleeper starved after a deadline that found it popped: {seen:?}"
    );
}

#[test]
#[should_panic(expected = "a sleeper popped at its starvation deadline slept again without one")]
fn broken_popped_starver_sleeps_without_its_deadline() {
    popped_starver_loses_again::<POPPED_STARVER_KEEPS_NO_DEADLINE>(bound(2, 3));
}

#[test]
fn a_starving_sleeper_moves_to_the_bottom_while_a_waiter_pushes() {
    // Two sleepers and a late arrival: the starving one may be the top
    // (the word must point past it, while the late push races that CAS)
    // or the bottom.
    // Bound 0 in `cargo test` (7 s at 1, the deep bound). Bound 2: 246-363
    // s alone in release (2-core AMD EPYC VM), by hand
    // (`LOOM_MAX_PREEMPTIONS=2`), past what `.ci/run` can give it.
    let seen = self_starving::<NO_FAULT>(2, 1, false, true, bound(0, 1));
    assert!(
        seen.of(Event::Starved) > 0
            && seen.of(Event::MovedFromTop) > 0
            && seen.of(Event::HandedLock) > 0,
        "{seen:?}"
    );
}

#[test]
fn a_starving_sleeper_in_the_middle_moves_to_the_bottom() {
    // Three sleepers: the middle one's move relinks its neighbours.
    let seen = self_starving::<NO_FAULT>(3, 1, true, false, bound(0, 1));
    assert!(seen.of(Event::MovedFromMiddle) > 0 && seen.of(Event::HandedLock) > 0, "{seen:?}");
}

/// A sleeper starves while the main thread holds the lock, and pauses
/// right after marking itself, owning the stack; meanwhile a second waiter
/// pushes itself and the main thread unlocks (finding the stack owned, it
/// leaves the wake to the starving sleeper). The starving sleeper's CAS
/// that sets STARVING then fails on the new word, and its release finds
/// the lock free: it takes it back and hands it over, walking the node
/// pushed meanwhile. With nudges (`P::NUDGE`), `serve` walks that node
/// first, before its retake, to see whether a nudge is pending: only the
/// failure Acquire of the CAS that set STARVING covers that walk.
fn push_while_starving<P: Model>(bound: Bound) -> Seen {
    explore(bound, || {
        let g = Guarded::<P>::new();
        let gate = Gate::new();
        g.lock.lock();
        let a = thread::spawn(move || {
            allow_my_timeouts(1, None);
            STEER.with(|s| s.borrow_mut().event_gate = Some((Event::Starved, gate)));
            g.increment();
        });
        // Until it owns the stack (only its starvation takes the stack
        // while we hold the lock), paused.
        g.wait_for(|w| w & STACK_LOCKED != 0);
        let a_node = g.word() & !FLAGS;
        let b = thread::spawn(move || g.increment());
        g.wait_for(|w| w & !FLAGS != a_node);
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        gate.open();
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(g.value(), 2);
        assert_eq!(g.word(), 0, "the word keeps a trace of a starving sleeper");
    })
}

#[test]
fn a_push_lands_while_a_starving_sleeper_owns_the_stack() {
    let seen = push_while_starving::<SelfJudged>(bound(1, 2));
    assert!(
        seen.of(Event::Starved) > 0 && seen.of(Event::Retake) > 0 && seen.of(Event::HandedLock) > 0,
        "{seen:?}"
    );
}

#[test]
fn a_push_lands_while_a_nudging_sleeper_marks_itself() {
    let seen = push_while_starving::<Nudging>(bound(1, 2));
    assert!(
        seen.of(Event::Starved) > 0 && seen.of(Event::Retake) > 0 && seen.of(Event::HandedLock) > 0,
        "{seen:?}"
    );
}

#[test]
#[should_panic(expected = "Causality violation")]
fn broken_starve_mark_failure_is_relaxed() {
    push_while_starving::<Nudging<RELAXED_STARVE_MARK>>(bound(1, 2));
}

/// A timed waiter that judges itself (`SelfJudged`) sleeps, above an untimed
/// sleeper if `other`, while the main thread holds the lock; then the main
/// thread unlocks. Two of the timed waiter's sleeps may time out: the
/// first at its starvation deadline (it marks itself, moves to the bottom
/// and sets STARVING), the second at its own deadline (it leaves the
/// stack, marked, and STARVING with it if the stack empties). Either may
/// land before, during or after the unlock's hand-off. At the end the
/// word must be clear.
fn starving_timed_waiter_leaves<const F: u8>(other: bool, bound: Bound) -> Seen {
    explore(bound, move || {
        let g = Guarded::<SelfJudged<F>>::new();
        let won = counter();
        let done = flag();
        g.lock.lock();
        let mut handles = Vec::new();
        if other {
            handles.push(thread::spawn(move || g.increment()));
            g.wait_for(|w| w & !FLAGS != 0);
        }
        let below = g.word() & !FLAGS;
        handles.push(thread::spawn(move || {
            allow_my_timeouts(2, None);
            g.increment_timed(won);
            done.store(true, Relaxed);
        }));
        // Until it sleeps on top, has starved and moved below, or has left.
        g.wait_for(|w| w & !FLAGS != below || w & STARVING != 0 || done.load(Relaxed));
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        handles.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(g.value(), won.load(Relaxed) + usize::from(other));
        assert_eq!(g.word(), 0, "the word keeps a trace of a waiter that left");
    })
}

/// A timed waiter that judges itself (`SelfJudged`) marks itself starving while
/// the main thread holds the lock, then reaches its own deadline and is
/// held at a gate once it owns the stack to leave. The main thread unlocks:
/// its look sees STARVING and the owned stack, so it waits; a third thread
/// opens the gate and tries to lock. The waiter leaves alone, clearing STARVING, and
/// the main thread's unlock, finding it cleared, releases the lock as a
/// plain unlock, whose Release publishes its critical section to the third
/// thread. If `push`, the third thread `lock`s instead, and may push
/// itself while the main thread's unlock still waits: then that release
/// owes it a wake (a plain release would leave it asleep for ever).
fn mark_leaves_while_the_holder_waits<const F: u8>(push: bool, bound: Bound) -> Seen {
    PUSHED_BEFORE_THE_RELEASE.set(false);
    explore(bound, move || {
        let g = Guarded::<SelfJudged<F>>::new();
        let won = counter();
        let unlocking = flag();
        let gate = Gate::new();
        let left = Gate::new();
        g.lock.lock();
        let t = thread::spawn(move || {
            // Both timed sleeps time out: at the starvation deadline, then at
            // its own; it waits at the gate once it owns the stack to leave.
            allow_my_timeouts(2, None);
            hold_thread_at_event(Event::Leaving, gate);
            g.increment_timed(won);
            left.open();
        });
        g.wait_for(|w| w & STARVING != 0 && w & STACK_LOCKED != 0);
        // The waiter has pushed itself for the last time: from now on, only
        // the third thread does.
        let parks = count_parks();
        let x = thread::spawn(move || {
            while !unlocking.load(Relaxed) {
                thread::yield_now();
            }
            gate.open();
            // Blocks (two threads that yield-wait at once let loom alternate
            // between them forever) until the waiter is done, then
            // `try_lock`s until it succeeds: an acquisition that reads the
            // main thread's release directly (a sleeper would be woken by
            // the main thread's later Release steps).
            left.pass();
            if push {
                g.lock.lock();
            } else {
                while !g.lock.try_lock() {
                    thread::yield_now();
                }
            }
            g.add_one_locked();
            // SAFETY: locked just above.
            unsafe { g.lock.unlock() };
        });
        g.add_one_locked();
        unlocking.store(true, Relaxed);
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        // The third thread pushes itself only while LOCKED is set, and
        // nobody but the main thread holds the lock before it.
        if parks.load(Relaxed) > 0 {
            PUSHED_BEFORE_THE_RELEASE.set(true);
        }
        t.join().unwrap();
        x.join().unwrap();
        assert_eq!(g.value(), 2 + won.load(Relaxed));
        assert_eq!(g.word(), 0, "the word keeps a trace of a waiter that left");
    })
}

/// Three users of a mutex that the last of them frees, as POSIX allows
/// for a mutex that is unlocked (and `std`'s and `parking_lot`'s mutexes
/// support): each takes the lock, counts itself in the guarded number, and
/// the one that counts the third frees the mutex after its unlock. The
/// main thread holds the lock while `w` goes to sleep, lets `x` arrive, and
/// unlocks with a wake to do. An unlock that touched the word after its
/// release could find it freed: `x` can take the lock at once, wake `w`,
/// and `w` can finish and free the mutex in between. The word's every
/// access checks that it is not freed (`LoomState::free`).
fn freed_by_last_user<const F: u8>(bound: Bound) -> Seen {
    explore(bound, move || {
        let g = Guarded::<Fifo<F>>::new();
        let use_once = move || {
            g.lock.lock();
            let last = g.data.with_mut(|p| {
                // SAFETY: loom checks that the lock orders this access.
                unsafe {
                    *p += 1;
                    *p == 3
                }
            });
            // SAFETY: locked just above.
            unsafe { g.lock.unlock() };
            if last {
                g.lock.state.free();
            }
        };
        g.lock.lock();
        let w = thread::spawn(use_once);
        // Until `w` sleeps, nobody spinning.
        g.wait_for(|w| w & !FLAGS != 0 && w & SPINNING == 0);
        let x = thread::spawn(use_once);
        g.data.with_mut(|p| {
            // SAFETY: locked above.
            unsafe { *p += 1 }
        });
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        w.join().unwrap();
        x.join().unwrap();
    })
}

#[test]
fn freed_by_its_last_user() {
    let seen = freed_by_last_user::<NO_FAULT>(bound(2, 3));
    // The unlock's wake, and `x`'s unlock finding the stack owned by it.
    assert!(seen.of(Event::TailWake) > 0 && seen.of(Event::StackBusy) > 0, "{seen:?}");
}

#[test]
#[should_panic(expected = "after its last user freed it")]
fn broken_unlock_takes_the_stack_after_its_release() {
    freed_by_last_user::<RELEASE_THEN_WAKE>(bound(2, 3));
}

#[test]
fn a_starving_unlock_releases_once_the_mark_has_left() {
    let seen = mark_leaves_while_the_holder_waits::<NO_FAULT>(false, bound(0, 1));
    assert!(
        seen.of(Event::LeftStarving) > 0 && seen.of(Event::StarvingEndedAtUnlock) > 0,
        "{seen:?}"
    );
}

#[test]
#[should_panic(expected = "Causality violation")]
fn broken_starving_unlock_releases_with_a_relaxed_rmw() {
    mark_leaves_while_the_holder_waits::<RELAXED_STARVING_RELEASE>(false, bound(0, 1));
}

#[test]
fn a_starving_unlock_wakes_a_push_once_the_mark_has_left() {
    let seen = mark_leaves_while_the_holder_waits::<NO_FAULT>(true, bound(0, 1));
    assert!(PUSHED_BEFORE_THE_RELEASE.get(), "no push before the release: {seen:?}");
    assert!(seen.of(Event::StarvingEndedAtUnlock) > 0 && seen.of(Event::TailWake) > 0, "{seen:?}");
}

#[test]
#[should_panic(expected = "deadlock")]
fn broken_starving_unlock_releases_without_its_wake_once_the_mark_has_left() {
    mark_leaves_while_the_holder_waits::<STARVING_ENDED_RELEASES_WITHOUT_WAKE>(true, bound(0, 1));
}

/// Two sleepers mark themselves starving while the main thread holds the
/// lock: `a` (digit 1), then `t`, a timed waiter, which marks itself right
/// above it, on top, then reaches its own deadline and leaves from the
/// top. `a` is still marked on the stack, so starvation mode must stay:
/// the main thread's unlock hands `a` the lock, and its `try_lock` right
/// after (digit 9) cannot come first.
fn mark_leaves_from_above_a_mark<const F: u8>(bound: Bound) -> Seen {
    BARGE_REFUSED.set(false);
    explore(bound, move || {
        let g = Guarded::<SelfJudged<F>>::new();
        let left = Gate::new();
        g.lock.lock();
        let a = thread::spawn(move || {
            allow_my_timeouts(1, None);
            g.turn(1);
        });
        g.wait_for(|w| w & STARVING != 0);
        let t = thread::spawn(move || {
            // Its starvation deadline, then its own.
            allow_one_more_of_my_timeouts();
            allow_one_more_of_my_timeouts();
            let won = g.lock.try_lock() || g.lock.lock_until_slow(ModelDeadline::Timed);
            assert!(!won, "the timed waiter took a lock that the main thread holds");
            left.open();
        });
        // Blocks (a yield loop here lets loom read the flag stale for ever
        // at the deeper bound).
        left.pass();
        // Every value of the word since `a`'s mark has had STARVING, unless
        // the leave from the top cleared it.
        assert_ne!(g.word() & STARVING, 0, "a marked sleeper was left without starvation mode");
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        if !g.barge() {
            BARGE_REFUSED.set(true);
        }
        a.join().unwrap();
        t.join().unwrap();
        let order = g.value().to_string();
        assert!(order.starts_with('1'), "a marked sleeper was overtaken: order {order}");
        assert_eq!(g.word(), 0, "the word keeps a trace of a starving sleeper");
    })
}

#[test]
fn a_mark_leaves_from_above_another_mark() {
    let seen = mark_leaves_from_above_a_mark::<NO_FAULT>(bound(1, 2));
    assert!(BARGE_REFUSED.get(), "the main thread's try_lock never failed: {seen:?}");
    assert!(seen.of(Event::Starved) > 1 && seen.of(Event::LeftStarving) > 0, "{seen:?}");
}

#[test]
#[should_panic(expected = "a marked sleeper was left without starvation mode")]
fn broken_leave_from_the_top_ends_starvation_mode_over_a_mark() {
    mark_leaves_from_above_a_mark::<LEAVE_FROM_TOP_ENDS_STARVING>(bound(0, 0));
}

thread_local! {
    /// Set when, in one execution of `marks_in_order` or
    /// `mark_leaves_from_above_a_mark`, the main thread's barging
    /// `try_lock` failed: a hand-off had kept the lock from it.
    static BARGE_REFUSED: Cell<bool> = const { Cell::new(false) };
    /// Set when, in one execution of `mark_leaves_while_the_holder_waits`,
    /// a waiter pushed itself before the main thread's release.
    static PUSHED_BEFORE_THE_RELEASE: Cell<bool> = const { Cell::new(false) };
}

/// Two sleepers mark themselves starving one after the other while the
/// main thread holds the lock: `a` first (the main thread waits for the
/// STARVING it sets), then `b`, pushed after that, on top of `c`, an
/// unmarked sleeper, if `between`. Then the main thread unlocks. The
/// hand-offs must serve the marked sleepers in the order they marked
/// themselves (the bound in the crate docs counts on it): `a`, then `b`,
/// and `c` last. Each thread appends its digit to the guarded number.
///
/// If `barge`, `b` is held at a gate once woken (runnable, not running,
/// as a woken thread waiting for a CPU is), `a` is held at another if its
/// unlock releases the lock to wake `b`, and the main thread, once `a` has
/// unlocked or is held so, tries to barge in with `try_lock` (digit 9),
/// then opens the gates; `c` may come before or after the main thread.
/// `b` marked itself one mark after `a`, so the bound gives it at most
/// m + 1 = 2 critical sections from its mark, the main
/// thread's and `a`'s: the hand-off to `a` must keep starvation mode for
/// `b`, judging the next oldest sleeper (not the newest, `c`), and the
/// order must start with 12.
fn marks_in_order<const F: u8>(between: bool, barge: bool, bound: Bound) -> Seen {
    BARGE_REFUSED.set(false);
    explore(bound, move || {
        let g = Guarded::<SelfJudged<F>>::new();
        let marks = counter();
        STEER.with(|s| s.borrow_mut().marks = Some(marks));
        let a_done = flag();
        let (a_gate, b_gate) = (Gate::new(), Gate::new());
        g.lock.lock();
        let mut handles = vec![thread::spawn(move || {
            allow_my_timeouts(1, None);
            if barge {
                // Held between the release and the wake of an unlock that
                // is not a hand-off (there is none while `b` is marked).
                hold_thread_at_event(Event::ReleasedToServe, a_gate);
            }
            g.turn(1);
            a_done.store(true, Relaxed);
        })];
        // Until `a` has marked itself and set STARVING.
        g.wait_for(|w| w & STARVING != 0);
        if between {
            let below = g.word() & !FLAGS;
            handles.push(thread::spawn(move || g.turn(3)));
            g.wait_for(|w| w & !FLAGS != below);
        }
        handles.push(thread::spawn(move || {
            allow_one_more_of_my_timeouts();
            if barge {
                // Its sleep after its mark is untimed: held once woken.
                hold_after_wake(b_gate);
            }
            g.turn(2);
        }));
        // Until `b` has marked itself and given the stack back.
        g.wait_for_marks(marks, 2);
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        if barge {
            // Once `a` has unlocked, or is held at its gate with the lock
            // released; `b` is held at its gate once woken: handed the
            // lock, it holds it; merely woken, it does not yet.
            let released = |w: usize| w & (LOCKED | STACK_LOCKED) == STACK_LOCKED;
            while !(a_done.load(Relaxed) || released(g.word())) {
                thread::yield_now();
            }
            if !g.barge() {
                BARGE_REFUSED.set(true);
            }
            a_gate.open();
            b_gate.open();
        }
        handles.into_iter().for_each(|h| h.join().unwrap());
        let order = g.value().to_string();
        if barge {
            assert!(order.starts_with("12"), "a marked sleeper was overtaken: order {order}");
            assert_eq!(order.contains('3'), between, "order {order}");
        } else {
            assert_eq!(order, if between { "123" } else { "12" }, "served out of mark order");
        }
        assert_eq!(g.word(), 0, "the word keeps a trace of a starving sleeper");
    })
}

/// Sleeper `a` marks itself starving while the main thread holds the lock
/// (`STARVING` set, nobody marked before it: m = 0). Then sleeper `b` marks
/// itself too, and is held at a gate while it owns the stack (inside
/// `starve`). The main thread unlocks: its look sees `STARVING` with the
/// stack owned. A third thread tries `barges` times to barge in with
/// `try_lock` meanwhile, then opens the gate. Each holder appends its digit
/// to the guarded number (`a` 1, `b` 2, the barger 9): by the crate docs'
/// bound, `a` waits for at most m + 1 = 1 critical section once it has
/// marked itself, the main thread's, so no digit comes before its own.
fn starving_unlock_beside_a_stack_owner<const F: u8>(barges: usize, bound: Bound) -> Seen {
    explore(bound, move || {
        let g = Guarded::<SelfJudged<F>>::new();
        let marks = counter();
        STEER.with(|s| s.borrow_mut().marks = Some(marks));
        let gate = Gate::new();
        g.lock.lock();
        let mut handles = vec![thread::spawn(move || {
            allow_my_timeouts(1, None);
            g.turn(1);
        })];
        g.wait_for(|w| w & STARVING != 0);
        handles.push(thread::spawn(move || {
            allow_one_more_of_my_timeouts();
            hold_thread_at_event(Event::Starved, gate);
            g.turn(2);
        }));
        while marks.load(Relaxed) < 2 {
            thread::yield_now();
        }
        // `b` owns the stack, held at the gate.
        let unlocking = flag();
        handles.push(thread::spawn(move || {
            while !unlocking.load(Relaxed) {
                thread::yield_now();
            }
            for _ in 0..barges {
                g.barge();
            }
            gate.open();
        }));
        unlocking.store(true, Relaxed);
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        handles.into_iter().for_each(|h| h.join().unwrap());
        let order = g.value().to_string();
        let before_a = order.find('1').expect("a took the lock");
        assert_eq!(before_a, 0, "a starving sleeper was overtaken {before_a} times: order {order}");
    })
}

/// Sleeper `a` marks itself starving while the main thread holds the lock,
/// then sleeps again (untimed). The main thread unlocks once `a` is asleep
/// (with `asleep`; else at any point after the mark): a starving unlock
/// that finds it asleep nudges it and releases the lock, and `a`, once it
/// runs, marks itself anew, which hands it the lock when nobody else takes
/// it. With `barge`, a third thread (digit 9) may take the lock first, and
/// its unlock finds `a` nudged and not yet running (it skips its wake: `a`
/// holds the SPINNING its nudge handed it), running (it hands over) or
/// asleep again after its nudge (it hands over to the sleeper). `a` must get the lock in every execution, and the word
/// end clear.
fn nudged_mark<const F: u8>(asleep: bool, barge: bool, bound: Bound) -> Seen {
    nudged_mark_on::<Nudging<F>>(asleep, barge, bound)
}

/// [`nudged_mark`] on platform `P`.
fn nudged_mark_on<P: Model>(asleep: bool, barge: bool, bound: Bound) -> Seen {
    explore(bound, move || {
        let before = Seen::now();
        let g = Guarded::<P>::new();
        let marks = counter();
        STEER.with(|s| s.borrow_mut().marks = Some(marks));
        g.lock.lock();
        let mut handles = vec![thread::spawn(move || {
            allow_my_timeouts(1, None);
            g.turn(1);
        })];
        // Until `a` has marked itself and given the stack back, and, with
        // `asleep`, sleeps again.
        while marks.load(Relaxed) < 1
            || g.word() & STACK_LOCKED != 0
            || (asleep && blocked_waiters() == 0)
        {
            thread::yield_now();
        }
        if barge {
            handles.push(thread::spawn(move || g.turn(9)));
        }
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        handles.into_iter().for_each(|h| h.join().unwrap());
        let order = g.value().to_string();
        assert!(order.contains('1'), "the marked sleeper never held the lock: order {order}");
        assert_eq!(g.word(), 0, "the word keeps a trace of a nudged sleeper");
        let nudges = Seen::now().since(&before).of(Event::Nudged);
        assert!(nudges <= 1, "a sleeper was nudged {nudges} times in one lock call");
    })
}

#[test]
fn a_starving_unlock_nudges_a_sleeping_mark_which_takes_the_lock() {
    let seen = nudged_mark::<NO_FAULT>(true, false, bound(3, 4));
    assert!(
        seen.of(Event::Nudged) > 0
            && seen.of(Event::Rejoined) > 0
            && seen.of(Event::HandedLock) > 0,
        "{seen:?}"
    );
}

#[test]
fn a_starving_unlock_hands_over_to_a_running_mark_or_nudges_a_sleeping_one() {
    let seen = nudged_mark::<NO_FAULT>(false, false, bound(3, 4));
    assert!(
        seen.of(Event::Nudged) > 0 && seen.of(Event::HandOff) > seen.of(Event::Nudged),
        "{seen:?}"
    );
}

#[test]
fn a_nudged_mark_gets_the_lock_after_a_barger() {
    let seen = nudged_mark::<NO_FAULT>(true, true, bound(2, 3));
    assert!(
        seen.of(Event::Nudged) > 0
            && seen.of(Event::WakeSkippedForSpinner) > 0
            && seen.of(Event::HandedWhileAwake) > 0,
        "{seen:?}"
    );
}

/// Sleepers `a` and `b` mark themselves in that order while the main
/// thread holds the lock, and sleep again or are on their way to; with `barge`, a third
/// thread (digit 9) arrives as the main thread unlocks. Every starving
/// unlock and retake goes to the bottom sleeper, `a`: a nudge of it, a
/// release while its nudge is pending, or a hand-off. So `b` comes after
/// `a` whatever the barger does, and `b`, asleep, is nudged or handed the
/// lock in its turn.
fn nudged_marks_in_order<const F: u8>(barge: bool, bound: Bound) -> Seen {
    explore(bound, move || {
        let before = Seen::now();
        let g = Guarded::<Nudging<F>>::new();
        let marks = counter();
        STEER.with(|s| s.borrow_mut().marks = Some(marks));
        g.lock.lock();
        let mut handles = vec![thread::spawn(move || {
            allow_my_timeouts(1, None);
            g.turn(1);
        })];
        g.wait_for(|w| w & STARVING != 0);
        handles.push(thread::spawn(move || {
            allow_one_more_of_my_timeouts();
            g.turn(2);
        }));
        // Until both have marked themselves and given the stack back.
        g.wait_for_marks(marks, 2);
        if barge {
            handles.push(thread::spawn(move || g.turn(9)));
        }
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        handles.into_iter().for_each(|h| h.join().unwrap());
        let order = g.value().to_string().replace('9', "");
        assert_eq!(order, "12", "marked sleepers served out of mark order");
        assert_eq!(g.word(), 0, "the word keeps a trace of a nudged sleeper");
        let nudges = Seen::now().since(&before).of(Event::Nudged);
        assert!(nudges <= 2, "two sleepers were nudged {nudges} times in one lock call each");
        if nudges == 2 {
            BOTH_NUDGED.set(true);
        }
    })
}

thread_local! {
    /// Some execution of `nudged_marks_in_order` nudged both sleepers.
    static BOTH_NUDGED: Cell<bool> = const { Cell::new(false) };
}

#[test]
fn nudged_marks_are_served_in_mark_order() {
    BOTH_NUDGED.set(false);
    let seen = nudged_marks_in_order::<NO_FAULT>(false, bound(1, 1));
    assert!(BOTH_NUDGED.get() && seen.of(Event::Rejoined) > 1, "{seen:?}");
}

#[test]
fn nudged_marks_are_served_in_mark_order_beside_a_barger() {
    let seen = nudged_marks_in_order::<NO_FAULT>(true, bound(0, 1));
    assert!(seen.of(Event::Nudged) > 1 && seen.of(Event::Rejoined) > 1, "{seen:?}");
}

#[test]
#[should_panic(expected = "served out of mark order")]
fn broken_later_mark_below_the_earlier_one_is_nudged_first() {
    nudged_marks_in_order::<MARKED_BELOW_EARLIER_MARKS>(false, bound(0, 0));
}

/// A timed sleeper marks itself starving and sleeps again until its own
/// deadline; the holder's starving unlock may nudge it while that sleep
/// times out (the parker's timeout racing the nudge), after which it marks
/// itself anew, takes the lock or leaves at its deadline. The word must end
/// clear.
fn nudged_timed_mark(bound: Bound) -> Seen {
    explore(bound, move || {
        let g = Guarded::<Nudging>::new();
        let marks = counter();
        STEER.with(|s| s.borrow_mut().marks = Some(marks));
        let done = flag();
        g.lock.lock();
        let h = thread::spawn(move || {
            allow_my_timeouts(2, None);
            if g.lock.try_lock() || g.lock.lock_until_slow(ModelDeadline::Timed) {
                g.append_locked(1);
                // SAFETY: locked just above.
                unsafe { g.lock.unlock() };
            }
            done.store(true, Relaxed);
        });
        while (marks.load(Relaxed) < 1 || g.word() & STACK_LOCKED != 0) && !done.load(Relaxed) {
            thread::yield_now();
        }
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        h.join().unwrap();
        assert_eq!(g.word(), 0, "the word keeps a trace of a nudged timed sleeper");
    })
}

#[test]
fn a_timed_mark_nudged_at_its_deadline_takes_the_lock_or_leaves() {
    let seen = nudged_timed_mark(bound(3, 3));
    assert!(
        seen.of(Event::Nudged) > 0
            && seen.of(Event::Rejoined) > 0
            && seen.of(Event::LeftStarving) > 0,
        "{seen:?}"
    );
}

/// A sleeper marks itself starving and sleeps again; the holder's starving
/// unlock nudges it, and a third thread takes the lock and unlocks it with
/// `unlock_fair`, which may pop the nudged sleeper before it runs: it then
/// finds itself popped and takes the hand-off.
fn fair_unlock_pops_a_nudged_mark(bound: Bound) -> Seen {
    explore(bound, move || {
        let g = Guarded::<Nudging>::new();
        let marks = counter();
        STEER.with(|s| s.borrow_mut().marks = Some(marks));
        g.lock.lock();
        let mut handles = vec![thread::spawn(move || {
            allow_my_timeouts(1, None);
            g.turn(1);
        })];
        while marks.load(Relaxed) < 1 || g.word() & STACK_LOCKED != 0 || blocked_waiters() == 0 {
            thread::yield_now();
        }
        handles.push(thread::spawn(move || {
            g.lock.lock();
            g.append_locked(9);
            // SAFETY: locked just above.
            unsafe { g.lock.unlock_fair() };
        }));
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        handles.into_iter().for_each(|h| h.join().unwrap());
        let order = g.value().to_string();
        assert!(order.contains('1'), "the marked sleeper never held the lock: order {order}");
        assert_eq!(g.word(), 0, "the word keeps a trace of a nudged sleeper");
    })
}

#[test]
fn a_fair_unlock_pops_a_nudged_mark() {
    let seen = fair_unlock_pops_a_nudged_mark(bound(2, 2));
    assert!(seen.of(Event::Nudged) > 0 && seen.of(Event::PoppedAfterNudge) > 0, "{seen:?}");
}

#[test]
#[should_panic(expected = "nudged 2 times in one lock call")]
fn broken_sleeper_asleep_again_after_its_nudge_is_nudged_again() {
    nudged_mark::<NUDGES_AGAIN>(true, true, bound(2, 2));
}

/// Two sleepers by age (the older starves, judged by age: it has not
/// marked itself), and the main thread unlocks: its wake takes the lock
/// back for the oldest and finds it asleep, nudges it and releases the
/// lock; the nudged sleeper marks itself now and takes the free lock, and
/// its unlock wakes the other.
fn nudged_by_age<const F: u8>(bound: Bound) -> Seen {
    explore(bound, || {
        let g = Guarded::<ByAgeNudged<F>>::new();
        let sleepers = g.lock_with_two_sleepers(None);
        // SAFETY: locked in `lock_with_two_sleepers`.
        unsafe { g.lock.unlock() };
        sleepers.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(g.value(), 12, "the oldest sleeper was overtaken");
        assert_eq!(g.word(), 0, "the word keeps a trace of a nudged sleeper");
    })
}

#[test]
fn a_nudged_sleeper_judged_by_age_marks_itself_and_takes_the_lock() {
    let seen = nudged_by_age::<NO_FAULT>(bound(2, 3));
    assert!(
        seen.of(Event::Nudged) > 0 && seen.of(Event::Rejoined) > 0 && seen.of(Event::Starved) > 0,
        "{seen:?}"
    );
}

#[test]
#[should_panic(expected = "deadlock")]
fn broken_nudged_sleeper_marks_itself_without_recording_it() {
    nudged_by_age::<NUDGED_MARKS_WITHOUT_RENEWAL>(bound(1, 1));
}

#[test]
#[should_panic(expected = "deadlock")]
fn broken_nudge_keeps_the_lock() {
    nudged_mark::<NUDGE_KEEPS_LOCK>(true, false, bound(0, 0));
}

#[test]
#[should_panic(expected = "deadlock")]
fn broken_nudge_releases_the_lock_without_waking_the_sleeper() {
    nudged_mark::<NUDGE_WITHOUT_WAKE>(true, false, bound(0, 0));
}

/// The barger's unlock beside a nudge that handed no SPINNING (as when
/// another thread holds the bit): it finds the nudge pending and releases
/// the lock again (`serve`'s give-back), the path that the handed bit
/// spares `a_nudged_mark_gets_the_lock_after_a_barger`.
#[test]
fn a_nudged_mark_gets_the_lock_after_a_barger_when_the_nudge_hands_no_spin() {
    let seen = nudged_mark_on::<NudgingBesideSpinner>(true, true, bound(2, 3));
    assert!(
        seen.of(Event::Nudged) > 0
            && seen.of(Event::NudgePending) > 0
            && seen.of(Event::HandedWhileAwake) > 0,
        "{seen:?}"
    );
}

#[test]
#[should_panic(expected = "deadlock")]
fn broken_nudged_sleeper_sleeps_again_without_marking_itself() {
    nudged_mark::<NUDGED_SLEEPS_AGAIN>(true, false, bound(0, 0));
}

#[test]
#[should_panic(expected = "the word keeps a trace of a nudged sleeper")]
fn broken_nudged_sleeper_keeps_the_spin_bit_its_nudge_handed_it() {
    nudged_mark::<NUDGED_KEEPS_SPIN>(true, false, bound(0, 0));
}

/// A nudge pending past starvation mode. Sleeper `n` (digit 1) sleeps on
/// an unmarked node; a timed waiter marks itself below it and leaves at
/// its deadline, so starvation mode outlives it with `n` the oldest
/// sleeper. The main thread's unlock nudges `n` (asleep) and releases the
/// lock; `n` stops (a gate) once it has taken the nudge, before it marks
/// itself anew. The main thread takes the lock again; its unlock finds the
/// mode ended and `n`'s nudge pending (the nudge handed `n` no SPINNING,
/// as when another thread holds the bit; one that did would make the
/// unlock skip its wake), and must leave the wake to `n`, giving the stack
/// back. The main thread takes the lock a third time and opens the gate:
/// `n` marks itself anew and waits for its hand-off, which the third
/// unlock makes. A plain wake at the second unlock would pop `n` with its
/// node still looking nudged: once pushed again and marked, it would look
/// on its way to the stack for good, and the third unlock would release
/// the lock without a wake.
fn nudge_pending_past_starvation_mode<const F: u8>(bound: Bound) -> Seen {
    explore(bound, move || {
        let g = Guarded::<NudgingBesideSpinner<F>>::new();
        let (left, rejoined, done) = (Gate::new(), Gate::new(), flag());
        g.lock.lock();
        let n = thread::spawn(move || {
            hold_thread_at_event(Event::Rejoined, rejoined);
            g.turn(1);
            done.store(true, Relaxed);
        });
        while blocked_waiters() == 0 {
            thread::yield_now();
        }
        let t = thread::spawn(move || {
            // Its starvation deadline, then its own.
            allow_my_timeouts(2, None);
            let won = g.lock.try_lock() || g.lock.lock_until_slow(ModelDeadline::Timed);
            assert!(!won, "the timed waiter took a lock that the main thread holds");
            // Its own last write to the word kept STARVING (`n` sleeps, the
            // main thread waits at the gate): read by the thread that wrote
            // it, since the gate orders nothing.
            assert_ne!(g.word() & STARVING, 0, "the timed waiter's mark did not outlive it");
            left.open();
        });
        left.pass();
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        g.lock.lock();
        // SAFETY: locked just above.
        unsafe { g.lock.unlock() };
        g.lock.lock();
        // With the fault, `n` was popped and sleeps again: its next sleep
        // may reach its starvation deadline and mark it.
        allow_a_timeout_of(n.thread().id());
        rejoined.open();
        // Until `n` sleeps again (or is done).
        while blocked_waiters() == 0 && !done.load(Relaxed) {
            thread::yield_now();
        }
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        n.join().unwrap();
        t.join().unwrap();
        assert_eq!(g.value(), 1, "the sleeper never held the lock");
        assert_eq!(g.word(), 0, "the word keeps a trace of a nudged sleeper");
    })
}

#[test]
fn a_nudge_pending_past_starvation_mode_is_not_overtaken() {
    let seen = nudge_pending_past_starvation_mode::<NO_FAULT>(bound(1, 3));
    assert!(
        seen.of(Event::NudgePending) > 0
            && seen.of(Event::LeftStarving) > 0
            && seen.of(Event::Starved) > 1
            && seen.of(Event::HandedLock) > 0,
        "{seen:?}"
    );
}

#[test]
#[should_panic(expected = "deadlock")]
fn broken_wake_overtakes_a_pending_nudge() {
    nudge_pending_past_starvation_mode::<SERVE_WAKES_PENDING_NUDGE>(bound(0, 0));
}

#[test]
fn a_starving_unlock_waits_for_the_stack_owner() {
    let seen = starving_unlock_beside_a_stack_owner::<NO_FAULT>(2, bound(0, 1));
    assert!(seen.of(Event::Starved) > 1 && seen.of(Event::HandedLock) > 0, "{seen:?}");
}

#[test]
#[should_panic(expected = "a starving sleeper was overtaken")]
fn broken_starving_unlock_releases_while_the_stack_is_owned() {
    starving_unlock_beside_a_stack_owner::<STARVING_UNLOCK_RELEASES_WHEN_OWNED>(2, bound(0, 0));
}

/// A mark passes a mutex sleeper that other threads judge starving but
/// that has not marked itself (its timer fired and it has not run yet):
/// it marks itself once it runs, and served before the marks it would be
/// nudged and hold up their hand-offs until then. Sleeper `a` (digit 1)
/// pushes itself first, so its clock is the execution's first and it
/// starves by age (`SelfJudgedByAge`); its own sleep never times out.
/// Sleeper `b` (digit 2) pushes above it and marks itself at its deadline:
/// it moves below `a`, the main thread's unlock hands it the lock, and its
/// hand-off keeps starvation mode for `a`, judged starving: order 21.
fn mark_passes_a_judged_sleeper<const F: u8>(bound: Bound) -> Seen {
    explore(bound, || {
        let g = Guarded::<SelfJudgedByAge<F>>::new();
        let marks = counter();
        STEER.with(|s| s.borrow_mut().marks = Some(marks));
        g.lock.lock();
        let a = thread::spawn(move || g.turn(1));
        // Until `a` has pushed itself.
        g.wait_for(|w| w & !FLAGS != 0);
        let b = thread::spawn(move || {
            allow_my_timeouts(1, None);
            g.turn(2);
        });
        // Until `b` has marked itself and given the stack back.
        g.wait_for_marks(marks, 1);
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(g.value(), 21, "a mark stopped above a sleeper judged starving but not marked");
        assert_eq!(g.word(), 0, "the word keeps a trace of a starving sleeper");
    })
}

#[test]
fn a_mark_passes_a_sleeper_judged_starving_but_not_marked() {
    let seen = mark_passes_a_judged_sleeper::<NO_FAULT>(bound(1, 2));
    assert!(seen.of(Event::MovedFromTop) > 0 && seen.of(Event::HandOff) > 1, "{seen:?}");
}

#[test]
#[should_panic(expected = "a mark stopped above a sleeper judged starving but not marked")]
fn broken_mark_stops_above_a_sleeper_judged_starving_but_not_marked() {
    mark_passes_a_judged_sleeper::<MARK_STOPS_ABOVE_JUDGED>(bound(0, 0));
}

#[test]
fn marked_sleepers_are_handed_the_lock_in_mark_order() {
    // `b` marks right above `a`: it stays where it is.
    let seen = marks_in_order::<NO_FAULT>(false, false, bound(1, 1));
    assert!(seen.of(Event::Starved) > 0 && seen.of(Event::HandedLock) > 0, "{seen:?}");
}

#[test]
fn the_second_mark_is_not_overtaken_after_the_first_hand_off() {
    // `b` right above `a`; the main thread barges in once `a` is done.
    let seen = marks_in_order::<NO_FAULT>(false, true, bound(0, 1));
    assert!(BARGE_REFUSED.get() && seen.of(Event::HandedLock) > 0, "{seen:?}");
}

#[test]
fn the_second_mark_below_an_unmarked_sleeper_is_not_overtaken() {
    // `b` moves between `c` and `a`; the hand-off to `a` must judge `b`.
    // 150 s and more at bound 1 (release): the deeper run keeps bound 0.
    let seen = marks_in_order::<NO_FAULT>(true, true, bound(0, 0));
    assert!(BARGE_REFUSED.get() && seen.of(Event::MovedAboveMarked) > 0, "{seen:?}");
}

#[test]
#[should_panic(expected = "a marked sleeper was overtaken")]
fn broken_hand_off_ends_starvation_mode_over_a_marked_sleeper() {
    marks_in_order::<HAND_OFF_ENDS_STARVING>(false, true, bound(0, 0));
}

#[test]
#[should_panic(expected = "a marked sleeper was overtaken")]
fn broken_hand_off_judges_the_newest_sleeper() {
    marks_in_order::<HAND_OFF_JUDGES_TOP>(true, true, bound(0, 0));
}

#[test]
fn a_later_mark_moves_above_the_earlier_marks() {
    // `b` moves from the top to between `c` and `a`.
    let seen = marks_in_order::<NO_FAULT>(true, false, bound(0, 0));
    assert!(seen.of(Event::MovedAboveMarked) > 0 && seen.of(Event::HandedLock) > 0, "{seen:?}");
}

#[test]
#[should_panic(expected = "served out of mark order")]
fn broken_later_mark_moves_below_the_earlier_marks() {
    marks_in_order::<MARKED_BELOW_EARLIER_MARKS>(true, false, bound(0, 0));
}

#[test]
fn a_starving_timed_waiter_leaves_alone() {
    // The only sleeper leaves marked: it takes STARVING with it.
    let seen = starving_timed_waiter_leaves::<NO_FAULT>(false, bound(2, 4));
    assert!(seen.of(Event::Starved) > 0 && seen.of(Event::LeftStarving) > 0, "{seen:?}");
}

#[test]
fn a_starving_timed_waiter_leaves_a_sleeper_behind() {
    // It leaves STARVING set over an unmarked sleeper: the unlock hands the
    // lock to that sleeper, or a release serves it, and STARVING ends.
    let seen = starving_timed_waiter_leaves::<NO_FAULT>(true, bound(1, 2));
    assert!(
        seen.of(Event::Starved) > 0
            && seen.of(Event::LeftStarving) > 0
            && seen.of(Event::HandedLock) > 0,
        "{seen:?}"
    );
}

#[test]
#[should_panic(expected = "Causality violation")]
fn broken_starving_top_retries_its_move_with_a_relaxed_look() {
    self_starving::<RELAXED_UNLINK_RETRY>(2, 1, true, true, bound(1, 1));
}

#[test]
#[should_panic(expected = "deadlock")]
fn broken_starving_sleeper_drops_the_wake_left_to_it() {
    self_starving::<STARVE_DROPS_WAKE>(1, 0, false, false, bound(3, 3));
}

#[test]
fn hand_off_with_spurious_futex_returns() {
    let seen = held_then_released::<Spurious<1, OLDEST_STARVES>>(2, bound(3, 3));
    assert!(seen.spurious > 0 && seen.of(Event::HandedLock) > 0, "{seen:?}");
}

#[test]
fn fair_and_unfair_unlocks_mixed_per_thread() {
    // Each thread chooses per round: thread i unlocks fairly in round r
    // when i + r is odd.
    let seen = explore(bound(2, 2), || {
        let g = Guarded::<Fifo>::new();
        let handles: Vec<_> = (1..3)
            .map(|i| thread::spawn(move || (0..2).for_each(|r| g.increment_then((i + r) % 2 == 1))))
            .collect();
        (0..2).for_each(|r| g.increment_then(r % 2 == 1));
        handles.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(g.value(), 6);
    });
    assert!(seen.of(Event::HandOff) > 0 && seen.of(Event::TailWake) > 0, "{seen:?}");
}

#[test]
fn unlock_fair_on_an_empty_stack_and_racing_a_push() {
    // The waiter pushes itself before or after the fair unlock looks.
    let seen = held_then_released_fair::<NO_FAULT>(1, bound(3, 4));
    assert!(seen.of(Event::FairUnlockEmpty) > 0 && seen.of(Event::HandedLock) > 0, "{seen:?}");
}

#[test]
fn bump_hands_over_and_takes_back() {
    let seen = explore(bound(3, 4), || {
        let g = Guarded::<Fifo>::new();
        g.lock.lock();
        let w = thread::spawn(move || g.increment());
        g.wait_for(|w| w & !FLAGS != 0);
        // SAFETY: locked above; bump returns with the lock held again.
        unsafe { g.lock.bump() };
        g.add_one_locked();
        // SAFETY: locked.
        unsafe { g.lock.unlock() };
        w.join().unwrap();
        assert_eq!(g.value(), 2);
    });
    assert!(seen.of(Event::HandedLock) > 0, "{seen:?}");
}

/// The main thread holds the lock while `waiters` threads queue up, then
/// releases it with `unlock_fair`.
fn held_then_released_fair<const F: u8>(waiters: usize, bound: Bound) -> Seen {
    explore(bound, move || {
        let g = Guarded::<Fifo<F>>::new();
        g.lock.lock();
        let handles: Vec<_> = (0..waiters).map(|_| thread::spawn(move || g.increment())).collect();
        // SAFETY: locked above.
        unsafe { g.lock.unlock_fair() };
        handles.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(g.value(), waiters);
    })
}

/// Four threads: an unlocker takes the lock back for a starving sleeper
/// after a barger and a retiring spinner changed the word under it.
///
/// 1. M holds the lock; A sleeps on the stack (every sleeper starves here).
/// 2. M unlocks, takes the stack, and judges A starving; its judgement
///    pauses there until X is done, steering the schedule.
/// 3. X barges in with `try_lock`.
/// 4. S finds the lock held, takes SPINNING, spins, and pushes itself.
/// 5. X unlocks and leaves the wake to M, who owns the stack.
/// 6. M's first CAS to take LOCKED back fails; the second succeeds, and the
///    hand-off walks S's node, pushed after M took the stack.
///
/// X's waits are yields on Relaxed loads, which order nothing. M's pause
/// blocks until X notifies it, which orders X's steps before M's, but not
/// S's push: X only saw that with a Relaxed load. So M reads S's node safely
/// only if its CAS that takes LOCKED back acquires the push (through the
/// release sequence that X's unlock continues).
///
/// With `gate`, S arrives only after X tried its `try_lock` (S's wait, like
/// X's, is yields on a Relaxed load): the race is then reached without
/// preemptions. Without it S may arrive at any time, and loom needs a
/// preemption to make S find the lock held by X rather than by M.
fn retake_race<const F: u8>(gate: bool, bound: Bound) -> Seen {
    explore(bound, move || {
        let g = Guarded::<OldestStarvesFirstPauses<F>>::new();
        let go: &'static Notify = Box::leak(Box::new(Notify::new()));
        let m_unlocked = flag();
        let s_done = flag();
        let x_won = counter();
        let x_tried = flag();
        g.lock.lock();
        let a = thread::spawn(move || g.increment());
        g.wait_for(|w| w & !FLAGS != 0);
        let a_node = g.word() & !FLAGS;
        pause_first_judgement_until(go);
        let s = thread::spawn(move || {
            while gate && !x_tried.load(Relaxed) {
                thread::yield_now();
            }
            g.increment();
            s_done.store(true, Relaxed);
        });
        let x = thread::spawn(move || {
            while g.word() & STACK_LOCKED == 0 && !m_unlocked.load(Relaxed) {
                thread::yield_now();
            }
            let won = g.lock.try_lock();
            x_tried.store(true, Relaxed);
            if won {
                // Holding the lock, wait for S to sleep on top of A (or to
                // be done: it may have taken the lock before us).
                while !s_done.load(Relaxed) && {
                    let w = g.word();
                    w & !FLAGS == a_node || w & SPINNING != 0
                } {
                    thread::yield_now();
                }
                g.add_one_locked();
                x_won.fetch_add(1, Relaxed);
                // SAFETY: try_lock succeeded.
                unsafe { g.lock.unlock() };
            }
            go.notify();
        });
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        m_unlocked.store(true, Relaxed);
        a.join().unwrap();
        s.join().unwrap();
        x.join().unwrap();
        assert_eq!(g.value(), 2 + x_won.load(Relaxed));
    })
}

/// By default with the gate at bound 0; the deeper run lets S arrive at
/// any time, at bound 1.
#[test]
fn retake_races_a_barger_and_a_retiring_spinner() {
    let seen = retake_race::<NO_FAULT>(!deep_run(), bound(0, 1));
    assert!(seen.of(Event::RetakeRaced) > 0 && seen.of(Event::HandedLock) > 0, "{seen:?}");
}

/// Four threads: after a wake unlinks the oldest of two sleepers, a third
/// thread, which never synchronised with the woken one, owns the stack next
/// (its `unlock_fair` walks the links and reads the cache the wake wrote).
fn unlink_then_third_owner<P: Model>(bound: Bound) -> Seen {
    explore(bound, || {
        let g = Guarded::<P>::new();
        let m_done = flag();
        let x_won = counter();
        g.lock.lock();
        let a = thread::spawn(move || g.increment());
        g.wait_for(|w| w & !FLAGS != 0);
        let a_node = g.word() & !FLAGS;
        let b = thread::spawn(move || g.increment());
        g.wait_for(|w| w & !FLAGS != a_node);
        let x = thread::spawn(move || {
            while !m_done.load(Relaxed) {
                thread::yield_now();
            }
            if g.lock.try_lock() {
                g.add_one_locked();
                x_won.fetch_add(1, Relaxed);
                // SAFETY: try_lock succeeded.
                unsafe { g.lock.unlock_fair() };
            }
        });
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        m_done.store(true, Relaxed);
        a.join().unwrap();
        b.join().unwrap();
        x.join().unwrap();
        assert_eq!(g.value(), 2 + x_won.load(Relaxed));
    })
}

#[test]
fn wake_unlinks_the_oldest_then_a_third_thread_owns_the_stack() {
    let seen = unlink_then_third_owner::<Fifo>(bound(1, 2));
    assert!(seen.of(Event::TailWake) > 0 && seen.of(Event::HandOff) > 0, "{seen:?}");
}

/// Sleepers backed up: the main thread holds the lock while `sleepers`
/// threads go to sleep one after the other, then unlocks, and locks and
/// unlocks again `sleepers - 1` times. The first unlock wakes the oldest
/// sleeper and hands it SPINNING; each later one that finds the bit still
/// held (its thread has not run yet) and the stack backed up wakes the next
/// sleeper past the spinner, handing it nothing. The spinner and the
/// sleepers woken past it race for the lock, spin beside each other and
/// sleep again; every call must still terminate with the count exact, and
/// nobody but the spinner may think it holds SPINNING (`check_spinner`).
fn wake_past_spinner<const F: u8>(sleepers: usize, bound: Bound) -> Seen {
    explore(bound, move || {
        let g = Guarded::<Fifo<F>>::new();
        back_up_above(0);
        g.lock.lock();
        let mut top = 0;
        let handles: Vec<_> = (0..sleepers)
            .map(|_| {
                let h = thread::spawn(move || g.increment());
                g.wait_for(|w| w & !FLAGS != top);
                top = g.word() & !FLAGS;
                h
            })
            .collect();
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        for _ in 1..sleepers {
            g.increment();
        }
        handles.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(g.value(), 2 * sleepers - 1);
    })
}

#[test]
fn a_backed_up_stack_wakes_past_the_spinner() {
    // Bound 1 (0.4 s in `cargo test`; 11 s at 2, the deep bound); at 3 it
    // ran for more than 4 minutes in the deeper run (release, 2-core AMD
    // EPYC VM) without finishing.
    // The woken thread, handed nothing, renews its yields and looks again
    // before it sleeps (`YieldsRenewed`).
    let seen = wake_past_spinner::<NO_FAULT>(2, bound(1, 2));
    assert!(
        seen.of(Event::WokePastSpinner) > 0
            && seen.of(Event::TailWake) > 1
            && seen.of(Event::YieldsRenewed) > 0,
        "{seen:?}"
    );
}

#[test]
fn wakes_past_the_spinner_with_three_sleepers() {
    // Four threads: two wakes past the spinner in a row, and the woken
    // threads meet the spinner and each other at the lock and the stack.
    // Bound 0: every interleaving of the threads' own switches (their
    // yields, sleeps and wakes) and none forced; at 1 it took more than
    // 6 minutes in debug and 15 in release (2-core AMD EPYC VM).
    let seen = wake_past_spinner::<NO_FAULT>(3, bound(0, 0));
    assert!(seen.of(Event::WokePastSpinner) > 1, "{seen:?}");
}

#[test]
#[should_panic(expected = "held SPINNING that another cleared")]
fn broken_wake_past_the_spinner_hands_it_spinning() {
    wake_past_spinner::<HAND_SPIN_PAST_SPINNER>(2, bound(1, 2));
}

thread_local! {
    /// Set when an execution of `push_beside_spinner` unlocked while the
    /// counting pusher owned the stack.
    static UNLOCKED_BESIDE_COUNT: Cell<bool> = const { Cell::new(false) };
}

/// The scene of the push-count models. The caller holds the lock; A, then
/// B, go to sleep; the unlock wakes A (the oldest) and hands it SPINNING,
/// and the model holds A at `hold_a` (runnable, not running, as a woken
/// thread waiting for a CPU is); with `backlog`, two sleepers are a
/// backlog from then on (the wake did not set the flag); then the caller
/// holds the lock again, with B asleep beside A's SPINNING. `after_a` runs
/// once A is asleep, before B starts, with A's node. Returns A's and B's
/// threads and what `after_a` returned.
fn woken_spinner_held_beside_a_sleeper<const F: u8, T>(
    g: &'static Guarded<Fifo<F>>,
    hold_a: &'static Gate,
    backlog: bool,
    after_a: impl FnOnce(usize) -> T,
) -> ([thread::JoinHandle<()>; 2], T) {
    let a = thread::spawn(move || {
        hold_after_wake(hold_a);
        g.increment();
    });
    g.wait_for(|w| w & !FLAGS != 0);
    let a_node = g.word() & !FLAGS;
    let then = after_a(a_node);
    let b = thread::spawn(move || g.increment());
    // Until B is asleep on top of A.
    g.wait_for(|w| ![0, a_node].contains(&(w & !FLAGS)) && w & SPINNING == 0);
    // SAFETY: the caller holds the lock.
    unsafe { g.lock.unlock() };
    if backlog {
        back_up_above(0);
    }
    g.lock.lock();
    ([a, b], then)
}

/// A push beside a spinner counts the stack. In the scene of
/// `woken_spinner_held_beside_a_sleeper`, Y, whose `try_lock` failed
/// before B went to sleep, enters the slow path once the main thread holds
/// the lock again: it finds A's SPINNING and pushes itself on top of B, and
/// since unlocks would skip their wakes for A, Y takes the stack to count
/// it, and the model holds Y there. Then A runs, finds the lock held and
/// pushes itself, and the main thread unlocks while Y owns the stack,
/// leaving its wake to Y. Y counts three sleepers, more than the model's
/// zero, sets BACKLOG and, the lock being free, serves the oldest sleeper
/// as it gives the stack back: its walk reads A's node, pushed after Y
/// took the stack. Y's count reads B's node, which B pushed (and the main
/// thread's pop edited) after Y's `try_lock`, the Acquire RMW that would
/// otherwise order them before it: only the Acquire of the CAS that takes
/// the stack does. That race needs the run without `hold_y` (and then
/// without a backlog): the gate Y waits at after taking the stack orders
/// the main thread's past, which acquired B's push, before Y's walk. All
/// holds are gates and waits, not preemptions: bound 0 reaches the race.
fn push_beside_spinner<const F: u8>(hold_y: bool, bound: Bound) -> Seen {
    UNLOCKED_BESIDE_COUNT.set(false);
    explore(bound, move || {
        let g = Guarded::<Fifo<F>>::new();
        let parks = count_parks();
        let (hold_a, gate_y) = (Gate::new(), Gate::new());
        g.lock.lock();
        let spawn_y = move |a_node: usize| {
            thread::spawn(move || {
                if hold_y {
                    hold_at_event(Event::CountedOnPush, gate_y);
                }
                assert!(!g.lock.try_lock());
                // Relaxed loads, until the main thread holds the lock
                // again with B on top (A woken, holding SPINNING).
                g.wait_for(|w| {
                    w & (LOCKED | SPINNING) == LOCKED | SPINNING
                        && ![0, a_node].contains(&(w & !FLAGS))
                });
                g.lock.lock_slow();
                g.add_one_locked();
                // SAFETY: locked just above.
                unsafe { g.lock.unlock() };
            })
        };
        // Y's count sets BACKLOG with `hold_y`; without it, the count's
        // walk is the race, and no backlog keeps the rest short.
        let ([a, b], y) = woken_spinner_held_beside_a_sleeper(g, hold_a, hold_y, spawn_y);
        // Until Y has pushed (A, B, Y): it is held once it owns the stack.
        g.wait_for(|_| parks.load(Relaxed) > 2);
        if hold_y {
            hold_a.open();
            // Until A has pushed itself again.
            g.wait_for(|_| parks.load(Relaxed) > 3);
            if g.word() & STACK_LOCKED != 0 {
                UNLOCKED_BESIDE_COUNT.set(true);
            }
            // SAFETY: locked above.
            unsafe { g.lock.unlock() };
            gate_y.open();
        } else {
            // Y's count is the race; after it, the shortest way out: the
            // unlock leaves its wake to A, the spinner, then A runs.
            // SAFETY: locked above.
            unsafe { g.lock.unlock() };
            hold_a.open();
        }
        a.join().unwrap();
        b.join().unwrap();
        y.join().unwrap();
        assert_eq!(g.value(), 3);
    })
}

#[test]
fn a_push_beside_the_spinner_counts_the_stack() {
    // Bound 0 in the deeper run too: the gates reach the race without
    // preemptions, and bound 1 ran for more than 10 minutes in release
    // (2-core AMD EPYC VM) without finishing.
    let seen = push_beside_spinner::<NO_FAULT>(true, bound(0, 0));
    assert!(seen.of(Event::CountedOnPush) > 0 && UNLOCKED_BESIDE_COUNT.get(), "{seen:?}");
}

#[test]
fn a_push_beside_the_spinner_counts_nodes_pushed_after_its_try_lock() {
    let seen = push_beside_spinner::<NO_FAULT>(false, bound(0, 0));
    assert!(seen.of(Event::CountedOnPush) > 0, "{seen:?}");
}

#[test]
#[should_panic(expected = "Causality violation")]
fn broken_push_beside_the_spinner_sets_backlog_with_a_relaxed_rmw() {
    push_beside_spinner::<RELAXED_CENSUS_FLAGS>(true, bound(0, 0));
}

#[test]
#[should_panic(expected = "Causality violation")]
fn broken_push_beside_the_spinner_takes_the_stack_with_a_relaxed_cas() {
    push_beside_spinner::<RELAXED_CENSUS_TAKE>(false, bound(0, 0));
}

thread_local! {
    /// Set when an execution of `pushes_while_a_push_counts` unlocked while
    /// the first counting pusher owned the stack.
    static UNLOCKED_BESIDE_FIRST_COUNT: Cell<bool> = const { Cell::new(false) };
}

/// More pushes while a push beside the spinner counts the stack. As in
/// `push_beside_spinner`, A (woken, holding SPINNING) is held back and B
/// sleeps; Y1 pushes itself beside A's SPINNING, takes the stack to count
/// it and is held there. Then Y2 pushes itself beside the spinner too:
/// the stack is owned, so it must not take it (the one-owner check fails
/// if it does). A runs and pushes itself, and the main thread unlocks,
/// leaving its wake to Y1. With no backlog (the model's default), Y1 gives
/// the stack back from the word it took it from: its CAS fails (A's and
/// Y2's pushes, the unlock), and on the fresh word, with the lock free
/// and nobody spinning, it serves the oldest sleeper, walking A's and
/// Y2's nodes, pushed after it took the stack: only the failure ordering
/// of that CAS orders them before the walk. Five threads, bound 0: gates
/// and waits, not preemptions.
fn pushes_while_a_push_counts<const F: u8>(bound: Bound) -> Seen {
    UNLOCKED_BESIDE_FIRST_COUNT.set(false);
    explore(bound, || {
        let g = Guarded::<Fifo<F>>::new();
        let parks = count_parks();
        let (hold_a, gate_y1) = (Gate::new(), Gate::new());
        g.lock.lock();
        let ([a, b], ()) = woken_spinner_held_beside_a_sleeper(g, hold_a, false, |_| ());
        let y1 = thread::spawn(move || {
            hold_at_event(Event::CountedOnPush, gate_y1);
            g.increment();
        });
        // Until Y1 has pushed (A, B, Y1): it is held once it owns the stack.
        g.wait_for(|_| parks.load(Relaxed) > 2);
        let y2 = thread::spawn(move || g.increment());
        g.wait_for(|_| parks.load(Relaxed) > 3);
        hold_a.open();
        // Until A has pushed itself again.
        g.wait_for(|_| parks.load(Relaxed) > 4);
        if g.word() & STACK_LOCKED != 0 {
            UNLOCKED_BESIDE_FIRST_COUNT.set(true);
        }
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        gate_y1.open();
        for t in [a, b, y1, y2] {
            t.join().unwrap();
        }
        assert_eq!(g.value(), 4);
    })
}

#[test]
fn pushes_while_a_push_counts_leave_the_stack_to_it() {
    let seen = pushes_while_a_push_counts::<NO_FAULT>(bound(0, 0));
    assert!(seen.of(Event::CountedOnPush) > 0 && UNLOCKED_BESIDE_FIRST_COUNT.get(), "{seen:?}");
}

#[test]
#[should_panic(expected = "took the stack that another owns")]
fn broken_push_beside_the_spinner_counts_a_stack_that_another_owns() {
    pushes_while_a_push_counts::<CENSUS_ON_OWNED_STACK>(bound(0, 0));
}

#[test]
#[should_panic(expected = "Causality violation")]
fn broken_give_back_after_a_count_retries_with_a_relaxed_failure() {
    pushes_while_a_push_counts::<RELAXED_GIVE_BACK_RETRY>(bound(0, 0));
}

// Negative controls: each broken protocol must make loom report a lost
// wakeup, which shows as a deadlock (a waiter blocked in the futex model
// forever).

#[test]
#[should_panic(expected = "deadlock")]
fn broken_spinner_keeps_spinning_bit_on_push() {
    held_then_released::<Fifo<KEEP_SPINNING_ON_PUSH>>(2, bound(3, 3));
}

#[test]
#[should_panic(expected = "deadlock")]
fn broken_unlock_never_wakes() {
    held_then_released::<Fifo<SKIP_WAKE>>(1, bound(3, 3));
}

/// The same on the portable parker: its models see a lost wakeup too.
#[test]
#[should_panic(expected = "deadlock")]
fn broken_unlock_never_wakes_on_the_portable_parker() {
    held_then_released::<Loom<SKIP_WAKE, 0, NOBODY_STARVES, PortableModel>>(1, bound(3, 3));
}

#[test]
#[should_panic(expected = "deadlock")]
fn broken_stack_owner_abandons_committed_wake() {
    exclusion::<Fifo<ABANDON_WAKE_WHEN_LOCKED>>(3, 2, bound(3, 3));
}

#[test]
#[should_panic(expected = "deadlock")]
fn broken_futex_wait_without_compare() {
    held_then_released::<Fifo<WAIT_WITHOUT_COMPARE>>(1, bound(3, 3));
}

#[test]
#[should_panic(expected = "Causality violation")]
fn broken_pop_retry_reads_new_nodes_unsynchronised() {
    held_then_released::<Fifo<RELAXED_POP_RETRY>>(3, bound(3, 3));
}

#[test]
#[should_panic(expected = "deadlock")]
fn broken_woken_thread_ignores_handed_spinning_bit() {
    held_then_released::<Fifo<IGNORE_HANDED_SPIN>>(2, bound(3, 3));
}

#[test]
fn broken_hand_off_clears_locked() {
    // A barging try_lock takes the lock the hand-off left free: two owners.
    // Loom reports their concurrent writes to the data, or, in debug builds,
    // the second owner's unlock finds LOCKED already clear and its check
    // fires first; either is the exclusion violation.
    let caught = std::panic::catch_unwind(|| {
        explore(bound(2, 2), || {
            let g = Guarded::<Fifo<HAND_OFF_CLEARS_LOCKED>>::new();
            g.lock.lock();
            let w = thread::spawn(move || g.increment());
            let x = thread::spawn(move || {
                if g.lock.try_lock() {
                    g.add_one_locked();
                    // SAFETY: try_lock succeeded.
                    unsafe { g.lock.unlock() };
                }
            });
            g.wait_for(|w| w & !FLAGS != 0);
            // SAFETY: locked above.
            unsafe { g.lock.unlock_fair() };
            w.join().unwrap();
            x.join().unwrap();
        });
    })
    .expect_err("loom must catch a hand-off that clears LOCKED");
    let msg = caught
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| caught.downcast_ref::<&str>().copied())
        .unwrap_or("");
    assert!(
        msg.contains("Causality violation") || msg.contains("unlock of an unlocked"),
        "unexpected panic: {msg}"
    );
}

#[test]
#[should_panic(expected = "deadlock")]
fn broken_woken_thread_ignores_handed_lock() {
    held_then_released::<OldestStarves<IGNORE_HANDED_LOCK>>(1, bound(3, 3));
}

#[test]
#[should_panic(expected = "Causality violation")]
fn broken_retake_is_relaxed() {
    retake_race::<RELAXED_RETAKE>(!deep_run(), bound(0, 1));
}

#[test]
#[should_panic(expected = "Causality violation")]
fn broken_unlink_of_the_oldest_is_relaxed() {
    unlink_then_third_owner::<Fifo<RELAXED_UNLINK>>(bound(1, 1));
}

// Timed waiters (`RawMutexTimed`). In the model every deadline falls during
// the waiter's first sleep, and a timed sleep that would block times out
// while the execution's budget lasts (`allow_timeouts`), at whatever point
// loom schedules it: before, during or after a wake aimed at it.

/// The main thread holds the lock while a timed waiter goes to sleep, then
/// unlocks: the unlock's wake (or, if every sleeper starves, its hand-off)
/// races the waiter's timeout. At the end the word must be clear: whoever
/// left, left no trace (no node, no SPINNING, no STARVING).
fn timeout_races_a_wake<P: Model>(bound: Bound) -> Seen {
    explore(bound, || {
        let g = Guarded::<P>::new();
        allow_timeouts(1);
        let won = counter();
        let done = flag();
        g.lock.lock();
        let w = thread::spawn(move || {
            g.increment_timed(won);
            done.store(true, Relaxed);
        });
        // Until it sleeps, or has already timed out and left.
        g.wait_for(|w| w & !FLAGS != 0 || done.load(Relaxed));
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        w.join().unwrap();
        assert_eq!(g.value(), won.load(Relaxed));
        assert_eq!(g.word(), 0, "the word keeps a trace of a waiter that left");
    })
}

#[test]
fn timeout_races_a_wake_of_the_same_node() {
    let seen = timeout_races_a_wake::<Fifo>(bound(3, 4));
    assert!(seen.of(Event::TimedOut) > 0 && seen.of(Event::PoppedWhileLeaving) > 0, "{seen:?}");
}

#[test]
fn timeout_races_a_hand_off_to_the_same_node() {
    let seen = timeout_races_a_wake::<OldestStarves>(bound(3, 4));
    assert!(
        seen.of(Event::TimedOut) > 0
            && seen.of(Event::PoppedWhileLeaving) > 0
            && seen.of(Event::HandedLock) > 0,
        "{seen:?}"
    );
}

#[test]
fn timeout_after_a_spurious_futex_return() {
    let seen = timeout_races_a_wake::<Spurious<1>>(bound(3, 4));
    assert!(seen.spurious > 0 && seen.of(Event::TimedOut) > 0, "{seen:?}");
}

thread_local! {
    /// Set when both timed waiters of `two_timeouts` left the stack in one
    /// execution.
    static BOTH_LEFT: Cell<bool> = const { Cell::new(false) };
}

/// Two timed waiters sleep while the main thread holds the lock; both time
/// out while the main thread's unlock walks the stack to wake the oldest.
fn two_timeouts<const F: u8>(bound: Bound) -> Seen {
    BOTH_LEFT.set(false);
    explore(bound, || {
        let g = Guarded::<Fifo<F>>::new();
        let won = counter();
        let done: &'static [AtomicBool; 2] =
            Box::leak(Box::new([AtomicBool::new(false), AtomicBool::new(false)]));
        allow_timeouts(2);
        g.lock.lock();
        let timed = move |i: usize| {
            g.increment_timed(won);
            done[i].store(true, Relaxed);
        };
        let a = thread::spawn(move || timed(0));
        // Until each sleeps, or has already timed out and left.
        g.wait_for(|w| w & !FLAGS != 0 || done[0].load(Relaxed));
        let a_node = g.word() & !FLAGS;
        let b = thread::spawn(move || timed(1));
        g.wait_for(|w| (w & !FLAGS != 0 && w & !FLAGS != a_node) || done[1].load(Relaxed));
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(g.value(), won.load(Relaxed));
        assert_eq!(g.word(), 0, "the word keeps a trace of a waiter that left");
        if won.load(Relaxed) == 0 {
            BOTH_LEFT.set(true);
        }
    })
}

#[test]
fn two_waiters_time_out_while_an_unlocker_walks_the_stack() {
    let seen = two_timeouts::<NO_FAULT>(bound(1, 2));
    assert!(seen.of(Event::TimedOut) > 0 && seen.of(Event::TailWake) > 0, "{seen:?}");
    assert!(BOTH_LEFT.get(), "no execution where both timed waiters left: {seen:?}");
}

/// A timed waiter sleeps below an untimed one; the unlock wakes it (the
/// oldest) with SPINNING, the main thread takes the lock again, and the
/// timed waiter, past its deadline, must pass SPINNING on, or the untimed
/// sleeper is never woken.
fn timed_spinner_gives_up<const F: u8>(bound: Bound) -> Seen {
    explore(bound, || {
        let g = Guarded::<Fifo<F>>::new();
        let won = counter();
        g.lock.lock();
        let w = thread::spawn(move || {
            g.increment_timed(won);
        });
        g.wait_for(|w| w & !FLAGS != 0);
        let w_node = g.word() & !FLAGS;
        let s = thread::spawn(move || g.increment());
        g.wait_for(|w| w & !FLAGS != w_node);
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        g.increment();
        w.join().unwrap();
        s.join().unwrap();
        assert_eq!(g.value(), 2 + won.load(Relaxed));
        assert_eq!(g.word(), 0, "the word keeps a trace of a waiter that left");
    })
}

#[test]
fn a_timed_out_waiter_passes_on_the_handed_spinning_bit() {
    // Deep bound 3: 80 s alone in release (2-core AMD EPYC VM); a process
    // of its own in `.ci/run`, as `fifo_wakes_take_the_tail`.
    let seen = timed_spinner_gives_up::<NO_FAULT>(bound(2, 3));
    assert!(seen.of(Event::GaveUpSpinning) > 0, "{seen:?}");
}

#[test]
#[should_panic(expected = "deadlock")]
fn broken_timed_out_waiter_keeps_the_lock_it_was_handed() {
    timeout_races_a_wake::<OldestStarves<LEAVE_KEEPS_WAKE>>(bound(3, 3));
}

#[test]
#[should_panic(expected = "deadlock")]
fn broken_starving_timed_waiter_keeps_the_lock_it_was_handed() {
    // The hand-off to the marked bottom sleeper races its own deadline; it
    // finds itself popped, and returns "timed out" holding the lock.
    starving_timed_waiter_leaves::<LEAVE_KEEPS_WAKE>(true, bound(1, 1));
}

#[test]
#[should_panic(expected = "Causality violation")]
fn broken_timed_out_waiter_unlinks_without_the_stack_lock() {
    two_timeouts::<UNLINK_WITHOUT_STACK_LOCK>(bound(2, 2));
}

#[test]
#[should_panic(expected = "deadlock")]
fn broken_timed_out_waiter_keeps_the_spinning_bit() {
    timed_spinner_gives_up::<GIVE_UP_KEEPS_SPINNING>(bound(2, 2));
}

/// A timed waiter at the top of the stack times out and takes the stack to
/// unlink itself while another waiter pushes on top of it: the unlink's CAS
/// fails, and the retry walks the new node, whose fields only that CAS's
/// failure ordering (Acquire, pairing with the push's Release) makes
/// visible. The timed waiter waits at a gate once it owns the stack, and
/// the other waiter starts then, so no preemption goes into getting there.
///
/// With `below`, an untimed waiter sleeps under the timed one first, so
/// the retry unlinks the timed waiter from the middle of three: its walk
/// links the three nodes both ways, and its unlink must point the node
/// above down to the one below and that one up to it, or the unlock's pop
/// of the oldest takes the departed node for the next tail (and the node
/// above it is never woken).
fn leave_under_a_push<const F: u8>(below: bool, bound: Bound) -> Seen {
    explore(bound, move || {
        let g = Guarded::<Fifo<F>>::new();
        let won = counter();
        let gate = Gate::new();
        g.lock.lock();
        let y = below.then(|| {
            let y = thread::spawn(move || g.increment());
            // Until it sleeps, nobody spinning.
            g.wait_for(|w| w & !FLAGS != 0 && w & SPINNING == 0);
            y
        });
        let y_node = g.word() & !FLAGS;
        let t = thread::spawn(move || {
            // Only this thread's sleep times out, and it waits at the gate
            // once it owns the stack to leave.
            allow_my_timeouts(1, None);
            hold_at_event(Event::Leaving, gate);
            g.increment_timed(won);
        });
        // Until it has pushed itself (on `y`) and taken the stack to leave.
        g.wait_for(|w| w & STACK_LOCKED != 0 && w & !FLAGS != y_node);
        let t_node = g.word() & !FLAGS;
        let w = thread::spawn(move || g.increment());
        // Until the other waiter sleeps on top of the timed one.
        g.wait_for(|w| w & !FLAGS != t_node);
        gate.open();
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        t.join().unwrap();
        w.join().unwrap();
        if let Some(y) = y {
            y.join().unwrap();
        }
        assert_eq!(g.value(), 1 + usize::from(below) + won.load(Relaxed));
        assert_eq!(g.word(), 0, "the word keeps a trace of a waiter that left");
    })
}

#[test]
fn a_timed_out_top_unlinks_itself_under_a_push() {
    let seen = leave_under_a_push::<NO_FAULT>(false, bound(1, 3));
    assert!(seen.of(Event::TimedOut) > 0 && seen.of(Event::LeaveRetried) > 0, "{seen:?}");
}

#[test]
fn a_timed_waiter_leaves_from_the_middle() {
    let seen = leave_under_a_push::<NO_FAULT>(true, bound(1, 2));
    // The leave's first CAS, at the top, fails under the push, and the
    // retry unlinks the timed waiter from between the other two.
    assert!(seen.of(Event::LeaveRetried) > 0 && seen.of(Event::TailWake) > 0, "{seen:?}");
}

thread_local! {
    /// Set when, in one execution of `look_then_leave`, the holder looked
    /// at the stack and the timed waiter it looked at then left it.
    static LOOKED_THEN_LEFT: Cell<bool> = const { Cell::new(false) };
}

/// A thread takes the lock by spinning while a timed waiter is on the
/// stack, and its look (every spin acquisition looks under `LooksNobodyStarves`)
/// caches the tail in the top node, the waiter's, and gives the stack back.
/// Then, while that thread still holds the lock, the waiter times out
/// and takes the stack to leave, and its walk reads what the look wrote:
/// only the look's Release give-back, acquired by the leaver's take, orders
/// the two, since the leaver does not take the lock. The waiter waits at a
/// gate after its push, and the spinner at another once it holds SPINNING,
/// until the first holder has released the lock: no preemption goes into
/// getting there.
fn look_then_leave<const F: u8>(bound: Bound) -> Seen {
    LOOKED_THEN_LEFT.set(false);
    explore(bound, || {
        let g = Guarded::<LooksNobodyStarves<F>>::new();
        let won = counter();
        let done = flag();
        let gate = Gate::new();
        let spin_gate = Gate::new();
        let looks = SEEN.with(|s| s.borrow().of(Event::Look));
        let left = SEEN.with(|s| s.borrow().of(Event::TimedOut));
        g.lock.lock();
        let t = thread::spawn(move || {
            // Only this thread's sleep times out; it waits at the gate
            // right after its push.
            allow_my_timeouts(1, None);
            hold_at_event(Event::Parked, gate);
            g.increment_timed(won);
            done.store(true, Relaxed);
        });
        g.wait_for(|w| w & !FLAGS != 0);
        let m = thread::spawn(move || {
            // It waits at the gate once it holds SPINNING, before its
            // spin's first look at the word.
            hold_thread_at_event(Event::Spun, spin_gate);
            g.lock.lock();
            while !done.load(Relaxed) {
                thread::yield_now();
            }
            g.add_one_locked();
            // SAFETY: locked just above.
            unsafe { g.lock.unlock() };
        });
        g.wait_for(|w| w & SPINNING != 0);
        g.add_one_locked();
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        spin_gate.open();
        gate.open();
        t.join().unwrap();
        m.join().unwrap();
        assert_eq!(g.value(), 2 + won.load(Relaxed));
        assert_eq!(g.word(), 0, "the word keeps a trace of a waiter that left");
        let looked = SEEN.with(|s| s.borrow().of(Event::Look)) > looks;
        let timed_out = SEEN.with(|s| s.borrow().of(Event::TimedOut)) > left;
        if looked && timed_out {
            LOOKED_THEN_LEFT.set(true);
        }
    })
}

thread_local! {
    /// Set when, in one execution of `push_during_a_look`, a waiter pushed
    /// itself while the holder's look owned the stack.
    static PUSHED_DURING_A_LOOK: Cell<bool> = const { Cell::new(false) };
    /// ... and when a waiter held SPINNING as the look gave the stack back.
    static SPUN_DURING_A_LOOK: Cell<bool> = const { Cell::new(false) };
}

/// A waiter pushes itself while a holder's look owns the stack: `y`
/// sleeps; `s` holds SPINNING (held at a gate) while the main thread
/// unlocks, so the unlock leaves the wake to it, then takes the lock by
/// spinning, and its look (every spin acquisition looks under `LooksNobodyStarves`)
/// takes the stack and is held there while `p` takes SPINNING and, in
/// some executions, pushes itself on top of `y`. The look's give-back CAS
/// then fails, and its retry must keep `p`'s node, or `p` is never woken,
/// and the flags as they are now, or it clears the SPINNING that `p`
/// holds. (Where `s`'s spin reads a stale word and runs out, it takes the
/// lock without a look, and `p` does not run.)
fn push_during_a_look<const F: u8>(bound: Bound) -> Seen {
    PUSHED_DURING_A_LOOK.set(false);
    SPUN_DURING_A_LOOK.set(false);
    explore(bound, || {
        let g = Guarded::<LooksNobodyStarves<F>>::new();
        let spin_gate = Gate::new();
        let look_gate = Gate::new();
        let s_done = flag();
        g.lock.lock();
        let y = thread::spawn(move || g.increment());
        // Until `y` sleeps, nobody spinning.
        g.wait_for(|w| w & !FLAGS != 0 && w & SPINNING == 0);
        let y_node = g.word() & !FLAGS;
        let s = thread::spawn(move || {
            // Held once it holds SPINNING, before its spin's first look at
            // the word, and once its look owns the stack (no timeouts are
            // allowed: only the gate of `hold_at_event` is used).
            hold_thread_at_event(Event::Spun, spin_gate);
            hold_at_event(Event::Look, look_gate);
            g.increment();
            s_done.store(true, Relaxed);
        });
        g.wait_for(|w| w & SPINNING != 0);
        g.add_one_locked();
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        spin_gate.open();
        // Until `s`'s look owns the stack, or `s` is done without one.
        let looking = |w: usize| w & (LOCKED | STACK_LOCKED) == LOCKED | STACK_LOCKED;
        g.wait_for(|w| looking(w) || s_done.load(Relaxed));
        let mut threads = 3;
        let p = looking(g.word()).then(|| {
            threads += 1;
            let p = thread::spawn(move || g.increment());
            // Until `p` spins (it holds SPINNING) or has pushed itself on
            // top of `y`: the look gives the stack back under either.
            g.wait_for(|w| w & SPINNING != 0 || w & !FLAGS != y_node);
            if g.word() & !FLAGS != y_node {
                PUSHED_DURING_A_LOOK.set(true);
            } else {
                SPUN_DURING_A_LOOK.set(true);
            }
            p
        });
        look_gate.open();
        y.join().unwrap();
        s.join().unwrap();
        if let Some(p) = p {
            p.join().unwrap();
        }
        assert_eq!(g.value(), threads);
        assert_eq!(g.word(), 0, "the word keeps a trace of a waiter");
    })
}

#[test]
fn a_push_lands_while_a_holder_looks() {
    // Deep bound 2: 110 s (release, 2-core Intel Xeon VM, beside another
    // model), by hand: `.ci/run`'s deeper run skips it (`deep_by_hand`).
    let seen = push_during_a_look::<NO_FAULT>(bound(1, 2));
    assert!(PUSHED_DURING_A_LOOK.get(), "no push while a look owned the stack: {seen:?}");
    assert!(SPUN_DURING_A_LOOK.get(), "no spinner as a look gave the stack back: {seen:?}");
}

#[test]
fn a_timed_waiter_leaves_after_a_holders_look() {
    let seen = look_then_leave::<NO_FAULT>(bound(1, 2));
    assert!(LOOKED_THEN_LEFT.get(), "no execution where the waiter left after a look: {seen:?}");
}

#[test]
#[should_panic(expected = "Causality violation")]
fn broken_look_gives_the_stack_back_with_a_relaxed_cas() {
    look_then_leave::<RELAXED_GIVE_BACK>(bound(0, 0));
}

#[test]
#[should_panic(expected = "Causality violation")]
fn broken_timed_out_top_retries_its_unlink_with_a_relaxed_look() {
    leave_under_a_push::<RELAXED_UNLINK_RETRY>(false, bound(0, 0));
}

/// Models of the condition variable (`crate::condvar`): a notification
/// racing the wait's unlock, `notify_all`'s requeue onto the mutex's stack
/// with the mutex held and free (plain and fair unlocks), `notify_one` to
/// a waiter whose mutex has sleepers, a timed wait racing a notification,
/// and spurious futex returns. Each asserts that its scenario happened.
mod condvar {
    use super::*;
    use crate::condvar::Cond;

    fn cond<P: Model>() -> &'static Cond<P> {
        Box::leak(Box::new(Cond { word: LoomState::new() }))
    }

    /// Whether the condition variable's word is clear: no waiter, no owner.
    fn cv_empty<P: Model>(cv: &Cond<P>) -> bool {
        let w: *mut Node<P> = cv.word.load(Relaxed);
        w.is_null()
    }

    /// The guarded value, read by a thread that holds the lock.
    fn read_locked<P: Model>(g: &Guarded<P>) -> usize {
        // SAFETY: the caller holds the lock.
        g.data.with(|p| unsafe { *p })
    }

    /// Waits on `cv` (the caller holds `g`'s lock; it holds it again on
    /// return, unlocked fairly with `fair`); returns whether the deadline
    /// ended the wait.
    fn wait_on<P: Model>(
        g: &'static Guarded<P>,
        cv: &Cond<P>,
        deadline: Option<ModelDeadline>,
        fair: bool,
    ) -> bool {
        // SAFETY: the caller holds `g.lock`, which the closure unlocks once.
        unsafe {
            cv.wait(
                &g.lock,
                || {
                    if fair {
                        g.lock.unlock_fair();
                    } else {
                        g.lock.unlock();
                    }
                },
                deadline,
            )
        }
    }

    /// Until the guarded value is `v`, looked at with the lock held: the
    /// waiters that wrote it under the lock and then waited are on the
    /// list (a wait lists itself before it unlocks).
    fn until_value<P: Model>(g: &'static Guarded<P>, v: usize, then_hold: bool) {
        loop {
            g.lock.lock();
            if read_locked(g) == v {
                if !then_hold {
                    // SAFETY: locked just above.
                    unsafe { g.lock.unlock() };
                }
                return;
            }
            // SAFETY: locked just above.
            unsafe { g.lock.unlock() };
            thread::yield_now();
        }
    }

    /// A waiter that waits for the flag (the guarded value set to 1 by the
    /// main thread under the lock), and a notification right after the
    /// main thread's unlock, which may race the waiter's own unlock inside
    /// `wait`. The waiter must wake (no lost notification), and only after
    /// the flag was set (no spurious wakeup).
    fn notify_races_the_wait<P: Model>(bound: Bound) -> Seen {
        explore(bound, || {
            let g = Guarded::<P>::new();
            let cv = cond::<P>();
            let w = thread::spawn(move || {
                g.lock.lock();
                while read_locked(g) == 0 {
                    assert!(!wait_on(g, cv, None, false), "an untimed wait timed out");
                    assert_ne!(read_locked(g), 0, "a wait returned without a notification");
                }
                g.append_locked(2);
                // SAFETY: held since the wait returned.
                unsafe { g.lock.unlock() };
            });
            g.lock.lock();
            g.append_locked(1);
            // SAFETY: locked just above.
            unsafe { g.lock.unlock() };
            cv.notify_one();
            w.join().unwrap();
            assert_eq!(g.value(), 12);
            assert_eq!(g.word(), 0, "the word keeps a trace of a waiter");
            assert!(cv_empty(cv), "the condvar keeps a waiter");
        })
    }

    #[test]
    fn a_notification_racing_the_waits_unlock_is_not_lost() {
        let seen = notify_races_the_wait::<Fifo>(bound(2, 3));
        assert!(seen.of(Event::CondWoken) + seen.of(Event::Requeued) > 0, "{seen:?}");
    }

    #[test]
    fn spurious_futex_returns_make_no_spurious_wakeup() {
        let seen = notify_races_the_wait::<Spurious<2>>(bound(1, 2));
        assert!(seen.spurious > 0, "{seen:?}");
    }

    #[test]
    #[should_panic(expected = "deadlock")]
    fn broken_wait_unlocks_before_it_is_on_the_list() {
        notify_races_the_wait::<Fifo<COND_UNLOCKS_BEFORE_LISTING>>(bound(1, 1));
    }

    thread_local! {
        /// Some execution of `requeue_all` handed the free mutex to the
        /// oldest waiter, and some moved both onto a held mutex's stack.
        static HANDED_AND_MOVED: Cell<(bool, bool)> = const { Cell::new((false, false)) };
    }

    /// Two waiters (digit 1 as they wait, 2 once woken) and a `notify_all`
    /// with the mutex held (`held`) or not: it must count both, and both
    /// must get the lock in turn, whether they were moved onto the
    /// mutex's stack or the oldest was handed the free mutex. With `fair`,
    /// the waits and the woken waiters unlock fairly.
    fn requeue_all<P: Model>(held: bool, fair: bool, bound: Bound) -> Seen {
        HANDED_AND_MOVED.set((false, false));
        explore(bound, move || {
            let before = Seen::now();
            let g = Guarded::<P>::new();
            let cv = cond::<P>();
            let waiter = move || {
                g.lock.lock();
                g.append_locked(1);
                assert!(!wait_on(g, cv, None, fair));
                g.append_locked(2);
                // SAFETY: held since the wait returned.
                unsafe {
                    if fair {
                        g.lock.unlock_fair();
                    } else {
                        g.lock.unlock();
                    }
                }
            };
            let ws = [thread::spawn(waiter), thread::spawn(waiter)];
            until_value(g, 11, held);
            let n = cv.notify_all();
            if held {
                // SAFETY: held since `until_value`.
                unsafe { g.lock.unlock() };
            }
            assert_eq!(n, 2, "notify_all miscounted two waiters");
            ws.into_iter().for_each(|h| h.join().unwrap());
            assert_eq!(g.value(), 1122);
            assert_eq!(g.word(), 0, "the word keeps a trace of a waiter");
            assert!(cv_empty(cv), "the condvar keeps a waiter");
            let seen = Seen::now().since(&before);
            let (h, m) = HANDED_AND_MOVED.get();
            HANDED_AND_MOVED
                .set((h || seen.of(Event::CondHanded) > 0, m || seen.of(Event::Requeued) > 0));
        })
    }

    #[test]
    fn notify_all_moves_the_waiters_onto_a_held_mutex() {
        requeue_all::<Fifo>(true, false, bound(1, 2));
        assert_eq!(HANDED_AND_MOVED.get(), (false, true));
    }

    #[test]
    fn notify_all_hands_a_free_mutex_to_the_oldest_waiter() {
        requeue_all::<Fifo>(false, false, bound(1, 2));
        assert!(HANDED_AND_MOVED.get().0);
    }

    #[test]
    fn notify_all_requeues_beside_fair_unlocks() {
        requeue_all::<Fifo>(true, true, bound(1, 1));
        assert!(HANDED_AND_MOVED.get().1);
    }

    #[test]
    #[should_panic(expected = "deadlock")]
    fn broken_requeue_loses_the_newest_waiter() {
        requeue_all::<Fifo<REQUEUE_LOSES_NEWEST>>(true, false, bound(0, 0));
    }

    /// A waiter on the condition variable (digits 1, then 2 once woken)
    /// and a sleeper on the mutex (3); the main thread holds the mutex,
    /// notifies the waiter (woken: it takes the mutex as any arriving
    /// thread) and unlocks: both get the lock.
    fn notify_one_beside_a_sleeper(bound: Bound) -> Seen {
        explore(bound, || {
            let g = Guarded::<Fifo>::new();
            let cv = cond::<Fifo>();
            let w = thread::spawn(move || {
                g.lock.lock();
                g.append_locked(1);
                assert!(!wait_on(g, cv, None, false));
                g.append_locked(2);
                // SAFETY: held since the wait returned.
                unsafe { g.lock.unlock() };
            });
            until_value(g, 1, true);
            let s = thread::spawn(move || g.turn(3));
            g.wait_for(|w| w & !FLAGS != 0);
            assert!(cv.notify_one(), "notify_one missed a waiter");
            // SAFETY: held since `until_value`.
            unsafe { g.lock.unlock() };
            w.join().unwrap();
            s.join().unwrap();
            let v = g.value();
            assert!(v == 123 || v == 132, "order {v}");
            assert_eq!(g.word(), 0, "the word keeps a trace of a waiter");
        })
    }

    #[test]
    fn notify_one_wakes_a_waiter_beside_the_mutexs_sleeper() {
        let seen = notify_one_beside_a_sleeper(bound(1, 2));
        assert!(seen.of(Event::CondWoken) > 0, "{seen:?}");
    }

    /// A waiter moved onto the mutex's stack while it still sleeps on its
    /// condition variable park is nudged there: `notify_all` moves it
    /// (digit 1, then 2 once it has the lock) while the main thread holds
    /// the mutex; a timed waiter marks itself below it and leaves at its
    /// deadline, so starvation mode outlives it with the moved waiter the
    /// oldest sleeper; the main thread's unlock nudges it. Its park on the
    /// condition variable ends with the nudge, and it must mark itself
    /// anew as the mutex's own sleepers do, and get the lock.
    fn requeued_waiter_nudged<const F: u8>(bound: Bound) -> Seen {
        explore(bound, || {
            let g = Guarded::<Nudging<F>>::new();
            let cv = cond::<Nudging<F>>();
            let left = Gate::new();
            let w = thread::spawn(move || {
                g.lock.lock();
                g.append_locked(1);
                assert!(!wait_on(g, cv, None, false));
                g.append_locked(2);
                // SAFETY: held since the wait returned.
                unsafe { g.lock.unlock() };
            });
            until_value(g, 1, true);
            assert_eq!(cv.notify_all(), 1, "notify_all missed a waiter");
            let t = thread::spawn(move || {
                // Its starvation deadline, then its own.
                allow_my_timeouts(2, None);
                let won = g.lock.try_lock() || g.lock.lock_until_slow(ModelDeadline::Timed);
                assert!(!won, "the timed waiter took a lock that the main thread holds");
                left.open();
            });
            left.pass();
            // SAFETY: held since `until_value`.
            unsafe { g.lock.unlock() };
            w.join().unwrap();
            t.join().unwrap();
            assert_eq!(g.value(), 12);
            assert_eq!(g.word(), 0, "the word keeps a trace of a waiter");
            assert!(cv_empty(cv), "the condvar keeps a waiter");
        })
    }

    #[test]
    fn a_requeued_waiter_is_nudged_in_its_condvar_sleep() {
        let seen = requeued_waiter_nudged::<NO_FAULT>(bound(1, 2));
        assert!(
            seen.of(Event::Requeued) > 0
                && seen.of(Event::Nudged) > 0
                && seen.of(Event::Rejoined) > 0,
            "{seen:?}"
        );
    }

    #[test]
    #[should_panic(expected = "deadlock")]
    fn broken_requeued_waiter_sleeps_through_its_nudge() {
        requeued_waiter_nudged::<REQUEUED_IGNORES_NUDGE>(bound(0, 0));
    }

    /// A requeued waiter that other threads judge starving is not passed by
    /// a later mark. The waiter (digit 1) waits; once it has released the
    /// mutex, the main thread takes it and moves the waiter onto the stack
    /// with `notify_all`: the requeue starts the execution's first clock, so
    /// the waiter starves by age (`SelfJudgedByAge`). A sleeper (digit 3)
    /// pushes above it and marks itself at its starvation deadline; it must
    /// stay above the requeued waiter, which the main thread's unlock
    /// then hands the lock (digit 2) before the marked sleeper.
    fn requeued_before_a_later_mark<const F: u8>(bound: Bound) -> Seen {
        explore(bound, || {
            let g = Guarded::<SelfJudgedByAge<F>>::new();
            let cv = cond::<SelfJudgedByAge<F>>();
            let marks = counter();
            STEER.with(|s| s.borrow_mut().marks = Some(marks));
            let w = thread::spawn(move || {
                g.lock.lock();
                g.append_locked(1);
                assert!(!wait_on(g, cv, None, false));
                g.append_locked(2);
                // SAFETY: held since the wait returned.
                unsafe { g.lock.unlock() };
            });
            // Listed and the mutex released: the main thread's lock does not
            // contend, so no clock starts before the requeue's.
            while cv_empty(cv) || g.word() & LOCKED != 0 {
                thread::yield_now();
            }
            g.lock.lock();
            assert_eq!(cv.notify_all(), 1, "notify_all missed a waiter");
            let clocks = STEER.with(|s| s.borrow().clocks);
            assert_eq!(clocks, 1, "a clock started before the requeue's");
            let b = thread::spawn(move || {
                allow_my_timeouts(1, None);
                g.turn(3);
            });
            // Until the sleeper has marked itself and given the stack back.
            g.wait_for_marks(marks, 1);
            // SAFETY: locked above.
            unsafe { g.lock.unlock() };
            w.join().unwrap();
            b.join().unwrap();
            assert_eq!(g.value(), 123, "a later mark passed a requeued waiter judged starving");
            assert_eq!(g.word(), 0, "the word keeps a trace of a waiter");
            assert!(cv_empty(cv), "the condvar keeps a waiter");
        })
    }

    #[test]
    fn a_later_mark_stays_above_a_requeued_waiter_judged_starving() {
        let seen = requeued_before_a_later_mark::<NO_FAULT>(bound(1, 2));
        assert!(
            seen.of(Event::Requeued) > 0
                && seen.of(Event::Starved) > 0
                && seen.of(Event::HandOff) > 1,
            "{seen:?}"
        );
    }

    #[test]
    #[should_panic(expected = "a later mark passed a requeued waiter")]
    fn broken_later_mark_passes_a_requeued_waiter_judged_starving() {
        requeued_before_a_later_mark::<MARK_PASSES_REQUEUED>(bound(0, 0));
    }

    thread_local! {
        /// Some execution of `timed_wait_races_a_notification` timed out
        /// before the notification, and some after it took the waiter.
        static TIMED_OUT_BOTH_WAYS: Cell<(bool, bool)> = const { Cell::new((false, false)) };
    }

    /// A timed waiter whose wait times out (the model's deadline) while
    /// the main thread notifies it (`notify_one`, or with `all`,
    /// `notify_all`, holding the mutex with `held`): the notification
    /// counts it exactly when the waiter does not report a timeout.
    fn timed_wait_races_a_notification<P: Model>(all: bool, held: bool, bound: Bound) -> Seen {
        TIMED_OUT_BOTH_WAYS.set((false, false));
        explore(bound, move || {
            let before = Seen::now();
            let g = Guarded::<P>::new();
            let cv = cond::<P>();
            let w = thread::spawn(move || {
                allow_my_timeouts(1, None);
                g.lock.lock();
                g.append_locked(1);
                let timed_out = wait_on(g, cv, Some(ModelDeadline::Timed), false);
                // SAFETY: held since the wait returned.
                unsafe { g.lock.unlock() };
                timed_out
            });
            until_value(g, 1, held);
            let notified = if all { cv.notify_all() == 1 } else { cv.notify_one() };
            if held {
                // SAFETY: held since `until_value`.
                unsafe { g.lock.unlock() };
            }
            let timed_out = w.join().unwrap();
            assert_eq!(
                notified, !timed_out,
                "notified: {notified}, timed out: {timed_out}: a count that includes a waiter that \
                 timed out, or a notification lost"
            );
            assert_eq!(g.word(), 0, "the word keeps a trace of a waiter");
            assert!(cv_empty(cv), "the condvar keeps a waiter");
            let seen = Seen::now().since(&before);
            let (a, b) = TIMED_OUT_BOTH_WAYS.get();
            TIMED_OUT_BOTH_WAYS.set((
                a || seen.of(Event::CondTimedOut) > 0,
                b || seen.of(Event::CondTimeoutOvertaken) > 0,
            ));
        })
    }

    #[test]
    fn a_timed_wait_racing_a_notification_is_counted_once() {
        timed_wait_races_a_notification::<Fifo>(false, false, bound(2, 3));
        assert_eq!(TIMED_OUT_BOTH_WAYS.get(), (true, true));
    }

    #[test]
    fn a_timed_wait_racing_a_requeue_is_counted_once() {
        let seen = timed_wait_races_a_notification::<Fifo>(true, true, bound(2, 3));
        assert_eq!(TIMED_OUT_BOTH_WAYS.get(), (true, true));
        assert!(seen.of(Event::Requeued) > 0, "{seen:?}");
    }

    #[test]
    fn a_timed_wait_racing_a_hand_over_is_counted_once() {
        let seen = timed_wait_races_a_notification::<Fifo>(true, false, bound(2, 3));
        assert_eq!(TIMED_OUT_BOTH_WAYS.get(), (true, true));
        assert!(seen.of(Event::CondHanded) > 0, "{seen:?}");
    }

    #[test]
    #[should_panic(expected = "a count that includes a waiter that timed out")]
    fn broken_timed_wait_reports_a_timeout_after_its_notification() {
        timed_wait_races_a_notification::<Fifo<TIMEOUT_AFTER_NOTIFICATION>>(
            false,
            false,
            bound(1, 1),
        );
    }
}
