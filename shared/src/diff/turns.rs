//! The conversations of two runs compared (`run --turns N`, docs/METHODOLOGY.md, "Comparing
//! runs", conversations): part of [`super::RunDiff`], so `speedmatrix diff` and `diff --format
//! json` print it and the diff page shows it.
//!
//! Turns pair by their cell's context and sessions and the turn number. Per turn: TTFT p50,
//! ITL p50, TTFT vs turn 1 and the prefix-cache hit rate, each judged by the threshold (a
//! turn's file keeps no samples to bootstrap: "no noise data"), better or worse by the metric's
//! direction. A turn only one run measured is listed with its side's figures and no verdict.

use super::{compare_figure, Delta};
use crate::model::{ConversationCell, Results, TurnFigures};
use serde::Serialize;

/// The figures compared per turn: (the id in the JSON, the registry metric giving its
/// direction, the figure).
type Figure = (&'static str, &'static str, fn(&TurnFigures) -> Option<f64>);

/// The figures of a turn the diff compares, in order.
pub const TURN_FIGURES: [Figure; 4] = [
    ("ttft_ms_p50", "ttft_ms", |t| t.ttft_ms.as_ref().and_then(|d| d.p50)),
    ("itl_ms_p50", "itl_ms", |t| t.itl_ms.as_ref().and_then(|d| d.p50)),
    ("turn_ttft_ratio", "turn_ttft_ratio", |t| t.ttft_ratio),
    ("turn_cache_hit_rate", "turn_cache_hit_rate", |t| t.cache_hit_rate),
];

/// A turn figure as people read it: `412 ms`, `1.35×`, `88.2%`.
pub fn figure_text(id: &str, v: f64) -> String {
    match id {
        "turn_ttft_ratio" => format!("{v:.2}×"),
        "turn_cache_hit_rate" => crate::conversation::hit_rate_text(v),
        _ => super::rates::figure_text(id, v),
    }
}

/// A turn figure's name for people, as the per-turn table heads it.
pub fn figure_label(id: &str) -> &'static str {
    match id {
        "ttft_ms_p50" => "TTFT p50",
        "itl_ms_p50" => "ITL p50",
        "turn_ttft_ratio" => "TTFT vs turn 1",
        _ => "Cache hit",
    }
}

/// One turn of a conversation cell of either run against its partner.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TurnDiff {
    /// The cell's context label.
    pub context: String,
    /// The cell's context, tokens.
    pub context_tokens: u64,
    /// Conversations at once.
    pub sessions: u32,
    /// The turn, from 1.
    pub turn: u32,
    /// Whether A measured this turn.
    pub in_a: bool,
    /// Whether B measured this turn.
    pub in_b: bool,
    /// Each of [`TURN_FIGURES`] either side has.
    pub deltas: Vec<Delta>,
}

impl TurnDiff {
    /// "1K × 2 sessions, turn 3".
    pub fn describe(&self) -> String {
        format!("{} × {} sessions, turn {}", self.context, self.sessions, self.turn)
    }

    /// The delta of figure `id`, when either side has it.
    pub fn delta(&self, id: &str) -> Option<&Delta> {
        self.deltas.iter().find(|d| d.column == id)
    }
}

fn direction(metric: &str) -> Option<bool> {
    crate::registry::METRICS
        .iter()
        .chain(crate::registry::CONVERSATION)
        .find(|m| m.id == metric)
        .and_then(|m| m.higher_is_better)
}

fn turns(r: &Results) -> impl Iterator<Item = (&ConversationCell, &TurnFigures)> {
    r.conversations.iter().flat_map(|c| c.per_turn.iter().map(move |t| (c, t)))
}

/// Every turn of either run's conversation cells, A's order first, then turns only B has;
/// empty when neither run has conversations. `threshold` as [`super::diff_with`] takes it.
pub fn turn_diff(a: &Results, b: &Results, threshold: Option<f64>) -> Vec<TurnDiff> {
    let threshold = threshold.unwrap_or(super::DEFAULT_THRESHOLD);
    let same = |(c, t): (&ConversationCell, &TurnFigures), (d, u): (&ConversationCell, &TurnFigures)| {
        c.context.tokens == d.context.tokens && c.sessions == d.sessions && t.turn == u.turn
    };
    let mut out = Vec::new();
    for x in turns(a) {
        out.push(pair(Some(x), turns(b).find(|y| same(x, *y)), threshold));
    }
    for y in turns(b).filter(|y| !turns(a).any(|x| same(x, *y))) {
        out.push(pair(None, Some(y), threshold));
    }
    out
}

type Side<'a> = Option<(&'a ConversationCell, &'a TurnFigures)>;

fn pair(a: Side<'_>, b: Side<'_>, threshold: f64) -> TurnDiff {
    let (c, t) = a.or(b).expect("a pair holds at least one turn");
    let deltas = TURN_FIGURES
        .iter()
        .filter_map(|&(id, metric, figure)| {
            let (va, vb) = (a.and_then(|(_, t)| figure(t)), b.and_then(|(_, t)| figure(t)));
            (va.is_some() || vb.is_some()).then(|| compare_figure(id.to_string(), direction(metric), va, vb, threshold))
        })
        .collect();
    TurnDiff {
        context: c.context.label.clone(),
        context_tokens: c.context.tokens,
        sessions: c.sessions,
        turn: t.turn,
        in_a: a.is_some(),
        in_b: b.is_some(),
        deltas,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::Verdict;
    use crate::model::{CellStatus, ContextSize, Distribution};

    fn run(ttft: &[f64]) -> Results {
        let mut r: Results = crate::load_results(include_bytes!("../../../tests/fixtures/h200-qwen3.5-122b-vllm.json"))
            .expect("the seed fixture loads");
        let mut c =
            ConversationCell::planned(ContextSize { label: "1K".into(), tokens: 1024 }, 2, (3, 0.1), (900, 20, 32));
        c.status = CellStatus::Valid;
        c.per_turn = ttft
            .iter()
            .enumerate()
            .map(|(i, &v)| TurnFigures {
                turn: i as u32 + 1,
                completed: 2,
                failed: 0,
                prompt_tokens: None,
                ttft_ms: Some(Distribution { p50: Some(v), ..Distribution::default() }),
                itl_ms: None,
                e2e_ms: None,
                ttft_ratio: Some(v / ttft[0]),
                cache_hit_rate: None,
                hit_rate_source: None,
                hit_tokens: None,
                query_tokens: None,
            })
            .collect();
        r.conversations = vec![c];
        r
    }

    #[test]
    fn turns_pair_by_cell_and_number_and_a_slower_turn_is_worse() {
        let d = turn_diff(&run(&[100.0, 120.0, 140.0]), &run(&[100.0, 200.0]), Some(0.05));
        assert_eq!(d.len(), 3);
        assert_eq!(d[1].describe(), "1K × 2 sessions, turn 2");
        let ttft = d[1].delta("ttft_ms_p50").unwrap();
        assert_eq!((ttft.a, ttft.b, ttft.verdict), (Some(120.0), Some(200.0), Some(Verdict::Worse)));
        assert_eq!(d[0].delta("ttft_ms_p50").unwrap().verdict, Some(Verdict::Same));
        assert!(d[2].in_a && !d[2].in_b, "turn 3 only A measured");
        assert_eq!(d[2].delta("ttft_ms_p50").unwrap().verdict, None);
        assert!(turn_diff(&run(&[]), &run(&[]), None).is_empty());
    }
}
