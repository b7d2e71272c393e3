use std::sync::Arc;
#[test]
fn counts() {
    let m = Arc::new(spinbit::Mutex::new(0u64));
    let hs: Vec<_> = (0..8)
        .map(|_| {
            let m = m.clone();
            std::thread::spawn(move || {
                for _ in 0..200_000 {
                    *m.lock() += 1
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap()
    }
    assert_eq!(*m.lock(), 1_600_000);
}
