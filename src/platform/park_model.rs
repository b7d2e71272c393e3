//! Loom models of the portable parker (`park.rs`): the shipped
//! `ThreadParker` over loom's threads, atomics and cells.
//!
//! The loom models of the lock (`crate::model`) sleep on a futex model;
//! these check the portable parker's own protocol: a wake or a nudge is
//! never lost, a park token that another party meant for the thread is
//! given back, and no waker touches the parker after its thread retired it
//! (the thread then frees the handle's cell, a write that loom checks
//! against the waker's read of the handle). A token's unpark orders the
//! unparker's past before the park that takes it, so a thread that waits
//! for its OS wake never races its waker's read of the handle; a timed park
//! that has run out is how a thread sees the wake store without that wake
//! (as a spurious return would), and the models of the count use it.

use core::sync::atomic::Ordering::{self, Acquire, Relaxed, Release};
use std::cell::{Cell, RefCell};
use std::sync::Arc;

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, AtomicU32};
use loom::sync::{Condvar, Mutex};
use loom::thread;

use super::loom::ModelDeadline;
use super::park::{
    COUNTS_LATE, PARK_WATCH, ParkWatch, RETIRES_EARLY, SOUND, Slot, ThreadParker, Threads, Word32,
};
use super::{Nudge, Parker, Woke};

/// Loom's threads, with park tokens of their own ([`Token`]). `LOSSY`
/// (a control of the models themselves): an unpark made while its thread
/// is not waiting in a park is dropped.
pub(crate) struct LoomThreads<const LOSSY: bool = false>;

/// A thread's park token, as std's: at most one, kept until a park takes
/// it (a spurious return aside, which the models leave out), and an unpark
/// orders the unparker's past before the park that takes its token. Made
/// of loom's mutex and condition variable, because loom's own park token
/// does not survive a `yield_now`, which the models need in their waits.
pub(crate) struct Token {
    state: Mutex<TokenState>,
    cv: Condvar,
}

#[derive(Default)]
struct TokenState {
    /// The token is available.
    set: bool,
    /// Its thread waits in a park.
    waiting: bool,
}

impl Token {
    fn new() -> Arc<Token> {
        Arc::new(Token { state: Mutex::new(TokenState::default()), cv: Condvar::new() })
    }
}

loom::thread_local! {
    /// The calling thread's token.
    static TOKEN: RefCell<Option<Arc<Token>>> = RefCell::new(None);
}

/// The calling thread's token, made at its first use.
fn token() -> Arc<Token> {
    TOKEN.with(|t| Arc::clone(t.borrow_mut().get_or_insert_with(Token::new)))
}

/// The portable parker over loom's threads, for the lock's models
/// (`crate::model`).
pub(crate) type PortableModel = ThreadParker<LoomThreads>;

/// Every deadline of a timed park has passed: the park gives up at once
/// unless its wake has landed (the deadlines of the lock's models have no
/// time, only an order).
impl<const LOSSY: bool> Threads for LoomThreads<LOSSY> {
    type Handle = Arc<Token>;
    type U32 = AtomicU32;
    type Slot = UnsafeCell<Option<Arc<Token>>>;
    type Deadline = ModelDeadline;

    fn current() -> Arc<Token> {
        token()
    }
    fn park() {
        let token = token();
        let mut state = token.state.lock().unwrap();
        while !state.set {
            state.waiting = true;
            state = token.cv.wait(state).unwrap();
        }
        state.waiting = false;
        state.set = false;
    }
    fn park_until(_: ModelDeadline) -> bool {
        false
    }
    fn unpark(token: &Arc<Token>) {
        let mut state = token.state.lock().unwrap();
        if LOSSY && !state.waiting {
            return;
        }
        state.set = true;
        token.cv.notify_one();
    }
    fn wait(_: &mut u32) {
        RETIRE_WAITS.set(RETIRE_WAITS.get() + 1);
        thread::yield_now();
    }
    /// A look at the word: a point where loom may let the waker go on or
    /// switch to the sleeper (a yield would always switch).
    fn after_wake_store(word: &AtomicU32) {
        word.load(Relaxed);
    }
}

impl Word32 for AtomicU32 {
    fn new(value: u32) -> Self {
        AtomicU32::new(value)
    }
    fn store(&self, value: u32, order: Ordering) {
        AtomicU32::store(self, value, order);
    }
    fn swap(&self, value: u32, order: Ordering) -> u32 {
        AtomicU32::swap(self, value, order)
    }
    fn fetch_add(&self, value: u32, order: Ordering) -> u32 {
        AtomicU32::fetch_add(self, value, order)
    }
    fn fetch_sub(&self, value: u32, order: Ordering) -> u32 {
        AtomicU32::fetch_sub(self, value, order)
    }
}

impl<H> Slot<H> for UnsafeCell<Option<H>> {
    fn empty() -> Self {
        UnsafeCell::new(None)
    }
    unsafe fn set(&self, handle: Option<H>) {
        // SAFETY: forwarded from the caller (and checked by loom).
        self.with_mut(|p| unsafe { *p = handle });
    }
    unsafe fn with<R>(&self, f: impl FnOnce(Option<&H>) -> R) -> R {
        // SAFETY: forwarded from the caller (and checked by loom).
        UnsafeCell::with(self, |p| f(unsafe { (*p).as_ref() }))
    }
}

type Model<const LOSSY: bool, const LOSES_TOKENS: bool, const BROKEN: u8> =
    ThreadParker<LoomThreads<LOSSY>, LOSES_TOKENS, BROKEN>;

/// How the waker lets the sleeper go.
#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    /// `unpark`.
    Wake,
    /// `nudge`, then `wake_nudged`.
    Nudge,
}

std::thread_local! {
    /// How many times a `retire` waited for a waker (loom runs a model's
    /// threads on the test's thread).
    static RETIRE_WAITS: Cell<usize> = const { Cell::new(0) };
}

/// What a model's executions did, over all of them.
#[derive(Debug, Default)]
struct Seen {
    /// Executions in which the sleeper found its wake or nudge in a timed
    /// park that had run out, and its `retire` then waited for the waker.
    timed_retire_waited: usize,
    /// Executions in which the parker's park took a token while the word
    /// still said SLEEPING (not its wake) after the sleeper's look had
    /// found the flag clear: the token its own park needs later.
    foreign_token_taken: usize,
}

thread_local! {
    static SEEN: RefCell<Seen> = RefCell::new(Seen::default());
}

/// Runs `f` under loom at bound 3 (4 in the deeper run of
/// `SPINBIT_LOOM_DEEP`, as `crate::model`'s, or `LOOM_MAX_PREEMPTIONS`).
fn explore(f: impl Fn() + Sync + Send + 'static) -> Seen {
    SEEN.with(|s| *s.borrow_mut() = Seen::default());
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        let deep = std::env::var_os("SPINBIT_LOOM_DEEP").is_some();
        builder.preemption_bound = Some(if deep { 4 } else { 3 });
    }
    builder.check(f);
    SEEN.with(|s| core::mem::take(&mut *s.borrow_mut()))
}

/// A sleeper arms the parker and parks on it (`timed`: first in a timed
/// park that has run out, then untimed), then retires the parker and
/// frees its handle; the model's main thread wakes or nudges it once it is
/// armed. With `foreign`, the sleeper first looks at a flag, and a third
/// thread sets the flag and unparks the sleeper's thread: if the look
/// found the flag clear, the sleeper parks once its wait on the parker is
/// over, and again until it sees the flag (the caller's own "check, then
/// park", around the mutex's wait): a token the parker took and did not
/// give back leaves it asleep.
fn wake_then_retire<const LOSSY: bool, const LOSES_TOKENS: bool, const BROKEN: u8>(
    by: By,
    timed: bool,
    foreign: bool,
) -> Seen {
    let watch: &'static ParkWatch = Box::leak(Box::new(ParkWatch::new()));
    PARK_WATCH.set(Some(watch));
    let seen = explore(move || {
        let parker: &'static Model<LOSSY, LOSES_TOKENS, BROKEN> =
            Box::leak(Box::new(Parker::new()));
        let armed: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
        let flag: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
        let sleeper_token = Token::new();
        let foreign_token = Arc::clone(&sleeper_token);
        let sleeper = thread::spawn(move || {
            TOKEN.with(|t| *t.borrow_mut() = Some(sleeper_token));
            let flag_was_set = foreign && flag.load(Acquire);
            parker.prepare();
            // Release: publishes the armed parker (the push's part).
            armed.store(true, Release);
            let tokens_before = watch.foreign.load(Relaxed);
            let (woke, timed_woke) = match timed.then(|| parker.park_until(ModelDeadline::Timed)) {
                None | Some(Woke::TimedOut) => (parker.park(), false),
                Some(woke) => (woke, true),
            };
            if foreign && !flag_was_set && watch.foreign.load(Relaxed) > tokens_before {
                SEEN.with(|s| s.borrow_mut().foreign_token_taken += 1);
            }
            let waits_before = RETIRE_WAITS.get();
            parker.retire();
            if timed_woke && RETIRE_WAITS.get() > waits_before {
                SEEN.with(|s| s.borrow_mut().timed_retire_waited += 1);
            }
            // SAFETY: retired.
            unsafe { parker.free_handle() };
            if foreign && !flag_was_set {
                // Found clear: parks, and parks again until it is set.
                loop {
                    LoomThreads::<LOSSY>::park();
                    if flag.load(Acquire) {
                        break;
                    }
                }
            }
            woke
        });
        let other = foreign.then(|| {
            thread::spawn(move || {
                flag.store(true, Release);
                LoomThreads::<LOSSY>::unpark(&foreign_token);
            })
        });
        while !armed.load(Acquire) {
            thread::yield_now();
        }
        let p: *const Model<LOSSY, LOSES_TOKENS, BROKEN> = parker;
        match by {
            // SAFETY: armed, and its thread waits for this wake.
            By::Wake => unsafe { Model::<LOSSY, LOSES_TOKENS, BROKEN>::unpark(p) },
            By::Nudge => loop {
                // SAFETY: armed, and its thread waits for this nudge.
                match unsafe { Model::<LOSSY, LOSES_TOKENS, BROKEN>::nudge(p) } {
                    Nudge::Woken(w) => break Model::<LOSSY, LOSES_TOKENS, BROKEN>::wake_nudged(w),
                    // Not asleep yet: try again.
                    Nudge::Running => thread::yield_now(),
                    Nudge::Pending => panic!("nudged twice"),
                }
            },
        }
        let woke = sleeper.join().unwrap();
        assert_eq!(woke, if by == By::Nudge { Woke::Nudged } else { Woke::Unparked });
        if let Some(other) = other {
            other.join().unwrap();
        }
    });
    PARK_WATCH.set(None);
    seen
}

/// Runs a control, which must fail with one of `expected` in its message.
fn must_fail(
    what: &str,
    expected: &[&str],
    control: impl FnOnce() -> Seen + std::panic::UnwindSafe,
) {
    let caught = std::panic::catch_unwind(control).expect_err(what);
    let msg = caught
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| caught.downcast_ref::<&str>().copied())
        .unwrap_or("");
    assert!(expected.iter().any(|e| msg.contains(e)), "{what}: unexpected panic: {msg}");
}

/// A waker's read of the handle races the sleeper's free of it: loom
/// reports it when either access comes (a causality violation), or, if the
/// free comes while the waker is inside its read, as that.
const RACE: &[&str] = &["Causality violation", "currently reading from cell"];

#[test]
fn a_wake_is_never_lost() {
    wake_then_retire::<false, false, SOUND>(By::Wake, false, false);
}

#[test]
fn a_nudge_is_never_lost() {
    wake_then_retire::<false, false, SOUND>(By::Nudge, false, false);
}

/// The models reach the wake that lands before its sleeper parks: with
/// tokens that drop such an unpark, the sleeper sleeps on.
#[test]
fn models_control_an_unpark_before_the_park_is_kept() {
    must_fail("a dropped early unpark must deadlock", &["deadlock"], || {
        wake_then_retire::<true, false, SOUND>(By::Wake, false, false)
    });
    must_fail("a dropped early nudge wake must deadlock", &["deadlock"], || {
        wake_then_retire::<true, false, SOUND>(By::Nudge, false, false)
    });
}

/// The sleeper sees the wake store in a timed park that has run out, and
/// retires while the waker may still be on its way to the handle: its
/// `retire` must then wait.
#[test]
fn a_woken_thread_retires_after_its_waker() {
    let seen = wake_then_retire::<false, false, SOUND>(By::Wake, true, false);
    assert!(seen.timed_retire_waited > 0, "{seen:?}");
}

#[test]
fn a_nudged_thread_retires_after_its_nudger() {
    let seen = wake_then_retire::<false, false, SOUND>(By::Nudge, true, false);
    assert!(seen.timed_retire_waited > 0, "{seen:?}");
}

/// A token another thread meant for the sleeper's own "check, then park"
/// survives a park of the parker that took it.
#[test]
fn a_foreign_park_token_is_given_back() {
    let seen = wake_then_retire::<false, false, SOUND>(By::Wake, false, true);
    assert!(seen.foreign_token_taken > 0, "{seen:?}");
}

#[test]
fn broken_retire_does_not_wait() {
    must_fail("a retire that does not wait must race", RACE, || {
        wake_then_retire::<false, false, RETIRES_EARLY>(By::Wake, true, false)
    });
}

#[test]
fn broken_waker_counts_itself_in_late() {
    must_fail("a waker that counts itself in late must race", RACE, || {
        wake_then_retire::<false, false, COUNTS_LATE>(By::Wake, true, false)
    });
}

#[test]
fn broken_nudger_counts_itself_in_late() {
    must_fail("a nudger that counts itself in late must race", RACE, || {
        wake_then_retire::<false, false, COUNTS_LATE>(By::Nudge, true, false)
    });
}

#[test]
fn broken_parker_loses_a_foreign_token() {
    must_fail("a parker that loses a foreign token must deadlock", &["deadlock"], || {
        wake_then_retire::<false, true, SOUND>(By::Wake, false, true)
    });
}
