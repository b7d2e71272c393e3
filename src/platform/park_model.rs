//! Loom models of the portable parker (`park.rs`): the shipped
//! `ThreadParker` over loom's threads, atomics and cells.
//!
//! The loom models of the lock (`crate::model`) sleep on a futex model;
//! these check the portable parker's own protocol: a wake or a nudge is
//! never lost, a park token that another party meant for the thread is
//! given back, and no waker touches the parker after its thread retired it
//! (the thread then frees the handle's cell, a write that loom checks
//! against the waker's read of the handle). Loom's `unpark` orders the
//! unparker's past before the unparked thread's future, so a thread that
//! waits for its OS wake never races its waker's read of the handle; a
//! timed park that has run out is how a thread sees the wake store without
//! that wake (as a spurious return would), and the models of the count
//! use it.

use core::sync::atomic::Ordering::{self, Acquire, Release};

use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;
use std::cell::{Cell, RefCell};
use std::sync::Arc;

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, AtomicU32};
use loom::sync::{Condvar, Mutex};
use loom::thread;

use super::park::{
    COUNTS_LATE, FOREIGN_TOKENS, RETIRES_EARLY, SOUND, Slot, ThreadParker, Threads, Word32,
};
use super::{Nudge, Parker, Woke};

/// Loom's threads, with park tokens of their own ([`Token`]).
struct LoomThreads;

/// A thread's park token, as std's: at most one, kept until a park takes
/// it (a spurious return aside, which the models leave out), and an unpark
/// orders the unparker's past before the park that takes its token. Made
/// of loom's mutex and condition variable, because loom's own park token
/// does not survive a `yield_now`, which the models need in their waits.
struct Token {
    set: Mutex<bool>,
    cv: Condvar,
}

loom::thread_local! {
    /// The calling thread's token.
    static TOKEN: RefCell<Option<Arc<Token>>> = RefCell::new(None);
}

/// The calling thread's token, made at its first use.
fn token() -> Arc<Token> {
    TOKEN.with(|t| {
        let mut t = t.borrow_mut();
        let token =
            t.get_or_insert_with(|| Arc::new(Token { set: Mutex::new(false), cv: Condvar::new() }));
        Arc::clone(token)
    })
}

/// The deadline of every timed park in these models: already passed, so a
/// timed park gives up at once unless its wake has landed.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Passed;

impl Threads for LoomThreads {
    type Handle = Arc<Token>;
    type U32 = AtomicU32;
    type Slot = UnsafeCell<Option<Arc<Token>>>;
    type Deadline = Passed;

    fn current() -> Arc<Token> {
        token()
    }
    fn park() {
        let token = token();
        let mut set = token.set.lock().unwrap();
        while !*set {
            set = token.cv.wait(set).unwrap();
        }
        *set = false;
    }
    fn park_until(_: Passed) -> bool {
        false
    }
    fn unpark(token: &Arc<Token>) {
        *token.set.lock().unwrap() = true;
        token.cv.notify_one();
    }
    fn wait(_: &mut u32) {
        RETIRE_WAITS.set(RETIRE_WAITS.get() + 1);
        thread::yield_now();
    }
    fn after_wake_store() {
        thread::yield_now();
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

type Model<const LOSES_TOKENS: bool, const BROKEN: u8> =
    ThreadParker<LoomThreads, LOSES_TOKENS, BROKEN>;

/// How the waker lets the sleeper go.
#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    /// `unpark`.
    Wake,
    /// `nudge`, then `wake_nudged`.
    Nudge,
}

std::thread_local! {
    /// How many times a `retire` waited for a waker, over a model's
    /// executions (loom runs them on the test's thread).
    static RETIRE_WAITS: Cell<usize> = const { Cell::new(0) };
}

/// What a model's executions did, over all of them.
#[derive(Debug)]
struct Seen {
    /// Waits of `retire` for a waker.
    retire_waits: usize,
    /// Parks that returned on a token that was not the parker's wake.
    foreign_tokens: u64,
}

/// A token for the sleeper, which the third thread of a model may unpark.
fn token_for_sleeper() -> Arc<Token> {
    Arc::new(Token { set: Mutex::new(false), cv: Condvar::new() })
}

fn explore(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(f);
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
fn wake_then_retire<const LOSES_TOKENS: bool, const BROKEN: u8>(
    by: By,
    timed: bool,
    foreign: bool,
) -> Seen {
    let foreign_tokens: &'static AtomicU64 = Box::leak(Box::new(AtomicU64::new(0)));
    FOREIGN_TOKENS.set(Some(foreign_tokens));
    RETIRE_WAITS.set(0);
    explore(move || {
        let parker: &'static Model<LOSES_TOKENS, BROKEN> = Box::leak(Box::new(Parker::new()));
        let armed: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
        let flag: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
        let sleeper_token = token_for_sleeper();
        let foreign_token = Arc::clone(&sleeper_token);
        let sleeper = thread::spawn(move || {
            TOKEN.with(|t| *t.borrow_mut() = Some(sleeper_token));
            let flag_was_set = foreign && flag.load(Acquire);
            parker.prepare();
            // Release: publishes the armed parker (the push's part).
            armed.store(true, Release);
            let woke = match timed.then(|| parker.park_until(Passed)) {
                None | Some(Woke::TimedOut) => parker.park(),
                Some(woke) => woke,
            };
            parker.retire();
            // SAFETY: retired.
            unsafe { parker.free_handle() };
            if foreign && !flag_was_set {
                // Found clear: parks, and parks again until it is set.
                loop {
                    LoomThreads::park();
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
                LoomThreads::unpark(&foreign_token);
            })
        });
        while !armed.load(Acquire) {
            thread::yield_now();
        }
        let p: *const Model<LOSES_TOKENS, BROKEN> = parker;
        match by {
            // SAFETY: armed, and its thread waits for this wake.
            By::Wake => unsafe { Model::<LOSES_TOKENS, BROKEN>::unpark(p) },
            By::Nudge => loop {
                // SAFETY: armed, and its thread waits for this nudge.
                match unsafe { Model::<LOSES_TOKENS, BROKEN>::nudge(p) } {
                    Nudge::Woken(w) => break Model::<LOSES_TOKENS, BROKEN>::wake_nudged(w),
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
    FOREIGN_TOKENS.set(None);
    Seen { retire_waits: RETIRE_WAITS.get(), foreign_tokens: foreign_tokens.load(Relaxed) }
}

#[test]
fn a_wake_is_never_lost() {
    wake_then_retire::<false, SOUND>(By::Wake, false, false);
}

#[test]
fn a_nudge_is_never_lost() {
    wake_then_retire::<false, SOUND>(By::Nudge, false, false);
}

/// The sleeper sees the wake store in a timed park that has run out, and
/// retires while the waker may still be on its way to the handle: its
/// `retire` must then wait.
#[test]
fn a_woken_thread_retires_after_its_waker() {
    let seen = wake_then_retire::<false, SOUND>(By::Wake, true, false);
    assert!(seen.retire_waits > 0, "{seen:?}");
}

#[test]
fn a_nudged_thread_retires_after_its_nudger() {
    let seen = wake_then_retire::<false, SOUND>(By::Nudge, true, false);
    assert!(seen.retire_waits > 0, "{seen:?}");
}

/// A token another thread meant for the sleeper's own "check, then park"
/// survives a park of the parker that took it.
#[test]
fn a_foreign_park_token_is_given_back() {
    let seen = wake_then_retire::<false, SOUND>(By::Wake, false, true);
    assert!(seen.foreign_tokens > 0, "{seen:?}");
}

#[test]
#[should_panic(expected = "Causality violation")]
fn broken_retire_does_not_wait() {
    wake_then_retire::<false, RETIRES_EARLY>(By::Wake, true, false);
}

#[test]
#[should_panic(expected = "Causality violation")]
fn broken_waker_counts_itself_in_late() {
    wake_then_retire::<false, COUNTS_LATE>(By::Wake, true, false);
}

#[test]
#[should_panic(expected = "Causality violation")]
fn broken_nudger_counts_itself_in_late() {
    wake_then_retire::<false, COUNTS_LATE>(By::Nudge, true, false);
}

#[test]
#[should_panic(expected = "deadlock")]
fn broken_parker_loses_a_foreign_token() {
    wake_then_retire::<true, SOUND>(By::Wake, false, true);
}
