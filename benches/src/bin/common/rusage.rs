//! This process's CPU time and context switches, from
//! `getrusage(RUSAGE_SELF)`: for the benchmarks (`benches/shared.rs`) and
//! the diagnostics.

/// User + system CPU time of this process so far, in ns, and its context
/// switches (voluntary and involuntary).
pub fn cpu_ns_and_ctxsw() -> (f64, i64) {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: `ru` is a valid place for one `rusage`, which `getrusage`
    // fills when it returns 0 (checked before `assume_init`).
    let ru = unsafe {
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()), 0);
        ru.assume_init()
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 * 1e9 + t.tv_usec as f64 * 1e3;
    (tv(ru.ru_utime) + tv(ru.ru_stime), ru.ru_nvcsw as i64 + ru.ru_nivcsw as i64)
}
