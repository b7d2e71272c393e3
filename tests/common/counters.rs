//! The exclusion harness's counters, shared by the integration tests that
//! drive a lock from many threads (`tests/reentrant.rs`, `tests/v04.rs`).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// A counter cell that the exclusion harness reads, pauses over and writes.
pub trait Slot: Default + Send {
    fn get(&self) -> u64;
    fn set(&self, v: u64);
}

impl Slot for Cell<u64> {
    fn get(&self) -> u64 {
        Cell::get(self)
    }
    fn set(&self, v: u64) {
        Cell::set(self, v)
    }
}

/// A counter that loses updates like a `Cell` when two threads overlap, but
/// without undefined behaviour (a Relaxed load and a Relaxed store, not an
/// RMW), so that a negative control can race on it.
#[derive(Default)]
pub struct RacyCounter(AtomicU64);

impl Slot for RacyCounter {
    fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
    fn set(&self, v: u64) {
        self.0.store(v, Relaxed)
    }
}

/// What the threads update under the lock: the count, and who is inside.
#[derive(Default)]
pub struct Counters<S> {
    pub count: S,
    pub inside: AtomicUsize,
    pub overlaps: AtomicU64,
}

impl<S: Slot> Counters<S> {
    /// One critical section: enter, read the count, pause, write it + 1,
    /// leave; an overlap with another thread's section is counted.
    pub fn section(&self) {
        if self.inside.fetch_add(1, Relaxed) != 0 {
            self.overlaps.fetch_add(1, Relaxed);
        }
        let v = self.count.get();
        for _ in 0..std::hint::black_box(20) {
            std::hint::spin_loop();
        }
        self.count.set(v + 1);
        self.inside.fetch_sub(1, Relaxed);
    }
}
