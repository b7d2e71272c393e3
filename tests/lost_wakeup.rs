//! Lost wakeups through the public API must fail the test, never hang it.
//!
//! A sleeper whose wake was lost, or that went to sleep on a lock nobody
//! holds, sleeps until some later unlock happens to wake it. Under steady
//! traffic that unlock soon comes; when every other thread is done it never
//! does. The tests here therefore stop the traffic over and over (bursts of
//! contention separated by a barrier), and a watchdog turns the resulting
//! hang into a failure. The crate's unit tests hunt the same bugs with a
//! parker that widens the race windows (`src/tests.rs`).

mod common;

use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use common::{Rng, Watchdog};
use spinbit::Mutex;

/// Busy-waits for `ns` nanoseconds.
fn spin_for(ns: u64) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_nanos(ns) {
        std::hint::spin_loop();
    }
}

/// `threads` threads take the mutex a few times each, then all meet at a
/// barrier, `bursts` times. Critical sections are often longer than the
/// spinner's budget or sleep, so waiters park; each meeting leaves nobody to
/// unlock, so a stranded sleeper keeps the barrier shut and the watchdog
/// fires.
fn bursts(name: &str, threads: usize, bursts: u64) {
    let m = Mutex::new((0u64, 0u64));
    let meet = Barrier::new(threads);
    let dog = Watchdog::start(name);
    thread::scope(|s| {
        for t in 0..threads {
            let (m, meet, dog) = (&m, &meet, &dog);
            s.spawn(move || {
                let mut rng = Rng::new(t as u64 + 7);
                for _ in 0..bursts {
                    meet.wait();
                    for _ in 0..2 + rng.below(4) {
                        let mut g = m.lock();
                        assert_eq!(g.0, g.1, "torn critical section");
                        g.0 += 1;
                        match rng.below(16) {
                            0..4 => spin_for(3_000 + rng.below(3_000)),
                            4..8 => thread::sleep(Duration::from_micros(20)),
                            _ => {}
                        }
                        g.1 += 1;
                        drop(g);
                        dog.progress();
                    }
                }
            });
        }
    });
    let (a, b) = m.into_inner();
    assert_eq!((a, a), (b, dog.count()), "lost updates");
}

const BURSTS: u64 = if cfg!(miri) { 5 } else { 2_500 };

#[test]
fn no_sleeper_left_behind_at_quiescence_3_threads() {
    bursts("no_sleeper_left_behind_at_quiescence_3_threads", 3, BURSTS);
}

#[test]
fn no_sleeper_left_behind_at_quiescence_6_threads() {
    bursts("no_sleeper_left_behind_at_quiescence_6_threads", 6, BURSTS / 2);
}

/// The variable that makes [`watchdog_child`] hang on purpose.
const CHILD_VAR: &str = "SPINBIT_WATCHDOG_CHILD";

/// Runs [`watchdog_child`] in a child process with a one-second watchdog:
/// the child's hang must end in an abort with the watchdog's message.
#[test]
#[cfg_attr(miri, ignore = "Miri cannot start processes")]
fn negative_control_the_watchdog_fails_a_hung_test() {
    let Some(stderr) = common::run_hung_child("watchdog_child", CHILD_VAR, "the hung child") else {
        return;
    };
    assert!(
        stderr.contains("WATCHDOG: test `watchdog_child` made no progress"),
        "no watchdog message: {stderr}"
    );
}

/// A deliberately hung test: one thread keeps the mutex locked for good and
/// another waits for it. Does nothing unless run by
/// [`negative_control_the_watchdog_fails_a_hung_test`].
#[test]
#[ignore = "run in a child process by negative_control_the_watchdog_fails_a_hung_test"]
fn watchdog_child() {
    if std::env::var_os(CHILD_VAR).is_none() {
        return;
    }
    let m = Mutex::new(0);
    let dog = Watchdog::start("watchdog_child");
    std::mem::forget(m.lock());
    dog.progress();
    thread::scope(|s| {
        s.spawn(|| *m.lock() += 1);
    });
    unreachable!("the mutex was never unlocked");
}
