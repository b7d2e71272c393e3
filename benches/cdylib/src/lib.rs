//! Uncontended lock + unlock, one call of a non-inlined function per pair,
//! as a caller in another function would run it. Built as a `cdylib` its
//! thread-locals are reached through `__tls_get_addr` (the general-dynamic
//! TLS model), as in a Python extension; linked into a Rust binary (the
//! `rlib`), the linker relaxes that to a read relative to the thread
//! pointer (`%fs` on x86_64). spinbit's `unlock` reads one thread-local
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

/// Nanoseconds per lock + unlock pair of each lock.
#[repr(C)]
pub struct Times {
    pub spinbit: f64,
    pub parking_lot: f64,
    pub std: f64,
}

/// Times `n` pairs of each lock: spinbit, `parking_lot` 0.12 and std,
/// starting with the `round % 3`-th, so that in any three rounds in a row
/// each lock runs first, second and third once.
#[unsafe(no_mangle)]
pub extern "C" fn cdylib_bench(n: u64, round: u32) -> Times {
    let mut t = Times { spinbit: 0.0, parking_lot: 0.0, std: 0.0 };
    for i in 0..3 {
        match (round + i) % 3 {
            0 => t.spinbit = time(&spinbit::Mutex::new(0), n, bump_spinbit),
            1 => t.parking_lot = time(&parking_lot::Mutex::new(0), n, bump_parking_lot),
            _ => t.std = time(&std::sync::Mutex::new(0), n, bump_std),
        }
    }
    t
}
