//! What the "Trace replay" section shows, as plain data: each replayed trace of a run
//! (`results.traces`, docs/METHODOLOGY.md "Trace replay") as a line of the rate table's figures
//! ([`speedmatrix_schema::export::rate_table_line`], as `show` and the rate section build it),
//! the trace it replayed in words, and its timeline as three charts — offered and completed
//! requests so far, requests in flight, and each request's TTFT from its scheduled instant —
//! computed by [`speedmatrix_schema::trace_timeline`]. Pure functions of a [`Results`],
//! unit-tested natively and on wasm32; `view::run_report::traces` draws them.

use crate::model::chart_spec::{all_x, all_y, axis, col, ChartSpec, Point, Series, Stroke, TickStyle};
use speedmatrix_schema::registry::{self, Style};
use speedmatrix_schema::trace_timeline::{self, Timeline};
use speedmatrix_schema::{CellStatus, Results, TraceRow};

pub use speedmatrix_schema::export::{RateTableLine as TraceLine, RATE_TABLE_HEADERS as HEADERS};

/// The chart ids of the first traces of a run (canvas `chart-{id}`, PNG `…-{id}.png`): offered
/// and completed, in flight, TTFT. A run replays one trace (`--trace`); a file with more rows
/// charts the first [`CHARTED`].
const CHART_IDS: [[&str; 3]; 4] = [
    ["trace-arrivals", "trace-in-flight", "trace-ttft"],
    ["trace-2-arrivals", "trace-2-in-flight", "trace-2-ttft"],
    ["trace-3-arrivals", "trace-3-in-flight", "trace-3-ttft"],
    ["trace-4-arrivals", "trace-4-in-flight", "trace-4-ttft"],
];

/// How many trace rows of one file get their timeline drawn.
pub const CHARTED: usize = CHART_IDS.len();

/// What the section says for a trace row past [`CHARTED`].
pub const NOT_CHARTED: &str = "no timeline drawn: the page charts the first four traces of a run";

/// A trace row's heading: "mooncake-100.jsonl at 1×" (the file as `--trace` named it and the
/// speed), "Trace 2" when the file does not say which trace.
pub fn title(r: &Results, i: usize) -> String {
    match &r.config.trace {
        Some(s) => format!("{} at {}×", s.file, speed_text(s.speed)),
        None => format!("Trace {}", i + 1),
    }
}

/// The trace replayed, in words (as `show` writes it): "Mooncake format, 100 lines, sha256
/// 3f…, 100 requests of the whole trace over 19.8 s of trace time."; `None` when the file does
/// not record it.
pub fn source_text(r: &Results) -> Option<String> {
    let s = r.config.trace.as_ref()?;
    let slice = match (s.from_s, s.to_s) {
        (None, None) => "the whole trace".to_string(),
        (f, t) => format!("{} s to {}", f.unwrap_or(0.0), t.map_or("its end".into(), |t| format!("{t} s"))),
    };
    let sorted = if s.sorted { " (its timestamps were out of order: sorted)" } else { "" };
    Some(format!(
        "{} format, {} lines, sha256 {}, {} requests of {slice} over {:.1} s of trace time{sorted}.",
        capitalised(&s.format),
        registry::format_int(s.lines),
        s.sha256,
        registry::format_int(s.requests),
        s.span_s
    ))
}

/// A replay speed: "1", "2", "0.5", "1.25".
fn speed_text(v: f64) -> String {
    let text = format!("{v:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn capitalised(word: &str) -> String {
    let mut c = word.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

/// The trace row's figures as the rate table writes a rate cell's.
pub fn line(t: &TraceRow) -> TraceLine {
    speedmatrix_schema::export::rate_table_line(&t.cell)
}

/// Seconds as the timeline writes them: "2.5 s".
fn seconds(s: f64) -> String {
    format!("{} s", registry::format_number(s, Style::Fixed(1)))
}

fn point(x: f64, y: f64, status: CellStatus, label: String, y_text: String) -> Point {
    Point { x, y, status, label, x_text: seconds(x), y_text, interval: None }
}

/// A chart of the timeline: seconds from the replay's zero across.
fn spec(id: &'static str, title: &str, caption: &str, y_label: &str, series: Vec<Series>, log_y: bool) -> ChartSpec {
    ChartSpec {
        id,
        title: title.into(),
        caption: caption.into(),
        x: axis("Seconds from the replay's start".into(), all_x(&series), TickStyle::Compact, false),
        y: axis(y_label.into(), all_y(&series), TickStyle::Compact, log_y),
        series,
        frontiers: Vec::new(),
        markers: Vec::new(),
        guides: Vec::new(),
        legend: None,
    }
}

/// Offered (requests scheduled so far) and completed (requests whose last token arrived so
/// far), at each bucket's end: the gap between the lines is the backlog, their slopes the rates.
pub fn arrivals_chart(id: &'static str, t: &Timeline) -> ChartSpec {
    let count = |name: &str, colour: usize, points: &[(f64, u64)]| Series {
        name: name.into(),
        colour,
        stroke: Stroke::Solid,
        points: points
            .iter()
            .map(|&(x, n)| {
                let y = n as f64;
                point(x, y, CellStatus::Valid, format!("{name} by {}", seconds(x)), format!("{n} requests"))
            })
            .collect(),
    };
    let series = vec![count("Offered", 0, &t.offered), count("Completed", 1, &t.completed)];
    let caption = format!(
        "Requests scheduled (offered) and finished (completed, at their last token) since the replay's start, \
         counted every {}; the gap between the lines is the backlog.",
        seconds(t.bucket_s)
    );
    spec(id, "Offered and completed requests", &caption, "Requests so far", series, false)
}

/// Requests in flight (from the scheduled instant to the last token), the time-weighted mean
/// of each bucket.
pub fn in_flight_chart(id: &'static str, t: &Timeline) -> ChartSpec {
    let points = t
        .in_flight
        .iter()
        .map(|&(x, v)| {
            let text = format!("{} in flight", registry::format_number(v, Style::Fixed(1)));
            point(x, v, CellStatus::Valid, format!("around {}", seconds(x)), text)
        })
        .collect();
    let series = vec![Series { name: "In flight".into(), colour: 2, stroke: Stroke::Solid, points }];
    let caption = format!(
        "Requests between their scheduled instant and their last token, the mean of each {} (a held-back or late \
         request is in flight from its scheduled instant).",
        seconds(t.bucket_s)
    );
    spec(id, "Requests in flight", &caption, "Requests in flight", series, false)
}

/// Each request's TTFT from its scheduled instant, at that instant; a failed request is drawn
/// with the error mark.
pub fn ttft_chart(id: &'static str, t: &Timeline) -> ChartSpec {
    let ttft = col("ttft_ms");
    let points = t
        .ttft
        .iter()
        .map(|p| {
            let status = if p.failed { CellStatus::Error } else { CellStatus::Valid };
            let label = match p.line {
                Some(l) => format!("line {l} · scheduled at {}", seconds(p.at_s)),
                None => format!("scheduled at {}", seconds(p.at_s)),
            };
            point(p.at_s, p.ttft_ms, status, label, ttft.display(p.ttft_ms))
        })
        .collect();
    let series = vec![Series { name: "TTFT".into(), colour: 0, stroke: Stroke::Marks, points }];
    let caption = "Each request's time to first token from its scheduled instant (client clock), placed at that \
                   instant; ✕ marks a request that failed.";
    spec(id, "TTFT over the replay", caption, "TTFT (ms)", series, true)
}

/// The timeline charts of trace row `i` of `r`: offered and completed, in flight, TTFT (the
/// TTFT chart left out when no request had a first token).
///
/// # Errors
/// Why the row has no timeline ([`trace_timeline::timeline`]'s reasons, [`NOT_CHARTED`]).
pub fn charts(r: &Results, i: usize) -> Result<Vec<ChartSpec>, &'static str> {
    let ids = CHART_IDS.get(i).ok_or(NOT_CHARTED)?;
    let t = trace_timeline::timeline(r.traces.get(i).ok_or(trace_timeline::NOT_MEASURED)?)?;
    let mut out = vec![arrivals_chart(ids[0], &t), in_flight_chart(ids[1], &t)];
    if !t.ttft.is_empty() {
        out.push(ttft_chart(ids[2], &t));
    }
    Ok(out)
}

/// The notes under trace row `i`'s timeline: what it leaves out or cuts
/// ([`Timeline::notes`]); empty without a timeline.
pub fn timeline_notes(r: &Results, i: usize) -> Vec<String> {
    r.traces.get(i).and_then(|t| trace_timeline::timeline(t).ok()).map(|t| t.notes()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// The twin run that replayed the 100-request Mooncake trace at 1× (tests/fixtures/
    /// trace-twin.json), its trace said to be a slice at 2×.
    fn with_trace() -> Results {
        let mut r = speedmatrix_schema::load_results(include_bytes!("../../../tests/fixtures/trace-twin.json"))
            .expect("the trace fixture loads");
        let s = r.config.trace.as_mut().expect("the fixture records its trace");
        (s.file, s.sha256, s.lines, s.requests) = ("t.jsonl".into(), "ab12".into(), 1200, 1200);
        (s.from_s, s.speed, s.span_s) = (Some(10.0), 2.0, 61.25);
        r
    }

    #[test]
    fn the_trace_is_named_and_its_row_has_the_rate_tables_figures() {
        let r = with_trace();
        assert_eq!(title(&r, 0), "t.jsonl at 2×");
        assert_eq!(
            source_text(&r).unwrap(),
            "Mooncake format, 1,200 lines, sha256 ab12, 1,200 requests of 10 s to its end over 61.2 s of trace time."
        );
        let l = line(&r.traces[0]);
        assert_eq!(l.status, CellStatus::Valid);
        assert_eq!(l.achieved, format!("{:.2}", r.traces[0].cell.achieved_rps.unwrap()));
        let mut untitled = r.clone();
        untitled.config.trace = None;
        assert_eq!(title(&untitled, 0), "Trace 1");
        assert_eq!(source_text(&untitled), None);
    }

    #[test]
    fn the_timeline_charts_follow_the_rows_requests() {
        let r = with_trace();
        let c = &r.traces[0].cell;
        let charts = charts(&r, 0).unwrap();
        let ids: Vec<&str> = charts.iter().map(|s| s.id).collect();
        assert_eq!(ids, ["trace-arrivals", "trace-in-flight", "trace-ttft"]);
        // Offered ends at every request of the row, completed at those that finished.
        let last = |s: &Series| s.points.last().map(|p| p.y);
        assert_eq!(last(&charts[0].series[0]), Some(c.requests.len() as f64));
        let finished = c.requests.iter().filter(|q| q.e2e_ms.is_some()).count();
        assert_eq!(last(&charts[0].series[1]), Some(finished as f64));
        // One TTFT point per request with a first token, each its own TTFT.
        let ttfts: Vec<f64> = c.requests.iter().filter_map(|q| q.ttft_ms).collect();
        let drawn: Vec<f64> = charts[2].series[0].points.iter().map(|p| p.y).collect();
        assert_eq!(drawn, ttfts);
        assert_eq!(charts[2].series[0].stroke, Stroke::Marks);
        assert!(charts[2].series[0].points[0].label.starts_with("line 1 · scheduled at "));
        // The mean in flight over the window is about the cell's own (the file ends a request
        // at its last token, the collector at its stream's end).
        let t = trace_timeline::timeline(&r.traces[0]).unwrap();
        let w = c.window_s.unwrap();
        let area: f64 = t
            .in_flight
            .iter()
            .map(|&(mid, v)| {
                let (lo, hi) = (mid - t.bucket_s / 2.0, mid + t.bucket_s / 2.0);
                v * (hi.min(w) - lo.max(0.0)).max(0.0)
            })
            .sum();
        let avg = c.avg_in_flight.unwrap();
        assert!((area / w - avg).abs() <= 0.05 * avg + 0.05, "{} against the cell's {avg}", area / w);
    }

    #[test]
    fn a_row_not_replayed_has_no_timeline_and_says_why() {
        let mut r = with_trace();
        r.traces[0].cell.window_start_ms = None;
        assert_eq!(charts(&r, 0), Err(trace_timeline::NOT_MEASURED));
        assert!(timeline_notes(&r, 0).is_empty());
        assert_eq!(charts(&r, 7), Err(NOT_CHARTED));
    }
}
