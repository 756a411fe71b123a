//! Numbers with their noise: confidence intervals, the interval of a difference, and the
//! false-alarm control of a comparison across a matrix. Pure (no I/O, no clock, no OS
//! entropy: the bootstrap draws from a fixed seed, so the same evidence always gives the same
//! interval, natively and in the viewer). `docs/METHODOLOGY.md` ("Noise") defines each method;
//! the constants below are the definitions the code uses.
//!
//! Three intervals, each refusing to answer ([`NotEnough`], with the reason) rather than give a
//! falsely narrow interval from too little evidence:
//! - [`series_mean`]: the mean of a window's per-second series (total tok/s) by **batch
//!   means**, which respects the autocorrelation of neighbouring seconds;
//! - [`percentile`]: a percentile of per-request values (TTFT p50, TPOT p50) by a **percentile
//!   bootstrap over requests**;
//! - [`repeats`]: the mean over repeats of a cell by **Student's t**.
//!
//! [`difference`] gives the interval and two-sided p-value of B − A from two intervals (Welch);
//! [`benjamini_hochberg`] controls the false discovery rate over the cells of a comparison.

use crate::model::{CellIntervals, Interval, IntervalMethod, MissingFigure, WindowSeries};
use crate::stats::percentile_sorted;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// Confidence level of every interval.
pub const LEVEL: f64 = 0.95;
/// False discovery rate the diff allows across the cells it compares (Benjamini–Hochberg).
pub const FALSE_DISCOVERY_RATE: f64 = 0.05;

/// Batch means: the series is cut into at most this many batches (more once batches would be
/// shorter than [`MIN_BATCH_BUCKETS`]: never; fewer batches of longer seconds otherwise).
pub const TARGET_BATCHES: usize = 10;
/// Batch means: the shortest batch, buckets (s).
pub const MIN_BATCH_BUCKETS: usize = 2;
/// Batch means: fewer batches than this give no interval (a window under 10 s).
pub const MIN_BATCHES: usize = 5;
/// Bootstrap: fewer requests than this give no interval.
pub const MIN_REQUESTS: usize = 10;
/// Repeats: fewer repeats than this give no interval.
pub const MIN_REPEATS: usize = 2;
/// Repeats: the step figures are stored to in a results file (3 decimals, [`crate::stats::round3`]).
pub const STORED_STEP: f64 = 0.001;
/// Repeats: the least standard error of a mean over repeats, the rounding error of one stored
/// value (uniform over one [`STORED_STEP`]: step ÷ √12). Repeats that agree to the last stored
/// decimal have a spread below what the file can show, not none: without this floor two runs
/// whose TPOT repeats read 2.101, 2.101, 2.101 and 2.100, 2.100, 2.100 ms differ "for certain".
pub const ROUNDING_STD_ERROR: f64 = STORED_STEP / 3.464_101_615_137_754_6;
/// Bootstrap: resamples drawn.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;
/// Bootstrap: the seed of its generator (ChaCha8), fixed so that intervals are reproducible.
pub const BOOTSTRAP_SEED: u64 = 0x5EED_5EED_5EED;

/// Why a figure has no interval: its evidence is too short (or absent) for an honest one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotEnough {
    /// For people, e.g. "8 requests; the bootstrap needs at least 10".
    pub reason: String,
}

impl std::fmt::Display for NotEnough {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

fn not_enough(reason: String) -> NotEnough {
    NotEnough { reason }
}

/// The finite values of `values`.
fn finite(values: &[f64]) -> Vec<f64> {
    values.iter().copied().filter(|v| v.is_finite()).collect()
}

/// The mean of `v` (NaN when empty).
pub(crate) fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Sample standard deviation (n − 1); 0 for fewer than two values.
pub(crate) fn sample_sd(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = mean(v);
    (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

/// The two-sided quantile for [`LEVEL`]: t with `df` degrees of freedom, normal for `None`.
pub fn critical_value(df: Option<f64>) -> f64 {
    let p = 1.0 - (1.0 - LEVEL) / 2.0;
    match df {
        Some(df) => StudentsT::new(0.0, 1.0, df).map(|t| t.inverse_cdf(p)).unwrap_or(f64::INFINITY),
        None => Normal::standard().inverse_cdf(p),
    }
}

/// Two-sided p-value of a t statistic with `df` degrees of freedom (normal for `None`).
fn two_sided_p(t: f64, df: Option<f64>) -> f64 {
    let tail = match df {
        Some(df) => StudentsT::new(0.0, 1.0, df).map(|d| d.sf(t.abs())).unwrap_or(0.5),
        None => Normal::standard().sf(t.abs()),
    };
    (2.0 * tail).min(1.0)
}

/// `x`, or 0 when below: figures (rates, times) are never negative, so neither is a bound.
fn at_least_zero(x: f64) -> f64 {
    if x > 0.0 {
        x
    } else {
        0.0
    }
}

fn t_interval(estimate: f64, std_error: f64, df: f64, method: IntervalMethod, evidence: usize) -> Interval {
    let half = critical_value(Some(df)) * std_error;
    Interval {
        estimate,
        low: at_least_zero(estimate - half),
        high: estimate + half,
        level: LEVEL,
        method,
        evidence: evidence as u64,
        std_error,
        df: Some(df),
    }
}

/// The batch rule: `(batch length, batches)` for a series of `n` buckets — batches of
/// max([`MIN_BATCH_BUCKETS`], ⌊n / [`TARGET_BATCHES`]⌋) buckets, as many as fit.
pub fn batch_rule(n: usize) -> (usize, usize) {
    let m = MIN_BATCH_BUCKETS.max(n / TARGET_BATCHES);
    (m, n / m)
}

/// The interval of the mean of a window's per-second `series` (e.g. output tokens per second)
/// by non-overlapping batch means ([`batch_rule`]; the first `n − batches × length` buckets,
/// the window's opening, are left out), Student's t with batches − 1 degrees of freedom. The
/// lower bound is cut at 0, as for [`repeats`]: the figures are never negative.
pub fn series_mean(series: &[f64]) -> Result<Interval, NotEnough> {
    let v = finite(series);
    let (m, b) = batch_rule(v.len());
    if b < MIN_BATCHES {
        return Err(not_enough(format!(
            "a window of {} one-second buckets gives {b} batch(es) of {m} s; batch means need at least {MIN_BATCHES} (a window of at least {} s)",
            v.len(),
            MIN_BATCHES * MIN_BATCH_BUCKETS
        )));
    }
    let skip = v.len() - b * m;
    let batches: Vec<f64> = v[skip..].chunks_exact(m).map(mean).collect();
    let se = sample_sd(&batches) / (b as f64).sqrt();
    Ok(t_interval(mean(&batches), se, (b - 1) as f64, IntervalMethod::BatchMeans, b))
}

/// The interval of the `p`-th percentile (nearest rank, as every figure) of per-request
/// `values` by a percentile bootstrap over requests: [`BOOTSTRAP_RESAMPLES`] resamples with
/// replacement from a generator seeded with [`BOOTSTRAP_SEED`]; the interval runs between the
/// replicates' (1 − [`LEVEL`]) / 2 and (1 + [`LEVEL`]) / 2 percentiles, the standard error is
/// their standard deviation.
pub fn percentile(values: &[f64], p: f64) -> Result<Interval, NotEnough> {
    let mut v = finite(values);
    if v.len() < MIN_REQUESTS {
        return Err(not_enough(format!(
            "{} request(s); the bootstrap over requests needs at least {MIN_REQUESTS}",
            v.len()
        )));
    }
    v.sort_by(f64::total_cmp);
    let estimate = percentile_sorted(&v, p).ok_or_else(|| not_enough(format!("no percentile {p}")))?;
    let mut rng = ChaCha8Rng::seed_from_u64(BOOTSTRAP_SEED);
    let mut resample = vec![0.0; v.len()];
    let mut replicates = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
    for _ in 0..BOOTSTRAP_RESAMPLES {
        for slot in resample.iter_mut() {
            *slot = v[rng.random_range(0..v.len())];
        }
        resample.sort_by(f64::total_cmp);
        replicates.push(percentile_sorted(&resample, p).unwrap_or(estimate));
    }
    replicates.sort_by(f64::total_cmp);
    let tail = (1.0 - LEVEL) / 2.0 * 100.0;
    // The interval always holds the estimate (a resample's percentile can miss it on both sides
    // only when values tie: then the estimate is the bound).
    Ok(Interval {
        estimate,
        low: percentile_sorted(&replicates, tail).unwrap_or(estimate).min(estimate),
        high: percentile_sorted(&replicates, 100.0 - tail).unwrap_or(estimate).max(estimate),
        level: LEVEL,
        method: IntervalMethod::BootstrapRequests,
        evidence: v.len() as u64,
        std_error: sample_sd(&replicates),
        df: None,
    })
}

/// The interval of the `p`-th percentile of per-request `values` **in the order the requests
/// were scheduled**, by a non-overlapping block bootstrap: requests that overlap in time share
/// the server's batches and queue, so neighbours are not independent; blocks of `block`
/// consecutive requests are resampled whole ([`BOOTSTRAP_RESAMPLES`] times, seeded with
/// [`BOOTSTRAP_SEED`]), the first `n − blocks × block` requests left out (as batch means leave
/// out the window's opening). Fewer than [`MIN_REQUESTS`] requests or [`MIN_BATCHES`] blocks
/// give none. A block of 1 is the plain bootstrap, [`percentile`].
pub fn block_percentile(values: &[f64], p: f64, block: usize) -> Result<Interval, NotEnough> {
    if block <= 1 {
        return percentile(values, p);
    }
    let v = finite(values);
    let b = v.len() / block;
    if v.len() < MIN_REQUESTS || b < MIN_BATCHES {
        return Err(not_enough(format!(
            "{} request(s) in blocks of {block} (requests in flight at once) give {b} block(s); the block bootstrap needs at least {MIN_BATCHES} blocks and {MIN_REQUESTS} requests",
            v.len()
        )));
    }
    let mut sorted = v.clone();
    sorted.sort_by(f64::total_cmp);
    let estimate = percentile_sorted(&sorted, p).ok_or_else(|| not_enough(format!("no percentile {p}")))?;
    let blocks: Vec<&[f64]> = v[v.len() - b * block..].chunks_exact(block).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(BOOTSTRAP_SEED);
    let mut resample = Vec::with_capacity(b * block);
    let mut replicates = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
    for _ in 0..BOOTSTRAP_RESAMPLES {
        resample.clear();
        for _ in 0..b {
            resample.extend_from_slice(blocks[rng.random_range(0..b)]);
        }
        resample.sort_by(f64::total_cmp);
        replicates.push(percentile_sorted(&resample, p).unwrap_or(estimate));
    }
    replicates.sort_by(f64::total_cmp);
    let tail = (1.0 - LEVEL) / 2.0 * 100.0;
    Ok(Interval {
        estimate,
        low: percentile_sorted(&replicates, tail).unwrap_or(estimate).min(estimate),
        high: percentile_sorted(&replicates, 100.0 - tail).unwrap_or(estimate).max(estimate),
        level: LEVEL,
        method: IntervalMethod::BootstrapRequests,
        evidence: v.len() as u64,
        std_error: sample_sd(&replicates),
        df: None,
    })
}

/// The interval of the mean of one figure over repeats of a cell: Student's t with repeats − 1
/// degrees of freedom; its standard error is never below [`ROUNDING_STD_ERROR`].
pub fn repeats(values: &[f64]) -> Result<Interval, NotEnough> {
    let v = finite(values);
    if v.len() < MIN_REPEATS {
        return Err(not_enough(format!(
            "{} repeat(s); an interval between repeats needs at least {MIN_REPEATS}",
            v.len()
        )));
    }
    let se = (sample_sd(&v) / (v.len() as f64).sqrt()).max(ROUNDING_STD_ERROR);
    Ok(t_interval(mean(&v), se, (v.len() - 1) as f64, IntervalMethod::BetweenRepeats, v.len()))
}

/// Why one window gives no interval of its TTFT p50: the cell's TTFT is that of the streams
/// that opened it, sent at once and queued behind each other's prefill, so they are one event,
/// not independent requests (a bootstrap over them is falsely narrow: two runs of one server
/// differ by far more than it says). Only repeats of the cell give it an interval.
pub const TTFT_ONE_BURST: &str =
    "the streams that open a cell start as one burst and wait on each other: one event, not independent requests; only repeats give an interval (run --repeat 3 or more)";

/// Why one window gives no interval of its TPOT p50: the streams of a window decode in the same
/// batches, so their TPOTs move together and are not independent evidence (against the twin, two
/// seeds differed by more than a bootstrap over the streams allowed). Only repeats of the cell
/// give it an interval.
pub const TPOT_SHARED_BATCHES: &str =
    "the streams of one window decode in the same batches: their TPOTs move together, not independent requests; only repeats give an interval (run --repeat 3 or more)";

/// A decode cell's intervals from its evidence: total tok/s from its window `series` (batch
/// means over tokens ÷ bucket). TTFT p50 and TPOT p50 have none from one window
/// ([`TTFT_ONE_BURST`], [`TPOT_SHARED_BATCHES`]); the bootstrap over requests ([`percentile`])
/// is kept for evidence that is independent. What cannot be had is `null` with the reason in
/// `missing`.
pub fn cell_intervals(series: Option<&WindowSeries>) -> CellIntervals {
    let mut missing = vec![];
    let mut keep = |figure: &str, r: Result<Interval, NotEnough>| match r {
        Ok(i) => Some(i),
        Err(e) => {
            missing.push(MissingFigure { figure: figure.into(), reason: e.reason });
            None
        }
    };
    let rate = match series {
        Some(s) if s.bucket_s > 0.0 => series_mean(&s.output_tokens.iter().map(|t| t / s.bucket_s).collect::<Vec<_>>()),
        _ => Err(not_enough("no per-second series of the window".into())),
    };
    let total_tps = keep("total_tps", rate);
    let ttft_ms_p50 = keep("ttft_ms_p50", Err(not_enough(TTFT_ONE_BURST.into())));
    let tpot_ms_p50 = keep("tpot_ms_p50", Err(not_enough(TPOT_SHARED_BATCHES.into())));
    CellIntervals { total_tps, ttft_ms_p50, tpot_ms_p50, missing }
}

/// B − A with its interval at [`LEVEL`] and the two-sided p-value of "no change".
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Difference {
    /// B's estimate − A's, in the figure's unit.
    pub estimate: f64,
    /// Lower bound of the difference.
    pub low: f64,
    /// Upper bound of the difference.
    pub high: f64,
    /// Two-sided p-value of "no change" (1 when nothing differs at all).
    pub p_value: f64,
    /// Welch–Satterthwaite degrees of freedom; `None` when both sides are normal (bootstrap).
    pub df: Option<f64>,
}

impl Difference {
    /// Whether the interval leaves out 0 (no change).
    pub fn excludes_zero(&self) -> bool {
        self.low > 0.0 || self.high < 0.0
    }
}

/// The difference B − A of two independent estimates from their intervals: standard error
/// √(se_A² + se_B²) (each side at least [`ROUNDING_STD_ERROR`]), Welch–Satterthwaite degrees of freedom (a side without `df` counts as
/// normal, i.e. infinitely many), t interval and two-sided p-value.
pub fn difference(a: &Interval, b: &Interval) -> Difference {
    let estimate = b.estimate - a.estimate;
    // A file from before the floor (or any stored interval) may hold 0: one stored step is noise.
    let (sa, sb) = (a.std_error.max(ROUNDING_STD_ERROR), b.std_error.max(ROUNDING_STD_ERROR));
    let (va, vb) = (sa * sa, sb * sb);
    let se = (va + vb).sqrt();
    let part = |v: f64, df: Option<f64>| df.map_or(0.0, |d| v * v / d);
    let denominator = part(va, a.df) + part(vb, b.df);
    let df = (denominator > 0.0).then(|| (va + vb) * (va + vb) / denominator);
    let half = critical_value(df) * se;
    Difference { estimate, low: estimate - half, high: estimate + half, p_value: two_sided_p(estimate / se, df), df }
}

/// Benjamini–Hochberg at false discovery rate `q`: for each p-value (any order), whether it is a
/// discovery. Sorted ascending p₍₁₎ ≤ … ≤ p₍ₘ₎, the largest k with p₍ₖ₎ ≤ k·q/m and every
/// smaller one are discoveries. Non-finite p-values are never discoveries (and still count in m).
pub fn benjamini_hochberg(p_values: &[f64], q: f64) -> Vec<bool> {
    let m = p_values.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| p_values[i].total_cmp(&p_values[j]));
    let cutoff = order
        .iter()
        .enumerate()
        .filter(|(rank, &i)| p_values[i].is_finite() && p_values[i] <= (rank + 1) as f64 * q / m as f64)
        .map(|(rank, _)| rank + 1)
        .max()
        .unwrap_or(0);
    let mut discovered = vec![false; m];
    for &i in &order[..cutoff] {
        discovered[i] = true;
    }
    discovered
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn critical_values_are_the_textbook_ones() {
        assert!(close(critical_value(None), 1.959_964, 1e-6));
        assert!(close(critical_value(Some(1.0)), 12.706_205, 1e-5));
        assert!(close(critical_value(Some(4.0)), 2.776_445, 1e-6));
        assert!(close(critical_value(Some(9.0)), 2.262_157, 1e-6));
    }

    #[test]
    fn batch_rule_and_its_refusal() {
        assert_eq!(batch_rule(9), (2, 4));
        assert_eq!(batch_rule(10), (2, 5));
        assert_eq!(batch_rule(29), (2, 14));
        assert_eq!(batch_rule(30), (3, 10));
        assert_eq!(batch_rule(305), (30, 10));
        let e = series_mean(&[1.0; 9]).unwrap_err();
        assert_eq!(
            e.reason,
            "a window of 9 one-second buckets gives 4 batch(es) of 2 s; batch means need at least 5 (a window of at least 10 s)"
        );
        // Non-finite buckets are not evidence.
        assert!(series_mean(&[1.0, 2.0, f64::NAN, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]).is_err());
    }

    #[test]
    fn batch_means_on_known_numbers() {
        // 11 buckets: batches of 2, 5 of them, the first bucket (the opening) left out.
        let s = [100.0, 1.0, 3.0, 2.0, 4.0, 3.0, 5.0, 4.0, 6.0, 5.0, 7.0];
        let i = series_mean(&s).unwrap();
        // Batch means 2, 3, 4, 5, 6: mean 4, sd √2.5, se √0.5, t(4) = 2.776445.
        assert_eq!(i.method, IntervalMethod::BatchMeans);
        assert_eq!(i.evidence, 5);
        assert_eq!(i.df, Some(4.0));
        assert!(close(i.estimate, 4.0, 1e-12));
        assert!(close(i.std_error, 0.5f64.sqrt(), 1e-12));
        assert!(close(i.low, 4.0 - 2.776_445 * std::f64::consts::FRAC_1_SQRT_2, 1e-5), "{i:?}");
        assert!(close(i.high, 4.0 + 2.776_445 * std::f64::consts::FRAC_1_SQRT_2, 1e-5), "{i:?}");
        assert_eq!(i.level, 0.95);
    }

    #[test]
    fn repeats_on_known_numbers() {
        let i = repeats(&[100.0, 102.0]).unwrap();
        // mean 101, sd √2, se 1, t(1) = 12.706205.
        assert!(close(i.estimate, 101.0, 1e-12));
        assert!(close(i.std_error, 1.0, 1e-12));
        assert!(close(i.low, 101.0 - 12.706_205, 1e-5));
        assert!(close(i.high, 101.0 + 12.706_205, 1e-5));
        assert_eq!((i.method, i.evidence, i.df), (IntervalMethod::BetweenRepeats, 2, Some(1.0)));
        // Wide enough to reach below zero: cut at 0 (a rate is never negative).
        assert_eq!(repeats(&[1.0, 3.0]).unwrap().low, 0.0);
        assert_eq!(repeats(&[10.0]).unwrap_err().reason, "1 repeat(s); an interval between repeats needs at least 2");
    }

    #[test]
    fn repeats_that_agree_to_the_stored_decimal_still_have_the_rounding_error() {
        // Seen in CI: TPOT repeats of one twin 2.101 ms × 3, of the same twin reseeded 2.100 ms × 3.
        let (a, b) = (repeats(&[2.101; 3]).unwrap(), repeats(&[2.100; 3]).unwrap());
        assert!(close(a.std_error, 0.001 / 12f64.sqrt(), 1e-15), "{a:?}");
        let same = difference(&a, &b);
        assert!(!same.excludes_zero() && same.p_value > 0.05, "one stored step is noise: {same:?}");
        // 5 % slower is still seen.
        let slower = difference(&a, &repeats(&[2.206; 3]).unwrap());
        assert!(slower.excludes_zero() && slower.p_value < 1e-4, "{slower:?}");
        // A real spread above the floor is kept as it is.
        assert!(close(repeats(&[100.0, 102.0]).unwrap().std_error, 1.0, 1e-12));
    }

    #[test]
    fn bootstrap_is_deterministic_and_brackets_the_median() {
        let v: Vec<f64> = (1..=21).map(f64::from).collect();
        let a = percentile(&v, 50.0).unwrap();
        let b = percentile(&v, 50.0).unwrap();
        assert_eq!(a, b, "the same evidence gives the same interval");
        assert_eq!(a.estimate, 11.0);
        assert_eq!((a.method, a.evidence, a.df), (IntervalMethod::BootstrapRequests, 21, None));
        // The median of 21 resampled values from 1..=21 lies within ±4 ranks of 11 in about
        // 95 % of resamples: the interval is a few values wide either side, never zero.
        assert!(a.low >= 6.0 && a.low <= 9.0, "{a:?}");
        assert!(a.high >= 13.0 && a.high <= 16.0, "{a:?}");
        assert!(a.std_error > 1.0 && a.std_error < 3.0, "{a:?}");
        // Identical values: a zero-width interval is the truth, not a failure.
        let same = percentile(&[5.0; 12], 50.0).unwrap();
        assert_eq!((same.low, same.high, same.std_error), (5.0, 5.0, 0.0));
        assert_eq!(
            percentile(&[1.0; 9], 50.0).unwrap_err().reason,
            "9 request(s); the bootstrap over requests needs at least 10"
        );
    }

    #[test]
    fn cell_intervals_say_what_is_missing() {
        let series = WindowSeries {
            bucket_s: 0.5,
            output_tokens: vec![10.0, 12.0, 10.0, 12.0, 10.0, 12.0, 10.0, 12.0, 10.0, 12.0],
            streams_decoding: vec![1.0; 10],
            running: vec![],
            waiting: vec![],
        };
        let c = cell_intervals(Some(&series));
        // Half-second buckets of 10 and 12 tokens: 20 and 24 tok/s; batches of two buckets,
        // 22 tok/s each.
        let tps = c.total_tps.unwrap();
        assert_eq!((tps.estimate, tps.low, tps.high, tps.evidence), (22.0, 22.0, 22.0, 5));
        assert_eq!((c.ttft_ms_p50, c.tpot_ms_p50), (None, None));
        assert_eq!(
            c.missing,
            vec![
                MissingFigure { figure: "ttft_ms_p50".into(), reason: TTFT_ONE_BURST.into() },
                MissingFigure { figure: "tpot_ms_p50".into(), reason: TPOT_SHARED_BATCHES.into() }
            ]
        );
        let none = cell_intervals(None);
        assert_eq!(none.missing.len(), 3);
        assert_eq!(none.missing[0].reason, "no per-second series of the window");
    }

    fn interval(estimate: f64, std_error: f64, df: Option<f64>) -> Interval {
        Interval {
            estimate,
            low: estimate,
            high: estimate,
            level: LEVEL,
            method: IntervalMethod::BatchMeans,
            evidence: 10,
            std_error,
            df,
        }
    }

    #[test]
    fn difference_welch_on_known_numbers() {
        // se_A = 3, se_B = 4 → se 5; df = 25² / (81/9 + 256/9) = 625 · 9 / 337.
        let d = difference(&interval(100.0, 3.0, Some(9.0)), &interval(110.0, 4.0, Some(9.0)));
        let df = 625.0 * 9.0 / 337.0;
        assert!(close(d.df.unwrap(), df, 1e-9));
        assert!(close(d.estimate, 10.0, 1e-12));
        let half = critical_value(Some(df)) * 5.0;
        assert!(close(d.low, 10.0 - half, 1e-9) && close(d.high, 10.0 + half, 1e-9));
        assert!(!d.excludes_zero(), "t = 2 with ~16.7 df is not significant at 95 %: {d:?}");
        assert!(d.p_value > 0.05 && d.p_value < 0.07, "{d:?}");
        // Two bootstrap sides: normal.
        let n = difference(&interval(0.0, 1.0, None), &interval(3.0, 1.0, None));
        assert_eq!(n.df, None);
        assert!(close(n.high - n.low, 2.0 * 1.959_964 * 2f64.sqrt(), 1e-5));
        assert!(n.excludes_zero() && close(n.p_value, 0.033_895, 1e-5), "{n:?}");
        // No spread recorded (a file from before the floor): the rounding error is the spread.
        let same = difference(&interval(1.0, 0.0, Some(4.0)), &interval(1.0, 0.0, Some(4.0)));
        assert_eq!((same.p_value, same.df), (1.0, Some(8.0)));
        assert!(!difference(&interval(2.101, 0.0, Some(2.0)), &interval(2.1, 0.0, Some(2.0))).excludes_zero());
        let apart = difference(&interval(1.0, 0.0, Some(4.0)), &interval(2.0, 0.0, Some(4.0)));
        assert!(apart.excludes_zero() && apart.p_value < 1e-9, "{apart:?}");
    }

    #[test]
    fn benjamini_hochberg_on_a_textbook_example() {
        // m = 5, q = 0.05: thresholds 0.01, 0.02, 0.03, 0.04, 0.05. Sorted: 0.001 ≤ 0.01 ✓,
        // 0.015 ≤ 0.02 ✓, 0.035 > 0.03, 0.039 ≤ 0.04 ✓ (the step-up keeps rank 4), 0.6 > 0.05.
        let p = [0.6, 0.035, 0.001, 0.039, 0.015];
        assert_eq!(benjamini_hochberg(&p, 0.05), vec![false, true, true, true, true]);
        // Each alone would pass at 0.05; five at 0.04 … only when all are small.
        assert_eq!(benjamini_hochberg(&[0.04, 0.5, 0.5, 0.5, 0.5], 0.05), vec![false; 5]);
        assert_eq!(benjamini_hochberg(&[f64::NAN, 0.0], 0.05), vec![false, true]);
        assert!(benjamini_hochberg(&[], 0.05).is_empty());
    }

    #[test]
    fn the_block_bootstrap_keeps_neighbours_together() {
        // 200 requests in 20 runs of 10 alike (requests that share a queue): each run at its
        // own level, 100 … 150 ms, ± 0.9 ms within it. Resampling requests one by one treats
        // the 200 as independent and gives a narrow interval; blocks of 10 resample the 20 runs.
        let level = |k: u32| 100.0 + 5.0 * f64::from((k * 37) % 11);
        let v: Vec<f64> = (0..200u32).map(|i| level(i / 10) + 0.1 * f64::from(i % 10)).collect();
        assert_eq!(block_percentile(&v, 50.0, 1), percentile(&v, 50.0), "a block of 1 is the plain bootstrap");
        let plain = percentile(&v, 50.0).unwrap();
        let blocks = block_percentile(&v, 50.0, 10).unwrap();
        assert_eq!(blocks.estimate, plain.estimate);
        assert!(blocks.high - blocks.low > plain.high - plain.low, "{blocks:?} against {plain:?}");
        assert!(blocks.std_error > plain.std_error);
        // Too few blocks (200 in blocks of 50: 4) or requests: the reason, no interval.
        let err = block_percentile(&v, 50.0, 50).unwrap_err();
        assert!(err.reason.contains("give 4 block(s)"), "{err}");
        assert!(block_percentile(&v[..8], 50.0, 1).is_err());
    }
}
