//! How long a condition variable's waiter that `notify_all` requeued onto
//! the mutex waits for it, beside threads that take the same mutex in a
//! loop, against those threads' own longest `lock()`.
//!
//! ```text
//! cargo run --release -p spinbit-bench --bin requeue_wait -- [LOCKERS [CS_NS [WAITERS [SECS]]]]
//! cargo run --release -p spinbit-bench --bin requeue_wait -- 4 1000 2 3
//! ```
//!
//! `LOCKERS` threads (default 2) loop `lock`, a critical section of `CS_NS`
//! nanoseconds of busy work (default 300), `unlock`. `WAITERS` threads
//! (default 2) wait on a `spinbit::Condvar` for the next round. Every 3 ms
//! a notifier locks the mutex, starts a round, calls `notify_all` while it
//! holds the mutex (so the waiters are requeued onto the mutex, not woken)
//! and unlocks. A waiter's wait is the time from the `notify_all` that
//! requeued it (the first round after the one it waited in; the time of
//! every round is kept) to its `wait` returning with the mutex held; a
//! waiter that returns only after later rounds have started has missed
//! them, and those are counted. Printed: the lockers' longest `lock()`, and
//! the waiters' median, 99th percentile and longest wait.
//!
//! A requeued waiter sleeps on in the condition variable's untimed wait, so
//! until its first wake it has no starvation timer of its own; other
//! threads judge it by age at the longer starvation threshold (the
//! `spinbit::algorithm` docs, "Starvation mode"). This shows what its
//! waits come to next to the mutex's own waiters.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread;
use std::time::{Duration, Instant};

#[path = "common/diag.rs"]
mod diag;
use diag::busy;

struct Rounds {
    work: u64,
    /// How many rounds have started.
    round: usize,
    /// When each round's `notify_all` was called: round `r` (from 1) at
    /// `notified_at[r - 1]`.
    notified_at: Vec<Instant>,
}

const USAGE: &str = "usage: requeue_wait [LOCKERS [CS_NS [WAITERS [SECS]]]]";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() > 4 {
        eprintln!("requeue_wait: at most 4 arguments\n{USAGE}");
        std::process::exit(2);
    }
    let lockers = diag::arg(&args, 0, 2, USAGE) as usize;
    let cs_ns = diag::arg(&args, 1, 300, USAGE);
    let waiters = diag::arg(&args, 2, 2, USAGE) as usize;
    let secs = diag::arg(&args, 3, 3, USAGE);
    let rounds = Rounds { work: 0, round: 0, notified_at: Vec::with_capacity(1 << 12) };
    let mutex = Arc::new(spinbit::Mutex::new(rounds));
    let cv = Arc::new(spinbit::Condvar::new());
    let stop = Arc::new(AtomicBool::new(false));

    let lockers: Vec<_> = (0..lockers)
        .map(|_| {
            let (mutex, stop) = (mutex.clone(), stop.clone());
            thread::spawn(move || {
                let mut longest = Duration::ZERO;
                while !stop.load(Relaxed) {
                    let start = Instant::now();
                    let mut g = mutex.lock();
                    longest = longest.max(start.elapsed());
                    g.work = g.work.wrapping_add(busy(cs_ns));
                }
                longest
            })
        })
        .collect();
    let waiters: Vec<_> = (0..waiters)
        .map(|_| {
            let (mutex, cv, stop) = (mutex.clone(), cv.clone(), stop.clone());
            thread::spawn(move || {
                let (mut waits, mut missed) = (Vec::new(), 0);
                let mut g = mutex.lock();
                while !stop.load(Relaxed) {
                    let seen = g.round;
                    cv.wait_while(&mut g, |r| r.round == seen && !stop.load(Relaxed));
                    if g.round != seen {
                        // Round `seen + 1` requeued us.
                        waits.push(g.notified_at[seen].elapsed());
                        missed += g.round - seen - 1;
                    }
                }
                (waits, missed)
            })
        })
        .collect();

    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(secs) {
        thread::sleep(Duration::from_millis(3));
        let mut g = mutex.lock();
        g.round += 1;
        g.notified_at.push(Instant::now());
        cv.notify_all();
    }
    stop.store(true, Relaxed);
    {
        let _g = mutex.lock();
        cv.notify_all();
    }
    let longest_lock = lockers.into_iter().map(|h| h.join().unwrap()).max().unwrap_or_default();
    let (mut waits, mut missed) = (Vec::new(), 0);
    for h in waiters {
        let (w, m) = h.join().unwrap();
        waits.extend(w);
        missed += m;
    }
    waits.sort();
    println!("lockers' longest lock(): {longest_lock:?}");
    let Some(&longest) = waits.last() else {
        println!("requeued waiters: no wait returned (no waiters, or a run too short for a round)");
        return;
    };
    let at = |q: usize| waits[(waits.len() * q / 100).min(waits.len() - 1)];
    println!(
        "requeued waiters: {} waits ({missed} rounds missed), median {:?}, p99 {:?}, longest {longest:?}",
        waits.len(),
        at(50),
        at(99),
    );
}
