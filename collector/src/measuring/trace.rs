//! A request trace replayed (`run --trace FILE.jsonl`; docs/METHODOLOGY.md, "Trace replay"),
//! in the stages of [`Measurement`]: **warm** (every request's prompt and body built before
//! anything is timed — [`crate::measuring::trace_prompt`] — then the server settles),
//! **window** (each request sent at its timestamp, scaled by `--trace-speed`, by the same
//! [`Pacer`] and [`InFlight`] as rate cells, `--max-in-flight` included; the window is the
//! slice, from its zero to its end), **drain** (every request finishes, bounded in time; the
//! rest are cancelled), **figures** (a rate cell's, by [`rate_cell`] and the rate status rule,
//! plus each request's record). Latencies count from the scheduled instants.
//!
//! The file is read and checked before the server is asked ([`load`]): a line that is not a
//! request is a one-line error naming the file and the line (exit 2).

use crate::measuring::client::request_body;
use crate::measuring::error::{CellError, RunError};
use crate::measuring::measurement::Measurement;
use crate::measuring::pacer::{Bodies, InFlight, Pacer};
use crate::measuring::rate_figures::{rate_cell, RateObservation, Sent};
use crate::measuring::scrape::Scraper;
use crate::measuring::session::Session;
use crate::measuring::trace_prompt::TracePrompts;
use speedmatrix_schema::progress::{Current, Measuring, Phase};
use speedmatrix_schema::trace::{offsets_s, parse, slice, span_s, TraceEntry};
use speedmatrix_schema::{CellStatus, ContextSize, TraceRequest, TraceRow, TraceSource};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A trace file read and sliced: where it came from, and its requests in schedule order.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedTrace {
    /// File, digest, lines, slice, speed (the results file's `config.trace`).
    pub source: TraceSource,
    /// The slice's requests, in timestamp order.
    pub entries: Vec<TraceEntry>,
}

/// Read `path` (Mooncake format), take the slice `[from_s, to_s)` of trace time and replay it
/// at `speed`.
///
/// # Errors
/// [`RunError::Trace`] naming the file (and the line) when it cannot be read, a line is not a
/// request, or the slice holds none.
pub fn load(path: &Path, speed: f64, from_s: Option<f64>, to_s: Option<f64>) -> Result<LoadedTrace, RunError> {
    let bad = |why: String| RunError::Trace { path: path.to_path_buf(), why };
    let bytes = std::fs::read(path).map_err(|e| bad(format!("cannot be read: {e}")))?;
    let text = std::str::from_utf8(&bytes).map_err(|e| bad(format!("is not UTF-8 text ({e})")))?;
    let parsed = parse(text).map_err(|e| match e.line {
        0 => bad(e.why),
        _ => bad(e.to_string()),
    })?;
    let entries = slice(&parsed.entries, from_s, to_s);
    if entries.is_empty() {
        let (first, last) =
            (parsed.entries[0].timestamp_ms / 1000.0, parsed.entries[parsed.entries.len() - 1].timestamp_ms / 1000.0);
        return Err(bad(format!(
            "no request in the slice from {} to {} s (the trace's timestamps run from {first} to {last} s)",
            from_s.unwrap_or(0.0),
            to_s.map_or("its end".to_string(), |t| t.to_string())
        )));
    }
    use sha2::Digest;
    let sha256 = sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    let source = TraceSource {
        format: "mooncake".into(),
        file: path.display().to_string(),
        sha256,
        lines: parsed.lines,
        requests: entries.len() as u64,
        from_s,
        to_s,
        speed,
        span_s: span_s(&entries, from_s, to_s),
        sorted: parsed.sorted,
    };
    Ok(LoadedTrace { source, entries })
}

/// Whether every request fits the server: `input_length + output_length` within its
/// `max_model_len` (when it reports one).
///
/// # Errors
/// [`RunError::Trace`] naming the first line that does not fit.
pub fn fits(trace: &LoadedTrace, max_model_len: Option<u64>) -> Result<(), RunError> {
    let Some(limit) = max_model_len else { return Ok(()) };
    match trace.entries.iter().find(|e| e.input_length + e.output_length > limit) {
        Some(e) => Err(RunError::Trace {
            path: trace.source.file.clone().into(),
            why: format!(
                "line {}: input_length {} + output_length {} = {} tokens exceed the server's max_model_len {limit}; replay a slice without it (--trace-from, --trace-to) or a server with a longer context",
                e.line,
                e.input_length,
                e.output_length,
                e.input_length + e.output_length
            ),
        }),
        None => Ok(()),
    }
}

/// The plan's lines about the trace (shown before a run and by `--dry-run`).
pub fn plan_lines(trace: &LoadedTrace, max_in_flight: Option<u32>) -> Vec<String> {
    let src = &trace.source;
    let pct = |mut v: Vec<u64>| -> (u64, u64) {
        v.sort_unstable();
        (v[(v.len() - 1) / 2], v[v.len() - 1])
    };
    let (in_p50, in_max) = pct(trace.entries.iter().map(|e| e.input_length).collect());
    let (out_p50, out_max) = pct(trace.entries.iter().map(|e| e.output_length).collect());
    let distinct: std::collections::HashSet<u64> =
        trace.entries.iter().flat_map(|e| e.hash_ids.iter().copied()).collect();
    let slice = match (src.from_s, src.to_s) {
        (None, None) => "the whole trace".to_string(),
        (f, t) => format!(
            "the slice from {} s to {} of trace time",
            f.unwrap_or(0.0),
            t.map_or("its end".to_string(), |t| format!("{t} s"))
        ),
    };
    let mut lines = vec![format!(
        "plan: trace {} (Mooncake format, {} lines, sha256 {}…): {} requests of {slice}, at {}× — replayed in {:.1} s, {} req/s on average; inputs p50 {in_p50} / max {in_max} tokens in {} distinct blocks of 512, outputs p50 {out_p50} / max {out_max} tokens{}; latencies from each request's scheduled instant",
        src.file,
        src.lines,
        &src.sha256[..12.min(src.sha256.len())],
        src.requests,
        src.speed,
        replay_s(src),
        mean_rate(src),
        distinct.len(),
        max_in_flight.map(|m| format!(", at most {m} in flight")).unwrap_or_default(),
    )];
    if src.sorted {
        lines.push(format!(
            "note: trace {}: its timestamps are not in file order; the requests are replayed sorted by timestamp",
            src.file
        ));
    }
    lines
}

/// The row a fresh plan holds for `trace`: its requests planned, no figures.
pub fn planned_row(trace: &LoadedTrace, max_in_flight: Option<u32>) -> TraceRow {
    let longest = trace.entries.iter().map(|e| e.input_length).max().unwrap_or(0);
    let context = ContextSize { label: "trace".into(), tokens: longest };
    let requests = trace
        .entries
        .iter()
        .map(|e| TraceRequest {
            line: e.line,
            timestamp_ms: e.timestamp_ms,
            scheduled_ms: None,
            input_length: e.input_length,
            output_length: e.output_length,
            hash_ids: e.hash_ids.clone(),
            response_id: None,
            prompt_tokens: None,
            output_tokens: None,
        })
        .collect();
    TraceRow::new(context, mean_rate(&trace.source), max_in_flight, requests)
}

/// The trace's mean rate as replayed: requests ÷ (span ÷ speed), requests/s.
pub fn mean_rate(source: &TraceSource) -> f64 {
    let replay_s = (source.span_s / source.speed).max(1e-3);
    ((source.requests as f64 / replay_s) * 1000.0).round() / 1000.0
}

/// The replay's length, s: the slice's span ÷ the speed.
pub fn replay_s(source: &TraceSource) -> f64 {
    source.span_s / source.speed
}

/// Trace `index` of the results, replayed.
pub struct TraceReplay {
    /// Its place in `results.traces`.
    pub index: usize,
    /// The trace.
    pub trace: Arc<LoadedTrace>,
    /// `--max-in-flight`.
    pub max_in_flight: Option<u32>,
}

/// Every request's serialized body, by id (schedule order).
#[derive(Clone)]
pub struct TraceBodies(Arc<Vec<bytes::Bytes>>);

impl Bodies for TraceBodies {
    fn body(&self, id: usize) -> bytes::Bytes {
        self.0[id].clone()
    }
}

/// What the warm stage built.
pub struct Warmed {
    bodies: TraceBodies,
    /// Each request's prompt tokens as built (`/tokenize`), by id.
    sized: Vec<Option<u64>>,
    note: Option<String>,
    /// How the prefix cache began.
    start: crate::measuring::cache_start::Start,
}

/// What the window left open.
pub struct Open {
    flight: InFlight<TraceBodies>,
    scraper: Option<Scraper>,
    /// The window `(w0, w1]`, ms on the run clock.
    window: (f64, f64),
    cpu0: Option<f64>,
}

/// What the drain collected.
pub struct Seen {
    records: Vec<crate::measuring::client::StreamRecord>,
    sent: Vec<Sent>,
    scrapes: Vec<crate::measuring::scrape::Scrape>,
    window: (f64, f64),
    drain_end_ms: f64,
    drain_limit_s: f64,
    cpu_s: Option<(f64, f64)>,
}

/// The replay starts this long after the window stage begins, so its first request (often at
/// the slice's zero) is sent on time.
const LEAD_MS: f64 = 100.0;

impl TraceReplay {
    fn label(&self) -> String {
        let file = Path::new(&self.trace.source.file)
            .file_name()
            .map_or_else(|| self.trace.source.file.clone(), |f| f.to_string_lossy().to_string());
        format!("{file} at {}×", self.trace.source.speed)
    }

    fn live(&self, phase: Phase, elapsed: Option<f64>, streams: Option<u32>) -> Current {
        Current {
            measuring: Measuring::Trace { trace: self.label() },
            phase,
            window_elapsed_s: elapsed,
            live_tps: None,
            streams_running: streams,
        }
    }

    /// The replay's prefix cache: the trace's ideal reuse beside the measured hit rate, with
    /// why when it is far below (in `reason`, said on the terminal) or missing.
    fn cache_figures(
        &self,
        s: &Session,
        row: &mut TraceRow,
        start: &crate::measuring::cache_start::Start,
        records: &[crate::measuring::client::StreamRecord],
        scrapes: &[crate::measuring::scrape::Scrape],
    ) {
        use crate::measuring::trace_cache::{reuse, Served};
        let server = row.cell.server.as_ref();
        let evidence = speedmatrix_schema::prefix::Evidence {
            caching_on: s.info.facts.prefix_caching,
            kv_usage_max: server.and_then(|x| x.kv_cache_usage_max),
            preemptions: server.and_then(|x| x.preemptions),
            ..Default::default()
        };
        let served = Served {
            records,
            scrapes,
            has_metrics: s.has_metrics,
            evidence,
            kv_budget_tokens: s.info.facts.kv_budget.map(|(b, _)| b),
        };
        let r = reuse(&self.trace.entries, start, &served);
        if row.cell.status.is_measured() {
            if let Some(note) = r.note {
                s.log(format!("warning: trace {}: {note}", self.label()));
                crate::measuring::measure::add_note(&mut row.cell.reason, note);
            }
            row.cell.missing.extend(r.missing);
        }
        row.prefix_cache = Some(r.figures);
    }

    /// The drain's limit: every request may finish within the longer of 30 s and a tenth of
    /// the replay.
    fn drain_limit(&self) -> Duration {
        Duration::from_secs_f64((replay_s(&self.trace.source) / 10.0).max(30.0))
    }
}

impl Measurement for TraceReplay {
    type Warmed = Warmed;
    type Open = Open;
    type Seen = Seen;
    type Row = TraceRow;

    fn current(&self) -> Current {
        self.live(Phase::WarmUp, None, None)
    }

    fn name(&self) -> String {
        format!("trace {}", self.label())
    }

    /// The server's prefix cache reset (else every prompt salted); every request's prompt
    /// (blocks built once) and body; idle connections; the server settled.
    async fn warm(&self, s: &mut Session) -> Result<Warmed, CellError> {
        let start = s.cache_start().await;
        let builder = s.prompt_builder().clone();
        let salt = crate::measuring::trace_cache::salt(&builder.run_id, self.index);
        let mut prompts = TracePrompts::new(&builder, start.salt(&salt));
        let mut bodies = Vec::with_capacity(self.trace.entries.len());
        let mut sized = Vec::with_capacity(self.trace.entries.len());
        let (mut over, mut under) = (0usize, 0usize);
        for e in &self.trace.entries {
            let p = prompts.prompt(e).await.map_err(CellError::Prompt)?;
            match p.tokens {
                Some(t) if t > e.input_length => over += 1,
                Some(t) if t < e.input_length => under += 1,
                _ => {}
            }
            let max_tokens = u32::try_from(e.output_length).unwrap_or(u32::MAX);
            bodies.push(request_body(&s.body(&p.text, max_tokens)));
            sized.push(p.tokens);
        }
        let mut notes = vec![];
        if prompts.inexact_blocks > 0 {
            notes.push(format!(
                "{} of {} blocks could not be sized to exactly 512 tokens (no /tokenize, or the tokenizer joins words across the closing filler)",
                prompts.inexact_blocks,
                prompts.blocks()
            ));
        }
        if over + under > 0 {
            notes.push(format!(
                "{over} prompt(s) are longer and {under} shorter than their input_length as built (a prompt of whole blocks carries the chat template's tokens on top; see requests[].prompt_tokens)"
            ));
        }
        s.log(format!("trace: {} prompts built from {} distinct blocks of 512 tokens", bodies.len(), prompts.blocks()));
        let expected = self.max_in_flight.map_or(64, |m| m as usize).min(64);
        s.client.warm_connections(expected).await;
        if let Some(busy) = crate::measuring::rate::settle(s).await {
            notes.push(busy);
        }
        let note = (!notes.is_empty()).then(|| notes.join("; "));
        Ok(Warmed { bodies: TraceBodies(Arc::new(bodies)), sized, note, start })
    }

    /// Each request at its scaled timestamp.
    async fn window(&self, s: &mut Session, warmed: &Warmed) -> Open {
        let before = s.scrape().await;
        let scraper =
            s.has_metrics.then(|| Scraper::start(s.client.clone(), s.clock, s.metrics_health.clone(), before));
        let source = &self.trace.source;
        let zero_ms = s.clock.now_ms() + LEAD_MS;
        // Requests at the zero are inside: the window opens a microsecond before it.
        let window = (zero_ms - 1e-3, zero_ms + replay_s(source) * 1000.0);
        let offsets = offsets_s(&self.trace.entries, source.from_s, source.speed);
        let n = offsets.len();
        let mut open = Open {
            flight: InFlight::new(warmed.bodies.clone(), self.max_in_flight),
            scraper,
            window,
            cpu0: crate::measuring::selfcheck::process_cpu_s(),
        };
        if let Some(g) = &s.gpu {
            g.take();
        }
        let mut due = Pacer::start(s.clock, zero_ms, offsets);
        let mut next_id = 0usize;
        let end = tokio::time::Instant::from_std(s.clock.instant_at(window.1));
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        loop {
            tokio::select! {
                biased;
                Some(at_ms) = due.rx.recv(), if next_id < n => {
                    open.flight.due(s, next_id, at_ms);
                    next_id += 1;
                }
                _ = tokio::time::sleep_until(end), if next_id >= n => break,
                Some(joined) = open.flight.set.join_next() => {
                    if let Ok(record) = joined {
                        open.flight.ended(s, record);
                    }
                }
                _ = tick.tick() => {
                    let elapsed = (s.clock.now_ms() - zero_ms).max(0.0) / 1000.0;
                    s.show(Some(self.live(Phase::Window, Some(elapsed), Some(open.flight.set.len() as u32))));
                }
            }
        }
        due.stop();
        if let Some(sc) = &open.scraper {
            sc.now();
        }
        open
    }

    /// Every request finishes (bounded by [`TraceReplay::drain_limit`]); what is open then is
    /// cancelled.
    async fn drain(&self, s: &mut Session, mut open: Open) -> Seen {
        let limit = self.drain_limit();
        let by = tokio::time::Instant::now() + limit;
        let cpu1 = crate::measuring::selfcheck::process_cpu_s();
        s.show(Some(self.live(Phase::Drain, None, Some(open.flight.set.len() as u32))));
        while !open.flight.set.is_empty() || !open.flight.held.is_empty() {
            tokio::select! {
                Some(joined) = open.flight.set.join_next() => match joined {
                    Ok(r) => open.flight.ended(s, r),
                    Err(_) => open.flight.send_held(s),
                },
                _ = tokio::time::sleep_until(by) => break,
            }
        }
        let drain_end_ms = s.clock.now_ms();
        let (records, sent) = open.flight.close().await;
        let scrapes = match open.scraper {
            Some(sc) => sc.finish().await,
            None => vec![],
        };
        Seen {
            records,
            sent,
            scrapes,
            window: open.window,
            drain_end_ms,
            drain_limit_s: limit.as_secs_f64(),
            cpu_s: open.cpu0.zip(cpu1),
        }
    }

    fn figures(&self, s: &mut Session, warmed: Warmed, seen: Seen) -> TraceRow {
        let Seen { records, sent, scrapes, window, drain_end_ms, drain_limit_s, cpu_s } = seen;
        let mut row = planned_row(&self.trace, self.max_in_flight);
        let by_id: std::collections::HashMap<usize, &crate::measuring::client::StreamRecord> =
            records.iter().map(|r| (r.id, r)).collect();
        let scheduled: std::collections::HashMap<usize, f64> = sent.iter().map(|x| (x.id, x.scheduled_ms)).collect();
        for (id, q) in row.requests.iter_mut().enumerate() {
            q.scheduled_ms = scheduled.get(&id).map(|t| speedmatrix_schema::stats::round3(*t));
            if let Some(r) = by_id.get(&id) {
                q.response_id = r.response_id.clone();
                q.prompt_tokens = r.served_prompt_tokens().or(warmed.sized[id]);
                q.output_tokens = r.completion_tokens;
            }
        }
        // A trace starts with nothing in flight: the saturation test counts from its first
        // request's end (as a rate cell's window opens after its warm-up).
        let steady_from_ms = records.iter().filter(|r| r.finished()).filter_map(|r| r.ended_ms).reduce(f64::min);
        let prompt_tokens = {
            let mut v: Vec<u64> = warmed.sized.iter().flatten().copied().collect();
            v.sort_unstable();
            v.get(v.len().saturating_sub(1) / 2).copied()
        };
        let obs = RateObservation {
            cell: row.cell.clone(),
            prompt_tokens,
            records,
            sent,
            scrapes,
            start_ms: window.0,
            warmup_end_ms: Some(window.0),
            window_end_ms: Some(window.1),
            warmup_timed_out: false,
            drain_end_ms,
            drain_limit_s,
            client_cpu_s: cpu_s,
            cores: crate::measuring::selfcheck::cores(),
            live_counter: s.info.kind.adapter().live_token_counter(),
            slo: s.results.config.rate_slo,
            steady_from_ms,
            // Not for a trace: its requests' lengths differ, so "context + max output" per
            // request in flight has no one value (METHODOLOGY, "Trace replay").
            kv: None,
        };
        row.cell = rate_cell(&obs);
        if let Some(note) = warmed.note {
            crate::measuring::measure::add_note(&mut row.cell.reason, note);
        }
        self.cache_figures(s, &mut row, &warmed.start, &obs.records, &obs.scrapes);
        row
    }

    fn not_started(&self, why: &CellError) -> TraceRow {
        let mut row = planned_row(&self.trace, self.max_in_flight);
        row.cell.status = CellStatus::Error;
        row.cell.reason = Some(why.to_string());
        row
    }

    fn line(&self, row: &TraceRow) -> String {
        let c = &row.cell;
        format!(
            "trace {}: {} · {} requests · offered {} req/s · achieved {} req/s · TTFT p50 {} ms · send lag p99 {} ms{}",
            self.label(),
            c.status.label(),
            row.requests.len(),
            c.offered_rps.map_or("—".into(), |v| format!("{v:.2}")),
            c.achieved_rps.map_or("—".into(), |v| format!("{v:.2}")),
            c.ttft_ms.and_then(|d| d.p50).map_or("—".into(), |v| format!("{v:.0}")),
            c.send_lag_ms.and_then(|d| d.p99).map_or("—".into(), |v| format!("{v:.2}")),
            c.reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
        )
    }

    fn record(&self, s: &mut Session, row: TraceRow) {
        s.results.traces[self.index] = row;
    }
}
