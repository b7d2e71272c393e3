//! No lock call allocates, on any path: the global allocator of this test
//! binary is itself guarded by a `spinbit::Mutex`, as arena, pool and
//! tracking allocators are. An allocation made inside a lock call would
//! re-enter the allocator's mutex from inside that mutex's own slow path,
//! possibly while the thread owns its waiter stack, and hang.
//!
//! The allocator counts, per test, the allocations made while its thread is
//! inside a lock call of the mutex under test (the tests wrap every call in
//! [`call`]) or inside its own lock call (a re-entry), and serves those
//! from the system allocator without locking, so that a fault fails the
//! test instead of hanging it. This is an integration test: the library is
//! built as users get it, without the unit tests' shortcuts.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::thread;
use std::time::{Duration, Instant};

use common::{Rng, Watchdog};
use spinbit::{FairMutex, Mutex};

/// What one test saw.
#[derive(Default)]
struct Counts {
    /// Allocations made inside a lock call of the mutex under test.
    in_call: AtomicU64,
    /// Allocations made inside the allocator's own lock call.
    reentered: AtomicU64,
}

impl Counts {
    const fn new() -> Counts {
        Counts { in_call: AtomicU64::new(0), reentered: AtomicU64::new(0) }
    }
}

/// Allocations of threads that belong to no test (the harness's).
static UNATTRIBUTED: Counts = Counts::new();

thread_local! {
    /// The counts of the test this thread works for.
    static COUNTS: Cell<&'static Counts> = const { Cell::new(&UNATTRIBUTED) };
    /// This thread is inside a lock call.
    static IN_LOCK_CALL: Cell<bool> = const { Cell::new(false) };
    /// This thread is inside the allocator.
    static IN_ALLOCATOR: Cell<bool> = const { Cell::new(false) };
}

/// How often the allocator's mutex was found held (its `try_lock` failed),
/// over the whole binary.
static HEAP_CONTENDED: AtomicU64 = AtomicU64::new(0);

/// The allocator's bookkeeping, guarded by the mutex whose slow paths must
/// not allocate.
struct Heap {
    allocations: u64,
}

static HEAP: Mutex<Heap> = Mutex::new(Heap { allocations: 0 });

struct Guarded;

impl Guarded {
    fn enter<R>(&self, op: impl FnOnce() -> R) -> R {
        let counts = COUNTS.get();
        if IN_LOCK_CALL.get() {
            counts.in_call.fetch_add(1, Relaxed);
        }
        if IN_ALLOCATOR.replace(true) {
            // Our own lock call allocated: taking the mutex again would
            // hang (it may own the waiter stack). Count it, serve it
            // unguarded.
            counts.reentered.fetch_add(1, Relaxed);
            return op();
        }
        let outer = IN_LOCK_CALL.replace(true);
        let mut heap = match HEAP.try_lock() {
            Some(heap) => heap,
            None => {
                HEAP_CONTENDED.fetch_add(1, Relaxed);
                HEAP.lock()
            }
        };
        IN_LOCK_CALL.set(false);
        heap.allocations += 1;
        // Now and then a longer hold, as bookkeeping does: waiters then
        // sleep, and the stack backs up.
        if heap.allocations.is_multiple_of(64) {
            spin_for(Duration::from_micros(20));
        }
        let r = op();
        IN_LOCK_CALL.set(true);
        if heap.allocations.is_multiple_of(3) {
            lock_api::MutexGuard::unlock_fair(heap);
        } else {
            drop(heap);
        }
        IN_LOCK_CALL.set(outer);
        IN_ALLOCATOR.set(false);
        r
    }
}

// SAFETY: every call is forwarded to the system allocator unchanged; the
// wrapper only counts and serialises.
unsafe impl GlobalAlloc for Guarded {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded from the caller.
        self.enter(|| unsafe { System.alloc(layout) })
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded from the caller.
        self.enter(|| unsafe { System.alloc_zeroed(layout) })
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded from the caller.
        self.enter(|| unsafe { System.dealloc(ptr, layout) })
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded from the caller.
        self.enter(|| unsafe { System.realloc(ptr, layout, new_size) })
    }
}

#[global_allocator]
static GLOBAL: Guarded = Guarded;

/// Runs one lock call (`lock`, `unlock`, `try_lock*`, `unlock_fair`,
/// `bump`) marked as such for the allocator.
fn call<R>(f: impl FnOnce() -> R) -> R {
    IN_LOCK_CALL.set(true);
    let r = f();
    IN_LOCK_CALL.set(false);
    r
}

fn spin_for(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// What the workload reached, to show it contended for real.
#[derive(Default, Debug)]
struct Reached {
    /// Lock calls whose `try_lock` failed first.
    contended: u64,
    /// Lock calls that waited over a millisecond (far past any spin:
    /// they slept).
    long_waits: u64,
    /// Timed locks that timed out.
    timed_out: u64,
    /// Fair unlocks after which the lock was still held at once (handed
    /// to a sleeper, or taken by another thread).
    fair_still_held: u64,
}

/// `threads` threads for `dur`, each iteration one of: a plain lock with a
/// hold of up to 200 µs (some of them sleeps), a fair unlock, a `bump`, or
/// a timed lock with a deadline shorter than the longest holds; every
/// thread also allocates between its lock calls, so that the allocator's
/// own mutex is contended too. `lock_slow_path` is the lock call that the
/// workload uses after a failed `try_lock`.
fn workload(
    counts: &'static Counts,
    threads: usize,
    dur: Duration,
    lock_slow_path: fn(&FairMutex<u64>) -> spinbit::FairMutexGuard<'_, u64>,
) -> Reached {
    let m = FairMutex::new(0u64);
    let plain = Mutex::new(0u64);
    let dog = Watchdog::start("no_alloc workload");
    let start = Instant::now();
    let reached = thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (m, plain, dog) = (&m, &plain, &dog);
                s.spawn(move || {
                    COUNTS.set(counts);
                    let mut rng = Rng::new(t as u64 + 1);
                    let mut r = Reached::default();
                    let mut junk = Vec::new();
                    while start.elapsed() < dur {
                        match rng.below(8) {
                            0..3 => {
                                let t0 = Instant::now();
                                let g = call(|| m.try_lock());
                                let mut g = match g {
                                    Some(g) => g,
                                    None => {
                                        r.contended += 1;
                                        call(|| lock_slow_path(m))
                                    }
                                };
                                if t0.elapsed() > Duration::from_millis(1) {
                                    r.long_waits += 1;
                                }
                                *g += 1;
                                match rng.below(4) {
                                    0 => thread::sleep(Duration::from_micros(50)),
                                    1 => spin_for(Duration::from_micros(rng.below(200))),
                                    _ => {}
                                }
                                if rng.one_in(4) {
                                    call(|| lock_api::MutexGuard::bump(&mut g));
                                }
                                // A `FairMutex` guard's drop is a fair unlock.
                                call(|| drop(g));
                                if call(|| m.is_locked()) {
                                    r.fair_still_held += 1;
                                }
                            }
                            3..5 => {
                                let g = call(|| plain.lock());
                                spin_for(Duration::from_micros(rng.below(30)));
                                if rng.one_in(2) {
                                    call(|| lock_api::MutexGuard::unlock_fair(g));
                                    if call(|| plain.is_locked()) {
                                        r.fair_still_held += 1;
                                    }
                                } else {
                                    call(|| drop(g));
                                }
                            }
                            5 => {
                                let wait = Duration::from_micros(20 + rng.below(300));
                                match call(|| m.try_lock_for(wait)) {
                                    Some(g) => call(|| drop(g)),
                                    None => r.timed_out += 1,
                                }
                            }
                            _ => {
                                // Outside any lock call: allocate, so that
                                // the allocator's mutex is contended.
                                for _ in 0..16 {
                                    junk.push(vec![0u8; 16 + rng.below(512) as usize]);
                                    if junk.len() > 32 {
                                        junk.clear();
                                    }
                                }
                                black_box(&junk);
                            }
                        }
                        dog.progress();
                    }
                    r
                })
            })
            .collect();
        // Two threads that only allocate and free: the allocator's mutex
        // is contended whatever the others do.
        for _ in 0..2 {
            s.spawn(move || {
                COUNTS.set(counts);
                while start.elapsed() < dur {
                    for _ in 0..64 {
                        black_box(Vec::<u8>::with_capacity(64));
                    }
                }
            });
        }
        let mut total = Reached::default();
        for h in handles {
            let r = h.join().unwrap();
            total.contended += r.contended;
            total.long_waits += r.long_waits;
            total.timed_out += r.timed_out;
            total.fair_still_held += r.fair_still_held;
        }
        total
    });
    eprintln!("{reached:?}, allocator's mutex found held {} times", HEAP_CONTENDED.load(Relaxed));
    reached
}

/// One test, so that nothing else in this binary runs beside it: the
/// paths that run once per process (the CPU count, the tick calibration)
/// run in its workload first, where an allocation is charged to it, and
/// its negative control runs after it.
#[test]
#[cfg_attr(miri, ignore = "seconds of real contention")]
fn no_lock_call_allocates_even_under_a_guarded_allocator() {
    static COUNTS: Counts = Counts::new();
    let reached = workload(&COUNTS, 8, Duration::from_secs(2), |m| m.lock());
    assert_eq!(COUNTS.in_call.load(Relaxed), 0, "allocations inside lock calls");
    assert_eq!(COUNTS.reentered.load(Relaxed), 0, "the allocator's lock call allocated");
    // Nor in the allocator's lock calls of the harness's own threads.
    assert_eq!(UNATTRIBUTED.in_call.load(Relaxed), 0, "allocations inside lock calls");
    assert_eq!(UNATTRIBUTED.reentered.load(Relaxed), 0, "the allocator's lock call allocated");
    // It contended for real: waiters slept, timed waits ran out, fair
    // unlocks found waiters, the allocator's own mutex was contended.
    assert!(reached.contended >= 200, "{reached:?}");
    assert!(reached.long_waits >= 20, "{reached:?}");
    assert!(reached.timed_out >= 20, "{reached:?}");
    assert!(reached.fair_still_held >= 20, "{reached:?}");
    assert!(HEAP_CONTENDED.load(Relaxed) >= 50, "{}", HEAP_CONTENDED.load(Relaxed));

    // Negative control: a lock call whose slow path allocates (as the
    // count of CPUs once did, `std::thread::available_parallelism` reading
    // cgroup files) is caught.
    static CONTROL: Counts = Counts::new();
    workload(&CONTROL, 4, Duration::from_millis(300), |m| {
        black_box(std::thread::available_parallelism().ok());
        m.lock()
    });
    assert!(CONTROL.in_call.load(Relaxed) > 0, "the allocating slow path went unnoticed");
}
