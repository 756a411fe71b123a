//! A replayed trace's timeline (docs/METHODOLOGY.md, "Trace replay", the timeline): requests
//! offered and completed so far, requests in flight, and each request's TTFT, over the replay's
//! time. Pure: the page draws it (`viewer/src/model/trace_report.rs`).
//!
//! Everything comes from the trace row's own requests (`cell.requests`, client clock): a
//! request is **offered** at its scheduled instant, **completed** at its scheduled instant plus
//! its E2E latency (its last token), and **in flight** between the two. Time runs in seconds
//! from the replay's zero (the window's opening, `cell.window_start_ms`), to the drain's end.
//!
//! The counts are kept per bucket of [`BUCKET_LADDER_S`] seconds — the smallest width that
//! gives at most [`MAX_BUCKETS`] buckets — so a trace of 20,000 requests draws as lightly as
//! one of 100: offered and completed as the count at each bucket's end, in flight as its
//! time-weighted mean over the bucket. TTFT stays one point per request.

use crate::model::{RequestSample, TraceRow};

/// The most buckets a timeline has.
pub const MAX_BUCKETS: usize = 120;

/// The bucket widths a timeline chooses from, s (the smallest that gives at most
/// [`MAX_BUCKETS`] buckets).
pub const BUCKET_LADDER_S: [f64; 16] =
    [0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0];

/// Why a trace row has no timeline: it was not measured (not run, or failed before its replay).
pub const NOT_MEASURED: &str = "no timeline: this trace was not replayed (the file records no window for it)";

/// Why a trace row has no timeline: its requests are not in the file.
pub const NO_REQUESTS: &str = "no timeline: the file records no request of this replay";

/// One request's TTFT at its scheduled instant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TtftPoint {
    /// Its scheduled instant, s from the replay's zero.
    pub at_s: f64,
    /// Its TTFT from that instant, ms (client clock).
    pub ttft_ms: f64,
    /// Its line in the trace file, when the row has it.
    pub line: Option<u64>,
    /// The request failed (after its first token).
    pub failed: bool,
}

/// A trace row's timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    /// The replay's zero, ms from the run start (client clock).
    pub zero_ms: f64,
    /// The window's end (the slice's end), s from the zero.
    pub window_end_s: f64,
    /// The timeline's end, s from the zero: the drain's end, or the last request's end when
    /// that is later.
    pub end_s: f64,
    /// The buckets' width, s.
    pub bucket_s: f64,
    /// Requests scheduled by each instant: at 0, then at each bucket's end (s, count).
    pub offered: Vec<(f64, u64)>,
    /// Requests completed by each instant (their last token), at the same instants as
    /// `offered`.
    pub completed: Vec<(f64, u64)>,
    /// Requests in flight per bucket: (its middle, s; its time-weighted mean).
    pub in_flight: Vec<(f64, f64)>,
    /// Every request with a first token, in schedule order.
    pub ttft: Vec<TtftPoint>,
    /// Requests that did not finish and did not fail (cancelled when the drain ended, or held
    /// back until then): counted in flight until the drain's end.
    pub cut_at_drain: u64,
    /// Requests that failed without an end the file records: left out of in flight.
    pub failed_no_end: u64,
    /// Requests without a first token (not in the TTFT points).
    pub no_first_token: u64,
}

impl Timeline {
    /// The notes a reader needs beside the charts: what is left out or cut, in words (empty
    /// when nothing is).
    pub fn notes(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.cut_at_drain > 0 {
            out.push(format!(
                "{} request(s) had not finished when the drain ended: in flight until then, never completed",
                self.cut_at_drain
            ));
        }
        if self.failed_no_end > 0 {
            out.push(format!(
                "{} request(s) failed at an instant the file does not record: left out of in flight",
                self.failed_no_end
            ));
        }
        if self.no_first_token > 0 {
            out.push(format!("{} request(s) had no first token: no TTFT point", self.no_first_token));
        }
        out
    }
}

/// The smallest width of [`BUCKET_LADDER_S`] that cuts `span_s` into at most [`MAX_BUCKETS`]
/// buckets (the largest when none does).
pub fn bucket_width(span_s: f64) -> f64 {
    BUCKET_LADDER_S
        .iter()
        .copied()
        .find(|b| buckets(span_s, *b) <= MAX_BUCKETS)
        .unwrap_or(BUCKET_LADDER_S[BUCKET_LADDER_S.len() - 1])
}

/// Buckets of `width` that cover `span_s` (a span of 5 s is 50 buckets of 0.1 s, not 51 by
/// the rounding of 5 ÷ 0.1).
fn buckets(span_s: f64, width: f64) -> usize {
    ((span_s / width - 1e-9).ceil().max(1.0)) as usize
}

/// When a request ended, s from the zero: its last token; the drain's end when it neither
/// finished nor failed; `None` when it failed (the file keeps no instant of the failure).
fn ended_s(q: &RequestSample, zero_ms: f64, drain_end_s: f64) -> Option<f64> {
    match q.e2e_ms.filter(|e| e.is_finite()) {
        Some(e) => Some((q.start_ms + e - zero_ms) / 1000.0),
        None if q.error.is_none() => Some(drain_end_s),
        None => None,
    }
}

/// The timeline of a trace row.
///
/// # Errors
/// [`NOT_MEASURED`] when the row has no window (not run, or failed before its replay);
/// [`NO_REQUESTS`] when the file records none of its requests.
pub fn timeline(row: &TraceRow) -> Result<Timeline, &'static str> {
    let c = &row.cell;
    let (Some(zero_ms), Some(window_s)) = (c.window_start_ms, c.window_s) else { return Err(NOT_MEASURED) };
    if c.requests.is_empty() {
        return Err(NO_REQUESTS);
    }
    let window_end_s = window_s;
    let drain_end_s = window_s + c.drain_s.unwrap_or(0.0);
    let at = |q: &RequestSample| (q.start_ms - zero_ms) / 1000.0;
    let ends: Vec<Option<f64>> = c.requests.iter().map(|q| ended_s(q, zero_ms, drain_end_s)).collect();
    let last = c
        .requests
        .iter()
        .map(at)
        .chain(ends.iter().flatten().copied())
        .filter(|t| t.is_finite())
        .fold(drain_end_s, f64::max);
    let end_s = last.max(f64::MIN_POSITIVE);
    let bucket_s = bucket_width(end_s);
    let n = buckets(end_s, bucket_s).min(MAX_BUCKETS);
    let instants: Vec<f64> = (0..=n).map(|k| k as f64 * bucket_s).collect();
    let mut scheduled: Vec<f64> = c.requests.iter().map(at).collect();
    scheduled.sort_by(f64::total_cmp);
    let mut done: Vec<f64> =
        c.requests.iter().zip(&ends).filter(|(q, _)| q.e2e_ms.is_some()).filter_map(|(_, e)| *e).collect();
    done.sort_by(f64::total_cmp);
    let by = |sorted: &[f64], t: f64| sorted.partition_point(|x| *x <= t) as u64;
    let offered = instants.iter().map(|&t| (t, by(&scheduled, t))).collect();
    let completed = instants.iter().map(|&t| (t, by(&done, t))).collect();
    // In flight: each request's span [scheduled, ended) spread over the buckets it covers.
    let mut area = vec![0.0; n];
    for (q, end) in c.requests.iter().zip(&ends) {
        let (Some(b), a) = (*end, at(q)) else { continue };
        if b <= a {
            continue;
        }
        // One bucket of slack each side against rounding: a bucket the span misses adds 0.
        let first = ((a / bucket_s).floor().max(1.0) as usize - 1).min(n - 1);
        let last = ((b / bucket_s).ceil().max(0.0) as usize).min(n - 1);
        for (k, cell) in area.iter_mut().enumerate().take(last + 1).skip(first) {
            let (lo, hi) = (k as f64 * bucket_s, (k + 1) as f64 * bucket_s);
            *cell += (b.min(hi) - a.max(lo)).max(0.0);
        }
    }
    let in_flight = area.iter().enumerate().map(|(k, s)| ((k as f64 + 0.5) * bucket_s, s / bucket_s)).collect();
    let lines = (row.requests.len() == c.requests.len()).then_some(&row.requests);
    let ttft = c
        .requests
        .iter()
        .enumerate()
        .filter_map(|(i, q)| {
            let ttft_ms = q.ttft_ms.filter(|t| t.is_finite())?;
            let line = lines.and_then(|l| l.get(i)).map(|r| r.line);
            Some(TtftPoint { at_s: at(q), ttft_ms, line, failed: q.error.is_some() })
        })
        .collect::<Vec<_>>();
    let unfinished = |q: &&RequestSample| q.e2e_ms.is_none();
    Ok(Timeline {
        zero_ms,
        window_end_s,
        end_s,
        bucket_s,
        offered,
        completed,
        in_flight,
        no_first_token: (c.requests.len() - ttft.len()) as u64,
        ttft,
        cut_at_drain: c.requests.iter().filter(unfinished).filter(|q| q.error.is_none()).count() as u64,
        failed_no_end: c.requests.iter().filter(unfinished).filter(|q| q.error.is_some()).count() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ContextSize, TraceRequest};

    /// A request scheduled at `at_ms` (run clock) with a TTFT and, when it finished, an E2E.
    fn q(at_ms: f64, ttft: Option<f64>, e2e: Option<f64>, error: bool) -> RequestSample {
        let mut s = RequestSample::at(at_ms);
        s.ttft_ms = ttft;
        s.e2e_ms = e2e;
        s.error = error.then(|| "HTTP 500".into());
        s
    }

    fn row(requests: Vec<RequestSample>, window: Option<(f64, f64, f64)>) -> TraceRow {
        let planned = (0..requests.len())
            .map(|i| TraceRequest {
                line: 10 + i as u64,
                timestamp_ms: 0.0,
                scheduled_ms: None,
                input_length: 100,
                output_length: 8,
                hash_ids: vec![],
                response_id: None,
                prompt_tokens: None,
                output_tokens: None,
            })
            .collect();
        let mut r = TraceRow::new(ContextSize { label: "1K".into(), tokens: 1024 }, 1.0, None, planned);
        if let Some((w0, w, d)) = window {
            (r.cell.window_start_ms, r.cell.window_s, r.cell.drain_s) = (Some(w0), Some(w), Some(d));
        }
        r.cell.requests = requests;
        r
    }

    #[test]
    fn the_bucket_width_is_the_smallest_of_the_ladder_within_the_limit() {
        assert_eq!(bucket_width(5.0), 0.1);
        assert_eq!(bucket_width(12.0), 0.1);
        assert_eq!(bucket_width(12.1), 0.2);
        assert_eq!(bucket_width(20.0), 0.2);
        assert_eq!(bucket_width(3600.0), 30.0);
        assert_eq!(bucket_width(1e9), 3600.0);
    }

    #[test]
    fn offered_completed_and_in_flight_follow_the_requests_exactly() {
        // Zero at 1,000 ms; window 4 s, drain 1 s: 5 s → 0.1 s buckets, 50 of them.
        let r = row(
            vec![
                q(1000.0, Some(100.0), Some(1000.0), false), // 0 s → 1 s
                q(1500.0, Some(250.0), Some(2000.0), false), // 0.5 s → 2.5 s
                q(3000.0, Some(300.0), None, true),          // 2 s, failed: no end
                q(4000.0, None, None, false),                // 3 s, cut at the drain's end (5 s)
            ],
            Some((1000.0, 4.0, 1.0)),
        );
        let t = timeline(&r).unwrap();
        assert_eq!((t.zero_ms, t.window_end_s, t.end_s, t.bucket_s), (1000.0, 4.0, 5.0, 0.1));
        assert_eq!(t.offered.len(), 51);
        let count = |s: &[(f64, u64)], at: f64| s.iter().find(|(x, _)| (x - at).abs() < 1e-9).map(|p| p.1);
        assert_eq!(count(&t.offered, 0.0), Some(1), "the request at the zero is offered at 0");
        assert_eq!(count(&t.offered, 0.5), Some(2));
        assert_eq!(count(&t.offered, 2.9), Some(3));
        assert_eq!(t.offered.last().unwrap().1, 4);
        assert_eq!(count(&t.completed, 0.9), Some(0));
        assert_eq!(count(&t.completed, 1.0), Some(1), "done at its last token");
        assert_eq!(count(&t.completed, 2.5), Some(2));
        assert_eq!(t.completed.last().unwrap().1, 2, "the failed and the cut request never complete");
        // In flight: 1 in [0, 0.5), 2 in [0.5, 1), 1 in [1, 2.5), 0 in [2.5, 3), 1 in [3, 5).
        let level = |mid: f64| t.in_flight.iter().find(|(x, _)| (x - mid).abs() < 1e-9).unwrap().1;
        for (mid, want) in [(0.05, 1.0), (0.75, 2.0), (1.45, 1.0), (2.75, 0.0), (4.95, 1.0)] {
            assert!((level(mid) - want).abs() < 1e-9, "at {mid}: {} ≠ {want}", level(mid));
        }
        // The area under it is the sum of the spans: 1 + 2 + 2 s.
        let area: f64 = t.in_flight.iter().map(|(_, v)| v * t.bucket_s).sum();
        assert!((area - 5.0).abs() < 1e-9, "{area}");
        let ttft: Vec<(f64, f64, Option<u64>, bool)> =
            t.ttft.iter().map(|p| (p.at_s, p.ttft_ms, p.line, p.failed)).collect();
        assert_eq!(
            ttft,
            vec![(0.0, 100.0, Some(10), false), (0.5, 250.0, Some(11), false), (2.0, 300.0, Some(12), true)]
        );
        assert_eq!((t.cut_at_drain, t.failed_no_end, t.no_first_token), (1, 1, 1));
        assert_eq!(t.notes().len(), 3);
    }

    #[test]
    fn a_bucket_covers_part_of_a_span_in_proportion() {
        // One request from 0.25 s to 0.35 s: 0.05 s in bucket 2, 0.05 s in bucket 3 (of 0.1 s).
        let r = row(vec![q(250.0, Some(10.0), Some(100.0), false)], Some((0.0, 0.5, 0.0)));
        let t = timeline(&r).unwrap();
        let v: Vec<f64> = t.in_flight.iter().map(|p| (p.1 * 1000.0).round() / 1000.0).collect();
        assert_eq!(v, vec![0.0, 0.0, 0.5, 0.5, 0.0]);
        assert!(t.notes().is_empty());
    }

    #[test]
    fn a_row_without_window_or_requests_says_why() {
        assert_eq!(timeline(&row(vec![], None)), Err(NOT_MEASURED));
        assert_eq!(timeline(&row(vec![], Some((0.0, 1.0, 0.0)))), Err(NO_REQUESTS));
    }

    #[test]
    fn a_long_trace_keeps_to_the_bucket_limit() {
        let requests = (0..5000).map(|i| q(f64::from(i) * 720.0, Some(50.0), Some(400.0), false)).collect();
        let t = timeline(&row(requests, Some((0.0, 3600.0, 30.0)))).unwrap();
        assert_eq!(t.bucket_s, 60.0);
        assert!(t.in_flight.len() <= MAX_BUCKETS && t.offered.len() == t.in_flight.len() + 1);
        assert_eq!(t.offered.last().unwrap().1, 5000);
        assert_eq!(t.ttft.len(), 5000, "one TTFT point per request");
        // Each request is 0.4 s in flight: the mean over the timeline is 5,000 × 0.4 ÷ its length.
        let area: f64 = t.in_flight.iter().map(|(_, v)| v * t.bucket_s).sum();
        assert!((area - 2000.0).abs() < 1e-6, "{area}");
    }
}
