//! How long the rest of a run will take (pure): the rows and cells of a results file still
//! `not_run`, each costed from its real parts — a prefill row is one cold prompt at the
//! server's prompt rate, a decode context needs a warm-up (one cold prompt per warmed prompt)
//! unless its prefill row warmed it, and a decode cell is readiness (its N streams opening
//! until every one decodes) + the window + a drain allowance. The rates come from what the file
//! has measured so far: prompt tok/s from its prefill rows that counted their prompt tokens, readiness from its decode cells'
//! `readiness.after_ms`, fitted over N. Before anything is measured the rates are stated
//! assumptions ([`ASSUMED_PROMPT_TPS`], [`ASSUMED_READINESS`]), and the estimate says so.
//!
//! The collector prints the estimate of a fresh plan and corrects it in its progress line as
//! rows and cells land; a page following a run can compute the same from the partial file.

use crate::{CellStatus, PromptSharing, Results};

/// Prompt tok/s assumed until a prefill row is measured (a mid-sized model on one current GPU).
pub const ASSUMED_PROMPT_TPS: f64 = 10_000.0;
/// Readiness assumed until a decode cell is measured, s: a fixed part and a part per stream
/// (the opening streams' prefill from a warm prefix cache and their first steps; close to the
/// seed's H200 run, 0.2 s at 1 stream and 5 s at 32 on its twin).
pub const ASSUMED_READINESS: Readiness = Readiness { base_s: 0.2, per_stream_s: 0.16 };
/// Time after a window's close until the next stage starts (cancel and collect), s.
pub const DRAIN_S: f64 = 0.1;
/// Per prompt sent alone (prefill row or warm-up), beyond its prefill: building the prompt and
/// the round trips around it, s.
pub const PER_PROMPT_S: f64 = 0.1;
/// The pace of a conversation's answers assumed until a conversation cell is measured: per
/// output token, a fixed part and a part per session at once (the seed's H200 run decodes at
/// 4.2 ms per token with 1 stream, 6.1 ms with 8 and 10.1 ms with 32).
pub const ASSUMED_ANSWER_PACE: Pace = Pace { base_ms: 4.0, per_stream_ms: 0.2 };

/// Time per output token of a stream among `n`, ms ≈ `base_ms + per_stream_ms × n`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    /// The fixed part, ms per token.
    pub base_ms: f64,
    /// The part per stream, ms per token.
    pub per_stream_ms: f64,
}

impl Pace {
    /// Time per output token of a stream among `n`, s.
    pub fn at(&self, n: u32) -> f64 {
        (self.base_ms + self.per_stream_ms * f64::from(n)).max(0.0) / 1000.0
    }
}

/// Readiness of a cell of `n` streams ≈ `base_s + per_stream_s × n`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Readiness {
    /// The fixed part, s.
    pub base_s: f64,
    /// The part per stream, s.
    pub per_stream_s: f64,
}

impl Readiness {
    /// Readiness of a cell of `n` streams, s.
    pub fn at(&self, n: u32) -> f64 {
        (self.base_s + self.per_stream_s * f64::from(n)).max(0.0)
    }
}

/// Where a rate of the estimate came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// Measured in this run.
    Measured,
    /// Assumed (nothing measured yet).
    Assumed,
}

/// The estimate of what is left of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// Everything left, s.
    pub total_s: f64,
    /// Prefill rows left, s.
    pub prefill_s: f64,
    /// Warm-ups left, s.
    pub warmup_s: f64,
    /// Decode cells left (readiness + window + drain each), rate cells and traces, s.
    pub decode_s: f64,
    /// Conversation cells left (`--turns`: each turn's new prompt tokens, its answer, the
    /// think time between turns), s.
    pub conversations_s: f64,
    /// The prompt rate used, tok/s, and where it came from.
    pub prompt_tps: (f64, Basis),
    /// The readiness model used, and where it came from.
    pub readiness: (Readiness, Basis),
    /// The pace of conversation answers used, and where it came from.
    pub answer_pace: (Pace, Basis),
}

impl Estimate {
    /// What the estimate assumed rather than measured, as a clause for a line ("assuming 10,000
    /// prompt tok/s and readiness 0.2 s + 0.16 s per stream"), or `None` when all is measured.
    pub fn assumptions(&self) -> Option<String> {
        let mut parts = vec![];
        if self.prompt_tps.1 == Basis::Assumed && self.prefill_s + self.warmup_s + self.conversations_s > 0.0 {
            parts.push(format!("{} prompt tok/s", crate::registry::format_int(self.prompt_tps.0.round() as u64)));
        }
        if self.readiness.1 == Basis::Assumed && self.decode_s > 0.0 {
            let r = self.readiness.0;
            parts.push(format!("readiness {:.1} s + {:.2} s per stream", r.base_s, r.per_stream_s));
        }
        if self.answer_pace.1 == Basis::Assumed && self.conversations_s > 0.0 {
            let p = self.answer_pace.0;
            parts.push(format!("answers at {:.1} ms + {:.1} ms per session per token", p.base_ms, p.per_stream_ms));
        }
        (!parts.is_empty()).then(|| format!("assuming {}", parts.join(" and ")))
    }
}

/// A duration for a person, as precise as an estimate can be: "45 s", "3 min 20 s" (to 10 s
/// under 10 min), "27 min", "1 h 05 min".
pub fn duration_text(s: f64) -> String {
    let s = if s.is_finite() { s.max(0.0).round() as u64 } else { 0 };
    match s {
        0..=89 => format!("{s} s"),
        90..=599 => match (s + 5) / 10 * 10 {
            t if t % 60 == 0 => format!("{} min", t / 60),
            t => format!("{} min {:02} s", t / 60, t % 60),
        },
        600..=3599 => format!("{} min", (s + 30) / 60),
        _ => {
            let m = (s + 30) / 60;
            format!("{} h {:02} min", m / 60, m % 60)
        }
    }
}

/// The prompt rate measured so far: prompt tokens over prefill time of the valid prefill rows
/// whose prompt tokens were counted. A row whose count is null (or 0: not a count) gives the file
/// no prompt rate, so it gives the estimate none either — its context's nominal size is not what
/// the server prefilled; with no counted row the estimate stays on [`ASSUMED_PROMPT_TPS`] and
/// says so.
pub fn measured_prompt_tps(r: &Results) -> Option<f64> {
    let (tokens, secs) = r
        .prefill
        .iter()
        .filter(|p| p.status == CellStatus::Valid)
        .filter_map(|p| Some((p.prompt_tokens.filter(|&t| t > 0)? as f64, p.ttft_ms? / 1000.0)))
        .fold((0.0, 0.0), |(t, s), (a, b)| (t + a, s + b));
    (secs > 0.0 && tokens > 0.0).then_some(tokens / secs)
}

/// The readiness model measured so far: a least-squares line through (N, readiness) of the
/// measured cells (the fixed part at least 0); with one level only, the assumed line scaled to
/// pass through its mean.
pub fn measured_readiness(r: &Results) -> Option<Readiness> {
    let pts: Vec<(f64, f64)> = r
        .decode
        .iter()
        .filter_map(|c| Some((f64::from(c.concurrency), c.readiness.as_ref()?.after_ms / 1000.0)))
        .filter(|(_, y)| y.is_finite())
        .collect();
    Some(match fit_line(&pts)? {
        Fit::Line { base, slope } => Readiness { base_s: base, per_stream_s: slope },
        Fit::Mean { x, y } => {
            let scale = y / ASSUMED_READINESS.at(x as u32).max(1e-9);
            Readiness { base_s: ASSUMED_READINESS.base_s * scale, per_stream_s: ASSUMED_READINESS.per_stream_s * scale }
        }
    })
}

/// The estimate of the rows and cells of `r` still `not_run`, and of the repeats
/// (`config.repeats`) its decode cells still need. `warm` lists the contexts
/// (tokens) whose prompts the server already holds from this process (a prefill row or an
/// earlier cell warmed them): their decode cells need no warm-up. A context whose prefill row
/// is still to run is warmed by it.
pub fn remaining(r: &Results, warm: &[u64]) -> Estimate {
    let prompt_tps = match measured_prompt_tps(r) {
        Some(v) => (v, Basis::Measured),
        None => (ASSUMED_PROMPT_TPS, Basis::Assumed),
    };
    let readiness = match measured_readiness(r) {
        Some(m) => (m, Basis::Measured),
        None => (ASSUMED_READINESS, Basis::Assumed),
    };
    let prompt_s = |tokens: u64| tokens as f64 / prompt_tps.0 + PER_PROMPT_S;
    let left = |s: CellStatus| s == CellStatus::NotRun;
    let prefill_s: f64 = r.prefill.iter().filter(|p| left(p.status)).map(|p| prompt_s(p.context.tokens)).sum();
    let distinct = r.config.prompt_sharing == Some(PromptSharing::Distinct);
    let mut warmup_s = 0.0;
    for ctx in &r.config.contexts {
        let cells: Vec<u32> = r
            .decode
            .iter()
            .filter(|c| c.context.tokens == ctx.tokens && crate::repeats::left(c, crate::repeats::planned(r)) > 0)
            .map(|c| c.concurrency)
            .collect();
        let Some(&most) = cells.iter().max() else { continue };
        let first_warm =
            warm.contains(&ctx.tokens) || r.prefill.iter().any(|p| p.context.tokens == ctx.tokens && left(p.status));
        let prompts = if distinct { most } else { 1 };
        let cold = u64::from(prompts).saturating_sub(u64::from(first_warm));
        warmup_s += cold as f64 * prompt_s(ctx.tokens);
    }
    // A run the collector writes always plans its window; an import without one costs none.
    let window_s = r.config.window_s.unwrap_or(0.0);
    // Every repeat of a cell opens, waits for readiness, measures and drains again.
    let n = crate::repeats::planned(r);
    let decode_s: f64 = r
        .decode
        .iter()
        .map(|c| f64::from(crate::repeats::left(c, n)) * (readiness.0.at(c.concurrency) + window_s + DRAIN_S))
        .sum::<f64>()
        + rates_s(r, window_s, &prompt_s)
        + traces_s(r);
    let answer_pace = match measured_answer_pace(r) {
        Some(p) => (p, Basis::Measured),
        None => (ASSUMED_ANSWER_PACE, Basis::Assumed),
    };
    let conversations_s: f64 = r
        .conversations
        .iter()
        .filter(|c| c.status == CellStatus::NotRun)
        .map(|c| conversation_s(c, prompt_tps.0, &answer_pace.0))
        .sum();
    Estimate {
        total_s: prefill_s + warmup_s + decode_s + conversations_s,
        prefill_s,
        warmup_s,
        decode_s,
        conversations_s,
        prompt_tps,
        readiness,
        answer_pace,
    }
}

/// One conversation cell (`--turns`), s: its warm stage builds each session's turn-1 prompt
/// ([`PER_PROMPT_S`] each); its sessions then run side by side, so it lasts as long as one
/// session, whose turns wait for the server's prefill of every session's new tokens (turn 1 a
/// prompt of its own, cold; each later turn only the last answer and the new message, the
/// history cached), then answer at the pace of that many streams; the think time passes
/// between turns (not after the last).
pub fn conversation_s(c: &crate::ConversationCell, prompt_tps: f64, pace: &Pace) -> f64 {
    let sessions = f64::from(c.sessions.max(1));
    let prefill = |tokens: u64| sessions * tokens as f64 / prompt_tps.max(1.0);
    let answer = f64::from(c.answer_tokens) * pace.at(c.sessions);
    let first = prefill(c.first_prompt_tokens) + answer;
    let later = prefill(u64::from(c.answer_tokens) + c.follow_up_tokens) + answer + c.think_time_s;
    sessions * PER_PROMPT_S + first + f64::from(c.turns.saturating_sub(1)) * later
}

/// The answers' pace measured so far: the median inter-token latency of the measured
/// conversation cells' turns, fitted over their sessions as [`measured_readiness`] fits
/// readiness (one level: the assumed line scaled through it).
pub fn measured_answer_pace(r: &Results) -> Option<Pace> {
    let pts: Vec<(f64, f64)> = r
        .conversations
        .iter()
        .flat_map(|c| c.per_turn.iter().filter_map(move |t| Some((f64::from(c.sessions), t.itl_ms.as_ref()?.p50?))))
        .filter(|(_, y)| y.is_finite())
        .collect();
    let line = fit_line(&pts)?;
    Some(match line {
        Fit::Line { base, slope } => Pace { base_ms: base, per_stream_ms: slope },
        Fit::Mean { x, y } => {
            let scale = y / (ASSUMED_ANSWER_PACE.at(x as u32) * 1000.0).max(1e-9);
            Pace {
                base_ms: ASSUMED_ANSWER_PACE.base_ms * scale,
                per_stream_ms: ASSUMED_ANSWER_PACE.per_stream_ms * scale,
            }
        }
    })
}

/// A least-squares line through points (x, y), its intercept at least 0 and its slope at
/// least 0; or, with one x only, their mean point.
enum Fit {
    Line { base: f64, slope: f64 },
    Mean { x: f64, y: f64 },
}

fn fit_line(pts: &[(f64, f64)]) -> Option<Fit> {
    if pts.is_empty() {
        return None;
    }
    let n = pts.len() as f64;
    let (mx, my) = (pts.iter().map(|p| p.0).sum::<f64>() / n, pts.iter().map(|p| p.1).sum::<f64>() / n);
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx <= 0.0 {
        return Some(Fit::Mean { x: mx, y: my });
    }
    let slope = (pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>() / sxx).max(0.0);
    Some(Fit::Line { base: (my - slope * mx).max(0.0), slope })
}

/// The traces still to replay (`--trace`): each its replay (the slice's span ÷ the speed) and
/// a drain.
fn traces_s(r: &Results) -> f64 {
    let Some(t) = &r.config.trace else { return 0.0 };
    let left = r.traces.iter().filter(|x| x.cell.status == CellStatus::NotRun).count();
    left as f64 * (t.span_s / t.speed.max(1e-3) + DRAIN_S)
}

/// The rate cells still to measure: each a warm-up (its first request: a cold prefill, then
/// about half a window of decode), the window, and a drain (at most a window; half assumed).
fn rates_s(r: &Results, window_s: f64, prompt_s: &dyn Fn(u64) -> f64) -> f64 {
    let cell = |tokens: u64| prompt_s(tokens) + 2.0 * window_s + DRAIN_S;
    let planned: f64 = r
        .rates
        .iter()
        .filter(|c| c.status == CellStatus::NotRun && c.reason.as_deref() == Some("pending"))
        .map(|c| cell(c.context.tokens))
        .sum();
    // `--rates auto`: about 7 cells per context still to search (doubling, then bisecting).
    let searching: f64 = match r.config.rate_search {
        true => r
            .config
            .contexts
            .iter()
            .filter(|c| !r.rate_at_slo.iter().any(|f| f.context.tokens == c.tokens))
            .map(|c| 7.0 * cell(c.tokens))
            .sum(),
        false => 0.0,
    };
    planned + searching
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ContextSize, DecodeCell, PrefillRow, ReadinessOutcome};

    /// A fresh plan like the demo's: prefill at 8K and 64K, decode 8K and 64K × 1, 8, 32, 5 s.
    fn plan() -> Results {
        let mut r = crate::load_results(include_bytes!("../../tests/fixtures/round1/twin-tiny.json"))
            .expect("the tiny twin fixture");
        let ctx = |t: u64| ContextSize { label: format!("{}K", t / 1024), tokens: t };
        r.config.contexts = vec![ctx(8192), ctx(65536)];
        r.config.concurrency = vec![1, 8, 32];
        r.config.window_s = Some(5.0);
        r.config.prompt_sharing = Some(PromptSharing::Shared);
        r.prefill = r.config.contexts.iter().map(|c| PrefillRow::new(c.clone(), CellStatus::NotRun, None)).collect();
        r.decode = r
            .config
            .contexts
            .iter()
            .flat_map(|c| [1, 8, 32].map(|n| DecodeCell::new(c.clone(), n, CellStatus::NotRun, None)))
            .collect();
        r
    }

    #[test]
    fn a_fresh_plan_is_costed_from_its_parts_and_says_what_it_assumes() {
        let r = plan();
        let e = remaining(&r, &[]);
        let prefill = (8192.0 + 65536.0) / ASSUMED_PROMPT_TPS + 2.0 * PER_PROMPT_S;
        assert!((e.prefill_s - prefill).abs() < 1e-9, "{e:?}");
        assert_eq!(e.warmup_s, 0.0, "both decode contexts are warmed by their prefill rows");
        let cells = 2.0 * (3.0 * (ASSUMED_READINESS.base_s + 5.0 + DRAIN_S) + 41.0 * ASSUMED_READINESS.per_stream_s);
        assert!((e.decode_s - cells).abs() < 1e-9, "{e:?}");
        assert_eq!(
            e.assumptions().as_deref(),
            Some("assuming 10,000 prompt tok/s and readiness 0.2 s + 0.16 s per stream")
        );
    }

    #[test]
    fn every_repeat_of_a_cell_is_costed_and_measured_ones_are_not() {
        let once = remaining(&plan(), &[]).decode_s;
        let mut r = plan();
        r.config.repeats = Some(3);
        assert!((remaining(&r, &[]).decode_s - 3.0 * once).abs() < 1e-9);
        // The 8K × 1 cell measured twice: one repeat of it is left.
        let cell = &r.decode[0];
        let (one, mut measured) = (ASSUMED_READINESS.at(1) + 5.0 + DRAIN_S, cell.clone());
        measured.status = CellStatus::Valid;
        measured = crate::repeats::fold(cell, measured.clone(), 1);
        r.decode[0] = crate::repeats::fold(&measured, measured.clone(), 2);
        assert!((remaining(&r, &[]).decode_s - (3.0 * once - 2.0 * one)).abs() < 1e-9);
        let p = crate::progress::progress(&r, None);
        assert_eq!((p.done, p.planned), (2, 2 + 6 * 3));
        assert_eq!(p.count_text(), "2/20 rows and cell repeats (3 per cell)");
    }

    #[test]
    fn measured_rows_and_cells_replace_the_assumptions() {
        let mut r = plan();
        // The 8K prefill row measured at 20,000 tok/s.
        r.prefill[0].status = CellStatus::Valid;
        r.prefill[0].prompt_tokens = Some(8192);
        r.prefill[0].ttft_ms = Some(409.6);
        let e = remaining(&r, &[8192]);
        assert_eq!(e.prompt_tps.1, Basis::Measured);
        assert!((e.prompt_tps.0 - 20_000.0).abs() < 1e-6);
        assert!((e.prefill_s - (65536.0 / 20_000.0 + PER_PROMPT_S)).abs() < 1e-9);
        // Two cells measured: readiness 0.5 s at 1 stream, 2.25 s at 8 → 0.25 s + 0.25 s per stream.
        for (i, after) in [(0, 500.0), (1, 2250.0)] {
            r.decode[i].status = CellStatus::Valid;
            r.decode[i].readiness = Some(crate::Readiness {
                outcome: ReadinessOutcome::Ready,
                after_ms: after,
                limit_ms: 60_000.0,
                streams_producing: r.decode[i].concurrency,
            });
        }
        let e = remaining(&r, &[8192]);
        assert_eq!(e.readiness.1, Basis::Measured);
        assert!((e.readiness.0.base_s - 0.25).abs() < 1e-9 && (e.readiness.0.per_stream_s - 0.25).abs() < 1e-9);
        // Left: 8K × 32, 64K × 1, 8, 32, and the 64K prefill row.
        let cells = 4.0 * (0.25 + 5.0 + DRAIN_S) + 0.25 * f64::from(32 + 1 + 8 + 32);
        assert!((e.decode_s - cells).abs() < 1e-9, "{e:?}");
        assert_eq!(e.assumptions(), None);
        // A resumed run (nothing warm in this process) warms 64K through its prefill row, 8K again.
        r.prefill[1].status = CellStatus::Valid;
        r.prefill[1].prompt_tokens = Some(65536);
        r.prefill[1].ttft_ms = Some(3276.8);
        let e = remaining(&r, &[]);
        assert!((e.warmup_s - (8192.0 / 20_000.0 + PER_PROMPT_S + 65536.0 / 20_000.0 + PER_PROMPT_S)).abs() < 1e-9);
        // Distinct prompts: one warm-up per stream of the widest cell left.
        r.config.prompt_sharing = Some(PromptSharing::Distinct);
        let e = remaining(&r, &[8192, 65536]);
        assert!(
            (e.warmup_s - 31.0 * (8192.0 / 20_000.0 + PER_PROMPT_S) - 31.0 * (65536.0 / 20_000.0 + PER_PROMPT_S)).abs()
                < 1e-6
        );
    }

    #[test]
    fn a_prefill_row_whose_prompt_nothing_counted_gives_no_measured_rate() {
        let mut r = plan();
        // The 8K row measured, its prompt tokens counted by nothing (null in the file, with a
        // `missing` reason): its TTFT over the nominal 8,192 would be a rate the file calls unknown.
        r.prefill[0].status = CellStatus::Valid;
        r.prefill[0].prompt_tokens = None;
        r.prefill[0].ttft_ms = Some(409.6);
        assert_eq!(measured_prompt_tps(&r), None);
        let e = remaining(&r, &[8192]);
        assert_eq!(e.prompt_tps, (ASSUMED_PROMPT_TPS, Basis::Assumed));
        assert!((e.prefill_s - (65536.0 / ASSUMED_PROMPT_TPS + PER_PROMPT_S)).abs() < 1e-9, "{e:?}");
        assert_eq!(
            e.assumptions().as_deref(),
            Some("assuming 10,000 prompt tok/s and readiness 0.2 s + 0.16 s per stream")
        );
        // A count of 0 for an 8K prompt is not a count either.
        r.prefill[0].prompt_tokens = Some(0);
        assert_eq!(measured_prompt_tps(&r), None);
        // The 64K row counted: the rate is its own alone, the uncounted row adding no time.
        r.prefill[1].status = CellStatus::Valid;
        r.prefill[1].prompt_tokens = Some(65536);
        r.prefill[1].ttft_ms = Some(3276.8);
        let tps = measured_prompt_tps(&r).expect("one counted row");
        assert!((tps - 20_000.0).abs() < 1e-6, "{tps}");
        assert_eq!(remaining(&r, &[]).prompt_tps.1, Basis::Measured);
    }

    #[test]
    fn one_level_scales_the_assumed_line_and_nothing_left_costs_nothing() {
        let mut r = plan();
        r.decode[2].status = CellStatus::Valid;
        r.decode[2].readiness = Some(crate::Readiness {
            outcome: ReadinessOutcome::Ready,
            after_ms: 2.0 * ASSUMED_READINESS.at(32) * 1000.0,
            limit_ms: 60_000.0,
            streams_producing: 32,
        });
        let m = measured_readiness(&r).expect("one cell measured");
        assert!((m.at(8) - 2.0 * ASSUMED_READINESS.at(8)).abs() < 1e-9);
        for p in &mut r.prefill {
            p.status = CellStatus::Error;
        }
        for c in &mut r.decode {
            c.status = CellStatus::OverCapacity;
        }
        assert_eq!(remaining(&r, &[]).total_s, 0.0);
    }

    /// The tiny twin's conversation run (tests/fixtures/turns-twin.json): 1K, 1 session, 4
    /// turns of 32-token answers, think time 0.1 s; its turns took 69, 66, 66 and 66 ms (E2E
    /// p50) at 2.1 ms per token, 0.57 s with the think time.
    fn turns() -> Results {
        crate::load_results(include_bytes!("../../tests/fixtures/turns-twin.json")).expect("the turns fixture")
    }

    #[test]
    fn a_conversation_is_costed_by_its_turns_new_tokens_answers_and_think_time() {
        let mut r = turns();
        let took: f64 =
            r.conversations[0].per_turn.iter().map(|t| t.e2e_ms.as_ref().unwrap().p50.unwrap()).sum::<f64>() / 1000.0
                + 3.0 * 0.1;
        // Measured: the answers' pace is the cell's own, 2.1 ms per token at 1 session.
        let pace = measured_answer_pace(&r).expect("a measured conversation");
        assert!((pace.at(1) * 1000.0 - 2.1).abs() < 0.01, "{pace:?}");
        r.conversations[0].status = CellStatus::NotRun;
        let e = remaining(&r, &[]);
        assert_eq!(e.answer_pace.1, Basis::Measured);
        assert!((e.conversations_s - conversation_s(&r.conversations[0], ASSUMED_PROMPT_TPS, &pace)).abs() < 1e-9);
        // 0.1 s building the prompt + 736 cold tokens + 3 × (96 new tokens + 0.1 s) + 4 answers.
        let want = PER_PROMPT_S + (736.0 + 3.0 * 96.0) / ASSUMED_PROMPT_TPS + 3.0 * 0.1 + 4.0 * 32.0 * pace.at(1);
        assert!((e.conversations_s - want).abs() < 1e-9, "{e:?}");
        assert!(e.conversations_s < 2.0 * took, "{} s against the {took:.2} s its turns took", e.conversations_s);
        assert_eq!(e.decode_s, 0.0, "a conversation run has no decode cells to cost");
        assert_eq!(e.total_s, e.conversations_s);
        // Before any is measured: the assumed pace, said; no readiness (no decode cell) assumed.
        r.conversations[0].per_turn.clear();
        let e = remaining(&r, &[]);
        assert_eq!(e.answer_pace, (ASSUMED_ANSWER_PACE, Basis::Assumed));
        assert_eq!(
            e.assumptions().as_deref(),
            Some("assuming 10,000 prompt tok/s and answers at 4.0 ms + 0.2 ms per session per token")
        );
        // The old rule (each turn a cold prefill of the whole context and 50 ms per answer token)
        // said 7.6 s for this 0.57-s cell; now within a few times the twin's (a fast server's).
        assert!(e.conversations_s < 4.0 * took, "{} s against {took:.2} s", e.conversations_s);
        // Sessions at once share the server's prefill and slow each stream.
        r.conversations[0].sessions = 8;
        let eight = remaining(&r, &[]).conversations_s;
        assert!(eight > e.conversations_s, "{eight} > {}", e.conversations_s);
    }

    #[test]
    fn durations_read_as_a_person_says_them() {
        assert_eq!(duration_text(44.6), "45 s");
        assert_eq!(duration_text(89.0), "89 s");
        assert_eq!(duration_text(90.0), "1 min 30 s");
        assert_eq!(duration_text(154.0), "2 min 30 s");
        assert_eq!(duration_text(176.0), "3 min");
        assert_eq!(duration_text(1508.0), "25 min");
        assert_eq!(duration_text(1620.0), "27 min");
        assert_eq!(duration_text(3900.0), "1 h 05 min");
        assert_eq!(duration_text(f64::NAN), "0 s");
    }
}
