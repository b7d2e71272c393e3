//! Helpers shared by the diagnostics (`contention_profile`, `requeue_wait`).

use std::time::{Duration, Instant};

/// Busy work for `ns` nanoseconds, timed by the clock; returns a count the
/// caller stores, so that the loop is not optimised away.
pub fn busy(ns: u64) -> u64 {
    let end = Instant::now() + Duration::from_nanos(ns);
    let mut n = 0u64;
    while Instant::now() < end {
        n = n.wrapping_add(1);
    }
    n
}

/// Positional argument `i` (from 0) as a whole number, `default` when it
/// is absent; a value that is not one exits with `usage` ("usage: TOOL
/// ...", whose TOOL prefixes the message).
pub fn arg(args: &[String], i: usize, default: u64, usage: &str) -> u64 {
    args.get(i).map_or(default, |s| {
        s.parse().unwrap_or_else(|_| {
            let tool = usage.split_whitespace().nth(1).unwrap_or("");
            eprintln!("{tool}: argument {} ({s:?}) is not a whole number\n{usage}", i + 1);
            std::process::exit(2)
        })
    })
}
