//! Multi-turn conversations (`run --turns N --think-time DUR`; docs/METHODOLOGY.md,
//! "Conversations"), in the stages of [`Measurement`]: **warm** (every session's turn-1 prompt
//! and every later turn's new message built before anything is timed), **window** (the
//! sessions at once, closed loop: each sends turn 1, then — `--think-time` after each answer
//! ended — the whole history as chat messages, the server's own answers included, plus the
//! next message), **drain** (nothing is left open: a session ends with its last turn),
//! **figures** (per turn: TTFT, ITL, E2E, the prompt the server counted, the prefix-cache hit
//! rate from its own counts, and TTFT against turn 1's).
//!
//! The hit rate per turn comes from usage (`cached_tokens`, llama.cpp `cache_n`) where the
//! server returns it; else, with one session, from the prefix-cache counters read before and
//! after each turn (Prometheus). With several sessions their turns overlap in the counters, so
//! without usage the rate is null and `missing` says why.

use crate::measuring::client::{request_body, StreamCtl, StreamRecord};
use crate::measuring::error::{CellError, RunError};
use crate::measuring::measurement::Measurement;
use crate::measuring::plan::Plan;
use crate::measuring::prefix::count;
use crate::measuring::scrape::Scrape;
use crate::measuring::session::Session;
use crate::measuring::spec::RunSpec;
use serde_json::{json, Value};
use speedmatrix_schema::conversation::{first_prompt_tokens, turn_figures, TurnCache, TurnSample, FOLLOW_UP_TOKENS};
use speedmatrix_schema::progress::{Current, Measuring, Phase};
use speedmatrix_schema::{CellStatus, ConversationCell, MissingFigure};

/// The figure `missing` names when a turn's hit rate has no source.
pub const HIT_RATE_FIGURE: &str = "conversations.per_turn.cache_hit_rate";

/// The conversation cells of a plan with `--turns`: one per context and concurrency (sessions
/// at once); none without `--turns`.
pub fn planned(plan: &Plan, spec: &RunSpec) -> Vec<ConversationCell> {
    let Some((turns, think)) = spec.turns else { return vec![] };
    plan.contexts
        .iter()
        .flat_map(|ctx| plan.concurrency.iter().map(move |&n| (ctx, n)))
        .map(|(ctx, n)| {
            let first = first_prompt_tokens(ctx.tokens, turns, spec.max_tokens).unwrap_or(0);
            ConversationCell::planned(
                ctx.clone(),
                n,
                (turns, think.as_secs_f64()),
                (first, FOLLOW_UP_TOKENS, spec.max_tokens),
            )
        })
        .collect()
}

/// Whether every context leaves turn 1 a prompt after the room of the later turns.
///
/// # Errors
/// [`RunError::Turns`] naming the context and what to change.
pub fn fits(plan: &Plan, spec: &RunSpec) -> Result<(), RunError> {
    let Some((turns, _)) = spec.turns else { return Ok(()) };
    for ctx in &plan.contexts {
        if let Err(why) = first_prompt_tokens(ctx.tokens, turns, spec.max_tokens) {
            return Err(RunError::Turns { flag: "--turns", why: format!("context {}: {why}", ctx.label) });
        }
    }
    Ok(())
}

/// Conversation cell `index` of the results, measured.
pub struct Conversation {
    /// Its place in `results.conversations`.
    pub index: usize,
    /// The cell as planned.
    pub cell: ConversationCell,
}

/// What the warm stage built: each session's turn-1 prompt and each later turn's message.
pub struct Warmed {
    firsts: Vec<String>,
    follow_ups: Vec<String>,
}

/// One turn of one session: its record, and the counters read around it (one session only).
struct Turn {
    record: StreamRecord,
    scrapes: Vec<Scrape>,
}

/// What the sessions saw: `sessions[i][k]` is session i's turn k + 1 (a session that failed
/// stops there).
pub struct Seen {
    sessions: Vec<Vec<Turn>>,
}

impl Conversation {
    fn label(&self) -> String {
        let c = &self.cell;
        let sessions = if c.sessions == 1 { "session" } else { "sessions" };
        format!("conversation {} × {} {sessions} · {} turns", c.context.label, c.sessions, c.turns)
    }

    /// The request body of a turn: the run's usual request with `messages` for `history`.
    fn body(s: &Session, history: &[Value], max_tokens: u32) -> bytes::Bytes {
        let mut b = s.body("", max_tokens);
        b["messages"] = Value::Array(history.to_vec());
        request_body(&b)
    }

    /// One session, turn after turn: each answer appended to the history as the assistant's
    /// message, the next message after it, `--think-time` between.
    async fn session(&self, s: &Session, id: usize, warmed: &Warmed, read_counters: bool) -> Vec<Turn> {
        let c = &self.cell;
        let think = std::time::Duration::from_secs_f64(c.think_time_s);
        let mut history = vec![json!({"role": "user", "content": warmed.firsts[id]})];
        let mut turns = Vec::with_capacity(c.turns as usize);
        for k in 0..c.turns as usize {
            if k > 0 {
                tokio::time::sleep(think).await;
                history.push(json!({"role": "user", "content": warmed.follow_ups[k - 1]}));
            }
            let before = if read_counters { s.scrape().await } else { None };
            let (_keep, cancel) = tokio::sync::watch::channel(false);
            let ctl = StreamCtl {
                clock: s.clock,
                stall: s.spec.stall,
                cancel,
                id,
                events: None,
                live_tokens: None,
                keep_text: true,
                gate: None,
            };
            let record = s.client.stream(s.path, &Self::body(s, &history, c.answer_tokens), ctl).await;
            let after = if read_counters { s.scrape().await } else { None };
            // The answer's content as a chat client keeps it (none: an empty message, as for
            // a reasoning model whose answer held no content yet).
            let answer = record.finished().then(|| record.content.clone().unwrap_or_default());
            turns.push(Turn { record, scrapes: before.into_iter().chain(after).collect() });
            match answer {
                Some(text) => history.push(json!({"role": "assistant", "content": text})),
                None => break,
            }
        }
        turns
    }
}

impl Measurement for Conversation {
    type Warmed = Warmed;
    type Open = Seen;
    type Seen = Seen;
    type Row = ConversationCell;

    fn current(&self) -> Current {
        Current {
            measuring: Measuring::Decode { context: self.cell.context.clone(), concurrency: self.cell.sessions },
            phase: Phase::WarmUp,
            window_elapsed_s: None,
            live_tps: None,
            streams_running: None,
        }
    }

    fn name(&self) -> String {
        self.label()
    }

    /// Every session's turn-1 prompt (its own text) and every later turn's message, sized with
    /// the server's tokenizer; one idle connection per session.
    async fn warm(&self, s: &mut Session) -> Result<Warmed, CellError> {
        let c = &self.cell;
        let mut firsts = Vec::with_capacity(c.sessions as usize);
        for i in 0..c.sessions {
            let tag = format!("conversation {} session {i}", self.index);
            firsts.push(s.prompt_builder().build(&tag, c.first_prompt_tokens).await.map_err(CellError::Prompt)?.text);
        }
        let mut follow_ups = Vec::with_capacity(c.turns as usize);
        for k in 2..=c.turns {
            let tag = format!("conversation {} turn {k}", self.index);
            follow_ups.push(s.prompt_builder().build(&tag, c.follow_up_tokens).await.map_err(CellError::Prompt)?.text);
        }
        s.client.warm_connections(c.sessions as usize).await;
        Ok(Warmed { firsts, follow_ups })
    }

    /// The sessions at once, each to its last turn (or its first failure).
    async fn window(&self, s: &mut Session, warmed: &Warmed) -> Seen {
        s.show(Some(Current { phase: Phase::Window, ..self.current() }));
        let read_counters = self.cell.sessions == 1 && s.has_metrics;
        let s: &Session = s;
        let sessions = futures_util::future::join_all(
            (0..self.cell.sessions as usize).map(|i| self.session(s, i, warmed, read_counters)),
        )
        .await;
        Seen { sessions }
    }

    /// A session ends with its last turn: nothing is left open.
    async fn drain(&self, _s: &mut Session, open: Seen) -> Seen {
        open
    }

    fn figures(&self, s: &mut Session, _warmed: Warmed, seen: Seen) -> ConversationCell {
        let mut cell = self.cell.clone();
        cell.per_turn = vec![];
        cell.missing = vec![];
        let mut first_p50 = None;
        let mut unsourced = 0;
        for k in 0..cell.turns as usize {
            let turns: Vec<&Turn> = seen.sessions.iter().filter_map(|t| t.get(k)).collect();
            let samples: Vec<TurnSample> = turns.iter().map(|t| sample(&t.record)).collect();
            let records: Vec<&StreamRecord> = turns.iter().map(|t| &t.record).collect();
            // Counters around the turn only when one session's turn had them to itself.
            let scrapes: Vec<Scrape> = match turns.as_slice() {
                [one] if cell.sessions == 1 => one.scrapes.clone(),
                _ => vec![],
            };
            let cache = count(records.iter().copied(), &scrapes).map(|c| TurnCache {
                hits: c.hits,
                queries: c.queries,
                source: c.source,
            });
            let f = turn_figures(k as u32 + 1, &samples, first_p50, cache);
            if k == 0 {
                first_p50 = f.ttft_ms.and_then(|d| d.p50);
            }
            if f.cache_hit_rate.is_none() && !turns.is_empty() {
                unsourced += 1;
            }
            cell.per_turn.push(f);
        }
        if unsourced > 0 {
            cell.missing
                .push(MissingFigure { figure: HIT_RATE_FIGURE.into(), reason: missing_reason(s, cell.sessions) });
        }
        let failed: Vec<&StreamRecord> =
            seen.sessions.iter().flatten().map(|t| &t.record).filter(|r| !r.finished()).collect();
        let short = seen.sessions.iter().filter(|t| t.len() < cell.turns as usize).count();
        (cell.status, cell.reason) = match failed.first() {
            None if short == 0 => (CellStatus::Valid, None),
            first => (
                CellStatus::Error,
                Some(format!(
                    "{} of {} sessions stopped before their last turn ({} requests failed; the first: {})",
                    short,
                    cell.sessions,
                    failed.len(),
                    first.and_then(|r| r.error.clone()).unwrap_or_else(|| "no error recorded".into())
                )),
            ),
        };
        cell
    }

    fn not_started(&self, why: &CellError) -> ConversationCell {
        ConversationCell { status: CellStatus::Error, reason: Some(why.to_string()), ..self.cell.clone() }
    }

    fn line(&self, row: &ConversationCell) -> String {
        let p50 = |k: usize| row.per_turn.get(k).and_then(|t| t.ttft_ms).and_then(|d| d.p50);
        let last = row.per_turn.len().saturating_sub(1);
        let ms = |v: Option<f64>| v.map_or("—".into(), |v| format!("{v:.0} ms"));
        format!(
            "{}: {} · TTFT p50 turn 1 {} → turn {} {}{}",
            self.label(),
            row.status.label(),
            ms(p50(0)),
            last + 1,
            ms(p50(last)),
            row.reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
        )
    }

    fn record(&self, s: &mut Session, row: ConversationCell) {
        s.results.conversations[self.index] = row;
    }
}

/// A request's turn sample: TTFT, E2E when it finished, each token's share of its chunk's gap.
fn sample(r: &StreamRecord) -> TurnSample {
    let itl_ms = r
        .chunks
        .windows(2)
        .flat_map(|w| {
            let k = w[1].tokens.max(1);
            std::iter::repeat_n((w[1].t_ms - w[0].t_ms) / f64::from(k), k as usize)
        })
        .collect();
    TurnSample {
        ttft_ms: r.ttft_ms(),
        e2e_ms: r.finished().then(|| r.ended_ms.map(|e| e - r.sent_ms)).flatten(),
        itl_ms,
        prompt_tokens: r.served_prompt_tokens(),
        failed: !r.finished(),
    }
}

/// Why a turn's hit rate has no source.
fn missing_reason(s: &Session, sessions: u32) -> String {
    let usage = "the server's responses carried neither usage.prompt_tokens_details.cached_tokens nor timings.cache_n";
    match (sessions, s.has_metrics) {
        (1, true) => format!("{usage}, and its /metrics has no prefix-cache hit and query counters"),
        (1, false) => format!("{usage}, and the server has no usable /metrics"),
        (n, _) => format!(
            "{usage}, and the prefix-cache counters of /metrics cannot be split by turn while {n} sessions' turns overlap (one session, --concurrency 1, reads them around each turn)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::client::Chunk;

    #[test]
    fn a_sample_spreads_each_chunks_gap_over_its_tokens() {
        let r = StreamRecord {
            sent_ms: 100.0,
            chunks: vec![
                Chunk { t_ms: 150.0, tokens: 1 },
                Chunk { t_ms: 170.0, tokens: 1 },
                Chunk { t_ms: 200.0, tokens: 3 },
            ],
            ..StreamRecord::default()
        };
        let t = sample(&r);
        assert_eq!(t.ttft_ms, Some(50.0));
        assert_eq!(t.itl_ms, vec![20.0, 10.0, 10.0, 10.0]);
        assert!(t.failed && t.e2e_ms.is_none(), "no [DONE], no finish reason: not finished");
    }
}
