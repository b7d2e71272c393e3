//! The function the C driver calls, linked into a Rust binary: see run.sh.
use spinbit_cdylib_bench::cdylib_bench;

fn main() {
    let arg = |i: usize| std::env::args().nth(i).and_then(|a| a.parse().ok());
    let t = cdylib_bench(arg(1).unwrap_or(100_000_000), arg(2).unwrap_or(0) as u32);
    println!("rlib spinbit {:.3} parking_lot {:.3} std {:.3}", t.spinbit, t.parking_lot, t.std);
}
