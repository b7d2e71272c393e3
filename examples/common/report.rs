//! Helpers shared by the report examples (`bench_report`, `sweep_report`).

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
