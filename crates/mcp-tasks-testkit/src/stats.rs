//! The statistics the benches print: nearest-rank percentiles of sorted
//! samples, medians of runs, the load average; one copy for every crate's
//! benches.

use std::time::Duration;

/// The sample at percentile `p` (0.0 to 1.0) of `sorted` (ascending),
/// nearest rank (`(len - 1) * p`, rounded); `None` if there is none.
pub fn percentile<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    let last = sorted.len().checked_sub(1)?;
    let index = (last as f64 * p).round() as usize;
    sorted.get(index.min(last)).copied()
}

/// [`percentile`] of durations, or zero if there is none.
pub fn percentile_duration(sorted: &[Duration], p: f64) -> Duration {
    percentile(sorted, p).unwrap_or(Duration::ZERO)
}

/// [`percentile`] of durations in milliseconds, or NaN if there is none.
pub fn percentile_ms(sorted: &[Duration], p: f64) -> f64 {
    percentile(sorted, p).map_or(f64::NAN, ms)
}

/// [`percentile`] of numbers, or NaN if there is none.
pub fn percentile_f64(sorted: &[f64], p: f64) -> f64 {
    percentile(sorted, p).unwrap_or(f64::NAN)
}

/// The median (the upper one of an even count) of `values`, which it
/// sorts; NaN if there is none.
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// `duration` in milliseconds.
pub fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// `PASS` or `MISS`, for a goal a bench checks.
pub fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "MISS" }
}

/// The machine's load averages over 1, 5 and 15 minutes (`/proc/loadavg`),
/// or nothing where there is no such file.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}
