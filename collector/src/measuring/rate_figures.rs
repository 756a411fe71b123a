//! From what a rate cell's stages observed to its figures and status (pure: no I/O, no clock;
//! docs/METHODOLOGY.md, "Open-loop rate cells"). [`rate_cell`] is the one entry.
//!
//! The window is `(warm-up end, window end]` on the run clock. **The window's requests** are
//! those *scheduled* inside it: their TTFT and E2E latency count from their scheduled instants
//! (a late send or a held-back request cannot make them look faster), their send lag is
//! scheduled → sent, and their TPOT and ITL are over their whole streams. **Throughput** counts
//! the tokens that arrived inside the window, from any request, as a decode cell does.

use crate::measuring::client::{CellStream, StreamRecord};
use crate::measuring::measure::{
    count_tokens, counter_delta, distribution, failures, sample, server_figures, window_figures,
};
use crate::measuring::scrape::Scrape;
use speedmatrix_schema::rate::{rate_status, RateEvidence};
use speedmatrix_schema::stats::round3;
use speedmatrix_schema::{CellStatus, MissingFigure, RateCell};
use std::collections::HashMap;

/// One request as the scheduler sent it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sent {
    /// Its id (its record's id).
    pub id: usize,
    /// Its scheduled instant, ms on the run clock.
    pub scheduled_ms: f64,
    /// `--max-in-flight` held it back.
    pub held: bool,
}

/// Everything a rate cell's stages observed.
#[derive(Debug, Clone)]
pub struct RateObservation {
    /// The planned cell (context, rate, arrival), to fill.
    pub cell: RateCell,
    /// The prompts' length as built, tokens (server usage overrides).
    pub prompt_tokens: Option<u64>,
    /// Every request's record, in id order.
    pub records: Vec<StreamRecord>,
    /// Every request as sent, in id order.
    pub sent: Vec<Sent>,
    /// `/metrics` readings from before the first request to after the drain.
    pub scrapes: Vec<Scrape>,
    /// The cell started (its schedule's zero), ms.
    pub start_ms: f64,
    /// The warm-up ended and the window opened, ms (`None`: no window).
    pub warmup_end_ms: Option<f64>,
    /// The window closed, ms.
    pub window_end_ms: Option<f64>,
    /// The warm-up ended at its limit, not when the first request finished.
    pub warmup_timed_out: bool,
    /// The drain ended (what was open then was cancelled), ms.
    pub drain_end_ms: f64,
    /// The drain's limit, s.
    pub drain_limit_s: f64,
    /// The collector's CPU time at the window's open and the drain's start, s.
    pub client_cpu_s: Option<(f64, f64)>,
    /// Cores the collector may use.
    pub cores: usize,
    /// The engine's output-token counter grows while requests stream.
    pub live_counter: bool,
    /// `--slo`: goodput and whether the cell meets it.
    pub slo: Option<speedmatrix_schema::RateSlo>,
    /// KV-cache tokens per request and the server's budget, where the over-capacity rule
    /// applies.
    pub kv: Option<(u64, u64)>,
    /// The saturation test counts from here, ms, when it lies inside the window (a trace
    /// replay: its first request's end, since a trace starts with nothing in flight); `None`:
    /// from the window's open (a rate cell's warm-up already ended there).
    pub steady_from_ms: Option<f64>,
}

/// The cell's figures and status.
pub fn rate_cell(obs: &RateObservation) -> RateCell {
    let mut cell = obs.cell.clone();
    let streams: Vec<CellStream> =
        obs.records.iter().map(|r| CellStream { record: r.clone(), opening: false }).collect();
    let sent: HashMap<usize, Sent> = obs.sent.iter().map(|s| (s.id, *s)).collect();
    let usage = streams.iter().map(|s| s.record.prompt_tokens);
    cell.prompt_tokens = crate::measuring::measure::prompt_count(usage, obs.prompt_tokens, &mut cell.missing);
    let failed = failures(&streams);
    let (Some(w0), Some(w1)) = (obs.warmup_end_ms, obs.window_end_ms) else {
        cell.status = CellStatus::Error;
        cell.reason = Some(failed.first().cloned().unwrap_or_else(|| "no window was measured".into()));
        return cell;
    };
    let server_tokens =
        if obs.live_counter { counter_delta(&obs.scrapes, |m| m.generation_tokens, w0, w1) } else { None };
    let server = server_figures(&obs.scrapes, w0, w1, obs.live_counter);
    let counted =
        count_tokens(&streams, server_tokens, server.as_ref().and_then(|s| s.generation_tokens), Some((w0, w1)));
    let in_window = |id: usize| sent.get(&id).is_some_and(|s| s.scheduled_ms > w0 && s.scheduled_ms <= w1);
    let scheduled_at = |r: &StreamRecord| sent.get(&r.id).map_or(r.sent_ms, |s| s.scheduled_ms);

    // The window's requests: latencies from their scheduled instants.
    let (mut ttft, mut e2e, mut lag, mut held, mut unfinished) = (vec![], vec![], vec![], 0u64, 0u64);
    let (mut mine, mut my_weights) = (vec![], vec![]);
    let by_id: HashMap<usize, usize> = streams.iter().enumerate().map(|(i, s)| (s.record.id, i)).collect();
    // Every request scheduled in the window, sent or (held back to the end) not.
    let window_sent: Vec<&Sent> = obs.sent.iter().filter(|x| in_window(x.id)).collect();
    for x in &window_sent {
        held += u64::from(x.held);
        let Some(&i) = by_id.get(&x.id) else {
            unfinished += 1; // never sent: held back until the drain ended
            continue;
        };
        let (s, w) = (&streams[i], &counted.weights[i]);
        let r = &s.record;
        lag.push((r.sent_ms - x.scheduled_ms).max(0.0));
        if let Some(first) = r.chunks.first() {
            ttft.push(first.t_ms - x.scheduled_ms);
        }
        match (r.finished(), r.chunks.last()) {
            (true, Some(last)) => e2e.push(last.t_ms - x.scheduled_ms),
            _ => unfinished += 1,
        }
        mine.push(s.clone());
        my_weights.push(w.clone());
    }
    let scheduled = window_sent.len() as u64;
    let whole =
        window_figures(&mine, &my_weights, obs.start_ms, obs.drain_end_ms.max(obs.start_ms + 1.0), f64::INFINITY);
    let f = window_figures(&streams, &counted.weights, w0, w1, f64::INFINITY);
    let window_s = (w1 - w0) / 1000.0;
    let (avg, max, at_open, at_close) = in_flight(&streams, &scheduled_at, w0, w1);
    // The saturation test's part of the window: from `steady_from_ms` when it is inside.
    let s0 = obs.steady_from_ms.filter(|t| *t > w0 && *t < w1).unwrap_or(w0);
    let (e_avg, e_open, e_scheduled, e_completed) = match s0 > w0 {
        false => (avg, at_open, scheduled, f.completed_requests),
        true => {
            let (a, _, open, _) = in_flight(&streams, &scheduled_at, s0, w1);
            let arrived = window_sent.iter().filter(|x| x.scheduled_ms > s0).count() as u64;
            let done = window_figures(&streams, &counted.weights, s0, w1, f64::INFINITY).completed_requests;
            (a, open, arrived, done)
        }
    };
    let inside = |t_ms: f64| t_ms > s0 && t_ms <= w1;
    let waiting: Vec<f64> = obs.scrapes.iter().filter(|s| inside(s.t_ms)).filter_map(|s| s.metrics.waiting).collect();
    let lag_d = distribution(&lag);
    let ttft_d = distribution(&ttft);
    let (status, reason, saturation) = rate_status(&RateEvidence {
        failures: failed,
        scheduled: e_scheduled,
        completed: e_completed,
        unfinished,
        in_flight: (e_open, at_close),
        avg_in_flight: e_avg,
        waiting: waiting.first().copied().zip(waiting.last().copied()),
        send_lag_p99_ms: lag_d.and_then(|d| d.p99),
        send_lags_ms: lag.clone(),
        ttft_p50_ms: ttft_d.and_then(|d| d.p50),
        held_back: held,
        kv: obs.kv,
    });
    cell.status = status;
    cell.reason = reason;
    cell.saturation = Some(saturation);
    if status == CellStatus::OverCapacity {
        cell.capacity = obs.kv.and_then(|(per, budget)| speedmatrix_schema::rate::rate_capacity(avg, per, budget));
    }
    cell.warmup_s = Some(round3((w0 - obs.start_ms) / 1000.0));
    cell.window_s = Some(round3(window_s));
    cell.window_start_ms = Some(round3(w0));
    cell.drain_s = Some(round3((obs.drain_end_ms - w1).max(0.0) / 1000.0));
    cell.scheduled_requests = Some(scheduled);
    cell.completed_requests = Some(f.completed_requests);
    cell.offered_rps = Some(round3(scheduled as f64 / window_s));
    cell.achieved_rps = Some(round3(f.completed_requests as f64 / window_s));
    cell.send_lag_ms = lag_d;
    cell.held_back = cell.max_in_flight.map(|_| held);
    cell.avg_in_flight = Some(round3(avg));
    cell.max_in_flight_seen = Some(max);
    cell.requests = streams
        .iter()
        .zip(&counted.weights)
        .map(|(s, w)| {
            let at = scheduled_at(&s.record);
            let mut q = sample(&s.record, w, false, Some((w0, w1)));
            q.start_ms = round3(at);
            q.send_lag_ms = Some(round3((s.record.sent_ms - at).max(0.0)));
            q.ttft_ms = s.record.chunks.first().map(|c| round3(c.t_ms - at));
            q.ttft_content_ms = s.record.first_content_ms.map(|t| round3(t - at));
            q.e2e_ms = if s.record.finished() { s.record.chunks.last().map(|c| round3(c.t_ms - at)) } else { None };
            q.opening = None;
            q
        })
        .collect();
    // Requests `--max-in-flight` held back until the drain ended were never sent: in the file
    // with their scheduled instant, no send lag, `cancelled`.
    for x in obs.sent.iter().filter(|x| !by_id.contains_key(&x.id)) {
        let mut q = speedmatrix_schema::RequestSample::at(round3(x.scheduled_ms));
        q.finish_reason = Some(speedmatrix_schema::FinishReason::Cancelled);
        cell.requests.push(q);
    }
    cell.requests.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
    if obs.warmup_timed_out {
        crate::measuring::measure::add_note(
            &mut cell.reason,
            "the cell's first request had not finished when the warm-up reached its limit: the window may have opened before the schedule was in steady state".into(),
        );
    }
    if status == CellStatus::Error {
        return cell;
    }
    if let Some(note) = &counted.note {
        if !counted.trusted {
            cell.status = CellStatus::Error;
            cell.reason = Some(format!("no token count to trust: {note}"));
            return cell;
        }
        crate::measuring::measure::add_note(&mut cell.reason, note.clone());
    }
    cell.ttft_ms = ttft_d;
    cell.e2e_ms = distribution(&e2e);
    cell.tpot_ms = whole.tpot_ms;
    cell.itl_ms = if counted.per_chunk { whole.itl_ms } else { None };
    if !counted.per_chunk && whole.itl_ms.is_some() {
        cell.missing.push(MissingFigure {
            figure: "itl_ms".into(),
            reason: "no chunk's token count was reported, so the gaps cannot be divided over each chunk's tokens"
                .into(),
        });
    }
    let no_first_token = scheduled - ttft.len() as u64;
    if no_first_token > 0 {
        cell.missing.push(MissingFigure {
            figure: "ttft_ms".into(),
            reason: format!(
                "{no_first_token} of {scheduled} request(s) of the window had no first token when the drain ended ({:.0} s limit): the distribution is of the {} that had one, the fastest",
                obs.drain_limit_s,
                ttft.len()
            ),
        });
    }
    if unfinished > 0 {
        cell.missing.push(MissingFigure {
            figure: "e2e_ms".into(),
            reason: format!(
                "{unfinished} request(s) of the window had not finished when the drain ended ({:.0} s limit): their E2E latency is not in the distribution, which is of the requests that finished",
                obs.drain_limit_s
            ),
        });
    }
    cell.output_tokens = Some(f.output_tokens);
    cell.token_count_source = Some(counted.source);
    cell.total_tps = Some(round3(f.output_tokens as f64 / window_s));
    cell.server = server;
    let spec = crate::measuring::spec_decode::outcome(&obs.scrapes, w0, w1);
    cell.spec_decode = spec.figures;
    cell.missing.extend(spec.missing);
    if let Some((a, b)) = obs.client_cpu_s {
        cell.client_cpu_pct = Some(round3(100.0 * (b - a) / window_s.max(1e-3)));
    }
    let _ = obs.cores;
    if let Some(slo) = &obs.slo {
        cell.goodput_rps = Some(round3(speedmatrix_schema::rate::goodput_rps(&cell.requests, w0, w1, slo)));
        cell.meets_slo = Some(speedmatrix_schema::rate::meets(&cell, slo));
    }
    cell
}

/// Requests in flight — from their scheduled instant (a held-back request is in the system
/// from then) until they ended — over the window `(w0, w1]`: the time-weighted mean, the
/// most at once, and the count at the open and at the close.
fn in_flight(
    streams: &[CellStream],
    scheduled_at: &dyn Fn(&StreamRecord) -> f64,
    w0: f64,
    w1: f64,
) -> (f64, u64, u64, u64) {
    let spans: Vec<(f64, f64)> =
        streams.iter().map(|s| (scheduled_at(&s.record), s.record.ended_ms.unwrap_or(f64::INFINITY))).collect();
    let at = |t: f64| spans.iter().filter(|(a, b)| *a <= t && t < *b).count() as u64;
    let mut edges: Vec<(f64, i64)> = vec![];
    for &(a, b) in &spans {
        let (from, to) = (a.max(w0), b.min(w1));
        if to > from {
            edges.push((from, 1));
            edges.push((to, -1));
        }
    }
    edges.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
    let (mut level, mut max, mut area, mut prev) = (0i64, 0i64, 0.0, w0);
    for (t, d) in edges {
        area += level as f64 * (t - prev);
        prev = t;
        level += d;
        max = max.max(level);
    }
    (area / (w1 - w0).max(f64::MIN_POSITIVE), max.max(0) as u64, at(w0), at(w1))
}
