//! Behaviour of `spinbit::Mutex` through its public API.

use std::cell::UnsafeCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread;
use std::time::Duration;

use crossbeam_utils::CachePadded;
use lock_api::RawMutex as _;
use spinbit::{
    FairMutex, FairMutexGuard, MappedFairMutexGuard, MappedMutexGuard, Mutex, MutexGuard,
    RawFairMutex, RawMutex,
};

/// Acquisitions across all threads of one `exclusion` run. Miri is ~1000x
/// slower, so it runs a token amount.
const TOTAL: u64 = if cfg!(miri) { 400 } else { 2_000_000 };

/// Data that loses updates without mutual exclusion: a plain read, a
/// compiler-opaque pause, a plain write, plus a second word that must always
/// equal the first.
struct Racy {
    a: UnsafeCell<u64>,
    b: UnsafeCell<u64>,
}

// SAFETY: only accessed under a raw mutex in `exclusion_of`.
unsafe impl Sync for Racy {}

fn exclusion(threads: u64) {
    exclusion_of::<RawMutex>(threads, TOTAL);
}

/// `threads` threads take a raw mutex `R` `total` times in all, each time
/// checking and updating `Racy` data.
fn exclusion_of<R: lock_api::RawMutex + Sync>(threads: u64, total: u64) {
    let lock = CachePadded::new(R::INIT);
    let data = CachePadded::new(Racy { a: UnsafeCell::new(0), b: UnsafeCell::new(0) });
    let per_thread = total / threads;
    thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for _ in 0..per_thread {
                    let guard = lock.lock();
                    // SAFETY: the lock is held.
                    unsafe {
                        let a = *data.a.get();
                        assert_eq!(a, *data.b.get(), "torn critical section");
                        *data.a.get() = std::hint::black_box(a) + 1;
                        *data.b.get() = a + 1;
                        lock.unlock(guard);
                    }
                }
            });
        }
    });
    // SAFETY: all threads joined.
    assert_eq!(unsafe { *data.a.get() }, per_thread * threads);
    assert!(!lock.is_locked());
}

#[test]
fn exclusion_1_thread() {
    exclusion(1);
}

#[test]
fn exclusion_2_threads() {
    exclusion(2);
}

#[test]
fn exclusion_4_threads() {
    exclusion(4);
}

#[test]
fn exclusion_16_threads() {
    exclusion(16);
}

#[test]
fn exclusion_64_threads() {
    exclusion(if cfg!(miri) { 8 } else { 64 });
}

#[test]
fn exclusion_with_long_critical_sections_and_sleeps() {
    // Holders that sometimes sleep inside the lock force waiters through the
    // park/wake path over and over.
    let m = Arc::new(Mutex::new(0u64));
    let rounds = if cfg!(miri) { 5 } else { 200 };
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let m = m.clone();
            thread::spawn(move || {
                for r in 0..rounds {
                    let mut g = m.lock();
                    *g += 1;
                    if (r + i) % 16 == 0 {
                        thread::sleep(Duration::from_micros(200));
                    }
                }
            })
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
    assert_eq!(*m.lock(), 8 * rounds);
}

#[test]
fn try_lock() {
    let m = Mutex::new(1);
    let g = m.try_lock().expect("free mutex");
    assert!(m.try_lock().is_none(), "held mutex");
    thread::scope(|s| {
        s.spawn(|| assert!(m.try_lock().is_none(), "held by another thread"));
    });
    drop(g);
    assert_eq!(*m.try_lock().expect("released"), 1);
}

#[test]
fn is_locked() {
    let m = Mutex::new(());
    assert!(!m.is_locked());
    let g = m.lock();
    assert!(m.is_locked());
    drop(g);
    assert!(!m.is_locked());
}

#[test]
fn panic_in_critical_section_releases_the_lock() {
    let m = Arc::new(Mutex::new(0));
    let m2 = m.clone();
    let r = thread::spawn(move || {
        let mut g = m2.lock();
        *g += 1;
        panic!("boom inside the lock");
    })
    .join();
    assert!(r.is_err());
    assert!(!m.is_locked());
    // No poisoning, as with parking_lot.
    *m.lock() += 1;
    assert_eq!(*m.lock(), 2);
}

/// The mutexes and condition variables are unwind safe as `parking_lot`'s
/// are: the raw types and condition variables may be borrowed across
/// `catch_unwind`, and a `Mutex<T>` moved into it (a shared `Mutex` is not
/// `RefUnwindSafe`, as in `parking_lot` and `std`: its data may be left
/// half-changed).
#[test]
fn unwind_safe_as_parking_lot() {
    use std::panic::{RefUnwindSafe, UnwindSafe, catch_unwind};
    fn both<T: UnwindSafe + RefUnwindSafe>() {}
    fn moved<T: UnwindSafe>() {}
    both::<RawMutex>();
    both::<RawFairMutex>();
    both::<spinbit::RawCondvar>();
    both::<spinbit::RawCondvar<RawFairMutex>>();
    both::<spinbit::Condvar>();
    both::<spinbit::FairCondvar>();
    moved::<Mutex<i32>>();
    moved::<FairMutex<i32>>();
    moved::<spinbit::ReentrantMutex<i32>>();
    let (m, cv) = (Mutex::new(1), spinbit::Condvar::new());
    let r = catch_unwind(move || {
        *m.lock() += 1;
        cv.notify_all();
        m
    });
    assert_eq!(r.unwrap().into_inner(), 2);
}

static JOBS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

#[test]
fn static_mutex() {
    thread::scope(|s| {
        for i in 0..4 {
            s.spawn(move || JOBS.lock().push(i));
        }
    });
    let mut jobs = JOBS.lock().clone();
    jobs.sort();
    assert_eq!(jobs, [0, 1, 2, 3]);
}

#[test]
fn thousands_of_mutexes() {
    // Prime, so every odd stride below visits each mutex once per round.
    let n = if cfg!(miri) { 61 } else { 10_007 };
    let mutexes: Vec<Mutex<u64>> = (0..n).map(|_| Mutex::new(0)).collect();
    let threads = 4;
    thread::scope(|s| {
        for t in 0..threads {
            let mutexes = &mutexes;
            s.spawn(move || {
                for round in 0..4 {
                    for i in 0..mutexes.len() {
                        // Different threads walk in different orders.
                        let j = (i * (2 * t + 1) + round) % mutexes.len();
                        *mutexes[j].lock() += 1;
                    }
                }
            });
        }
    });
    assert!(mutexes.iter().all(|m| *m.lock() == threads as u64 * 4));
}

#[test]
fn a_mutex_moved_while_unlocked_still_works() {
    let m = Mutex::new(String::from("a"));
    m.lock().push('b');
    let moved = Box::new(m);
    moved.lock().push('c');
    let arc = Arc::new(*moved);
    let a2 = arc.clone();
    thread::spawn(move || a2.lock().push('d')).join().unwrap();
    assert_eq!(Arc::try_unwrap(arc).unwrap().into_inner(), "abcd");
}

#[test]
fn guards_map_and_send() {
    let m = Mutex::new((1, String::from("x")));
    {
        let g: MutexGuard<'_, (i32, String)> = m.lock();
        let mut s: MappedMutexGuard<'_, String> = MutexGuard::map(g, |t| &mut t.1);
        s.push('y');
    }
    assert_eq!(m.lock().1, "xy");
    // The guard is Send: another thread may unlock.
    let g = m.lock();
    thread::scope(|s| {
        s.spawn(move || drop(g));
    });
    assert!(!m.is_locked());
}

#[test]
fn holder_that_sleeps_makes_waiters_wait() {
    // Waiters must not get in while the holder sleeps, and all must get in
    // after it releases.
    let m = Arc::new(Mutex::new(Vec::new()));
    let started = Arc::new(AtomicBool::new(false));
    let g = m.lock();
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let (m, started) = (m.clone(), started.clone());
            thread::spawn(move || {
                started.store(true, Relaxed);
                m.lock().push(i);
            })
        })
        .collect();
    while !started.load(Relaxed) {
        thread::yield_now();
    }
    thread::sleep(Duration::from_millis(if cfg!(miri) { 1 } else { 20 }));
    assert!(m.is_locked());
    drop(g);
    handles.into_iter().for_each(|h| h.join().unwrap());
    let mut v = m.lock().clone();
    v.sort();
    assert_eq!(v, [0, 1, 2, 3]);
}

#[test]
fn raw_mutex_is_one_word_and_debug_prints() {
    assert_eq!(std::mem::size_of::<RawMutex>(), std::mem::size_of::<usize>());
    let m = RawMutex::new();
    assert_eq!(format!("{m:?}"), "RawMutex { locked: false }");
    let guard = m.lock();
    assert_eq!(format!("{m:?}"), "RawMutex { locked: true }");
    // SAFETY: locked above.
    unsafe { m.unlock(guard) };
}

/// The message of a panic payload, as `panic!` or `debug_assert!` made it.
#[cfg(debug_assertions)]
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// In debug builds, unlocking a mutex that is not locked (undefined
/// behaviour by the unsafe API's contract) panics before it touches the
/// lock word, with `unlock` and `unlock_fair` alike: the mutex still works
/// afterwards. A check placed after the release would find the word
/// already wrapped around, and the mutex would look locked for ever.
#[test]
#[cfg(debug_assertions)]
fn unlock_of_an_unlocked_mutex_panics_before_the_damage() {
    use lock_api::{GuardSend, RawMutexFair as _};
    use std::panic::{AssertUnwindSafe, catch_unwind};
    let raw = RawMutex::INIT;
    for fair in [false, true] {
        let unlock = AssertUnwindSafe(|| {
            // A forged guard: nothing was locked.
            let forged = GuardSend::default();
            // SAFETY: not sound (the mutex is not locked): this test checks
            // the debug build's defence, which panics before the release.
            unsafe {
                if fair {
                    raw.unlock_fair(forged);
                } else {
                    raw.unlock(forged);
                }
            }
        });
        let payload = catch_unwind(unlock).expect_err("an unlock of an unlocked mutex must panic");
        let msg = panic_message(&*payload);
        assert!(msg.contains("unlock of an unlocked spinbit mutex"), "{msg}");
        assert!(!raw.is_locked(), "the failed unlock changed the lock word");
        let guard = raw.lock();
        assert!(raw.try_lock().is_none());
        // SAFETY: locked just above.
        unsafe { raw.unlock(guard) };
        let guard = raw.try_lock().expect("the mutex works after the failed unlock");
        // SAFETY: locked just above.
        unsafe { raw.unlock(guard) };
    }
}

/// `FairMutex`, whose every unlock is fair, excludes as `Mutex` does
/// (fewer acquisitions: each unlock that finds a sleeper waits for its wake).
#[test]
fn fair_mutex_exclusion_2_threads() {
    exclusion_of::<RawFairMutex>(2, TOTAL / 10);
}

#[test]
fn fair_mutex_exclusion_16_threads() {
    exclusion_of::<RawFairMutex>(16, TOTAL / 10);
}

/// `FairMutex` has `Mutex`'s API: the explicit fair unlocks, `bump`, timed
/// locking, mapped guards, a `Send` guard and a one-word raw mutex; and the
/// crate re-exports the `lock_api` it is built on.
#[test]
fn fair_mutex_api() {
    static COUNT: FairMutex<u32> = FairMutex::new(0);
    *COUNT.lock() += 1;
    assert_eq!(std::mem::size_of::<RawFairMutex>(), std::mem::size_of::<usize>());
    assert_eq!(format!("{:?}", RawFairMutex::new()), "RawFairMutex(RawMutex { locked: false })");

    let m = Arc::new(FairMutex::new(vec![1]));
    let mut g: FairMutexGuard<'_, Vec<i32>> = m.lock();
    g.push(2);
    FairMutexGuard::bump(&mut g);
    FairMutexGuard::unlocked_fair(&mut g, || {
        assert!(!m.is_locked(), "unlocked_fair did not unlock");
    });
    let held = m.clone();
    thread::spawn(move || {
        assert!(held.try_lock_for(Duration::from_millis(5)).is_none(), "took a held mutex");
    })
    .join()
    .unwrap();
    FairMutexGuard::unlock_fair(g);
    {
        let mut first: MappedFairMutexGuard<'_, i32> = FairMutexGuard::map(m.lock(), |v| &mut v[0]);
        *first = 10;
    }
    // The guard is `Send`: another thread may drop it.
    let g = m.try_lock_for(Duration::from_secs(1)).expect("free mutex");
    thread::scope(|s| {
        s.spawn(move || drop(g));
    });
    assert_eq!(*m.lock(), [10, 2]);
    assert_eq!(*COUNT.lock(), 1);

    // The re-exported `lock_api` is the one the types are built on.
    fn is_raw<R: spinbit::lock_api::RawMutexFair + spinbit::lock_api::RawMutexTimed>() {}
    is_raw::<RawMutex>();
    is_raw::<RawFairMutex>();
    let _: &spinbit::lock_api::Mutex<RawFairMutex, u32> = &COUNT;
}

/// With the `arc_lock` feature, the guards that own an `Arc` of the mutex
/// have `parking_lot`'s names, `spinbit::ArcMutexGuard` (for either raw
/// mutex) and `spinbit::ArcReentrantMutexGuard` (`.ci/run` runs this with
/// the feature).
#[cfg(feature = "arc_lock")]
#[test]
fn arc_mutex_guard_is_reexported() {
    let m = Arc::new(Mutex::new(1));
    let mut g: spinbit::ArcMutexGuard<RawMutex, i32> = m.lock_arc();
    *g += 1;
    drop(g);
    let f = Arc::new(FairMutex::new(3));
    let g: spinbit::ArcMutexGuard<RawFairMutex, i32> = f.lock_arc();
    assert_eq!(*m.lock() + *g, 5);
    let r = Arc::new(spinbit::ReentrantMutex::new(4));
    let outer: spinbit::ArcReentrantMutexGuard<RawMutex, spinbit::RawThreadId, i32> = r.lock_arc();
    let inner = r.lock_arc();
    assert_eq!(*outer + *inner, 8);
    drop((outer, inner));
    assert!(!r.is_locked());
}

/// With the `serde` feature, `Mutex<T>` and `FairMutex<T>` serialize as
/// their `T` and deserialize into either (`.ci/run` runs this with the
/// feature).
#[cfg(feature = "serde")]
#[test]
fn serde_round_trip() {
    let m = Mutex::new(vec![1u32, 2]);
    let text = serde_json::to_string(&m).unwrap();
    assert_eq!(text, "[1,2]");
    let f: FairMutex<Vec<u32>> = serde_json::from_str(&text).unwrap();
    assert_eq!(*f.lock(), [1, 2]);
    let back: Mutex<Vec<u32>> = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
    assert_eq!(back.into_inner(), [1, 2]);
}
