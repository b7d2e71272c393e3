//! `spinbit::stats` (feature `stats`): the counters move as the slow paths
//! they count, obey the relations their documentation states once every
//! lock call has returned, are charged to the caller's line, and `reset`
//! zeroes them. The counters are process-wide, so every test here takes
//! `SERIAL` first.
//!
//! Negative controls: an uncontended run, and runs whose counters are
//! altered one relation at a time, must each fail the check the contended
//! run passes.
#![cfg(feature = "stats")]

mod common;

use std::hint::black_box;
use std::sync::Mutex as StdMutex;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::thread;
use std::time::{Duration, Instant};

use common::Watchdog;
use spinbit::stats::{self, SITES, Stats};
use spinbit::{FairMutex, Mutex, MutexGuard};

/// Serialises the tests of this binary: they all read and reset the same
/// process-wide counters.
static SERIAL: StdMutex<()> = StdMutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const THREADS: usize = 8;
const ROUNDS: usize = 300;

/// Busy work for about `d`.
fn work_for(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        black_box(());
    }
}

/// The line of the contended run's `lock` call.
static CONTENDED_LINE: AtomicU32 = AtomicU32::new(0);

/// 8 threads take one mutex with critical sections of 50 µs (so that
/// waiters sleep), every third unlock fair; every other acquisition goes
/// through a `FairMutex` of its own. Returns the counters, read once every
/// thread has returned.
fn contended_run() -> Stats {
    let (m, f) = (Mutex::new(0u64), FairMutex::new(0u64));
    stats::reset();
    let dog = Watchdog::start("stats::contended_run");
    thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                for i in 0..ROUNDS {
                    let (mut g, line) = (m.lock(), line!());
                    CONTENDED_LINE.store(line, Relaxed);
                    *g += 1;
                    work_for(Duration::from_micros(50));
                    if i % 3 == 0 {
                        MutexGuard::unlock_fair(g);
                    } else {
                        drop(g);
                    }
                    if i % 2 == 0 {
                        *f.lock() += 1;
                    }
                    dog.progress();
                }
            });
        }
    });
    assert_eq!(m.into_inner(), (THREADS * ROUNDS) as u64);
    stats::snapshot()
}

/// The relations a run of untimed lock calls must show once they have all
/// returned, and that it was contended (somebody slept, was woken, was
/// handed the lock) with its waits charged to `line` of this file. Returns
/// a summary, or every relation that failed.
fn check_contended(s: &Stats, line: u32) -> Result<String, String> {
    let mut failed = Vec::new();
    let mut expect = |ok: bool, what: &str| {
        if !ok {
            failed.push(what.to_string());
        }
    };
    expect(s.sleeps > 0, "sleeps > 0");
    expect(s.wakes > 0, "wakes > 0");
    expect(s.hand_offs > 0, "hand_offs > 0");
    expect(s.slow_paths > 0, "slow_paths > 0");
    // No timed lock calls: every sleep ended in a wake.
    expect(s.wakes == s.sleeps, "wakes == sleeps");
    expect(s.hand_offs <= s.wakes, "hand_offs <= wakes");
    expect(s.spins_won <= s.spins, "spins_won <= spins");
    expect(s.slow_paths >= s.spins_won + s.hand_offs, "slow_paths >= spins_won + hand_offs");
    expect(s.timeouts == 0, "timeouts == 0");
    expect(s.wait_max > Duration::ZERO, "wait_max > 0");
    expect(s.wait_max <= s.wait_total, "wait_max <= wait_total");
    // Every wake is timed to its thread's run.
    expect(s.wake_latency_total > Duration::ZERO, "wake_latency_total > 0");
    expect(s.wake_latency_max <= s.wake_latency_total, "wake_latency_max <= wake_latency_total");
    expect(
        s.wakes_past_spinner <= s.wakes.saturating_sub(s.hand_offs),
        "wakes_past_spinner <= plain wakes",
    );
    expect(s.polled_wakes <= s.sleeps, "polled_wakes <= sleeps");
    // Waiters slept in the OS (50 µs sections), and each of their wakes
    // or nudges made at most one system call.
    expect(s.wake_calls > 0, "wake_calls > 0");
    expect(s.wake_calls <= s.wakes + s.nudges, "wake_calls <= wakes + nudges");
    expect(s.wake_call_total > Duration::ZERO, "wake_call_total > 0");
    expect(s.wake_call_max <= s.wake_call_total, "wake_call_max <= wake_call_total");
    let sites: Vec<_> = s.longest_waits.iter().flatten().collect();
    expect(!sites.is_empty(), "a call site");
    expect(s.longest_waits.iter().skip(sites.len()).all(Option::is_none), "the sites come first");
    expect(sites.windows(2).all(|w| w[0].longest_wait >= w[1].longest_wait), "sites longest first");
    expect(
        sites.first().is_none_or(|site| wait_max_of(site.longest_wait) == s.wait_max)
            || s.sites_missed > 0,
        "the first site's wait is wait_max",
    );
    expect(
        sites.iter().any(|site| site.location.file() == file!() && site.location.line() == line),
        "the lock call's line among the sites",
    );
    if failed.is_empty() {
        Ok(format!("{s:?}"))
    } else {
        Err(format!("failed: {} ({s:?})", failed.join(", ")))
    }
}

/// `wait_max` for a longest wait of `d`: on targets without 64-bit
/// atomics it is kept in units of 1024 ticks (nanoseconds there).
fn wait_max_of(d: Duration) -> Duration {
    if cfg!(target_has_atomic = "64") {
        d
    } else {
        Duration::from_nanos((d.as_nanos() as u64) >> 10 << 10)
    }
}

/// Whether every counter reads zero.
fn is_zero(s: &Stats) -> bool {
    s.slow_paths == 0
        && s.spins == 0
        && s.spins_won == 0
        && s.sleeps == 0
        && s.wakes == 0
        && s.hand_offs == 0
        && s.starved == 0
        && s.timeouts == 0
        && s.wait_total == Duration::ZERO
        && s.wait_max == Duration::ZERO
        && s.wakes_past_spinner == 0
        && s.polled_wakes == 0
        && s.wakes_skipped == 0
        && s.guesses_missed == 0
        && s.nudges == 0
        && s.wake_latency_total == Duration::ZERO
        && s.wake_latency_max == Duration::ZERO
        && s.wake_calls == 0
        && s.wake_call_total == Duration::ZERO
        && s.wake_call_max == Duration::ZERO
        && s.longest_waits.iter().all(Option::is_none)
        && s.sites_missed == 0
}

#[test]
fn contended_counters_move_and_reset_zeroes_them() {
    let _serial = serial();
    let s = contended_run();
    let line = CONTENDED_LINE.load(Relaxed);
    match check_contended(&s, line) {
        Ok(summary) => eprintln!("contended: {summary}"),
        Err(e) => panic!("{e}"),
    }
    stats::reset();
    let zero = stats::snapshot();
    assert!(is_zero(&zero), "reset left {zero:?}");
}

/// Negative control: one thread never waits, so nothing is counted, and
/// the check must say so.
#[test]
fn an_uncontended_run_fails_the_check() {
    let _serial = serial();
    stats::reset();
    let (m, fair) = (Mutex::new(0u64), FairMutex::new(0u64));
    let mut line = 0;
    for i in 0..10_000 {
        let mut g;
        (g, line) = (m.lock(), line!());
        *g += 1;
        if i % 3 == 0 {
            MutexGuard::unlock_fair(g);
        } else {
            drop(g);
        }
        *fair.lock() += 1;
        assert!(m.try_lock_for(Duration::from_millis(1)).is_some());
    }
    let s = stats::snapshot();
    assert!(is_zero(&s), "an uncontended run counted {s:?}");
    let e = check_contended(&s, line).expect_err("the check passed an uncontended run");
    for what in
        ["sleeps > 0", "wakes > 0", "hand_offs > 0", "wake_calls > 0", "the lock call's line"]
    {
        assert!(e.contains(what), "the check did not report `{what}`: {e}");
    }
}

/// Negative control: each relation of the check fails on a contended run's
/// counters altered to break it alone.
#[test]
fn broken_relations_fail_the_check() {
    let _serial = serial();
    let s = contended_run();
    let line = CONTENDED_LINE.load(Relaxed);
    check_contended(&s, line).expect("the contended run fails the check");
    /// A relation of the check, and how to break it alone.
    type Broken = (&'static str, fn(&mut Stats));
    let broken: [Broken; 16] = [
        ("wakes == sleeps", |s| s.wakes -= 1),
        ("hand_offs <= wakes", |s| s.hand_offs = s.wakes + 1),
        ("spins_won <= spins", |s| s.spins_won = s.spins + 1),
        ("slow_paths >= spins_won + hand_offs", |s| s.slow_paths = s.hand_offs - 1),
        ("timeouts == 0", |s| s.timeouts = 1),
        ("wait_max <= wait_total", |s| s.wait_max = s.wait_total + Duration::from_nanos(1)),
        ("wake_latency_total > 0", |s| s.wake_latency_total = Duration::ZERO),
        ("wake_latency_max <= wake_latency_total", |s| {
            s.wake_latency_max = s.wake_latency_total + Duration::from_nanos(1)
        }),
        ("wakes_past_spinner <= plain wakes", |s| s.wakes_past_spinner = s.wakes + 1),
        ("polled_wakes <= sleeps", |s| s.polled_wakes = s.sleeps + 1),
        ("wake_calls > 0", |s| s.wake_calls = 0),
        ("wake_calls <= wakes + nudges", |s| s.wake_calls = s.wakes + s.nudges + 1),
        ("wake_call_total > 0", |s| s.wake_call_total = Duration::ZERO),
        ("wake_call_max <= wake_call_total", |s| {
            s.wake_call_max = s.wake_call_total + Duration::from_nanos(1)
        }),
        ("sites longest first", |s| {
            let mut longer = s.longest_waits[0].unwrap();
            longer.longest_wait += Duration::from_nanos(1);
            s.longest_waits[1] = Some(longer);
        }),
        ("the lock call's line among the sites", |s| s.longest_waits = [None; SITES]),
    ];
    for (what, break_it) in broken {
        let mut t = s;
        break_it(&mut t);
        let e = check_contended(&t, line).expect_err(what);
        assert!(e.contains(what), "`{what}` not reported: {e}");
    }
}

/// Waits until the counters show `sleeps` sleeps.
fn until_sleeps(sleeps: u64) {
    let start = Instant::now();
    while stats::snapshot().sleeps < sleeps {
        assert!(start.elapsed() < Duration::from_secs(10), "nobody slept");
        thread::sleep(Duration::from_micros(100));
    }
}

/// Takes `m` 100 times with nobody else (the clean releases), then
/// counts what they left; then, holding `m`, lets a new thread sleep on it
/// and waits `settle` more before it unlocks. Returns the counters after
/// the clean releases; `m` then holds 101 more than it did.
fn clean_then_release_to_a_sleeper(m: &Mutex<u64>, settle: Duration) -> Stats {
    for _ in 0..100 {
        *m.lock() += 1;
    }
    let clean = stats::snapshot();
    let g = m.lock();
    thread::scope(|s| {
        // A new thread: its first release loads the word (it guesses
        // nothing), and, never woken yet, it does not poll for its wake.
        s.spawn(|| *m.lock() += 1);
        until_sleeps(1);
        thread::sleep(settle);
        drop(g);
    });
    clean
}

/// An unlock whose guess of the word misses is counted: a thread whose
/// previous release found the word clean releases beside a sleeper.
/// Negative control: the clean releases before it count none.
#[test]
fn a_missed_unlock_guess_is_counted() {
    let _serial = serial();
    let m = Mutex::new(0u64);
    // Whatever this thread's unlocks left, a miss of its next comes before
    // the reset, and the clean releases below end with the clean word as
    // the guess (a pause after a miss lasts 8 releases).
    *m.lock() += 1;
    stats::reset();
    let clean = clean_then_release_to_a_sleeper(&m, Duration::ZERO);
    assert_eq!(clean.guesses_missed, 0, "{clean:?}");
    let s = stats::snapshot();
    assert_eq!(s.guesses_missed, 1, "{s:?}");
    assert_eq!(m.into_inner(), 102);
}

/// An unlock that wakes a thread asleep in the OS counts one wake system
/// call, and the time it took. Negative control: the unlocks before it,
/// which find nobody asleep, count none.
#[test]
fn a_wake_of_a_sleeping_thread_counts_one_system_call() {
    let _serial = serial();
    let m = Mutex::new(0u64);
    stats::reset();
    // 100 ms: long enough for the sleeper to be asleep in the OS, not on
    // its way there. Its starvation timer (1 ms) fires meanwhile: it marks
    // itself and sleeps again, and the unlock's nudge is the one system
    // call (the hand-off after its new mark finds it running).
    let clean = clean_then_release_to_a_sleeper(&m, Duration::from_millis(100));
    assert_eq!(clean.wake_calls, 0, "{clean:?}");
    let s = stats::snapshot();
    assert_eq!(s.wake_calls, 1, "{s:?}");
    assert!(s.wake_call_total > Duration::ZERO, "{s:?}");
    assert!(s.wake_call_max <= s.wake_call_total, "{s:?}");
    assert_eq!(m.into_inner(), 101);
}

/// A timed lock that gives up counts a slow path, a timeout and its wait,
/// charged to its line; `bump` hands the lock to the sleeper and its
/// re-lock is a slow path charged to the `bump` line.
#[test]
fn timeouts_and_bump_are_counted_at_their_lines() {
    let _serial = serial();
    let m = Mutex::new(0u64);

    stats::reset();
    let mut g = m.lock();
    let timed_line = thread::scope(|s| {
        s.spawn(|| (m.try_lock_for(Duration::from_millis(5)).is_none(), line!())).join().unwrap()
    });
    assert!(timed_line.0, "the timed lock took a held lock");
    let s = stats::snapshot();
    assert_eq!((s.slow_paths, s.timeouts), (1, 1), "{s:?}");
    assert_eq!(s.wakes, 0, "{s:?}");
    assert!(s.wait_total >= Duration::from_millis(5), "{s:?}");
    let site = s.longest_waits[0].expect("no site");
    assert_eq!((site.location.file(), site.location.line()), (file!(), timed_line.1), "{s:?}");

    stats::reset();
    let bump_line = thread::scope(|s| {
        let waiter = s.spawn(|| {
            let (mut g, line) = (m.lock(), line!());
            *g += 1;
            work_for(Duration::from_millis(3));
            line
        });
        until_sleeps(1);
        let line = line!() + 1;
        MutexGuard::bump(&mut g);
        (waiter.join().unwrap(), line)
    });
    *g += 1;
    drop(g);
    assert_eq!(*m.lock(), 2);
    let s = stats::snapshot();
    // The waiter slept and was handed the lock; the bump's re-lock may
    // have slept too, and (3 ms is past the starvation threshold) been
    // handed the lock back.
    assert_eq!((s.slow_paths, s.timeouts), (2, 0), "{s:?}");
    assert!(s.sleeps >= 1 && s.wakes == s.sleeps, "{s:?}");
    assert!((1..=s.sleeps).contains(&s.hand_offs), "{s:?}");
    let lines: Vec<_> = s
        .longest_waits
        .iter()
        .flatten()
        .map(|site| (site.location.file(), site.location.line(), site.longest_wait))
        .collect();
    assert!(
        lines
            .iter()
            .any(|&(f, l, w)| f == file!() && l == bump_line.1 && w >= Duration::from_millis(2)),
        "the bump's re-lock is not charged to its line {}: {lines:?}",
        bump_line.1
    );
    assert!(
        lines.iter().any(|&(f, l, _)| f == file!() && l == bump_line.0),
        "the waiter's lock is not charged to its line {}: {lines:?}",
        bump_line.0
    );
}

/// `ReentrantMutex`'s waits are counted, but lock_api's reentrant mutex
/// locks its raw mutex from a closure that is not `#[track_caller]`, so
/// they are charged to a line of lock_api's `remutex.rs`, as the module
/// documentation says.
#[test]
fn reentrant_waits_are_charged_to_lock_api() {
    let _serial = serial();
    let m = spinbit::ReentrantMutex::new(());
    stats::reset();
    let g = m.lock();
    thread::scope(|s| {
        s.spawn(|| drop(m.lock()));
        until_sleeps(1);
        work_for(Duration::from_millis(1));
        drop(g);
    });
    let s = stats::snapshot();
    assert_eq!((s.slow_paths, s.sleeps, s.wakes), (1, 1, 1), "{s:?}");
    let site = s.longest_waits[0].expect("no site");
    assert!(site.location.file().ends_with("remutex.rs"), "{s:?}");
    assert!(site.longest_wait >= Duration::from_millis(1), "{s:?}");
}
