//! From what a decode cell's stages observed to its figures and status (pure: no I/O, no
//! clock). docs/METHODOLOGY.md is the specification; each figure is defined once in the
//! registry (`speedmatrix_schema::registry`), each status rule in `speedmatrix_schema::status`.
//!
//! [`decode_cell`] is the one entry: an [`Observation`] (every stream's record, the scrapes
//! with their times, how readiness ended, when the window opened and really closed, CPU and
//! GPU readings) in, a [`DecodeCell`] out. A cell's window is `(start, closed]` on the run
//! clock; only token chunks that arrived inside it count towards total tok/s, TPOT and ITL,
//! and the TTFT of the streams that opened the cell is reported apart from the TTFT of
//! replacement streams started inside the window.

use crate::measuring::client::served_count;
use crate::measuring::client::CellStream;
use crate::measuring::client::StreamRecord;
use crate::measuring::discovery::Metrics;
use crate::measuring::gpu;
use crate::measuring::scrape::Scrape;
use crate::measuring::series;
use speedmatrix_schema::noise;
use speedmatrix_schema::stats::{self, round3};
use speedmatrix_schema::status::{decode_status, Evidence};
use speedmatrix_schema::tokens::{self, ChunkUsage, StreamCount, StreamTokens};
use speedmatrix_schema::{
    CellStatus, ContextSize, DecodeCell, Distribution, FinishReason, MissingFigure, Readiness, RequestSample,
    ServerFigures, TokenCountSource,
};

/// What HTTP 429 with a short `Retry-After` did to these requests, for the row's or cell's
/// `reason`: how many were rate-limited and sent again after the wait, the waits of all of them
/// together and the longest one request waited. `None` when none was.
pub fn rate_limit_note<'a>(records: impl IntoIterator<Item = &'a StreamRecord>) -> Option<String> {
    let waits: Vec<u64> =
        records.into_iter().filter(|r| !r.rate_limited.is_empty()).map(|r| r.rate_limited.iter().sum()).collect();
    let longest = waits.iter().max()?;
    let total: u64 = waits.iter().sum();
    Some(format!(
        "rate limited: the server answered HTTP 429 to {} request(s); each was sent again after its Retry-After ({total} s of waits in all, at most {longest} s for one request), and its times count from the new send",
        waits.len()
    ))
}

/// What a server that ends requests before `max_tokens` with `finish_reason: "stop"` did to
/// the cell, for its `reason`: every request asks `ignore_eos`, so such a server does not honour
/// it (a hosted API, a proxy, an engine without the option), and each early stop starts a new
/// request whose prompt is prefilled inside the window. `None` when no request stopped early.
pub fn early_stop_note<'a>(records: impl IntoIterator<Item = &'a StreamRecord>, max_tokens: u32) -> Option<String> {
    let (mut finished, mut stopped) = (0usize, Vec::new());
    for r in records.into_iter().filter(|r| r.finished()) {
        finished += 1;
        let tokens = r.completion_tokens.unwrap_or_else(|| r.chunk_tokens());
        if r.finish_reason.as_deref() == Some("stop") && tokens < u64::from(max_tokens) {
            stopped.push(tokens as f64);
        }
    }
    stopped.sort_by(f64::total_cmp);
    let median = stats::percentile_sorted(&stopped, 50.0)?;
    Some(format!(
        "{} of {finished} finished requests stopped before max_tokens ({max_tokens}) with finish_reason \"stop\", after {median:.0} tokens (median): the server does not honour ignore_eos, so part of the window went to new requests' prefill and these figures are not sustained decode",
        stopped.len()
    ))
}

/// `note` added to `reason` (after what it already says).
pub fn add_note(reason: &mut Option<String>, note: String) {
    *reason = Some(match reason.take() {
        Some(r) => format!("{r}; {note}"),
        None => note,
    });
}

/// When a decode window opened, was due to close and really closed, ms on the run clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WindowTimes {
    /// The window opened (readiness ended).
    pub start_ms: f64,
    /// `start_ms` + `--duration`.
    pub deadline_ms: f64,
    /// The instant the collector stopped counting, just before it cancelled the streams.
    pub closed_ms: f64,
}

/// Everything the stages observed for one decode cell.
#[derive(Debug, Clone)]
pub struct Observation {
    /// The cell's context.
    pub context: ContextSize,
    /// Streams N.
    pub concurrency: u32,
    /// The warmed prompt's real length, tokens (server usage or `/tokenize`).
    pub prompt_tokens: Option<u64>,
    /// Every stream's record (opening and replacement), in any order.
    pub streams: Vec<CellStream>,
    /// How readiness ended.
    pub readiness: Option<Readiness>,
    /// The window, when one was measured (not after a failure during readiness).
    pub window: Option<WindowTimes>,
    /// `/metrics` readings from before the first stream opened to after the last ended.
    pub scrapes: Vec<Scrape>,
    /// The engine's output-token counter grows while requests stream (not llama.cpp's).
    pub live_counter: bool,
    /// Why the cell must queue on this server by construction (slots, `max_running_requests`).
    pub queued_by_construction: Option<String>,
    /// TTFT of the context's cold (first, uncached) request, ms: the yardstick of an ordinary
    /// stream start ([`speedmatrix_schema::status::start_allowance_ms`]).
    pub cold_ttft_ms: Option<f64>,
    /// The collector's CPU time at the window's open and close, s.
    pub client_cpu_s: Option<(f64, f64)>,
    /// Cores the collector may use.
    pub cores: usize,
    /// NVML readings around the window; `None` without GPU telemetry.
    pub gpu: Option<Vec<(f64, gpu::Reading)>>,
}

/// A decode cell before it is measured: `not_run`, "pending", no figures.
pub fn blank_cell(context: &ContextSize, concurrency: u32) -> DecodeCell {
    DecodeCell::new(context.clone(), concurrency, CellStatus::NotRun, Some("pending".into()))
}

/// The cell's figures and status from what was observed, and notes for the log (a collector
/// near its CPU limit).
pub fn decode_cell(obs: &Observation) -> (DecodeCell, Vec<String>) {
    // In id order; copied only when they are not (a copy of a long window's chunk times is
    // as large as the window's records).
    let streams: std::borrow::Cow<'_, [CellStream]> = if obs.streams.is_sorted_by_key(|c| c.record.id) {
        std::borrow::Cow::Borrowed(&obs.streams)
    } else {
        let mut sorted = obs.streams.clone();
        sorted.sort_by_key(|c| c.record.id);
        std::borrow::Cow::Owned(sorted)
    };
    let mut cell = blank_cell(&obs.context, obs.concurrency);
    let usage = streams.iter().map(|s| s.record.prompt_tokens);
    cell.prompt_tokens = prompt_count(usage, obs.prompt_tokens, &mut cell.missing);
    cell.readiness = obs.readiness.clone();
    let failures = failures(&streams);
    let Some(w) = obs.window.filter(|_| failures.is_empty()) else {
        // A stream failed: no throughput is claimed; what the requests saw is kept.
        let counted = count_tokens(&streams, None, None, None);
        cell.status = CellStatus::Error;
        cell.reason =
            Some(decode_status(&Evidence { failures: &failures, ..Evidence::default() }).1.unwrap_or_default());
        let at = obs.window.map(|w| (w.start_ms, w.closed_ms));
        cell.requests = samples(&streams, &counted, at);
        cell.ttft_ms = distribution(&ttfts(&streams, true));
        return (cell, vec![]);
    };
    let (w0, w1) = (w.start_ms, w.closed_ms);
    let server_tokens =
        if obs.live_counter { counter_delta(&obs.scrapes, |m| m.generation_tokens, w0, w1) } else { None };
    let server = server_figures(&obs.scrapes, w0, w1, obs.live_counter);
    let cell_counter = server.as_ref().and_then(|s| s.generation_tokens);
    let counted = count_tokens(&streams, server_tokens, cell_counter, Some((w0, w1)));
    let allowance = speedmatrix_schema::status::start_allowance_ms(obs.cold_ttft_ms);
    let f = window_figures(&streams, &counted.weights, w0, w1, allowance);
    let waiting: Vec<f64> =
        obs.scrapes.iter().filter(|s| s.t_ms >= w0 && s.t_ms <= w1).filter_map(|s| s.metrics.waiting).collect();
    let readiness_timeout = readiness_note(obs.readiness.as_ref());
    let (mut status, mut reason) = decode_status(&Evidence {
        concurrency: obs.concurrency,
        failures: &[],
        waiting_samples: &waiting,
        avg_running: server.as_ref().and_then(|s| s.running_avg),
        client_running: Some(f.avg_in_flight - f.avg_queued),
        start_allowance_ms: Some(allowance),
        window_tokens: Some(f.output_tokens),
        readiness_timeout: readiness_timeout.as_deref(),
        rate_limited: streams.iter().any(|s| !s.record.rate_limited.is_empty()),
    });
    if let (CellStatus::Valid | CellStatus::RequestsQueued, Some(why)) = (status, &obs.queued_by_construction) {
        (status, reason) = (CellStatus::RequestsQueued, Some(reason.map_or(why.clone(), |r| format!("{why}; {r}"))));
    }
    cell.status = status;
    cell.reason = reason;
    cell.requests = samples(&streams, &counted, Some((w0, w1)));
    cell.ttft_ms = f.ttft_ms;
    cell.token_count_check = Some(counted.check.clone());
    if status == CellStatus::Error {
        return (cell, vec![]);
    }
    if let Some(note) = &counted.note {
        if counted.trusted {
            add_note(&mut cell.reason, note.clone());
        } else {
            untrusted(&mut cell, note, &f);
            return (cell, vec![]);
        }
    }
    fill_window_figures(&mut cell, &f, &counted, w);
    cell.series = series::window_series(&streams, &counted.weights, &obs.scrapes, w0, w1);
    cell.intervals = Some(noise::cell_intervals(cell.series.as_ref()));
    // One figure, one meaning: requests being served (the count the status rules use), from the
    // server's gauge when it has one.
    cell.avg_active_requests =
        Some(server.as_ref().and_then(|s| s.running_avg).unwrap_or(round3(f.avg_in_flight - f.avg_queued)));
    let spec = crate::measuring::spec_decode::outcome(&obs.scrapes, w0, w1);
    cell.spec_accept_rate = spec.figures.as_ref().and_then(|f| f.acceptance_rate);
    cell.spec_decode = spec.figures;
    cell.missing.extend(spec.missing);
    cell.server = server;
    let notes = cpu_note(&mut cell, obs);
    if let Some(readings) = &obs.gpu {
        if let Some((figures, power, per_token)) = gpu::window_figures(readings, w0, w1, cell.output_tokens) {
            cell.gpu_power_w = power;
            cell.energy_j_per_token = per_token;
            cell.gpu = Some(figures);
        }
    }
    (cell, notes)
}

/// A cell whose every reported token count contradicts its stream: an error that says why and
/// what the lower bound (its text chunks) gives, no figures claimed.
fn untrusted(cell: &mut DecodeCell, note: &str, f: &WindowFigures) {
    cell.status = CellStatus::Error;
    let reason = format!(
        "no token count to trust: {note}; at least {} tokens arrived in the window (at least {:.1} tok/s), the true count is unknown",
        f.output_tokens,
        f.output_tokens as f64 / f.window_s.max(f64::MIN_POSITIVE)
    );
    cell.reason = Some(match cell.reason.take() {
        Some(r) => format!("{reason}; {r}"),
        None => reason,
    });
}

/// What a server that reports 0 prompt tokens did, in the words of every reason and error that
/// say so (here and in `prompt.rs`'s refusal).
#[macro_export]
macro_rules! zero_prompt_count {
    () => {
        "the server reported 0 prompt tokens (usage.prompt_tokens: 0) for a non-empty prompt, which is not a count (a proxy that fills usage with zeros)"
    };
}

/// How a prompt nothing counted was cut, the tail of [`UNCOUNTED_PROMPT`] and [`ZERO_PROMPT`].
macro_rules! cut_by_estimate {
    () => {
        " (the prompt was cut by tokens per word, estimated from probe requests)"
    };
}

/// Why a prompt's token count is null: a prefill row says it in its reason, a cell in its
/// `missing` ([`prompt_count`]).
pub const UNCOUNTED_PROMPT: &str =
    concat!("the server has no /tokenize and no answer carried usage.prompt_tokens", cut_by_estimate!());

/// Why a prompt's token count is null when the server's answers said 0 for it
/// ([`served_count`]).
pub const ZERO_PROMPT: &str =
    concat!(zero_prompt_count!(), ", and it has no /tokenize to count them", cut_by_estimate!());

/// Why a prompt's count is null, given the `usage.prompt_tokens` its answers carried: the
/// server's 0 when one said it ([`ZERO_PROMPT`]), else [`UNCOUNTED_PROMPT`].
pub fn uncounted_why(usage: impl IntoIterator<Item = Option<u64>>) -> &'static str {
    if usage.into_iter().any(|u| u == Some(0)) {
        ZERO_PROMPT
    } else {
        UNCOUNTED_PROMPT
    }
}

/// A cell's prompt tokens: the length the server counted for its requests (the median of their
/// `usage.prompt_tokens`, a 0 being no count: [`served_count`]), what the schema's
/// `prompt_tokens` means. The warm stage's count (`/tokenize`) is the fallback; a server whose
/// `/tokenize` disagrees with its own usage (newcomer trial: 1,024 by `/tokenize`, 1,324 by
/// usage) gets the number it served. When nothing counted them, `missing` says why.
pub fn prompt_count(
    usage: impl IntoIterator<Item = Option<u64>> + Clone,
    warmed: Option<u64>,
    missing: &mut Vec<MissingFigure>,
) -> Option<u64> {
    let mut counted: Vec<u64> = usage.clone().into_iter().filter_map(served_count).collect();
    counted.sort_unstable();
    let median = counted.len().checked_sub(1).and_then(|i| counted.get(i / 2)).copied();
    let count = median.or(served_count(warmed));
    if count.is_none() {
        let reason = uncounted_why(usage.into_iter().chain([warmed])).into();
        missing.push(MissingFigure { figure: "prompt_tokens".into(), reason });
    }
    count
}

/// ITL where the chunks' own token counts are not known: only its mean (the window's gaps over
/// its tokens) and count are kept, and `missing` says why the rest is null; `chunk_gap_ms` has
/// the gaps between chunks.
fn itl_mean_only(
    d: Option<Distribution>,
    source: TokenCountSource,
    missing: &mut Vec<MissingFigure>,
) -> Option<Distribution> {
    let d = d?;
    missing.push(MissingFigure {
        figure: "itl_ms".into(),
        reason: format!(
            "percentiles, min and max: no chunk's token count was reported (counted from {}), so the gaps cannot be divided over each chunk's tokens; chunk_gap_ms has the gaps between chunks, the mean is exact",
            speedmatrix_schema::tokens::source_words(source)
        ),
    });
    Some(Distribution { p50: None, p90: None, p99: None, min: None, max: None, ..d })
}

/// The window's client figures into the cell.
fn fill_window_figures(cell: &mut DecodeCell, f: &WindowFigures, counted: &TokenCount, w: WindowTimes) {
    cell.window_s = Some(round3(f.window_s));
    cell.window_start_ms = Some(round3(w.start_ms));
    cell.window_end_ms = Some(round3(w.closed_ms));
    cell.output_tokens = Some(f.output_tokens);
    cell.token_count_source = Some(counted.source);
    cell.token_count_reconciled = counted.reconciled;
    cell.total_tps = Some(round3(f.output_tokens as f64 / f.window_s));
    cell.per_request_tps = f.per_request_tps;
    cell.ttft_in_window_ms = f.ttft_in_window_ms;
    cell.ttft_content_ms = f.ttft_content_ms;
    cell.tpot_ms = f.tpot_ms;
    cell.itl_ms = if counted.per_chunk { f.itl_ms } else { itl_mean_only(f.itl_ms, counted.source, &mut cell.missing) };
    cell.chunk_gap_ms = f.chunk_gap_ms;
    cell.e2e_ms = f.e2e_ms;
    cell.completed_requests = Some(f.completed_requests);
    cell.max_active_requests = Some(f.max_in_flight as f64);
}

/// The failed streams' errors, first failure first; a stream that finished without any token
/// is a failure too (a server that answers empty streams measures nothing).
pub(crate) fn failures(streams: &[CellStream]) -> Vec<String> {
    let mut failed: Vec<(f64, String)> = streams
        .iter()
        .filter_map(|s| {
            let r = &s.record;
            let why = match (&r.error, r.ended_by_server() && r.chunks.is_empty()) {
                (Some(e), _) => e.clone(),
                (None, true) => format!(
                    "the stream finished without a token (finish_reason {}, usage {} completion tokens)",
                    r.finish_reason.as_deref().unwrap_or("none"),
                    r.completion_tokens.map_or("without".into(), |t| t.to_string())
                ),
                (None, false) => return None,
            };
            Some((r.ended_ms.unwrap_or(f64::INFINITY), format!("stream {}: {why}", r.id)))
        })
        .collect();
    failed.sort_by(|a, b| a.0.total_cmp(&b.0));
    failed.into_iter().map(|(_, w)| w).collect()
}

/// The cell's reason when readiness did not end with every stream decoding.
fn readiness_note(r: Option<&Readiness>) -> Option<String> {
    let r = r.filter(|r| r.outcome == speedmatrix_schema::ReadinessOutcome::TimedOut)?;
    Some(format!(
        "readiness timed out: {} stream(s) had produced a token with an empty queue {:.0} s after the cell opened (limit {:.0} s); measured anyway",
        r.streams_producing,
        r.after_ms / 1000.0,
        r.limit_ms / 1000.0
    ))
}

/// The collector's CPU use in the window; near its cores' limit the figures may be the
/// client's, and the reason says so.
fn cpu_note(cell: &mut DecodeCell, obs: &Observation) -> Vec<String> {
    let (Some((a, b)), Some(w)) = (obs.client_cpu_s, obs.window) else { return vec![] };
    let window_s = (w.closed_ms - w.start_ms).max(1e-3) / 1000.0;
    let pct = round3(100.0 * (b - a) / window_s);
    cell.client_cpu_pct = Some(pct);
    if !crate::measuring::selfcheck::near_saturation(pct, obs.cores) {
        return vec![];
    }
    let note = format!(
        "the collector used {pct:.0} % CPU of its {} core(s) in this window: the figures may show the client's limit, not the server's",
        obs.cores
    );
    cell.reason = Some(match cell.reason.take() {
        Some(r) => format!("{r}; {note}"),
        None => note.clone(),
    });
    vec![format!("warning: {} × {}: {note}", cell.context.label, cell.concurrency)]
}

/// How a cell's output tokens were counted: the decision of
/// [`speedmatrix_schema::tokens::decide`] and every stream's tokens per chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenCount {
    /// Where the count came from.
    pub source: TokenCountSource,
    /// `Some(true)` when chunk counts were reconciled with a real count, `Some(false)` when they
    /// could not be (approximate), `None` when every chunk carried its usage.
    pub reconciled: Option<bool>,
    /// Per stream (same order as the streams), tokens of each chunk.
    pub weights: Vec<Vec<f64>>,
    /// Whether each chunk's own token count is known (ITL per token may be given).
    pub per_chunk: bool,
    /// Whether the count deserves trust (else the cell is not valid).
    pub trusted: bool,
    /// The server's usage may stand for a request's output tokens (none of it was set aside).
    pub usage_trusted: bool,
    /// The disagreements in words for the cell's reason, when any.
    pub note: Option<String>,
    /// The sources side by side, for the results file.
    pub check: speedmatrix_schema::TokenCheck,
}

/// What one stream says about its tokens, for the rule in `speedmatrix_schema::tokens`.
fn stream_tokens(s: &CellStream, window: Option<(f64, f64)>) -> StreamTokens {
    let r = &s.record;
    let inside = |t: f64| window.is_some_and(|(a, b)| t > a && t <= b);
    let in_window = r.chunks.iter().filter(|c| inside(c.t_ms));
    let (window_chunks, window_tokens) = in_window.fold((0, 0), |(n, t), c| (n + 1, t + u64::from(c.tokens)));
    let reported = r.chunk_tokens().saturating_sub(r.usage_stalls);
    StreamTokens {
        chunks: r.chunks.len() as u64,
        text_chunks: r.text_chunks,
        chunk_usage: r.continuous_usage.then_some(ChunkUsage { total: reported, stalls: r.usage_stalls }),
        final_usage: r.completion_tokens.filter(|_| r.finished()),
        window_chunks,
        window_usage: if r.continuous_usage { window_tokens } else { 0 },
    }
}

/// Count the tokens of every chunk: the source is decided by
/// [`speedmatrix_schema::tokens::decide`] (docs/METHODOLOGY.md, "Where tokens are counted
/// from") from each stream's evidence, the server counter's growth over the window
/// (`server_tokens`) and over the whole cell (`cell_counter`); this spreads each stream's
/// count over its chunks as decided.
pub fn count_tokens(
    streams: &[CellStream],
    server_tokens: Option<f64>,
    cell_counter: Option<u64>,
    window: Option<(f64, f64)>,
) -> TokenCount {
    let evidence: Vec<StreamTokens> = streams.iter().map(|s| stream_tokens(s, window)).collect();
    let d = tokens::decide(&evidence, tokens::Counter { cell: cell_counter, window: server_tokens });
    let weights = streams
        .iter()
        .zip(&d.streams)
        .map(|(s, how)| {
            let n = s.record.chunks.len();
            match how {
                StreamCount::PerChunk => s.record.chunks.iter().map(|c| f64::from(c.tokens)).collect(),
                StreamCount::Spread(t) => vec![*t as f64 / n.max(1) as f64; n],
                StreamCount::Ratio => vec![d.ratio; n],
            }
        })
        .collect();
    TokenCount {
        source: d.source,
        reconciled: d.reconciled,
        weights,
        per_chunk: d.per_chunk,
        trusted: d.trusted,
        usage_trusted: !d.check.disagreements.iter().any(|x| {
            x.rejected && matches!(x.source, TokenCountSource::ContinuousUsage | TokenCountSource::FinalUsage)
        }),
        note: d.note(),
        check: d.check,
    }
}

/// The client-side figures of one decode window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WindowFigures {
    /// Window length, s: real close − open.
    pub window_s: f64,
    /// Output tokens that arrived inside the window (rounded sum of chunk tokens).
    pub output_tokens: u64,
    /// 1000 ÷ TPOT per stream, tok/s.
    pub per_request_tps: Option<Distribution>,
    /// TPOT per stream inside the window, ms.
    pub tpot_ms: Option<Distribution>,
    /// Per-token inter-token latency inside the window, ms.
    pub itl_ms: Option<Distribution>,
    /// Raw chunk gaps inside the window, ms.
    pub chunk_gap_ms: Option<Distribution>,
    /// TTFT of the opening streams, ms.
    pub ttft_ms: Option<Distribution>,
    /// TTFT of replacement streams, ms.
    pub ttft_in_window_ms: Option<Distribution>,
    /// Time to first content token of the opening streams, ms.
    pub ttft_content_ms: Option<Distribution>,
    /// Request sent → last token for streams that finished inside the window, ms.
    pub e2e_ms: Option<Distribution>,
    /// Streams that finished inside the window.
    pub completed_requests: u64,
    /// Time-weighted mean of streams in flight during the window (client view).
    pub avg_in_flight: f64,
    /// Most streams in flight at once during the window (client view).
    pub max_in_flight: u64,
    /// Time-weighted mean of streams queued during the window (client view): waiting for their
    /// first token beyond the start allowance. The queue evidence without server gauges.
    pub avg_queued: f64,
}

/// One stream's window figures: tokens, TPOT, the ITL values and chunk gaps.
struct StreamWindow {
    tokens: f64,
    tpot: Option<f64>,
    itls: Vec<f64>,
    gaps: Vec<f64>,
}

/// The chunks of one stream inside `(w0, w1]`, with `weights` tokens each. ITL: each chunk's
/// gap divided over its tokens, one value per token; fractional (reconciled) tokens are
/// rounded on the stream's running total, so the values number the stream's tokens.
fn stream_window(record: &StreamRecord, weights: &[f64], w0: f64, w1: f64) -> StreamWindow {
    let inside = |t: f64| t > w0 && t <= w1;
    let chunks = &record.chunks;
    let mut out = StreamWindow { tokens: 0.0, tpot: None, itls: vec![], gaps: vec![] };
    let (mut first, mut last, mut after_first, mut running) = (None, None, 0.0, 0.0_f64);
    for (i, c) in chunks.iter().enumerate().filter(|(_, c)| inside(c.t_ms)) {
        let w = weights.get(i).copied().unwrap_or(0.0);
        out.tokens += w;
        let emitted = ((running + w).round() - running.round()).max(0.0) as usize;
        running += w;
        if i > 0 && w > 0.0 {
            let gap = c.t_ms - chunks[i - 1].t_ms;
            out.gaps.push(gap);
            out.itls.extend(std::iter::repeat_n(gap / w, emitted));
        }
        if first.is_some() {
            after_first += w;
        }
        first.get_or_insert(c.t_ms);
        last = Some(c.t_ms);
    }
    if let (Some(f), Some(l)) = (first, last) {
        out.tpot = (after_first > 0.0).then(|| (l - f) / after_first);
    }
    out
}

/// Compute a cell's client figures over the window `(w0_ms, w1_ms]`, with `weights[i]` the
/// tokens of each chunk of `streams[i]` ([`count_tokens`]); a stream still waiting for its
/// first token `allowance_ms` after its send counts as queued from then on.
pub fn window_figures(
    streams: &[CellStream],
    weights: &[Vec<f64>],
    w0_ms: f64,
    w1_ms: f64,
    allowance_ms: f64,
) -> WindowFigures {
    let window_ms = (w1_ms - w0_ms).max(f64::MIN_POSITIVE);
    let inside = |t: f64| t > w0_ms && t <= w1_ms;
    let mut tokens = 0.0;
    let (mut tpots, mut rates, mut itls, mut gaps, mut e2es) = (vec![], vec![], vec![], vec![], vec![]);
    let mut completed = 0;
    for (s, w) in streams.iter().zip(weights) {
        let sw = stream_window(&s.record, w, w0_ms, w1_ms);
        tokens += sw.tokens;
        itls.extend(sw.itls);
        gaps.extend(sw.gaps);
        if let Some(tpot) = sw.tpot {
            tpots.push(tpot);
            if tpot > 0.0 {
                rates.push(1000.0 / tpot);
            }
        }
        if s.record.finished() {
            if let Some(last) = s.record.chunks.last().filter(|c| inside(c.t_ms)) {
                completed += 1;
                e2es.push(last.t_ms - s.record.sent_ms);
            }
        }
    }
    let content: Vec<f64> = streams
        .iter()
        .filter(|s| s.opening)
        .filter_map(|s| s.record.first_content_ms.map(|t| t - s.record.sent_ms))
        .collect();
    let (avg, max) = in_flight(streams, w0_ms, w1_ms, |r| Some((r.sent_ms, r.ended_ms.unwrap_or(f64::INFINITY))));
    let (queued, _) = in_flight(streams, w0_ms, w1_ms, |r| {
        let waited_until = r.chunks.first().map(|c| c.t_ms).or(r.ended_ms).unwrap_or(f64::INFINITY);
        let from = r.sent_ms + allowance_ms;
        (waited_until > from).then_some((from, waited_until))
    });
    let output_tokens = tokens.round() as u64;
    WindowFigures {
        window_s: window_ms / 1000.0,
        output_tokens,
        per_request_tps: distribution(&rates),
        tpot_ms: distribution(&tpots),
        itl_ms: distribution(&itls),
        chunk_gap_ms: distribution(&gaps),
        ttft_ms: distribution(&ttfts(streams, true)),
        ttft_in_window_ms: distribution(&ttfts(streams, false)),
        ttft_content_ms: distribution(&content),
        e2e_ms: distribution(&e2es),
        completed_requests: completed,
        avg_in_flight: avg,
        max_in_flight: max,
        avg_queued: queued,
    }
}

fn ttfts(streams: &[CellStream], opening: bool) -> Vec<f64> {
    streams.iter().filter(|s| s.opening == opening).filter_map(|s| s.record.ttft_ms()).collect()
}

/// Time-weighted mean and maximum of streams active during the window, a stream counting over
/// `span(record)` = (from, to), clipped to the window. A span of no length (one chunk) counts
/// at its instant; spans that only touch (one ends as the next starts) do not overlap.
fn in_flight(
    streams: &[CellStream],
    w0: f64,
    w1: f64,
    span: impl Fn(&StreamRecord) -> Option<(f64, f64)>,
) -> (f64, u64) {
    let mut edges: Vec<(f64, i64)> = Vec::with_capacity(streams.len() * 2);
    for s in streams {
        let Some((from, to)) = span(&s.record) else { continue };
        let (start, end) = (from.max(w0), to.min(w1));
        if end >= start && end > w0 && start <= w1 {
            edges.push((start, 1));
            edges.push((if end > start { end } else { end + 1e-9 }, -1));
        }
    }
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut level, mut max, mut area, mut prev) = (0i64, 0i64, 0.0, w0);
    for (t, d) in edges {
        area += level as f64 * (t - prev);
        prev = t;
        level += d;
        max = max.max(level);
    }
    (area / (w1 - w0).max(f64::MIN_POSITIVE), max.max(0) as u64)
}

/// Every request's summary, with its counted tokens (its own usage only where the server's
/// usage was not set aside).
fn samples(streams: &[CellStream], counted: &TokenCount, window: Option<(f64, f64)>) -> Vec<RequestSample> {
    streams
        .iter()
        .zip(&counted.weights)
        .map(|(s, w)| {
            let mut q = sample(&s.record, w, s.opening, window);
            if !counted.usage_trusted {
                q.output_tokens = (!s.record.chunks.is_empty()).then(|| w.iter().sum::<f64>().round() as u64);
            }
            q
        })
        .collect()
}

/// One request's summary for the results file; `weights` are its chunks' tokens.
pub fn sample(s: &StreamRecord, weights: &[f64], opening: bool, window: Option<(f64, f64)>) -> RequestSample {
    let finish = if s.error.is_some() {
        Some(FinishReason::Error)
    } else if s.cancelled {
        Some(FinishReason::Cancelled)
    } else {
        s.finish_reason.as_deref().map(|r| match r {
            "length" => FinishReason::Length,
            "stop" => FinishReason::Stop,
            _ => FinishReason::Other,
        })
    };
    let counted: f64 = weights.iter().sum();
    let out_tokens = s.completion_tokens.or_else(|| (!s.chunks.is_empty()).then(|| counted.round() as u64));
    let after_first: f64 = weights.iter().skip(1).sum();
    let tpot = match (s.chunks.first(), s.chunks.last()) {
        (Some(f), Some(l)) if after_first > 0.0 => Some((l.t_ms - f.t_ms) / after_first),
        _ => None,
    };
    let window_tokens = window.map(|(a, b)| {
        let inside = s.chunks.iter().zip(weights).filter(|(c, _)| c.t_ms > a && c.t_ms <= b);
        inside.map(|(_, w)| w).sum::<f64>().round() as u64
    });
    RequestSample {
        start_ms: round3(s.sent_ms),
        send_lag_ms: None,
        response_id: s.response_id.clone(),
        ttft_ms: s.ttft_ms().map(round3),
        ttft_content_ms: s.first_content_ms.map(|t| round3(t - s.sent_ms)),
        e2e_ms: if s.finished() { s.chunks.last().map(|c| round3(c.t_ms - s.sent_ms)) } else { None },
        prompt_tokens: s.served_prompt_tokens(),
        output_tokens: out_tokens,
        window_output_tokens: window_tokens,
        tpot_ms: tpot.map(round3),
        chunks: Some(s.chunks.len() as u64),
        opening: Some(opening),
        finish_reason: finish,
        error: s.error.clone(),
        server_timings: s.server_timings.clone(),
    }
}

/// A counter's value at `t_ms`, interpolated linearly between the readings just before and
/// just after (`None` unless readings bracket `t_ms`).
pub fn counter_at(scrapes: &[Scrape], get: impl Fn(&Metrics) -> Option<f64>, t_ms: f64) -> Option<f64> {
    let before = scrapes.iter().rev().find_map(|s| get(&s.metrics).filter(|_| s.t_ms <= t_ms).map(|v| (s.t_ms, v)))?;
    let after = scrapes.iter().find_map(|s| get(&s.metrics).filter(|_| s.t_ms >= t_ms).map(|v| (s.t_ms, v)))?;
    if after.0 <= before.0 {
        return Some(before.1);
    }
    Some(before.1 + (after.1 - before.1) * (t_ms - before.0) / (after.0 - before.0))
}

/// A counter's growth over the window `[w0, w1]`, read between scrapes ([`counter_at`]);
/// `None` when it went down between the readings that bracket the window (a server restarted:
/// its counters began again from 0, so no growth over the window can be told).
pub fn counter_delta(
    scrapes: &[Scrape],
    get: impl Fn(&Metrics) -> Option<f64> + Copy,
    w0: f64,
    w1: f64,
) -> Option<f64> {
    if went_down(scrapes, get, w0, w1) {
        return None;
    }
    Some((counter_at(scrapes, get, w1)? - counter_at(scrapes, get, w0)?).max(0.0))
}

/// Whether a counter read lower than the reading before it anywhere from the last reading at
/// or before `w0` to the first at or after `w1` (a restarted server's counters start from 0).
pub fn went_down(scrapes: &[Scrape], get: impl Fn(&Metrics) -> Option<f64>, w0: f64, w1: f64) -> bool {
    let first = scrapes.iter().rposition(|s| s.t_ms <= w0).unwrap_or(0);
    let last = scrapes.iter().position(|s| s.t_ms >= w1).unwrap_or(scrapes.len().saturating_sub(1));
    let values: Vec<f64> =
        scrapes.get(first..=last).unwrap_or_default().iter().filter_map(|s| get(&s.metrics)).collect();
    values.windows(2).any(|w| w[1] < w[0])
}

/// Server figures from the cell's Prometheus readings: gauges sampled inside the window,
/// counters' growth over the window (read between scrapes), and `generation_tokens` from the
/// reading before the first stream opened to the one after the last ended (a cross-check of
/// every token the cell's requests were sent; only for a counter that grows while requests
/// stream).
pub(crate) fn server_figures(scrapes: &[Scrape], w0: f64, w1: f64, live_counter: bool) -> Option<ServerFigures> {
    if scrapes.is_empty() {
        return None;
    }
    let inside: Vec<&Metrics> = scrapes.iter().filter(|s| s.t_ms >= w0 && s.t_ms <= w1).map(|s| &s.metrics).collect();
    let mean = |get: &dyn Fn(&Metrics) -> Option<f64>| {
        let v: Vec<f64> = inside.iter().filter_map(|m| get(m)).collect();
        (!v.is_empty()).then(|| round3(v.iter().sum::<f64>() / v.len() as f64))
    };
    let max = |get: &dyn Fn(&Metrics) -> Option<f64>| inside.iter().filter_map(|m| get(m)).reduce(f64::max);
    let delta = |get: fn(&Metrics) -> Option<f64>| counter_delta(scrapes, get, w0, w1);
    let whole_cell = match (scrapes.first(), scrapes.last()) {
        (Some(a), Some(b)) if live_counter => match (a.metrics.generation_tokens, b.metrics.generation_tokens) {
            (Some(x), Some(y)) => Some((y - x).max(0.0).round() as u64),
            _ => None,
        },
        _ => None,
    };
    Some(ServerFigures {
        running_avg: mean(&|m| m.running),
        waiting_max: max(&|m| m.waiting),
        kv_cache_usage_avg: mean(&|m| m.kv_usage).map(|v| v.min(1.0)),
        kv_cache_usage_max: max(&|m| m.kv_usage).map(|v| v.min(1.0)),
        preemptions: delta(|m| m.preemptions).map(|v| v.round() as u64),
        generation_tokens: whole_cell,
        prefix_cache_hit_tokens: delta(|m| m.prefix_hits).map(|v| v.round() as u64),
        prefix_cache_query_tokens: delta(|m| m.prefix_queries).map(|v| v.round() as u64),
        // One meaning with the cell's `spec_decode`: over the cell's requests, not interpolated.
        spec_mean_accepted_len: crate::measuring::spec_decode::outcome(scrapes, w0, w1)
            .figures
            .and_then(|f| f.mean_accepted_length),
    })
}

/// A distribution of ms (or tok/s) values, rounded to 3 decimals (µs for ms figures).
pub(crate) fn distribution(values: &[f64]) -> Option<Distribution> {
    stats::distribution_rounded(values)
}

#[cfg(test)]
mod tests;
