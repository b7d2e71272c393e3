//! The same functions as the C driver calls, linked into a Rust binary.
use spinbit_cdylib_bench::{cdylib_bench_parking_lot, cdylib_bench_spinbit, cdylib_bench_std};

fn main() {
    let n = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(100_000_000);
    println!(
        "rlib spinbit {:.2} parking_lot {:.2} std {:.2}",
        cdylib_bench_spinbit(n),
        cdylib_bench_parking_lot(n),
        cdylib_bench_std(n)
    );
}
