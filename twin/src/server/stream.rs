//! Writing an answer: the SSE stream (frames as the engine delivers tokens, with the faults
//! that strike mid-stream — drop, in-band error, stall, no `[DONE]` — and those that reshape
//! legal SSE — keep-alive comments, frames split across writes) and the full response of a
//! non-streamed request. Each frame's planned and written times go to the request's trace.

use super::chunks::Writer;
use super::engine_loop::Delivery;
use super::guard::Guard;
use super::{error, error_value, json_response, AppState, Endpoint};
use crate::faults::{FaultKind, Struck};
use crate::trace::ChunkRecord;
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// A non-streamed answer: wait for the last output, then write the whole body at once.
pub(super) async fn full_response(
    state: Arc<AppState>,
    mut guard: Guard,
    w: Writer,
    mut rx: mpsc::UnboundedReceiver<Delivery>,
) -> Response {
    let mut total = 0;
    let mut last_planned = 0.0;
    while let Some(d) = rx.recv().await {
        total += d.tokens;
        last_planned = d.planned_ms;
        if d.first {
            guard.record.cached_tokens = d.cached;
        }
        if d.finished {
            guard.finished = true;
            break;
        }
    }
    if !guard.finished {
        guard.record.status = 500;
        guard.record.outcome = "fault";
        return error(StatusCode::INTERNAL_SERVER_ERROR, "InternalServerError", "The engine stopped.", None);
    }
    guard.record.output_tokens = total;
    guard.record.finish_reason = Some(w.finish_reason);
    let v = w.full_body(total);
    guard.record.chunks.push(ChunkRecord {
        i: 0,
        planned_ms: last_planned,
        written_ms: state.clock.now_ms(),
        tokens: total,
        kind: "finish",
    });
    json_response(StatusCode::OK, &v)
}

/// One piece of bytes to write, and the chunk record it completes (if any).
struct Piece {
    bytes: Bytes,
    delay: Option<Duration>,
    record: Option<ChunkRecord>,
}

/// A stream between writes.
struct StreamState {
    state: Arc<AppState>,
    guard: Guard,
    w: Writer,
    rx: mpsc::UnboundedReceiver<Delivery>,
    struck: Struck,
    pending: VecDeque<Piece>,
    next_chunk: u32,
    /// Tokens after which the mid-stream fault strikes.
    fault_at: u32,
    fault_done: bool,
    /// A stall to put before the next frame.
    stall_next: Option<Duration>,
    ended: bool,
    /// End the body with an error after the pending pieces (drop fault / engine gone).
    abort_after: bool,
    rng: ChaCha8Rng,
}

/// A streamed answer: `text/event-stream`, one frame per delivery (see [`StreamState`]).
pub(super) fn stream_response(
    state: Arc<AppState>,
    guard: Guard,
    w: Writer,
    rx: mpsc::UnboundedReceiver<Delivery>,
    struck: Struck,
    output_len: u32,
) -> Response {
    let rng = ChaCha8Rng::seed_from_u64(state.cfg.seed ^ guard.record.request.rotate_left(7));
    let st = StreamState {
        state,
        guard,
        w,
        rx,
        struck,
        pending: VecDeque::new(),
        next_chunk: 0,
        fault_at: (output_len / 2).max(1),
        fault_done: false,
        stall_next: None,
        ended: false,
        abort_after: false,
        rng,
    };
    let body = futures_util::stream::unfold(st, StreamState::next_write);
    let mut r = Response::new(Body::from_stream(body));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream; charset=utf-8"));
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r.into_response()
}

impl StreamState {
    /// The next bytes of the body (after any delay they carry), an error that cuts the
    /// connection, or the end.
    async fn next_write(mut self) -> Option<(Result<Bytes, std::io::Error>, StreamState)> {
        loop {
            if let Some(p) = self.pending.pop_front() {
                if let Some(d) = p.delay {
                    tokio::time::sleep(d).await;
                }
                if let Some(mut rec) = p.record {
                    rec.written_ms = self.state.clock.now_ms();
                    self.guard.record.chunks.push(rec);
                }
                if p.bytes.is_empty() {
                    continue;
                }
                return Some((Ok(p.bytes), self));
            }
            if self.abort_after {
                self.abort_after = false;
                self.ended = true;
                return Some((Err(std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "stream dropped")), self));
            }
            if !self.produce().await {
                return None;
            }
        }
    }

    /// Queue one SSE frame (`data: …`), after the stall and keep-alive comment that precede it.
    fn frame(&mut self, data: String, planned_ms: f64, tokens: u32, kind: &'static str) {
        if let Some(stall) = self.stall_next.take() {
            self.pending.push_back(Piece { bytes: Bytes::new(), delay: Some(stall), record: None });
        }
        if self.struck.has(|k| *k == FaultKind::Keepalive) {
            let i = self.next_chunk;
            self.next_chunk += 1;
            self.pending.push_back(Piece {
                bytes: Bytes::from_static(b": keepalive\n\n"),
                delay: None,
                record: Some(ChunkRecord { i, planned_ms, written_ms: 0.0, tokens: 0, kind: "keepalive" }),
            });
        }
        let bytes = format!("data: {data}\n\n").into_bytes();
        let i = self.next_chunk;
        self.next_chunk += 1;
        let record = ChunkRecord { i, planned_ms, written_ms: 0.0, tokens, kind };
        if self.struck.has(|k| *k == FaultKind::Split) && bytes.len() > 2 {
            self.split_frame(Bytes::from(bytes), record);
        } else {
            self.pending.push_back(Piece { bytes: Bytes::from(bytes), delay: None, record: Some(record) });
        }
    }

    /// The `split` fault: the frame in 2–3 writes 1 ms apart, cut at random byte offsets; half
    /// the time one cut falls inside a multi-byte character when the frame has one.
    fn split_frame(&mut self, all: Bytes, record: ChunkRecord) {
        let pieces = self.rng.random_range(2..=3usize);
        let mut cuts: Vec<usize> = (1..pieces).map(|_| self.rng.random_range(1..all.len())).collect();
        let inside: Vec<usize> = (1..all.len()).filter(|&i| all[i] & 0xC0 == 0x80).collect();
        if !inside.is_empty() && self.rng.random_bool(0.5) {
            cuts[0] = inside[self.rng.random_range(0..inside.len())];
        }
        cuts.sort_unstable();
        cuts.dedup();
        let mut start = 0;
        for (j, &cut) in cuts.iter().chain(std::iter::once(&all.len())).enumerate() {
            let last = cut == all.len();
            self.pending.push_back(Piece {
                bytes: all.slice(start..cut),
                delay: (j > 0).then(|| Duration::from_millis(1)),
                record: last.then(|| record.clone()),
            });
            start = cut;
        }
    }

    /// Turn the next delivery into pieces; false when the stream has nothing more.
    async fn produce(&mut self) -> bool {
        if self.ended {
            return false;
        }
        let Some(d) = self.rx.recv().await else {
            // Engine gone (shutdown): truncate.
            self.cut();
            return true;
        };
        let t = d.planned_ms;
        if d.first {
            self.guard.record.cached_tokens = d.cached;
            if self.w.ep == Endpoint::Chat {
                let role = self.w.role_chunk();
                self.frame(role, t, 0, "role");
            }
        }
        // Mid-stream faults strike once `fault_at` tokens have been sent.
        if !self.fault_done && self.w.sent >= self.fault_at {
            self.fault_done = true;
            if self.mid_stream_fault(t) {
                return true;
            }
        }
        let frames = self.w.token_chunks(d.tokens, d.finished);
        for (v, tokens, kind) in frames {
            self.frame(v, t, tokens, kind);
        }
        self.guard.record.output_tokens = self.w.sent;
        if d.finished {
            self.finish(t);
        }
        true
    }

    /// End the body with a connection error after what is queued.
    fn cut(&mut self) {
        self.ended = true;
        self.abort_after = true;
        self.guard.record.outcome = "fault";
    }

    /// Apply the mid-stream fault that struck, at planned time `t`: a drop or an in-band error
    /// ends the stream (true); a stall holds the next frame back.
    fn mid_stream_fault(&mut self, t: f64) -> bool {
        if self.struck.has(|k| *k == FaultKind::Drop) {
            self.cut();
            return true;
        }
        if self.struck.has(|k| *k == FaultKind::InbandError) {
            let err = error_value(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalServerError",
                "Injected in-band error: the engine failed while generating.",
                None,
            );
            self.frame(err.to_string(), t, 0, "error");
            self.frame("[DONE]".into(), t, 0, "done");
            self.ended = true;
            self.guard.record.outcome = "fault";
            return true;
        }
        // Stall: the next frame waits (real time) before it is written.
        self.stall_next = self.struck.stall();
        false
    }

    /// The last delivery: the usage chunk when asked for, then `[DONE]` unless `no-done` struck.
    fn finish(&mut self, t: f64) {
        self.guard.finished = true;
        self.guard.record.finish_reason = Some(self.w.finish_reason);
        if self.w.include_usage {
            let u = self.w.usage_chunk();
            self.frame(u, t, 0, "usage");
        }
        if self.struck.has(|k| *k == FaultKind::NoDone) {
            self.guard.record.outcome = "fault";
        } else {
            self.frame("[DONE]".into(), t, 0, "done");
        }
        self.ended = true;
    }
}
