//! One prefill row ([`PrefillAt`]): a cold `max_tokens: 1` request at one context
//! (docs/METHODOLOGY.md, "Prefill"), which also warms the prefix cache for that context's decode
//! cells. The row says how cold it really was: the prompt tokens the server served from its
//! prefix cache, from the request's `usage.prompt_tokens_details`, else llama.cpp's
//! `timings.cache_n`, else the growth of the server's prefix-cache hit counter around the
//! request; above the registry's threshold the row carries a warning.
//!
//! A warm row (`--prefix-share`, [`PrefillAt::prefix_share`]) measures TTFT with a prefix of
//! the prompt cached: the cache put in a known state first (reset, else salted prompts), the
//! prefix sent once in a request of its own, then the measured request — the same prefix and a
//! rest of its own — with the hit rate the server measured beside the planned share
//! ([`crate::measuring::prefix`]).
//!
//! As a [`Measurement`]: warm builds the prompt (nothing is sent for a cold row; a warm row
//! sends its warm-up), the window is the one request between two `/metrics` readings, the
//! drain has nothing left open.

use crate::measuring::client::StreamRecord;
use crate::measuring::error::CellError;
use crate::measuring::measure::{counter_delta, sample};
use crate::measuring::measurement::Measurement;
use crate::measuring::prompt::Prompt;
use crate::measuring::scrape::Scrape;
use crate::measuring::session::Session;
use speedmatrix_schema::progress::{Current, Measuring, Phase};
use speedmatrix_schema::stats::round3;
use speedmatrix_schema::status::cached_prefill_warning;
use speedmatrix_schema::{CachedTokensSource, CellStatus, ContextSize, PrefillRow};

/// The prefill row `index` of the results, at `context`.
pub struct PrefillAt {
    /// Its place in `results.prefill`.
    pub index: usize,
    /// Its context.
    pub context: ContextSize,
    /// A warm row's prefix share; `None` for a cold row.
    pub prefix_share: Option<f64>,
}

/// What the warm stage prepared: the prompt to measure and, for a warm row, how its cache
/// began.
pub struct PrefillPrompt {
    prompt: Prompt,
    start: Option<crate::measuring::prefix::Start>,
}

/// What the window saw: the request's record between the counters before and after it.
pub struct PrefillSeen {
    before: Option<Scrape>,
    record: StreamRecord,
    after: Option<Scrape>,
}

impl Measurement for PrefillAt {
    type Warmed = PrefillPrompt;
    type Open = PrefillSeen;
    type Seen = PrefillSeen;
    type Row = PrefillRow;

    fn current(&self) -> Current {
        Current {
            measuring: Measuring::Prefill { context: self.context.clone() },
            phase: Phase::Prefill,
            window_elapsed_s: None,
            live_tps: None,
            streams_running: Some(1),
        }
    }

    fn name(&self) -> String {
        format!("prefill {}{}", self.context.label, speedmatrix_schema::prefix::name_suffix(self.prefix_share))
    }

    async fn warm(&self, s: &mut Session) -> Result<PrefillPrompt, CellError> {
        let Some(share) = self.prefix_share else {
            let prompt = s.build_prompt(&format!("context {}", self.context.label), &self.context).await?;
            return Ok(PrefillPrompt { prompt, start: None });
        };
        let start = s.cache_start().await;
        let tag = format!("prefill {} prefix {}", self.context.label, speedmatrix_schema::prefix::share_label(share));
        let salt = format!("row {}", self.index);
        let shared = crate::measuring::prefix::build(s, &self.context, share, &tag, start.salt(&salt)).await?;
        crate::measuring::prefix::warm(s, &shared, 1).await?;
        Ok(PrefillPrompt { prompt: shared.prompt(0), start: Some(start) })
    }

    async fn window(&self, s: &mut Session, warmed: &PrefillPrompt) -> PrefillSeen {
        let before = s.scrape().await;
        let record = s.single(&warmed.prompt.text, 1).await;
        let after = s.scrape().await;
        PrefillSeen { before, record, after }
    }

    async fn drain(&self, _: &mut Session, seen: PrefillSeen) -> PrefillSeen {
        seen // one request, already complete
    }

    fn figures(&self, s: &mut Session, warmed: PrefillPrompt, seen: PrefillSeen) -> PrefillRow {
        match (self.prefix_share, warmed.start) {
            (Some(share), Some(start)) => warm_row(s, &self.context, share, &start, warmed.prompt, seen),
            _ => prefill_row(s, &self.context, warmed.prompt, seen),
        }
    }

    fn not_started(&self, why: &CellError) -> PrefillRow {
        let mut row = PrefillRow::new(self.context.clone(), CellStatus::Error, Some(why.to_string()));
        row.completed_requests = Some(0);
        row.prefix_share = self.prefix_share;
        row
    }

    fn line(&self, row: &PrefillRow) -> String {
        format!(
            "prefill {:>6}{}: {} · prompt {} tok/s · TTFT {} ms{}",
            row.context.label,
            crate::measuring::prefix::line_part(row.prefix_share, row.prefix_cache.as_ref()),
            row.status.label(),
            row.prompt_tps.map_or("—".into(), |v| format!("{v:.0}")),
            row.ttft_ms.map_or("—".into(), |v| format!("{v:.0}")),
            row.reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
        )
    }

    fn record(&self, s: &mut Session, row: PrefillRow) {
        s.results.prefill[self.index] = row;
    }
}

/// The row of `ctx` from its request: prompt tok/s and TTFT, how many prompt tokens were
/// cached, the warnings; a measured row's prompt is the context's warmed one.
fn prefill_row(s: &mut Session, ctx: &ContextSize, prompt: Prompt, seen: PrefillSeen) -> PrefillRow {
    prefill_row_of(s, ctx, prompt, seen, true)
}

/// A row's figures from its request; `cold`: the row is a cold one (its cached tokens warned
/// of, its prompt kept as the context's warmed one for the decode cells).
fn prefill_row_of(s: &mut Session, ctx: &ContextSize, prompt: Prompt, seen: PrefillSeen, cold: bool) -> PrefillRow {
    let PrefillSeen { before, record: rec, after } = seen;
    let mut row = PrefillRow::new(ctx.clone(), CellStatus::Error, None);
    row.completed_requests = Some(0);
    let weights: Vec<f64> = rec.chunks.iter().map(|c| f64::from(c.tokens)).collect();
    row.requests.push(sample(&rec, &weights, true, None));
    row.prompt_tokens = rec.served_prompt_tokens().or(prompt.tokens);
    let prompt_note = s.prompt_check(ctx, row.prompt_tokens, prompt.tokens);
    let from_metrics = match (before, after) {
        (Some(a), Some(b)) => counter_delta(&[a.clone(), b.clone()], |m| m.prefix_hits, a.t_ms, b.t_ms),
        _ => None,
    };
    (row.cached_tokens, row.cached_tokens_source) = match (rec.cached_tokens, &rec.server_timings) {
        (Some(c), _) => (Some(c), Some(CachedTokensSource::Usage)),
        (None, Some(t)) if t.cached_tokens.is_some() => (t.cached_tokens, Some(CachedTokensSource::ServerTimings)),
        _ => match from_metrics {
            Some(d) => (Some(d.round() as u64), Some(CachedTokensSource::Prometheus)),
            None => (None, None),
        },
    };
    match (&rec.error, rec.ttft_ms()) {
        (Some(e), _) => row.reason = Some(e.clone()),
        (None, None) => row.reason = Some("the stream produced no token".into()),
        (None, Some(ttft)) => {
            row.status = CellStatus::Valid;
            row.ttft_ms = Some(round3(ttft));
            row.completed_requests = Some(u64::from(rec.finished()));
            row.prompt_tps = row.prompt_tokens.map(|t| round3(t as f64 / (ttft / 1000.0)));
            row.reason = row.cached_tokens.filter(|_| cold).and_then(|c| cached_prefill_warning(c, row.prompt_tokens));
            if row.prompt_tokens.is_none() {
                // The prompt was cut to an estimate (probe requests), so its length is not known.
                let why = crate::measuring::measure::uncounted_why([rec.prompt_tokens]);
                crate::measuring::measure::add_note(
                    &mut row.reason,
                    format!("prompt tokens and prompt tok/s unknown: {why}"),
                );
            }
            if let Some(w) = &row.reason {
                s.log(format!("warning: prefill {}: {w}", ctx.label));
            }
            if let Some(note) = crate::measuring::measure::rate_limit_note([&rec]) {
                s.log(format!("note: prefill {}: {note}", ctx.label));
                crate::measuring::measure::add_note(&mut row.reason, note);
            }
            // This request warmed the prefix cache for the decode cells of this context.
            if cold {
                s.warmed(ctx, 0, prompt, Some(ttft));
            }
        }
    }
    ended(s, &mut row, &rec);
    if let Some(note) = prompt_note {
        crate::measuring::measure::add_note(&mut row.reason, note);
    }
    row
}

/// A warm row from its request: TTFT and prompt tok/s as a cold row's (prompt tokens ÷ TTFT,
/// cached ones included), the cached tokens, and the prefix cache's figures — the hit rate the
/// server measured beside the planned share, with why when it is off.
fn warm_row(
    s: &mut Session,
    ctx: &ContextSize,
    share: f64,
    start: &crate::measuring::prefix::Start,
    prompt: Prompt,
    seen: PrefillSeen,
) -> PrefillRow {
    let scrapes: Vec<Scrape> = [seen.before.clone(), seen.after.clone()].into_iter().flatten().collect();
    let counted = crate::measuring::prefix::count([&seen.record], &scrapes);
    let mut row = prefill_row_of(s, ctx, prompt, seen, false);
    row.prefix_share = Some(share);
    let evidence = crate::measuring::prefix::evidence(s, row.prompt_tokens, None);
    let o = crate::measuring::prefix::outcome(share, start, counted, &scrapes, s.has_metrics, &evidence);
    if row.status.is_measured() {
        if let Some(note) = o.note {
            s.log(format!(
                "warning: prefill {}{}: {note}",
                ctx.label,
                speedmatrix_schema::prefix::name_suffix(Some(share))
            ));
            crate::measuring::measure::add_note(&mut row.reason, note);
        }
        row.missing.extend(o.missing);
    }
    row.prefix_cache = Some(o.figures);
    row
}

/// How the row's request ended, against its `max_tokens: 1`: cut short by the server (the row
/// an error), or running past it (a note; the over-capacity rule learns the length).
fn ended(s: &mut Session, row: &mut PrefillRow, rec: &crate::measuring::client::StreamRecord) {
    s.outputs_measured([rec]);
    let v = crate::measuring::endings::verdict([rec], 1);
    for note in v.error.iter().chain(&v.notes) {
        s.log(format!("note: prefill {}: {note}", row.context.label));
    }
    if let Some(why) = v.error.filter(|_| row.status.is_measured()) {
        (row.status, row.ttft_ms, row.prompt_tps, row.reason) = (CellStatus::Error, None, None, Some(why));
    }
    for note in v.notes {
        crate::measuring::measure::add_note(&mut row.reason, note);
    }
}
