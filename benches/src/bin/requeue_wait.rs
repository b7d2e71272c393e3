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
//! and unlocks. A waiter's wait is the time from that `notify_all` to its
//! `wait` returning with the mutex held. Printed: the lockers' longest
//! `lock()`, and the waiters' median, 99th percentile and longest wait.
//!
//! A requeued waiter sleeps on in the condition variable's untimed wait, so
//! until its first wake it has no starvation timer of its own: only other
//! threads' judgement by age (twice the longer threshold) makes it
//! starving (the `spinbit::algorithm` docs, "The bound"). This shows what
//! that costs it next to the mutex's own waiters.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread;
use std::time::{Duration, Instant};

struct Round {
    work: u64,
    round: u64,
    notified_at: Option<Instant>,
}

fn busy(ns: u64) -> u64 {
    let end = Instant::now() + Duration::from_nanos(ns);
    let mut n = 0u64;
    while Instant::now() < end {
        n = n.wrapping_add(1);
    }
    n
}

fn arg(args: &[String], i: usize, default: u64) -> u64 {
    args.get(i).map_or(default, |s| {
        s.parse().unwrap_or_else(|_| {
            eprintln!("requeue_wait: argument {} ({s:?}) is not a whole number", i + 1);
            eprintln!("usage: requeue_wait [LOCKERS [CS_NS [WAITERS [SECS]]]]");
            std::process::exit(2)
        })
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let lockers = arg(&args, 0, 2) as usize;
    let cs_ns = arg(&args, 1, 300);
    let waiters = arg(&args, 2, 2) as usize;
    let secs = arg(&args, 3, 3);
    let mutex = Arc::new(spinbit::Mutex::new(Round { work: 0, round: 0, notified_at: None }));
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
                let mut waits = Vec::new();
                let mut g = mutex.lock();
                while !stop.load(Relaxed) {
                    let seen = g.round;
                    cv.wait_while(&mut g, |r| r.round == seen && !stop.load(Relaxed));
                    if let Some(at) = g.notified_at {
                        waits.push(at.elapsed());
                    }
                }
                waits
            })
        })
        .collect();

    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(secs) {
        thread::sleep(Duration::from_millis(3));
        let mut g = mutex.lock();
        g.round += 1;
        g.notified_at = Some(Instant::now());
        cv.notify_all();
    }
    stop.store(true, Relaxed);
    {
        let _g = mutex.lock();
        cv.notify_all();
    }
    let longest_lock = lockers.into_iter().map(|h| h.join().unwrap()).max().unwrap_or_default();
    let mut waits: Vec<Duration> = waiters.into_iter().flat_map(|h| h.join().unwrap()).collect();
    waits.sort();
    let at = |q: usize| waits.get((waits.len() * q / 100).min(waits.len().saturating_sub(1)));
    println!("lockers' longest lock(): {longest_lock:?}");
    println!(
        "requeued waiters: {} waits, median {:?}, p99 {:?}, longest {:?}",
        waits.len(),
        at(50).copied().unwrap_or_default(),
        at(99).copied().unwrap_or_default(),
        waits.last().copied().unwrap_or_default()
    );
}
