/work/main/benches/cdylib/target/release/deps/spinbit_cdylib_bench.d: src/lib.rs

/work/main/benches/cdylib/target/release/deps/libspinbit_cdylib_bench.so: src/lib.rs

/work/main/benches/cdylib/target/release/deps/libspinbit_cdylib_bench.rlib: src/lib.rs

src/lib.rs:
