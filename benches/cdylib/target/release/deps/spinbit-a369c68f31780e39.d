/work/main/benches/cdylib/target/release/deps/spinbit-a369c68f31780e39.d: /work/main/src/lib.rs /work/main/src/algorithm.rs /work/main/src/arch/mod.rs /work/main/src/arch/x86_64.rs /work/main/src/condvar.rs /work/main/src/lock/mod.rs /work/main/src/lock/stack.rs /work/main/src/lock/wait.rs /work/main/src/lock/wake.rs /work/main/src/platform/mod.rs /work/main/src/platform/native.rs /work/main/src/platform/futex.rs /work/main/src/platform/word.rs /work/main/src/raw.rs /work/main/src/reentrant.rs

/work/main/benches/cdylib/target/release/deps/libspinbit-a369c68f31780e39.rlib: /work/main/src/lib.rs /work/main/src/algorithm.rs /work/main/src/arch/mod.rs /work/main/src/arch/x86_64.rs /work/main/src/condvar.rs /work/main/src/lock/mod.rs /work/main/src/lock/stack.rs /work/main/src/lock/wait.rs /work/main/src/lock/wake.rs /work/main/src/platform/mod.rs /work/main/src/platform/native.rs /work/main/src/platform/futex.rs /work/main/src/platform/word.rs /work/main/src/raw.rs /work/main/src/reentrant.rs

/work/main/benches/cdylib/target/release/deps/libspinbit-a369c68f31780e39.rmeta: /work/main/src/lib.rs /work/main/src/algorithm.rs /work/main/src/arch/mod.rs /work/main/src/arch/x86_64.rs /work/main/src/condvar.rs /work/main/src/lock/mod.rs /work/main/src/lock/stack.rs /work/main/src/lock/wait.rs /work/main/src/lock/wake.rs /work/main/src/platform/mod.rs /work/main/src/platform/native.rs /work/main/src/platform/futex.rs /work/main/src/platform/word.rs /work/main/src/raw.rs /work/main/src/reentrant.rs

/work/main/src/lib.rs:
/work/main/src/algorithm.rs:
/work/main/src/arch/mod.rs:
/work/main/src/arch/x86_64.rs:
/work/main/src/condvar.rs:
/work/main/src/lock/mod.rs:
/work/main/src/lock/stack.rs:
/work/main/src/lock/wait.rs:
/work/main/src/lock/wake.rs:
/work/main/src/platform/mod.rs:
/work/main/src/platform/native.rs:
/work/main/src/platform/futex.rs:
/work/main/src/platform/word.rs:
/work/main/src/raw.rs:
/work/main/src/reentrant.rs:
