//! The condition variable, as users use it.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use spinbit::{Condvar, FairCondvar, FairMutex, Mutex};

#[test]
fn smoke_notify_one_and_all() {
    let pair = Arc::new((Mutex::new(0u32), Condvar::new()));
    let mut hs = Vec::new();
    for _ in 0..4 {
        let p = Arc::clone(&pair);
        hs.push(thread::spawn(move || {
            let (m, cv) = &*p;
            let mut g = m.lock();
            while *g == 0 {
                cv.wait(&mut g);
            }
            *g += 1;
        }));
    }
    thread::sleep(Duration::from_millis(50));
    let (m, cv) = &*pair;
    *m.lock() = 1;
    let mut notified = 0;
    while notified < 4 {
        let g = m.lock();
        notified += cv.notify_all();
        drop(g);
        thread::yield_now();
    }
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(*m.lock(), 5);
}

#[test]
fn smoke_timed() {
    let m = Mutex::new(());
    let cv = Condvar::new();
    let mut g = m.lock();
    let t0 = Instant::now();
    assert!(cv.wait_for(&mut g, Duration::from_millis(20)).timed_out());
    assert!(t0.elapsed() >= Duration::from_millis(20));
    assert!(!cv.notify_one());
    assert_eq!(cv.notify_all(), 0);
}

#[test]
fn smoke_fair() {
    let pair = Arc::new((FairMutex::new(false), FairCondvar::new()));
    let p = Arc::clone(&pair);
    let t = thread::spawn(move || {
        let (m, cv) = &*p;
        let mut g = m.lock();
        cv.wait_while(&mut g, |r| !*r);
    });
    thread::sleep(Duration::from_millis(20));
    let (m, cv) = &*pair;
    *m.lock() = true;
    while !cv.notify_one() {
        thread::yield_now();
    }
    t.join().unwrap();
}
