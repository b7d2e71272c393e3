//! Compares two builds of spinbit measured by `benches/ab.sh`.
//!
//! ```text
//! cargo run --release -p spinbit-bench --bin ab_report -- target/spinbit-ab/CFG
//! ```
//!
//! The directory holds `base-ROUND-CELL.jsonl` and
//! `variant-ROUND-CELL.jsonl` files, each one filtered full-profile run of
//! `benches/mutex.rs` (spinbit alone, in one cell). For each cell it prints
//! one markdown row:
//!
//! * each build's throughput in every round (Mops/s) and the variant's
//!   median over the base's;
//! * `apart`: whether every run of one build was faster than every run of
//!   the other (`variant` or `base`), else `overlap`: with three rounds,
//!   `apart` is what a difference needs before it is worth a full run;
//! * the medians' ratio of CPU per operation, and each build's median
//!   fairness and longest `lock()` wait.
//!
//! The CPU, kernel and commit come from the files' meta lines; the commits
//! of all files must agree (the script builds both from one work tree).

use std::collections::BTreeMap;
use std::fmt::Write as _;

// `Json::bool` is not used here.
#[allow(dead_code)]
#[path = "common/json.rs"]
mod json;
// `is_peer`, `wins` and `as_printed` are not used here.
#[allow(dead_code)]
#[path = "common/report.rs"]
mod report;

use json::parse;
use report::{f_sig, median};

/// One run of spinbit in one cell.
struct Run {
    round: u32,
    mops: f64,
    cpu: f64,
    fairness: f64,
    max_ms: f64,
}

/// The runs of both builds in one cell.
#[derive(Default)]
struct Cell {
    base: Vec<Run>,
    variant: Vec<Run>,
}

/// What the meta lines say about the machine and the build.
#[derive(Default, PartialEq)]
struct Machine {
    cpu: String,
    cores: String,
    kernel: String,
    commit: String,
}

/// Reads one run's file (of round `round`): its cell, its machine and
/// spinbit's run there.
fn load(path: &std::path::Path, round: u32) -> Result<(String, Machine, Run), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut machine = None;
    let mut row = None;
    for (i, line) in text.lines().enumerate() {
        let j = parse(line).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?;
        if j.str("bench") == "meta" {
            machine = Some(Machine {
                cpu: j.str("cpu").to_string(),
                cores: format!("{}", j.num("cores")),
                kernel: j.str("kernel").to_string(),
                commit: j.str("commit").to_string(),
            });
        } else if j.str("lock") == "spinbit" {
            if row.is_some() {
                return Err(format!("{}: more than one spinbit row", path.display()));
            }
            let run = Run {
                round,
                mops: j.num("ops_per_sec") / 1e6,
                cpu: j.num("cpu_ns_per_op"),
                fairness: j.num("fairness"),
                max_ms: j.num("max") / 1e6,
            };
            row = Some((j.str("group").to_string(), run));
        }
    }
    let machine = machine.ok_or_else(|| format!("{}: no meta line", path.display()))?;
    let (group, run) = row
        .ok_or_else(|| format!("{}: no spinbit row (is the cell's name right?)", path.display()))?;
    Ok((group, machine, run))
}

/// `base-3-contended-inline_t2_cs0_think0.jsonl` → ("base", 3).
fn build_and_round(name: &str) -> Option<(&str, u32)> {
    let mut parts = name.splitn(3, '-');
    let build = parts.next()?;
    let round = parts.next()?.parse().ok()?;
    matches!(build, "base" | "variant").then_some((build, round))
}

fn report(dir: &str) -> Result<String, String> {
    let mut cells: BTreeMap<String, Cell> = BTreeMap::new();
    let mut machine: Option<Machine> = None;
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{dir}: {e}"))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    entries.sort();
    for path in &entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let Some((build, round)) = build_and_round(name) else {
            return Err(format!("{}: not a base-ROUND-… or variant-ROUND-… file", path.display()));
        };
        let (group, m, run) = load(path, round)?;
        match &machine {
            None => machine = Some(m),
            Some(first) if *first != m => {
                return Err(format!(
                    "{}: measured on another machine or commit ({} at {}) than the first file ({} at {})",
                    path.display(),
                    m.cpu,
                    m.commit,
                    first.cpu,
                    first.commit
                ));
            }
            Some(_) => {}
        }
        let cell = cells.entry(group).or_default();
        if build == "base" { cell.base.push(run) } else { cell.variant.push(run) }
    }
    let machine = machine.ok_or_else(|| format!("{dir}: no base-/variant- .jsonl files"))?;

    let mut out = String::new();
    let _ = writeln!(out, "# spinbit A/B: {dir}\n");
    let _ = writeln!(
        out,
        "{} ({} cores), Linux {}, commit `{}`; full profile, spinbit alone, one run per build per round.\n",
        machine.cpu, machine.cores, machine.kernel, machine.commit
    );
    out.push_str(
        "| cell | base Mops/s by round | variant Mops/s by round | variant / base | runs | CPU/op variant / base | fairness base, variant | max wait base, variant |\n",
    );
    out.push_str("|---|---|---|---:|---|---:|---|---|\n");
    let by_round = |runs: &mut Vec<Run>| {
        runs.sort_by_key(|r| r.round);
        runs.iter().map(|r| f_sig(r.mops)).collect::<Vec<_>>().join(", ")
    };
    for (group, cell) in &mut cells {
        let (b, v) = (by_round(&mut cell.base), by_round(&mut cell.variant));
        let med = |runs: &[Run], f: fn(&Run) -> f64| median(runs.iter().map(f).collect());
        let min = |runs: &[Run]| runs.iter().map(|r| r.mops).fold(f64::INFINITY, f64::min);
        let max = |runs: &[Run]| runs.iter().map(|r| r.mops).fold(f64::NEG_INFINITY, f64::max);
        let (base, variant) = (&cell.base, &cell.variant);
        let apart = if base.is_empty() || variant.is_empty() {
            "-"
        } else if min(variant) > max(base) {
            "apart: variant"
        } else if min(base) > max(variant) {
            "apart: base"
        } else {
            "overlap"
        };
        let _ = writeln!(
            out,
            "| `{group}` | {b} | {v} | {} | {apart} | {} | {}, {} | {} ms, {} ms |",
            f_sig(med(variant, |r| r.mops) / med(base, |r| r.mops)),
            f_sig(med(variant, |r| r.cpu) / med(base, |r| r.cpu)),
            f_sig(med(base, |r| r.fairness)),
            f_sig(med(variant, |r| r.fairness)),
            f_sig(med(base, |r| r.max_ms)),
            f_sig(med(variant, |r| r.max_ms)),
        );
    }
    Ok(out)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 1 || args[0] == "-h" || args[0] == "--help" {
        eprintln!("usage: ab_report DIR (the output directory of benches/ab.sh)");
        std::process::exit(2);
    }
    match report(&args[0]) {
        Ok(text) => print!("{text}"),
        Err(e) => {
            eprintln!("ab_report: {e}");
            std::process::exit(1);
        }
    }
}
