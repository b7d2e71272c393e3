//! Uncontended lock + unlock, one call of a non-inlined function per pair,
//! as a caller in another function would run it. Built as a `cdylib` its
//! thread-locals are reached through `__tls_get_addr` (the dynamic TLS
//! model), as in a Python extension; built into a Rust binary (the `rlib`),
//! through the thread pointer. spinbit's `unlock` reads one thread-local
//! (its guess of the word), the peers' none. See run.sh.

use std::hint::black_box;
use std::time::Instant;

#[inline(never)]
fn bump_spinbit(m: &spinbit::Mutex<u64>) {
    *m.lock() += 1;
}

#[inline(never)]
fn bump_parking_lot(m: &parking_lot::Mutex<u64>) {
    *m.lock() += 1;
}

#[inline(never)]
fn bump_std(m: &std::sync::Mutex<u64>) {
    *m.lock().unwrap() += 1;
}

/// Nanoseconds per pair over `n` pairs.
fn time<M>(m: &M, n: u64, bump: fn(&M)) -> f64 {
    let m = black_box(m);
    let t = Instant::now();
    for _ in 0..n {
        bump(m);
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

/// Nanoseconds per `spinbit::Mutex` lock + unlock.
#[no_mangle]
pub extern "C" fn cdylib_bench_spinbit(n: u64) -> f64 {
    time(&spinbit::Mutex::new(0), n, bump_spinbit)
}

/// Nanoseconds per `parking_lot::Mutex` (0.12) lock + unlock.
#[no_mangle]
pub extern "C" fn cdylib_bench_parking_lot(n: u64) -> f64 {
    time(&parking_lot::Mutex::new(0), n, bump_parking_lot)
}

/// Nanoseconds per `std::sync::Mutex` lock + unlock.
#[no_mangle]
pub extern "C" fn cdylib_bench_std(n: u64) -> f64 {
    time(&std::sync::Mutex::new(0), n, bump_std)
}
