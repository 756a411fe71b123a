//! The fixed-timing emitter: an OpenAI-compatible server (vLLM's SSE shape) whose every stream
//! sends its first token `ttft` after the request's last byte arrived and one token every `itl`
//! after that, exactly. One OS thread per connection (from a pool started with the emitter), each
//! its own timer (`thread::sleep` to an
//! absolute deadline, timer slack 1 µs), so no runtime's timer granularity or task queue sits
//! between the schedule and the socket. In lock-step mode every stream's tokens fall on one
//! global grid of `itl` (an engine's decode step), so all streams' chunks leave in one burst.
//!
//! It counts every token chunk written, per 1 ms since it started, and keeps each request's
//! server-side TTFT (first token chunk written − request read), which the harness reads
//! in-process.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// One streamed request as the emitter saw it, ms since the Unix epoch.
#[derive(Clone, Copy, Debug)]
pub struct Served {
    /// The request was read.
    pub arrival_ms: f64,
    /// Its first token chunk was written.
    pub first_ms: f64,
}

impl Served {
    /// The emitter's own TTFT, ms.
    pub fn ttft_ms(&self) -> f64 {
        self.first_ms - self.arrival_ms
    }
}

/// When each stream's tokens leave.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub ttft: Duration,
    pub itl: Duration,
    /// Tokens on one global grid of `itl` (the first at the first grid point ≥ arrival + ttft).
    pub lockstep: bool,
}

/// What the emitter saw, shared with the harness.
pub struct Emitted {
    start: Instant,
    start_unix_us: u64,
    /// Token chunks written, per ms since `start` (one hour).
    per_ms: Vec<AtomicU32>,
    total: AtomicU64,
    ids: AtomicU64,
    /// Every streamed request's id number, arrival (µs since `start`) and server-side TTFT (µs).
    ttfts: Mutex<Vec<(u64, u64, u64)>>,
    timing: Mutex<Timing>,
}

impl Emitted {
    /// Token chunks written so far.
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Token chunks written between two wall-clock instants (µs since the Unix epoch).
    pub fn between_unix_us(&self, from: u64, to: u64) -> u64 {
        let ms = |t: u64| (t.saturating_sub(self.start_unix_us) / 1000) as usize;
        let (a, b) = (ms(from), ms(to).min(self.per_ms.len()));
        self.per_ms[a.min(b)..b].iter().map(|c| u64::from(c.load(Ordering::Relaxed))).sum()
    }

    /// Every streamed request that arrived since `since`, by id number: when it arrived and
    /// when its first token chunk was written (ms since the Unix epoch).
    pub fn served_since(&self, since: Instant) -> std::collections::HashMap<u64, Served> {
        let from = since.saturating_duration_since(self.start).as_micros() as u64;
        let unix_ms = |us: u64| (self.start_unix_us + us) as f64 / 1000.0;
        let all = self.ttfts.lock().unwrap();
        all.iter()
            .filter(|(_, arrival, _)| *arrival >= from)
            .map(|&(id, arrival, ttft)| {
                (id, Served { arrival_ms: unix_ms(arrival), first_ms: unix_ms(arrival + ttft) })
            })
            .collect()
    }

    /// Set the timing of the requests that arrive from now on.
    pub fn set_timing(&self, t: Timing) {
        *self.timing.lock().unwrap() = t;
    }

    fn count(&self, at: Instant) {
        let ms = at.saturating_duration_since(self.start).as_millis() as usize;
        if let Some(c) = self.per_ms.get(ms) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        self.total.fetch_add(1, Ordering::Relaxed);
    }
}

/// Start serving on `listener` (an accept thread and [`THREADS`] connection threads); returns
/// once they are started.
pub fn start(listener: TcpListener, timing: Timing) -> Arc<Emitted> {
    let unix_us = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as u64;
    let e = Arc::new(Emitted {
        start: Instant::now(),
        start_unix_us: unix_us,
        per_ms: (0..3_600_000).map(|_| AtomicU32::new(0)).collect(),
        total: AtomicU64::new(0),
        ids: AtomicU64::new(0),
        ttfts: Mutex::new(Vec::new()),
        timing: Mutex::new(timing),
    });
    // The connection threads exist before the first connection: spawning one per accept made
    // the accept loop slower than 8,192 connections opened at once, the listen queue overflowed
    // and the kernel reset a connection now and then.
    precise_timers();
    let (tx, rx) = std::sync::mpsc::channel::<TcpStream>();
    let rx = Arc::new(Mutex::new(rx));
    for _ in 0..THREADS {
        let (e, rx) = (e.clone(), rx.clone());
        let spawned = std::thread::Builder::new().stack_size(128 * 1024).spawn(move || loop {
            let next = rx.lock().unwrap().recv();
            match next {
                Ok(conn) => serve(conn, &e),
                Err(_) => return,
            }
        });
        spawned.expect("emitter: start a connection thread");
    }
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            if tx.send(conn).is_err() {
                return;
            }
        }
    });
    e
}

/// Connection threads: enough for the largest row (8,192 streams) and the collector's spare
/// connections; a connection beyond them waits for a thread to free.
const THREADS: usize = 8192 + 512;

/// Timer slack of 1 µs for this thread and the threads it starts (Linux's default is 50 µs).
fn precise_timers() {
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// One connection: requests one after another (HTTP/1.1 keep-alive) until the peer closes.
fn serve(conn: TcpStream, e: &Emitted) {
    let _ = conn.set_nodelay(true);
    let Ok(write_half) = conn.try_clone() else { return };
    let mut out = write_half;
    let mut input = BufReader::new(conn);
    while let Some((path, body)) = read_request(&mut input) {
        let arrived = Instant::now();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
        let ok = match path.as_str() {
            "/v1/models" => json(&mut out, &models()),
            "/tokenize" => json(&mut out, &serde_json::json!({"count": prompt_tokens(&v), "max_model_len": 4096})),
            "/v1/completions" | "/v1/chat/completions" if v["stream"].as_bool() == Some(true) => {
                stream(&mut out, e, &v, path.contains("chat"), arrived)
            }
            "/v1/completions" | "/v1/chat/completions" => json(&mut out, &whole(&v)),
            _ => respond(&mut out, "404 Not Found", "text/plain", b"not found"),
        };
        if !ok {
            return;
        }
    }
}

/// The next request's path and body, or None when the peer closed or sent something unreadable.
fn read_request(input: &mut BufReader<TcpStream>) -> Option<(String, Vec<u8>)> {
    let mut line = String::new();
    if input.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let path = line.split_whitespace().nth(1)?.split('?').next()?.to_string();
    let mut length = 0usize;
    loop {
        line.clear();
        if input.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let h = line.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((name, value)) = h.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().ok()?;
            }
        }
    }
    let mut body = vec![0; length];
    input.read_exact(&mut body).ok()?;
    Some((path, body))
}

fn models() -> serde_json::Value {
    serde_json::json!({"object": "list", "data": [{"id": "fixed", "object": "model", "owned_by": "bench", "max_model_len": 4096}]})
}

/// Prompt tokens, as this server counts them: one per whitespace-separated word.
fn prompt_tokens(v: &serde_json::Value) -> u64 {
    let words = |s: &str| s.split_whitespace().count() as u64;
    match (&v["prompt"], &v["messages"]) {
        (serde_json::Value::String(p), _) => words(p),
        (serde_json::Value::Array(ids), _) => ids.len() as u64,
        (_, serde_json::Value::Array(m)) => m.iter().filter_map(|x| x["content"].as_str()).map(words).sum(),
        _ => 0,
    }
}

/// A non-streamed completion (prompt probes): `max_tokens` tokens at once, with usage.
fn whole(v: &serde_json::Value) -> serde_json::Value {
    let (p, n) = (prompt_tokens(v), v["max_tokens"].as_u64().unwrap_or(16));
    let text = " w".repeat(n as usize);
    serde_json::json!({"id": "cmpl-whole", "object": "text_completion", "model": "fixed",
        "choices": [{"index": 0, "text": text, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": p, "completion_tokens": n, "total_tokens": p + n}})
}

fn json(out: &mut TcpStream, v: &serde_json::Value) -> bool {
    respond(out, "200 OK", "application/json", v.to_string().as_bytes())
}

fn respond(out: &mut TcpStream, status: &str, kind: &str, body: &[u8]) -> bool {
    let head = format!("HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\n\r\n", body.len());
    out.write_all(head.as_bytes()).and_then(|_| out.write_all(body)).is_ok()
}

/// One streamed request: `max_tokens` token chunks on the schedule, vLLM's shape (usage on every
/// chunk when `continuous_usage_stats` is asked, a usage chunk when `include_usage` is), then
/// `[DONE]`; HTTP/1.1 chunked, so the connection carries the next request.
fn stream(out: &mut TcpStream, e: &Emitted, v: &serde_json::Value, chat: bool, arrived: Instant) -> bool {
    let timing = *e.timing.lock().unwrap();
    let arrival_us = arrived.saturating_duration_since(e.start).as_micros() as u64;
    let number = e.ids.fetch_add(1, Ordering::Relaxed);
    let id = format!("cmpl-{number}");
    let (prompt, n) = (prompt_tokens(v), v["max_tokens"].as_u64().unwrap_or(16).max(1));
    let so = &v["stream_options"];
    let (each, last) =
        (so["continuous_usage_stats"].as_bool() == Some(true), so["include_usage"].as_bool() == Some(true));
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n";
    if out.write_all(head.as_bytes()).is_err() {
        return false;
    }
    let first = first_token_at(e, timing, arrived);
    let (object, model) = (if chat { "chat.completion.chunk" } else { "text_completion" }, "fixed");
    for k in 0..n {
        let due = first + timing.itl * k as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let finish = if k + 1 == n { "\"length\"" } else { "null" };
        let choice = if chat {
            format!("{{\"index\":0,\"delta\":{{\"content\":\" w\"}},\"logprobs\":null,\"finish_reason\":{finish}}}")
        } else {
            format!("{{\"index\":0,\"text\":\" w\",\"logprobs\":null,\"finish_reason\":{finish},\"stop_reason\":null}}")
        };
        let usage = if each { format!(",\"usage\":{}", usage(prompt, k + 1)) } else { String::new() };
        let event = format!("data: {{\"id\":\"{id}\",\"object\":\"{object}\",\"created\":0,\"model\":\"{model}\",\"choices\":[{choice}]{usage}}}\n\n");
        if !chunk(out, event.as_bytes()) {
            return false;
        }
        let written = Instant::now();
        e.count(written);
        if k == 0 {
            let ttft = written.saturating_duration_since(arrived).as_micros() as u64;
            e.ttfts.lock().unwrap().push((number, arrival_us, ttft));
        }
    }
    let mut tail = String::new();
    if last {
        tail += &format!("data: {{\"id\":\"{id}\",\"object\":\"{object}\",\"created\":0,\"model\":\"{model}\",\"choices\":[],\"usage\":{}}}\n\n", usage(prompt, n));
    }
    tail += "data: [DONE]\n\n";
    let end = format!("{:x}\r\n{tail}\r\n0\r\n\r\n", tail.len());
    out.write_all(end.as_bytes()).is_ok()
}

/// The first token's instant: `ttft` after arrival, or in lock-step the first grid point after it.
fn first_token_at(e: &Emitted, t: Timing, arrived: Instant) -> Instant {
    let due = arrived + t.ttft;
    if !t.lockstep {
        return due;
    }
    let itl = t.itl.as_micros().max(1) as u64;
    let since = due.saturating_duration_since(e.start).as_micros() as u64;
    e.start + Duration::from_micros(since.div_ceil(itl) * itl)
}

fn usage(prompt: u64, completion: u64) -> String {
    format!(
        "{{\"prompt_tokens\":{prompt},\"total_tokens\":{},\"completion_tokens\":{completion}}}",
        prompt + completion
    )
}

fn chunk(out: &mut TcpStream, data: &[u8]) -> bool {
    let mut frame = Vec::with_capacity(data.len() + 12);
    frame.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
    frame.extend_from_slice(data);
    frame.extend_from_slice(b"\r\n");
    out.write_all(&frame).is_ok()
}
