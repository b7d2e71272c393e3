//! The model-checking platform: loom atomics, loom-tracked node cells, and a
//! futex model, so that loom explores the real algorithm in `crate::lock`.
//!
//! # The futex model
//!
//! Like the kernel, the model keeps one table of blocked waiters keyed by
//! address, behind one lock (loom's `Mutex`, whose hand-offs loom orders):
//!
//! * `wait(word, expected)` takes the table lock, compares the word with
//!   `expected` and returns at once if they differ (the kernel's EAGAIN);
//!   otherwise it registers under the word's address and **blocks for real**
//!   on a loom `Condvar` until a wake names it. A waiter that nobody wakes
//!   stays blocked, and loom reports the execution as a deadlock: that is how
//!   a lost wakeup shows.
//! * `wake(addr, n)` takes the table lock and marks up to `n` waiters
//!   registered under `addr` as woken; it only uses the address as a key, so
//!   waking a node whose thread has returned touches no freed memory.
//! * Spurious returns: the first `SPURIOUS` waits of an execution that would
//!   block return at once instead, wherever the schedule puts them, so the
//!   models explore a waiter that wakes with nobody having woken it.
//!
//! The spin budget is one iteration (`now` and the deadline are both 0), so
//! every spin loop is finite and the state space stays small. The spin hint
//! and the yield are no-ops: they are hints with no semantics, and loom's
//! yield would force a thread switch, hiding the schedules where a spinner
//! runs on.

use core::cell::Cell;
use core::ptr;
use core::sync::atomic::Ordering;

use loom::sync::atomic::{AtomicU32, AtomicUsize};
use loom::sync::{Condvar, Mutex};

use super::{Event, Fault, NodeCell, Nudge, Parker, Platform, StateWord, Woke};

/// Defines the fault names, one `u8` constant per fault in `faults` (its
/// value the variant's discriminant, so a name cannot stand for another
/// fault), and `fault`, which decodes them.
macro_rules! fault_names {
    ($($name:ident: $variant:ident,)*) => {
        /// The faults the models inject, by name, for [`Loom`]'s `FAULT`
        /// parameter (stable Rust has no enum const parameters). Each is
        /// described at its [`Fault`] variant.
        pub(crate) mod faults {
            use super::Fault;
            $(
                #[doc = concat!("[`Fault::", stringify!($variant), "`]")]
                pub(crate) const $name: u8 = Fault::$variant as u8;
            )*
        }

        /// The fault named by `n`, one of [`faults`]; any other number fails
        /// to compile where it sets [`Platform::FAULT`].
        pub(crate) const fn fault(n: u8) -> Fault {
            $(
                if n == faults::$name {
                    return Fault::$variant;
                }
            )*
            panic!("not one of the faults in `faults`")
        }
    };
}

fault_names! {
    NO_FAULT: None,
    KEEP_SPINNING_ON_PUSH: KeepSpinningOnPush,
    SKIP_WAKE: SkipWake,
    ABANDON_WAKE_WHEN_LOCKED: AbandonWakeWhenLocked,
    WAIT_WITHOUT_COMPARE: WaitWithoutCompare,
    RELAXED_POP_RETRY: RelaxedPopRetry,
    IGNORE_HANDED_SPIN: IgnoreHandedSpin,
    HAND_OFF_CLEARS_LOCKED: HandOffClearsLocked,
    IGNORE_HANDED_LOCK: IgnoreHandedLock,
    RELAXED_RETAKE: RelaxedRetake,
    RELAXED_STARVE_MARK: RelaxedStarveMark,
    RELAXED_UNLINK: RelaxedUnlink,
    LEAVE_KEEPS_WAKE: LeaveKeepsWake,
    UNLINK_WITHOUT_STACK_LOCK: UnlinkWithoutStackLock,
    GIVE_UP_KEEPS_SPINNING: GiveUpKeepsSpinning,
    STARVE_DROPS_WAKE: StarveDropsWake,
    RELAXED_UNLINK_RETRY: RelaxedUnlinkRetry,
    MARKED_BELOW_EARLIER_MARKS: MarkedBelowEarlierMarks,
    MARK_PASSES_REQUEUED: MarkPassesRequeued,
    MARK_STOPS_ABOVE_JUDGED: MarkStopsAboveJudged,
    HAND_SPIN_PAST_SPINNER: HandSpinPastSpinner,
    RELAXED_CENSUS_FLAGS: RelaxedCensusFlags,
    RELAXED_CENSUS_TAKE: RelaxedCensusTake,
    CENSUS_ON_OWNED_STACK: CensusOnOwnedStack,
    RELAXED_GIVE_BACK_RETRY: RelaxedGiveBackRetry,
    POPPED_STARVER_KEEPS_NO_DEADLINE: PoppedStarverKeepsNoDeadline,
    RELAXED_GIVE_BACK: RelaxedGiveBack,
    STARVING_UNLOCK_RELEASES_WHEN_OWNED: StarvingUnlockReleasesWhenOwned,
    RELAXED_STARVING_RELEASE: RelaxedStarvingRelease,
    RELEASE_THEN_WAKE: ReleaseThenWake,
    HAND_OFF_ENDS_STARVING: HandOffEndsStarving,
    HAND_OFF_JUDGES_TOP: HandOffJudgesTop,
    LEAVE_FROM_TOP_ENDS_STARVING: LeaveFromTopEndsStarving,
    STARVING_ENDED_RELEASES_WITHOUT_WAKE: StarvingEndedReleasesWithoutWake,
    LOOK_JUDGES_TOP: LookJudgesTop,
    SERVE_JUDGES_TOP: ServeJudgesTop,
    SERVE_GIVES_BACK_WITHOUT_STARVING: ServeGivesBackWithoutStarving,
    POP_MERGES_STALE_FLAGS: PopMergesStaleFlags,
    LEAVE_FROM_TOP_KEEPS_STALE_TAIL: LeaveFromTopKeepsStaleTail,
    NUDGE_KEEPS_LOCK: NudgeKeepsLock,
    NUDGE_WITHOUT_WAKE: NudgeWithoutWake,
    NUDGED_SLEEPS_AGAIN: NudgedSleepsAgain,
    NUDGED_KEEPS_SPIN: NudgedKeepsSpin,
    NUDGES_AGAIN: NudgesAgain,
    NUDGED_MARKS_WITHOUT_RENEWAL: NudgedMarksWithoutRenewal,
    SERVE_WAKES_PENDING_NUDGE: ServeWakesPendingNudge,
    COND_UNLOCKS_BEFORE_LISTING: CondUnlocksBeforeListing,
    REQUEUE_LOSES_NEWEST: RequeueLosesNewest,
    TIMEOUT_AFTER_NOTIFICATION: TimeoutAfterNotification,
    REQUEUED_IGNORES_NUDGE: RequeuedIgnoresNudge,
}

/// The starvation rules, for [`Loom`]'s `FAIR` (applied by
/// `crate::model::starving`).
pub(crate) mod fair {
    /// No looks, and nobody ever starves.
    pub(crate) const NOBODY_STARVES: u8 = 0;
    /// Every spin acquisition looks, and every oldest sleeper starves.
    pub(crate) const OLDEST_STARVES: u8 = 1;
    /// Every spin acquisition looks, and nobody starves.
    pub(crate) const LOOKS_NOBODY_STARVES: u8 = 2;
    /// Every spin acquisition looks, and only the first judgement of an
    /// execution finds the oldest sleeper starving (starvation mode is
    /// entered and left).
    pub(crate) const STARVES_ONCE: u8 = 3;
    /// As [`OLDEST_STARVES`], but the first judgement pauses (blocks) until
    /// the model lets it go on, to steer a race without spending
    /// preemptions.
    pub(crate) const OLDEST_STARVES_FIRST_PAUSES: u8 = 4;
    /// No looks and no judgement by age: sleepers judge themselves, their
    /// sleep ending at the starvation deadline while the execution's timeout
    /// budget lasts (`crate::model::take_timeout`).
    pub(crate) const SELF_JUDGED: u8 = 5;
    /// As [`OLDEST_STARVES`], but only the waiter whose starvation clock
    /// started first in the execution starves: the others are judged younger
    /// ([`Platform::clock`](super::Platform::clock)).
    pub(crate) const BY_AGE: u8 = 6;
    /// As [`SELF_JUDGED`], and a starving unlock nudges a bottom sleeper
    /// that is asleep instead of handing it the lock
    /// ([`Platform::NUDGE`](super::Platform::NUDGE)); the other rules
    /// always hand over, as the bound they are checked against counts.
    pub(crate) const SELF_JUDGED_NUDGED: u8 = 7;
    /// As [`BY_AGE`], with nudges as in [`SELF_JUDGED_NUDGED`]: the oldest
    /// sleeper, nudged, has not marked itself.
    pub(crate) const BY_AGE_NUDGED: u8 = 8;
    /// As [`SELF_JUDGED`], and other threads judge the waiter whose
    /// starvation clock started first in the execution starving, as in
    /// [`BY_AGE`] (a requeued condition variable waiter, whose clock the
    /// requeue starts).
    pub(crate) const SELF_JUDGED_BY_AGE: u8 = 9;
    /// As [`SELF_JUDGED_NUDGED`], but a nudge hands the nudged thread
    /// nothing, as when another thread holds SPINNING
    /// ([`Platform::NUDGE_HANDS_SPIN`](super::Platform::NUDGE_HANDS_SPIN)):
    /// the case in which unlocks do not skip their wakes while the nudge
    /// is pending, and take the stack to find it pending.
    pub(crate) const SELF_JUDGED_NUDGED_BESIDE_SPINNER: u8 = 10;

    /// Whether sleepers judge themselves under rule `fair`.
    pub(crate) const fn self_judged(fair: u8) -> bool {
        fair == SELF_JUDGED
            || fair == SELF_JUDGED_NUDGED
            || fair == SELF_JUDGED_BY_AGE
            || fair == SELF_JUDGED_NUDGED_BESIDE_SPINNER
    }
}

/// The loom platform: `FAULT` picks a deliberate bug ([`faults`]),
/// `SPURIOUS` the number of spurious futex returns per execution,
/// `FAIR` the starvation rule
/// ([`fair`]), `K` the parker: the futex model, or the portable parker
/// over loom's threads (`super::park_model`). `crate::model` names the
/// combinations its models use.
pub(crate) struct Loom<
    const FAULT: u8,
    const SPURIOUS: usize,
    const FAIR: u8,
    K = FutexModel<FAULT, SPURIOUS>,
>(core::marker::PhantomData<K>);

impl<
    const FAULT: u8,
    const SPURIOUS: usize,
    const FAIR: u8,
    K: Parker<Deadline = ModelDeadline> + 'static,
> Platform for Loom<FAULT, SPURIOUS, FAIR, K>
{
    type State = LoomState;
    type Cell<T: Copy> = LoomCell<T>;
    type Parker = K;
    const FAULT: Fault = fault(FAULT);
    const CHECKS: bool = true;
    const ABORT_ON_UNWIND: bool = false;
    const NUDGE: bool = FAIR == fair::SELF_JUDGED_NUDGED
        || FAIR == fair::BY_AGE_NUDGED
        || FAIR == fair::SELF_JUDGED_NUDGED_BESIDE_SPINNER;
    const NUDGE_HANDS_SPIN: bool = FAIR != fair::SELF_JUDGED_NUDGED_BESIDE_SPINNER;

    fn broken(what: &str) -> ! {
        panic!("{what}")
    }

    // Both are scheduling hints with no semantics; loom's versions would
    // force a switch to another thread and hide the interleavings where the
    // spinner runs on. Every spin loop is bounded by the one-iteration
    // budget, so loom needs no yield to make progress.
    fn spin_hint() {}
    fn yield_now() {}
    // A real yield: the waiting thread makes no progress until the stack
    // owner does, and loom must switch to it.
    fn wait_for_stack(_waits: &mut u32) {
        loom::thread::yield_now();
    }
    fn now() -> u64 {
        0
    }
    fn clock() -> u64 {
        crate::model::next_clock()
    }
    fn spin_deadline() -> (u64, u64) {
        (0, 0)
    }
    fn expired(_deadline: ModelDeadline, slept: bool) -> bool {
        // Every deadline falls during the waiter's first sleep.
        slept
    }
    fn backlog_sleepers() -> u32 {
        crate::model::backlog_sleepers()
    }
    // Per model thread, as natively: loom's thread-local keys are not
    // shared by its threads (std's would be, all of them running on one
    // OS thread) and start at 0 in every execution.
    fn release_guess() -> usize {
        RELEASE_GUESS.with(Cell::get)
    }
    fn set_release_guess(word: usize) {
        RELEASE_GUESS.with(|g| g.set(word));
    }
    fn look_due(_now: u64) -> bool {
        FAIR != fair::NOBODY_STARVES && !fair::self_judged(FAIR)
    }
    fn starving(since: u64, _requeued: bool) -> bool {
        crate::model::starving(FAIR, since)
    }
    fn starve_deadline(_since: u64, _backed_up: bool) -> Option<ModelDeadline> {
        if !fair::self_judged(FAIR) {
            return None;
        }
        crate::model::before_starve_deadline();
        Some(ModelDeadline::Starving)
    }
    fn record(event: Event) {
        crate::model::record(event);
    }
}

loom::thread_local! {
    /// [`Platform::release_guess`].
    static RELEASE_GUESS: Cell<usize> = Cell::new(0);
}

/// The state word as a loom `AtomicUsize` (loom's `AtomicPtr` has no
/// `fetch_or`). The model never runs under Miri, so exposing provenance to
/// cross the integer boundary is fine here; the native platform keeps strict
/// provenance.
///
/// The second field stands for the mutex's memory being freed
/// (`model::freed_by_its_last_user`): once set, every access to the word
/// fails the model. It is a std atomic, not a loom one: setting and checking
/// it are no steps of the model (loom runs one thread at a time), so it adds
/// no interleavings.
pub(crate) struct LoomState(AtomicUsize, core::sync::atomic::AtomicBool);

impl LoomState {
    pub(crate) fn new() -> Self {
        LoomState(AtomicUsize::new(0), core::sync::atomic::AtomicBool::new(false))
    }

    /// The mutex's last user frees it: from now on, an access to the word
    /// would be a use after free.
    pub(crate) fn free(&self) {
        self.1.store(true, Ordering::Relaxed);
    }

    #[track_caller]
    fn live(&self) -> &AtomicUsize {
        assert!(
            !self.1.load(Ordering::Relaxed),
            "spinbit used the mutex's word after its last user freed it"
        );
        &self.0
    }
}

fn to_ptr<N>(addr: usize) -> *mut N {
    ptr::with_exposed_provenance_mut(addr)
}

impl<N> StateWord<N> for LoomState {
    #[track_caller]
    fn load(&self, order: Ordering) -> *mut N {
        to_ptr(self.live().load(order))
    }
    #[track_caller]
    fn compare_exchange(
        &self,
        current: *mut N,
        new: *mut N,
        success: Ordering,
        failure: Ordering,
    ) -> Result<*mut N, *mut N> {
        self.live()
            .compare_exchange(
                current.expose_provenance(),
                new.expose_provenance(),
                success,
                failure,
            )
            .map(to_ptr)
            .map_err(to_ptr)
    }
    #[track_caller]
    fn fetch_or(&self, bits: usize, order: Ordering) -> *mut N {
        to_ptr(self.live().fetch_or(bits, order))
    }
    #[track_caller]
    fn fetch_and(&self, bits: usize, order: Ordering) -> *mut N {
        to_ptr(self.live().fetch_and(bits, order))
    }
    #[track_caller]
    fn fetch_xor(&self, bits: usize, order: Ordering) -> *mut N {
        to_ptr(self.live().fetch_xor(bits, order))
    }
    #[track_caller]
    fn fetch_sub(&self, bits: usize, order: Ordering) -> *mut N {
        to_ptr(self.live().fetch_sub(bits, order))
    }
}

/// A node field whose every access loom checks for data races.
pub(crate) struct LoomCell<T>(loom::cell::UnsafeCell<T>);

impl<T: Copy> NodeCell<T> for LoomCell<T> {
    #[track_caller]
    fn new(value: T) -> Self {
        LoomCell(loom::cell::UnsafeCell::new(value))
    }
    #[track_caller]
    unsafe fn get(&self) -> T {
        // SAFETY: loom checks the caller's no-race promise.
        self.0.with(|p| unsafe { *p })
    }
    #[track_caller]
    unsafe fn set(&self, value: T) {
        // SAFETY: loom checks the caller's no-race promise.
        self.0.with_mut(|p| unsafe { *p = value })
    }
}

// The word's states and transitions, the native parkers' (`word`).
use super::word::{AWAKE, NUDGED, PARKED, SLEEPING, Word, give_up, settle};

/// The model's deadlines have no time, only an order: a sleeper's own
/// starvation deadline (`fair::SELF_JUDGED`) comes before a timed waiter's deadline, so
/// that a timed waiter can mark itself starving before it leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum ModelDeadline {
    /// A sleeper's starvation deadline (`Platform::starve_deadline`).
    Starving,
    /// A timed waiter's deadline (`lock_until`).
    Timed,
}

/// A node's futex word, parked on through the futex model.
pub(crate) struct FutexModel<const FAULT: u8, const SPURIOUS: usize> {
    word: AtomicU32,
}

impl Word for AtomicU32 {
    fn load(&self, order: Ordering) -> u32 {
        AtomicU32::load(self, order)
    }
    fn compare_exchange(
        &self,
        current: u32,
        new: u32,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u32, u32> {
        AtomicU32::compare_exchange(self, current, new, success, failure)
    }
}

impl<const FAULT: u8, const SPURIOUS: usize> Parker for FutexModel<FAULT, SPURIOUS> {
    fn new() -> Self {
        FutexModel { word: AtomicU32::new(AWAKE) }
    }
    fn prepare(&self) {
        self.word.store(PARKED, Ordering::Relaxed);
    }
    fn park(&self) -> Woke {
        crate::model::note_sleep(false);
        let woke = loop {
            if let Some(woke) = settle(&self.word) {
                break woke;
            }
            futex_wait(&self.word, SLEEPING, SPURIOUS, fault(FAULT) == Fault::WaitWithoutCompare);
        };
        crate::model::after_wake();
        woke
    }
    /// The model has no clock: see [`crate::model::take_timeout`] for when
    /// a timed wait gives up.
    type Deadline = ModelDeadline;

    fn park_until(&self, _deadline: ModelDeadline) -> Woke {
        crate::model::note_sleep(true);
        loop {
            if let Some(woke) = settle(&self.word) {
                return woke;
            }
            if futex_wait_timed(&self.word, SLEEPING, SPURIOUS) {
                // As the kernel: a wake may have landed after the timeout.
                return give_up(&self.word);
            }
        }
    }

    fn unparked(&self) -> bool {
        self.word.load(Ordering::Acquire) == AWAKE
    }

    unsafe fn unpark(this: *const Self) {
        // SAFETY: live until the swap, as the trait requires.
        let word = unsafe { &raw const (*this).word };
        // SAFETY: as above; nothing below dereferences `word`.
        let was = unsafe { (*word).swap(AWAKE, Ordering::Release) };
        if was != PARKED {
            futex_wake(word.addr(), 1);
        }
    }

    type Wake = usize;

    unsafe fn nudge(this: *const Self) -> Nudge<usize> {
        // SAFETY: the node is linked and the caller owns the stack.
        let word = unsafe { &(*this).word };
        if fault(FAULT) == Fault::NudgeWithoutWake {
            // Broken on purpose: the caller releases the lock as if the
            // sleeper had been nudged, but it sleeps on.
            return Nudge::Woken(0);
        }
        match word.compare_exchange(SLEEPING, NUDGED, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => Nudge::Woken(ptr::from_ref(word).addr()),
            Err(NUDGED) => Nudge::Pending,
            Err(_) => Nudge::Running,
        }
    }

    fn wake_nudged(addr: usize) {
        futex_wake(addr, 1);
    }

    /// Nothing to wait for, as in the futex parker (the portable parker's
    /// count of wakers has models of its own, `park_model.rs`).
    fn retire(&self) {}
}

#[derive(Default)]
struct Table {
    /// (address, waiter id) of every blocked waiter.
    blocked: Vec<(usize, usize)>,
    /// Ids that a wake has released and that have not returned yet.
    released: Vec<usize>,
    next_id: usize,
    spurious_used: usize,
}

struct Futexes {
    table: Mutex<Table>,
    changed: Condvar,
}

loom::lazy_static! {
    static ref FUTEXES: Futexes = Futexes { table: Mutex::new(Table::default()), changed: Condvar::new() };
}

/// How many threads are blocked in the futex model: for a model that waits
/// until a sleeper is asleep, not merely on its way to sleep.
pub(crate) fn blocked_waiters() -> usize {
    FUTEXES.table.lock().unwrap().blocked.len()
}

fn futex_wait(word: &AtomicU32, expected: u32, spurious: usize, no_compare: bool) {
    futex_wait_inner(word, expected, spurious, no_compare, false);
}

/// A wait with a deadline: returns `true` if it timed out. It times out
/// instead of blocking while the model's budget of timeouts lasts
/// ([`crate::model::take_timeout`]), wherever the schedule puts it; a wait
/// that would not block (the word changed, a spurious return) does not.
fn futex_wait_timed(word: &AtomicU32, expected: u32, spurious: usize) -> bool {
    futex_wait_inner(word, expected, spurious, false, true)
}

fn futex_wait_inner(
    word: &AtomicU32,
    expected: u32,
    spurious: usize,
    no_compare: bool,
    timed: bool,
) -> bool {
    let mut t = FUTEXES.table.lock().unwrap();
    // Relaxed: the table lock orders this load after any waker's store that
    // precedes its wake (which takes the same lock).
    if !no_compare && word.load(Ordering::Relaxed) != expected {
        return false;
    }
    if t.spurious_used < spurious {
        t.spurious_used += 1;
        crate::model::record_spurious();
        return false;
    }
    if timed && crate::model::take_timeout() {
        return true;
    }
    let id = t.next_id;
    t.next_id += 1;
    t.blocked.push((ptr::from_ref(word).addr(), id));
    loop {
        t = FUTEXES.changed.wait(t).unwrap();
        if let Some(i) = t.released.iter().position(|&r| r == id) {
            t.released.swap_remove(i);
            return false;
        }
    }
}

fn futex_wake(addr: usize, n: usize) {
    let mut t = FUTEXES.table.lock().unwrap();
    let mut woken = 0;
    while woken < n {
        let Some(i) = t.blocked.iter().position(|&(a, _)| a == addr) else { break };
        let (_, id) = t.blocked.remove(i);
        t.released.push(id);
        woken += 1;
    }
    if woken > 0 {
        FUTEXES.changed.notify_all();
    }
}
