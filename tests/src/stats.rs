//! What the benchmarks report of their samples: medians, percentiles, the
//! spread and ratios of medians measured side by side. One definition for
//! every benchmark, so their numbers compare.

use std::time::Duration;

/// The `p`th percentile (0 to 100) of `v`, by nearest rank on the sorted
/// samples; zero for no samples.
pub fn percentile(v: &[Duration], p: usize) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    match s.len() {
        0 => Duration::ZERO,
        n => s[(n - 1) * p.min(100) / 100],
    }
}

/// The median of `v` (the lower of the two middle samples for an even
/// count).
pub fn median(v: &[Duration]) -> Duration {
    percentile(v, 50)
}

/// `min..max` of `v`, in milliseconds.
pub fn spread(v: &[Duration]) -> String {
    let lo = v.iter().min().copied().unwrap_or_default();
    let hi = v.iter().max().copied().unwrap_or_default();
    format!("{:.3}..{:.3}", ms(lo), ms(hi))
}

/// `a / b`.
pub fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-12)
}

/// `d` in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// How many of something that takes `d` fit in a second.
pub fn per_s(d: Duration) -> f64 {
    1.0 / d.as_secs_f64().max(1e-12)
}

/// Prints one line: `name`, the median and the 25th-75th percentiles of
/// `v`, in milliseconds.
pub fn report(name: &str, v: &[Duration]) {
    println!(
        "  {name:<52} {:>9.2} ms  ({:.2}-{:.2})",
        ms(median(v)),
        ms(percentile(v, 25)),
        ms(percentile(v, 75))
    );
}

/// The value given after `flag` on a bench's command line (`cargo bench
/// ... -- --against PATH`), if any.
pub fn flag_value(flag: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == flag)?;
    args.get(at + 1).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank_on_the_sorted_samples() {
        let v: Vec<Duration> = [5, 1, 4, 2, 3].map(Duration::from_millis).to_vec();
        assert_eq!(median(&v), Duration::from_millis(3));
        assert_eq!(percentile(&v, 0), Duration::from_millis(1));
        assert_eq!(percentile(&v, 100), Duration::from_millis(5));
        assert_eq!(percentile(&v, 25), Duration::from_millis(2));
        assert_eq!(median(&[]), Duration::ZERO);
        assert_eq!(spread(&v), "1.000..5.000");
    }
}
