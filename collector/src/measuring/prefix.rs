//! Prefix-share cells and warm prefill rows (`--prefix-share`, docs/METHODOLOGY.md, "Prefix
//! caching"): a known cache state before each (the server's prefix cache reset where it offers
//! a way, else prompts salted with text unique to the row or cell), prompts made of a prefix
//! shared by the row's or cell's requests and a rest unique to each request, the warm-up that
//! puts the prefix in the cache, and the measured hit rate beside the planned share.
//!
//! A prompt is `PREFIX` (the share of the context, sized with the server's tokenizer as a whole
//! prompt) then `[request NNNNNN · run RUN · TAG]` and prose, sized so the whole prompt is the
//! context; request `i` writes its number as `NNNNNN`, so every request's rest differs from its
//! first token while its length stays the same. Bodies are serialized once, split at the
//! number ([`Bodies`]).

use crate::measuring::client::StreamRecord;
use crate::measuring::error::CellError;
use crate::measuring::measure::{counter_delta, went_down};
use crate::measuring::prompt::Prompt;
use crate::measuring::scrape::Scrape;
use crate::measuring::session::Session;
use speedmatrix_schema::prefix::{
    below_reasons, hit_rate, off_plan_note, share_label, unexplained, Evidence, TOLERANCE,
};
use speedmatrix_schema::stats::round3;
use speedmatrix_schema::{CacheStart, ContextSize, HitRateSource, MissingFigure, PrefixCacheFigures};

/// The number of the warm-up request (llama.cpp: the first of one per slot, counting down);
/// measured requests count up from 0.
pub const WARM_ID: usize = 999_999;

/// The figure `missing` names when no source gives the hit rate.
pub const HIT_RATE_FIGURE: &str = "prefix_cache.measured_hit_rate";

pub use crate::measuring::cache_start::Start;

/// The prompts of one prefix-share row or cell: request `i`'s text is `before` + `i` (six
/// digits) + `after`.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedPrompt {
    before: String,
    after: String,
    /// The planned share, fraction 0–1.
    pub share: f64,
    /// Tokens of a whole prompt as the server counts them (`/tokenize`), if known.
    pub tokens: Option<u64>,
}

impl SharedPrompt {
    /// Request `id`'s prompt text.
    pub fn text(&self, id: usize) -> String {
        format!("{}{:06}{}", self.before, id % 1_000_000, self.after)
    }

    /// Request `id`'s prompt.
    pub fn prompt(&self, id: usize) -> Prompt {
        Prompt { text: self.text(id), tokens: self.tokens }
    }
}

/// The serialized request body of a [`SharedPrompt`], split where the request number goes.
#[derive(Debug, Clone)]
pub struct Bodies {
    before: bytes::Bytes,
    after: bytes::Bytes,
}

/// What marks the request number in a body while it is split (never in prose or a run id).
const MARK: &str = "@@speedmatrix-request@@";

impl Bodies {
    /// The bodies of `prompt` (`body` makes a request of a text, as the session does).
    pub fn new(prompt: &SharedPrompt, body: impl Fn(&str) -> serde_json::Value) -> Bodies {
        let text = format!("{}{MARK}{}", prompt.before, prompt.after);
        let bytes = crate::measuring::client::request_body(&body(&text));
        let at = bytes.windows(MARK.len()).position(|w| w == MARK.as_bytes()).unwrap_or(bytes.len());
        let end = (at + MARK.len()).min(bytes.len());
        Bodies { before: bytes.slice(..at), after: bytes.slice(end..) }
    }

    /// Request `id`'s body.
    pub fn of(&self, id: usize) -> bytes::Bytes {
        let digits = format!("{:06}", id % 1_000_000);
        let mut v = Vec::with_capacity(self.before.len() + 6 + self.after.len());
        v.extend_from_slice(&self.before);
        v.extend_from_slice(digits.as_bytes());
        v.extend_from_slice(&self.after);
        v.into()
    }
}

/// FNV-1a of a tag (the seed of its prose).
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// The prompts of a row or cell at `ctx` with `share` of each a shared prefix; `tag` names
/// the row or cell, and `salt` (empty after a reset) starts every prompt, so that a salted
/// row's or cell's prompts differ from any earlier one's from their first tokens.
///
/// # Errors
/// When `/tokenize` fails mid-search.
pub async fn build(
    s: &Session,
    ctx: &ContextSize,
    share: f64,
    tag: &str,
    salt: &str,
) -> Result<SharedPrompt, CellError> {
    let b = s.prompt_builder();
    let run = &b.run_id;
    let prefix_target = (share * ctx.tokens as f64).floor() as u64;
    let tag = if salt.is_empty() { tag.to_string() } else { format!("{salt} · {tag}") };
    let tag = tag.as_str();
    let salt = if salt.is_empty() { String::new() } else { format!("[{salt}]\n") };
    let prefix = if prefix_target > 0 {
        let head = format!(
            "{salt}[speedmatrix run {run} · shared prefix · {tag}] Read the following notes, then continue the story at length.\n\n"
        );
        let words = b.words(b.seed ^ fnv(tag) ^ 0x7072_6566, (prefix_target as usize).saturating_mul(12) / 10 + 64);
        let text_of = |k: usize| format!("{head}{}", words[..k].join(" "));
        b.fit(&text_of, words.len(), prefix_target).await.map_err(CellError::Prompt)?.text
    } else {
        salt
    };
    let before = format!("{prefix}\n[request ");
    let after_head = format!(" · run {run} · {tag}] ");
    let rest_target = ctx.tokens.saturating_sub(prefix_target);
    let words = b.words(b.seed ^ fnv(tag) ^ 0x7265_7374, (rest_target as usize).saturating_mul(12) / 10 + 64);
    let text_of = |k: usize| format!("{before}000000{after_head}{}", words[..k].join(" "));
    let whole = b.fit(&text_of, words.len(), ctx.tokens).await.map_err(CellError::Prompt)?;
    let after = whole.text[before.len() + 6..].to_string();
    Ok(SharedPrompt { before, after, share, tokens: whole.tokens })
}

/// Put the prefix of `prompt` in the server's cache: one `max_tokens: 1` request of its own
/// (rest [`WARM_ID`]); on a server with a prompt cache per slot (llama.cpp), one per slot that
/// `n` streams will take, at once, each pinned to its slot ([`Session::warm_slot`]). Returns the first warm-up's TTFT (a cold prefill of the
/// whole prompt: the readiness limit's yardstick).
///
/// # Errors
/// [`CellError::WarmUp`] when a warm-up request fails.
pub async fn warm(s: &Session, prompt: &SharedPrompt, n: u32) -> Result<Option<f64>, CellError> {
    let k = s.info.facts.slots.map_or(1, |slots| slots.min(n).max(1)) as usize;
    let texts: Vec<String> = (0..k).map(|i| prompt.text(WARM_ID - i)).collect();
    let warm_ups = texts.iter().zip(0u32..).map(|(t, i)| s.warm_slot(t, Some(i)));
    let records = futures_util::future::join_all(warm_ups).await;
    if let Some(e) = records.iter().find_map(|r| r.error.clone()) {
        return Err(CellError::WarmUp(e));
    }
    Ok(records.first().and_then(StreamRecord::ttft_ms))
}

/// What the server and the row's or cell's figures say about why a measured hit rate may be
/// off its plan: the server's caching switch and block size ([`Facts`]), the prompt's length,
/// and — for decode and rate cells — the KV-cache usage peak and preemptions from `/metrics`.
///
/// [`Facts`]: crate::measuring::engine::Facts
pub fn evidence(
    s: &Session,
    prompt_tokens: Option<u64>,
    server: Option<&speedmatrix_schema::ServerFigures>,
) -> Evidence {
    let f = &s.info.facts;
    Evidence {
        caching_on: f.prefix_caching,
        block_tokens: f.cache_block_tokens,
        prompt_tokens,
        kv_usage_max: server.and_then(|x| x.kv_cache_usage_max),
        preemptions: server.and_then(|x| x.preemptions),
        reset: false,
    }
}

/// Prompt tokens served from the cache and looked up, and where the counts came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Counted {
    /// Served from the cache, tokens.
    pub hits: u64,
    /// Looked up, tokens.
    pub queries: u64,
    /// Their source.
    pub source: HitRateSource,
}

/// The hit and query tokens of `records` from the server's own counts, in order of preference:
/// `usage.prompt_tokens_details.cached_tokens` of the requests that carried it (server usage),
/// llama.cpp's `timings` (`cache_n` of `cache_n + prompt_n`), else the prefix-cache counters'
/// growth from the first reading to the last (Prometheus). `None` when none gives them.
pub fn count<'a>(records: impl IntoIterator<Item = &'a StreamRecord> + Clone, scrapes: &[Scrape]) -> Option<Counted> {
    let usage: Vec<(u64, u64)> =
        records.clone().into_iter().filter_map(|r| Some((r.cached_tokens?, r.served_prompt_tokens()?))).collect();
    if !usage.is_empty() {
        let (hits, queries) = usage.iter().fold((0, 0), |(h, q), (c, p)| (h + c, q + p));
        return Some(Counted { hits, queries, source: HitRateSource::Usage });
    }
    let timings: Vec<(u64, u64)> = records
        .into_iter()
        .filter_map(|r| r.server_timings.as_ref())
        .filter_map(|t| Some((t.cached_tokens?, t.prompt_tokens?)))
        .collect();
    if !timings.is_empty() {
        let (hits, queries) = timings.iter().fold((0, 0), |(h, q), (c, p)| (h + c, q + c + p));
        return Some(Counted { hits, queries, source: HitRateSource::ServerTimings });
    }
    prometheus(scrapes)
}

/// The prefix-cache counters' growth from the first reading to the last (Prometheus); `None`
/// without two readings of both counters (one reading is no growth: a /metrics that failed
/// or answered late during the cell would read as "0 of 0 looked up"), or when either went
/// down between two readings (a restart).
fn prometheus(scrapes: &[Scrape]) -> Option<Counted> {
    if readings_with_counters(scrapes) < 2 {
        return None;
    }
    let (first, last) = (scrapes.first()?, scrapes.last()?);
    let hits = counter_delta(scrapes, |m| m.prefix_hits, first.t_ms, last.t_ms)?;
    let queries = counter_delta(scrapes, |m| m.prefix_queries, first.t_ms, last.t_ms)?;
    Some(Counted { hits: hits.round() as u64, queries: queries.round() as u64, source: HitRateSource::Prometheus })
}

/// Whether the prefix-cache hit or query counter read lower than the reading before it (a
/// server restarted during the row or cell).
fn counters_went_down(scrapes: &[Scrape]) -> bool {
    let (Some(first), Some(last)) = (scrapes.first(), scrapes.last()) else { return false };
    went_down(scrapes, |m| m.prefix_hits, first.t_ms, last.t_ms)
        || went_down(scrapes, |m| m.prefix_queries, first.t_ms, last.t_ms)
}

/// The readings that hold both prefix-cache counters.
fn readings_with_counters(scrapes: &[Scrape]) -> usize {
    scrapes.iter().filter(|s| s.metrics.prefix_hits.is_some() && s.metrics.prefix_queries.is_some()).count()
}

/// Why no source gave the hit rate, from the row's or cell's readings of /metrics.
fn missing_reason(has_metrics: bool, scrapes: &[Scrape]) -> String {
    let metrics = match (has_metrics, counters_went_down(scrapes), readings_with_counters(scrapes)) {
        (_, true, _) => {
            "the server's prefix-cache counters went down during it (a restart?), so they give no count over it"
        }
        (false, _, _) => "the server has no usable /metrics",
        (true, _, 0) if scrapes.is_empty() => {
            "no reading of the server's /metrics came during it (it failed or answered late)"
        }
        (true, _, 0) => "the server's /metrics has no prefix-cache hit and query counters",
        (true, _, _) => "only one reading of the server's prefix-cache counters came during it (its /metrics failed or answered late), which gives no count over it",
    };
    format!(
        "{metrics}, and its responses carried neither usage.prompt_tokens_details.cached_tokens nor timings.cache_n"
    )
}

/// The note when the responses' count (`counted`, usage or timings) and the Prometheus counters
/// over the same span give hit rates more than [`TOLERANCE`] apart: both figures, named. The
/// file's rate is the responses' (per request, exact); the counters also count requests whose
/// response carried no count (cancelled at the window's end) and anything else the server ran
/// meanwhile.
fn disagreement(counted: Counted, scrapes: &[Scrape]) -> Option<String> {
    if counted.source == HitRateSource::Prometheus {
        return None;
    }
    let prom = prometheus(scrapes)?;
    let (a, b) = (hit_rate(counted.hits, counted.queries)?, hit_rate(prom.hits, prom.queries)?);
    ((a - b).abs() > TOLERANCE + 1e-9).then(|| {
        format!(
            "prefix cache: the hit rate from {} ({}) and from the server's Prometheus counters ({}: {} of {} prompt tokens) disagree by {:.0} points; the file's rate is the responses' (other requests the server ran meanwhile count in its counters)",
            source_words(counted.source),
            share_label(round3(a)),
            share_label(round3(b)),
            prom.hits,
            prom.queries,
            (a - b).abs() * 100.0
        )
    })
}

/// What a row's or cell's prefix cache came to: its figures, the note when the measured rate
/// is off the plan (for its `reason`), and the missing figure when no source gave one.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The figures for the file.
    pub figures: PrefixCacheFigures,
    /// The off-plan note ([`off_plan_note`]).
    pub note: Option<String>,
    /// Why `measured_hit_rate` is null.
    pub missing: Option<MissingFigure>,
}

/// The note of a row or cell planned at `share` whose server counted no prompt token looked
/// up in its prefix cache (its counters did not grow): the plan was not hit, and why it may be.
fn nothing_looked_up(share: f64, evidence: &Evidence) -> String {
    let mut why = below_reasons(share, evidence);
    if why.is_empty() {
        why.push(unexplained(evidence));
    }
    format!(
        "prefix cache: the planned share {} was not hit: the server looked up none of the prompt tokens in its prefix cache; {}",
        share_label(share),
        why.join("; ")
    )
}

/// The prefix-cache figures of a row or cell planned at `share` that began as `start`, from
/// what `counted` gives ([`count`] of its records and `scrapes`); `evidence` explains an
/// off-plan rate. A second source that disagrees with the first by more than [`TOLERANCE`] is
/// named in the note with both rates.
pub fn outcome(
    share: f64,
    start: &Start,
    counted: Option<Counted>,
    scrapes: &[Scrape],
    has_metrics: bool,
    evidence: &Evidence,
) -> Outcome {
    let rate = counted.and_then(|c| hit_rate(c.hits, c.queries));
    let figures = PrefixCacheFigures {
        planned_share: share,
        cache_start: start.how,
        cache_start_detail: start.detail.clone(),
        measured_hit_rate: rate,
        hit_rate_source: counted.filter(|_| rate.is_some()).map(|c| c.source),
        hit_tokens: counted.map(|c| c.hits),
        query_tokens: counted.map(|c| c.queries),
    };
    let missing = rate.is_none().then(|| MissingFigure {
        figure: HIT_RATE_FIGURE.into(),
        reason: match counted {
            Some(_) => "the server counted no prompt tokens looked up in its prefix cache".into(),
            None => missing_reason(has_metrics, scrapes),
        },
    });
    let evidence = Evidence { reset: start.how == CacheStart::Reset, ..evidence.clone() };
    let off_plan = match (rate, counted) {
        (Some(m), _) => off_plan_note(share, m, &evidence),
        (None, Some(_)) if share > 0.0 => Some(nothing_looked_up(share, &evidence)),
        (None, _) => None,
    };
    let notes: Vec<String> = off_plan.into_iter().chain(counted.and_then(|c| disagreement(c, scrapes))).collect();
    let note = (!notes.is_empty()).then(|| notes.join("; "));
    Outcome { figures, note, missing }
}

/// A prefix-share decode or rate cell's fields that [`judge`] reads and writes.
pub struct Fields<'a> {
    /// Its prompt tokens (evidence of an off-plan rate).
    pub prompt_tokens: Option<u64>,
    /// Its server figures (evidence of an off-plan rate).
    pub server: Option<&'a speedmatrix_schema::ServerFigures>,
    /// Whether it was measured: only then are the note and the missing figure recorded.
    pub measured: bool,
    /// Its planned share.
    pub share: &'a mut Option<f64>,
    /// Its prefix-cache figures.
    pub figures: &'a mut Option<PrefixCacheFigures>,
    /// Its reason, which gets the off-plan note.
    pub reason: &'a mut Option<String>,
    /// Its missing figures, which get the hit rate's when no source gave it.
    pub missing: &'a mut Vec<MissingFigure>,
}

/// A cell [`judge`] judges: a decode cell or a rate cell.
pub trait ShareCell {
    /// Its [`Fields`].
    fn fields(&mut self) -> Fields<'_>;
}

macro_rules! share_cell {
    ($($t:ty),*) => {$(
        impl ShareCell for $t {
            fn fields(&mut self) -> Fields<'_> {
                Fields {
                    prompt_tokens: self.prompt_tokens,
                    server: self.server.as_ref(),
                    measured: self.status.is_measured(),
                    share: &mut self.prefix_share,
                    figures: &mut self.prefix_cache,
                    reason: &mut self.reason,
                    missing: &mut self.missing,
                }
            }
        }
    )*};
}

share_cell!(speedmatrix_schema::DecodeCell, speedmatrix_schema::RateCell);

/// A prefix-share cell's prefix cache (planned at `share`, begun as `start`), recorded on it:
/// the measured hit rate beside the plan ([`outcome`]), with why when it is off (in its reason
/// and on the terminal as a warning naming it `name`; never a silent valid) and why when no
/// source gave it.
pub fn judge(
    s: &Session,
    (share, start): (f64, &Start),
    (counted, scrapes): (Option<Counted>, &[Scrape]),
    name: &str,
    cell: &mut impl ShareCell,
) {
    let f = cell.fields();
    let evidence = evidence(s, f.prompt_tokens, f.server);
    let o = outcome(share, start, counted, scrapes, s.has_metrics, &evidence);
    if f.measured {
        if let Some(note) = o.note {
            s.log(format!("warning: {name}: {note}"));
            crate::measuring::measure::add_note(f.reason, note);
        }
        f.missing.extend(o.missing);
    }
    *f.share = Some(share);
    *f.figures = Some(o.figures);
}

/// The line's words for a row's or cell's prefix cache: `prefix 90% · hit 89.6% (Prometheus)`.
pub fn line_part(share: Option<f64>, figures: Option<&PrefixCacheFigures>) -> String {
    let Some(share) = share else { return String::new() };
    let hit = match figures.and_then(|f| f.measured_hit_rate.map(|m| (m, f.hit_rate_source))) {
        Some((m, src)) => {
            format!(" · hit {} ({})", share_label((m * 1000.0).round() / 1000.0), src.map_or("?", source_words))
        }
        None if figures.is_some() => " · hit rate unknown".into(),
        None => String::new(),
    };
    format!(" · prefix {}{hit}", share_label(share))
}

/// A hit-rate source in words.
pub fn source_words(s: HitRateSource) -> &'static str {
    s.words()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_split_at_the_request_number() {
        let p = SharedPrompt {
            before: "shared\n[request ".into(),
            after: " · run r] rest".into(),
            share: 0.5,
            tokens: None,
        };
        assert_eq!(p.text(17), "shared\n[request 000017 · run r] rest");
        let b = Bodies::new(&p, |t| serde_json::json!({"model": "m", "prompt": t}));
        let v: serde_json::Value = serde_json::from_slice(&b.of(42)).unwrap();
        assert_eq!(v["prompt"], "shared\n[request 000042 · run r] rest");
        assert_eq!(v["model"], "m");
    }

    #[test]
    fn counts_prefer_usage_then_timings_then_counters() {
        let mut a = StreamRecord { prompt_tokens: Some(1000), ..StreamRecord::default() };
        a.server_timings = Some(speedmatrix_schema::ServerTimings {
            prompt_tokens: Some(100),
            cached_tokens: Some(900),
            ..Default::default()
        });
        let c = count([&a], &[]).unwrap();
        assert_eq!((c.hits, c.queries, c.source), (900, 1000, HitRateSource::ServerTimings));
        a.cached_tokens = Some(896);
        let c = count([&a], &[]).unwrap();
        assert_eq!((c.hits, c.queries, c.source), (896, 1000, HitRateSource::Usage));
        let none = StreamRecord::default();
        assert_eq!(count([&none], &[]), None);
        // Readings of a /metrics without the counters.
        let bare = [0.0, 500.0].map(|t_ms| Scrape { t_ms, metrics: Default::default() });
        let o = outcome(
            0.9,
            &Start { how: CacheStart::Salted, detail: "no reset".into() },
            None,
            &bare,
            true,
            &Evidence::default(),
        );
        assert_eq!(o.figures.measured_hit_rate, None);
        assert!(o.missing.unwrap().reason.contains("no prefix-cache hit and query counters"));
        // Counters that did not grow (vLLM with --no-enable-prefix-caching): no rate, and the
        // reason says the plan was not hit.
        let nothing = Some(Counted { hits: 0, queries: 0, source: HitRateSource::Prometheus });
        let off = Evidence { caching_on: Some(false), ..Evidence::default() };
        let reset = Start { how: CacheStart::Reset, detail: "POST /reset_prefix_cache".into() };
        let o = outcome(0.9, &reset, nothing, &[], true, &off);
        assert_eq!(o.figures.measured_hit_rate, None);
        assert_eq!(
            o.note.as_deref(),
            Some("prefix cache: the planned share 90% was not hit: the server looked up none of the prompt tokens in its prefix cache; the server reports its prefix caching off")
        );
        assert!(o.missing.unwrap().reason.contains("counted no prompt tokens looked up"));
        assert_eq!(outcome(0.0, &reset, nothing, &[], true, &off).note, None, "a plan of 0 is no miss");
        let counted = Some(Counted { hits: 0, queries: 2000, source: HitRateSource::Prometheus });
        let off = Evidence { caching_on: Some(false), ..Evidence::default() };
        let o = outcome(
            0.9,
            &Start { how: CacheStart::Reset, detail: "POST /reset_prefix_cache".into() },
            counted,
            &[],
            true,
            &off,
        );
        assert_eq!(o.figures.measured_hit_rate, Some(0.0));
        assert!(o.note.unwrap().contains("prefix caching off"));
        assert_eq!(line_part(Some(0.9), Some(&o.figures)), " · prefix 90% · hit 0% (Prometheus)");
    }

    fn reading(t_ms: f64, hits: f64, queries: f64) -> Scrape {
        let metrics = crate::measuring::discovery::Metrics {
            prefix_hits: Some(hits),
            prefix_queries: Some(queries),
            ..Default::default()
        };
        Scrape { t_ms, metrics }
    }

    #[test]
    fn one_reading_of_the_counters_is_no_count() {
        // The cell's /metrics answered once (then failed or came late): no growth to read, so
        // no "0 of 0 looked up" (which would say the server looked up nothing), but why.
        let reset = Start { how: CacheStart::Reset, detail: "POST /reset_prefix_cache".into() };
        let one = [reading(0.0, 9000.0, 10_000.0)];
        assert_eq!(count(std::iter::empty::<&StreamRecord>(), &one), None);
        let o = outcome(0.9, &reset, None, &one, true, &Evidence::default());
        assert_eq!((o.figures.measured_hit_rate, o.note.as_deref()), (None, None));
        assert!(o.missing.unwrap().reason.starts_with("only one reading of the server's prefix-cache counters"));
        let o = outcome(0.9, &reset, None, &[], true, &Evidence::default());
        assert!(o.missing.unwrap().reason.starts_with("no reading of the server's /metrics came during it"));
        let two = [reading(0.0, 9000.0, 10_000.0), reading(500.0, 9900.0, 11_000.0)];
        let c = count(std::iter::empty::<&StreamRecord>(), &two).unwrap();
        assert_eq!((c.hits, c.queries, c.source), (900, 1000, HitRateSource::Prometheus));
    }

    #[test]
    fn counters_that_went_down_give_no_rate_and_say_why() {
        let reset = Start { how: CacheStart::Reset, detail: "POST /reset_prefix_cache".into() };
        // Restarted mid-cell, then grown past the first reading: the ends alone would give 1,800
        // hits of 1,000 queries (a rate of 180 %), the clamp of a plain difference 0 of 0.
        let s = [reading(0.0, 9000.0, 10_000.0), reading(500.0, 900.0, 1000.0), reading(900.0, 10_800.0, 11_000.0)];
        assert_eq!(count(std::iter::empty::<&StreamRecord>(), &s), None);
        let o = outcome(0.9, &reset, None, &s, true, &Evidence::default());
        assert_eq!((o.figures.measured_hit_rate, o.figures.hit_tokens, o.note.as_deref()), (None, None, None));
        let missing = o.missing.unwrap();
        assert_eq!(missing.figure, HIT_RATE_FIGURE);
        assert!(missing.reason.starts_with("the server's prefix-cache counters went down"), "{}", missing.reason);
        // Per-response counts are no counters: a restart leaves them whole.
        let a = StreamRecord { prompt_tokens: Some(1000), cached_tokens: Some(896), ..StreamRecord::default() };
        let c = count([&a], &s).unwrap();
        assert_eq!((c.hits, c.source), (896, HitRateSource::Usage));
        assert_eq!(outcome(0.9, &reset, Some(c), &s, true, &Evidence::default()).note, None);
    }

    #[test]
    fn two_sources_that_disagree_are_both_named() {
        let reset = Start { how: CacheStart::Reset, detail: "POST /reset_prefix_cache".into() };
        let usage = Counted { hits: 1792, queries: 2000, source: HitRateSource::Usage };
        // The counters saw 2,000 of 4,000 tokens hit: 50 % against the responses' 89.6 %.
        let s = [reading(0.0, 100.0, 100.0), reading(900.0, 2100.0, 4100.0)];
        let o = outcome(0.9, &reset, Some(usage), &s, true, &Evidence::default());
        assert_eq!((o.figures.measured_hit_rate, o.figures.hit_rate_source), (Some(0.896), Some(HitRateSource::Usage)));
        let note = o.note.unwrap();
        assert!(note.contains("from server usage (89.6%) and from the server's Prometheus counters (50%: 2000 of 4000 prompt tokens) disagree by 40 points"), "{note}");
        // Within the tolerance: no note.
        let s = [reading(0.0, 100.0, 100.0), reading(900.0, 3500.0, 4100.0)];
        assert_eq!(outcome(0.9, &reset, Some(usage), &s, true, &Evidence::default()).note, None);
    }
}
