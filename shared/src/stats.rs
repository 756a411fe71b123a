//! Pure statistics: percentiles, distribution summaries and the rounding of figures.
//!
//! One method everywhere: **nearest rank**. The p-th percentile of n sorted values is the value
//! at 1-based rank ⌈p/100 × n⌉ (rank 1 for p = 0). It is always one of the observed values, and
//! it is what HDR histograms report (up to their bucket precision), so figures the collector
//! computes from histograms and figures the viewer recomputes from per-request samples agree.

use crate::model::Distribution;

/// The p-th percentile (0 ≤ p ≤ 100) of `sorted` (ascending) by nearest rank; `None` when empty
/// or when p is outside 0–100.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=100.0).contains(&p) {
        return None;
    }
    let n = sorted.len();
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, n) - 1])
}

/// Summarise `values` (any order; non-finite values are ignored) into a [`Distribution`];
/// `None` when no finite value is left.
pub fn distribution(values: &[f64]) -> Option<Distribution> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let sum: f64 = sorted.iter().sum();
    Some(Distribution {
        p50: percentile_sorted(&sorted, 50.0),
        p90: percentile_sorted(&sorted, 90.0),
        p99: percentile_sorted(&sorted, 99.0),
        mean: Some(sum / n as f64),
        min: sorted.first().copied(),
        max: sorted.last().copied(),
        count: Some(n as u64),
    })
}

/// Round a figure to 3 decimals — µs for a figure in ms — as results files store them.
pub fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// [`distribution`] with every figure rounded to 3 decimals (µs for ms figures), as results
/// files keep them.
pub fn distribution_rounded(values: &[f64]) -> Option<Distribution> {
    distribution(values).map(|d| Distribution {
        p50: d.p50.map(round3),
        p90: d.p90.map(round3),
        p99: d.p99.map(round3),
        mean: d.mean.map(round3),
        min: d.min.map(round3),
        max: d.max.map(round3),
        count: d.count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_on_known_values() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile_sorted(&v, 50.0), Some(5.0));
        assert_eq!(percentile_sorted(&v, 90.0), Some(9.0));
        assert_eq!(percentile_sorted(&v, 99.0), Some(10.0));
        assert_eq!(percentile_sorted(&v, 0.0), Some(1.0));
        assert_eq!(percentile_sorted(&v, 100.0), Some(10.0));
        assert_eq!(percentile_sorted(&[], 50.0), None);
        assert_eq!(percentile_sorted(&v, 101.0), None);
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile_sorted(&hundred, 99.0), Some(99.0));
    }

    #[test]
    fn round3_keeps_microseconds() {
        assert_eq!(round3(1.234_567), 1.235);
        assert_eq!(round3(196.0004), 196.0);
        assert_eq!(round3(-0.0015), -0.002);
        assert_eq!(round3(2.0), 2.0);
    }

    #[test]
    fn distribution_of_unsorted_values_skips_non_finite() {
        let d = distribution(&[3.0, f64::NAN, 1.0, 2.0, f64::INFINITY, 4.0]).unwrap();
        assert_eq!(d.count, Some(4));
        assert_eq!(d.min, Some(1.0));
        assert_eq!(d.max, Some(4.0));
        assert_eq!(d.p50, Some(2.0));
        assert_eq!(d.mean, Some(2.5));
        assert!(distribution(&[f64::NAN]).is_none());
    }
}
