//! The rate cells of two runs compared (docs/METHODOLOGY.md, "Comparing runs", rate cells):
//! part of [`super::RunDiff`], so `speedmatrix diff` and the page's diff view print it.
//!
//! - Rate cells are matched by (context, prefix share, offered rate, arrival process and its
//!   CV); the seed may differ (it only draws another schedule of the same process).
//! - Every figure of [`RATE_FIGURES`] either side has gets A, B, the change and a verdict as a
//!   decode cell's figures do (threshold, the figure's direction).
//! - The figures per-request samples give an interval of ([`RATE_NOISE_FIGURES`]: TTFT, TPOT
//!   and E2E p50 by a block bootstrap over the window's requests in schedule order; achieved
//!   rate and goodput by batch means over the window's per-second completions) get the noise
//!   verdict instead, Benjamini–Hochberg over the rate cells of each figure; total tok/s keeps
//!   the threshold rule (the file keeps no per-second token series of a rate cell).
//! - Cells in one run only, status changes (valid → saturated) and the highest rate meeting the
//!   SLO per context (`rate_at_slo`) are listed.

use super::{compare_figure, Delta, DeltaInterval, NoiseRule, Verdict};
use crate::model::{
    Arrival, ArrivalProcess, CellStatus, ContextSize, Distribution, Interval, RateCell, RateSlo, Results,
};
use crate::noise;
use crate::rate_label;
use serde::Serialize;

/// One statistic of a rate cell.
type FigureOf = fn(&RateCell) -> Option<f64>;

fn p50(d: Option<Distribution>) -> Option<f64> {
    d.and_then(|d| d.p50)
}

fn p90(d: Option<Distribution>) -> Option<f64> {
    d.and_then(|d| d.p90)
}

/// The figures of a rate cell the diff compares: column id (as `show --rates` names it),
/// whether higher is better (`None`: no direction, only "changed"), the figure. The measured
/// prefix-cache hit rate, the acceptance rate and the mean accepted length are one count per
/// cell (no samples): the threshold rule only.
pub const RATE_FIGURES: [(&str, Option<bool>, FigureOf); 15] = [
    ("offered_rps", None, |c| c.offered_rps),
    ("achieved_rps", Some(true), |c| c.achieved_rps),
    ("goodput_rps", Some(true), |c| c.goodput_rps),
    ("total_tps", Some(true), |c| c.total_tps),
    ("ttft_ms_p50", Some(false), |c| p50(c.ttft_ms)),
    ("ttft_ms_p90", Some(false), |c| p90(c.ttft_ms)),
    ("tpot_ms_p50", Some(false), |c| p50(c.tpot_ms)),
    ("tpot_ms_p90", Some(false), |c| p90(c.tpot_ms)),
    ("e2e_ms_p50", Some(false), |c| p50(c.e2e_ms)),
    ("e2e_ms_p90", Some(false), |c| p90(c.e2e_ms)),
    ("send_lag_ms_p99", None, |c| c.send_lag_ms.and_then(|d| d.p99)),
    ("avg_in_flight", None, |c| c.avg_in_flight),
    ("prefix_cache_hit_rate", None, |c| c.prefix_cache.as_ref().and_then(|p| p.measured_hit_rate)),
    ("spec_accept_rate", Some(true), |c| c.spec_decode.as_ref().and_then(|s| s.acceptance_rate)),
    ("spec_mean_accepted_len", Some(true), |c| c.spec_decode.as_ref().and_then(|s| s.mean_accepted_length)),
];

/// The figures of [`RATE_FIGURES`] a rate table shows only when a cell of either run has them:
/// the measured prefix-cache hit rate (`--prefix-share`) and speculative decoding (threshold
/// verdicts only). `speedmatrix diff` and the page's diff view add them to their tables.
pub const CACHE_SPEC_FIGURES: [&str; 3] = ["prefix_cache_hit_rate", "spec_accept_rate", "spec_mean_accepted_len"];

/// The figures of [`CACHE_SPEC_FIGURES`] some row of `d` has a delta of, in that order.
pub fn cache_spec_figures(d: &RateDiff) -> Vec<&'static str> {
    CACHE_SPEC_FIGURES.into_iter().filter(|c| d.rows.iter().any(|r| r.delta(c).is_some())).collect()
}

/// The figures that get an interval from a rate cell's per-request samples. Total tok/s has
/// none (a rate cell keeps no per-second series of its output tokens, only each request's
/// total) and keeps the threshold rule.
pub const RATE_NOISE_FIGURES: [&str; 5] = ["ttft_ms_p50", "tpot_ms_p50", "e2e_ms_p50", "achieved_rps", "goodput_rps"];

/// Where a rate cell is: context, offered rate, arrival process.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RateRef {
    /// The context (label and nominal tokens).
    pub context: ContextSize,
    /// The offered rate, requests/s (plan).
    pub rate_rps: f64,
    /// The arrival process (its seed is A's when both have the cell).
    pub arrival: Arrival,
    /// Its prefix share (`--prefix-share`); absent for a cell without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_share: Option<f64>,
}

impl RateRef {
    /// "8K at 2 req/s", with the process when it is not Poisson: "8K at 2 req/s (gamma CV 4)",
    /// and the prefix share where it has one: "8K · prefix 90% at 2 req/s".
    pub fn describe(&self) -> String {
        let process = match self.arrival.process {
            ArrivalProcess::Poisson => String::new(),
            ArrivalProcess::Constant => " (constant)".into(),
            ArrivalProcess::Gamma => format!(" (gamma CV {})", self.arrival.cv.unwrap_or(1.0)),
            ArrivalProcess::Trace => " (trace)".into(),
        };
        format!(
            "{}{} at {}{process}",
            self.context.label,
            crate::prefix::name_suffix(self.prefix_share),
            rate_label(self.rate_rps)
        )
    }

    /// The row's context as the rate tables write it: "8K", "8K · prefix 90%".
    pub fn row_label(&self) -> String {
        format!("{}{}", self.context.label, crate::prefix::name_suffix(self.prefix_share))
    }

    fn key(&self) -> (u64, Option<u32>, u64, u8, u64) {
        let process = match self.arrival.process {
            ArrivalProcess::Poisson => 0,
            ArrivalProcess::Constant => 1,
            ArrivalProcess::Gamma => 2,
            ArrivalProcess::Trace => 3,
        };
        (
            self.context.tokens,
            crate::prefix::key(self.prefix_share),
            self.rate_rps.to_bits(),
            process,
            self.arrival.cv.unwrap_or(0.0).to_bits(),
        )
    }

    fn of(c: &RateCell) -> RateRef {
        RateRef { context: c.context.clone(), rate_rps: c.rate_rps, arrival: c.arrival, prefix_share: c.prefix_share }
    }
}

/// A rate cell of either run, matched with its partner when it has one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RateRowDiff {
    /// Where it is.
    #[serde(flatten)]
    pub cell: RateRef,
    /// A's status; `None` when A has no such cell.
    pub status_a: Option<CellStatus>,
    /// B's status; `None` when B has no such cell.
    pub status_b: Option<CellStatus>,
    /// Every figure of [`RATE_FIGURES`] either side has, in that order.
    pub deltas: Vec<Delta>,
}

impl RateRowDiff {
    /// Whether both runs have this cell.
    pub fn matched(&self) -> bool {
        self.status_a.is_some() && self.status_b.is_some()
    }

    /// Whether both runs have it with different statuses.
    pub fn status_changed(&self) -> bool {
        self.matched() && self.status_a != self.status_b
    }

    /// The change of one figure (`ttft_ms_p50`, `achieved_rps`).
    pub fn delta(&self, column: &str) -> Option<&Delta> {
        self.deltas.iter().find(|d| d.column == column)
    }
}

/// A rate cell both runs have, with another status.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RateStatusChange {
    /// Where.
    #[serde(flatten)]
    pub cell: RateRef,
    /// A's status.
    pub a: CellStatus,
    /// B's status.
    pub b: CellStatus,
}

/// The highest rate meeting the SLO at one context (`rate_at_slo`), in A and in B.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SloRateChange {
    /// The context.
    pub context: ContextSize,
    /// Whether A searched this context (`--rates auto`).
    pub in_a: bool,
    /// Whether B did.
    pub in_b: bool,
    /// A's highest rate meeting the SLO, req/s; `None` when none did (or A did not search).
    pub a: Option<f64>,
    /// B's.
    pub b: Option<f64>,
    /// The lowest rate above A's that did not meet it.
    pub a_failed_at: Option<f64>,
    /// B's.
    pub b_failed_at: Option<f64>,
    /// Better when B met a rate A failed, worse when B failed a rate A met, same when each
    /// answer lies in the other's bracket (the search's resolution); `None` when not both
    /// searched or the SLOs differ.
    pub verdict: Option<Verdict>,
}

/// The rate cells of two runs compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RateDiff {
    /// How the figures with an interval are judged ([`RATE_NOISE_FIGURES`]); `None` when a run
    /// has no rate cell with requests.
    pub noise: Option<NoiseRule>,
    /// A's SLO of rate cells, in words; `None` without one.
    pub slo_a: Option<String>,
    /// B's.
    pub slo_b: Option<String>,
    /// Every rate cell of either run: by context, then rate, then process.
    pub rows: Vec<RateRowDiff>,
    /// Cells only A has.
    pub only_in_a: Vec<RateRef>,
    /// Cells only B has.
    pub only_in_b: Vec<RateRef>,
    /// Cells both have with different statuses.
    pub status_changes: Vec<RateStatusChange>,
    /// `rate_at_slo` per context of either run.
    pub rate_at_slo: Vec<SloRateChange>,
}

impl RateDiff {
    /// Whether either run has a rate cell or a `rate_at_slo`.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty() && self.rate_at_slo.is_empty()
    }

    /// The rate cell at (context tokens, rate), if either run has it.
    pub fn cell(&self, context_tokens: u64, rate_rps: f64) -> Option<&RateRowDiff> {
        self.rows.iter().find(|r| r.cell.context.tokens == context_tokens && r.cell.rate_rps == rate_rps)
    }

    /// How many matched rate cells are better, worse, same … on `column` (by
    /// [`Verdict::label`]), status changes counted as [`super::STATUS_CHANGED`].
    pub fn tally(&self, column: &str) -> std::collections::BTreeMap<&'static str, usize> {
        let mut t = std::collections::BTreeMap::new();
        for r in &self.rows {
            let key = if r.status_changed() {
                Some(super::STATUS_CHANGED)
            } else {
                r.delta(column).and_then(|d| d.verdict).map(Verdict::label)
            };
            if let Some(k) = key {
                *t.entry(k).or_insert(0) += 1;
            }
        }
        t
    }
}

/// Compare the rate cells of `a` (baseline) and `b` (candidate). `threshold` as in
/// [`super::diff_with`]: the least change called better or worse (default 5 % for figures
/// without an interval, 0 for those with one).
pub fn rate_diff(a: &Results, b: &Results, threshold: Option<f64>) -> RateDiff {
    let has_samples = |r: &Results| r.rates.iter().any(|c| !c.requests.is_empty());
    let noise_rule = (has_samples(a) && has_samples(b)).then(|| NoiseRule {
        level: noise::LEVEL,
        false_discovery_rate: noise::FALSE_DISCOVERY_RATE,
        control: "benjamini_hochberg",
        min_change: threshold.unwrap_or(0.0),
    });
    let fixed = threshold.unwrap_or(super::DEFAULT_THRESHOLD);
    let (slo_a, slo_b) = (a.config.rate_slo, b.config.rate_slo);
    let slo_differs = slo_a != slo_b;
    let mut pairs: Vec<(RateRef, Option<&RateCell>, Option<&RateCell>)> = Vec::new();
    for (side, r) in [(0, a), (1, b)] {
        for c in &r.rates {
            let at = RateRef::of(c);
            match pairs.iter_mut().find(|p| p.0.key() == at.key()) {
                Some(p) if side == 0 => {
                    p.1.get_or_insert(c);
                }
                Some(p) => {
                    p.2.get_or_insert(c);
                }
                None if side == 0 => pairs.push((at, Some(c), None)),
                None => pairs.push((at, None, Some(c))),
            }
        }
    }
    pairs.sort_by_key(|p| p.0.key());
    let mut out = RateDiff {
        noise: noise_rule.clone(),
        slo_a: slo_a.as_ref().map(crate::rate::slo_text),
        slo_b: slo_b.as_ref().map(crate::rate::slo_text),
        rows: Vec::new(),
        only_in_a: Vec::new(),
        only_in_b: Vec::new(),
        status_changes: Vec::new(),
        rate_at_slo: slo_rates(a, b, slo_differs),
    };
    for (cell, ca, cb) in pairs {
        let mut deltas: Vec<Delta> = RATE_FIGURES
            .iter()
            .filter_map(|(id, dir, f)| {
                let (va, vb) = (ca.and_then(f), cb.and_then(f));
                (va.is_some() || vb.is_some()).then(|| compare_figure(id.to_string(), *dir, va, vb, fixed))
            })
            .collect();
        if slo_differs {
            for d in deltas.iter_mut().filter(|d| d.column == "goodput_rps") {
                (d.abs, d.rel, d.verdict) = (None, None, None);
                d.not_comparable = Some("the runs' SLOs differ".into());
            }
        }
        if let (Some(_), Some(ca), Some(cb)) = (&noise_rule, ca, cb) {
            attach_rate_intervals(&mut deltas, ca, cb, slo_a.as_ref());
        }
        match (ca, cb) {
            (Some(_), None) => out.only_in_a.push(cell.clone()),
            (None, Some(_)) => out.only_in_b.push(cell.clone()),
            (Some(x), Some(y)) if x.status != y.status => {
                out.status_changes.push(RateStatusChange { cell: cell.clone(), a: x.status, b: y.status })
            }
            _ => {}
        }
        out.rows.push(RateRowDiff { cell, status_a: ca.map(|c| c.status), status_b: cb.map(|c| c.status), deltas });
    }
    if let Some(rule) = &noise_rule {
        rate_noise_verdicts(&mut out.rows, rule);
    }
    out
}

/// A rate figure as people read it: a registry column's own format (`363 ms`, `1,234.5`),
/// rates as `0.48 req/s`, the send lag as `0.41 ms`, a mean in flight as `2.3`.
pub fn figure_text(column: &str, v: f64) -> String {
    if let Some(col) = crate::registry::column(column) {
        return col.display(v);
    }
    if let Some(col) = crate::registry::cell_figures().into_iter().find(|c| c.id() == column) {
        return col.display(v);
    }
    let two = crate::registry::format_number(v, crate::registry::Style::Fixed(2));
    if column.ends_with("_rps") {
        format!("{two} req/s")
    } else if column.starts_with("send_lag_ms") {
        format!("{two} ms")
    } else {
        crate::registry::format_number(v, crate::registry::Style::Fixed(1))
    }
}

/// A rate figure's name for people: "Achieved req/s", "TTFT p50".
pub fn figure_label(column: &str) -> String {
    match column {
        "offered_rps" => "Offered req/s".into(),
        "achieved_rps" => "Achieved req/s".into(),
        "goodput_rps" => "Goodput req/s".into(),
        "send_lag_ms_p99" => "Send lag p99".into(),
        "avg_in_flight" => "Mean in flight".into(),
        other if crate::registry::column(other).is_none() => crate::registry::cell_figures()
            .into_iter()
            .find(|c| c.id() == other)
            .map_or(other.to_string(), |c| c.metric.label.to_string()),
        other => crate::registry::column(other).map_or(other.to_string(), |c| {
            let stat = c.stat.map(|s| format!(" {}", s.suffix())).unwrap_or_default();
            format!("{}{stat}", c.metric.label)
        }),
    }
}

/// The window of a rate cell, ms from the run start: `(open, close]`, as the collector counts it.
fn window(c: &RateCell) -> Option<(f64, f64)> {
    let (w0, len) = (c.window_start_ms?, c.window_s?);
    (len > 0.0).then_some((w0, w0 + len * 1000.0))
}

/// Requests in flight at once that share the server's batches: the block length of the
/// bootstrap, ⌈mean in flight⌉ (at least 1).
fn block_length(c: &RateCell) -> usize {
    c.avg_in_flight.filter(|v| v.is_finite() && *v > 1.0).map_or(1, |v| v.ceil() as usize)
}

/// The interval of one of [`RATE_NOISE_FIGURES`] from a rate cell's own requests, or why none.
pub fn rate_interval(c: &RateCell, column: &str, slo: Option<&RateSlo>) -> Result<Interval, String> {
    let Some((w0, w1)) = window(c) else { return Err("no window recorded".into()) };
    let in_window: Vec<_> = c.requests.iter().filter(|q| q.start_ms > w0 && q.start_ms <= w1).collect();
    let per_request = |f: fn(&crate::model::RequestSample) -> Option<f64>| -> Vec<f64> {
        in_window.iter().filter_map(|q| f(q)).collect()
    };
    let percentile = |values: Vec<f64>| noise::block_percentile(&values, 50.0, block_length(c)).map_err(|e| e.reason);
    // Completions per one-second bucket of the window (a request counts where it finished).
    let per_second = |keep: &dyn Fn(&crate::model::RequestSample) -> bool| -> Vec<f64> {
        let n = ((w1 - w0) / 1000.0).floor() as usize;
        let mut buckets = vec![0.0; n];
        for q in c.requests.iter().filter(|q| keep(q)) {
            let Some(e) = q.e2e_ms else { continue };
            let done = q.start_ms + e;
            if done > w0 && done <= w1 {
                let i = (((done - w0) / 1000.0).ceil() as usize).saturating_sub(1).min(n.saturating_sub(1));
                if let Some(b) = buckets.get_mut(i) {
                    *b += 1.0;
                }
            }
        }
        buckets
    };
    match column {
        "ttft_ms_p50" => percentile(per_request(|q| q.ttft_ms)),
        "tpot_ms_p50" => percentile(per_request(|q| q.tpot_ms)),
        "e2e_ms_p50" => percentile(per_request(|q| q.e2e_ms)),
        "achieved_rps" => noise::series_mean(&per_second(&|_| true)).map_err(|e| e.reason),
        "goodput_rps" => {
            let Some(slo) = slo else { return Err("no SLO".into()) };
            let ok = |limit: Option<f64>, v: Option<f64>| limit.is_none_or(|l| v.is_some_and(|v| v <= l));
            noise::series_mean(&per_second(&|q| ok(slo.ttft_ms, q.ttft_ms) && ok(slo.tpot_ms, q.tpot_ms)))
                .map_err(|e| e.reason)
        }
        other => Err(format!("{other} has no interval")),
    }
}

/// The interval of B − A on each noise figure both cells have; "not enough data" with why
/// where a side has none.
pub(super) fn attach_rate_intervals(deltas: &mut [Delta], ca: &RateCell, cb: &RateCell, slo: Option<&RateSlo>) {
    for d in deltas.iter_mut().filter(|d| RATE_NOISE_FIGURES.contains(&d.column.as_str())) {
        let (Some(va), Some(vb)) = (d.a, d.b) else { continue };
        if d.not_comparable.is_some() {
            continue;
        }
        match (rate_interval(ca, &d.column, slo), rate_interval(cb, &d.column, slo)) {
            (Ok(ia), Ok(ib)) => {
                let x = noise::difference(&Interval { estimate: va, ..ia }, &Interval { estimate: vb, ..ib });
                d.interval = Some(DeltaInterval { low: x.low, high: x.high, p_value: x.p_value, discovery: false });
            }
            (ra, rb) => {
                let why: Vec<String> = [("A", ra.err()), ("B", rb.err())]
                    .into_iter()
                    .filter_map(|(side, e)| e.map(|e| format!("{side}: {e}")))
                    .collect();
                d.verdict = Some(Verdict::NotEnoughData);
                d.noise_note = Some(why.join("; "));
            }
        }
    }
}

/// Benjamini–Hochberg over the rate cells of each noise figure, then better / worse for a
/// discovery whose interval leaves out 0 and whose change is at least `rule.min_change`.
fn rate_noise_verdicts(rows: &mut [RateRowDiff], rule: &NoiseRule) {
    let mut sets: Vec<&mut Vec<Delta>> = rows.iter_mut().map(|r| &mut r.deltas).collect();
    noise_verdicts(&mut sets, rule);
}

/// Benjamini–Hochberg over the rows (each its deltas: rate cells, trace rows) of each noise
/// figure, then better / worse for a discovery whose interval leaves out 0 and whose change is
/// at least `rule.min_change`; "within noise" otherwise.
pub(super) fn noise_verdicts(rows: &mut [&mut Vec<Delta>], rule: &NoiseRule) {
    for (column, dir, _) in RATE_FIGURES.iter().filter(|f| RATE_NOISE_FIGURES.contains(&f.0)) {
        let at: Vec<(usize, usize)> = rows
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.iter().position(|d| d.column == *column && d.interval.is_some()).map(|j| (i, j)))
            .collect();
        let p: Vec<f64> = at.iter().map(|&(i, j)| rows[i][j].interval.map_or(1.0, |x| x.p_value)).collect();
        let kept = noise::benjamini_hochberg(&p, rule.false_discovery_rate);
        for (&(i, j), keep) in at.iter().zip(kept) {
            let d = &mut rows[i][j];
            let Some(iv) = d.interval.as_mut() else { continue };
            iv.discovery = keep;
            let excludes_zero = iv.low > 0.0 || iv.high < 0.0;
            let big_enough = d.rel.is_none_or(|r| r.abs() >= rule.min_change);
            let up = d.abs.is_some_and(|x| x > 0.0);
            d.verdict = Some(match (keep && excludes_zero && big_enough, dir) {
                (true, Some(higher_is_better)) if up == *higher_is_better => Verdict::Better,
                (true, Some(_)) => Verdict::Worse,
                (true, None) => Verdict::Changed,
                (false, _) => Verdict::WithinNoise,
            });
        }
    }
}

/// `rate_at_slo` of both runs per context, with a verdict that respects the search's bracket.
fn slo_rates(a: &Results, b: &Results, slo_differs: bool) -> Vec<SloRateChange> {
    let mut contexts: Vec<ContextSize> = Vec::new();
    for f in a.rate_at_slo.iter().chain(&b.rate_at_slo) {
        if !contexts.iter().any(|c| c.tokens == f.context.tokens) {
            contexts.push(f.context.clone());
        }
    }
    contexts.sort_by_key(|c| c.tokens);
    contexts
        .into_iter()
        .map(|context| {
            let fa = a.rate_at_slo.iter().find(|f| f.context.tokens == context.tokens);
            let fb = b.rate_at_slo.iter().find(|f| f.context.tokens == context.tokens);
            let verdict = match (fa, fb) {
                (Some(x), Some(y)) if !slo_differs => Some(bracket_verdict(
                    (x.rate_rps.unwrap_or(0.0), x.failed_at_rps),
                    (y.rate_rps.unwrap_or(0.0), y.failed_at_rps),
                )),
                _ => None,
            };
            SloRateChange {
                in_a: fa.is_some(),
                in_b: fb.is_some(),
                a: fa.and_then(|f| f.rate_rps),
                b: fb.and_then(|f| f.rate_rps),
                a_failed_at: fa.and_then(|f| f.failed_at_rps),
                b_failed_at: fb.and_then(|f| f.failed_at_rps),
                context,
                verdict,
            }
        })
        .collect()
}

/// Each search's answer is a bracket [met, failed at): B is better when it met a rate A
/// failed at (or above), worse when it failed at a rate A met (or below), the same otherwise.
fn bracket_verdict((met_a, failed_a): (f64, Option<f64>), (met_b, failed_b): (f64, Option<f64>)) -> Verdict {
    if failed_a.is_some_and(|f| met_b >= f) {
        Verdict::Better
    } else if failed_b.is_some_and(|f| f <= met_a) {
        Verdict::Worse
    } else {
        Verdict::Same
    }
}

#[cfg(test)]
mod tests;
