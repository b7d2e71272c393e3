//! spinbit vs `parking_lot::Mutex` vs `std::sync::Mutex` under contention.
//!
//! ```text
//! cargo run --release --example shootout [-- --ms 300] [--threads 1,2,8,32]
//! ```
//!
//! Every thread loops lock / critical section / unlock on one shared mutex
//! until a stop flag is raised. Two critical sections are measured: a short
//! one (a few dependent arithmetic operations on the guarded data) and a long
//! one (about 1 µs of dependent arithmetic, calibrated once at startup). The
//! three locks run one after another in each cell, in an order that rotates
//! from cell to cell, so that slow drifts of the machine (clock frequency,
//! background load) do not always favour the same lock.
//!
//! Columns:
//!
//! * `Mops/s`: lock/unlock pairs completed per second, all threads together.
//! * `CPU ns/op`: user + system CPU time of the whole process per operation;
//!   it includes time burnt spinning and in the kernel, which `Mops/s` hides.
//! * `fairness`: the fewest operations any thread completed divided by the
//!   most; 1.00 means every thread got an equal share.

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

    #[inline(always)]
    fn run(self, data: &mut Shared) {
        data.ops += 1;
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
}

/// Runs `threads` threads hammering one `L` for `duration`.
fn run<L: BenchLock>(threads: usize, cs: Cs, duration: Duration) -> Sample {
    // The lock and its data share one cache line of their own; the stop flag,
    // read on every iteration, sits on another one.
    let lock = CachePadded::new(L::new(Shared::default()));
    let stop = CachePadded::new(AtomicBool::new(false));
    let start = Barrier::new(threads + 1);

    let (per_thread, wall, cpu) = thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    let mut ops = 0u64;
                    while !stop.load(Relaxed) {
                        lock.with(|data| cs.run(data));
                        ops += 1;
                    }
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

    let total: u64 = per_thread.iter().sum();
    let seen = CachePadded::into_inner(lock).into_inner().ops;
    assert_eq!(seen, total, "{}: lost updates", L::NAME);
    Sample { lock: L::NAME, per_thread, wall, cpu }
}

type Runner = fn(usize, Cs, Duration) -> Sample;

/// The contenders, in the order the table lists them.
const LOCKS: [Runner; 3] = [
    run::<spinbit::Mutex<Shared>>,
    run::<parking_lot::Mutex<Shared>>,
    run::<std::sync::Mutex<Shared>>,
];

struct Options {
    duration: Duration,
    threads: Vec<usize>,
}

fn usage() -> ! {
    eprintln!(
        "usage: shootout [--ms MILLISECONDS] [--threads N,N,...]\n\
         \n  --ms       run time per lock per table cell (default 300)\
         \n  --threads  thread counts to measure (default 1,2,8,32)"
    );
    process::exit(2)
}

fn parse_args() -> Options {
    let mut opts = Options { duration: Duration::from_millis(300), threads: vec![1, 2, 8, 32] };
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
            _ => usage(),
        }
    }
    opts
}

fn print_row(cs: Cs, threads: usize, sample: &Sample) {
    let total: u64 = sample.per_thread.iter().sum();
    let mops = total as f64 / sample.wall.as_secs_f64() / 1e6;
    let cpu_per_op = match sample.cpu {
        Some(cpu) if total > 0 => format!("{:.1}", cpu.as_nanos() as f64 / total as f64),
        _ => "-".to_owned(),
    };
    let min = sample.per_thread.iter().copied().min().unwrap_or(0);
    let max = sample.per_thread.iter().copied().max().unwrap_or(0);
    let fairness = if max == 0 { 0.0 } else { min as f64 / max as f64 };
    println!(
        "{:<6} {:>7}  {:<12} {:>8.2} {:>10} {:>9.2}",
        cs.name(),
        threads,
        sample.lock,
        mops,
        cpu_per_op,
        fairness
    );
}

fn main() {
    let opts = parse_args();
    let started = Instant::now();

    let long_steps = calibrate(Duration::from_micros(1));
    let cpus = thread::available_parallelism().map_or(0, |n| n.get());
    println!("spinbit shootout: {cpus} CPUs, {} ms per lock per cell", opts.duration.as_millis());
    println!(
        "critical sections: short = {SHORT_STEPS} steps ({:.0?}), long = {long_steps} steps ({:.2?})",
        time_cs(SHORT_STEPS),
        time_cs(long_steps)
    );
    println!();
    println!(
        "{:<6} {:>7}  {:<12} {:>8} {:>10} {:>9}",
        "cs", "threads", "lock", "Mops/s", "CPU ns/op", "fairness"
    );

    let mut cell = 0;
    for cs in [Cs::Short, Cs::Long { steps: long_steps }] {
        println!("{}", "-".repeat(57));
        for &threads in &opts.threads {
            // Interleave the locks within the cell, starting with a different
            // one each time.
            let mut samples: Vec<Option<Sample>> = (0..LOCKS.len()).map(|_| None).collect();
            for i in 0..LOCKS.len() {
                let which = (cell + i) % LOCKS.len();
                samples[which] = Some(LOCKS[which](threads, cs, opts.duration));
            }
            cell += 1;
            for sample in samples.iter().flatten() {
                print_row(cs, threads, sample);
            }
        }
    }

    println!();
    println!("total run time: {:.1} s", started.elapsed().as_secs_f64());
}
