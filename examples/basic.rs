//! Several threads increment one shared counter through a `spinbit::Mutex`.
//!
//! ```text
//! cargo run --release --example basic
//! ```

use std::thread;

/// `Mutex::new` is a `const fn`, so the counter can be a plain `static`.
static COUNTER: spinbit::Mutex<u64> = spinbit::Mutex::new(0);

const THREADS: u64 = 8;
const INCREMENTS_PER_THREAD: u64 = 100_000;

fn main() {
    thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                for _ in 0..INCREMENTS_PER_THREAD {
                    // The guard unlocks the mutex when it is dropped at the
                    // end of the statement.
                    *COUNTER.lock() += 1;
                }
            });
        }
    });

    let count = *COUNTER.lock();
    println!("{THREADS} threads x {INCREMENTS_PER_THREAD} increments = {count}");
    assert_eq!(count, THREADS * INCREMENTS_PER_THREAD);
}
