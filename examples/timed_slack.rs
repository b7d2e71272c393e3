//! How long after its deadline a timed lock that fails returns: spinbit's
//! `try_lock_for` against `parking_lot` 0.13's, on a mutex held for the
//! whole run.
//!
//! ```text
//! cargo run --release --example timed_slack
//! ```
//!
//! For each timeout, every call must fail, never before its deadline (the
//! example panics if one does); it prints the median, 99th percentile and
//! largest time between the deadline and the return.

use std::time::{Duration, Instant};

/// Runs `try_for` (which must fail) `n` times per timeout and prints the
/// slack percentiles.
fn report(name: &str, try_for: &dyn Fn(Duration) -> bool) {
    for us in [0, 1, 10, 100, 1_000, 10_000] {
        let timeout = Duration::from_micros(us);
        let n = if us >= 10_000 { 50 } else { 300 };
        let mut slack: Vec<Duration> = (0..n)
            .map(|_| {
                let start = Instant::now();
                assert!(!try_for(timeout), "{name}: took a mutex that is held");
                let waited = start.elapsed();
                assert!(waited >= timeout, "{name}: gave up after {waited:?} of {timeout:?}");
                waited - timeout
            })
            .collect();
        slack.sort();
        println!(
            "{name:<12} {:>9} {:>10.1} {:>10.1} {:>10.1}",
            format!("{us} µs"),
            slack[n / 2].as_nanos() as f64 / 1e3,
            slack[n * 99 / 100].as_nanos() as f64 / 1e3,
            slack[n - 1].as_nanos() as f64 / 1e3,
        );
    }
}

fn main() {
    println!("{:<12} {:>9} {:>10} {:>10} {:>10}", "lock", "timeout", "p50 µs", "p99 µs", "max µs");
    let m = spinbit::Mutex::new(0u64);
    let held = m.lock();
    report("spinbit", &|t| m.try_lock_for(t).is_some());
    drop(held);
    let p = parking_lot::Mutex::new(0u64);
    let held = p.lock();
    report("parking_lot", &|t| p.try_lock_for(t).is_some());
    drop(held);
}
