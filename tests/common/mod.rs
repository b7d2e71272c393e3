//! Helpers shared by the real-thread tests: a watchdog that turns a hang
//! (a lost wakeup, a leaked lock) into a failure with a clear message, and a
//! small deterministic random number generator.
//!
//! It also re-runs a test binary's deliberately hung test in a child
//! process, for the negative controls that show the watchdog fires, and
//! repeats a negative control whose broken mutex shows only when a race
//! lands.
//!
//! The integration tests use this file as `mod common;`; the crate's unit
//! tests include it too (`src/tests.rs`), so there is one copy of each.
#![allow(dead_code)]

pub mod counters;

use std::io::Write;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// The environment variable that overrides [`Watchdog::DEFAULT_SECS`].
pub const WATCHDOG_SECS_VAR: &str = "SPINBIT_WATCHDOG_SECS";

/// Aborts the process with a message if its test makes no progress for a
/// while: a lock that loses a wakeup leaves a thread asleep forever, and the
/// test must then fail, not hang its CI job.
///
/// Workers call [`Watchdog::progress`] after each operation; a watchdog thread
/// checks the count every 50 ms. The process is aborted (not the test thread
/// panicked: the test thread is the one that hangs, in a join or a barrier),
/// after the message is written straight to the standard error stream so that
/// the test harness's output capture cannot swallow it.
///
/// Under Miri no watchdog thread runs: Miri reports deadlocks itself.
pub struct Watchdog {
    shared: Arc<Shared>,
    thread: Option<thread::JoinHandle<()>>,
}

struct Shared {
    name: String,
    progress: AtomicU64,
    done: Mutex<bool>,
    wake: Condvar,
}

impl Watchdog {
    /// How long a test may go without progress, unless
    /// `SPINBIT_WATCHDOG_SECS` says otherwise. Far above any healthy pause
    /// (a sanitizer run on an oversubscribed 2-core machine included): it
    /// only decides how long a hung test takes to fail.
    pub const DEFAULT_SECS: u64 = 20;

    /// Starts a watchdog for the test `name`, with the default timeout.
    pub fn start(name: &str) -> Watchdog {
        let secs = std::env::var(WATCHDOG_SECS_VAR)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(Self::DEFAULT_SECS);
        Self::with_timeout(name, Duration::from_secs(secs))
    }

    /// Starts a watchdog for the test `name` that aborts the process after
    /// `timeout` without progress.
    pub fn with_timeout(name: &str, timeout: Duration) -> Watchdog {
        let shared = Arc::new(Shared {
            name: name.to_owned(),
            progress: AtomicU64::new(0),
            done: Mutex::new(false),
            wake: Condvar::new(),
        });
        let thread = (!cfg!(miri)).then(|| {
            let shared = shared.clone();
            thread::Builder::new()
                .name(format!("watchdog: {name}"))
                .spawn(move || shared.watch(timeout))
                .expect("spawn the watchdog thread")
        });
        Watchdog { shared, thread }
    }

    /// Records progress: one more operation completed.
    #[inline]
    pub fn progress(&self) {
        self.shared.progress.fetch_add(1, Relaxed);
    }

    /// The operations recorded so far.
    pub fn count(&self) -> u64 {
        self.shared.progress.load(Relaxed)
    }
}

impl Shared {
    fn watch(&self, timeout: Duration) {
        let mut seen = self.progress.load(Relaxed);
        let mut since = Instant::now();
        let mut done = self.done.lock().unwrap();
        while !*done {
            done = self.wake.wait_timeout(done, Duration::from_millis(50)).unwrap().0;
            let now = self.progress.load(Relaxed);
            if now != seen {
                seen = now;
                since = Instant::now();
            } else if since.elapsed() >= timeout && !*done {
                let msg = format!(
                    "\nWATCHDOG: test `{}` made no progress for {:.1} s after {seen} operations: \
                     a thread is blocked for good (lost wakeup or leaked lock). Aborting.\n",
                    self.name,
                    since.elapsed().as_secs_f64(),
                );
                // Straight to the file descriptor: `eprintln!` output of a
                // test's threads is captured and would be lost in the abort.
                let _ = std::io::stderr().write_all(msg.as_bytes());
                std::process::abort();
            }
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        *self.shared.done.lock().unwrap() = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

/// Runs the ignored test `child` of this test binary in a child process,
/// with the variable `var` set (the child does nothing without it) and a
/// one-second watchdog, and returns the child's standard error. The child
/// is meant to hang, so it must fail: `what` names it in the panic if it
/// passed instead.
///
/// Returns `None` where the test binary cannot be re-executed: under a
/// user-mode emulator (the aarch64 tests under qemu) the host kernel cannot
/// run it, and the spawn fails or the child exits with 127 before the
/// harness prints anything. The native run checks the watchdog.
pub fn run_hung_child(child: &str, var: &str, what: &str) -> Option<String> {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args(["--exact", child, "--ignored", "--nocapture", "--test-threads=1"])
        .env(var, "1")
        .env(WATCHDOG_SECS_VAR, "1")
        .output();
    let out = match out {
        Err(e) if e.raw_os_error() == Some(libc::ENOEXEC) => None,
        Ok(out) if out.status.code() == Some(127) && out.stdout.is_empty() => None,
        Ok(out) => Some(out),
        Err(e) => panic!("cannot run the child: {e}"),
    };
    let Some(out) = out else {
        eprintln!("skipped: the test binary cannot be re-executed here");
        return None;
    };
    assert!(!out.status.success(), "{what} passed: {out:?}");
    Some(String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Runs a negative control's check again and again until it reports an
/// error that contains one of `marks`, and returns that error; panics if no
/// run has reported one once `budget` has passed (the check runs at least
/// once).
///
/// Some broken mutexes fail a check only when a race lands. A timed lock
/// that does not exclude overlaps the holder's section only if its thread
/// runs while the holder is paused, and on a loaded machine the scheduler
/// can keep every round of one run apart, for as long as the load lasts. A
/// run that did not notice the fault proves nothing either way, so it is
/// repeated; a check that never notices it still fails the control. An
/// error without any of `marks` (another check failed, one the broken mutex
/// trips every time) does not count as noticing.
pub fn noticed<T: std::fmt::Display>(
    budget: Duration,
    marks: &[&str],
    mut check: impl FnMut() -> Result<T, String>,
) -> String {
    let start = Instant::now();
    let mut runs = 0;
    loop {
        runs += 1;
        match check() {
            Err(e) if marks.iter().any(|m| e.contains(m)) => return e,
            Err(e) => eprintln!("run {runs} reported none of {marks:?}: {e}"),
            Ok(report) => eprintln!("run {runs} reported none of {marks:?}: {report}"),
        }
        if start.elapsed() >= budget {
            panic!("no run reported any of {marks:?}: {runs} runs over {:?}", start.elapsed());
        }
    }
}

/// xorshift64*: deterministic per seed, good enough to pick test actions.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // Spread small seeds; the state must not be zero.
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0; the modulo bias is irrelevant here).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// True with probability 1/n.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}
