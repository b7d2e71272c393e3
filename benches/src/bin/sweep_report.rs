//! Compares the points of a sensitivity sweep (`benches/sweep.sh`).
//!
//! ```text
//! cargo run --release -p spinbit-bench --bin sweep_report -- FILE.jsonl...
//! cargo run --release -p spinbit-bench --bin sweep_report -- target/spinbit-sweep/SPIN_NS-*.jsonl
//! ```
//!
//! Each FILE is the output of one `SPINBIT_BENCH_PROFILE=sweep` run of
//! `cargo bench -p spinbit-bench --bench mutex` with the `tuning` feature. The swept
//! constant and its value come from the file's meta line
//! (`tuning_overrides`, `tuning`); files are grouped by swept constant and
//! sorted by value. For each constant and each cell it prints a markdown
//! table on standard output, one row per value:
//!
//! * spinbit's throughput (Mops/s);
//! * its throughput over the fastest peer's (the peer is named);
//! * its CPU per operation over the cheapest peer's;
//! * fairness (fewest / most operations of any thread), spinbit's and the
//!   fairest peer's;
//! * its longest completed `lock()` over the shortest of the peers';
//! * the CPUs' worth of time other processes used meanwhile (median over
//!   the cell's locks): the noise.
//!
//! The best value of each column is in bold, and the constant's default
//! (read from the source this tool is built with) is marked. A summary
//! per constant gives, per cell, the best value for throughput and how far
//! spinbit's throughput moved across the values (the spread: max / min - 1),
//! next to the run-to-run spread of the peers, which the constant does not
//! touch: a spread no larger than the peers' is noise, and the optimum is
//! flat. When several constants were swept with their default among the
//! values, the runs at the defaults measure the same build several times: a
//! first table gives spinbit's spread over those runs, the run-to-run noise
//! to compare every other spread with. Peers are every lock whose name does
//! not start with `spinbit`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

#[path = "common/json.rs"]
mod json;
// `wins` and `as_printed` are not used here.
#[allow(dead_code)]
#[path = "common/report.rs"]
mod report;

use json::{Json, parse};
use report::{f_sig, is_peer, median};

// ---------------------------------------------------------------------------
// The data
// ---------------------------------------------------------------------------

/// One lock in one cell of one point.
struct Row {
    lock: String,
    mops: f64,
    cpu: f64,
    fairness: f64,
    max: f64,
    others_cpu: f64,
}

/// One sweep point: one result file.
struct Point {
    /// The swept constant (`+`-joined if several were overridden,
    /// `none` if none was).
    constant: String,
    value: String,
    /// For sorting: the value as a number.
    num: f64,
    meta: Json,
    /// Cells in file order, each with its rows.
    cells: Vec<(String, Vec<Row>)>,
}

fn load(path: &str) -> Result<Point, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("reading {path}: {e}"))?;
    let mut meta = Json::Null;
    let mut cells: Vec<(String, Vec<Row>)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let j = parse(line).map_err(|e| format!("{path}:{}: {e}", n + 1))?;
        if j.str("bench") == "meta" {
            meta = j;
            continue;
        }
        let row = Row {
            lock: j.str("lock").into(),
            mops: j.num("ops_per_sec") / 1e6,
            cpu: j.num("cpu_ns_per_op"),
            fairness: j.num("fairness"),
            max: j.num("max"),
            others_cpu: j.num("others_cpu"),
        };
        let group = j.str("group");
        match cells.iter_mut().find(|(g, _)| g == group) {
            Some((_, rows)) => rows.push(row),
            None => cells.push((group.to_string(), vec![row])),
        }
    }
    if cells.is_empty() {
        return Err(format!("{path}: no results"));
    }
    if !meta.bool("tuning_feature") {
        return Err(format!(
            "{path}: no tuning in the meta line (run with `--features tuning`, see benches/sweep.sh)"
        ));
    }
    let names: Vec<String> = match meta.get("tuning_overrides") {
        Json::Arr(v) => v
            .iter()
            .filter_map(|x| match x {
                Json::Str(s) => Some(s.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    let tuning = meta.get("tuning");
    let values: Vec<f64> = names.iter().map(|n| tuning.num(n)).collect();
    let (constant, value) = if names.is_empty() {
        ("none".to_string(), "-".to_string())
    } else {
        let value = values.iter().map(|v| format!("{v}")).collect::<Vec<_>>().join("+");
        (names.join("+"), value)
    };
    let num = values.first().copied().unwrap_or(f64::NAN);
    Ok(Point { constant, value, num, meta, cells })
}

/// The constant's value in the source this tool is built with (for one that
/// has gone, its value when it went).
fn default_of(name: &str) -> Option<f64> {
    // The constants of older builds that are now derived or part of a rule
    // (docs/benchmarks.md, "Fewer constants"), with their values then, so
    // that those builds' runs at the defaults still show as such.
    // (MAX_BACKOFF, in spin hints, has no default in nanoseconds.)
    let gone = match name {
        "PING_PONG_NS" => Some(500.0),
        "PING_PONG_PAUSE_NS" => Some(1_500.0),
        "MAX_LOOK_GAP_NS" => Some(200.0),
        "LOOK_NS" => Some(250_000.0),
        "STARVING_HAND_OFF_YIELDS" => Some(1.0),
        _ => None,
    };
    if gone.is_some() {
        return gone;
    }
    // Every other constant is in src/arch/mod.rs.
    include_str!("../../../src/arch/mod.rs")
        .lines()
        .map(|l| {
            let l = l.trim_start();
            l.strip_prefix("pub(crate) ").unwrap_or(l)
        })
        .find_map(|l| l.strip_prefix(&format!("const {name}: ") as &str))
        .and_then(|rest| rest.split_once('=')?.1.split_once(';'))
        .and_then(|(v, _)| v.trim().replace('_', "").parse().ok())
}

/// The peer row with the highest (`higher`) or lowest finite `f`.
fn best_peer(rows: &[Row], f: fn(&Row) -> f64, higher: bool) -> Option<&Row> {
    rows.iter().filter(|r| is_peer(&r.lock) && f(r).is_finite()).reduce(|a, b| {
        let better = if higher { f(b) > f(a) } else { f(b) < f(a) };
        if better { b } else { a }
    })
}

/// One row of a cell's table: spinbit against the best peers at one value.
struct Line {
    value: String,
    is_default: bool,
    mops: f64,
    thrpt: f64,
    thrpt_peer: String,
    cpu: f64,
    cpu_peer: String,
    fair: f64,
    peer_fair: f64,
    max: f64,
    noise: f64,
}

fn line(p: &Point, rows: &[Row], default: Option<f64>) -> Option<Line> {
    let s = rows.iter().find(|r| r.lock == "spinbit")?;
    let t = best_peer(rows, |r| r.mops, true)?;
    let c = best_peer(rows, |r| r.cpu, false)?;
    let f = best_peer(rows, |r| r.fairness, true)?;
    let m = best_peer(rows, |r| r.max, false)?;
    Some(Line {
        value: p.value.clone(),
        is_default: default.is_some_and(|d| d == p.num),
        mops: s.mops,
        thrpt: s.mops / t.mops,
        thrpt_peer: t.lock.clone(),
        cpu: s.cpu / c.cpu,
        cpu_peer: c.lock.clone(),
        fair: s.fairness,
        peer_fair: f.fairness,
        max: s.max / m.max,
        noise: median(rows.iter().map(|r| r.others_cpu).collect()),
    })
}

// ---------------------------------------------------------------------------
// Formatting
// ---------------------------------------------------------------------------

/// `text` in bold if `best`.
fn bold(text: String, best: bool) -> String {
    if best { format!("**{text}**") } else { text }
}

/// The index of the best finite `f` of `lines` (highest if `higher`).
fn best_of(lines: &[Line], f: fn(&Line) -> f64, higher: bool) -> Option<usize> {
    (0..lines.len()).filter(|&i| f(&lines[i]).is_finite()).reduce(|a, b| {
        let better = if higher { f(&lines[b]) > f(&lines[a]) } else { f(&lines[b]) < f(&lines[a]) };
        if better { b } else { a }
    })
}

/// The max / min - 1 of the finite values, in percent.
fn spread(v: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = v.filter(|x| x.is_finite() && *x > 0.0).collect();
    let (lo, hi) = v.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    if v.len() < 2 { f64::NAN } else { (hi / lo - 1.0) * 100.0 }
}

fn table(out: &mut String, lines: &[Line]) {
    let b_mops = best_of(lines, |l| l.mops, true);
    let b_thrpt = best_of(lines, |l| l.thrpt, true);
    let b_cpu = best_of(lines, |l| l.cpu, false);
    let b_fair = best_of(lines, |l| l.fair, true);
    let b_max = best_of(lines, |l| l.max, false);
    out.push_str(
        "| value | spinbit Mops/s | throughput ratio (fastest peer) | CPU/op ratio (cheapest peer) \
         | fairness spinbit / fairest peer | max wait ratio | others' CPUs |\n\
         |---|---:|---:|---:|---:|---:|---:|\n",
    );
    for (i, l) in lines.iter().enumerate() {
        let _ = writeln!(
            out,
            "| {}{} | {} | {} ({}) | {} ({}) | {} / {} | {} | {} |",
            l.value,
            if l.is_default { " (default)" } else { "" },
            bold(f_sig(l.mops), b_mops == Some(i)),
            bold(f_sig(l.thrpt), b_thrpt == Some(i)),
            l.thrpt_peer,
            bold(f_sig(l.cpu), b_cpu == Some(i)),
            l.cpu_peer,
            bold(f_sig(l.fair), b_fair == Some(i)),
            f_sig(l.peer_fair),
            bold(f_sig(l.max), b_max == Some(i)),
            f_sig(l.noise),
        );
    }
}

fn main() {
    let files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() || files.iter().any(|f| f == "-h" || f == "--help") {
        eprintln!("usage: sweep_report FILE.jsonl... (the outputs of benches/sweep.sh)");
        std::process::exit(2);
    }
    let mut points = Vec::new();
    for f in &files {
        match load(f) {
            Ok(p) => points.push(p),
            Err(e) => {
                eprintln!("sweep_report: {e}");
                std::process::exit(1);
            }
        }
    }
    // Constants in order of first appearance; points sorted by value.
    let mut constants: Vec<String> = Vec::new();
    for p in &points {
        if !constants.contains(&p.constant) {
            constants.push(p.constant.clone());
        }
    }
    points.sort_by(|a, b| a.num.total_cmp(&b.num));

    let mut out = String::new();
    let mut seen = BTreeMap::new();
    for p in &points {
        let m = &p.meta;
        let key = format!(
            "{} ({} cores), Linux {}, profile {}, {} reps of {} ms windows",
            m.str("cpu"),
            m.num("cores"),
            m.str("kernel"),
            m.str("profile"),
            m.num("reps"),
            m.num("window_ms"),
        );
        seen.entry(key).or_insert_with(Vec::new).push(m.str("commit").to_string());
    }
    out.push_str("# spinbit sensitivity sweep\n\n");
    for (machine, commits) in &seen {
        let mut commits = commits.clone();
        commits.sort();
        commits.dedup();
        let _ = writeln!(out, "* CPU: {machine}; commit {}", commits.join(", "));
    }
    out.push_str(
        "\nRatios are spinbit's over the best peer at each metric, picked separately \
         (throughput: the fastest; CPU per operation: the cheapest; max wait: the shortest \
         longest `lock()`). Bold: the best value of each column. Others' CPUs: how many \
         CPUs' worth of time other processes used during the windows.\n",
    );

    // The runs at the defaults: the same configuration, measured once per
    // swept constant.
    let at_default: Vec<&Point> = points
        .iter()
        .filter(|p| p.constant != "none" && default_of(&p.constant) == Some(p.num))
        .collect();
    if at_default.len() >= 2 {
        let _ = writeln!(
            out,
            "\n## Run-to-run noise: the {} runs at the default values ({})\n",
            at_default.len(),
            at_default
                .iter()
                .map(|p| format!("{}={}", p.constant, p.value))
                .collect::<Vec<_>>()
                .join(", ")
        );
        out.push_str(
            "| cell | spinbit Mops/s min-max | spinbit spread | throughput ratio min-max |\n\
             |---|---|---:|---|\n",
        );
        let mut groups: Vec<&str> = Vec::new();
        for p in &at_default {
            for (g, _) in &p.cells {
                if !groups.contains(&g.as_str()) {
                    groups.push(g);
                }
            }
        }
        for g in groups {
            let lines: Vec<Line> = at_default
                .iter()
                .filter_map(|p| line(p, &p.cells.iter().find(|(cg, _)| cg == g)?.1, None))
                .collect();
            let range = |f: fn(&Line) -> f64| {
                let lo = lines.iter().map(f).fold(f64::INFINITY, f64::min);
                let hi = lines.iter().map(f).fold(0.0, f64::max);
                format!("{}-{}", f_sig(lo), f_sig(hi))
            };
            let _ = writeln!(
                out,
                "| {g} | {} | {:.0} % | {} |",
                range(|l| l.mops),
                spread(lines.iter().map(|l| l.mops)),
                range(|l| l.thrpt),
            );
        }
    }

    for constant in &constants {
        let pts: Vec<&Point> = points.iter().filter(|p| &p.constant == constant).collect();
        let default = default_of(constant);
        let _ = writeln!(out, "\n## {constant}\n");
        if let Some(d) = default {
            let _ = writeln!(out, "Default (in the source): {d}.");
        }
        // Values in order, each once; a value given more than once was
        // swept in several invocations (each writes one file per value).
        let mut values: Vec<&str> = Vec::new();
        for p in &pts {
            if !values.contains(&p.value.as_str()) {
                values.push(&p.value);
            }
        }
        let runs = pts.len() / values.len();
        let per_value = if pts.len() == values.len() {
            "one run per value".to_string()
        } else if runs * values.len() == pts.len() {
            format!("{runs} runs per value, one invocation each, their files kept apart")
        } else {
            format!("{} runs of {} values, their files kept apart", pts.len(), values.len())
        };
        let _ = writeln!(
            out,
            "Command: `benches/sweep.sh {constant} {}`: {per_value}, e.g. `{}`.\n",
            values.join(" "),
            pts[0].meta.str("command"),
        );
        // Cells in the first point's order.
        let mut groups: Vec<&str> = Vec::new();
        for p in &pts {
            for (g, _) in &p.cells {
                if !groups.contains(&g.as_str()) {
                    groups.push(g);
                }
            }
        }
        let mut summary = String::from(
            "| cell | best value (throughput) | spinbit Mops/s min-max | spinbit spread | \
             peers' spread (median) |\n|---|---|---|---:|---:|\n",
        );
        let mut tables = String::new();
        for g in &groups {
            let lines: Vec<Line> = pts
                .iter()
                .filter_map(|p| {
                    let rows = &p.cells.iter().find(|(cg, _)| cg == g)?.1;
                    line(p, rows, default)
                })
                .collect();
            if lines.is_empty() {
                continue;
            }
            let _ = writeln!(tables, "\n### {g}\n");
            table(&mut tables, &lines);
            // The peers' run-to-run spread across the same points.
            let peer_names: Vec<String> = pts
                .iter()
                .flat_map(|p| p.cells.iter().filter(|(cg, _)| cg == g).flat_map(|(_, r)| r.iter()))
                .filter(|r| is_peer(&r.lock))
                .map(|r| r.lock.clone())
                .fold(Vec::new(), |mut v, n| {
                    if !v.contains(&n) {
                        v.push(n);
                    }
                    v
                });
            let peer_spread = median(
                peer_names
                    .iter()
                    .map(|n| {
                        spread(pts.iter().filter_map(|p| {
                            let rows = &p.cells.iter().find(|(cg, _)| cg == g)?.1;
                            rows.iter().find(|r| &r.lock == n).map(|r| r.mops)
                        }))
                    })
                    .collect(),
            );
            let best =
                best_of(&lines, |l| l.mops, true).map_or("-".into(), |i| lines[i].value.clone());
            let lo = lines.iter().map(|l| l.mops).fold(f64::INFINITY, f64::min);
            let hi = lines.iter().map(|l| l.mops).fold(0.0, f64::max);
            let _ = writeln!(
                summary,
                "| {g} | {best} | {}-{} | {:.0} % | {:.0} % |",
                f_sig(lo),
                f_sig(hi),
                spread(lines.iter().map(|l| l.mops)),
                peer_spread,
            );
        }
        out.push_str(&summary);
        out.push_str(&tables);
    }
    print!("{out}");
}
