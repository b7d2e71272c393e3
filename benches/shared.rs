//! What the two benchmarks (`mutex.rs`, `condvar.rs`) share: the command
//! line, the machine and the commit, CPU accounting, and the JSON lines'
//! formatting. Included by each with `#[path = "shared.rs"] mod shared;`.

use std::fmt::Write as _;
use std::path::Path;

/// Process-wide CPU time and context switches, from `getrusage(RUSAGE_SELF)`,
/// and the whole system's busy CPU time, from `/proc/stat`.
#[derive(Clone, Copy)]
pub(crate) struct Usage {
    pub(crate) cpu_ns: f64,
    pub(crate) ctxsw: i64,
    /// Busy CPU time of the whole machine (NaN where `/proc/stat` is missing).
    pub(crate) system_ns: f64,
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

/// The value of `/proc/cpuinfo`'s first line named `key`.
pub(crate) fn cpuinfo_field(cpuinfo: &str, key: &str) -> Option<String> {
    cpuinfo
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim().to_string())
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
