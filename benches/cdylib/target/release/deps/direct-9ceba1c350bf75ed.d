/work/main/benches/cdylib/target/release/deps/direct-9ceba1c350bf75ed.d: src/bin/direct.rs

/work/main/benches/cdylib/target/release/deps/direct-9ceba1c350bf75ed: src/bin/direct.rs

src/bin/direct.rs:
