//! What the diff view shows of the replayed traces, as plain data: which trace each run
//! replayed, whether the two replays compare (the same trace bytes, slice and speed) and why
//! not, and one line per trace row with the delta of each figure ([`TRACE_COLUMNS`]) as the
//! rate table writes a cell ([`crate::model::rate_diff::delta_cell`]). Pure functions of a
//! [`TraceDiff`] (`speedmatrix_schema::diff::traces`, the same as `speedmatrix diff`);
//! `view::diff_page` draws them.

use crate::model::rate_diff::{delta_cell, RateDeltaCell};
use crate::model::run_diff::CellKind;
use speedmatrix_schema::diff::rates::figure_label;
use speedmatrix_schema::diff::traces::{TraceDiff, TraceRef};
use speedmatrix_schema::CellStatus;

/// The figures of a trace row the diff view's trace table shows, in column order (those
/// `speedmatrix diff` shows).
pub const TRACE_COLUMNS: [&str; 8] = [
    "achieved_rps",
    "ttft_ms_p50",
    "ttft_ms_p90",
    "tpot_ms_p50",
    "tpot_ms_p90",
    "e2e_ms_p50",
    "e2e_ms_p90",
    "send_lag_ms_p99",
];

/// One trace row of either run in the diff view.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceDiffLine {
    /// Its place among the runs' trace rows, from 0.
    pub index: usize,
    /// What the row is: a status change, one run only, or the statuses' verdicts.
    pub kind: CellKind,
    /// "Valid", "Valid → Saturated", "only in A".
    pub status: String,
    /// Requests replayed, "49 → 49".
    pub requests: String,
    /// One per [`TRACE_COLUMNS`].
    pub cells: Vec<RateDeltaCell>,
}

fn words(s: Option<CellStatus>) -> &'static str {
    s.map(CellStatus::label).unwrap_or("absent")
}

/// Every trace row of either run, each figure as the rate table writes a cell: with its change
/// and verdict when the replays compare, A → B only (and why on hover) when they do not.
pub fn trace_lines(d: &TraceDiff, threshold: f64) -> Vec<TraceDiffLine> {
    let count = |n: Option<usize>| n.map_or_else(|| "—".to_string(), |n| n.to_string());
    d.rows
        .iter()
        .map(|r| {
            let (kind, status) = match (r.status_a, r.status_b) {
                (Some(_), None) => (CellKind::OnlyA, "only in A".to_string()),
                (None, Some(_)) => (CellKind::OnlyB, "only in B".to_string()),
                _ if r.status_changed() => {
                    (CellKind::StatusChange, format!("{} → {}", words(r.status_a), words(r.status_b)))
                }
                (a, _) => (CellKind::NoFigure, words(a).to_string()),
            };
            let compared = d.comparable() && r.matched() && !r.status_changed();
            TraceDiffLine {
                index: r.index,
                kind,
                status,
                requests: format!("{} → {}", count(r.requests_a), count(r.requests_b)),
                cells: TRACE_COLUMNS.iter().map(|c| delta_cell(r.delta(c), compared, c, threshold)).collect(),
            }
        })
        .collect()
}

/// The headers of the trace table: trace, requests, status, then one per [`TRACE_COLUMNS`].
pub fn headers() -> Vec<String> {
    ["Trace", "Requests", "Status"]
        .into_iter()
        .map(String::from)
        .chain(TRACE_COLUMNS.iter().map(|c| figure_label(c)))
        .collect()
}

/// What the section says above its table: which trace each run replayed, and whether the rows
/// are compared — or why not, each difference in words — and the notes.
pub fn trace_notes(d: &TraceDiff) -> Vec<String> {
    let which = |t: &Option<TraceRef>| t.as_ref().map_or("no trace recorded".into(), TraceRef::describe);
    let mut out = vec![format!("A replayed {}", which(&d.a)), format!("B replayed {}", which(&d.b))];
    if !d.not_comparable.is_empty() {
        out.push(format!(
            "Not comparable: {}. Each run's figures are side by side, without a change or verdict",
            d.not_comparable.join("; ")
        ));
    }
    out.extend(d.notes.iter().map(|n| format!("Note: {n}")));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedmatrix_schema::diff::{diff, Verdict};
    use speedmatrix_schema::{load_results, Results, TraceRow};
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// The rate fixture with its saturated 8K cell (84 requests) as the row of a replayed trace.
    fn replay(sha: &str, from_s: Option<f64>) -> Results {
        let mut r = load_results(include_bytes!("../../../tests/fixtures/rates-twin.json")).expect("valid fixture");
        let cell = r.rates.iter().find(|c| c.context.tokens == 8192 && c.rate_rps == 8.0).unwrap().clone();
        let mut row = TraceRow::new(cell.context.clone(), cell.rate_rps, None, vec![]);
        row.cell = cell;
        r.rates.clear();
        r.traces = vec![row];
        r.config.trace = Some(speedmatrix_schema::TraceSource {
            format: "mooncake".into(),
            file: "t.jsonl".into(),
            sha256: sha.into(),
            lines: 100,
            requests: 84,
            from_s,
            to_s: None,
            speed: 1.0,
            span_s: 5.0,
            sorted: false,
        });
        r
    }

    #[test]
    fn the_same_replay_is_compared_and_another_slice_says_why_not() {
        let a = replay("aa", None);
        let mut b = a.clone();
        let t = b.traces[0].cell.tpot_ms.as_mut().unwrap();
        t.p90 = t.p90.map(|v| v * 2.0);
        let x = diff(&a, &b, 0.05);
        let lines = trace_lines(&x.traces, x.threshold);
        assert_eq!(lines.len(), 1);
        assert_eq!(headers().len(), 3 + TRACE_COLUMNS.len());
        let l = &lines[0];
        assert_eq!((l.status.as_str(), l.requests.as_str()), ("Saturated", "0 → 0"));
        let tpot90 = l.cells.iter().find(|c| c.column == "tpot_ms_p90").unwrap();
        assert_eq!(tpot90.kind, CellKind::Verdict(Verdict::Worse));
        assert_eq!(tpot90.main, "+100.0 %");
        assert_eq!(trace_notes(&x.traces).len(), 2, "which trace each replayed, nothing else");

        let c = replay("aa", Some(2.0));
        let y = diff(&a, &c, 0.05);
        let lines = trace_lines(&y.traces, y.threshold);
        let ttft = lines[0].cells.iter().find(|c| c.column == "ttft_ms_p50").unwrap();
        assert_eq!((ttft.kind, ttft.main.as_str()), (CellKind::NoFigure, "—"));
        assert!(ttft.detail.as_deref().unwrap().contains(" → "));
        assert!(ttft.note.as_deref().unwrap().starts_with("different slices"), "{:?}", ttft.note);
        let notes = trace_notes(&y.traces);
        assert_eq!(notes[2], "Not comparable: different slices: A replayed the whole trace and B 2 s to its end. Each run's figures are side by side, without a change or verdict");
    }
}
