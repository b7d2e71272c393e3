//! Contention statistics: for 300 ms, four threads share a mutex with
//! short critical sections and four others one with long critical sections
//! (and fair unlocks); then the program prints what `spinbit::stats`
//! counted.
//!
//! ```text
//! cargo run --release --features stats --example stats
//! ```

use std::hint::black_box;
use std::thread;
use std::time::{Duration, Instant};

use spinbit::stats::{self, Stats};

/// Short critical sections: mostly spins and barging.
static SHORT: spinbit::Mutex<u64> = spinbit::Mutex::new(0);
/// Long critical sections (50 µs): waiters sleep; every fourth unlock is
/// fair.
static LONG: spinbit::Mutex<u64> = spinbit::Mutex::new(0);

/// Half the threads take `SHORT`, half `LONG`.
const THREADS: usize = 8;
const RUN: Duration = Duration::from_millis(300);

/// Busy work for about `d`, holding whatever lock the caller holds.
fn work_for(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        black_box(());
    }
}

fn main() {
    stats::reset();
    let start = Instant::now();
    thread::scope(|s| {
        for t in 0..THREADS {
            s.spawn(move || {
                let mut i = 0u64;
                while start.elapsed() < RUN {
                    if t % 2 == 0 {
                        *SHORT.lock() += 1;
                    } else {
                        let mut g = LONG.lock();
                        *g += 1;
                        work_for(Duration::from_micros(50));
                        if i.is_multiple_of(4) {
                            spinbit::MutexGuard::unlock_fair(g);
                        }
                    }
                    i += 1;
                }
            });
        }
    });
    let elapsed = start.elapsed();
    let s = stats::snapshot();
    println!(
        "{THREADS} threads, {} + {} acquisitions in {elapsed:.2?}\n",
        *SHORT.lock(),
        *LONG.lock()
    );
    print(&s);
}

/// Prints every counter of `s`.
fn print(s: &Stats) {
    let mean = if s.slow_paths == 0 {
        Duration::ZERO
    } else {
        s.wait_total / u32::try_from(s.slow_paths).unwrap_or(u32::MAX)
    };
    println!("slow paths     {:>10}", s.slow_paths);
    println!("spins          {:>10}", s.spins);
    println!("spins won      {:>10}", s.spins_won);
    println!("sleeps         {:>10}", s.sleeps);
    println!("wakes          {:>10}", s.wakes);
    println!("hand-offs      {:>10}", s.hand_offs);
    println!("past spinner   {:>10}", s.wakes_past_spinner);
    println!("polled wakes   {:>10}", s.polled_wakes);
    println!("wakes skipped  {:>10}", s.wakes_skipped);
    println!("guesses missed {:>10}", s.guesses_missed);
    if s.wakes > 0 {
        let mean = s.wake_latency_total / u32::try_from(s.wakes).unwrap_or(u32::MAX);
        println!("wake-run mean  {:>10.2?}", mean);
    }
    println!("wake-run max   {:>10.2?}", s.wake_latency_max);
    println!("wake calls     {:>10}", s.wake_calls);
    if s.wake_calls > 0 {
        let mean = s.wake_call_total / u32::try_from(s.wake_calls).unwrap_or(u32::MAX);
        println!("wake call mean {:>10.2?}", mean);
    }
    println!("wake call max  {:>10.2?}", s.wake_call_max);
    println!("starved        {:>10}", s.starved);
    println!("nudges         {:>10}", s.nudges);
    println!("timeouts       {:>10}", s.timeouts);
    println!("wait total     {:>10.2?}", s.wait_total);
    println!("wait mean      {:>10.2?}", mean);
    println!("wait max       {:>10.2?}", s.wait_max);
    println!("\nlongest waits by call site:");
    for site in s.longest_waits.iter().flatten() {
        println!("  {:>10.2?}  {}", site.longest_wait, site.location);
    }
    if s.sites_missed > 0 {
        println!("  ({} waits missed the table while it was busy)", s.sites_missed);
    }
}
