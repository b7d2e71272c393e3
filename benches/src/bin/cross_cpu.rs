//! spinbit against the best peer on every CPU measured: the worst ratio per
//! cell across the per-CPU reports.
//!
//! ```text
//! cargo run --release -p spinbit-bench --bin cross_cpu [-- [REPORT.md ...] [--out FILE]]
//! cargo run --release -p spinbit-bench --bin cross_cpu -- --check
//! ```
//!
//! Reads the Summary table of each per-CPU report that `bench_report` wrote
//! (by default every `benches/results/*.md` that has one), and prints a
//! markdown report (to `FILE` with `--out`): per CPU, the commit measured
//! and how many cells with 2 or more threads spinbit is at or above the best
//! peer in; the cells where it is on every CPU; and, per cell, each CPU's
//! ratios and the worst of them. A tuning can win on one CPU and lose on
//! another, so a cell counts as won only if it is won on every CPU.
//!
//! `--check` (run by `.ci/run`) writes nothing: it fails unless
//! `benches/results/worst-across-cpus.md` is what the committed reports
//! give and README.md holds its headline table as it stands, so neither
//! can fall behind a report.
//!
//! The counts: throughput ratio ≥ 1.00 (as the report prints it); CPU per
//! operation ≤ 1.00 of the cheapest peer's, in the cells without think
//! time; fairness (fewest / most operations of a thread) at least the
//! fairest peer's; longest wait in `lock()` at most the lowest peer's
//! (max ratio ≤ 1.00). Each metric's best peer is picked separately, as in
//! the reports.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

// Only `f_sig` and `wins` are used here.
#[allow(dead_code)]
#[path = "common/report.rs"]
mod report;
use report::f_sig;

/// The cells of the README's headline table, in its order.
const HEADLINE: &[&str] = &[
    "contended-inline/t2/cs0/think0",
    "contended-inline/t8/cs0/think0",
    "contended-inline/t32/cs0/think0",
    "contended-inline/t64/cs0/think0",
    "contended-inline/t8/cs1000/think0",
    "contended-inline/t32/cs100/think1000",
    "contended-inline/t32/cs1000/think0",
    "contended-inline/t64/cs100/think0",
    "contended-inline/t64/cs1000/think0",
    "contended-inline/t64/cs10000/think0",
    "contended-inline/t64/cs10000/think100000",
    "handoff-inline/cs1000",
    "queue-inline/t8",
    "fair-inline/t8/cs0/think0",
    "fair-inline/t8/cs1000/think0",
    "timed-inline/t8/cs1000/think0",
];

/// One row of a report's Summary table: spinbit's ratios to the best peers.
#[derive(Clone, Copy)]
struct Ratios {
    throughput: f64,
    cpu: f64,
    /// spinbit's fairness and the fairest peer's.
    fairness: (f64, f64),
    max: f64,
}

/// One per-CPU report.
struct Report {
    /// The CPU family, from the file name (`x86_64-amd-epyc`).
    family: String,
    cpu: String,
    commit: String,
    cells: BTreeMap<String, Ratios>,
    /// The Summary table's order.
    order: Vec<String>,
}

/// The leading number of a table entry: `0.95 (pthread)` is 0.95, `-` (no
/// figure) is NaN; anything else is an error, so that a change of the
/// reports' format cannot empty the counts unnoticed.
fn number(s: &str) -> Result<f64, String> {
    match s.split_whitespace().next() {
        Some("-") => Ok(f64::NAN),
        Some(t) => t.parse().map_err(|_| format!("`{s}` is not a number")),
        None => Err("an empty entry".into()),
    }
}

/// The value of a `| key | value |` row of the report's Machine table.
fn machine(md: &str, key: &str) -> Option<String> {
    let prefix = format!("| {key} |");
    md.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.trim().trim_end_matches('|').trim().trim_matches('`').to_string())
}

fn load(path: &Path) -> Result<Option<Report>, String> {
    let md = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let Some(start) = md.find("\n## Summary: spinbit / best peer\n") else {
        return Ok(None);
    };
    let bad = |what: &str| format!("{}: {what}", path.display());
    let mut lines = md[start..].lines().skip(2).skip_while(|l| l.trim().is_empty());
    let header: Vec<&str> =
        lines.next().ok_or_else(|| bad("no Summary header"))?.split('|').map(str::trim).collect();
    let col = |name: &str| {
        header.iter().position(|h| *h == name).ok_or_else(|| bad(&format!("no column `{name}`")))
    };
    let (c_cell, c_thr, c_cpu) = (col("cell")?, col("throughput ratio")?, col("CPU/op ratio")?);
    let (c_fair, c_fairest, c_max) =
        (col("fairness spinbit")?, col("fairest peer")?, col("max ratio")?);
    if !lines.next().is_some_and(|l| l.starts_with("|---")) {
        return Err(bad("no separator row under the Summary header"));
    }
    let mut cells = BTreeMap::new();
    let mut order = Vec::new();
    for l in lines.take_while(|l| l.starts_with('|')) {
        let f: Vec<&str> = l.split('|').map(str::trim).collect();
        if f.len() != header.len() {
            return Err(bad(&format!("a Summary row with {} columns: {l}", f.len())));
        }
        let cell = f[c_cell].trim_matches('`').to_string();
        let num = |c: usize| number(f[c]).map_err(|e| bad(&format!("`{cell}`: {e}")));
        let r = Ratios {
            throughput: num(c_thr)?,
            cpu: num(c_cpu)?,
            fairness: (num(c_fair)?, num(c_fairest)?),
            max: num(c_max)?,
        };
        order.push(cell.clone());
        if cells.insert(cell, r).is_some() {
            return Err(bad(&format!("`{}` twice in the Summary", order.last().unwrap())));
        }
    }
    if cells.is_empty() {
        return Err(bad("an empty Summary table"));
    }
    let family = path.file_stem().and_then(|s| s.to_str()).unwrap_or("?").to_string();
    Ok(Some(Report {
        family,
        cpu: {
            let name = machine(&md, "CPU").unwrap_or_else(|| "?".into());
            // Hypervisors name different hosts alike: the family and model
            // numbers tell them apart, where the report has them.
            match machine(&md, "CPU family / model").as_deref().and_then(|m| m.split_once(" / ")) {
                Some((family, model)) => format!("{name} (family {family}, model {model})"),
                None => name,
            }
        },
        commit: machine(&md, "commit").unwrap_or_else(|| "not recorded".into()),
        cells,
        order,
    }))
}

/// The number of threads of a cell (`/t8/` is 8; hand-offs run two), or
/// `None` for the uncontended cells.
fn threads(cell: &str) -> Option<u32> {
    if cell.starts_with("handoff") {
        return Some(2);
    }
    cell.split('/').find_map(|p| p.strip_prefix('t').and_then(|n| n.parse().ok()))
}

/// Whether a cell has no think time (the CPU-per-operation goal's cells).
fn no_think(cell: &str) -> bool {
    !cell.contains("/think") || cell.ends_with("/think0")
}

/// The four goals, each `None` where the cell has no such figure.
fn wins(cell: &str, r: &Ratios) -> [Option<bool>; 4] {
    report::wins(r.throughput, r.cpu, no_think(cell), r.fairness, r.max)
}

const METRICS: [&str; 4] = ["throughput", "CPU/op (no think time)", "fairness", "max wait"];

/// The index of the CPU whose value is worst for spinbit: the lowest
/// `key` if `low_is_worse`, else the highest; CPUs without the figure are
/// left out.
fn worst(per_cpu: &[Ratios], key: impl Fn(&Ratios) -> f64, low_is_worse: bool) -> Option<usize> {
    per_cpu
        .iter()
        .map(&key)
        .enumerate()
        .filter(|(_, v)| v.is_finite())
        .reduce(|a, b| {
            let b_worse = if low_is_worse { b.1 < a.1 } else { b.1 > a.1 };
            if b_worse { b } else { a }
        })
        .map(|(i, _)| i)
}

/// spinbit's fairness over the fairest peer's (above 1: spinbit is fairer);
/// NaN if either figure is missing.
fn fair_ratio(r: &Ratios) -> f64 {
    let (s, p) = r.fairness;
    if s.is_nan() || p.is_nan() {
        f64::NAN
    } else if p > 0.0 {
        s / p
    } else if s >= p {
        1.0
    } else {
        0.0
    }
}

fn render(reports: &[Report], short: &[String]) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# spinbit against the best peer on every CPU measured\n");
    let _ = writeln!(
        md,
        "Generated by `cargo run --release -p spinbit-bench --bin cross_cpu` from the Summary tables of \
         the per-CPU reports below; the header of `benches/src/bin/cross_cpu.rs` says how cells are \
         counted. A cell counts as won only if it is won on every CPU; the tables give the \
         worst CPU's ratio.\n"
    );
    let _ = writeln!(
        md,
        "| report | CPU | commit | cells with 2+ threads in every report | {} |",
        METRICS.join(" | ")
    );
    let _ = writeln!(md, "|---|---|---|---:|---:|---:|---:|---:|");
    // The cells every report has, in the first report's order.
    let common: Vec<&String> = reports[0]
        .order
        .iter()
        .filter(|c| threads(c).is_some_and(|t| t >= 2))
        .filter(|c| reports.iter().all(|r| r.cells.contains_key(*c)))
        .collect();
    // Each cell's goals on each CPU, in `common`'s order and `reports`'.
    let goals: Vec<Vec<[Option<bool>; 4]>> =
        common.iter().map(|c| reports.iter().map(|r| wins(c, &r.cells[*c])).collect()).collect();
    for (k, r) in reports.iter().enumerate() {
        let mut n = [0usize; 4];
        let mut of = [0usize; 4];
        for per_cpu in &goals {
            for (i, w) in per_cpu[k].iter().enumerate() {
                if let Some(w) = w {
                    of[i] += 1;
                    n[i] += usize::from(*w);
                }
            }
        }
        let counts: Vec<String> = (0..4).map(|i| format!("{} of {}", n[i], of[i])).collect();
        let _ = writeln!(
            md,
            "| [`{0}.md`]({0}.md) | {1} | `{2}` | {3} | {4} |",
            r.family,
            r.cpu,
            r.commit,
            common.len(),
            counts.join(" | ")
        );
    }
    let mut every = [0usize; 4];
    let mut of = [0usize; 4];
    for per_cpu in &goals {
        for i in 0..4 {
            if per_cpu.iter().all(|w| w[i].is_some()) {
                of[i] += 1;
                every[i] += usize::from(per_cpu.iter().all(|w| w[i] == Some(true)));
            }
        }
    }
    let counts: Vec<String> = (0..4).map(|i| format!("{} of {}", every[i], of[i])).collect();
    let _ = writeln!(md, "| **every CPU** | | | {} | {} |\n", common.len(), counts.join(" | "));
    // Cells with 2+ threads that some report lacks: named, not counted.
    let mut missing: Vec<&String> = reports
        .iter()
        .flat_map(|r| r.order.iter())
        .filter(|c| threads(c).is_some_and(|t| t >= 2) && !common.contains(c))
        .collect();
    missing.sort();
    missing.dedup();
    if !missing.is_empty() {
        let names: Vec<String> = missing.iter().map(|c| format!("`{c}`")).collect();
        let _ = writeln!(md, "Not in every report, so left out: {}.\n", names.join(", "));
    }
    let table = |md: &mut String, cells: &[&String]| {
        let _ = writeln!(
            md,
            "| cell | throughput ratio, worst ({cpus}) | CPU/op ratio, worst ({cpus}) | \
             fairness spinbit / fairest peer, worst ({cpus}) | max-wait ratio, worst ({cpus}) |",
            cpus = short.join(", ")
        );
        let _ = writeln!(md, "|---|---|---|---|---|");
        for c in cells {
            let per_cpu: Vec<Ratios> = reports.iter().map(|r| r.cells[*c]).collect();
            let each = |show: &dyn Fn(&Ratios) -> String| {
                per_cpu.iter().map(show).collect::<Vec<_>>().join(", ")
            };
            let w = |key: &dyn Fn(&Ratios) -> f64, low: bool, show: &dyn Fn(&Ratios) -> String| {
                match worst(&per_cpu, key, low) {
                    Some(i) => format!("**{}** {} ({})", show(&per_cpu[i]), short[i], each(show)),
                    None => "-".into(),
                }
            };
            let thr = w(&|r| r.throughput, true, &|r| f_sig(r.throughput));
            let cpu = w(&|r| r.cpu, false, &|r| f_sig(r.cpu));
            let fair = w(&fair_ratio, true, &|r| {
                format!("{}/{}", f_sig(r.fairness.0), f_sig(r.fairness.1))
            });
            let max = w(&|r| r.max, false, &|r| f_sig(r.max));
            let _ = writeln!(md, "| `{c}` | {thr} | {cpu} | {fair} | {max} |");
        }
        let _ = writeln!(md);
    };
    let headline: Vec<&String> =
        HEADLINE.iter().filter_map(|h| common.iter().find(|c| c.as_str() == *h).copied()).collect();
    let _ = writeln!(md, "## Headline cells\n");
    table(&mut md, &headline);
    let _ = writeln!(md, "## Every cell with 2 or more threads\n");
    table(&mut md, &common);
    md
}

/// The headline table of a rendered report: the lines between its
/// `## Headline cells` heading and the next heading, blank ones left out.
fn headline_table(md: &str) -> String {
    let mut out = String::new();
    for l in md
        .lines()
        .skip_while(|l| *l != "## Headline cells")
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .filter(|l| !l.trim().is_empty())
    {
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// `--check`: whether the committed file and the README's table are
/// current; prints what is not.
fn check(md: &str, root: &Path) -> bool {
    let mut ok = true;
    let file = root.join("benches/results/worst-across-cpus.md");
    let regenerate = "cargo run --release -p spinbit-bench --bin cross_cpu -- --out benches/results/worst-across-cpus.md";
    match std::fs::read_to_string(&file) {
        Ok(committed) if committed == md => {
            println!("ok: {} is what the reports give", file.display())
        }
        Ok(_) => {
            eprintln!(
                "FAIL: {} differs from what the reports give: run `{regenerate}`",
                file.display()
            );
            ok = false;
        }
        Err(e) => {
            eprintln!("FAIL: {}: {e}: run `{regenerate}`", file.display());
            ok = false;
        }
    }
    let table = headline_table(md);
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap_or_default();
    if !table.is_empty() && readme.contains(&table) {
        println!("ok: README.md holds the headline table");
    } else {
        eprintln!(
            "FAIL: README.md does not hold the headline table of {}: copy it from there",
            file.display()
        );
        ok = false;
    }
    ok
}

fn main() -> ExitCode {
    let mut inputs: Vec<PathBuf> = Vec::new();
    let mut out: Option<PathBuf> = None;
    let mut checking = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out" => out = Some(args.next().expect("--out needs a file").into()),
            "--check" => checking = true,
            "-h" | "--help" => {
                eprintln!("usage: cross_cpu [REPORT.md ...] [--out FILE | --check]");
                return ExitCode::SUCCESS;
            }
            _ => inputs.push(a.into()),
        }
    }
    if checking && out.is_some() {
        eprintln!("cross_cpu: --check writes nothing; leave out --out");
        return ExitCode::FAILURE;
    }
    // The repository's root: this crate is its `benches/`.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("benches/ has a parent");
    if inputs.is_empty() {
        let dir = root.join("benches/results");
        let rd = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
        inputs.extend(
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "md")),
        );
        inputs.sort();
    }
    let mut reports = Vec::new();
    for p in &inputs {
        match load(p) {
            Ok(Some(r)) => reports.push(r),
            Ok(None) => {}
            Err(e) => {
                eprintln!("cross_cpu: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    if reports.is_empty() {
        eprintln!("cross_cpu: no per-CPU report (a `## Summary: spinbit / best peer` table) found");
        return ExitCode::FAILURE;
    }
    // Short names for the columns: the family without the architecture.
    let short: Vec<String> = reports
        .iter()
        .map(|r| r.family.split_once('-').map_or(r.family.clone(), |(_, f)| f.to_string()))
        .collect();
    let md = render(&reports, &short);
    if checking {
        return if check(&md, root) { ExitCode::SUCCESS } else { ExitCode::FAILURE };
    }
    match out {
        Some(path) => {
            std::fs::write(&path, &md)
                .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
            println!("-> {}", path.display());
        }
        None => print!("{md}"),
    }
    ExitCode::SUCCESS
}
