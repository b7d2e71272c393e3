//! Helpers shared by the report tools (`bench_report`, `sweep_report`,
//! `cross_cpu`).

/// Whether `lock` is a peer: neither spinbit nor one of its ablations.
pub fn is_peer(lock: &str) -> bool {
    !lock.starts_with("spinbit")
}

/// The median of the finite values of `v`, or NaN if there are none.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// A number with two significant digits or so, however far from 1 it is.
pub fn f_sig(x: f64) -> String {
    if !x.is_finite() {
        "-".into()
    } else if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else if x >= 0.1 || x == 0.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.1e}")
    }
}

/// A ratio as the reports print it and as it is judged: two decimals.
pub fn as_printed(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Whether spinbit is at or above the best peer in a cell, per goal:
/// throughput ratio ≥ 1.00, CPU per operation ≤ 1.00 of the cheapest
/// peer's (only if `no_think`: the cells without think time), fairness at
/// least the fairest peer's, max-wait ratio ≤ 1.00; each `None` where the
/// cell has no such figure. Compared as the reports print them (two
/// decimals), as they are read.
pub fn wins(
    throughput: f64,
    cpu: f64,
    no_think: bool,
    (fair, fairest): (f64, f64),
    max: f64,
) -> [Option<bool>; 4] {
    let known = |x: f64| x.is_finite().then_some(x);
    let round = as_printed;
    [
        known(throughput).map(|x| round(x) >= 1.0),
        if no_think { known(cpu).map(|x| round(x) <= 1.0) } else { None },
        known(fair).zip(known(fairest)).map(|(s, p)| round(s) >= round(p)),
        known(max).map(|x| round(x) <= 1.0),
    ]
}
