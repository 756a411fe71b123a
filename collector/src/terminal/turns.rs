//! The conversations of a results file (`--turns`) as `show` prints them (`show.rs` renders
//! them): one table row per cell and turn — the prompt the server counted, TTFT, ITL and E2E,
//! what the turn costs against turn 1, and the prefix-cache hit rate with its source — then a
//! line per cell with its status, reason and missing figures.

use speedmatrix_schema::registry::{self, format_number, Style};
use speedmatrix_schema::{ConversationCell, Distribution, Results, TurnFigures};

fn dash() -> String {
    "—".to_string()
}

/// A ms statistic: `123 ms`.
fn ms(d: Option<Distribution>, stat: fn(&Distribution) -> Option<f64>) -> String {
    registry::metric("ttft_ms").zip(d.as_ref().and_then(stat)).map_or_else(dash, |(m, v)| m.display(v))
}

fn row(c: &ConversationCell, t: &TurnFigures) -> Vec<String> {
    let hit = match (t.cache_hit_rate, t.hit_rate_source) {
        (Some(h), src) => format!(
            "{} ({})",
            format_number(h, Style::Percent(1)),
            src.map_or("?", crate::measuring::prefix::source_words)
        ),
        (None, _) => dash(),
    };
    vec![
        format!("{} × {}", c.context.label, c.sessions),
        t.turn.to_string(),
        t.prompt_tokens.map_or_else(dash, |p| p.to_string()),
        ms(t.ttft_ms, |d| d.p50),
        ms(t.ttft_ms, |d| d.p99),
        ms(t.itl_ms, |d| d.p50),
        ms(t.e2e_ms, |d| d.p50),
        t.ttft_ratio.map_or_else(dash, |r| format!("{r:.2}×")),
        hit,
        format!("{} of {}", t.completed, t.completed + t.failed),
    ]
}

/// The table's column headers.
pub const HEADERS: [&str; 10] = [
    "Context × sessions",
    "Turn",
    "Prompt tokens",
    "TTFT p50",
    "TTFT p99",
    "ITL p50",
    "E2E p50",
    "TTFT vs turn 1",
    "Cache hit",
    "Finished",
];

/// The table's rows: one per cell and turn.
pub fn rows(r: &Results) -> Vec<Vec<String>> {
    r.conversations.iter().flat_map(|c| c.per_turn.iter().map(move |t| row(c, t))).collect()
}

/// One line per cell: its plan, status and reason, then its missing figures.
pub fn notes(r: &Results) -> Vec<String> {
    let mut out = vec![];
    for c in &r.conversations {
        out.push(format!(
            "- {} × {} sessions, {} turns, think time {} s: {}{}",
            c.context.label,
            c.sessions,
            c.turns,
            c.think_time_s,
            c.status.label(),
            c.reason.as_deref().map(|why| format!(" ({why})")).unwrap_or_default()
        ));
        out.extend(c.missing.iter().map(|m| format!("  missing {}: {}", m.figure, m.reason)));
    }
    out
}
