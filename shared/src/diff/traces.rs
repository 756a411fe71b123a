//! The replayed traces of two runs compared (docs/METHODOLOGY.md, "Comparing runs", traces):
//! part of [`super::RunDiff`], so `speedmatrix diff` and `diff --format json` print it.
//!
//! - Two runs compare their trace rows only when they replayed **the same trace the same
//!   way**: the same file bytes (SHA-256), the same slice (`--trace-from` / `--trace-to`) and
//!   the same speed. Otherwise every row is listed with both sides' figures and no change or
//!   verdict, and [`TraceDiff::not_comparable`] says why (each difference in words). The same
//!   bytes under another file name compare, with a note.
//! - Rows are matched in order (a run replays one trace: one row each).
//! - The figures are a rate cell's ([`super::rates::RATE_FIGURES`]), judged as rate cells'
//!   are: TTFT, TPOT and E2E p50 by a block bootstrap over the replay's requests in schedule
//!   order, achieved rate and goodput by batch means over its per-second completions
//!   ([`super::rates::RATE_NOISE_FIGURES`]), Benjamini–Hochberg over the trace rows of each
//!   figure; the others by the threshold.

use super::rates::{attach_rate_intervals, noise_verdicts, RATE_FIGURES};
use super::{compare_figure, Delta, NoiseRule};
use crate::model::{CellStatus, Results, TraceRow, TraceSource};
use crate::noise;
use serde::Serialize;

/// Which trace a run replayed, as the diff names it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceRef {
    /// The file as `--trace` named it.
    pub file: String,
    /// SHA-256 of its bytes, hex.
    pub sha256: String,
    /// The slice in words: "the whole trace", "10 s to 20 s", "10 s to its end".
    pub slice: String,
    /// `--trace-speed`.
    pub speed: f64,
    /// Requests in the slice.
    pub requests: u64,
}

impl TraceRef {
    fn of(s: &TraceSource) -> TraceRef {
        TraceRef {
            file: s.file.clone(),
            sha256: s.sha256.clone(),
            slice: slice_text(s.from_s, s.to_s),
            speed: s.speed,
            requests: s.requests,
        }
    }

    /// "mooncake-100.jsonl (sha256 3f2a9c1d…), the whole trace at 1×".
    pub fn describe(&self) -> String {
        let short: String = self.sha256.chars().take(12).collect();
        format!("{} (sha256 {short}…), {} at {}×", self.file, self.slice, speed_text(self.speed))
    }
}

/// A slice of trace time in words.
pub fn slice_text(from_s: Option<f64>, to_s: Option<f64>) -> String {
    match (from_s, to_s) {
        (None, None) => "the whole trace".to_string(),
        (f, t) => format!("{} s to {}", f.unwrap_or(0.0), t.map_or("its end".into(), |t| format!("{t} s"))),
    }
}

/// A replay speed: "1", "2", "0.5".
fn speed_text(v: f64) -> String {
    let text = format!("{v:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A trace row of either run, matched with its partner when both have one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceRowDiff {
    /// Its place among the runs' trace rows, from 0.
    pub index: usize,
    /// A's status; `None` when A has no such row.
    pub status_a: Option<CellStatus>,
    /// B's status; `None` when B has no such row.
    pub status_b: Option<CellStatus>,
    /// Requests of A's replay.
    pub requests_a: Option<usize>,
    /// Requests of B's replay.
    pub requests_b: Option<usize>,
    /// Every figure of [`RATE_FIGURES`] either side has, in that order (no change or verdict
    /// when the traces cannot be compared: each says why in `not_comparable`).
    pub deltas: Vec<Delta>,
}

impl TraceRowDiff {
    /// Whether both runs have this row.
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

/// The replayed traces of two runs compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceDiff {
    /// The trace A replayed; `None` without one.
    pub a: Option<TraceRef>,
    /// The trace B replayed.
    pub b: Option<TraceRef>,
    /// Why the rows cannot be compared (different traces, slices or speeds), each in words;
    /// empty when they can.
    pub not_comparable: Vec<String>,
    /// What differs without stopping the comparison (the same bytes under another name).
    pub notes: Vec<String>,
    /// How the figures with an interval are judged; `None` when the rows cannot be compared
    /// or a side has no request samples.
    pub noise: Option<NoiseRule>,
    /// Every trace row of either run, in order.
    pub rows: Vec<TraceRowDiff>,
}

impl TraceDiff {
    /// Whether neither run replayed a trace.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty() && self.a.is_none() && self.b.is_none()
    }

    /// Whether the two runs' trace rows are compared (both replayed the same trace the same
    /// way).
    pub fn comparable(&self) -> bool {
        self.a.is_some() && self.b.is_some() && self.not_comparable.is_empty()
    }
}

/// Why two replays cannot be compared, each difference in words; empty when they can.
pub fn differences(a: &TraceSource, b: &TraceSource) -> Vec<String> {
    let (ra, rb) = (TraceRef::of(a), TraceRef::of(b));
    let mut out = Vec::new();
    if a.sha256 != b.sha256 || a.format != b.format {
        out.push(format!("different traces: A replayed {} and B {} (their SHA-256 differ)", ra.file, rb.file));
    }
    if a.from_s != b.from_s || a.to_s != b.to_s {
        out.push(format!("different slices: A replayed {} and B {}", ra.slice, rb.slice));
    }
    if a.speed != b.speed {
        out.push(format!(
            "different speeds: A replayed at {}× and B at {}× (another arrival rate)",
            speed_text(a.speed),
            speed_text(b.speed)
        ));
    }
    out
}

/// Compare the trace rows of `a` (baseline) and `b` (candidate). `threshold` as in
/// [`super::diff_with`].
pub fn trace_diff(a: &Results, b: &Results, threshold: Option<f64>) -> TraceDiff {
    let (sa, sb) = (a.config.trace.as_ref(), b.config.trace.as_ref());
    let (not_comparable, notes) = match (sa, sb) {
        (Some(x), Some(y)) => {
            let why = differences(x, y);
            let renamed = why.is_empty() && x.file != y.file;
            let note = renamed.then(|| format!("the same trace under another name: A {} and B {}", x.file, y.file));
            (why, note.into_iter().collect())
        }
        (Some(_), None) if !b.traces.is_empty() => (vec!["B does not record which trace it replayed".into()], vec![]),
        (None, Some(_)) if !a.traces.is_empty() => (vec!["A does not record which trace it replayed".into()], vec![]),
        (None, None) if !a.traces.is_empty() && !b.traces.is_empty() => {
            (vec!["neither run records which trace it replayed".into()], vec![])
        }
        _ => (vec![], vec![]),
    };
    let comparable = not_comparable.is_empty();
    let has_samples = |r: &Results| r.traces.iter().any(|t| !t.cell.requests.is_empty());
    let noise_rule = (comparable && has_samples(a) && has_samples(b)).then(|| NoiseRule {
        level: noise::LEVEL,
        false_discovery_rate: noise::FALSE_DISCOVERY_RATE,
        control: "benjamini_hochberg",
        min_change: threshold.unwrap_or(0.0),
    });
    let fixed = threshold.unwrap_or(super::DEFAULT_THRESHOLD);
    let why = not_comparable.join("; ");
    let slo = a.config.rate_slo.filter(|_| a.config.rate_slo == b.config.rate_slo);
    let n = a.traces.len().max(b.traces.len());
    let mut rows: Vec<TraceRowDiff> = (0..n)
        .map(|i| {
            let (ta, tb): (Option<&TraceRow>, Option<&TraceRow>) = (a.traces.get(i), b.traces.get(i));
            let (ca, cb) = (ta.map(|t| &t.cell), tb.map(|t| &t.cell));
            let mut deltas: Vec<Delta> = RATE_FIGURES
                .iter()
                .filter_map(|(id, dir, f)| {
                    let (va, vb) = (ca.and_then(f), cb.and_then(f));
                    (va.is_some() || vb.is_some()).then(|| compare_figure(id.to_string(), *dir, va, vb, fixed))
                })
                .collect();
            let slo_differs = a.config.rate_slo != b.config.rate_slo;
            for d in deltas.iter_mut() {
                let reason = if !comparable {
                    Some(why.clone())
                } else if slo_differs && d.column == "goodput_rps" {
                    Some("the runs' SLOs differ".to_string())
                } else {
                    None
                };
                if let Some(r) = reason.filter(|_| d.a.is_some() && d.b.is_some()) {
                    (d.abs, d.rel, d.verdict) = (None, None, None);
                    d.not_comparable = Some(r);
                }
            }
            if let (Some(_), Some(ca), Some(cb)) = (&noise_rule, ca, cb) {
                attach_rate_intervals(&mut deltas, ca, cb, slo.as_ref());
            }
            TraceRowDiff {
                index: i,
                status_a: ca.map(|c| c.status),
                status_b: cb.map(|c| c.status),
                requests_a: ta.map(|t| t.requests.len()),
                requests_b: tb.map(|t| t.requests.len()),
                deltas,
            }
        })
        .collect();
    if let Some(rule) = &noise_rule {
        let mut sets: Vec<&mut Vec<Delta>> = rows.iter_mut().map(|r| &mut r.deltas).collect();
        noise_verdicts(&mut sets, rule);
    }
    TraceDiff { a: sa.map(TraceRef::of), b: sb.map(TraceRef::of), not_comparable, notes, noise: noise_rule, rows }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::Verdict;

    fn source(sha: &str, from: Option<f64>, speed: f64) -> TraceSource {
        TraceSource {
            format: "mooncake".into(),
            file: "t.jsonl".into(),
            sha256: sha.into(),
            lines: 100,
            requests: 100,
            from_s: from,
            to_s: None,
            speed,
            span_s: 20.0,
            sorted: false,
        }
    }

    #[test]
    fn each_difference_of_the_replay_is_named() {
        assert!(differences(&source("aa", None, 1.0), &source("aa", None, 1.0)).is_empty());
        let why = differences(&source("aa", None, 1.0), &source("bb", Some(5.0), 2.0));
        assert_eq!(
            why,
            [
                "different traces: A replayed t.jsonl and B t.jsonl (their SHA-256 differ)",
                "different slices: A replayed the whole trace and B 5 s to its end",
                "different speeds: A replayed at 1× and B at 2× (another arrival rate)",
            ]
        );
    }

    /// A replay of 120 requests, one every 100 ms over a 12 s window, about two in flight,
    /// each TTFT `scale` × 200–249 ms; the trace row of a run that replayed `sha`.
    fn run(sha: &str, scale: f64) -> Results {
        use crate::model::{Arrival, ArrivalProcess, ContextSize, RateCell, RequestSample};
        let arrival = Arrival { process: ArrivalProcess::Trace, cv: None, seed: 0 };
        let mut c = RateCell::new(ContextSize { label: "3K".into(), tokens: 3035 }, 10.0, arrival, None);
        (c.status, c.reason) = (CellStatus::Valid, None);
        (c.window_start_ms, c.window_s, c.drain_s, c.avg_in_flight) = (Some(0.0), Some(12.0), Some(1.0), Some(2.0));
        let (mut ttft, mut e2e) = (vec![], vec![]);
        for i in 0..120u32 {
            let mut q = RequestSample::at(f64::from(i) * 100.0 + 1.0);
            let t = scale * (200.0 + f64::from((i * 37) % 50));
            (q.ttft_ms, q.e2e_ms, q.tpot_ms) = (Some(t), Some(t + 100.0), Some(5.0));
            ttft.push(t);
            e2e.push(t + 100.0);
            c.requests.push(q);
        }
        (c.ttft_ms, c.e2e_ms) = (crate::stats::distribution(&ttft), crate::stats::distribution(&e2e));
        (c.offered_rps, c.achieved_rps) = (Some(10.0), Some(10.0));
        let mut r = crate::load_results(include_bytes!("../../../tests/fixtures/rates-twin.json")).unwrap();
        r.rates.clear();
        let mut row = TraceRow::new(c.context.clone(), c.rate_rps, None, vec![]);
        row.cell = c;
        r.traces = vec![row];
        r.config.trace = Some(source(sha, None, 1.0));
        r
    }

    #[test]
    fn the_same_replay_is_compared_with_noise_verdicts() {
        let (a, b) = (run("aa", 1.0), run("aa", 1.0));
        let d = trace_diff(&a, &b, None);
        assert!(d.comparable() && d.noise.is_some() && d.notes.is_empty());
        let row = &d.rows[0];
        assert!(row.matched() && !row.status_changed());
        let ttft = row.delta("ttft_ms_p50").unwrap();
        assert_eq!(ttft.abs, Some(0.0));
        assert!(ttft.interval.is_some(), "{ttft:?}");
        assert_eq!(ttft.verdict, Some(Verdict::WithinNoise), "the same requests: no change");
        assert_eq!(row.delta("ttft_ms_p90").unwrap().verdict, Some(Verdict::Same), "by the threshold");
    }

    #[test]
    fn a_slower_replay_is_worse_and_a_renamed_file_is_noted() {
        let a = run("aa", 1.0);
        let mut b = run("aa", 1.3);
        b.config.trace.as_mut().unwrap().file = "renamed.jsonl".into();
        let d = trace_diff(&a, &b, None);
        assert!(d.comparable());
        assert_eq!(d.notes, ["the same trace under another name: A t.jsonl and B renamed.jsonl"]);
        let ttft = d.rows[0].delta("ttft_ms_p50").unwrap();
        assert_eq!(ttft.verdict, Some(Verdict::Worse), "{ttft:?}");
        assert!(ttft.interval.is_some_and(|iv| iv.low > 0.0), "{ttft:?}");
    }

    #[test]
    fn different_traces_are_listed_without_a_verdict_and_say_why() {
        let d = trace_diff(&run("aa", 1.0), &run("bb", 1.0), None);
        assert!(!d.comparable() && d.noise.is_none());
        assert_eq!(d.not_comparable.len(), 1);
        let ttft = d.rows[0].delta("ttft_ms_p50").unwrap();
        assert!(ttft.a.is_some() && ttft.b.is_some());
        assert_eq!((ttft.abs, ttft.verdict, ttft.interval), (None, None, None));
        assert!(ttft.not_comparable.as_deref().unwrap().starts_with("different traces"));
    }

    #[test]
    fn a_trace_of_one_run_only_is_listed_alone() {
        let a = run("aa", 1.0);
        let mut b = a.clone();
        b.traces.clear();
        b.config.trace = None;
        let d = trace_diff(&a, &b, None);
        assert!(!d.is_empty() && !d.comparable() && d.not_comparable.is_empty());
        assert_eq!((d.rows[0].status_a.is_some(), d.rows[0].status_b), (true, None));
        let none = trace_diff(&b, &b, None);
        assert!(none.is_empty());
    }
}
