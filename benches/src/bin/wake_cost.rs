//! What one futex wake costs on this machine: the time the waking thread
//! spends in the `FUTEX_WAKE` system call, and the time from the start of
//! that call to the woken thread running, as a function of how long the sleeper had
//! slept (its CPU idle) when the wake came. A mutex's unlock that wakes a
//! sleeper pays the first while the lock is free; a lock handed to the
//! sleeper waits for the second.
//!
//! ```text
//! cargo run --release -p spinbit-bench --bin wake_cost [-- ROUNDS]
//! ```
//!
//! One thread sleeps in `FUTEX_WAIT` on a word; the main thread busy-waits
//! (its CPU stays busy, as an unlocker's does) for the idle time after the
//! sleeper has announced that it goes to sleep, then sets the word and
//! wakes it, timing the call, and busy-waits for the sleeper to report
//! when it ran. `ROUNDS` wakes (default 1000) per idle time; the p10, p50
//! and p90 of each. Threads are not pinned: the scheduler places the
//! sleeper as it places a mutex's waiters. The header names the CPU, the
//! number of CPUs and, where Linux exposes them, the cpuidle driver and
//! the guest halt-poll limit (`haltpoll.guest_halt_poll_ns`): a virtual
//! CPU that halts when idle takes an interrupt to wake, which a hypervisor
//! may make expensive for the waker, and a guest that polls before halting
//! avoids it for wakes within its poll. Linux only.

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("wake_cost: Linux only (it times FUTEX_WAKE)");
}

#[cfg(target_os = "linux")]
#[path = "common/cpu.rs"]
mod cpu;

#[cfg(target_os = "linux")]
mod linux {
    use std::hint::spin_loop;
    use std::sync::atomic::AtomicU32;
    use std::sync::atomic::AtomicU64;
    use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
    use std::time::Instant;

    /// The sleeper's futex word: 1 when a wake is due.
    static WORD: AtomicU32 = AtomicU32::new(0);
    /// Bumped by the sleeper just before each wait (the waker's cue).
    static ASLEEP: AtomicU64 = AtomicU64::new(0);
    /// When the sleeper last ran after a wake, in ns since the `start` that
    /// `main` passes it, or 0.
    static RAN_AT: AtomicU64 = AtomicU64::new(0);

    const IDLE_NS: [u64; 6] = [2_000, 10_000, 50_000, 100_000, 200_000, 1_000_000];

    fn ns(start: Instant) -> u64 {
        u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn futex(op: libc::c_int, val: u32) -> libc::c_long {
        // SAFETY: `WORD` is a static, valid for the whole process; the
        // null timeout means no timeout, and the other arguments are
        // unused by FUTEX_WAIT and FUTEX_WAKE.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                WORD.as_ptr(),
                op | libc::FUTEX_PRIVATE_FLAG,
                val,
                std::ptr::null::<libc::timespec>(),
            )
        }
    }

    fn sleeper(start: Instant) {
        loop {
            ASLEEP.fetch_add(1, Release);
            while WORD.load(Acquire) == 0 {
                futex(libc::FUTEX_WAIT, 0);
            }
            RAN_AT.store(ns(start).max(1), Release);
            WORD.store(0, Relaxed);
        }
    }

    fn read(path: &str) -> Option<String> {
        std::fs::read_to_string(path).ok().map(|s| s.trim().to_owned())
    }

    fn deciles(v: &mut [u64]) -> String {
        v.sort_unstable();
        let at = |q: usize| v[(v.len() - 1) * q / 10] as f64 / 1e3;
        format!("{:7.1} {:7.1} {:7.1}", at(1), at(5), at(9))
    }

    pub fn main() {
        let rounds: usize = match std::env::args().nth(1) {
            None => 1000,
            Some(a) => match a.parse() {
                Ok(n) if n > 0 => n,
                _ => {
                    eprintln!("usage: wake_cost [ROUNDS]  (ROUNDS: a positive count)");
                    std::process::exit(2);
                }
            },
        };
        let info = read("/proc/cpuinfo").unwrap_or_default();
        let id = super::cpu::cpu_id(&info);
        let cpu = match id.split_once('/') {
            Some((family, model)) => {
                format!("{} (family {family}, model {model})", super::cpu::cpu_model(&info))
            }
            None => super::cpu::cpu_model(&info),
        };
        let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
        let driver = read("/sys/devices/system/cpu/cpuidle/current_driver");
        let poll = read("/sys/module/haltpoll/parameters/guest_halt_poll_ns");
        println!(
            "{cpu}, {cpus} CPUs; cpuidle driver {}; guest halt poll {}",
            driver.as_deref().unwrap_or("-"),
            poll.map_or("-".into(), |p| format!("{p} ns")),
        );
        println!("{rounds} wakes per row; microseconds, p10 p50 p90");
        println!("{:>10}  {:>23}  {:>23}", "idle", "FUTEX_WAKE call", "wake to run");
        let start = Instant::now();
        std::thread::spawn(move || sleeper(start));
        let mut waits = 0;
        for idle in IDLE_NS {
            let (mut call, mut run) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
            for _ in 0..rounds {
                // The sleeper announces each wait (its first, then one
                // after each wake): wait for the next one, then let its
                // CPU sit idle for `idle`.
                waits += 1;
                while ASLEEP.load(Acquire) < waits {
                    spin_loop();
                }
                RAN_AT.store(0, Relaxed);
                let from = ns(start);
                while ns(start) - from < idle {
                    spin_loop();
                }
                WORD.store(1, Release);
                let t0 = ns(start);
                futex(libc::FUTEX_WAKE, 1);
                let t1 = ns(start);
                let ran = loop {
                    match RAN_AT.load(Acquire) {
                        0 => spin_loop(),
                        t => break t,
                    }
                };
                call.push(t1 - t0);
                run.push(ran.saturating_sub(t0));
            }
            println!("{:>8}us  {}  {}", idle / 1_000, deciles(&mut call), deciles(&mut run));
        }
    }
}
