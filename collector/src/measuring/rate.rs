//! One open-loop rate cell (docs/METHODOLOGY.md, "Open-loop rate cells"), in the stages of
//! [`Measurement`]: **warm** (the cell's prompt, built once; idle connections), **window**
//! (requests sent at their scheduled instants — a warm-up until the cell's first request has
//! finished, then the fixed window; nothing is sent after it), **drain** (the window's requests
//! finish, bounded in time; the rest are cancelled), **figures** ([`crate::measuring::rate_figures`],
//! pure). The schedule comes from [`speedmatrix_schema::arrivals`]: the same seed gives the same
//! instants against any server.
//!
//! No coordinated omission: a request's TTFT and E2E latency count from its scheduled instant,
//! never from when it was sent; the send lag (scheduled → sent) is recorded per request. With
//! `--max-in-flight N`, a request due while N are open waits for one to end, keeping its
//! scheduled instant.
//!
//! Every request's prompt is the cell's prompt behind a request number of fixed width
//! (`[request 000042]`): each is a cold prefill (no prefix shared with another request), of the
//! same length, and its body is the cell's serialized body with the number written in place.
//!
//! A prefix-share cell (`--prefix-share`, [`crate::measuring::prefix`]) starts from a known
//! cache state (the server's reset, else salted prompts), its requests' prompts are a prefix
//! shared by the cell's requests then a rest unique to each (the request number first), the
//! prefix is sent once before the schedule starts, and the cell's measured hit rate over all its
//! requests is recorded beside the planned share, as a concurrency cell's.

use crate::measuring::client::{request_body, StreamRecord};
use crate::measuring::error::CellError;
use crate::measuring::measurement::Measurement;
use crate::measuring::pacer::{Bodies, InFlight, Pacer};
use crate::measuring::rate_figures::{rate_cell, RateObservation, Sent};
use crate::measuring::scrape::Scraper;
use crate::measuring::session::Session;
use speedmatrix_schema::arrivals::{cell_key, Schedule};
use speedmatrix_schema::progress::{Current, Measuring, Phase};
use speedmatrix_schema::{Arrival, CellStatus, ContextSize, RateCell};
use std::time::Duration;

/// Rate cell `index` of the results: requests at `context` arriving at `rate_rps`.
pub struct RateAt {
    /// Its place in `results.rates`.
    pub index: usize,
    /// Its context.
    pub context: ContextSize,
    /// Offered rate, requests/s.
    pub rate_rps: f64,
    /// The arrival process and seed.
    pub arrival: Arrival,
    /// `--max-in-flight`.
    pub max_in_flight: Option<u32>,
    /// Its prefix share (`--prefix-share`); `None`: every request a cold prefill.
    pub prefix_share: Option<f64>,
}

/// The request number's text in every prompt: fixed width, so every body has the same length.
const NUMBER: &str = "000000";

/// What the warm stage prepared: the cell's request bodies, the prompt's length and note.
#[derive(Clone)]
pub struct Warmed {
    body: Body,
    prompt_tokens: Option<u64>,
    prompt_note: Option<String>,
}

/// The bodies of a rate cell's requests.
#[derive(Clone)]
enum Body {
    /// One serialized body, the request number at `number_at`.
    Numbered { body: bytes::Bytes, number_at: usize },
    /// A prefix-share cell: a shared prefix, then each request's number and rest.
    Shared(SharedRate),
}

/// A prefix-share rate cell's warm stage: its bodies, its share and how its cache began.
#[derive(Clone)]
struct SharedRate {
    bodies: crate::measuring::prefix::Bodies,
    share: f64,
    start: crate::measuring::prefix::Start,
}

impl Bodies for Warmed {
    /// The body of request `id`: the cell's body with its number written in place.
    fn body(&self, id: usize) -> bytes::Bytes {
        match &self.body {
            Body::Numbered { body, number_at } => {
                let mut b = body.to_vec();
                let digits = format!("{:06}", id % 1_000_000);
                b[*number_at..*number_at + NUMBER.len()].copy_from_slice(digits.as_bytes());
                bytes::Bytes::from(b)
            }
            Body::Shared(x) => x.bodies.of(id),
        }
    }
}

/// What the window stage left open: the requests still running and the scraper.
pub struct Open {
    /// The requests open, held back, sent and ended (the bodies, for held ones sent from the
    /// drain).
    flight: InFlight<Warmed>,
    scraper: Option<Scraper>,
    times: Option<Times>,
    start_ms: f64,
    cpu0: Option<f64>,
}

/// The cell's instants, ms on the run clock.
#[derive(Debug, Clone, Copy)]
struct Times {
    warmup_end_ms: f64,
    window_end_ms: f64,
    warmup_timed_out: bool,
}

/// What the drain collected.
pub struct Seen {
    records: Vec<StreamRecord>,
    sent: Vec<Sent>,
    scrapes: Vec<crate::measuring::scrape::Scrape>,
    times: Option<Times>,
    drain_end_ms: f64,
    drain_limit_s: f64,
    cpu_s: Option<(f64, f64)>,
    start_ms: f64,
}

impl RateAt {
    fn live(&self, phase: Phase, elapsed: Option<f64>, streams: Option<u32>) -> Current {
        Current {
            measuring: Measuring::Rate {
                context: self.context.clone(),
                rate: speedmatrix_schema::rate_label(self.rate_rps),
            },
            phase,
            window_elapsed_s: elapsed,
            live_tps: None,
            streams_running: streams,
        }
    }

    /// The longest warm-up: the cell's first request must have finished by then.
    fn warmup_limit(s: &Session) -> Duration {
        (2 * s.spec.window).max(Duration::from_secs(10)).min(s.spec.stall.max(Duration::from_secs(10)))
    }
}

impl Measurement for RateAt {
    type Warmed = Warmed;
    type Open = Open;
    type Seen = Seen;
    type Row = RateCell;

    fn current(&self) -> Current {
        self.live(Phase::WarmUp, None, None)
    }

    fn name(&self) -> String {
        format!(
            "rate {}{} at {}",
            self.context.label,
            speedmatrix_schema::prefix::name_suffix(self.prefix_share),
            speedmatrix_schema::rate_label(self.rate_rps)
        )
    }

    /// The cell's prompt (not warmed: every request is a cold prefill), its body, and idle
    /// connections for the requests expected in flight at first.
    async fn warm(&self, s: &mut Session) -> Result<Warmed, CellError> {
        if let Some(share) = self.prefix_share {
            return self.warm_shared(s, share).await;
        }
        // The request number and its brackets take a few tokens of the context.
        let target = ContextSize { tokens: self.context.tokens.saturating_sub(8).max(1), ..self.context.clone() };
        let tag = format!("context {} rate {}", self.context.label, self.rate_rps);
        let p = s.build_prompt(&tag, &target).await?;
        let text = format!("[request {NUMBER}] {}", p.text);
        let body = request_body(&s.body(&text, s.spec.max_tokens));
        let needle = format!("[request {NUMBER}]");
        let number_at = body
            .windows(needle.len())
            .position(|w| w == needle.as_bytes())
            .map(|i| i + "[request ".len())
            .ok_or_else(|| CellError::WarmUp("the request body does not hold its request number".into()))?;
        s.client.warm_connections(self.expected_in_flight()).await;
        let busy_note = settle(s).await;
        let prompt_note = match (s.prompt_note(&self.context), busy_note) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        };
        Ok(Warmed { body: Body::Numbered { body, number_at }, prompt_tokens: p.tokens.map(|t| t + 8), prompt_note })
    }

    /// Send on schedule: a warm-up until the first request finished, then the window.
    async fn window(&self, s: &mut Session, warmed: &Warmed) -> Open {
        let before = s.scrape().await;
        let scraper =
            s.has_metrics.then(|| Scraper::start(s.client.clone(), s.clock, s.metrics_health.clone(), before));
        let start_ms = s.clock.now_ms();
        let mut open = Open {
            flight: InFlight::new(warmed.clone(), self.max_in_flight),
            scraper,
            times: None,
            start_ms,
            cpu0: crate::measuring::selfcheck::process_cpu_s(),
        };
        let Ok(schedule) = Schedule::new(&self.arrival, self.rate_rps, cell_key(self.context.tokens, self.rate_rps))
        else {
            return open; // flags are checked before: unreachable with a checked rate
        };
        let warmup_by = start_ms + Self::warmup_limit(s).as_secs_f64() * 1000.0;
        let window_ms = s.spec.window.as_secs_f64() * 1000.0;
        // The schedule's instants come from a thread of its own.
        let mut due = Pacer::start(s.clock, start_ms, schedule);
        let mut next_id = 0usize;
        let mut times: Option<Times> = None;
        s.show(Some(self.live(Phase::WarmUp, None, Some(0))));
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        loop {
            let end_ms = times.map_or(warmup_by, |t| t.window_end_ms);
            let end = tokio::time::Instant::from_std(s.clock.instant_at(end_ms));
            tokio::select! {
                biased;
                Some(at_ms) = due.rx.recv() => {
                    if at_ms > end_ms {
                        match times {
                            Some(_) => break, // the window closed: nothing more is sent
                            None => times = Some(self.window_opens(s, end_ms, window_ms, true)),
                        }
                    }
                    let id = next_id;
                    next_id += 1;
                    open.flight.due(s, id, at_ms);
                }
                _ = tokio::time::sleep_until(end) => match times {
                    Some(_) => break,
                    // The first request did not finish within the warm-up limit.
                    None => times = Some(self.window_opens(s, end_ms, window_ms, true)),
                },
                Some(joined) = open.flight.set.join_next() => {
                    let Ok(record) = joined else { continue };
                    if record.id == 0 && times.is_none() {
                        times = Some(self.window_opens(s, s.clock.now_ms(), window_ms, false));
                    }
                    open.flight.ended(s, record);
                }
                _ = tick.tick() => {
                    let elapsed = times.map(|t| (s.clock.now_ms() - t.warmup_end_ms).max(0.0) / 1000.0);
                    let phase = if times.is_some() { Phase::Window } else { Phase::WarmUp };
                    s.show(Some(self.live(phase, elapsed, Some(open.flight.set.len() as u32))));
                }
            }
        }
        due.stop();
        if let Some(sc) = &open.scraper {
            sc.now();
        }
        open.times = times;
        open
    }

    /// The window's requests finish (bounded by the window's own length, at least 5 s); what
    /// is still open then is cancelled.
    async fn drain(&self, s: &mut Session, mut open: Open) -> Seen {
        let drain_limit = s.spec.window.max(Duration::from_secs(5));
        let by = tokio::time::Instant::now() + drain_limit;
        let (w0, w1) = open.times.map_or((f64::INFINITY, f64::INFINITY), |t| (t.warmup_end_ms, t.window_end_ms));
        let cpu1 = crate::measuring::selfcheck::process_cpu_s();
        s.show(Some(self.live(Phase::Drain, None, Some(open.flight.set.len() as u32))));
        // Requests scheduled inside the window, sent and not yet ended.
        let window_ids = |o: &InFlight<Warmed>| -> usize {
            let ended: std::collections::HashSet<usize> = o.done.iter().map(|r| r.id).collect();
            o.sent.iter().filter(|x| x.scheduled_ms > w0 && x.scheduled_ms <= w1 && !ended.contains(&x.id)).count()
        };
        // Held requests are due already: they go out, within the limit, as slots free.
        while window_ids(&open.flight) > 0 || !open.flight.held.is_empty() {
            tokio::select! {
                Some(joined) = open.flight.set.join_next() => {
                    match joined {
                        Ok(r) => open.flight.ended(s, r),
                        Err(_) => open.flight.send_held(s),
                    }
                }
                _ = tokio::time::sleep_until(by) => break,
            }
        }
        // Held requests never sent: in the file as unanswered (no record).
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
            times: open.times,
            drain_end_ms,
            drain_limit_s: drain_limit.as_secs_f64(),
            cpu_s: open.cpu0.zip(cpu1),
            start_ms: open.start_ms,
        }
    }

    fn figures(&self, s: &mut Session, warmed: Warmed, seen: Seen) -> RateCell {
        let Seen { records, sent, scrapes, times, drain_end_ms, drain_limit_s, cpu_s, start_ms } = seen;
        s.outputs_measured(&records);
        // A prefix-share cell's hit rate counts every request of the cell, from the readings
        // around all of them (its second source and a restart read from the same).
        let shared = match &warmed.body {
            Body::Shared(x) => {
                Some((x.clone(), crate::measuring::prefix::count(records.iter(), &scrapes), scrapes.clone()))
            }
            Body::Numbered { .. } => None,
        };
        let mut planned = RateCell::new(self.context.clone(), self.rate_rps, self.arrival, self.max_in_flight);
        planned.prefix_share = self.prefix_share;
        let obs = RateObservation {
            cell: planned,
            prompt_tokens: warmed.prompt_tokens,
            records,
            sent,
            scrapes,
            start_ms,
            warmup_end_ms: times.map(|t| t.warmup_end_ms),
            window_end_ms: times.map(|t| t.window_end_ms),
            warmup_timed_out: times.is_some_and(|t| t.warmup_timed_out),
            drain_end_ms,
            drain_limit_s,
            client_cpu_s: cpu_s,
            cores: crate::measuring::selfcheck::cores(),
            live_counter: s.info.kind.adapter().live_token_counter(),
            slo: s.results.config.rate_slo,
            kv: s.info.plan_kv_budget().map(|budget| {
                let output = u64::from(s.spec.max_tokens).max(s.longest_output.unwrap_or(0));
                (self.context.tokens.saturating_add(output), budget)
            }),
            steady_from_ms: None,
        };
        let mut cell = rate_cell(&obs);
        if let Some(note) = warmed.prompt_note {
            crate::measuring::measure::add_note(&mut cell.reason, note);
        }
        if let Some((x, counted, scrapes)) = shared {
            prefix_figures(s, &mut cell, &x, counted, &scrapes);
        }
        cell
    }

    fn not_started(&self, why: &CellError) -> RateCell {
        let mut cell = RateCell::new(self.context.clone(), self.rate_rps, self.arrival, self.max_in_flight);
        cell.prefix_share = self.prefix_share;
        cell.status = CellStatus::Error;
        cell.reason = Some(why.to_string());
        cell
    }

    fn line(&self, cell: &RateCell) -> String {
        format!(
            "rate {:>6} at {:>10}{}: {} · achieved {} req/s · {} tok/s · TTFT p50 {} ms · send lag p99 {} ms{}{}",
            cell.context.label,
            cell.rate_label(),
            crate::measuring::prefix::line_part(cell.prefix_share, cell.prefix_cache.as_ref()),
            cell.status.label(),
            cell.achieved_rps.map_or("—".into(), |v| format!("{v:.2}")),
            cell.total_tps.map_or("—".into(), |v| format!("{v:.1}")),
            cell.ttft_ms.and_then(|d| d.p50).map_or("—".into(), |v| format!("{v:.0}")),
            cell.send_lag_ms.and_then(|d| d.p99).map_or("—".into(), |v| format!("{v:.2}")),
            crate::measuring::spec_decode::line_part(cell.spec_decode.as_ref()),
            cell.reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
        )
    }

    fn record(&self, s: &mut Session, cell: RateCell) {
        s.results.rates[self.index] = cell;
    }
}

/// Before a rate cell's schedule starts: wait until the server's running and waiting gauges
/// read 0 (a server still working on the previous cell's requests — after a saturated cell,
/// or one that keeps generating for cancelled requests — would start this cell loaded), for at
/// most the longer of the window and 10 s. Without `/metrics` nothing can tell; the cell starts
/// at once. Returns a note for the cell when the server was still busy at the limit.
pub(crate) async fn settle(s: &Session) -> Option<String> {
    if !s.has_metrics {
        return None;
    }
    let limit = s.spec.window.max(Duration::from_secs(10));
    let by = tokio::time::Instant::now() + limit;
    loop {
        let m = s.scrape().await?.metrics;
        let busy = m.running.unwrap_or(0.0) + m.waiting.unwrap_or(0.0);
        if busy <= 0.0 {
            return None;
        }
        if tokio::time::Instant::now() >= by {
            return Some(format!(
                "the server still had {busy:.0} request(s) running or waiting {:.0} s after the previous measurement: this cell started on a busy server",
                limit.as_secs_f64()
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A prefix-share rate cell's prefix cache, over its requests
/// ([`crate::measuring::prefix::judge`]).
fn prefix_figures(
    s: &Session,
    cell: &mut RateCell,
    shared: &SharedRate,
    counted: Option<crate::measuring::prefix::Counted>,
    scrapes: &[crate::measuring::scrape::Scrape],
) {
    let suffix = speedmatrix_schema::prefix::name_suffix(Some(shared.share));
    let name = format!("rate {}{suffix} at {}", cell.context.label, cell.rate_label());
    crate::measuring::prefix::judge(s, (shared.share, &shared.start), (counted, scrapes), &name, cell);
}

impl RateAt {
    /// Requests expected in flight at first (idle connections to open, slots to warm): the
    /// rate plus two, within `--max-in-flight`, at most 64.
    fn expected_in_flight(&self) -> usize {
        (self.rate_rps.ceil() as usize + 2).min(self.max_in_flight.map_or(64, |m| m as usize)).min(64)
    }

    /// A prefix-share cell's warm stage: the server idle, its cache put in a known state
    /// (reset, else its prompts salted with text unique to the cell), its prompts built, the
    /// shared prefix sent once (once per slot the first requests take on llama.cpp), idle
    /// connections. The schedule then finds the prefix cached from its first request.
    async fn warm_shared(&self, s: &mut Session, share: f64) -> Result<Warmed, CellError> {
        let expected = self.expected_in_flight();
        s.client.warm_connections(expected).await;
        let busy_note = settle(s).await;
        let start = s.cache_start().await;
        let tag = format!(
            "context {} rate {} prefix {}",
            self.context.label,
            self.rate_rps,
            speedmatrix_schema::prefix::share_label(share)
        );
        let salt = format!("rate cell {}", self.index);
        let prompt = crate::measuring::prefix::build(s, &self.context, share, &tag, start.salt(&salt)).await?;
        crate::measuring::prefix::warm(s, &prompt, u32::try_from(expected).unwrap_or(u32::MAX)).await?;
        let max_tokens = s.spec.max_tokens;
        let bodies = crate::measuring::prefix::Bodies::new(&prompt, |t| s.body(t, max_tokens));
        let prompt_note = match (s.prompt_note(&self.context), busy_note) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        };
        Ok(Warmed {
            body: Body::Shared(SharedRate { bodies, share, start }),
            prompt_tokens: prompt.tokens,
            prompt_note,
        })
    }

    /// The warm-up ends at `at_ms` (the first request finished, or the limit passed): the
    /// window runs from there for `--duration`.
    fn window_opens(&self, s: &Session, at_ms: f64, window_ms: f64, timed_out: bool) -> Times {
        if let Some(g) = &s.gpu {
            g.take();
        }
        if timed_out {
            s.log(format!(
                "note: {}: the cell's first request had not finished after the warm-up limit; measuring anyway",
                self.name()
            ));
        }
        Times { warmup_end_ms: at_ms, window_end_ms: at_ms + window_ms, warmup_timed_out: timed_out }
    }
}
