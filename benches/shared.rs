//! What the two benchmarks (`mutex.rs`, `condvar.rs`) share: the command
//! line, the machine and the commit, CPU accounting, the fixed-duration
//! window, and the JSON lines' formatting. Included by each with
//! `#[path = "shared.rs"] mod shared;`.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

#[path = "src/bin/common/cpu.rs"]
mod cpu;
#[path = "src/bin/common/rusage.rs"]
mod rusage;
pub(crate) use cpu::{cpu_id, cpu_model};

/// Process-wide CPU time and context switches, from `getrusage(RUSAGE_SELF)`,
/// and the whole system's busy CPU time, from `/proc/stat`.
#[derive(Clone, Copy)]
pub(crate) struct Usage {
    pub(crate) cpu_ns: f64,
    pub(crate) ctxsw: i64,
    /// Busy CPU time of the whole machine (NaN where `/proc/stat` is missing).
    pub(crate) system_ns: f64,
}

/// This process's CPU time and context switches so far, and the machine's
/// busy time.
pub(crate) fn usage() -> Usage {
    let (cpu_ns, ctxsw) = rusage::cpu_ns_and_ctxsw();
    Usage { cpu_ns, ctxsw, system_ns: system_busy_ns() }
}

/// What a window's threads share with the thread that runs it: the start
/// and stop flags, and each thread's published operation count.
pub(crate) struct Window {
    go: CachePadded<AtomicBool>,
    stop: CachePadded<AtomicBool>,
    /// Each thread's operation count, published every 16 operations, each
    /// on its own cache line (only the coordinator reads them, rarely).
    counts: Vec<CachePadded<AtomicU64>>,
}

impl Window {
    /// Publishes thread `id`'s count `ops` (every 16 operations).
    #[inline(always)]
    pub(crate) fn publish(&self, id: usize, ops: u64) {
        if ops & 15 == 0 {
            self.counts[id].store(ops, Ordering::Relaxed);
        }
    }

    /// Whether thread `id`, having done `ops` operations, should go on
    /// (publishing its count).
    #[allow(dead_code, reason = "condvar.rs's workers stop on a flag under their mutex")]
    #[inline(always)]
    pub(crate) fn running(&self, id: usize, ops: u64) -> bool {
        self.publish(id, ops);
        !self.stop.load(Ordering::Relaxed)
    }

    fn total(&self) -> u64 {
        self.counts.iter().map(|p| p.load(Ordering::Relaxed)).sum()
    }
}

/// Runs `threads` copies of `worker` for one fixed-duration window of at
/// least `dur`, extended (in steps of at least 1 ms) until the threads have
/// published at least `min_ops` operations; then raises the `stop` flag,
/// calls `stop` (for workers that may be waiting on something else) and
/// joins them. Returns what each worker returned, the window's seconds,
/// and the usage before and after.
pub(crate) fn run_window<T, W, S>(
    threads: usize,
    dur: Duration,
    min_ops: u64,
    worker: W,
    stop: S,
) -> (Vec<T>, f64, Usage, Usage)
where
    T: Send,
    W: Fn(usize, &Window) -> T + Sync,
    S: FnOnce(),
{
    let window = Window {
        go: CachePadded::new(AtomicBool::new(false)),
        stop: CachePadded::new(AtomicBool::new(false)),
        counts: (0..threads).map(|_| CachePadded::new(AtomicU64::new(0))).collect(),
    };
    let ready = AtomicUsize::new(0);
    thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (window, ready, worker) = (&window, &ready, &worker);
                s.spawn(move || {
                    ready.fetch_add(1, Ordering::AcqRel);
                    while !window.go.load(Ordering::Acquire) {
                        thread::yield_now();
                    }
                    worker(i, window)
                })
            })
            .collect();
        while ready.load(Ordering::Acquire) < threads {
            thread::yield_now();
        }
        let u0 = usage();
        let t0 = Instant::now();
        window.go.store(true, Ordering::Release);
        thread::sleep(dur);
        loop {
            let done = window.total();
            if done >= min_ops {
                break;
            }
            // Sleep for the missing operations at the rate seen so far.
            let rate = done.max(1) as f64 / t0.elapsed().as_secs_f64();
            let more = ((min_ops - done) as f64 / rate).clamp(1e-3, 0.1);
            thread::sleep(Duration::from_secs_f64(more));
        }
        window.stop.store(true, Ordering::Relaxed);
        stop();
        let outs: Vec<T> =
            handles.into_iter().map(|h| h.join().expect("benchmark thread panicked")).collect();
        let secs = t0.elapsed().as_secs_f64();
        (outs, secs, u0, usage())
    })
}

/// Busy (not idle, not I/O wait) CPU time of the whole machine, in ns.
pub(crate) fn system_busy_ns() -> f64 {
    static TICK_NS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    let tick_ns = *TICK_NS.get_or_init(|| {
        // SAFETY: `sysconf` only reads a configuration value.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        if hz > 0 { 1e9 / hz as f64 } else { 1e7 }
    });
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else {
        return f64::NAN;
    };
    let Some(line) = stat.lines().next().filter(|l| l.starts_with("cpu ")) else {
        return f64::NAN;
    };
    // user nice system idle iowait irq softirq steal (guest time is already
    // in user).
    let f: Vec<f64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    if f.len() < 8 {
        return f64::NAN;
    }
    (f[0] + f[1] + f[2] + f[5] + f[6] + f[7]) * tick_ns
}

/// What the command line asks for, as far as the companion pass cares.
pub(crate) struct Args {
    /// A real benchmarking run (`--bench` without `--test`, `--list` or
    /// `--profile-time`).
    pub(crate) benchmarking: bool,
    pub(crate) filter: Option<String>,
    pub(crate) exact: bool,
    pub(crate) raw: Vec<String>,
}

pub(crate) fn parse_args() -> Args {
    // Criterion options that take a value; everything else starting with `-`
    // is a flag. The first other argument is the filter, as for criterion.
    const WITH_VALUE: &[&str] = &[
        "-c",
        "--color",
        "--colour",
        "-s",
        "--save-baseline",
        "-b",
        "--baseline",
        "--baseline-lenient",
        "--load-baseline",
        "--sample-size",
        "--warm-up-time",
        "--measurement-time",
        "--nresamples",
        "--noise-threshold",
        "--confidence-level",
        "--significance-level",
        "--plotting-backend",
        "--output-format",
        "--format",
        "--profile-time",
    ];
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let (mut bench, mut other_mode, mut exact, mut filter) = (false, false, false, None);
    let mut it = raw.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--bench" => bench = true,
            "--test" | "--list" => other_mode = true,
            "--exact" => exact = true,
            "--profile-time" => {
                other_mode = true;
                it.next();
            }
            s if s.starts_with('-') => {
                if WITH_VALUE.contains(&s) {
                    it.next();
                }
            }
            s => {
                if filter.is_none() {
                    filter = Some(s.to_string());
                }
            }
        }
    }
    Args { benchmarking: bench && !other_mode, filter, exact, raw }
}

pub(crate) fn target_triple() -> String {
    let arch = std::env::consts::ARCH;
    if cfg!(target_os = "linux") {
        let env = if cfg!(target_env = "musl") { "musl" } else { "gnu" };
        format!("{arch}-unknown-linux-{env}")
    } else if cfg!(target_os = "macos") {
        format!("{arch}-apple-darwin")
    } else {
        format!("{arch}-unknown-{}", std::env::consts::OS)
    }
}

/// The repository's root: this crate is its `benches/`.
pub(crate) fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("benches/ has a parent")
}

/// A JSON string literal.
pub(crate) fn js(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// A JSON number (`null` for NaN and infinities).
pub(crate) fn jn(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.6}").trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        "null".into()
    }
}

/// The commit measured, `-dirty` when tracked files differ from it.
pub(crate) fn commit() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(repo_root())
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().to_string())
    };
    match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(hash) if !hash.is_empty() => {
            match git(&["status", "--porcelain", "--untracked-files=no"]) {
                Some(changes) if changes.is_empty() => hash,
                _ => format!("{hash}-dirty"),
            }
        }
        _ => "unknown".into(),
    }
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| !x.is_nan());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// The JSON lines' file: the one `var` names, or
/// `<target dir>/spinbit-bench/<prefix><target triple>.jsonl`.
pub(crate) fn results_path(var: &str, prefix: &str) -> std::path::PathBuf {
    if let Some(p) = std::env::var_os(var) {
        return p.into();
    }
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"));
    target_dir.join("spinbit-bench").join(format!("{prefix}{}.jsonl", target_triple()))
}

/// The kernel's release (`/proc/sys/kernel/osrelease`), or `unknown`.
pub(crate) fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}
