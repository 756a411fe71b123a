//! One decode cell, in stages (docs/METHODOLOGY.md, "Sustained decode"): **warm** (the
//! prompts and connections), **open** (N streams), **ready** (every stream decoding and the
//! queue empty, or the limit), **window** (a fixed length, finished streams replaced at once,
//! closed at its deadline), **drain** (cancel and collect). Each stage returns what it saw; the
//! [`Observation`] they make together goes to [`crate::measuring::measure::decode_cell`], the
//! one pure function that turns it into figures and a status. [`DecodeAt`] is the cell as a
//! [`Measurement`]: its window stage is open + ready + window.
//!
//! `/metrics` is read by a [`Scraper`] task of its own: no stage awaits a scrape while streams
//! run, so a slow exporter delays neither a replacement stream nor the window's close.

use crate::measuring::client::CellStream;
use crate::measuring::client::{request_body, FirstToken, StreamCtl, StreamRecord};
use crate::measuring::error::CellError;
use crate::measuring::held::Gate;
use crate::measuring::measure::{decode_cell, Observation, WindowTimes};
use crate::measuring::measurement::Measurement;
use crate::measuring::prompt::Prompt;
use crate::measuring::scrape::Scraper;
use crate::measuring::session::Session;
use speedmatrix_schema::progress::{Current, Measuring, Phase};
use speedmatrix_schema::stats::round3;
use speedmatrix_schema::{CellStatus, ContextSize, DecodeCell, Readiness, ReadinessOutcome};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

/// Decode cell `index` of the results: `concurrency` streams at `context`, repeat `repeat.0`
/// of `repeat.1`.
pub struct DecodeAt {
    /// Its place in `results.decode`.
    pub index: usize,
    /// Its context.
    pub context: ContextSize,
    /// Its streams.
    pub concurrency: u32,
    /// Which repeat this is, of how many (`--repeat`).
    pub repeat: (u32, u32),
    /// Its prefix share (`--prefix-share`); `None`: the streams share one warmed prompt.
    pub prefix_share: Option<f64>,
}

/// What is still open when the window closes: the streams and the scraper, with what the ready
/// and window stages saw (no window when a stream failed before it).
pub struct DecodeOpen {
    streams: Streams,
    scraper: Option<Scraper>,
    readiness: Readiness,
    window: Option<WindowSeen>,
}

/// What the drain collected: every stream's record (in id order) and the `/metrics` readings.
pub struct DecodeSeen {
    records: Vec<CellStream>,
    scrapes: Vec<crate::measuring::scrape::Scrape>,
    readiness: Readiness,
    window: Option<WindowSeen>,
}

impl Measurement for DecodeAt {
    type Warmed = Warmed;
    type Open = DecodeOpen;
    type Seen = DecodeSeen;
    type Row = DecodeCell;

    fn current(&self) -> Current {
        live_state(&self.context, self.concurrency, Phase::WarmUp, None, None, None)
    }

    fn name(&self) -> String {
        format!(
            "decode {} × {}{}",
            self.context.label,
            self.concurrency,
            speedmatrix_schema::prefix::name_suffix(self.prefix_share)
        )
    }

    async fn warm(&self, s: &mut Session) -> Result<Warmed, CellError> {
        match self.prefix_share {
            Some(share) => {
                let salt = format!("cell {} repeat {}", self.index, self.repeat.0);
                warm_shared(s, &self.context, self.concurrency, share, &salt).await
            }
            None => warm_up(s, &self.context, self.concurrency).await,
        }
    }

    /// Open the streams, wait until they are ready, then the window.
    async fn window(&self, s: &mut Session, warmed: &Warmed) -> DecodeOpen {
        let (ctx, n) = (&self.context, self.concurrency);
        // The counters before any stream opens (awaited: nothing is being measured yet).
        let before = s.scrape().await;
        let mut scraper =
            s.has_metrics.then(|| Scraper::start(s.client.clone(), s.clock, s.metrics_health.clone(), before));
        let mut streams = Streams::open(s, warmed, n);
        s.show(Some(live_state(ctx, n, Phase::Readiness, None, None, Some(n))));
        let readiness = ready(s, &mut streams, scraper.as_mut(), warmed, n).await;
        let window = match readiness.outcome {
            ReadinessOutcome::Failed => None,
            _ => Some(run_window(s, &mut streams, scraper.as_ref(), ctx, n).await),
        };
        DecodeOpen { streams, scraper, readiness, window }
    }

    async fn drain(&self, s: &mut Session, open: DecodeOpen) -> DecodeSeen {
        let DecodeOpen { streams, scraper, readiness, window } = open;
        let elapsed = window.as_ref().map(|w| w.elapsed_s);
        s.show(Some(live_state(&self.context, self.concurrency, Phase::Drain, elapsed, None, Some(streams.running()))));
        let records = streams.drain().await;
        let scrapes = match scraper {
            Some(sc) => sc.finish().await,
            None => vec![],
        };
        if let Some(m) = scrapes.last().map(|sc| &sc.metrics) {
            s.spec_latest = m.spec_drafts.zip(m.spec_draft_tokens).or(s.spec_latest);
        }
        DecodeSeen { records, scrapes, readiness, window }
    }

    fn figures(&self, s: &mut Session, warmed: Warmed, seen: DecodeSeen) -> DecodeCell {
        decode_figures(s, &self.context, self.concurrency, warmed, seen)
    }

    fn not_started(&self, why: &CellError) -> DecodeCell {
        let mut cell = crate::measuring::measure::blank_cell(&self.context, self.concurrency);
        cell.prefix_share = self.prefix_share;
        cell.status = CellStatus::Error;
        cell.reason = Some(why.to_string());
        cell
    }

    fn line(&self, cell: &DecodeCell) -> String {
        let (repeat, n) = self.repeat;
        let which = if n > 1 { format!(" (repeat {repeat} of {n})") } else { String::new() };
        format!(
            "decode {:>6} × {:>3}{}{which}: {} · {} tok/s · TTFT p50 {} ms{}{}",
            cell.context.label,
            cell.concurrency,
            crate::measuring::prefix::line_part(cell.prefix_share, cell.prefix_cache.as_ref()),
            cell.status.label(),
            cell.total_tps.map_or("—".into(), |v| format!("{v:.1}")),
            cell.ttft_ms.and_then(|d| d.p50).map_or("—".into(), |v| format!("{v:.0}")),
            crate::measuring::spec_decode::line_part(cell.spec_decode.as_ref()),
            cell.reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
        )
    }

    /// The cell in its place (folded into the cell's other repeats when the run repeats cells);
    /// a measured cell's scrapes update the speculative-decoding figure.
    fn record(&self, s: &mut Session, cell: DecodeCell) {
        let measured = cell.status.is_measured();
        match self.repeat {
            (_, 1) => s.results.decode[self.index] = cell,
            (repeat, _) => speedmatrix_schema::repeats::fold_in_place(&mut s.results.decode[self.index], cell, repeat),
        }
        if measured {
            s.speculation_from_counters();
        }
    }
}

/// The cell from what its stages saw: the observation → figures and status
/// ([`decode_cell`]), with the notes on rate limits and early stops.
fn decode_figures(s: &mut Session, ctx: &ContextSize, n: u32, warmed: Warmed, seen: DecodeSeen) -> DecodeCell {
    let DecodeSeen { records, scrapes, readiness, window } = seen;
    let notes_of_warm_up = [warmed.prompt_note.clone(), warmed.slot_note.clone()];
    let counted = warmed
        .shared
        .as_ref()
        .and_then(|_| crate::measuring::prefix::count(records.iter().map(|r| &r.record), &scrapes));
    // The prefix cache's second source (and a restart) is read from the same readings.
    let prefix_scrapes = warmed.shared.as_ref().map(|_| scrapes.clone()).unwrap_or_default();
    let rate_limited = crate::measuring::measure::rate_limit_note(records.iter().map(|r| &r.record));
    let early = crate::measuring::measure::early_stop_note(records.iter().map(|r| &r.record), s.spec.max_tokens);
    let endings = crate::measuring::endings::verdict(records.iter().map(|r| &r.record), s.spec.max_tokens);
    s.outputs_measured(records.iter().map(|r| &r.record));
    let info = &s.info;
    let obs = Observation {
        context: ctx.clone(),
        concurrency: n,
        prompt_tokens: warmed.prompts[0].tokens,
        streams: records,
        readiness: Some(readiness),
        window: window.as_ref().map(|w| w.times),
        scrapes,
        live_counter: info.kind.adapter().live_token_counter(),
        queued_by_construction: info.queued_by_construction(n),
        cold_ttft_ms: warmed.cold_ttft_ms,
        client_cpu_s: window.as_ref().and_then(|w| w.cpu_s),
        cores: crate::measuring::selfcheck::cores(),
        gpu: window.and_then(|w| w.gpu),
    };
    let (cell, notes) = decode_cell(&obs);
    for line in notes {
        s.log(line);
    }
    for note in endings.error.iter().chain(&endings.notes) {
        s.log(format!("note: decode {} × {n}: {note}", ctx.label));
    }
    let mut cell = crate::measuring::endings::apply(cell, endings);
    for note in notes_of_warm_up.into_iter().flatten() {
        crate::measuring::measure::add_note(&mut cell.reason, note);
    }
    for note in [rate_limited, early].into_iter().flatten() {
        s.log(format!("note: decode {} × {n}: {note}", ctx.label));
        crate::measuring::measure::add_note(&mut cell.reason, note);
    }
    if let Some(shared) = &warmed.shared {
        prefix_figures(s, &mut cell, shared, counted, &prefix_scrapes);
    }
    cell
}

/// A prefix-share cell's prefix cache ([`crate::measuring::prefix::judge`]).
fn prefix_figures(
    s: &Session,
    cell: &mut DecodeCell,
    shared: &SharedWarm,
    counted: Option<crate::measuring::prefix::Counted>,
    scrapes: &[crate::measuring::scrape::Scrape],
) {
    let suffix = speedmatrix_schema::prefix::name_suffix(Some(shared.share));
    let name = format!("decode {} × {}{suffix}", cell.context.label, cell.concurrency);
    crate::measuring::prefix::judge(s, (shared.share, &shared.start), (counted, scrapes), &name, cell);
}

/// The live state of this cell for the terminal bar and the live page (`streams`: how many
/// run now; none while warming up).
fn live_state(
    ctx: &ContextSize,
    n: u32,
    phase: Phase,
    window_elapsed_s: Option<f64>,
    live_tps: Option<f64>,
    streams: Option<u32>,
) -> Current {
    Current {
        measuring: Measuring::Decode { context: ctx.clone(), concurrency: n },
        phase,
        window_elapsed_s,
        live_tps,
        streams_running: streams,
    }
}

/// What the warm stage prepared: each stream's warmed prompt, its serialized request, and the
/// context's cold TTFT (the readiness limit grows with it).
pub struct Warmed {
    /// One prompt (shared) or one per stream (`--distinct-prompts`); a prefix-share cell's
    /// first request's.
    pub prompts: Vec<Prompt>,
    /// The request body of each prompt, serialized once (empty for a prefix-share cell).
    pub bodies: Vec<bytes::Bytes>,
    /// A prefix-share cell: every request's body (a rest of its own), its share and how its
    /// cache began.
    pub shared: Option<SharedWarm>,
    /// TTFT of the context's cold (first) request, ms.
    pub cold_ttft_ms: Option<f64>,
    /// The note on the prompt's real length, when it is off its context
    /// ([`Session::prompt_check`]).
    pub prompt_note: Option<String>,
    /// The note on slots the warm-up could not pin ([`Session::slot_note`]).
    pub slot_note: Option<String>,
}

/// Warm: the cell's prompts in the server's prefix cache (one warm-up request each, unless the
/// prefill row already sent it; on a server with per-slot caches, the shared prompt in every
/// slot the streams take), their bodies serialized, and one idle connection per stream.
async fn warm_up(s: &mut Session, ctx: &ContextSize, n: u32) -> Result<Warmed, CellError> {
    let count = if s.spec.distinct_prompts { n as usize } else { 1 };
    let mut prompts = Vec::with_capacity(count);
    for i in 0..count {
        prompts.push(s.warm_prompt(ctx, i).await?);
    }
    let prompt_note = s.prompt_note(ctx);
    if count == 1 {
        s.warm_slots(ctx, &prompts[0], n).await?;
    }
    let bodies = prompts.iter().map(|p| request_body(&s.body(&p.text, s.spec.max_tokens))).collect();
    // One idle connection per stream, so no stream pays connection set-up inside its TTFT.
    s.client.warm_connections(n as usize).await;
    let slot_note = if count == 1 { s.slot_note(n) } else { None };
    Ok(Warmed { prompts, bodies, shared: None, cold_ttft_ms: s.cold_ttft(ctx), prompt_note, slot_note })
}

/// A prefix-share cell's warm stage ([`crate::measuring::prefix`]).
pub struct SharedWarm {
    bodies: crate::measuring::prefix::Bodies,
    share: f64,
    start: crate::measuring::prefix::Start,
}

/// Warm a prefix-share cell: its cache put in a known state (reset, else its prompts salted
/// with `salt`), its prompts built, the shared prefix sent once (once per slot the streams take
/// on llama.cpp) so the streams find it cached, and one idle connection per stream. The
/// warm-up's TTFT (a whole prompt after the reset) is the cell's cold TTFT.
async fn warm_shared(s: &mut Session, ctx: &ContextSize, n: u32, share: f64, salt: &str) -> Result<Warmed, CellError> {
    let start = s.cache_start().await;
    let tag = format!("context {} prefix {}", ctx.label, speedmatrix_schema::prefix::share_label(share));
    let prompt = crate::measuring::prefix::build(s, ctx, share, &tag, start.salt(salt)).await?;
    let cold = crate::measuring::prefix::warm(s, &prompt, n).await?;
    let max_tokens = s.spec.max_tokens;
    let bodies = crate::measuring::prefix::Bodies::new(&prompt, |t| s.body(t, max_tokens));
    s.client.warm_connections(n as usize).await;
    Ok(Warmed {
        prompts: vec![prompt.prompt(0)],
        bodies: vec![],
        shared: Some(SharedWarm { bodies, share, start }),
        cold_ttft_ms: cold.or(s.cold_ttft(ctx)),
        prompt_note: s.prompt_note(ctx),
        slot_note: s.slot_note(n),
    })
}

/// The streams of one cell: spawned, watched, replaced and collected.
struct Streams {
    set: JoinSet<(StreamRecord, bool)>,
    events: mpsc::UnboundedReceiver<FirstToken>,
    events_tx: mpsc::UnboundedSender<FirstToken>,
    cancel: watch::Sender<bool>,
    live: Arc<AtomicU64>,
    next_id: usize,
    bodies: Vec<bytes::Bytes>,
    /// A prefix-share cell's bodies: each request its own.
    per_request: Option<crate::measuring::prefix::Bodies>,
    client: crate::measuring::client::Client,
    path: &'static str,
    clock: crate::measuring::client::Clock,
    stall: Duration,
    done: Vec<CellStream>,
    opened_ms: f64,
    /// The opening streams' gate: their requests leave together ([`Gate`]).
    gate: Option<Gate>,
}

impl Streams {
    /// Open: `n` streams sent at once.
    fn open(s: &Session, w: &Warmed, n: u32) -> Streams {
        let (events_tx, events) = mpsc::unbounded_channel();
        let mut st = Streams {
            set: JoinSet::new(),
            events,
            events_tx,
            cancel: watch::channel(false).0,
            live: Arc::new(AtomicU64::new(0)),
            next_id: 0,
            bodies: w.bodies.clone(),
            per_request: w.shared.as_ref().map(|x| x.bodies.clone()),
            client: s.client.clone(),
            path: s.path,
            clock: s.clock,
            stall: s.spec.stall,
            done: vec![],
            opened_ms: s.clock.now_ms(),
            gate: Some(Gate::new(n as usize)),
        };
        for _ in 0..n {
            st.spawn(true);
        }
        st
    }

    fn spawn(&mut self, opening: bool) {
        let id = self.next_id;
        self.next_id += 1;
        let ctl = StreamCtl {
            clock: self.clock,
            stall: self.stall,
            cancel: self.cancel.subscribe(),
            id,
            events: Some(self.events_tx.clone()),
            live_tokens: Some(self.live.clone()),
            keep_text: false,
            gate: opening.then(|| self.gate.clone()).flatten(),
        };
        let body = match &self.per_request {
            Some(b) => b.of(id),
            None => self.bodies[id % self.bodies.len()].clone(),
        };
        let (client, path) = (self.client.clone(), self.path);
        self.set.spawn(async move { (client.stream(path, &body, ctl).await, opening) });
    }

    /// Keep a finished stream's record; replace it at once when it ended well (N stays
    /// constant). Returns whether it failed.
    fn ended(&mut self, joined: Result<(StreamRecord, bool), tokio::task::JoinError>) -> bool {
        let Ok((record, opening)) = joined else { return false };
        let failed = record.error.is_some();
        if !failed {
            self.spawn(false);
        }
        self.done.push(CellStream { record, opening });
        failed
    }

    /// Streams running now.
    fn running(&self) -> u32 {
        u32::try_from(self.set.len()).unwrap_or(u32::MAX)
    }

    /// Drain: cancel every stream still open and collect all records, in id order.
    async fn drain(mut self) -> Vec<CellStream> {
        let _ = self.cancel.send(true);
        while let Some(joined) = self.set.join_next().await {
            if let Ok((record, opening)) = joined {
                self.done.push(CellStream { record, opening });
            }
        }
        self.done.sort_by_key(|c| c.record.id);
        self.done
    }
}

/// Ready: wait until `n` streams (fewer where the server runs fewer at once) have produced a
/// token and the server's queue gauge reads 0, a stream fails, or the limit passes: the stall
/// timeout, or twice the context's cold TTFT plus a second when that is longer (opening
/// streams prefill behind each other's tails).
async fn ready(s: &Session, st: &mut Streams, mut scraper: Option<&mut Scraper>, w: &Warmed, n: u32) -> Readiness {
    let limit = s.spec.stall.max(Duration::from_secs_f64(2.0 * w.cold_ttft_ms.unwrap_or(0.0) / 1000.0 + 1.0));
    let by = tokio::time::Instant::now() + limit;
    let need = s.info.decoding_at_once(n) as usize;
    // More streams than the server runs at once never all decode, nor does its queue empty.
    let watch_queue = scraper.is_some() && s.info.queued_by_construction(n).is_none();
    let mut producing = HashSet::new();
    // The queue as the newest reading since the streams opened says: unknown until one arrives.
    let mut queue_empty = (!watch_queue).then_some(true);
    // A server whose /metrics stops answering must not hold readiness to its limit: once every
    // stream produces, a reading has this long to come.
    let mut grace: Option<tokio::time::Instant> = None;
    let outcome = loop {
        if producing.len() >= need {
            let g = *grace.get_or_insert_with(|| tokio::time::Instant::now() + 4 * crate::measuring::scrape::EVERY);
            // A /metrics that stopped answering is not waited for (its failure is noted).
            let gone = scraper.as_deref().is_none_or(|sc| !sc.answering());
            if queue_empty == Some(true) || (queue_empty.is_none() && (gone || tokio::time::Instant::now() >= g)) {
                break ReadinessOutcome::Ready;
            }
        }
        let wake = grace.filter(|_| queue_empty.is_none()).unwrap_or(by).min(by);
        let changed = async {
            match scraper.as_deref_mut() {
                Some(sc) => sc.changed().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            Some(FirstToken { id }) = st.events.recv() => { producing.insert(id); },
            Some(joined) = st.set.join_next() => {
                let id = joined.as_ref().map(|(r, _)| r.id).ok();
                if st.ended(joined) {
                    break ReadinessOutcome::Failed;
                }
                producing.extend(id);
            }
            _ = changed => {
                // Only when the queue can empty: a server that runs fewer than `n` at once
                // always reads waiting > 0, and a reading must not undo `queue_empty` above.
                let fresh = scraper
                    .as_deref()
                    .filter(|_| watch_queue)
                    .and_then(Scraper::latest)
                    .filter(|x| x.t_ms >= st.opened_ms);
                if let Some(x) = fresh {
                    // No waiting gauge at all (an exporter without one): nothing says "queued".
                    queue_empty = Some(x.metrics.waiting.is_none_or(|w| w == 0.0));
                }
            }
            _ = tokio::time::sleep_until(wake) => if wake >= by { break ReadinessOutcome::TimedOut },
        }
    };
    if outcome == ReadinessOutcome::TimedOut {
        s.log(format!(
            "note: {} streams: not every stream was decoding with an empty queue after {limit:?}; measuring anyway",
            n
        ));
    }
    Readiness {
        outcome,
        after_ms: round3(s.clock.now_ms() - st.opened_ms),
        limit_ms: round3(limit.as_secs_f64() * 1000.0),
        streams_producing: u32::try_from(producing.len()).unwrap_or(u32::MAX),
    }
}

/// What the window stage saw besides the records.
struct WindowSeen {
    times: WindowTimes,
    /// From the window's start to its close, s.
    elapsed_s: f64,
    cpu_s: Option<(f64, f64)>,
    gpu: Option<Vec<(f64, crate::measuring::gpu::Reading)>>,
}

/// Window: from now for `--duration`, streams that finish are replaced at once; the deadline
/// comes first in every wait, and nothing in the loop awaits anything but the streams. The
/// close is measured (`closed_ms`), then the streams are cancelled.
async fn run_window(s: &Session, st: &mut Streams, scraper: Option<&Scraper>, ctx: &ContextSize, n: u32) -> WindowSeen {
    if let Some(g) = &s.gpu {
        g.take(); // readings before the window do not count
    }
    let cpu0 = crate::measuring::selfcheck::process_cpu_s();
    let start_ms = s.clock.now_ms();
    if let Some(sc) = scraper {
        sc.now();
    }
    let deadline_ms = start_ms + s.spec.window.as_secs_f64() * 1000.0;
    let deadline = tokio::time::Instant::from_std(s.clock.instant_at(deadline_ms));
    let live_at_start = st.live.load(Ordering::Relaxed);
    s.show(Some(live_state(ctx, n, Phase::Window, Some(0.0), None, Some(st.running()))));
    let mut tick =
        tokio::time::interval_at(tokio::time::Instant::now() + Duration::from_millis(500), Duration::from_millis(500));
    loop {
        tokio::select! {
            biased;
            _ = tokio::time::sleep_until(deadline) => break,
            Some(joined) = st.set.join_next() => { st.ended(joined); }
            Some(_) = st.events.recv() => {}
            _ = tick.tick() => {
                let secs = (s.clock.now_ms() - start_ms) / 1000.0;
                let tokens = st.live.load(Ordering::Relaxed) - live_at_start;
                let tps = tokens as f64 / secs.max(1e-3);
                // Publishing never awaits (see crate::measuring::live_state).
                s.show(Some(live_state(ctx, n, Phase::Window, Some(secs), Some(tps), Some(st.running()))));
            }
        }
    }
    let closed_ms = s.clock.now_ms();
    let _ = st.cancel.send(true);
    let cpu1 = crate::measuring::selfcheck::process_cpu_s();
    if let Some(sc) = scraper {
        sc.now();
    }
    WindowSeen {
        times: WindowTimes { start_ms, deadline_ms, closed_ms },
        elapsed_s: (closed_ms - start_ms) / 1000.0,
        cpu_s: cpu0.zip(cpu1),
        gpu: s.gpu.as_ref().map(|g| g.take()),
    }
}
