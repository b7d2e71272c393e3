//! `spinbit::v04`: the mutex behind lock_api 0.4's traits, used through
//! lock_api 0.4's generic types and functions, as code written for
//! `parking_lot` 0.12 uses it.
//!
//! Each check that a broken mutex could pass by luck, or that only shows a
//! fault when a race lands, has a negative control: the same check run on
//! a deliberately broken raw mutex defined here must fail.
#![cfg(feature = "lock_api_04")]

mod common;

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering::Relaxed};
use std::sync::{Barrier, Mutex as StdMutex};
use std::thread;
use std::time::{Duration, Instant};

use common::counters::{Counters, RacyCounter, Slot};
use common::{Watchdog, noticed};
use lock_api_04::{GetThreadId, RawMutex as _, RawMutexFair, RawMutexTimed};
use spinbit::v04::{
    self, FairMutex, FairMutexGuard, MappedFairMutexGuard, MappedMutexGuard,
    MappedReentrantMutexGuard, Mutex, MutexGuard, RawFairMutex, RawMutex, RawThreadId,
    ReentrantMutex, ReentrantMutexGuard,
};

/// How long a negative control whose fault shows only when a race lands
/// keeps running its check (see `noticed`).
const RACE_BUDGET: Duration = Duration::from_secs(20);

/// Acquisitions per thread of one exclusion run.
const PER_THREAD: u64 = if cfg!(miri) { 30 } else { 20_000 };

/// The tests that need real overlap, or a waiter asleep on time, take
/// turns: each wants the machine's cores to itself.
static SERIAL: StdMutex<()> = StdMutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// What these tests need of a raw mutex: lock_api 0.4's three traits, with
/// `std`'s time types.
trait Raw04:
    lock_api_04::RawMutex + RawMutexFair + RawMutexTimed<Duration = Duration, Instant = Instant> + Sync
{
}

impl<R> Raw04 for R where
    R: lock_api_04::RawMutex
        + RawMutexFair
        + RawMutexTimed<Duration = Duration, Instant = Instant>
        + Sync
{
}

// --- Generic use -----------------------------------------------------------

/// The raw protocol, on one thread, through lock_api 0.4's traits only.
fn raw_protocol<R: Raw04>() {
    let m = R::INIT;
    assert!(!m.is_locked());
    m.lock();
    assert!(m.is_locked());
    assert!(!m.try_lock());
    assert!(!m.try_lock_for(Duration::from_millis(5)));
    assert!(!m.try_lock_until(Instant::now() + Duration::from_millis(5)));
    // SAFETY: locked above, on this thread.
    unsafe { m.bump() };
    assert!(m.is_locked(), "bump with nobody waiting keeps the lock");
    // SAFETY: still held.
    unsafe { m.unlock_fair() };
    assert!(!m.is_locked());
    assert!(m.try_lock());
    // SAFETY: taken by `try_lock`.
    unsafe { m.unlock() };
    assert!(m.try_lock_for(Duration::ZERO));
    // SAFETY: taken by `try_lock_for`.
    unsafe { m.unlock() };
    assert!(m.try_lock_until(Instant::now() + Duration::from_secs(1)));
    // SAFETY: taken by `try_lock_until`.
    unsafe { m.unlock() };
    assert!(!m.is_locked());
}

/// The same through lock_api 0.4's generic `Mutex`.
fn generic_mutex<R: Raw04>() {
    let m = lock_api_04::Mutex::<R, Vec<u32>>::new(vec![1]);
    m.lock().push(2);
    {
        let mut g = m.try_lock().expect("free");
        assert!(m.try_lock().is_none());
        assert!(m.try_lock_for(Duration::from_millis(2)).is_none());
        g.push(3);
        lock_api_04::MutexGuard::bump(&mut g);
        g.push(4);
        lock_api_04::MutexGuard::unlock_fair(g);
    }
    assert!(!m.is_locked());
    let g = m.try_lock_until(Instant::now() + Duration::from_millis(10)).expect("free");
    assert_eq!(*g, [1, 2, 3, 4]);
    drop(g);
    assert_eq!(m.into_inner(), [1, 2, 3, 4]);
}

#[test]
fn raw_mutex_through_lock_api_04() {
    raw_protocol::<RawMutex>();
    generic_mutex::<RawMutex>();
}

#[test]
fn raw_fair_mutex_through_lock_api_04() {
    raw_protocol::<RawFairMutex>();
    generic_mutex::<RawFairMutex>();
}

#[test]
fn one_word_and_the_parking_lot_names() {
    assert_eq!(size_of::<RawMutex>(), size_of::<usize>());
    assert_eq!(size_of::<RawFairMutex>(), size_of::<usize>());
    static M: Mutex<u32> = v04::const_mutex(0);
    static F: FairMutex<u32> = v04::const_fair_mutex(0);
    static R: ReentrantMutex<u32> = v04::const_reentrant_mutex(0);
    *M.lock() += 1;
    let g: FairMutexGuard<'_, u32> = F.lock();
    assert_eq!(*g + *M.lock() + *R.lock(), 1);
    assert!(format!("{:?}", RawMutex::new()).contains("locked: false"));
    // The id is the crate root's, under both versions' traits.
    assert_eq!(
        lock_api_04::GetThreadId::nonzero_thread_id(&RawThreadId),
        spinbit::lock_api::GetThreadId::nonzero_thread_id(&spinbit::RawThreadId),
    );
}

#[test]
fn guards_map() {
    let m = Mutex::new((1u32, String::from("a")));
    {
        let mut g: MappedMutexGuard<'_, String> = MutexGuard::map(m.lock(), |d| &mut d.1);
        g.push('b');
        assert!(m.is_locked());
        assert!(m.try_lock().is_none());
    }
    assert!(!m.is_locked());
    let g = MutexGuard::try_map(m.lock(), |d| (d.0 == 1).then_some(&mut d.0));
    let mut g = g.map_err(|_| "mapped").unwrap();
    *g += 1;
    let g = MappedMutexGuard::try_map(g, |_| None::<&mut u8>).expect_err("kept");
    drop(g);
    assert_eq!(m.into_inner(), (2, String::from("ab")));

    let f = FairMutex::new([0u32; 2]);
    {
        let mut g: MappedFairMutexGuard<'_, u32> = FairMutexGuard::map(f.lock(), |a| &mut a[1]);
        *g = 7;
        MappedFairMutexGuard::unlock_fair(g);
    }
    assert!(!f.is_locked());
    assert_eq!(f.into_inner(), [0, 7]);
}

// --- Negative-control raw mutexes ------------------------------------------

/// Not a mutex: every lock succeeds at once. Only used on data that is all
/// atomics, through shared references.
struct NotAMutex;

// SAFETY: NOT sound: it does not exclude. The negative controls use it only
// for `Counters<RacyCounter>`, whose fields are atomics, and never take a
// `&mut` through its guards, so the races they run are on atomics only.
unsafe impl lock_api_04::RawMutex for NotAMutex {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = NotAMutex;
    type GuardMarker = lock_api_04::GuardSend;
    fn lock(&self) {}
    fn try_lock(&self) -> bool {
        true
    }
    unsafe fn unlock(&self) {}
}

// SAFETY: as above (not sound).
unsafe impl RawMutexFair for NotAMutex {
    unsafe fn unlock_fair(&self) {}
    unsafe fn bump(&self) {}
}

// SAFETY: as above (not sound).
unsafe impl RawMutexTimed for NotAMutex {
    type Duration = Duration;
    type Instant = Instant;
    fn try_lock_for(&self, _: Duration) -> bool {
        true
    }
    fn try_lock_until(&self, _: Instant) -> bool {
        true
    }
}

/// Which part of [`v04::RawMutex`] a [`Broken`] mutex gets wrong.
trait Fault: Sync {
    /// Timed locks make one attempt, without waiting.
    const NO_WAIT: bool = false;
    /// `unlock_fair` is a normal unlock.
    const UNFAIR: bool = false;
    /// `bump` does nothing.
    const NO_BUMP: bool = false;
}

struct NoWait;
impl Fault for NoWait {
    const NO_WAIT: bool = true;
}

struct Unfair;
impl Fault for Unfair {
    const UNFAIR: bool = true;
}

struct NoBump;
impl Fault for NoBump {
    const NO_BUMP: bool = true;
}

/// [`v04::RawMutex`] with one fault `F`: it still excludes.
struct Broken<F>(RawMutex, std::marker::PhantomData<F>);

// SAFETY: every method forwards to `v04::RawMutex`, or, for a fault, to
// another of its methods that keeps the contract of this one (a timed lock
// that does not wait is `try_lock`; an unfair unlock is `unlock`; a `bump`
// that does nothing keeps the lock held).
unsafe impl<F: Fault> lock_api_04::RawMutex for Broken<F> {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Broken(RawMutex::new(), std::marker::PhantomData);
    type GuardMarker = lock_api_04::GuardSend;
    fn lock(&self) {
        self.0.lock()
    }
    fn try_lock(&self) -> bool {
        self.0.try_lock()
    }
    unsafe fn unlock(&self) {
        // SAFETY: forwarded from the caller.
        unsafe { self.0.unlock() }
    }
    fn is_locked(&self) -> bool {
        self.0.is_locked()
    }
}

// SAFETY: as above.
unsafe impl<F: Fault> RawMutexFair for Broken<F> {
    unsafe fn unlock_fair(&self) {
        // SAFETY: forwarded from the caller.
        unsafe { if F::UNFAIR { self.0.unlock() } else { self.0.unlock_fair() } }
    }
    unsafe fn bump(&self) {
        if !F::NO_BUMP {
            // SAFETY: forwarded from the caller.
            unsafe { self.0.bump() }
        }
    }
}

// SAFETY: as above.
unsafe impl<F: Fault> RawMutexTimed for Broken<F> {
    type Duration = Duration;
    type Instant = Instant;
    fn try_lock_for(&self, t: Duration) -> bool {
        if F::NO_WAIT { self.0.try_lock() } else { self.0.try_lock_for(t) }
    }
    fn try_lock_until(&self, d: Instant) -> bool {
        if F::NO_WAIT { self.0.try_lock() } else { self.0.try_lock_until(d) }
    }
}

// --- Exclusion under contention --------------------------------------------

impl<S: Slot> Counters<S> {
    /// An error if sections overlapped or their count is not `expected`.
    fn check(&self, expected: u64) -> Result<String, String> {
        let (count, overlaps) = (self.count.get(), self.overlaps.load(Relaxed));
        if overlaps != 0 {
            return Err(format!("critical sections overlapped {overlaps} times"));
        }
        if count != expected {
            return Err(format!("lost updates: count {count}, expected {expected}"));
        }
        Ok(format!("{count} sections, no overlap"))
    }
}

/// `threads` threads take a lock_api 0.4 `Mutex<R, _>` `per_thread` times
/// each, with every way of taking and releasing it in turn (`lock`,
/// `try_lock`, `try_lock_for`, `try_lock_until`; drop, `unlock_fair`,
/// `bump` between two sections), and run critical sections under it. Only
/// shared references to the data are taken, so the negative control's
/// races are on atomics only.
fn exclusion<R: Raw04, S: Slot>(threads: u64, per_thread: u64) -> Result<String, String> {
    let m = lock_api_04::Mutex::<R, Counters<S>>::new(Counters::default());
    let dog = Watchdog::start("v04 exclusion");
    let start = Barrier::new(threads as usize);
    let sections: u64 = thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (m, start, dog) = (&m, &start, &dog);
                s.spawn(move || {
                    let mut sections = 0;
                    start.wait();
                    for i in 0..per_thread {
                        let mut g = match (t + i) % 4 {
                            0 => m.lock(),
                            1 => loop {
                                if let Some(g) = m.try_lock() {
                                    break g;
                                }
                                std::hint::spin_loop();
                            },
                            2 => loop {
                                if let Some(g) = m.try_lock_for(Duration::from_millis(1)) {
                                    break g;
                                }
                            },
                            _ => loop {
                                let deadline = Instant::now() + Duration::from_millis(1);
                                if let Some(g) = m.try_lock_until(deadline) {
                                    break g;
                                }
                            },
                        };
                        g.section();
                        sections += 1;
                        match i % 3 {
                            0 => drop(g),
                            1 => lock_api_04::MutexGuard::unlock_fair(g),
                            _ => {
                                lock_api_04::MutexGuard::bump(&mut g);
                                g.section();
                                sections += 1;
                            }
                        }
                        dog.progress();
                    }
                    sections
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert!(!m.is_locked());
    m.into_inner().check(sections)
}

#[test]
fn exclusion_4_threads() {
    let _serial = serial();
    exclusion::<RawMutex, Cell<u64>>(4, PER_THREAD).unwrap();
}

#[test]
fn exclusion_8_threads() {
    let _serial = serial();
    exclusion::<RawMutex, Cell<u64>>(8, PER_THREAD).unwrap();
}

#[test]
fn exclusion_8_threads_fair() {
    let _serial = serial();
    exclusion::<RawFairMutex, Cell<u64>>(8, PER_THREAD / 4).unwrap();
}

#[test]
fn negative_control_a_mutex_that_does_not_exclude_is_reported() {
    let _serial = serial();
    noticed(RACE_BUDGET, &["overlapped", "lost updates"], || {
        exclusion::<NotAMutex, RacyCounter>(4, PER_THREAD)
    });
}

// --- Another thread while held, timed locking ------------------------------

/// Another thread holds an `R` while this one tries it: an error if this
/// thread took it while held, if a timed attempt gave up early, or if a
/// timed attempt did not get it once it was freed.
fn timed<R: Raw04>() -> Result<(), String> {
    let m = R::INIT;
    let held = Barrier::new(2);
    let release = AtomicBool::new(false);
    thread::scope(|s| {
        let holder = s.spawn(|| {
            m.lock();
            held.wait();
            while !release.load(Relaxed) {
                thread::sleep(Duration::from_micros(100));
            }
            thread::sleep(Duration::from_millis(30));
            // SAFETY: locked above, on this thread.
            unsafe { m.unlock() };
        });
        held.wait();
        let result = (|| {
            if m.try_lock() {
                return Err("try_lock took a held mutex".to_string());
            }
            for timeout in [Duration::ZERO, Duration::from_millis(20)] {
                let t0 = Instant::now();
                if m.try_lock_for(timeout) {
                    return Err(format!("try_lock_for({timeout:?}) took a held mutex"));
                }
                if t0.elapsed() < timeout {
                    return Err(format!(
                        "try_lock_for({timeout:?}) gave up after {:?}, before its deadline",
                        t0.elapsed()
                    ));
                }
            }
            let deadline = Instant::now() + Duration::from_millis(20);
            if m.try_lock_until(deadline) {
                return Err("try_lock_until took a held mutex".into());
            }
            if Instant::now() < deadline {
                return Err("try_lock_until gave up before its deadline".into());
            }
            // The holder unlocks 30 ms from now: a timed attempt must wait
            // for it.
            release.store(true, Relaxed);
            let t0 = Instant::now();
            if !m.try_lock_for(Duration::from_secs(10)) {
                return Err(format!(
                    "try_lock_for(10 s) gave up after {:?} though the mutex was freed",
                    t0.elapsed()
                ));
            }
            // SAFETY: taken by `try_lock_for`.
            unsafe { m.unlock() };
            Ok(())
        })();
        release.store(true, Relaxed);
        holder.join().unwrap();
        result
    })?;
    if m.is_locked() {
        return Err("left locked".into());
    }
    Ok(())
}

#[test]
fn timed_locking_waits_while_held_and_takes_it_once_freed() {
    let _serial = serial();
    timed::<RawMutex>().unwrap();
    timed::<RawFairMutex>().unwrap();
}

#[test]
fn negative_control_a_held_mutex_taken_is_reported() {
    let _serial = serial();
    let e = timed::<NotAMutex>().expect_err("must be reported");
    assert!(e.contains("took a held mutex"), "{e}");
}

#[test]
fn negative_control_timed_locks_that_do_not_wait_are_reported() {
    let _serial = serial();
    let e = timed::<Broken<NoWait>>().expect_err("must be reported");
    assert!(e.contains("before its deadline"), "{e}");
}

// --- Fair unlocking and bump -----------------------------------------------
//
// A fair unlock serves sleeping waiters only, and a waiter on a busy machine
// may stay awake, yielding, for a long time before it sleeps. So these
// checks wait until the waiting thread is seen asleep (its state in
// `/proc/self/task/<tid>/stat` is `S`: blocked in its futex wait, its node
// on the mutex's stack) before the holder releases: a round whose waiter is
// never seen asleep proves nothing and is left out. Linux only.

/// The calling thread's kernel id.
#[cfg(target_os = "linux")]
fn tid() -> i32 {
    // SAFETY: `gettid` has no preconditions.
    unsafe { libc::gettid() }
}

/// The state letter of thread `tid` of this process, if it can be read.
#[cfg(target_os = "linux")]
fn thread_state(tid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Whether this system shows thread states at all (not, e.g., a user-mode
/// emulator's view of `/proc`).
#[cfg(target_os = "linux")]
fn thread_states_visible() -> bool {
    let visible = thread_state(tid()) == Some('R');
    if !visible {
        eprintln!("skipped: /proc/self/task/<tid>/stat shows no thread state here");
    }
    visible
}

/// Waits up to 2 s for thread `tid` to be asleep.
#[cfg(target_os = "linux")]
fn seen_asleep(tid: i32) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        if thread_state(tid) == Some('S') {
            return true;
        }
        thread::sleep(Duration::from_micros(20));
    }
    false
}

/// One round: this thread holds an `R`, another thread waits for it in
/// `lock`; once that thread is seen asleep, this one releases the mutex
/// with `release` and at once tries to take it back. `None` if the waiter
/// was never seen asleep; else whether the waiter had been handed the lock
/// (so the attempt failed). The waiter keeps the lock until that attempt is
/// over, so that a waiter that got the lock cannot have released it again
/// by then.
#[cfg(target_os = "linux")]
fn hand_off_round<R: Raw04>(release: unsafe fn(&R)) -> Option<bool> {
    let m = R::INIT;
    let waiter_tid = AtomicI32::new(0);
    let tried = AtomicBool::new(false);
    m.lock();
    thread::scope(|s| {
        let waiter = s.spawn(|| {
            waiter_tid.store(tid(), Relaxed);
            m.lock();
            while !tried.load(Relaxed) {
                thread::yield_now();
            }
            // SAFETY: locked above, on this thread.
            unsafe { m.unlock() };
        });
        let waiter_tid = loop {
            match waiter_tid.load(Relaxed) {
                0 => std::hint::spin_loop(),
                t => break t,
            }
        };
        let asleep = seen_asleep(waiter_tid);
        // SAFETY: locked above, on this thread.
        unsafe { release(&m) };
        let took = m.try_lock();
        tried.store(true, Relaxed);
        if took {
            // SAFETY: taken by `try_lock`.
            unsafe { m.unlock() };
        }
        waiter.join().unwrap();
        asleep.then_some(!took)
    })
}

/// `rounds` rounds of [`hand_off_round`]: an error if any release whose
/// waiter was seen asleep left the lock free, or if no waiter was.
#[cfg(target_os = "linux")]
fn hand_offs<R: Raw04>(release: unsafe fn(&R), rounds: u32) -> Result<String, String> {
    let (mut asleep, mut handed) = (0, 0);
    for _ in 0..rounds {
        match hand_off_round(release) {
            None => {}
            Some(true) => (asleep, handed) = (asleep + 1, handed + 1),
            Some(false) => {
                return Err(format!(
                    "a release left the lock free though its waiter slept \
                     (after {handed} hand-offs)"
                ));
            }
        }
    }
    match asleep {
        0 => Err(format!("no waiter was seen asleep in {rounds} rounds")),
        _ => Ok(format!("{handed} of {rounds} releases handed the lock to the sleeping waiter")),
    }
}

#[test]
#[cfg(target_os = "linux")]
#[cfg_attr(miri, ignore = "reads /proc")]
fn unlock_fair_hands_the_lock_to_a_sleeper() {
    let _serial = serial();
    if thread_states_visible() {
        hand_offs::<RawMutex>(RawMutexFair::unlock_fair, 16).unwrap();
    }
}

#[test]
#[cfg(target_os = "linux")]
#[cfg_attr(miri, ignore = "reads /proc")]
fn a_fair_mutex_unlock_hands_the_lock_to_a_sleeper() {
    let _serial = serial();
    if thread_states_visible() {
        hand_offs::<RawFairMutex>(lock_api_04::RawMutex::unlock, 16).unwrap();
    }
}

/// The waiter in its first sleep is not starving yet, so a normal unlock
/// releases the lock; if the release comes after its starvation deadline
/// (a loaded machine), every unlock hands over and the round proves
/// nothing, so the check runs again.
#[test]
#[cfg(target_os = "linux")]
#[cfg_attr(miri, ignore = "reads /proc")]
fn negative_control_an_unfair_unlock_fair_is_reported() {
    let _serial = serial();
    if thread_states_visible() {
        noticed(RACE_BUDGET, &["left the lock free"], || {
            hand_offs::<Broken<Unfair>>(RawMutexFair::unlock_fair, 16)
        });
    }
}

/// Rounds of: this thread holds an `R`, another waits in `lock`, and once
/// it is seen asleep this thread calls `bump`; the waiter must run its
/// critical section inside the `bump`. An error if it does not in a round
/// whose waiter slept, or if no waiter was seen asleep.
#[cfg(target_os = "linux")]
fn bump_serves_a_sleeper<R: Raw04>(rounds: u32) -> Result<String, String> {
    let mut asleep = 0;
    for _ in 0..rounds {
        let m = R::INIT;
        let waiter_tid = AtomicI32::new(0);
        let ran = AtomicBool::new(false);
        m.lock();
        let outcome = thread::scope(|s| {
            let waiter = s.spawn(|| {
                waiter_tid.store(tid(), Relaxed);
                m.lock();
                ran.store(true, Relaxed);
                // SAFETY: locked above, on this thread.
                unsafe { m.unlock() };
            });
            let waiter_tid = loop {
                match waiter_tid.load(Relaxed) {
                    0 => std::hint::spin_loop(),
                    t => break t,
                }
            };
            let slept = seen_asleep(waiter_tid);
            let before = ran.load(Relaxed);
            // SAFETY: locked above, on this thread.
            unsafe { m.bump() };
            let after = ran.load(Relaxed);
            assert!(m.is_locked(), "bump returned without the lock");
            // SAFETY: held again after `bump`.
            unsafe { m.unlock() };
            waiter.join().unwrap();
            slept.then_some(!before && after)
        });
        match outcome {
            None => {}
            Some(true) => asleep += 1,
            Some(false) => return Err("bump did not let the sleeping waiter in".into()),
        }
    }
    match asleep {
        0 => Err(format!("no waiter was seen asleep in {rounds} rounds")),
        _ => Ok(format!("bump served {asleep} sleeping waiters")),
    }
}

#[test]
#[cfg(target_os = "linux")]
#[cfg_attr(miri, ignore = "reads /proc")]
fn bump_lets_a_sleeper_in() {
    let _serial = serial();
    if thread_states_visible() {
        bump_serves_a_sleeper::<RawMutex>(8).unwrap();
        bump_serves_a_sleeper::<RawFairMutex>(8).unwrap();
    }
}

#[test]
#[cfg(target_os = "linux")]
#[cfg_attr(miri, ignore = "reads /proc")]
fn negative_control_a_bump_that_keeps_the_lock_is_reported() {
    let _serial = serial();
    if thread_states_visible() {
        let e = bump_serves_a_sleeper::<Broken<NoBump>>(4).expect_err("must be reported");
        assert!(e.contains("did not let the sleeping waiter in"), "{e}");
    }
}

// --- ReentrantMutex ----------------------------------------------------------

#[test]
fn reentrant_mutex_re_enters() {
    let _serial = serial();
    let m = ReentrantMutex::new(RefCell::new(vec![1u32]));
    let outer: ReentrantMutexGuard<'_, _> = m.lock();
    let inner = m.try_lock().expect("the owner re-enters");
    inner.borrow_mut().push(2);
    assert!(m.is_owned_by_current_thread());
    // Another thread cannot take it, with both guards or one left.
    let elsewhere = |m: &ReentrantMutex<RefCell<Vec<u32>>>| {
        thread::scope(|s| {
            s.spawn(|| m.try_lock_for(Duration::from_millis(5)).map(|_| ()).is_some())
                .join()
                .unwrap()
        })
    };
    assert!(!elsewhere(&m));
    drop(inner);
    assert!(!elsewhere(&m));
    let mapped: MappedReentrantMutexGuard<'_, RefCell<Vec<u32>>> =
        ReentrantMutexGuard::map(outer, |v| v);
    mapped.borrow_mut().push(3);
    drop(mapped);
    assert!(!m.is_locked());
    assert!(elsewhere(&m));
    assert_eq!(m.into_inner().into_inner(), [1, 2, 3]);
}

#[test]
fn reentrant_mutex_excludes_other_threads() {
    let _serial = serial();
    // The harness of `exclusion` (whose negative control shows it notices
    // overlaps), with a lock and a re-entry per acquisition.
    let m = ReentrantMutex::new(Counters::<Cell<u64>>::default());
    let dog = Watchdog::start("v04 reentrant exclusion");
    thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..PER_THREAD / 2 {
                    let outer = m.lock();
                    let inner = m.lock();
                    inner.section();
                    drop(inner);
                    outer.section();
                    dog.progress();
                }
            });
        }
    });
    assert!(!m.is_locked());
    m.into_inner().check(4 * (PER_THREAD / 2) * 2).unwrap();
    // The id is distinct between live threads.
    let here = RawThreadId.nonzero_thread_id();
    let there = thread::spawn(|| RawThreadId.nonzero_thread_id()).join().unwrap();
    assert_ne!(here, there);
}

// --- The condition variables -----------------------------------------------

/// What the condition variable checks use of `v04::Condvar` and
/// `v04::FairCondvar` (`parking_lot::Condvar` 0.12's methods), for the
/// guards of `Self::R`; timed forms return whether they timed out.
trait Cv04: Default + Sync {
    type R: lock_api_04::RawMutex + Sync;
    fn wait(&self, g: &mut lock_api_04::MutexGuard<'_, Self::R, Queue>);
    fn wait_for(&self, g: &mut lock_api_04::MutexGuard<'_, Self::R, Queue>, t: Duration) -> bool;
    fn wait_until(&self, g: &mut lock_api_04::MutexGuard<'_, Self::R, Queue>, d: Instant) -> bool;
    fn wait_while_for(
        &self,
        g: &mut lock_api_04::MutexGuard<'_, Self::R, Queue>,
        c: impl FnMut(&mut Queue) -> bool,
        t: Duration,
    ) -> bool;
    fn notify_one(&self) -> bool;
    fn notify_all(&self) -> usize;
}

macro_rules! cv04 {
    ($cv:ty, $raw:ty) => {
        impl Cv04 for $cv {
            type R = $raw;
            fn wait(&self, g: &mut lock_api_04::MutexGuard<'_, $raw, Queue>) {
                <$cv>::wait(self, g)
            }
            fn wait_for(
                &self,
                g: &mut lock_api_04::MutexGuard<'_, $raw, Queue>,
                t: Duration,
            ) -> bool {
                <$cv>::wait_for(self, g, t).timed_out()
            }
            fn wait_until(
                &self,
                g: &mut lock_api_04::MutexGuard<'_, $raw, Queue>,
                d: Instant,
            ) -> bool {
                <$cv>::wait_until(self, g, d).timed_out()
            }
            fn wait_while_for(
                &self,
                g: &mut lock_api_04::MutexGuard<'_, $raw, Queue>,
                c: impl FnMut(&mut Queue) -> bool,
                t: Duration,
            ) -> bool {
                <$cv>::wait_while_for(self, g, c, t).timed_out()
            }
            fn notify_one(&self) -> bool {
                <$cv>::notify_one(self)
            }
            fn notify_all(&self) -> usize {
                <$cv>::notify_all(self)
            }
        }
    };
}

cv04!(v04::Condvar, RawMutex);
cv04!(v04::FairCondvar, RawFairMutex);

/// The negative control: a condition variable that breaks the promises.
/// Its waits return after a millisecond, notified or not (a timed wait
/// says it timed out, a `wait_while` form checks its condition twice); its
/// notifications count nobody; it never panics.
#[derive(Default)]
struct Sleepy;

impl Cv04 for Sleepy {
    type R = RawMutex;
    fn wait(&self, g: &mut lock_api_04::MutexGuard<'_, RawMutex, Queue>) {
        lock_api_04::MutexGuard::unlocked(g, || thread::sleep(Duration::from_millis(1)));
    }
    fn wait_for(&self, g: &mut lock_api_04::MutexGuard<'_, RawMutex, Queue>, _: Duration) -> bool {
        self.wait(g);
        true
    }
    fn wait_until(&self, g: &mut lock_api_04::MutexGuard<'_, RawMutex, Queue>, _: Instant) -> bool {
        self.wait(g);
        true
    }
    fn wait_while_for(
        &self,
        g: &mut lock_api_04::MutexGuard<'_, RawMutex, Queue>,
        mut c: impl FnMut(&mut Queue) -> bool,
        _: Duration,
    ) -> bool {
        c(g);
        self.wait(g);
        c(g);
        true
    }
    fn notify_one(&self) -> bool {
        false
    }
    fn notify_all(&self) -> usize {
        0
    }
}

/// The data the condition variable checks share: `permits` for waiters to
/// take when they return (a return that finds none was spurious).
#[derive(Default)]
struct Queue {
    arrived: usize,
    permits: usize,
    spurious: usize,
    woken: usize,
}

/// Polls `done` (under `m`) every millisecond for up to 10 s.
fn poll<R: lock_api_04::RawMutex>(
    m: &lock_api_04::Mutex<R, Queue>,
    done: impl Fn(&Queue) -> bool,
) -> bool {
    let t0 = Instant::now();
    while !done(&m.lock()) {
        if t0.elapsed() > Duration::from_secs(10) {
            return false;
        }
        thread::sleep(Duration::from_millis(1));
    }
    true
}

/// `n` waiters, each on the list (it counted itself under the mutex and
/// waits before it unlocks): two `notify_one`s return true and wake two,
/// `notify_all` then returns `n - 2` exactly and a `notify_one` after it
/// false, and no wait returns without a notification.
fn counts<C: Cv04>(n: usize) -> Result<String, String> {
    let m = lock_api_04::Mutex::<C::R, Queue>::new(Queue::default());
    let cv = C::default();
    let dog = Watchdog::start("v04 condvar counts");
    let (arrived, ones, two_woken, all, none) = thread::scope(|s| {
        for _ in 0..n {
            s.spawn(|| {
                let mut g = m.lock();
                g.arrived += 1;
                cv.wait(&mut g);
                match g.permits.checked_sub(1) {
                    Some(left) => g.permits = left,
                    None => g.spurious += 1,
                }
                g.woken += 1;
                dog.progress();
            });
        }
        let arrived = poll(&m, |q| q.arrived == n);
        let mut g = m.lock();
        g.permits += 2;
        let ones = [cv.notify_one(), cv.notify_one()];
        drop(g);
        let two_woken = poll(&m, |q| q.woken >= 2);
        // Time for a third waiter to return, if one would by mistake.
        thread::sleep(Duration::from_millis(20));
        let mut g = m.lock();
        let two_woken = two_woken && g.woken == 2;
        g.permits += n - 2;
        let all = cv.notify_all();
        let none = cv.notify_one();
        drop(g);
        (arrived, ones, two_woken, all, none)
    });
    let q = m.into_inner();
    let got = format!(
        "{n} waiters: notify_one {ones:?}, then {} woken; notify_all {all}, then notify_one {none}; {} spurious returns",
        if two_woken { "2" } else { "not 2" },
        q.spurious
    );
    if arrived && ones == [true, true] && two_woken && all == n - 2 && !none && q.spurious == 0 {
        Ok(got)
    } else {
        Err(got)
    }
}

#[test]
fn condvar_notifications_count_exactly() {
    let _serial = serial();
    for n in [3, 8, 32] {
        eprintln!("{}", counts::<v04::Condvar>(n).unwrap());
        eprintln!("fair: {}", counts::<v04::FairCondvar>(n).unwrap());
    }
}

#[test]
fn negative_control_spurious_condvar_returns_are_reported() {
    let _serial = serial();
    let e = counts::<Sleepy>(8).expect_err("must be reported");
    for what in ["notify_one [false, false]", "not 2 woken", "notify_all 0"] {
        assert!(e.contains(what), "{what:?} not reported: {e}");
    }
    assert!(!e.contains(" 0 spurious"), "spurious returns not counted: {e}");
}

/// Timed waits: not before their deadline, holding the mutex when they
/// return, not timed out when notified or when the condition is false at
/// once, and, as in parking_lot 0.12, a `wait_while` form that timed out
/// does not check its condition again. Every failure is reported.
fn timeouts<C: Cv04>() -> Result<(), String> {
    let m = lock_api_04::Mutex::<C::R, Queue>::new(Queue::default());
    let cv = C::default();
    let timeout = Duration::from_millis(20);
    let mut errors = Vec::new();
    let mut g = m.lock();
    let t0 = Instant::now();
    if !cv.wait_for(&mut g, timeout) || t0.elapsed() < timeout {
        errors.push(format!("wait_for returned after {:?}, before its timeout", t0.elapsed()));
    }
    let t0 = Instant::now();
    if !cv.wait_until(&mut g, t0 + timeout) || t0.elapsed() < timeout {
        errors.push(format!("wait_until returned after {:?}, before its deadline", t0.elapsed()));
    }
    let (t0, mut calls) = (Instant::now(), 0);
    let timed_out = cv.wait_while_for(
        &mut g,
        |_| {
            calls += 1;
            true
        },
        timeout,
    );
    if !timed_out || t0.elapsed() < timeout {
        errors
            .push(format!("wait_while_for returned after {:?}, before its timeout", t0.elapsed()));
    }
    if calls != 1 {
        errors.push(format!("wait_while_for checked its condition {calls} times, not once"));
    }
    if cv.wait_while_for(&mut g, |_| false, timeout) {
        errors.push("wait_while_for timed out with the condition false".into());
    }
    if !m.is_locked() {
        errors.push("a timed wait returned without the mutex".into());
    }
    drop(g);
    // Notified well before the deadline: not timed out.
    thread::scope(|s| {
        s.spawn(|| {
            thread::sleep(Duration::from_millis(20));
            m.lock().permits = 1;
            cv.notify_one();
        });
        let mut g = m.lock();
        if cv.wait_while_for(&mut g, |q| q.permits == 0, Duration::from_secs(10)) || g.permits != 1
        {
            errors.push("wait_while_for timed out though notified".into());
        }
    });
    if errors.is_empty() { Ok(()) } else { Err(errors.join("; ")) }
}

#[test]
fn condvar_timed_waits() {
    let _serial = serial();
    timeouts::<v04::Condvar>().unwrap();
    timeouts::<v04::FairCondvar>().unwrap();
}

#[test]
fn negative_control_early_condvar_timeouts_are_reported() {
    let _serial = serial();
    let e = timeouts::<Sleepy>().expect_err("must be reported");
    for what in [
        "wait_for returned",
        "wait_until returned",
        "wait_while_for returned",
        "2 times, not once",
        "with the condition false",
        "though notified",
    ] {
        assert!(e.contains(what), "{what:?} not reported: {e}");
    }
}

/// One condition variable, a waiter with one mutex and a wait with another
/// at the same time: the second wait panics, and its guard still holds its
/// mutex.
fn two_mutexes<C: Cv04>() -> Result<(), String> {
    let (m1, m2) = (
        lock_api_04::Mutex::<C::R, Queue>::default(),
        lock_api_04::Mutex::<C::R, Queue>::default(),
    );
    let cv = C::default();
    let _dog = Watchdog::start("v04 condvar with two mutexes");
    thread::scope(|s| {
        s.spawn(|| {
            let mut g = m1.lock();
            g.arrived = 1;
            while g.permits == 0 {
                cv.wait(&mut g);
            }
        });
        if !poll(&m1, |q| q.arrived == 1) {
            return Err("the waiter did not arrive".into());
        }
        let mut g2 = m2.lock();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cv.wait(&mut g2)));
        let held = m2.is_locked();
        drop(g2);
        m1.lock().permits = 1;
        cv.notify_one();
        match r {
            Err(e) if held => {
                let msg = e.downcast_ref::<&str>().copied().unwrap_or("");
                if msg.contains("more than one mutex") {
                    Ok(())
                } else {
                    Err(format!("panicked with {msg:?}"))
                }
            }
            Err(_) => Err("the guard lost its mutex".into()),
            Ok(()) => Err("no panic with two mutexes".into()),
        }
    })
}

#[test]
fn condvar_with_two_mutexes_panics() {
    let _serial = serial();
    two_mutexes::<v04::Condvar>().unwrap();
    two_mutexes::<v04::FairCondvar>().unwrap();
}

#[test]
fn negative_control_no_panic_with_two_mutexes_is_reported() {
    let _serial = serial();
    let e = two_mutexes::<Sleepy>().expect_err("must be reported");
    assert!(e.contains("no panic"), "{e}");
}

/// With the `arc_lock` feature, the guards that own an `Arc` of their
/// mutex have `parking_lot` 0.12's names (`.ci/run` runs this with the
/// feature).
#[cfg(feature = "arc_lock")]
#[test]
fn arc_guards_are_reexported() {
    use std::sync::Arc;
    let m = Arc::new(Mutex::new(1));
    let mut g: v04::ArcMutexGuard<RawMutex, i32> = m.lock_arc();
    *g += 1;
    drop(g);
    let r = Arc::new(ReentrantMutex::new(3));
    let outer: v04::ArcReentrantMutexGuard<RawMutex, RawThreadId, i32> = r.lock_arc();
    let inner = r.lock_arc();
    assert_eq!(*m.lock() + *outer + *inner, 8);
    drop((outer, inner));
    assert!(!r.is_locked());
}
