/work/main/benches/cdylib/target/release/deps/lock_api-ef5777372b9e4232.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lock_api-0.5.0/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lock_api-0.5.0/src/guard.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lock_api-0.5.0/src/mutex.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lock_api-0.5.0/src/remutex.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lock_api-0.5.0/src/rwlock.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lock_api-0.5.0/src/condvar.rs

/work/main/benches/cdylib/target/release/deps/liblock_api-ef5777372b9e4232.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lock_api-0.5.0/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lock_api-0.5.0/src/guard.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lock_api-0.5.0/src/mutex.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lock_api-0.5.0/src/remutex.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lock_api-0.5.0/src/rwlock.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lock_api-0.5.0/src/condvar.rs

/work/main/benches/cdylib/target/release/deps/liblock_api-ef5777372b9e4232.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lock_api-0.5.0/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lock_api-0.5.0/src/guard.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lock_api-0.5.0/src/mutex.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lock_api-0.5.0/src/remutex.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lock_api-0.5.0/src/rwlock.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lock_api-0.5.0/src/condvar.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lock_api-0.5.0/src/lib.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lock_api-0.5.0/src/guard.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lock_api-0.5.0/src/mutex.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lock_api-0.5.0/src/remutex.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lock_api-0.5.0/src/rwlock.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lock_api-0.5.0/src/condvar.rs:
