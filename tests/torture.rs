//! Torture test through the public API: 64 threads for a bounded time, with
//! random critical sections and think times (none, short, longer than the
//! spinner's 2 µs budget, sleeps), and a random mix of `lock`, `try_lock`,
//! `try_lock_for` and `try_lock_until` (timeouts from zero to 2 ms),
//! `MutexGuard::unlock_fair`, `MutexGuard::bump` and panics inside the guard.
//!
//! It checks mutual exclusion on plain (non-atomic) data, that no update is
//! lost, that the lock is free at the end, that no single `lock()` call
//! waited longer than a generous bound, and that no timed attempt gave up
//! before its deadline or more than that bound after it; it prints the
//! longest wait and the timed attempts' slack. Waits in
//! progress count too, and the run goes on past its deadline while a wait
//! that began before it lasts, so a thread starved until the others stop
//! fails the test. A watchdog fails the test instead of letting a lost
//! wakeup hang it.
//!
//! `SPINBIT_TORTURE_SECS` sets the duration (default 2 s; CI runs a longer
//! one), `SPINBIT_TORTURE_MAX_WAIT_MS` the bound on one wait (default 2000).

mod common;

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex as StdMutex, MutexGuard as StdGuard, Once, OnceLock, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use common::{Rng, Watchdog, noticed};
use lock_api::{GuardSend, Mutex, MutexGuard, RawMutex, RawMutexFair, RawMutexTimed};

/// The longest a single `lock()` may wait, unless the environment says
/// otherwise. A healthy lock on an oversubscribed 2-core machine, with
/// holders that sleep, keeps every wait far below this (see the printed
/// maximum); a thread that is starved for good exceeds it.
const MAX_WAIT_MS: u64 = 2_000;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v.parse().unwrap_or_else(|_| panic!("{name}={v:?} does not parse")),
        Err(_) => default,
    }
}

/// The waits counted by length in the report.
const WAIT_BUCKETS_MS: [u64; 3] = [10, 100, 1_000];

/// Two words that must always be equal, updated with a read, an opaque
/// pause and two writes: overlapping critical sections tear them.
#[derive(Default)]
struct Pair {
    a: u64,
    b: u64,
}

/// What the torture needs of a mutex: the fair and the timed operations.
trait Tortured: RawMutexFair + RawMutexTimed<Duration = Duration, Instant = Instant> + Sync {}
impl<R> Tortured for R where
    R: RawMutexFair + RawMutexTimed<Duration = Duration, Instant = Instant> + Sync
{
}

/// The payload of the panics the torture raises on purpose.
struct Deliberate;

/// Keeps the deliberate panics out of the test output; any other panic is
/// reported as usual.
fn quiet_deliberate_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<Deliberate>() {
                previous(info);
            }
        }));
    });
}

/// Busy-waits for `ns` nanoseconds.
fn spin_for(ns: u64) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_nanos(ns) {
        std::hint::spin_loop();
    }
}

/// How long a critical section or a think time lasts.
fn delay(rng: &mut Rng, sleep_one_in: u64) {
    match rng.below(100) {
        // None at all.
        0..40 => {}
        // Short: well within the spin budget.
        40..75 => spin_for(rng.below(1_000)),
        // Longer than the spinner's 2 µs budget.
        75..99 => spin_for(3_000 + rng.below(17_000)),
        // Now and then, a sleep.
        _ if rng.one_in(sleep_one_in) => thread::sleep(Duration::from_micros(50 + rng.below(500))),
        _ => {}
    }
}

/// What the threads did and saw.
#[derive(Debug, Default)]
struct Report {
    threads: usize,
    /// When the run began, in `epoch_ns()` time: after it waited for any
    /// other run to end (`run_alone`). Its deadline is `duration` later.
    began_ns: u64,
    elapsed: Duration,
    locks: u64,
    try_locks: u64,
    try_lock_misses: u64,
    /// Timed attempts (`try_lock_for`, `try_lock_until`), those that timed
    /// out, and those that returned `None` before their deadline.
    timed: u64,
    timed_out: u64,
    early: u64,
    /// The longest a timed attempt returned after its deadline.
    max_slack: Duration,
    unlock_fairs: u64,
    bumps: u64,
    panics: u64,
    /// Critical sections that found the pair torn.
    torn: u64,
    /// The pair's final value and the number of completed critical sections.
    final_a: u64,
    final_b: u64,
    sections: u64,
    locked_at_end: bool,
    max_wait: Duration,
    /// `lock()` calls that waited longer than 10 ms, 100 ms and 1 s.
    waits_over: [u64; 3],
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{} threads for {:.2?}:", self.threads, self.elapsed)?;
        writeln!(
            f,
            "  {} lock ({} unlock_fair, {} bump, {} panics inside the guard), \
             {} try_lock ({} missed), {} timed ({} timed out, {} early; slack up to {:.2?})",
            self.locks,
            self.unlock_fairs,
            self.bumps,
            self.panics,
            self.try_locks,
            self.try_lock_misses,
            self.timed,
            self.timed_out,
            self.early,
            self.max_slack,
        )?;
        writeln!(
            f,
            "  {} critical sections, {} torn; pair = ({}, {}); locked at the end: {}",
            self.sections, self.torn, self.final_a, self.final_b, self.locked_at_end
        )?;
        write!(f, "  longest lock() wait: {:.2?}; waits over", self.max_wait)?;
        for (ms, n) in WAIT_BUCKETS_MS.iter().zip(&self.waits_over) {
            write!(f, " {ms} ms: {n},")?;
        }
        Ok(())
    }
}

impl Report {
    /// [`Report::check`] for a negative control: the report if it passes,
    /// the errors and the report if not.
    fn checked(self, bound: Duration) -> Result<Report, String> {
        match self.check(bound) {
            Ok(()) => Ok(self),
            Err(e) => Err(format!("{e}\n{self}")),
        }
    }

    /// Every property the torture checks, with `bound` the longest allowed
    /// single wait, and the longest a timed attempt may return after its
    /// deadline.
    fn check(&self, bound: Duration) -> Result<(), String> {
        let mut errors = Vec::new();
        if self.torn > 0 {
            errors.push(format!("{} critical sections overlapped (torn pair)", self.torn));
        }
        if self.final_a != self.final_b || self.final_a != self.sections {
            errors.push(format!(
                "lost updates: pair = ({}, {}) after {} critical sections",
                self.final_a, self.final_b, self.sections
            ));
        }
        if self.locked_at_end {
            errors.push("the mutex is still locked after every thread finished".into());
        }
        if self.max_wait > bound {
            errors.push(format!(
                "a lock() call waited {:?}, over the {bound:?} bound: a thread starved",
                self.max_wait
            ));
        }
        if self.early > 0 {
            errors
                .push(format!("{} timed attempts returned None before their deadline", self.early));
        }
        if self.max_slack > bound {
            errors.push(format!(
                "a timed attempt returned {:?} after its deadline, over the {bound:?} bound",
                self.max_slack
            ));
        }
        if errors.is_empty() { Ok(()) } else { Err(errors.join("; ")) }
    }
}

/// Per-thread tallies, summed into the report.
#[derive(Default)]
struct Tally {
    locks: AtomicU64,
    try_locks: AtomicU64,
    try_lock_misses: AtomicU64,
    timed: AtomicU64,
    timed_out: AtomicU64,
    early: AtomicU64,
    max_slack_ns: AtomicU64,
    unlock_fairs: AtomicU64,
    bumps: AtomicU64,
    panics: AtomicU64,
    torn: AtomicU64,
    sections: AtomicU64,
    max_wait_ns: AtomicU64,
    waits_over: [AtomicU64; 3],
}

/// One critical section on the pair: checks it is whole, then updates it
/// with a pause between the writes, so that an overlapping section sees it
/// torn. Returns whether it was whole.
fn section(p: &mut Pair, rng: &mut Rng) -> bool {
    let whole = p.a == p.b;
    let a = p.a;
    // Opaque to the compiler: the pair may have changed meanwhile, so it is
    // read back from memory below.
    std::hint::black_box(&mut *p);
    delay(rng, 50);
    p.a = a + 1;
    std::hint::black_box(&mut *p);
    p.b += 1;
    whole
}

/// Keeps the torture runs of this binary from overlapping: each would
/// otherwise compete with the others' threads for the CPUs, and a run whose
/// threads barely get to run checks little. A failed run's panic poisons the
/// lock; the next run goes on regardless.
fn run_alone() -> StdGuard<'static, ()> {
    static ALONE: StdMutex<()> = StdMutex::new(());
    ALONE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs the torture on a `lock_api` mutex over `R` for `duration`, or longer
/// while a wait that began before the deadline lasts and has not exceeded
/// `bound`: a thread starved until the others stop is caught, however close
/// to the deadline its wait began.
fn torture<R: Tortured>(threads: usize, duration: Duration, bound: Duration) -> Report {
    let _alone = run_alone();
    quiet_deliberate_panics();
    let m = Mutex::<R, Pair>::new(Pair::default());
    let t = Tally::default();
    let dog = Watchdog::start("torture");
    // Per thread: 1 + when its current lock() call began (ns since `start`),
    // or 0 if it is not waiting.
    let waiting: Vec<AtomicU64> = (0..threads).map(|_| AtomicU64::new(0)).collect();
    let stop = AtomicBool::new(false);
    let began_ns = epoch_ns();
    let start = Instant::now();
    thread::scope(|s| {
        for (id, waiting) in waiting.iter().enumerate() {
            let w = Worker { m: &m, t: &t, dog: &dog, waiting, stop: &stop, start };
            s.spawn(move || w.run(Rng::new(id as u64 + 1)));
        }
        // Watch the waits in progress: their length so far counts towards
        // the longest wait, and the run ends once the deadline has passed
        // and no wait that began before it is still going on (or one has
        // outlasted the bound).
        let deadline = duration.as_nanos() as u64;
        loop {
            thread::sleep(Duration::from_millis(5));
            let now = start.elapsed().as_nanos() as u64;
            let mut pending = false;
            for w in &waiting {
                let since = w.load(Relaxed);
                if since != 0 {
                    let age = now.saturating_sub(since - 1);
                    t.max_wait_ns.fetch_max(age, Relaxed);
                    pending |= since - 1 < deadline && Duration::from_nanos(age) <= bound;
                }
            }
            if now >= deadline && !pending {
                stop.store(true, Relaxed);
                break;
            }
        }
    });
    let elapsed = start.elapsed();
    let locked_at_end = m.is_locked();
    let p = m.into_inner();
    Report {
        threads,
        began_ns,
        elapsed,
        locks: t.locks.into_inner(),
        try_locks: t.try_locks.into_inner(),
        try_lock_misses: t.try_lock_misses.into_inner(),
        timed: t.timed.into_inner(),
        timed_out: t.timed_out.into_inner(),
        early: t.early.into_inner(),
        max_slack: Duration::from_nanos(t.max_slack_ns.into_inner()),
        unlock_fairs: t.unlock_fairs.into_inner(),
        bumps: t.bumps.into_inner(),
        panics: t.panics.into_inner(),
        torn: t.torn.into_inner(),
        final_a: p.a,
        final_b: p.b,
        sections: t.sections.into_inner(),
        locked_at_end,
        max_wait: Duration::from_nanos(t.max_wait_ns.into_inner()),
        waits_over: t.waits_over.map(AtomicU64::into_inner),
    }
}

/// What one torture thread shares with the others.
struct Worker<'a, R: RawMutexFair> {
    m: &'a Mutex<R, Pair>,
    t: &'a Tally,
    dog: &'a Watchdog,
    waiting: &'a AtomicU64,
    stop: &'a AtomicBool,
    start: Instant,
}

impl<R: Tortured> Worker<'_, R> {
    /// `lock()`, timed.
    fn lock(&self) -> MutexGuard<'_, R, Pair> {
        let began = Instant::now();
        self.waiting.store(1 + (began - self.start).as_nanos() as u64, Relaxed);
        let g = self.m.lock();
        let waited = began.elapsed();
        self.waiting.store(0, Relaxed);
        self.t.max_wait_ns.fetch_max(waited.as_nanos() as u64, Relaxed);
        for (ms, n) in WAIT_BUCKETS_MS.iter().zip(&self.t.waits_over) {
            if waited > Duration::from_millis(*ms) {
                n.fetch_add(1, Relaxed);
            }
        }
        self.t.locks.fetch_add(1, Relaxed);
        g
    }

    fn run(&self, mut rng: Rng) {
        let (m, t) = (self.m, self.t);
        let (mut sections, mut torn) = (0, 0);
        let mut tally = |whole: bool| {
            sections += 1;
            torn += u64::from(!whole);
        };
        while !self.stop.load(Relaxed) {
            match rng.below(100) {
                // lock, one section, unlock.
                0..50 => {
                    let mut g = self.lock();
                    tally(section(&mut g, &mut rng));
                }
                // lock, one section, hand the lock to the oldest sleeper.
                50..65 => {
                    let mut g = self.lock();
                    tally(section(&mut g, &mut rng));
                    MutexGuard::unlock_fair(g);
                    t.unlock_fairs.fetch_add(1, Relaxed);
                }
                // lock, a section, let a sleeper in, another section.
                65..75 => {
                    let mut g = self.lock();
                    tally(section(&mut g, &mut rng));
                    MutexGuard::bump(&mut g);
                    t.bumps.fetch_add(1, Relaxed);
                    tally(section(&mut g, &mut rng));
                }
                // try_lock.
                75..85 => {
                    t.try_locks.fetch_add(1, Relaxed);
                    match m.try_lock() {
                        Some(mut g) => tally(section(&mut g, &mut rng)),
                        None => {
                            t.try_lock_misses.fetch_add(1, Relaxed);
                        }
                    }
                }
                // A timed attempt, a quarter of them `try_lock_until`.
                85..95 => {
                    t.timed.fetch_add(1, Relaxed);
                    let d = match rng.below(8) {
                        0 => Duration::ZERO,
                        1..5 => Duration::from_micros(1 + rng.below(100)),
                        _ => Duration::from_micros(100 + rng.below(1_900)),
                    };
                    let start = Instant::now();
                    let deadline = start + d;
                    let g =
                        if rng.one_in(4) { m.try_lock_until(deadline) } else { m.try_lock_for(d) };
                    match g {
                        Some(mut g) => tally(section(&mut g, &mut rng)),
                        None => {
                            t.timed_out.fetch_add(1, Relaxed);
                            match Instant::now().checked_duration_since(deadline) {
                                Some(late) => {
                                    t.max_slack_ns.fetch_max(late.as_nanos() as u64, Relaxed);
                                }
                                None => {
                                    t.early.fetch_add(1, Relaxed);
                                }
                            }
                        }
                    }
                }
                // A panic inside the guard: unwinding must release the lock
                // (if it does not, every other thread blocks and the watchdog
                // fails the test).
                _ => {
                    let r = panic::catch_unwind(AssertUnwindSafe(|| {
                        let mut g = self.lock();
                        tally(section(&mut g, &mut rng));
                        panic::panic_any(Deliberate);
                    }));
                    let payload: Box<dyn Any + Send> = r.expect_err("the deliberate panic");
                    assert!(payload.is::<Deliberate>(), "an unexpected panic inside the guard");
                    t.panics.fetch_add(1, Relaxed);
                }
            }
            self.dog.progress();
            delay(&mut rng, 20);
        }
        t.sections.fetch_add(sections, Relaxed);
        t.torn.fetch_add(torn, Relaxed);
    }
}

#[test]
fn torture_64_threads() {
    let secs: f64 = env_or("SPINBIT_TORTURE_SECS", if cfg!(miri) { 0.05 } else { 2.0 });
    let bound = Duration::from_millis(env_or("SPINBIT_TORTURE_MAX_WAIT_MS", MAX_WAIT_MS));
    let threads = if cfg!(miri) { 4 } else { 64 };
    let report = torture::<spinbit::RawMutex>(threads, Duration::from_secs_f64(secs), bound);
    eprintln!("torture: {report}");
    if let Err(e) = report.check(bound) {
        panic!("torture failed: {e}\n{report}");
    }
    if !cfg!(miri) {
        // Each operation of the mix really ran, and timed attempts both
        // took the lock and timed out.
        let ran = [
            report.locks,
            report.try_locks,
            report.timed,
            report.timed_out,
            report.timed - report.timed_out,
            report.unlock_fairs,
            report.bumps,
            report.panics,
        ];
        assert!(ran.iter().all(|&n| n > 0), "{report}");
    }
}

#[test]
fn the_check_fails_on_a_wait_over_the_bound() {
    let ok = Report { max_wait: Duration::from_millis(1_999), ..Report::default() };
    assert_eq!(ok.check(Duration::from_secs(2)), Ok(()));
    let starved = Report { max_wait: Duration::from_secs(3), ..Report::default() };
    let e = starved.check(Duration::from_secs(2)).unwrap_err();
    assert!(e.contains("waited 3s"), "{e}");
}

#[test]
fn the_check_fails_on_torn_or_lost_updates_and_a_leaked_lock() {
    let torn = Report { torn: 1, final_a: 5, final_b: 5, sections: 5, ..Report::default() };
    assert!(torn.check(Duration::MAX).unwrap_err().contains("overlapped"));
    let lost = Report { final_a: 4, final_b: 4, sections: 5, ..Report::default() };
    assert!(lost.check(Duration::MAX).unwrap_err().contains("lost updates"));
    let leaked = Report { locked_at_end: true, ..Report::default() };
    assert!(leaked.check(Duration::MAX).unwrap_err().contains("still locked"));
}

#[test]
fn the_check_fails_on_an_early_or_late_timeout() {
    let early = Report { early: 1, ..Report::default() };
    assert!(early.check(Duration::MAX).unwrap_err().contains("before their deadline"));
    let late = Report { max_slack: Duration::from_secs(3), ..Report::default() };
    let e = late.check(Duration::from_secs(2)).unwrap_err();
    assert!(e.contains("returned 3s after its deadline"), "{e}");
}

/// A raw mutex that excludes nobody: the negative control of the exclusion
/// check.
struct NoExclusion(AtomicBool);

// SAFETY: deliberately broken (no mutual exclusion), and used only by the
// test that shows the torture notices it.
unsafe impl RawMutex for NoExclusion {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = NoExclusion(AtomicBool::new(false));
    type Guard = GuardSend;
    fn lock(&self) -> GuardSend {
        self.0.store(true, Relaxed);
        GuardSend::new()
    }
    fn try_lock(&self) -> Option<GuardSend> {
        Some(self.lock())
    }
    unsafe fn unlock(&self, _guard: GuardSend) {
        self.0.store(false, Relaxed);
    }
    fn is_locked(&self) -> bool {
        self.0.load(Relaxed)
    }
}

// SAFETY: as above.
unsafe impl RawMutexFair for NoExclusion {
    unsafe fn unlock_fair(&self, guard: GuardSend) {
        // SAFETY: forwarded from the caller.
        unsafe { self.unlock(guard) }
    }
}

// SAFETY: as above.
unsafe impl RawMutexTimed for NoExclusion {
    type Duration = Duration;
    type Instant = Instant;
    fn try_lock_for(&self, _: Duration) -> Option<GuardSend> {
        Some(self.lock())
    }
    fn try_lock_until(&self, _: Instant) -> Option<GuardSend> {
        Some(self.lock())
    }
}

/// The torture notices a mutex that does not exclude. The overlapping
/// critical sections are data races by design, so neither Miri nor the
/// ThreadSanitizer run executes this test.
#[test]
#[cfg_attr(miri, ignore = "a deliberate data race")]
fn negative_control_the_torture_catches_a_mutex_that_does_not_exclude() {
    noticed(Duration::from_secs(20), &["overlapped"], || {
        let report = torture::<NoExclusion>(8, Duration::from_millis(300), Duration::MAX);
        report.checked(Duration::MAX)
    });
}

/// A mutex that starves one thread: the first thread to call `lock` gets in
/// only once nobody else has taken the mutex for 200 ms, i.e. when the others
/// have stopped. The negative control of the bound on one wait.
struct StarvesOne {
    inner: spinbit::RawMutex,
    /// The starved thread's number (see `THREAD`), 0 until chosen.
    victim: AtomicU64,
    /// When another thread last took the mutex (ns since `epoch()`).
    last_other: AtomicU64,
}

/// When the starved thread's first `lock()` call began (ns since
/// `epoch()`), `u64::MAX` until it makes one. The negative control checks
/// its premise with it: that this wait began before the run's deadline.
static VICTIM_FIRST_LOCK: AtomicU64 = AtomicU64::new(u64::MAX);

static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);
thread_local! {
    static THREAD: u64 = NEXT_THREAD.fetch_add(1, Relaxed);
}

fn epoch_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

impl StarvesOne {
    fn is_victim(&self) -> bool {
        let me = THREAD.with(|t| *t);
        match self.victim.compare_exchange(0, me, Relaxed, Relaxed) {
            Ok(_) => true,
            Err(v) => v == me,
        }
    }
}

// SAFETY: exclusion comes from `inner`; the starvation rule only delays
// `lock` and fails some `try_lock` calls.
unsafe impl RawMutex for StarvesOne {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = StarvesOne {
        inner: spinbit::RawMutex::INIT,
        victim: AtomicU64::new(0),
        last_other: AtomicU64::new(0),
    };
    type Guard = GuardSend;
    fn lock(&self) -> GuardSend {
        if self.is_victim() {
            VICTIM_FIRST_LOCK.fetch_min(epoch_ns(), Relaxed);
            // Until the others have taken the mutex at all, and then stopped.
            loop {
                let last = self.last_other.load(Relaxed);
                if last != 0 && epoch_ns().saturating_sub(last) >= 200_000_000 {
                    break;
                }
                thread::sleep(Duration::from_millis(1));
            }
        }
        let g = self.inner.lock();
        if !self.is_victim() {
            self.last_other.store(epoch_ns(), Relaxed);
        }
        g
    }
    fn try_lock(&self) -> Option<GuardSend> {
        if self.is_victim() {
            return None;
        }
        let g = self.inner.try_lock()?;
        self.last_other.store(epoch_ns(), Relaxed);
        Some(g)
    }
    unsafe fn unlock(&self, guard: GuardSend) {
        // SAFETY: forwarded from the caller.
        unsafe { self.inner.unlock(guard) }
    }
    fn is_locked(&self) -> bool {
        self.inner.is_locked()
    }
}

// SAFETY: as above.
unsafe impl RawMutexFair for StarvesOne {
    unsafe fn unlock_fair(&self, guard: GuardSend) {
        // SAFETY: forwarded from the caller.
        unsafe { self.inner.unlock_fair(guard) }
    }
}

// SAFETY: as above.
unsafe impl RawMutexTimed for StarvesOne {
    type Duration = Duration;
    type Instant = Instant;
    fn try_lock_for(&self, timeout: Duration) -> Option<GuardSend> {
        self.try_lock_until(Instant::now() + timeout)
    }
    fn try_lock_until(&self, deadline: Instant) -> Option<GuardSend> {
        if self.is_victim() {
            thread::sleep(deadline.saturating_duration_since(Instant::now()));
            return None;
        }
        let g = self.inner.try_lock_until(deadline)?;
        self.last_other.store(epoch_ns(), Relaxed);
        Some(g)
    }
}

/// A thread starved while the others run fails the bound on one wait, even
/// when its wait begins just before the deadline: the others keep running
/// until it is served or has waited longer than the bound.
///
/// The premise is that the starved thread calls `lock()` before the
/// deadline. On a loaded machine (this binary's other tests, an emulator) its
/// thread may not run at all before then; such a run proves nothing either
/// way, and is repeated, up to a limit.
#[test]
#[cfg_attr(miri, ignore = "sleeps for most of a second")]
fn negative_control_the_torture_catches_a_starved_thread() {
    let (duration, bound) = (Duration::from_millis(100), Duration::from_millis(500));
    for _ in 0..10 {
        VICTIM_FIRST_LOCK.store(u64::MAX, Relaxed);
        let report = torture::<StarvesOne>(8, duration, bound);
        let first = VICTIM_FIRST_LOCK.load(Relaxed);
        // The run's deadline is at least `duration` after it began.
        if first < report.began_ns + duration.as_nanos() as u64 {
            let Err(e) = report.check(bound) else {
                panic!("the starved thread must be noticed:\n{report}")
            };
            assert!(e.contains("a thread starved"), "{e}\n{report}");
            return;
        }
        eprintln!("the starved thread first called lock() after the deadline; run again");
    }
    panic!("in 10 runs, the starved thread never called lock() before the deadline");
}

/// A mutex whose timed attempts do not wait at all: the negative control of
/// the check that no timed attempt returns early. (Giving up at some fraction
/// of the timeout would not do: on a loaded machine a thread whose wait ends
/// early can be scheduled again only after its deadline has passed.)
struct NoWaitTimeout(spinbit::RawMutex);

// SAFETY: every operation is `spinbit::RawMutex`'s; only the timeouts are
// wrong.
unsafe impl RawMutex for NoWaitTimeout {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = NoWaitTimeout(spinbit::RawMutex::INIT);
    type Guard = GuardSend;
    fn lock(&self) -> GuardSend {
        self.0.lock()
    }
    fn try_lock(&self) -> Option<GuardSend> {
        self.0.try_lock()
    }
    unsafe fn unlock(&self, guard: GuardSend) {
        // SAFETY: forwarded from the caller.
        unsafe { self.0.unlock(guard) }
    }
    fn is_locked(&self) -> bool {
        self.0.is_locked()
    }
}

// SAFETY: as above.
unsafe impl RawMutexFair for NoWaitTimeout {
    unsafe fn unlock_fair(&self, guard: GuardSend) {
        // SAFETY: forwarded from the caller.
        unsafe { self.0.unlock_fair(guard) }
    }
    unsafe fn bump(&self, guard: &mut GuardSend) {
        // SAFETY: forwarded from the caller.
        unsafe { self.0.bump(guard) }
    }
}

// SAFETY: as above.
unsafe impl RawMutexTimed for NoWaitTimeout {
    type Duration = Duration;
    type Instant = Instant;
    fn try_lock_for(&self, _: Duration) -> Option<GuardSend> {
        self.0.try_lock()
    }
    fn try_lock_until(&self, _: Instant) -> Option<GuardSend> {
        self.0.try_lock()
    }
}

/// The torture notices timed attempts that give up before their deadline.
#[test]
#[cfg_attr(miri, ignore = "Miri's clock stretches waits far past their timeout")]
fn negative_control_the_torture_catches_an_early_timeout() {
    let bound = Duration::from_secs(2);
    noticed(Duration::from_secs(20), &["before their deadline"], || {
        let report = torture::<NoWaitTimeout>(8, Duration::from_millis(300), bound);
        report.checked(bound)
    });
}
