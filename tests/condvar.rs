//! The condition variable, as users use it: `spinbit::Condvar` with
//! `spinbit::Mutex`, and `spinbit::FairCondvar` with `spinbit::FairMutex`.
//!
//! Each property is checked by a function generic over the raw condition
//! variable that returns what it saw, or what went wrong, so that a negative
//! control can run the same function on a deliberately broken condition
//! variable (a wrapper of `spinbit::RawCondvar`, at the end of the file) and
//! expect the failure:
//!
//! * a bounded queue (a `VecDeque` behind a mutex, with a `not_empty` and a
//!   `not_full` condition variable), producers and consumers at 1 to 64
//!   each: every item is consumed exactly once, and every wait that returned
//!   was counted by exactly one notification;
//! * a barrier (a generation counter and `notify_all`), many threads, many
//!   rounds: nobody passes early, and `notify_all` counts every waiter;
//! * `wait_while`, `wait_while_for` and `wait_while_until`: what they return,
//!   with `timed_out()`, and how often they evaluate the predicate;
//! * timed waits with no notifier time out, never before their deadline, and
//!   hold the mutex when they return (a deadline already past too);
//! * exact counts: `notify_all` returns the number of waiters, `notify_one`
//!   returns true once per waiter and then false, and waiters whose timed
//!   waits ran out are never counted;
//! * timed waits racing `notify_one` or `notify_all` around their
//!   deadlines: each round, the notification counted exactly the waiters
//!   that did not time out;
//! * two mutexes on one condition variable at once panic, before anything is
//!   unlocked, and leave everything usable; one after the other is fine.
//!
//! spinbit promises that a wait never returns spuriously, so several checks
//! count wait returns against the notifications' counts. A lost wakeup
//! leaves a thread asleep for good: a watchdog turns that into a failure
//! instead of a hang.
//!
//! `SPINBIT_CONDVAR_SCALE` scales the length of the runs (default 1: each
//! test takes well under a second on an idle machine).

mod common;

use std::collections::{HashMap, VecDeque};
use std::marker::PhantomData;
use std::mem;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Barrier;
use std::sync::Mutex as StdMutex;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::thread;
use std::time::{Duration, Instant};

use common::{Rng, Watchdog, noticed};
use lock_api::{
    Condvar, GuardSend, Mutex, MutexGuard, RawCondvar, RawCondvarTimed, RawMutex, RawMutexFair,
    RawMutexTimed,
};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// What the checks need of a raw condition variable: the timed waits, with
/// `std::time` types, over a fair and timed mutex that threads can share.
trait Cv:
    RawCondvarTimed<
        RawMutex: RawMutexFair + RawMutexTimed<Duration = Duration, Instant = Instant> + Sync,
    > + Sync
    + 'static
{
}
impl<C> Cv for C where
    C: RawCondvarTimed<
            RawMutex: RawMutexFair + RawMutexTimed<Duration = Duration, Instant = Instant> + Sync,
        > + Sync
        + 'static
{
}

/// The errors the threads of one check found: the first few of each kind
/// (the same message but for its numbers), and how many in all.
#[derive(Default)]
struct Errors {
    /// The errors kept, and how many of each kind came.
    kept: StdMutex<(Vec<String>, HashMap<String, usize>)>,
    count: AtomicUsize,
}

impl Errors {
    const KEPT_PER_KIND: usize = 3;

    fn push(&self, e: String) {
        self.count.fetch_add(1, Relaxed);
        let kind = e.chars().filter(|c| !c.is_ascii_digit()).collect();
        let mut kept = self.kept.lock().unwrap();
        let seen = kept.1.entry(kind).or_insert(0);
        *seen += 1;
        if *seen <= Self::KEPT_PER_KIND {
            kept.0.push(e);
        }
    }

    fn is_empty(&self) -> bool {
        self.count.load(Relaxed) == 0
    }

    /// `Ok(report)` if nothing went wrong.
    fn result(self, report: String) -> Result<String, String> {
        let count = self.count.into_inner();
        if count == 0 {
            return Ok(report);
        }
        let mut list = self.kept.into_inner().unwrap().0;
        if count > list.len() {
            list.push(format!("and {} more", count - list.len()));
        }
        Err(format!("{}\n{report}", list.join("; ")))
    }
}

/// Locks `m` until `ready` holds of its data, and returns the guard. It
/// polls: the threads it waits for need the mutex to make `ready` true.
fn lock_when<R: RawMutex, T>(
    m: &Mutex<R, T>,
    mut ready: impl FnMut(&T) -> bool,
) -> MutexGuard<'_, R, T> {
    loop {
        let g = m.lock();
        if ready(&g) {
            return g;
        }
        drop(g);
        thread::sleep(Duration::from_micros(100));
    }
}

/// Whether the mutex of `g` is locked, as every wait must leave it. A check
/// that finds it unlocked forgets the guard (dropping it would unlock a
/// mutex nobody holds); only a broken condition variable gets there.
fn held<R: RawMutex, T>(g: &MutexGuard<'_, R, T>) -> bool {
    MutexGuard::mutex(g).is_locked()
}

/// `n` times `SPINBIT_CONDVAR_SCALE` (default 1): the length of the runs
/// of the tests (the negative controls keep theirs).
fn scaled(n: u64) -> u64 {
    let scale = match std::env::var("SPINBIT_CONDVAR_SCALE") {
        Ok(v) => v.parse().unwrap_or_else(|_| panic!("SPINBIT_CONDVAR_SCALE={v:?} does not parse")),
        Err(_) => 1,
    };
    n * scale
}

/// Waits until `t`: sleeps most of the way, spins the rest.
fn sleep_until(t: Instant) {
    let now = Instant::now();
    if let Some(left) = t.checked_duration_since(now) {
        if left > Duration::from_micros(300) {
            thread::sleep(left - Duration::from_micros(200));
        }
        while Instant::now() < t {
            std::hint::spin_loop();
        }
    }
}

// ---------------------------------------------------------------------------
// A bounded queue
// ---------------------------------------------------------------------------

/// The queue and its bookkeeping, behind the mutex.
struct Queue {
    items: VecDeque<u64>,
    consumed: u64,
    /// Set by the consumer of the last item: the other consumers leave.
    done: bool,
    /// The longest the queue ever was.
    max_len: usize,
}

/// Waits that a notification ended, waits that timed out, and the waiters
/// that notifications counted, per condition variable.
#[derive(Default, Clone, Copy)]
struct QueueCounts {
    empty_waits: u64,
    empty_timeouts: u64,
    empty_notified: u64,
    full_waits: u64,
    full_timeouts: u64,
    full_notified: u64,
}

impl std::ops::AddAssign for QueueCounts {
    fn add_assign(&mut self, o: QueueCounts) {
        self.empty_waits += o.empty_waits;
        self.empty_timeouts += o.empty_timeouts;
        self.empty_notified += o.empty_notified;
        self.full_waits += o.full_waits;
        self.full_timeouts += o.full_timeouts;
        self.full_notified += o.full_notified;
    }
}

/// One wait of a queue thread on `cv`: `wait`, or, if `timed`, `wait_for`
/// or `wait_until` (at random) with a random timeout of up to 300 µs. Adds
/// the wait to `waits` if a notification ended it, to `timeouts` if it
/// timed out (not early, or it says so in `errors`).
fn queue_wait<C: Cv, T>(
    cv: &Condvar<C>,
    g: &mut MutexGuard<'_, C::RawMutex, T>,
    timed: bool,
    rng: &mut Rng,
    (waits, timeouts): (&mut u64, &mut u64),
    errors: &Errors,
) {
    if !timed {
        cv.wait(g);
        *waits += 1;
        return;
    }
    let d = Duration::from_micros(1 + rng.below(300));
    let deadline = Instant::now() + d;
    let r = if rng.one_in(2) { cv.wait_for(g, d) } else { cv.wait_until(g, deadline) };
    if !r.timed_out() {
        *waits += 1;
        return;
    }
    *timeouts += 1;
    let now = Instant::now();
    if now < deadline {
        errors.push(format!("a wait of {d:?} timed out {:?} before its deadline", deadline - now));
    }
}

/// Notifies one waiter of `cv` and releases `g`, in an order `rng` picks:
/// notify, then unlock or unlock fairly (the mutex held: a requeue), or
/// unlock, then notify (the mutex free: a wake). Returns what `notify_one`
/// returned.
fn notify_and_release<C: Cv, T>(
    cv: &Condvar<C>,
    g: MutexGuard<'_, C::RawMutex, T>,
    rng: &mut Rng,
) -> bool {
    match rng.below(4) {
        0 => {
            let n = cv.notify_one();
            drop(g);
            n
        }
        1 => {
            let n = cv.notify_one();
            MutexGuard::unlock_fair(g);
            n
        }
        _ => {
            drop(g);
            cv.notify_one()
        }
    }
}

/// `pairs` producers and `pairs` consumers share a queue of at most `cap`
/// items; each producer pushes `per_producer` distinct items, waiting on
/// `not_full` while the queue is full, and each consumer pops, waiting on
/// `not_empty` while it is empty; the consumer of the last item sets `done`
/// and wakes the other consumers with `notify_all`. Every push and pop
/// notifies the other side with `notify_one`, under the mutex or after the
/// unlock (see [`notify_and_release`]). Half the threads (the producers
/// with even numbers, the consumers with odd ones) wait with random
/// timeouts of up to 300 µs instead, and consumers sometimes `bump` the mutex
/// (which may hand it to a requeued waiter) before they look at the queue.
/// A monitor thread peeks at the queue with `try_lock_for` (timeouts of up
/// to 100 µs) until the consumers are done: timed mutex waiters beside the
/// requeued ones on the mutex's waiter stack.
///
/// Checks that every item produced was consumed exactly once (the sorted
/// items, their count and their sum), that the queue never held more than
/// `cap`, that no timed wait timed out early, and, once every thread left,
/// that on each condition variable the waits that a notification ended
/// equal the waiters the notifications counted: with no spurious wakeups
/// and exact counts that never include a timed-out waiter, each such return
/// was counted by exactly one notification.
fn queue<C: Cv>(name: &str, pairs: usize, per_producer: u64, cap: usize) -> Result<String, String> {
    let total = pairs as u64 * per_producer;
    let m = Mutex::<C::RawMutex, Queue>::new(Queue {
        items: VecDeque::with_capacity(cap),
        consumed: 0,
        done: false,
        max_len: 0,
    });
    let not_empty = Condvar::<C>::new();
    let not_full = Condvar::<C>::new();
    let dog = Watchdog::start(name);
    let errors = Errors::default();
    let mut counts = QueueCounts::default();
    let mut items = Vec::with_capacity(total as usize);
    thread::scope(|s| {
        let (m, not_empty, not_full, dog, errors) = (&m, &not_empty, &not_full, &dog, &errors);
        let producers: Vec<_> = (0..pairs)
            .map(|p| {
                s.spawn(move || {
                    let mut c = QueueCounts::default();
                    let mut rng = Rng::new(p as u64 + 1);
                    let timed = p % 2 == 0;
                    for i in 0..per_producer {
                        let mut g = m.lock();
                        while g.items.len() >= cap {
                            let counts = (&mut c.full_waits, &mut c.full_timeouts);
                            queue_wait(not_full, &mut g, timed, &mut rng, counts, errors);
                        }
                        g.items.push_back(p as u64 * per_producer + i + 1);
                        g.max_len = g.max_len.max(g.items.len());
                        c.empty_notified += u64::from(notify_and_release(not_empty, g, &mut rng));
                        dog.progress();
                    }
                    c
                })
            })
            .collect();
        let consumers: Vec<_> = (0..pairs)
            .map(|q| {
                s.spawn(move || {
                    let mut c = QueueCounts::default();
                    let mut rng = Rng::new(q as u64 + 1_000);
                    let timed = q % 2 == 1;
                    let mut got = Vec::new();
                    loop {
                        let mut g = m.lock();
                        if rng.one_in(8) {
                            MutexGuard::bump(&mut g);
                        }
                        while g.items.is_empty() && !g.done {
                            let counts = (&mut c.empty_waits, &mut c.empty_timeouts);
                            queue_wait(not_empty, &mut g, timed, &mut rng, counts, errors);
                        }
                        let Some(v) = g.items.pop_front() else { break };
                        g.consumed += 1;
                        if g.consumed == total {
                            g.done = true;
                            c.empty_notified += not_empty.notify_all() as u64;
                        }
                        c.full_notified += u64::from(notify_and_release(not_full, g, &mut rng));
                        got.push(v);
                        dog.progress();
                    }
                    (got, c)
                })
            })
            .collect();
        // The monitor: timed mutex waiters beside the requeued ones.
        s.spawn(move || {
            let mut rng = Rng::new(pairs as u64);
            loop {
                let d = Duration::from_micros(1 + rng.below(100));
                let Some(g) = m.try_lock_for(d) else { continue };
                if g.items.len() > cap {
                    errors.push(format!("the monitor saw {} items queued", g.items.len()));
                }
                if g.done {
                    break;
                }
                drop(g);
                thread::sleep(Duration::from_micros(rng.below(200)));
            }
        });
        for h in producers {
            counts += h.join().unwrap();
        }
        for h in consumers {
            let (got, c) = h.join().unwrap();
            items.extend(got);
            counts += c;
        }
    });
    items.sort_unstable();
    let sum: u64 = items.iter().sum();
    let expected_sum = total * (total + 1) / 2;
    if items.len() as u64 != total || sum != expected_sum {
        errors.push(format!(
            "{} items consumed, summing to {sum}; {total} were produced, summing to {expected_sum}",
            items.len()
        ));
    }
    let dups = items.windows(2).filter(|w| w[0] == w[1]).count();
    if dups > 0 || !items.iter().copied().eq(1..=total) {
        errors.push(format!("items lost or consumed twice ({dups} duplicates)"));
    }
    let max_len = m.lock().max_len;
    if max_len > cap {
        errors.push(format!("the queue held {max_len} items, above its bound {cap}"));
    }
    let c = counts;
    if c.empty_waits != c.empty_notified {
        errors.push(format!(
            "not_empty: notifications ended {} waits, but counted {} waiters",
            c.empty_waits, c.empty_notified
        ));
    }
    if c.full_waits != c.full_notified {
        errors.push(format!(
            "not_full: notifications ended {} waits, but counted {} waiters",
            c.full_waits, c.full_notified
        ));
    }
    errors.result(format!(
        "{pairs} producers and {pairs} consumers, {total} items, queue bound {cap}: waits on \
         not_empty {} notified and {} timed out, on not_full {} notified and {} timed out",
        c.empty_waits, c.empty_timeouts, c.full_waits, c.full_timeouts
    ))
}

/// The queue with one producer and one consumer.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn queue_1_producer_1_consumer() {
    let r = queue::<spinbit::RawCondvar>("queue_1", 1, scaled(30_000), 4);
    eprintln!("{}", r.unwrap_or_else(|e| panic!("{e}")));
}

/// The queue with 2 producers and 2 consumers.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn queue_2_producers_2_consumers() {
    let r = queue::<spinbit::RawCondvar>("queue_2", 2, scaled(20_000), 4);
    eprintln!("{}", r.unwrap_or_else(|e| panic!("{e}")));
}

/// The queue with 4 producers and 4 consumers.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn queue_4_producers_4_consumers() {
    let r = queue::<spinbit::RawCondvar>("queue_4", 4, scaled(10_000), 8);
    eprintln!("{}", r.unwrap_or_else(|e| panic!("{e}")));
}

/// The queue with 16 producers and 16 consumers.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn queue_16_producers_16_consumers() {
    let r = queue::<spinbit::RawCondvar>("queue_16", 16, scaled(3_000), 8);
    eprintln!("{}", r.unwrap_or_else(|e| panic!("{e}")));
}

/// The queue with 64 producers and 64 consumers.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn queue_64_producers_64_consumers() {
    let r = queue::<spinbit::RawCondvar>("queue_64", 64, scaled(600), 16);
    eprintln!("{}", r.unwrap_or_else(|e| panic!("{e}")));
}

/// The queue over `FairCondvar` and `FairMutex` (every unlock hands the
/// mutex to its oldest sleeping waiter, requeued ones included), with 1, 4
/// and 16 producers and as many consumers.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn fair_queue() {
    type Fair = spinbit::RawCondvar<spinbit::RawFairMutex>;
    for (pairs, per, cap) in [(1, 20_000, 4), (4, 4_000, 4), (16, 1_000, 8)] {
        let r = queue::<Fair>("fair_queue", pairs, scaled(per), cap);
        eprintln!("fair: {}", r.unwrap_or_else(|e| panic!("{e}")));
    }
}

// ---------------------------------------------------------------------------
// A barrier
// ---------------------------------------------------------------------------

/// The barrier's state, behind the mutex.
struct Gen {
    /// Threads that arrived in this generation.
    count: usize,
    generation: u64,
}

/// `threads` threads meet at a barrier `rounds` times. The barrier is a
/// mutex, a condition variable and a generation counter: the last thread
/// to arrive starts the next generation and calls `notify_all`, under the
/// mutex in even rounds and after its unlock in odd ones (the mutex free:
/// the oldest waiter is handed it). The others wait once, no loop: spinbit
/// never returns from a wait spuriously, and only the next generation
/// notifies.
///
/// Checks that nobody passes early (after the barrier of round `r`, all
/// threads arrived at it, counted apart from the barrier), that a waiter
/// always wakes into a new generation, and that each `notify_all` counts
/// the `threads - 1` waiters exactly (each registered before its unlock,
/// and the last arriver held the mutex after all of them).
fn barrier<C: Cv>(name: &str, threads: usize, rounds: usize) -> Result<String, String> {
    let m = Mutex::<C::RawMutex, Gen>::new(Gen { count: 0, generation: 0 });
    let cv = Condvar::<C>::new();
    let arrived: Vec<AtomicUsize> = (0..rounds).map(|_| AtomicUsize::new(0)).collect();
    let errors = Errors::default();
    let dog = Watchdog::start(name);
    thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for (r, arrived) in arrived.iter().enumerate() {
                    arrived.fetch_add(1, Relaxed);
                    let mut g = m.lock();
                    let generation = g.generation;
                    g.count += 1;
                    if g.count == threads {
                        g.count = 0;
                        g.generation += 1;
                        let n = if r % 2 == 0 {
                            cv.notify_all()
                        } else {
                            drop(g);
                            cv.notify_all()
                        };
                        if n != threads - 1 {
                            errors.push(format!(
                                "round {r}: notify_all returned {n} with {} threads waiting",
                                threads - 1
                            ));
                        }
                    } else {
                        cv.wait(&mut g);
                        if g.generation == generation {
                            errors.push(format!(
                                "round {r}: a waiter woke with the generation unchanged"
                            ));
                        }
                        drop(g);
                    }
                    let a = arrived.load(Relaxed);
                    if a != threads {
                        errors.push(format!(
                            "round {r}: a thread passed the barrier with {a} of {threads} arrived"
                        ));
                    }
                    dog.progress();
                }
            });
        }
    });
    errors.result(format!("{threads} threads, {rounds} rounds"))
}

/// A barrier of 8 threads, 1500 rounds.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn barrier_8_threads() {
    let r = barrier::<spinbit::RawCondvar>("barrier_8", 8, scaled(1_500) as usize);
    eprintln!("{}", r.unwrap_or_else(|e| panic!("{e}")));
}

/// A barrier of 64 threads, 200 rounds: `notify_all` moves 63 waiters at
/// once.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn barrier_64_threads() {
    let r = barrier::<spinbit::RawCondvar>("barrier_64", 64, scaled(200) as usize);
    eprintln!("{}", r.unwrap_or_else(|e| panic!("{e}")));
}

/// A barrier of 16 threads, 300 rounds, over `FairCondvar` and `FairMutex`:
/// the waiters `notify_all` moved are handed the mutex one after the other.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn fair_barrier_16_threads() {
    type Fair = spinbit::RawCondvar<spinbit::RawFairMutex>;
    let r = barrier::<Fair>("fair_barrier_16", 16, scaled(300) as usize);
    eprintln!("fair: {}", r.unwrap_or_else(|e| panic!("{e}")));
}

// ---------------------------------------------------------------------------
// wait_while and its timed forms
// ---------------------------------------------------------------------------

/// The state the predicates look at.
#[derive(Default)]
struct Pred {
    /// The waiter evaluated its predicate at least once (so it is waiting,
    /// or past it, once a thread holding the mutex sees this).
    entered: bool,
    value: u32,
    ready: bool,
    /// Predicate evaluations.
    evals: u64,
}

/// `wait_while`, `wait_while_for` and `wait_while_until`, each with a
/// predicate that counts its evaluations:
///
/// * `wait_while` until a value reaches 10, which another thread increments
///   ten times with a `notify_all` each: it returns with the value at 10,
///   having evaluated its predicate once plus once per notification that
///   counted it;
/// * `wait_while` whose predicate is already false: one evaluation;
/// * `wait_while_for` (10 s) whose predicate another thread makes false
///   and notifies: not timed out, and `notify_one` found it waiting;
/// * `wait_while_for` (5 ms) whose predicate stays true: timed out, not
///   early, two evaluations (before and after the one wait);
/// * `wait_while_until` whose predicate another thread makes false without
///   notifying: returns at the deadline (not before: nothing woke it), not
///   timed out (the predicate is false when it looks again), two
///   evaluations;
/// * `wait_while_until` with a deadline already past: timed out if the
///   predicate holds (two evaluations), not if it does not (one).
fn wait_while_checks<C: Cv>(name: &str) -> Result<String, String> {
    let m = Mutex::<C::RawMutex, Pred>::new(Pred::default());
    let cv = Condvar::<C>::new();
    let dog = Watchdog::start(name);
    let errors = Errors::default();
    let reset = || *m.lock() = Pred::default();

    // wait_while, against ten notifications.
    let mut notified = 0;
    thread::scope(|s| {
        s.spawn(|| {
            let mut g = m.lock();
            cv.wait_while(&mut g, |p| {
                p.evals += 1;
                p.entered = true;
                p.value < 10
            });
            if g.value != 10 {
                errors.push(format!("wait_while returned with the value at {}", g.value));
            }
        });
        drop(lock_when(&m, |p| p.entered));
        for i in 0..10 {
            let mut g = m.lock();
            g.value += 1;
            notified += if i % 2 == 0 {
                cv.notify_all()
            } else {
                drop(g);
                cv.notify_all()
            };
            dog.progress();
            thread::sleep(Duration::from_micros(200));
        }
    });
    let evals = m.lock().evals;
    if evals != 1 + notified as u64 {
        errors.push(format!(
            "wait_while evaluated its predicate {evals} times, but the notifications counted \
             it {notified} times (expected 1 + {notified})"
        ));
    }
    let report = format!("wait_while woke {} times for 10 increments", evals - 1);

    // wait_while with its predicate already false.
    reset();
    let mut g = m.lock();
    cv.wait_while(&mut g, |p| {
        p.evals += 1;
        false
    });
    if g.evals != 1 {
        errors.push(format!("wait_while(false) evaluated its predicate {} times", g.evals));
    }
    drop(g);

    // wait_while_for, made false in time.
    reset();
    let long = Duration::from_secs(10);
    thread::scope(|s| {
        s.spawn(|| {
            let mut g = m.lock();
            let t0 = Instant::now();
            let r = cv.wait_while_for(
                &mut g,
                |p| {
                    p.entered = true;
                    !p.ready
                },
                long,
            );
            if r.timed_out() || !g.ready {
                errors.push(format!(
                    "wait_while_for(10 s) returned after {:?}: timed_out() = {}, predicate made \
                     false {}",
                    t0.elapsed(),
                    r.timed_out(),
                    if g.ready { "(and it was)" } else { "(not yet)" }
                ));
            }
        });
        drop(lock_when(&m, |p| p.entered));
        thread::sleep(Duration::from_millis(1));
        let mut g = m.lock();
        g.ready = true;
        if !cv.notify_one() {
            errors.push(String::from("wait_while_for(10 s): notify_one found no waiter"));
        }
        drop(g);
        dog.progress();
    });

    // wait_while_for, never made false.
    reset();
    let short = Duration::from_millis(5);
    let mut g = m.lock();
    let t0 = Instant::now();
    let r = cv.wait_while_for(
        &mut g,
        |p| {
            p.evals += 1;
            !p.ready
        },
        short,
    );
    let took = t0.elapsed();
    if !r.timed_out() || took < short || g.evals != 2 {
        errors.push(format!(
            "wait_while_for(5 ms), never made false: timed_out() = {} after {took:?}, \
             {} predicate evaluations (expected true, at least 5 ms, 2)",
            r.timed_out(),
            g.evals
        ));
    }
    drop(g);
    dog.progress();

    // wait_while_until, made false without a notification. The deadline
    // leaves this thread 100 ms to see the waiter enter and make the
    // predicate false: a loaded machine (the sanitizer's run, beside other
    // tests) may keep it from running for milliseconds.
    reset();
    thread::scope(|s| {
        s.spawn(|| {
            let mut g = m.lock();
            let deadline = Instant::now() + Duration::from_millis(100);
            let r = cv.wait_while_until(
                &mut g,
                |p| {
                    p.evals += 1;
                    p.entered = true;
                    !p.ready
                },
                deadline,
            );
            let now = Instant::now();
            if now < deadline {
                errors.push(format!(
                    "wait_while_until with no notification returned {:?} before its deadline \
                     (timed_out() = {})",
                    deadline - now,
                    r.timed_out()
                ));
            } else if r.timed_out() || g.evals != 2 {
                errors.push(format!(
                    "wait_while_until, its predicate made false without a notification: \
                     timed_out() = {}, {} evaluations (expected false, 2)",
                    r.timed_out(),
                    g.evals
                ));
            }
        });
        let mut g = lock_when(&m, |p| p.entered);
        g.ready = true;
        drop(g);
        dog.progress();
    });

    // wait_while_until, deadline already past.
    for holds in [true, false] {
        reset();
        let mut g = m.lock();
        let past = Instant::now();
        let r = cv.wait_while_until(
            &mut g,
            |p| {
                p.evals += 1;
                holds
            },
            past,
        );
        let expected = if holds { 2 } else { 1 };
        if r.timed_out() != holds || g.evals != expected {
            errors.push(format!(
                "wait_while_until(past), predicate {holds}: timed_out() = {}, {} evaluations \
                 (expected {holds}, {expected})",
                r.timed_out(),
                g.evals
            ));
        }
        drop(g);
    }
    errors.result(report)
}

/// `wait_while`, `wait_while_for` and `wait_while_until` return as their
/// predicates and deadlines say (see [`wait_while_checks`]).
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn wait_while_and_its_timed_forms() {
    for _ in 0..scaled(1) {
        let r = wait_while_checks::<spinbit::RawCondvar>("wait_while_and_its_timed_forms");
        eprintln!("{}", r.unwrap_or_else(|e| panic!("{e}")));
    }
}

// ---------------------------------------------------------------------------
// Timed waits with no notifier
// ---------------------------------------------------------------------------

/// The timeouts of [`timeouts_not_early`]'s waits.
const TIMEOUTS: [Duration; 4] = [
    Duration::from_millis(1),
    Duration::from_millis(2),
    Duration::from_millis(5),
    Duration::from_millis(10),
];

/// Timed waits that nobody notifies:
///
/// * one thread, `wait_for(d)` and `wait_until(now + d)` for each of
///   [`TIMEOUTS`]: timed out, not before the deadline, holding the mutex;
/// * deadlines already past (`wait_until` one second and a moment ago,
///   `wait_for(ZERO)`): timed out at once, holding the mutex (which another
///   `try_lock` cannot take);
/// * eight threads at once on one condition variable, with different
///   timeouts (waiters leave the list from its middle): each times out, not
///   early; then the notifications count nobody;
/// * `wait_for(Duration::MAX)`, too large for an `Instant`, waits as `wait`
///   does: it returns, not timed out, only once notified.
fn timeouts_not_early<C: Cv>(name: &str) -> Result<String, String> {
    let m = Mutex::<C::RawMutex, u64>::new(0);
    let cv = Condvar::<C>::new();
    let dog = Watchdog::start(name);
    let errors = Errors::default();
    let mut waits = 0;

    // One thread.
    let mut past = vec![
        (String::from("wait_until(a moment ago)"), Some(Instant::now())),
        (String::from("wait_for(ZERO)"), None),
    ];
    if let Some(ago) = Instant::now().checked_sub(Duration::from_secs(1)) {
        past.push((String::from("wait_until(1 s ago)"), Some(ago)));
    }
    for d in TIMEOUTS {
        for until in [false, true] {
            let what =
                if until { format!("wait_until(now + {d:?})") } else { format!("wait_for({d:?})") };
            let mut g = m.lock();
            let deadline = Instant::now() + d;
            let r = if until { cv.wait_until(&mut g, deadline) } else { cv.wait_for(&mut g, d) };
            let now = Instant::now();
            if !held(&g) {
                errors.push(format!("{what} returned without the mutex"));
                mem::forget(g);
                return errors.result(String::new());
            }
            *g += 1;
            drop(g);
            waits += 1;
            if !r.timed_out() {
                errors.push(format!("{what} returned, not timed out, and nobody notified"));
            } else if now < deadline {
                errors.push(format!("{what} timed out {:?} before its deadline", deadline - now));
            }
            dog.progress();
        }
    }
    for (what, deadline) in past {
        let mut g = m.lock();
        let r = match deadline {
            Some(t) => cv.wait_until(&mut g, t),
            None => cv.wait_for(&mut g, Duration::ZERO),
        };
        if !held(&g) {
            errors.push(format!("{what} returned without the mutex"));
            mem::forget(g);
            return errors.result(String::new());
        }
        if m.try_lock().is_some() {
            errors.push(format!("{what} returned and another try_lock took the mutex"));
        }
        *g += 1;
        drop(g);
        waits += 1;
        if !r.timed_out() {
            errors.push(format!("{what} returned, not timed out"));
        }
        dog.progress();
    }
    if !errors.is_empty() {
        return errors.result(String::new());
    }

    // Eight threads at once.
    thread::scope(|s| {
        for t in 0..8u32 {
            let (m, cv, errors, dog) = (&m, &cv, &errors, &dog);
            s.spawn(move || {
                for i in 0..3u32 {
                    let d = Duration::from_micros(500 * u64::from(1 + (t + i) % 4));
                    let mut g = m.lock();
                    let deadline = Instant::now() + d;
                    let r = if t % 2 == 0 {
                        cv.wait_until(&mut g, deadline)
                    } else {
                        cv.wait_for(&mut g, d)
                    };
                    let now = Instant::now();
                    *g += 1;
                    drop(g);
                    if !r.timed_out() {
                        errors.push(format!(
                            "thread {t}: a wait of {d:?} returned, not timed out, and nobody \
                             notified"
                        ));
                    } else if now < deadline {
                        errors.push(format!(
                            "thread {t}: a wait of {d:?} timed out {:?} before its deadline",
                            deadline - now
                        ));
                    }
                    dog.progress();
                }
            });
        }
    });
    waits += 24;
    let (all, one) = (cv.notify_all(), cv.notify_one());
    if all != 0 || one {
        errors.push(format!(
            "after every timed wait ran out, notify_all returned {all} and notify_one {one}"
        ));
    }

    // A timeout too large for an Instant.
    let entered = Mutex::<C::RawMutex, bool>::new(false);
    thread::scope(|s| {
        s.spawn(|| {
            let mut g = entered.lock();
            *g = true;
            let r = cv.wait_for(&mut g, Duration::MAX);
            if r.timed_out() {
                errors.push(String::from("wait_for(Duration::MAX) timed out"));
            }
        });
        let g = lock_when(&entered, |e| *e);
        if !cv.notify_one() {
            errors.push(String::from("wait_for(Duration::MAX) was not waiting"));
        }
        drop(g);
    });
    errors.result(format!("{waits} timed waits, none early"))
}

/// Timed waits with nobody to notify them time out, never early, and hold
/// the mutex when they return (see [`timeouts_not_early`]).
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn timed_waits_never_return_early() {
    for _ in 0..scaled(1) {
        let r = timeouts_not_early::<spinbit::RawCondvar>("timed_waits_never_return_early");
        eprintln!("{}", r.unwrap_or_else(|e| panic!("{e}")));
    }
}

// ---------------------------------------------------------------------------
// Exact counts
// ---------------------------------------------------------------------------

/// What the waiters of [`exact_counts`] share.
#[derive(Default)]
struct Gate {
    /// Untimed waiters that are about to wait (counted under the mutex,
    /// which their wait releases only once they are on the list).
    entered: usize,
    /// Bumped by the notifier before it notifies: a waiter that finds it
    /// unchanged returned without a notification.
    go: u64,
}

/// An untimed waiter of [`exact_counts`]: waits once, and must come back
/// notified.
fn gate_waiter<C: Cv>(m: &Mutex<C::RawMutex, Gate>, cv: &Condvar<C>, errors: &Errors) {
    let mut g = m.lock();
    let go = g.go;
    g.entered += 1;
    cv.wait(&mut g);
    if g.go == go {
        errors.push(String::from("a waiter returned before any notification (spurious wakeup)"));
    }
}

/// A timed waiter of [`exact_counts`]: waits `d` with nobody to notify it,
/// and must time out.
fn timed_gate_waiter<C: Cv>(
    m: &Mutex<C::RawMutex, Gate>,
    cv: &Condvar<C>,
    d: Duration,
    errors: &Errors,
) {
    let mut g = m.lock();
    let deadline = Instant::now() + d;
    let r = cv.wait_for(&mut g, d);
    let now = Instant::now();
    drop(g);
    if !r.timed_out() {
        errors.push(format!("a wait_for({d:?}) returned, not timed out, and nobody notified it"));
    } else if now < deadline {
        errors.push(format!("a wait_for({d:?}) timed out {:?} early", deadline - now));
    }
}

/// With `n` threads known to wait (each counts itself under the mutex right
/// before its wait, and the notifier holds the mutex when it sees all `n`
/// counted, so all `n` are on the list):
///
/// * `notify_all` returns `n`; with nobody left, it returns 0 and
///   `notify_one` false;
/// * `notify_one` returns true `n` times (half under the mutex, half after
///   the unlock), then false;
/// * `n` timed waiters that all timed out (joined) are not counted:
///   `notify_all` returns 0, `notify_one` false; and with `n / 2` untimed
///   waiters waiting besides such timed-out ones, `notify_all` returns
///   `n / 2`.
///
/// Every untimed waiter waits once and must come back notified.
fn exact_counts<C: Cv>(name: &str, n: usize) -> Result<String, String> {
    let m = Mutex::<C::RawMutex, Gate>::new(Gate::default());
    let cv = Condvar::<C>::new();
    let dog = Watchdog::start(name);
    let errors = Errors::default();
    let timeout = Duration::from_millis(2);
    let nobody_counted = |when: &str| {
        let (all, one) = (cv.notify_all(), cv.notify_one());
        if all != 0 || one {
            errors.push(format!("{when}: notify_all returned {all}, notify_one {one}"));
        }
    };

    // notify_all.
    thread::scope(|s| {
        for _ in 0..n {
            s.spawn(|| gate_waiter(&m, &cv, &errors));
        }
        let mut g = lock_when(&m, |g| g.entered == n);
        g.go += 1;
        let k = cv.notify_all();
        if k != n {
            errors.push(format!("notify_all returned {k} with {n} threads waiting"));
        }
        drop(g);
        dog.progress();
    });
    nobody_counted("with nobody waiting");

    // notify_one.
    m.lock().entered = 0;
    thread::scope(|s| {
        for _ in 0..n {
            s.spawn(|| gate_waiter(&m, &cv, &errors));
        }
        let mut g = lock_when(&m, |g| g.entered == n);
        g.go += 1;
        let mut trues = 0;
        for _ in 0..n / 2 {
            trues += usize::from(cv.notify_one());
        }
        drop(g);
        for _ in n / 2..n {
            trues += usize::from(cv.notify_one());
        }
        let extra = cv.notify_one();
        if trues != n || extra {
            errors.push(format!(
                "with {n} threads waiting, {n} calls of notify_one returned true {trues} times, \
                 and one more returned {extra}"
            ));
        }
        dog.progress();
    });

    // Timed waiters that time out.
    thread::scope(|s| {
        for _ in 0..n {
            s.spawn(|| timed_gate_waiter(&m, &cv, timeout, &errors));
        }
    });
    nobody_counted(&format!("after {n} timed waits ran out"));
    dog.progress();

    // Timed-out waiters beside untimed ones still waiting.
    let untimed = n / 2;
    m.lock().entered = 0;
    thread::scope(|s| {
        for _ in 0..untimed {
            s.spawn(|| gate_waiter(&m, &cv, &errors));
        }
        let timed: Vec<_> =
            (0..n).map(|_| s.spawn(|| timed_gate_waiter(&m, &cv, timeout, &errors))).collect();
        for h in timed {
            h.join().unwrap();
        }
        let mut g = lock_when(&m, |g| g.entered == untimed);
        g.go += 1;
        let k = cv.notify_all();
        if k != untimed {
            errors.push(format!(
                "notify_all returned {k} with {untimed} threads waiting and {n} timed waits run out"
            ));
        }
        drop(g);
        dog.progress();
    });
    nobody_counted("at the end");
    errors.result(format!("{n} waiters"))
}

/// `notify_all` and `notify_one` count exactly the threads waiting, and
/// never a timed-out one (see [`exact_counts`]); 8 waiters.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn exact_counts_8_waiters() {
    for _ in 0..scaled(1) {
        let r = exact_counts::<spinbit::RawCondvar>("exact_counts_8_waiters", 8);
        eprintln!("{}", r.unwrap_or_else(|e| panic!("{e}")));
    }
}

/// As [`exact_counts_8_waiters`], with 48 waiters.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn exact_counts_48_waiters() {
    for _ in 0..scaled(1) {
        let r = exact_counts::<spinbit::RawCondvar>("exact_counts_48_waiters", 48);
        eprintln!("{}", r.unwrap_or_else(|e| panic!("{e}")));
    }
}

// ---------------------------------------------------------------------------
// Timed waits racing notifications
// ---------------------------------------------------------------------------

/// What the waiters of [`timed_waits_race_notify`] publish.
struct Slot {
    /// Waits begun, over all rounds.
    entered: u64,
    /// The deadline of the last wait begun.
    deadline: Instant,
}

/// `rounds` rounds of `waiters` timed waiters and one notifier. Each waiter
/// counts itself and publishes its deadline under the mutex, then waits
/// `timeout` (`wait_for` and `wait_until` in turn); the notifier, once all
/// of them counted themselves (so each is on the list, or already timed
/// out), notifies at a random moment within `timeout / 2` of the last
/// deadline, where the notification and the timeouts race: `notify_one`
/// with one waiter, `notify_all` with more, under the mutex or not (at
/// random). All meet at a barrier before the next round.
///
/// Checks that in every round the notification counted exactly the waiters
/// that did not time out (no notification counts a waiter that timed out,
/// and no waiter returns un-timed-out without one), and that no wait timed
/// out early.
fn timed_waits_race_notify<C: Cv>(
    name: &str,
    waiters: usize,
    rounds: u64,
    timeout: Duration,
) -> Result<String, String> {
    let m = Mutex::<C::RawMutex, Slot>::new(Slot { entered: 0, deadline: Instant::now() });
    let cv = Condvar::<C>::new();
    let meet = Barrier::new(waiters + 1);
    let dog = Watchdog::start(name);
    let errors = Errors::default();
    // Per round: waits that did not time out.
    let woken: Vec<AtomicUsize> = (0..rounds).map(|_| AtomicUsize::new(0)).collect();
    let mut timeouts = 0;
    let (notified, late_counted) = thread::scope(|s| {
        let ws: Vec<_> = (0..waiters)
            .map(|_| {
                s.spawn(|| {
                    let mut timeouts = 0;
                    for (r, woken) in woken.iter().enumerate() {
                        let mut g = m.lock();
                        let deadline = Instant::now() + timeout;
                        g.entered += 1;
                        g.deadline = deadline;
                        let res = if r % 2 == 0 {
                            cv.wait_until(&mut g, deadline)
                        } else {
                            cv.wait_for(&mut g, timeout)
                        };
                        let now = Instant::now();
                        drop(g);
                        if !res.timed_out() {
                            woken.fetch_add(1, Relaxed);
                        } else if now < deadline {
                            errors.push(format!(
                                "round {r}: a wait timed out {:?} before its deadline",
                                deadline - now
                            ));
                        }
                        timeouts += usize::from(res.timed_out());
                        dog.progress();
                        meet.wait();
                    }
                    timeouts
                })
            })
            .collect();
        let notifier = s.spawn(|| {
            let mut rng = Rng::new(rounds + waiters as u64);
            let mut notified = Vec::new();
            let mut late_counted = 0;
            let span = timeout.as_nanos() as u64;
            let notify =
                || if waiters == 1 { usize::from(cv.notify_one()) } else { cv.notify_all() };
            for r in 1..=rounds {
                let deadline = lock_when(&m, |slot| slot.entered == r * waiters as u64).deadline;
                let at = deadline + Duration::from_nanos(rng.below(span));
                sleep_until(at.checked_sub(timeout / 2).unwrap_or(at));
                let (n, late) = if rng.one_in(2) {
                    let _g = m.lock();
                    (notify(), Instant::now() >= deadline)
                } else {
                    let late = Instant::now() >= deadline;
                    (notify(), late)
                };
                // In the `wait_until` rounds, `deadline` is the last wait's own.
                if late && r % 2 == 1 {
                    late_counted += n;
                }
                notified.push(n);
                meet.wait();
            }
            (notified, late_counted)
        });
        for w in ws {
            timeouts += w.join().unwrap();
        }
        notifier.join().unwrap()
    });
    let mismatched: Vec<_> = (0..rounds as usize)
        .filter(|&i| notified[i] != woken[i].load(Relaxed))
        .map(|i| {
            format!(
                "round {i}: the notification counted {}, {} waits did not time out",
                notified[i],
                woken[i].load(Relaxed)
            )
        })
        .collect();
    let n: usize = notified.iter().sum();
    if !mismatched.is_empty() {
        errors.push(format!(
            "in {} of {rounds} rounds the notification's count and the timeouts disagree: {}",
            mismatched.len(),
            mismatched[..mismatched.len().min(4)].join(", ")
        ));
    }
    errors.result(format!(
        "{waiters} waiters, {rounds} rounds of {timeout:?}: {n} waits notified, {timeouts} \
         timed out; {late_counted} counted by a notification at or after the last deadline"
    ))
}

/// A short timed wait racing a `notify_one` around its deadline, 250
/// rounds: the notifier counts the waiter exactly when the waiter did not
/// time out (see [`timed_waits_race_notify`]).
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn timed_wait_racing_notify_one() {
    let r = timed_waits_race_notify::<spinbit::RawCondvar>(
        "timed_wait_racing_notify_one",
        1,
        scaled(250),
        Duration::from_millis(1),
    );
    eprintln!("{}", r.unwrap_or_else(|e| panic!("{e}")));
}

/// Four short timed waits racing a `notify_all` around their deadlines,
/// 150 rounds: it counts exactly the waiters that did not time out (see
/// [`timed_waits_race_notify`]).
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn timed_waits_racing_notify_all() {
    let r = timed_waits_race_notify::<spinbit::RawCondvar>(
        "timed_waits_racing_notify_all",
        4,
        scaled(150),
        Duration::from_millis(1),
    );
    eprintln!("{}", r.unwrap_or_else(|e| panic!("{e}")));
}

/// The races of [`timed_wait_racing_notify_one`] and
/// [`timed_waits_racing_notify_all`] over `FairCondvar` and `FairMutex`
/// (a requeued waiter whose deadline passes is handed the mutex by a fair
/// unlock), 100 rounds each.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn fair_timed_waits_racing_notifications() {
    type Fair = spinbit::RawCondvar<spinbit::RawFairMutex>;
    for waiters in [1, 4] {
        let r = timed_waits_race_notify::<Fair>(
            "fair_timed_waits_racing_notifications",
            waiters,
            scaled(100),
            Duration::from_millis(1),
        );
        eprintln!("fair: {}", r.unwrap_or_else(|e| panic!("{e}")));
    }
}

/// [`exact_counts`] over `FairCondvar` and `FairMutex`, 8 waiters.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn fair_exact_counts() {
    type Fair = spinbit::RawCondvar<spinbit::RawFairMutex>;
    for _ in 0..scaled(1) {
        let r = exact_counts::<Fair>("fair_exact_counts", 8);
        eprintln!("fair: {}", r.unwrap_or_else(|e| panic!("{e}")));
    }
}

// ---------------------------------------------------------------------------
// Two mutexes
// ---------------------------------------------------------------------------

/// A flag for a waiter to say it is about to wait, and one for its
/// notifier to say it notified.
#[derive(Default)]
struct Entered {
    entered: bool,
    go: bool,
}

/// A thread waits on `cv` with `m` (once; it must come back notified),
/// another notifies it once it is waiting: `notify_one` must count it.
fn wait_once_with<C: Cv>(
    m: &Mutex<C::RawMutex, Entered>,
    cv: &Condvar<C>,
    what: &str,
    errors: &Errors,
) {
    *m.lock() = Entered::default();
    thread::scope(|s| {
        let w = s.spawn(|| {
            let mut g = m.lock();
            g.entered = true;
            cv.wait(&mut g);
            g.go
        });
        let mut g = lock_when(m, |e| e.entered);
        g.go = true;
        let notified = cv.notify_one();
        drop(g);
        match w.join() {
            Ok(true) if notified => {}
            Ok(go) => errors.push(format!(
                "{what}: notify_one returned {notified}, the waiter came back notified {go}"
            )),
            Err(p) => errors.push(format!("{what}: the wait panicked: {}", message(&*p))),
        }
    });
}

/// The message of a panic's payload.
fn message(p: &(dyn std::any::Any + Send)) -> String {
    match (p.downcast_ref::<&str>(), p.downcast_ref::<String>()) {
        (Some(s), _) => (*s).to_owned(),
        (_, Some(s)) => s.clone(),
        _ => String::from("(not a string)"),
    }
}

/// Thread A waits on `cv` with `m1` (known to wait, as in
/// [`exact_counts`]); meanwhile the main thread's wait on `cv` with `m2`
/// must panic before it unlocks anything: the panic unwinds through the
/// guard of `m2`, which unlocks it, so `m2` is free and usable afterwards;
/// A is still waiting, and `notify_one` counts it (only it) and wakes it.
/// Then the condition variable is used with `m1` (a timed wait that runs
/// out), `m2`, `m1` and `m2` again, one after the other: each time a waiter
/// waits and is notified.
fn two_mutexes<C: Cv>(name: &str) -> Result<String, String> {
    let m1 = Mutex::<C::RawMutex, Entered>::new(Entered::default());
    let m2 = Mutex::<C::RawMutex, Entered>::new(Entered::default());
    let cv = Condvar::<C>::new();
    let dog = Watchdog::start(name);
    let errors = Errors::default();
    let mut report = String::new();
    thread::scope(|s| {
        let a = s.spawn(|| {
            let mut g = m1.lock();
            g.entered = true;
            cv.wait(&mut g);
            g.go
        });
        drop(lock_when(&m1, |e| e.entered));
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            let mut g2 = m2.lock();
            cv.wait(&mut g2);
        }));
        match r {
            Ok(()) => errors.push(String::from(
                "a wait with a second mutex, while A waits with the first, did not panic",
            )),
            Err(p) => report = format!("the wait with a second mutex panicked: {}", message(&*p)),
        }
        if m2.is_locked() {
            errors.push(String::from("the second mutex is locked after the panic"));
        } else {
            match m2.try_lock() {
                Some(mut g) => g.entered = false,
                None => {
                    errors.push(String::from("the second mutex cannot be taken after the panic"))
                }
            }
        }
        let mut g = m1.lock();
        g.go = true;
        let (first, second) = (cv.notify_one(), cv.notify_one());
        drop(g);
        if !first || second {
            errors.push(format!(
                "with A waiting, notify_one returned {first}, then {second} (expected true, false)"
            ));
        }
        match a.join() {
            Ok(true) => {}
            Ok(false) => errors.push(String::from("A came back before it was notified")),
            Err(p) => errors.push(format!("A's wait panicked: {}", message(&*p))),
        }
        dog.progress();
    });
    let mut g = m1.lock();
    if !cv.wait_for(&mut g, Duration::from_millis(1)).timed_out() {
        errors.push(String::from("a wait_for(1ms) with the first mutex did not time out"));
    }
    drop(g);
    wait_once_with(&m2, &cv, "then with the second mutex", &errors);
    wait_once_with(&m1, &cv, "then with the first again", &errors);
    wait_once_with(&m2, &cv, "then with the second again", &errors);
    dog.progress();
    errors.result(report)
}

/// Waiting with two mutexes at once panics, harmlessly; one after the other
/// works (see [`two_mutexes`]).
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn two_mutexes_at_once_panic_one_after_the_other_work() {
    for _ in 0..scaled(1) {
        let r = two_mutexes::<spinbit::RawCondvar>("two_mutexes");
        let report = r.unwrap_or_else(|e| panic!("{e}"));
        assert!(report.contains("more than one mutex"), "{report}");
        eprintln!("{report}");
    }
}

// ---------------------------------------------------------------------------
// Negative controls: each check fails on a deliberately broken condvar
// ---------------------------------------------------------------------------

/// The condition variable the broken ones wrap.
type Inner = spinbit::RawCondvar;

/// A condition variable over `spinbit::RawMutex` that forwards to
/// `spinbit::RawCondvar` except where its fault `F` departs from it.
struct Broken<F> {
    inner: Inner,
    /// What the fault keeps: a count, an address.
    aux: AtomicUsize,
    fault: PhantomData<fn() -> F>,
}

/// How a [`Broken`] condition variable departs from spinbit's: each method
/// is spinbit's unless the fault redefines it.
trait Fault: Sized + 'static {
    /// # Safety
    /// As for [`RawCondvar::wait`].
    unsafe fn wait(cv: &Broken<Self>, m: &spinbit::RawMutex, g: &mut GuardSend) {
        // SAFETY: forwarded from the caller.
        unsafe { cv.inner.wait(m, g) }
    }

    /// # Safety
    /// As for [`RawCondvarTimed::wait_until`].
    unsafe fn wait_until(
        cv: &Broken<Self>,
        m: &spinbit::RawMutex,
        g: &mut GuardSend,
        t: &Instant,
    ) -> bool {
        // SAFETY: forwarded from the caller.
        unsafe { cv.inner.wait_until(m, g, t) }
    }

    fn notify_one(cv: &Broken<Self>) -> bool {
        cv.inner.notify_one()
    }

    fn notify_all(cv: &Broken<Self>) -> usize {
        cv.inner.notify_all()
    }
}

// SAFETY: `spinbit::RawCondvar`'s, except where a fault departs from it on
// purpose (spurious wakeups, wrong counts, a timed wait that returns
// without the mutex); the type is used only by the negative controls, whose
// checks expect those departures and do not rely on the contract they
// break (a check that finds a guard without its mutex forgets it).
unsafe impl<F: Fault> RawCondvar for Broken<F> {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Broken { inner: Inner::new(), aux: AtomicUsize::new(0), fault: PhantomData };

    type RawMutex = spinbit::RawMutex;

    unsafe fn wait(&self, m: &spinbit::RawMutex, g: &mut GuardSend) {
        // SAFETY: forwarded from the caller.
        unsafe { F::wait(self, m, g) }
    }

    fn notify_one(&self) -> bool {
        F::notify_one(self)
    }

    fn notify_all(&self) -> usize {
        F::notify_all(self)
    }
}

// SAFETY: as above.
unsafe impl<F: Fault> RawCondvarTimed for Broken<F> {
    fn checked_duration_to_instant(d: &Duration) -> Option<Instant> {
        Instant::now().checked_add(*d)
    }

    unsafe fn wait_until(&self, m: &spinbit::RawMutex, g: &mut GuardSend, t: &Instant) -> bool {
        // SAFETY: forwarded from the caller.
        unsafe { F::wait_until(self, m, g, t) }
    }
}

/// Unlocks the mutex and locks it again: a wait that returns at once, with
/// no notification.
///
/// # Safety
/// As for [`RawCondvar::wait`].
unsafe fn unlock_relock(m: &spinbit::RawMutex, g: &mut GuardSend) {
    // SAFETY: the caller holds `m`, with `g` its guard.
    unsafe { m.unlock(mem::take(g)) };
    *g = m.lock();
}

/// Unlocks the mutex, yields and locks it again: a wait that returns
/// without a notification, once other threads had a chance to run.
///
/// # Safety
/// As for [`RawCondvar::wait`].
unsafe fn unlock_yield_relock(m: &spinbit::RawMutex, g: &mut GuardSend) {
    // SAFETY: the caller holds `m`, with `g` its guard.
    unsafe { m.unlock(mem::take(g)) };
    thread::yield_now();
    *g = m.lock();
}

/// Wakes spuriously: every wait returns without a notification (it
/// unlocks the mutex, yields and locks it again); a timed one says it timed
/// out only once its deadline passed.
enum Spurious {}

impl Fault for Spurious {
    unsafe fn wait(_: &Broken<Self>, m: &spinbit::RawMutex, g: &mut GuardSend) {
        // SAFETY: forwarded from the caller.
        unsafe { unlock_yield_relock(m, g) }
    }

    unsafe fn wait_until(
        _: &Broken<Self>,
        m: &spinbit::RawMutex,
        g: &mut GuardSend,
        t: &Instant,
    ) -> bool {
        // SAFETY: forwarded from the caller.
        unsafe { unlock_yield_relock(m, g) };
        Instant::now() >= *t
    }
}

/// Wakes spuriously at once: every wait unlocks the mutex and locks it
/// again, without yielding (so the other threads of a barrier have not
/// arrived yet). Only the barrier uses it: in a wait loop it spins, which
/// starves the threads it waits for.
enum SpuriousAtOnce {}

impl Fault for SpuriousAtOnce {
    unsafe fn wait(_: &Broken<Self>, m: &spinbit::RawMutex, g: &mut GuardSend) {
        // SAFETY: forwarded from the caller.
        unsafe { unlock_relock(m, g) }
    }
}

/// Counts a waiter too many: `notify_one` always says it notified one,
/// `notify_all` one more than it did.
enum Overcounts {}

impl Fault for Overcounts {
    fn notify_one(cv: &Broken<Self>) -> bool {
        cv.inner.notify_one();
        true
    }

    fn notify_all(cv: &Broken<Self>) -> usize {
        cv.inner.notify_all() + 1
    }
}

/// Counts waiters whose timed waits ran out: the next notifications count
/// them as if they had notified them (exact otherwise).
enum CountsTimedOut {}

impl Fault for CountsTimedOut {
    unsafe fn wait_until(
        cv: &Broken<Self>,
        m: &spinbit::RawMutex,
        g: &mut GuardSend,
        t: &Instant,
    ) -> bool {
        // SAFETY: forwarded from the caller.
        let timed_out = unsafe { cv.inner.wait_until(m, g, t) };
        if timed_out {
            cv.aux.fetch_add(1, Relaxed);
        }
        timed_out
    }

    fn notify_one(cv: &Broken<Self>) -> bool {
        cv.inner.notify_one() || cv.aux.fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1)).is_ok()
    }

    fn notify_all(cv: &Broken<Self>) -> usize {
        cv.inner.notify_all() + cv.aux.swap(0, Relaxed)
    }
}

/// A timed wait returns at once (it unlocks the mutex and locks it again),
/// saying it timed out: an early timeout.
enum EarlyTimeout {}

impl Fault for EarlyTimeout {
    unsafe fn wait_until(
        _: &Broken<Self>,
        m: &spinbit::RawMutex,
        g: &mut GuardSend,
        _: &Instant,
    ) -> bool {
        // SAFETY: forwarded from the caller.
        unsafe { unlock_relock(m, g) };
        true
    }
}

/// A timed wait that ran out returns without the mutex.
enum TimeoutUnlocked {}

impl Fault for TimeoutUnlocked {
    unsafe fn wait_until(
        cv: &Broken<Self>,
        m: &spinbit::RawMutex,
        g: &mut GuardSend,
        t: &Instant,
    ) -> bool {
        // SAFETY: forwarded from the caller.
        let timed_out = unsafe { cv.inner.wait_until(m, g, t) };
        if timed_out {
            // SAFETY: the inner wait returned holding `m`. Unlocking it
            // breaks the contract on purpose: the check that sees it forgets
            // the guard.
            unsafe { m.unlock(mem::take(g)) };
        }
        timed_out
    }
}

/// A wait with a second mutex, while threads wait with another, does not
/// panic: it returns, holding its mutex, as if notified.
enum NeverPanics {}

impl Fault for NeverPanics {
    unsafe fn wait(cv: &Broken<Self>, m: &spinbit::RawMutex, g: &mut GuardSend) {
        // The inner wait panics before it unlocks `m`, so `m` is still
        // held, with `g` its guard, if it does.
        let _ = panic::catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: forwarded from the caller.
            unsafe { cv.inner.wait(m, g) }
        }));
    }
}

/// Remembers the first mutex it was used with, and panics (before it
/// unlocks anything) when a wait comes with another, even once nobody
/// waits any more.
enum RemembersFirstMutex {}

impl Fault for RemembersFirstMutex {
    unsafe fn wait(cv: &Broken<Self>, m: &spinbit::RawMutex, g: &mut GuardSend) {
        let addr = std::ptr::from_ref(m).addr();
        if let Err(first) = cv.aux.compare_exchange(0, addr, Relaxed, Relaxed) {
            assert_eq!(first, addr, "a condvar used with two mutexes");
        }
        // SAFETY: forwarded from the caller.
        unsafe { cv.inner.wait(m, g) }
    }
}

/// Loses every other `notify_one`: it says it notified a waiter and wakes
/// nobody.
enum LosesWakeups {}

impl Fault for LosesWakeups {
    fn notify_one(cv: &Broken<Self>) -> bool {
        cv.aux.fetch_add(1, Relaxed) % 2 == 1 || cv.inner.notify_one()
    }
}

/// How long a negative control whose broken condvar shows only when a race
/// lands keeps running its check before it fails (see [`noticed`]).
const RACE_BUDGET: Duration = Duration::from_secs(20);

/// As [`noticed`], for a control that expects several failures, some of
/// which show only when a race lands: runs `check` until each of `marks`
/// was in the error of some run; panics if one was in none once `budget`
/// has passed.
fn noticed_all(
    budget: Duration,
    marks: &[&str],
    mut check: impl FnMut() -> Result<String, String>,
) {
    let start = Instant::now();
    let mut missing = marks.to_vec();
    for run in 1.. {
        match check() {
            Err(e) => missing.retain(|m| !e.contains(m)),
            Ok(report) => eprintln!("run {run} noticed nothing: {report}"),
        }
        if missing.is_empty() {
            return;
        }
        if start.elapsed() >= budget {
            panic!("no run reported {missing:?}: {run} runs over {:?}", start.elapsed());
        }
    }
}

/// The queue catches spurious wakeups: more waits return than the
/// notifications counted.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn negative_control_queue_catches_spurious_wakeups() {
    noticed(RACE_BUDGET, &["notifications ended"], || {
        queue::<Broken<Spurious>>("queue (spurious)", 2, 2_000, 2)
    });
}

/// The queue catches a `notify_one` that counts a waiter it did not have.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn negative_control_queue_catches_wrong_counts() {
    noticed(RACE_BUDGET, &["notifications ended"], || {
        queue::<Broken<Overcounts>>("queue (overcounts)", 2, 2_000, 2)
    });
}

/// The queue catches notifications that count waiters whose timed waits
/// ran out.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn negative_control_queue_catches_counted_timeouts() {
    noticed(RACE_BUDGET, &["notifications ended"], || {
        queue::<Broken<CountsTimedOut>>("queue (timed out)", 2, 2_000, 2)
    });
}

/// The queue catches early timeouts.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn negative_control_queue_catches_an_early_timeout() {
    noticed(RACE_BUDGET, &["before its deadline"], || {
        queue::<Broken<EarlyTimeout>>("queue (early)", 2, 500, 2)
    });
}

/// The variable that makes [`lost_wakeup_child`] run.
const CHILD_VAR: &str = "SPINBIT_CONDVAR_LOST_WAKEUP_CHILD";

/// A lost wakeup hangs the queue: run in a child process with a one-second
/// watchdog, the queue on a condvar that loses notifications must end in an
/// abort with the watchdog's message.
#[test]
#[cfg_attr(miri, ignore = "Miri cannot start processes")]
fn negative_control_queue_catches_a_lost_wakeup() {
    let Some(stderr) =
        common::run_hung_child("lost_wakeup_child", CHILD_VAR, "the queue that loses wakeups")
    else {
        return;
    };
    assert!(
        stderr.contains("WATCHDOG: test `queue (lost wakeups)` made no progress"),
        "no watchdog message: {stderr}"
    );
}

/// The queue on [`LosesWakeups`], one producer and one consumer around a
/// queue of one item: hangs, and its watchdog aborts the process. Does
/// nothing unless run by [`negative_control_queue_catches_a_lost_wakeup`].
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
#[ignore = "run in a child process by negative_control_queue_catches_a_lost_wakeup"]
fn lost_wakeup_child() {
    if std::env::var_os(CHILD_VAR).is_none() {
        return;
    }
    let r = queue::<Broken<LosesWakeups>>("queue (lost wakeups)", 1, 100_000, 1);
    panic!("the check returned instead of hanging: {r:?}");
}

/// The barrier catches spurious wakeups: a waiter passes before everyone
/// arrived.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn negative_control_barrier_catches_spurious_wakeups() {
    noticed(RACE_BUDGET, &["passed the barrier with"], || {
        barrier::<Broken<SpuriousAtOnce>>("barrier (spurious)", 4, 50)
    });
}

/// The barrier catches a `notify_all` that miscounts.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn negative_control_barrier_catches_wrong_counts() {
    let e = barrier::<Broken<Overcounts>>("barrier (overcounts)", 4, 20)
        .expect_err("wrong counts must be noticed");
    assert!(e.contains("notify_all returned 4 with 3 threads waiting"), "{e}");
}

/// The `wait_while` checks catch early timeouts.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn negative_control_wait_while_catches_an_early_timeout() {
    let marks = [
        "wait_while_for(10 s) returned after",
        "wait_while_for(5 ms), never made false",
        "wait_while_until with no notification returned",
    ];
    noticed_all(RACE_BUDGET, &marks, || {
        wait_while_checks::<Broken<EarlyTimeout>>("wait_while (early timeout)")
    });
}

/// The `wait_while` checks catch spurious wakeups: the predicate is
/// evaluated more often than notifications came.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn negative_control_wait_while_catches_spurious_wakeups() {
    let marks = ["wait_while evaluated its predicate", "wait_while_for(5 ms), never made false"];
    noticed_all(RACE_BUDGET, &marks, || {
        wait_while_checks::<Broken<Spurious>>("wait_while (spurious)")
    });
}

/// The `wait_while` checks catch a `notify_all` that miscounts.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn negative_control_wait_while_catches_wrong_counts() {
    noticed(RACE_BUDGET, &["wait_while evaluated its predicate"], || {
        wait_while_checks::<Broken<Overcounts>>("wait_while (overcounts)")
    });
}

/// The timed-wait checks catch a timed wait that returns at once.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn negative_control_timed_waits_catch_an_early_timeout() {
    noticed(RACE_BUDGET, &["before its deadline"], || {
        timeouts_not_early::<Broken<EarlyTimeout>>("timed waits (early)")
    });
}

/// The timed-wait checks catch a timed wait that returns without the mutex.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn negative_control_timed_waits_catch_a_timeout_without_the_mutex() {
    let e = timeouts_not_early::<Broken<TimeoutUnlocked>>("timed waits (unlocked)")
        .expect_err("a timed wait without the mutex must be noticed");
    assert!(e.contains("wait_for(1ms) returned without the mutex"), "{e}");
}

/// The timed-wait checks catch spurious wakeups: a wait returns, not timed
/// out, with nobody notifying.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn negative_control_timed_waits_catch_spurious_wakeups() {
    noticed(RACE_BUDGET, &["not timed out, and nobody notified"], || {
        timeouts_not_early::<Broken<Spurious>>("timed waits (spurious)")
    });
}

/// The exact-count checks catch counts one too high.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn negative_control_exact_counts_catch_wrong_counts() {
    let e = exact_counts::<Broken<Overcounts>>("exact counts (overcounts)", 4)
        .expect_err("wrong counts must be noticed");
    assert!(e.contains("notify_all returned 5 with 4 threads waiting"), "{e}");
    assert!(e.contains("returned true 4 times, and one more returned true"), "{e}");
    assert!(e.contains("after 4 timed waits ran out: notify_all returned 1"), "{e}");
}

/// The exact-count checks catch notifications that count timed-out
/// waiters.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn negative_control_exact_counts_catch_counted_timeouts() {
    let e = exact_counts::<Broken<CountsTimedOut>>("exact counts (timed out)", 4)
        .expect_err("counted timeouts must be noticed");
    assert!(e.contains("after 4 timed waits ran out: notify_all returned 4"), "{e}");
    assert!(e.contains("notify_all returned 6 with 2 threads waiting"), "{e}");
}

/// The exact-count checks catch spurious wakeups.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn negative_control_exact_counts_catch_spurious_wakeups() {
    let marks = [
        "before any notification (spurious wakeup)",
        "returned, not timed out, and nobody notified it",
    ];
    noticed_all(RACE_BUDGET, &marks, || {
        exact_counts::<Broken<Spurious>>("exact counts (spurious)", 4)
    });
}

/// The race check catches notifications that count timed-out waiters (in
/// the rounds where a timeout came first), with `notify_one` and with
/// `notify_all`.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn negative_control_race_catches_counted_timeouts() {
    for waiters in [1, 3] {
        noticed(RACE_BUDGET, &["disagree"], || {
            timed_waits_race_notify::<Broken<CountsTimedOut>>(
                "race (timed out)",
                waiters,
                50,
                Duration::from_millis(1),
            )
        });
    }
}

/// The race check catches spurious wakeups (a wait returns, not timed out,
/// before the notification).
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn negative_control_race_catches_spurious_wakeups() {
    for waiters in [1, 3] {
        noticed(RACE_BUDGET, &["disagree"], || {
            timed_waits_race_notify::<Broken<Spurious>>(
                "race (spurious)",
                waiters,
                50,
                Duration::from_millis(1),
            )
        });
    }
}

/// The race check catches early timeouts.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn negative_control_race_catches_an_early_timeout() {
    noticed(RACE_BUDGET, &["before its deadline"], || {
        timed_waits_race_notify::<Broken<EarlyTimeout>>(
            "race (early)",
            1,
            20,
            Duration::from_millis(1),
        )
    });
}

/// The race check catches a `notify_all` that miscounts.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn negative_control_race_catches_wrong_counts() {
    noticed(RACE_BUDGET, &["disagree"], || {
        timed_waits_race_notify::<Broken<Overcounts>>(
            "race (overcounts)",
            3,
            20,
            Duration::from_millis(1),
        )
    });
}

/// The two-mutex check catches a wait that does not panic.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn negative_control_two_mutexes_catch_a_wait_that_does_not_panic() {
    let e = two_mutexes::<Broken<NeverPanics>>("two mutexes (no panic)")
        .expect_err("a wait that does not panic must be noticed");
    assert!(e.contains("did not panic"), "{e}");
}

/// The two-mutex check catches a condvar that refuses a second mutex even
/// one after the other.
#[test]
#[cfg_attr(miri, ignore = "sized for real threads: Miri runs `under_miri`")]
fn negative_control_two_mutexes_catch_a_first_mutex_kept_for_good() {
    let e = two_mutexes::<Broken<RemembersFirstMutex>>("two mutexes (first kept)")
        .expect_err("a first mutex kept for good must be noticed");
    assert!(e.contains("then with the second mutex: the wait panicked"), "{e}");
}

/// The queue, the exact counts and the two-mutex panic, sized for Miri,
/// which checks the condition variable's pointer work (the waiters' ring
/// and nodes on their own stacks, the requeue onto the mutex's stack).
#[test]
fn under_miri() {
    let r = queue::<spinbit::RawCondvar>("queue_miri", 2, 20, 2);
    eprintln!("{}", r.unwrap_or_else(|e| panic!("{e}")));
    let r = exact_counts::<spinbit::RawCondvar>("exact_counts_miri", 3);
    eprintln!("{}", r.unwrap_or_else(|e| panic!("{e}")));
    let r = two_mutexes::<spinbit::RawCondvar>("two_mutexes_miri");
    eprintln!("{}", r.unwrap_or_else(|e| panic!("{e}")));
}
