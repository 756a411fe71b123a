//! What the "Request rates" section shows, as plain data: the open-loop rate cells of a run
//! (`results.rates`, docs/METHODOLOGY.md "Open-loop rate cells") as table lines, the statuses
//! its legend explains, and the chart of TTFT against the achieved rate, one line per context
//! and percentile, so the knee where latency climbs is visible. Pure functions of a
//! [`Results`], unit-tested natively and on wasm32; `view::run_report::rates` draws them.

use crate::model::chart_spec::{all_x, all_y, axis, ChartSpec, Point, Series, Stroke, TickStyle};
use crate::model::run_report::DASH;
use speedmatrix_schema::registry;
use speedmatrix_schema::{CellStatus, Distribution, RateCell, Results};

pub use speedmatrix_schema::export::{RateTableLine as RateLine, RATE_TABLE_HEADERS as HEADERS};

/// What a screen reader says for a rate line's status cell: "8K context at 8 req/s:
/// Saturated", then the reason when there is one.
pub fn spoken(l: &RateLine) -> String {
    let head = format!("{} context at {}: {}", l.context, l.rate, l.status.label());
    match &l.reason {
        Some(why) => format!("{head}, {why}"),
        None => head,
    }
}

fn metric(id: &str, v: Option<f64>) -> String {
    match (registry::metric(id), v) {
        (Some(m), Some(v)) if v.is_finite() => m.display(v),
        _ => DASH.to_string(),
    }
}

/// One statistic of a distribution.
type StatOf = fn(&Distribution) -> Option<f64>;

fn stat(d: &Option<Distribution>, p: StatOf) -> Option<f64> {
    d.as_ref().and_then(p)
}

/// The rate table: one line per rate cell ([`speedmatrix_schema::export::rate_table_line`],
/// the builder `show` uses too), contexts in plan order and rates ascending within a context.
pub fn rate_lines(r: &Results) -> Vec<RateLine> {
    let mut cells: Vec<&RateCell> = r.rates.iter().collect();
    cells.sort_by(|a, b| a.context.tokens.cmp(&b.context.tokens).then(a.rate_rps.total_cmp(&b.rate_rps)));
    cells.into_iter().map(speedmatrix_schema::export::rate_table_line).collect()
}

/// The statuses the section's legend explains: those a rate cell can have besides valid
/// (saturated, client-limited, error, not run), each with whether a cell of this run has it.
pub fn legend(r: &Results) -> Vec<(CellStatus, bool)> {
    [CellStatus::Saturated, CellStatus::ClientLimited, CellStatus::Error, CellStatus::NotRun]
        .into_iter()
        .map(|s| (s, r.rates.iter().any(|c| c.status == s)))
        .collect()
}

/// The chart's id (canvas `chart-rate-ttft`, PNG `…-rate-ttft.png`).
pub const CHART_ID: &str = "rate-ttft";

/// TTFT p50 (solid) and p90 (dashed) against the achieved rate, one pair of lines per context
/// (a context keeps one colour), over the measured rate cells that have both figures. Lines
/// join valid cells; a saturated or client-limited cell is its own mark. `None` when no rate
/// cell has a point.
pub fn ttft_chart(r: &Results) -> Option<ChartSpec> {
    let mut contexts: Vec<(u64, String)> =
        r.rates.iter().map(|c| (c.context.tokens, c.context.label.clone())).collect();
    contexts.sort();
    contexts.dedup();
    let percentiles: [(&str, Stroke, StatOf); 2] =
        [("p50", Stroke::Solid, |d| d.p50), ("p90", Stroke::Dashed, |d| d.p90)];
    let mut series = Vec::new();
    for (colour, (tokens, label)) in contexts.iter().enumerate() {
        for (name, stroke, p) in percentiles {
            let mut points: Vec<Point> = r
                .rates
                .iter()
                .filter(|c| c.context.tokens == *tokens && c.status.is_measured())
                .filter_map(|c| {
                    let x = c.achieved_rps.filter(|v| v.is_finite())?;
                    let y = stat(&c.ttft_ms, p).filter(|v| v.is_finite())?;
                    Some(Point {
                        x,
                        y,
                        status: c.status,
                        label: format!("{label} context · TTFT {name} · {} offered", c.rate_label()),
                        x_text: format!("{x:.2} req/s"),
                        y_text: metric("ttft_ms", Some(y)),
                        interval: None,
                    })
                })
                .collect();
            points.sort_by(|a, b| a.x.total_cmp(&b.x));
            series.push(Series { name: format!("{label} context · TTFT {name}"), colour, stroke, points });
        }
    }
    series.retain(|s| !s.points.is_empty());
    let spec = ChartSpec {
        id: CHART_ID,
        title: "Time to first token vs achieved request rate".into(),
        caption: "TTFT from each request's scheduled instant, median (solid) and p90 (dashed), one pair of lines \
                  per context length: where the lines turn up, the server stops keeping up."
            .into(),
        x: axis("Achieved rate (req/s)".into(), all_x(&series), TickStyle::Compact, true),
        y: axis("TTFT (ms)".into(), all_y(&series), TickStyle::Compact, true),
        series,
        frontiers: Vec::new(),
        markers: Vec::new(),
        guides: Vec::new(),
        legend: None,
    };
    spec.has_points().then_some(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedmatrix_schema::load_results;
    // On wasm32 (how CI runs them: in headless Chromium) `#[test]` is wasm-bindgen-test's.
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// A real twin run: 8K and 32K at 0.5, 1, 8 and 16 req/s; 8 req/s saturated at both, so
    /// 16 req/s was not run.
    fn twin() -> Results {
        load_results(include_bytes!("../../../tests/fixtures/rates-twin.json")).expect("valid rates fixture")
    }

    #[test]
    fn the_table_has_a_line_per_rate_cell_with_the_files_figures() {
        let lines = rate_lines(&twin());
        let keys: Vec<(&str, &str, CellStatus)> =
            lines.iter().map(|l| (l.context.as_str(), l.rate.as_str(), l.status)).collect();
        use CellStatus::*;
        assert_eq!(
            keys,
            [
                ("8K", "0.5 req/s", Valid),
                ("8K", "1 req/s", Valid),
                ("8K", "8 req/s", Saturated),
                ("8K", "16 req/s", NotRun),
                ("32K", "0.5 req/s", Valid),
                ("32K", "1 req/s", Valid),
                ("32K", "8 req/s", Saturated),
                ("32K", "16 req/s", NotRun),
            ]
        );
        let low = &lines[0];
        assert_eq!((low.offered.as_str(), low.achieved.as_str()), ("0.40", "0.40"));
        assert_eq!((low.ttft_p50.as_str(), low.ttft_p90.as_str()), ("365 ms", "366 ms"));
        assert_eq!(low.reason, None);
        let sat = &lines[2];
        assert_eq!((sat.offered.as_str(), sat.achieved.as_str()), ("10.80", "4.80"));
        assert_eq!((sat.ttft_p50.as_str(), sat.ttft_p90.as_str()), ("4,256 ms", "6,033 ms"));
        assert!(sat.reason.as_deref().unwrap().starts_with("saturated: requests in flight grew from 29 to 59"));
        assert!(spoken(sat).starts_with("8K context at 8 req/s: Saturated, saturated: "), "{}", spoken(sat));
        // Past the saturated rate: not run, every figure a dash, the reason kept.
        let skipped = &lines[3];
        assert!([&skipped.offered, &skipped.achieved, &skipped.total_tps, &skipped.ttft_p50, &skipped.send_lag_p99]
            .iter()
            .all(|v| v.as_str() == DASH));
        assert!(skipped.reason.as_deref().unwrap().contains("8 req/s was saturated at this context"));
        // A saturated cell whose requests mostly went unanswered has no median TTFT.
        assert_eq!((lines[6].achieved.as_str(), lines[6].ttft_p50.as_str()), ("0.60", DASH));
    }

    #[test]
    fn the_legend_marks_the_rate_statuses_this_run_has() {
        use CellStatus::*;
        assert_eq!(legend(&twin()), [(Saturated, true), (ClientLimited, false), (Error, false), (NotRun, true)]);
        let mut r = twin();
        r.rates[1].status = ClientLimited;
        assert_eq!(legend(&r)[1], (ClientLimited, true));
        r.rates.clear();
        assert!(legend(&r).iter().all(|(_, present)| !present));
        assert_eq!(ttft_chart(&r), None, "no rate cells, no chart");
    }

    #[test]
    fn the_chart_plots_ttft_p50_and_p90_against_the_achieved_rate_per_context() {
        let chart = ttft_chart(&twin()).expect("the run has measured rate cells");
        assert_eq!(chart.id, "rate-ttft");
        let names: Vec<(&str, usize, Stroke, usize)> =
            chart.series.iter().map(|s| (s.name.as_str(), s.colour, s.stroke, s.points.len())).collect();
        assert_eq!(
            names,
            [
                ("8K context · TTFT p50", 0, Stroke::Solid, 3),
                ("8K context · TTFT p90", 0, Stroke::Dashed, 3),
                // 32K at 8 req/s has no TTFT percentiles (most requests unanswered): two points.
                ("32K context · TTFT p50", 1, Stroke::Solid, 2),
                ("32K context · TTFT p90", 1, Stroke::Dashed, 2),
            ]
        );
        let p50: Vec<(f64, f64, CellStatus)> = chart.series[0].points.iter().map(|p| (p.x, p.y, p.status)).collect();
        assert_eq!(
            p50,
            [
                (0.4, 364.858, CellStatus::Valid),
                (1.6, 371.672, CellStatus::Valid),
                (4.8, 4256.416, CellStatus::Saturated)
            ]
        );
        let knee = &chart.series[0].points[2];
        assert_eq!((knee.x_text.as_str(), knee.y_text.as_str()), ("4.80 req/s", "4,256 ms"));
        assert_eq!(knee.label, "8K context · TTFT p50 · 8 req/s offered");
        // In x order: 32K at 1 req/s achieved less than at 0.5 req/s.
        let xs: Vec<f64> = chart.series[2].points.iter().map(|p| p.x).collect();
        assert_eq!(xs, [0.2, 0.6]);
        // 0.2 – 4.8 req/s spans 20× or more: a logarithmic x axis; 365 ms – 6 s (16×) stays
        // linear, so the knee reads as the climb it is.
        assert!(chart.x.log && !chart.y.log);
        assert_eq!(chart.x.label, "Achieved rate (req/s)");
        let rows = chart.mirror_rows();
        assert_eq!(rows.len(), 10);
        assert!(rows.contains(&[
            "8K context · TTFT p90".to_string(),
            "4.80 req/s".to_string(),
            "6,033 ms".to_string(),
            "Saturated".to_string()
        ]));
    }
}
