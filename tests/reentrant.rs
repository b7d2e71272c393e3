//! `spinbit::ReentrantMutex` (lock_api 0.5's `ReentrantMutex` over
//! `spinbit::RawMutex` and `spinbit::RawThreadId`) through its public API.
//!
//! Each check that a broken lock could pass by luck has a negative control:
//! the same check run on something deliberately broken must fail.

mod common;

use std::cell::{Cell, RefCell};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Barrier, Mutex as StdMutex};
use std::thread;
use std::time::Duration;

use common::counters::{Counters, RacyCounter, Slot};
use common::{Watchdog, noticed};
use spinbit::lock_api::{self, GetThreadId};
use spinbit::{MappedReentrantMutexGuard, RawThreadId, ReentrantMutex, ReentrantMutexGuard};

/// How long a negative control whose fault shows only when a race lands
/// keeps running its check (see `noticed`).
const RACE_BUDGET: Duration = Duration::from_secs(20);

/// Acquisitions (each a lock and a re-entry) per thread of one exclusion run.
const PER_THREAD: u64 = if cfg!(miri) { 50 } else { 20_000 };
/// The same, for the run of 8 threads: under Miri, as many acquisitions in
/// all as 4 threads make (an interpreted acquisition costs more the more
/// threads wait: 8 threads x 50 took Miri 124 s, 4 x 50 took 30 s).
const PER_THREAD_OF_8: u64 = if cfg!(miri) { PER_THREAD / 2 } else { PER_THREAD };

/// The contention tests take turns: each wants the machine's cores to itself
/// so that its threads really overlap.
static SERIAL: StdMutex<()> = StdMutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn reentry_keeps_both_guards_live() {
    let m = ReentrantMutex::new(Cell::new(0u32));
    assert!(!m.is_locked());
    let outer = m.lock();
    let inner = m.lock();
    let third = m.try_lock().expect("the owner's try_lock re-enters");
    assert!(m.is_owned_by_current_thread());
    outer.set(1);
    assert_eq!(inner.get(), 1);
    inner.set(inner.get() + 1);
    assert_eq!(third.get(), 2);
    drop(outer);
    drop(third);
    // One guard left: still held, by this thread.
    assert!(m.is_locked());
    assert!(m.is_owned_by_current_thread());
    assert_eq!(inner.get(), 2);
    drop(inner);
    assert!(!m.is_locked());
    assert!(!m.is_owned_by_current_thread());
    assert_eq!(m.into_inner().get(), 2);
}

#[test]
fn guards_map_and_unlock_when_the_last_drops() {
    let m = ReentrantMutex::new((Cell::new(1u32), RefCell::new(vec![1u32])));
    let outer: ReentrantMutexGuard<'_, _> = m.lock();
    let mapped: MappedReentrantMutexGuard<'_, RefCell<Vec<u32>>> =
        ReentrantMutexGuard::map(m.lock(), |d| &d.1);
    mapped.borrow_mut().push(2);
    let first: MappedReentrantMutexGuard<'_, Cell<u32>> = ReentrantMutexGuard::map(outer, |d| &d.0);
    first.set(first.get() + 10);
    assert!(ReentrantMutexGuard::try_map(m.lock(), |_| None::<&u32>).is_err());
    drop(first);
    assert!(m.is_locked(), "the mapped guard still holds it");
    drop(mapped);
    assert!(!m.is_locked());
    let (a, b) = m.into_inner();
    assert_eq!((a.get(), b.into_inner()), (11, vec![1, 2]));
}

#[test]
fn static_and_timed() {
    static M: ReentrantMutex<Cell<u32>> = ReentrantMutex::new(Cell::new(0));
    let g = M.try_lock_for(Duration::from_millis(10)).expect("free");
    let again = M.try_lock_for(Duration::ZERO).expect("re-entry needs no wait");
    again.set(again.get() + 1);
    drop((g, again));
    assert!(!M.is_locked());
}

// --- Thread ids ----------------------------------------------------------

/// Collects the ids that `threads` threads, all alive at once, get from a
/// `G`, two calls each; an error if an id is not stable in its thread or
/// two live threads share one.
fn live_ids_are_distinct<G: GetThreadId + Sync>(threads: usize) -> Result<(), String> {
    let g = G::INIT;
    let together = Barrier::new(threads);
    let ids: Vec<NonZeroUsize> = thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let first = g.nonzero_thread_id();
                    // Every thread is alive until all have read their id.
                    together.wait();
                    let second = g.nonzero_thread_id();
                    (first, second)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                let (a, b) = h.join().unwrap();
                if a == b { Ok(a) } else { Err(format!("one thread got two ids: {a} then {b}")) }
            })
            .collect::<Result<_, _>>()
    })?;
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    if sorted.len() != ids.len() {
        return Err(format!("live threads shared an id: {ids:?}"));
    }
    Ok(())
}

#[test]
fn live_threads_have_distinct_ids() {
    live_ids_are_distinct::<RawThreadId>(8).unwrap();
    assert_eq!(RawThreadId.nonzero_thread_id(), RawThreadId::INIT.nonzero_thread_id());
}

/// A broken thread id: every thread gets the same one.
struct SameId;

// SAFETY: NOT sound (every thread shares one id): the negative controls use
// it only where no two threads touch a `ReentrantMutex` at the same time.
unsafe impl GetThreadId for SameId {
    const INIT: Self = SameId;

    fn nonzero_thread_id(&self) -> NonZeroUsize {
        NonZeroUsize::MIN
    }
}

#[test]
fn negative_control_shared_ids_are_reported() {
    let e = live_ids_are_distinct::<SameId>(8).expect_err("a shared id must be reported");
    assert!(e.contains("shared an id"), "{e}");
}

// --- Another thread while held -------------------------------------------

/// Holds `m` (twice) on this thread while another thread tries it: an
/// error if the other thread got it while held, or failed once it was free.
fn others_wait_while_held<G: GetThreadId + Sync>() -> Result<(), String> {
    let m: lock_api::ReentrantMutex<spinbit::RawMutex, G, Cell<u32>> =
        lock_api::ReentrantMutex::new(Cell::new(0));
    // `try_lock` from another thread, which releases what it got before it
    // returns; `join` orders its accesses before this thread's next ones.
    let try_elsewhere = |timeout: Option<Duration>| {
        thread::scope(|s| {
            s.spawn(|| {
                let g = match timeout {
                    None => m.try_lock(),
                    Some(t) => m.try_lock_for(t),
                };
                g.map(|g| g.get()).is_some()
            })
            .join()
            .unwrap()
        })
    };
    let outer = m.lock();
    let inner = m.lock();
    if try_elsewhere(None) {
        return Err("another thread took a held ReentrantMutex (try_lock)".into());
    }
    drop(inner);
    if try_elsewhere(Some(Duration::from_millis(20))) {
        return Err("another thread took a held ReentrantMutex (try_lock_for)".into());
    }
    drop(outer);
    if !try_elsewhere(None) {
        return Err("another thread could not take a free ReentrantMutex".into());
    }
    Ok(())
}

#[test]
fn try_lock_from_another_thread_fails_while_held() {
    others_wait_while_held::<RawThreadId>().unwrap();
}

#[test]
fn negative_control_shared_ids_let_another_thread_in() {
    let e = others_wait_while_held::<SameId>().expect_err("must be reported");
    assert!(e.contains("another thread took a held"), "{e}");
}

// --- Exclusion under contention ------------------------------------------

/// A `RefCell` counter: a second borrow at the same time would panic.
impl Slot for RefCell<u64> {
    fn get(&self) -> u64 {
        *self.borrow()
    }
    fn set(&self, v: u64) {
        *self.borrow_mut() = v;
    }
}

/// A lock that the exclusion harness drives: `with` runs `f` on the data
/// while (supposedly) holding the lock, acquired as `how` says.
trait Guarded<D>: Sync {
    fn with(&self, how: u64, f: &dyn Fn(&D));
    /// The count and the overlaps seen, once the threads have joined.
    fn totals(&self) -> (u64, u64);
}

impl<S: Slot> Guarded<Counters<S>> for ReentrantMutex<Counters<S>> {
    fn with(&self, how: u64, f: &dyn Fn(&Counters<S>)) {
        // Lock, then re-enter (by `lock`, `try_lock` or `try_lock_for`),
        // and run the section under the inner guard and again under the
        // outer one after the inner is dropped.
        let outer = match how % 3 {
            0 => self.lock(),
            1 => loop {
                if let Some(g) = self.try_lock() {
                    break g;
                }
                std::hint::spin_loop();
            },
            _ => loop {
                if let Some(g) = self.try_lock_for(Duration::from_millis(1)) {
                    break g;
                }
            },
        };
        let inner =
            if how.is_multiple_of(2) { self.lock() } else { self.try_lock().expect("re-entry") };
        f(&inner);
        drop(inner);
        f(&outer);
    }

    fn totals(&self) -> (u64, u64) {
        let d = self.lock();
        (d.count.get(), d.overlaps.load(Relaxed))
    }
}

/// Not a lock at all: the negative control of the exclusion harness. (A
/// `ReentrantMutex` with a shared thread id or a raw mutex that does not
/// exclude would race on the `ReentrantMutex`'s own non-atomic lock count,
/// which is undefined behaviour; this races only on atomics.)
struct NoLock<D>(D);

impl<S: Slot + Sync> Guarded<Counters<S>> for NoLock<Counters<S>> {
    fn with(&self, _how: u64, f: &dyn Fn(&Counters<S>)) {
        f(&self.0);
        f(&self.0);
    }

    fn totals(&self) -> (u64, u64) {
        (self.0.count.get(), self.0.overlaps.load(Relaxed))
    }
}

/// `threads` threads run `per_thread` times two critical sections each
/// under `lock`; an error if sections overlapped or updates were lost.
fn exclusion<S: Slot, L: Guarded<Counters<S>>>(
    lock: &L,
    threads: u64,
    per_thread: u64,
) -> Result<String, String> {
    let dog = Watchdog::start("reentrant exclusion");
    let start = Barrier::new(threads as usize);
    thread::scope(|s| {
        for t in 0..threads {
            let (start, dog) = (&start, &dog);
            s.spawn(move || {
                start.wait();
                for i in 0..per_thread {
                    lock.with(t + i, &|d: &Counters<S>| d.section());
                    dog.progress();
                }
            });
        }
    });
    let (count, overlaps) = lock.totals();
    let expected = 2 * threads * per_thread;
    if overlaps != 0 {
        return Err(format!("critical sections overlapped {overlaps} times"));
    }
    if count != expected {
        return Err(format!("lost updates: count {count}, expected {expected}"));
    }
    Ok(format!("{count} sections, no overlap"))
}

#[test]
fn exclusion_4_threads_cell() {
    let _serial = serial();
    let m = ReentrantMutex::new(Counters::<Cell<u64>>::default());
    exclusion(&m, 4, PER_THREAD).unwrap();
    assert!(!m.is_locked());
}

#[test]
fn exclusion_8_threads_refcell() {
    let _serial = serial();
    let m = ReentrantMutex::new(Counters::<RefCell<u64>>::default());
    exclusion(&m, 8, PER_THREAD_OF_8).unwrap();
    assert!(!m.is_locked());
}

#[test]
fn negative_control_no_lock_is_reported() {
    let _serial = serial();
    noticed(RACE_BUDGET, &["overlapped", "lost updates"], || {
        exclusion(&NoLock(Counters::<RacyCounter>::default()), 4, PER_THREAD)
    });
}

// --- From a thread-local destructor --------------------------------------

static IN_DTOR: ReentrantMutex<Cell<u32>> = ReentrantMutex::new(Cell::new(0));
/// Destructors that locked `IN_DTOR` and found it theirs, twice.
static DTOR_RAN: AtomicU64 = AtomicU64::new(0);

struct LocksOnDrop;

impl Drop for LocksOnDrop {
    fn drop(&mut self) {
        let outer = IN_DTOR.lock();
        let inner = IN_DTOR.lock();
        inner.set(inner.get() + 1);
        if IN_DTOR.is_owned_by_current_thread() && outer.get() == inner.get() {
            DTOR_RAN.fetch_add(1, Relaxed);
        }
    }
}

thread_local! {
    static LOCKS_ON_DROP: LocksOnDrop = const { LocksOnDrop };
}

#[test]
fn usable_from_a_thread_local_destructor() {
    let before = DTOR_RAN.load(Relaxed);
    thread::spawn(|| {
        // Register the destructor first, then give the thread its id (which
        // registers nothing), then exit.
        LOCKS_ON_DROP.with(|_| {});
        drop(IN_DTOR.lock());
    })
    .join()
    .expect("the thread and its thread-local destructors ran without a panic");
    assert_eq!(DTOR_RAN.load(Relaxed), before + 1, "the destructor did not lock IN_DTOR");
    assert!(!IN_DTOR.is_locked());
}

/// A thread id kept in a thread-local that has a destructor (a `Box`): it
/// cannot be read once that thread-local is destroyed.
struct DroppableId;

// SAFETY: the address of a live thread's own boxed byte: distinct between
// live threads, stable in each, non-zero.
unsafe impl GetThreadId for DroppableId {
    const INIT: Self = DroppableId;

    fn nonzero_thread_id(&self) -> NonZeroUsize {
        thread_local! {
            static KEY: Box<u8> = Box::new(0);
        }
        KEY.with(|k| std::ptr::NonNull::from(&**k).addr())
    }
}

static DROPPABLE_IN_DTOR: lock_api::ReentrantMutex<spinbit::RawMutex, DroppableId, ()> =
    lock_api::ReentrantMutex::new(());
static DROPPABLE_RAN: AtomicBool = AtomicBool::new(false);

struct LocksDroppableOnDrop;

impl Drop for LocksDroppableOnDrop {
    fn drop(&mut self) {
        drop(DROPPABLE_IN_DTOR.lock());
        DROPPABLE_RAN.store(true, Relaxed);
    }
}

thread_local! {
    static LOCKS_DROPPABLE_ON_DROP: LocksDroppableOnDrop = const { LocksDroppableOnDrop };
}

const CHILD_VAR: &str = "SPINBIT_REENTRANT_DTOR_CHILD";

/// The negative control's child: the same as
/// [`usable_from_a_thread_local_destructor`] with [`DroppableId`], whose
/// thread-local is registered after (so destroyed before) the destructor
/// that locks. Does nothing unless run by
/// [`negative_control_an_id_with_a_destructor_fails_in_a_destructor`].
#[test]
#[ignore = "a child of negative_control_an_id_with_a_destructor_fails_in_a_destructor"]
fn droppable_id_dtor_child() {
    if std::env::var_os(CHILD_VAR).is_none() {
        return;
    }
    let joined = thread::spawn(|| {
        LOCKS_DROPPABLE_ON_DROP.with(|_| {});
        drop(DROPPABLE_IN_DTOR.lock());
    })
    .join();
    assert!(joined.is_ok(), "the thread or its thread-local destructors panicked");
    assert!(DROPPABLE_RAN.load(Relaxed), "the destructor did not lock");
}

#[test]
#[cfg_attr(miri, ignore = "Miri cannot start processes")]
fn negative_control_an_id_with_a_destructor_fails_in_a_destructor() {
    let Some(stderr) = common::run_hung_child(
        "droppable_id_dtor_child",
        CHILD_VAR,
        "a ReentrantMutex whose thread id has a destructor, locked in a destructor,",
    ) else {
        return;
    };
    assert!(stderr.contains("Thread Local Storage"), "not the expected failure: {stderr}");
}
