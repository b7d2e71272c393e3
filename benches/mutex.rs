//! spinbit's benchmark suite: every lock, every cell of the matrix, in one run.
//!
//! Run it from the repository's root (this file is the one benchmark of the
//! crate `spinbit-bench`, `benches/Cargo.toml`) with
//!
//! ```text
//! SPINBIT_BENCH_PROFILE=quick cargo bench -p spinbit-bench --bench mutex --features bench-ablations
//! cargo bench -p spinbit-bench --bench mutex --features bench-ablations   # full profile
//! benches/sweep.sh SPIN_NS 1000 2000 4000                                 # sensitivity sweep
//! ```
//!
//! and turn the companion metrics into a report per CPU family,
//! `benches/results/<arch>-<cpu family>.md` plus SVG charts, with
//! `cargo run --release -p spinbit-bench --bin bench_report`.
//!
//! # Locks
//!
//! spinbit, `parking_lot` 0.13, `parking_lot` 0.12, `usync` (waiters queue
//! on their own stacks, like spinbit's), `std::sync::Mutex`, glibc
//! `pthread_mutex_t` (default and `PTHREAD_MUTEX_ADAPTIVE_NP`, Linux/glibc
//! only) and, with the `bench-ablations` feature, spinbit with spinning
//! switched off (`spinbit-nospin`) and with every waiter spinning
//! (`spinbit-allspin`). They all implement [`BenchMutex`]; a [`Family`] names
//! one lock for any protected type, so one generic harness drives all of them.
//! A family whose locks have a fair unlock (`lock_api::RawMutexFair`:
//! spinbit and both `parking_lot`s) also implements [`FairFamily`], and
//! [`FairUnlock`] turns it into the family of the same locks released with
//! `MutexGuard::unlock_fair`, which the same harness drives in the fair
//! cells. Likewise a family whose locks have a timed lock
//! (`lock_api::RawMutexTimed`: spinbit and both `parking_lot`s; `usync` has
//! none) implements [`TimedFamily`], for the timed cells.
//!
//! # Workloads
//!
//! Cell names are `<workload>-<layout>/<parameters>` (layouts below).
//!
//! * `uncontended-*`: lock+unlock on one thread (criterion's plain `iter`).
//! * `uncontended-timed-*`: the same with `try_lock_for(1 ms)` instead of
//!   `lock` on the free mutex: the cost of the timed lock's fast path next
//!   to plain lock+unlock.
//! * `contended-*/t{T}/cs{C}/think{K}`: `T` threads loop `lock`, critical
//!   section, `unlock`, think. The critical section is `C` ns worth of
//!   dependent xor-shift-multiply steps on the guarded `u64` (plus one increment,
//!   so `cs0` still writes the guarded line); think is the same arithmetic on
//!   a thread-local value, ~10x the critical section (for `cs0`, ~100 ns, as
//!   if the bare lock operation were 10 ns, so the second think level is not
//!   a copy of the first). The number of arithmetic steps per nanosecond is
//!   calibrated once at start-up (best of several timed runs of a long loop)
//!   and recorded with every result (`unit_ns`, `cs_units`, `think_units`).
//! * `fair-*/t{T}/cs{C}/think{K}`: the same, but every unlock is
//!   `MutexGuard::unlock_fair`, so a waiting thread gets the lock instead of
//!   whoever comes next. Only spinbit and the two `parking_lot`s run it
//!   (`usync`, `std` and pthread have no fair unlock; the ablations have
//!   one but are left out to keep the run short).
//! * `timed-*/t{T}/cs{C}/think0`: as `contended-*` with think 0, but every
//!   acquisition is `try_lock_for(1 ms)`, as in code that must not block for
//!   long. An operation is an acquisition; an attempt that times out is no
//!   operation and loops straight back to another attempt. The fraction of
//!   attempts that timed out is reported per lock (`timed_out`). Only
//!   spinbit and the two `parking_lot`s run it.
//! * `handoff-*/cs{C}`: two threads hand the lock back and forth, the shape of
//!   Go's `BenchmarkMutexHandoff`. A turn word on its own cache line says
//!   whose turn it is; the thread whose turn it is locks, passes the turn to
//!   the other thread *while still holding the lock*, runs the critical
//!   section and unlocks. So the other thread arrives at `lock` while the lock
//!   is held and waits out `C` ns: with `C` = 0 it barely waits, with ~1 µs a
//!   spinner catches the release, with ~10 µs a spinner has given up and
//!   sleeps. One operation is one handoff.
//! * `queue-*/t{T}`: a `VecDeque<u64>` under the mutex, the shape of Go's
//!   `BenchmarkChanContended`: each thread pushes 100 items then pops 100,
//!   one lock acquisition per item. Since a thread only pops after its own
//!   pushes, the queue is never empty when it pops and nobody blocks on
//!   anything but the lock. One operation is one push or one pop.
//! * `plbench-*/t{T}/in{I}/out{O}`: the workload of parking_lot's own
//!   benchmark (`benchmark/src/bin/mutex.rs`): each thread loops lock, `I`
//!   dependent f64 multiply-adds (`v = v * 1.000001 + 0.5`) on the guarded
//!   `f64`, unlock, `O` of the same on a thread-local `f64`. The lock sits
//!   between two 300-byte pads, `#[repr(C)] { pad: [u8; 300], lock:
//!   Mutex<f64>, pad2: [u8; 300] }`, as there (so not on a cache line of
//!   its own). `I` is 1 in every profile. An operation is an acquisition.
//!   `I` and `O` are loop counts, not calibrated ns: the JSON line has them
//!   as `inner` and `outer`, and `cs` and `think` are `null`.
//! * `lockbench-*/t{T}/locks{L}`: the workload of matklad's lock-bench: `L`
//!   cache-padded `Mutex<u64>` in a `Vec`; each operation picks one at
//!   random (a per-thread xorshift64, reduced by multiply-shift), locks it,
//!   increments the `u64` and unlocks. After each window the harness checks
//!   that the counters add up to the operations (else it panics: the locks
//!   did not exclude). Where lock-bench times a fixed number of increments
//!   per thread, this counts them in the same fixed-duration window as
//!   every cell. The JSON line has `locks`; `cs` and `think` are `null`.
//! * Thread counts relative to the machine: `available_parallelism()` is
//!   read once at start-up (recorded as `cpus` in the meta line), and a
//!   profile can ask for `contended` cells at multiples of it (1x to 8x:
//!   oversubscription, where a convoy collapse showed on 16 CPUs). They are
//!   named with the absolute thread count like every cell, and a cell the
//!   profile has already is run once.
//!
//! # Layouts
//!
//! Each lock sits in an allocation of its own that starts a cache line and
//! shares its lines with nothing else (`Box<CachePadded<Mutex<..>>>`). The
//! guarded data is either
//!
//! * `inline`: right after the lock word, in the same cache line, exactly
//!   as in a `Mutex<u64>` (or `Mutex<VecDeque<u64>>`). This is what most
//!   users run: a waiter polling the lock word and the holder writing the
//!   data share one cache line; or
//! * `split`: on a cache line of its own (`Mutex<CachePadded<u64>>`), so the
//!   lock word's traffic and the data's are separate.
//!
//! glibc's mutex is laid out the same way: `{ pthread_mutex_t; T }` in one
//! padded allocation.
//!
//! # Fixed-duration windows
//!
//! Every multi-thread measurement is a *window*: spawn the threads, let each
//! announce it is ready, take `getrusage` and the time, raise a `go` flag,
//! sleep for the window, raise a `stop` flag (its own cache line), join the
//! threads, take the time and `getrusage` again. Each thread counts its own
//! operations, including the ones it completes after `stop` while draining,
//! which is also inside the timed interval. No thread is left with a tail of
//! a fixed quota to finish alone, which would otherwise measure one thread
//! running uncontended.
//!
//! # Companion metrics (the JSON lines)
//!
//! For every cell, before criterion measures it, the harness runs `reps`
//! windows per lock, interleaving the locks and rotating their order every
//! repetition (rep `r` starts with lock `r mod n`), and keeps for each lock
//! the median of every metric, each taken separately:
//!
//! * throughput: operations / window seconds, all threads together; also
//!   the worst window's, `ops_per_sec_min`, and every window's,
//!   `ops_per_sec_reps`, in the order they ran: a metastable collapse shows
//!   as one window at a fraction of the others, which a median hides. The
//!   console line of each cell prints the median and, as `(worst ..)`, the
//!   worst window's, in Mops/s;
//! * CPU per operation: user+sys CPU of the whole process (`getrusage
//!   RUSAGE_SELF` delta) / operations; the coordinator thread sleeps through
//!   the window, so this is the worker threads' CPU;
//! * fairness: min / max of the per-thread operation counts (1 = even);
//! * acquire latency p50 / p99 / p99.9 / max, in ns: the time spent in the
//!   `lock()` call, read with the CPU's counter (x86_64 `RDTSC`, aarch64
//!   `CNTVCT_EL0`, elsewhere `Instant`), converted to ns with a factor
//!   calibrated at start-up against `Instant`. Reading the counter costs
//!   ~10-25 ns, as much as an uncontended lock, so in cells with a critical
//!   section below 1 µs only every 8th acquisition is timed (`lat_every`);
//!   from 1 µs up every acquisition is. The counter is not serialising: an
//!   acquisition's time is exact to a few ns, plenty for percentiles of
//!   waits. Per-thread `hdrhistogram`s (2 significant digits) are merged.
//!   `max_reps` also keeps every repetition's max, in the order the
//!   repetitions ran: one wait in millions, it is the noisiest metric, and
//!   its spread says how far one run's median can be trusted;
//! * context switches per operation: `ru_nvcsw + ru_nivcsw` delta /
//!   operations;
//! * `others_cpu`: how many CPUs' worth of time *other* processes used
//!   during the window (the machine's busy time from `/proc/stat`, 10 ms
//!   resolution, minus this process's): on a shared machine, the noise;
//! * timed cells: `timed_out`, the fraction of `try_lock_for` calls that
//!   timed out, and `timeout_ns`, their timeout (both `null` in other
//!   cells). In timed cells the latency percentiles time every
//!   `try_lock_for` call, whatever its outcome;
//! * `stats`: what spinbit's policy decided, with the library's `stats`
//!   feature (`--features bench-ablations,stats`): the process-wide
//!   counters of `spinbit::stats`, reset before and read after every window
//!   of spinbit and of its ablations, one object per window in the order
//!   they ran (`slow_paths`, `spins`, `spins_won`, `sleeps`, `wakes`,
//!   `hand_offs`, `starved`, `nudges`, `timeouts`, `wait_total_ns`, `wait_max_ns`,
//!   and the wake counters and `guesses_missed`, unlocks whose guess of
//!   the word missed, that follow them; last, `wake_calls` and
//!   `wake_call_total_ns`/`wake_call_max_ns`, the wakes' system calls and
//!   the wakers' time in them);
//!   the console line prints the window of median throughput's. `null`
//!   for the other locks and without the feature (meta: `stats_feature`).
//!   The counters cost slow paths a few shared atomic additions, so compare
//!   throughput on runs without the feature.
//!
//! They go to `target/spinbit-bench/<target-triple>.jsonl` (or the file named
//! by `SPINBIT_BENCH_OUT`), rewritten by each benchmarking run: a first line
//! with `"bench":"meta"` (profile, command, calibration, the locks of the
//! profile, the crate's tuning constants as the run used them:
//! `tuning_feature`, `tuning` with every constant's value and
//! `tuning_overrides` naming the ones an environment variable set; machine:
//! the CPU model, named from its implementer and part numbers on ARM,
//! `cpu_id` with the x86 family and model numbers (`6/167`; empty
//! elsewhere), `cpus` (`available_parallelism`), and the commit measured,
//! `-dirty` when tracked files differ from it), then
//! one object per
//! cell per lock, with its `layout` (`inline`, `split`) and `unlock`
//! (`plain`, `fair`). A run with a filter writes only the matching
//! cells (the companion pass applies the filter as a plain substring of
//! `group/lock`, or exactly with `--exact`). `cargo test -p spinbit-bench
//! --benches`, `--list` and `--profile-time` runs skip the companion
//! pass and leave the file alone.
//!
//! # How a window fits criterion
//!
//! Criterion asks for `N` iterations and wants the time they took. Each
//! criterion call runs one window and returns its elapsed time scaled to `N`
//! operations: `elapsed * N / ops`, i.e. `N` times the window's time per
//! operation. The window lasts `measurement time / sample size` (the length
//! of one criterion sample), or longer when `N` operations at the rate the
//! companion pass measured would take longer, and in any case until the
//! threads have done `N` operations. Criterion sizes `N` from its warm-up's
//! *wall-clock* time per iteration, which here includes spawning and joining
//! the threads and the window's fixed length, so its `N` is small and the
//! window length is what governs the run time: warm-up plus `sample size`
//! windows per lock and cell. The per-iteration time criterion reports is
//! the windows' time per operation, its throughput their operations per
//! second. Groups use flat sampling (every sample the same length) and
//! `Throughput::Elements(1)`.
//!
//! # Profiles and the time budget
//!
//! Every profile runs the inline layout on the widest set of cells (it is
//! what users run), the fair unlock on a few, and the split layout on a
//! subset, enough to see what the layout changes.
//!
//! `SPINBIT_BENCH_PROFILE=quick`: inline: `uncontended`,
//! `uncontended-timed`, threads {1,2,8,32} x cs {0, 1 µs} x think 0,
//! `handoff/cs1000`, `queue/t8`, `timed/t8/cs1000/think0`,
//! `plbench/t8/in1/out10`, `lockbench/t8/locks2`, and cs 0 x think 0 at 8x
//! the CPUs (`t16` on 2 CPUs; on 1 or 4 CPUs that is `t8` or `t32`, a cell
//! the profile has already) (16 cells on 2 CPUs); fair: threads 8 x cs {0,
//! 1 µs} x think 0 (2); split: threads {2,8} x cs 0 x think 0 (2). 20
//! cells on 2 CPUs, 156 (cell, lock) pairs with 9 locks (124 without the
//! ablations; the timed cells run 3 locks); 3 reps of 80 ms windows,
//! criterion 10 samples, 30 ms warm-up, 150 ms measurement. The harness
//! estimates 101 s on 2 CPUs (it counts criterion's part at the full
//! profile's rate); a run took 59 s on a 2-core machine before the two
//! timed cells were added, which take 3 s when run alone, and the three
//! cells of parking_lot's and matklad's workloads and oversubscription,
//! which take 5 s each alone (estimated 6 s each, 17.6 s together).
//!
//! Full (the default), 5 reps of 400 ms windows, criterion 10 samples,
//! 100 ms warm-up, 600 ms measurement:
//!
//! * inline: `uncontended`; threads {1,2,4,8,16,32,64} x cs {0, 100 ns,
//!   1 µs, 10 µs} x think 0 (28 cells) and threads {2,8,32,64} x the same cs
//!   x think ~10x cs (16); `handoff/cs{0,1000,10000}`; `queue/t{2,8,32}`;
//!   `plbench/t{2,8,32}/in1/out{0,10,100,1000}` (12);
//!   `lockbench/t{8,32}/locks{2,64,1000}` (6); cs 0 x think 0 and cs 1 µs x
//!   think 10 µs at 1, 2, 4 and 8x the CPUs, less the cells above (on 2
//!   CPUs: `t4` and `t16` with think, 2 cells; on 16 CPUs: `t128` without
//!   think, `t16` and `t128` with it, 3): 71 cells on 2 CPUs;
//! * timed (inline, 3 locks): `uncontended-timed`; threads {8,32} x cs {0,
//!   1 µs} x think 0: 5 cells;
//! * fair: threads {2,8,32} x cs {0, 1 µs} x think 0: 6 cells, 3 locks;
//! * split: threads {2,8,32} x cs {0, 1 µs, 10 µs} x think 0,
//!   `handoff/cs1000`, `queue/t8`: 11 cells.
//!
//! 93 cells on 2 CPUs, 771 (cell, lock) pairs with 9 locks (607 without
//! the ablations). Four cells run alone in this profile on a 2-core
//! machine took 3.0-3.8 s per pair (2 s of companion windows, the rest
//! criterion's, see [`Profile::secs_per_run`]), so the full run takes
//! about 771 x 3.45 s = ~2660 s, 44 minutes, on any number of cores (the
//! windows are fixed-duration; a machine with more CPUs has one more
//! CPU-relative cell, 9 pairs, ~31 s). The harness prints its own estimate
//! when it starts. The budget was 35 minutes (73 cells, 591 pairs) before
//! the peers' workloads and the CPU-relative cells came (issue 45: ~10
//! minutes more), which is why think time, the split layout and the timed
//! cells run at fewer thread counts than the inline layout's think-0 rows.
//!
//! `SPINBIT_BENCH_PROFILE=sweep`: one point of the sensitivity sweep
//! (`benches/sweep.sh` runs it once per value of one tuning constant, set
//! through the `tuning` feature, and `benches/src/bin/sweep_report.rs` compares
//! the points). The key cells only, inline layout: `contended` t2/cs0,
//! t4/cs0, t8/cs0, t16/cs0, t32/cs0, t64/cs0, t8/cs100, t32/cs100,
//! t64/cs100, t8/cs1000, t16/cs1000, t32/cs1000, t64/cs1000, t64/cs10000
//! (think 0), t32/cs100/think1000, t32/cs10000/think100000, and
//! `handoff` cs0, cs1000 and cs10000 (19 cells); spinbit, both
//! `parking_lot`s, `usync` and `std` only (no pthread, no ablations: 95
//! pairs); and the fair-unlock cells of the full profile (6 cells, spinbit
//! and both `parking_lot`s); 3 reps of 200 ms windows; the companion pass
//! alone, no criterion. About 75 s on a 2-core machine, plus the build.

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::fs::File;
use std::hint::black_box;
use std::io::Write as _;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use criterion::{Criterion, SamplingMode, Throughput};
use crossbeam_utils::CachePadded;
use hdrhistogram::Histogram;

#[path = "shared.rs"]
mod shared;
use shared::*;

// ---------------------------------------------------------------------------
// The locks
// ---------------------------------------------------------------------------

/// A mutex protecting a `T`, as the harness uses it.
trait BenchMutex<T>: Send + Sync {
    /// The guard; the lock is released when it is dropped.
    type Guard<'a>: DerefMut<Target = T>
    where
        Self: 'a;
    fn new(value: T) -> Self;
    fn lock(&self) -> Self::Guard<'_>;
}

/// A mutex that can also release its lock fairly: `unlock_fair` hands the
/// lock to a waiting thread, if there is one, instead of letting whoever
/// comes next take it (`lock_api::RawMutexFair`).
trait FairBenchMutex<T>: BenchMutex<T> {
    fn unlock_fair(guard: Self::Guard<'_>);
}

/// A mutex with a timed lock (`lock_api::RawMutexTimed`).
trait TimedBenchMutex<T>: BenchMutex<T> {
    /// Takes the lock, waiting at most `timeout`; `None` if it timed out.
    fn try_lock_for(&self, timeout: Duration) -> Option<Self::Guard<'_>>;
}

/// One kind of lock, for any protected type, and how the harness releases it.
trait Family: 'static {
    type M<T: Send + 'static>: BenchMutex<T>;

    /// Releases the lock `guard` holds: a plain unlock, unless the family
    /// says otherwise ([`FairUnlock`]).
    #[inline(always)]
    fn unlock<T: Send + 'static>(guard: <Self::M<T> as BenchMutex<T>>::Guard<'_>) {
        drop(guard);
    }
}

/// The optional capability of a [`Family`]: its locks have a fair unlock.
///
/// `Fair<T>` is the same type as `M<T>`; it is named again because a bound
/// on `M<T>` for every `T` cannot be written.
trait FairFamily: Family {
    type Fair<T: Send + 'static>: FairBenchMutex<T>;
}

/// The optional capability of a [`Family`]: its locks have a timed lock.
/// `Timed<T>` is the same type as `M<T>`, named again for the same reason
/// as [`FairFamily::Fair`].
trait TimedFamily: Family {
    type Timed<T: Send + 'static>: TimedBenchMutex<T>;
}

/// The locks of `F`, every one of them released with `unlock_fair`.
struct FairUnlock<F>(PhantomData<F>);

impl<F: FairFamily> Family for FairUnlock<F> {
    type M<T: Send + 'static> = F::Fair<T>;

    #[inline(always)]
    fn unlock<T: Send + 'static>(guard: <Self::M<T> as BenchMutex<T>>::Guard<'_>) {
        <F::Fair<T> as FairBenchMutex<T>>::unlock_fair(guard);
    }
}

/// `lock_api` 0.5 (spinbit, `parking_lot` 0.13) and 0.4 (`parking_lot` 0.12,
/// `usync`) define distinct `Mutex` types with the same API.
macro_rules! lock_api_mutex {
    ($lock_api:ident) => {
        impl<R, T> BenchMutex<T> for $lock_api::Mutex<R, T>
        where
            R: $lock_api::RawMutex + Send + Sync,
            T: Send,
        {
            type Guard<'a>
                = $lock_api::MutexGuard<'a, R, T>
            where
                Self: 'a;
            fn new(value: T) -> Self {
                $lock_api::Mutex::new(value)
            }
            #[inline]
            fn lock(&self) -> Self::Guard<'_> {
                $lock_api::Mutex::lock(self)
            }
        }

        impl<R, T> FairBenchMutex<T> for $lock_api::Mutex<R, T>
        where
            R: $lock_api::RawMutexFair + Send + Sync,
            T: Send,
        {
            #[inline]
            fn unlock_fair(guard: Self::Guard<'_>) {
                $lock_api::MutexGuard::unlock_fair(guard);
            }
        }

        impl<R, T> TimedBenchMutex<T> for $lock_api::Mutex<R, T>
        where
            R: $lock_api::RawMutexTimed<Duration = Duration> + Send + Sync,
            T: Send,
        {
            #[inline]
            fn try_lock_for(&self, timeout: Duration) -> Option<Self::Guard<'_>> {
                $lock_api::Mutex::try_lock_for(self, timeout)
            }
        }
    };
}
lock_api_mutex!(lock_api);
lock_api_mutex!(lock_api_04);

impl<T: Send> BenchMutex<T> for std::sync::Mutex<T> {
    type Guard<'a>
        = std::sync::MutexGuard<'a, T>
    where
        Self: 'a;
    fn new(value: T) -> Self {
        std::sync::Mutex::new(value)
    }
    #[inline]
    fn lock(&self) -> Self::Guard<'_> {
        // No worker panics while holding a lock, so it is never poisoned.
        std::sync::Mutex::lock(self).unwrap_or_else(|e| e.into_inner())
    }
}

/// glibc's `pthread_mutex_t`, the default kind or `PTHREAD_MUTEX_ADAPTIVE_NP`.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod pthread {
    use std::marker::PhantomData;

    use super::{BenchMutex, CachePadded, Deref, DerefMut, UnsafeCell};

    /// The `pthread_mutex_t` and the data right after it, as a C struct
    /// `{ pthread_mutex_t m; T data; }` would lay them out, so the layouts
    /// mean for pthread what they mean for the Rust locks.
    #[repr(C)]
    struct Inner<T> {
        raw: UnsafeCell<libc::pthread_mutex_t>,
        data: UnsafeCell<T>,
    }

    pub struct PthreadMutex<T, const ADAPTIVE: bool> {
        /// Boxed: a pthread mutex must not move once initialised. Padded so
        /// that it starts a cache line and nothing else shares its lines.
        inner: Box<CachePadded<Inner<T>>>,
    }

    // SAFETY: the mutex owns its `T`, so sending it sends a `T`; the boxed
    // `pthread_mutex_t` is not tied to the thread that created it.
    unsafe impl<T: Send, const A: bool> Send for PthreadMutex<T, A> {}
    // SAFETY: `data` is only reached through a guard, which exists only while
    // `pthread_mutex_lock` has returned and `pthread_mutex_unlock` not yet
    // been called, so at most one thread at a time has access to it; the
    // pthread functions order the accesses.
    unsafe impl<T: Send, const A: bool> Sync for PthreadMutex<T, A> {}

    pub struct PthreadGuard<'a, T, const A: bool> {
        mutex: &'a PthreadMutex<T, A>,
        /// Neither `Send` nor `Sync`: a pthread mutex must be unlocked by the
        /// thread that locked it.
        _not_send: PhantomData<*const ()>,
    }

    impl<T: Send, const ADAPTIVE: bool> BenchMutex<T> for PthreadMutex<T, ADAPTIVE> {
        type Guard<'a>
            = PthreadGuard<'a, T, ADAPTIVE>
        where
            Self: 'a;

        fn new(value: T) -> Self {
            let inner = Box::new(CachePadded::new(Inner {
                raw: UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER),
                data: UnsafeCell::new(value),
            }));
            let kind = if ADAPTIVE {
                libc::PTHREAD_MUTEX_ADAPTIVE_NP
            } else {
                libc::PTHREAD_MUTEX_DEFAULT
            };
            let mut attr = std::mem::MaybeUninit::<libc::pthread_mutexattr_t>::uninit();
            // SAFETY: `attr` is initialised by `pthread_mutexattr_init` before
            // any other use and destroyed after its only use. `raw` is in its
            // final heap place, not yet used, and never moves afterwards.
            unsafe {
                assert_eq!(libc::pthread_mutexattr_init(attr.as_mut_ptr()), 0);
                assert_eq!(libc::pthread_mutexattr_settype(attr.as_mut_ptr(), kind), 0);
                assert_eq!(libc::pthread_mutex_init(inner.raw.get(), attr.as_ptr()), 0);
                libc::pthread_mutexattr_destroy(attr.as_mut_ptr());
            }
            PthreadMutex { inner }
        }

        #[inline]
        fn lock(&self) -> Self::Guard<'_> {
            // SAFETY: `raw` was initialised in `new` and is destroyed only in
            // `drop`, which cannot run while `&self` is borrowed.
            let r = unsafe { libc::pthread_mutex_lock(self.inner.raw.get()) };
            debug_assert_eq!(r, 0);
            PthreadGuard { mutex: self, _not_send: PhantomData }
        }
    }

    impl<T, const A: bool> Deref for PthreadGuard<'_, T, A> {
        type Target = T;
        fn deref(&self) -> &T {
            // SAFETY: the guard proves this thread holds the mutex.
            unsafe { &*self.mutex.inner.data.get() }
        }
    }

    impl<T, const A: bool> DerefMut for PthreadGuard<'_, T, A> {
        fn deref_mut(&mut self) -> &mut T {
            // SAFETY: the guard proves this thread holds the mutex, and
            // `&mut self` makes this the only reference through the guard.
            unsafe { &mut *self.mutex.inner.data.get() }
        }
    }

    impl<T, const A: bool> Drop for PthreadGuard<'_, T, A> {
        #[inline]
        fn drop(&mut self) {
            // SAFETY: this thread locked the mutex when it made the guard
            // and has not unlocked it since.
            let r = unsafe { libc::pthread_mutex_unlock(self.mutex.inner.raw.get()) };
            debug_assert_eq!(r, 0);
        }
    }

    impl<T, const A: bool> Drop for PthreadMutex<T, A> {
        fn drop(&mut self) {
            // SAFETY: `&mut self`: no guard is alive, so the mutex is
            // unlocked, and nobody uses it after this.
            unsafe { libc::pthread_mutex_destroy(self.inner.raw.get()) };
        }
    }
}

struct SpinbitF;
impl Family for SpinbitF {
    type M<T: Send + 'static> = spinbit::Mutex<T>;
}
impl FairFamily for SpinbitF {
    type Fair<T: Send + 'static> = spinbit::Mutex<T>;
}
impl TimedFamily for SpinbitF {
    type Timed<T: Send + 'static> = spinbit::Mutex<T>;
}
struct ParkingLot013F;
impl Family for ParkingLot013F {
    type M<T: Send + 'static> = parking_lot::Mutex<T>;
}
impl FairFamily for ParkingLot013F {
    type Fair<T: Send + 'static> = parking_lot::Mutex<T>;
}
impl TimedFamily for ParkingLot013F {
    type Timed<T: Send + 'static> = parking_lot::Mutex<T>;
}
struct ParkingLot012F;
impl Family for ParkingLot012F {
    type M<T: Send + 'static> = parking_lot_012::Mutex<T>;
}
impl FairFamily for ParkingLot012F {
    type Fair<T: Send + 'static> = parking_lot_012::Mutex<T>;
}
impl TimedFamily for ParkingLot012F {
    type Timed<T: Send + 'static> = parking_lot_012::Mutex<T>;
}
struct UsyncF;
impl Family for UsyncF {
    type M<T: Send + 'static> = usync::Mutex<T>;
}
struct StdF;
impl Family for StdF {
    type M<T: Send + 'static> = std::sync::Mutex<T>;
}
#[cfg(all(target_os = "linux", target_env = "gnu"))]
struct PthreadF;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
impl Family for PthreadF {
    type M<T: Send + 'static> = pthread::PthreadMutex<T, false>;
}
#[cfg(all(target_os = "linux", target_env = "gnu"))]
struct PthreadAdaptiveF;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
impl Family for PthreadAdaptiveF {
    type M<T: Send + 'static> = pthread::PthreadMutex<T, true>;
}
#[cfg(feature = "bench-ablations")]
struct NoSpinF;
#[cfg(feature = "bench-ablations")]
impl Family for NoSpinF {
    type M<T: Send + 'static> = lock_api::Mutex<spinbit::ablation::NoSpinRawMutex, T>;
}
#[cfg(feature = "bench-ablations")]
struct AllSpinF;
#[cfg(feature = "bench-ablations")]
impl Family for AllSpinF {
    type M<T: Send + 'static> = lock_api::Mutex<spinbit::ablation::AllSpinRawMutex, T>;
}

/// Every lock of this build, in the order the first repetition runs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LockId {
    Spinbit,
    ParkingLot013,
    ParkingLot012,
    Usync,
    Std,
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    Pthread,
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    PthreadAdaptive,
    #[cfg(feature = "bench-ablations")]
    NoSpin,
    #[cfg(feature = "bench-ablations")]
    AllSpin,
}

const LOCKS: &[LockId] = &[
    LockId::Spinbit,
    LockId::ParkingLot013,
    LockId::ParkingLot012,
    LockId::Usync,
    LockId::Std,
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    LockId::Pthread,
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    LockId::PthreadAdaptive,
    #[cfg(feature = "bench-ablations")]
    LockId::NoSpin,
    #[cfg(feature = "bench-ablations")]
    LockId::AllSpin,
];

/// Runs `$body` with the type `$F` naming the [`Family`] of lock `$id`.
macro_rules! with_family {
    ($id:expr, $F:ident => $body:expr) => {
        match $id {
            LockId::Spinbit => {
                type $F = SpinbitF;
                $body
            }
            LockId::ParkingLot013 => {
                type $F = ParkingLot013F;
                $body
            }
            LockId::ParkingLot012 => {
                type $F = ParkingLot012F;
                $body
            }
            LockId::Usync => {
                type $F = UsyncF;
                $body
            }
            LockId::Std => {
                type $F = StdF;
                $body
            }
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            LockId::Pthread => {
                type $F = PthreadF;
                $body
            }
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            LockId::PthreadAdaptive => {
                type $F = PthreadAdaptiveF;
                $body
            }
            #[cfg(feature = "bench-ablations")]
            LockId::NoSpin => {
                type $F = NoSpinF;
                $body
            }
            #[cfg(feature = "bench-ablations")]
            LockId::AllSpin => {
                type $F = AllSpinF;
                $body
            }
        }
    };
}

/// `Some($body)` with `$F` naming the [`Family`] of lock `$id` released with
/// `unlock_fair`, for the locks that have one (the fair cells compare
/// spinbit with the peers that have one); `None` for the others.
macro_rules! with_fair_family {
    ($id:expr, $F:ident => $body:expr) => {
        match $id {
            LockId::Spinbit => {
                type $F = FairUnlock<SpinbitF>;
                Some($body)
            }
            LockId::ParkingLot013 => {
                type $F = FairUnlock<ParkingLot013F>;
                Some($body)
            }
            LockId::ParkingLot012 => {
                type $F = FairUnlock<ParkingLot012F>;
                Some($body)
            }
            _ => None,
        }
    };
}

/// `Some($body)` with `$F` naming the [`TimedFamily`] of lock `$id`, for
/// the locks the timed cells compare (spinbit and both `parking_lot`s;
/// `usync` has no timed lock, `std` and the ablations are left out); `None`
/// for the others.
macro_rules! with_timed_family {
    ($id:expr, $F:ident => $body:expr) => {
        match $id {
            LockId::Spinbit => {
                type $F = SpinbitF;
                Some($body)
            }
            LockId::ParkingLot013 => {
                type $F = ParkingLot013F;
                Some($body)
            }
            LockId::ParkingLot012 => {
                type $F = ParkingLot012F;
                Some($body)
            }
            _ => None,
        }
    };
}

impl LockId {
    fn name(self) -> &'static str {
        match self {
            LockId::Spinbit => "spinbit",
            LockId::ParkingLot013 => "parking_lot-0.13",
            LockId::ParkingLot012 => "parking_lot-0.12",
            LockId::Usync => "usync",
            LockId::Std => "std",
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            LockId::Pthread => "pthread",
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            LockId::PthreadAdaptive => "pthread-adaptive",
            #[cfg(feature = "bench-ablations")]
            LockId::NoSpin => "spinbit-nospin",
            #[cfg(feature = "bench-ablations")]
            LockId::AllSpin => "spinbit-allspin",
        }
    }

    /// Whether the lock runs in cells whose every unlock is `unlock_fair`.
    fn has_fair_unlock(self) -> bool {
        with_fair_family!(self, F => std::any::type_name::<F>()).is_some()
    }

    /// Whether the lock runs in the timed cells.
    fn has_timed_lock(self) -> bool {
        with_timed_family!(self, F => std::any::type_name::<F>()).is_some()
    }

    /// Whether the lock is spinbit or one of its ablations, whose windows
    /// the policy counters describe.
    fn is_spinbit(self) -> bool {
        self.name().starts_with("spinbit")
    }

    /// Whether the lock runs in `cell`.
    fn runs_in(self, cell: Cell) -> bool {
        if cell.is_timed() && !self.has_timed_lock() {
            return false;
        }
        match cell.unlock {
            Unlock::Plain => true,
            Unlock::Fair => self.has_fair_unlock(),
        }
    }
}

// ---------------------------------------------------------------------------
// Clocks, CPU accounting, calibration
// ---------------------------------------------------------------------------

/// The CPU's own counter: cheap enough to read around every `lock()`.
#[inline(always)]
fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC is available on every x86_64 CPU and only reads the
        // time-stamp counter.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(target_arch = "aarch64")]
    {
        let t: u64;
        // SAFETY: Linux lets user space read CNTVCT_EL0 (the virtual count
        // register); the instruction reads one register and touches no
        // memory.
        unsafe {
            core::arch::asm!("mrs {t}, cntvct_el0", t = out(reg) t, options(nomem, nostack, preserves_flags));
        }
        t
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// `steps` dependent xor-shift-multiply steps on `x`: the unit of simulated
/// work. The shift makes a step non-linear, so the compiler cannot fold
/// several steps into one (as it would fold a chain of multiply-adds).
#[inline(always)]
fn work(mut x: u64, steps: u32) -> u64 {
    for _ in 0..black_box(steps) {
        x = (x ^ (x >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    x
}

/// Start-up calibration, recorded in the output.
#[derive(Clone, Copy)]
struct Calibration {
    /// Nanoseconds per step of [`work`].
    unit_ns: f64,
    /// Nanoseconds per tick of [`ticks`].
    tick_ns: f64,
}

fn calibrate() -> Calibration {
    // Steps: best of several ~10 ms runs (the least disturbed one).
    let steps = 2_000_000u32;
    let mut unit_ns = f64::INFINITY;
    let mut x = 1u64;
    for _ in 0..7 {
        let t = Instant::now();
        x = work(x, steps);
        unit_ns = unit_ns.min(t.elapsed().as_nanos() as f64 / steps as f64);
    }
    black_box(x);
    // Ticks: compare against `Instant` over 50 ms.
    let (t0, k0) = (Instant::now(), ticks());
    thread::sleep(Duration::from_millis(50));
    let (k1, ns) = (ticks(), t0.elapsed().as_nanos() as f64);
    let tick_ns = ns / (k1.wrapping_sub(k0).max(1)) as f64;
    Calibration { unit_ns, tick_ns }
}

// ---------------------------------------------------------------------------
// Windows
// ---------------------------------------------------------------------------

/// What one worker thread reports.
struct ThreadOut {
    ops: u64,
    /// Acquire latencies, in ticks.
    hist: Histogram<u64>,
    /// Timed attempts that timed out (not operations); 0 in untimed cells.
    timed_out: u64,
}

fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 1 << 42, 2).expect("valid histogram bounds")
}

/// One window's raw result.
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    ops: u64,
    secs: f64,
    ops_per_sec: f64,
    cpu_ns_per_op: f64,
    fairness: f64,
    ctxsw_per_op: f64,
    /// CPUs' worth of time other processes used during the window (busy time
    /// of the machine minus this process's, over the window): the noise.
    others_cpu: f64,
    /// Acquire latency percentiles in ns (NaN when not measured).
    p50: f64,
    p99: f64,
    p999: f64,
    max: f64,
    /// Timed cells: the fraction of `try_lock_for` calls that timed out
    /// (NaN in other cells).
    timed_out: f64,
}

/// [`run_window`], summarised.
fn window<W>(threads: usize, dur: Duration, min_ops: u64, tick_ns: f64, worker: W) -> Sample
where
    W: Fn(usize, &Window) -> ThreadOut + Sync,
{
    let (outs, secs, u0, u1) = run_window(threads, dur, min_ops, worker, || {});
    summarize(&outs, secs, u0, u1, tick_ns)
}

fn summarize(outs: &[ThreadOut], secs: f64, u0: Usage, u1: Usage, tick_ns: f64) -> Sample {
    let ops: u64 = outs.iter().map(|o| o.ops).sum();
    let timed_out: u64 = outs.iter().map(|o| o.timed_out).sum();
    let min = outs.iter().map(|o| o.ops).min().unwrap_or(0);
    let max = outs.iter().map(|o| o.ops).max().unwrap_or(0);
    let mut hist = new_hist();
    for o in outs {
        hist.add(&o.hist).expect("histograms with equal bounds");
    }
    let per_op = |x: f64| x / ops.max(1) as f64;
    let lat = |q: f64| {
        if hist.is_empty() { f64::NAN } else { hist.value_at_quantile(q) as f64 * tick_ns }
    };
    Sample {
        ops,
        secs,
        ops_per_sec: ops as f64 / secs,
        cpu_ns_per_op: per_op(u1.cpu_ns - u0.cpu_ns),
        fairness: if max == 0 { 0.0 } else { min as f64 / max as f64 },
        ctxsw_per_op: per_op((u1.ctxsw - u0.ctxsw) as f64),
        others_cpu: ((u1.system_ns - u0.system_ns) - (u1.cpu_ns - u0.cpu_ns)).max(0.0)
            / (secs * 1e9),
        p50: lat(0.5),
        p99: lat(0.99),
        p999: lat(0.999),
        max: if hist.is_empty() { f64::NAN } else { hist.max() as f64 * tick_ns },
        timed_out: timed_out as f64 / (ops + timed_out).max(1) as f64,
    }
}

// ---------------------------------------------------------------------------
// Workloads
// ---------------------------------------------------------------------------

/// What the threads of a cell do.
#[derive(Clone, Copy, Debug)]
enum Workload {
    Uncontended,
    /// As `Uncontended`, taking the lock with `try_lock_for(TIMEOUT)`.
    UncontendedTimed,
    Contended {
        threads: usize,
        cs: u32,
        think: u32,
    },
    /// As `Contended` with think 0, every acquisition `try_lock_for(TIMEOUT)`.
    Timed {
        threads: usize,
        cs: u32,
    },
    Handoff {
        cs: u32,
    },
    Queue {
        threads: usize,
    },
    /// parking_lot's own benchmark (`benchmark/src/bin/mutex.rs`): `inner`
    /// f64 multiply-adds on the guarded `f64`, unlock, `outer` on a
    /// thread-local `f64`; the lock between 300-byte pads.
    PlBench {
        threads: usize,
        inner: u32,
        outer: u32,
    },
    /// matklad's lock-bench: `locks` cache-padded `Mutex<u64>`s, each
    /// operation increments one picked at random.
    LockBench {
        threads: usize,
        locks: u32,
    },
}

/// The f64 multiply-add iterations inside the lock in the `plbench` cells
/// (parking_lot's benchmark is usually run with 1).
const PL_INNER: u32 = 1;

/// The timeout of every `try_lock_for` in the timed cells.
const TIMEOUT: Duration = Duration::from_millis(1);

/// Where the guarded data sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// Right after the lock word, in its cache line: `Mutex<u64>`.
    Inline,
    /// On a cache line of its own: `Mutex<CachePadded<u64>>`.
    Split,
}

/// How every critical section ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unlock {
    /// Dropping the guard.
    Plain,
    /// `unlock_fair`; only locks that have it run such cells.
    Fair,
}

/// A benchmark cell: one workload with its parameters, on one layout, with
/// one way of unlocking.
#[derive(Clone, Copy, Debug)]
struct Cell {
    workload: Workload,
    layout: Layout,
    unlock: Unlock,
}

impl Layout {
    fn name(self) -> &'static str {
        match self {
            Layout::Inline => "inline",
            Layout::Split => "split",
        }
    }
}

impl Unlock {
    fn name(self) -> &'static str {
        match self {
            Unlock::Plain => "plain",
            Unlock::Fair => "fair",
        }
    }
}

impl Cell {
    /// The workload's name, as the `bench` field of the results.
    fn bench(self) -> &'static str {
        match self.workload {
            Workload::Uncontended => "uncontended",
            Workload::UncontendedTimed => "uncontended-timed",
            Workload::Contended { .. } => "contended",
            Workload::Timed { .. } => "timed",
            Workload::Handoff { .. } => "handoff",
            Workload::Queue { .. } => "queue",
            Workload::PlBench { .. } => "plbench",
            Workload::LockBench { .. } => "lockbench",
        }
    }
    fn group(self) -> String {
        // Fair contended cells are `fair-...`; a fair cell of another
        // workload would be `<workload>-fair-...`.
        let kind = match (self.workload, self.unlock) {
            (Workload::Contended { .. }, Unlock::Fair) => "fair".to_string(),
            (_, Unlock::Fair) => format!("{}-fair", self.bench()),
            (_, Unlock::Plain) => self.bench().to_string(),
        };
        let prefix = format!("{kind}-{}", self.layout.name());
        match self.workload {
            Workload::Uncontended | Workload::UncontendedTimed => prefix,
            Workload::Contended { threads, cs, think } => {
                format!("{prefix}/t{threads}/cs{cs}/think{think}")
            }
            Workload::Timed { threads, cs } => format!("{prefix}/t{threads}/cs{cs}/think0"),
            Workload::Handoff { cs } => format!("{prefix}/cs{cs}"),
            Workload::Queue { threads } => format!("{prefix}/t{threads}"),
            Workload::PlBench { threads, inner, outer } => {
                format!("{prefix}/t{threads}/in{inner}/out{outer}")
            }
            Workload::LockBench { threads, locks } => format!("{prefix}/t{threads}/locks{locks}"),
        }
    }
    /// Whether the cell's critical section and think time are counted in
    /// loop iterations of its own (`plbench`, `lockbench`) rather than in ns
    /// of [`work`]: its `cs` and `think` are `null` in the results.
    fn has_ns_params(self) -> bool {
        !matches!(self.workload, Workload::PlBench { .. } | Workload::LockBench { .. })
    }
    /// (threads, cs ns, think ns); 0 ns for the cells without
    /// [`Cell::has_ns_params`].
    fn params(self) -> (usize, u32, u32) {
        match self.workload {
            Workload::Uncontended | Workload::UncontendedTimed => (1, 0, 0),
            Workload::Contended { threads, cs, think } => (threads, cs, think),
            Workload::Timed { threads, cs } => (threads, cs, 0),
            Workload::Handoff { cs } => (2, cs, 0),
            Workload::Queue { threads } => (threads, 0, 0),
            Workload::PlBench { threads, .. } | Workload::LockBench { threads, .. } => {
                (threads, 0, 0)
            }
        }
    }
    /// Whether every acquisition is `try_lock_for(TIMEOUT)`.
    fn is_timed(self) -> bool {
        matches!(self.workload, Workload::UncontendedTimed | Workload::Timed { .. })
    }
    /// Whether the cell is one thread, measured by criterion's plain `iter`.
    fn is_uncontended(self) -> bool {
        matches!(self.workload, Workload::Uncontended | Workload::UncontendedTimed)
    }
    /// Time every `n`th acquisition (0: none).
    fn lat_every(self) -> u64 {
        match self.workload {
            Workload::Uncontended | Workload::UncontendedTimed => 0,
            _ if self.params().1 >= 1000 => 1,
            _ => 8,
        }
    }
}

/// The guarded value in one [`Layout`]: `Self::Data<T>` derefs to `T`.
trait Place: 'static {
    type Data<T: Send + 'static>: DerefMut<Target = T> + Send + 'static;
    fn wrap<T: Send + 'static>(value: T) -> Self::Data<T>;
}

/// [`Layout::Inline`].
struct InlineP;
/// [`Layout::Split`].
struct SplitP;

/// A `T`, laid out exactly as a `T` (so `Mutex<Bare<u64>>` is laid out as
/// `Mutex<u64>`), with the `Deref` the harness wants from every layout.
#[repr(transparent)]
struct Bare<T>(T);

impl<T> Deref for Bare<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> DerefMut for Bare<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl Place for InlineP {
    type Data<T: Send + 'static> = Bare<T>;
    fn wrap<T: Send + 'static>(value: T) -> Bare<T> {
        Bare(value)
    }
}

impl Place for SplitP {
    type Data<T: Send + 'static> = CachePadded<T>;
    fn wrap<T: Send + 'static>(value: T) -> CachePadded<T> {
        CachePadded::new(value)
    }
}

/// A new lock of family `F` guarding `value` laid out as `P` says, in an
/// allocation of its own that starts a cache line and shares none.
fn new_lock<F: Family, P: Place, T: Send + 'static>(
    value: T,
) -> Box<CachePadded<F::M<P::Data<T>>>> {
    Box::new(CachePadded::new(F::M::<P::Data<T>>::new(P::wrap(value))))
}

/// Units of [`work`] for `ns` nanoseconds.
fn units(ns: u32, cal: Calibration) -> u32 {
    (ns as f64 / cal.unit_ns).round() as u32
}

/// The critical section: one increment, then `steps` of dependent arithmetic,
/// all on the guarded value.
#[inline(always)]
fn critical(data: &mut u64, steps: u32) {
    *data = work(data.wrapping_add(1), steps);
}

/// Times `lock()` when `timed`, recording ticks into `hist`.
#[inline(always)]
fn timed_lock<'a, T, M: BenchMutex<T>>(
    m: &'a M,
    timed: bool,
    hist: &mut Histogram<u64>,
) -> M::Guard<'a> {
    if timed {
        let t0 = ticks();
        let g = m.lock();
        hist.saturating_record(ticks().wrapping_sub(t0).max(1));
        g
    } else {
        m.lock()
    }
}

/// Timing mask: acquisition `i` is timed iff `i & mask == 0`.
fn lat_mask(every: u64) -> Option<u64> {
    (every != 0).then(|| {
        debug_assert!(every.is_power_of_two());
        every - 1
    })
}

/// One window of `cell` on lock family `F`.
fn run_cell<F: Family>(cell: Cell, dur: Duration, min_ops: u64, cal: Calibration) -> Sample {
    match cell.layout {
        Layout::Inline => run_placed::<F, InlineP>(cell, dur, min_ops, cal),
        Layout::Split => run_placed::<F, SplitP>(cell, dur, min_ops, cal),
    }
}

/// One window of `cell` on lock family `F`, the data laid out as `P`.
fn run_placed<F: Family, P: Place>(
    cell: Cell,
    dur: Duration,
    min_ops: u64,
    cal: Calibration,
) -> Sample {
    let (threads, cs_ns, think_ns) = cell.params();
    let cs = units(cs_ns, cal);
    let think = units(think_ns, cal);
    let mask = lat_mask(cell.lat_every());
    match cell.workload {
        Workload::Uncontended | Workload::Contended { .. } => {
            let m = new_lock::<F, P, u64>(0);
            let m = &**m;
            window(threads, dur, min_ops, cal.tick_ns, |id, flags| {
                let mut hist = new_hist();
                let mut local = id as u64;
                let mut ops = 0u64;
                while flags.running(id, ops) {
                    let timed = mask.is_some_and(|k| ops & k == 0);
                    let mut g = timed_lock(m, timed, &mut hist);
                    critical(&mut g, cs);
                    F::unlock(g);
                    local = work(local, think);
                    ops += 1;
                }
                black_box(local);
                ThreadOut { ops, hist, timed_out: 0 }
            })
        }
        Workload::Handoff { .. } => {
            let m = new_lock::<F, P, u64>(0);
            let m = &**m;
            let turn = CachePadded::new(AtomicUsize::new(0));
            let turn = &turn;
            window(2, dur, min_ops, cal.tick_ns, |me, flags| {
                let mut hist = new_hist();
                let mut ops = 0u64;
                'outer: while flags.running(me, ops) {
                    // Wait for our turn, outside the lock.
                    let mut spins = 0u32;
                    while turn.load(Ordering::Acquire) != me {
                        if !flags.running(me, ops) {
                            break 'outer;
                        }
                        spins += 1;
                        if spins < 100 {
                            std::hint::spin_loop();
                        } else {
                            thread::yield_now();
                        }
                    }
                    let timed = mask.is_some_and(|k| ops & k == 0);
                    let mut g = timed_lock(m, timed, &mut hist);
                    // Pass the turn while holding the lock: the other thread
                    // now heads for `lock()` and waits out our critical section.
                    turn.store(1 - me, Ordering::Release);
                    critical(&mut g, cs);
                    F::unlock(g);
                    ops += 1;
                }
                ThreadOut { ops, hist, timed_out: 0 }
            })
        }
        Workload::Queue { threads } => {
            const BATCH: usize = 100;
            let m = new_lock::<F, P, VecDeque<u64>>(VecDeque::with_capacity(BATCH * threads));
            let m = &**m;
            window(threads, dur, min_ops, cal.tick_ns, |id, flags| {
                let mut hist = new_hist();
                let mut ops = 0u64;
                'outer: loop {
                    for i in 0..BATCH {
                        if !flags.running(id, ops) {
                            break 'outer;
                        }
                        let timed = mask.is_some_and(|k| ops & k == 0);
                        let mut g = timed_lock(m, timed, &mut hist);
                        g.push_back((id * BATCH + i) as u64);
                        F::unlock(g);
                        ops += 1;
                    }
                    for _ in 0..BATCH {
                        if !flags.running(id, ops) {
                            break 'outer;
                        }
                        let timed = mask.is_some_and(|k| ops & k == 0);
                        let mut g = timed_lock(m, timed, &mut hist);
                        let v = g.pop_front();
                        F::unlock(g);
                        // We pushed a full batch before popping any of it, so
                        // the queue holds at least our unpopped items.
                        assert!(v.is_some(), "queue empty although this thread's items are in it");
                        black_box(v);
                        ops += 1;
                    }
                }
                ThreadOut { ops, hist, timed_out: 0 }
            })
        }
        Workload::PlBench { threads, inner, outer } => {
            let m = Box::new(Padded {
                pad: [0; 300],
                lock: F::M::<P::Data<f64>>::new(P::wrap(1.0)),
                pad2: [0; 300],
            });
            black_box((&m.pad, &m.pad2));
            let m = &m.lock;
            window(threads, dur, min_ops, cal.tick_ns, |id, flags| {
                let mut hist = new_hist();
                let (inner, outer) = (black_box(inner), black_box(outer));
                let mut local = 1.0 + id as f64;
                let mut ops = 0u64;
                while flags.running(id, ops) {
                    let timed = mask.is_some_and(|k| ops & k == 0);
                    let mut g = timed_lock(m, timed, &mut hist);
                    let shared: &mut f64 = &mut g;
                    for _ in 0..inner {
                        *shared = f64_step(*shared);
                    }
                    F::unlock(g);
                    for _ in 0..outer {
                        local = f64_step(local);
                    }
                    ops += 1;
                }
                black_box(local);
                ThreadOut { ops, hist, timed_out: 0 }
            })
        }
        Workload::LockBench { threads, locks } => {
            let ms: Vec<CachePadded<F::M<P::Data<u64>>>> =
                (0..locks).map(|_| CachePadded::new(F::M::new(P::wrap(0)))).collect();
            let all = &ms[..];
            let s = window(threads, dur, min_ops, cal.tick_ns, |id, flags| {
                let mut hist = new_hist();
                // xorshift64, a different non-zero seed per thread.
                let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ (id as u64 + 1).wrapping_mul(0x2545_f491);
                let n = u64::from(locks);
                let mut ops = 0u64;
                while flags.running(id, ops) {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    // Multiply-shift: uniform enough in 0..n, no division.
                    let m = &all[(((rng >> 32) * n) >> 32) as usize];
                    let timed = mask.is_some_and(|k| ops & k == 0);
                    let mut g = timed_lock(&**m, timed, &mut hist);
                    **g += 1;
                    F::unlock(g);
                    ops += 1;
                }
                ThreadOut { ops, hist, timed_out: 0 }
            });
            // Every operation incremented one counter under its lock.
            let total: u64 = all.iter().map(|m| **m.lock()).sum();
            assert_eq!(total, s.ops, "lockbench: increments lost, the locks did not exclude");
            s
        }
        Workload::UncontendedTimed | Workload::Timed { .. } => {
            unreachable!("timed cells run in run_timed")
        }
    }
}

/// The lock of the `plbench` cells as parking_lot's benchmark lays it out:
/// between two 300-byte pads (`#[repr(C)]` keeps them on either side).
#[repr(C)]
struct Padded<M> {
    pad: [u8; 300],
    lock: M,
    pad2: [u8; 300],
}

/// One step of the `plbench` cells' dependent f64 arithmetic (a multiply
/// and an add, as in parking_lot's benchmark).
#[inline(always)]
fn f64_step(v: f64) -> f64 {
    v * 1.000_001 + 0.5
}

/// A new lock of timed family `F`, as [`new_lock`] places it.
fn new_timed_lock<F: TimedFamily, P: Place, T: Send + 'static>(
    value: T,
) -> Box<CachePadded<F::Timed<P::Data<T>>>> {
    Box::new(CachePadded::new(F::Timed::<P::Data<T>>::new(P::wrap(value))))
}

/// One window of a timed `cell` on lock family `F`: each thread loops
/// `try_lock_for(TIMEOUT)` and, if that took the lock, the critical section
/// and `unlock`. An operation is an acquisition; attempts that time out are
/// counted apart, and the latency histogram times every attempt (as
/// `lat_every` says), whatever its outcome.
fn run_timed<F: TimedFamily>(cell: Cell, dur: Duration, min_ops: u64, cal: Calibration) -> Sample {
    match cell.layout {
        Layout::Inline => run_timed_placed::<F, InlineP>(cell, dur, min_ops, cal),
        Layout::Split => run_timed_placed::<F, SplitP>(cell, dur, min_ops, cal),
    }
}

fn run_timed_placed<F: TimedFamily, P: Place>(
    cell: Cell,
    dur: Duration,
    min_ops: u64,
    cal: Calibration,
) -> Sample {
    let (threads, cs_ns, _) = cell.params();
    let cs = units(cs_ns, cal);
    let mask = lat_mask(cell.lat_every());
    let m = new_timed_lock::<F, P, u64>(0);
    let m = &**m;
    window(threads, dur, min_ops, cal.tick_ns, |id, flags| {
        let mut hist = new_hist();
        let (mut ops, mut attempts, mut timed_out) = (0u64, 0u64, 0u64);
        while flags.running(id, ops) {
            let timed = mask.is_some_and(|k| attempts & k == 0);
            let t0 = if timed { ticks() } else { 0 };
            let g = m.try_lock_for(TIMEOUT);
            if timed {
                hist.saturating_record(ticks().wrapping_sub(t0).max(1));
            }
            attempts += 1;
            match g {
                Some(mut g) => {
                    critical(&mut g, cs);
                    drop(g);
                    ops += 1;
                }
                None => timed_out += 1,
            }
        }
        ThreadOut { ops, hist, timed_out }
    })
}

/// One window of `cell` on `lock`.
fn run_lock(lock: LockId, cell: Cell, dur: Duration, min_ops: u64, cal: Calibration) -> Sample {
    if cell.is_timed() {
        return with_timed_family!(lock, F => run_timed::<F>(cell, dur, min_ops, cal))
            .expect("only locks with a timed lock run in timed cells");
    }
    let mut s = match cell.unlock {
        Unlock::Plain => with_family!(lock, F => run_cell::<F>(cell, dur, min_ops, cal)),
        Unlock::Fair => with_fair_family!(lock, F => run_cell::<F>(cell, dur, min_ops, cal))
            .expect("only locks with a fair unlock run in fair cells"),
    };
    s.timed_out = f64::NAN;
    s
}

// ---------------------------------------------------------------------------
// Profiles, arguments, output
// ---------------------------------------------------------------------------

/// A set of cells: every critical section with every listed thread count,
/// without think time and (for `think_threads`) with it, plus handoffs and
/// queues.
struct Matrix {
    uncontended: bool,
    cs: &'static [u32],
    /// Thread counts run with think 0.
    threads: &'static [usize],
    /// Thread counts also run with think ~10x cs (cs 0: ~100 ns).
    think_threads: &'static [usize],
    handoff_cs: &'static [u32],
    queue_threads: &'static [usize],
    /// `uncontended-timed`: one thread, `try_lock_for(TIMEOUT)` + unlock.
    timed_uncontended: bool,
    /// `timed` cells (think 0): these thread counts x these critical
    /// sections.
    timed_threads: &'static [usize],
    timed_cs: &'static [u32],
    /// `plbench` cells: these thread counts x these iterations outside the
    /// lock ([`PL_INNER`] inside).
    pl_threads: &'static [usize],
    pl_outer: &'static [u32],
    /// `lockbench` cells: these thread counts x these numbers of locks.
    lockbench_threads: &'static [usize],
    lockbench_locks: &'static [u32],
    /// `contended` cells at these multiples of the CPU count (threads =
    /// multiple x `available_parallelism`) for each (cs, think) of
    /// `cpu_cs_think`; a cell that another line of the profile already
    /// has is not run twice.
    cpu_multiples: &'static [usize],
    cpu_cs_think: &'static [(u32, u32)],
    /// Cells named one by one, after all of the above.
    listed: &'static [Workload],
}

impl Matrix {
    const EMPTY: Matrix = Matrix {
        uncontended: false,
        cs: &[],
        threads: &[],
        think_threads: &[],
        handoff_cs: &[],
        queue_threads: &[],
        timed_uncontended: false,
        timed_threads: &[],
        timed_cs: &[],
        pl_threads: &[],
        pl_outer: &[],
        lockbench_threads: &[],
        lockbench_locks: &[],
        cpu_multiples: &[],
        cpu_cs_think: &[],
        listed: &[],
    };

    /// The cells, for a machine of `cpus` CPUs.
    fn cells(&self, layout: Layout, unlock: Unlock, cpus: usize) -> Vec<Cell> {
        let mut w = Vec::new();
        if self.uncontended {
            w.push(Workload::Uncontended);
        }
        if self.timed_uncontended {
            w.push(Workload::UncontendedTimed);
        }
        for &cs in self.cs {
            for (think, threads) in [(0, self.threads), (10 * cs.max(10), self.think_threads)] {
                for &threads in threads {
                    w.push(Workload::Contended { threads, cs, think });
                }
            }
        }
        w.extend(self.handoff_cs.iter().map(|&cs| Workload::Handoff { cs }));
        w.extend(self.queue_threads.iter().map(|&threads| Workload::Queue { threads }));
        for &cs in self.timed_cs {
            w.extend(self.timed_threads.iter().map(|&threads| Workload::Timed { threads, cs }));
        }
        for &outer in self.pl_outer {
            w.extend(self.pl_threads.iter().map(|&threads| Workload::PlBench {
                threads,
                inner: PL_INNER,
                outer,
            }));
        }
        for &locks in self.lockbench_locks {
            w.extend(
                self.lockbench_threads
                    .iter()
                    .map(|&threads| Workload::LockBench { threads, locks }),
            );
        }
        for &(cs, think) in self.cpu_cs_think {
            w.extend(self.cpu_multiples.iter().map(|&k| Workload::Contended {
                threads: k * cpus,
                cs,
                think,
            }));
        }
        w.extend_from_slice(self.listed);
        w.into_iter().map(|workload| Cell { workload, layout, unlock }).collect()
    }
}

struct Profile {
    name: &'static str,
    /// Inline layout, plain unlock: what most users run.
    inline: Matrix,
    /// Inline layout, every unlock `unlock_fair`.
    fair: Matrix,
    /// Split layout, plain unlock.
    split: Matrix,
    reps: usize,
    window: Duration,
    sample_size: usize,
    warm_up: Duration,
    measurement: Duration,
    /// The locks this profile runs (`None`: every lock of the build).
    locks: Option<&'static [LockId]>,
    /// Whether criterion measures each (cell, lock) pair after the
    /// companion pass; without it the run is the companion pass alone.
    criterion: bool,
}

const QUICK: Profile = Profile {
    name: "quick",
    inline: Matrix {
        uncontended: true,
        cs: &[0, 1000],
        threads: &[1, 2, 8, 32],
        think_threads: &[],
        handoff_cs: &[1000],
        queue_threads: &[8],
        timed_uncontended: true,
        timed_threads: &[8],
        timed_cs: &[1000],
        pl_threads: &[],
        pl_outer: &[],
        lockbench_threads: &[],
        lockbench_locks: &[],
        // One oversubscribed cell: 8x the CPUs (t16 on 2 CPUs).
        cpu_multiples: &[8],
        cpu_cs_think: &[(0, 0)],
        listed: &[
            Workload::PlBench { threads: 8, inner: PL_INNER, outer: 10 },
            Workload::LockBench { threads: 8, locks: 2 },
        ],
    },
    fair: Matrix { cs: &[0, 1000], threads: &[8], ..Matrix::EMPTY },
    split: Matrix { cs: &[0], threads: &[2, 8], ..Matrix::EMPTY },
    reps: 3,
    window: Duration::from_millis(80),
    sample_size: 10,
    warm_up: Duration::from_millis(30),
    measurement: Duration::from_millis(150),
    locks: None,
    criterion: true,
};

const FULL: Profile = Profile {
    name: "full",
    inline: Matrix {
        uncontended: true,
        cs: &[0, 100, 1000, 10_000],
        threads: &[1, 2, 4, 8, 16, 32, 64],
        think_threads: &[2, 8, 32, 64],
        handoff_cs: &[0, 1000, 10_000],
        queue_threads: &[2, 8, 32],
        timed_uncontended: true,
        timed_threads: &[8, 32],
        timed_cs: &[0, 1000],
        pl_threads: &[2, 8, 32],
        pl_outer: &[0, 10, 100, 1000],
        lockbench_threads: &[8, 32],
        lockbench_locks: &[2, 64, 1000],
        cpu_multiples: &[1, 2, 4, 8],
        cpu_cs_think: &[(0, 0), (1000, 10_000)],
        listed: &[],
    },
    fair: Matrix { cs: &[0, 1000], threads: &[2, 8, 32], ..Matrix::EMPTY },
    split: Matrix {
        cs: &[0, 1000, 10_000],
        threads: &[2, 8, 32],
        handoff_cs: &[1000],
        queue_threads: &[8],
        ..Matrix::EMPTY
    },
    reps: 5,
    window: Duration::from_millis(400),
    sample_size: 10,
    warm_up: Duration::from_millis(100),
    measurement: Duration::from_millis(600),
    locks: None,
    criterion: true,
};

/// The sensitivity sweep's point: the key cells, spinbit and the four
/// portable peers, and the fair-unlock cells; the companion pass only (see
/// `benches/sweep.sh`).
const SWEEP: Profile = Profile {
    name: "sweep",
    inline: Matrix {
        listed: &[
            Workload::Contended { threads: 2, cs: 0, think: 0 },
            Workload::Contended { threads: 8, cs: 0, think: 0 },
            Workload::Contended { threads: 32, cs: 0, think: 0 },
            Workload::Contended { threads: 8, cs: 1000, think: 0 },
            Workload::Contended { threads: 32, cs: 1000, think: 0 },
            Workload::Contended { threads: 32, cs: 100, think: 1000 },
            Workload::Contended { threads: 64, cs: 100, think: 0 },
            Workload::Contended { threads: 64, cs: 1000, think: 0 },
            Workload::Contended { threads: 64, cs: 10_000, think: 0 },
            Workload::Contended { threads: 32, cs: 10_000, think: 100_000 },
            Workload::Handoff { cs: 0 },
            Workload::Handoff { cs: 1000 },
            Workload::Handoff { cs: 10_000 },
            Workload::Contended { threads: 4, cs: 0, think: 0 },
            Workload::Contended { threads: 16, cs: 0, think: 0 },
            Workload::Contended { threads: 64, cs: 0, think: 0 },
            Workload::Contended { threads: 8, cs: 100, think: 0 },
            Workload::Contended { threads: 32, cs: 100, think: 0 },
            Workload::Contended { threads: 16, cs: 1000, think: 0 },
        ],
        ..Matrix::EMPTY
    },
    fair: Matrix { cs: &[0, 1000], threads: &[2, 8, 32], ..Matrix::EMPTY },
    split: Matrix::EMPTY,
    reps: 3,
    window: Duration::from_millis(200),
    sample_size: 10,
    warm_up: Duration::from_millis(30),
    measurement: Duration::from_millis(150),
    locks: Some(&[
        LockId::Spinbit,
        LockId::ParkingLot013,
        LockId::ParkingLot012,
        LockId::Usync,
        LockId::Std,
    ]),
    criterion: false,
};

/// Issue 45's 2-core proxies of the many-core regimes: parking_lot's and
/// matklad's workloads where spinbit trailed at 49c71e6, moderate
/// contention (think time 1-10x the critical section) at 2 and 3 threads,
/// the heavy-contention cells whose lead must stay, and oversubscription
/// (8-32x the CPUs of a 2-core machine); every peer, the companion pass
/// only (about 3 minutes on 2 cores).
const PROXY: Profile = Profile {
    name: "proxy",
    inline: Matrix {
        listed: &[
            Workload::PlBench { threads: 1, inner: PL_INNER, outer: 0 },
            Workload::PlBench { threads: 2, inner: PL_INNER, outer: 100 },
            Workload::PlBench { threads: 4, inner: PL_INNER, outer: 100 },
            Workload::PlBench { threads: 4, inner: PL_INNER, outer: 10 },
            Workload::LockBench { threads: 2, locks: 64 },
            Workload::LockBench { threads: 8, locks: 64 },
            Workload::LockBench { threads: 8, locks: 2 },
            Workload::Contended { threads: 2, cs: 1000, think: 1000 },
            Workload::Contended { threads: 2, cs: 1000, think: 10_000 },
            Workload::Contended { threads: 3, cs: 1000, think: 10_000 },
            Workload::Contended { threads: 3, cs: 100, think: 1000 },
            Workload::Contended { threads: 2, cs: 0, think: 0 },
            Workload::Contended { threads: 8, cs: 0, think: 0 },
            Workload::Contended { threads: 32, cs: 0, think: 0 },
            Workload::Contended { threads: 16, cs: 1000, think: 10_000 },
            Workload::Contended { threads: 64, cs: 1000, think: 0 },
            Workload::Handoff { cs: 1000 },
        ],
        ..Matrix::EMPTY
    },
    fair: Matrix::EMPTY,
    split: Matrix::EMPTY,
    reps: 5,
    window: Duration::from_millis(200),
    sample_size: 10,
    warm_up: Duration::from_millis(30),
    measurement: Duration::from_millis(150),
    locks: None,
    criterion: false,
};

impl Profile {
    fn from_env() -> &'static Profile {
        match std::env::var("SPINBIT_BENCH_PROFILE").as_deref() {
            Ok("quick") => &QUICK,
            Ok("sweep") => &SWEEP,
            Ok("proxy") => &PROXY,
            Ok("full") | Ok("") | Err(_) => &FULL,
            Ok(other) => {
                panic!(
                    "SPINBIT_BENCH_PROFILE={other}: expected `quick`, `sweep`, `proxy` or `full`"
                )
            }
        }
    }

    /// Wall-clock seconds one (cell, lock) pair takes: the companion
    /// windows, then criterion's warm-up and samples. Criterion's part
    /// measured 1.4-2.6x its nominal warm-up + measurement time in the full
    /// profile on a 2-core machine (whole windows, windows stretched until
    /// they reach criterion's operation count, threads spawned and joined
    /// for each), so it is counted twice.
    fn secs_per_run(&self) -> f64 {
        let criterion =
            if self.criterion { (self.warm_up + self.measurement).as_secs_f64() } else { 0.0 };
        self.reps as f64 * self.window.as_secs_f64() + 2.0 * criterion + 0.05
    }

    /// The profile's cells for a machine of `cpus` CPUs, each once (the
    /// cells at multiples of the CPU count can coincide with others).
    fn cells(&self, cpus: usize) -> Vec<Cell> {
        let mut cells = self.inline.cells(Layout::Inline, Unlock::Plain, cpus);
        cells.extend(self.fair.cells(Layout::Inline, Unlock::Fair, cpus));
        cells.extend(self.split.cells(Layout::Split, Unlock::Plain, cpus));
        let mut seen = std::collections::HashSet::new();
        cells.retain(|c| seen.insert(c.group()));
        cells
    }
}

impl Args {
    fn matches(&self, id: &str) -> bool {
        match &self.filter {
            None => true,
            Some(f) if self.exact => id == f,
            Some(f) => id.contains(f.as_str()),
        }
    }
}

/// Whether this process runs under an emulator (qemu-user): the target's
/// architecture is not the one /proc/cpuinfo describes. `SPINBIT_BENCH_EMULATED`
/// (0/1) overrides.
fn emulated(cpuinfo: &str) -> bool {
    if let Ok(v) = std::env::var("SPINBIT_BENCH_EMULATED") {
        return v == "1" || v == "true";
    }
    let host_x86 = cpuinfo.contains("vendor_id");
    let host_arm = cpuinfo.contains("CPU implementer");
    let target_x86 = cfg!(any(target_arch = "x86_64", target_arch = "x86"));
    let target_arm = cfg!(any(target_arch = "aarch64", target_arch = "arm"));
    (host_x86 && !target_x86) || (host_arm && !target_arm)
}

fn out_path() -> PathBuf {
    results_path("SPINBIT_BENCH_OUT", "")
}

fn machine_fields(cpuinfo: &str) -> String {
    let kernel = kernel();
    let cores = thread::available_parallelism().map_or(0, |n| n.get());
    let unix = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    format!(
        "\"cpu\":{},\"cpu_id\":{},\"cores\":{cores},\"kernel\":{},\"commit\":{},\"unix_time\":{unix}",
        js(&cpu_model(cpuinfo)),
        js(&cpu_id(cpuinfo)),
        js(&kernel),
        js(&commit()),
    )
}

/// One tuning constant of the crate as this run uses it (see the `tuning`
/// feature in Cargo.toml).
struct Tuning {
    name: &'static str,
    value: u64,
    /// Set by `SPINBIT_<name>` (only with the `tuning` feature).
    overridden: bool,
}

/// The crate's tuning constants, each with its value in this run: the
/// environment's `SPINBIT_<name>` with the `tuning` feature, else the
/// constant's value in the source (the crate does not export its
/// constants, so they are read from the source this bench is built with).
/// Parsed with the crate's rules; a bad value panics here, before anything
/// is measured.
fn tuning() -> Vec<Tuning> {
    const SOURCE: &str = include_str!("../src/arch/mod.rs");
    const NAMES: [&str; 10] = [
        "SPIN_NS",
        "PING_PONG_MAX_NS",
        "STARVING_NS",
        "STARVING_FEW_NS",
        "STARVED_AWAKE_NS",
        "ARRIVAL_YIELDS",
        "YIELD_BUSY_NS",
        "WAKE_POLL_MAX_NS",
        "BACKLOG_PER_CPU",
        "HAND_OFF_AWAKE_NS",
    ];
    let parse = |t: &str| t.trim().replace('_', "").parse::<u64>();
    NAMES
        .iter()
        .map(|&name| {
            let default = SOURCE
                .lines()
                .map(|l| {
                    let l = l.trim_start();
                    l.strip_prefix("pub(crate) ").unwrap_or(l)
                })
                .find_map(|l| l.strip_prefix(&format!("const {name}: ") as &str))
                .and_then(|rest| rest.split_once('=')?.1.split_once(';'))
                .and_then(|(v, _)| parse(v).ok())
                .unwrap_or_else(|| panic!("no `const {name}: .. = <integer>;` in the source"));
            let var = format!("SPINBIT_{name}");
            match std::env::var(&var) {
                Ok(text) if cfg!(feature = "tuning") => {
                    let value = parse(&text).unwrap_or_else(|e| {
                        panic!("{var}={text:?} is not a non-negative integer: {e}")
                    });
                    Tuning { name, value, overridden: true }
                }
                Ok(_) => {
                    eprintln!("{var} is ignored: build with `--features tuning` to use it");
                    Tuning { name, value: default, overridden: false }
                }
                Err(_) => Tuning { name, value: default, overridden: false },
            }
        })
        .collect()
}

fn command_line(profile: &Profile, args: &Args, tuning: &[Tuning]) -> String {
    let mut cmd = String::new();
    for t in tuning.iter().filter(|t| t.overridden) {
        let _ = write!(cmd, "SPINBIT_{}={} ", t.name, t.value);
    }
    let _ = write!(
        cmd,
        "SPINBIT_BENCH_PROFILE={} cargo bench -p spinbit-bench --bench mutex",
        profile.name
    );
    let features: Vec<&str> = [
        cfg!(feature = "bench-ablations").then_some("bench-ablations"),
        cfg!(feature = "tuning").then_some("tuning"),
        STATS_FEATURE.then_some("stats"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !features.is_empty() {
        let _ = write!(cmd, " --features {}", features.join(","));
    }
    if !cfg!(target_arch = "x86_64") || emulated_cached() {
        let _ = write!(cmd, " --target {}", target_triple());
    }
    let passed: Vec<&str> =
        args.raw.iter().map(String::as_str).filter(|a| *a != "--bench").collect();
    if !passed.is_empty() {
        let _ = write!(cmd, " -- {}", passed.join(" "));
    }
    cmd
}

fn emulated_cached() -> bool {
    static E: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *E.get_or_init(|| emulated(&std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default()))
}

/// The median of every field over repetitions, each taken separately.
fn median_sample(reps: &[Sample]) -> Sample {
    let m = |f: fn(&Sample) -> f64| median(reps.iter().map(f).collect());
    Sample {
        ops: m(|s| s.ops as f64).round() as u64,
        secs: m(|s| s.secs),
        ops_per_sec: m(|s| s.ops_per_sec),
        cpu_ns_per_op: m(|s| s.cpu_ns_per_op),
        fairness: m(|s| s.fairness),
        ctxsw_per_op: m(|s| s.ctxsw_per_op),
        others_cpu: m(|s| s.others_cpu),
        p50: m(|s| s.p50),
        p99: m(|s| s.p99),
        p999: m(|s| s.p999),
        max: m(|s| s.max),
        timed_out: m(|s| s.timed_out),
    }
}

/// The worst of the windows: the lowest throughput (a collapse in one
/// window shows here, not in the median).
fn worst(reps: &[Sample]) -> f64 {
    reps.iter().map(|r| r.ops_per_sec).filter(|x| !x.is_nan()).fold(f64::NAN, f64::min)
}

// ---------------------------------------------------------------------------
// The policy's decisions
// ---------------------------------------------------------------------------
//
// The library's `stats` feature (`spinbit::stats`: process-wide counters of
// what the slow paths did). With it (`cargo bench -p spinbit-bench --bench mutex --features
// bench-ablations,stats`), the companion pass resets the counters before
// every window of spinbit and its ablations and reads them after it, and
// writes them, one object per window in the order the windows ran, as
// `"stats"` in that cell's JSON line; the console line shows the window of
// median throughput's. Without it, `"stats"` is `null`. The counters cover
// every spinbit mutex of the process, and only the companion windows are
// counted (criterion's are not). The library's counters cost only slow
// paths, but they are shared cache lines: a run with the feature measures
// a slightly different spinbit, so compare throughput on runs without it.

/// Whether this build has the library's `stats` feature.
const STATS_FEATURE: bool = cfg!(feature = "stats");

/// Resets the library's policy counters before a window (a no-op without
/// the `stats` feature).
fn policy_reset() {
    #[cfg(feature = "stats")]
    spinbit::stats::reset();
}

/// The library's policy counters since the last [`policy_reset`], as a
/// JSON object: slow paths entered, spin episodes and those that took the
/// lock, sleeps, wakes, hand-offs, waiters that marked themselves
/// starving, timed-out slow paths, the total and the longest slow path in
/// ns, and more (the fields of `spinbit::stats::Stats`, unlock guesses
/// that missed and the wakes' system calls among them). `None` without the `stats` feature.
fn policy_counters() -> Option<String> {
    #[cfg(feature = "stats")]
    {
        let s = spinbit::stats::snapshot();
        Some(format!(
            concat!(
                "{{\"slow_paths\":{},\"spins\":{},\"spins_won\":{},\"sleeps\":{},",
                "\"wakes\":{},\"hand_offs\":{},\"starved\":{},\"nudges\":{},\"timeouts\":{},",
                "\"wait_total_ns\":{},\"wait_max_ns\":{},\"wakes_past_spinner\":{},",
                "\"polled_wakes\":{},\"wakes_skipped\":{},\"guesses_missed\":{},",
                "\"wake_latency_total_ns\":{},\"wake_latency_max_ns\":{},",
                "\"wake_calls\":{},\"wake_call_total_ns\":{},\"wake_call_max_ns\":{}}}"
            ),
            s.slow_paths,
            s.spins,
            s.spins_won,
            s.sleeps,
            s.wakes,
            s.hand_offs,
            s.starved,
            s.nudges,
            s.timeouts,
            s.wait_total.as_nanos(),
            s.wait_max.as_nanos(),
            s.wakes_past_spinner,
            s.polled_wakes,
            s.wakes_skipped,
            s.guesses_missed,
            s.wake_latency_total.as_nanos(),
            s.wake_latency_max.as_nanos(),
            s.wake_calls,
            s.wake_call_total.as_nanos(),
            s.wake_call_max.as_nanos(),
        ))
    }
    #[cfg(not(feature = "stats"))]
    None
}

// ---------------------------------------------------------------------------
// The results file
// ---------------------------------------------------------------------------

struct Ctx {
    profile: &'static Profile,
    cal: Calibration,
    triple: String,
    emulated: bool,
    out: Option<File>,
}

impl Ctx {
    /// Writes the JSON line of `lock` in `cell`: `s`, the medians of
    /// `reps`, the windows in the order they ran; `stats`, the policy
    /// counters of each window ([`policy_counters`]).
    fn record(
        &mut self,
        cell: Cell,
        lock: LockId,
        s: &Sample,
        reps: &[Sample],
        stats: &[Option<String>],
    ) {
        let (threads, cs, think) = cell.params();
        // The ns parameters and their work units, `null` where the cell
        // counts loop iterations of its own instead.
        let ns = |x: u32| if cell.has_ns_params() { x.to_string() } else { "null".into() };
        let steps = |x: u32| {
            if cell.has_ns_params() { units(x, self.cal).to_string() } else { "null".into() }
        };
        let (inner, outer, locks) = match cell.workload {
            Workload::PlBench { inner, outer, .. } => {
                (inner.to_string(), outer.to_string(), "null".into())
            }
            Workload::LockBench { locks, .. } => ("null".into(), "null".into(), locks.to_string()),
            _ => ("null".into(), "null".into(), "null".to_string()),
        };
        let stats = if stats.iter().all(Option::is_none) {
            "null".to_string()
        } else {
            let each: Vec<&str> = stats.iter().map(|x| x.as_deref().unwrap_or("null")).collect();
            format!("[{}]", each.join(","))
        };
        let line = format!(
            concat!(
                "{{\"bench\":{},\"group\":{},\"lock\":{},\"layout\":{},\"unlock\":{},",
                "\"threads\":{},\"cs\":{},\"think\":{},\"inner\":{},\"outer\":{},\"locks\":{},",
                "\"cs_units\":{},\"think_units\":{},\"unit_ns\":{},\"ops\":{},\"secs\":{},",
                "\"ops_per_sec\":{},\"ops_per_sec_min\":{},\"ops_per_sec_reps\":[{}],",
                "\"cpu_ns_per_op\":{},\"fairness\":{},\"p50\":{},\"p99\":{},",
                "\"p999\":{},\"max\":{},\"max_reps\":[{}],\"ctxsw_per_op\":{},\"others_cpu\":{},",
                "\"lat_every\":{},\"reps\":{},\"timeout_ns\":{},\"timed_out\":{},\"stats\":{},",
                "\"profile\":{},\"target\":{},\"emulated\":{}}}\n"
            ),
            js(cell.bench()),
            js(&cell.group()),
            js(lock.name()),
            js(cell.layout.name()),
            js(cell.unlock.name()),
            threads,
            ns(cs),
            ns(think),
            inner,
            outer,
            locks,
            steps(cs),
            steps(think),
            jn(self.cal.unit_ns),
            s.ops,
            jn(s.secs),
            jn(s.ops_per_sec),
            jn(worst(reps)),
            reps.iter().map(|r| jn(r.ops_per_sec)).collect::<Vec<_>>().join(","),
            jn(s.cpu_ns_per_op),
            jn(s.fairness),
            jn(s.p50),
            jn(s.p99),
            jn(s.p999),
            jn(s.max),
            reps.iter().map(|r| jn(r.max)).collect::<Vec<_>>().join(","),
            jn(s.ctxsw_per_op),
            jn(s.others_cpu),
            cell.lat_every(),
            self.profile.reps,
            if cell.is_timed() { TIMEOUT.as_nanos().to_string() } else { "null".into() },
            jn(s.timed_out),
            stats,
            js(self.profile.name),
            js(&self.triple),
            self.emulated,
        );
        if let Some(f) = &mut self.out {
            f.write_all(line.as_bytes())
                .and_then(|()| f.flush())
                .expect("writing the benchmark results");
        }
    }
}

// ---------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------

/// Criterion's plain `iter` over one `try_lock_for(TIMEOUT)`+unlock of a
/// free mutex on one thread: the timed lock's fast path.
fn bench_uncontended_timed<F: TimedFamily>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    layout: Layout,
) {
    match layout {
        Layout::Inline => bench_uncontended_timed_placed::<F, InlineP>(group, name),
        Layout::Split => bench_uncontended_timed_placed::<F, SplitP>(group, name),
    }
}

fn bench_uncontended_timed_placed<F: TimedFamily, P: Place>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
) {
    let m = new_timed_lock::<F, P, u64>(0);
    group.bench_function(name, |b| {
        b.iter(|| {
            let mut g = m.try_lock_for(black_box(TIMEOUT)).expect("the mutex is free");
            **g = black_box(g.wrapping_add(1));
            drop(g);
        })
    });
}

/// Criterion's plain `iter` over one lock+unlock on one thread.
fn bench_uncontended<F: Family>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    layout: Layout,
) {
    match layout {
        Layout::Inline => bench_uncontended_placed::<F, InlineP>(group, name),
        Layout::Split => bench_uncontended_placed::<F, SplitP>(group, name),
    }
}

fn bench_uncontended_placed<F: Family, P: Place>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
) {
    let m = new_lock::<F, P, u64>(0);
    group.bench_function(name, |b| {
        b.iter(|| {
            let mut g = m.lock();
            **g = black_box(g.wrapping_add(1));
            F::unlock(g);
        })
    });
}

fn main() {
    let profile = Profile::from_env();
    let args = parse_args();
    let tuning = tuning();
    let cal = calibrate();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let triple = target_triple();
    let emulated = emulated_cached();
    // The CPUs this process may run on, read once, outside any window: the
    // cells at multiples of it.
    let cpus = thread::available_parallelism().map_or(1, |n| n.get());
    // Every cell this run measures, with the locks it runs.
    let plan: Vec<(Cell, Vec<LockId>)> = profile
        .cells(cpus)
        .into_iter()
        .map(|cell| {
            let group = cell.group();
            let locks = LOCKS
                .iter()
                .copied()
                .filter(|l| {
                    profile.locks.is_none_or(|only| only.contains(l))
                        && l.runs_in(cell)
                        && args.matches(&format!("{group}/{}", l.name()))
                })
                .collect();
            (cell, locks)
        })
        .filter(|(_, locks): &(Cell, Vec<LockId>)| !locks.is_empty())
        .collect();

    // The locks of this profile, in `LOCKS` order.
    let profile_locks: Vec<LockId> = LOCKS
        .iter()
        .copied()
        .filter(|l| profile.locks.is_none_or(|only| only.contains(l)))
        .collect();
    let mut ctx = Ctx { profile, cal, triple: triple.clone(), emulated, out: None };
    if args.benchmarking {
        let runs: usize = plan.iter().map(|(_, locks)| locks.len()).sum();
        eprintln!(
            "spinbit bench: profile {}, {} cells, {runs} (cell, lock) pairs, {} reps of {} ms; \
             estimated {:.0} s",
            profile.name,
            plan.len(),
            profile.reps,
            profile.window.as_millis(),
            runs as f64 * profile.secs_per_run(),
        );
        eprintln!(
            "calibration: {:.3} ns per work step, {:.3} ns per tick; target {triple}{}",
            cal.unit_ns,
            cal.tick_ns,
            if emulated { " (emulated: timings are meaningless)" } else { "" },
        );
        let path = out_path();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("creating the results directory");
        }
        let mut f = File::create(&path).expect("creating the results file");
        let meta = format!(
            "{{\"bench\":\"meta\",\"profile\":{},\"command\":{},\"target\":{},\"emulated\":{},\
             \"unit_ns\":{},\"tick_ns\":{},\"reps\":{},\"window_ms\":{},\"locks\":[{}],\
             \"tuning_feature\":{},\"tuning\":{{{}}},\"tuning_overrides\":[{}],\"cpus\":{cpus},\"stats_feature\":{},{}}}\n",
            js(profile.name),
            js(&command_line(profile, &args, &tuning)),
            js(&triple),
            emulated,
            jn(cal.unit_ns),
            jn(cal.tick_ns),
            profile.reps,
            profile.window.as_millis(),
            profile_locks.iter().map(|l| js(l.name())).collect::<Vec<_>>().join(","),
            cfg!(feature = "tuning"),
            tuning
                .iter()
                .map(|t| format!("{}:{}", js(t.name), t.value))
                .collect::<Vec<_>>()
                .join(","),
            tuning
                .iter()
                .filter(|t| t.overridden)
                .map(|t| js(t.name))
                .collect::<Vec<_>>()
                .join(","),
            STATS_FEATURE,
            machine_fields(&cpuinfo),
        );
        f.write_all(meta.as_bytes()).expect("writing the results file");
        eprintln!("companion metrics -> {}", path.display());
        ctx.out = Some(f);
    }

    let mut c = Criterion::default()
        .sample_size(profile.sample_size)
        .warm_up_time(profile.warm_up)
        .measurement_time(profile.measurement)
        .nresamples(5000)
        .configure_from_args();

    // The window of one criterion sample (see "How a window fits criterion").
    let sample_window = profile.measurement / profile.sample_size as u32;
    let started = Instant::now();
    for (cell, selected) in &plan {
        let (cell, group_name) = (*cell, cell.group());

        // Companion pass: interleaved, rotated repetitions; medians.
        // Time per operation for each lock, to size criterion's windows.
        let mut ns_per_op = vec![1000.0f64; LOCKS.len()];
        if args.benchmarking {
            let mut reps: Vec<Vec<Sample>> = vec![Vec::new(); selected.len()];
            let mut stats: Vec<Vec<Option<String>>> = vec![Vec::new(); selected.len()];
            for r in 0..profile.reps {
                for k in 0..selected.len() {
                    let i = (r + k) % selected.len();
                    let counted = selected[i].is_spinbit();
                    if counted {
                        policy_reset();
                    }
                    let s = run_lock(selected[i], cell, profile.window, 0, cal);
                    reps[i].push(s);
                    stats[i].push(if counted { policy_counters() } else { None });
                }
            }
            let mut line = format!("{group_name}:");
            for (i, &lock) in selected.iter().enumerate() {
                let s = median_sample(&reps[i]);
                ctx.record(cell, lock, &s, &reps[i], &stats[i]);
                let idx = LOCKS.iter().position(|&l| l == lock).unwrap_or(0);
                ns_per_op[idx] = 1e9 / s.ops_per_sec.max(1.0);
                let _ = write!(
                    line,
                    " {} {:.2}M/s (worst {:.2}) {:.0}ns-cpu f{:.2} o{:.2}",
                    lock.name(),
                    s.ops_per_sec / 1e6,
                    worst(&reps[i]) / 1e6,
                    s.cpu_ns_per_op,
                    s.fairness,
                    s.others_cpu
                );
                if s.timed_out.is_finite() {
                    let _ = write!(line, " timed-out {:.3}", s.timed_out);
                }
                // The policy's decisions in the window of median throughput.
                let mid = (0..reps[i].len()).min_by(|&a, &b| {
                    let d = |j: usize| (reps[i][j].ops_per_sec - s.ops_per_sec).abs();
                    d(a).total_cmp(&d(b))
                });
                if let Some(st) = mid.and_then(|j| stats[i][j].as_deref()) {
                    let _ = write!(line, " policy {st}");
                }
                line.push(';');
            }
            eprintln!("{line}");
        }

        // Criterion.
        if !profile.criterion {
            continue;
        }
        let mut group = c.benchmark_group(&group_name);
        group.throughput(Throughput::Elements(1));
        if !cell.is_uncontended() {
            group.sampling_mode(SamplingMode::Flat);
        }
        for &lock in selected {
            let est = ns_per_op[LOCKS.iter().position(|&l| l == lock).unwrap_or(0)];
            match (cell.workload, cell.unlock) {
                (Workload::Uncontended, Unlock::Plain) => with_family!(lock, F =>
                    bench_uncontended::<F>(&mut group, lock.name(), cell.layout)),
                (Workload::Uncontended, Unlock::Fair) => with_fair_family!(lock, F =>
                    bench_uncontended::<F>(&mut group, lock.name(), cell.layout))
                .expect("only locks with a fair unlock run in fair cells"),
                (Workload::UncontendedTimed, _) => with_timed_family!(lock, F =>
                    bench_uncontended_timed::<F>(&mut group, lock.name(), cell.layout))
                .expect("only locks with a timed lock run in timed cells"),
                _ => {
                    group.bench_function(lock.name(), |b| {
                        b.iter_custom(|n| {
                            let dur =
                                sample_window.max(Duration::from_secs_f64(n as f64 * est * 1e-9));
                            let s = run_lock(lock, cell, dur, n, cal);
                            Duration::from_secs_f64(s.secs * n as f64 / s.ops.max(1) as f64)
                        })
                    });
                }
            }
        }
        group.finish();
    }
    c.final_summary();
    if args.benchmarking {
        eprintln!(
            "spinbit bench: done in {:.0} s; companion metrics in {}",
            started.elapsed().as_secs_f64(),
            out_path().display()
        );
    }
}
