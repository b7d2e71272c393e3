//! What spinbit's mutex does under one fixed load, window by window: the
//! throughput, CPU time per operation, fairness and longest `lock()`, and
//! what the waiting policy decided (the `spinbit::stats` counters).
//!
//! ```text
//! cargo run --release -p spinbit-bench --features stats --bin contention_profile -- \
//!     [THREADS [CS_NS [THINK_NS]]] [--fair] [--untimed] [--gaps] [--sched] [--nospin|--allspin]
//! cargo run --release -p spinbit-bench --features stats --bin contention_profile -- 64 10000
//! ```
//!
//! `THREADS` threads (default 64) loop: `lock`, `CS_NS` nanoseconds of busy
//! work inside (default 100), unlock (`unlock_fair` with `--fair`),
//! `THINK_NS` nanoseconds of busy work outside (default 0); for three
//! windows of 500 ms. Each window prints:
//!
//! * the throughput; the process's CPU time (user + system) per
//!   operation; the fairness (fewest / most operations of any thread); the
//!   longest single `lock()` and how many took over 1.5 ms;
//! * the policy's counters over the window: slow paths, spin episodes and
//!   those that took the lock, sleeps and the wakes that found the sleeper
//!   still polling, wakes (those made past the spinner; those skipped for
//!   it), hand-offs, waiters that marked themselves starving, nudges,
//!   unlock guesses that missed, the mean and longest wake-to-run latency,
//!   the wakes' system calls and the mean and longest time the waker spent
//!   in one, the longest slow path.
//!
//! The counters are process-wide and exact once every lock call has
//! returned, which each window waits for. Timing every `lock()` costs two
//! clock reads per acquisition, which slows short critical sections
//! several times over (2 threads, no critical section, 2-core AMD EPYC VM:
//! 9.0-9.2 Mops/s timed, 71-81 untimed, three windows each, at fdca433):
//!
//! * `--untimed` leaves the timing out (and an empty critical section's
//!   clock read), so that the counters are those of the benchmark's
//!   regime; the longest `lock()` is then not reported.
//! * `--gaps` (timed) splits each window into the lock's held time (the sum
//!   of the critical sections' wall time, and how much of it was in
//!   sections that ran over twice their length plus 2 µs: a holder that
//!   lost its CPU) and its free time between one holder's unlock and the
//!   next holder's return from `lock()`, bucketed by length and by whether
//!   the next holder is the thread that unlocked or another one, and how
//!   much of the free time before the same thread took the lock again it
//!   spent in its `unlock` call (a wake's system call after the release;
//!   in starvation mode also the yield after a nudge, or the wait for a
//!   stack owner). A lock
//!   held all the time runs one critical section per `CS_NS`; this shows
//!   where the rest went.
//! * `--sched` (timed, Linux) prints the kernel's thread id and the
//!   `CLOCK_MONOTONIC` interval of every `lock()` over 10 µs, to be lined
//!   up with a scheduler trace taken on the same clock
//!   (`benches/sched_waits.py`).
//! * `--nospin` and `--allspin` (feature `bench-ablations` too) run the
//!   ablations instead (`spinbit::ablation`: nobody spins; every waiter
//!   spins), whose slow paths the same counters count.
//!
//! Older figures in docs/benchmarks.md name this tool's predecessor,
//! `hand_off_wait_profile`, an `#[ignore]`d test of `src/tests.rs` that
//! used the test build (which backs sleepers up at 2 sleepers, not at the
//! machine's threshold, unless `SPINBIT_DIAG_MACHINE_BACKLOG=1`) and
//! counted the test build's own events; the docs say where it is in git.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread;
use std::time::{Duration, Instant};

#[path = "common/diag.rs"]
mod diag;
#[path = "common/rusage.rs"]
mod rusage;
use diag::busy;
use spinbit::lock_api::{Mutex, MutexGuard, RawMutex, RawMutexFair};

const USAGE: &str = "usage: contention_profile [THREADS [CS_NS [THINK_NS]]] \
                     [--fair] [--untimed] [--gaps] [--sched] [--nospin|--allspin]";
const WINDOW: Duration = Duration::from_millis(500);
/// The `lock()` calls over this long are counted.
const LONG_CALL: Duration = Duration::from_micros(1_500);
/// Upper bounds (exclusive) of the free-time buckets, in ns, and the
/// buckets' names (the last one open-ended).
const GAP_BUCKETS_NS: [u64; 3] = [500, 2_000, 10_000];
const GAP_BUCKET_NAMES: [&str; GAP_BUCKETS_NS.len() + 1] = ["<500ns", "<2us", "<10us", ">=10us"];

struct Opts {
    threads: usize,
    cs: u64,
    think: u64,
    fair: bool,
    timed: bool,
    gaps: bool,
    sched: bool,
}

/// The mutex's data: the count every holder increments (checked against
/// the threads' own counts), and for `--gaps` who unlocked last and when.
#[derive(Default)]
struct Data {
    count: u64,
    work: u64,
    /// The last holder's index and its unlock, in ns from the window's start.
    last_release: Option<(usize, u64)>,
}

/// One thread's window.
#[derive(Default)]
struct Run {
    ops: u64,
    longest: Duration,
    long_calls: u64,
    /// `--gaps`: the sum of the critical sections' wall time, and of those
    /// that ran long, with their count.
    held_ns: u64,
    long_ns: u64,
    long: u64,
    /// `--gaps`: the free time before each of this thread's acquisitions:
    /// `[the last holder was another thread, was this one]` × bucket, count
    /// and nanoseconds.
    gaps: [[(u64, u64); GAP_BUCKETS_NS.len() + 1]; 2],
    /// `--gaps`: of the free time before this thread's acquisitions that
    /// followed its own unlock, the part it spent in that `unlock` call
    /// (an unlock that wakes a sleeper makes a system call after the
    /// release; in starvation mode one may yield after a nudge, or wait
    /// for a stack owner), in ns; and the duration of its latest unlock
    /// call.
    same_in_unlock_ns: u64,
    last_unlock_ns: u64,
    /// `--sched`: this thread's kernel id, and its `lock()` calls over
    /// 10 µs on `CLOCK_MONOTONIC`, printed after the window's measurements.
    tid: i64,
    slow_calls: Vec<(u64, u64)>,
}

fn main() {
    let (flags, nums): (Vec<String>, Vec<String>) =
        std::env::args().skip(1).partition(|a| a.starts_with("--"));
    let fail = |why: String| -> ! {
        eprintln!("contention_profile: {why}\n{USAGE}");
        std::process::exit(2)
    };
    let known = ["--fair", "--untimed", "--gaps", "--sched", "--nospin", "--allspin"];
    if let Some(f) = flags.iter().find(|f| !known.contains(&f.as_str())) {
        fail(format!("unknown option {f}"));
    }
    if nums.len() > 3 {
        fail("at most 3 numbers".into());
    }
    let has = |f: &str| flags.iter().any(|x| x == f);
    let timed = !has("--untimed");
    if !timed && (has("--gaps") || has("--sched")) {
        fail("--gaps and --sched time every lock(): not with --untimed".into());
    }
    let o = Opts {
        threads: diag::arg(&nums, 0, 64, USAGE) as usize,
        cs: diag::arg(&nums, 1, 100, USAGE),
        think: diag::arg(&nums, 2, 0, USAGE),
        fair: has("--fair"),
        timed,
        gaps: has("--gaps"),
        sched: has("--sched") && cfg!(target_os = "linux"),
    };
    if o.threads == 0 {
        fail("THREADS must be at least 1".into());
    }
    let lock = match (has("--nospin"), has("--allspin")) {
        (false, false) => "spinbit",
        (true, false) => "spinbit-nospin",
        (false, true) => "spinbit-allspin",
        (true, true) => fail("--nospin or --allspin, not both".into()),
    };
    if lock != "spinbit" && !cfg!(feature = "bench-ablations") {
        fail(format!("{lock} needs --features stats,bench-ablations"));
    }
    for _ in 0..3 {
        match lock {
            #[cfg(feature = "bench-ablations")]
            "spinbit-nospin" => window::<spinbit::ablation::NoSpinRawMutex>(&o, lock),
            #[cfg(feature = "bench-ablations")]
            "spinbit-allspin" => window::<spinbit::ablation::AllSpinRawMutex>(&o, lock),
            _ => window::<spinbit::RawMutex>(&o, lock),
        }
    }
}

/// The raw mutexes a window can run: spinbit's and its ablations'.
trait Raw: RawMutex + RawMutexFair + Sync + 'static {}
impl<R: RawMutex + RawMutexFair + Sync + 'static> Raw for R {}

fn window<R: Raw>(o: &Opts, lock: &str) {
    let m = Mutex::<R, Data>::new(Data::default());
    let stop = AtomicBool::new(false);
    spinbit::stats::reset();
    let cpu_before = rusage::cpu_ns_and_ctxsw().0;
    let start = Instant::now();
    let runs: Vec<Run> = thread::scope(|s| {
        let (m, stop) = (&m, &stop);
        let threads: Vec<_> =
            (0..o.threads).map(|id| s.spawn(move || run::<R>(o, id, m, stop, start))).collect();
        thread::sleep(WINDOW);
        stop.store(true, Relaxed);
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let elapsed = start.elapsed();
    let cpu_ns = rusage::cpu_ns_and_ctxsw().0 - cpu_before;
    let st = spinbit::stats::snapshot();
    let ops: u64 = runs.iter().map(|r| r.ops).sum();
    assert_eq!(m.lock().count, ops, "lost updates: mutual exclusion failed");

    let most = runs.iter().map(|r| r.ops).max().unwrap_or(0).max(1);
    let fairness = runs.iter().map(|r| r.ops).min().unwrap_or(0) as f64 / most as f64;
    let longest = if o.timed {
        let longest = runs.iter().map(|r| r.longest).max().unwrap_or_default();
        let long: u64 = runs.iter().map(|r| r.long_calls).sum();
        format!("{longest:?} ({long} over {LONG_CALL:?})")
    } else {
        "not timed".to_owned()
    };
    println!(
        "{lock} t{}/cs{}/think{}{}: {:.3} Mops/s, {ops} ops in {elapsed:?}, CPU per op {:?}, \
         fairness {fairness:.2}, longest lock() {longest}",
        o.threads,
        o.cs,
        o.think,
        if o.fair { "/fair" } else { "" },
        ops as f64 / elapsed.as_secs_f64() / 1e6,
        Duration::from_nanos((cpu_ns / ops.max(1) as f64) as u64),
    );
    let mean_latency = st.wake_latency_total / u32::try_from(st.wakes.max(1)).unwrap_or(u32::MAX);
    let mean_call = st.wake_call_total / u32::try_from(st.wake_calls.max(1)).unwrap_or(u32::MAX);
    println!(
        "  policy: {} slow paths, {} spins ({} won), {} sleeps ({} woken while polling), \
         {} wakes ({} past the spinner; {} skipped for it), {} hand-offs, {} starved, \
         {} nudges, {} unlock guesses missed; wake-to-run mean {mean_latency:?}, longest {:?}; \
         {} wake system calls, mean {mean_call:?}, longest {:?}; longest slow path {:?}",
        st.slow_paths,
        st.spins,
        st.spins_won,
        st.sleeps,
        st.polled_wakes,
        st.wakes,
        st.wakes_past_spinner,
        st.wakes_skipped,
        st.hand_offs,
        st.starved,
        st.nudges,
        st.guesses_missed,
        st.wake_latency_max,
        st.wake_calls,
        st.wake_call_max,
        st.wait_max,
    );
    if o.gaps {
        println!("{}", gaps_summary(&runs, elapsed, ops, o.cs));
    }
    for r in &runs {
        for (from, to) in &r.slow_calls {
            eprintln!("lock() over 10 us: tid {} from {from} to {to} ns", r.tid);
        }
    }
}

/// One thread's loop, until `stop`; `id` names it in `Data::last_release`.
fn run<R: Raw>(o: &Opts, id: usize, m: &Mutex<R, Data>, stop: &AtomicBool, start: Instant) -> Run {
    let mut r = Run { tid: if o.sched { thread_id() } else { 0 }, ..Run::default() };
    let since_start = || start.elapsed().as_nanos() as u64;
    while !stop.load(Relaxed) {
        let asked = o.timed.then(Instant::now);
        let asked_mono = if o.sched { monotonic_ns() } else { 0 };
        let mut g = m.lock();
        if let Some(asked) = asked {
            let took = asked.elapsed();
            if o.sched {
                let done_mono = monotonic_ns();
                if done_mono - asked_mono > 10_000 {
                    r.slow_calls.push((asked_mono, done_mono));
                }
            }
            r.long_calls += u64::from(took > LONG_CALL);
            r.longest = r.longest.max(took);
        }
        let held_from = o.gaps.then(|| {
            let now = since_start();
            if let Some((last, at)) = g.last_release {
                let gap = now.saturating_sub(at);
                let b = GAP_BUCKETS_NS.iter().take_while(|&&b| gap >= b).count();
                let slot = &mut r.gaps[usize::from(last == id)][b];
                slot.0 += 1;
                slot.1 += gap;
                if last == id {
                    r.same_in_unlock_ns += r.last_unlock_ns.min(gap);
                }
            }
            now
        });
        // A plain read-modify-write, which loses updates without mutual
        // exclusion (the window's end checks the count).
        let v = black_box(g.count);
        if o.timed || o.cs > 0 {
            g.work = g.work.wrapping_add(busy(o.cs));
        }
        g.count = v + 1;
        if let Some(from) = held_from {
            let now = since_start();
            let took = now.saturating_sub(from);
            r.held_ns += took;
            if took > 2 * o.cs + 2_000 {
                r.long += 1;
                r.long_ns += took;
            }
            g.last_release = Some((id, now));
        }
        let unlock_from = o.gaps.then(since_start);
        if o.fair {
            MutexGuard::unlock_fair(g);
        } else {
            drop(g);
        }
        if let Some(from) = unlock_from {
            r.last_unlock_ns = since_start().saturating_sub(from);
        }
        r.ops += 1;
        if o.think > 0 {
            black_box(busy(o.think));
        }
    }
    r
}

/// `--gaps`: where the lock's time went in a window.
fn gaps_summary(runs: &[Run], window: Duration, ops: u64, cs: u64) -> String {
    let w = window.as_nanos() as f64;
    let pct = |ns: u64| format!("{:.1} %", 100.0 * ns as f64 / w);
    let ms = |ns: u64| format!("{:.1} ms", ns as f64 / 1e6);
    let sum = |f: fn(&Run) -> u64| runs.iter().map(f).sum::<u64>();
    let (held, long_ns, long) = (sum(|r| r.held_ns), sum(|r| r.long_ns), sum(|r| r.long));
    let mut out = format!(
        "  lock time: held {} ({}; {ops} ops × {cs} ns = {}), of which {} in {long} sections \
         that ran long; free between holders:",
        ms(held),
        pct(held),
        pct(ops * cs),
        ms(long_ns),
    );
    for (same, who) in ["to another thread", "to the same thread"].iter().enumerate() {
        let bucket = |b: usize| {
            runs.iter().fold((0, 0), |(n, t), r| (n + r.gaps[same][b].0, t + r.gaps[same][b].1))
        };
        let free: u64 = (0..GAP_BUCKET_NAMES.len()).map(|b| bucket(b).1).sum();
        out += &format!(" {who} {} ({}:", ms(free), pct(free));
        for (b, name) in GAP_BUCKET_NAMES.iter().enumerate() {
            let (n, t) = bucket(b);
            out += &format!(" {name} {n}×{}", ms(t));
        }
        out += ");";
    }
    out += &format!(" of the latter, in the unlock call {}", ms(sum(|r| r.same_in_unlock_ns)));
    out
}

/// `CLOCK_MONOTONIC` in ns (the clock `perf record -k CLOCK_MONOTONIC`
/// stamps its samples with); 0 off Linux, where `--sched` is off.
fn monotonic_ns() -> u64 {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid, writable timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }
    #[cfg(not(target_os = "linux"))]
    0
}

/// The kernel's id of the calling thread (Linux; 0 elsewhere).
fn thread_id() -> i64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no preconditions.
        i64::from(unsafe { libc::gettid() })
    }
    #[cfg(not(target_os = "linux"))]
    0
}
