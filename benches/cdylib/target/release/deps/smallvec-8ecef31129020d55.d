/work/main/benches/cdylib/target/release/deps/smallvec-8ecef31129020d55.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/smallvec-1.16.6/src/lib.rs

/work/main/benches/cdylib/target/release/deps/libsmallvec-8ecef31129020d55.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/smallvec-1.16.6/src/lib.rs

/work/main/benches/cdylib/target/release/deps/libsmallvec-8ecef31129020d55.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/smallvec-1.16.6/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/smallvec-1.16.6/src/lib.rs:
