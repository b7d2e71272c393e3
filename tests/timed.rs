//! Timed locking through the public API: `try_lock_for` and `try_lock_until`
//! on `spinbit::Mutex`.
//!
//! Each property is checked by a function that returns what it saw, or what
//! went wrong, so that a negative control can run the same function on a
//! deliberately broken mutex and expect the failure:
//!
//! * timeouts are honoured: a timed attempt on a held mutex never returns
//!   `None` before its deadline. How long after the deadline it returns (the
//!   slack) is measured and printed (`--nocapture`); it is bounded only by a
//!   generous sanity bound, since no test here asserts performance;
//! * `Duration::ZERO` and deadlines in the past behave like `try_lock`, and
//!   durations too large for an `Instant` wait like `lock`;
//! * the `Arc` guards: `try_lock_arc_for` and `try_lock_arc_until`;
//! * mass timeouts: 64 threads with tiny timeouts against a churning holder;
//! * timed waiters handed or denied the lock just before their deadline;
//! * timed and untimed waiters, fair unlocks and bumps on one mutex;
//! * (Linux) a storm of signals, caught by a handler installed without
//!   `SA_RESTART`, aimed at threads blocked in `lock` and `try_lock_for`.
//!
//! Exclusion is checked on plain data (two words updated with a pause
//! between the writes), and a waiter that leaves a trace when it times out (a
//! lost wakeup, a leaked lock) blocks some thread for good: a watchdog turns
//! that into a failure instead of a hang.
//!
//! `SPINBIT_TIMED_SECS` scales the length of the runs (default 1: each test
//! runs for about a second).

mod common;

use std::fmt;
use std::hint::black_box;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Barrier, Mutex as StdMutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{Rng, Watchdog, noticed};
use lock_api::{GuardSend, Mutex, MutexGuard, RawMutex, RawMutexFair, RawMutexTimed};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// What the checks need of a mutex: the fair and the timed operations, with
/// `std::time` types.
trait Timed:
    RawMutexFair + RawMutexTimed<Duration = Duration, Instant = Instant> + Sync + 'static
{
}
impl<R> Timed for R where
    R: RawMutexFair + RawMutexTimed<Duration = Duration, Instant = Instant> + Sync + 'static
{
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v.parse().unwrap_or_else(|_| panic!("{name}={v:?} does not parse")),
        Err(_) => default,
    }
}

/// `secs` seconds, scaled by `SPINBIT_TIMED_SECS` (Miri runs a token amount).
fn run_for(secs: f64) -> Duration {
    let scale: f64 = env_or("SPINBIT_TIMED_SECS", if cfg!(miri) { 0.02 } else { 1.0 });
    Duration::from_secs_f64(secs * scale)
}

/// Whether this process runs under ThreadSanitizer, as `.ci/run` starts it
/// (`TSAN_OPTIONS` is set for that step only; `cfg(sanitize = "thread")` is
/// nightly-only).
fn under_tsan() -> bool {
    std::env::var_os("TSAN_OPTIONS").is_some()
}

/// The sanity bound on the slack of one timed attempt: far above any
/// healthy value on a loaded machine (see the printed slack); an attempt that
/// returns this late was stretched, not delayed.
const SLACK_BOUND: Duration = Duration::from_secs(1);

/// Busy-waits for `ns` nanoseconds.
fn spin_for(ns: u64) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_nanos(ns) {
        std::hint::spin_loop();
    }
}

/// Waits until `t`: sleeps most of the way, spins the rest.
fn wait_until(t: Instant) {
    let now = Instant::now();
    if let Some(left) = t.checked_duration_since(now) {
        if left > Duration::from_micros(300) {
            thread::sleep(left - Duration::from_micros(200));
        }
        while Instant::now() < t {
            std::hint::spin_loop();
        }
    }
}

/// Two words that must always be equal, updated with a read, a pause and
/// two writes: overlapping critical sections tear them or lose updates.
#[derive(Debug, Default)]
struct Pair {
    a: u64,
    b: u64,
}

/// One critical section on the pair: checks it is whole, then updates it
/// with `pause` between the read and the writes. Returns whether it was
/// whole.
fn section(p: &mut Pair, pause: impl FnOnce()) -> bool {
    let whole = p.a == p.b;
    let a = p.a;
    // Opaque to the compiler: the pair is read back from memory below.
    black_box(&mut *p);
    pause();
    p.a = a + 1;
    black_box(&mut *p);
    p.b += 1;
    whole
}

/// Exclusion as the pair shows it after `sections` critical sections, of
/// which `torn` found it torn.
fn check_pair(p: &Pair, sections: u64, torn: u64, errors: &mut Vec<String>) {
    if torn > 0 {
        errors.push(format!("{torn} critical sections overlapped (torn pair)"));
    }
    if p.a != p.b || p.a != sections {
        errors.push(format!(
            "lost updates: pair = ({}, {}) after {sections} critical sections",
            p.a, p.b
        ));
    }
}

fn result<T>(report: T, errors: Vec<String>) -> Result<T, String>
where
    T: fmt::Display,
{
    if errors.is_empty() { Ok(report) } else { Err(format!("{}\n{report}", errors.join("; "))) }
}

/// How long after their deadline timed attempts returned.
#[derive(Clone, Debug, Default)]
struct Slack(Vec<Duration>);

impl Slack {
    fn add(&mut self, d: Duration) {
        self.0.push(d);
    }
    fn merge(&mut self, other: Slack) {
        self.0.extend(other.0);
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn max(&self) -> Duration {
        self.0.iter().copied().max().unwrap_or_default()
    }
    fn quantile(&self, q: f64) -> Duration {
        let mut v = self.0.clone();
        v.sort();
        v.get(((v.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or_default()
    }
}

impl fmt::Display for Slack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} timeouts, slack median {:.1?}, p99 {:.1?}, max {:.1?}",
            self.len(),
            self.quantile(0.5),
            self.quantile(0.99),
            self.max()
        )
    }
}

/// The outcome of one timed attempt.
enum Outcome<G> {
    Locked(G),
    /// `None`, returned `slack` after the deadline.
    TimedOut(Duration),
    /// `None`, returned this long before the deadline.
    Early(Duration),
}

/// One timed attempt on `m` with a timeout of `d`: `try_lock_for(d)`, or
/// `try_lock_until(now + d)` when `until`. The deadline is taken before the
/// call, so an attempt that waits its full timeout is never counted early.
fn attempt<R: Timed, T>(
    m: &Mutex<R, T>,
    d: Duration,
    until: bool,
) -> Outcome<MutexGuard<'_, R, T>> {
    let start = Instant::now();
    let deadline = start + d;
    let g = if until { m.try_lock_until(deadline) } else { m.try_lock_for(d) };
    if let Some(g) = g {
        return Outcome::Locked(g);
    }
    let now = Instant::now();
    match now.checked_duration_since(deadline) {
        Some(slack) => Outcome::TimedOut(slack),
        None => Outcome::Early(deadline - now),
    }
}

// ---------------------------------------------------------------------------
// Timeouts honoured
// ---------------------------------------------------------------------------

/// The slack of timed attempts on a held mutex, per timeout.
struct HonouredReport {
    waiters: usize,
    per_timeout: Vec<(Duration, Slack)>,
}

impl fmt::Display for HonouredReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} timed waiter(s) at once on a held mutex:", self.waiters)?;
        for (d, slack) in &self.per_timeout {
            writeln!(f, "  timeout {d:>8.1?}: {slack}")?;
        }
        Ok(())
    }
}

/// `waiters` threads make timed attempts with each of `timeouts` on a mutex
/// that the calling thread holds throughout, while one more thread waits in
/// `lock()` under them. Every attempt must return `None`, never before its
/// deadline and at most `bound` after it; once the holder lets go, the
/// untimed waiter must get the lock (the timed ones left no trace) and the
/// mutex must end free. Each timeout runs for about `budget` (3 to 200
/// attempts per waiter).
fn timeouts_honoured<R: Timed>(
    waiters: usize,
    timeouts: &[Duration],
    budget: Duration,
    bound: Duration,
) -> Result<HonouredReport, String> {
    let m = Mutex::<R, Pair>::new(Pair::default());
    let dog = Watchdog::start("timeouts_honoured");
    let errors = StdMutex::new(Vec::new());
    let mut per_timeout = Vec::new();
    let held = m.lock();
    thread::scope(|s| {
        let sleeper = s.spawn(|| {
            let mut g = m.lock();
            section(&mut g, || {});
            dog.progress();
        });
        for &d in timeouts {
            let rounds =
                ((budget.as_secs_f64() / d.as_secs_f64().max(1e-3)) as usize).clamp(3, 200);
            let slack = StdMutex::new(Slack::default());
            thread::scope(|s| {
                for w in 0..waiters {
                    let (m, dog, errors, slack) = (&m, &dog, &errors, &slack);
                    s.spawn(move || {
                        let mut mine = Slack::default();
                        for r in 0..rounds {
                            match attempt(m, d, (r + w) % 2 == 1) {
                                Outcome::Locked(_) => errors
                                    .lock()
                                    .unwrap()
                                    .push(format!("a {d:?} attempt took a held mutex")),
                                Outcome::Early(by) => errors.lock().unwrap().push(format!(
                                    "a {d:?} attempt returned None {by:?} before its deadline"
                                )),
                                Outcome::TimedOut(late) => {
                                    if late > bound {
                                        errors.lock().unwrap().push(format!(
                                            "a {d:?} attempt returned {late:?} after its \
                                             deadline, over the {bound:?} sanity bound"
                                        ));
                                    }
                                    mine.add(late);
                                }
                            }
                            dog.progress();
                        }
                        slack.lock().unwrap().merge(mine);
                    });
                }
            });
            per_timeout.push((d, slack.into_inner().unwrap()));
        }
        drop(held);
        sleeper.join().expect("the untimed waiter panicked");
    });
    let mut errors = errors.into_inner().unwrap();
    if m.is_locked() {
        errors.push("the mutex is still locked after every thread finished".into());
    }
    let p = m.into_inner();
    check_pair(&p, 1, 0, &mut errors);
    result(HonouredReport { waiters, per_timeout }, errors)
}

/// The timeouts the slack is measured at.
const TIMEOUTS: [Duration; 6] = [
    Duration::ZERO,
    Duration::from_micros(1),
    Duration::from_micros(10),
    Duration::from_micros(100),
    Duration::from_millis(1),
    Duration::from_millis(10),
];

#[test]
fn timeouts_are_honoured_by_one_waiter() {
    let report = timeouts_honoured::<spinbit::RawMutex>(1, &TIMEOUTS, run_for(0.2), SLACK_BOUND)
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("timeouts_are_honoured_by_one_waiter: {report}");
}

#[test]
fn timeouts_are_honoured_by_four_waiters_at_once() {
    let report = timeouts_honoured::<spinbit::RawMutex>(4, &TIMEOUTS, run_for(0.2), SLACK_BOUND)
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("timeouts_are_honoured_by_four_waiters_at_once: {report}");
}

// ---------------------------------------------------------------------------
// Zero, past and huge timeouts
// ---------------------------------------------------------------------------

/// `try_lock_for(ZERO)` and deadlines in the past (or now) behave like
/// `try_lock`: they take a free mutex and return `None` at once on a held
/// one (a sanity bound of 1 s: waiting for a held mutex that this thread
/// holds would never end).
fn zero_and_past_like_try_lock<R: Timed>() -> Result<(), String> {
    const MS: Duration = Duration::from_millis(1);
    const HOUR: Duration = Duration::from_secs(3600);
    let m = Mutex::<R, ()>::new(());
    let mut errors = Vec::new();
    // `ago` before now, or as far back as the clock goes.
    let past = |ago: Duration| {
        let now = Instant::now();
        now.checked_sub(ago).unwrap_or(now)
    };
    type Attempt<'a, R> = (&'a str, Box<dyn Fn(&Mutex<R, ()>) -> bool + 'a>);
    let attempts: [Attempt<'_, R>; 4] = [
        ("try_lock_for(ZERO)", Box::new(|m| m.try_lock_for(Duration::ZERO).is_some())),
        ("try_lock_until(now)", Box::new(|m| m.try_lock_until(Instant::now()).is_some())),
        ("try_lock_until(1 ms ago)", Box::new(|m| m.try_lock_until(past(MS)).is_some())),
        ("try_lock_until(1 h ago)", Box::new(|m| m.try_lock_until(past(HOUR)).is_some())),
    ];
    for (name, f) in &attempts {
        if !f(&m) {
            errors.push(format!("{name} did not take a free mutex"));
        }
        if m.is_locked() {
            // (Going on would block for good in `lock` below.)
            errors.push(format!("{name} left the mutex locked"));
            return Err(errors.join("; "));
        }
        let held = m.lock();
        let start = Instant::now();
        let took = f(&m);
        let waited = start.elapsed();
        if took {
            errors.push(format!("{name} took a held mutex"));
        }
        if waited > SLACK_BOUND {
            errors.push(format!("{name} waited {waited:?} for a held mutex"));
        }
        drop(held);
    }
    if m.is_locked() {
        errors.push("the mutex is still locked at the end".into());
    }
    if errors.is_empty() { Ok(()) } else { Err(errors.join("; ")) }
}

#[test]
fn zero_and_past_deadlines_behave_like_try_lock() {
    zero_and_past_like_try_lock::<spinbit::RawMutex>().unwrap_or_else(|e| panic!("{e}"));
}

/// Timeouts too large for an `Instant`, or nearly so, wait like `lock`:
/// another thread holds the mutex for `hold` and then lets go, and each
/// attempt must take it, without panicking. Returns the attempts made.
fn huge_timeouts_wait_like_lock<R: Timed>(hold: Duration) -> Result<Vec<String>, String> {
    let m = Mutex::<R, ()>::new(());
    let dog = Watchdog::start("huge_timeouts_wait_like_lock");
    let durations = [
        Duration::MAX,
        Duration::from_secs(u64::MAX),
        Duration::from_secs(u64::MAX / 4),
        Duration::from_secs(i64::MAX as u64),
        Duration::from_secs(1 << 40),
    ];
    type Attempt<R> = (String, Box<dyn Fn(&Mutex<R, ()>) -> bool>);
    let mut attempts: Vec<Attempt<R>> = Vec::new();
    for d in durations {
        attempts
            .push((format!("try_lock_for({d:?})"), Box::new(move |m| m.try_lock_for(d).is_some())));
        // The deadline `now + d`, if an `Instant` can hold it.
        if let Some(deadline) = Instant::now().checked_add(d) {
            attempts.push((
                format!("try_lock_until(now + {d:?})"),
                Box::new(move |m| m.try_lock_until(deadline).is_some()),
            ));
        }
    }
    let mut errors = Vec::new();
    let mut made = Vec::new();
    for (name, f) in &attempts {
        let locked = Barrier::new(2);
        let outcome = thread::scope(|s| {
            s.spawn(|| {
                let g = m.lock();
                locked.wait();
                thread::sleep(hold);
                drop(g);
            });
            locked.wait();
            let r = panic::catch_unwind(AssertUnwindSafe(|| f(&m)));
            dog.progress();
            r
        });
        match outcome {
            Ok(true) => {}
            Ok(false) => errors.push(format!("{name} returned None")),
            Err(_) => errors.push(format!("{name} panicked")),
        }
        made.push(name.clone());
    }
    if m.is_locked() {
        errors.push("the mutex is still locked at the end".into());
    }
    if errors.is_empty() { Ok(made) } else { Err(errors.join("; ")) }
}

#[test]
fn huge_timeouts_wait_like_lock_without_overflow() {
    let hold = if cfg!(miri) { Duration::from_millis(1) } else { Duration::from_millis(50) };
    let made =
        huge_timeouts_wait_like_lock::<spinbit::RawMutex>(hold).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("huge timeouts, each on a mutex released after {hold:?}: {}", made.join(", "));
}

/// The guards that own an `Arc` of the mutex: `try_lock_arc_for` and
/// `try_lock_arc_until` time out on a held mutex, never early, and take it
/// once another thread lets go (that thread got the guard sent to it).
#[test]
fn arc_guards_time_out_and_take_the_lock() {
    let m = std::sync::Arc::new(spinbit::Mutex::new(0u64));
    let d = Duration::from_millis(2);
    let held = m.lock_arc();
    let start = Instant::now();
    assert!(m.try_lock_arc_for(d).is_none(), "try_lock_arc_for took a held mutex");
    assert!(start.elapsed() >= d, "try_lock_arc_for gave up after {:?}", start.elapsed());
    let deadline = Instant::now() + d;
    assert!(m.try_lock_arc_until(deadline).is_none(), "try_lock_arc_until took a held mutex");
    assert!(Instant::now() >= deadline, "try_lock_arc_until gave up early");
    let releaser = thread::spawn(move || {
        thread::sleep(Duration::from_millis(5));
        drop(held);
    });
    let mut g = m.try_lock_arc_for(Duration::from_secs(3600)).expect("released after 5 ms");
    *g += 1;
    thread::spawn(move || *g += 1).join().unwrap();
    releaser.join().unwrap();
    let far = Instant::now() + Duration::from_secs(3600);
    assert_eq!(m.try_lock_arc_until(far).map(|g| *g), Some(2));
    assert!(!m.is_locked());
}

// ---------------------------------------------------------------------------
// Mass timeouts
// ---------------------------------------------------------------------------

/// What the threads of [`mass_timeouts`] did and saw.
#[derive(Debug, Default)]
struct MassReport {
    threads: usize,
    elapsed: Duration,
    churner_locks: u64,
    /// Timed attempts that took the lock, and those that timed out.
    successes: u64,
    timeouts: u64,
    /// Timed attempts that returned `None` before their deadline.
    early: u64,
    /// The fewest timed attempts any timed thread made.
    min_attempts: u64,
    slack: Slack,
}

impl fmt::Display for MassReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} timed threads and a churning holder for {:.2?}: {} churner locks, \
             {} timed successes, {} timeouts ({} early), fewest attempts of a thread {}; {}",
            self.threads,
            self.elapsed,
            self.churner_locks,
            self.successes,
            self.timeouts,
            self.early,
            self.min_attempts,
            self.slack
        )
    }
}

/// `threads` threads make timed attempts with random tiny timeouts (1 µs to
/// 200 µs; every 8th one `try_lock_until`) for `duration`, against a holder
/// that takes the lock with `lock()` and keeps it for random times up to
/// 500 µs, sometimes sleeping. Checks exclusion, that no timeout is early or
/// over `SLACK_BOUND`, that both timeouts and successes happened, that the
/// mutex ends free, and that a last `lock()` takes it. A waiter that leaves a
/// trace when it times out blocks the holder or the last `lock()` for good:
/// the watchdog fails the test.
fn mass_timeouts<R: Timed>(threads: usize, duration: Duration) -> Result<MassReport, String> {
    let m = Mutex::<R, Pair>::new(Pair::default());
    let dog = Watchdog::start("mass_timeouts");
    let stop = AtomicBool::new(false);
    let (sections, torn) = (AtomicU64::new(0), AtomicU64::new(0));
    let (successes, timeouts, early) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let churner_locks = AtomicU64::new(0);
    let min_attempts = AtomicU64::new(u64::MAX);
    let slack = StdMutex::new(Slack::default());
    let start = Instant::now();
    thread::scope(|s| {
        s.spawn(|| {
            let mut rng = Rng::new(1);
            // At least once, however soon `stop` comes (under Miri, threads
            // may start late).
            loop {
                let mut g = m.lock();
                let whole = section(&mut g, || {
                    if rng.one_in(8) {
                        thread::sleep(Duration::from_micros(50 + rng.below(450)));
                    } else {
                        spin_for(rng.below(500_000));
                    }
                });
                drop(g);
                torn.fetch_add(u64::from(!whole), Relaxed);
                sections.fetch_add(1, Relaxed);
                churner_locks.fetch_add(1, Relaxed);
                dog.progress();
                match rng.below(4) {
                    0 => thread::yield_now(),
                    1 => spin_for(rng.below(50_000)),
                    _ => {}
                }
                if stop.load(Relaxed) {
                    break;
                }
            }
        });
        for id in 0..threads {
            let (m, dog, stop, sections, torn) = (&m, &dog, &stop, &sections, &torn);
            let (successes, timeouts, early) = (&successes, &timeouts, &early);
            let (min_attempts, slack) = (&min_attempts, &slack);
            s.spawn(move || {
                let mut rng = Rng::new(id as u64 + 2);
                let mut mine = Slack::default();
                let mut attempts = 0;
                loop {
                    let d = Duration::from_micros(1 + rng.below(200));
                    match attempt(m, d, rng.one_in(8)) {
                        Outcome::Locked(mut g) => {
                            let whole = section(&mut g, || spin_for(rng.below(2_000)));
                            drop(g);
                            torn.fetch_add(u64::from(!whole), Relaxed);
                            sections.fetch_add(1, Relaxed);
                            successes.fetch_add(1, Relaxed);
                        }
                        Outcome::TimedOut(late) => {
                            mine.add(late);
                            timeouts.fetch_add(1, Relaxed);
                        }
                        Outcome::Early(_) => {
                            early.fetch_add(1, Relaxed);
                            timeouts.fetch_add(1, Relaxed);
                        }
                    }
                    attempts += 1;
                    dog.progress();
                    if stop.load(Relaxed) {
                        break;
                    }
                }
                min_attempts.fetch_min(attempts, Relaxed);
                slack.lock().unwrap().merge(mine);
            });
        }
        thread::sleep(duration);
        stop.store(true, Relaxed);
    });
    let elapsed = start.elapsed();
    let mut errors = Vec::new();
    let locked_at_end = m.is_locked();
    if locked_at_end {
        errors.push("the mutex is still locked after every thread finished".into());
    } else {
        // A last `lock()` (it would block for good behind a leaked lock, and
        // the watchdog would fail the test).
        let mut g = m.lock();
        section(&mut g, || {});
        drop(g);
        sections.fetch_add(1, Relaxed);
    }
    let p = m.into_inner();
    check_pair(&p, sections.into_inner(), torn.into_inner(), &mut errors);
    let report = MassReport {
        threads,
        elapsed,
        churner_locks: churner_locks.into_inner(),
        successes: successes.into_inner(),
        timeouts: timeouts.into_inner(),
        early: early.into_inner(),
        min_attempts: min_attempts.into_inner(),
        slack: slack.into_inner().unwrap(),
    };
    if report.early > 0 {
        errors.push(format!("{} timed attempts returned None before their deadline", report.early));
    }
    if report.slack.max() > SLACK_BOUND {
        errors.push(format!(
            "a timed attempt returned {:?} after its deadline, over the {SLACK_BOUND:?} \
             sanity bound",
            report.slack.max()
        ));
    }
    if report.timeouts == 0 {
        errors.push("no timed attempt timed out".into());
    }
    if report.successes == 0 {
        errors.push("no timed attempt took the lock".into());
    }
    result(report, errors)
}

#[test]
fn mass_timeouts_64_threads_against_a_churning_holder() {
    let threads = if cfg!(miri) { 4 } else { 64 };
    let report =
        mass_timeouts::<spinbit::RawMutex>(threads, run_for(1.0)).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("mass timeouts: {report}");
}

// ---------------------------------------------------------------------------
// Woken just before the deadline
// ---------------------------------------------------------------------------

#[derive(Debug, Default)]
struct NearReport {
    rounds: u64,
    /// Attempts that took the lock before their deadline, at or after it,
    /// and that timed out.
    before: u64,
    after: u64,
    timeouts: u64,
    early: u64,
    slack: Slack,
}

impl fmt::Display for NearReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} rounds: {} took the lock before the deadline, {} at or after it, \
             {} timed out ({} early); {}",
            self.rounds, self.before, self.after, self.timeouts, self.early, self.slack
        )
    }
}

/// Two timed waiters (one `try_lock_for`, one `try_lock_until`, the same
/// deadline 1-2 ms away) wait for a holder that lets go at a random moment
/// between 300 µs before their deadline and 50 µs after it, by a plain
/// unlock, an `unlock_fair` (a hand-off racing the timeout), or an unlock
/// followed at once by a new `lock()` (a wake the waiter loses to a barger).
/// Checks exclusion, that a `None` never comes before the deadline, and
/// that the mutex ends free.
fn near_deadline<R: Timed>(rounds: u64) -> Result<NearReport, String> {
    const WAITERS: usize = 2;
    let m = Mutex::<R, Pair>::new(Pair::default());
    let dog = Watchdog::start("near_deadline");
    let start_round = Barrier::new(WAITERS + 1);
    let end_round = Barrier::new(WAITERS + 1);
    // The round's deadline, in ns after `epoch`.
    let epoch = Instant::now();
    let deadline_ns = AtomicU64::new(0);
    let (sections, torn) = (AtomicU64::new(0), AtomicU64::new(0));
    let report = StdMutex::new(NearReport { rounds, ..NearReport::default() });
    thread::scope(|s| {
        for w in 0..WAITERS {
            let (m, dog, start_round, end_round) = (&m, &dog, &start_round, &end_round);
            let (deadline_ns, sections, torn, report) = (&deadline_ns, &sections, &torn, &report);
            s.spawn(move || {
                for _ in 0..rounds {
                    start_round.wait();
                    let deadline = epoch + Duration::from_nanos(deadline_ns.load(Relaxed));
                    let g = if w == 0 {
                        m.try_lock_for(deadline.saturating_duration_since(Instant::now()))
                    } else {
                        m.try_lock_until(deadline)
                    };
                    let now = Instant::now();
                    match g {
                        Some(mut g) => {
                            let whole = section(&mut g, || {});
                            drop(g);
                            torn.fetch_add(u64::from(!whole), Relaxed);
                            sections.fetch_add(1, Relaxed);
                            let mut r = report.lock().unwrap();
                            if now < deadline {
                                r.before += 1;
                            } else {
                                r.after += 1;
                            }
                        }
                        None => {
                            let mut r = report.lock().unwrap();
                            r.timeouts += 1;
                            match now.checked_duration_since(deadline) {
                                Some(late) => r.slack.add(late),
                                None => r.early += 1,
                            }
                        }
                    }
                    dog.progress();
                    end_round.wait();
                }
            });
        }
        let mut rng = Rng::new(3);
        for _ in 0..rounds {
            let mut g = m.lock();
            let deadline = Instant::now() + Duration::from_micros(1_000 + rng.below(1_000));
            deadline_ns.store((deadline - epoch).as_nanos() as u64, Relaxed);
            start_round.wait();
            // Let go between 300 µs before the deadline and 50 µs after it.
            let offset = rng.below(350);
            let release = if offset < 300 {
                deadline - Duration::from_micros(300 - offset)
            } else {
                deadline + Duration::from_micros(offset - 300)
            };
            let whole = section(&mut g, || wait_until(release));
            torn.fetch_add(u64::from(!whole), Relaxed);
            sections.fetch_add(1, Relaxed);
            match rng.below(3) {
                0 => drop(g),
                1 => MutexGuard::unlock_fair(g),
                _ => {
                    drop(g);
                    let mut g = m.lock();
                    let whole = section(&mut g, || spin_for(rng.below(100_000)));
                    drop(g);
                    torn.fetch_add(u64::from(!whole), Relaxed);
                    sections.fetch_add(1, Relaxed);
                }
            }
            dog.progress();
            end_round.wait();
        }
    });
    let mut errors = Vec::new();
    if m.is_locked() {
        errors.push("the mutex is still locked after every thread finished".into());
    }
    let p = m.into_inner();
    check_pair(&p, sections.into_inner(), torn.into_inner(), &mut errors);
    let report = report.into_inner().unwrap();
    if report.early > 0 {
        errors.push(format!("{} timed attempts returned None before their deadline", report.early));
    }
    if report.slack.max() > SLACK_BOUND {
        errors.push(format!(
            "a timed attempt returned {:?} after its deadline, over the {SLACK_BOUND:?} \
             sanity bound",
            report.slack.max()
        ));
    }
    result(report, errors)
}

#[test]
fn timed_waiters_released_just_before_their_deadline() {
    let rounds = if cfg!(miri) { 5 } else { (run_for(1.0).as_secs_f64() * 300.0) as u64 };
    let report = near_deadline::<spinbit::RawMutex>(rounds).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("near the deadline: {report}");
}

// ---------------------------------------------------------------------------
// Timed and untimed waiters mixed
// ---------------------------------------------------------------------------

/// The operations of [`mixed`].
const MIXED_OPS: [&str; 7] = [
    "lock",
    "lock + unlock_fair",
    "lock + bump",
    "try_lock",
    "try_lock_for",
    "try_lock_until",
    "try_lock_for + unlock_fair",
];

#[derive(Debug, Default)]
struct MixedReport {
    threads: usize,
    elapsed: Duration,
    /// Per operation of `MIXED_OPS`: calls, and calls that did not take the
    /// lock.
    calls: [u64; 7],
    misses: [u64; 7],
    sections: u64,
    early: u64,
    slack: Slack,
}

impl fmt::Display for MixedReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} threads for {:.2?}:", self.threads, self.elapsed)?;
        for ((op, calls), misses) in MIXED_OPS.iter().zip(&self.calls).zip(&self.misses) {
            write!(f, " {op} {calls} ({misses} missed);")?;
        }
        write!(f, " {} critical sections; {} early; {}", self.sections, self.early, self.slack)
    }
}

/// `threads` threads for `duration`, each picking at random: `lock` (plain,
/// `unlock_fair` or `bump`), `try_lock`, `try_lock_for` and `try_lock_until`
/// with timeouts from 0 to 5 ms; critical sections are now and then long
/// (a sleep up to 3 ms), so timed attempts time out. Checks exclusion, that
/// every operation ran and every thread finished, that the timed ones both
/// took the lock and timed out, never early, and that the mutex ends free.
fn mixed<R: Timed>(threads: usize, duration: Duration) -> Result<MixedReport, String> {
    let m = Mutex::<R, Pair>::new(Pair::default());
    let dog = Watchdog::start("mixed");
    let stop = AtomicBool::new(false);
    let report = StdMutex::new(MixedReport { threads, ..MixedReport::default() });
    let torn = AtomicU64::new(0);
    let start = Instant::now();
    thread::scope(|s| {
        for id in 0..threads {
            let (m, dog, stop, report, torn) = (&m, &dog, &stop, &report, &torn);
            s.spawn(move || {
                let mut rng = Rng::new(id as u64 + 11);
                let mut calls = [0u64; 7];
                let mut misses = [0u64; 7];
                let (mut sections, mut early) = (0u64, 0u64);
                let mut slack = Slack::default();
                let pause = |rng: &mut Rng| match rng.below(100) {
                    0..40 => {}
                    40..90 => spin_for(rng.below(5_000)),
                    90..97 => spin_for(5_000 + rng.below(50_000)),
                    _ => thread::sleep(Duration::from_micros(200 + rng.below(2_800))),
                };
                let mut run = |g: &mut MutexGuard<'_, R, Pair>, rng: &mut Rng| {
                    let whole = section(g, || pause(rng));
                    torn.fetch_add(u64::from(!whole), Relaxed);
                    sections += 1;
                };
                while !stop.load(Relaxed) {
                    let op = match rng.below(100) {
                        0..25 => 0,
                        25..32 => 1,
                        32..40 => 2,
                        40..50 => 3,
                        50..75 => 4,
                        75..90 => 5,
                        _ => 6,
                    };
                    calls[op] += 1;
                    let d = match rng.below(10) {
                        0 => Duration::ZERO,
                        1..5 => Duration::from_micros(1 + rng.below(100)),
                        5..9 => Duration::from_micros(100 + rng.below(1_900)),
                        _ => Duration::from_micros(2_000 + rng.below(3_000)),
                    };
                    match op {
                        0 => run(&mut m.lock(), &mut rng),
                        1 => {
                            let mut g = m.lock();
                            run(&mut g, &mut rng);
                            MutexGuard::unlock_fair(g);
                        }
                        2 => {
                            let mut g = m.lock();
                            run(&mut g, &mut rng);
                            MutexGuard::bump(&mut g);
                            run(&mut g, &mut rng);
                        }
                        3 => match m.try_lock() {
                            Some(mut g) => run(&mut g, &mut rng),
                            None => misses[op] += 1,
                        },
                        _ => match attempt(m, d, op == 5) {
                            Outcome::Locked(mut g) => {
                                run(&mut g, &mut rng);
                                if op == 6 {
                                    MutexGuard::unlock_fair(g);
                                }
                            }
                            Outcome::TimedOut(late) => {
                                misses[op] += 1;
                                slack.add(late);
                            }
                            Outcome::Early(_) => {
                                misses[op] += 1;
                                early += 1;
                            }
                        },
                    }
                    dog.progress();
                    if rng.one_in(4) {
                        thread::yield_now();
                    }
                }
                let mut r = report.lock().unwrap();
                for op in 0..calls.len() {
                    r.calls[op] += calls[op];
                    r.misses[op] += misses[op];
                }
                r.sections += sections;
                r.early += early;
                r.slack.merge(slack);
            });
        }
        thread::sleep(duration);
        stop.store(true, Relaxed);
    });
    let mut report = report.into_inner().unwrap();
    report.elapsed = start.elapsed();
    let mut errors = Vec::new();
    if m.is_locked() {
        errors.push("the mutex is still locked after every thread finished".into());
    }
    let p = m.into_inner();
    check_pair(&p, report.sections, torn.into_inner(), &mut errors);
    if report.early > 0 {
        errors.push(format!("{} timed attempts returned None before their deadline", report.early));
    }
    if report.slack.max() > SLACK_BOUND {
        errors.push(format!(
            "a timed attempt returned {:?} after its deadline, over the {SLACK_BOUND:?} \
             sanity bound",
            report.slack.max()
        ));
    }
    if !cfg!(miri) {
        if let Some(i) = report.calls.iter().position(|&n| n == 0) {
            errors.push(format!("no {} ran", MIXED_OPS[i]));
        }
        if report.misses[4..7].iter().sum::<u64>() == 0 {
            errors.push("no timed attempt timed out".into());
        }
        if (4..7).all(|i| report.misses[i] == report.calls[i]) {
            errors.push("no timed attempt took the lock".into());
        }
    }
    result(report, errors)
}

#[test]
fn timed_and_untimed_waiters_mixed() {
    let threads = if cfg!(miri) { 3 } else { 8 };
    let report =
        mixed::<spinbit::RawMutex>(threads, run_for(1.0)).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("mixed: {report}");
}

// ---------------------------------------------------------------------------
// Signals
// ---------------------------------------------------------------------------

#[cfg(target_os = "linux")]
mod signals {
    use super::*;

    /// Signals the handler has caught, in every thread.
    pub static CAUGHT: AtomicU64 = AtomicU64::new(0);

    /// The signal tests share the process-wide handler and `CAUGHT`: one at
    /// a time.
    pub static ONE_AT_A_TIME: StdMutex<()> = StdMutex::new(());

    /// The handler: counts the signal and returns. An atomic RMW is
    /// async-signal-safe, and the handler leaves `errno` alone.
    extern "C" fn on_signal(_: libc::c_int) {
        CAUGHT.fetch_add(1, Relaxed);
    }

    /// Installs the handler for `SIGUSR1`, without `SA_RESTART`: a blocking
    /// system call that the signal interrupts fails with `EINTR` instead of
    /// being restarted by the kernel. It stays installed for the rest of
    /// the process (nothing else here uses `SIGUSR1`), so that a signal
    /// still in flight at the end of one test never meets the default
    /// action, which kills the process.
    pub fn install_handler() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: `sa` is zeroed (a valid `sigaction`: no flags, empty
            // mask, no restorer) and then filled in; `on_signal` has the
            // signature of a plain handler (no `SA_SIGINFO`) and is
            // async-signal-safe.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                sa.sa_flags = 0;
                libc::sigemptyset(&mut sa.sa_mask);
                assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
            }
        });
    }

    /// The calling thread, as a target for `pthread_kill`.
    pub fn me() -> libc::pthread_t {
        // SAFETY: `pthread_self` has no preconditions.
        unsafe { libc::pthread_self() }
    }

    #[derive(Debug, Default)]
    pub struct StormReport {
        pub elapsed: Duration,
        pub sent: u64,
        pub caught: u64,
        /// `lock()` acquisitions of the blocked lockers and of the churners.
        pub locks: u64,
        pub churns: u64,
        /// Timed attempts on the churned mutex: taken, timed out.
        pub timed_taken: u64,
        pub timed_out: u64,
        /// Timed attempts on the mutex held throughout: timed out (all
        /// should), and taken.
        pub held_timeouts: u64,
        pub held_taken: u64,
        pub early: u64,
        /// The slack on the churned mutex and on the held one.
        pub slack: Slack,
        pub held_slack: Slack,
    }

    impl fmt::Display for StormReport {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            writeln!(
                f,
                "{:.2?}: {} signals sent, {} caught; {} lock() by blocked lockers, {} by churners; \
                 timed on the churned mutex: {} taken, {} timed out; {} early",
                self.elapsed,
                self.sent,
                self.caught,
                self.locks,
                self.churns,
                self.timed_taken,
                self.timed_out,
                self.early,
            )?;
            writeln!(f, "  churned mutex: {}", self.slack)?;
            write!(f, "  mutex held throughout: {}", self.held_slack)
        }
    }

    /// For `duration`, a thread sends `SIGUSR1` round robin, as fast as it
    /// can with a 20 µs pause per round, to: 3 threads looping on `lock()`
    /// of a churned mutex, 3 making timed attempts on it (50 µs to 5 ms), 2
    /// making timed attempts (1 ms to 20 ms) on a second mutex that the
    /// calling thread holds throughout (they all time out), and the 2
    /// churners that hold the first mutex for 20 µs to 2 ms, sleeping or
    /// spinning. The storm stops before any target ends. Checks exclusion,
    /// that signals were caught, that every group made progress, that no
    /// timed attempt returned `None` early or more than `bound` after its
    /// deadline (an interrupted wait that starts its timeout over is
    /// stretched by a storm), and that both mutexes end free. A lost wakeup
    /// stops the lockers and the churners: the watchdog fails the test.
    pub fn storm<R: Timed>(duration: Duration, bound: Duration) -> Result<StormReport, String> {
        install_handler();
        let m = Mutex::<R, Pair>::new(Pair::default());
        let held = Mutex::<R, ()>::new(());
        let dog = Watchdog::start("signal storm");
        let targets = StdMutex::new(Vec::new());
        const LOCKERS: usize = 3;
        const TIMED: usize = 3;
        const ON_HELD: usize = 2;
        const CHURNERS: usize = 2;
        let registered = Barrier::new(LOCKERS + TIMED + ON_HELD + CHURNERS + 1);
        let (storm_stop, stop) = (AtomicBool::new(false), AtomicBool::new(false));
        let (sections, torn) = (AtomicU64::new(0), AtomicU64::new(0));
        let report = StdMutex::new(StormReport::default());
        let caught_before = CAUGHT.load(Relaxed);
        let hold = held.lock();
        let start = Instant::now();
        thread::scope(|s| {
            let (m, held, dog, stop, report) = (&m, &held, &dog, &stop, &report);
            let (targets, registered, torn, sections) = (&targets, &registered, &torn, &sections);
            let register = || {
                targets.lock().unwrap().push(me());
                registered.wait();
            };
            let tally = |whole: bool| {
                torn.fetch_add(u64::from(!whole), Relaxed);
                sections.fetch_add(1, Relaxed);
            };
            for _ in 0..LOCKERS {
                s.spawn(move || {
                    register();
                    let mut n = 0;
                    while !stop.load(Relaxed) {
                        let mut g = m.lock();
                        tally(section(&mut g, || {}));
                        drop(g);
                        n += 1;
                        dog.progress();
                    }
                    report.lock().unwrap().locks += n;
                });
            }
            for id in 0..TIMED {
                s.spawn(move || {
                    register();
                    let mut rng = Rng::new(id as u64 + 21);
                    let mut r = StormReport::default();
                    while !stop.load(Relaxed) {
                        let d = Duration::from_micros(50 + rng.below(4_950));
                        match attempt(m, d, rng.one_in(2)) {
                            Outcome::Locked(mut g) => {
                                tally(section(&mut g, || {}));
                                r.timed_taken += 1;
                            }
                            Outcome::TimedOut(late) => {
                                r.slack.add(late);
                                r.timed_out += 1;
                            }
                            Outcome::Early(_) => r.early += 1,
                        }
                        dog.progress();
                    }
                    let mut t = report.lock().unwrap();
                    t.timed_taken += r.timed_taken;
                    t.timed_out += r.timed_out;
                    t.early += r.early;
                    t.slack.merge(r.slack);
                });
            }
            for id in 0..ON_HELD {
                s.spawn(move || {
                    register();
                    let mut rng = Rng::new(id as u64 + 31);
                    let mut r = StormReport::default();
                    while !stop.load(Relaxed) {
                        let d = Duration::from_micros(1_000 + rng.below(19_000));
                        // (No panic here: the sender must find every target
                        // alive until the storm stops.)
                        match attempt(held, d, rng.one_in(2)) {
                            Outcome::Locked(_) => r.held_taken += 1,
                            Outcome::TimedOut(late) => {
                                r.held_slack.add(late);
                                r.held_timeouts += 1;
                            }
                            Outcome::Early(_) => r.early += 1,
                        }
                        dog.progress();
                    }
                    let mut t = report.lock().unwrap();
                    t.held_timeouts += r.held_timeouts;
                    t.held_taken += r.held_taken;
                    t.early += r.early;
                    t.held_slack.merge(r.held_slack);
                });
            }
            for id in 0..CHURNERS {
                s.spawn(move || {
                    register();
                    let mut rng = Rng::new(id as u64 + 41);
                    let mut n = 0;
                    while !stop.load(Relaxed) {
                        let mut g = m.lock();
                        tally(section(&mut g, || {
                            let t = 20 + rng.below(1_980);
                            if rng.one_in(2) {
                                thread::sleep(Duration::from_micros(t));
                            } else {
                                spin_for(t * 1_000);
                            }
                        }));
                        drop(g);
                        n += 1;
                        dog.progress();
                        thread::yield_now();
                    }
                    report.lock().unwrap().churns += n;
                });
            }
            registered.wait();
            let targets = targets.lock().unwrap().clone();
            let storm_stop = &storm_stop;
            let sender = s.spawn(move || {
                let mut sent = 0u64;
                while !storm_stop.load(Relaxed) {
                    for &t in &targets {
                        // SAFETY: every target registered itself and runs
                        // until `stop`, which is raised only after this
                        // thread has been joined, so `t` names a live
                        // thread; SIGUSR1 has a handler.
                        let r = unsafe { libc::pthread_kill(t, libc::SIGUSR1) };
                        assert_eq!(r, 0, "pthread_kill failed");
                        sent += 1;
                    }
                    thread::sleep(Duration::from_micros(20));
                }
                sent
            });
            thread::sleep(duration);
            storm_stop.store(true, Relaxed);
            let sent = sender.join().expect("the signal sender panicked");
            report.lock().unwrap().sent = sent;
            stop.store(true, Relaxed);
        });
        drop(hold);
        let mut report = report.into_inner().unwrap();
        report.elapsed = start.elapsed();
        report.caught = CAUGHT.load(Relaxed) - caught_before;
        let mut errors = Vec::new();
        if m.is_locked() || held.is_locked() {
            errors.push("a mutex is still locked after every thread finished".into());
        }
        let p = m.into_inner();
        check_pair(&p, sections.into_inner(), torn.into_inner(), &mut errors);
        if report.early > 0 {
            errors.push(format!(
                "{} timed attempts returned None before their deadline",
                report.early
            ));
        }
        let late = report.slack.max().max(report.held_slack.max());
        if late > bound {
            errors.push(format!(
                "a timed attempt returned {late:?} after its deadline, over the {bound:?} bound: \
                 the signals stretched it"
            ));
        }
        if report.held_taken > 0 {
            errors.push(format!(
                "{} timed attempts took the mutex held throughout",
                report.held_taken
            ));
        }
        if report.caught == 0 {
            errors.push("no signal was caught".into());
        }
        if report.locks == 0 || report.churns == 0 || report.held_timeouts == 0 {
            errors.push("some group of threads made no progress".into());
        }
        result(report, errors)
    }
}

/// The signal storm on spinbit. It runs under ThreadSanitizer too, which
/// intercepts signals and runs the handler at its own safe points: the
/// futex waits are still interrupted, and the same bounds hold.
#[test]
#[cfg(target_os = "linux")]
#[cfg_attr(miri, ignore = "Miri does not support signal handlers")]
fn signal_storm_against_blocked_and_timed_waiters() {
    let _one = signals::ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let report = signals::storm::<spinbit::RawMutex>(run_for(1.5), Duration::from_millis(500))
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("signal storm: {report}");
}

// ---------------------------------------------------------------------------
// Negative controls: each check fails on a deliberately broken mutex
// ---------------------------------------------------------------------------

/// A raw mutex that forwards everything to `spinbit::RawMutex` except its
/// timed operations, which `$timed` defines (broken on purpose).
macro_rules! broken_timed {
    ($(#[$m:meta])* $name:ident, $timed:item) => {
        $(#[$m])*
        struct $name(spinbit::RawMutex);

        // SAFETY: `lock`, `try_lock`, `unlock` and `is_locked` are
        // `spinbit::RawMutex`'s. The type is used only by negative controls.
        unsafe impl RawMutex for $name {
            #[allow(clippy::declare_interior_mutable_const)]
            const INIT: Self = $name(spinbit::RawMutex::INIT);
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
        unsafe impl RawMutexFair for $name {
            unsafe fn unlock_fair(&self, guard: GuardSend) {
                // SAFETY: forwarded from the caller.
                unsafe { self.0.unlock_fair(guard) }
            }
            unsafe fn bump(&self, guard: &mut GuardSend) {
                // SAFETY: forwarded from the caller.
                unsafe { self.0.bump(guard) }
            }
        }

        // SAFETY: every guard it returns comes from `spinbit::RawMutex`.
        $timed
    };
}

broken_timed!(
    /// Gives up at once, without waiting: an early timeout that no timer
    /// slack or slow machine can hide. (A mutex that gave up at half its
    /// timeout did not do as a control: under qemu's user-mode emulation,
    /// `.ci/run`'s aarch64 step, such waits of up to 200 µs returned after
    /// the whole timeout every time, 323 of 323 in one run, and on a loaded
    /// machine longer ones did too.)
    NoWaitTimeout,
    unsafe impl RawMutexTimed for NoWaitTimeout {
        type Duration = Duration;
        type Instant = Instant;
        fn try_lock_for(&self, _d: Duration) -> Option<GuardSend> {
            self.0.try_lock()
        }
        fn try_lock_until(&self, _t: Instant) -> Option<GuardSend> {
            self.0.try_lock()
        }
    }
);

/// How late [`LateTimeout`] returns.
const LATE: Duration = Duration::from_millis(60);

broken_timed!(
    /// Returns `LATE` after its deadline.
    LateTimeout,
    unsafe impl RawMutexTimed for LateTimeout {
        type Duration = Duration;
        type Instant = Instant;
        fn try_lock_for(&self, d: Duration) -> Option<GuardSend> {
            self.0.try_lock_for(d).or_else(|| {
                thread::sleep(LATE);
                None
            })
        }
        fn try_lock_until(&self, t: Instant) -> Option<GuardSend> {
            self.try_lock_for(t.saturating_duration_since(Instant::now()))
        }
    }
);

broken_timed!(
    /// Looks at the deadline before it tries the lock: a zero or past
    /// deadline never takes even a free mutex.
    DeadlineFirst,
    unsafe impl RawMutexTimed for DeadlineFirst {
        type Duration = Duration;
        type Instant = Instant;
        fn try_lock_for(&self, d: Duration) -> Option<GuardSend> {
            if d.is_zero() { None } else { self.0.try_lock_for(d) }
        }
        fn try_lock_until(&self, t: Instant) -> Option<GuardSend> {
            if Instant::now() >= t { None } else { self.0.try_lock_until(t) }
        }
    }
);

broken_timed!(
    /// Takes a timeout whose deadline an `Instant` cannot hold for a
    /// deadline in the past.
    OverflowIsPast,
    unsafe impl RawMutexTimed for OverflowIsPast {
        type Duration = Duration;
        type Instant = Instant;
        fn try_lock_for(&self, d: Duration) -> Option<GuardSend> {
            match Instant::now().checked_add(d) {
                Some(t) => self.0.try_lock_until(t),
                None => self.0.try_lock(),
            }
        }
        fn try_lock_until(&self, t: Instant) -> Option<GuardSend> {
            self.0.try_lock_until(t)
        }
    }
);

broken_timed!(
    /// A zero timeout takes the lock and says it did not: the lock leaks.
    ZeroLeaks,
    unsafe impl RawMutexTimed for ZeroLeaks {
        type Duration = Duration;
        type Instant = Instant;
        fn try_lock_for(&self, d: Duration) -> Option<GuardSend> {
            if d.is_zero() {
                // Taken, and never passed to `unlock`.
                let _leaked = self.0.try_lock();
                return None;
            }
            self.0.try_lock_for(d)
        }
        fn try_lock_until(&self, t: Instant) -> Option<GuardSend> {
            self.0.try_lock_until(t)
        }
    }
);

/// Timeouts of [`LeaksOnTimeout`] so far.
static LEAK_COUNT: AtomicU64 = AtomicU64::new(0);

broken_timed!(
    /// Every 50th timeout, takes the lock (waiting as `lock` does) and never
    /// releases it: a waiter that leaves a trace.
    LeaksOnTimeout,
    unsafe impl RawMutexTimed for LeaksOnTimeout {
        type Duration = Duration;
        type Instant = Instant;
        fn try_lock_for(&self, d: Duration) -> Option<GuardSend> {
            let g = self.0.try_lock_for(d);
            if g.is_none() && LEAK_COUNT.fetch_add(1, Relaxed) % 50 == 49 {
                // The raw guard is plain state: never passing it to
                // `unlock` keeps the lock.
                let _leaked = self.0.lock();
            }
            g
        }
        fn try_lock_until(&self, t: Instant) -> Option<GuardSend> {
            self.try_lock_for(t.saturating_duration_since(Instant::now()))
        }
    }
);

#[cfg(target_os = "linux")]
broken_timed!(
    /// Starts its whole timeout over whenever a signal was caught while it
    /// waited, as a wait on a relative timeout restarted after `EINTR` does.
    RestartsOnSignal,
    unsafe impl RawMutexTimed for RestartsOnSignal {
        type Duration = Duration;
        type Instant = Instant;
        fn try_lock_for(&self, d: Duration) -> Option<GuardSend> {
            loop {
                let caught = signals::CAUGHT.load(Relaxed);
                if let Some(g) = self.0.try_lock_for(d) {
                    return Some(g);
                }
                if signals::CAUGHT.load(Relaxed) == caught {
                    return None;
                }
            }
        }
        fn try_lock_until(&self, t: Instant) -> Option<GuardSend> {
            self.try_lock_for(t.saturating_duration_since(Instant::now()))
        }
    }
);

broken_timed!(
    /// Never takes the lock in a timed attempt: waits out the timeout and
    /// returns `None`.
    NeverTakes,
    unsafe impl RawMutexTimed for NeverTakes {
        type Duration = Duration;
        type Instant = Instant;
        fn try_lock_for(&self, d: Duration) -> Option<GuardSend> {
            self.try_lock_until(Instant::now() + d)
        }
        fn try_lock_until(&self, t: Instant) -> Option<GuardSend> {
            thread::sleep(t.saturating_duration_since(Instant::now()));
            None
        }
    }
);

/// A mutex whose timed operations take no lock at all: the guard says
/// whether it holds the real one.
struct TimedNoExclusion(spinbit::RawMutex);

// SAFETY: deliberately broken (a timed "success" excludes nobody), and used
// only by the negative controls that show the checks notice it.
unsafe impl RawMutex for TimedNoExclusion {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = TimedNoExclusion(spinbit::RawMutex::INIT);
    type Guard = Option<GuardSend>;
    fn lock(&self) -> Option<GuardSend> {
        Some(self.0.lock())
    }
    fn try_lock(&self) -> Option<Option<GuardSend>> {
        self.0.try_lock().map(Some)
    }
    unsafe fn unlock(&self, guard: Option<GuardSend>) {
        if let Some(g) = guard {
            // SAFETY: `g` came from the real lock, which the caller holds.
            unsafe { self.0.unlock(g) }
        }
    }
    fn is_locked(&self) -> bool {
        self.0.is_locked()
    }
}

// SAFETY: as above.
unsafe impl RawMutexFair for TimedNoExclusion {
    unsafe fn unlock_fair(&self, guard: Option<GuardSend>) {
        if let Some(g) = guard {
            // SAFETY: `g` came from the real lock, which the caller holds.
            unsafe { self.0.unlock_fair(g) }
        }
    }
    unsafe fn bump(&self, guard: &mut Option<GuardSend>) {
        if let Some(g) = guard {
            // SAFETY: `g` came from the real lock, which the caller holds.
            unsafe { self.0.bump(g) }
        }
    }
}

// SAFETY: as above.
unsafe impl RawMutexTimed for TimedNoExclusion {
    type Duration = Duration;
    type Instant = Instant;
    fn try_lock_for(&self, _: Duration) -> Option<Option<GuardSend>> {
        Some(None)
    }
    fn try_lock_until(&self, _: Instant) -> Option<Option<GuardSend>> {
        Some(None)
    }
}

/// How long a negative control whose broken mutex shows only when a race
/// lands keeps running its check before it fails (see [`noticed`]). Idle,
/// the first run notices; under a loaded test runner, whole runs have
/// noticed nothing.
const RACE_BUDGET: Duration = Duration::from_secs(20);

/// Skips a negative control whose broken mutex races on purpose: the
/// sanitizer would report the race it is built to show.
fn skip_deliberate_race() -> bool {
    if under_tsan() {
        eprintln!("skipped under ThreadSanitizer: a deliberate data race");
    }
    under_tsan()
}

#[test]
fn negative_control_timeouts_honoured_catches_an_early_timeout() {
    let timeouts = [Duration::from_millis(1), Duration::from_millis(10)];
    let e = timeouts_honoured::<NoWaitTimeout>(2, &timeouts, run_for(0.05), SLACK_BOUND)
        .err()
        .expect("an early timeout must be noticed");
    assert!(e.contains("before its deadline"), "{e}");
}

#[test]
#[cfg_attr(miri, ignore = "sleeps")]
fn negative_control_timeouts_honoured_catches_a_late_timeout() {
    let timeouts = [Duration::from_millis(1)];
    let bound = LATE / 2;
    let e = timeouts_honoured::<LateTimeout>(1, &timeouts, Duration::ZERO, bound)
        .err()
        .expect("a late timeout must be noticed");
    assert!(e.contains("sanity bound"), "{e}");
}

#[test]
#[cfg_attr(miri, ignore = "a deliberate data race")]
fn negative_control_timeouts_honoured_catches_a_timed_lock_that_does_not_exclude() {
    if skip_deliberate_race() {
        return;
    }
    noticed(RACE_BUDGET, &["took a held mutex"], || {
        timeouts_honoured::<TimedNoExclusion>(1, &TIMEOUTS[..2], Duration::ZERO, SLACK_BOUND)
    });
}

#[test]
fn negative_control_zero_and_past_catch_a_deadline_checked_first() {
    let e = zero_and_past_like_try_lock::<DeadlineFirst>()
        .expect_err("a zero timeout that never takes the lock must be noticed");
    assert!(e.contains("try_lock_for(ZERO) did not take a free mutex"), "{e}");
    assert!(e.contains("try_lock_until(1 h ago) did not take a free mutex"), "{e}");
}

#[test]
fn negative_control_zero_and_past_catch_a_leaked_lock() {
    let e = zero_and_past_like_try_lock::<ZeroLeaks>()
        .expect_err("a zero timeout that leaks the lock must be noticed");
    assert!(e.contains("try_lock_for(ZERO) left the mutex locked"), "{e}");
}

#[test]
fn negative_control_huge_timeouts_catch_an_overflow_taken_for_the_past() {
    // The same hold as the run it checks: with a short one, a slow machine
    // (an emulator) may reach the first attempt after the holder let go,
    // and a loaded one still may, so a run that did is repeated.
    let hold = if cfg!(miri) { Duration::from_millis(1) } else { Duration::from_millis(50) };
    noticed(RACE_BUDGET, &["try_lock_for(18446744073709551615.999999999s) returned None"], || {
        huge_timeouts_wait_like_lock::<OverflowIsPast>(hold).map(|made| made.join(", "))
    });
}

#[test]
#[cfg_attr(miri, ignore = "a deliberate data race")]
fn negative_control_mass_timeouts_catch_a_timed_lock_that_does_not_exclude() {
    if skip_deliberate_race() {
        return;
    }
    let e = noticed(RACE_BUDGET, &["overlapped", "lost updates"], || {
        mass_timeouts::<TimedNoExclusion>(8, run_for(0.2))
    });
    assert!(e.contains("no timed attempt timed out"), "{e}");
}

#[test]
fn negative_control_mass_timeouts_catch_a_timed_lock_that_never_succeeds() {
    let threads = if cfg!(miri) { 2 } else { 8 };
    let e = mass_timeouts::<NeverTakes>(threads, run_for(0.2))
        .expect_err("timed attempts that never succeed must be noticed");
    assert!(e.contains("no timed attempt took the lock"), "{e}");
}

#[test]
#[cfg_attr(miri, ignore = "Miri's clock stretches waits far past their timeout")]
fn negative_control_mass_timeouts_catch_an_early_timeout() {
    let threads = if cfg!(miri) { 2 } else { 8 };
    noticed(RACE_BUDGET, &["before their deadline"], || {
        mass_timeouts::<NoWaitTimeout>(threads, run_for(0.2))
    });
}

#[test]
#[cfg_attr(miri, ignore = "Miri's clock stretches waits far past their timeout")]
fn negative_control_near_deadline_catches_an_early_timeout() {
    let rounds = if cfg!(miri) { 3 } else { 20 };
    noticed(RACE_BUDGET, &["before their deadline"], || near_deadline::<NoWaitTimeout>(rounds));
}

#[test]
#[cfg_attr(miri, ignore = "a deliberate data race")]
fn negative_control_near_deadline_catches_a_timed_lock_that_does_not_exclude() {
    if skip_deliberate_race() {
        return;
    }
    noticed(RACE_BUDGET, &["overlapped", "lost updates"], || near_deadline::<TimedNoExclusion>(20));
}

#[test]
#[cfg_attr(miri, ignore = "the check of both outcomes is off under Miri")]
fn negative_control_mixed_catches_a_timed_lock_that_never_succeeds() {
    let e = mixed::<NeverTakes>(4, run_for(0.3))
        .expect_err("timed attempts that never succeed must be noticed");
    assert!(e.contains("no timed attempt took the lock"), "{e}");
}

#[test]
#[cfg_attr(miri, ignore = "a deliberate data race")]
fn negative_control_mixed_catches_a_timed_lock_that_does_not_exclude() {
    if skip_deliberate_race() {
        return;
    }
    noticed(RACE_BUDGET, &["overlapped", "lost updates"], || {
        mixed::<TimedNoExclusion>(4, run_for(0.3))
    });
}

#[test]
#[cfg_attr(miri, ignore = "Miri's clock stretches waits far past their timeout")]
fn negative_control_mixed_catches_an_early_timeout() {
    let threads = if cfg!(miri) { 2 } else { 4 };
    noticed(RACE_BUDGET, &["before their deadline"], || {
        mixed::<NoWaitTimeout>(threads, run_for(0.3))
    });
}

#[test]
#[cfg(target_os = "linux")]
#[cfg_attr(miri, ignore = "Miri does not support signal handlers")]
fn negative_control_the_storm_catches_a_wait_restarted_after_a_signal() {
    let _one = signals::ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // A wait is stretched only while signals keep coming faster than its
    // timeout; a machine that deschedules the sender breaks the chain.
    noticed(RACE_BUDGET, &["stretched"], || {
        signals::storm::<RestartsOnSignal>(Duration::from_millis(700), Duration::from_millis(300))
    });
}

#[test]
#[cfg(target_os = "linux")]
#[cfg_attr(miri, ignore = "Miri does not support signal handlers")]
fn negative_control_the_storm_catches_an_early_timeout() {
    let _one = signals::ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    noticed(RACE_BUDGET, &["before their deadline"], || {
        signals::storm::<NoWaitTimeout>(Duration::from_millis(300), SLACK_BOUND)
    });
}

/// The variable that makes [`leaking_timeout_child`] run.
const CHILD_VAR: &str = "SPINBIT_TIMED_LEAK_CHILD";

/// A waiter that leaks the lock when it times out blocks the holder for
/// good: run in a child process with a one-second watchdog, the mass
/// timeouts check must end in an abort with the watchdog's message.
#[test]
#[cfg_attr(miri, ignore = "Miri cannot start processes")]
fn negative_control_mass_timeouts_catch_a_waiter_that_leaks_the_lock() {
    let Some(stderr) =
        common::run_hung_child("leaking_timeout_child", CHILD_VAR, "the child with a leaked lock")
    else {
        return;
    };
    assert!(
        stderr.contains("WATCHDOG: test `mass_timeouts` made no progress"),
        "no watchdog message: {stderr}"
    );
}

/// Mass timeouts on [`LeaksOnTimeout`]: hangs, and its watchdog aborts the
/// process. Does nothing unless run by
/// [`negative_control_mass_timeouts_catch_a_waiter_that_leaks_the_lock`].
#[test]
#[ignore = "run in a child process by negative_control_mass_timeouts_catch_a_waiter_that_leaks_the_lock"]
fn leaking_timeout_child() {
    if std::env::var_os(CHILD_VAR).is_none() {
        return;
    }
    let r = mass_timeouts::<LeaksOnTimeout>(8, Duration::from_millis(300));
    panic!("the check returned instead of hanging: {r:?}");
}
