//! spinbit vs `parking_lot::Mutex` vs `std::sync::Mutex` under contention.
//!
//! ```text
//! cargo run --release --example shootout [-- --ms 300] [--threads 1,2,8,32]
//!     [--think NS] [--reps N] [--cs short,long]
//! ```
//!
//! Every thread loops lock / critical section / unlock / think on one shared
//! mutex until a stop flag is raised. Two critical sections are measured: a
//! short one (a few dependent arithmetic operations on the guarded data) and
//! a long one (about 1 µs of dependent arithmetic, calibrated once at
//! startup). Think time (`--think`, default 0) is the same arithmetic on a
//! thread-local value, outside the lock. The three locks run one after
//! another in each cell, in an order that rotates from cell to cell and
//! from repetition to repetition, so that slow drifts of the machine (clock
//! frequency, background load) do not always favour the same lock. With
//! `--reps N` every cell runs N times per lock and the table shows, per
//! lock, the run with the median throughput (the upper of the two middle
//! runs for an even N) and the range of all N.
//!
//! Columns:
//!
//! * `Mops/s`: lock/unlock pairs completed per second, all threads together.
//! * `range`: with `--reps` above 1, the lowest and highest run's `Mops/s`.
//!   The other columns are those of the run with the median throughput.
//! * `CPU ns/op`: user + system CPU time of the whole process per operation;
//!   it includes time burnt spinning and in the kernel, which `Mops/s` hides.
//! * `fairness`: the fewest operations any thread completed divided by the
//!   most; 1.00 means every thread got an equal share.
//! * `same owner`: the share of acquisitions that went to the thread that
//!   held the lock just before, i.e. that did not move the lock (and its
//!   cache line) to another thread. A lock that lets one thread run its
//!   acquisitions back to back while the others wait scores high; one that
//!   passes the lock to another thread at every release scores near 0. At
//!   1 thread it is 1.00 by construction.

use std::hint::black_box;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};
use std::{env, process, thread};

use crossbeam_utils::CachePadded;

/// The data the mutex guards.
#[derive(Default)]
struct Shared {
    /// Number of critical sections executed; checked against the threads'
    /// own counts after each run, so a broken lock shows up as lost updates.
    ops: u64,
    /// The value the arithmetic works on.
    x: u64,
    /// The thread that held the lock last (its index + 1; 0: none yet).
    last: usize,
    /// Acquisitions by the thread that held the lock just before.
    same: u64,
}

/// The three contenders, so that they all run through the same loop.
trait BenchLock: Sync + Sized {
    const NAME: &'static str;
    fn new(data: Shared) -> Self;
    /// Runs `f` with the lock held.
    fn with(&self, f: impl FnOnce(&mut Shared));
    fn into_inner(self) -> Shared;
}

impl BenchLock for spinbit::Mutex<Shared> {
    const NAME: &'static str = "spinbit";
    fn new(data: Shared) -> Self {
        spinbit::Mutex::new(data)
    }
    #[inline]
    fn with(&self, f: impl FnOnce(&mut Shared)) {
        f(&mut self.lock());
    }
    fn into_inner(self) -> Shared {
        self.into_inner()
    }
}

impl BenchLock for parking_lot::Mutex<Shared> {
    const NAME: &'static str = "parking_lot";
    fn new(data: Shared) -> Self {
        parking_lot::Mutex::new(data)
    }
    #[inline]
    fn with(&self, f: impl FnOnce(&mut Shared)) {
        f(&mut self.lock());
    }
    fn into_inner(self) -> Shared {
        self.into_inner()
    }
}

impl BenchLock for std::sync::Mutex<Shared> {
    const NAME: &'static str = "std";
    fn new(data: Shared) -> Self {
        std::sync::Mutex::new(data)
    }
    #[inline]
    fn with(&self, f: impl FnOnce(&mut Shared)) {
        f(&mut self.lock().unwrap());
    }
    fn into_inner(self) -> Shared {
        self.into_inner().unwrap()
    }
}

/// One step of dependent arithmetic (multiply, add, rotate): each step needs
/// the previous result, so the CPU cannot overlap steps and the compiler
/// cannot fold a loop of them.
#[inline(always)]
fn step(x: u64) -> u64 {
    x.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(0x6A09_E667).rotate_left(23)
}

#[inline(always)]
fn work(mut x: u64, steps: u64) -> u64 {
    for _ in 0..steps {
        x = step(x);
    }
    x
}

/// Steps in the short critical section.
const SHORT_STEPS: u64 = 2;

#[derive(Clone, Copy)]
enum Cs {
    Short,
    Long { steps: u64 },
}

impl Cs {
    fn name(self) -> &'static str {
        match self {
            Cs::Short => "short",
            Cs::Long { .. } => "long",
        }
    }

    /// One critical section, by thread `me` (an index + 1).
    #[inline(always)]
    fn run(self, data: &mut Shared, me: usize) {
        data.ops += 1;
        data.same += u64::from(data.last == me);
        data.last = me;
        data.x = match self {
            Cs::Short => work(data.x, SHORT_STEPS),
            Cs::Long { steps } => work(data.x, steps),
        };
    }
}

/// The number of steps that take `target` on this core, measured without
/// any lock; the fastest of a few tries, to skip interruptions.
fn calibrate(target: Duration) -> u64 {
    const STEPS: u64 = 1_000_000;
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        black_box(work(black_box(1), black_box(STEPS)));
        best = best.min(t.elapsed().as_secs_f64() / STEPS as f64);
    }
    ((target.as_secs_f64() / best).round() as u64).max(1)
}

/// Mean time of one critical section's arithmetic, without any lock.
fn time_cs(steps: u64) -> Duration {
    const REPS: u32 = 2_000;
    let t = Instant::now();
    let mut x = 1;
    for _ in 0..REPS {
        x = work(black_box(x), black_box(steps));
    }
    black_box(x);
    t.elapsed() / REPS
}

/// User + system CPU time consumed so far by all threads of the process.
#[cfg(unix)]
fn cpu_time() -> Option<Duration> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: `usage.as_mut_ptr()` points to writable memory of the right
    // type and size for getrusage to fill in, and RUSAGE_SELF is a valid
    // `who`; nothing else aliases `usage`.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: getrusage returned 0, so it has written the whole struct.
    let usage = unsafe { usage.assume_init() };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    Some(tv(usage.ru_utime) + tv(usage.ru_stime))
}

#[cfg(not(unix))]
fn cpu_time() -> Option<Duration> {
    None
}

/// The outcome of one lock in one cell.
struct Sample {
    lock: &'static str,
    per_thread: Vec<u64>,
    wall: Duration,
    cpu: Option<Duration>,
    /// Acquisitions by the thread that held the lock just before.
    same: u64,
}

impl Sample {
    fn total(&self) -> u64 {
        self.per_thread.iter().sum()
    }

    fn mops(&self) -> f64 {
        self.total() as f64 / self.wall.as_secs_f64() / 1e6
    }
}

/// Runs `threads` threads hammering one `L` for `duration`, each thinking
/// for `think` steps after every unlock.
fn run<L: BenchLock>(threads: usize, cs: Cs, think: u64, duration: Duration) -> Sample {
    // The lock and its data share one cache line of their own; the stop flag,
    // read on every iteration, sits on another one.
    let lock = CachePadded::new(L::new(Shared::default()));
    let stop = CachePadded::new(AtomicBool::new(false));
    let start = Barrier::new(threads + 1);

    let (per_thread, wall, cpu) = thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|i| {
                let (lock, stop, start) = (&lock, &stop, &start);
                s.spawn(move || {
                    start.wait();
                    let mut ops = 0u64;
                    let mut x = i as u64;
                    while !stop.load(Relaxed) {
                        lock.with(|data| cs.run(data, i + 1));
                        x = work(x, think);
                        ops += 1;
                    }
                    black_box(x);
                    ops
                })
            })
            .collect();

        start.wait();
        let cpu0 = cpu_time();
        let t0 = Instant::now();
        thread::sleep(duration);
        stop.store(true, Relaxed);
        let wall = t0.elapsed();
        let per_thread: Vec<u64> =
            workers.into_iter().map(|w| w.join().expect("worker panicked")).collect();
        let cpu = cpu_time().zip(cpu0).map(|(t1, t0)| t1.saturating_sub(t0));
        (per_thread, wall, cpu)
    });

    let shared = CachePadded::into_inner(lock).into_inner();
    let sample = Sample { lock: L::NAME, per_thread, wall, cpu, same: shared.same };
    assert_eq!(shared.ops, sample.total(), "{}: lost updates", L::NAME);
    sample
}

type Runner = fn(usize, Cs, u64, Duration) -> Sample;

/// The contenders, in the order the table lists them.
const LOCKS: [Runner; 3] = [
    run::<spinbit::Mutex<Shared>>,
    run::<parking_lot::Mutex<Shared>>,
    run::<std::sync::Mutex<Shared>>,
];

struct Options {
    duration: Duration,
    threads: Vec<usize>,
    think: Duration,
    reps: usize,
    short: bool,
    long: bool,
}

fn usage() -> ! {
    eprintln!(
        "usage: shootout [--ms MILLISECONDS] [--threads N,N,...] [--think NS] [--reps N] \
         [--cs short,long]\n\
         \n  --ms       run time per lock per table cell (default 300)\
         \n  --threads  thread counts to measure (default 1,2,8,32)\
         \n  --think    think time after every unlock, in ns (default 0)\
         \n  --reps     runs per lock per cell; the table shows the median (default 1)\
         \n  --cs       the critical sections to measure (default short,long)"
    );
    process::exit(2)
}

fn parse_args() -> Options {
    let mut opts = Options {
        duration: Duration::from_millis(300),
        threads: vec![1, 2, 8, 32],
        think: Duration::ZERO,
        reps: 1,
        short: true,
        long: true,
    };
    let mut args = env::args().skip(1);
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
            None => (arg, None),
        };
        let mut value = || inline.clone().or_else(|| args.next()).unwrap_or_else(|| usage());
        match flag.as_str() {
            "--ms" => match value().parse::<u64>() {
                Ok(ms) if ms > 0 => opts.duration = Duration::from_millis(ms),
                _ => usage(),
            },
            "--threads" => {
                let parsed: Result<Vec<usize>, _> =
                    value().split(',').map(|n| n.trim().parse()).collect();
                match parsed {
                    Ok(t) if !t.is_empty() && t.iter().all(|&n| n > 0) => opts.threads = t,
                    _ => usage(),
                }
            }
            "--think" => match value().parse::<u64>() {
                Ok(ns) => opts.think = Duration::from_nanos(ns),
                _ => usage(),
            },
            "--reps" => match value().parse::<usize>() {
                Ok(n) if n > 0 => opts.reps = n,
                _ => usage(),
            },
            "--cs" => {
                let v = value();
                let names: Vec<&str> = v.split(',').map(str::trim).collect();
                if names.iter().any(|n| !matches!(*n, "short" | "long")) {
                    usage();
                }
                opts.short = names.contains(&"short");
                opts.long = names.contains(&"long");
            }
            _ => usage(),
        }
    }
    opts
}

/// One row: the run of `samples` (one lock's runs of one cell) with the
/// median throughput, and the range of all of them.
fn print_row(cs: Cs, threads: usize, samples: &mut [Sample]) {
    samples.sort_by(|a, b| a.mops().total_cmp(&b.mops()));
    let range = match samples {
        [_] => String::new(),
        [lo, .., hi] => format!("{:.2}-{:.2}", lo.mops(), hi.mops()),
        [] => return,
    };
    let sample = &samples[samples.len() / 2];
    let total = sample.total();
    let mops = sample.mops();
    let cpu_per_op = match sample.cpu {
        Some(cpu) if total > 0 => format!("{:.1}", cpu.as_nanos() as f64 / total as f64),
        _ => "-".to_owned(),
    };
    let min = sample.per_thread.iter().copied().min().unwrap_or(0);
    let max = sample.per_thread.iter().copied().max().unwrap_or(0);
    let fairness = if max == 0 { 0.0 } else { min as f64 / max as f64 };
    let same = if total == 0 { 0.0 } else { sample.same as f64 / total as f64 };
    println!(
        "{:<6} {:>7}  {:<12} {:>8.2} {:>11} {:>10} {:>9.2} {:>10.2}",
        cs.name(),
        threads,
        sample.lock,
        mops,
        range,
        cpu_per_op,
        fairness,
        same
    );
}

fn main() {
    let opts = parse_args();
    let started = Instant::now();

    let long_steps = calibrate(Duration::from_micros(1));
    let think_steps = if opts.think.is_zero() { 0 } else { calibrate(opts.think) };
    let cpus = thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "spinbit shootout: {cpus} CPUs, {} ms per lock per cell, {} run(s) each",
        opts.duration.as_millis(),
        opts.reps
    );
    println!(
        "critical sections: short = {SHORT_STEPS} steps ({:.0?}), long = {long_steps} steps ({:.2?})",
        time_cs(SHORT_STEPS),
        time_cs(long_steps)
    );
    println!("think time: {think_steps} steps ({:.0?})", time_cs(think_steps));
    println!();
    println!(
        "{:<6} {:>7}  {:<12} {:>8} {:>11} {:>10} {:>9} {:>10}",
        "cs", "threads", "lock", "Mops/s", "range", "CPU ns/op", "fairness", "same owner"
    );

    let mut cell = 0;
    let cs_list = [(opts.short, Cs::Short), (opts.long, Cs::Long { steps: long_steps })];
    for cs in cs_list.into_iter().filter_map(|(on, cs)| on.then_some(cs)) {
        println!("{}", "-".repeat(81));
        for &threads in &opts.threads {
            // Interleave the locks within the cell, starting with a different
            // one each time.
            let mut samples: Vec<Vec<Sample>> = (0..LOCKS.len()).map(|_| Vec::new()).collect();
            for _ in 0..opts.reps {
                for i in 0..LOCKS.len() {
                    let which = (cell + i) % LOCKS.len();
                    samples[which].push(LOCKS[which](threads, cs, think_steps, opts.duration));
                }
                cell += 1;
            }
            for runs in &mut samples {
                print_row(cs, threads, runs);
            }
        }
    }

    println!();
    println!("total run time: {:.1} s", started.elapsed().as_secs_f64());
}
