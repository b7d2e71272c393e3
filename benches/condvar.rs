//! spinbit's condition variable against its peers: every condvar, every
//! cell, in one run.
//!
//! Run it from the repository's root (a benchmark of the crate
//! `spinbit-bench`, `benches/Cargo.toml`, beside `mutex.rs`) with
//!
//! ```text
//! SPINBIT_BENCH_PROFILE=quick cargo bench -p spinbit-bench --bench condvar   # smoke: 12 s on 2 cores, after the build
//! cargo bench -p spinbit-bench --bench condvar                               # full profile: about 80 s (estimated)
//! cargo bench -p spinbit-bench --bench condvar -- condvar-queue/p4c4         # one cell (a substring of group/condvar)
//! ```
//!
//! # Condition variables
//!
//! Each with its own mutex: `spinbit::Condvar` with `spinbit::Mutex`,
//! `parking_lot::Condvar` with `parking_lot::Mutex` (0.13) and
//! `std::sync::Condvar` with `std::sync::Mutex`. They all implement
//! [`CvFamily`], so one generic harness drives all three. spinbit's and
//! `parking_lot`'s `notify_all` move the waiters onto the mutex's queue
//! (requeue) while the mutex is held; `std`'s (futex-based on Linux) wakes
//! them all, and they then contend for the mutex.
//!
//! # Cells
//!
//! Every cell notifies *while holding the mutex* (the pattern of `std`'s
//! and `parking_lot`'s documentation, and the one where a requeueing
//! `notify_all` differs from a plain wake). Cell names are
//! `<workload>/<parameters>`, and criterion's ids `<cell>/<condvar>`.
//!
//! * `condvar-queue/p{P}c{P}`: `P` producers and `P` consumers (1+1, 2+2,
//!   4+4, 16+16) pass `u64`s through a bounded queue, a
//!   `Mutex<VecDeque<u64>>` of capacity [`QUEUE_CAP`] with two condition
//!   variables, `not_empty` and `not_full`. A producer locks, waits on
//!   `not_full` while the queue is full, pushes, calls
//!   `not_empty.notify_one()` and unlocks; a consumer likewise pops, waiting
//!   on `not_empty` and notifying `not_full`. Every push and every pop
//!   notifies, waiters or not. One operation is one item through the queue
//!   (counted at the consumers).
//! * `condvar-broadcast/w{W}`: `W` waiters (8, 32, 64) wait on the condition
//!   variable for a generation counter to change. One operation is one
//!   broadcast: the notifier locks, bumps the generation, reads the clock
//!   and calls `notify_all` with the mutex held, then waits on a second
//!   condition variable until every waiter has run its critical section
//!   (increment a shared counter and a `done` count, under the mutex). The
//!   last waiter reads the clock in its critical section. The time of a
//!   broadcast is from the notifier's clock reading, just before
//!   `notify_all`, to the last waiter's, and that (not the wall-clock time
//!   of a round, which also has the notifier's own wake) is what criterion
//!   gets. A waiter goes from its critical section straight back into
//!   `wait`, never releasing the mutex in between, so when the notifier
//!   holds the mutex again all `W` are waiting: every broadcast finds every
//!   waiter asleep on the condition variable. After each window the harness
//!   checks that the counter is `W` times the broadcasts (plus the waiters'
//!   first pass) and panics otherwise.
//! * `condvar-pingpong`: two threads and one condition variable; a turn
//!   flag under the mutex says whose turn it is. Each thread waits while it
//!   is not its turn, passes the turn to the other, calls `notify_one` and
//!   waits again (it holds the mutex throughout but for its waits). One
//!   operation is one round trip (both turns).
//!
//! # Fixed-duration windows
//!
//! As in `mutex.rs`: every measurement is a *window*. Spawn the threads,
//! let each announce it is ready, take `getrusage` and the time, raise a
//! `go` flag, sleep for the window, set a `stop` flag (under the mutex, then
//! `notify_all` every condition variable), join the threads, take the time
//! and `getrusage` again. In the broadcast cells the measuring thread is
//! the notifier: it runs broadcasts until the window's time is up.
//!
//! # Companion metrics (the JSON lines)
//!
//! For every cell, before criterion measures it, the harness runs `reps`
//! windows per condvar, interleaving the condvars and rotating their order
//! every repetition, and keeps the median of each metric, each taken
//! separately:
//!
//! * throughput: operations / window seconds (items, broadcasts or round
//!   trips per second); also the worst window's and every window's;
//! * CPU per operation: user+sys CPU of the whole process (`getrusage
//!   RUSAGE_SELF` delta) / operations. The process's other threads (the
//!   coordinator sleeps through the window; a watchdog wakes every 5 s) add
//!   next to nothing;
//! * context switches per operation: `ru_nvcsw + ru_nivcsw` delta /
//!   operations (the notifier's own switches included in the broadcast
//!   cells);
//! * `others_cpu`: how many CPUs' worth of time other processes used
//!   during the window (`/proc/stat`): on a shared machine, the noise;
//! * broadcast cells: the mean, median and longest broadcast time in ns
//!   (`lat_mean_ns`, `lat_p50_ns`, `lat_max_ns`; `null` elsewhere).
//!
//! Each cell's console line prints them. They go to
//! `target/spinbit-bench/condvar-<target-triple>.jsonl` (or the file named
//! by `SPINBIT_BENCH_CONDVAR_OUT`), rewritten by each benchmarking run: a
//! first line with `"bench":"meta"` (profile, command, the machine: CPU
//! model, x86 family/model numbers, `cores`, kernel, commit measured,
//! `-dirty` when tracked files differ from it), then one object per cell
//! per condvar. `cargo test -p spinbit-bench --benches`, `--list` and
//! `--profile-time` runs skip the companion pass and leave the file alone.
//!
//! # How a window fits criterion
//!
//! Each criterion sample is one `iter_custom` call for `N` operations: one
//! window lasting a criterion sample's length (`measurement time / sample
//! size`), or longer when `N` operations at the rate the companion pass
//! measured would take longer, and in any case until `N` operations are
//! done. It returns the window's time per operation times `N` (for the
//! broadcast cells, the mean broadcast time times `N`). So a sample
//! measures many operations, and criterion's throughput is items, round
//! trips or (inverse broadcast times) broadcasts per second
//! (`Throughput::Elements(1)`, flat sampling).
//!
//! # Profiles
//!
//! Both run every cell (8 cells, 24 (cell, condvar) pairs).
//! `SPINBIT_BENCH_PROFILE=quick`: 3 reps of 50 ms windows, criterion 10
//! samples, 30 ms warm-up, 150 ms measurement; the harness estimates 11 s on
//! 2 CPUs, and a run took 12 s. Full (the default): 5 reps of 300 ms windows,
//! criterion 10 samples, 200 ms warm-up, 1 s measurement; estimated 80 s.
//!
//! # Hangs
//!
//! A watchdog thread aborts the process, naming the cell and condvar, if a
//! window runs a minute past its planned length: a lost wake-up in a
//! condition variable would otherwise hang the run.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::fs::File;
use std::hint::black_box;
use std::io::Write as _;
use std::ops::DerefMut;
use std::path::PathBuf;
use std::sync::PoisonError;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use criterion::{Criterion, SamplingMode, Throughput};

#[path = "shared.rs"]
mod shared;
use shared::*;

// ---------------------------------------------------------------------------
// The condition variables
// ---------------------------------------------------------------------------

/// One condition variable with its mutex, for any protected type.
///
/// `wait` takes the guard and gives it back (as `std`'s does), so that one
/// signature fits both `std` and `lock_api`.
trait CvFamily: 'static {
    type Mutex<T: Send + 'static>: Send + Sync;
    type Guard<'a, T: Send + 'static>: DerefMut<Target = T>;
    type Cv: Send + Sync;
    fn new_mutex<T: Send + 'static>(value: T) -> Self::Mutex<T>;
    fn new_cv() -> Self::Cv;
    fn lock<T: Send + 'static>(m: &Self::Mutex<T>) -> Self::Guard<'_, T>;
    fn wait<'a, T: Send + 'static>(cv: &Self::Cv, g: Self::Guard<'a, T>) -> Self::Guard<'a, T>;
    fn notify_one(cv: &Self::Cv);
    fn notify_all(cv: &Self::Cv);
}

/// A [`CvFamily`] of a `lock_api` 0.5 condition variable and mutex.
macro_rules! lock_api_family {
    ($f:ident, $raw_mutex:ty, $cv:ty) => {
        struct $f;
        impl CvFamily for $f {
            type Mutex<T: Send + 'static> = lock_api::Mutex<$raw_mutex, T>;
            type Guard<'a, T: Send + 'static> = lock_api::MutexGuard<'a, $raw_mutex, T>;
            type Cv = $cv;
            fn new_mutex<T: Send + 'static>(value: T) -> Self::Mutex<T> {
                lock_api::Mutex::new(value)
            }
            fn new_cv() -> Self::Cv {
                <$cv>::new()
            }
            #[inline(always)]
            fn lock<T: Send + 'static>(m: &Self::Mutex<T>) -> Self::Guard<'_, T> {
                m.lock()
            }
            #[inline(always)]
            fn wait<'a, T: Send + 'static>(
                cv: &Self::Cv,
                mut g: Self::Guard<'a, T>,
            ) -> Self::Guard<'a, T> {
                cv.wait(&mut g);
                g
            }
            #[inline(always)]
            fn notify_one(cv: &Self::Cv) {
                cv.notify_one();
            }
            #[inline(always)]
            fn notify_all(cv: &Self::Cv) {
                cv.notify_all();
            }
        }
    };
}

lock_api_family!(SpinbitF, spinbit::RawMutex, spinbit::Condvar);
lock_api_family!(ParkingLotF, parking_lot::RawMutex, parking_lot::Condvar);

struct StdF;
impl CvFamily for StdF {
    type Mutex<T: Send + 'static> = std::sync::Mutex<T>;
    type Guard<'a, T: Send + 'static> = std::sync::MutexGuard<'a, T>;
    type Cv = std::sync::Condvar;
    fn new_mutex<T: Send + 'static>(value: T) -> Self::Mutex<T> {
        std::sync::Mutex::new(value)
    }
    fn new_cv() -> Self::Cv {
        std::sync::Condvar::new()
    }
    // A panicking benchmark thread fails the run anyway: poisoning is
    // ignored.
    #[inline(always)]
    fn lock<T: Send + 'static>(m: &Self::Mutex<T>) -> Self::Guard<'_, T> {
        m.lock().unwrap_or_else(PoisonError::into_inner)
    }
    #[inline(always)]
    fn wait<'a, T: Send + 'static>(cv: &Self::Cv, g: Self::Guard<'a, T>) -> Self::Guard<'a, T> {
        cv.wait(g).unwrap_or_else(PoisonError::into_inner)
    }
    #[inline(always)]
    fn notify_one(cv: &Self::Cv) {
        cv.notify_one();
    }
    #[inline(always)]
    fn notify_all(cv: &Self::Cv) {
        cv.notify_all();
    }
}

/// Every condvar of the run, in the order the first repetition runs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Impl {
    Spinbit,
    ParkingLot,
    Std,
}

const IMPLS: &[Impl] = &[Impl::Spinbit, Impl::ParkingLot, Impl::Std];

impl Impl {
    fn name(self) -> &'static str {
        match self {
            Impl::Spinbit => "spinbit",
            Impl::ParkingLot => "parking_lot-0.13",
            Impl::Std => "std",
        }
    }
}

/// Runs `$body` with the type `$F` naming the [`CvFamily`] of `$id`.
macro_rules! with_impl {
    ($id:expr, $F:ident => $body:expr) => {
        match $id {
            Impl::Spinbit => {
                type $F = SpinbitF;
                $body
            }
            Impl::ParkingLot => {
                type $F = ParkingLotF;
                $body
            }
            Impl::Std => {
                type $F = StdF;
                $body
            }
        }
    };
}

// ---------------------------------------------------------------------------
// The watchdog
// ---------------------------------------------------------------------------

/// How far past its planned length a window may run before the watchdog
/// takes it for a hang.
const HANG_SLACK: Duration = Duration::from_secs(60);

/// The window under way: its name and the time the watchdog gives up.
static WATCHED: std::sync::Mutex<Option<(String, Instant)>> = std::sync::Mutex::new(None);

fn watch(what: Option<(String, Duration)>) {
    *WATCHED.lock().unwrap_or_else(PoisonError::into_inner) =
        what.map(|(name, dur)| (name, Instant::now() + dur + HANG_SLACK));
}

fn start_watchdog() {
    thread::spawn(|| {
        loop {
            thread::sleep(Duration::from_secs(5));
            let watched = WATCHED.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((name, deadline)) = &*watched
                && Instant::now() > *deadline
            {
                eprintln!(
                    "condvar bench: {name} ran {} s past its window: a hang (lost wake-up?); \
                     aborting",
                    HANG_SLACK.as_secs()
                );
                std::process::abort();
            }
        }
    });
}

// ---------------------------------------------------------------------------
// A window's result (the windows themselves: `run_window` in shared.rs)
// ---------------------------------------------------------------------------

/// One window's result.
#[derive(Clone, Copy, Debug)]
struct Sample {
    ops: u64,
    secs: f64,
    ops_per_sec: f64,
    cpu_ns_per_op: f64,
    ctxsw_per_op: f64,
    /// CPUs' worth of time other processes used during the window.
    others_cpu: f64,
    /// Broadcast cells: the broadcasts' mean, median and longest time in
    /// ns (NaN elsewhere).
    lat_mean_ns: f64,
    lat_p50_ns: f64,
    lat_max_ns: f64,
}

impl Sample {
    fn new(ops: u64, secs: f64, u0: Usage, u1: Usage) -> Sample {
        let per_op = |x: f64| x / ops.max(1) as f64;
        Sample {
            ops,
            secs,
            ops_per_sec: ops as f64 / secs,
            cpu_ns_per_op: per_op(u1.cpu_ns - u0.cpu_ns),
            ctxsw_per_op: per_op((u1.ctxsw - u0.ctxsw) as f64),
            others_cpu: ((u1.system_ns - u0.system_ns) - (u1.cpu_ns - u0.cpu_ns)).max(0.0)
                / (secs * 1e9),
            lat_mean_ns: f64::NAN,
            lat_p50_ns: f64::NAN,
            lat_max_ns: f64::NAN,
        }
    }

    /// What criterion gets for `n` operations: `n` times the time per
    /// operation (the mean broadcast time in the broadcast cells).
    fn criterion_time(&self, n: u64) -> Duration {
        let per_op_secs = if self.lat_mean_ns.is_finite() {
            self.lat_mean_ns * 1e-9
        } else {
            self.secs / self.ops.max(1) as f64
        };
        Duration::from_secs_f64(per_op_secs * n as f64)
    }
}

// ---------------------------------------------------------------------------
// Workloads
// ---------------------------------------------------------------------------

/// The bounded queue's capacity.
const QUEUE_CAP: usize = 64;

struct QueueState {
    q: VecDeque<u64>,
    stop: bool,
}

/// `pairs` producers and `pairs` consumers through a bounded queue; one
/// operation is one item popped.
fn run_queue<F: CvFamily>(pairs: usize, dur: Duration, min_ops: u64) -> Sample {
    let m = F::new_mutex(QueueState { q: VecDeque::with_capacity(QUEUE_CAP), stop: false });
    let (not_empty, not_full) = (F::new_cv(), F::new_cv());
    let worker = |id: usize, progress: &Window| -> u64 {
        let mut n = 0u64;
        let mut g = F::lock(&m);
        if id < pairs {
            // Producer: returns the items it pushed.
            loop {
                while g.q.len() >= QUEUE_CAP && !g.stop {
                    g = F::wait(&not_full, g);
                }
                if g.stop {
                    return n;
                }
                g.q.push_back(n);
                n += 1;
                F::notify_one(&not_empty);
                drop(g);
                g = F::lock(&m);
            }
        } else {
            // Consumer: returns the items it popped.
            let mut sum = 0u64;
            loop {
                while g.q.is_empty() && !g.stop {
                    g = F::wait(&not_empty, g);
                }
                if g.stop {
                    black_box(sum);
                    return n;
                }
                let Some(x) = g.q.pop_front() else { unreachable!("checked non-empty") };
                sum = sum.wrapping_add(x);
                n += 1;
                F::notify_one(&not_full);
                drop(g);
                progress.publish(id - pairs, n);
                g = F::lock(&m);
            }
        }
    };
    let stop = || {
        let mut g = F::lock(&m);
        g.stop = true;
        F::notify_all(&not_empty);
        F::notify_all(&not_full);
    };
    // Only consumers publish (slots 0..pairs); the upper slots stay 0.
    let (outs, secs, u0, u1) = run_window(2 * pairs, dur, min_ops, worker, stop);
    let pushed: u64 = outs[..pairs].iter().sum();
    let popped: u64 = outs[pairs..].iter().sum();
    let left = F::lock(&m).q.len() as u64;
    assert_eq!(pushed, popped + left, "the queue lost or invented items");
    Sample::new(popped, secs, u0, u1)
}

struct PingState {
    turn: usize,
    stop: bool,
}

/// Two threads pass a turn back and forth; one operation is a round trip.
fn run_pingpong<F: CvFamily>(dur: Duration, min_ops: u64) -> Sample {
    let m = F::new_mutex(PingState { turn: 0, stop: false });
    let cv = F::new_cv();
    let worker = |id: usize, progress: &Window| -> u64 {
        // Thread 0 counts its turns: one per round trip.
        let mut n = 0u64;
        let mut g = F::lock(&m);
        loop {
            while g.turn != id && !g.stop {
                g = F::wait(&cv, g);
            }
            if g.stop {
                return n;
            }
            g.turn = 1 - id;
            F::notify_one(&cv);
            if id == 0 {
                n += 1;
                progress.publish(0, n);
            }
        }
    };
    let stop = || {
        let mut g = F::lock(&m);
        g.stop = true;
        F::notify_all(&cv);
    };
    let (outs, secs, u0, u1) = run_window(2, dur, min_ops, worker, stop);
    Sample::new(outs[0], secs, u0, u1)
}

struct BroadcastState {
    generation: u64,
    stop: bool,
    /// Waiters that have run their critical section since the last
    /// broadcast.
    done: usize,
    /// What every critical section increments.
    counter: u64,
    /// The last waiter's clock reading.
    last: Option<Instant>,
}

/// `waiters` threads wait on a generation counter; the calling thread
/// broadcasts, one operation per broadcast, and times each from its
/// `notify_all` to the last waiter's critical section.
fn run_broadcast<F: CvFamily>(waiters: usize, dur: Duration, min_ops: u64) -> Sample {
    let m = F::new_mutex(BroadcastState {
        generation: 0,
        stop: false,
        done: 0,
        counter: 0,
        last: None,
    });
    let (cv, all_done) = (F::new_cv(), F::new_cv());
    let mut lat_ns: Vec<f64> = Vec::new();
    let (secs, u0, u1) = thread::scope(|s| {
        for _ in 0..waiters {
            s.spawn(|| {
                let mut g = F::lock(&m);
                loop {
                    // The critical section (the first pass announces the
                    // waiter; the notifier waits for all of them).
                    g.counter += 1;
                    g.done += 1;
                    if g.done == waiters {
                        g.last = Some(Instant::now());
                        F::notify_one(&all_done);
                    }
                    // Straight into `wait`, without releasing the mutex.
                    let seen = g.generation;
                    while g.generation == seen {
                        g = F::wait(&cv, g);
                    }
                    if g.stop {
                        return;
                    }
                }
            });
        }
        // Every waiter waiting on `cv`.
        let mut g = F::lock(&m);
        while g.done < waiters {
            g = F::wait(&all_done, g);
        }
        drop(g);
        let u0 = usage();
        let t0 = Instant::now();
        loop {
            let mut g = F::lock(&m);
            g.generation += 1;
            g.done = 0;
            let start = Instant::now();
            F::notify_all(&cv);
            while g.done < waiters {
                g = F::wait(&all_done, g);
            }
            let end = g.last.expect("the last waiter reads the clock");
            drop(g);
            lat_ns.push(end.saturating_duration_since(start).as_nanos() as f64);
            if lat_ns.len() as u64 >= min_ops && t0.elapsed() >= dur {
                break;
            }
        }
        let secs = t0.elapsed().as_secs_f64();
        let u1 = usage();
        let mut g = F::lock(&m);
        g.stop = true;
        g.generation += 1;
        F::notify_all(&cv);
        (secs, u0, u1)
    });
    let rounds = lat_ns.len() as u64;
    let counter = F::lock(&m).counter;
    assert_eq!(
        counter,
        waiters as u64 * (rounds + 1),
        "a broadcast missed a waiter or ran one twice"
    );
    let mut s = Sample::new(rounds, secs, u0, u1);
    s.lat_mean_ns = lat_ns.iter().sum::<f64>() / rounds.max(1) as f64;
    s.lat_max_ns = lat_ns.iter().copied().fold(f64::NAN, f64::max);
    s.lat_p50_ns = median(lat_ns);
    s
}

// ---------------------------------------------------------------------------
// Cells and profiles
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Cell {
    /// `pairs` producers and `pairs` consumers.
    Queue {
        pairs: usize,
    },
    Broadcast {
        waiters: usize,
    },
    PingPong,
}

impl Cell {
    fn bench(self) -> &'static str {
        match self {
            Cell::Queue { .. } => "condvar-queue",
            Cell::Broadcast { .. } => "condvar-broadcast",
            Cell::PingPong => "condvar-pingpong",
        }
    }

    fn group(self) -> String {
        match self {
            Cell::Queue { pairs } => format!("{}/p{pairs}c{pairs}", self.bench()),
            Cell::Broadcast { waiters } => format!("{}/w{waiters}", self.bench()),
            Cell::PingPong => self.bench().to_string(),
        }
    }

    /// Threads of the cell (the broadcast's notifier included).
    fn threads(self) -> usize {
        match self {
            Cell::Queue { pairs } => 2 * pairs,
            Cell::Broadcast { waiters } => waiters + 1,
            Cell::PingPong => 2,
        }
    }

    /// What one operation is.
    fn unit(self) -> &'static str {
        match self {
            Cell::Queue { .. } => "item",
            Cell::Broadcast { .. } => "broadcast",
            Cell::PingPong => "round trip",
        }
    }
}

fn run_impl(id: Impl, cell: Cell, dur: Duration, min_ops: u64) -> Sample {
    watch(Some((format!("{}/{}", cell.group(), id.name()), dur)));
    let s = with_impl!(id, F => match cell {
        Cell::Queue { pairs } => run_queue::<F>(pairs, dur, min_ops),
        Cell::Broadcast { waiters } => run_broadcast::<F>(waiters, dur, min_ops),
        Cell::PingPong => run_pingpong::<F>(dur, min_ops),
    });
    watch(None);
    s
}

struct Profile {
    name: &'static str,
    queue_pairs: &'static [usize],
    broadcast_waiters: &'static [usize],
    pingpong: bool,
    reps: usize,
    window: Duration,
    sample_size: usize,
    warm_up: Duration,
    measurement: Duration,
}

const QUICK: Profile = Profile {
    name: "quick",
    queue_pairs: &[1, 2, 4, 16],
    broadcast_waiters: &[8, 32, 64],
    pingpong: true,
    reps: 3,
    window: Duration::from_millis(50),
    sample_size: 10,
    warm_up: Duration::from_millis(30),
    measurement: Duration::from_millis(150),
};

const FULL: Profile = Profile {
    name: "full",
    queue_pairs: &[1, 2, 4, 16],
    broadcast_waiters: &[8, 32, 64],
    pingpong: true,
    reps: 5,
    window: Duration::from_millis(300),
    sample_size: 10,
    warm_up: Duration::from_millis(200),
    measurement: Duration::from_secs(1),
};

impl Profile {
    fn from_env() -> &'static Profile {
        match std::env::var("SPINBIT_BENCH_PROFILE").as_deref() {
            Ok("quick") => &QUICK,
            Ok("full") | Ok("") | Err(_) => &FULL,
            Ok(other) => panic!("SPINBIT_BENCH_PROFILE={other}: expected `quick` or `full`"),
        }
    }

    fn cells(&self) -> Vec<Cell> {
        let mut cells: Vec<Cell> =
            self.queue_pairs.iter().map(|&pairs| Cell::Queue { pairs }).collect();
        cells.extend(self.broadcast_waiters.iter().map(|&waiters| Cell::Broadcast { waiters }));
        if self.pingpong {
            cells.push(Cell::PingPong);
        }
        cells
    }

    /// Wall-clock seconds one (cell, condvar) pair takes, roughly: the
    /// companion windows, then criterion's warm-up and samples (counted
    /// 1.5 times: whole windows, threads spawned and joined for each).
    fn secs_per_run(&self) -> f64 {
        self.reps as f64 * self.window.as_secs_f64()
            + 1.5 * (self.warm_up + self.measurement).as_secs_f64()
            + 0.05
    }
}

// ---------------------------------------------------------------------------
// The command line, the machine, the results file (as in mutex.rs)
// ---------------------------------------------------------------------------

impl Args {
    fn matches(&self, id: &str) -> bool {
        match &self.filter {
            None => true,
            Some(f) if self.exact => id == f,
            Some(f) => id.contains(f.as_str()),
        }
    }
}

fn out_path() -> PathBuf {
    results_path("SPINBIT_BENCH_CONDVAR_OUT", "condvar-")
}

fn command_line(profile: &Profile, args: &Args) -> String {
    let mut cmd = format!(
        "SPINBIT_BENCH_PROFILE={} cargo bench -p spinbit-bench --bench condvar",
        profile.name
    );
    if !cfg!(target_arch = "x86_64") {
        let _ = write!(cmd, " --target {}", target_triple());
    }
    let passed: Vec<&str> =
        args.raw.iter().map(String::as_str).filter(|a| *a != "--bench").collect();
    if !passed.is_empty() {
        let _ = write!(cmd, " -- {}", passed.join(" "));
    }
    cmd
}

/// The median of every field over repetitions, each taken separately.
fn median_sample(reps: &[Sample]) -> Sample {
    let m = |f: fn(&Sample) -> f64| median(reps.iter().map(f).collect());
    Sample {
        ops: m(|s| s.ops as f64).round() as u64,
        secs: m(|s| s.secs),
        ops_per_sec: m(|s| s.ops_per_sec),
        cpu_ns_per_op: m(|s| s.cpu_ns_per_op),
        ctxsw_per_op: m(|s| s.ctxsw_per_op),
        others_cpu: m(|s| s.others_cpu),
        lat_mean_ns: m(|s| s.lat_mean_ns),
        lat_p50_ns: m(|s| s.lat_p50_ns),
        lat_max_ns: m(|s| s.lat_max_ns),
    }
}

/// The worst window's throughput.
fn worst(reps: &[Sample]) -> f64 {
    reps.iter().map(|r| r.ops_per_sec).filter(|x| !x.is_nan()).fold(f64::NAN, f64::min)
}

/// The JSON line of `id` in `cell`: `s`, the medians of `reps`, the windows
/// in the order they ran.
fn record(profile: &Profile, cell: Cell, id: Impl, s: &Sample, reps: &[Sample]) -> String {
    let (producers, consumers, waiters) = match cell {
        Cell::Queue { pairs } => (pairs.to_string(), pairs.to_string(), "null".into()),
        Cell::Broadcast { waiters } => ("null".into(), "null".into(), waiters.to_string()),
        Cell::PingPong => ("null".into(), "null".into(), "null".to_string()),
    };
    let queue_cap =
        if matches!(cell, Cell::Queue { .. }) { QUEUE_CAP.to_string() } else { "null".into() };
    format!(
        concat!(
            "{{\"bench\":{},\"group\":{},\"condvar\":{},\"unit\":{},\"threads\":{},",
            "\"producers\":{},\"consumers\":{},\"waiters\":{},\"queue_cap\":{},",
            "\"ops\":{},\"secs\":{},\"ops_per_sec\":{},\"ops_per_sec_min\":{},",
            "\"ops_per_sec_reps\":[{}],\"cpu_ns_per_op\":{},\"ctxsw_per_op\":{},",
            "\"others_cpu\":{},\"lat_mean_ns\":{},\"lat_p50_ns\":{},\"lat_max_ns\":{},",
            "\"reps\":{},\"profile\":{},\"target\":{}}}\n"
        ),
        js(cell.bench()),
        js(&cell.group()),
        js(id.name()),
        js(cell.unit()),
        cell.threads(),
        producers,
        consumers,
        waiters,
        queue_cap,
        s.ops,
        jn(s.secs),
        jn(s.ops_per_sec),
        jn(worst(reps)),
        reps.iter().map(|r| jn(r.ops_per_sec)).collect::<Vec<_>>().join(","),
        jn(s.cpu_ns_per_op),
        jn(s.ctxsw_per_op),
        jn(s.others_cpu),
        jn(s.lat_mean_ns),
        jn(s.lat_p50_ns),
        jn(s.lat_max_ns),
        profile.reps,
        js(profile.name),
        js(&target_triple()),
    )
}

/// A rate in the console's units: `1.23M`, `45.6k`.
fn rate(x: f64) -> String {
    if x >= 1e6 { format!("{:.2}M", x / 1e6) } else { format!("{:.1}k", x / 1e3) }
}

/// One condvar's part of a cell's console line.
fn console(cell: Cell, id: Impl, s: &Sample, reps: &[Sample]) -> String {
    let unit = cell.unit();
    let mut o = format!(
        "{} {} {unit}/s (worst {}), {:.0} ns CPU/{unit}, {:.3} ctxsw/{unit}",
        id.name(),
        rate(s.ops_per_sec),
        rate(worst(reps)),
        s.cpu_ns_per_op,
        s.ctxsw_per_op,
    );
    if s.lat_mean_ns.is_finite() {
        let _ = write!(
            o,
            ", notify_all->last {:.1} us mean, {:.1} p50, {:.1} max",
            s.lat_mean_ns / 1e3,
            s.lat_p50_ns / 1e3,
            s.lat_max_ns / 1e3,
        );
    }
    let _ = write!(o, ", others {:.2} CPU", s.others_cpu);
    o
}

// ---------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------

fn main() {
    let profile = Profile::from_env();
    let args = parse_args();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpus = thread::available_parallelism().map_or(0, |n| n.get());
    let plan: Vec<(Cell, Vec<Impl>)> = profile
        .cells()
        .into_iter()
        .map(|cell| {
            let group = cell.group();
            let impls: Vec<Impl> = IMPLS
                .iter()
                .copied()
                .filter(|i| args.matches(&format!("{group}/{}", i.name())))
                .collect();
            (cell, impls)
        })
        .filter(|(_, impls)| !impls.is_empty())
        .collect();
    start_watchdog();

    let mut out = None;
    if args.benchmarking {
        let runs: usize = plan.iter().map(|(_, impls)| impls.len()).sum();
        eprintln!(
            "spinbit condvar bench: profile {}, {} cells, {runs} (cell, condvar) pairs, \
             {} reps of {} ms; estimated {:.0} s",
            profile.name,
            plan.len(),
            profile.reps,
            profile.window.as_millis(),
            runs as f64 * profile.secs_per_run(),
        );
        let (model, id, kernel, commit) =
            (cpu_model(&cpuinfo), cpu_id(&cpuinfo), kernel(), commit());
        eprintln!(
            "machine: {model}{}, {cpus} CPUs (available_parallelism), Linux {kernel}; \
             commit {commit}; target {}",
            if id.is_empty() { String::new() } else { format!(" (family/model {id})") },
            target_triple(),
        );
        let path = out_path();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("creating the results directory");
        }
        let mut f = File::create(&path).expect("creating the results file");
        let unix = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let meta = format!(
            concat!(
                "{{\"bench\":\"meta\",\"profile\":{},\"command\":{},\"target\":{},",
                "\"reps\":{},\"window_ms\":{},\"condvars\":[{}],\"queue_cap\":{},",
                "\"cpu\":{},\"cpu_id\":{},\"cores\":{},\"kernel\":{},\"commit\":{},",
                "\"unix_time\":{}}}\n"
            ),
            js(profile.name),
            js(&command_line(profile, &args)),
            js(&target_triple()),
            profile.reps,
            profile.window.as_millis(),
            IMPLS.iter().map(|i| js(i.name())).collect::<Vec<_>>().join(","),
            QUEUE_CAP,
            js(&model),
            js(&id),
            cpus,
            js(&kernel),
            js(&commit),
            unix,
        );
        f.write_all(meta.as_bytes()).expect("writing the results file");
        eprintln!("companion metrics -> {}", path.display());
        out = Some(f);
    }

    let mut c = Criterion::default()
        .sample_size(profile.sample_size)
        .warm_up_time(profile.warm_up)
        .measurement_time(profile.measurement)
        .nresamples(5000)
        .configure_from_args();

    // The window of one criterion sample.
    let sample_window = profile.measurement / profile.sample_size as u32;
    let started = Instant::now();
    for (cell, selected) in &plan {
        let (cell, group_name) = (*cell, cell.group());

        // Companion pass: interleaved, rotated repetitions; medians. Time
        // per operation for each condvar, to size criterion's windows.
        let mut ns_per_op = vec![10_000.0f64; selected.len()];
        if let Some(f) = &mut out {
            let mut reps: Vec<Vec<Sample>> = vec![Vec::new(); selected.len()];
            for r in 0..profile.reps {
                for k in 0..selected.len() {
                    let i = (r + k) % selected.len();
                    reps[i].push(run_impl(selected[i], cell, profile.window, 0));
                }
            }
            let mut line = format!("{group_name}:");
            for (i, &id) in selected.iter().enumerate() {
                let s = median_sample(&reps[i]);
                f.write_all(record(profile, cell, id, &s, &reps[i]).as_bytes())
                    .and_then(|()| f.flush())
                    .expect("writing the benchmark results");
                ns_per_op[i] = 1e9 / s.ops_per_sec.max(1.0);
                let _ = write!(line, "\n  {};", console(cell, id, &s, &reps[i]));
            }
            eprintln!("{line}");
        }

        // Criterion.
        let mut group = c.benchmark_group(&group_name);
        group.throughput(Throughput::Elements(1));
        group.sampling_mode(SamplingMode::Flat);
        for (i, &id) in selected.iter().enumerate() {
            let est = ns_per_op[i];
            group.bench_function(id.name(), |b| {
                b.iter_custom(|n| {
                    let dur = sample_window.max(Duration::from_secs_f64(n as f64 * est * 1e-9));
                    run_impl(id, cell, dur, n).criterion_time(n)
                })
            });
        }
        group.finish();
    }
    c.final_summary();
    if args.benchmarking {
        eprintln!(
            "spinbit condvar bench: done in {:.0} s; companion metrics in {}",
            started.elapsed().as_secs_f64(),
            out_path().display()
        );
    }
}
