//! What the "Conversations" section shows, as plain data: a run's multi-turn conversation cells
//! (`results.conversations`, `run --turns N`, docs/METHODOLOGY.md "Conversations") as the
//! per-turn table `show` prints ([`speedmatrix_schema::conversation::turn_rows`]), and two
//! per-turn charts — TTFT p50 by turn and ITL p50 by turn, one line per cell — so what turn k
//! costs against turn 1 reads off the slope. Pure functions of a [`Results`]; unit-tested
//! natively and on wasm32; `view::run_report::conversations` draws them.

use crate::model::chart_spec::{all_x, all_y, axis, col, ChartSpec, Point, Series, Stroke, TickStyle};
use speedmatrix_schema::{ConversationCell, Distribution, Results, TurnFigures};

pub use speedmatrix_schema::conversation::{turn_notes as notes, turn_rows as rows, TURN_HEADERS as HEADERS};

/// A conversation cell's name in the charts' legends: "2K × 4 sessions".
pub fn cell_name(c: &ConversationCell) -> String {
    format!("{} × {} sessions", c.context.label, c.sessions)
}

/// One line per cell of `stat` (a turn's distribution) against the turn; turns without it
/// are left out.
fn per_turn(r: &Results, id: &str, stat: fn(&TurnFigures) -> Option<&Distribution>) -> Vec<Series> {
    let y = col(id);
    r.conversations
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let points = c
                .per_turn
                .iter()
                .filter_map(|t| {
                    let v = stat(t).and_then(|d| d.p50).filter(|v| v.is_finite())?;
                    let ratio = t.ttft_ratio.filter(|_| id == "ttft_ms").map(|x| format!(" ({x:.2}× turn 1)"));
                    Some(Point {
                        x: f64::from(t.turn),
                        y: v,
                        status: c.status,
                        label: format!("{} · turn {}", cell_name(c), t.turn),
                        x_text: format!("turn {}", t.turn),
                        y_text: format!("{}{}", y.display(v), ratio.unwrap_or_default()),
                        interval: None,
                    })
                })
                .collect();
            Series { name: cell_name(c), colour: i, stroke: Stroke::Solid, points }
        })
        .filter(|s| !s.points.is_empty())
        .collect()
}

fn chart(id: &'static str, title: &str, caption: &str, y_label: String, series: Vec<Series>) -> ChartSpec {
    ChartSpec {
        id,
        title: title.into(),
        caption: caption.into(),
        x: axis("Turn".into(), all_x(&series), TickStyle::Compact, false),
        y: axis(y_label, all_y(&series), TickStyle::Compact, false),
        series,
        frontiers: Vec::new(),
        markers: Vec::new(),
        guides: Vec::new(),
        legend: None,
    }
}

/// The per-turn charts: `turn-ttft` (TTFT p50 by turn; its readout says turn k against turn
/// 1) and `turn-itl` (ITL p50 by turn), each left out when no turn has the figure.
pub fn charts(r: &Results) -> Vec<ChartSpec> {
    let ttft = per_turn(r, "ttft_ms", |t| t.ttft_ms.as_ref());
    let itl = per_turn(r, "itl_ms", |t| t.itl_ms.as_ref());
    let mut out = Vec::new();
    if !ttft.is_empty() {
        out.push(chart(
            "turn-ttft",
            "TTFT by turn",
            "Time to first token of turn k, median over the sessions (client clock): each later turn sends the whole \
             history, so its TTFT grows with the prompt unless the server's prefix cache serves the history.",
            col("ttft_ms").metric.header(),
            ttft,
        ));
    }
    if !itl.is_empty() {
        out.push(chart(
            "turn-itl",
            "ITL by turn",
            "Inter-token latency of turn k's answer, median over its tokens (client clock, server usage).",
            col("itl_ms").metric.header(),
            itl,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn with_turns() -> Results {
        speedmatrix_schema::load_results(include_bytes!("../../../tests/fixtures/turns-twin.json"))
            .expect("the conversation fixture loads")
    }

    #[test]
    fn a_line_per_cell_and_a_point_per_turn() {
        let r = with_turns();
        let c = &r.conversations[0];
        let charts = charts(&r);
        let ids: Vec<&str> = charts.iter().map(|s| s.id).collect();
        assert_eq!(ids, ["turn-ttft", "turn-itl"]);
        let s = &charts[0].series[0];
        assert_eq!(s.name, cell_name(c));
        let want: Vec<f64> = c.per_turn.iter().filter_map(|t| t.ttft_ms.as_ref()?.p50).collect();
        assert_eq!(s.points.iter().map(|p| p.y).collect::<Vec<_>>(), want);
        assert_eq!(s.points.len(), c.turns as usize, "every turn measured");
        assert!(s.points[1].y_text.ends_with("× turn 1)"), "{}", s.points[1].y_text);
        assert_eq!(rows(&r).len(), c.per_turn.len());
    }

    #[test]
    fn a_run_without_conversations_has_no_chart() {
        let mut r = with_turns();
        r.conversations.clear();
        assert!(charts(&r).is_empty());
        assert!(rows(&r).is_empty());
    }
}
