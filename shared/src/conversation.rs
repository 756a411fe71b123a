//! Multi-turn conversations (`run --turns N`, docs/METHODOLOGY.md, "Conversations"): how a
//! context is shared out between turn 1's prompt and the later turns, and a turn's figures
//! from what its requests saw, and the per-turn table `show` and the page print. Pure.

use crate::prefix::hit_rate;
use crate::registry;
use crate::stats::{distribution_rounded, percentile_sorted, round3};
use crate::{ConversationCell, Distribution, HitRateSource, Results, TurnFigures};

/// Tokens of each later turn's new user message, sized as a whole prompt.
pub const FOLLOW_UP_TOKENS: u64 = 64;

/// The most turns a conversation may have.
pub const MAX_TURNS: u32 = 100;

/// What the turns after the first add to a conversation: each an answer of `answer_tokens`
/// (the previous turn's, sent back) and a new message of [`FOLLOW_UP_TOKENS`], tokens.
pub fn room(turns: u32, answer_tokens: u32) -> u64 {
    u64::from(turns.saturating_sub(1)) * (u64::from(answer_tokens) + FOLLOW_UP_TOKENS)
}

/// Turn 1's prompt at a context of `context` tokens: the context less the [`room`] of the
/// later turns, so the last turn's prompt is about the context.
///
/// # Errors
/// When the room leaves fewer than [`FOLLOW_UP_TOKENS`] tokens for turn 1: what is needed and
/// the flags to change.
pub fn first_prompt_tokens(context: u64, turns: u32, answer_tokens: u32) -> Result<u64, String> {
    let room = room(turns, answer_tokens);
    match context.checked_sub(room).filter(|t| *t >= FOLLOW_UP_TOKENS) {
        Some(t) => Ok(t),
        None => Err(format!(
            "the {} later turns need {room} tokens ({} answers of --max-tokens {answer_tokens} and messages of {FOLLOW_UP_TOKENS}), which leaves turn 1 less than {FOLLOW_UP_TOKENS} of the context's {context}: give a longer --contexts, fewer --turns or a smaller --max-tokens",
            turns - 1,
            turns - 1
        )),
    }
}

/// What one session's request of a turn saw.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnSample {
    /// Time to first token, ms; `None` when it failed first.
    pub ttft_ms: Option<f64>,
    /// Request sent → last token, ms, when it finished.
    pub e2e_ms: Option<f64>,
    /// The gaps between its token-carrying chunks, each ÷ the chunk's tokens and counted once
    /// per token, ms.
    pub itl_ms: Vec<f64>,
    /// Its prompt as the server counted it (usage).
    pub prompt_tokens: Option<u64>,
    /// It failed.
    pub failed: bool,
}

/// Hits and queries of a turn's requests and where they came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TurnCache {
    /// Prompt tokens served from the cache.
    pub hits: u64,
    /// Prompt tokens looked up.
    pub queries: u64,
    /// Their source.
    pub source: HitRateSource,
}

/// Turn `turn`'s figures from its sessions' `samples`; `first_ttft_p50` is turn 1's TTFT p50
/// (the ratio's denominator; turn 1 uses its own, so its ratio is 1), `cache` the turn's
/// prefix-cache counts when a source gave them.
pub fn turn_figures(
    turn: u32,
    samples: &[TurnSample],
    first_ttft_p50: Option<f64>,
    cache: Option<TurnCache>,
) -> TurnFigures {
    let ttft: Vec<f64> = samples.iter().filter_map(|s| s.ttft_ms).collect();
    let e2e: Vec<f64> = samples.iter().filter(|s| !s.failed).filter_map(|s| s.e2e_ms).collect();
    let itl: Vec<f64> = samples.iter().flat_map(|s| s.itl_ms.iter().copied()).collect();
    let mut prompts: Vec<f64> = samples.iter().filter_map(|s| s.prompt_tokens).map(|t| t as f64).collect();
    prompts.sort_by(f64::total_cmp);
    let ttft_ms = distribution_rounded(&ttft);
    let own = ttft_ms.and_then(|d| d.p50);
    let first = if turn == 1 { own } else { first_ttft_p50 };
    let ratio = match (own, first) {
        (Some(k), Some(first)) if first > 0.0 => Some(round3(k / first)),
        _ => None,
    };
    let rate = cache.and_then(|c| hit_rate(c.hits, c.queries));
    TurnFigures {
        turn,
        completed: samples.iter().filter(|s| !s.failed && s.e2e_ms.is_some()).count() as u64,
        failed: samples.iter().filter(|s| s.failed).count() as u64,
        prompt_tokens: percentile_sorted(&prompts, 50.0).map(|t| t as u64),
        ttft_ms,
        itl_ms: distribution_rounded(&itl),
        e2e_ms: distribution_rounded(&e2e),
        ttft_ratio: ratio,
        cache_hit_rate: rate,
        hit_rate_source: cache.filter(|_| rate.is_some()).map(|c| c.source),
        hit_tokens: cache.map(|c| c.hits),
        query_tokens: cache.map(|c| c.queries),
    }
}

fn dash() -> String {
    "—".to_string()
}

/// A turn's cache hit rate as the registry writes it: `86.5%`.
pub fn hit_rate_text(v: f64) -> String {
    registry::CONVERSATION.iter().find(|m| m.id == "turn_cache_hit_rate").map_or_else(dash, |m| m.display(v))
}

/// A ms statistic: `123 ms`.
fn ms(d: Option<Distribution>, stat: fn(&Distribution) -> Option<f64>) -> String {
    registry::metric("ttft_ms").zip(d.as_ref().and_then(stat)).map_or_else(dash, |(m, v)| m.display(v))
}

fn turn_row(c: &ConversationCell, t: &TurnFigures) -> Vec<String> {
    let hit = match (t.cache_hit_rate, t.hit_rate_source) {
        (Some(h), src) => format!("{} ({})", hit_rate_text(h), src.map_or("?", HitRateSource::words)),
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

/// The per-turn table's column headers (`show` and the page print the same table).
pub const TURN_HEADERS: [&str; 10] = [
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

/// The per-turn table's rows: one per conversation cell and turn — the prompt the server
/// counted, TTFT, ITL and E2E, what the turn costs against turn 1, the prefix-cache hit rate
/// with its source, the sessions that finished it.
pub fn turn_rows(r: &Results) -> Vec<Vec<String>> {
    r.conversations.iter().flat_map(|c| c.per_turn.iter().map(move |t| turn_row(c, t))).collect()
}

/// One line per conversation cell: its plan, status and reason, then its missing figures.
pub fn turn_notes(r: &Results) -> Vec<String> {
    let mut out = vec![];
    for c in &r.conversations {
        out.push(format!(
            "- {} × {} session{}, {} turns, think time {} s: {}{}",
            c.context.label,
            c.sessions,
            if c.sessions == 1 { "" } else { "s" },
            c.turns,
            c.think_time_s,
            c.status.label(),
            c.reason.as_deref().map(|why| format!(" ({why})")).unwrap_or_default()
        ));
        out.extend(c.missing.iter().map(|m| format!("  missing {}: {}", m.figure, m.reason)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_prompt_leaves_room_for_the_later_turns() {
        // 4 later turns × (256 + 64) = 1,280 tokens of an 8,192 context.
        assert_eq!(room(5, 256), 1280);
        assert_eq!(first_prompt_tokens(8192, 5, 256), Ok(6912));
        assert_eq!(first_prompt_tokens(8192, 1, 256), Ok(8192));
        let e = first_prompt_tokens(1024, 5, 256).unwrap_err();
        assert!(e.contains("need 1280 tokens") && e.contains("--max-tokens 256"), "{e}");
    }

    #[test]
    fn a_turn_summarises_its_sessions_and_compares_with_turn_one() {
        let s = |ttft: f64, e2e: f64| TurnSample {
            ttft_ms: Some(ttft),
            e2e_ms: Some(e2e),
            itl_ms: vec![10.0, 12.0],
            prompt_tokens: Some(1000),
            failed: false,
        };
        let failed = TurnSample { failed: true, ..TurnSample::default() };
        let cache = TurnCache { hits: 1800, queries: 2000, source: HitRateSource::Prometheus };
        let f = turn_figures(3, &[s(50.0, 400.0), s(70.0, 420.0), failed], Some(200.0), Some(cache));
        assert_eq!((f.turn, f.completed, f.failed, f.prompt_tokens), (3, 2, 1, Some(1000)));
        assert_eq!(f.ttft_ms.unwrap().p50, Some(50.0));
        assert_eq!(f.ttft_ratio, Some(0.25));
        assert_eq!(f.itl_ms.unwrap().count, Some(4));
        assert_eq!((f.cache_hit_rate, f.hit_rate_source), (Some(0.9), Some(HitRateSource::Prometheus)));
        let first = turn_figures(1, &[s(80.0, 400.0)], None, None);
        assert_eq!(first.ttft_ratio, Some(1.0));
        let none = turn_figures(1, &[], None, None);
        assert_eq!((none.ttft_ratio, none.cache_hit_rate, none.hit_rate_source), (None, None, None));
    }
}
